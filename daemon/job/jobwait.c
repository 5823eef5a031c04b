/* SPDX-License-Identifier: MIT */
/*
 * jobwait.c — job.wait's and job.run's wait, and job.result's answer that does not wait
 * (see jobwait.h).
 *
 * A waiter parks its request fiber on the job's `finished` event in slices of at most
 * WAIT_SLICE_NS, so a waiter whose connection broke stops waiting instead of holding
 * its fiber until the job ends. A job another host of a fleet runs has no event here:
 * fleet_wait() polls its shared record until this host takes the job or it is final;
 * a job this host ran whose retry went back to the fleet wakes its waiters here, which
 * go on polling its shared record the same way.
 * What the answer shows is on disk first (jobtable_wait_recorded()), and a job that
 * shutdown leaves queued in the store is answered UNAVAILABLE, not with a state this
 * process will never move it out of.
 */
#include "daemon/job/jobwait.h"
#include "daemon/store/fleet.h"
#include "daemon/job/joblist.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
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

/* Is @j a fleet copy now? A job this host ran becomes one when its retry is handed
 * back to the fleet (jobtable.c), under the table lock. */
static bool fleet_copy(JobTable *t, Job *j)
{
        bool copy;

        jobtable_lock(t);
        copy = j->fleet_copy;
        jobtable_unlock(t);
        return copy;
}

int jobwait_answer(JobTable *t, Store *s, Request *req, Job *j, uint64_t timeout_ms,
                   msgpack_packer *pk, IpcStatus *st)
{
        uint64_t deadline =
                timeout_ms == UINT64_MAX || timeout_ms > UINT64_MAX / (2 * NSEC_PER_MSEC)
                        ? SCHED_FOREVER
                        : sched_deadline_after(timeout_ms * NSEC_PER_MSEC);
        bool unavailable;
        int r;

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
        jobtable_lock(t);
        /* shutdown left the job queued in the store (store.h): not this process's to end */
        unavailable = t->stopping && (j->requeued || !job_state_final(j->state));
        jobtable_unlock(t);
        if (unavailable) {
                r = ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                                   "fiberd is shutting down; job %llu stays queued in its "
                                   "store: wait for it again once fiberd is back",
                                   (unsigned long long)j->id);
                job_unref(j);
                return r;
        }
        /* what the answer shows is on disk first: a final state (a job.run
         * has no record before that), or at least the submission */
        if (!j->fleet_copy && (r = jobtable_wait_recorded(t, j)) < 0) {
                job_unref(j);
                return ipc_status_set(st, IPC_INTERNAL, r,
                                      "the job store could not record job %llu (%s): see "
                                      "fiberd's log",
                                      (unsigned long long)j->id, strerror(-r));
        }
        r = joblist_pack_record(t, j, pk);
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
