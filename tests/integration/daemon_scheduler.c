/* SPDX-License-Identifier: MIT */
/*
 * daemon_scheduler.c — fiberd's jobs on the runtime's multi-group Scheduler: the
 * [scheduler] keys lay out the job groups that `stats` reports ("jobs-0", "jobs-1", ...,
 * plus a "layout" entry) and that sd_notify's STATUS= counts; jobs submitted from the
 * server group are spread over the job groups and complete there; a bad value or a
 * layout no group size fits exits with EX_CONFIG (78), naming the file and line when
 * one key is at fault.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_scheduler, .fini = teardown, .timeout = 60);

#define JOBS 20

/* Two job groups of one worker each: stats shows both, and 20 jobs complete on them. */
Test(daemon_scheduler, two_groups_run_jobs)
{
        FiberdOpts o = {.config = "[scheduler]\ngroups = 2\ngroup_size = 1\n", .notify = true};
        const msgpack_object *groups, *layout, *numa;
        uint32_t waits[JOBS];
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "2 job workers in 2 groups", 10000),
                  "STATUS= does not count the job workers over both groups");
        c = fiberd_connect(&fd_);
        for (int i = 0; i < JOBS; i++) {
                uint64_t id;

                if (i % 2)
                        id = rpc_submit(c, "skynet", (Arg[]){ARG_I("size", 1000), ARG_I("div", 10)},
                                        2, 0, 0, &st);
                else
                        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1 + i)}, 1, 0, 0, &st);
                cr_assert_neq(id, 0, "submit %d: %s", i, st.message);
                msgpack_packer *pk = client_request(c, "job.wait", 2, &waits[i]);
                msgpack_pack_uint64(pk, id);
                msgpack_pack_uint64(pk, 30000);
        }
        cr_assert_eq(client_flush(c, 10000, &st), 0);
        for (int i = 0; i < JOBS; i++) {
                rpc_wait_reply(c, waits[i], &rp);
                cr_assert_eq(rp.r, 0, "job.wait %d: %s", i, rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %d: %s", i,
                                 map_str(map_get(rp.result, "error"), "message"));
                if (i % 2)
                        cr_assert_eq(map_uint(map_get(rp.result, "result"), "sum"),
                                     1000ULL * 999 / 2);
                reply_clear(&rp);
        }

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_uint(map_get(rp.result, "jobs"), "done"), JOBS);
        layout = map_get(rp.result, "layout");
        cr_assert(layout, "no layout in stats");
        cr_assert_eq(map_uint(layout, "groups"), 2);
        cr_assert_eq(map_uint(layout, "group_size"), 1);
        numa = map_get(layout, "numa");
        cr_assert(numa && numa->type == MSGPACK_OBJECT_BOOLEAN, "layout.numa is not a bool");
        cr_assert_str_eq(map_str(layout, "queue_policy"), "local");
        groups = map_get(rp.result, "groups");
        cr_assert(groups && groups->type == MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(groups->via.array.size, 3, "server + 2 job groups");
        cr_assert_str_eq(map_str(&groups->via.array.ptr[0], "name"), "server");
        for (uint32_t i = 1; i < 3; i++) {
                const msgpack_object *g = &groups->via.array.ptr[i];
                const msgpack_object *node = map_get(g, "node");
                char want[16];

                snprintf(want, sizeof(want), "jobs-%u", i - 1);
                cr_assert_str_eq(map_str(g, "name"), want);
                cr_assert_eq(map_uint(g, "workers"), 1);
                /* the supervisors run on the server group: the runtime spreads the
                 * job fibers they start over the job groups (round robin) */
                cr_assert(map_uint(g, "fibers_created") >= 1, "%s ran no fiber", want);
                cr_assert(node && (node->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                                   node->type == MSGPACK_OBJECT_NEGATIVE_INTEGER));
                cr_assert_neq(map_str(g, "cpus")[0], '\0', "%s: no cpus", want);
                cr_assert_neq(map_uint(g, "steals_in"), UINT64_MAX);
                cr_assert_neq(map_uint(g, "steals_out"), UINT64_MAX);
                cr_assert_neq(map_uint(g, "local_dequeues"), UINT64_MAX);
                cr_assert_neq(map_uint(g, "shared_dequeues"), UINT64_MAX);
        }
        reply_clear(&rp);
        client_free(c);
        cr_assert(fiberd_log_contains(&fd_, "job group 1:"), "the layout is not logged per group");
}

/* --workers is the concurrency the layout splits: 3 workers in groups of 2 = 2 groups;
 * the per-worker local queues are reported as the policy. */
Test(daemon_scheduler, workers_flag_and_group_size)
{
        FiberdOpts o = {.config = "[scheduler]\ngroup_size = 2\nqueue_policy = local\n"
                                  "optimize_for = io-heavy\npin_workers = no\n"
                                  "steal_every_n = 0\n",
                        .workers = 3};
        const msgpack_object *layout;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        layout = map_get(rp.result, "layout");
        cr_assert_eq(map_uint(layout, "groups"), 2);
        cr_assert_eq(map_uint(layout, "group_size"), 2);
        cr_assert_str_eq(map_str(layout, "queue_policy"), "local");
        cr_assert_eq(map_get(rp.result, "groups")->via.array.size, 3);
        reply_clear(&rp);
        client_free(c);
}

/* Runs fiberd on @config (written to a bad.conf) and returns its exit status; its output
 * (the log) goes to @out. */
static int run_with_config(const char *config, char *out, size_t size)
{
        char dir[] = "/tmp/fiberd-sconf-XXXXXX", conf[64], cmd[512];
        size_t n;
        FILE *f;
        int status;

        cr_assert(mkdtemp(dir));
        snprintf(conf, sizeof(conf), "%s/bad.conf", dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs(config, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "%s --config %s --socket %s/s --plugin-dir %s 2>&1", FIBERD_BIN,
                 conf, dir, FIBERD_PLUGIN_BUILD_DIR);
        f = popen(cmd, "r");
        cr_assert(f);
        n = fread(out, 1, size - 1, f);
        out[n] = '\0';
        status = pclose(f);
        unlink(conf);
        rmdir(dir);
        return status;
}

Test(daemon_scheduler, bad_numa_exits_78)
{
        char out[2048];
        int status = run_with_config("[scheduler]\n"
                                     "groups = 2\n"
                                     "numa = sideways\n",
                                     out, sizeof(out));

        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 78, "status 0x%x: %s", status, out);
        cr_assert(strstr(out, "bad.conf:3") && strstr(out, "numa") && strstr(out, "sideways"), "%s",
                  out);
        cr_assert(strstr(out, "auto, on or off"), "the message names the accepted values: %s", out);
}

/* Keys that are fine one by one but leave no layout (a group of 100 workers). */
Test(daemon_scheduler, no_layout_exits_78)
{
        char out[2048];
        int status = run_with_config("[fiberd]\nworkers = 100\n[scheduler]\ngroups = 1\n", out,
                                     sizeof(out));

        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 78, "status 0x%x: %s", status, out);
        cr_assert(strstr(out, "no scheduling group layout"), "%s", out);
}
