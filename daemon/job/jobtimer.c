/* SPDX-License-Identifier: MIT */
/*
 * jobtimer.c — the due set's heap (see jobtimer.h). Ties on due_ms go by id, so jobs
 * scheduled for the same millisecond are queued in submission order.
 */
#include "daemon/job/jobtimer.h"

#include <errno.h>
#include <stdlib.h>

void jobtimer_init(JobTimer *tm)
{
        *tm = (JobTimer){0};
        fiber_event_init(&tm->wake);
}

void jobtimer_free(JobTimer *tm)
{
        free(tm->heap);
        tm->heap = NULL;
        tm->n = tm->cap = 0;
}

static bool before(const Job *a, const Job *b)
{
        return a->live->due_ms != b->live->due_ms ? a->live->due_ms < b->live->due_ms
                                                  : a->id < b->id;
}

static void place(JobTimer *tm, size_t i, Job *j)
{
        tm->heap[i] = j;
        j->live->due_index = i;
}

static void sift_up(JobTimer *tm, size_t i)
{
        Job *j = tm->heap[i];

        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!before(j, tm->heap[parent]))
                        break;
                place(tm, i, tm->heap[parent]);
                i = parent;
        }
        place(tm, i, j);
}

static void sift_down(JobTimer *tm, size_t i)
{
        Job *j = tm->heap[i];

        for (;;) {
                size_t c = 2 * i + 1;
                if (c >= tm->n)
                        break;
                if (c + 1 < tm->n && before(tm->heap[c + 1], tm->heap[c]))
                        c++;
                if (!before(tm->heap[c], j))
                        break;
                place(tm, i, tm->heap[c]);
                i = c;
        }
        place(tm, i, j);
}

int jobtimer_add_locked(JobTimer *tm, Job *j, uint64_t due_ms)
{
        if (j->live->due_index != SIZE_MAX)
                jobtimer_remove_locked(tm, j);
        if (tm->n == tm->cap) {
                size_t cap = tm->cap ? tm->cap * 2 : 64;
                Job **h = realloc(tm->heap, cap * sizeof(*h));
                if (!h)
                        return -ENOMEM;
                tm->heap = h;
                tm->cap = cap;
        }
        j->live->due_ms = due_ms;
        tm->heap[tm->n] = j;
        sift_up(tm, tm->n++);
        if (tm->heap[0] == j)
                fiber_event_set(&tm->wake);
        return 0;
}

void jobtimer_remove_locked(JobTimer *tm, Job *j)
{
        size_t i = j->live->due_index;
        Job *last;

        if (i == SIZE_MAX || i >= tm->n || tm->heap[i] != j)
                return;
        j->live->due_index = SIZE_MAX;
        last = tm->heap[--tm->n];
        if (i == tm->n)
                return;
        place(tm, i, last);
        if (i > 0 && before(last, tm->heap[(i - 1) / 2]))
                sift_up(tm, i);
        else
                sift_down(tm, i);
}

Job *jobtimer_pop_due_locked(JobTimer *tm, uint64_t now_ms)
{
        Job *j;

        if (!tm->n || tm->heap[0]->live->due_ms > now_ms)
                return NULL;
        j = tm->heap[0];
        jobtimer_remove_locked(tm, j);
        return j;
}
