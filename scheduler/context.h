/* SPDX-License-Identifier: MIT */
/*
 * context.h — saving and restoring a machine context: the one place fiberd touches
 * registers.
 *
 * On x86-64 (context-x86_64.S) a context is just a saved stack pointer: the switch
 * pushes the callee-saved registers (rbx, rbp, r12-r15), the MXCSR and the x87 control
 * word onto the old stack, stores rsp, loads the new one and pops the same set — the
 * layout of boost.context's fcontext (shared/seeds/000, flare's modified copy). Anything
 * else (caller-saved registers, flags) is already saved by the C calling convention.
 *
 * Elsewhere (or with CONTEXT=ucontext) the fallback in context-ucontext.c uses
 * getcontext/makecontext/swapcontext, which also saves the signal mask and is several
 * times slower (it makes a sigprocmask syscall per switch).
 *
 * Sanitizer hooks are not here: fiber.c wraps each switch with the ASan/TSan fiber calls,
 * because only it knows the stacks involved.
 */
#ifndef FIBERD_CONTEXT_H
#define FIBERD_CONTEXT_H

#include <stddef.h>

#ifdef SCHED_CONTEXT_UCONTEXT
#include <ucontext.h>
typedef struct Context {
        ucontext_t uc;
} Context;
#else
typedef struct Context {
        void *sp; /* saved stack pointer; the registers sit just above it */
} Context;
#endif

typedef void (*ContextEntry)(void *arg);

/*
 * context_init - make @ctx start @entry(@arg) on the stack [@stack_lo, @stack_lo+@size)
 * the first time it is switched to. @entry must never return (it switches away for the
 * last time instead); if it does, the process traps (ud2 / abort).
 * Context: any thread; no allocation.
 */
void context_init(Context *ctx, void *stack_lo, size_t size, ContextEntry entry, void *arg);

/*
 * context_switch - save the running context into @from and resume @to. Returns when
 * something switches back to @from, possibly on another thread.
 * Context: any thread; async-signal-unsafe in the ucontext fallback only.
 */
#ifdef SCHED_CONTEXT_UCONTEXT
void context_switch(Context *from, Context *to);
#else
void context_switch_asm(void **from_sp, void *to_sp);
static inline void context_switch(Context *from, Context *to)
{
        context_switch_asm(&from->sp, to->sp);
}
#endif

#endif /* FIBERD_CONTEXT_H */
