/* SPDX-License-Identifier: MIT */
/*
 * jobhold.h — the held states of a job (PROTOCOL.md, "Scheduling jobs"): scheduled (a
 * due time ahead), waiting (jobs of its `after` not done), retrying (a failed run, its
 * next attempt ahead); and the ways out of them: the due set's timer, a dependency's
 * end, job.retry.
 *
 * The job table calls in here; this file reaches the table only through its fields (the
 * lock, the machine, the dispatcher, the due set), never its functions, so the two stay
 * layers. Every transition goes through job_transition() and the table's machine; what
 * a held state means for the due set and for dependents is jobhold_listen(), one of the
 * table's listeners.
 */
#ifndef FIBERD_DAEMON_JOBHOLD_H
#define FIBERD_DAEMON_JOBHOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/job/jobstate.h"
#include "daemon/job/jobtable.h"

/*
 * jobhold_accept_locked - the first transition of a new, not yet listed job @j: waiting
 * when some of @deps (the jobs of its `after`, found in the table; NULL entries for ids
 * the table no longer lists, which ended before) are not done; failed at once when one
 * ended otherwise; scheduled when its run_at_ms is ahead; else queued (pushed to the
 * dispatcher, not pumped). @j's `dependents` links are made here.
 * Return: 0 and *@ret_queued (true: it is queued now); -ENOMEM (nothing changed: @j is
 * still new and unlisted).
 * Context: table lock held; does not yield.
 */
int jobhold_accept_locked(JobTable *t, Job *j, Job *const *deps, size_t n_deps, bool *ret_queued);

/*
 * jobhold_listen - the table machine's listener for the held states (jobstate.h): a job
 * entering scheduled or retrying joins the due set (retrying: after its backoff, its
 * attempt counted), one leaving them leaves it; a job that ends releases or fails the
 * jobs waiting on it; a restored held job rejoins the due set.
 * Context: table lock held; does not yield.
 */
void jobhold_listen(void *ctx, Job *j, JobState from, JobEvent ev);

/*
 * jobhold_restore_waiting_locked - a waiting @j just restored (its plugin loaded): link
 * it to its dependencies, restored before it (smaller ids); one the table no longer
 * lists counts as done. Released into the queue when none is pending, failed when one
 * ended otherwise (the store missed that while fiberd stopped).
 * Context: table lock held, at start-up; does not yield.
 */
void jobhold_restore_waiting_locked(JobTable *t, Job *j);

/*
 * jobhold_run_due_locked - queue every held job due at @now_ms (CLOCK_REALTIME ms).
 * Return: how many were queued. Context: table lock held; does not yield.
 */
size_t jobhold_run_due_locked(JobTable *t, uint64_t now_ms);

/*
 * jobhold_timer - the due set's timer, a fiber's body: sleeps until the earliest due time
 * (at most a second, so a wall-clock step is noticed), queues what came due, and
 * returns once the table stops. Context: a fiber of the server group; yields.
 */
void jobhold_timer(JobTable *t);

/*
 * jobhold_revive_locked - job.retry: queue a failed, cancelled or dead @j again, its
 * attempt back to 0 (its errors stay listed).
 * Return: 0; -EALREADY: @j is not final, or done; -ENOMEM.
 * Context: table lock held; does not yield (the caller pumps the dispatcher).
 */
int jobhold_revive_locked(JobTable *t, Job *j);

#endif
