/* SPDX-License-Identifier: MIT */
/*
 * sched.h — the public API of fiberd's fiber runtime (scheduler/).
 *
 * The runtime runs fibers (user-space threads with their own mmap'ed stacks) M:N on
 * the worker pthreads of one or more scheduling groups. It knows nothing of jobs,
 * plugins or sockets; the daemon builds those on top.
 *
 * Conventions (shared/STYLE.md):
 *  - Errors are negative errno values; 0 (or a positive count) is success. No function
 *    here reads or writes errno across a context switch: a fiber can resume on another
 *    worker thread, and errno is per thread.
 *  - Time is uint64_t nanoseconds of CLOCK_MONOTONIC. Deadlines are absolute: 0 means
 *    "do not wait", SCHED_FOREVER means "no deadline".
 *  - "Context: any" means a fiber or a plain pthread may call it. "Context: fiber"
 *    means only code running inside a fiber. Blocking calls made from a plain pthread
 *    block that thread (on a futex); made from a fiber they park only the fiber.
 *  - Once a fiber is cancelled (fiber_cancel()), every blocking call it makes returns
 *    -ECANCELED, including the one it is blocked in at that moment.
 *
 * Mechanisms and where they come from:
 *  - scheduling group, shared bounded MPMC run queue, spinning / sleeping masks, wait
 *    slots, pending wake-up: flare's fiber scheduling (shared/seeds/000, 003);
 *  - one poll set per group (epoll, a CLOCK_MONOTONIC timerfd in it), waited in by an
 *    idle worker (Go's netpoller), else looked at every 1-10 ms by the group's
 *    reactor thread (Go's sysmon; tRPC-Cpp Fiber's TimerWorker, shared/seeds/001);
 *  - stacks with a guard (2 MiB, stack.c) and a LIFO cache (flare / libdill), taken at a
 *    fiber's first run, not at its creation, and given back at its exit; the control
 *    block apart, from slabs (Go's g outlives its stack the same way);
 *  - an event a plain pthread can set to wake fibers: tRPC's FiberEvent.
 */
#ifndef FIBERD_SCHED_H
#define FIBERD_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "scheduler/base/list.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SCHED_FOREVER UINT64_MAX

typedef struct Fiber Fiber;
typedef struct SchedulingGroup SchedulingGroup;

/* ---------------------------------------------------------------- time ---------- */

/* sched_now_ns - CLOCK_MONOTONIC now, in nanoseconds. Context: any. */
uint64_t sched_now_ns(void);

/* sched_deadline_after - now + @timeout_ns, saturating at SCHED_FOREVER. Context: any. */
uint64_t sched_deadline_after(uint64_t timeout_ns);

/* sched_ticks - a monotonic tick count for timing short stretches of code: the TSC on
 * x86-64 (one rdtsc: about 10 ns, against 23 for sched_now_ns()'s vDSO call, in a KVM
 * guest), else nanoseconds. Compare a difference with sched_ns_to_ticks() of a
 * threshold (one multiply) and turn it into ns with sched_ticks_to_ns() (for a report,
 * not the hot path). The rate is measured when the first group is made: before that,
 * sched_ns_to_ticks() returns 0. Context: any. */
uint64_t sched_ticks(void);
uint64_t sched_ns_to_ticks(uint64_t ns);
uint64_t sched_ticks_to_ns(uint64_t ticks);

/* ---------------------------------------------------------------- groups -------- */

/* How fiber stacks are guarded in this process (scheduler/stack.c). */
typedef enum SchedGuardMode {
        SCHED_GUARD_REGIONS,  /* madvise(MADV_GUARD_INSTALL), Linux >= 6.13: page-table
                               * markers in large arenas, no memory map per stack */
        SCHED_GUARD_MPROTECT, /* one mapping per stack with a PROT_NONE guard: two maps */
} SchedGuardMode;

/*
 * sched_stack_guard_mode - the guard mode, detected at the first call (and logged
 * through sched_set_log()'s hook): guard regions when the kernel accepts
 * MADV_GUARD_INSTALL, else mprotect. FIBERD_STACK_GUARD=mprotect in the environment
 * forces mprotect (for tests, or a kernel whose guard regions misbehave). Context: any.
 */
SchedGuardMode sched_stack_guard_mode(void);

/* sched_stack_maps_per_fiber - kernel memory maps each live fiber costs: 0 with guard
 * regions, 2 with mprotect guards. Context: any. */
size_t sched_stack_maps_per_fiber(void);

/* Where a worker's ready fibers wait: see "Run queues" in the README. */
typedef enum SchedQueuePolicy {
        SCHED_QUEUE_DEFAULT = 0, /* the measured default (see README) */
        SCHED_QUEUE_SHARED,      /* one run queue per group (flare); with more than one
                                  * worker, a woken fiber's hand-off in runnext (ready.c) */
        SCHED_QUEUE_LOCAL,       /* plus a local queue per worker (tRPC v2, Go) */
} SchedQueuePolicy;

/* ---------------------------------------------------------------- CPU control --- */
/*
 * Job classes with shares (seastar's CPU scheduler, shared/seeds/002, on M:N groups):
 * each group holds one run queue per class; a worker runs next from the class with
 * the lowest vruntime (the TSC time its fibers ran, times 2^32 / shares, seastar's
 * fixed-point reciprocal), and a class whose queue goes from empty to non-empty
 * inherits the group's current minimum vruntime, so an idle class cannot bank credit.
 * Class 0 is "default". A fiber's class is given at creation (FiberAttr.sched_class)
 * or inherited from the fiber that creates it.
 *
 * Task quota and preemption points: fiber_need_preempt() turns true once the running
 * fiber has run task_quota_ns without switching; fiber_maybe_yield() yields then.
 *
 * Stall detector: a fiber that runs stall_threshold_ns without switching is reported
 * once per stall through the stall hook (sched_set_stall_hook), with a backtrace taken
 * on its worker thread (a signal to that thread) when it runs user code, or with the
 * syscall it is blocked in, unsignalled, so the syscall runs its full course.
 *
 * Rescue of blocked workers (libgo's Dispatcher, shared/seeds/004; Go's sysmon
 * hand-off): when a worker has been inside one fiber for rescue_after_ns while its
 * group has ready fibers, a spare worker thread takes its place (at most
 * max_spare_workers per group); the blocked worker becomes a spare again once its
 * fiber switches out. One monitor thread per group watches; it sleeps while the
 * group's workers are all idle.
 */
#define SCHED_MAX_CLASSES 16
#define SCHED_CLASS_NAME_MAX 31
#define SCHED_SHARES_MIN 1
#define SCHED_SHARES_MAX 1000

typedef struct SchedClassConfig {
        const char *name; /* [A-Za-z0-9_.-]{1,31}, copied */
        unsigned shares;  /* SCHED_SHARES_MIN..SCHED_SHARES_MAX */
} SchedClassConfig;

typedef struct SchedControl {
        uint64_t task_quota_ns;      /* 0 = 500 us (seastar's default) */
        uint64_t stall_threshold_ns; /* 0 = 100 ms; SCHED_FOREVER = no stall detector */
        uint64_t rescue_after_ns;    /* 0 = 20 ms; SCHED_FOREVER = no rescue */
        unsigned max_spare_workers;  /* per group; 0 = the group's size; capped so
                                      * workers + spares <= 64 */
        bool hook_blocking_calls;    /* the group's fibers park in blocking C library
                                      * calls (read, poll, usleep, ...): see "Hooks" */
} SchedControl;

typedef struct SchedGroupConfig {
        unsigned workers;              /* worker pthreads, 1..64; 0 = 1 */
        size_t runq_capacity;          /* run-queue slots, a power of two; 0 = 65536 */
        size_t stack_size;             /* default fiber stack, bytes, page multiple; 0 = 128 KiB */
        size_t max_fibers;             /* live fibers at most (0 = 16384); <= runq_capacity */
        unsigned stack_cache;          /* stacks cached per worker (LIFO); 0 = 64 */
        const char *name;              /* thread-name prefix, copied; NULL = "fiberd" */
        SchedQueuePolicy queue_policy; /* DEFAULT = SHARED for a lone group (flare's
                                        * design); sched_new() passes its own */
        const struct SchedClassConfig *classes; /* job classes (see "CPU control"
                                                 * below), copied; NULL = one class,
                                                 * "default", 100 shares */
        unsigned nclasses;                      /* entries in @classes, 1..SCHED_MAX_CLASSES */
        SchedControl control;                   /* quota, stall detector, rescue */
} SchedGroupConfig;

/*
 * sched_group_new - start a scheduling group: @cfg->workers worker pthreads sharing one
 * run queue, plus one reactor thread that serves timers and fd waits while no idle
 * worker does.
 * @ret: out, the group, written only on success; free with sched_group_free().
 * @cfg: NULL for all defaults.
 *
 * Stacks are guarded by guard regions where the kernel has them (see
 * sched_stack_guard_mode()): no memory map per fiber. Else (mprotect guards, two maps
 * per fiber) it checks that vm.max_map_count holds 2 * @cfg->max_fibers maps and fails
 * with a message naming the sysctl to raise when it does not, and warns when the
 * process's groups together need more than it holds.
 *
 * Return: 0; -EINVAL for a bad config (workers > 64, capacity not a power of two,
 * max_fibers > runq_capacity, stack size not a page multiple); -ENOMEM when
 * vm.max_map_count is too small or memory runs out; -errno from pthread_create, epoll,
 * timerfd.
 * Context: any thread that is not one of this group's workers.
 */
int sched_group_new(SchedulingGroup **ret, const SchedGroupConfig *cfg);

/*
 * sched_group_free - stop the group's workers and reactor, join them, release every
 * cached stack and the group. Fibers still alive are not run again: join them first.
 * Accepts NULL. Returns NULL. Context: a thread outside the group.
 */
SchedulingGroup *sched_group_free(SchedulingGroup *g);

/* sched_group_workers - the number of worker pthreads. Context: any. */
unsigned sched_group_workers(const SchedulingGroup *g);

/*
 * sched_handoff_yielders - the fibers that yielded on the calling worker and wait on its
 * own list, which only it runs (ready.c: a yield costs no atomic), move to their group's
 * shared queue, where a sibling or the rescue's spare worker may take them: call it
 * before code that may hold the worker long (fiberd: a plugin's job run inline on its
 * server group), so a fiber that yielded there (a connection's writer) does not wait for
 * that code. Go's handoffp does the same for a whole P before a system call. Nothing
 * when the list is empty (two loads). Context: a fiber on a worker; anywhere else none.
 */
void sched_handoff_yielders(void);

/* sched_group_blocked - true while one of @g's workers is marked blocked: it has run one
 * fiber past SchedControl.rescue_after_ns while others waited, and a spare worker serves
 * them (monitor.c). A snapshot. Context: any. */
bool sched_group_blocked(const SchedulingGroup *g);

typedef struct SchedLatency {
        uint64_t count; /* samples */
        uint64_t p50_ns, p99_ns, max_ns;
} SchedLatency;

typedef struct SchedGroupStats {
        unsigned workers;
        unsigned spinning; /* workers spinning now */
        unsigned sleeping; /* workers asleep on their wait slot now */
        uint64_t fibers_created;
        uint64_t fibers_finished;
        uint64_t fibers_alive; /* created and not yet ended; may count a fiber ending at
                                * the moment of the call, never misses a live one, so 0
                                * means none was alive when the call read it */
        uint64_t context_switches;
        uint64_t spinner_handoffs;    /* ready fibers that claimed a spinning worker (a fiber
                                       * spawned by one of the group's own claims none) */
        uint64_t futex_wakeups;       /* sleeping workers woken through their wait slot */
        uint64_t worker_poll_events;  /* fd and timer events a worker sleeping in the
                                       * group's poll set took itself */
        uint64_t reactor_poll_events; /* the same taken by the reactor thread's look
                                       * every 1-10 ms while every worker is busy */
        uint64_t poll_sleeps;         /* times a worker went to sleep in the poll set */
        uint64_t reactor_looks;       /* times the reactor thread looked at the poll set */
        int poll_worker;              /* the worker sleeping in the poll set now; -1 */
        uint64_t runq_depth;          /* fibers ready now: shared queue, local queues,
                                    * runnext slots and yield lists */
        uint64_t runq_full;           /* fiber_create calls refused with -EAGAIN */
        SchedLatency ready_to_run;    /* from made ready to running, nanoseconds */
        int node;                     /* NUMA node the group is bound to; -1 = not bound */
        char cpus[64];                /* the CPUs its workers may run on, "0-3,8" or "any" */
        uint64_t steals_in;           /* fibers this group's workers took from other groups */
        uint64_t steals_out;          /* fibers other groups' workers took from this one */
        uint64_t local_dequeues;      /* fibers taken from a worker's local run queue */
        uint64_t shared_dequeues;     /* fibers taken from the group's shared run queue */
        uint64_t stalls;              /* stall reports (fibers that ran past the threshold) */
        uint64_t rescues;             /* spare workers started or woken for a blocked one */
        unsigned spares_running;      /* spare workers running fibers now */
        unsigned threads;             /* worker threads alive now, spares included */
} SchedGroupStats;

/*
 * sched_group_stats - snapshot the group's counters while its workers run.
 * @ret: out, written always. The counters are read without stopping anyone, so a
 * snapshot is consistent per field, not across fields. Context: any.
 */
void sched_group_stats(const SchedulingGroup *g, SchedGroupStats *ret);

/* Per class, summed over a Scheduler's groups (or one group's). */
typedef struct SchedClassStats {
        char name[SCHED_CLASS_NAME_MAX + 1];
        unsigned shares;
        uint64_t runtime_ns;       /* CPU time its fibers ran (TSC, converted) */
        uint64_t vruntime;         /* runtime_ns / shares (x 100 for readability: a class of
                                    * 100 shares has vruntime == runtime_ns); the max over
                                    * groups */
        uint64_t queued;           /* fibers in its run queues now */
        SchedLatency ready_to_run; /* made ready -> running, nanoseconds */
} SchedClassStats;

/*
 * sched_group_class_stats - one class of @g. Return: 0; -EINVAL for @cls out of range.
 * Context: any.
 */
int sched_group_class_stats(const SchedulingGroup *g, unsigned cls, SchedClassStats *ret);

/* ---------------------------------------------------------------- scheduler ----- */
/*
 * A Scheduler owns several scheduling groups sized from a concurrency hint and a
 * workload profile, binds each to a NUMA node (libnuma), and lets idle workers steal
 * from other groups at a limited rate (flare, tRPC-Cpp Fiber: shared/seeds/000, 001,
 * 003). Each group may also give every worker a local run queue (tRPC-Cpp's v2 policy,
 * Go's per-P queue).
 */
typedef struct Scheduler Scheduler;

typedef enum SchedOptimizeFor {
        SCHED_OPTIMIZE_NEUTRAL = 0,   /* group sizes searched in [16, 32) */
        SCHED_OPTIMIZE_COMPUTE_HEAVY, /* groups of up to 64, NUMA off */
        SCHED_OPTIMIZE_COMPUTE,       /* up to 64 per node when concurrency >= half the CPUs */
        SCHED_OPTIMIZE_IO,            /* [12, 24) */
        SCHED_OPTIMIZE_IO_HEAVY,      /* [8, 16) */
} SchedOptimizeFor;

typedef enum SchedNuma { SCHED_NUMA_AUTO = 0, SCHED_NUMA_ON, SCHED_NUMA_OFF } SchedNuma;

#define SCHED_MAX_CPUS 1024

/* The machine as the scheduler sees it: the CPUs this process may run on (its affinity
 * mask, which the kernel already narrows to the cgroup's cpuset) and their nodes.
 * Tests pass their own to lay out machines they do not have. */
typedef struct SchedTopology {
        unsigned ncpus;
        int cpu[SCHED_MAX_CPUS];  /* CPU ids, ascending */
        int node[SCHED_MAX_CPUS]; /* node of cpu[i] */
        unsigned nodes;           /* distinct nodes among them */
        bool fixed_affinity;      /* the process was started with a narrowed mask */
} SchedTopology;

/*
 * sched_topology_detect - read the process's CPUs and their NUMA nodes.
 * Return: 0; -errno from sched_getaffinity. Without NUMA support every CPU is node 0.
 * Context: any.
 */
int sched_topology_detect(SchedTopology *ret);

typedef struct SchedConfig {
        unsigned concurrency;              /* workers in all; 0 = the process's CPUs */
        SchedOptimizeFor optimize_for;     /* decides group count and size */
        unsigned groups, group_size;       /* both set: override the profile */
        SchedNuma numa;                    /* AUTO: on when no fixed affinity and at least
                                          * as many groups as nodes (flare's rule) */
        bool pin_workers;                  /* one CPU per worker instead of the node's set */
        unsigned steal_every_n;            /* idle rounds between same-node steal tries;
                                          * 0 = 16; UINT_MAX = never */
        unsigned cross_node_steal_every_n; /* 0 = never (default) */
        SchedQueuePolicy queue_policy;
        size_t runq_capacity, stack_size, max_fibers; /* per group, as SchedGroupConfig */
        unsigned stack_cache;
        const SchedTopology *topology;   /* NULL = sched_topology_detect() */
        bool no_binding;                 /* plan and report, but set no affinity or
                                          * memory policy (tests with an injected
                                          * topology) */
        const char *name;                /* thread-name prefix; NULL = "fiberd" */
        const SchedClassConfig *classes; /* every group gets these classes; NULL = one */
        unsigned nclasses;
        SchedControl control; /* every group's quota, stall detector and rescue */
} SchedConfig;

/* The layout sched_new() chose, also printed at start-up and in stats. */
typedef struct SchedPlan {
        unsigned groups;
        unsigned group_size;
        bool numa; /* groups bound to nodes */
        SchedQueuePolicy queue_policy;
} SchedPlan;

/*
 * sched_plan - the group layout @cfg gives on @topo (flare's sizing rules), without
 * starting anything. Return: 0; -EINVAL for a config no layout satisfies (group_size
 * > 64, concurrency 0 on an empty topology). Context: any. Pure.
 */
int sched_plan(const SchedConfig *cfg, const SchedTopology *topo, SchedPlan *ret);

/*
 * What a layout takes when sched_new() starts it (budget.c): a lower bound, from the
 * numbers group_alloc() uses.
 */
typedef struct SchedBudget {
        unsigned groups;
        unsigned threads;       /* started with the groups: workers, reactors, monitors */
        unsigned spare_threads; /* the rescue's spare workers, started later, at most */
        unsigned fds;           /* descriptors the groups keep open */
        uint64_t memory_bytes;  /* allocated and touched at start: run queues of every
                                 * class, workers, wait slots, the threads' first pages */
        uint64_t stack_bytes;   /* address space of the threads' stacks (the C library's
                                 * default size each, and its guard page) */
        uint64_t stack_maps;    /* mprotect guards only: memory maps one full group's
                                 * fibers need (2 per fiber); 0 with guard regions */
} SchedBudget;

/*
 * sched_budget - what @plan (from sched_plan() of @cfg) takes at start. @cfg NULL: the
 * defaults. Return: 0; -EINVAL (a group of more than 64 workers). Context: any; reads
 * the C library's default thread attributes and, once, probes the stack guard mode.
 */
int sched_budget(const SchedConfig *cfg, const SchedPlan *plan, SchedBudget *ret);

/*
 * sched_check - whether sched_new(@cfg) can start here, without starting anything: the
 * layout (sched_plan() on @topo; NULL: @cfg's, else sched_topology_detect()), then its budget plus @extra (the caller's own threads,
 * descriptors and memory; NULL = none) against this process's limits: its cgroups' pids
 * and memory limits, RLIMIT_NPROC (not root), RLIMIT_NOFILE, RLIMIT_AS, kernel.threads-max,
 * strict overcommit's room, vm.max_map_count with mprotect guards. What it refuses
 * cannot start; what it lets through may still fail on what it does not model.
 * @ret_plan, @ret_budget: out (may be NULL), written when a layout fits even if it is
 * then refused. @why: a one-line reason when refused ("" otherwise).
 * Return: 0; -EINVAL (no layout); -EAGAIN (threads); -EMFILE (descriptors); -ENOMEM
 * (memory, address space, memory maps). Context: any thread; reads /proc and /sys.
 */
int sched_check(const SchedConfig *cfg, const SchedTopology *topo, const SchedBudget *extra,
                SchedPlan *ret_plan, SchedBudget *ret_budget, char *why, size_t why_size);

/*
 * sched_new - plan, create and start every group, bind them, wire up stealing.
 * Return: 0; the errors of sched_plan() and sched_group_new(). Context: any thread
 * outside the runtime. Free with sched_free() (accepts NULL, returns NULL).
 */
int sched_new(Scheduler **ret, const SchedConfig *cfg);
Scheduler *sched_free(Scheduler *s);

unsigned sched_groups(const Scheduler *s);
SchedulingGroup *sched_group_at(const Scheduler *s, unsigned i);
/*
 * sched_fibers_alive - fibers created and not yet ended on all of @s's groups, as one
 * snapshot: it may count a fiber ending at the moment of the call, never misses a live
 * one, and a fiber that creates a child in another group and ends cannot hide the
 * child (adding sched_group_stats()' fibers_alive group by group could). So 0 means
 * no fiber of @s was alive when the count was taken, and everything those that ended
 * did is visible to the caller. Return: the count. Context: any.
 */
uint64_t sched_fibers_alive(const Scheduler *s);
void sched_get_plan(const Scheduler *s, SchedPlan *ret);

/*
 * sched_pick_group - where a fiber started from a plain pthread goes: a group on the
 * caller's NUMA node, round robin among them (any group when NUMA is off or the node
 * has none). Context: any; lock-free.
 */
SchedulingGroup *sched_pick_group(Scheduler *s);

/*
 * sched_classes - the number of classes (1 when none were configured: "default").
 * sched_class_find - the index of class @name. Return: >= 0; -ENOENT. Context: any.
 * sched_class_name - the name of class @cls, or NULL when out of range.
 * sched_class_set_shares - change @cls's shares in every group, effective at the next
 * pick (SIGHUP reload). Return: 0; -EINVAL (@cls or @shares out of range).
 * sched_class_stats - @cls summed over every group. Return: 0; -EINVAL.
 * Context: any.
 */
unsigned sched_classes(const Scheduler *s);
int sched_class_find(const Scheduler *s, const char *name);
const char *sched_class_name(const Scheduler *s, unsigned cls);
int sched_class_set_shares(Scheduler *s, unsigned cls, unsigned shares);
int sched_class_stats(const Scheduler *s, unsigned cls, SchedClassStats *ret);

/*
 * sched_describe - one line per group: "group 0: node 0, cpus 0-15, 16 workers, local
 * queues". Writes at most @len bytes (NUL-terminated). Return: the length it needed.
 */
size_t sched_describe(const Scheduler *s, char *buf, size_t len);

/* ---------------------------------------------------------------- fibers -------- */

typedef void (*FiberFn)(void *arg);

typedef struct FiberAttr {
        size_t stack_size;        /* bytes, page multiple; 0 = the group's default */
        const char *tag;          /* shown in stack-overflow reports; caller-owned, must
                                    * outlive the fiber; NULL = none */
        SchedulingGroup *group;   /* where it runs; NULL: see @scheduler, else the
                                 * caller's group (required from a pthread) */
        Scheduler *scheduler;     /* with group NULL: the caller's group if it is one of
                                 * this scheduler's, else sched_pick_group() */
        bool detached;            /* true: no handle is returned, nobody joins */
        bool no_steal;            /* true: only its own group's workers run it */
        unsigned sched_class;     /* 1 + the class index; 0 = the creating fiber's class
                                 * when it runs in the same group, else class 0 */
        bool hook_blocking_calls; /* true: its blocking C library calls park it (and
                                   * its children in its group) even on a group created
                                   * without SchedControl.hook_blocking_calls */
} FiberAttr;

/*
 * fiber_create - create a fiber running @fn(@arg) and make it ready.
 * @ret: out, the handle of a joinable fiber (written only on success); must be NULL
 * for a detached fiber. A joinable fiber's handle stays valid until fiber_join()
 * returns 0 or fiber_detach(). A fiber's stack is taken when it first runs and goes
 * back when it returns: before its first run and after its end (until the join) only
 * its control block (128 bytes, from the runtime's slabs) is held, so fibers queued
 * behind a busy worker, and fibers that end long before their join, cost no stack each.
 *
 * Return: 0; -EAGAIN when the group already has max_fibers live fibers (backpressure:
 * the call never waits, the caller retries or sheds load); -EINVAL (no group from a
 * pthread, bad stack size, @ret inconsistent with @attr->detached); -ENOMEM when no
 * control block could be allocated or, for a stack of another size than the group's, no
 * stack mapped. (A stack of the group's size is taken at the first run; one that cannot
 * be had then is logged and retried by the worker, with a growing pause, until it can.)
 * Context: any. Does not yield.
 */
int fiber_create(Fiber **ret, const FiberAttr *attr, FiberFn fn, void *arg);

/*
 * fiber_join - wait until @f has returned, then release the handle.
 * Return: 0 (the handle is gone); -ECANCELED when the caller is cancelled first (the
 * handle stays valid); -EINVAL when @f is the caller itself.
 * Context: any; parks the calling fiber (or blocks the calling pthread).
 */
int fiber_join(Fiber *f);

/* fiber_detach - give up the handle; the fiber's resources go when it returns. */
void fiber_detach(Fiber *f);

/*
 * fiber_cancel - set @f's cancellation flag and interrupt the blocking call it is in.
 * From then on every blocking call @f makes returns -ECANCELED. Cooperative: a fiber
 * that never blocks or checks fiber_cancelled() is not stopped. Context: any; @f must
 * be a valid handle (joinable, not yet joined) or the caller itself.
 */
void fiber_cancel(Fiber *f);

/* fiber_self - the calling fiber, or NULL on a plain pthread. Context: any. */
Fiber *fiber_self(void);

/* fiber_id - a process-unique id (from 1), never reused. Context: any. */
uint64_t fiber_id(const Fiber *f);

/* fiber_group - the group @f belongs to (its home: where it is made ready again, even
 * after another group's worker stole it). Context: any. */
SchedulingGroup *fiber_group(const Fiber *f);

/* fiber_tag - the tag given at creation (may be NULL). Context: any. */
const char *fiber_tag(const Fiber *f);

/* fiber_cancelled - true once the calling fiber is cancelled; false on a pthread. */
bool fiber_cancelled(void);

/*
 * fiber_yield - let other ready fibers of the group run; returns at once when none is.
 * Return: 0; -ECANCELED when the caller is cancelled. Context: fiber (on a pthread it
 * calls sched_yield(2) and returns 0).
 */
int fiber_yield(void);

/*
 * fiber_sleep_until / fiber_sleep_for - park until @deadline_ns (absolute) or for
 * @ns. Return: 0 when the time has come; -ECANCELED when cancelled first.
 * Context: any.
 */
int fiber_sleep_until(uint64_t deadline_ns);
int fiber_sleep_for(uint64_t ns);

/*
 * fiber-local storage: a process-wide key (at most SCHED_FLS_KEYS), then a void *
 * per fiber per key, NULL at creation. No destructors: the owner frees its value
 * before the fiber returns.
 * fiber_key_create: 0..SCHED_FLS_KEYS-1, or -ENOSPC when all keys are taken.
 * fiber_local_set: 0, -EINVAL for a bad key, -EPERM outside a fiber.
 * fiber_local_get: the value, NULL outside a fiber or for a bad key.
 */
#define SCHED_FLS_KEYS 8
int fiber_key_create(void);
int fiber_local_set(int key, void *value);
void *fiber_local_get(int key);

/*
 * fiber_need_preempt - true once the calling fiber has run its group's task quota
 * without switching (seastar's need_preempt(), shared/seeds/002): a TSC read and a
 * compare against the deadline its worker set when it started running it, no syscall,
 * no signal. False on a plain pthread. Context: any.
 * fiber_maybe_yield - fiber_yield() when fiber_need_preempt(), else nothing.
 * Return: 0; -ECANCELED when the caller is cancelled (checked only when it yields).
 */
bool fiber_need_preempt(void);
int fiber_maybe_yield(void);

/* What the stall detector saw: handed to the stall hook on the group's monitor
 * thread. Pointers are valid during the call only. */
typedef struct SchedStall {
        const char *group; /* group name */
        unsigned worker;   /* worker index in the group */
        uint64_t fiber_id;
        const char *tag; /* FiberAttr.tag of the stalled fiber (may be NULL) */
        const char *class_name;
        uint64_t ran_ns;          /* how long it has run without switching so far */
        const char *backtrace;    /* newline-separated frames, resolved where symbols are
                                * (dladdr), taken on the stalled worker's thread;
                                * "" when blocked in a syscall (no signal is sent into
                                * one) or the worker did not answer in time */
        long syscall;             /* the syscall its thread is blocked in (its number on
                                   * this architecture); -1 when it runs user code */
        const char *syscall_name; /* "read", "poll", "nanosleep", ...; NULL when
                                   * syscall is -1 or not one of the common ones */
        bool interrupted;         /* the backtrace signal met the thread as it entered a
                                   * syscall, which returned EINTR (a rare race) */
} SchedStall;
typedef void (*SchedStallFn)(const SchedStall *stall, void *arg);
/* sched_set_stall_hook - where stall reports go; NULL (the default) logs them through
 * sched_set_log()'s hook at LOG_WARNING. Context: any, before groups start. */
void sched_set_stall_hook(SchedStallFn fn, void *arg);

/*
 * SchedSymbolizeFn - name the code at @addr (a return address of a stall backtrace):
 * write one line, NUL-terminated, no newline, of at most @len bytes into @buf (fiberd:
 * "hello.so 1.2 (/usr/lib/fiberd/plugins/hello.so)+0x13d3 hello_run+0x1c") and return
 * true; return false for an address it does not know (the runtime then prints
 * backtrace_symbols(3)'s "file(function+offset) [address]").
 * Context: a group's monitor pthread, not a signal handler and not a fiber, possibly
 * several monitors at once: it may take pthread locks, call dladdr(), allocate; it
 * should not block for long (the monitor also watches for stalls and rescues).
 * sched_set_symbolizer - use @fn (with @arg) for stall reports; NULL (the default)
 * removes it. Whatever @fn reads must stay valid until the groups are freed or @fn is
 * removed. Context: any, before groups start (as sched_set_stall_hook()).
 */
typedef bool (*SchedSymbolizeFn)(const void *addr, char *buf, size_t len, void *arg);
void sched_set_symbolizer(SchedSymbolizeFn fn, void *arg);

/* ---------------------------------------------------------------- fd waits ------ */

/*
 * fiber_wait_fd - park until @fd is ready for @events (EPOLLIN / EPOLLOUT, may be OR'ed)
 * or @deadline_ns passes, without blocking the worker thread: @fd goes into the
 * group's epoll set (EPOLLONESHOT), and the fiber is made ready by the idle worker
 * sleeping in that set, or by the reactor thread's look while every worker is busy.
 * At most one fiber may wait for input and one for output on one fd at a time.
 * Return: the ready events (> 0, may include EPOLLERR / EPOLLHUP); -ETIMEDOUT;
 * -ECANCELED; -EBUSY when another fiber already waits on @fd in that direction;
 * -errno from epoll_ctl (e.g. -EPERM for a regular file, -EBADF).
 * Context: fiber (from a pthread it uses poll(2)).
 */
int fiber_wait_fd(int fd, uint32_t events, uint64_t deadline_ns);

/*
 * Fiber-aware I/O on a non-blocking @fd (O_NONBLOCK is the caller's job): each retries
 * on EAGAIN by fiber_wait_fd() until @deadline_ns.
 * fiber_read / fiber_write: bytes moved (> 0; 0 from read means end of file); one
 *   successful read(2)/write(2), like the syscalls;
 * fiber_write_all: @len, or a negative errno with nothing said about partial writes;
 * fiber_accept: a new fd (made non-blocking and close-on-exec);
 * fiber_connect: 0 once connected (SO_ERROR checked).
 * Errors: -ETIMEDOUT, -ECANCELED, or the syscall's -errno. Context: fiber or pthread.
 */
ssize_t fiber_read(int fd, void *buf, size_t len, uint64_t deadline_ns);
ssize_t fiber_write(int fd, const void *buf, size_t len, uint64_t deadline_ns);
ssize_t fiber_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ns);
int fiber_accept(int fd, uint64_t deadline_ns);
int fiber_connect(int fd, const void *addr, unsigned addrlen, uint64_t deadline_ns);

/* ---------------------------------------------------------------- hooks --------- */
/*
 * Hooks (libgo's, shared/seeds/004; scheduler/hook.c has the design): the program
 * defines the C library's blocking calls — read/write/readv/writev/pread/pwrite,
 * recv/recvfrom/recvmsg, send/sendto/sendmsg, connect, accept/accept4, poll/ppoll/select/pselect, sleep/usleep/
 * nanosleep/clock_nanosleep, getaddrinfo/gethostbyname, open/openat/creat/fopen — and
 * keeps the fd bookkeeping that makes them right (socket, socketpair, close, dup*,
 * fcntl(F_SETFL), ioctl(FIONBIO), setsockopt(SO_RCVTIMEO/SO_SNDTIMEO)). On a fiber of
 * a group with SchedControl.hook_blocking_calls, or one created with
 * FiberAttr.hook_blocking_calls, they park the fiber (reactor, timers,
 * io_uring or blocking-I/O threads) and keep the call's meaning: a blocking socket still
 * looks blocking, its timeouts hold, a sleep lasts as long. Anywhere else they are the
 * real call. A cancelled fiber's hooked call fails with errno ECANCELED.
 * Code outside the executable (plugins, the libraries they link) reaches them only when
 * the executable exports them (fiberd: -Wl,--dynamic-list=scheduler/hook.sym).
 */

/*
 * SchedHookOpenFn - the program's say over open(), openat(), creat() and fopen() made
 * on a hooked fiber: open @path (relative to @dirfd, AT_FDCWD for the working
 * directory) with open(2)'s @flags and @mode, or decline.
 * Return: the fd (>= 0); -errno to fail the call with; -ENOSYS to decline (the real
 * call is made). Called on the fiber; may park it.
 */
typedef int (*SchedHookOpenFn)(int dirfd, const char *path, int flags, unsigned mode);

/* sched_hook_set_open - install @fn (NULL: every open is the real call). fiberd opens
 * as a job's submitter there. Context: any, before fibers run. */
void sched_hook_set_open(SchedHookOpenFn fn);

/* sched_hook_active - true when the caller is a fiber whose blocking calls are hooked.
 * Context: any. */
bool sched_hook_active(void);

/*
 * sched_hook_blockio - one phrase saying how hooked file I/O leaves the workers
 * (io_uring, or blocking-I/O threads and why), for the start-up log. Decides it at the
 * first call. Context: any.
 */
const char *sched_hook_blockio(void);

/* ---------------------------------------------------------------- sync ---------- */
/*
 * Every primitive below parks fibers (never their worker thread) and blocks plain
 * pthreads on a futex, so fibers and threads can share one. Each is a plain struct:
 * initialise with its _init() (or zero it), no destroy needed once nobody waits.
 * Waiters are woken in FIFO order. None of them allocates.
 */

/* Intrusive wait list shared by every primitive; fields are private. All-zero is a
 * valid empty list. */
typedef struct SchedWaitList {
        int lock;      /* spinlock word */
        int word;      /* the primitive's own, under @lock (FiberEvent's flag); else 0 */
        ListHead head; /* Waiters, FIFO (scheduler/base/list.h) */
} SchedWaitList;

typedef struct FiberMutex {
        int state; /* 0 unlocked, 1 locked, 2 locked with waiters */
        SchedWaitList waiters;
} FiberMutex;
void fiber_mutex_init(FiberMutex *m);
/* fiber_mutex_lock: 0, or -ECANCELED (not locked). fiber_mutex_trylock: true if taken. */
int fiber_mutex_lock(FiberMutex *m);
bool fiber_mutex_trylock(FiberMutex *m);
void fiber_mutex_unlock(FiberMutex *m);

typedef struct FiberCond {
        SchedWaitList waiters;
} FiberCond;
void fiber_cond_init(FiberCond *c);
/*
 * fiber_cond_wait - unlock @m, park until signalled or @deadline_ns, relock @m.
 * Return: 0 signalled (spurious wake-ups do not happen, but re-check your predicate);
 * -ETIMEDOUT; -ECANCELED. @m is held again on every return.
 */
int fiber_cond_wait(FiberCond *c, FiberMutex *m, uint64_t deadline_ns);
void fiber_cond_signal(FiberCond *c);
void fiber_cond_broadcast(FiberCond *c);

typedef struct FiberSemaphore {
        int64_t count;
        SchedWaitList waiters;
} FiberSemaphore;
void fiber_sem_init(FiberSemaphore *s, int64_t count);
/* fiber_sem_wait: 0 when a unit was taken; -ETIMEDOUT; -ECANCELED. */
int fiber_sem_wait(FiberSemaphore *s, uint64_t deadline_ns);
bool fiber_sem_trywait(FiberSemaphore *s);
void fiber_sem_post(FiberSemaphore *s, int64_t n);

/* Latch / wait group: a counter; waiters wake when it reaches zero. */
typedef struct FiberLatch {
        int64_t count;
        SchedWaitList waiters;
} FiberLatch;
void fiber_latch_init(FiberLatch *l, int64_t count);
/* fiber_latch_add: count += @n (n may be negative, Go's WaitGroup.Add); wakes at 0. */
void fiber_latch_add(FiberLatch *l, int64_t n);
void fiber_latch_count_down(FiberLatch *l);
/* fiber_latch_wait: 0 once the count is zero; -ETIMEDOUT; -ECANCELED. */
int fiber_latch_wait(FiberLatch *l, uint64_t deadline_ns);

/* Read-write lock, writer-preferring (a waiting writer blocks new readers). */
typedef struct FiberRwLock {
        int readers; /* active readers */
        bool writer; /* a writer holds it */
        int writers_waiting;
        SchedWaitList waiters;
} FiberRwLock;
void fiber_rwlock_init(FiberRwLock *l);
int fiber_rwlock_rdlock(FiberRwLock *l); /* 0 or -ECANCELED */
int fiber_rwlock_wrlock(FiberRwLock *l); /* 0 or -ECANCELED */
void fiber_rwlock_unlock(FiberRwLock *l);

/*
 * FiberEvent - a one-shot (until reset) flag: fiber_event_set() wakes every waiter and
 * lets later waits return at once. set() is safe from any pthread, including threads
 * the runtime does not know (tRPC-Cpp's FiberEvent role).
 */
typedef struct FiberEvent {
        SchedWaitList waiters; /* waiters.word: set (fiber_event_is_set()); 24 bytes in all */
} FiberEvent;
void fiber_event_init(FiberEvent *e);
void fiber_event_set(FiberEvent *e);
void fiber_event_reset(FiberEvent *e);
/* fiber_event_wait: 0 once set; -ETIMEDOUT; -ECANCELED. */
int fiber_event_wait(FiberEvent *e, uint64_t deadline_ns);
/* fiber_event_is_set - whether @e is set now, without waiting (an acquire: what was
 * written before the set() is seen). It may be set the moment after a false; a caller
 * that must not miss it checks again under a lock the setter takes after set().
 * Context: any. */
bool fiber_event_is_set(const FiberEvent *e);

/* ---------------------------------------------------------------- diagnostics --- */

/*
 * sched_set_log - route the runtime's few log lines (start-up checks, stack overflow
 * is written directly to fd 2) to @fn; NULL restores the default (stderr with an
 * sd-daemon "<N>" priority prefix). @level is a syslog priority. Context: any, before
 * groups start.
 */
typedef void (*SchedLogFn)(int level, const char *msg);
void sched_set_log(SchedLogFn fn);

/*
 * sched_set_fatal_hook - called from the stack-overflow handler (a SIGSEGV handler on
 * the worker's alternate stack) after its report and before abort(), with the signal
 * and the overflowing fiber's tag (may be NULL), so the program can leave a note of
 * what crashed (fiberd's job store: daemon/plugin/crash.c). @fn must be async-signal-safe.
 * NULL removes it. Context: any, before groups start.
 */
typedef void (*SchedFatalFn)(int sig, const char *tag);
void sched_set_fatal_hook(SchedFatalFn fn);

/* ---------------------------------------------------------------- channels ------ */
/*
 * FiberChan - Go's channel (libgo's co_chan, shared/seeds/004) for fibers and plain
 * pthreads alike: a FIFO of fixed-size elements copied in and out with memcpy.
 *  - buffered (capacity > 0): a ring of @capacity elements allocated once, at
 *    fiber_chan_new(); a send parks only while the ring is full, a receive only while it
 *    is empty;
 *  - unbuffered (capacity 0): a rendezvous, as in Go: a send parks until a receiver has
 *    taken the value (copied straight from the sender's memory into the receiver's);
 *  - close: later sends fail with -EPIPE (never a panic); receivers drain what the ring
 *    still holds, then get -EPIPE; every parked sender and receiver wakes with -EPIPE;
 *  - fiber_chan_select(): Go's select over several sends and receives, a uniformly
 *    random choice among the cases ready at once.
 * Parked senders and receivers are served in FIFO order; a waiter never allocates (its
 * node lives on its stack) and one spinlock per channel guards it. Like every blocking
 * call here, a cancelled fiber gets -ECANCELED, and a deadline (absolute, CLOCK_MONOTONIC
 * ns; 0 = do not wait, SCHED_FOREVER = none) that passes gives -ETIMEDOUT; then nothing
 * was sent or received.
 */
typedef struct FiberChan FiberChan;

/* Most cases one fiber_chan_select() takes (its waiter nodes live on the stack). */
#define FIBER_CHAN_SELECT_MAX 64

/*
 * fiber_chan_new - a channel of @capacity elements (0 = unbuffered) of @elem_size bytes
 * each (0 is fine: a channel of signals, Go's chan struct{}).
 * @ret: out, the channel, written only on success; free with fiber_chan_free().
 * Return: 0; -EINVAL when @elem_size * @capacity overflows; -ENOMEM.
 * Context: any. Allocates (once, the ring with the channel); does not yield.
 */
int fiber_chan_new(FiberChan **ret, size_t elem_size, size_t capacity);

/*
 * fiber_chan_free - release @c and its ring. Nobody may be parked on it or use it any
 * more (close it and let the waiters go first). Accepts NULL; returns NULL.
 * Context: any.
 */
FiberChan *fiber_chan_free(FiberChan *c);

/*
 * fiber_chan_send - copy @elem_size bytes from @elem into the channel: into the ring, or
 * straight to a parked receiver; parks while neither can take it (an unbuffered send
 * parks until a receiver took the value).
 * Return: 0 sent; -EPIPE when @c is closed (before or while parked: the value was not
 * sent); -ETIMEDOUT (0 = fail at once when it would park); -ECANCELED.
 * Context: any; parks the calling fiber (or blocks the calling pthread).
 */
int fiber_chan_send(FiberChan *c, const void *elem, uint64_t deadline_ns);

/*
 * fiber_chan_recv - take the oldest element into @ret_elem (@elem_size bytes; NULL to
 * drop it), from the ring or straight from a parked sender; parks while there is none.
 * Return: 0 received (@ret_elem written); -EPIPE when @c is closed and drained (Go's
 * ok == false; @ret_elem untouched); -ETIMEDOUT; -ECANCELED.
 * Context: any; parks the calling fiber (or blocks the calling pthread).
 */
int fiber_chan_recv(FiberChan *c, void *ret_elem, uint64_t deadline_ns);

/*
 * fiber_chan_close - close @c: wake every parked receiver and sender with -EPIPE;
 * receivers that come later drain the ring first.
 * Return: 0; -EPIPE when it was already closed. Context: any; does not yield.
 */
int fiber_chan_close(FiberChan *c);

/* fiber_chan_len / fiber_chan_cap - elements in the ring now (a snapshot), and its
 * capacity (0: unbuffered). Context: any. */
size_t fiber_chan_len(FiberChan *c);
size_t fiber_chan_cap(const FiberChan *c);

typedef enum FiberChanOp {
        FIBER_CHAN_RECV = 0,
        FIBER_CHAN_SEND = 1,
} FiberChanOp;

/* One case of fiber_chan_select(). */
typedef struct FiberChanCase {
        FiberChan *chan; /* NULL: the case never fires (Go's nil channel) */
        FiberChanOp op;
        void *elem; /* SEND: the value, elem_size bytes, read; RECV: where the value goes
                     * (NULL: dropped), written only when this case fires with 0 */
        int result; /* out, for the case that fired: 0, or -EPIPE (RECV: closed and
                     * drained; SEND: closed, nothing sent) */
} FiberChanCase;

/*
 * fiber_chan_select - Go's select: perform exactly one of the @n operations in @cases,
 * the first that can proceed, parking until one can or @deadline_ns passes. When several
 * are ready at once one is picked uniformly at random (Go's pollorder), so no case
 * starves. A closed channel's case is ready: it fires with result -EPIPE.
 * deadline_ns 0 is Go's `default:` case: -ETIMEDOUT at once when none is ready.
 * Channels are locked in address order (Go's lockorder), so selects over the same
 * channels never deadlock; a select parked on several channels is claimed by exactly
 * one waker (a compare-and-swap on its one Waiter, Go's selectDone), and the others
 * skip it. A channel may appear in several cases (also as send and receive).
 * Return: the index of the case that fired (>= 0; see its .result); -ETIMEDOUT;
 * -ECANCELED; -EINVAL when @n > FIBER_CHAN_SELECT_MAX. With @n == 0 (or all channels
 * NULL) it waits for the deadline or cancellation, as Go's empty select.
 * Context: any; parks the calling fiber (or blocks the calling pthread).
 */
int fiber_chan_select(FiberChanCase *cases, size_t n, uint64_t deadline_ns);

/* ---------------------------------------------------------------- futures ------- */
/*
 * FiberFuture - the result of a computation that may not have finished (flare's and
 * tRPC-Cpp's Future/Promise, shared/seeds/000, 001): made by fiber_async() (a new fiber
 * computes it), by fiber_future_then() (a continuation of another future), or by
 * fiber_promise_new() (anyone, a plain pthread too, fulfils it with fiber_promise_set()).
 * The value is one pointer-sized word, a void *: a pointer the fiber returns, or an
 * integer cast through intptr_t; what it points to is the program's business.
 *
 * Ownership: a future is reference counted. The caller of fiber_async(), then() and
 * promise_new() owns one reference and drops it with fiber_future_free(), whether or
 * not the future is ready; the producer (the async fiber, the continuation fiber, the
 * promise) holds its own until it has set the value, so freeing early never cuts a
 * running computation short (nor cancels it: cancellation stays fiber_cancel()'s).
 * Any number of fibers and pthreads may wait on one future at once.
 */
typedef struct FiberFuture FiberFuture;

/* The body of an async fiber: its return value becomes the future's value. */
typedef void *(*FiberAsyncFn)(void *arg);
/* A continuation: given the value of the future it follows, returns the new value. */
typedef void *(*FiberThenFn)(void *value, void *arg);

/*
 * fiber_async - run @fn(@arg) in a new detached fiber made with @attr (NULL: the
 * caller's group, so from a pthread @attr must name a group or a scheduler; .detached
 * is ignored), and return the future of its value.
 * @ret: out, written only on success.
 * Return: 0; the errors of fiber_create() (-EAGAIN: the group is full; -EINVAL;
 * -ENOMEM); -ENOMEM for the future. Context: any; does not yield. Allocates the future.
 */
int fiber_async(FiberFuture **ret, const FiberAttr *attr, FiberAsyncFn fn, void *arg);

/*
 * fiber_future_get - wait until @f is ready and copy its value to @ret_value (NULL to
 * skip; written only on success). Any number of calls, from any number of waiters.
 * Return: 0; -ETIMEDOUT (0 = poll); -ECANCELED.
 * Context: any; parks the calling fiber (or blocks the calling pthread).
 */
int fiber_future_get(FiberFuture *f, void **ret_value, uint64_t deadline_ns);

/* fiber_future_ready - true once @f has its value. Context: any; never blocks. */
bool fiber_future_ready(FiberFuture *f);

/*
 * fiber_future_then - the future of @fn(value of @f, @arg), run in a new fiber made with
 * @attr (as fiber_async) once @f is ready. The continuation fiber is created now and
 * parks on @f (it holds its own reference on @f: freeing @f at once is fine), so an
 * error comes back here and not later. If the continuation fiber is cancelled while it
 * waits, @fn is not run and the new future's value is (void *)(intptr_t)-ECANCELED.
 * @ret: out, written only on success.
 * Return: 0; the errors of fiber_async(). Context: any; does not yield.
 */
int fiber_future_then(FiberFuture **ret, FiberFuture *f, const FiberAttr *attr, FiberThenFn fn,
                      void *arg);

/*
 * fiber_when_all - wait until all @n futures of @futs are ready (their values: get
 * each with deadline 0 afterwards). Return: 0; -ETIMEDOUT; -ECANCELED.
 * fiber_when_any - wait until at least one is ready. Return: the index of a ready
 * future (the lowest ready when several already are); -ETIMEDOUT; -ECANCELED; -EINVAL
 * for @n == 0 or @n > FIBER_CHAN_SELECT_MAX (its waiter nodes are on the stack).
 * Context: any; park the calling fiber (or block the calling pthread).
 */
int fiber_when_all(FiberFuture *const *futs, size_t n, uint64_t deadline_ns);
int fiber_when_any(FiberFuture *const *futs, size_t n, uint64_t deadline_ns);

/*
 * fiber_future_free - drop the caller's reference; the future goes once its producer
 * has set it too. Accepts NULL; returns NULL. Context: any; does not yield.
 */
FiberFuture *fiber_future_free(FiberFuture *f);

/*
 * fiber_promise_new - a future with no fiber behind it, fulfilled by one call of
 * fiber_promise_set(). @ret gets two references in one: the caller's (drop it with
 * fiber_future_free()) and the promise's (dropped by fiber_promise_set()); hand the
 * pointer to whoever fulfils it. Return: 0; -ENOMEM. Context: any.
 */
int fiber_promise_new(FiberFuture **ret);

/*
 * fiber_promise_set - give @f (from fiber_promise_new()) its value, wake its waiters,
 * drop the promise's reference. Call it exactly once.
 * Return: 0; -EALREADY when @f already has its value (a second call; nothing is
 * dropped then); -EINVAL when @f is not a promise's (an async or then future).
 * Context: any thread, also one the runtime does not know; does not yield.
 */
int fiber_promise_set(FiberFuture *f, void *value);

#ifdef __cplusplus
}
#endif
#endif /* FIBERD_SCHED_H */
