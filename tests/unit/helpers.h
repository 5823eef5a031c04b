/* SPDX-License-Identifier: MIT */
/*
 * helpers.h — what the scheduler's unit tests share: a group per test, and running a
 * function inside a fiber while the test's main thread waits (on a FiberEvent, so the
 * wait is a condition, never a sleep).
 */
#ifndef FIBERD_TEST_HELPERS_H
#define FIBERD_TEST_HELPERS_H

#include <criterion/criterion.h>

#include "scheduler/sched.h"

#define SEC_NS 1000000000ull
#define MS_NS 1000000ull

/* A group of @workers without a monitor (no stall reports, no spare workers): tests of
 * other mechanisms count threads and workers exactly. test_control.c tests the monitor. */
static inline SchedulingGroup *test_group(unsigned workers)
{
        SchedGroupConfig cfg = {
                .workers = workers,
                .control = {.stall_threshold_ns = SCHED_FOREVER, .rescue_after_ns = SCHED_FOREVER}};
        SchedulingGroup *g = NULL;
        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        return g;
}

/* Wait until one worker of @g has stayed asleep in the group's poll set for 20 ms on
 * end: the same sleep, and no look of the reactor thread in between (seen only once,
 * the worker may be passing through on its way from a pending wake-up). Busy-polls
 * the stats, so a fiber may call it without letting its own worker go idle. Fails the
 * test at @until (sched_deadline_after()). Return: the stats last read. */
static inline SchedGroupStats wait_poll_set_settled(SchedulingGroup *g, uint64_t until)
{
        SchedGroupStats st, prev = {.poll_worker = -1};
        uint64_t since = 0;

        for (;;) {
                sched_group_stats(g, &st);
                uint64_t now = sched_deadline_after(0);
                cr_assert_lt(now, until, "no worker stayed asleep in the poll set");
                if (st.poll_worker < 0 || st.poll_worker != prev.poll_worker ||
                    st.poll_sleeps != prev.poll_sleeps || st.reactor_looks != prev.reactor_looks) {
                        prev = st;
                        since = now;
                } else if (now - since >= 20 * MS_NS) {
                        return st;
                }
        }
}

typedef struct TestRun {
        FiberFn fn;
        void *arg;
        FiberEvent done;
} TestRun;

static inline void test_run_trampoline(void *p)
{
        TestRun *t = p;
        t->fn(t->arg);
        fiber_event_set(&t->done);
}

/* Run @fn(@arg) in a fiber of @g and wait (at most 60 s) until it returns. */
static inline void run_in_fiber(SchedulingGroup *g, FiberFn fn, void *arg)
{
        TestRun t = {.fn = fn, .arg = arg};
        FiberAttr a = {.group = g, .detached = true};
        fiber_event_init(&t.done);
        cr_assert_eq(fiber_create(NULL, &a, test_run_trampoline, &t), 0);
        cr_assert_eq(fiber_event_wait(&t.done, sched_deadline_after(60 * SEC_NS)), 0,
                     "the test fiber did not finish within 60 s");
}

/* A tree of fibers: each node spawns 4 children and joins them; a leaf counts 1. */
typedef struct Tree {
        int depth;
        long sum;
} Tree;

static inline void tree(void *arg)
{
        Tree *t = arg;
        if (t->depth == 0) {
                t->sum = 1;
                return;
        }
        Tree kids[4];
        Fiber *f[4];
        for (int i = 0; i < 4; i++) {
                kids[i] = (Tree){.depth = t->depth - 1};
                cr_assert_eq(fiber_create(&f[i], NULL, tree, &kids[i]), 0);
        }
        t->sum = 0;
        for (int i = 0; i < 4; i++) {
                cr_assert_eq(fiber_join(f[i]), 0);
                t->sum += kids[i].sum;
        }
}

/* A chain of detached fibers, each spawning the next and exiting, until @stop is set or
 * @cap links have run: new work that never lets a worker's queues go empty. */
typedef struct SpawnChain {
        int stop;         /* set (atomically) to end the chain */
        long steps;       /* links run */
        long cap;         /* links at most */
        FiberEvent ended; /* set by the last link */
} SpawnChain;

static inline void spawn_chain_init(SpawnChain *c, long cap)
{
        c->stop = 0;
        c->steps = 0;
        c->cap = cap;
        fiber_event_init(&c->ended);
}

static inline void spawn_chain_link(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        SpawnChain *c = arg;

        if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) || ++c->steps >= c->cap) {
                fiber_event_set(&c->ended);
                return;
        }
        cr_assert_eq(fiber_create(NULL, &detached, spawn_chain_link, c), 0);
}

/* Wait (at most 60 s) for the chain's last link; return how many links ran. */
static inline long spawn_chain_wait(SpawnChain *c)
{
        cr_assert_eq(fiber_event_wait(&c->ended, sched_deadline_after(60 * SEC_NS)), 0,
                     "the spawn chain did not end within 60 s");
        return c->steps;
}

#endif
