/* SPDX-License-Identifier: MIT */
/*
 * joblines.h — a job's life in log lines an operator can follow, as Sidekiq and Celery
 * log theirs: one line when it is accepted ("queued (owner 1000, class batch, priority
 * 0)"), one when its code starts ("started (attempt 1 of 3, queued 4 ms)"), one when it
 * ends ("finished done in 12 ms", "failed in 3 ms: ..."), each a job line (log.h): the
 * text starts "job <id> plugin <name>: " and in the journal it carries FIBERD_JOB,
 * FIBERD_PLUGIN, FIBERD_OWNER and FIBERD_CLASS, so `journalctl FIBERD_JOB=42` shows one
 * job and `journalctl FIBERD_OWNER=1000 PRIORITY=5` one user's failures.
 *
 * Levels: a user's job is not the daemon's trouble. Queued, started, done and
 * cancelled are info; failed, dead and a failed attempt that will be retried are notice
 * (worth seeing, nothing for the operator to fix); warning and error stay for fiberd's
 * own trouble (a stall, a detached fiber, a store that cannot write).
 *
 * Volume: three lines a job. [fiberd] log_jobs = false (joblines_set()) drops the
 * queued, started and done lines; failures and cancellations are still logged. Each
 * call first checks one relaxed atomic and the log threshold, so a daemon logging none
 * of them pays two loads a job; a line that is logged costs one write(2) (or one
 * sendmsg to the journal), made by the caller outside the job table's lock.
 */
#ifndef FIBERD_DAEMON_JOBLINES_H
#define FIBERD_DAEMON_JOBLINES_H

#include <stdbool.h>

#include "daemon/job/job.h"

/* joblines_set - [fiberd] log_jobs: log the queued, started and done lines. Context: any
 * (start-up, SIGHUP); later lines see it. */
void joblines_set(bool on);

/* joblines_on - whether the queued, started and done lines are logged now (log_jobs
 * and the threshold lets info through). Context: any. */
bool joblines_on(void);

/*
 * joblines_queued - @j was accepted in @state (queued, scheduled, waiting: what it was
 * before the dispatcher could start it), with its owner, class, priority and timeout;
 * @fleet: it went to the fleet's shared queue. Context: any, after the table lock is let
 * go (reads fields fixed at submission).
 */
void joblines_queued(const Job *j, JobState state, bool fleet);

/* joblines_started - @j's code is about to run: its attempt and how long it was queued.
 * Context: its job fiber. */
void joblines_started(const Job *j);

/*
 * joblines_ended - @j's run ended: done, failed, dead, cancelled (final) or retrying
 * (due again at @due_ms), with how long it ran since @started_mono_ns and its error. The
 * two times are read under the lock by the caller: a finished job's JobLive (job.h) may
 * be gone by now. Context: its supervisor, after the run concluded, outside the table
 * lock.
 */
void joblines_ended(const Job *j, uint64_t started_mono_ns, uint64_t due_ms);

#endif
