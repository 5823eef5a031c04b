/* SPDX-License-Identifier: MIT */
/*
 * jobtable.h — every job the daemon knows, the dispatcher's queue, and the counters the
 * stats endpoint reports.
 *
 * One JobTable per daemon. Its lock is a plain pthread mutex, held only for short,
 * non-yielding sections (hash look-ups, list and heap updates, fiber_create(),
 * fiber_cancel()), so it may be taken by any fiber of any scheduling group or by a
 * plain thread, and a cancelled job fiber can still take it (a FiberMutex would
 * return -ECANCELED there). Nothing that can park a fiber happens under it.
 *
 * What the table keeps:
 *  - a hash from id to Job (chained, power-of-two buckets, doubled when full);
 *  - every job in the order it was accepted (job.list walks it): id order, except that
 *    a fleet's ids are taken before the lock, so with more than one server worker two
 *    jobs accepted at once may be listed out of id order;
 *  - finished jobs in the order they finished: retention (jobtable_sweep()) drops from
 *    the front while a job is older than retention_ns; the bounds on how many are kept
 *    and on the bytes of args and results held, per user and in all, are the quota's
 *    (jobquota.h), enforced at every finish, at submission and by the sweep;
 *  - the dispatcher (dispatch.h): the priority queue and the running count;
 *  - the hooks into whoever runs a job's code (JobTableHooks), so the table and the
 *    dispatcher call up into the plugin host without including it;
 *  - counters: submitted, the current number queued and running, and how many ended
 *    done / failed / cancelled since start, in total and per plugin name; and how many
 *    ended jobs still have a fiber running plugin code (detached: dispatch.c).
 */
#ifndef FIBERD_DAEMON_JOBTABLE_H
#define FIBERD_DAEMON_JOBTABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/job/dispatch.h"
#include "daemon/job/jobhold.h"
#include "daemon/job/jobquota.h"
#include "daemon/job/job.h"
#include "daemon/job/jobstate.h"
#include "daemon/store/store.h"
#include "daemon/job/joblatency.h"
#include "scheduler/sched.h"

typedef struct JobCounts {
        uint64_t submitted;                     /* since start */
        uint64_t queued, running;               /* now */
        uint64_t scheduled, waiting, retrying;  /* now: held (jobhold.h) */
        uint64_t done, failed, cancelled, dead; /* since start */
        uint64_t detached; /* now: ended jobs whose fiber still runs plugin code (job.h),
                            * each holding a worker thread; not a state of its own */
} JobCounts;

typedef struct PluginCounts {
        char *name;           /* owned */
        const char *interned; /* jobnames_intern() of it (NULL without memory): a job's
                               * plugin_name, interned too, matches by its pointer */
        JobCounts counts;
        uint64_t stalls; /* stall reports about its job fibers (jobtable_count_stall()) */
} PluginCounts;

/*
 * JobTableHooks - the calls up from the table into the code that runs jobs (the plugin
 * host: plugin_job.c), set by whoever owns both (main.c) with jobtable_set_hooks(). A
 * NULL hook does nothing (run: the job fails with -ENOSYS).
 */
typedef struct JobTableHooks {
        /* run - run @j's entry point and store its result or error in @j under the table
         * lock; return what the entry point returned (0 or a negative errno).
         * Context: @j's job fiber; yields as the job does. */
        int (*run)(Job *j);
        /* cancel - @j was asked to cancel while running: cancel what it started (child
         * fibers). Context: table lock held; must not yield or take the table lock. */
        void (*cancel)(Job *j);
        /* retry_safe - may @j run again after an interruption (its plugin says so:
         * FIBERD_PLUGIN_RETRY_SAFE)? NULL = never. Context: any; does not yield. */
        bool (*retry_safe)(const Job *j);
        /* run_inline - may @j run on the server group, with no hand-off to a job worker
         * (DispatchOps.run_inline: its plugin is FIBERD_PLUGIN_INLINE)? NULL = never.
         * Context: the dispatcher fiber, or an inline job fiber before it begins; @j
         * not final (its JobLive is read without the lock); does not yield. */
        bool (*run_inline)(const Job *j);
} JobTableHooks;

typedef struct JobTable {
        pthread_mutex_t lock;
        uint64_t next_id;
        JobTableHooks hooks;

        Job **buckets;     /* hash by id */
        size_t nbuckets;   /* power of two */
        size_t count;      /* jobs in the hash */
        ListHead all;      /* Job.all_link, by id */
        ListHead finished; /* Job.fin_link, by finish time (dead ones: @dead) */
        size_t fin_count;
        ListHead dead; /* Job.fin_link of dead jobs, by finish time: their own retention */
        size_t dead_count;
        uint64_t dead_retention_ns;
        size_t dead_retention_max;

        JobHold hold;           /* scheduled, waiting, retrying jobs; keys (jobhold.h) */
        uint64_t key_window_ms; /* a finished job's key answers repeats this long */

        Dispatcher dispatch; /* queued and running jobs (dispatch.h) */
        size_t max_queued;   /* job.submit says OVERLOADED beyond this */

        uint64_t retention_ns;
        JobQuota quota;  /* bytes and finished jobs per user, retention_max among its
                          * limits (jobquota.h) */
        bool stopping;   /* no more submissions; everything is being cancelled */
        FiberEvent idle; /* set when stopping and nothing queued or running */

        JobCounts counts;
        size_t unwritten; /* jobs whose first write waits for their end (DUR_DEFERRED) */
        PluginCounts *plugins;
        size_t nplugins;

        JobMachine machine;    /* its jobs' transitions (jobstate.h): the listeners of jobtable.c */
        JobWatch *watches_due; /* watches whose jobs' waiters were woken, oldest
                                       * first, for the dispatcher fiber's next round */
        JobWatch **watches_due_tail; /* the last one's next (or &watches_due) */

        Store *store; /* where every change is written (store.h); NULL = nowhere; not owned */
        JobLatencies latency; /* queue wait and run time per plugin and class */
} JobTable;

/*
 * jobtable_init - an empty table whose jobs run on the groups of @sched and whose
 * supervisors run on @supervise_group (the server group; dispatch.h), with the
 * dispatcher fiber on that group (it starts no job after jobtable_stop(), and concludes
 * runs as long as the process lives). Neither is owned; both must outlive the table's
 * fibers.
 * Return: 0; -ENOMEM; -EAGAIN (no fiber for the dispatcher). Context: main thread at
 * start-up.
 */
int jobtable_init(JobTable *t, Scheduler *sched, SchedulingGroup *supervise_group,
                  unsigned max_running, size_t max_queued, uint64_t retention_ns,
                  size_t retention_max);

/*
 * jobtable_set_hooks - where jobs run and how a running job is cancelled (copied).
 * Context: main thread at start-up, before the first submission.
 */
void jobtable_set_hooks(JobTable *t, const JobTableHooks *hooks);

/*
 * jobtable_set_store - write every job's changes to @s (not owned: it must outlive the
 * table's use). Context: main thread at start-up, before jobtable_restore().
 */
void jobtable_set_store(JobTable *t, Store *s);

/*
 * jobtable_restore - take back one job @rec read from the store at start-up
 * (store_load()'s callback), with @plugin its loaded plugin (NULL: no longer loaded).
 * A final job is listed until its retention ends; a queued job is queued again (not
 * started before jobtable_restore_done()); a job that was running ends failed with
 * INTERRUPTED, or is queued again with attempt + 1 when the retry_safe hook says so; a
 * queued job whose plugin is gone ends failed (NOT_FOUND), one that was passed fds
 * ends failed (INTERRUPTED: the fds did not survive). @crashed (NULL = no): the last
 * run crashed inside this job (crash.h): unless final it ends failed, INTERRUPTED, with
 * this message, never retried. Changes are written back.
 * Return: 0; -ENOMEM; -EIO (its arguments do not decode). Context: main thread.
 */
int jobtable_restore(JobTable *t, const StoreRecord *rec, const Plugin *plugin,
                     const char *crashed);

/*
 * jobtable_fleet_copy - a Job built from a fleet job's shared record @rec (store_fetch()),
 * not listed in @t and never run (Job.fleet_copy): what job.status and job.wait answer
 * for a job another host runs. @ret: out, referenced, written only on success.
 * Return: 0; -ENOMEM; -EIO (its arguments do not decode). Context: any; does not yield.
 */
int jobtable_fleet_copy(JobTable *t, const StoreRecord *rec, Job **ret);

/* jobtable_stopping - jobtable_stop() ran. Context: any; takes the lock briefly. */
bool jobtable_stopping(JobTable *t);

/*
 * jobtable_restore_done - after the last jobtable_restore(): new ids start at
 * @next_id (or after the highest restored one) and the restored queue starts.
 * Context: main thread at start-up.
 */
void jobtable_restore_done(JobTable *t, uint64_t next_id);

/*
 * jobtable_wait_durable - park the calling fiber until @j's submission is committed
 * to the store (at once without a durable store).
 * Under load the job may have started (or ended) meanwhile (DUR_EARLY): its
 * record is written with the state it reached by the time the store takes it.
 * Return: 0; the store's error (negative errno): the submission was refused
 * (store_submit()), and the table, told by the store before this returns, cancelled the
 * job (when it had not ended yet) and dropped it (unless a run begun under load is still
 * ending: then it stays until its retention); nothing of it is written, and the
 * submission must be answered with an error (store_error_transient(): retry later).
 * Context: a fiber (yields); not a job's.
 */
int jobtable_wait_durable(JobTable *t, Job *j);

/*
 * jobtable_record_locked - write @j's record now if its first write was deferred (a
 * job.run, DUR_DEFERRED): with its arguments, setting `durable` once
 * committed. No-op otherwise. Context: the table lock held; does not yield.
 */
void jobtable_record_locked(JobTable *t, Job *j);

/*
 * jobtable_watch - call @w->fn(@t, @w) once @j's waiters are woken: @j is final, or
 * shutdown left it queued in the store, or its retry went back to the fleet (the
 * moments fiber_event_set(&j->finished) marks; jobwait.c reads which). The call comes
 * from the dispatcher fiber after its round, no lock held, in the order the jobs got
 * there; when @j's waiters were woken already, after the next round. Sets @w->job = @j
 * (the reference stays the caller's: @w->fn drops it). Context: any fiber or thread,
 * the table lock not held; does not yield.
 */
void jobtable_watch(JobTable *t, Job *j, JobWatch *w);

/*
 * jobtable_wait_recorded - before an answer that shows @j's state: write its record
 * if it was deferred (jobtable_record_locked()), and park the calling fiber until the
 * state it shows is on disk (its final state once it has one, else its submission).
 * While the store cannot write, the wait ends at @deadline_ns (absolute CLOCK_MONOTONIC
 * ns; SCHED_FOREVER = none) with -ETIMEDOUT: the write is held, ask again later
 * (store_wait_until()). Return: 0; -ETIMEDOUT; the store's error (negative errno).
 * Context: a fiber (yields); not a job's.
 */
int jobtable_wait_recorded(JobTable *t, Job *j, uint64_t deadline_ns);

/*
 * jobtable_store_locked - mark @j's record for a write to the store (no-op without
 * one; a job.run's first write waits for its end: DUR_DEFERRED).
 * Context: table lock held; no yield.
 */
void jobtable_store_locked(JobTable *t, Job *j);

/* jobtable_configure - new limits (SIGHUP); may start queued jobs. Context: any. */
void jobtable_configure(JobTable *t, unsigned max_running, size_t max_queued, uint64_t retention_ns,
                        size_t retention_max);

/*
 * jobtable_submit - create a job in class @cls (0-based; @class_name copied), owned by
 * @origin's creds and holding its fds (job_new(): taken on success), and hand it to the
 * dispatcher, or hold it as @plan says (NULL: no plan; jobhold.h): scheduled, waiting
 * (its `after` ids are looked up here: one the table no longer lists counts as done),
 * or failed at once when a job it runs after ended otherwise. A plan's key that matches
 * an earlier job of the same owner (jobkeys.h) makes no job: *@ret_existing is that
 * job's id and *@ret the job (referenced) or NULL when its record is gone.
 * @ret: out, a reference to the job (caller unrefs), written only on success;
 * @ret_existing: out, 0 for a new job.
 * A plan is ignored for a fleet submission (the caller refuses one).
 * -E2BIG: more than IPC_AFTER_MAX ids in @plan's after.
 * Return: 0; -ENOMEM; -EAGAIN when max_queued jobs wait already; -EDQUOT when the
 * submitter has max_queued_per_user queued; -EBUSY when it is over
 * submit_rate_per_user (dispatch_admit_locked()); -ENOBUFS when @args would pass its
 * max_bytes_per_user, -ENOSPC max_bytes, even once its own finished jobs are dropped
 * (jobquota_admit(): those are dropped, oldest first, when that makes room);
 * -ESHUTDOWN once jobtable_stop() ran.
 * Starting jobs is the dispatcher's: a queued job is started by its fiber, which this
 * kicks (dispatch_kick()), or once the store has the job's first write when that comes
 * first (DUR_PENDING); the submission creates no fiber itself.
 * Context: any fiber or thread; does not yield.
 */
int jobtable_submit(JobTable *t, JobOrigin *origin, const Plugin *plugin, const char *plugin_name,
                    const msgpack_object *args, int priority, uint64_t timeout_ns, unsigned cls,
                    const char *class_name, const JobPlan *plan, Job **ret, uint64_t *ret_existing);

/*
 * jobtable_retry - job.retry: queue a failed, cancelled or dead @j again (attempt 0; its
 * errors stay). Return: 0; -EALREADY: not final, or done; -EBUSY: its last run's code
 * still runs (detached) or its run is still ending; -ENOMEM.
 * Context: any; does not yield.
 */
int jobtable_retry(JobTable *t, Job *j);

/*
 * jobtable_discard - job.discard: drop a final @j's record now (memory and store).
 * Return: 0; -EALREADY: not final; -EBUSY: its code still runs; -ENOENT: dropped already.
 * Context: any; does not yield.
 */
int jobtable_discard(JobTable *t, Job *j);

/*
 * jobtable_run_timer - the due set's timer (jobhold.h): queues scheduled and retrying
 * jobs as they come due; returns once the table stops. Context: a fiber of the server
 * group (main.c starts one); yields.
 */
void jobtable_run_timer(JobTable *t);

/*
 * jobtable_set_scheduling - the dead set's retention (@dead_retention_ns after a job
 * died, at most @dead_retention_max dead jobs) and the idempotency window (@key_window_ms
 * after a keyed job ended). Context: any (start-up, SIGHUP).
 */
void jobtable_set_scheduling(JobTable *t, uint64_t dead_retention_ns, size_t dead_retention_max,
                             uint64_t key_window_ms);

/* jobtable_bucket_of - the index in @t's hash of the bucket of @id: its low bits, not a
 * mixing hash. Ids are handed out in sequence (a fleet host's in blocks) and retention
 * drops the oldest first, so the ids listed are mostly one window no wider than the
 * table (it grows at one job a bucket). Then each bucket holds one job, a submission's
 * link writes the next slot of the array instead of the cold job that headed a
 * scattered bucket, and the slots that submissions and retention touch lie in sequence,
 * the hardware prefetcher's case. Ids far apart (a job kept for days) only share a
 * chain; in a fleet, whose hosts take ids in blocks in turn, a host's own jobs share
 * chains about as long as the hosts are many. Context: table lock held. */
static inline size_t jobtable_bucket_of(const JobTable *t, uint64_t id)
{
        return (size_t)id & (t->nbuckets - 1);
}

/* jobtable_find_locked - the job with @id, not referenced (valid while the lock is
 * held), or NULL. Context: table lock held. */
static inline Job *jobtable_find_locked(const JobTable *t, uint64_t id)
{
        Job *j = t->buckets[jobtable_bucket_of(t, id)];

        while (j && j->id != id)
                j = j->hash_next;
        return j;
}

/* jobtable_get - the job with @id, referenced, or NULL (never existed or retired). */
Job *jobtable_get(JobTable *t, uint64_t id);

/*
 * jobtable_job_state - the owner and state of the job with @id, read under the lock
 * (no reference is taken). Return: 0; -ENOENT (never existed or retired).
 * Context: any; does not yield.
 */
int jobtable_job_state(JobTable *t, uint64_t id, uid_t *ret_owner, JobState *ret_state);

/*
 * jobtable_unshared - whether @id is a job.run of this host's whose record is not
 * written yet (DUR_DEFERRED: a fleet's job.run it runs itself, Job.run_here, or one with
 * fds; written at its end), so that no other host, and no script in a fleet's shared
 * store, knows of it. Context: any; does not yield.
 */
bool jobtable_unshared(JobTable *t, uint64_t id);

/*
 * jobtable_cancel - request cancellation: a queued job ends cancelled at once; so does a
 * running one whose job fiber has not started yet (it waits for a job worker; the
 * dispatcher still joins it); a running job gets fiber_cancel() and ends cancelled when
 * its entry point returns, or, when it has not returned JOB_DETACH_GRACE_NS later, ends
 * cancelled without it (detached: dispatch.h).
 * @timed_out: the request comes from the job's deadline (error DEADLINE_EXCEEDED instead
 * of CANCELLED). Return: 0; -EALREADY when the job had already ended.
 * Context: any; does not yield.
 */
int jobtable_cancel(JobTable *t, Job *j, bool timed_out);

/* jobtable_set_quotas - new per-user limits (copied; dispatch.h) and byte and retention
 * bounds (jobquota.h: what is over the new ones is dropped now); may start queued jobs.
 * Context: any; does not yield. */
void jobtable_set_quotas(JobTable *t, const JobQuotas *q);

/* jobtable_bytes_held - the bytes of args and results held by @uid's jobs (*@ret_user)
 * and by every job (*@ret_all) now (jobquota.h): what an OVERLOADED answer quotes.
 * Context: any; takes the lock briefly; does not yield. */
void jobtable_bytes_held(JobTable *t, uid_t uid, uint64_t *ret_user, uint64_t *ret_all);

/*
 * jobtable_sweep - once a second (the daemon's ticker fiber): drop finished jobs past
 * retention, cancel queued jobs past their deadline, retry a blocked dispatch.
 * Context: any; does not yield.
 */
void jobtable_sweep(JobTable *t);

/*
 * jobtable_stop - refuse new jobs and cancel every queued and running one; @t->idle is
 * set once nothing is queued or running. With a durable store (store_durable()), queued
 * jobs are not cancelled but left queued in the store (their waiters are woken to
 * answer UNAVAILABLE), and running jobs are marked interrupted: a retry-safe one is
 * written back queued, with attempt + 1, when it returns. The dispatcher fiber returns.
 * Context: any; does not yield.
 */
void jobtable_stop(JobTable *t);

/*
 * jobtable_counts - copy the totals into @ret and call @fn for each plugin's counts,
 * under the lock (@fn must not yield or take the lock). Context: any.
 */
void jobtable_counts(JobTable *t, JobCounts *ret, void (*fn)(const PluginCounts *pc, void *arg),
                     void *arg);

/*
 * jobtable_foreach - call @fn for every job in the order it was accepted, under the lock
 * (@fn must not yield or take the lock); stops early when @fn returns non-zero and
 * returns that.
 */
int jobtable_foreach(JobTable *t, int (*fn)(Job *j, void *arg), void *arg);

/*
 * jobtable_next_locked - the job accepted after @j (@j NULL: the first one), or NULL
 * after the last. Not referenced: valid while the lock is held. Context: table lock held.
 */
static inline Job *jobtable_next_locked(JobTable *t, Job *j)
{
        ListHead *e = j ? j->all_link.next : t->all.next;
        return e == &t->all ? NULL : list_entry(e, Job, all_link);
}

/*
 * jobtable_prev_locked - the job accepted before @j (@j NULL: the newest), or NULL
 * before the first: job.list's pages walk newest first. Context: table lock held.
 */
static inline Job *jobtable_prev_locked(JobTable *t, Job *j)
{
        ListHead *e = j ? j->all_link.prev : t->all.prev;
        return e == &t->all ? NULL : list_entry(e, Job, all_link);
}

/*
 * jobtable_count_stall - one more stall report about a fiber of a @plugin_name job (the
 * stall hook, main.c). A name no job was ever submitted with is not counted.
 * Context: any thread (the runtime's monitor threads included); takes the table lock
 * briefly; does not yield.
 */
void jobtable_count_stall(JobTable *t, const char *plugin_name);

/* Lock helpers for code that reads a job's mutable fields (job.h). */
void jobtable_lock(JobTable *t);
void jobtable_unlock(JobTable *t);

/*
 * jobtable_unwritten - the ids of this table's jobs whose first store write waits for
 * their end (a job.run, job.h's DUR_DEFERRED), below @below (0: any), newest first, at
 * most @max into @ids: the jobs a fleet's job.list (fleet.c) finds in no shared
 * record. Return: how many. Walks the table from its newest job until it has seen every
 * such job. Context: any thread; takes the table lock.
 */
size_t jobtable_unwritten(JobTable *t, uint64_t below, uint64_t *ids, size_t max);

/*
 * jobtable_fleet_room_locked - how many more jobs this fleet host takes on now: up to
 * twice max_running queued or running here, so its job workers never wait on the
 * fleet's stream while the rest stays there for hosts with room; 0 while the store
 * cannot write. Read by the store's reader before it takes stream entries, and by a
 * job.run that would run here (jobtable_submit()). Context: any thread, under the lock.
 */
size_t jobtable_fleet_room_locked(JobTable *t);

/* ---- the dispatcher's DispatchOps (jobtable.c), under the lock ------------------- */

/* jobtable_check_idle_locked - set t->idle when stopping and nothing queued or running. */
void jobtable_check_idle_locked(JobTable *t);

/*
 * jobtable_set_detached_locked - @detached: @j, already final, has a fiber still running
 * plugin code (counted in JobCounts.detached, in total and for its plugin); false: that
 * fiber has returned. Each call changes the gauge only when Job.detached changes.
 * Context: table lock held; does not yield.
 */
void jobtable_set_detached_locked(JobTable *t, Job *j, bool detached);

#endif
