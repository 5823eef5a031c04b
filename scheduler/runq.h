/* SPDX-License-Identifier: MIT */
/*
 * runq.h — the run queue: a bounded lock-free multi-producer multi-consumer ring of
 * pointers (Dmitry Vyukov's bounded MPMC queue: one sequence number per cell, one CAS
 * per push or pop).
 *
 * Bounded on purpose (flare, shared/seeds/000): no allocation after init, no memory
 * reclamation problem, steady latency. A group keeps the number of live fibers at or
 * below the capacity, so making a fiber ready can never find it full.
 *
 * A Runq is an object a scheduling group holds, not a part of the group: a later
 * design holds one per job class (seastar's shares, shared/seeds/002) or per worker.
 */
#ifndef FIBERD_RUNQ_H
#define FIBERD_RUNQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct RunqCell {
        size_t seq;
        void *item;
} RunqCell;

typedef struct Runq {
        RunqCell *cells;
        size_t mask;                               /* capacity - 1 */
        size_t head __attribute__((aligned(128))); /* next pop position */
        size_t tail __attribute__((aligned(128))); /* next push position */
        char pad[128 - sizeof(size_t)];
} Runq;

/*
 * runq_init - allocate @capacity cells (a power of two, >= 2).
 * Return: 0; -EINVAL when @capacity is not a power of two; -ENOMEM.
 * Context: any; before the queue is shared.
 */
int runq_init(Runq *q, size_t capacity);
void runq_term(Runq *q);

/* runq_push - append @item (non-NULL). Return: true, or false when the queue is full.
 * Context: any thread; lock-free. */
bool runq_push(Runq *q, void *item);

/* runq_pop - take the oldest item. Return: it, or NULL when empty. Context: any thread;
 * lock-free. */
static inline void *runq_pop(Runq *q)
{
        size_t pos = __atomic_load_n(&q->head, __ATOMIC_RELAXED);

        /* Empty is told from the head cell's sequence number alone: the tail is the
         * producers' line, and a consumer that read it on every pop pulled it away from
         * the producer at each push (a cache-line round trip per fiber when one worker
         * creates and another runs). Inline: it runs at every switch. */
        for (;;) {
                RunqCell *c = &q->cells[pos & q->mask];
                intptr_t dif = (intptr_t)(__atomic_load_n(&c->seq, __ATOMIC_ACQUIRE) - (pos + 1));

                if (dif == 0) {
                        if (__atomic_compare_exchange_n(&q->head, &pos, pos + 1, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                                void *item = c->item;
                                __atomic_store_n(&c->seq, pos + q->mask + 1, __ATOMIC_RELEASE);
                                return item;
                        }
                } else if (dif < 0) {
                        return NULL; /* empty, or its cell not published yet */
                } else {
                        pos = __atomic_load_n(&q->head, __ATOMIC_RELAXED); /* lost a race */
                }
        }
}

/*
 * runq_pop_glance - runq_pop() for a caller that has other work at hand (a worker whose
 * yield list holds fibers): it reads the tail first, beside the head, so that an empty
 * queue costs two parallel loads rather than a head-then-cell chain (the empty check
 * on every yield of a lone worker). A consumer that reads the tail pulls the producers'
 * line, so only this path does. Return: the oldest item; NULL when empty.
 * runq_glance_empty() is its empty check alone: true when nothing was queued at the
 * two loads (a push may land right after).
 */
static inline bool runq_glance_empty(const Runq *q)
{
        return __atomic_load_n(&q->tail, __ATOMIC_RELAXED) ==
               __atomic_load_n(&q->head, __ATOMIC_RELAXED);
}

static inline void *runq_pop_glance(Runq *q)
{
        return runq_glance_empty(q) ? NULL : runq_pop(q);
}

/* runq_size - an estimate of the items queued now (exact when nobody pushes or pops). */
size_t runq_size(const Runq *q);

#endif
