/* SPDX-License-Identifier: MIT */
/*
 * daemon_sched.c — job scheduling seen from a client (PROTOCOL.md, "Scheduling jobs"):
 * delayed and timed jobs, retries with backoff into the dead set, job.retry and
 * job.discard, dependencies, idempotency keys, and all of them across a kill -9 of a
 * fiberd with its default sqlite store. Intervals are tens of milliseconds, and every
 * wait is a bounded poll of a condition.
 */
#include "tests/integration/fiberd_harness.h"
#include "scheduler/base/macro.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_sched, .fini = teardown, .timeout = 60);

#define FLAKY_SO FIBERD_TEST_PLUGIN_DIR "/flaky.so"

static void start(void)
{
        fiberd_start(&fd_, &(FiberdOpts){.extra = FLAKY_SO, .workers = 2});
}

static uint64_t wall_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Submission options; zero fields are left out. */
typedef struct Opts {
        uint64_t delay_ms, run_at, max_attempts, backoff_ms;
        const uint64_t *after;
        size_t n_after;
        const char *key;
        bool run_at_set;
} Opts;

/* job.submit @plugin {@args} with @o; the id (0 on error: *@st says why); *@existing
 * when the answer says a key matched an earlier job. */
static uint64_t submit(Client *c, const char *plugin, const Arg *args, size_t nargs, const Opts *o,
                       IpcStatus *st, bool *existing)
{
        uint32_t msgid, n = 0;
        msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);
        Reply rp;
        uint64_t id = 0;

        cr_assert(pk);
        ipc_pack_cstr(pk, plugin);
        msgpack_pack_map(pk, (uint32_t)nargs);
        for (size_t i = 0; i < nargs; i++) {
                ipc_pack_cstr(pk, args[i].key);
                if (args[i].s)
                        ipc_pack_cstr(pk, args[i].s);
                else
                        msgpack_pack_int64(pk, args[i].i);
        }
        n = !!o->delay_ms + (o->run_at_set || o->run_at) + !!o->max_attempts + !!o->backoff_ms +
            !!o->n_after + !!o->key;
        msgpack_pack_map(pk, n);
        if (o->delay_ms)
                ipc_pack_kv_uint(pk, "delay_ms", o->delay_ms);
        if (o->run_at_set || o->run_at)
                ipc_pack_kv_uint(pk, "run_at", o->run_at);
        if (o->max_attempts)
                ipc_pack_kv_uint(pk, "max_attempts", o->max_attempts);
        if (o->backoff_ms)
                ipc_pack_kv_uint(pk, "backoff_ms", o->backoff_ms);
        if (o->n_after) {
                ipc_pack_cstr(pk, "after");
                msgpack_pack_array(pk, (uint32_t)o->n_after);
                for (size_t i = 0; i < o->n_after; i++)
                        msgpack_pack_uint64(pk, o->after[i]);
        }
        if (o->key) {
                ipc_pack_cstr(pk, "key");
                ipc_pack_cstr(pk, o->key);
        }
        rpc_wait_reply(c, msgid, &rp);
        if (rp.r == 0) {
                const msgpack_object *e = map_get(rp.result, "existing");
                id = map_uint(rp.result, "id");
                if (existing)
                        *existing = e && e->type == MSGPACK_OBJECT_BOOLEAN && e->via.boolean;
        }
        if (st)
                *st = rp.st;
        else
                cr_assert_eq(rp.r, 0, "job.submit %s: %s %s", plugin, rp.st.code, rp.st.message);
        reply_clear(&rp);
        return id;
}

/* job.status of @id into @rp (the caller clears it); asserts it answered. */
static void status(Client *c, uint64_t id, Reply *rp)
{
        rpc_simple(c, "job.status", 1, &id, rp);
        cr_assert_eq(rp->r, 0, "job.status %llu: %s", (unsigned long long)id, rp->st.message);
}

static void state_of(Client *c, uint64_t id, char *buf)
{
        Reply rp;

        status(c, id, &rp);
        snprintf(buf, 32, "%s", map_str(rp.result, "state"));
        reply_clear(&rp);
}

/* Polls until @id is in @want (asserts after 15 s). */
static void wait_state(Client *c, uint64_t id, const char *want)
{
        uint64_t deadline = fiberd_now_ms() + 15000;
        char state[32] = "";

        for (;;) {
                state_of(c, id, state);
                if (strcmp(state, want) == 0)
                        return;
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s, not %s, after 15 s",
                          (unsigned long long)id, state, want);
                usleep(2000);
        }
}

static const char *error_code(const msgpack_object *rec)
{
        const msgpack_object *e = map_get(rec, "error");

        return e && e->type == MSGPACK_OBJECT_MAP ? map_str(e, "code") : "";
}

static uint32_t errors_count(const msgpack_object *rec)
{
        const msgpack_object *e = map_get(rec, "errors");

        cr_assert(e && e->type == MSGPACK_OBJECT_ARRAY, "the record has no errors array");
        return e->via.array.size;
}

static void kill9(void)
{
        int status = fiberd_signal_and_wait(&fd_, SIGKILL, 10000);

        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
}

/* ------------------------------------------------------------ delayed and timed -- */

Test(daemon_sched, a_delayed_job_is_scheduled_until_due_then_runs)
{
        Client *c;
        Reply rp;
        uint64_t before = wall_ms(), id, run_at, started;

        start();
        c = fiberd_connect(&fd_);
        id = submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 300}, NULL, NULL);
        status(c, id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "scheduled");
        cr_assert(map_uint(rp.result, "created_ms") != UINT64_MAX &&
                          map_uint(rp.result, "created_ms") >= before,
                  "a scheduled job has no created_ms");
        run_at = map_uint(rp.result, "run_at_ms");
        cr_assert(run_at >= before + 300 && run_at <= wall_ms() + 300, "run_at_ms %llu",
                  (unsigned long long)run_at);
        reply_clear(&rp);
        wait_state(c, id, "done");
        status(c, id, &rp);
        started = map_uint(rp.result, "started_ms");
        cr_assert(started >= run_at, "started %llu before its due time %llu",
                  (unsigned long long)started, (unsigned long long)run_at);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_sched, run_at_in_the_past_runs_now_and_bad_times_are_refused)
{
        Client *c;
        IpcStatus st;
        uint64_t id;

        start();
        c = fiberd_connect(&fd_);
        id = submit(c, "echo", NULL, 0, &(Opts){.run_at = wall_ms() - 60000}, NULL, NULL);
        wait_state(c, id, "done");
        cr_assert_eq(
                submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 10, .run_at = wall_ms()}, &st, NULL),
                0);
        cr_assert_str_eq(st.code, "INVALID_ARGUMENT");
        cr_assert(strstr(st.message, "delay_ms and run_at"), "%s", st.message);
        cr_assert_eq(submit(c, "echo", NULL, 0,
                            &(Opts){.run_at = wall_ms() + 11ull * 366 * 86400 * 1000}, &st, NULL),
                     0);
        cr_assert(strstr(st.message, "10 years"), "%s", st.message);
        client_free(c);
}

Test(daemon_sched, a_scheduled_job_can_be_cancelled_and_its_waiter_answered)
{
        Client *c;
        Reply rp;
        uint64_t id;

        start();
        c = fiberd_connect(&fd_);
        id = submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 3600000}, NULL, NULL);
        rpc_simple(c, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        rpc_job_wait(c, id, 5000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        cr_assert_str_eq(error_code(rp.result), "CANCELLED");
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ retries ------------ */

Test(daemon_sched, a_failing_job_is_retried_with_backoff_until_it_succeeds)
{
        Arg a[] = {ARG_I("fail", 2)};
        Client *c;
        Reply rp;
        uint64_t id;

        start();
        c = fiberd_connect(&fd_);
        id = submit(c, "flaky", a, 1, &(Opts){.max_attempts = 3, .backoff_ms = 20}, NULL, NULL);
        wait_state(c, id, "done");
        status(c, id, &rp);
        cr_assert_eq(map_uint(rp.result, "attempt"), 2, "two runs before the one that worked");
        cr_assert_eq(map_uint(rp.result, "max_attempts"), 3);
        cr_assert_eq(errors_count(rp.result), 2, "each failed run is listed");
        reply_clear(&rp);
        cr_assert(fiberd_log_contains(&fd_, "attempt 1 of 3 failed"),
                  "the retry is not in the log");
        client_free(c);
}

Test(daemon_sched, out_of_attempts_the_job_is_dead_until_retried_or_discarded)
{
        Arg a[] = {ARG_I("fail", 2)};
        Client *c;
        Reply rp;
        uint64_t id, id2;
        uint32_t msgid;
        msgpack_packer *pk;

        start();
        c = fiberd_connect(&fd_);
        id = submit(c, "flaky", a, 1, &(Opts){.max_attempts = 2, .backoff_ms = 10}, NULL, NULL);
        wait_state(c, id, "dead");
        status(c, id, &rp);
        cr_assert_eq(errors_count(rp.result), 2);
        cr_assert_str_eq(error_code(rp.result), "INTERNAL");
        reply_clear(&rp);
        /* the dead set: job.list by state */
        pk = client_request(c, "job.list", 1, &msgid);
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_cstr(pk, "state", "dead");
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(rp.result->via.array.size, 1, "the dead job is listed");
        reply_clear(&rp);
        /* retried: the third run succeeds */
        pk = client_request(c, "job.retry", 1, &msgid);
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint64(pk, id);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_get(rp.result, "retried")->via.array.size, 1);
        reply_clear(&rp);
        wait_state(c, id, "done");
        status(c, id, &rp);
        cr_assert_eq(map_uint(rp.result, "attempt"), 0, "a retried job starts counting again");
        cr_assert_eq(errors_count(rp.result), 2, "the old runs' errors stay listed");
        reply_clear(&rp);
        /* a done job is not retried */
        pk = client_request(c, "job.retry", 1, &msgid);
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint64(pk, id);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_str_eq(rp.st.code, "FAILED_PRECONDITION", "%s", rp.st.message);
        reply_clear(&rp);
        /* another dead one, discarded */
        id2 = submit(c, "flaky", (Arg[]){ARG_I("fail", 5)}, 1,
                     &(Opts){.max_attempts = 2, .backoff_ms = 10}, NULL, NULL);
        wait_state(c, id2, "dead");
        pk = client_request(c, "job.discard", 1, &msgid);
        msgpack_pack_map(pk, 1);
        ipc_pack_cstr(pk, "all");
        msgpack_pack_true(pk);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_get(rp.result, "discarded")->via.array.size, 1);
        reply_clear(&rp);
        rpc_simple(c, "job.status", 1, &id2, &rp);
        cr_assert_str_eq(rp.st.code, "NOT_FOUND");
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_sched, permanent_failures_and_bad_arguments_are_never_retried)
{
        Client *c;
        Reply rp;
        uint64_t perm, bad;

        start();
        c = fiberd_connect(&fd_);
        perm = submit(c, "flaky", (Arg[]){ARG_I("fail", 3), ARG_I("permanent", 1)}, 2,
                      &(Opts){.max_attempts = 5, .backoff_ms = 10}, NULL, NULL);
        /* -EINVAL maps to INVALID_ARGUMENT: a retry cannot mend it */
        bad = submit(c, "flaky", (Arg[]){ARG_I("fail", 3), ARG_I("errno", 22)}, 2,
                     &(Opts){.max_attempts = 5, .backoff_ms = 10}, NULL, NULL);
        wait_state(c, perm, "failed");
        wait_state(c, bad, "failed");
        status(c, perm, &rp);
        cr_assert_eq(map_uint(rp.result, "attempt"), 0, "a permanent failure was retried");
        cr_assert_eq(errors_count(rp.result), 1);
        reply_clear(&rp);
        status(c, bad, &rp);
        cr_assert_str_eq(error_code(rp.result), "INVALID_ARGUMENT");
        cr_assert_eq(map_uint(rp.result, "attempt"), 0, "bad arguments were retried");
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ dependencies ------- */

Test(daemon_sched, a_job_waits_for_its_dependencies_and_fails_with_them)
{
        Client *c;
        IpcStatus st;
        Reply rp;
        uint64_t a, b, f, g, ids[2];

        start();
        c = fiberd_connect(&fd_);
        a = submit(c, "sleep", (Arg[]){ARG_I("ms", 200)}, 1, &(Opts){0}, NULL, NULL);
        f = submit(c, "flaky", (Arg[]){ARG_I("fail", 1)}, 1, &(Opts){.delay_ms = 100}, NULL, NULL);
        ids[0] = a;
        ids[1] = f;
        b = submit(c, "echo", NULL, 0, &(Opts){.after = ids, .n_after = 1}, NULL, NULL);
        g = submit(c, "echo", NULL, 0, &(Opts){.after = ids, .n_after = 2}, NULL, NULL);
        state_of(c, b, (char[32]){0});
        status(c, b, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "waiting");
        cr_assert_neq(map_uint(rp.result, "created_ms"), UINT64_MAX,
                      "a waiting job has no created_ms");
        cr_assert_eq(map_get(rp.result, "after")->via.array.size, 1);
        reply_clear(&rp);
        wait_state(c, b, "done");
        status(c, a, &rp);
        uint64_t a_end = map_uint(rp.result, "finished_ms");
        reply_clear(&rp);
        status(c, b, &rp);
        cr_assert(map_uint(rp.result, "started_ms") >= a_end, "b ran before a ended");
        reply_clear(&rp);
        wait_state(c, g, "failed");
        status(c, g, &rp);
        cr_assert_str_eq(error_code(rp.result), "FAILED_PRECONDITION");
        {
                char want[64];
                snprintf(want, sizeof(want), "job %llu", (unsigned long long)f);
                cr_assert(strstr(map_str(map_get(rp.result, "error"), "message"), want),
                          "the error does not name the failed dependency");
        }
        reply_clear(&rp);
        /* an id that never existed, and one that failed already */
        ids[0] = 999999;
        cr_assert_eq(submit(c, "echo", NULL, 0, &(Opts){.after = ids, .n_after = 1}, &st, NULL), 0);
        cr_assert_str_eq(st.code, "NOT_FOUND");
        ids[0] = f;
        cr_assert_eq(submit(c, "echo", NULL, 0, &(Opts){.after = ids, .n_after = 1}, &st, NULL), 0);
        cr_assert_str_eq(st.code, "FAILED_PRECONDITION");
        client_free(c);
}

/* ------------------------------------------------------------ idempotency -------- */

Test(daemon_sched, a_repeated_key_answers_the_first_job)
{
        Client *c;
        bool existing = true;
        uint64_t first, again, other;

        start();
        c = fiberd_connect(&fd_);
        first = submit(c, "echo", NULL, 0, &(Opts){.key = "invoice-17"}, NULL, &existing);
        cr_assert(!existing);
        wait_state(c, first, "done");
        again = submit(c, "echo", NULL, 0, &(Opts){.key = "invoice-17"}, NULL, &existing);
        cr_assert_eq(again, first, "a repeat of the key made job %llu", (unsigned long long)again);
        cr_assert(existing, "the answer does not say the job existed");
        other = submit(c, "echo", NULL, 0, &(Opts){.key = "invoice-18"}, NULL, &existing);
        cr_assert_neq(other, first);
        client_free(c);
}

/* ------------------------------------------------------------ kill -9 ------------ */

Test(daemon_sched, scheduled_retrying_and_waiting_jobs_survive_kill_9)
{
        Client *c;
        Reply rp;
        uint64_t sched, due, retrying, dep, waiting, dep2, waiting2, key, again, t0;
        bool existing;

        start();
        c = fiberd_connect(&fd_);
        t0 = wall_ms();
        sched = submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 1500}, NULL, NULL);
        due = submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 200}, NULL, NULL);
        retrying = submit(c, "flaky", (Arg[]){ARG_I("fail", 1)}, 1,
                          &(Opts){.max_attempts = 3, .backoff_ms = 1000}, NULL, NULL);
        dep = submit(c, "sleep", (Arg[]){ARG_I("ms", 60000)}, 1, &(Opts){.delay_ms = 1200}, NULL,
                     NULL);
        waiting = submit(c, "echo", NULL, 0, &(Opts){.after = &dep, .n_after = 1}, NULL, NULL);
        dep2 = submit(c, "echo", NULL, 0, &(Opts){.delay_ms = 1300}, NULL, NULL);
        waiting2 = submit(c, "echo", NULL, 0, &(Opts){.after = &dep2, .n_after = 1}, NULL, NULL);
        key = submit(c, "echo", NULL, 0, &(Opts){.key = "k1", .delay_ms = 100000}, NULL, NULL);
        wait_state(c, retrying, "retrying");
        state_of(c, waiting, (char[32]){0});
        client_free(c);
        kill9();
        /* the 200 ms job comes due while fiberd is down */
        while (wall_ms() < t0 + 400)
                usleep(10000);
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        wait_state(c, due, "done");
        status(c, sched, &rp);
        cr_assert(strcmp(map_str(rp.result, "state"), "scheduled") == 0 ||
                          map_uint(rp.result, "started_ms") >= t0 + 1500,
                  "the delayed job lost its due time");
        reply_clear(&rp);
        wait_state(c, sched, "done");
        wait_state(c, retrying, "done");
        status(c, retrying, &rp);
        /* its first run's error, and one more: the test plugin counts runs per process,
         * and either its record said retrying or it was running (a failed attempt) */
        cr_assert_geq(errors_count(rp.result), 1, "the failed run's error was lost");
        reply_clear(&rp);
        state_of(c, waiting, (char[32]){0});
        status(c, waiting, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "waiting");
        reply_clear(&rp);
        rpc_simple(c, "job.cancel", 1, &dep, &rp);
        reply_clear(&rp);
        wait_state(c, waiting, "failed");
        wait_state(c, waiting2, "done"); /* released by a dependency that ran after the restart */
        again = submit(c, "echo", NULL, 0, &(Opts){.key = "k1"}, NULL, &existing);
        cr_assert_eq(again, key, "the key was forgotten across the restart");
        cr_assert(existing);
        client_free(c);
}

/* Dead jobs read back at a restart go back to the dead set, with its retention
 * (dead_retention_s), not the finished jobs' (retention_s: 1 s here); discarding one
 * leaves the others (the dead count once went below zero at that). */
Test(daemon_sched, dead_jobs_stay_dead_across_a_restart)
{
        uint64_t ids[3], t0;
        Client *c;
        Reply rp;
        uint32_t msgid;
        msgpack_packer *pk;

        fiberd_start(&fd_, &(FiberdOpts){.config = "[jobs]\nretention_s = 1\n",
                                         .extra = FLAKY_SO,
                                         .workers = 2});
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 3; i++)
                ids[i] = submit(c, "flaky", (Arg[]){ARG_I("fail", 5)}, 1,
                                &(Opts){.max_attempts = 2, .backoff_ms = 10}, NULL, NULL);
        for (int i = 0; i < 3; i++)
                wait_state(c, ids[i], "dead");
        client_free(c);
        kill9();
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        pk = client_request(c, "job.discard", 1, &msgid);
        msgpack_pack_array(pk, 1);
        msgpack_pack_uint64(pk, ids[0]);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        t0 = fiberd_now_ms();
        while (fiberd_now_ms() < t0 + 2500) /* past retention_s, two sweeps */
                usleep(50000);
        for (int i = 1; i < 3; i++) {
                char state[32];
                state_of(c, ids[i], state);
                cr_assert_str_eq(state, "dead", "job %llu", (unsigned long long)ids[i]);
        }
        client_free(c);
}

/* ------------------------------------------------------------ access ------------- */

#define NOBODY 65534

static uint64_t root_dead_id;

/* As nobody: root's dead job is as unknown to job.retry and job.discard as to
 * job.status; `after` may not name it; {all: true} retries none of it. */
static void nobody_touches_roots_jobs(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        const char *methods[] = {"job.retry", "job.discard"};
        IpcStatus st;
        Reply rp;

        (void)arg;
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, methods[i], 1, &msgid);
                msgpack_pack_array(pk, 1);
                msgpack_pack_uint64(pk, root_dead_id);
                rpc_wait_reply(c, msgid, &rp);
                CHECK(rp.r < 0 && strcmp(rp.st.code, "NOT_FOUND") == 0, "%s of root's job: %d %s",
                      methods[i], rp.r, rp.st.code ? rp.st.code : "");
                reply_clear(&rp);
        }
        {
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "job.retry", 1, &msgid);
                msgpack_pack_map(pk, 1);
                ipc_pack_cstr(pk, "all");
                msgpack_pack_true(pk);
                rpc_wait_reply(c, msgid, &rp);
                CHECK(rp.r == 0 && map_get(rp.result, "retried")->via.array.size == 0,
                      "retry --all as nobody touched root's jobs");
                reply_clear(&rp);
        }
        CHECK(submit(c, "echo", NULL, 0, &(Opts){.after = &root_dead_id, .n_after = 1}, &st,
                     NULL) == 0 &&
                      strcmp(st.code, "NOT_FOUND") == 0,
              "after root's job: %s", st.code ? st.code : "accepted");
        client_free(c);
}

Test(daemon_sched, another_users_jobs_cannot_be_retried_discarded_or_waited_on)
{
        Client *c;
        Reply rp;

        cr_assert(geteuid() == 0, "this test needs root to act as another uid");
        start();
        cr_assert(chmod(fd_.dir, 0755) == 0); /* nobody reaches the socket */
        c = fiberd_connect(&fd_);
        root_dead_id = submit(c, "flaky", (Arg[]){ARG_I("fail", 5)}, 1,
                              &(Opts){.max_attempts = 2, .backoff_ms = 10}, NULL, NULL);
        wait_state(c, root_dead_id, "dead");
        fiberd_run_as(NOBODY, NOBODY, nobody_touches_roots_jobs, NULL);
        status(c, root_dead_id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "dead", "nobody changed root's job");
        reply_clear(&rp);
        client_free(c);
}
