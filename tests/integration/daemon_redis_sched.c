/* SPDX-License-Identifier: MIT */
/*
 * daemon_redis_sched.c — job scheduling in a fleet ([store] backend = redis,
 * daemon/store/store-redis-sched.c): two real fiberd hosts on one private redis-server
 * (redis_fleet.c; skipped, saying why, where redis-server is not installed).
 *
 * What is checked:
 *  - delayed jobs submitted through one host wait in the fleet's schedule set
 *    (fiberd:scheduled), read `scheduled` through the other host, and each runs exactly
 *    once, on either host, no sooner than its due time; how late each started is
 *    printed (the mover polls every 50 ms at most);
 *  - a delayed job whose submitting host is killed (kill -9) before it is due runs on
 *    the other host, once, after its due time;
 *  - a job that came due while every host was down runs once the first host is back;
 *  - a flaky job with max_attempts: its first run fails, the host that ran it is
 *    killed while the retry waits in the schedule set, and the other host runs the next
 *    attempts: it ends done, every failed run listed in `errors`; a job out of attempts
 *    ends dead; a job.run on a one-host fleet follows its job through two hand-backs;
 *  - an idempotency key is the fleet's: a repeat through the other host answers the
 *    first job's id (`existing`), job.run with it answers that job's record; the key
 *    has no expiry while the job runs and the key window once it ended;
 *  - job.cancel of a scheduled job through the host that did not submit it ends it
 *    cancelled at once, off the schedule set, and it never runs;
 *  - dependencies across hosts: a job submitted through one host after two jobs of the
 *    other waits (in both their fiberd:dependents sets) and starts only once both ended;
 *    after a job that is done it is queued at once; a dependency that fails fails the
 *    chain after it, each naming the job it ran after; a job after a failed one is
 *    refused; a waiting job cancelled through the other host stays cancelled when its
 *    dependency ends;
 *  - a job whose plugin no live host loads (its host killed, the other without it) stays
 *    queued in the stream: the host without it says so once however often its entry
 *    comes back to it, claims no takeover, and the job runs once a host that loads the
 *    plugin is back.
 *
 * Every wait is a bounded poll of a condition; the intervals are tens to hundreds of
 * milliseconds.
 */
#include "tests/integration/fiberd_harness.h"
#include "tests/integration/redis_fleet.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static Fiberd host_a, host_b;

static void teardown(void)
{
        fiberd_stop(&host_a);
        fiberd_stop(&host_b);
        redis_fleet_stop();
}

TestSuite(daemon_redis_sched, .fini = teardown, .timeout = 90);

#define FLAKY_SO FIBERD_TEST_PLUGIN_DIR "/flaky.so"

/* Starts fiberd @d as fleet node @node with the bundled @plugins and @extra (or NULL). */
static void host_start_with(Fiberd *d, const char *node, const char *plugins, const char *extra)
{
        char config[512];

        snprintf(config, sizeof(config),
                 "[jobs]\nmax_running = 4\n"
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = %s\n"
                 "claim_idle_ms = 500\n",
                 redis_fleet_sock(), node);
        fiberd_start(
                d,
                &(FiberdOpts){.config = config, .plugins = plugins, .extra = extra, .workers = 2});
}

/* Starts fiberd @d as fleet node @node with echo, sleep and the flaky test plugin. */
static void host_start(Fiberd *d, const char *node)
{
        host_start_with(d, node, "echo sleep", FLAKY_SO);
}

static uint64_t wall_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Submission options; zero fields are left out. */
typedef struct Opts {
        uint64_t delay_ms, max_attempts, backoff_ms;
        const char *key;
        const uint64_t *after;
        size_t n_after;
} Opts;

/* Packs job.submit's or job.run's [plugin, {args}, {options}]. */
static void pack_submission(msgpack_packer *pk, const char *plugin, const Arg *args, size_t nargs,
                            const Opts *o)
{
        ipc_pack_cstr(pk, plugin);
        msgpack_pack_map(pk, (uint32_t)nargs);
        for (size_t i = 0; i < nargs; i++) {
                ipc_pack_cstr(pk, args[i].key);
                if (args[i].s)
                        ipc_pack_cstr(pk, args[i].s);
                else
                        msgpack_pack_int64(pk, args[i].i);
        }
        msgpack_pack_map(pk, !!o->delay_ms + !!o->max_attempts + !!o->backoff_ms + !!o->key +
                                     !!o->n_after);
        if (o->delay_ms)
                ipc_pack_kv_uint(pk, "delay_ms", o->delay_ms);
        if (o->max_attempts)
                ipc_pack_kv_uint(pk, "max_attempts", o->max_attempts);
        if (o->backoff_ms)
                ipc_pack_kv_uint(pk, "backoff_ms", o->backoff_ms);
        if (o->key) {
                ipc_pack_cstr(pk, "key");
                ipc_pack_cstr(pk, o->key);
        }
        if (o->n_after) {
                ipc_pack_cstr(pk, "after");
                msgpack_pack_array(pk, (uint32_t)o->n_after);
                for (size_t i = 0; i < o->n_after; i++)
                        msgpack_pack_uint64(pk, o->after[i]);
        }
}

/* job.submit through @c (asserts it answered); *@existing: the answer said so. */
static uint64_t submit(Client *c, const char *plugin, const Arg *args, size_t nargs, const Opts *o,
                       bool *existing)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);
        const msgpack_object *e;
        uint64_t id;
        Reply rp;

        cr_assert(pk);
        pack_submission(pk, plugin, args, nargs, o);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.submit %s: %s %s", plugin, rp.st.code, rp.st.message);
        id = map_uint(rp.result, "id");
        e = map_get(rp.result, "existing");
        if (existing)
                *existing = e && e->type == MSGPACK_OBJECT_BOOLEAN && e->via.boolean;
        reply_clear(&rp);
        return id;
}

/* job.status of @id through @c into @rp (the caller clears it); asserts it answered. */
static void status(Client *c, uint64_t id, Reply *rp)
{
        rpc_simple(c, "job.status", 1, &id, rp);
        cr_assert_eq(rp->r, 0, "job.status %llu: %s", (unsigned long long)id, rp->st.message);
}

/* The state of job @id through @c, into @buf (32 bytes). */
static void state_of(Client *c, uint64_t id, char *buf)
{
        Reply rp;

        status(c, id, &rp);
        snprintf(buf, 32, "%s", map_str(rp.result, "state"));
        reply_clear(&rp);
}

/* Polls job @id through @c every 20 ms until its state is @want (asserts, @ms at most). */
static void wait_state(Client *c, uint64_t id, const char *want, uint64_t ms)
{
        uint64_t deadline = fiberd_now_ms() + ms;
        char state[32];

        for (;;) {
                state_of(c, id, state);
                if (strcmp(state, want) == 0)
                        return;
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s after %llu ms, not %s",
                          (unsigned long long)id, state, (unsigned long long)ms, want);
                usleep(20000);
        }
}

/* Is job @id in the fleet's schedule set? */
static bool in_schedule_set(uint64_t id)
{
        char args[96];

        snprintf(args, sizeof(args), "ZSCORE fiberd:scheduled %llu", (unsigned long long)id);
        return redis_fleet_cli_int(args) > 0;
}

/* ------------------------------------------------------------ delayed jobs ------- */

#define DELAYED_JOBS 12

Test(daemon_redis_sched, delayed_jobs_run_once_on_either_host_after_their_due_time)
{
        uint64_t ids[DELAYED_JOBS], due[DELAYED_JOBS], late_max = 0, late_sum = 0;
        Client *a, *b;
        char state[32];
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        for (int i = 0; i < DELAYED_JOBS; i++) {
                Arg arg = ARG_I("n", i);
                ids[i] = submit(a, "echo", &arg, 1, &(Opts){.delay_ms = 300 + 40 * (uint64_t)i},
                                NULL);
                cr_assert(in_schedule_set(ids[i]), "job %llu is not in fiberd:scheduled",
                          (unsigned long long)ids[i]);
        }
        /* the other host reads the shared record: scheduled, with its due time (the last
         * job's, submitted a moment ago and due in 740 ms: the first may have run by now,
         * since each submission above also asks redis-cli) */
        status(b, ids[DELAYED_JOBS - 1], &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "scheduled");
        due[0] = map_uint(rp.result, "run_at_ms");
        cr_assert(due[0] != UINT64_MAX && due[0] > wall_ms() - 1000, "run_at_ms %llu",
                  (unsigned long long)due[0]);
        reply_clear(&rp);
        for (int i = 0; i < DELAYED_JOBS; i++) {
                uint64_t started, late;
                rpc_job_wait(i % 2 ? a : b, ids[i], 10000, &rp);
                cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)ids[i], rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %llu",
                                 (unsigned long long)ids[i]);
                cr_assert_eq(map_uint(rp.result, "attempt"), 0, "job %llu ran twice",
                             (unsigned long long)ids[i]);
                due[i] = map_uint(rp.result, "run_at_ms");
                started = map_uint(rp.result, "started_ms");
                cr_assert(started >= due[i], "job %llu started at %llu, before its due time %llu",
                          (unsigned long long)ids[i], (unsigned long long)started,
                          (unsigned long long)due[i]);
                late = started - due[i];
                late_sum += late;
                late_max = late > late_max ? late : late_max;
                reply_clear(&rp);
        }
        fprintf(stderr,
                "daemon_redis_sched: %d delayed jobs started %llu ms late on average, %llu ms "
                "at most\n",
                DELAYED_JOBS, (unsigned long long)(late_sum / DELAYED_JOBS),
                (unsigned long long)late_max);
        cr_assert_lt(late_max, 1000, "a job started %llu ms after its due time",
                     (unsigned long long)late_max);
        /* each ran once: the hosts' done counters add up; the set is empty */
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), DELAYED_JOBS);
        cr_assert_eq(redis_fleet_cli_int("ZCARD fiberd:scheduled"), 0);
        state_of(a, ids[DELAYED_JOBS - 1], state);
        cr_assert_str_eq(state, "done");
        client_free(a);
        client_free(b);
}

Test(daemon_redis_sched, a_delayed_job_of_a_killed_host_runs_on_the_other)
{
        Client *a, *b;
        uint64_t id, due, started;
        int status_;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        id = submit(a, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.delay_ms = 800}, NULL);
        client_free(a);
        status_ = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL, "status 0x%x", status_);
        rpc_job_wait(b, id, 10000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_uint(rp.result, "attempt"), 0);
        due = map_uint(rp.result, "run_at_ms");
        started = map_uint(rp.result, "started_ms");
        cr_assert(started >= due, "started at %llu, before its due time %llu",
                  (unsigned long long)started, (unsigned long long)due);
        reply_clear(&rp);
        /* once: one final state, on the host that is left */
        cr_assert_eq(rpc_stats_jobs(b, "done"), 1);
        cr_assert_eq(redis_fleet_cli_int("ZCARD fiberd:scheduled"), 0);
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), 1, "moved to the stream once");
        client_free(b);
}

Test(daemon_redis_sched, a_job_due_while_every_host_was_down_runs_when_one_is_back)
{
        Client *a, *b;
        uint64_t id, due, started, back;
        int status_;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        a = fiberd_connect(&host_a);
        id = submit(a, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.delay_ms = 200}, NULL);
        client_free(a);
        status_ = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL, "status 0x%x", status_);
        usleep(500000); /* past its due time, with no host up */
        cr_assert(in_schedule_set(id), "job %llu left the set with every host down",
                  (unsigned long long)id);
        back = wall_ms();
        host_start(&host_b, "b");
        b = fiberd_connect(&host_b);
        rpc_job_wait(b, id, 10000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        due = map_uint(rp.result, "run_at_ms");
        started = map_uint(rp.result, "started_ms");
        cr_assert(back > due && started >= back,
                  "due at %llu, started at %llu: before the host was back at %llu",
                  (unsigned long long)due, (unsigned long long)started, (unsigned long long)back);
        reply_clear(&rp);
        cr_assert_eq(rpc_stats_jobs(b, "done"), 1);
        client_free(b);
}

/* ------------------------------------------------------------ retries ------------ */

/* The `errors` of record @rec: asserts there are @n, attempts 0 .. n-1 in order. */
static void check_errors(const msgpack_object *rec, uint32_t n)
{
        const msgpack_object *errors = map_get(rec, "errors");

        cr_assert(errors && errors->type == MSGPACK_OBJECT_ARRAY, "no errors array");
        cr_assert_eq(errors->via.array.size, n, "%u errors listed, not %u", errors->via.array.size,
                     n);
        for (uint32_t i = 0; i < n; i++) {
                const msgpack_object *e = &errors->via.array.ptr[i];
                cr_assert_eq(map_uint(e, "attempt"), i, "error %u: attempt %llu", i,
                             (unsigned long long)map_uint(e, "attempt"));
                cr_assert(strlen(map_str(e, "code")) > 0, "error %u has no code", i);
                cr_assert(map_uint(e, "finished_ms") != UINT64_MAX, "error %u: no finished_ms", i);
        }
}

Test(daemon_redis_sched, a_retry_runs_on_the_other_host_when_the_first_is_killed)
{
        Client *a, *b, *runner_c, *other_c;
        Fiberd *runner, *other;
        uint64_t id, deadline;
        int status_;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        /* flaky fails the first run of a job on each host (its count is per process) */
        id = submit(a, "flaky", (Arg[]){ARG_I("fail", 1)}, 1,
                    &(Opts){.max_attempts = 3, .backoff_ms = 600}, NULL);
        wait_state(b, id, "retrying", 10000);
        /* handed back: in the fleet's schedule set, its stream entry acknowledged */
        cr_assert(in_schedule_set(id), "the retry of job %llu is not in fiberd:scheduled",
                  (unsigned long long)id);
        cr_assert_eq(redis_fleet_cli_int("XPENDING fiberd:jobs fiberd"), 0,
                     "the failed run's entry is still pending");
        status(b, id, &rp);
        cr_assert_eq(map_uint(rp.result, "attempt"), 1);
        cr_assert(map_uint(rp.result, "next_attempt_ms") != UINT64_MAX, "no next_attempt_ms");
        check_errors(rp.result, 1);
        reply_clear(&rp);
        /* which host ran the first attempt: its log says the attempt failed */
        deadline = fiberd_now_ms() + 5000;
        for (;;) {
                if (fiberd_log_contains(&host_a, "attempt 1 of 3 failed")) {
                        runner = &host_a, other = &host_b, runner_c = a, other_c = b;
                        break;
                }
                if (fiberd_log_contains(&host_b, "attempt 1 of 3 failed")) {
                        runner = &host_b, other = &host_a, runner_c = b, other_c = a;
                        break;
                }
                cr_assert(fiberd_now_ms() < deadline, "no host logged the failed attempt");
                usleep(20000);
        }
        client_free(runner_c);
        status_ = fiberd_signal_and_wait(runner, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL, "status 0x%x", status_);
        /* the other host runs attempt 1 (its first run of it fails too) and attempt 2 */
        rpc_job_wait(other_c, id, 20000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "%s",
                         map_str(map_get(rp.result, "error"), "message"));
        cr_assert_eq(map_uint(rp.result, "attempt"), 2);
        check_errors(rp.result, 2);
        reply_clear(&rp);
        cr_assert(fiberd_log_contains(other, "attempt 2 of 3 failed"),
                  "the other host did not run attempt 1");
        cr_assert_eq(rpc_stats_jobs(other_c, "done"), 1);
        cr_assert_eq(redis_fleet_cli_int("ZCARD fiberd:scheduled"), 0);
        client_free(other_c);
}

Test(daemon_redis_sched, a_fleet_job_out_of_attempts_ends_dead)
{
        Client *a, *b;
        uint64_t id;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        id = submit(a, "flaky", (Arg[]){ARG_I("fail", 10)}, 1,
                    &(Opts){.max_attempts = 3, .backoff_ms = 20}, NULL);
        rpc_job_wait(b, id, 20000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "dead");
        cr_assert_eq(map_uint(rp.result, "attempt"), 2);
        check_errors(rp.result, 3);
        reply_clear(&rp);
        cr_assert_eq(rpc_stats_jobs(a, "dead") + rpc_stats_jobs(b, "dead"), 1);
        cr_assert_eq(redis_fleet_cli_int("ZCARD fiberd:scheduled"), 0);
        client_free(a);
        client_free(b);
}

Test(daemon_redis_sched, a_wait_on_the_host_that_ran_a_failed_attempt_follows_the_retry)
{
        uint64_t id, runs;
        uint32_t msgid;
        msgpack_packer *pk;
        Client *a;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a"); /* one host: it runs every attempt, handing each back */
        a = fiberd_connect(&host_a);
        pk = client_request(a, "job.run", 4, &msgid);
        cr_assert(pk);
        /* each run takes 200 ms: the wait, polling at most 100 ms apart, finds the job in
         * this host's table and waits on it there when its run fails */
        pack_submission(pk, "flaky", (Arg[]){ARG_I("fail", 2), ARG_I("ms", 200)}, 2,
                        &(Opts){.max_attempts = 3, .backoff_ms = 50});
        msgpack_pack_uint64(pk, 10000);
        rpc_wait_reply(a, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        id = map_uint(rp.result, "id");
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %llu: %s",
                         (unsigned long long)id, map_str(rp.result, "state"));
        cr_assert_eq(map_uint(rp.result, "attempt"), 2);
        check_errors(rp.result, 2);
        runs = map_uint(map_get(rp.result, "result"), "runs");
        cr_assert_eq(runs, 3, "flaky counted %llu runs", (unsigned long long)runs);
        reply_clear(&rp);
        cr_assert(fiberd_log_contains(&host_a, "attempt 2 of 3 failed"));
        cr_assert_eq(rpc_stats_jobs(a, "done"), 1);
        cr_assert_eq(rpc_stats_jobs(a, "retrying"), 0, "a handed-back retry is still counted here");
        client_free(a);
}

/* ------------------------------------------------------------ keys --------------- */

Test(daemon_redis_sched, a_key_repeated_through_the_other_host_answers_the_first_job)
{
        char args[128], state[32];
        Client *a, *b;
        uint64_t first, again, other;
        bool existing = false;
        long long ttl;
        uint32_t msgid;
        msgpack_packer *pk;
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        first = submit(a, "sleep", (Arg[]){ARG_I("ms", 600)}, 1, &(Opts){.key = "nightly-7"},
                       &existing);
        cr_assert(!existing);
        again = submit(b, "sleep", (Arg[]){ARG_I("ms", 600)}, 1, &(Opts){.key = "nightly-7"},
                       &existing);
        cr_assert(existing, "the repeat through b made a new job");
        cr_assert_eq(again, first, "the repeat through b answered %llu, not %llu",
                     (unsigned long long)again, (unsigned long long)first);
        /* while the job is not final its key does not expire */
        snprintf(args, sizeof(args), "TTL fiberd:key:%u:nightly-7", (unsigned)getuid());
        cr_assert_eq(redis_fleet_cli_int(args), -1, "the key expires while its job runs");
        /* job.run with the key through b: the first job's record, once it is done */
        pk = client_request(b, "job.run", 4, &msgid);
        cr_assert(pk);
        pack_submission(pk, "sleep", (Arg[]){ARG_I("ms", 600)}, 1, &(Opts){.key = "nightly-7"});
        msgpack_pack_uint64(pk, 10000);
        rpc_wait_reply(b, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, "id"), first);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        /* ended: the key answers for the window (a day by default), then expires */
        ttl = redis_fleet_cli_int(args);
        cr_assert(ttl > 0 && ttl <= 86400, "the key's TTL is %lld", ttl);
        again = submit(b, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, &(Opts){.key = "nightly-7"},
                       &existing);
        cr_assert(existing && again == first, "after the job ended the key answered %llu",
                  (unsigned long long)again);
        /* another key is another job */
        other = submit(b, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, &(Opts){.key = "nightly-8"},
                       &existing);
        cr_assert(!existing && other != first);
        state_of(a, first, state);
        cr_assert_str_eq(state, "done");
        client_free(a);
        client_free(b);
}

/* ------------------------------------------------------------ cancel ------------- */

Test(daemon_redis_sched, a_scheduled_job_is_cancelled_through_the_other_host)
{
        Client *a, *b;
        uint64_t id;
        char state[32];
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        id = submit(a, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.delay_ms = 400}, NULL);
        rpc_simple(b, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "job.cancel through b: %s %s", rp.st.code, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), "CANCELLED");
        reply_clear(&rp);
        cr_assert(!in_schedule_set(id), "a cancelled job stays in fiberd:scheduled");
        usleep(700000); /* past its due time: it never runs */
        state_of(a, id, state);
        cr_assert_str_eq(state, "cancelled");
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), 0);
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), 0);
        client_free(a);
        client_free(b);
}

/* ------------------------------------------------------------ dependencies ------- */

/* Does job @id have a set of waiting dependents in Redis? */
static bool has_dependents(uint64_t id)
{
        char args[96];

        snprintf(args, sizeof(args), "EXISTS fiberd:dependents:%llu", (unsigned long long)id);
        return redis_fleet_cli_int(args) == 1;
}

Test(daemon_redis_sched, a_job_after_another_hosts_jobs_runs_once_they_are_done)
{
        uint64_t first, second, waiting, done_id, deps[2];
        uint64_t finished_first, finished_second;
        Client *a, *b;
        char state[32];
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        done_id = submit(a, "echo", (Arg[]){ARG_I("n", 0)}, 1, &(Opts){0}, NULL);
        wait_state(a, done_id, "done", 10000);
        first = submit(a, "sleep", (Arg[]){ARG_I("ms", 300)}, 1, &(Opts){0}, NULL);
        second = submit(a, "sleep", (Arg[]){ARG_I("ms", 500)}, 1, &(Opts){0}, NULL);
        deps[0] = first;
        deps[1] = second;
        /* through the other host: it waits for both, in the sets of both */
        waiting = submit(b, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.after = deps, .n_after = 2},
                         NULL);
        state_of(a, waiting, state);
        cr_assert_str_eq(state, "waiting");
        cr_assert(has_dependents(first) && has_dependents(second),
                  "the waiting job is not in its dependencies' sets");
        rpc_job_wait(a, waiting, 10000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_get(rp.result, "after")->via.array.size, 2);
        reply_clear(&rp);
        /* it started only after both had ended */
        status(b, first, &rp);
        finished_first = map_uint(rp.result, "finished_ms");
        reply_clear(&rp);
        status(b, second, &rp);
        finished_second = map_uint(rp.result, "finished_ms");
        reply_clear(&rp);
        status(b, waiting, &rp);
        cr_assert_geq(map_uint(rp.result, "started_ms"), finished_first);
        cr_assert_geq(map_uint(rp.result, "started_ms"), finished_second);
        reply_clear(&rp);
        cr_assert(!has_dependents(first) && !has_dependents(second));
        /* after a job that is done already: queued at once */
        deps[0] = done_id;
        waiting = submit(b, "echo", (Arg[]){ARG_I("n", 2)}, 1, &(Opts){.after = deps, .n_after = 1},
                         NULL);
        wait_state(a, waiting, "done", 10000);
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), 5);
        client_free(a);
        client_free(b);
}

Test(daemon_redis_sched, a_failed_dependency_fails_the_chain_after_it)
{
        uint64_t dep, mid, last, ids[1];
        Client *a, *b;
        Reply rp;
        char want[128];

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        /* scheduled, so not final yet when the others are submitted; it fails at once */
        dep = submit(a, "flaky", (Arg[]){ARG_I("fail", 5)}, 1, &(Opts){.delay_ms = 300}, NULL);
        ids[0] = dep;
        mid = submit(b, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.after = ids, .n_after = 1},
                     NULL);
        ids[0] = mid;
        last = submit(a, "echo", (Arg[]){ARG_I("n", 2)}, 1, &(Opts){.after = ids, .n_after = 1},
                      NULL);
        rpc_job_wait(b, last, 10000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), "FAILED_PRECONDITION");
        snprintf(want, sizeof(want), "job %llu, which this job runs after, ended failed",
                 (unsigned long long)mid);
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "message"), want);
        reply_clear(&rp);
        status(a, mid, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        snprintf(want, sizeof(want), "job %llu, which this job runs after, ended failed",
                 (unsigned long long)dep);
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "message"), want);
        reply_clear(&rp);
        /* a job after a failed one is refused at once */
        ids[0] = dep;
        {
                uint32_t msgid;
                msgpack_packer *pk = client_request(b, "job.submit", 3, &msgid);
                pack_submission(pk, "echo", NULL, 0, &(Opts){.after = ids, .n_after = 1});
                rpc_wait_reply(b, msgid, &rp);
                cr_assert_neq(rp.r, 0, "a job after a failed one was accepted");
                cr_assert_str_eq(rp.st.code, "FAILED_PRECONDITION", "%s", rp.st.message);
                reply_clear(&rp);
        }
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), 0);
        client_free(a);
        client_free(b);
}

Test(daemon_redis_sched, a_waiting_job_is_cancelled_through_the_other_host)
{
        uint64_t dep, waiting, ids[1];
        Client *a, *b;
        char state[32];
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        dep = submit(a, "sleep", (Arg[]){ARG_I("ms", 400)}, 1, &(Opts){0}, NULL);
        ids[0] = dep;
        waiting = submit(a, "echo", (Arg[]){ARG_I("n", 1)}, 1, &(Opts){.after = ids, .n_after = 1},
                         NULL);
        rpc_simple(b, "job.cancel", 1, &waiting, &rp);
        cr_assert_eq(rp.r, 0, "job.cancel through b: %s %s", rp.st.code, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        reply_clear(&rp);
        wait_state(b, dep, "done", 10000);
        usleep(100000); /* its dependency's end does not bring it back */
        state_of(a, waiting, state);
        cr_assert_str_eq(state, "cancelled");
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), 1);
        cr_assert(!has_dependents(dep));
        client_free(a);
        client_free(b);
}

/* ------------------------------------------------------------ a plugin no host loads */

/* The lines of @d's log (this run's) that contain @needle. */
static unsigned log_count(const Fiberd *d, const char *needle)
{
        char line[2048];
        unsigned n = 0;
        FILE *f = fopen(d->log, "r");

        cr_assert(f, "%s", d->log);
        while (fgets(line, sizeof(line), f))
                n += strstr(line, needle) != NULL;
        fclose(f);
        return n;
}

/* How often the stream's oldest pending entry was delivered (XPENDING's count); 0 none. */
static long long deliveries(void)
{
        return redis_fleet_cli_int("EVAL \"local p = redis.call('XPENDING', KEYS[1], ARGV[1], "
                                   "'-', '+', 1) return p[1] and p[1][4] or 0\" "
                                   "1 fiberd:jobs fiberd");
}

#define DECLINED "no plugin by that name is loaded on this host"

Test(daemon_redis_sched, a_job_whose_plugin_no_host_loads_waits_until_one_does)
{
        uint64_t id, deadline;
        int status_;
        Client *a, *b;
        char state[32];
        Reply rp;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        a = fiberd_connect(&host_a);
        /* held first, so that no host takes it before the one that loads sleep is gone */
        id = submit(a, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, &(Opts){.delay_ms = 200}, NULL);
        client_free(a);
        status_ = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status_) && WTERMSIG(status_) == SIGKILL, "status 0x%x", status_);

        host_start_with(&host_b, "b", "echo", NULL);
        b = fiberd_connect(&host_b);
        /* b moves it to the stream when due, reads it, leaves it; its entry idles past
         * claim_idle_ms and b takes it again, and again */
        deadline = fiberd_now_ms() + 20000;
        while (deliveries() < 4) {
                cr_assert(fiberd_now_ms() < deadline, "job %llu's entry was delivered %lld times",
                          (unsigned long long)id, deliveries());
                usleep(50000);
        }
        cr_assert_eq(log_count(&host_b, DECLINED), 1,
                     "host b said %u times that it does not load the job's plugin",
                     log_count(&host_b, DECLINED));
        cr_assert(!fiberd_log_contains(&host_b, "taken over from a silent host"),
                  "a job b left in the stream was logged as taken over");
        state_of(b, id, state);
        cr_assert_str_eq(state, "queued");

        /* a host that loads sleep is back: the job runs there, once */
        fiberd_restart(&host_a);
        rpc_job_wait(b, id, 15000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        a = fiberd_connect(&host_a);
        cr_assert_eq(rpc_stats_jobs(a, "done"), 1);
        client_free(a);
        client_free(b);
}

/* job.run of sleep {ms: @ms} through @r, an fd passed along when @fd >= 0 (then the job
 * runs here only, as a job with fds does); not waited for: its msgid. */
static uint32_t run_sleep_send(Client *r, uint64_t ms, int fd)
{
        static const char fd0[4] = {0, 0, 0, 0};
        msgpack_packer *pk;
        uint32_t msgid;

        if (fd >= 0)
                cr_assert_eq(client_request_fds(r, &fd, 1), 0, "client_request_fds");
        pk = client_request(r, "job.run", 4, &msgid);
        cr_assert(pk);
        ipc_pack_cstr(pk, "sleep");
        msgpack_pack_map(pk, fd >= 0 ? 2 : 1);
        ipc_pack_kv_uint(pk, "ms", ms);
        if (fd >= 0) {
                ipc_pack_cstr(pk, "file");
                msgpack_pack_ext(pk, 4, IPC_EXT_FD);
                msgpack_pack_ext_body(pk, fd0, 4);
        }
        msgpack_pack_map(pk, 0);
        msgpack_pack_nil(pk); /* no wait limit: it runs on this host, written at its end */
        cr_assert_eq(client_flush(r, 5000, NULL), 0);
        return msgid;
}

/* The id of a running sleep job other than @not, from @c's host's job.list (10 s). */
static uint64_t running_sleep(Client *c, uint64_t not )
{
        uint64_t deadline = fiberd_now_ms() + 10000, id = 0;

        while (!id) {
                msgpack_packer *pk;
                uint32_t list_id;
                Reply rp;
                pk = client_request(c, "job.list", 1, &list_id);
                cr_assert(pk);
                msgpack_pack_map(pk, 0);
                rpc_wait_reply(c, list_id, &rp);
                cr_assert_eq(rp.r, 0, "job.list: %s", rp.st.message);
                for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                        const msgpack_object *j = &rp.result->via.array.ptr[i];
                        if (!strcmp(map_str(j, "plugin"), "sleep") &&
                            !strcmp(map_str(j, "state"), "running") && map_uint(j, "id") != not )
                                id = map_uint(j, "id");
                }
                reply_clear(&rp);
                cr_assert(id || fiberd_now_ms() < deadline, "the job.run never ran");
                if (!id)
                        usleep(10000);
        }
        return id;
}

/*
 * A job.run that runs on its host has no record in Redis until it ends (one run here
 * off the stream, and one with an fd), and the fleet waits only on a job whose record
 * exists. A job submitted through that host to run after it is refused
 * (FAILED_PRECONDITION, saying why), not accepted and run at once; once the job.run
 * ended, the same submission is accepted and runs.
 */
Test(daemon_redis_sched, a_job_after_a_job_run_in_progress_is_refused_until_it_ended)
{
        uint64_t run_id = 0, later;
        const uint64_t *deps = &run_id;
        msgpack_packer *pk;
        uint32_t msgid, msgid_after;
        char state[32];
        Client *a, *r;
        Reply rp;
        int fd;

        redis_fleet_start("daemon_redis_sched");
        host_start(&host_a, "a");
        a = fiberd_connect(&host_a);
        r = fiberd_connect(&host_a);
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert(fd >= 0, "open /dev/null: %s", strerror(errno));
        for (int with_fd = 0; with_fd < 2; with_fd++) {
                /* long enough for the refusal below on a loaded machine */
                msgid = run_sleep_send(r, 4000, with_fd ? fd : -1);
                run_id = running_sleep(a, run_id);
                pk = client_request(a, "job.submit", 3, &msgid_after);
                cr_assert(pk);
                pack_submission(pk, "echo", (Arg[]){ARG_I("n", 1)}, 1,
                                &(Opts){.after = deps, .n_after = 1});
                rpc_wait_reply(a, msgid_after, &rp);
                cr_assert_neq(rp.r, 0, "a job after a running job.run (fd: %d) was accepted",
                              with_fd);
                cr_assert_str_eq(rp.st.code ? rp.st.code : "", "FAILED_PRECONDITION", "%s",
                                 rp.st.message);
                cr_assert(strstr(rp.st.message, "job.run"), "%s", rp.st.message);
                reply_clear(&rp);
                rpc_wait_reply(r, msgid, &rp);
                cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
                cr_assert_eq(map_uint(rp.result, "id"), run_id);
                reply_clear(&rp);
                /* ended and written: after it, a job runs */
                later = submit(a, "echo", (Arg[]){ARG_I("n", 2)}, 1,
                               &(Opts){.after = deps, .n_after = 1}, NULL);
                wait_state(a, later, "done", 10000);
                state_of(a, run_id, state);
                cr_assert_str_eq(state, "done");
        }
        close(fd);
        client_free(a);
        client_free(r);
}
