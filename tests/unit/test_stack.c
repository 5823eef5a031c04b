/* SPDX-License-Identifier: MIT */
/* Stacks: an overflow into the guard page is reported (fiber id and tag) and aborts;
 * stacks come back from the cache; a big custom stack is usable. */
#include <criterion/criterion.h>
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
