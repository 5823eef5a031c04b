/* SPDX-License-Identifier: MIT */
/*
 * jobwait.c — job.wait's and job.run's wait, and job.result's answer that does not wait
 * (see jobwait.h).
 *
 * A wait without a limit parks no fiber (but for a job the fleet may run: a fleet copy,
 * or one taken off the fleet's stream): the request leaves its answer
 * for later (request_defer(), server.h) and the job table keeps a watch on the job
 * (jobtable_watch()). When the job's waiters are woken the dispatcher fiber calls it;
 * with a durable store it is handed on to the store (store_watch_final()) and comes back
 * once the final write is committed or given up; then the answer is packed and queued on
 * the connection (request_deferred_answer()). A deferred answer whose connection was
 * shut down meanwhile is dropped when it comes, so until the job ends it keeps its slot
 * (and the connection's fd), where a parked waiter gave them back within a slice.
 *
 * Any other waiter parks its request fiber on the job's `finished` event in slices of at
 * most WAIT_SLICE_NS, so a waiter whose connection broke stops waiting instead of
 * holding its fiber until the job ends. A job another host of a fleet runs has no event here:
 * fleet_wait() polls its shared record until this host takes the job or it is final;
 * a job this host ran whose retry went back to the fleet wakes its waiters here, which
 * go on polling its shared record the same way.
 * What the answer shows is on disk first (jobtable_wait_recorded()), and a job that
 * shutdown leaves queued in the store is answered UNAVAILABLE, not with a state this
 * process will never move it out of. While the store cannot write (a full disk, store.h)
 * the record's write is held and retried: the wait for it is bounded by the request's
 * own timeout, then answered UNAVAILABLE ("wait again"), never with a state that is not
 * on disk.
 */
#include "daemon/job/jobwait.h"
#include "daemon/store/fleet.h"
#include "daemon/job/joblist.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_SLICE_NS NSEC_PER_SEC

/*
 * Parks the request fiber on @j's `finished` event until the job is final, @deadline
 * passes (absolute; SCHED_FOREVER = no limit) or @req's connection is gone (checked
 * once per WAIT_SLICE_NS slice). Never an error: the caller packs the record as it is.
 */
static void wait_final(Request *req, Job *j, uint64_t deadline)
{
        for (;;) {
                uint64_t now = sched_now_ns(), slice;

                if (now >= deadline)
                        break;
                slice = deadline - now > WAIT_SLICE_NS ? now + WAIT_SLICE_NS : deadline;
                if (fiber_event_wait(&j->finished, slice) != -ETIMEDOUT || request_conn_closed(req))
                        break;
        }
}

/*
 * Parks the request fiber until the state @j shows is on disk (jobtable_wait_recorded()),
 * in slices of WAIT_SLICE_NS while the store cannot write, so that a waiter whose
 * connection broke stops. Return: 0; -ETIMEDOUT (@deadline passed, or the connection
 * closed, with the write still held); the store's error.
 */
static int wait_recorded(JobTable *t, Request *req, Job *j, uint64_t deadline)
{
        if (!t->store || !store_durable(t->store))
                return 0; /* nothing is written (jobtable_wait_recorded()): no clock read */
        for (;;) {
                uint64_t now = sched_now_ns();
                uint64_t slice = deadline > now && deadline - now > WAIT_SLICE_NS
                                         ? now + WAIT_SLICE_NS
                                         : deadline;
                int r = jobtable_wait_recorded(t, j, slice);

                if (r != -ETIMEDOUT || sched_now_ns() >= deadline || request_conn_closed(req))
                        return r;
        }
}

/* The answer when @j's record could not be written (@r from wait_recorded(), or the
 * final write's error for a deferred answer: @s NULL): held for the next attempt
 * (-ETIMEDOUT, or a refused submission's transient error): UNAVAILABLE; a write that
 * failed for good: INTERNAL. */
static int unrecorded(JobTable *t, Store *s, Job *j, int r, IpcStatus *st)
{
        StoreHealth h = {0};
        JobState state;

        jobtable_lock(t);
        state = j->state;
        jobtable_unlock(t);
        if (r == -ETIMEDOUT) {
                if (s)
                        store_health(s, &h);
                r = h.error ? h.error : -EAGAIN;
                if (job_state_final(state))
                        return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                              "job %llu ended %s, but the job store cannot write "
                                              "it yet (%s); wait again",
                                              (unsigned long long)j->id, job_state_name(state),
                                              strerror(-r));
                return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                      "job %llu is %s, but the job store cannot write its record "
                                      "yet (%s); wait again",
                                      (unsigned long long)j->id, job_state_name(state),
                                      strerror(-r));
        }
        if (store_error_transient(r))
                return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                      "the job store cannot write (%s): job %llu was not "
                                      "accepted; retry later",
                                      strerror(-r), (unsigned long long)j->id);
        return ipc_status_set(st, IPC_INTERNAL, r,
                              "the job store could not record job %llu (%s): see fiberd's log",
                              (unsigned long long)j->id, strerror(-r));
}

/* Is @j a fleet copy now? A job this host ran becomes one when its retry is handed
 * back to the fleet (jobtable.c), under the table lock. */
static bool fleet_copy(JobTable *t, Job *j)
{
        bool copy;

        if (!store_fleet(t->store))
                return false; /* only a fleet store makes copies: no lock needed */
        jobtable_lock(t);
        copy = j->fleet_copy;
        jobtable_unlock(t);
        return copy;
}

/* May @j be the fleet's to run, now or later? A fleet copy is; so is a job this host
 * took off the fleet's stream, whose retry goes back there (jobtable.c). A job.run this
 * host runs itself (jobtable_submit()) never is: it ends here. */
static bool fleet_bound(JobTable *t, Job *j)
{
        bool bound;

        if (!store_fleet(t->store))
                return false;
        jobtable_lock(t);
        bound = j->fleet_copy || j->from_fleet;
        jobtable_unlock(t);
        return bound;
}

/* UNAVAILABLE when shutdown left @j queued in the store (store.h): not this process's
 * to end. Return: 0; that error, set in @st. */
static int left_queued(JobTable *t, Job *j, IpcStatus *st)
{
        bool unavailable, fleet;

        jobtable_lock(t);
        unavailable = t->stopping && (j->requeued || !job_state_final(j->state));
        fleet = j->run_here; /* a fleet's job.run its host ran itself: now the fleet's */
        jobtable_unlock(t);
        if (!unavailable)
                return 0;
        if (fleet)
                return ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                                      "this fiberd host is shutting down; job %llu goes back "
                                      "to the fleet's queue: wait for it through another host",
                                      (unsigned long long)j->id);
        return ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                              "fiberd is shutting down; job %llu stays queued in its store: "
                              "wait for it again once fiberd is back",
                              (unsigned long long)j->id);
}

/*
 * A wait left for later (request_defer()): the table's watch on its job, answered from
 * the dispatcher fiber once the job's waiters are woken and, with a durable store, once
 * its final state is on disk (the same watch, handed to the store in between:
 * store_watch_final()). It holds the job's reference.
 */
typedef struct DeferredWait {
        JobWatch watch;
        RequestDeferred answer;
        uint32_t fields;
        bool durable;    /* the table's store was durable when the wait began */
        bool via_store;  /* the final write is over: JobStorePart.error says how */
        bool store_gone; /* the store was closed (shutdown) before that write was over */
        JobTable *table; /* set when the watch fires, for deferred_wait_pack() */
} DeferredWait;

static int deferred_wait_pack(void *arg, msgpack_packer *pk, IpcStatus *st)
{
        DeferredWait *dw = arg;
        Job *j = dw->watch.job;
        int r = left_queued(dw->table, j, st);

        if (r < 0)
                return r;
        if (dw->store_gone)
                return ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                                      "fiberd is shutting down and closed its job store "
                                      "before job %llu's end was written: wait for it again "
                                      "once fiberd is back",
                                      (unsigned long long)j->id);
        /* its error is written before the event that a watch is handed on by */
        if (dw->via_store && (r = j->store.error) < 0)
                return unrecorded(dw->table, NULL, j, r, st);
        return joblist_pack_fields(dw->table, j, dw->fields, pk);
}

static void deferred_wait_done(JobTable *t, JobWatch *w)
{
        DeferredWait *dw = container_of(w, DeferredWait, watch);
        Job *j = w->job;

        if (dw->durable && !dw->via_store && !dw->store_gone) {
                /* the answer shows what is on disk: the final write first (under the table
                 * lock, so the store is not closed meanwhile: jobtable_set_store()) */
                jobtable_lock(t);
                jobtable_record_locked(t, j); /* a job.run's first write, deferred to its end */
                if (!job_state_final(j->state) || j->requeued) {
                        /* shutdown left it queued: left_queued() answers */
                } else if (t->store) {
                        dw->via_store = true;
                        if (store_watch_final(t->store, j, w)) {
                                jobtable_unlock(t);
                                return; /* back here once the write is over */
                        }
                } else if (fiber_event_is_set(&j->store.final_committed)) {
                        dw->via_store = true;
                } else {
                        dw->store_gone = true;
                }
                jobtable_unlock(t);
        }
        dw->table = t;
        request_deferred_answer(&dw->answer, deferred_wait_pack, dw);
        job_unref(j);
        free(dw);
}

/*
 * Whether the wait for @j may be left for later (deferred_wait_start()): it has no limit
 * (a limit would need a timer per wait again), @j is not the fleet's (whose copies are
 * polled: fleet_wait()), and @j is not final yet (then the answer is packed at once,
 * without a round of the dispatcher fiber). A durable store's write is waited for by a
 * second watch (deferred_wait_done()).
 */
static bool wait_deferrable(JobTable *t, Job *j, uint64_t deadline)
{
        return deadline == SCHED_FOREVER && !fiber_event_is_set(&j->finished) && !fleet_bound(t, j);
}

/* Leaves @req's answer to the watch on @j (taking the caller's reference). Return: 0;
 * -ENOMEM (nothing changed: the caller waits itself). */
static int deferred_wait_start(JobTable *t, Request *req, Job *j, uint32_t fields)
{
        DeferredWait *dw = calloc(1, sizeof(*dw));

        if (!dw)
                return -ENOMEM;
        request_defer(req, &dw->answer);
        dw->fields = fields;
        dw->durable = t->store && store_durable(t->store);
        dw->watch.fn = deferred_wait_done;
        jobtable_watch(t, j, &dw->watch);
        return 0;
}

int jobwait_answer(JobTable *t, Store *s, Request *req, Job *j, uint64_t timeout_ms,
                   uint32_t fields, msgpack_packer *pk, IpcStatus *st)
{
        uint64_t deadline = jobwait_deadline(timeout_ms);
        int r;

        /* no fiber parked for a wait without a limit: the dispatcher answers it */
        if (wait_deferrable(t, j, deadline) && deferred_wait_start(t, req, j, fields) == 0)
                return 0;
        for (;;) {
                /* the fleet runs it: its shared record until this host has it */
                if (fleet_copy(t, j))
                        j = fleet_wait(t, s, req, j, timeout_ms ? deadline : 0);
                if (!timeout_ms || fleet_copy(t, j))
                        break;
                wait_final(req, j, deadline);
                /* a retry this host handed back to the fleet (jobtable.c) goes on there */
                if (!fleet_copy(t, j) || sched_now_ns() >= deadline || request_conn_closed(req))
                        break;
        }
        r = left_queued(t, j, st);
        /* what the answer shows is on disk first: a final state (a job.run
         * has no record before that), or at least the submission */
        if (r == 0 && !j->fleet_copy && (r = wait_recorded(t, req, j, deadline)) < 0)
                r = unrecorded(t, s, j, r, st);
        if (r == 0)
                r = joblist_pack_fields(t, j, fields, pk);
        job_unref(j);
        return r;
}

int jobwait_pack_result(JobTable *t, Job *j, msgpack_packer *pk, IpcStatus *st)
{
        int r;

        jobtable_lock(t);
        switch (j->state) {
        case JOB_DONE:
                if (j->result)
                        r = pk->callback(pk->data, j->result, j->result_len) ? -ENOMEM : 0;
                else
                        r = msgpack_pack_nil(pk) ? -ENOMEM : 0;
                break;
        case JOB_FAILED:
        case JOB_CANCELLED:
                r = ipc_status_set(st, j->error_code ? j->error_code : IPC_INTERNAL, 0,
                                   "job %llu %s: %s", (unsigned long long)j->id,
                                   job_state_name(j->state),
                                   j->error_message ? j->error_message : "no reason given");
                break;
        default:
                r = ipc_status_set(st, IPC_FAILED_PRECONDITION, -EINPROGRESS,
                                   "job %llu is %s; use job.wait", (unsigned long long)j->id,
                                   job_state_name(j->state));
                break;
        }
        jobtable_unlock(t);
        return r;
}
