/* SPDX-License-Identifier: MIT */
/*
 * localq.h — a worker's local run queue: a bounded single-producer, multi-consumer FIFO
 * ring (tRPC-Cpp Fiber's v2 policy, shared/seeds/001; Go's per-P run queue).
 *
 * Only the owning worker pushes (fibers it spawns, fibers that yield on it); the owner
 * and its idle siblings pop, claiming the head with a CAS. A consumer reads slot[h]
 * before its CAS on head; the owner never writes slot[h] in between, because it writes
 * only below head + capacity and head cannot pass h until that CAS. Full means "use
 * the group's shared run queue instead", so a local queue never holds a fiber that
 * the group's capacity does not already count.
 */
#ifndef FIBERD_LOCALQ_H
#define FIBERD_LOCALQ_H

#include <stdbool.h>
#include <stddef.h>

#define LOCALQ_SIZE 256

typedef struct LocalRunq {
        size_t head __attribute__((aligned(64))); /* consumers CAS it */
        size_t tail __attribute__((aligned(64))); /* the owner's, published with release */
        void *slot[LOCALQ_SIZE];
} LocalRunq;

/* localq_push - append @item. Return: false when full. Context: the owning worker. */
static inline bool localq_push(LocalRunq *q, void *item)
{
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        if (t - h >= LOCALQ_SIZE)
                return false;
        __atomic_store_n(&q->slot[t % LOCALQ_SIZE], item, __ATOMIC_RELAXED);
        __atomic_store_n(&q->tail, t + 1, __ATOMIC_RELEASE);
        return true;
}

/* localq_pop - take the oldest item, or NULL. Context: any thread; lock-free. */
static inline void *localq_pop(LocalRunq *q)
{
        size_t h = __atomic_load_n(&q->head, __ATOMIC_ACQUIRE);
        for (;;) {
                size_t t = __atomic_load_n(&q->tail, __ATOMIC_ACQUIRE);
                if (h >= t)
                        return NULL;
                void *item = __atomic_load_n(&q->slot[h % LOCALQ_SIZE], __ATOMIC_RELAXED);
                if (__atomic_compare_exchange_n(&q->head, &h, h + 1, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE))
                        return item;
        }
}

static inline size_t localq_size(const LocalRunq *q)
{
        size_t t = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        size_t h = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
        return t > h ? t - h : 0;
}

#endif
