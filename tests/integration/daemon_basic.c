/* SPDX-License-Identifier: MIT */
/*
 * daemon_basic.c — fiberd end to end, the happy paths: ping, plugins.list, sha256 checked
 * against libcrypto's digest of the same file, skynet's sum, job.status / job.result /
 * job.list, priority order under a one-job bound, stats, and a SIGHUP reload.
 */
#include "tests/integration/fiberd_harness.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"

#include <criterion/criterion.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_basic, .fini = teardown, .timeout = 60);

Test(daemon_basic, ping)
{
        Client *c;
        Reply rp;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        rpc_simple(c, IPC_METHOD_PING, 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "ping: %s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, IPC_KEY_PID), (uint64_t)fd_.pid);
        cr_assert_neq(map_uint(rp.result, "uptime_ms"), UINT64_MAX);
        /* the one release and the protocol version (ipc/protocol.h) */
        cr_assert_str_eq(map_str(rp.result, IPC_KEY_VERSION), FIBERD_VERSION);
        cr_assert_eq(map_uint(rp.result, IPC_KEY_PROTOCOL), (uint64_t)FIBERD_PROTOCOL_VERSION);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_basic, plugins_list)
{
        static const char *const want[] = {"echo", "sha256", "skynet", "sleep", "spin"};
        const msgpack_object *list;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        list = map_get(rp.result, "plugins");
        cr_assert(list && list->type == MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(list->via.array.size, ELEMENTSOF(want));
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                cr_assert_str_eq(map_str(&list->via.array.ptr[i], "name"), want[i]);
        list = map_get(rp.result, "refused");
        cr_assert(list && list->type == MSGPACK_OBJECT_ARRAY && list->via.array.size == 0);
        reply_clear(&rp);
        client_free(c);
}

/* Writes @len pseudo-random bytes to @path; returns libcrypto's SHA-256 in hex. */
static void make_file(const char *path, size_t len, char hex[65])
{
        unsigned char md[32];
        unsigned int mdlen;
        unsigned char *buf = malloc(len);
        FILE *f = fopen(path, "w");
        unsigned x = 12345;

        cr_assert(buf && f);
        for (size_t i = 0; i < len; i++) {
                x = x * 1103515245 + 12345;
                buf[i] = (unsigned char)(x >> 16);
        }
        cr_assert_eq(fwrite(buf, 1, len, f), len);
        fclose(f);
        cr_assert(EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL));
        for (unsigned i = 0; i < 32; i++)
                sprintf(hex + 2 * i, "%02x", md[i]);
        free(buf);
}

Test(daemon_basic, sha256_matches_libcrypto)
{
        static const size_t sizes[] = {0, 1, 65536, 65537, 1000003};
        char path[256], hex[65];
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
                const msgpack_object *res;
                uint64_t id;

                snprintf(path, sizeof(path), "%s/data-%zu", fd_.dir, k);
                make_file(path, sizes[k], hex);
                id = rpc_submit(c, "sha256", (Arg[]){ARG_S("path", path)}, 1, 0, 0, &st);
                cr_assert_neq(id, 0, "submit: %s", st.message);
                rpc_job_wait(c, id, -1, &rp);
                cr_assert_eq(rp.r, 0);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %lu: %s",
                                 (unsigned long)id,
                                 map_str(map_get(rp.result, "error"), "message"));
                res = map_get(rp.result, "result");
                cr_assert_str_eq(map_str(res, "sha256"), hex, "size %zu", sizes[k]);
                cr_assert_eq(map_uint(res, "bytes"), sizes[k]);
                cr_assert_str_eq(map_str(res, "path"), path);
                reply_clear(&rp);

                /* job.result gives the plugin's value itself */
                rpc_simple(c, "job.result", 1, &id, &rp);
                cr_assert_eq(rp.r, 0);
                cr_assert_str_eq(map_str(rp.result, "sha256"), hex);
                reply_clear(&rp);
        }
        client_free(c);
}

Test(daemon_basic, skynet_sum)
{
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "skynet", (Arg[]){ARG_I("size", 10000), ARG_I("div", 10)}, 2, 0, 0, &st);
        cr_assert_neq(id, 0, "submit: %s", st.message);
        rpc_job_wait(c, id, -1, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "%s",
                         map_str(map_get(rp.result, "error"), "message"));
        cr_assert_eq(map_uint(map_get(rp.result, "result"), "sum"), 10000ULL * 9999 / 2);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_basic, status_list_and_records)
{
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id, params[2];
        const msgpack_object *rec;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 7, 0, &st);
        cr_assert_neq(id, 0, "submit: %s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        rec = rp.result;
        cr_assert_str_eq(map_str(rec, "state"), "done");
        cr_assert_str_eq(map_str(rec, "plugin"), "sleep");
        cr_assert_eq(map_uint(rec, "id"), id);
        cr_assert_eq(map_uint(rec, "owner"), (uint64_t)getuid());
        cr_assert_neq(map_uint(rec, "created_ms"), UINT64_MAX);
        cr_assert_neq(map_uint(rec, "started_ms"), UINT64_MAX);
        cr_assert_neq(map_uint(rec, "finished_ms"), UINT64_MAX);
        cr_assert(map_uint(rec, "finished_ms") >= map_uint(rec, "started_ms"));
        reply_clear(&rp);

        params[0] = id;
        rpc_simple(c, "job.status", 1, params, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);

        rpc_simple(c, "job.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(rp.result->type, MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(rp.result->via.array.size, 1);
        cr_assert_eq(map_uint(&rp.result->via.array.ptr[0], "id"), id);
        reply_clear(&rp);

        params[0] = 999999;
        rpc_simple(c, "job.status", 1, params, &rp);
        cr_assert_str_eq(rp.st.code, IPC_NOT_FOUND);
        reply_clear(&rp);
        client_free(c);
}

/* With one job at a time, queued jobs start by priority (lower first), then by id. */
Test(daemon_basic, priority_order)
{
        static const int prio[] = {5, -3, 0, 5, -3, 2};
        static const int order[] = {1, 4, 2, 5, 0, 3}; /* indexes into prio, by start */
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n"};
        uint64_t blocker, ids[6], started[6];
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        blocker = rpc_submit_long(c, "sleep");
        for (int i = 0; i < 6; i++) {
                ids[i] = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, prio[i], 0, &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        /* all six wait behind the blocker; cancelling it lets them run, one at a time */
        rpc_simple(c, "job.status", 1, &ids[5], &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "queued");
        reply_clear(&rp);
        rpc_simple(c, "job.cancel", 1, &blocker, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        for (int i = 0; i < 6; i++) {
                rpc_job_wait(c, ids[i], -1, &rp);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                started[i] = map_uint(rp.result, "started_ms");
                reply_clear(&rp);
        }
        /* start times are ms stamps: ties are possible, inversions are not */
        for (int k = 1; k < 6; k++)
                cr_assert(started[order[k - 1]] <= started[order[k]],
                          "job with priority %d started after one with priority %d",
                          prio[order[k - 1]], prio[order[k]]);
        client_free(c);
}

Test(daemon_basic, stats)
{
        const msgpack_object *jobs, *groups, *plugins;
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id, ngroups, created = 0;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);
        rpc_job_wait(c, id, -1, &rp);
        reply_clear(&rp);
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_neq(map_uint(rp.result, "uptime_ms"), UINT64_MAX);
        jobs = map_get(rp.result, "jobs");
        cr_assert_eq(map_uint(jobs, "submitted"), 1);
        cr_assert_eq(map_uint(jobs, "done"), 1);
        cr_assert_eq(map_uint(jobs, "running"), 0);
        cr_assert_eq(map_uint(jobs, "queued"), 0);
        plugins = map_get(rp.result, "plugins");
        cr_assert_eq(map_uint(map_get(plugins, "sleep"), "done"), 1);
        /* the server group, then one per job group of the layout */
        groups = map_get(rp.result, "groups");
        ngroups = map_uint(map_get(rp.result, "layout"), "groups");
        cr_assert(ngroups >= 1 && ngroups != UINT64_MAX);
        cr_assert(groups && groups->type == MSGPACK_OBJECT_ARRAY &&
                  groups->via.array.size == 1 + ngroups);
        cr_assert_str_eq(map_str(&groups->via.array.ptr[0], "name"), "server");
        cr_assert_str_eq(map_str(&groups->via.array.ptr[1], "name"), "jobs-0");
        for (uint32_t i = 0; i < 1 + ngroups; i++) {
                const msgpack_object *g = &groups->via.array.ptr[i];
                cr_assert(map_uint(g, "workers") >= 1);
                cr_assert_neq(map_uint(g, "fibers_created"), UINT64_MAX);
                cr_assert_neq(map_uint(g, "ready_to_run_p99_ns"), UINT64_MAX);
                cr_assert_neq(map_uint(g, "steals_in"), UINT64_MAX);
                if (i > 0)
                        created += map_uint(g, "fibers_created");
        }
        cr_assert(map_uint(&groups->via.array.ptr[0], "fibers_created") >= 1);
        /* the job fiber, somewhere among the job groups (its supervisor runs on the
         * server group) */
        cr_assert(created >= 1, "job groups created %lu fibers", (unsigned long)created);
        reply_clear(&rp);
        client_free(c);
}

/* SIGHUP applies a changed config: max_running 1 -> 3 lets two queued jobs start. */
Test(daemon_basic, sighup_applies_new_limits)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n", .notify = true};
        char conf[256];
        IpcStatus st;
        Client *c;
        FILE *f;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 3; i++)
                cr_assert_neq(rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st),
                              0);
        cr_assert(rpc_running_becomes(c, 1));
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[jobs]\nmax_running = 3\n", f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "RELOADING=1", 10000));
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        cr_assert(rpc_running_becomes(c, 3), "the new max_running was not applied");
        client_free(c);
}

Test(daemon_basic, sighup_reloads)
{
        FiberdOpts o = {.notify = true};
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "RELOADING=1", 10000));
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        c = fiberd_connect(&fd_);
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        client_free(c);
}

/* Finished jobs beyond retention_max are dropped by the once-a-second sweep. */
Test(daemon_basic, retention_cap)
{
        FiberdOpts o = {.config = "[jobs]\nretention_max = 2\n"};
        IpcStatus st;
        uint64_t ids[4];
        Client *c;
        Reply rp;
        bool gone = false;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 4; i++) {
                ids[i] = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);
                rpc_job_wait(c, ids[i], -1, &rp);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                reply_clear(&rp);
        }
        for (int tries = 0; tries < 1000 && !gone; tries++) {
                rpc_simple(c, "job.status", 1, &ids[1], &rp);
                gone = rp.st.code && strcmp(rp.st.code, IPC_NOT_FOUND) == 0;
                reply_clear(&rp);
                if (!gone)
                        usleep(10000);
        }
        cr_assert(gone, "job %lu outlived retention_max = 2", (unsigned long)ids[1]);
        rpc_simple(c, "job.status", 1, &ids[0], &rp);
        cr_assert_str_eq(rp.st.code, IPC_NOT_FOUND);
        cr_assert(strstr(rp.st.message, "kept"), "%s", rp.st.message);
        reply_clear(&rp);
        for (int i = 2; i < 4; i++) {
                rpc_simple(c, "job.status", 1, &ids[i], &rp);
                cr_assert_eq(rp.r, 0, "the newest two stay: %s", rp.st.message);
                reply_clear(&rp);
        }
        client_free(c);
}

/* Another uid neither sees nor cancels a job (needs root to switch uid). */
Test(daemon_basic, other_users_jobs_are_private)
{
        Client *c;
        uint64_t id;
        pid_t pid;
        int status;

        if (geteuid() != 0)
                cr_skip_test("needs root to act as another uid");
        fiberd_start(&fd_, NULL);
        cr_assert(chmod(fd_.dir, 0755) == 0);
        c = fiberd_connect(&fd_);
        id = rpc_submit_long(c, "sleep");
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                /* the child reports through its exit status: 0 = all as expected */
                IpcStatus cst = {0};
                Client *o;
                Reply rp;
                msgpack_packer *pk;
                uint32_t msgid;
                int bad = 0;

                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                if (client_connect(&o, fd_.sock, &cst) < 0)
                        _exit(11);
                pk = client_request(o, "job.status", 1, &msgid);
                msgpack_pack_uint64(pk, id);
                if (client_call_wait(o, msgid, &rp.msg, 10000, &cst) != 1)
                        _exit(12);
                bad |= client_result(&rp.msg, &rp.result, &rp.st) == 0 ||
                       strcmp(rp.st.code, IPC_NOT_FOUND) != 0;
                ipc_message_clear(&rp.msg);
                pk = client_request(o, "job.cancel", 1, &msgid);
                msgpack_pack_uint64(pk, id);
                if (client_call_wait(o, msgid, &rp.msg, 10000, &cst) != 1)
                        _exit(13);
                bad |= (client_result(&rp.msg, &rp.result, &rp.st) == 0 ||
                        strcmp(rp.st.code, IPC_NOT_FOUND) != 0)
                       << 1;
                ipc_message_clear(&rp.msg);
                pk = client_request(o, "job.list", 0, &msgid);
                if (client_call_wait(o, msgid, &rp.msg, 10000, &cst) != 1)
                        _exit(14);
                bad |= (client_result(&rp.msg, &rp.result, &rp.st) != 0 ||
                        rp.result->type != MSGPACK_OBJECT_ARRAY || rp.result->via.array.size != 0)
                       << 2;
                ipc_message_clear(&rp.msg);
                client_free(o);
                _exit(bad);
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "as uid 65534: status 0x%x (bits: 1 status, 2 cancel, 4 list)", status);
        client_free(c);
}

/* A job.wait that blocks does not hold up later requests on the same connection:
 * the ping sent after it is answered first (responses come out of order). */
Test(daemon_basic, long_wait_does_not_block_connection)
{
        uint32_t wait_id, ping_id;
        msgpack_packer *pk;
        IpcStatus st = {0};
        IpcMessage m;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit_long(c, "sleep");
        pk = client_request(c, "job.wait", 2, &wait_id);
        msgpack_pack_uint64(pk, id);
        msgpack_pack_nil(pk);
        pk = client_request(c, "ping", 0, &ping_id);
        cr_assert_eq(client_receive(c, &m, 10000, &st), 1, "%s", st.message);
        cr_assert_eq(m.msgid, ping_id, "the ping waited behind job.wait");
        ipc_message_clear(&m);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        reply_clear(&rp);
        rpc_wait_reply(c, wait_id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        reply_clear(&rp);
        client_free(c);
}
