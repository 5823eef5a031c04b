/* SPDX-License-Identifier: MIT */
/* The bounded MPMC run queue: order, full/empty, and every item exactly once under
 * contention from several producers and consumers. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "scheduler/runq.h"

Test(runq, rejects_bad_capacity)
{
        Runq q;
        cr_assert_eq(runq_init(&q, 0), -EINVAL);
        cr_assert_eq(runq_init(&q, 1000), -EINVAL);
}

Test(runq, fifo_full_and_empty)
{
        Runq q;
        cr_assert_eq(runq_init(&q, 8), 0);
        cr_assert_null(runq_pop(&q));
        for (uintptr_t i = 1; i <= 8; i++)
                cr_assert(runq_push(&q, (void *)i));
        cr_assert_not(runq_push(&q, (void *)9), "a full queue refuses");
        cr_assert_eq(runq_size(&q), 8);
        for (uintptr_t i = 1; i <= 8; i++)
                cr_assert_eq((uintptr_t)runq_pop(&q), i);
        cr_assert_null(runq_pop(&q));
        runq_term(&q);
}

/* Empty is told from the head cell alone (runq_pop()) and from head and tail
 * (runq_pop_glance()): both must agree lap after lap, in every fill level, or a worker
 * would idle with work queued or take a cell not yet published. */
Test(runq, both_pops_tell_empty_and_order_over_many_laps)
{
        Runq q;
        uintptr_t next_in = 1, next_out = 1;

        cr_assert_eq(runq_init(&q, 4), 0);
        for (unsigned lap = 0; lap < 64; lap++) {
                unsigned fill = lap % 5; /* 0..4: empty to full */

                for (unsigned i = 0; i < fill; i++)
                        cr_assert(runq_push(&q, (void *)next_in++));
                for (unsigned i = 0; i < fill; i++) {
                        void *v = i % 2 ? runq_pop_glance(&q) : runq_pop(&q);
                        cr_assert_eq((uintptr_t)v, next_out, "lap %u: %p, expected %lu", lap, v,
                                     (unsigned long)next_out);
                        next_out++;
                }
                cr_assert_null(runq_pop(&q), "lap %u: an empty queue popped", lap);
                cr_assert_null(runq_pop_glance(&q), "lap %u: an empty queue glanced", lap);
        }
        runq_term(&q);
}

#define PRODUCERS 4
#define CONSUMERS 4
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define PER_PRODUCER 20000
#else
#define PER_PRODUCER 200000
#endif

static Runq q;
static unsigned char *seen;
static int producers_done;
static long consumed;

static void *producer(void *arg)
{
        uintptr_t base = (uintptr_t)arg * PER_PRODUCER;
        for (uintptr_t i = 0; i < PER_PRODUCER; i++)
                while (!runq_push(&q, (void *)(base + i + 1)))
                        ; /* full: consumers will make room */
        __atomic_fetch_add(&producers_done, 1, __ATOMIC_RELEASE);
        return NULL;
}

static void *consumer(void *arg)
{
        for (;;) {
                uintptr_t v = (uintptr_t)runq_pop(&q);
                if (v) {
                        __atomic_fetch_add(&seen[v - 1], 1, __ATOMIC_RELAXED);
                        __atomic_fetch_add(&consumed, 1, __ATOMIC_RELAXED);
                } else if (__atomic_load_n(&producers_done, __ATOMIC_ACQUIRE) == PRODUCERS &&
                           !runq_size(&q)) {
                        return NULL;
                }
        }
}

Test(runq, every_item_exactly_once_under_contention, .timeout = 120)
{
        pthread_t p[PRODUCERS], c[CONSUMERS];
        size_t total = (size_t)PRODUCERS * PER_PRODUCER;

        cr_assert_eq(runq_init(&q, 1024), 0); /* small: producers hit "full" often */
        seen = calloc(total, 1);
        for (uintptr_t i = 0; i < CONSUMERS; i++)
                pthread_create(&c[i], NULL, consumer, NULL);
        for (uintptr_t i = 0; i < PRODUCERS; i++)
                pthread_create(&p[i], NULL, producer, (void *)i);
        for (int i = 0; i < PRODUCERS; i++)
                pthread_join(p[i], NULL);
        for (int i = 0; i < CONSUMERS; i++)
                pthread_join(c[i], NULL);
        cr_assert_eq(consumed, (long)total);
        for (size_t i = 0; i < total; i++)
                cr_assert_eq(seen[i], 1, "item %zu seen %d times", i, seen[i]);
        free(seen);
        runq_term(&q);
}
