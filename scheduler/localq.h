/* SPDX-License-Identifier: MIT */
/*
 * localq.h — a worker's local run queue: a bounded work-stealing deque (Chase and Lev,
 * "Dynamic Circular Work-Stealing Deque", SPAA 2005, on a fixed ring; tRPC-Cpp Fiber's
 * v2 policy, shared/seeds/001; Go's per-P run queue).
 *
 * Only the owning worker pushes, at the tail. The owner takes the newest fiber from the
 * tail (localq_pop_newest: depth-first, warm stacks) and idle siblings take the oldest
 * from the head (localq_pop, a CAS on head). A thief reads slot[h] before its CAS on
 * head; the owner never writes slot[h] in between, because it writes only below
 * head + capacity and head cannot pass h until that CAS. When the owner and a thief
 * race for the last fiber, both CAS head and one wins; the full fences on both
 * sides make each see the other's move (the paper's argument). Full means "use the
 * group's shared run queue instead", so a local queue never holds a fiber that the
 * group's capacity does not already count.
 */
#ifndef FIBERD_LOCALQ_H
#define FIBERD_LOCALQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scheduler/base/spinlock.h"

#define LOCALQ_SIZE 256

typedef struct LocalRunq {
        size_t head __attribute__((aligned(64))); /* consumers CAS it */
        size_t tail __attribute__((aligned(64))); /* the owner's, published with release */
        void *slot[LOCALQ_SIZE];
        uint64_t since[LOCALQ_SIZE]; /* when each was pushed (the owner's clock); owner only */
} LocalRunq;

/* localq_push - append @item, pushed at time @now (any unit the owner compares with).
 * Return: false when full. Context: the owning worker. */
static inline bool localq_push(LocalRunq *q, void *item, uint64_t now)
{
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        if (t - h >= LOCALQ_SIZE)
                return false;
        __atomic_store_n(&q->slot[t % LOCALQ_SIZE], item, __ATOMIC_RELAXED);
        q->since[t % LOCALQ_SIZE] = now;
        __atomic_store_n(&q->tail, t + 1, __ATOMIC_RELEASE);
        return true;
}

/* localq_oldest_since - when the oldest item was pushed; UINT64_MAX when empty. May be
 * stale by the time it returns (a thief took it). Context: the owning worker. */
static inline uint64_t localq_oldest_since(const LocalRunq *q)
{
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        return h < t ? q->since[h % LOCALQ_SIZE] : UINT64_MAX;
}

/* localq_pop - take the oldest item, or NULL. Context: any thread; lock-free. */
static inline void *localq_pop(LocalRunq *q)
{
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        for (;;) {
                full_fence(); /* pairs with localq_pop_newest */
                size_t t = __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE);
                if (h >= t)
                        return NULL;
                void *item = __atomic_load_n(&q->slot[h % LOCALQ_SIZE], __ATOMIC_RELAXED);
                if (__atomic_compare_exchange_n(&q->head, &h, h + 1, false, __ATOMIC_SEQ_CST,
                                                __ATOMIC_ACQUIRE))
                        return item;
        }
}

/* localq_pop_newest - take the newest item (the last pushed), or NULL. No atomic
 * read-modify-write unless it is the last one. Context: the owning worker. */
static inline void *localq_pop_newest(LocalRunq *q)
{
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        void *item;

        if (h >= t)
                return NULL; /* empty, and t - 1 below cannot wrap */
        t--;
        __atomic_store_n(&q->tail, t, __ATOMIC_RELAXED);
        full_fence(); /* publish tail before reading head */
        h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        if (h > t) { /* thieves took everything meanwhile */
                __atomic_store_n(&q->tail, t + 1, __ATOMIC_RELAXED);
                return NULL;
        }
        item = __atomic_load_n(&q->slot[t % LOCALQ_SIZE], __ATOMIC_RELAXED);
        if (h < t)
                return item; /* no thief can reach index t now */
        /* the last one: a thief may be claiming it too */
        if (!__atomic_compare_exchange_n(&q->head, &h, h + 1, false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_RELAXED))
                item = NULL;
        __atomic_store_n(&q->tail, t + 1, __ATOMIC_RELAXED);
        return item;
}

static inline size_t localq_size(const LocalRunq *q)
{
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        size_t h = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
        return t > h ? t - h : 0;
}

#endif
