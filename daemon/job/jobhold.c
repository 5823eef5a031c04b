/* SPDX-License-Identifier: MIT */
/*
 * jobhold.c — scheduled, waiting and retrying jobs (see jobhold.h).
 *
 * Where each comes from:
 *  - scheduled: beanstalkd's delayed jobs and Sidekiq's schedule set. The due set
 *    (jobtimer.h) is keyed by wall-clock time, because that is what a client asks for
 *    (run_at) and what a record keeps across a restart; a job due while fiberd was down
 *    is simply due at the first look after start.
 *  - retrying: Sidekiq's retry set: a failed run with attempts left waits
 *    job_backoff_ms() (exponential, capped, with jitter) in the same due set.
 *  - waiting: Celery's chains and pueue's --after. Each job keeps references to the
 *    waiting jobs that run after it (Job.dependents); its end, seen by jobhold_listen(),
 *    counts down their deps_pending or fails them. A dependency always has a smaller id
 *    than its dependents (it existed at their submission), so a restore in id order
 *    finds every dependency already restored.
 */
#include "daemon/job/jobhold.h"
#include "daemon/job/jobtimer.h"
#include "daemon/obs/log.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Links @j as a dependent of @dep (a reference). */
static int add_dependent(Job *dep, Job *j)
{
        if (dep->live->n_dependents == dep->live->cap_dependents) {
                size_t cap = dep->live->cap_dependents ? dep->live->cap_dependents * 2 : 4;
                Job **a = realloc(dep->live->dependents, cap * sizeof(*a));
                if (!a)
                        return -ENOMEM;
                dep->live->dependents = a;
                dep->live->cap_dependents = cap;
        }
        dep->live->dependents[dep->live->n_dependents++] = job_ref(j);
        return 0;
}

/* Drops the last @n links made to @j (an accept that failed half way). */
static void drop_dependents(Job *const *deps, size_t n, Job *j)
{
        for (size_t i = 0; i < n; i++)
                if (deps[i] && deps[i]->live && deps[i]->live->n_dependents &&
                    deps[i]->live->dependents[deps[i]->live->n_dependents - 1] == j)
                        job_unref(deps[i]->live->dependents[--deps[i]->live->n_dependents]);
}

/* Queues a held (or new) @j now: the dispatcher's queue, then @ev's transition. */
static int queue_now_locked(JobHold *t, Job *j, JobEvent ev)
{
        int r = dispatch_push_locked(t->dispatch, j);

        if (r < 0)
                return r;
        job_transition(t->machine, j, ev, NULL);
        return 0;
}

/* @j's due time (delay_ms, run_at) is ahead; no clock read for a job without one. */
static bool due_ahead(const Job *j)
{
        uint64_t at = job_run_at_ms(j);

        return at && at > job_now_ms();
}

/* Where a job whose dependencies are all done goes: scheduled when its due time is
 * ahead, else queued. */
static void release_locked(JobHold *t, Job *j, JobEvent queue_ev)
{
        if (due_ahead(j)) {
                job_transition(t->machine, j, JOB_EV_SCHEDULE, NULL);
                return;
        }
        if (queue_now_locked(t, j, queue_ev) < 0 && jobtimer_add_locked(&t->due, j, 0) == 0)
                /* no memory for the queue now: the due set tries again (at once) */
                job_transition(t->machine, j, JOB_EV_SCHEDULE, NULL);
}

int jobhold_accept_locked(JobHold *t, Job *j, Job *const *deps, size_t n_deps)
{
        const Job *failed = NULL;
        int r;

        for (size_t i = 0; i < n_deps; i++) {
                if (!deps[i] || deps[i]->state == JOB_DONE)
                        continue;
                if (job_state_final(deps[i]->state)) {
                        failed = deps[i];
                        continue;
                }
                if ((r = add_dependent(deps[i], j)) < 0) {
                        drop_dependents(deps, i, j);
                        return r;
                }
                j->live->deps_pending++;
        }
        if (failed) {
                char msg[160];
                drop_dependents(deps, n_deps, j);
                j->live->deps_pending = 0;
                snprintf(msg, sizeof(msg), "job %llu, which this job runs after, ended %s",
                         (unsigned long long)failed->id, job_state_name(failed->state));
                job_transition(t->machine, j, JOB_EV_WAIT, NULL);
                job_transition(t->machine, j, JOB_EV_DEP_FAILED,
                               &(JobChange){.code = IPC_FAILED_PRECONDITION, .message = msg});
                return 0;
        }
        if (j->live->deps_pending) {
                job_transition(t->machine, j, JOB_EV_WAIT, NULL);
                return 0;
        }
        if (due_ahead(j)) {
                job_transition(t->machine, j, JOB_EV_SCHEDULE, NULL);
                return 0;
        }
        return queue_now_locked(t, j, JOB_EV_SUBMIT);
}

/* @dep ended: its waiting dependents are released (the last dependency done) or fail. */
static void dependency_ended_locked(JobHold *t, Job *dep)
{
        Job **a = dep->live->dependents;
        size_t n = dep->live->n_dependents;

        dep->live->dependents = NULL;
        dep->live->n_dependents = dep->live->cap_dependents = 0;
        for (size_t i = 0; i < n; i++) {
                Job *j = a[i];
                if (j->state != JOB_WAITING) {
                        job_unref(j);
                        continue;
                }
                if (dep->state == JOB_DONE) {
                        if (j->live->deps_pending && --j->live->deps_pending == 0)
                                release_locked(t, j, JOB_EV_RELEASE);
                } else {
                        char msg[160];
                        snprintf(msg, sizeof(msg), "job %llu, which this job runs after, ended %s",
                                 (unsigned long long)dep->id, job_state_name(dep->state));
                        j->live->deps_pending = 0;
                        job_transition(
                                t->machine, j, JOB_EV_DEP_FAILED,
                                &(JobChange){.code = IPC_FAILED_PRECONDITION, .message = msg});
                }
                job_unref(j);
        }
        free(a);
}

void jobhold_restore_waiting_locked(JobHold *t, Job *j)
{
        const Job *failed = NULL;

        j->live->deps_pending = 0;
        for (size_t i = 0; i < j->n_after; i++) {
                Job *dep = t->find_locked(t->owner, job_after(j)[i]);
                if (!dep || dep->state == JOB_DONE)
                        continue; /* gone: it ended before, and this job was not failed */
                if (job_state_final(dep->state)) {
                        failed = dep;
                        break;
                }
                if (add_dependent(dep, j) == 0)
                        j->live->deps_pending++;
        }
        if (failed || !j->live->deps_pending) {
                /* the store missed its end: settle it now */
                if (failed) {
                        char msg[160];
                        snprintf(msg, sizeof(msg), "job %llu, which this job runs after, ended %s",
                                 (unsigned long long)failed->id, job_state_name(failed->state));
                        job_transition(
                                t->machine, j, JOB_EV_DEP_FAILED,
                                &(JobChange){.code = IPC_FAILED_PRECONDITION, .message = msg});
                } else {
                        release_locked(t, j, JOB_EV_RELEASE);
                }
        }
}

void jobhold_listen(JobHold *t, Job *j, JobState from, JobEvent ev)
{
        if (j->fleet_copy)
                return;
        if (job_state_held(from) != job_state_held(j->state)) /* max_queued_per_user */
                dispatch_count_held_locked(t->dispatch, j->owner,
                                           job_state_held(j->state) ? 1 : -1);
        if ((from == JOB_SCHEDULED || from == JOB_RETRYING) && j->state != from)
                jobtimer_remove_locked(&t->due, j);
        switch (j->state) {
        case JOB_SCHEDULED:
                if (ev == JOB_EV_RESTORE) /* due_ms from the record */
                        j->live->due_ms = j->live->due_ms ? j->live->due_ms : job_run_at_ms(j);
                else
                        j->live->due_ms = job_run_at_ms(j);
                if (jobtimer_add_locked(&t->due, j, j->live->due_ms) < 0)
                        log_job(LOG_ERR, j->id, j->plugin_name,
                                "out of memory: its due time is not watched until a restart");
                break;
        case JOB_RETRYING:
                if (ev == JOB_EV_RETRY) {
                        j->attempt++;
                        j->live->due_ms = job_now_ms() + job_backoff_ms(j, j->attempt);
                }
                if (j->from_fleet && ev != JOB_EV_RESTORE)
                        break; /* the fleet's schedule set holds it (jobtable.c hands it off) */
                if (jobtimer_add_locked(&t->due, j, j->live->due_ms) < 0)
                        log_job(LOG_ERR, j->id, j->plugin_name,
                                "out of memory: its next attempt is not watched until a restart");
                break;
        default:
                break;
        }
        if (job_state_final(j->state) && ev != JOB_EV_RESTORE && j->live->dependents)
                dependency_ended_locked(t, j);
        if (job_plan_key(j) && ev != JOB_EV_RESTORE &&
            job_state_final(j->state) != job_state_final(from))
                jobkeys_put_locked(&t->keys, j->owner, job_plan_key(j), j->id,
                                   job_state_final(j->state) ? j->finished_ms : 0);
}

/* What one run left in @j, cleared before the next one: its fiber's flags (its outcome
 * and events went with its JobRun, job.h). The dispatcher fiber has joined its fiber by
 * then (dispatch.c concludes a run only after that). */
static void reset_run(Job *j)
{
        j->cancel_requested = false;
        j->timed_out = false;
        __atomic_store_n(&j->fiber_start, JOB_FIBER_WAITING, __ATOMIC_RELAXED);
        j->fail_permanent = false;
        j->interrupted = false;
        j->requeued = false;
        free(j->result);
        j->result = NULL;
        j->result_len = 0;
        __atomic_store_n(&j->progress_done, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&j->progress_total, 0, __ATOMIC_RELAXED);
        fiber_event_reset(&j->finished);
        free(j->error_message);
        j->error_message = NULL;
}

size_t jobhold_run_due_locked(JobHold *t, uint64_t now_ms)
{
        size_t n = 0;
        Job *j;

        while ((j = jobtimer_pop_due_locked(&t->due, now_ms))) {
                if (j->state == JOB_RETRYING)
                        reset_run(j);
                if (queue_now_locked(t, j, JOB_EV_DUE) < 0) {
                        /* no memory for the queue: look again in a second */
                        jobtimer_add_locked(&t->due, j, now_ms + 1000);
                        break;
                }
                n++;
        }
        return n;
}

void jobhold_init(JobHold *h, const JobHoldOwner *o)
{
        *h = (JobHold){.lock = o->lock,
                       .machine = o->machine,
                       .dispatch = o->dispatch,
                       .stopping = o->stopping,
                       .find_locked = o->find_locked,
                       .owner = o->owner};
        jobtimer_init(&h->due);
}

void jobhold_free(JobHold *h)
{
        jobtimer_free(&h->due);
        jobkeys_free(&h->keys);
}

void jobhold_timer(JobHold *t)
{
        for (;;) {
                uint64_t now_ms, next_ms, wait_ms;

                pthread_mutex_lock(t->lock);
                if (*t->stopping) {
                        pthread_mutex_unlock(t->lock);
                        return;
                }
                fiber_event_reset(&t->due.wake); /* an add from here on sets it again */
                now_ms = job_now_ms();
                jobhold_run_due_locked(t, now_ms); /* the table's dispatch listener kicks */
                next_ms = jobtimer_next_ms_locked(&t->due);
                pthread_mutex_unlock(t->lock);
                wait_ms = next_ms <= now_ms ? 0 : next_ms - now_ms;
                if (wait_ms > 1000)
                        wait_ms = 1000; /* a wall-clock step is noticed within a second */
                if (fiber_event_wait(&t->due.wake, sched_deadline_after(wait_ms * NSEC_PER_MSEC)) ==
                    -ECANCELED)
                        return;
        }
}

int jobhold_revive_locked(JobHold *t, Job *j)
{
        if (!job_state_final(j->state) || j->state == JOB_DONE || j->fleet_copy)
                return -EALREADY;
        if (j->detached || job_fiber(j)) /* its code still runs, or its run still ends */
                return -EBUSY;
        if (job_live_new(j) < 0) /* dropped once it was final: a new life needs one */
                return -ENOMEM;
        reset_run(j);
        j->attempt = 0;
        j->run_here = false; /* its record is written now: a job of this host's own */
        return queue_now_locked(t, j, JOB_EV_REVIVE);
}
