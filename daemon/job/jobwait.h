/* SPDX-License-Identifier: MIT */
/*
 * jobwait.h — the wait of job.wait and job.run (PROTOCOL.md): park until a job is
 * final or a limit passes, then answer with its record; or, for a wait without a limit
 * outside a fleet, answer from the dispatcher fiber once the job ends. See jobwait.c.
 */
#ifndef FIBERD_DAEMON_JOBWAIT_H
#define FIBERD_DAEMON_JOBWAIT_H

#include <stdint.h>

#include <msgpack.h>

#include "daemon/job/jobtable.h"
#include "daemon/server/server.h"
#include "daemon/store/store.h"
#include "ipc/status.h"

/*
 * jobwait_answer - wait (at most @timeout_ms; UINT64_MAX = no limit, 0 = not at all)
 * for @j of @t to be final, then pack its record into @pk, final or as it stands, with
 * the keys in @fields (job_fields_parse(); JOB_FIELDS_ALL = the whole record). A
 * fleet copy (Job.fleet_copy) is polled through @s (fleet_wait()) until this host holds
 * the job. The wait ends early when @req's connection closes.
 * A wait without a limit, on a job the fleet may not run, parks no fiber: the answer is left for later
 * (request_defer()), @pk stays empty, and the dispatcher fiber packs and queues it once
 * @j's waiters are woken (jobtable_watch()) and, with a durable store, its final write
 * is over (store_watch_final()); a connection shut down by then drops it (holding its
 * slot until then).
 * Ownership: takes over the caller's reference to @j (dropped on every path, or held
 * by the deferred answer until it is given).
 * What the answer shows is on disk first; while the store cannot write (store.h), that
 * wait too ends at @timeout_ms.
 * Return: 0; -ENOMEM; an error set in @st: UNAVAILABLE (-ESHUTDOWN: shutdown leaves the
 * job queued in the store; the store's transient error: its record cannot be written
 * yet, wait again), INTERNAL (the store could not record the job).
 * Context: a request fiber; yields while it waits; no lock held on entry.
 */
int jobwait_answer(JobTable *t, Store *s, Request *req, Job *j, uint64_t timeout_ms,
                   uint32_t fields, msgpack_packer *pk, IpcStatus *st);

/*
 * jobwait_deadline - the deadline of a wait of @timeout_ms (sched_now_ns() based):
 * SCHED_FOREVER for UINT64_MAX (no limit) and for a limit no deadline can hold.
 * jobwait_unbounded - whether it is SCHED_FOREVER, without reading the clock.
 * Context: any (jobwait_deadline(): a thread that may read the runtime's clock).
 */
static inline bool jobwait_unbounded(uint64_t timeout_ms)
{
        return timeout_ms > UINT64_MAX / (2 * NSEC_PER_MSEC);
}

static inline uint64_t jobwait_deadline(uint64_t timeout_ms)
{
        return jobwait_unbounded(timeout_ms) ? SCHED_FOREVER
                                             : sched_deadline_after(timeout_ms * NSEC_PER_MSEC);
}

/*
 * jobwait_pack_result - job.result's answer for @j as it stands now: a done job's result
 * (nil when it returned none); a failed or cancelled one's error in @st; FAILED_PRECONDITION
 * ("use job.wait") while it is queued or running. Does not wait.
 * Return: 0; -ENOMEM; a negative errno with @st filled. Context: any fiber; takes the
 * table lock briefly; @j stays the caller's.
 */
int jobwait_pack_result(JobTable *t, Job *j, msgpack_packer *pk, IpcStatus *st);

#endif
