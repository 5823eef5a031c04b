/* SPDX-License-Identifier: MIT */
/*
 * daemon_cancel.c — cancellation end to end: job.cancel of a sleeping job and of a
 * CPU-bound (spin) job ends them "cancelled" with CANCELLED; a timeout_ms ends a job
 * "cancelled" with DEADLINE_EXCEEDED, whether it was running or still queued; job.result
 * of a running job is FAILED_PRECONDITION, of a cancelled one its own error; a queued job
 * cancelled never starts; a job's whole tree of child fibers is cancelled with it. "Promptly" is checked as "final within a bounded job.wait",
 * never with a timing assertion.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <string.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_cancel, .fini = teardown, .timeout = 60);

/* Waits (bounded) until @id is running, so the cancel hits a running job. */
static void wait_running(Client *c, uint64_t id)
{
        for (int i = 0; i < 2000; i++) {
                Reply rp;
                bool running;

                rpc_simple(c, "job.status", 1, &id, &rp);
                cr_assert_eq(rp.r, 0);
                running = strcmp(map_str(rp.result, "state"), "running") == 0;
                reply_clear(&rp);
                if (running)
                        return;
                rpc_job_wait(c, id, 5, &rp); /* a 5 ms pause that is also a request */
                reply_clear(&rp);
        }
        cr_assert_fail("job %lu never started", (unsigned long)id);
}

static void check_cancelled(Client *c, uint64_t id, const char *code)
{
        const msgpack_object *err;
        Reply rp;

        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled",
                         "job %lu did not end within 10 s of its cancellation", (unsigned long)id);
        err = map_get(rp.result, "error");
        cr_assert_str_eq(map_str(err, "code"), code);
        cr_assert_str_neq(map_str(err, "message"), "");
        cr_assert(ipc_object_is_nil(map_get(rp.result, "result")));
        reply_clear(&rp);

        rpc_simple(c, "job.result", 1, &id, &rp);
        cr_assert_lt(rp.r, 0);
        cr_assert_str_eq(rp.st.code, code);
        reply_clear(&rp);
}

Test(daemon_cancel, cancel_sleep)
{
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit_long(c, "sleep");
        wait_running(c, id);

        rpc_simple(c, "job.result", 1, &id, &rp);
        cr_assert_str_eq(rp.st.code, IPC_FAILED_PRECONDITION);
        reply_clear(&rp);

        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, "id"), id);
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);

        /* cancelling a finished job is not an error and changes nothing */
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_cancel, cancel_spin)
{
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit_long(c, "spin");
        wait_running(c, id);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);
        client_free(c);
}

/* A job with a deep tree of child fibers (skynet, 10M leaves: ~11M fibers over its
 * life) cancelled while it runs: every child, on any spawner's list, is cancelled and
 * let go; the job ends "cancelled", and the daemon then runs the next skynet to its sum
 * (a child left parked or a list left corrupt would hang or crash it). */
Test(daemon_cancel, cancel_a_tree_of_child_fibers)
{
        Client *c;
        Reply rp;
        IpcStatus st;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "skynet", (Arg[]){ARG_I("size", 10000000), ARG_I("div", 10)}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        wait_running(c, id);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);

        id = rpc_submit(c, "skynet", (Arg[]){ARG_I("size", 100000), ARG_I("div", 10)}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_uint(map_get(rp.result, "result"), "sum"), 4999950000ULL);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_cancel, timeout_cancels_running)
{
        IpcStatus st;
        Client *c;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0, 50, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        check_cancelled(c, id, IPC_DEADLINE_EXCEEDED);
        client_free(c);
}

/* One job at a time: a job queued behind a long one times out while queued. */
Test(daemon_cancel, timeout_cancels_queued)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n"};
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_submit_long(c, "sleep"); /* holds the only running slot */
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 50, &st);
        cr_assert_neq(id, 0);
        check_cancelled(c, id, IPC_DEADLINE_EXCEEDED);
        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert(ipc_object_is_nil(map_get(rp.result, "started_ms")), "it never ran");
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_cancel, cancel_queued)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n"};
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t blocker, id;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        blocker = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);
        cr_assert_neq(id, 0);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled", "a queued job ends at once");
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);
        rpc_simple(c, "job.cancel", 1, &blocker, &rp);
        reply_clear(&rp);
        check_cancelled(c, blocker, IPC_CANCELLED);
        client_free(c);
}

/* A job.wait with a short timeout returns the current record, not an error. */
Test(daemon_cancel, wait_times_out_with_current_record)
{
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 600000)}, 1, 0, 0, &st);
        rpc_job_wait(c, id, 20, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_str_neq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        rpc_job_wait(c, id, 0, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        client_free(c);
}
