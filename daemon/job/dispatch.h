/* SPDX-License-Identifier: MIT */
/*
 * dispatch.h — the dispatcher: the queue of jobs waiting to run, the bound on how many
 * run at once, and the fibers that run them: the dispatcher fiber, each job's job fiber
 * and, for a run with a deadline or a cancel, its supervisor (dispatch.c has the
 * design).
 *
 * A Dispatcher lives inside its owner (the JobTable, jobtable.h, field `dispatch`) and
 * is guarded by the owner's lock: every function here named *_locked is called with that
 * lock held, and none of them yields. A queued job reaches its dispatcher through
 * Job.dispatcher, so nothing here needs a global.
 *
 * The dispatcher never calls its owner by name: what it needs from it (the lock, the run
 * hook, a cancel, the idle and detached bookkeeping) comes as a DispatchOps at
 * dispatch_init(), the pattern JobTableHooks uses for the plugin host. So jobtable.c
 * calls down into dispatch.c and never the other way: the two are layers, not a call
 * circle, and the dispatcher can be tested with a fake owner (tests/daemon-unit/).
 * Who runs a job's code is not the dispatcher's business either: DispatchOps.run (the
 * table's run hook, set by main.c), so this layer does not know about plugins beyond
 * their names, which pauses and caps are keyed by.
 */
#ifndef FIBERD_DAEMON_DISPATCH_H
#define FIBERD_DAEMON_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/job/job.h"
#include "daemon/job/jobstate.h"
#include "scheduler/base/time-util.h"
#include "scheduler/sched.h"

/*
 * JOB_DETACH_GRACE_NS - how long a running job's fiber has, after its cancel or timeout,
 * to return before the job ends without it (detached; dispatch.c). 100 ms: a job that
 * cooperates stops at its next yield point, within one task quota (0.5 ms by default)
 * once a worker runs it, and under load it may first wait in a run queue, or behind a
 * blocked worker until a spare takes its place (rescue_after_ms, 20 ms by default); so
 * the grace is kept well above both, to detach only code that truly did not come back.
 * It is also the default stall threshold, the time the runtime already reports a fiber
 * for not switching. Short next to any timeout_ms worth setting: it is how long a
 * cancelled job that never yields may still hold its max_running slot.
 */
#define JOB_DETACH_GRACE_NS (100 * NSEC_PER_MSEC)

/*
 * JobQuotas - per-user limits ([jobs] in the config). They bind every uid but root and
 * fiberd's own (@exempt_uid): those could raise the limits anyway. The byte and
 * retention bounds are the job table's (jobquota.h), carried here so that one call
 * sets every [jobs] limit; the dispatcher does not read them.
 */
typedef struct JobQuotas {
        unsigned max_running_per_user;  /* running jobs of one uid; 0 = no cap */
        size_t max_queued_per_user;     /* queued jobs of one uid; 0 = no cap */
        unsigned submit_rate_per_user;  /* submissions a second (token bucket); 0 = no limit */
        unsigned submit_burst_per_user; /* the bucket's size; 0 = submit_rate_per_user */
        uint64_t max_bytes_per_user;    /* args + results held by one uid; 0 = no cap */
        uint64_t max_bytes;             /* ... by every uid (root too); 0 = no cap */
        size_t retention_max_per_user;  /* finished jobs of one uid kept; 0 = no cap */
        uid_t exempt_uid;               /* fiberd's own uid */
} JobQuotas;

/* One queued job of a lane's heap, with its order key (priority, id) copied beside it
 * and its JobLive, so that a sift compares and moves within the array and writes one
 * line of each job it moves (JobLive.heap_index) instead of loading three. */
typedef struct JobHeapSlot {
        int priority; /* Job.priority, fixed at submission */
        uint64_t id;
        Job *job;
        JobLive *live; /* job->live */
} JobHeapSlot;

/* The queued jobs of a lane in (priority, id) order: a FIFO ring of the jobs that came in
 * order, beside a 4-ary min-heap of the others (dispatch.c, "The lane's queue").
 * JobLive.heap_index is the position: a heap index, or JOB_QUEUE_FIFO | the job's
 * sequence number in the ring. */
#define JOB_QUEUE_FIFO ((size_t)1 << 62)
typedef struct JobHeap {
        JobHeapSlot *v; /* owned array: the heap (d-ary; Johnson, 1975) */
        size_t len, cap;
        JobHeapSlot *fifo; /* owned ring of fifo_cap (a power of two) slots; a slot
                             * whose job is NULL was removed and keeps its key */
        size_t fifo_cap;   /* 0 until the first push */
        size_t fifo_head;  /* the ring's index of its first slot */
        size_t fifo_n;     /* slots in use from there, removed ones included */
        size_t fifo_live;  /* of which hold a job */
        uint64_t fifo_seq; /* the sequence number of the first slot */
} JobHeap;

/*
 * DispatchKey - what may hold back the queued jobs of one class or one plugin: an
 * operator's pause (the `pause` method) and a cap on how many of them run at once
 * ([class.NAME] / [plugin.NAME] max_running). Held jobs stay queued (dispatch.c).
 */
typedef struct DispatchKey {
        unsigned running;     /* its jobs with a run in progress (JobRun) */
        unsigned max_running; /* 0 = no cap */
        bool paused;
} DispatchKey;

/* A plugin name the dispatcher has heard of (a queued job, a pause, a cap), whether or
 * not such a plugin is loaded. Kept until exit. */
typedef struct DispatchPlugin {
        char *name;           /* owned */
        const char *interned; /* jobnames_intern() of it (NULL without memory): a job's
                               * plugin_name, interned too, matches by its pointer */
        DispatchKey key;
} DispatchPlugin;

/* DispatchPluginCap - one [plugin.NAME] max_running (dispatch_set_caps_locked()). */
typedef struct DispatchPluginCap {
        const char *name;
        unsigned max_running; /* 0 = no cap */
} DispatchPluginCap;

/* A lane: the queued jobs of one user in one class and of one plugin, a min-heap by
 * (priority, id). A pause or a cap holds a whole lane or none of it. */
typedef struct DispatchLane {
        unsigned cls;  /* Job.sched_class of its jobs */
        size_t plugin; /* Dispatcher.plugins index of their plugin name */
        JobHeap queue; /* Job.heap_index is the position here */
} DispatchLane;

/* One uid that has submitted: its queued jobs, its running count, its token bucket.
 * Kept until exit (a few bytes per uid that ever submitted, and per class and plugin
 * it used). */
typedef struct DispatchUser {
        uid_t uid;
        DispatchLane *lanes; /* owned array: its queued jobs, by class and plugin */
        size_t n_lanes, cap_lanes;
        size_t queued;       /* its queued jobs, in all its lanes */
        uint64_t held;       /* its scheduled, waiting and retrying jobs (jobhold.c) */
        unsigned running;    /* its jobs with a run in progress (JobRun) */
        uint64_t last_start; /* Dispatcher.starts when a job of its last started; 0 = never */
        double tokens;       /* submissions it may make now */
        uint64_t refill_ns;  /* when tokens was last topped up */
} DispatchUser;

/*
 * DispatchOps - what the dispatcher needs from its owner, handed over at dispatch_init()
 * (not copied: usually a static const struct). @owner is dispatch_init()'s. Every
 * function is required.
 */
typedef struct DispatchOps {
        /* lock / unlock - the owner's lock, the one every *_locked function is called
         * under. Context: any fiber or thread; a plain mutex (never parks a fiber). */
        void (*lock)(void *owner);
        void (*unlock)(void *owner);
        /* run - run @j's code, return 0 or a negative errno (JobTableHooks.run).
         * Context: @j's job fiber, no lock held; yields as the job does. */
        int (*run)(void *owner, Job *j);
        /* cancel - @j's deadline passed while it ran: cancel it as a timeout (the owner
         * ends it or asks its fiber to stop). Return 0; -EALREADY when it had ended.
         * Context: its run's supervisor fiber, no lock held; does not yield. */
        int (*cancel)(void *owner, Job *j, bool timed_out);
        /* stopping_locked - the owner is shutting down (cancel messages say so). */
        bool (*stopping_locked)(void *owner);
        /* idle_locked - a job gave back its slot: the owner checks whether it is idle
         * now (dispatch_idle_locked()). Lock held; must not take it. */
        void (*idle_locked)(void *owner);
        /* set_detached_locked - @j, already final, has (@detached) or no longer has a
         * fiber running its code (the owner's gauge). Lock held; must not take it. */
        void (*set_detached_locked)(void *owner, Job *j, bool detached);
        /* run_inline - may @j's job fiber run on the dispatcher's own group (its plugin
         * declared FIBERD_PLUGIN_INLINE and has not lost it)? NULL: never. Context: the
         * dispatcher fiber, or an inline job fiber before it begins (the run keeps the
         * job's JobLive); no lock held; does not yield. */
        bool (*run_inline)(void *owner, const Job *j);
        /* after_round - the end of each round of the dispatcher fiber, after the jobs it
         * started got their fibers: the owner's calls that wait for jobs to end (the
         * table's watches). Context: the dispatcher fiber, no lock held; must not park
         * for long (every conclusion and start waits behind it). NULL: none. */
        void (*after_round)(void *owner);
} DispatchOps;

typedef struct Dispatcher {
        const DispatchOps *ops;           /* the owner's (not owned) */
        void *owner;                      /* their argument: the JobTable */
        const JobMachine *machine;        /* its jobs' transitions (jobstate.h); not owned */
        Scheduler *sched;                 /* where job fibers run (inline ones aside): its
                                           * groups, placed by the runtime; not owned */
        SchedulingGroup *supervise_group; /* where the dispatcher fiber, supervisors and
                                           * inline job fibers run: the server group, so
                                           * timeouts and cancel work while every job
                                           * worker is blocked; not owned */
        DispatchUser *users;              /* owned array; Job.dispatch_user indexes it */
        size_t n_users, cap_users;
        size_t queued;        /* queued jobs of every user */
        unsigned running;     /* jobs with a run in progress (JobRun) */
        unsigned max_running; /* bound: keeps the run queue from refusing fibers */
        uint64_t starts;      /* jobs started since start-up */
        JobQuotas quotas;
        /* pauses and per-class / per-plugin caps */
        DispatchKey classes[SCHED_MAX_CLASSES + 1]; /* by Job.sched_class (1 + class index) */
        DispatchPlugin *plugins;                    /* owned array; DispatchLane.plugin */
        size_t n_plugins, cap_plugins;
        bool pump_blocked;     /* fiber_create said -EAGAIN: retry on the next tick */
        bool run_inline;       /* atomic: ops->run_inline is asked ([jobs] run_inline) */
        unsigned inline_alive; /* atomic: job fibers created inline whose run has not
                                * returned: plugin code the job groups do not count */
        FiberSemaphore kick;   /* dispatch_kick() posts it; the dispatcher fiber waits on it */
        bool kicked;           /* a kick is pending (atomic): the next ones only note it */
        bool pumping;          /* the dispatcher fiber's own pump runs (no kick needed) */
        JobRun *starting;      /* runs started by the pump whose job fiber the dispatcher
                              * fiber creates next, oldest first (JobRun.next) */
        JobRun **starting_tail;
        JobRun *done; /* runs whose job fiber returned, newest first
                              * (JobRun.done_next): a stack pushed by job fibers with a
                              * compare-and-swap, taken whole by the dispatcher fiber */
} Dispatcher;

/*
 * dispatch_init - an empty queue whose jobs run on the groups of @sched and whose
 * supervisors run on @supervise_group (the daemon's server group; neither owned, both
 * must outlive every job fiber), and the dispatcher fiber on that group, which, when
 * kicked (dispatch_kick()), concludes the runs whose job fiber returned, starts queued
 * jobs until the owner stops (DispatchOps.stopping_locked) and creates their job
 * fibers; it runs as long as the process. @max_running: jobs running at once, 0
 * taken as 1. @ops and @owner: what the dispatcher needs from its owner (DispatchOps;
 * @ops not copied); @machine: the machine every state change goes through (not owned).
 * All must outlive every job fiber.
 * Return: 0; fiber_create()'s error for the dispatcher fiber (-ENOMEM, -EAGAIN).
 * Context: main thread at start-up (the queue grows on first push).
 */
int dispatch_init(Dispatcher *d, Scheduler *sched, SchedulingGroup *supervise_group,
                  unsigned max_running, const DispatchOps *ops, void *owner,
                  const JobMachine *machine);

/*
 * dispatch_kick - have the dispatcher fiber start what can start now
 * (dispatch_pump_locked()) as soon as it runs, instead of on the caller's stack: a
 * submission, a finishing job or the store thread creates no fiber, and a kick made
 * while one is pending costs one atomic exchange, so a burst of submissions is one pump
 * (Go's netpoll and timers hand work to the scheduler loop the same way).
 * Context: any fiber or thread, the table lock held or not; does not yield.
 */
void dispatch_kick(Dispatcher *d);

/* dispatch_set_max_running_locked - a new bound (SIGHUP), 0 taken as 1. Table lock held. */
void dispatch_set_max_running_locked(Dispatcher *d, unsigned max_running);

/*
 * dispatch_set_inline - whether the job fibers of jobs whose plugin allows it
 * (DispatchOps.run_inline) run on d->supervise_group, the dispatcher's own group, with
 * no hand-off to a job worker, their blocking calls hooked (@on: [jobs] run_inline,
 * and the owner's checks that the group's hooks, stall detector and rescue make that
 * safe). Context: any (start-up, SIGHUP); a run placed inline that has not begun when
 * it is turned off moves to the job groups (dispatch.c).
 */
void dispatch_set_inline(Dispatcher *d, bool on);

/* dispatch_inline_alive - job fibers created inline (dispatch_set_inline()) that may
 * still run plugin code: what sched_fibers_alive() of the job scheduler does not count.
 * Context: any. */
unsigned dispatch_inline_alive(const Dispatcher *d);

/* dispatch_set_quotas_locked - new per-user limits (copied; start-up, SIGHUP). */
void dispatch_set_quotas_locked(Dispatcher *d, const JobQuotas *q);

/*
 * dispatch_admit_locked - may @uid submit one more job now? Checks its queued and held
 * jobs against max_queued_per_user and takes a token from its bucket.
 * Return: 0; -EDQUOT (max_queued_per_user); -EBUSY (submit_rate_per_user); -ENOMEM.
 * Context: table lock held.
 */
int dispatch_admit_locked(Dispatcher *d, uid_t uid);

/*
 * dispatch_count_held_locked - @uid has one more (@delta +1) or one fewer (-1) job held
 * outside the queue (scheduled, waiting, retrying): max_queued_per_user counts them too.
 * Context: table lock held; does not yield.
 */
void dispatch_count_held_locked(Dispatcher *d, uid_t uid, int delta);

/* dispatch_queued_locked - jobs waiting in the queue. Table lock held. */
static inline size_t dispatch_queued_locked(const Dispatcher *d)
{
        return d->queued;
}

/* dispatch_idle_locked - nothing queued and nothing running. Table lock held. */
static inline bool dispatch_idle_locked(const Dispatcher *d)
{
        return d->queued == 0 && d->running == 0;
}

/*
 * dispatch_push_locked - queue @j (state queued) by (priority, id); the queue does not
 * take a reference (the table holds one while the job is listed).
 * Return: 0; -ENOMEM (the job is not queued). Context: table lock held.
 */
int dispatch_push_locked(Dispatcher *d, Job *j);

/* dispatch_remove_locked - take a queued @j out of the queue; no-op if not queued. */
void dispatch_remove_locked(Dispatcher *d, Job *j);

/*
 * dispatch_pause_class_locked - hold (@paused) or release the queued jobs of class
 * @sched_class (Job.sched_class: 1 + the class index); releasing pumps the queue.
 * Running jobs are not touched; new ones queue behind the pause.
 * Return: 0; -EINVAL (@sched_class out of range). Context: table lock held; no yield.
 */
int dispatch_pause_class_locked(Dispatcher *d, unsigned sched_class, bool paused);

/*
 * dispatch_pause_plugin_locked - the same for the jobs of plugin @name (copied), loaded or
 * not. Return: 0; -ENOMEM. Context: table lock held; does not yield.
 */
int dispatch_pause_plugin_locked(Dispatcher *d, const char *name, bool paused);

/*
 * dispatch_set_caps_locked - the caps on running jobs of each class (@class_max, by
 * Job.sched_class, SCHED_MAX_CLASSES + 1 entries, [0] unused) and of each plugin in
 * @plugins (@n of them; names copied); plugins not named lose their cap. 0 = no cap.
 * Pumps the queue (a raised cap lets jobs start). At start-up and on reload.
 * Return: 0; -ENOMEM (the plugins from the one that failed on have no cap).
 * Context: table lock held; does not yield.
 */
int dispatch_set_caps_locked(Dispatcher *d, const unsigned *class_max,
                             const DispatchPluginCap *plugins, size_t n);

/*
 * dispatch_count_locked - queued jobs of class @sched_class (0 = any class) and of plugin
 * @plugin (NULL = any plugin); with @held_only, only those a pause or a cap holds now.
 * O(lanes). Context: table lock held.
 */
size_t dispatch_count_locked(const Dispatcher *d, unsigned sched_class, const char *plugin,
                             bool held_only);

/* dispatch_first_locked - some queued job (the best of the first lane with one), or NULL
 * when none waits; held ones included. */
Job *dispatch_first_locked(const Dispatcher *d);

/* dispatch_expired_locked - up to @max queued jobs whose deadline_ns is at or before
 * @now (CLOCK_MONOTONIC ns), held ones included, into @ret (not referenced: the caller
 * takes its references under the same lock). Return: how many. O(queued). */
size_t dispatch_expired_locked(const Dispatcher *d, uint64_t now, Job **ret, size_t max);

/*
 * dispatch_supervise_locked - @j's run was asked to stop (a job.cancel, shutdown): give
 * it a supervisor fiber, if it has none, which ends the job without its fiber when the
 * fiber has not returned JOB_DETACH_GRACE_NS after the cancel (dispatch.c, "Detaching").
 * A no-op for a job with no run in progress, or whose run is supervised already (its
 * deadline) or over. Context: any fiber or thread; the table lock held; does not yield.
 */
void dispatch_supervise_locked(Dispatcher *d, Job *j);

/*
 * dispatch_pump_locked - start queued jobs while fewer than max_running run: among the
 * users below max_running_per_user, the one whose best job that no pause or class or
 * plugin cap holds has the lowest priority value, then the one with the fewest jobs
 * running, then the one whose last start is longest ago (round robin), so one user's
 * flood cannot starve another's job of equal priority; each gets a run (JobRun), and the
 * dispatcher fiber creates its job fiber on a group of d->sched, joins it when it
 * returns and concludes the run; a run with a deadline also gets a supervisor fiber on
 * d->supervise_group that enforces it. A job whose deadline passed while queued ends
 * cancelled (DEADLINE_EXCEEDED) instead. Every state change goes through d->machine.
 * Context: any fiber or thread; the table lock held; does not yield.
 */
void dispatch_pump_locked(Dispatcher *d);

#endif
