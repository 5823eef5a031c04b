/* SPDX-License-Identifier: MIT */
/*
 * daemon_chan.c — channels and futures through the plugin ABI (version 3), end to end:
 * the chan_future test plugin runs producers and square computations as futures, a
 * select loop and an unbuffered ping-pong, with its sums checked; a job parked in
 * chan_recv ends "cancelled" once job.cancel (or its timeout_ms) reaches it; and a
 * plugin built against ABI version 1 still loads and runs next to it. "Promptly" is a
 * bounded job.wait, never a timing assertion.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

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

static void wait_parked(Client *c, uint64_t id)
{
        char needle[64];

        snprintf(needle, sizeof(needle), "job %lu plugin chan_future: parked in chan_recv",
                 (unsigned long)id);
        for (int i = 0; i < 2000; i++) {
                Reply rp;
                if (fiberd_log_contains(&fd_, needle))
                        return;
                rpc_job_wait(c, id, 5, &rp); /* a 5 ms pause that is also a request */
                reply_clear(&rp);
        }
        cr_assert_fail("job %lu never reached chan_recv (no \"%s\" in the log)", (unsigned long)id,
                       needle);
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
