/* SPDX-License-Identifier: MIT */
/*
 * bench-fiber.c — fiberd's side of every benchmark figure, on the public runtime API
 * (scheduler/sched.h) only.
 *
 *  yield     a group with 1 worker; a starter fiber creates two fibers that each call
 *            fiber_yield() N times, then joins them: ns per switch = elapsed / 2N.
 *            "classes": the same on a group with two job classes (default 100 and
 *            batch 50 shares), the yielders in default.
 *  create    a group with 2 workers; one fiber creates N joinable fibers (each adds 1
 *            to a counter, like the Go peer's wg.Done) and then joins them all, in
 *            creation order: ns per fiber. Created from inside a fiber, as the daemon
 *            does, so the worker's stack cache is used. max_fibers is 2^k >= N, so
 *            -EAGAIN only happens for a smaller cap; then the oldest is joined first.
 *  skynet    a group with 2 workers; each fiber of a 10-ary tree with L leaves creates
 *            its 10 children, joins them and adds up their numbers; the sum must be
 *            L(L-1)/2 (499999500000 for 1,000,000). With the shared queue (flare's
 *            design, the default for a lone group) the tree is built breadth-first and
 *            up to ~1.11 L fibers are alive at once, so max_fibers and the run queue are
 *            2^k >= 1.12 L (2^21 for a million); with local deques ("local") it runs
 *            depth-first and a few hundred are. ms for the tree.
 *  pingpong  a group with 2 workers; two fibers bounce a token through two
 *            FiberSemaphores N times: ns per round trip.
 *  sleepers  a group with 2 workers; N fibers created from the main thread each loop
 *            in fiber_sleep_for(P ms, default 3 s) until released, so all are alive and parked at
 *            once; resident bytes per fiber = (RSS with them - RSS before) / N, with
 *            "before" taken after the group and the handle array exist.
 *  idle      a group with 2 workers and no fibers: CPU time of the whole process
 *            (getrusage(RUSAGE_SELF): workers, reactor, main) over S seconds, as % of
 *            one core, after 200 ms for the spinners to go to sleep.
 *  lateness  a group with 2 workers; G fibers each call fiber_sleep_for(1 ms) K times;
 *            lateness = wake-up time - (time before the call + 1 ms): p50 and p99, µs.
 *
 * Every call's result is checked; an error dies loudly (the table shows a failed row),
 * it is never folded into a number.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "scheduler/sched.h"
#include "tests/bench/bench.h"
#include "scheduler/base/macro.h"

static SchedulingGroup *group_start_policy(unsigned workers, size_t max_fibers,
                                           SchedQueuePolicy policy)
{
        SchedGroupConfig cfg = {
                .workers = workers,
                .runq_capacity = max_fibers,
                .max_fibers = max_fibers,
                .name = "bench",
                .queue_policy = policy,
                .control = BENCH_NO_MONITOR,
        };
        SchedulingGroup *g = NULL;
        int r = sched_group_new(&g, &cfg);

        if (r < 0)
                bench_die("sched_group_new(workers=%u, max_fibers=%zu): %s", workers, max_fibers,
                          strerror(-r));
        return g;
}

static SchedulingGroup *group_start(unsigned workers, size_t max_fibers)
{
        return group_start_policy(workers, max_fibers, SCHED_QUEUE_SHARED);
}

static Fiber *fiber_start(SchedulingGroup *g, FiberFn fn, void *arg)
{
        FiberAttr attr = {.group = g};
        Fiber *f = NULL;
        int r = fiber_create(&f, &attr, fn, arg);

        if (r < 0)
                bench_die("fiber_create: %s", strerror(-r));
        return f;
}

static void fiber_wait(Fiber *f)
{
        int r = fiber_join(f);

        if (r < 0)
                bench_die("fiber_join: %s", strerror(-r));
}

static void sleep_ns(uint64_t ns)
{
        struct timespec ts = {.tv_sec = (time_t)(ns / NSEC_PER_SEC),
                              .tv_nsec = (long)(ns % NSEC_PER_SEC)};

        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
                ;
}

/* ------------------------------------------------------------------ yield --------- */

typedef struct YieldRun {
        uint64_t rounds;
        uint64_t t0, t1;
} YieldRun;

static void yield_loop(void *arg)
{
        const YieldRun *y = arg;

        for (uint64_t i = 0; i < y->rounds; i++)
                if (fiber_yield() < 0)
                        bench_die("yield: fiber_yield failed");
}

/* Creates both loops before either runs (one worker), so every yield finds the other
 * one ready and really switches. */
static void yield_starter(void *arg)
{
        YieldRun *y = arg;
        Fiber *a = fiber_start(NULL, yield_loop, y);
        Fiber *b = fiber_start(NULL, yield_loop, y);

        y->t0 = bench_now_ns();
        fiber_wait(a);
        fiber_wait(b);
        y->t1 = bench_now_ns();
}

int bench_fiber_yield(int argc, char **argv)
{
        YieldRun y = {.rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 2000000)};
        SchedulingGroup *g;

        if (argc > 2 && !strcmp(argv[2], "classes")) {
                /* the daemon's shape: classes configured, the yielders in the default
                 * one (a yield then picks the class with the lowest vruntime) */
                static const SchedClassConfig classes[] = {{"default", 100}, {"batch", 50}};
                SchedGroupConfig cfg = {
                        .workers = 1,
                        .runq_capacity = bench_fibers_cap(16),
                        .max_fibers = bench_fibers_cap(16),
                        .name = "bench",
                        .classes = classes,
                        .nclasses = ELEMENTSOF(classes),
                        .control = BENCH_NO_MONITOR,
                };
                int r = sched_group_new(&g, &cfg);
                if (r < 0)
                        bench_die("sched_group_new(classes): %s", strerror(-r));
        } else if (argc > 2) {
                bench_die("yield: '%s' is not classes", argv[2]);
        } else {
                g = group_start(1, bench_fibers_cap(16));
        }

        fiber_wait(fiber_start(g, yield_starter, &y));
        sched_group_free(g);
        printf("%.2f\n", (double)(y.t1 - y.t0) / (double)(2 * y.rounds));
        return 0;
}

/* ------------------------------------------------------------------ create -------- */

typedef struct CreateRun {
        /* read by the creating loop: a line of their own, apart from what the children
         * write (Go's loop keeps n in a register and writes only wg and sum) */
        uint64_t n;
        bool latch;      /* detached fibers + a FiberLatch instead of joining handles */
        Fiber **handles; /* n, allocated and touched before the clock starts */
        uint64_t eagain; /* creations refused at max_fibers and retried */
        uint64_t t0, t1;
        /* written by the children */
        _Alignas(64) FiberLatch done; /* latch mode: counts the fibers still to finish */
        uint64_t ran;                 /* children that ran */
} CreateRun;

static void create_child(void *arg)
{
        CreateRun *c = arg;

        __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
        if (c->latch)
                fiber_latch_count_down(&c->done);
}

/* Join mode: create all, keeping each handle, then join all in creation order; at
 * max_fibers (-EAGAIN) join the oldest first. Latch mode: Go's WaitGroup shape. */
static void create_parent(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        CreateRun *c = arg;
        uint64_t joined = 0;

        c->t0 = bench_now_ns();
        if (c->latch)
                fiber_latch_add(&c->done, (int64_t)c->n);
        for (uint64_t i = 0; i < c->n; i++) {
                int r;
                while ((r = c->latch ? fiber_create(NULL, &detached, create_child, c)
                                     : fiber_create(&c->handles[i], NULL, create_child, c)) ==
                       -EAGAIN) {
                        c->eagain++;
                        if (c->latch)
                                fiber_yield();
                        else
                                fiber_wait(c->handles[joined++]);
                }
                if (r < 0)
                        bench_die("create: fiber_create #%llu: %s", (unsigned long long)i,
                                  strerror(-r));
        }
        if (c->latch && fiber_latch_wait(&c->done, SCHED_FOREVER) < 0)
                bench_die("create: fiber_latch_wait failed");
        while (!c->latch && joined < c->n)
                fiber_wait(c->handles[joined++]);
        c->t1 = bench_now_ns();
}

int bench_fiber_create(int argc, char **argv)
{
        CreateRun c = {.n = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000)};
        SchedulingGroup *g;

        if (argc > 2 && !strcmp(argv[2], "latch"))
                c.latch = true;
        else if (argc > 2 && strcmp(argv[2], "join"))
                bench_die("create: mode '%s' is neither join nor latch", argv[2]);
        g = group_start(2, bench_fibers_cap(c.n));
        fiber_latch_init(&c.done, 0);
        c.handles = calloc(c.n, sizeof(*c.handles));
        if (!c.handles)
                bench_die("create: out of memory");
        memset(c.handles, 0, c.n * sizeof(*c.handles));
        fiber_wait(fiber_start(g, create_parent, &c));
        sched_group_free(g);
        if (c.ran != c.n)
                bench_die("create: %llu fibers ran, want %llu", (unsigned long long)c.ran,
                          (unsigned long long)c.n);
        if (c.eagain)
                fprintf(stderr, "create: %llu creations hit max_fibers and waited\n",
                        (unsigned long long)c.eagain);
        printf("%.2f\n", (double)(c.t1 - c.t0) / (double)c.n);
        free(c.handles);
        return 0;
}

/* ------------------------------------------------------------------ skynet -------- */

typedef struct SkynetNode {
        uint64_t num;  /* first leaf number under this node */
        uint64_t size; /* leaves under this node */
        uint64_t sum;  /* out: sum of the leaf numbers */
} SkynetNode;

static void skynet_node(void *arg)
{
        SkynetNode *n = arg;
        SkynetNode kids[10];
        Fiber *h[10];
        uint64_t step, sum = 0;

        if (n->size == 1) {
                n->sum = n->num;
                return;
        }
        step = n->size / 10;
        for (int i = 0; i < 10; i++) {
                int r;
                kids[i] = (SkynetNode){.num = n->num + (uint64_t)i * step, .size = step};
                r = fiber_create(&h[i], NULL, skynet_node, &kids[i]);
                if (r < 0)
                        bench_die("skynet: fiber_create: %s", strerror(-r));
        }
        for (int i = 0; i < 10; i++) {
                fiber_wait(h[i]);
                sum += kids[i].sum;
        }
        n->sum = sum;
}

int bench_fiber_skynet(int argc, char **argv)
{
        uint64_t leaves = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000);
        SkynetNode root = {.num = 0, .size = leaves};
        SchedQueuePolicy policy = SCHED_QUEUE_SHARED;
        SchedulingGroup *g;
        uint64_t t0, t1, want = leaves * (leaves - 1) / 2;

        if (argc > 2 && !strcmp(argv[2], "local"))
                policy = SCHED_QUEUE_LOCAL;
        else if (argc > 2 && strcmp(argv[2], "shared"))
                bench_die("skynet: policy '%s' is neither shared nor local", argv[2]);

        for (uint64_t l = leaves; l > 1; l /= 10)
                if (l % 10)
                        bench_die("skynet: %llu leaves is not a power of 10",
                                  (unsigned long long)leaves);
        g = group_start_policy(2, bench_fibers_cap(leaves + leaves / 8), policy);
        t0 = bench_now_ns();
        fiber_wait(fiber_start(g, skynet_node, &root));
        t1 = bench_now_ns();
        sched_group_free(g);
        if (root.sum != want)
                bench_die("skynet: sum %llu, want %llu", (unsigned long long)root.sum,
                          (unsigned long long)want);
        printf("%.2f\n", (double)(t1 - t0) / 1e6);
        return 0;
}

/* ------------------------------------------------------------------ pingpong ------ */

typedef struct PingPong {
        uint64_t rounds;
        FiberSemaphore ping, pong;
} PingPong;

static void pingpong_server(void *arg)
{
        PingPong *p = arg;

        for (uint64_t i = 0; i < p->rounds; i++) {
                if (fiber_sem_wait(&p->ping, SCHED_FOREVER) < 0)
                        bench_die("pingpong: fiber_sem_wait failed");
                fiber_sem_post(&p->pong, 1);
        }
}

static void pingpong_client(void *arg)
{
        PingPong *p = arg;

        for (uint64_t i = 0; i < p->rounds; i++) {
                fiber_sem_post(&p->ping, 1);
                if (fiber_sem_wait(&p->pong, SCHED_FOREVER) < 0)
                        bench_die("pingpong: fiber_sem_wait failed");
        }
}

int bench_fiber_pingpong(int argc, char **argv)
{
        PingPong p = {.rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 200000)};
        SchedQueuePolicy policy = SCHED_QUEUE_SHARED;
        SchedulingGroup *g;
        Fiber *server, *client;
        uint64_t t0, t1;

        /* "local": the default policy, where a woken fiber goes to its waker's runnext
         * (Go's shape); without it, one shared queue: every hand-off crosses workers */
        if (argc > 2 && !strcmp(argv[2], "local"))
                policy = SCHED_QUEUE_LOCAL;
        else if (argc > 2 && strcmp(argv[2], "shared"))
                bench_die("pingpong: policy '%s' is neither shared nor local", argv[2]);
        g = group_start_policy(2, bench_fibers_cap(16), policy);

        fiber_sem_init(&p.ping, 0);
        fiber_sem_init(&p.pong, 0);
        t0 = bench_now_ns();
        server = fiber_start(g, pingpong_server, &p);
        client = fiber_start(g, pingpong_client, &p);
        fiber_wait(client);
        fiber_wait(server);
        t1 = bench_now_ns();
        sched_group_free(g);
        printf("%.2f\n", (double)(t1 - t0) / (double)p.rounds);
        return 0;
}

/* ------------------------------------------------------------------ sleepers ------ */

typedef struct Sleepers {
        uint64_t asleep; /* fibers that reached their sleep loop */
        bool released;   /* set by main: leave the loop */
        uint64_t period; /* ns per fiber_sleep_for() */
} Sleepers;

static void sleeper(void *arg)
{
        Sleepers *s = arg;

        __atomic_fetch_add(&s->asleep, 1, __ATOMIC_RELAXED);
        while (!__atomic_load_n(&s->released, __ATOMIC_ACQUIRE))
                if (fiber_sleep_for(s->period) < 0)
                        bench_die("sleepers: fiber_sleep_for failed");
}

int bench_fiber_sleepers(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000);
        Sleepers s = {.period = bench_parse_count(argc > 2 ? argv[2] : NULL, 3000) * NSEC_PER_MSEC};
        SchedulingGroup *g = group_start(2, bench_fibers_cap(n + 16));
        FiberAttr attr = {.group = g};
        uint64_t before, after, deadline;
        SchedGroupStats st;
        Fiber **h;

        h = calloc(n, sizeof(*h));
        if (!h)
                bench_die("sleepers: out of memory");
        memset(h, 0, n * sizeof(*h));
        before = bench_rss_bytes();
        for (uint64_t i = 0; i < n; i++) {
                int r = fiber_create(&h[i], &attr, sleeper, &s);
                if (r < 0)
                        bench_die("sleepers: fiber_create #%llu: %s", (unsigned long long)i,
                                  strerror(-r));
        }
        /* Wait (bounded) until every fiber runs and the run queue is empty: all parked. */
        deadline = bench_now_ns() + 120 * NSEC_PER_SEC;
        for (;;) {
                sched_group_stats(g, &st);
                if (__atomic_load_n(&s.asleep, __ATOMIC_RELAXED) == n && st.runq_depth == 0)
                        break;
                if (bench_now_ns() > deadline)
                        bench_die("sleepers: after 120 s only %llu of %llu fibers started",
                                  (unsigned long long)s.asleep, (unsigned long long)n);
                sleep_ns(NSEC_PER_MSEC);
        }
        sleep_ns(50 * NSEC_PER_MSEC);
        after = bench_rss_bytes();
        sched_group_stats(g, &st);
        if (st.fibers_alive != n)
                bench_die("sleepers: %llu fibers alive at the measurement, want %llu",
                          (unsigned long long)st.fibers_alive, (unsigned long long)n);
        __atomic_store_n(&s.released, true, __ATOMIC_RELEASE);
        for (uint64_t i = 0; i < n; i++)
                fiber_wait(h[i]);
        sched_group_free(g);
        free(h);
        printf("%.1f\n", (double)(after - before) / (double)n);
        return 0;
}

/* ------------------------------------------------------------------ idle ---------- */

static uint64_t cpu_ns(void)
{
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) < 0)
                bench_die("idle: getrusage failed");
        return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * NSEC_PER_SEC +
               (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
}

int bench_fiber_idle(int argc, char **argv)
{
        uint64_t ms = bench_parse_count(argc > 1 ? argv[1] : NULL, 10000);
        SchedulingGroup *g = group_start(2, bench_fibers_cap(16));
        uint64_t c0, c1, t0, t1;

        sleep_ns(200 * NSEC_PER_MSEC);
        c0 = cpu_ns();
        t0 = bench_now_ns();
        sleep_ns(ms * NSEC_PER_MSEC);
        c1 = cpu_ns();
        t1 = bench_now_ns();
        sched_group_free(g);
        printf("%.4f\n", 100.0 * (double)(c1 - c0) / (double)(t1 - t0));
        return 0;
}

/* ------------------------------------------------------------------ lateness ------ */

typedef struct LatenessRun {
        uint64_t rounds;   /* sleeps per fiber */
        uint64_t *samples; /* rounds per fiber, ns */
} LatenessRun;

typedef struct LatenessFiber {
        LatenessRun *run;
        uint64_t *mine; /* this fiber's rounds samples */
} LatenessFiber;

static void lateness_fiber(void *arg)
{
        LatenessFiber *lf = arg;

        for (uint64_t i = 0; i < lf->run->rounds; i++) {
                uint64_t due = bench_now_ns() + NSEC_PER_MSEC, now;
                if (fiber_sleep_for(NSEC_PER_MSEC) < 0)
                        bench_die("lateness: fiber_sleep_for failed");
                now = bench_now_ns();
                lf->mine[i] = now > due ? now - due : 0;
        }
}

int bench_fiber_lateness(int argc, char **argv)
{
        uint64_t nfibers = bench_parse_count(argc > 1 ? argv[1] : NULL, 100);
        LatenessRun run = {.rounds = bench_parse_count(argc > 2 ? argv[2] : NULL, 200)};
        SchedulingGroup *g = group_start(2, bench_fibers_cap(nfibers));
        LatenessFiber *lf = calloc(nfibers, sizeof(*lf));
        Fiber **h = calloc(nfibers, sizeof(*h));
        uint64_t total = nfibers * run.rounds;

        run.samples = calloc(total, sizeof(*run.samples));
        if (!lf || !h || !run.samples)
                bench_die("lateness: out of memory");
        for (uint64_t i = 0; i < nfibers; i++) {
                lf[i] = (LatenessFiber){.run = &run, .mine = run.samples + i * run.rounds};
                h[i] = fiber_start(g, lateness_fiber, &lf[i]);
        }
        for (uint64_t i = 0; i < nfibers; i++)
                fiber_wait(h[i]);
        sched_group_free(g);
        qsort(run.samples, total, sizeof(*run.samples), u64_compare);
        printf("%.1f %.1f\n", (double)run.samples[total * 50 / 100] / 1e3,
               (double)run.samples[total * 99 / 100] / 1e3);
        free(run.samples);
        free(h);
        free(lf);
        return 0;
}
