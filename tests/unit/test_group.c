/* SPDX-License-Identifier: MIT */
/* The scheduling group's wake-up algorithm (flare's spinning / sleeping masks and wait
 * slots): under seconds of random producers — pthreads and fibers, bursts and pauses
 * that let workers fall asleep — every fiber made ready runs, exactly once. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "helpers.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define DURATION_NS (2 * SEC_NS)
#else
#define DURATION_NS (4 * SEC_NS)
#endif

static SchedulingGroup *grp;
static long ran;
static long made;
static int stop;

static void job(void *arg)
{
        unsigned *seed = arg;
        (void)seed;
        __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
}

static void spawner(void *arg)
{
        /* a fiber that spawns from inside the group (producer on a worker) */
        FiberAttr a = {.detached = true};
        int n = (int)(intptr_t)arg;
        for (int i = 0; i < n; i++) {
                if (fiber_create(NULL, &a, job, NULL) == 0)
                        __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
        }
        __atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
}

static void *producer(void *arg)
{
        unsigned seed = (unsigned)(uintptr_t)arg;
        FiberAttr a = {.group = grp, .detached = true};
        while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
                int burst = rand_r(&seed) % 64;
                for (int i = 0; i < burst; i++) {
                        int r = rand_r(&seed) % 8 == 0
                                        ? fiber_create(NULL, &a, spawner,
                                                       (void *)(intptr_t)(rand_r(&seed) % 8))
                                        : fiber_create(NULL, &a, job, NULL);
                        if (r == 0)
                                __atomic_fetch_add(&made, 1, __ATOMIC_RELAXED);
                }
                /* pauses of 0-200 µs: long enough for spinners to give up and sleep */
                if (rand_r(&seed) % 4 == 0)
                        usleep((useconds_t)(rand_r(&seed) % 200));
        }
        return NULL;
}

Test(group, wakeup_loses_nothing_under_random_load, .timeout = 120)
{
        pthread_t t[3];
        SchedGroupStats s;
        uint64_t end;

        grp = test_group(2);
        for (uintptr_t i = 0; i < 3; i++)
                pthread_create(&t[i], NULL, producer, (void *)(i + 1));
        end = sched_now_ns() + DURATION_NS;
        while (sched_now_ns() < end)
                usleep(10000); /* the test's length, not a synchronisation */
        __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        for (int i = 0; i < 3; i++)
                pthread_join(t[i], NULL);
        /* Every fiber must finish without any further help: wait until none is alive. */
        end = sched_now_ns() + 30 * SEC_NS;
        do {
                sched_group_stats(grp, &s);
        } while (s.fibers_alive && sched_now_ns() < end);
        cr_assert_eq(s.fibers_alive, 0, "%lu fibers never ran: a wake-up was lost",
                     (unsigned long)s.fibers_alive);
        long total = __atomic_load_n(&made, __ATOMIC_ACQUIRE);
        cr_assert_eq(__atomic_load_n(&ran, __ATOMIC_ACQUIRE), total);
        cr_assert_eq(s.fibers_created, (uint64_t)total);
        cr_assert_eq(s.fibers_finished, (uint64_t)total);
        cr_assert_gt(s.futex_wakeups, 0, "workers slept and were woken");
        cr_assert_gt(s.ready_to_run.count, 0);
        cr_assert_leq(s.ready_to_run.p50_ns, s.ready_to_run.p99_ns);
        cr_assert_leq(s.ready_to_run.p99_ns, s.ready_to_run.max_ns);
        sched_group_free(grp);
}

Test(group, idle_workers_sleep)
{
        SchedulingGroup *g = test_group(4);
        SchedGroupStats s;
        uint64_t end = sched_now_ns() + 10 * SEC_NS;
        /* With nothing to do, every worker ends up asleep on its wait slot: no spinning. */
        do {
                sched_group_stats(g, &s);
        } while ((s.sleeping != 4 || s.spinning) && sched_now_ns() < end);
        cr_assert_eq(s.sleeping, 4);
        cr_assert_eq(s.spinning, 0);
        cr_assert_eq(s.workers, 4);
        sched_group_free(g);
}

/* A fiber that spawns children and, without yielding, waits for each to run: only the
 * other worker can run them, whether it was busy, spinning or asleep at the spawn. */
typedef struct SpawnSpin {
        int iterations;
        int started;          /* children that ran within their deadline */
        int lost;             /* a child not run within 2 s (the loop stops there) */
        uint64_t handoffs[2]; /* spinner hand-offs before and after */
        uint64_t wakeups[2];  /* futex wake-ups before and after */
        SchedulingGroup *g;
} SpawnSpin;

static void set_flag(void *arg)
{
        __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

static void spawn_and_spin(void *arg)
{
        SpawnSpin *s = arg;
        FiberAttr a = {.detached = true};
        SchedGroupStats st;
        unsigned seed = 7;
        int flag;

        sched_group_stats(s->g, &st);
        s->handoffs[0] = st.spinner_handoffs;
        s->wakeups[0] = st.futex_wakeups;
        for (int i = 0; i < s->iterations; i++) {
                __atomic_store_n(&flag, 0, __ATOMIC_RELAXED);
                if (fiber_create(NULL, &a, set_flag, &flag) != 0)
                        break;
                uint64_t deadline = sched_now_ns() + 2 * SEC_NS;
                while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE) && sched_now_ns() < deadline)
                        ;
                if (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE)) {
                        s->lost++;
                        /* it still holds &flag: let it run here before leaving */
                        while (!__atomic_load_n(&flag, __ATOMIC_ACQUIRE))
                                fiber_yield();
                        break;
                }
                s->started++;
                /* a gap of 0-300 us: the other worker is found running, spinning, or
                 * (past its few spin rounds) asleep */
                uint64_t gap_end = sched_now_ns() + (uint64_t)(rand_r(&seed) % 300) * 1000;
                while (sched_now_ns() < gap_end)
                        ;
        }
        sched_group_stats(s->g, &st);
        s->handoffs[1] = st.spinner_handoffs;
        s->wakeups[1] = st.futex_wakeups;
}

Test(group, a_spawn_from_the_group_wakes_a_sleeper_and_never_claims_a_spinner, .timeout = 120)
{
        SpawnSpin s = {.iterations = 2000, .g = test_group(2)};

        run_in_fiber(s.g, spawn_and_spin, &s);
        cr_assert_eq(s.lost, 0, "%d of %d children never ran while their creator kept running",
                     s.lost, s.iterations);
        cr_assert_eq(s.started, s.iterations);
        /* Some spawns found the other worker asleep and woke it... */
        cr_assert_gt(s.wakeups[1], s.wakeups[0], "no spawn found the other worker asleep");
        /* ...and none claimed it while it spun: a spinner finds a spawn by itself. */
        cr_assert_eq(s.handoffs[1], s.handoffs[0], "%lu spawns claimed a spinner",
                     (unsigned long)(s.handoffs[1] - s.handoffs[0]));
        sched_group_free(s.g);
}
