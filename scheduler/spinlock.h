/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h — a test-and-test-and-set spinlock for the runtime's short critical
 * sections (wait lists, timer heap, fd entries). Held for a few dozen instructions at
 * most and never across a context switch, so spinning beats parking.
 */
#ifndef FIBERD_SPINLOCK_H
#define FIBERD_SPINLOCK_H

#include <stdbool.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#else
        __asm__ __volatile__("" ::: "memory");
#endif
}

/* spin_lock - take @l (an int, 0 = free). Context: any; never yields. */
static inline void spin_lock(int *l)
{
        for (;;) {
                if (!__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE))
                        return;
                while (__atomic_load_n(l, __ATOMIC_RELAXED))
                        cpu_relax();
        }
}

static inline bool spin_trylock(int *l)
{
        return !__atomic_load_n(l, __ATOMIC_RELAXED) &&
               !__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE);
}

static inline void spin_unlock(int *l)
{
        __atomic_store_n(l, 0, __ATOMIC_RELEASE);
}

#endif
