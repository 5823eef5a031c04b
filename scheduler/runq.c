/* SPDX-License-Identifier: MIT */
/*
 * runq.c — bounded MPMC run queue (see runq.h).
 *
 * Each cell carries a sequence number. A producer at position p may fill the cell when
 * its seq == p, then publishes seq = p + 1; a consumer at position p may empty it when
 * seq == p + 1, then frees it for the next lap with seq = p + capacity. Positions are
 * claimed with a CAS on tail (producers) or head (consumers).
 */
#include "scheduler/runq.h"

#include <errno.h>
#include <stdlib.h>

int runq_init(Runq *q, size_t capacity)
{
        if (capacity < 2 || (capacity & (capacity - 1)))
                return -EINVAL;
        q->cells = aligned_alloc(64, capacity * sizeof(RunqCell));
        if (!q->cells)
                return -ENOMEM;
        for (size_t i = 0; i < capacity; i++) {
                q->cells[i].seq = i;
                q->cells[i].item = NULL;
        }
        q->mask = capacity - 1;
        q->head = q->tail = 0;
        return 0;
}

void runq_term(Runq *q)
{
        free(q->cells);
        q->cells = NULL;
}

bool runq_push(Runq *q, void *item)
{
        size_t pos = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        for (;;) {
                RunqCell *c = &q->cells[pos & q->mask];
                size_t seq = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
                intptr_t dif = (intptr_t)seq - (intptr_t)pos;
                if (dif == 0) {
                        if (__atomic_compare_exchange_n(&q->tail, &pos, pos + 1, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                                c->item = item;
                                __atomic_store_n(&c->seq, pos + 1, __ATOMIC_RELEASE);
                                return true;
                        }
                } else if (dif < 0) {
                        return false; /* full */
                } else {
                        pos = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
                }
        }
}

size_t runq_size(const Runq *q)
{
        size_t head = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
        size_t tail = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
        return tail > head ? tail - head : 0;
}
