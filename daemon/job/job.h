/* SPDX-License-Identifier: MIT */
/*
 * job.h — fiberd's job: one plugin invocation with msgpack arguments, run as a fiber.
 *
 * A Job is reference counted (job_ref() / job_unref(); atomic, any thread). The job
 * table (jobtable.h) holds one reference from submission until retention drops it;
 * a running job's run holds one (dispatch.c); a request handler that looks a job up
 * gets its own. Every field that changes after submission (state, timestamps, progress,
 * result, error, cancel flag, fiber handle, links) is read and written only under the
 * job table's lock; the immutable fields (id, owner, plugin, args, options) may be read
 * without it by whoever holds a reference.
 *
 * A finished job's record is kept for its retention (tens of thousands of them), so the
 * Job holds only what a record answers and what a revive needs; the rest comes in parts
 * that exist only while needed (docs/design.md, "A job's memory"): a JobLive while the
 * job is not final or a run of it lasts, a JobSched when it has a schedule or a
 * failed run, a log buffer from its first line, its arguments in one allocation, its
 * names interned. tests/daemon-unit/test_jobrecord.c holds the Job to its byte budget.
 *
 * The lifecycle (PROTOCOL.md, "Jobs"; the states are JobState below, the transition
 * table and its one writer, job_transition(), are jobstate.h):
 *
 *     queued ──dispatch──▶ running ──plugin returns 0────────▶ done
 *       │                     ├──────plugin returns < 0──────▶ failed
 *       │                     ├──cancel / timeout, then returns▶ cancelled
 *       │                     └──cancel / timeout, no return───▶ cancelled, detached
 *       │                        within JOB_DETACH_GRACE_NS
 *       └──cancel / timeout while queued──────────────────────▶ cancelled
 *
 * "cancelled" wins over the plugin's return value once cancellation was requested:
 * cancellation is cooperative (the job's blocking calls return -ECANCELED). A job whose
 * code does not come back to a yield point (a CPU loop that never yields, a blocking
 * system call) cannot be stopped, since a fiber cannot be killed: its job ends without
 * it once the grace has passed (dispatch.c), and the fiber, still running, is
 * "detached" from it until it returns; what it returns then is discarded.
 */
#ifndef FIBERD_DAEMON_JOB_H
#define FIBERD_DAEMON_JOB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "daemon/server/creds.h"
#include "daemon/job/joblog.h"
#include "daemon/job/jobquota.h"
#include "ipc/protocol.h"
#include "ipc/status.h"
#include "scheduler/base/list.h"
#include "scheduler/base/time-util.h"
#include "scheduler/sched.h"

/*
 * JobState - where a job is in its life (the diagram above; the transitions between
 * them and their one writer, job_transition(), are jobstate.h's).
 */
typedef enum JobState {
        JOB_NEW, /* built (job_new(), calloc's zero), not yet submitted or restored:
                  * no listener has heard of it; nothing moves a job back here */
        JOB_QUEUED,
        JOB_RUNNING,
        JOB_DONE,
        JOB_FAILED,
        JOB_CANCELLED,
        /* job scheduling (PROTOCOL.md, "Scheduling jobs") */
        JOB_SCHEDULED, /* waits for its due time (JobPlan.run_at_ms; jobtimer.h) */
        JOB_RETRYING,  /* a run failed, waits for its next attempt (jobtimer.h) */
        JOB_WAITING,   /* waits for the jobs of its `after` (jobdeps.h) */
        JOB_DEAD,      /* out of attempts: final */
        JOB_STATE_COUNT,
} JobState;

/* A loaded plugin (plugins/loader.h): stays loaded until fiberd exits, so jobs hold the
 * pointer without a reference. */
typedef struct LoadedPlugin Plugin;

struct JobTable;

/*
 * StoreEntry - a place in the job store's write queue (store.h): a job waiting to have
 * its record written, or a StoreWrite (a delete, a plugin file, a meta value). The
 * store thread tells them apart by @is_job.
 */
typedef struct StoreEntry {
        ListHead link; /* in Store.queue, under Store.lock */
        bool is_job;
} StoreEntry;

/*
 * JobOrigin - what a submission brings besides plugin and arguments: who sent it and
 * the fds it passed (SCM_RIGHTS; the args refer to them by index, PROTOCOL.md).
 */
typedef struct JobOrigin {
        Creds *creds; /* the submitter: referenced by the job */
        int *fds;     /* taken over by the job on success (then set NULL, n_fds 0) */
        size_t n_fds;
        bool answer_at_end; /* job.run: the submission is answered once the job ends
                             * (its first store write may wait for that) */
        bool id_at_end;     /* ... and without a wait limit: nobody learns its id
                             * before (a fleet may run it here: jobtable_submit()) */
} JobOrigin;

/*
 * JobDurability - where a job's first write to the store stands against its run: one
 * value instead of the flags that said it (store.h has the promise it keeps). The
 * outcome of that write, committed or failed, is the store's (JobStorePart below, asked
 * with store_wait()): this is the plan, the job table's alone.
 *
 *     none ──────── nothing to wait for: the memory store (store_settle() at once), or
 *                   a record read back from the store (restored, a fleet copy)
 *     pending ───── its first write is queued; the job runs only once it is committed
 *                   (its job fiber waits, dispatch.c; the table dispatches it once the
 *                   store says it is committed: jobtable_submitted())
 *     early ─────── its first write is queued; the job was dispatched at once (the
 *                   store was busy: the record carries the state it reached by then)
 *     deferred ──── job.run: nothing is answered before the job ends, so its first
 *                   write waits for that (or for a shutdown that leaves it queued);
 *                   dispatched at once; ──jobtable_record_locked()──▶ early
 */
typedef enum JobDurability {
        DUR_NONE,
        DUR_PENDING,
        DUR_EARLY,
        DUR_DEFERRED,
} JobDurability;

/*
 * JobWatch - a call made once the waiters of a job are woken (jobtable_watch()), or
 * once its final state is on disk (store_watch_final()), so that an answer waits for a
 * job without a parked fiber: jobwait.c's deferred answers. Embedded in the watcher's
 * own struct; @next is the list's that holds it (the job's, the store's, the table's).
 */
typedef struct JobWatch JobWatch;
struct JobWatch {
        JobWatch *next;
        struct Job *job;                             /* the watcher's reference */
        void (*fn)(struct JobTable *t, JobWatch *w); /* the dispatcher fiber, no lock held */
};

/*
 * JobStorePart - a job's place in the job store and what its writes came to: written by
 * store.c alone (through store_submit(), store_put(), store_settle() and the store
 * thread), read by nobody else; the job table asks store_wait() for the outcome.
 * job_new() initializes it (the events and the entry's kind); everything else starts at
 * calloc's zero.
 *
 * The job is queued at most once for a write: the store thread snapshots its record when
 * it takes the batch, so the changes made meanwhile cost one row write, and none of them
 * a copy on the caller. A write the disk cannot take now (full, store.h) leaves the job
 * queued for the next attempt, which writes its record as it is then.
 */
typedef struct JobStorePart {
        /* under Store.lock */
        StoreEntry entry; /* in Store.queue while @queued */
        bool queued;      /* @entry is queued (holds a reference) */
        bool args;        /* the next write carries the arguments (the first one) */
        bool notify;      /* set @committed once the next write is committed */
        bool submit;      /* the next write is a submission's first (store_submit()):
                           * a failed commit refuses it instead of trying again */
        bool refused;     /* its submission was refused: nothing of it is written */
        bool sent;        /* a write of it was taken for a commit: the next one is not its
                           * first (StoreRecord.first), even if that one failed */
        uint16_t life;    /* its lives so far (job.retry revives a final job: store_revive();
                           * wraps): a write carries the one it was read in
                           * (StoreWrite.life), and only a final write of this one sets
                           * @final_committed. Written under both locks (the owner's and
                           * Store.lock, an atomic store), read under either or atomically */
        /* outcome: @error is written before the event that publishes it */
        int error;                  /* 0, or why the store failed (first or final write) */
        FiberEvent committed;       /* the submission is committed (or failed: @error) */
        FiberEvent final_committed; /* a write carrying its final state is committed,
                                     * or there is none to wait for */
        JobWatch *final_watches;    /* store_watch_final()'s, until final_committed */
} JobStorePart;

/*
 * JobPlan - what a submission asks of the job's schedule (PROTOCOL.md, "Scheduling
 * jobs"): read by submit.c, checked there, kept by the job. Every field may be 0.
 */
typedef struct JobPlan {
        uint64_t run_at_ms;      /* CLOCK_REALTIME ms: not before (delay_ms / run_at); 0 = now */
        uint32_t max_attempts;   /* runs it may get; 0 taken as 1 */
        uint64_t backoff_ms;     /* the first retry's wait; 0 = IPC_BACKOFF_MS_DEFAULT */
        uint64_t backoff_max_ms; /* its cap; 0 = IPC_BACKOFF_MAX_MS_DEFAULT */
        const uint64_t *after;   /* ids it runs after (copied by job_new()) */
        size_t n_after;
        const char *key; /* idempotency key (copied); NULL = none */
} JobPlan;

/* JobRunError - one failed run, as the record's `errors` lists it. */
typedef struct JobRunError {
        uint32_t attempt; /* Job.attempt of that run */
        const char *code; /* IPC_* constant */
        char *message;    /* owned */
        uint64_t finished_ms;
} JobRunError;

/*
 * JOB_TAG_MAX - room for a job's fiber tag, "job 42 plugin sha256" (job_format_tag()):
 * "job " + 20 digits + " plugin " + a plugin name of at most 32 bytes + NUL.
 */
#define JOB_TAG_MAX 72

/*
 * JobRun - what only a run in progress needs: the events its job fiber and its
 * supervisor meet on, the job fiber's tag, and what the run comes to (its return, the
 * code of its failure, the plugin host's part, when it was asked to stop). The
 * dispatcher allocates it as it starts the run and frees it once the job fiber is
 * joined and no supervisor looks at it (dispatch.c), and Job.run points at it while the
 * run lasts, so a finished record does not carry it.
 */
typedef struct JobRun {
        FiberEvent ran;        /* set by the job fiber when the entry point returned */
        FiberEvent wake;       /* set when the job fiber returned or cancellation was
                                * requested while it ran: wakes its supervisor */
        char tag[JOB_TAG_MAX]; /* the job fiber's FiberAttr.tag */
        bool run_inline;       /* its job fiber runs on the dispatcher's group (the server
                                * group): its plugin is FIBERD_PLUGIN_INLINE (dispatch.c);
                                * set before the fiber exists, read by it */
        bool wait_disk;        /* Job.durability was DUR_PENDING when the dispatcher
                                * started the run, under the table lock, before the job
                                * fiber existed: the fiber reads this, not the Job */
        /*
         * What the run comes to: written by the job fiber alone, without the table lock,
         * before it sets @ran; read by the dispatcher fiber after the job fiber handed the
         * run back (dispatch.c), which moves it into the Job under the table lock when it
         * concludes the run (a job ended meanwhile, by a detach, keeps its record and the
         * run's is dropped). So the job workers do not take the table lock to hand a run's
         * outcome back.
         */
        int run_result;        /* what the plugin's entry point returned */
        const char *fail_code; /* IPC_* code the plugin's failure maps to; NULL = errno's */
        char *error_message;   /* owned: the plugin's own words for its failure; NULL = none */
        bool fail_permanent;   /* the plugin said no retry can help (host->fail_permanent()) */
        char *result;          /* owned: the msgpack map of a run that returned 0; NULL = none */
        size_t result_len;
        /* host_job: the FiberdJob while the entry point runs (plugin_job.c), published and
         * cleared by the job fiber under host_lock alone; the table's cancel hook and the
         * detach read it under the table lock and host_lock (in that order), so the
         * FiberdJob is not freed under them */
        pthread_mutex_t host_lock;
        void *host_job;
        /* the dispatcher's (dispatch.c) */
        struct Job *job;          /* its job, referenced until the run is freed */
        Fiber *fiber;             /* the job fiber (joinable), once created; joined by the
                                   * dispatcher fiber before the run is concluded */
        int create_error;         /* fiber_create()'s error for the job fiber; 0 = none */
        struct JobRun *next;      /* on Dispatcher.starting (under the table lock) */
        struct JobRun *done_next; /* on Dispatcher.done: pushed by the job fiber */
        int refs;                 /* atomic: the dispatcher's, and its supervisor's while
                                   * one runs */
        /* what the dispatcher fiber logs once it has left the lock */
        bool ended;                       /* it ran and ended here: joblines_ended() */
        uint64_t due_ms, started_mono_ns; /* joblines_ended()'s */
        int note_level;
        char note[192]; /* a line for fiberd's log; "" = none */
        /* under the table lock */
        uint64_t cancel_mono_ns; /* (detaching, dispatch.c) CLOCK_MONOTONIC ns when
                                  * cancellation was requested while it ran; 0 = never:
                                  * its supervisor gives the fiber JOB_DETACH_GRACE_NS
                                  * from then to return */
        bool started;            /* its job fiber exists and job->live->fiber was set */
        bool supervised;         /* a supervisor fiber watches it (its deadline, or a
                                  * cancel's grace), or is to once the fiber exists */
        bool released;           /* the job ended without its fiber (a detach): its slot
                                  * was given back and its outcome is dropped */
        bool concluded;          /* the dispatcher concluded it: a late supervisor does not
                                  * detach it */
} JobRun;

/*
 * JobLive - what only a job that is not final (or whose run has not ended) needs: its
 * place in the dispatcher's queue, in the due set and among the jobs that wait for it,
 * its run, its deadline, its queue-wait clock and due time. job_new() allocates it;
 * job_live_drop() frees it once the job is final and nothing runs it any more (no run
 * and no supervisor: Job.supervisors; jobtable.c's last listener, or the last of them as
 * it ends, dispatch.c), so the
 * finished records a table keeps for their retention do not carry it; job_live_new()
 * makes a fresh one when job.retry revives a final job. Every field is under the table
 * lock, and read through Job.live only while the job is not final or something runs it
 * (job_fiber() and job_due_ms() answer for a finished record too).
 */
/*
 * JobSched - the wider parts of a job's schedule (PROTOCOL.md, "Scheduling jobs") and
 * its failed runs, allocated for a job that has one of them (a due time asked, backoffs
 * other than the defaults, ids it runs after, a key, a failed run): most jobs have none,
 * and every finished record is kept for its retention. Job.sched NULL answers the
 * defaults (job_run_at_ms(), job_key(), ...). The plan is immutable after
 * job_set_plan() (before submission or restore); the errors are under the table lock.
 */
typedef struct JobSched {
        uint64_t run_at_ms; /* due time asked; 0 = none */
        uint64_t backoff_ms, backoff_max_ms;
        uint64_t *after;     /* owned: the ids it runs after (Job.n_after) */
        char *key;           /* owned: its idempotency key; NULL = none */
        JobRunError *errors; /* owned ring of IPC_JOB_ERRORS_MAX, from the first failed
                              * run on (NULL before): the last failed runs */
} JobSched;

typedef struct JobLive {
        uint64_t deadline_ns;          /* absolute CLOCK_MONOTONIC; SCHED_FOREVER = none */
        uint64_t submitted_mono_ns;    /* CLOCK_MONOTONIC ns: queue wait (joblatency.h) */
        uint64_t started_mono_ns;      /* CLOCK_MONOTONIC ns; 0 = not started */
        uint64_t due_ms;               /* scheduled, retrying: when it is queued (REALTIME ms) */
        size_t due_index;              /* in JobTable.due (jobtimer.c); SIZE_MAX = not */
        size_t heap_index;             /* in its user's queue (dispatch.h); SIZE_MAX = not */
        struct Dispatcher *dispatcher; /* the one it was queued in (dispatch_push_locked()) */
        uint32_t dispatch_user;        /* its DispatchUser, once queued (dispatch.c) */
        uint32_t dispatch_plugin;      /* 1 + its dispatcher's plugin index, once started;
                                        * 0 = not yet (dispatch.c) */
        uint32_t deps_pending;         /* waiting: ids of @after not done yet (jobhold.c) */
        struct Job **dependents;       /* referenced: waiting jobs that run after this one */
        uint32_t n_dependents, cap_dependents;
        const Plugin *plugin; /* its loaded plugin (valid until exit): the one it was
                               * submitted or restored with, then the one its run runs
                               * (plugin_job.c); asked whether it is retry-safe; the job
                               * fiber stores it atomically without the table lock, so it
                               * is read with __atomic_load_n() */
        Fiber *fiber;         /* joinable job fiber while it may be cancelled */
        JobRun *run;          /* the run in progress (the dispatcher's, dispatch.c); NULL
                               * before and after */
} JobLive;

typedef struct Job {
        /* immutable after job_new() */
        uint64_t id;             /* from 1, never reused */
        struct JobTable *table;  /* the table that lists it (not owned: outlives its fibers) */
        uid_t owner;             /* the submitting client's uid (SO_PEERCRED) */
        int priority;            /* lower runs first */
        unsigned sched_class;    /* FiberAttr.sched_class of the job fiber: 1 + the class
                                  * index (sched_class_find()) */
        uint32_t n_fds;          /* of @fds */
        Creds *creds;            /* the submitter's uid, gid and groups; referenced */
        int *fds;                /* owned: the fds passed with the submission, closed at free */
        const char *plugin_name; /* interned (jobnames.h): for logs and records */
        msgpack_object args;     /* a map; what it points to is one allocation of the
                                  * job's own (job.c), freed with it */
        uint32_t args_bytes;     /* @args packed: what it is charged for (jobquota.h) */
        uint32_t result_len;     /* of @result (under the table lock; a message carries
                                  * less than 4 GiB) */
        uint64_t timeout_ns;     /* 0 = none */
        const char *class_name;  /* its name, interned (jobnames.h; at most
                                  * SCHED_CLASS_NAME_MAX bytes), for records and logs */

        /* under the table lock */
        JobState state : 8;           /* written by job_transition() only (jobstate.h) */
        JobDurability durability : 8; /* how its first write and its run relate
                                       * (job store, store.h); written by jobtable.c's
                                       * store paths only, under the table lock, before
                                       * the job can be dispatched */
        bool cancel_requested;        /* written with job_set_cancel_requested(); host
                                       * functions read it atomically without the lock */
        bool timed_out;               /* the cancellation came from the deadline */
        uint8_t fiber_start;          /* JobFiberStart, atomic: the job fiber has begun, or
                                       * the job ended before it did; a job cancelled before
                                       * its fiber began ends at once (jobtable_cancel()),
                                       * even while every job worker is busy, and its fiber
                                       * then skips the plugin (job_fiber_begin()) */
        bool detached;                /* (detaching, dispatch.c) the job ended while its fiber
                                       * still ran plugin code (it did not return within the
                                       * grace); cleared once the fiber has returned. Written
                                       * with an atomic store; host functions read it with
                                       * job_detached() */
        bool interrupted;             /* cancelled by shutdown, not on request: a durable store
                                       * keeps it (queued again when its plugin is retry-safe) */
        bool requeued;                /* shutdown left it queued in the store: it is not final
                                       * there, whatever this process's copy says */
        bool fleet_copy;              /* not in this host's table: a fleet submission on its way to
                                       * the shared queue, or a copy of a fleet job's shared record
                                       * (store-redis.c); no fiber, never dispatched here */
        bool run_here : 1;            /* a fleet's job.run this host runs, off the shared queue,
                                       * written once at its end (jobtable_submit()); should
                                       * shutdown leave it queued, that write puts it on the
                                       * shared queue for any host (store.c). One bit beside
                                       * from_fleet: the Job stays within its 440 bytes */
        bool from_fleet : 1;          /* taken off the fleet's shared queue (StoreRecord.shared):
                                       * a failed run with attempts left goes back to the
                                       * fleet's schedule set, not this host's due set
                                       * (jobtable.c hands it off, then it is a fleet copy) */
        uint8_t supervisors;          /* what still runs it (dispatch.c): each run from its
                                       * dispatch until the dispatcher concludes it, and each
                                       * supervisor fiber (a revive may dispatch it again
                                       * before a detached run has ended): while any does,
                                       * its JobLive stays */
        bool fail_permanent;          /* (scheduling) the plugin said its failure is permanent:
                                       * no retry */
        uint32_t attempt;             /* runs begun before this one (a retry, or a retry-safe job
                                       * requeued; job store, store.h) */
        uint64_t submitted_ms;        /* CLOCK_REALTIME, milliseconds since the epoch */
        uint64_t started_ms, finished_ms;       /* 0 = not yet */
        uint64_t finished_mono_ns;              /* for retention */
        uint64_t progress_done, progress_total; /* atomic: the plugin writes them unlocked */
        char *result;           /* packed msgpack object, owned (@result_len); NULL = none (nil) */
        const char *error_code; /* IPC_* constant; NULL = none */
        char *error_message;    /* owned */

        /* job scheduling (PROTOCOL.md, "Scheduling jobs"): the plan is immutable after
         * job_set_plan() (before submission or restore); the rest is under the table lock */
        JobSched *sched;       /* owned: its due time, backoffs, after ids, key and failed
                                * runs; NULL while it has none (JobSched above) */
        uint32_t max_attempts; /* >= 1 */
        uint32_t n_errors;     /* failed runs ever (JobSched.errors holds the last) */
        uint32_t n_after;      /* of JobSched.after */
        int refs;              /* atomic, never under the lock (job_ref()) */

        /* job store (store.h) */
        JobStorePart store;  /* store.c's alone: its writes and their outcome */
        JobLog log;          /* its host->log lines, bounded (joblog.h); its own lock */
        JobQuotaEntry quota; /* its bytes, charged to its owner, and its place among
                              * the owner's finished jobs (jobquota.h); under the
                              * table lock, jobtable.c's alone */

        FiberEvent finished; /* set once the state is final */
        JobWatch *watches;   /* called once `finished` is set (jobtable_watch()); under
                            * the table lock */

        /* table links (jobtable.c), under the table lock */
        struct Job *hash_next;
        struct Job **hash_pprev; /* what points at it: its bucket or the hash_next of the
                                  * job before it (the kernel's hlist) */
        ListHead all_link;       /* in JobTable.all: every job, by id */
        ListHead fin_link;       /* in JobTable.finished once final, by finish time */
        JobLive *live;           /* owned: what only a job that is not final needs (JobLive above);
                            * NULL in a finished record. Under the table lock */
} Job;

/*
 * job_new - a new job (JOB_NEW, until jobtable_submit() or a restore moves it on) of
 * @table (kept in Job.table, not referenced) holding a copy of @args (a msgpack map,
 * deep-copied into one allocation of the job's own) for @plugin (kept in its JobLive),
 * owned by @origin's creds (referenced) and holding its fds (taken: @origin's are
 * cleared), in the job class @cls (0-based index; @plugin_name and @class_name interned,
 * jobnames.h), with its JobLive.
 * @ret: out, one reference, written only on success.
 * Return: 0; -ENOMEM. Context: any; does not yield.
 */
int job_new(Job **ret, struct JobTable *table, uint64_t id, JobOrigin *origin, const Plugin *plugin,
            const char *plugin_name, const msgpack_object *args, int priority, uint64_t timeout_ns,
            unsigned cls, const char *class_name);

/*
 * job_set_plan - copy @plan into @j (the after ids and the key; max_attempts 0 → 1,
 * backoffs 0 → the defaults). Return: 0; -ENOMEM (@j unchanged).
 * Context: before @j is submitted or restored (nobody else sees it yet).
 */
int job_set_plan(Job *j, const JobPlan *plan);

/*
 * job_add_run_error - note a failed run of @j: its attempt, @code (an IPC_* constant, not
 * copied) and @message (copied; NULL = "") at @finished_ms. The ring keeps the last
 * IPC_JOB_ERRORS_MAX. Context: table lock held (or @j in no table).
 */
void job_add_run_error(Job *j, const char *code, const char *message, uint64_t finished_ms);

/*
 * job_backoff_ms - the wait before @j's next attempt, after @attempt runs failed (from
 * 1): min(backoff_max_ms, backoff_ms * 2^(attempt-1)), then a random 50-100 % of it
 * (jitter: many jobs failing together do not retry together). Sidekiq's and Faktory's
 * exponential retry, with AWS's "equal jitter". Context: any.
 */
uint64_t job_backoff_ms(const Job *j, uint32_t attempt);

/*
 * job_live_new - give @j (final, its JobLive dropped) a fresh one, for a new life
 * (job.retry's revive). No-op when it has one. Return: 0; -ENOMEM.
 * Context: table lock held; does not yield.
 */
int job_live_new(Job *j);

/*
 * job_live_drop - free @j's JobLive (its dependents' references dropped: none are left
 * once it is final, jobhold.c): @j is final and nothing runs it (Job.supervisors). Accepts a job
 * without one. Context: table lock held (or @j in no table); does not yield.
 */
void job_live_drop(Job *j);

/* job_fiber - @j's job fiber while it may be cancelled (JobLive.fiber), NULL after or
 * when it has no JobLive. Context: table lock held. */
static inline Fiber *job_fiber(const Job *j)
{
        return j->live ? j->live->fiber : NULL;
}

/* job_due_ms - @j's due time (JobLive.due_ms): 0 for a finished record. Context: table
 * lock held. */
static inline uint64_t job_due_ms(const Job *j)
{
        return j->live ? j->live->due_ms : 0;
}

/* job_run_at_ms - the due time @j's plan asked (JobSched.run_at_ms); 0 = none. */
static inline uint64_t job_run_at_ms(const Job *j)
{
        return j->sched ? j->sched->run_at_ms : 0;
}

/* job_after - the ids @j runs after (Job.n_after of them); NULL when none. */
static inline const uint64_t *job_after(const Job *j)
{
        return j->sched ? j->sched->after : NULL;
}

/* job_plan_key - @j's idempotency key; NULL = none. */
static inline const char *job_plan_key(const Job *j)
{
        return j->sched ? j->sched->key : NULL;
}

/* job_ref - one more reference; returns @j. Context: any. */
Job *job_ref(Job *j);

/* job_unref - drop a reference, freeing the job at zero. Accepts NULL; returns NULL. */
Job *job_unref(Job *j);

/*
 * job_pack_record - the job record (PROTOCOL.md, "Job record") as one msgpack map:
 * id, plugin, class, owner, state, priority, timeout_ms, created_ms / started_ms / finished_ms
 * (ms since the epoch, nil when not yet), progress {done, total} (nil when never
 * reported), result (the plugin's object, nil unless done), error ({code, message}, nil
 * unless failed/cancelled), attempt (runs begun before this one). @with_result false
 * leaves result out; @with_args adds args, the map as submitted (job.status's record
 * only: a list page stays small).
 * Context: caller holds the table lock (reads mutable fields). Return: 0; -ENOMEM.
 */
int job_pack_record(msgpack_packer *pk, const Job *j, bool with_result, bool with_args);

/* A record's keys to answer: bit i for the i-th key of job_pack_record()'s order; id
 * and state are always answered. */
#define JOB_FIELDS_ALL UINT32_MAX

/*
 * job_pack_record_fields - job_pack_record() of the keys in @fields only (a mask from
 * job_fields_parse(); JOB_FIELDS_ALL = every key): a client that reads three keys of a
 * trivial job's answer is not sent, and does not decode, the other eighteen.
 * Context: caller holds the table lock. Return: 0; -ENOMEM.
 */
int job_pack_record_fields(msgpack_packer *pk, const Job *j, bool with_result, bool with_args,
                           uint32_t fields);

/*
 * job_fields_parse - job.run's and job.wait's `fields` param (PROTOCOL.md "job.wait"):
 * an array of record key names, or nil / absent (@o NULL) for the whole record.
 * @ret: out, the mask for job_pack_record_fields(), id and state always in it.
 * Return: 0; -EINVAL with @st set (INVALID_ARGUMENT) when @o is not an array of
 * strings or names a key the record does not have (`args` is job.status's only).
 * Context: any.
 */
int job_fields_parse(const msgpack_object *o, uint32_t *ret, IpcStatus *st);

/* job_has_schedule - @j has anything job_pack_schedule() would keep (a due time, more
 * than one attempt, dependencies, a key, failed runs). Context: table lock held. */
bool job_has_schedule(const Job *j);

/*
 * job_pack_schedule - @j's scheduling fields as the store keeps them (StoreRecord.sched):
 * one msgpack map of run_at_ms, due_ms, max_attempts, backoff_ms, backoff_max_ms, after,
 * key, errors. Context: table lock held. Return: 0; msgpack's error.
 */
int job_pack_schedule(msgpack_packer *pk, const Job *j);

/*
 * job_unpack_schedule - the reverse, into @j (a restore, before the job is listed):
 * unknown keys are skipped. Return: 0; -EINVAL (not a map); -ENOMEM.
 */
int job_unpack_schedule(Job *j, const char *buf, size_t len);

/* job_pack_run_errors - the record's `errors`: an array of {attempt, code, message,
 * finished_ms}, oldest first. Context: table lock held. Return: 0; msgpack's error. */
int job_pack_run_errors(msgpack_packer *pk, const Job *j);

/*
 * JobFiberStart - the race between a run's job fiber beginning and the job ending before
 * it does (a cancel or a detach while the fiber waits for a job worker), decided by one
 * compare-and-swap from JOB_FIBER_WAITING, so the job fiber takes no lock to begin.
 */
typedef enum JobFiberStart {
        JOB_FIBER_WAITING = 0, /* dispatched; its fiber has not begun */
        JOB_FIBER_BEGUN,       /* its fiber began first: a cancel is cooperative from now on */
        JOB_FIBER_FORESTALLED, /* the job ended first: its fiber skips the plugin */
} JobFiberStart;

/* True when @j's race ends (or ended before) with @to: WAITING -> @to. */
static inline bool job_fiber_claim(Job *j, JobFiberStart to)
{
        uint8_t want = JOB_FIBER_WAITING;

        return __atomic_compare_exchange_n(&j->fiber_start, &want, to, false, __ATOMIC_ACQ_REL,
                                           __ATOMIC_ACQUIRE) ||
               want == to;
}

/* job_fiber_begin - the job fiber begins; false when the job ended before it (it must
 * skip the plugin). Context: the job fiber; no lock needed. */
static inline bool job_fiber_begin(Job *j)
{
        return job_fiber_claim(j, JOB_FIBER_BEGUN);
}

/* job_fiber_forestall - ends the race before the job fiber begins; false when it has
 * begun. Context: table lock held (a caller ending the job). */
static inline bool job_fiber_forestall(Job *j)
{
        return job_fiber_claim(j, JOB_FIBER_FORESTALLED);
}

/* job_set_cancel_requested - set the flag (atomic store). Context: table lock held. */
static inline void job_set_cancel_requested(Job *j)
{
        __atomic_store_n(&j->cancel_requested, true, __ATOMIC_RELEASE);
}

/* job_detached - Job.detached (atomic load): the job has ended and its fiber still runs
 * plugin code, whose outcome is discarded. Context: any; no lock needed. */
static inline bool job_detached(const Job *j)
{
        return __atomic_load_n(&j->detached, __ATOMIC_ACQUIRE);
}

/* job_format_tag - @j's fiber tag, "job 42 plugin sha256", into @buf (JOB_TAG_MAX
 * bytes; truncated to @size). Return: @buf. Context: any. */
char *job_format_tag(const Job *j, char *buf, size_t size);

/* job_now_ms - CLOCK_REALTIME in milliseconds. Context: any. */
uint64_t job_now_ms(void);

/*
 * job_wall_ms_at - CLOCK_REALTIME in milliseconds at @mono_ns, a CLOCK_MONOTONIC reading
 * (sched_now_ns()) of the last second or so (just taken, or a dispatcher round's):
 * @mono_ns plus the wall clock's offset from the monotonic one, both read again once
 * the last reading is JOB_WALL_RESYNC_NS away from @mono_ns. So a state change stamps
 * its wall-clock and its monotonic time with one clock read, stamps in monotonic order
 * stay in order in wall time between two readings, and a step of the wall clock
 * (settimeofday, an NTP step) shows in the stamps within a second. Context: any thread;
 * lock-free.
 */
uint64_t job_wall_ms_at(uint64_t mono_ns);
#define JOB_WALL_RESYNC_NS NSEC_PER_SEC

/* job_state_name - "queued", "running", ... Context: any. */
const char *job_state_name(JobState s);

/* job_state_parse - a state the wire names (queued .. dead) from its name.
 * Return: 0 and *@ret; -EINVAL for an unknown (or not yet reachable) name. */
int job_state_parse(const char *name, size_t len, JobState *ret);

/* job_state_final - true for done, failed, cancelled and dead. Context: any. */
bool job_state_final(JobState s);

/* job_state_active - true for queued and running (the dispatcher's). Context: any. */
bool job_state_active(JobState s);

/* job_state_held - true for scheduled, waiting and retrying: accepted, not final, not
 * in the dispatcher's queue. Context: any. */
bool job_state_held(JobState s);

#endif
