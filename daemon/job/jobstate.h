/* SPDX-License-Identifier: MIT */
/*
 * jobstate.h — a job's life as a state machine: its states, the events that move it, the
 * one table of allowed transitions, and job_transition(), the only writer of Job.state.
 *
 * beanstalkd keeps a job's whole life in job.c and acts on it from prot.c; fiberd keeps
 * the states and their transitions here, and the job table (jobtable.c) and the
 * dispatcher (dispatch.c) fire events. A transition looks up (state, event) in the
 * table (jobstate.c, job_transitions[]), refuses what is not there (-EINVAL, Job left as
 * it was), stamps the times the new state starts, records the error of a final state,
 * writes Job.state, and then tells the listeners of its machine, in their order, once
 * each. The job table's machine (jobtable.c) has a fixed list: the counts, the latency
 * histograms, the daemon's log, the store (a write is queued), the waiters (`finished`,
 * the table's idle event) and retention (the finished list). Nobody else writes
 * Job.state; everyone else reads it under the table lock.
 *
 *     new ──submit──▶ queued ──dispatch──▶ running ──return_ok──▶ done
 *      │                │  ▲                  ├──return_err──────▶ failed
 *      │                │  └─────requeue──────┤
 *      │                │                     ├──cancel / timeout / detach──▶ cancelled
 *      │                ├──cancel / timeout───┼─────────────────────────────▶ cancelled
 *      │                └──interrupt──────────┴──interrupt──────────────────▶ failed
 *      ├──schedule──▶ scheduled ──due──▶ queued
 *      ├──wait──▶ waiting ──release──▶ queued
 *      │            ├──schedule──▶ scheduled
 *      │            └──dep_failed──▶ failed
 *      │          running ──retry──▶ retrying ──due──▶ queued
 *      │          running ──exhaust──▶ dead
 *      │          scheduled, waiting, retrying ──cancel / timeout──▶ cancelled
 *      │          scheduled, waiting, retrying ──interrupt──▶ failed
 *      │          failed, cancelled, dead ──revive──▶ queued
 *      └──restore──▶ the state its stored record names (any but new)
 *
 * docs/design.md ("The job state machine") lists the same rows; the unit test
 * (tests/daemon-unit/test_jobstate.c) holds it against job_transitions[].
 *
 * The states themselves (JobState, their names on the wire, job_state_final()) are the
 * Job's, job.h: a record names its state, and job.c packs records without calling in
 * here, so the machine depends on the job and not the other way round.
 *
 * Adding a state: give it events and rows in job_transitions[] (and a name on the wire
 * in ipc/protocol.h), and its side effects to what the listeners do when they see it;
 * nothing else has to change for a job to pass through it. The held states (scheduled,
 * waiting, retrying) came that way: the table's timer (jobtimer.c) and dependencies
 * (jobdeps.c) are listeners.
 */
#ifndef FIBERD_DAEMON_JOBSTATE_H
#define FIBERD_DAEMON_JOBSTATE_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/job/job.h"

typedef enum JobEvent {
        JOB_EV_SUBMIT,     /* new → queued: accepted (jobtable_submit()) */
        JOB_EV_RESTORE,    /* new → its stored record's state (start-up, a fleet copy) */
        JOB_EV_DISPATCH,   /* queued → running: the dispatcher gave it a slot */
        JOB_EV_REQUEUE,    /* running → queued: no fiber for it now (-EAGAIN), or a
                            * retry-safe job found running at start-up */
        JOB_EV_RETURN_OK,  /* running → done: its entry point returned 0 */
        JOB_EV_RETURN_ERR, /* running → failed: it returned a negative errno (or it
                            * could not start: no fiber) */
        JOB_EV_CANCEL,     /* queued, running → cancelled: job.cancel, shutdown */
        JOB_EV_TIMEOUT,    /* queued, running → cancelled: its deadline passed */
        JOB_EV_DETACH,     /* running → cancelled: cancelled, its code did not return
                            * within JOB_DETACH_GRACE_NS (dispatch.c) */
        JOB_EV_INTERRUPT,  /* queued, running, held → failed: found at start-up running,
                            * or crashed in, or not runnable any more (plugin gone, fds
                            * lost, no memory) */
        /* job scheduling (PROTOCOL.md, "Scheduling jobs") */
        JOB_EV_SCHEDULE,   /* new, waiting → scheduled: its due time is ahead */
        JOB_EV_WAIT,       /* new → waiting: jobs of its `after` are not done yet */
        JOB_EV_DUE,        /* scheduled, retrying → queued: its due time came */
        JOB_EV_RELEASE,    /* waiting → queued: every job of its `after` is done */
        JOB_EV_DEP_FAILED, /* waiting → failed: one of its `after` ended otherwise */
        JOB_EV_RETRY,      /* running → retrying: a retryable failure, attempts left */
        JOB_EV_EXHAUST,    /* running → dead: a retryable failure, none left */
        JOB_EV_REVIVE,     /* failed, cancelled, dead → queued: job.retry */
        JOB_EVENT_COUNT,
} JobEvent;

/* JobTransition - one row of the table: @event moves a job in @from to @to. */
typedef struct JobTransition {
        JobState from;
        JobEvent event;
        JobState to;
} JobTransition;

/* job_transitions - every allowed transition, once (jobstate.c); @ret_n: how many. */
const JobTransition *job_transitions(size_t *ret_n);

/*
 * JobChange - what a transition carries besides its event; every field may be 0.
 * @restored: JOB_EV_RESTORE only: the state the stored record names.
 * @code, @message: a final state's error (an IPC_* constant, not copied; the message is
 * copied); NULL code: none (done, or a restored record that carries its own).
 * @now_ns: for a dispatch or a final state, the CLOCK_MONOTONIC ns to stamp it with,
 * read once by a caller that moves a batch of jobs (the dispatcher's round: a clock read
 * is 23 ns in a KVM guest, a trivial job's whole cost 2 us); 0: read the clock.
 */
typedef struct JobChange {
        JobState restored;
        const char *code;
        const char *message;
        uint64_t now_ns;
} JobChange;

/*
 * JobStateListener - hears every transition of a machine's jobs, after Job.state and
 * the times are written: @j->state is the new state, @from the old one. It must not
 * yield or fire another transition of @j. Context: whatever the machine's owner holds
 * (the job table's lock for the table's machine).
 */
typedef struct JobStateListener {
        const char *name;
        void (*changed)(void *ctx, struct Job *j, JobState from, JobEvent ev);
} JobStateListener;

/* JobMachine - the listeners (called in array order) and the context they get. */
typedef struct JobMachine {
        const JobStateListener *listeners; /* not owned; usually a static const array */
        size_t n_listeners;
        void *ctx;
} JobMachine;

/*
 * job_state_next - where @event takes a job in @from (@restored: the target a
 * JOB_EV_RESTORE names). Return: 0 and *@ret; -EINVAL: no such row.
 * Context: any; pure.
 */
int job_state_next(JobState from, JobEvent event, JobState restored, JobState *ret);

/*
 * job_transition - the one writer of Job.state: moves @j by @event (@change: see
 * JobChange; NULL = none) as the table says, stamps the times (submit: submitted_*;
 * restore: submitted_mono_ns now, finished_mono_ns from the record's finished_ms;
 * dispatch: started_*; requeue: started_* cleared; a final state: finished_*), sets a
 * final state's error from @change, then calls every listener of @m in order, once.
 * Return: 0; -EINVAL: not an allowed transition (logged at LOG_DEBUG; an assertion
 * with FIBERD_DEBUG_STATES): nothing changed and no listener called.
 * Context: @j's machine's lock held (the job table's); does not yield.
 */
int job_transition(const JobMachine *m, struct Job *j, JobEvent event, const JobChange *change);

/*
 * job_retry_event - what a failed run of @j with error @code becomes: JOB_EV_RETRY
 * (attempts left, a retryable error), JOB_EV_EXHAUST (none left, and it had more than
 * one), JOB_EV_RETURN_ERR (no retry asked, or a permanent error: bad arguments,
 * permission, not found, or the plugin's fail_permanent). Context: table lock held; pure.
 */
JobEvent job_retry_event(const Job *j, const char *code);

/* job_event_name - "submit", "dispatch", ... Context: any. */
const char *job_event_name(JobEvent e);

#endif
