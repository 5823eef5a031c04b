/* SPDX-License-Identifier: MIT */
/*
 * daemon_cpu.c — CPU control end to end, against a real fiberd and the test plugins
 * stall_spin (runs 300 ms without yielding) and block_sleep (blocks its worker thread in
 * clock_nanosleep):
 *  - a stall is reported once, naming the job and plugin, with stall_spin_busy in the
 *    backtrace, and counted per plugin in stats;
 *  - rescue: in a one-worker job group, a `sleep ms=0` job finishes while a block_sleep
 *    job still holds the worker's thread, and the thread count returns to its baseline;
 *  - supervision off the job workers: with every job worker blocked (rescue off), a job's
 *    timeout and job.cancel of a dispatched or a queued job still end those jobs;
 *  - classes: the `class` option, the record's field, the unknown-class error, stats;
 *  - fairness, loosely: two busy classes of 100 and 50 shares on one worker get CPU time
 *    in a ratio between 1.4 and 2.8.
 * Everything waits on conditions with generous deadlines; nothing asserts a duration
 * (latencies are printed).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_cpu, .fini = teardown, .timeout = 90);

#define TEST_PLUGINS                                                                               \
        FIBERD_TEST_PLUGIN_DIR "/stall_spin.so " FIBERD_TEST_PLUGIN_DIR "/block_sleep.so"

/* Lines of the daemon's log containing every one of @a and @b (@b may be NULL). */
static unsigned log_count(const char *a, const char *b)
{
        char line[4096];
        unsigned n = 0;
        FILE *f = fopen(fd_.log, "r");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                n += strstr(line, a) && (!b || strstr(line, b));
        fclose(f);
        return n;
}

/* Waits (at most @ms) until log_count(@a, @b) > 0. */
static bool log_wait(const char *a, const char *b, unsigned ms)
{
        uint64_t deadline = fiberd_now_ms() + ms;

        while (log_count(a, b) == 0) {
                if (fiberd_now_ms() > deadline)
                        return false;
                usleep(10000);
        }
        return true;
}

/* job.status: copies the state into @state; returns the error code ("" if none). */
static const char *job_state(Client *c, uint64_t id, char *state, size_t size)
{
        static char code[64];
        Reply rp;

        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "job.status %lu: %s", (unsigned long)id, rp.st.message);
        snprintf(state, size, "%s", map_str(rp.result, "state"));
        snprintf(code, sizeof(code), "%s", map_str(map_get(rp.result, "error"), "code"));
        reply_clear(&rp);
        return code;
}

/* Waits (10 s at most) until job @id leaves "queued": the dispatcher fiber starts a
 * job a moment after its submission was answered. Its state then is in @state. */
static void job_wait_dispatched(Client *c, uint64_t id, char *state, size_t size)
{
        uint64_t deadline = fiberd_now_ms() + 10000;

        do {
                job_state(c, id, state, size);
                if (strcmp(state, "queued") != 0)
                        return;
                usleep(5000);
        } while (fiberd_now_ms() < deadline);
}

static bool job_final(const char *state)
{
        return strcmp(state, "done") == 0 || strcmp(state, "failed") == 0 ||
               strcmp(state, "cancelled") == 0;
}

/* job.submit with a `class` option (and @args); the id, or 0 with @st set. */
static uint64_t submit_class(Client *c, const char *plugin, const Arg *args, size_t nargs,
                             const char *cls, IpcStatus *st)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);
        uint64_t id = 0;
        Reply rp;

        cr_assert(pk);
        ipc_pack_cstr(pk, plugin);
        msgpack_pack_map(pk, (uint32_t)nargs);
        for (size_t i = 0; i < nargs; i++) {
                ipc_pack_cstr(pk, args[i].key);
                msgpack_pack_int64(pk, args[i].i);
        }
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_cstr(pk, "class", cls);
        rpc_wait_reply(c, msgid, &rp);
        if (rp.r == 0)
                id = map_uint(rp.result, "id");
        if (st)
                *st = rp.st;
        reply_clear(&rp);
        return id;
}

/* The stats entry of class @name (copied into @rp's message; NULL if absent). */
static const msgpack_object *stats_class(const Reply *rp, const char *name)
{
        const msgpack_object *a = map_get(rp->result, "classes");

        cr_assert(a && a->type == MSGPACK_OBJECT_ARRAY, "stats has no classes array");
        for (uint32_t i = 0; i < a->via.array.size; i++)
                if (strcmp(map_str(&a->via.array.ptr[i], "name"), name) == 0)
                        return &a->via.array.ptr[i];
        return NULL;
}

/* ------------------------------------------------------------------ stall -------- */

Test(daemon_cpu, stall_reported_once_with_backtrace)
{
        FiberdOpts o = {.config = "[scheduler]\nstall_threshold_ms = 100\n",
                        .workers = 1,
                        .extra = TEST_PLUGINS};
        char head[96], state[32];
        const msgpack_object *plugins, *groups;
        uint64_t id, stalls = 0;
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "stall_spin", (Arg[]){ARG_I("ms", 300)}, 1, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        job_state(c, id, state, sizeof(state));

        snprintf(head, sizeof(head), "job %lu plugin stall_spin: stall:", (unsigned long)id);
        cr_assert(log_wait(head, "class default", 10000), "no stall report \"%s ...\"", head);
        cr_assert(log_wait(head, "stall_spin_busy", 10000),
                  "the stall report's backtrace does not name stall_spin_busy");
        /* plugin frames are named by file, version and path (the daemon's symbolizer),
         * not by the /proc/self/fd/N the loader mapped the file through */
        /* (the signal may land in clock_gettime, called from the loop: then the plugin's
         * frame is #1, not #0) */
        cr_assert(log_wait(head, " stall_spin.so 1.0 (", 10000),
                  "the stalled frame does not name the plugin's file and version");
        cr_assert(log_count(head, "/stall_spin.so)+0x") >= 1, "no path and offset");
        cr_assert(log_count(head, ")+0x") >= 1 && log_count(head, " stall_spin_busy+0x") >= 1,
                  "no symbol and offset");
        cr_assert(log_count(head, "/proc/self/fd/") == 0, "a frame named by its fd");
        cr_assert(log_count(head, "without switching") == 1, "%u stall reports for one stall",
                  log_count(head, "without switching"));
        cr_assert(log_count(head, "worker 0") == 1, "the report does not name the worker");

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        plugins = map_get(rp.result, "plugins");
        cr_assert_eq(map_uint(map_get(plugins, "stall_spin"), "stalls"), 1);
        cr_assert_eq(map_uint(map_get(plugins, "sleep"), "stalls"), UINT64_MAX,
                     "a plugin that ran no job has no counts");
        groups = map_get(rp.result, "groups");
        for (uint32_t i = 1; i < groups->via.array.size; i++)
                stalls += map_uint(&groups->via.array.ptr[i], "stalls");
        cr_assert_eq(stalls, 1, "the job groups counted %lu stalls", (unsigned long)stalls);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------------ rescue ------- */

Test(daemon_cpu, blocked_worker_rescued)
{
        FiberdOpts o = {.config = "[scheduler]\ngroups = 1\ngroup_size = 1\n"
                                  "rescue_after_ms = 20\n",
                        .workers = 1,
                        .extra = TEST_PLUGINS};
        uint64_t block, quick, t0, latency, rescues = 0;
        unsigned baseline, now = 0;
        char state[32];
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_simple(c, "ping", 0, NULL, &rp);
        reply_clear(&rp);
        baseline = fiberd_thread_count(&fd_);

        block = rpc_submit(c, "block_sleep", (Arg[]){ARG_I("ms", 2000)}, 1, 0, 0, &st);
        cr_assert_neq(block, 0, "%s", st.message);
        rpc_wait_progress(c, block, 10000);
        t0 = fiberd_now_ms();
        quick = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 0)}, 1, 0, 0, &st);
        cr_assert_neq(quick, 0, "%s", st.message);
        rpc_job_wait(c, quick, 30000, &rp);
        latency = fiberd_now_ms() - t0;
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        job_state(c, block, state, sizeof(state));
        cr_log_info("sleep ms=0 beside a blocked worker: done after %lu ms (rescue_after_ms "
                    "20); the blocking job is %s",
                    (unsigned long)latency, state);
        cr_assert(!job_final(state),
                  "the sleep job finished only after the blocking one (%s): no rescue", state);

        rpc_job_wait(c, block, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        rpc_simple(c, "stats", 0, NULL, &rp);
        rescues = map_uint(&map_get(rp.result, "groups")->via.array.ptr[1], "rescues");
        reply_clear(&rp);
        cr_assert(rescues >= 1 && rescues != UINT64_MAX, "jobs-0 counted %lu rescues",
                  (unsigned long)rescues);
        /* the spare parks, then its thread exits: back to the baseline */
        for (uint64_t deadline = fiberd_now_ms() + 30000; fiberd_now_ms() < deadline;
             usleep(20000)) {
                now = fiberd_thread_count(&fd_);
                if (now <= baseline)
                        break;
        }
        cr_assert(now <= baseline, "%u threads, %u before the blocking job", now, baseline);
        client_free(c);
}

/* ------------------------------------------------------------------ supervision -- */

Test(daemon_cpu, timeout_and_cancel_while_every_job_worker_is_blocked)
{
        FiberdOpts o = {.config = "[scheduler]\ngroups = 1\ngroup_size = 2\n"
                                  "rescue_after_ms = 0\n[jobs]\nmax_running = 4\n",
                        .workers = 2,
                        .extra = TEST_PLUGINS};
        uint64_t block[2], timed, running, queued;
        char state[32];
        const char *code;
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 2; i++) {
                block[i] = rpc_submit(c, "block_sleep", (Arg[]){ARG_I("ms", 5000)}, 1, 0, 0, &st);
                cr_assert_neq(block[i], 0, "%s", st.message);
        }
        for (int i = 0; i < 2; i++)
                rpc_wait_progress(c, block[i], 10000);

        /* a timeout: the supervisor (server group) ends the job */
        timed = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 60000)}, 1, 0, 300, &st);
        cr_assert_neq(timed, 0, "%s", st.message);
        rpc_job_wait(c, timed, 3000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled",
                         "the job's 300 ms timeout did not end it within 3 s");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), "DEADLINE_EXCEEDED");
        reply_clear(&rp);

        /* job.cancel of a dispatched job that waits for a worker */
        running = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 60000)}, 1, 0, 0, &st);
        cr_assert_neq(running, 0, "%s", st.message);
        job_wait_dispatched(c, running, state, sizeof(state));
        cr_assert_str_eq(state, "running");
        rpc_simple(c, "job.cancel", 1, &running, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        rpc_job_wait(c, running, 3000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), "CANCELLED");
        reply_clear(&rp);

        /* job.cancel of a queued one (max_running: the 2 blocked, and the 2 above until
         * their fibers get a worker and are joined) */
        queued = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 60000)}, 1, 0, 0, &st);
        cr_assert_neq(queued, 0, "%s", st.message);
        job_state(c, queued, state, sizeof(state));
        cr_assert_str_eq(state, "queued");
        rpc_simple(c, "job.cancel", 1, &queued, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        reply_clear(&rp);

        /* all of that while both job workers were still blocked */
        for (int i = 0; i < 2; i++) {
                code = job_state(c, block[i], state, sizeof(state));
                cr_assert_str_eq(state, "running", "block job %d is %s (%s) already", i, state,
                                 code);
        }
        client_free(c);
}

/* ------------------------------------------------------------------ classes ------ */

Test(daemon_cpu, job_classes)
{
        FiberdOpts o = {.config = "[class.batch]\nshares = 50\n[class.interactive]\nshares = 200\n"
                                  "[class.default]\nshares = 120\n"};
        const msgpack_object *cls, *list;
        uint64_t id, nid;
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = submit_class(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, "batch", &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_str_eq(map_str(rp.result, "class"), "batch");
        reply_clear(&rp);
        nid = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);
        cr_assert_neq(nid, 0, "%s", st.message);
        rpc_job_wait(c, nid, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "class"), "default");
        reply_clear(&rp);

        rpc_simple(c, "job.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        list = rp.result;
        cr_assert(list && list->type == MSGPACK_OBJECT_ARRAY && list->via.array.size == 2);
        cr_assert_str_eq(map_str(&list->via.array.ptr[0], "class"), "batch");
        cr_assert_str_eq(map_str(&list->via.array.ptr[1], "class"), "default");
        reply_clear(&rp);

        cr_assert_eq(submit_class(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, "nope", &st), 0);
        cr_assert_str_eq(st.code, "INVALID_ARGUMENT");
        cr_assert_str_eq(st.message, "unknown class nope (known: default, batch, interactive)");

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cls = stats_class(&rp, "default");
        cr_assert(cls && map_uint(cls, "shares") == 120, "default is not re-shared to 120");
        cls = stats_class(&rp, "batch");
        cr_assert(cls && map_uint(cls, "shares") == 50);
        cr_assert_neq(map_uint(cls, "runtime_ns"), UINT64_MAX);
        cr_assert_neq(map_uint(cls, "vruntime"), UINT64_MAX);
        cr_assert_neq(map_uint(cls, "queued"), UINT64_MAX);
        cr_assert_neq(map_uint(cls, "ready_to_run_p99_ns"), UINT64_MAX);
        cls = stats_class(&rp, "interactive");
        cr_assert(cls && map_uint(cls, "shares") == 200);
        reply_clear(&rp);
        client_free(c);
}

/* A class's shares change on SIGHUP, at once and logged; a new class needs a restart. */
Test(daemon_cpu, sighup_reshares_classes)
{
        FiberdOpts o = {.config = "[class.batch]\nshares = 50\n"};
        char conf[256];
        const msgpack_object *cls;
        Client *c;
        Reply rp;
        FILE *f;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[class.batch]\nshares = 10\n[class.more]\nshares = 5\n", f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(log_wait("class batch: shares 50 -> 10, applied now", NULL, 10000),
                  "no log line for the new shares");
        cr_assert(log_wait("configuration reloaded: applied [class.batch] shares; needs a "
                           "restart",
                           "[class.more]", 10000),
                  "the reload line does not name the new shares as applied and the new class "
                  "as needing a restart");
        rpc_simple(c, "stats", 0, NULL, &rp);
        cls = stats_class(&rp, "batch");
        cr_assert(cls && map_uint(cls, "shares") == 10);
        cr_assert_null(stats_class(&rp, "more"));
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------------ fairness ----- */

/* Two busy classes of 100 and 50 shares on one worker: CPU time about 2 : 1. Loose on
 * purpose (1.4 .. 2.8): it checks the shares are applied, not their precision. */
Test(daemon_cpu, shares_split_one_worker_loosely)
{
        FiberdOpts o = {.config = "[class.a]\nshares = 100\n[class.b]\nshares = 50\n"
                                  "[scheduler]\ngroups = 1\ngroup_size = 1\n",
                        .workers = 1};
        uint64_t ids[4], ra = 0, rb = 0;
        double ratio;
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 4; i++) {
                ids[i] = submit_class(c, "spin", (Arg[]){ARG_I("ms", 20000)}, 1, i % 2 ? "b" : "a",
                                      &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        /* until the two have had about 2 s of CPU between them */
        for (uint64_t deadline = fiberd_now_ms() + 30000; fiberd_now_ms() < deadline;
             usleep(50000)) {
                rpc_simple(c, "stats", 0, NULL, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                ra = map_uint(stats_class(&rp, "a"), "runtime_ns");
                rb = map_uint(stats_class(&rp, "b"), "runtime_ns");
                reply_clear(&rp);
                if (ra + rb >= 2000000000u)
                        break;
        }
        cr_assert(ra + rb >= 2000000000u && rb > 0, "the classes ran %lu + %lu ns in 30 s",
                  (unsigned long)ra, (unsigned long)rb);
        ratio = (double)ra / (double)rb;
        cr_log_info("class a (100 shares) ran %.0f ms, class b (50) %.0f ms: ratio %.2f (ideal 2)",
                    ra / 1e6, rb / 1e6, ratio);
        cr_assert(ratio >= 1.4 && ratio <= 2.8, "CPU time ratio a : b = %.2f, not about 2", ratio);
        for (int i = 0; i < 4; i++) {
                rpc_simple(c, "job.cancel", 1, &ids[i], &rp);
                reply_clear(&rp);
        }
        client_free(c);
}
