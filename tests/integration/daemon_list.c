/* SPDX-License-Identifier: MIT */
/*
 * daemon_list.c — job.list in pages (PROTOCOL.md, "job.list"): with more jobs than one
 * answer can hold (6,500 echo jobs, retention raised to keep them all), the pages walk
 * every job exactly once, newest first, each under IPC_LIST_PAGE_MAX records and under
 * the message cap (results of 3 KiB make the byte cap, not the count, end the pages);
 * an unpaged job.list is refused with MESSAGE_TOO_LARGE instead of sent; `fiberctl list`
 * streams all the pages (table and --json), and --limit stops early.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

#define NJOBS 6500

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_list, .fini = teardown, .timeout = 240);

/* Submits @n echo jobs (arg "pad": @pad bytes of 'x'), pipelined, and waits until every
 * one has finished (job.wait on each, also pipelined). */
static void submit_echo_jobs(Client *c, unsigned n, size_t pad)
{
        char *s = malloc(pad + 1);
        uint32_t *ids = calloc(n, sizeof(*ids));
        uint64_t *jobs = calloc(n, sizeof(*jobs));
        IpcStatus st;

        cr_assert(s && ids && jobs);
        memset(s, 'x', pad);
        s[pad] = '\0';
        for (unsigned i = 0; i < n; i += 500) {
                unsigned end = i + 500 < n ? i + 500 : n;
                for (unsigned k = i; k < end; k++)
                        ids[k] = rpc_submit_send(c, "echo", (Arg[]){ARG_S("pad", s)}, 1, 0, 0);
                cr_assert_eq(client_flush(c, 30000, &st), 0, "%s", st.message);
                for (unsigned k = i; k < end; k++) {
                        Reply rp;
                        rpc_wait_reply(c, ids[k], &rp);
                        cr_assert_eq(rp.r, 0, "job.submit %u: %s", k, rp.st.message);
                        jobs[k] = map_uint(rp.result, "id");
                        reply_clear(&rp);
                }
        }
        for (unsigned k = 0; k < n; k++) {
                Reply rp;
                rpc_job_wait(c, jobs[k], 60000, &rp);
                cr_assert_eq(rp.r, 0);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                reply_clear(&rp);
        }
        free(jobs);
        free(ids);
        free(s);
}

/* job.list [filter] with @cursor (0: nil, the first page) or, @unpaged, no cursor key. */
static void list_call(Client *c, bool unpaged, uint64_t cursor, Reply *rp)
{
        uint32_t id;
        msgpack_packer *pk = client_request(c, "job.list", 1, &id);

        cr_assert(pk);
        msgpack_pack_map(pk, unpaged ? 0 : 1);
        if (!unpaged) {
                if (cursor)
                        ipc_pack_kv_uint(pk, "cursor", cursor);
                else
                        ipc_pack_kv_nil(pk, "cursor");
        }
        rpc_wait_reply(c, id, rp);
}

/* Walks every page; checks order, page bounds and the cursor chain; returns the count
 * and the number of pages. */
static unsigned walk_pages(Client *c, unsigned *ret_pages, size_t *ret_biggest)
{
        uint64_t cursor = 0, prev_id = UINT64_MAX;
        unsigned total = 0, pages = 0;
        size_t biggest = 0;

        for (;;) {
                const msgpack_object *jobs, *next;
                Reply rp;

                list_call(c, false, cursor, &rp);
                cr_assert_eq(rp.r, 0, "page %u: %s", pages, rp.st.message);
                cr_assert_eq(rp.result->type, MSGPACK_OBJECT_MAP);
                jobs = map_get(rp.result, "jobs");
                next = map_get(rp.result, "next_cursor");
                cr_assert(jobs && jobs->type == MSGPACK_OBJECT_ARRAY);
                cr_assert(next, "no next_cursor key");
                cr_assert_leq(jobs->via.array.size, 1000);
                cr_assert_gt(jobs->via.array.size, 0, "an empty page");
                for (uint32_t i = 0; i < jobs->via.array.size; i++) {
                        uint64_t id = map_uint(&jobs->via.array.ptr[i], "id");
                        cr_assert_lt(id, prev_id, "not newest first: %lu after %lu",
                                     (unsigned long)id, (unsigned long)prev_id);
                        prev_id = id;
                }
                total += jobs->via.array.size;
                pages++;
                if (jobs->via.array.size > biggest)
                        biggest = jobs->via.array.size;
                if (next->type == MSGPACK_OBJECT_NIL) {
                        reply_clear(&rp);
                        break;
                }
                cr_assert_eq(next->type, MSGPACK_OBJECT_POSITIVE_INTEGER);
                cr_assert_eq(next->via.u64, prev_id, "next_cursor is not the page's last id");
                cursor = next->via.u64;
                reply_clear(&rp);
        }
        cr_assert_eq(prev_id, 1, "the last page does not end at job 1");
        *ret_pages = pages;
        *ret_biggest = biggest;
        return total;
}

/* Runs @cmd through sh; counts its stdout lines and keeps the first two; exit status. */
static int run_lines(const char *cmd, unsigned *ret_lines, char *first, char *second, size_t size)
{
        char line[4096];
        unsigned n = 0;
        FILE *p = popen(cmd, "r");
        int status;

        cr_assert(p);
        while (fgets(line, sizeof(line), p)) {
                if (n == 0 && first)
                        snprintf(first, size, "%.200s", line);
                if (n == 1 && second)
                        snprintf(second, size, "%.200s", line);
                n++;
        }
        status = pclose(p);
        *ret_lines = n;
        cr_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

Test(daemon_list, more_jobs_than_one_answer_holds)
{
        FiberdOpts o = {.config = "[jobs]\nretention_max = 20000\n", .plugins = "echo"};
        char cmd[512], first[256], second[256];
        unsigned pages, lines;
        size_t biggest;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        submit_echo_jobs(c, NJOBS, 100);
        cr_assert_eq(walk_pages(c, &pages, &biggest), NJOBS);
        cr_assert_geq(pages, 7, "%u pages for %u jobs", pages, NJOBS);
        cr_assert_eq(biggest, 1000);

        /* unpaged, the answer would pass the cap: refused with the way out named */
        list_call(c, true, 0, &rp);
        cr_assert_neq(rp.r, 0, "an unpaged job.list of %u jobs was answered", NJOBS);
        cr_assert_str_eq(rp.st.code, "MESSAGE_TOO_LARGE");
        cr_assert(strstr(rp.st.message, "cursor"), "%s", rp.st.message);
        reply_clear(&rp);
        /* ... and the connection is still good */
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        client_free(c);

        /* fiberctl list streams every page: a header and one row per job, newest first */
        snprintf(cmd, sizeof(cmd), "FIBERD_SOCKET=%s %s list", fd_.sock, FIBERCTL_BIN);
        cr_assert_eq(run_lines(cmd, &lines, first, second, sizeof(first)), 0);
        cr_assert_eq(lines, NJOBS + 1);
        cr_assert(strstr(first, "ID"), "%s", first);
        cr_assert_eq(strtoul(second, NULL, 10), NJOBS, "the first row is not the newest: %s",
                     second);
        snprintf(cmd, sizeof(cmd), "FIBERD_SOCKET=%s %s --json list | grep -o '\"id\":' | wc -l",
                 fd_.sock, FIBERCTL_BIN);
        cr_assert_eq(run_lines(cmd, &lines, first, NULL, sizeof(first)), 0);
        cr_assert_eq(strtoul(first, NULL, 10), NJOBS, "--json list: %s", first);
        snprintf(cmd, sizeof(cmd), "FIBERD_SOCKET=%s %s list --limit 1500", fd_.sock, FIBERCTL_BIN);
        cr_assert_eq(run_lines(cmd, &lines, first, second, sizeof(first)), 0);
        cr_assert_eq(lines, 1500 + 1);
        cr_assert_eq(strtoul(second, NULL, 10), NJOBS);
}

Test(daemon_list, big_records_end_a_page_before_the_cap)
{
        FiberdOpts o = {.plugins = "echo"};
        unsigned pages;
        size_t biggest;
        Client *c;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        /* 1,200 records of about 3 KiB: 3.6 MiB, over the 1 MiB cap in 1,000 records */
        submit_echo_jobs(c, 1200, 3072);
        cr_assert_eq(walk_pages(c, &pages, &biggest), 1200);
        cr_assert_geq(pages, 4, "%u pages of 3 KiB records", pages);
        cr_assert_lt(biggest, 1000);
        client_free(c);
}
