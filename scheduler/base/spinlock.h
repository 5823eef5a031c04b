/* SPDX-License-Identifier: MIT */
/*
 * spinlock.h — a test-and-test-and-set spinlock for short critical sections (the
 * runtime's wait lists, timer heap, fd entries and stack pool). Held for a few dozen instructions at most, never across a context switch or
 * a system call, so spinning beats parking. Header-only, libc only: part of the bottom
 * layer every folder may include (see macro.h).
 */
#ifndef FIBERD_BASE_SPINLOCK_H
#define FIBERD_BASE_SPINLOCK_H

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

/*
 * full_fence - a StoreLoad barrier: the wake-up protocol's "push, then read the masks"
 * against "set my mask bit, then re-read the queue". On x86-64 a locked add to the
 * stack is cheaper than mfence; TSan does not model fences, so under TSan it is a
 * sequentially consistent read-modify-write of one shared word, which it does model.
 */
static inline void full_fence(void)
{
#if defined(__SANITIZE_THREAD__)
        static int word;
        __atomic_fetch_add(&word, 0, __ATOMIC_SEQ_CST);
#elif defined(__x86_64__)
        __asm__ __volatile__("lock; addl $0, (%%rsp)" ::: "memory", "cc");
#else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
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
