/* SPDX-License-Identifier: MIT */
/* Context switch: the bare switch keeps callee-saved state, floating-point control
 * words and the stack alignment the ABI requires. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <xmmintrin.h>

#include "scheduler/context.h"

/* The bare switch knows nothing of sanitizers; under TSan the test tells it itself. */
#ifdef __SANITIZE_THREAD__
#include <sanitizer/tsan_interface.h>
static void *main_tsan, *co_tsan;
#define TSAN_SWITCH(to) __tsan_switch_to_fiber((to), 0)
#define TSAN_SETUP() (main_tsan = __tsan_get_current_fiber(), co_tsan = __tsan_create_fiber(0))
#else
#define TSAN_SWITCH(to) ((void)0)
#define TSAN_SETUP() ((void)0)
#endif

static Context main_ctx, co_ctx;
static int steps;
static uintptr_t co_sp_mod16;
static double fp_result;

static void co_entry(void *arg)
{
        int *counter = arg;
        char probe __attribute__((aligned(16)));
        co_sp_mod16 = (uintptr_t)&probe % 16;
        for (;;) {
                (*counter)++;
                fp_result = fp_result * 1.5 + 1.0; /* uses SSE registers across switches */
                TSAN_SWITCH(main_tsan);
                context_switch(&co_ctx, &main_ctx);
        }
}

Test(context, ping_pong_keeps_state)
{
        size_t size = 64 * 1024;
        void *stack = aligned_alloc(64, size);
        int counter = 0;
        volatile long local = 12345;

        TSAN_SETUP();
        context_init(&co_ctx, stack, size, co_entry, &counter);
        for (int i = 0; i < 1000; i++) {
                steps++;
                TSAN_SWITCH(co_tsan);
                context_switch(&main_ctx, &co_ctx);
                cr_assert_eq(counter, i + 1);
        }
        cr_assert_eq(local, 12345);
        cr_assert_eq(steps, 1000);
        cr_assert_eq(co_sp_mod16, 0);
        cr_assert(fp_result > 1000.0);
        free(stack);
}

#ifndef SCHED_CONTEXT_UCONTEXT
static void mxcsr_entry(void *arg)
{
        unsigned *seen = arg;
        *seen = _mm_getcsr();
        _mm_setcsr(0x1F80 | 0x6000); /* round toward zero, in this context only */
        TSAN_SWITCH(main_tsan);
        context_switch(&co_ctx, &main_ctx);
        abort();
}

Test(context, mxcsr_is_per_context)
{
        size_t size = 64 * 1024;
        void *stack = aligned_alloc(64, size);
        unsigned seen = 0, before = _mm_getcsr();

        TSAN_SETUP();
        context_init(&co_ctx, stack, size, mxcsr_entry, &seen);
        TSAN_SWITCH(co_tsan);
        context_switch(&main_ctx, &co_ctx);
        cr_assert_eq(seen, 0x1F80, "a new context starts with the default MXCSR");
        cr_assert_eq(_mm_getcsr(), before, "the switch back restored our rounding mode");
        free(stack);
}
#endif
