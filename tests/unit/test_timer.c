/* SPDX-License-Identifier: MIT */
/* Timers: sleeps wake no earlier than their deadline, in deadline order, deadlines of
 * 0 do not wait, and timed waits time out while untimed ones do not. */
#include <criterion/criterion.h>
#include <errno.h>

#include "helpers.h"

typedef struct Sleeper {
        uint64_t woke_ns;
        uint64_t deadline_ns; /* written before go is set */
        uint64_t slept_ns;    /* when it called fiber_sleep_until() */
        int rc;
        FiberLatch *started, *latch;
        FiberEvent *go;
        int *order;
        int *next;
        int index;
} Sleeper;

static void sleeper(void *arg)
{
        Sleeper *s = arg;
        fiber_latch_count_down(s->started);
        fiber_event_wait(s->go, SCHED_FOREVER);
        s->slept_ns = sched_now_ns();
        s->rc = fiber_sleep_until(s->deadline_ns);
        s->woke_ns = sched_now_ns();
        s->order[__atomic_fetch_add(s->next, 1, __ATOMIC_RELAXED)] = s->index;
        fiber_latch_count_down(s->latch);
}

/* One round: N sleepers, deadlines 5 ms apart from @lead_ns after they all run. Returns
 * false when some sleeper reached its sleep only after the first deadline (a loaded
 * machine): the order then says nothing, and the caller tries again with more lead. */
static bool sleep_round(SchedulingGroup *g, uint64_t lead_ns)
{
        FiberAttr a = {.group = g, .detached = true};
        enum { N = 20 };
        Sleeper s[N];
        int order[N], next = 0;
        FiberLatch started, latch;
        FiberEvent go;
        uint64_t base_ns;

        fiber_latch_init(&started, N);
        fiber_latch_init(&latch, N);
        fiber_event_init(&go);
        /* Created in reverse so that heap order, not creation order, decides. */
        for (int i = N - 1; i >= 0; i--) {
                s[i] = (Sleeper){.started = &started,
                                 .latch = &latch,
                                 .go = &go,
                                 .order = order,
                                 .next = &next,
                                 .index = i};
                cr_assert_eq(fiber_create(NULL, &a, sleeper, &s[i]), 0);
        }
        cr_assert_eq(fiber_latch_wait(&started, sched_deadline_after(30 * SEC_NS)), 0);
        base_ns = sched_deadline_after(lead_ns);
        for (int i = 0; i < N; i++)
                s[i].deadline_ns = base_ns + (uint64_t)i * 5 * MS_NS;
        fiber_event_set(&go);
        cr_assert_eq(fiber_latch_wait(&latch, sched_deadline_after(30 * SEC_NS)), 0);
        for (int i = 0; i < N; i++) {
                cr_assert_eq(s[i].rc, 0);
                cr_assert_geq(s[i].woke_ns, s[i].deadline_ns, "woke before its deadline");
                if (s[i].slept_ns >= base_ns)
                        return false;
        }
        for (int i = 0; i < N; i++)
                cr_assert_eq(order[i], i, "wake-up %d was sleeper %d", i, order[i]);
        return true;
}

Test(timer, sleeps_end_after_their_deadline_in_order)
{
        SchedulingGroup *g = test_group(1);
        uint64_t lead_ns = 20 * MS_NS;
        int tries = 0;

        while (!sleep_round(g, lead_ns)) {
                cr_assert_lt(++tries, 6, "sleepers kept starting after their deadlines");
                lead_ns *= 2;
        }
        sched_group_free(g);
}

static void zero_and_past_deadlines(void *arg)
{
        int *rc = arg;
        FiberSemaphore sem;
        fiber_sem_init(&sem, 0);
        rc[0] = fiber_sleep_until(0);
        rc[1] = fiber_sleep_until(1); /* long past */
        rc[2] = fiber_sem_wait(&sem, 0);
        rc[3] = fiber_sem_wait(&sem, sched_deadline_after(2 * MS_NS));
        fiber_sem_post(&sem, 1);
        rc[4] = fiber_sem_wait(&sem, 0);
}

Test(timer, zero_and_past_deadlines)
{
        SchedulingGroup *g = test_group(1);
        int rc[5] = {9, 9, 9, 9, 9};
        run_in_fiber(g, zero_and_past_deadlines, rc);
        cr_assert_eq(rc[0], 0);
        cr_assert_eq(rc[1], 0);
        cr_assert_eq(rc[2], -ETIMEDOUT, "deadline 0 means do not wait");
        cr_assert_eq(rc[3], -ETIMEDOUT);
        cr_assert_eq(rc[4], 0, "a unit that is there is taken even with deadline 0");
        sched_group_free(g);
}

typedef struct PastSleeps {
        SchedulingGroup *g;
        uint64_t switches; /* context switches during 1,000 sleeps with a past deadline */
        int cancelled_rc;  /* the same sleep once the fiber is cancelled */
} PastSleeps;

static void past_sleeps(void *arg)
{
        PastSleeps *p = arg;
        SchedGroupStats before, after;

        sched_group_stats(p->g, &before);
        for (int i = 0; i < 1000; i++)
                cr_assert_eq(fiber_sleep_until(sched_now_ns() - 1), 0);
        sched_group_stats(p->g, &after);
        p->switches = after.context_switches - before.context_switches;
        fiber_cancel(fiber_self());
        p->cancelled_rc = fiber_sleep_until(sched_now_ns() - 1);
}

/* A deadline already past returns at once: no timer, no switch (a `sleep ms=0` job
 * costs nothing); but a cancelled fiber still hears -ECANCELED. */
Test(timer, a_past_deadline_returns_without_a_switch)
{
        PastSleeps p = {.g = test_group(1)};
        run_in_fiber(p.g, past_sleeps, &p);
        cr_assert_lt(p.switches, 10, "%llu switches for 1,000 sleeps into the past",
                     (unsigned long long)p.switches);
        cr_assert_eq(p.cancelled_rc, -ECANCELED);
        sched_group_free(p.g);
}

static void many_sleepers(void *arg)
{
        FiberLatch *l = arg;
        for (int i = 0; i < 5; i++)
                fiber_sleep_for((uint64_t)(i % 3) * 100000);
        fiber_latch_count_down(l);
}

Test(timer, thousands_of_concurrent_timers)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g, .detached = true};
        FiberLatch l;
        fiber_latch_init(&l, 5000);
        for (int i = 0; i < 5000; i++)
                cr_assert_eq(fiber_create(NULL, &a, many_sleepers, &l), 0);
        cr_assert_eq(fiber_latch_wait(&l, sched_deadline_after(60 * SEC_NS)), 0);
        sched_group_free(g);
}

Test(timer, pthread_timed_wait)
{
        FiberEvent e;
        uint64_t before = sched_now_ns();
        fiber_event_init(&e);
        cr_assert_eq(fiber_event_wait(&e, sched_deadline_after(3 * MS_NS)), -ETIMEDOUT);
        cr_assert_geq(sched_now_ns() - before, 3 * MS_NS);
        cr_assert_eq(fiber_sleep_for(MS_NS), 0);
}
