/* SPDX-License-Identifier: MIT */
/*
 * jobtimer.h — the job table's due set: scheduled jobs (a delay or a run_at) and jobs
 * retrying after a failed run, ordered by the wall-clock time they are queued at.
 *
 * A binary min-heap of Job pointers keyed by Job.due_ms (CLOCK_REALTIME milliseconds,
 * since that is what a record keeps and what survives a restart), with each job's place
 * in Job.due_index so a cancel takes it out in O(log n). The heap is the timer heap of
 * libuv's src/timer.c and of Sidekiq's schedule set (a sorted set by time): the job
 * table's timer fiber (jobtable.c) sleeps until the earliest due time, or until an
 * earlier one is added (@wake), then queues what came due.
 *
 * Context: every function runs under the job table's lock; none yields or allocates but
 * jobtimer_add_locked() (the heap doubles).
 */
#ifndef FIBERD_DAEMON_JOBTIMER_H
#define FIBERD_DAEMON_JOBTIMER_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/job/job.h"
#include "scheduler/sched.h"

typedef struct JobTimer {
        Job **heap; /* owned array; the jobs are the table's (no reference here) */
        size_t n, cap;
        FiberEvent wake; /* set when the earliest due time moved earlier (or at stop) */
} JobTimer;

/* jobtimer_init - an empty set. Context: start-up. */
void jobtimer_init(JobTimer *tm);

/* jobtimer_free - frees the heap (the jobs are not touched). Accepts an empty set. */
void jobtimer_free(JobTimer *tm);

/*
 * jobtimer_add_locked - put @j in the set, due at @due_ms (written to Job.due_ms); sets
 * @wake when it is now the earliest. Return: 0; -ENOMEM (not added).
 */
int jobtimer_add_locked(JobTimer *tm, Job *j, uint64_t due_ms);

/* jobtimer_remove_locked - take @j out of the set; a no-op when it is not in it. */
void jobtimer_remove_locked(JobTimer *tm, Job *j);

/* jobtimer_pop_due_locked - the earliest job due at or before @now_ms, taken out of the
 * set; NULL when none is. */
Job *jobtimer_pop_due_locked(JobTimer *tm, uint64_t now_ms);

/* jobtimer_next_ms_locked - the earliest due time in the set; UINT64_MAX when empty. */
static inline uint64_t jobtimer_next_ms_locked(const JobTimer *tm)
{
        return tm->n ? tm->heap[0]->live->due_ms : UINT64_MAX;
}

/* jobtimer_count_locked - jobs in the set. */
static inline size_t jobtimer_count_locked(const JobTimer *tm)
{
        return tm->n;
}

#endif
