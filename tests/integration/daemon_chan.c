/* SPDX-License-Identifier: MIT */
/*
 * daemon_chan.c — channels and futures through the plugin ABI (version 3), end to end:
 * the chan_future test plugin runs producers and square computations as futures, a
 * select loop and an unbuffered ping-pong, with its sums checked; a job parked in
 * chan_recv ends "cancelled" once job.cancel (or its timeout_ms) reaches it, also a
 * grandchild parked under a child that never yields; and a
 * plugin built against ABI version 1 still loads and runs next to it. "Promptly" is a
 * bounded job.wait, never a timing assertion.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_chan, .fini = teardown, .timeout = 60);

static const FiberdOpts opts = {
        .plugins = "sleep",
        .extra = FIBERD_TEST_PLUGIN_DIR "/chan_future.so " FIBERD_TEST_PLUGIN_DIR "/abi_v1.so",
};

/* The result map's signed integer under @key. */
static int64_t result_int(const msgpack_object *result, const char *key)
{
        const msgpack_object *o = map_get(result, key);

        cr_assert_not_null(o, "no %s in the result", key);
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                return o->via.i64;
        cr_assert_eq(o->type, MSGPACK_OBJECT_POSITIVE_INTEGER, "%s is not an integer", key);
        return (int64_t)o->via.u64;
}

Test(daemon_chan, a_job_uses_channels_and_futures)
{
        const msgpack_object *res;
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &opts);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "chan_future", (Arg[]){ARG_S("mode", "work"), ARG_I("n", 2000)}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 30000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "%s",
                         map_str(map_get(rp.result, "error"), "message"));
        res = map_get(rp.result, "result");
        cr_assert_eq(result_int(res, "sum"), 4LL * 2000 * 2001 / 2);
        cr_assert_eq(result_int(res, "squares"), 140);
        cr_assert_eq(result_int(res, "pong"), 2000);
        cr_assert_eq(result_int(res, "closed"), -EPIPE);
        reply_clear(&rp);
        client_free(c);
}

/* Submits a chan_future job that parks in chan_recv, and waits (bounded) until its log
 * says it got there. */
static uint64_t submit_blocked(Client *c, int64_t timeout_ms)
{
        IpcStatus st;
        uint64_t id = rpc_submit(c, "chan_future", (Arg[]){ARG_S("mode", "block")}, 1, 0,
                                 timeout_ms, &st);

        cr_assert_neq(id, 0, "%s", st.message);
        return id;
}

/* Waits (bounded: 10 s, in 5 ms requests) until the log has job @id's line @what. */
static void wait_logged(Client *c, uint64_t id, const char *what)
{
        char needle[128];

        snprintf(needle, sizeof(needle), "job %lu plugin chan_future: %s", (unsigned long)id, what);
        for (uint64_t t0 = fiberd_now_ms(); fiberd_now_ms() < t0 + 10000;) {
                Reply rp;
                if (fiberd_log_contains(&fd_, needle))
                        return;
                /* a 5 ms pause that is also a request; a final job answers at once */
                rpc_job_wait(c, id, 5, &rp);
                reply_clear(&rp);
                usleep(1000);
        }
        cr_assert_fail("job %lu: no \"%s\" in the log after 10 s", (unsigned long)id, needle);
}

static void wait_parked(Client *c, uint64_t id)
{
        wait_logged(c, id, "parked in chan_recv");
}

static void check_cancelled(Client *c, uint64_t id, const char *code)
{
        Reply rp;

        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled",
                         "job %lu did not end within 10 s of its cancellation", (unsigned long)id);
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), code);
        reply_clear(&rp);
}

Test(daemon_chan, cancel_reaches_a_job_parked_in_chan_recv)
{
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &opts);
        c = fiberd_connect(&fd_);
        id = submit_blocked(c, 0);
        wait_parked(c, id);
        rpc_job_wait(c, id, 50, &rp); /* still parked: job.wait times out, not final */
        cr_assert_str_eq(map_str(rp.result, "state"), "running");
        reply_clear(&rp);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);

        /* the daemon goes on: another job parks and is ended by its timeout */
        id = submit_blocked(c, 100);
        check_cancelled(c, id, IPC_DEADLINE_EXCEEDED);
        client_free(c);
}

/* The job's cancel walks its tree of children to the bottom: a grandchild parked in
 * chan_recv, under a child that its parent let go (returned without joining it) and
 * that spins without a yield point until that grandchild returns, is cancelled by the
 * walk itself (the child can pass nothing on). A walk that stopped at the job fiber's
 * own children, or lost the children a fiber let go, would leave the child spinning its
 * 15 s and log that it gave up. */
Test(daemon_chan, cancel_reaches_a_grandchild_under_a_child_let_go_that_never_yields)
{
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &opts);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "chan_future", (Arg[]){ARG_S("mode", "nest")}, 1, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        wait_logged(c, id, "grandchild parked in chan_recv");
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        check_cancelled(c, id, IPC_CANCELLED);
        wait_logged(c, id, "the spinning child saw its child return");
        cr_assert_not(fiberd_log_contains(&fd_, "the spinning child gave up"));
        client_free(c);
}

Test(daemon_chan, abi_v1_plugin_still_loads)
{
        bool loaded = false, refused = true;
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &opts);
        c = fiberd_connect(&fd_);
        rpc_plugin_listed(c, "abi_v1", &loaded, "abi_v1", &refused);
        cr_assert(loaded, "the ABI-1 plugin was refused next to ABI 3");
        cr_assert_not(refused);
        id = rpc_submit(c, "abi_v1", NULL, 0, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_str_eq(map_str(map_get(rp.result, "result"), "abi"), "1");
        reply_clear(&rp);
        client_free(c);
}
