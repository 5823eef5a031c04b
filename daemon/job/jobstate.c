/* SPDX-License-Identifier: MIT */
/*
 * jobstate.c — the table of a job's transitions and job_transition(), the one writer of
 * Job.state (see jobstate.h).
 *
 * The table is a list of rows, not a state × event matrix: it reads as the diagram
 * does, docs/design.md and the unit test compare it row by row, and a restore, whose
 * target is whatever the record says, is five rows of one event. A look-up walks at
 * most sixteen rows, nothing next to the rest of a transition.
 */
#include "daemon/job/jobstate.h"
#include "daemon/job/job.h"
#include "daemon/obs/log.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const JobTransition job_transition_table[] = {
        {JOB_NEW, JOB_EV_SUBMIT, JOB_QUEUED},
        {JOB_NEW, JOB_EV_RESTORE, JOB_QUEUED},
        {JOB_NEW, JOB_EV_RESTORE, JOB_RUNNING},
        {JOB_NEW, JOB_EV_RESTORE, JOB_DONE},
        {JOB_NEW, JOB_EV_RESTORE, JOB_FAILED},
        {JOB_NEW, JOB_EV_RESTORE, JOB_CANCELLED},
        {JOB_QUEUED, JOB_EV_DISPATCH, JOB_RUNNING},
        {JOB_QUEUED, JOB_EV_CANCEL, JOB_CANCELLED},
        {JOB_QUEUED, JOB_EV_TIMEOUT, JOB_CANCELLED},
        {JOB_QUEUED, JOB_EV_INTERRUPT, JOB_FAILED},
        {JOB_RUNNING, JOB_EV_REQUEUE, JOB_QUEUED},
        {JOB_RUNNING, JOB_EV_RETURN_OK, JOB_DONE},
        {JOB_RUNNING, JOB_EV_RETURN_ERR, JOB_FAILED},
        {JOB_RUNNING, JOB_EV_CANCEL, JOB_CANCELLED},
        {JOB_RUNNING, JOB_EV_TIMEOUT, JOB_CANCELLED},
        {JOB_RUNNING, JOB_EV_DETACH, JOB_CANCELLED},
        {JOB_RUNNING, JOB_EV_INTERRUPT, JOB_FAILED},
        {JOB_NEW, JOB_EV_RESTORE, JOB_SCHEDULED},
        {JOB_NEW, JOB_EV_RESTORE, JOB_WAITING},
        {JOB_NEW, JOB_EV_RESTORE, JOB_RETRYING},
        {JOB_NEW, JOB_EV_RESTORE, JOB_DEAD},
        {JOB_NEW, JOB_EV_SCHEDULE, JOB_SCHEDULED},
        {JOB_NEW, JOB_EV_WAIT, JOB_WAITING},
        {JOB_SCHEDULED, JOB_EV_DUE, JOB_QUEUED},
        {JOB_RETRYING, JOB_EV_DUE, JOB_QUEUED},
        {JOB_WAITING, JOB_EV_RELEASE, JOB_QUEUED},
        {JOB_WAITING, JOB_EV_SCHEDULE, JOB_SCHEDULED},
        {JOB_WAITING, JOB_EV_DEP_FAILED, JOB_FAILED},
        {JOB_RUNNING, JOB_EV_RETRY, JOB_RETRYING},
        {JOB_RUNNING, JOB_EV_EXHAUST, JOB_DEAD},
        {JOB_SCHEDULED, JOB_EV_CANCEL, JOB_CANCELLED},
        {JOB_SCHEDULED, JOB_EV_TIMEOUT, JOB_CANCELLED},
        {JOB_SCHEDULED, JOB_EV_INTERRUPT, JOB_FAILED},
        {JOB_WAITING, JOB_EV_CANCEL, JOB_CANCELLED},
        {JOB_WAITING, JOB_EV_TIMEOUT, JOB_CANCELLED},
        {JOB_WAITING, JOB_EV_INTERRUPT, JOB_FAILED},
        {JOB_RETRYING, JOB_EV_CANCEL, JOB_CANCELLED},
        {JOB_RETRYING, JOB_EV_TIMEOUT, JOB_CANCELLED},
        {JOB_RETRYING, JOB_EV_INTERRUPT, JOB_FAILED},
        {JOB_FAILED, JOB_EV_REVIVE, JOB_QUEUED},
        {JOB_CANCELLED, JOB_EV_REVIVE, JOB_QUEUED},
        {JOB_DEAD, JOB_EV_REVIVE, JOB_QUEUED},
};

const JobTransition *job_transitions(size_t *ret_n)
{
        *ret_n = ELEMENTSOF(job_transition_table);
        return job_transition_table;
}

int job_state_next(JobState from, JobEvent event, JobState restored, JobState *ret)
{
        for (size_t i = 0; i < ELEMENTSOF(job_transition_table); i++) {
                const JobTransition *t = &job_transition_table[i];
                if (t->from != from || t->event != event)
                        continue;
                if (event == JOB_EV_RESTORE && t->to != restored)
                        continue;
                *ret = t->to;
                return 0;
        }
        return -EINVAL;
}

/* The times @j's new state @to starts (jobstate.h, job_transition()); @batch_now: the
 * caller's clock read for a dispatch or a final state, or 0. */
static void stamp(Job *j, JobEvent event, JobState to, uint64_t batch_now)
{
        uint64_t now;

        switch (event) {
        case JOB_EV_SUBMIT:
        case JOB_EV_SCHEDULE:
        case JOB_EV_WAIT:
                if (j->state != JOB_NEW)
                        return; /* waiting → scheduled: submitted long ago */
                j->live->submitted_mono_ns = now = sched_now_ns();
                j->submitted_ms = job_wall_ms_at(now); /* one clock read for both */
                return;
        case JOB_EV_RESTORE: {
                /* the record's wall-clock times stay; the queue wait counts from now, and
                 * retention from the record's end, on this boot's monotonic clock */
                uint64_t now_ms = job_now_ms(), now_ns = sched_now_ns(), age_ns;
                j->live->submitted_mono_ns = now_ns;
                if (job_state_final(to)) {
                        age_ns = j->finished_ms < now_ms ? (now_ms - j->finished_ms) * NSEC_PER_MSEC
                                                         : 0;
                        j->finished_mono_ns = age_ns < now_ns ? now_ns - age_ns : 0;
                }
                return;
        }
        case JOB_EV_DISPATCH:
                j->live->started_mono_ns = now = batch_now ? batch_now : sched_now_ns();
                j->started_ms = job_wall_ms_at(now);
                return;
        case JOB_EV_REQUEUE:
                j->started_ms = 0;
                j->live->started_mono_ns = 0;
                return;
        case JOB_EV_DUE:
        case JOB_EV_RELEASE:
        case JOB_EV_REVIVE:
                /* a new run: its queue wait and its timeout count from now */
                j->started_ms = j->finished_ms = 0;
                j->live->started_mono_ns = j->finished_mono_ns = 0;
                j->live->submitted_mono_ns = sched_now_ns();
                j->live->deadline_ns =
                        j->timeout_ns ? sched_deadline_after(j->timeout_ns) : SCHED_FOREVER;
                return;
        default:
                if (job_state_final(to)) {
                        j->finished_mono_ns = now = batch_now ? batch_now : sched_now_ns();
                        j->finished_ms = job_wall_ms_at(now);
                }
                return;
        }
}

int job_transition(const JobMachine *m, Job *j, JobEvent event, const JobChange *change)
{
        JobState from = j->state, to;
        int r = job_state_next(from, event, change ? change->restored : JOB_NEW, &to);

        if (r < 0) {
                log_job(LOG_DEBUG, j->id, j->plugin_name, "refused transition: %s --%s-->",
                        job_state_name(from), job_event_name(event));
#ifdef FIBERD_DEBUG_STATES
                assert(!"refused job transition");
#endif
                return r;
        }
        stamp(j, event, to, change ? change->now_ns : 0);
        if (event == JOB_EV_RETURN_ERR || event == JOB_EV_RETRY || event == JOB_EV_EXHAUST)
                job_add_run_error(j, change ? change->code : NULL, change ? change->message : NULL,
                                  job_now_ms());
        if (event == JOB_EV_REVIVE) { /* a new life: the errors of the old runs stay listed */
                j->error_code = NULL;
                free(j->error_message);
                j->error_message = NULL;
        } else if (change && change->code && event != JOB_EV_RESTORE && job_state_final(to)) {
                char *msg = strdup(change->message ? change->message : "");
                j->error_code = change->code;
                free(j->error_message);
                j->error_message = msg;
        }
        j->state = to;
        for (size_t i = 0; i < m->n_listeners; i++)
                m->listeners[i].changed(m->ctx, j, from, event);
        return 0;
}

/* Errors a retry cannot mend: bad arguments, rights, a plugin that is gone, an end asked
 * for (cancel, timeout). */
static bool code_retryable(const char *code)
{
        static const char *const permanent[] = {IPC_INVALID_ARGUMENT, IPC_PERMISSION_DENIED,
                                                IPC_NOT_FOUND, IPC_CANCELLED,
                                                IPC_DEADLINE_EXCEEDED};

        for (size_t i = 0; i < ELEMENTSOF(permanent); i++)
                if (code && strcmp(code, permanent[i]) == 0)
                        return false;
        return true;
}

JobEvent job_retry_event(const Job *j, const char *code)
{
        if (j->max_attempts <= 1 || j->fail_permanent || !code_retryable(code))
                return JOB_EV_RETURN_ERR;
        if (j->attempt + 1 < j->max_attempts)
                return JOB_EV_RETRY;
        return JOB_EV_EXHAUST;
}

static const char *const job_event_names[JOB_EVENT_COUNT] = {
        [JOB_EV_SUBMIT] = "submit",
        [JOB_EV_RESTORE] = "restore",
        [JOB_EV_DISPATCH] = "dispatch",
        [JOB_EV_REQUEUE] = "requeue",
        [JOB_EV_RETURN_OK] = "return_ok",
        [JOB_EV_RETURN_ERR] = "return_err",
        [JOB_EV_CANCEL] = "cancel",
        [JOB_EV_TIMEOUT] = "timeout",
        [JOB_EV_DETACH] = "detach",
        [JOB_EV_INTERRUPT] = "interrupt",
        [JOB_EV_SCHEDULE] = "schedule",
        [JOB_EV_WAIT] = "wait",
        [JOB_EV_DUE] = "due",
        [JOB_EV_RELEASE] = "release",
        [JOB_EV_DEP_FAILED] = "dep_failed",
        [JOB_EV_RETRY] = "retry",
        [JOB_EV_EXHAUST] = "exhaust",
        [JOB_EV_REVIVE] = "revive",
};

const char *job_event_name(JobEvent e)
{
        return (unsigned)e < JOB_EVENT_COUNT ? job_event_names[e] : "unknown";
}
