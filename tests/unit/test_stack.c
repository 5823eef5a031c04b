/* SPDX-License-Identifier: MIT */
/* Stacks: an overflow into the guard page is reported (fiber id and tag) and aborts;
 * stacks come back from the cache; a big custom stack is usable. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "helpers.h"

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static int recurse(int depth)
{
        volatile char frame[512];
        memset((char *)frame, depth & 0xff, sizeof(frame));
        return depth > 1000000 ? frame[0] : recurse(depth + 1) + frame[1];
}

static void overflow(void *arg)
{
        *(int *)arg = recurse(0);
}
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* The sanitizers install their own SIGSEGV handlers and report the overflow
 * themselves; the runtime's report is checked in the plain build. */
Test(stack, overflow_is_reported, .disabled = true)
{
        cr_assert(true);
}
#else
Test(stack, overflow_is_reported, .signal = SIGABRT)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g, .tag = "job 42 plugin recurse"};
        Fiber *f;
        int out = 0;
        cr_assert_eq(fiber_create(&f, &a, overflow, &out), 0);
        fiber_join(f);
        cr_assert_fail("the overflow was not caught");
}
#endif

static void touch_deep(void *arg)
{
        volatile char big[200 * 1024];
        memset((char *)big, 1, sizeof(big));
        *(int *)arg = big[sizeof(big) - 1];
}

Test(stack, custom_size_is_usable)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g, .stack_size = 1024 * 1024};
        Fiber *f;
        int out = 0;
        cr_assert_eq(fiber_create(&f, &a, touch_deep, &out), 0);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(out, 1);
        sched_group_free(g);
}

static void note_stack(void *arg)
{
        char probe;
        *(uintptr_t *)arg = (uintptr_t)&probe >> 17; /* which 128 KiB region */
}

Test(stack, stacks_are_reused_from_the_cache)
{
        SchedulingGroup *g = test_group(1);
        enum { N = 20 };
        uintptr_t where[N] = {0};
        int distinct = 0;
        for (int i = 0; i < N; i++)
                run_in_fiber(g, note_stack, &where[i]);
        for (int i = 0; i < N; i++) {
                int j;
                for (j = 0; j < i && where[j] != where[i]; j++)
                        ;
                distinct += j == i;
        }
        /* One after the other, each fiber finds the stack of one that finished (the
         * last may still be on its way back to the pool): without a cache, 20. */
        cr_assert_leq(distinct, 3, "%d different stacks for %d fibers", distinct, N);
        sched_group_free(g);
}

/* Stacks move between the workers' caches and the group pool in batches. With caches of
 * 4, 40,000 fibers on two workers pass through spills and refills all the time; each
 * fiber fills a slice of its stack with its own id, yields (another fiber runs, perhaps
 * on a recycled stack), and checks the slice is still its own: a stack handed to two
 * live fibers at once, or lost, shows up as a mismatch or as a wrong count. */
typedef struct Churn {
        FiberLatch done;
        long bad;
        long ran;
} Churn;

static void churn_fiber(void *arg)
{
        Churn *c = arg;
        uint64_t mine[64];
        uint64_t id = fiber_id(fiber_self());

        for (int i = 0; i < 64; i++)
                __atomic_store_n(&mine[i], id, __ATOMIC_RELAXED);
        for (int round = 0; round < 3; round++) {
                fiber_yield();
                for (int i = 0; i < 64; i++)
                        if (__atomic_load_n(&mine[i], __ATOMIC_RELAXED) != id)
                                __atomic_fetch_add(&c->bad, 1, __ATOMIC_RELAXED);
        }
        __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&c->done);
}

static void churn_parent(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        Churn *c = arg;
        enum { N = 40000 };

        fiber_latch_add(&c->done, N);
        for (int i = 0; i < N; i++) {
                int r;
                while ((r = fiber_create(NULL, &detached, churn_fiber, c)) == -EAGAIN)
                        fiber_yield();
                cr_assert_eq(r, 0);
        }
        cr_assert_eq(fiber_latch_wait(&c->done, SCHED_FOREVER), 0);
}

Test(stack, batches_between_caches_and_pool_lose_and_share_nothing)
{
        SchedGroupConfig cfg = {.workers = 2, .stack_cache = 4, .max_fibers = 1024};
        SchedulingGroup *g = NULL;
        Churn c = {.bad = 0};

        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        fiber_latch_init(&c.done, 0);
        run_in_fiber(g, churn_parent, &c);
        cr_assert_eq(c.ran, 40000);
        cr_assert_eq(c.bad, 0, "%ld words of a live fiber's stack were overwritten", c.bad);
        sched_group_free(g);
}
