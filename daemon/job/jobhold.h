/* SPDX-License-Identifier: MIT */
/*
 * jobhold.h — the held states of a job (PROTOCOL.md, "Scheduling jobs"): scheduled (a
 * due time ahead), waiting (jobs of its `after` not done), retrying (a failed run, its
 * next attempt ahead); and the ways out of them: the due set's timer, a dependency's
 * end, job.retry.
 *
 * The job table calls in here; this file reaches the table only through what it was
 * handed at jobhold_init() (JobHoldOwner), never its functions, so the two stay layers,
 * as the dispatcher does with its DispatchOps. Every transition goes through job_transition() and the table's machine; what
 * a held state means for the due set and for dependents is jobhold_listen(), one of the
 * table's listeners.
 */
#ifndef FIBERD_DAEMON_JOBHOLD_H
#define FIBERD_DAEMON_JOBHOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#include "daemon/job/jobstate.h"
#include "daemon/job/dispatch.h"
#include "daemon/job/jobkeys.h"
#include "daemon/job/jobtimer.h"

/* JobHoldOwner - what the held states need of their owner (the job table), handed over
 * at jobhold_init(); none owned, all must outlive the JobHold. */
typedef struct JobHoldOwner {
        pthread_mutex_t *lock;     /* the owner's lock: every *_locked function runs under it */
        const JobMachine *machine; /* every transition goes through it */
        Dispatcher *dispatch;      /* where a job is queued */
        const bool *stopping;      /* the owner stops: the timer returns */
        struct Job *(*find_locked)(void *owner, uint64_t id); /* a listed job, or NULL */
        void *owner;
} JobHoldOwner;

/* JobHold - the held states' part of the job table: its owner's handles, the due set and
 * the idempotency keys. */
typedef struct JobHold {
        pthread_mutex_t *lock;
        const JobMachine *machine;
        Dispatcher *dispatch;
        const bool *stopping;
        struct Job *(*find_locked)(void *owner, uint64_t id);
        void *owner;
        JobTimer due; /* scheduled and retrying jobs by due time (jobtimer.h) */
        JobKeys keys; /* idempotency keys (jobkeys.h) */
} JobHold;

/* jobhold_init - an empty part for @o's owner (copied). Context: start-up. */
void jobhold_init(JobHold *h, const JobHoldOwner *o);

/* jobhold_free - frees the due set and the keys. Context: exit. */
void jobhold_free(JobHold *h);

/*
 * jobhold_accept_locked - the first transition of a new, not yet listed job @j: waiting
 * when some of @deps (the jobs of its `after`, found in the table; NULL entries for ids
 * the table no longer lists, which ended before) are not done; failed at once when one
 * ended otherwise; scheduled when its run_at_ms is ahead; else queued (pushed to the
 * dispatcher; the owner's listener of the queued state starts it). @j's `dependents`
 * links are made here.
 * Return: 0; -ENOMEM (nothing changed: @j is still new and unlisted).
 * Context: table lock held; does not yield.
 */
int jobhold_accept_locked(JobHold *h, Job *j, Job *const *deps, size_t n_deps);

/*
 * jobhold_listen - the table machine's listener for the held states (jobstate.h): a job
 * entering scheduled or retrying joins the due set (retrying: after its backoff, its
 * attempt counted), one leaving them leaves it; a job that ends releases or fails the
 * jobs waiting on it; a restored held job rejoins the due set.
 * Context: table lock held; does not yield.
 */
void jobhold_listen(JobHold *h, Job *j, JobState from, JobEvent ev);

/*
 * jobhold_restore_waiting_locked - a waiting @j just restored (its plugin loaded): link
 * it to its dependencies, restored before it (smaller ids); one the table no longer
 * lists counts as done. Released into the queue when none is pending, failed when one
 * ended otherwise (the store missed that while fiberd stopped).
 * Context: table lock held, at start-up; does not yield.
 */
void jobhold_restore_waiting_locked(JobHold *h, Job *j);

/*
 * jobhold_run_due_locked - queue every held job due at @now_ms (CLOCK_REALTIME ms).
 * Return: how many were queued. Context: table lock held; does not yield.
 */
size_t jobhold_run_due_locked(JobHold *h, uint64_t now_ms);

/*
 * jobhold_timer - the due set's timer, a fiber's body: sleeps until the earliest due time
 * (at most a second, so a wall-clock step is noticed), queues what came due, and
 * returns once the table stops. Context: a fiber of the server group; yields.
 */
void jobhold_timer(JobHold *h);

/*
 * jobhold_revive_locked - job.retry: queue a failed, cancelled or dead @j again, its
 * attempt back to 0 (its errors stay listed).
 * Return: 0; -EALREADY: @j is not final, or done; -ENOMEM.
 * Context: table lock held; does not yield (the owner's listener of the queued state
 * starts it).
 */
int jobhold_revive_locked(JobHold *h, Job *j);

#endif
