/* SPDX-License-Identifier: MIT */
/*
 * daemon_redis_schedules.c — periodic schedules in a fleet ([store] backend = redis,
 * daemon/server/schedfleet.c, daemon/store/store-redis-periodic.c): two real fiberd
 * hosts on one private redis-server (redis_fleet.c; skipped, saying why, where
 * redis-server is not installed).
 *
 * What is checked:
 *  - a schedule added through one host (every_ms 1000) is listed through the other
 *    within about a second (how long it took is printed), and is kept in Redis
 *    (fiberd:schedules); over four ticks and more the fleet holds exactly one job per
 *    tick: the jobs with the key schedule:<name>:<tick ms>, listed through one host
 *    (job.list walks the fleet), have no tick twice and none missing between the first
 *    and the last; both hosts' schedule.list name a job of the fleet as last_job;
 *  - kill -9 of the host that added it, between two ticks: the other host goes on
 *    firing (new ticks' jobs appear), still one job per tick and no tick missing;
 *  - a pause through one host stops the ticks on the other too (no new job for two and
 *    a half intervals, the other host lists it paused); a resume through the other
 *    starts them again; a remove through it ends the schedule on both hosts;
 *  - a name is the fleet's: an add of a name another host added is ALREADY_EXISTS, also
 *    when made at once, before the other host could have heard of it;
 *  - ticks missed while every host was down: after both were killed and stayed down
 *    for four intervals, the host that starts first submits one job for them with
 *    missed = run_once (the latest), none with skip; the second host to start adds no
 *    second one.
 *
 * Every wait is a bounded poll of a condition (tens to hundreds of milliseconds apart);
 * the checks that something does not happen watch for two and a half intervals.
 */
#include "tests/integration/fiberd_harness.h"
#include "tests/integration/redis_fleet.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long a change through one host may take to hold on the other (the hosts look
 * every 500 ms: SCHEDFLEET_CHECK_MS), with room for a loaded machine. */
#define SPREAD_MS 2500
#define WAIT_MS 15000
#define TICKS_MAX 256

static Fiberd host_a, host_b;

static void teardown(void)
{
        fiberd_stop(&host_a);
        fiberd_stop(&host_b);
        redis_fleet_stop();
}

TestSuite(daemon_redis_schedules, .fini = teardown, .timeout = 120);

/* Starts fiberd @d as fleet node @node with the echo plugin. */
static void host_start(Fiberd *d, const char *node)
{
        char config[512];

        snprintf(config, sizeof(config),
                 "[jobs]\nmax_running = 4\n"
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = %s\n"
                 "claim_idle_ms = 500\n",
                 redis_fleet_sock(), node);
        fiberd_start(d, &(FiberdOpts){.config = config, .plugins = "echo", .workers = 2});
}

static uint64_t wall_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* schedule.add [@name, {every_ms: 1000, missed: @missed}, "echo", {n: 1}, {}] into @rp
 * (the caller clears it); @missed NULL: left out. */
static void add(Client *c, const char *name, const char *missed, Reply *rp)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "schedule.add", 5, &msgid);

        cr_assert(pk);
        ipc_pack_cstr(pk, name);
        msgpack_pack_map(pk, missed ? 2 : 1);
        ipc_pack_kv_uint(pk, "every_ms", 1000);
        if (missed)
                ipc_pack_kv_cstr(pk, "missed", missed);
        ipc_pack_cstr(pk, "echo");
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_uint(pk, "n", 1);
        msgpack_pack_map(pk, 0);
        rpc_wait_reply(c, msgid, rp);
}

static void add_ok(Client *c, const char *name, const char *missed)
{
        Reply rp;

        add(c, name, missed, &rp);
        cr_assert_eq(rp.r, 0, "schedule.add %s: %s %s", name, rp.st.code, rp.st.message);
        reply_clear(&rp);
}

/* schedule.pause|resume|remove [@name] that must succeed. */
static void named_ok(Client *c, const char *method, const char *name)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, method, 1, &msgid);
        Reply rp;

        cr_assert(pk);
        ipc_pack_cstr(pk, name);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s %s: %s %s", method, name, rp.st.code, rp.st.message);
        reply_clear(&rp);
}

/* Is @name listed through @c? Its `paused` into *@paused, its last_job into *@last_job
 * (either may be NULL; last_job UINT64_MAX when nil). */
static bool listed(Client *c, const char *name, bool *paused, uint64_t *last_job)
{
        bool found = false;
        Reply rp;

        rpc_simple(c, "schedule.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "schedule.list: %s", rp.st.message);
        for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                const msgpack_object *s = &rp.result->via.array.ptr[i];
                if (strcmp(map_str(s, "name"), name) != 0)
                        continue;
                found = true;
                if (paused)
                        *paused = map_get(s, "paused")->via.boolean;
                if (last_job)
                        *last_job = map_uint(s, "last_job");
        }
        reply_clear(&rp);
        return found;
}

/* Polls until @name is (@want) or is not listed through @c; the ms it took (asserts
 * SPREAD_MS at most). */
static uint64_t wait_listed(Client *c, const char *name, bool want)
{
        uint64_t start = fiberd_now_ms();

        while (listed(c, name, NULL, NULL) != want) {
                cr_assert(fiberd_now_ms() - start < SPREAD_MS,
                          "schedule %s is %slisted after %d ms", name, want ? "not " : "still ",
                          SPREAD_MS);
                usleep(20000);
        }
        return fiberd_now_ms() - start;
}

/* TickJob - one job of a schedule, as job.list shows it. */
typedef struct TickJob {
        uint64_t tick; /* from its key schedule:<name>:<tick ms> */
        uint64_t id, created_ms;
} TickJob;

static int tick_cmp(const void *a, const void *b)
{
        uint64_t x = ((const TickJob *)a)->tick, y = ((const TickJob *)b)->tick;

        return x < y ? -1 : x > y;
}

/*
 * The jobs of @name in the whole fleet (job.list through @c: it walks the fleet), by
 * tick, into @jobs (TICKS_MAX); asserts that no tick has two jobs. Returns how many.
 */
static size_t fleet_ticks(Client *c, const char *name, TickJob *jobs)
{
        char prefix[96];
        size_t n = 0, plen = (size_t)snprintf(prefix, sizeof(prefix), "schedule:%s:", name);
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.list", 1, &msgid);
        Reply rp;

        cr_assert(pk);
        msgpack_pack_map(pk, 0);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.list: %s", rp.st.message);
        for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                const msgpack_object *j = &rp.result->via.array.ptr[i];
                const char *key = map_str(j, "key");
                if (strncmp(key, prefix, plen) != 0)
                        continue;
                cr_assert_lt(n, TICKS_MAX);
                jobs[n++] = (TickJob){.tick = strtoull(key + plen, NULL, 10),
                                      .id = map_uint(j, "id"),
                                      .created_ms = map_uint(j, "created_ms")};
        }
        reply_clear(&rp);
        qsort(jobs, n, sizeof(*jobs), tick_cmp);
        for (size_t i = 1; i < n; i++)
                cr_assert_neq(jobs[i].tick, jobs[i - 1].tick,
                              "%s: tick %llu has two jobs, %llu and %llu", name,
                              (unsigned long long)jobs[i].tick, (unsigned long long)jobs[i - 1].id,
                              (unsigned long long)jobs[i].id);
        return n;
}

/* Asserts @n jobs (by tick) are one interval (1 s) apart: no tick missing, none twice. */
static void check_every_tick(const TickJob *jobs, size_t n, const char *name)
{
        for (size_t i = 1; i < n; i++)
                cr_assert_eq(jobs[i].tick - jobs[i - 1].tick, 1000,
                             "%s: ticks %llu and %llu: %s between them", name,
                             (unsigned long long)jobs[i - 1].tick, (unsigned long long)jobs[i].tick,
                             jobs[i].tick - jobs[i - 1].tick > 1000 ? "a tick is missing"
                                                                    : "not 1 s");
}

/* Polls until the fleet holds at least @want jobs of @name (asserts WAIT_MS); how many. */
static size_t wait_ticks(Client *c, const char *name, size_t want, TickJob *jobs)
{
        uint64_t deadline = fiberd_now_ms() + WAIT_MS;
        size_t n;

        while ((n = fleet_ticks(c, name, jobs)) < want) {
                cr_assert(fiberd_now_ms() < deadline, "%s: %zu jobs after %d ms, not %zu", name, n,
                          WAIT_MS, want);
                usleep(100000);
        }
        return n;
}

/* Polls until a job of @name for a tick after @after_ms exists; returns that tick. */
static uint64_t wait_tick_after(Client *c, const char *name, uint64_t after_ms, TickJob *jobs)
{
        uint64_t deadline = fiberd_now_ms() + WAIT_MS;

        for (;;) {
                size_t n = fleet_ticks(c, name, jobs);
                if (n && jobs[n - 1].tick > after_ms)
                        return jobs[n - 1].tick;
                cr_assert(fiberd_now_ms() < deadline, "%s: no tick after %llu in %d ms", name,
                          (unsigned long long)after_ms, WAIT_MS);
                usleep(50000);
        }
}

/* Is job @id one of @jobs? */
static bool is_job_of(const TickJob *jobs, size_t n, uint64_t id)
{
        for (size_t i = 0; i < n; i++)
                if (jobs[i].id == id)
                        return true;
        return false;
}

/* ------------------------------------------------------------ one job per tick ---- */

Test(daemon_redis_schedules, a_schedule_added_on_one_host_ticks_once_in_the_fleet)
{
        uint64_t took, last_a = 0, last_b = 0;
        TickJob jobs[TICKS_MAX];
        char args[96];
        Client *a, *b;
        size_t n;

        redis_fleet_start("daemon_redis_schedules");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        add_ok(a, "beat", NULL);
        took = wait_listed(b, "beat", true);
        fprintf(stderr,
                "daemon_redis_schedules: a schedule added through a was listed through b "
                "after %llu ms\n",
                (unsigned long long)took);
        snprintf(args, sizeof(args), "HEXISTS fiberd:schedules %u:beat", (unsigned)getuid());
        cr_assert_eq(redis_fleet_cli_int(args), 1, "the schedule is not in fiberd:schedules");

        /* both hosts fire every tick: one job each, none missing (listed through b, then a) */
        n = wait_ticks(b, "beat", 5, jobs);
        check_every_tick(jobs, n, "beat");
        n = fleet_ticks(a, "beat", jobs);
        check_every_tick(jobs, n, "beat");
        /* each host names a job of the schedule's as its last one */
        cr_assert(listed(a, "beat", NULL, &last_a) && listed(b, "beat", NULL, &last_b));
        cr_assert(is_job_of(jobs, n, last_a), "a lists last_job %llu, not a job of beat",
                  (unsigned long long)last_a);
        cr_assert(is_job_of(jobs, n, last_b), "b lists last_job %llu, not a job of beat",
                  (unsigned long long)last_b);
        client_free(a);
        client_free(b);
}

Test(daemon_redis_schedules, a_host_killed_between_ticks_leaves_the_other_firing)
{
        TickJob jobs[TICKS_MAX];
        uint64_t killed_after;
        Client *a, *b;
        size_t n;
        int status;

        redis_fleet_start("daemon_redis_schedules");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        add_ok(a, "beat", NULL);
        wait_listed(b, "beat", true);
        n = wait_ticks(b, "beat", 2, jobs);
        /* just after a tick's job appeared: between two ticks */
        killed_after = wait_tick_after(b, "beat", jobs[n - 1].tick, jobs);
        client_free(a);
        status = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
        /* b goes on: two more ticks after the kill, and none missing */
        wait_tick_after(b, "beat", killed_after + 1000, jobs);
        n = fleet_ticks(b, "beat", jobs);
        check_every_tick(jobs, n, "beat");
        cr_assert(listed(b, "beat", NULL, NULL));
        client_free(b);
}

/* ------------------------------------------------------------ changes ------------- */

/* Asserts, for two and a half intervals, that the fleet holds @held jobs of @name. */
static void check_no_tick(Client *c, const char *name, size_t held, const char *why)
{
        uint64_t until = fiberd_now_ms() + 2500;
        TickJob jobs[TICKS_MAX];

        while (fiberd_now_ms() < until) {
                size_t n = fleet_ticks(c, name, jobs);
                cr_assert_eq(n, held, "%s: a %s schedule submitted (tick %llu)", name, why,
                             (unsigned long long)jobs[n - 1].tick);
                usleep(200000);
        }
}

Test(daemon_redis_schedules, pause_resume_and_remove_through_one_host_hold_on_the_other)
{
        TickJob jobs[TICKS_MAX];
        uint64_t until, took;
        Client *a, *b;
        size_t held;
        bool paused = false;

        redis_fleet_start("daemon_redis_schedules");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        add_ok(a, "beat", NULL);
        wait_listed(b, "beat", true);
        wait_ticks(b, "beat", 1, jobs);

        /* paused through b: a, which added it, stops too */
        named_ok(b, "schedule.pause", "beat");
        until = fiberd_now_ms() + SPREAD_MS;
        while (!(listed(a, "beat", &paused, NULL) && paused)) {
                cr_assert(fiberd_now_ms() < until, "a does not list beat paused after %d ms",
                          SPREAD_MS);
                usleep(20000);
        }
        usleep(200000); /* a tick a fired as the pause arrived has its job by now */
        held = fleet_ticks(b, "beat", jobs);
        check_no_tick(a, "beat", held, "paused");

        /* resumed through a: ticks again, through both */
        named_ok(a, "schedule.resume", "beat");
        wait_ticks(b, "beat", held + 2, jobs);
        cr_assert(listed(b, "beat", &paused, NULL) && !paused, "b lists beat paused");

        /* removed through a: gone on b, and no job after */
        named_ok(a, "schedule.remove", "beat");
        took = wait_listed(b, "beat", false);
        fprintf(stderr, "daemon_redis_schedules: a remove through a held on b after %llu ms\n",
                (unsigned long long)took);
        usleep(200000);
        held = fleet_ticks(b, "beat", jobs);
        check_no_tick(a, "beat", held, "removed");
        cr_assert_eq(redis_fleet_cli_int("HLEN fiberd:schedules"), 0);
        client_free(a);
        client_free(b);
}

Test(daemon_redis_schedules, a_name_another_host_added_is_taken)
{
        Client *a, *b;
        Reply rp;

        redis_fleet_start("daemon_redis_schedules");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        /* at once: b has most likely not heard of it yet (the fleet's row refuses it) */
        add_ok(a, "nightly", NULL);
        add(b, "nightly", NULL, &rp);
        cr_assert_neq(rp.r, 0, "b added a second schedule nightly");
        cr_assert_str_eq(rp.st.code, "ALREADY_EXISTS", "%s", rp.st.message);
        fprintf(stderr, "daemon_redis_schedules: the second add: %s\n", rp.st.message);
        reply_clear(&rp);
        /* and once b lists it */
        wait_listed(b, "nightly", true);
        add(b, "nightly", NULL, &rp);
        cr_assert_str_eq(rp.st.code, "ALREADY_EXISTS", "%s", rp.st.message);
        reply_clear(&rp);
        cr_assert_eq(redis_fleet_cli_int("HLEN fiberd:schedules"), 1);
        client_free(a);
        client_free(b);
}

/* ------------------------------------------------------------ the fleet down ------ */

/* The jobs of @jobs (@n) made at or after @from_ms, into @ret (by tick); how many. */
static size_t made_after(const TickJob *jobs, size_t n, uint64_t from_ms, TickJob *ret)
{
        size_t k = 0;

        for (size_t i = 0; i < n; i++)
                if (jobs[i].created_ms >= from_ms)
                        ret[k++] = jobs[i];
        return k;
}

Test(daemon_redis_schedules, ticks_missed_while_every_host_was_down_are_caught_up_once)
{
        TickJob jobs[TICKS_MAX], once[TICKS_MAX], skip[TICKS_MAX];
        uint64_t back, ready;
        size_t n_once, n_skip;
        Client *a, *b;
        int status;

        redis_fleet_start("daemon_redis_schedules");
        host_start(&host_a, "a");
        host_start(&host_b, "b");
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        add_ok(a, "once", "run_once");
        add_ok(a, "skip", "skip");
        wait_ticks(a, "once", 1, jobs);
        wait_ticks(a, "skip", 1, jobs);
        client_free(a);
        client_free(b);
        status = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status), "status 0x%x", status);
        status = fiberd_signal_and_wait(&host_b, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status), "status 0x%x", status);
        usleep(4500000); /* four intervals and more with no host up */
        back = wall_ms();
        fiberd_restart(&host_a);
        ready = wall_ms();
        fiberd_restart(&host_b);
        a = fiberd_connect(&host_a);
        b = fiberd_connect(&host_b);
        wait_tick_after(b, "once", ready + 1000, jobs);
        wait_tick_after(b, "skip", ready + 1000, jobs);

        /* a host that starts fires a tick that came due 2 s before or later, as the
         * others would; older ones the whole fleet missed: run_once submits one job for
         * the latest of them, skip none; the second host to start adds none */
        n_once = made_after(jobs, fleet_ticks(b, "once", jobs), back, once);
        n_skip = made_after(jobs, fleet_ticks(b, "skip", jobs), back, skip);
        cr_assert_geq(n_once, 2);
        cr_assert_geq(n_skip, 1);
        fprintf(stderr,
                "daemon_redis_schedules: back at %llu: run_once's first ticks after %lld and "
                "%lld ms, skip's after %lld ms\n",
                (unsigned long long)back, (long long)(once[0].tick - back),
                (long long)(once[1].tick - back), (long long)(skip[0].tick - back));
        cr_assert(once[0].tick + 3000 > back && once[0].tick + 2000 <= ready,
                  "run_once: the first job after the fleet was back is for tick %llu, not the "
                  "latest one missed before %llu",
                  (unsigned long long)once[0].tick, (unsigned long long)back);
        cr_assert(once[1].tick + 2000 > back, "run_once: a second missed tick %llu was caught up",
                  (unsigned long long)once[1].tick);
        cr_assert(skip[0].tick + 2000 > back, "skip: the missed tick %llu was caught up",
                  (unsigned long long)skip[0].tick);
        client_free(a);
        client_free(b);
}
