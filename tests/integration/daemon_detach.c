/* SPDX-License-Identifier: MIT */
/*
 * daemon_detach.c — a job whose code never comes back to a yield point (the no_yield
 * test plugin: a CPU loop, or one raw blocking read(2)) still ends at its timeout or
 * cancel, without its fiber (detached, daemon/job/dispatch.c):
 *  - it reaches its final state (cancelled, with DEADLINE_EXCEEDED or CANCELLED) well
 *    before its code returns, and job.wait answers then;
 *  - its max_running slot is given back: a job queued behind it starts and ends while
 *    its code still runs (the detached gauge is 1 in stats and metrics meanwhile);
 *  - when its code returns, the record stays as it ended (no result, the same error,
 *    finished_ms and progress), and the gauge goes back to 0;
 *  - SIGTERM does not wait for such code past stop_timeout_ms, and names the job;
 *  - the same for a plugin that declared itself inline (FIBERD_PLUGIN_INLINE) and holds
 *    a server worker: everyone else is still served, and fini() is not called under it.
 * Timings are bounds far from the plugin's run time (a 3 s loop must end in < 1.5 s),
 * never tight; waits poll a condition against a deadline.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_detach, .fini = teardown, .timeout = 60);

/* One job runs at a time: a second job waits for the first one's slot. */
static const FiberdOpts one_at_a_time = {
        .config = "[jobs]\nmax_running = 1\n[store]\nbackend = memory\n",
        .plugins = "sleep",
        .extra = FIBERD_TEST_PLUGIN_DIR "/no_yield.so"};

#define SPIN_MS 3000

/* The detached gauge: stats.jobs.detached, and stats.plugins.no_yield.detached (asserted
 * equal). */
static uint64_t detached_now(Client *c)
{
        uint64_t total, mine;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        total = map_uint(map_get(rp.result, "jobs"), "detached");
        mine = map_uint(map_get(map_get(rp.result, "plugins"), "no_yield"), "detached");
        reply_clear(&rp);
        cr_assert_neq(total, UINT64_MAX, "stats.jobs has no detached count");
        cr_assert_eq(total, mine);
        return total;
}

/* Waits (bounded by @timeout_ms) until the detached gauge reads @want. */
static void wait_detached(Client *c, uint64_t want, uint64_t timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + timeout_ms, n;

        while ((n = detached_now(c)) != want) {
                cr_assert_lt(fiberd_now_ms(), deadline, "detached stays %lu, not %lu",
                             (unsigned long)n, (unsigned long)want);
                usleep(5000);
        }
}

/* What must not change once the job ended: state, error, finish time, progress, result. */
typedef struct Ended {
        char state[16], code[32], message[256];
        uint64_t finished_ms, progress_done;
} Ended;

static void ended_read(const msgpack_object *rec, Ended *e)
{
        const msgpack_object *err = map_get(rec, "error");

        snprintf(e->state, sizeof(e->state), "%s", map_str(rec, "state"));
        snprintf(e->code, sizeof(e->code), "%s", map_str(err, "code"));
        snprintf(e->message, sizeof(e->message), "%s", map_str(err, "message"));
        e->finished_ms = map_uint(rec, "finished_ms");
        e->progress_done = map_uint(map_get(rec, "progress"), "done");
        cr_assert(ipc_object_is_nil(map_get(rec, "result")), "a cancelled job has no result");
}

/*
 * The scenario of every test but shutdown: @id (no_yield, SPIN_MS, submitted at
 * @t0_ms) must end cancelled with @code within 1.5 s; the sleep job @queued, waiting for
 * its slot, must then run and end done while the code still runs; once the code
 * returned, @id's record is as it ended.
 */
static void check_detached(Client *c, uint64_t id, uint64_t t0_ms, uint64_t queued,
                           const char *code)
{
        uint64_t took_ms;
        Ended first, later;
        Reply rp;
        char *text;

        rpc_job_wait(c, id, 1500, &rp);
        took_ms = fiberd_now_ms() - t0_ms;
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        ended_read(rp.result, &first);
        reply_clear(&rp);
        cr_assert_str_eq(first.state, "cancelled", "job %lu is %s %lu ms after its cancel",
                         (unsigned long)id, first.state, (unsigned long)took_ms);
        cr_assert_str_eq(first.code, code);
        cr_assert(strstr(first.message, "did not return"), "message: %s", first.message);
        cr_assert_eq(first.progress_done, 0);
        cr_log_info("job %lu ended %lu ms after its cancel or submission", (unsigned long)id,
                    (unsigned long)took_ms);

        /* its slot is free: the queued job runs now, while the code still runs */
        rpc_job_wait(c, queued, 1500, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "the queued job did not run");
        reply_clear(&rp);
        cr_assert_eq(detached_now(c), 1, "the code returned before the queued job ended");
        cr_assert(fiberd_log_contains(&fd_, "did not return to a yield point"));
        rpc_simple(c, "metrics", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_eq(rp.result->type, MSGPACK_OBJECT_STR);
        text = strndup(rp.result->via.str.ptr, rp.result->via.str.size);
        cr_assert(strstr(text, "fiberd_jobs_detached{plugin=\"no_yield\"} 1\n"), "%s", text);
        free(text);
        reply_clear(&rp);

        /* the code returns SPIN_MS after it started: nothing of what it did is kept */
        wait_detached(c, 0, SPIN_MS + 10000);
        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert_eq(rp.r, 0);
        ended_read(rp.result, &later);
        reply_clear(&rp);
        cr_assert_str_eq(later.state, first.state);
        cr_assert_str_eq(later.code, first.code);
        cr_assert_str_eq(later.message, first.message);
        cr_assert_eq(later.finished_ms, first.finished_ms);
        cr_assert_eq(later.progress_done, 0, "progress moved after the job ended");
        rpc_simple(c, "job.result", 1, &id, &rp);
        cr_assert_str_eq(rp.st.code, code, "job.result: %s", rp.st.code);
        reply_clear(&rp);
        cr_assert(fiberd_log_contains(&fd_, "its detached code returned"));
}

/* A no_yield job doing @how with timeout_ms 100, a sleep job queued behind it: the
 * timeout ends the first without its code (check_detached()). */
static void timeout_ends(const char *how)
{
        IpcStatus st;
        uint64_t id, queued, t0;
        Client *c;

        fiberd_start(&fd_, &one_at_a_time);
        c = fiberd_connect(&fd_);
        t0 = fiberd_now_ms();
        id = rpc_submit(c, "no_yield", (Arg[]){ARG_I("ms", SPIN_MS), ARG_S("how", how)}, 2, 0, 100,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        queued = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 10)}, 1, 0, 0, &st);
        cr_assert_neq(queued, 0, "%s", st.message);
        check_detached(c, id, t0, queued, IPC_DEADLINE_EXCEEDED);
        client_free(c);
}

Test(daemon_detach, timeout_ends_a_spinning_job)
{
        timeout_ends("spin");
        cr_assert(fiberd_log_contains(&fd_, "did not return"));
}

Test(daemon_detach, timeout_ends_a_job_blocked_in_read)
{
        timeout_ends("read");
        cr_assert(fiberd_log_contains(&fd_, "did not return"));
}

Test(daemon_detach, cancel_ends_a_spinning_job)
{
        IpcStatus st;
        uint64_t id, queued, t0;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &one_at_a_time);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "no_yield", (Arg[]){ARG_I("ms", SPIN_MS), ARG_S("how", "spin")}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        queued = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 10)}, 1, 0, 0, &st);
        cr_assert_neq(queued, 0, "%s", st.message);
        rpc_wait_progress(c, id, 10000);
        t0 = fiberd_now_ms();
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        check_detached(c, id, t0, queued, IPC_CANCELLED);
        client_free(c);
}

Test(daemon_detach, cancel_ends_a_job_blocked_in_read)
{
        IpcStatus st;
        uint64_t id, queued, t0;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &one_at_a_time);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "no_yield", (Arg[]){ARG_I("ms", SPIN_MS), ARG_S("how", "read")}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        queued = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 10)}, 1, 0, 0, &st);
        cr_assert_neq(queued, 0, "%s", st.message);
        rpc_wait_progress(c, id, 10000);
        t0 = fiberd_now_ms();
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        check_detached(c, id, t0, queued, IPC_CANCELLED);
        client_free(c);
}

/* SIGTERM with detached code running: fiberd leaves after stop_timeout_ms, not after the
 * code (60 s), and names the job it leaves. */
Test(daemon_detach, shutdown_does_not_wait_for_detached_code)
{
        FiberdOpts o = {.config = "[fiberd]\nstop_timeout_ms = 300\n[store]\nbackend = memory\n",
                        .plugins = "sleep",
                        .extra = FIBERD_TEST_PLUGIN_DIR "/no_yield.so"};
        IpcStatus st;
        uint64_t id, t0;
        Client *c;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "no_yield", (Arg[]){ARG_I("ms", 60000)}, 1, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_wait_progress(c, id, 10000);
        t0 = fiberd_now_ms();
        kill(fd_.pid, SIGTERM);
        status = fiberd_signal_and_wait(&fd_, 0, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        cr_log_info("fiberd left %lu ms after SIGTERM", (unsigned long)(fiberd_now_ms() - t0));
        cr_assert(fiberd_log_contains(&fd_, "did not return to a yield point"));
        cr_assert(fiberd_log_contains(&fd_, "left running at exit"));
        cr_assert(fiberd_log_contains(&fd_, "without calling the plugins' fini()"));
        client_free(c);
}

/* A plugin declared inline whose jobs block their thread for 60 s: two of them, placed
 * inline in one round (a pause holds them until both are queued). The first holds the
 * server worker; the second, taken by the rescue's spare, sees a server worker held and
 * moves to the job groups before any of its code runs, so the spare stays free: the
 * daemon still answers (an echo job runs and ends meanwhile). The stall detector takes
 * the plugin's privilege away (a warning), a cancel ends both, and SIGTERM leaves after
 * stop_timeout_ms without calling the plugins' fini() under their code. */
Test(daemon_detach, inline_code_that_blocks_is_left_like_any)
{
        FiberdOpts o = {.config = "[fiberd]\nstop_timeout_ms = 300\n[store]\nbackend = memory\n"
                                  "[server]\nworkers = 1\n",
                        .plugins = "sleep echo",
                        .extra = FIBERD_TEST_PLUGIN_DIR "/no_yield_inline.so"};
        IpcStatus st;
        uint64_t ids[2], echo;
        Client *c;
        Reply rp;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_plugin_hold(c, "pause", "no_yield_inline");
        for (int i = 0; i < 2; i++) {
                ids[i] =
                        rpc_submit(c, "no_yield_inline",
                                   (Arg[]){ARG_S("how", "read"), ARG_I("ms", 60000)}, 2, 0, 0, &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        rpc_plugin_hold(c, "resume", "no_yield_inline");
        for (int i = 0; i < 2; i++)
                rpc_wait_progress(c, ids[i], 10000);
        echo = rpc_submit(c, "echo", (Arg[]){ARG_I("n", 7)}, 1, 0, 0, &st);
        cr_assert_neq(echo, 0, "%s", st.message);
        rpc_job_wait(c, echo, 10000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        for (int i = 0; i < 2; i++) {
                rpc_simple(c, "job.cancel", 1, &ids[i], &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                reply_clear(&rp);
                rpc_job_wait(c, ids[i], 10000, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
                reply_clear(&rp);
        }
        cr_assert(fiberd_log_contains(&fd_, "held a server worker"),
                  "the stall did not take the inline privilege away");
        cr_assert(fiberd_log_contains(&fd_, "moved to the job workers before it began (a server "
                                            "worker is held)"),
                  "the second job did not move off the server group");

        kill(fd_.pid, SIGTERM);
        status = fiberd_signal_and_wait(&fd_, 0, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        cr_assert(fiberd_log_contains(&fd_, "without calling the plugins' fini()"));
        client_free(c);
}
