/* SPDX-License-Identifier: MIT */
/*
 * context.c — context_init()/context_switch() for both back ends (see context.h).
 * The x86-64 one only lays out the first frame; the switch itself is in
 * context-x86_64.S. The ucontext one is the portable fallback chosen at build time.
 */
#include "scheduler/context.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SCHED_CONTEXT_UCONTEXT

void context_trampoline(void);

void context_init(Context *ctx, void *stack_lo, size_t size, ContextEntry entry, void *arg)
{
        uintptr_t top = ((uintptr_t)stack_lo + size) & ~(uintptr_t)15;
        /* After `ret` pops the trampoline's address rsp == top, 16-aligned, so that the
         * trampoline's `call` enters entry() with rsp % 16 == 8, as the ABI wants. */
        uint64_t *sp = (uint64_t *)top;
        *--sp = (uint64_t)context_trampoline; /* return address */
        *--sp = 0;                            /* rbp */
        *--sp = 0;                            /* rbx */
        *--sp = 0;                            /* r15 */
        *--sp = 0;                            /* r14 */
        *--sp = (uint64_t)(uintptr_t)entry;   /* r13 */
        *--sp = (uint64_t)(uintptr_t)arg;     /* r12 */
        /* MXCSR default (all exceptions masked, round to nearest) and the x87 control
         * word default (double-extended precision, all exceptions masked). */
        *--sp = (uint64_t)0x1F80 | ((uint64_t)0x037F << 32);
        ctx->sp = sp;
}

#else /* SCHED_CONTEXT_UCONTEXT */

/* makecontext passes int arguments only: split the two pointers into 32-bit halves. */
static void context_ucontext_entry(unsigned elo, unsigned ehi, unsigned alo, unsigned ahi)
{
        ContextEntry entry = (ContextEntry)(((uintptr_t)ehi << 32) | elo);
        void *arg = (void *)(((uintptr_t)ahi << 32) | alo);
        entry(arg);
        abort();
}

void context_init(Context *ctx, void *stack_lo, size_t size, ContextEntry entry, void *arg)
{
        uintptr_t e = (uintptr_t)entry, a = (uintptr_t)arg;

        memset(ctx, 0, sizeof(*ctx));
        getcontext(&ctx->uc);
        ctx->uc.uc_stack.ss_sp = stack_lo;
        ctx->uc.uc_stack.ss_size = size;
        ctx->uc.uc_link = NULL;
        makecontext(&ctx->uc, (void (*)(void))context_ucontext_entry, 4, (unsigned)e,
                    (unsigned)(e >> 32), (unsigned)a, (unsigned)(a >> 32));
}

void context_switch(Context *from, Context *to)
{
        swapcontext(&from->uc, &to->uc);
}

#endif
