/* SPDX-License-Identifier: MIT */
/*
 * runtime.h — the runtime's private types and internal functions, shared by the
 * scheduler/ sources and never installed. Each internal function carries the prefix of
 * the file that defines it (libuv's uv__ discipline); the public API is sched.h.
 *
 * Who owns what:
 *  - A Fiber is a block of its own (slab.c), owned by its references (the running
 *    fiber, and a joinable one's handle). Its stack is taken when it first runs (a stack
 *    of another size than the group's, when it is created) and goes back to a stack
 *    cache when it ends; the block goes when the last reference is dropped.
 *  - A Worker is one pthread of a group; its scheduler context (the thread's own stack)
 *    runs the idle loop. Fibers switch to each other directly when one is ready, and to
 *    the worker's context only when none is.
 *  - A Waiter lives on the waiting fiber's (or thread's) stack for the length of one
 *    blocking call. It is found by wakers through a wait list, the group's timer heap or
 *    the reactor's fd table, each guarded by its own spinlock.
 *
 * The files, from the bottom layer up:
 *   base/          macro.h, list.h, time-util.h, spinlock.h, sigsafe.h: header-only, shared by every folder
 *   runq.h, runq.c the shared run queue (bounded MPMC ring)
 *   localq.h       a worker's local run queue (Chase-Lev deque)
 *   waitslot.h     a worker's wait slot (futex with a wake-up count)
 *   context.h, context.c, context-x86_64.S  the context switch (assembly or ucontext)
 *   log.c          sched_log / sched_set_log
 *   clock.c        CLOCK_MONOTONIC ns, deadlines, TSC calibration and conversion
 *   histogram.c    the ready-to-run latency histogram
 *   topology.c     CPUs and nodes, the group layout, NUMA memory policy
 *   stack.c        fiber stacks in guarded arena slots, the caches, the overflow handler
 *   slab.c         fibers' control blocks: slabs, per-worker caches
 *   waiter.c       Waiter: one blocking call, and the wake-up handshake
 *   timer.c        the timer heap and its timerfd
 *   reactor.c      the poll set's holder (a sleeping worker, else the reactor
 *                  thread's look every tick), the fd table, fiber_wait_fd
 *   reactor-epoll.c  the reactor's poll backend
 *   fiber.c        fibers: create, switch, exit, join, yield, sleep, cancel, locals
 *   ready.c        where a ready fiber goes; a worker's next pick from its own queues
 *   steal.c        stealing from siblings and other groups
 *   worker.c       a worker's state (init/term), its thread and idle loop
 *   group.c        a scheduling group's life and its wake-up of workers
 *   stats.c        a group's statistics
 *   scheduler.c    a Scheduler: groups laid out, bound, wired for stealing
 *   budget.c       what a layout takes at start, checked against the process's limits
 *   sync.c         wait lists; mutex, condition, semaphore, latch, rwlock, event
 *   io.c           fiber-aware read/write/accept/connect, io_errno
 *   chan.c         Go channels: buffered, unbuffered, close, select
 *   future.c       flare/tRPC futures and promises: async, then, when_all/when_any
 *   hook.c         libgo's hooks: the C library's blocking calls, parked on fibers
 *   blockio.h, blockio.c  file I/O and name lookups off the workers (io_uring, threads)
 */
#ifndef FIBERD_RUNTIME_H
#define FIBERD_RUNTIME_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <syslog.h>
#include <unistd.h>

#include "scheduler/base/list.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"
#include "scheduler/context.h"
#include "scheduler/localq.h"
#include "scheduler/runq.h"
#include "scheduler/sched.h"
#include "scheduler/waitslot.h"

/* futex_wait - sleep while *@word == @val, at most @timeout_ns (SCHED_FOREVER: no
 * limit). Return: 0 when woken, -EAGAIN (*@word was not @val), -ETIMEDOUT, -EINTR.
 * Context: any thread. futex_wake - wake one waiter of @word. */
static inline int futex_wait(int *word, int val, uint64_t timeout_ns)
{
        struct timespec ts = timespec_store_ns(timeout_ns == SCHED_FOREVER ? 0 : timeout_ns);

        if (syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val,
                    timeout_ns == SCHED_FOREVER ? NULL : &ts, NULL, 0) < 0)
                return -errno;
        return 0;
}

static inline void futex_wake(int *word)
{
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

#if defined(__SANITIZE_ADDRESS__)
#define SCHED_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define SCHED_TSAN 1
#endif

#define SCHED_MAX_WORKERS 64

typedef struct Worker Worker;

/* ------------------------------------------------------------------ clock.c ------- */

/* clock_tsc_now - a cheap monotonic tick (rdtsc on x86-64, else ns). Context: any. */
static inline uint64_t clock_tsc_now(void)
{
#if defined(__x86_64__)
        uint32_t lo, hi;
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
#else
        return sched_now_ns();
#endif
}

/* TSC ticks per nanosecond, 32.32 fixed point; 0 until clock_calibrate() has run. */
extern uint64_t clock_tsc_per_ns_q32;

/* clock_calibrate - measure the TSC rate (sleeps 2 ms the first time, then returns at
 * once). Context: any thread, before the first group's workers start (group_alloc()). */
void clock_calibrate(void);

/* clock_ns_to_tsc - @ns nanoseconds in TSC ticks, at the rate clock_calibrate()
 * measured: one load and one multiply, for thresholds on the hot path. Context: any. */
static inline uint64_t clock_ns_to_tsc(uint64_t ns)
{
        return (uint64_t)(((unsigned __int128)ns *
                           __atomic_load_n(&clock_tsc_per_ns_q32, __ATOMIC_RELAXED)) >>
                          32);
}

/* clock_tsc_to_ns - a tick count in nanoseconds, at the rate measured since the
 * calibration (better the longer the process runs). Context: any; not the hot path. */
uint64_t clock_tsc_to_ns(uint64_t ticks);

/* ------------------------------------------------------------------ histogram.c --- */

/* Log-linear latency histogram: 8 sub-buckets per power of two, ~12% resolution.
 * One writer (its worker), readers anywhere (relaxed loads). */
#define HIST_SUB 8
#define HIST_BUCKETS (64 * HIST_SUB)
typedef struct Histogram {
        uint64_t count[HIST_BUCKETS];
        uint64_t max;
} Histogram;

/* histogram_add - count one sample @v (TSC ticks). Context: the histogram's worker. */
void histogram_add(Histogram *h, uint64_t v);
/* histogram_summarize - fold @n histograms of TSC ticks into @ret, in ns. Context: any. */
void histogram_summarize(Histogram *const *hs, unsigned n, SchedLatency *ret);

/* ------------------------------------------------------------------ timer.c ------- */

/* A pairing-heap node (Fredman et al. 1986): insert O(1), pop-min and remove
 * O(log n) amortized, and intrusive, so arming a timer never allocates. */
typedef struct TimerNode {
        uint64_t deadline_ns;
        struct TimerNode *child;   /* first child */
        struct TimerNode *sibling; /* next sibling */
        struct TimerNode *prev;    /* previous sibling, or the parent for a first child */
        bool armed;                /* in the heap (guarded by the heap's lock) */
} TimerNode;

/* A group's timers: the heap and the timerfd set to its earliest deadline. */
typedef struct TimerHeap {
        int lock;          /* spinlock over the heap and armed_ns */
        TimerNode *root;   /* pairing-heap root */
        uint64_t armed_ns; /* deadline the timerfd is (being) set to; 0 = disarmed */
        int timerfd;       /* CLOCK_MONOTONIC, absolute; in the reactor's poll set */
        int dirty;         /* atomic: the earliest deadline may differ from armed_ns */
        int programming;   /* atomic: a thread is bringing the timerfd up to date */
} TimerHeap;

/* timer_heap_init - an empty heap and its timerfd. Return: 0, -errno of timerfd_create.
 * timer_heap_term - close the timerfd (no timer may be armed). Context: any thread. */
int timer_heap_init(TimerHeap *h);
void timer_heap_term(TimerHeap *h);
/* timer_add - arm @n (embedded in a Waiter) at @deadline_ns. Context: any. */
void timer_add(TimerHeap *h, TimerNode *n, uint64_t deadline_ns);
/* timer_remove - disarm @n if still armed; after it returns the timer code no longer
 * touches @n. Context: any. */
void timer_remove(TimerHeap *h, TimerNode *n);
/* timer_fire - after the timerfd fired: claim and wake the Waiters of every expired
 * timer, re-arm the timerfd. Context: the reactor thread. */
void timer_fire(TimerHeap *h);

/* ------------------------------------------------------------------ waiter.c ------ */

typedef struct Waiter {
        ListHead link;      /* wait-list link (the list's lock); unlinked otherwise */
        Fiber *fiber;       /* NULL: a plain thread, woken by futex */
        int token;          /* 0 waiting, 1 claimed by the one waker */
        int reason;         /* 0, -ETIMEDOUT or -ECANCELED; set by the claimer */
        int futex;          /* thread waiters: 1 once woken */
        bool uncancellable; /* fiber_cancel() does not interrupt this wait */
        uint32_t data;      /* primitive-specific: rwlock kind, fd events */
        TimerNode timer;
} Waiter;

/* ------------------------------------------------------------------ fiber.c ------- */

/* What the code that runs first after a switch does with the fiber switched away from
 * (fiber_finish_switch()): nothing; push it to its group's shared queue (a yield that
 * does not stay on its worker's yield list), and then wake a sleeping sibling; hand it
 * over to its waker (a park); free it (an exit). */
enum { FIBER_ACT_NONE, FIBER_ACT_YIELD, FIBER_ACT_YIELD_WAKE, FIBER_ACT_PARK, FIBER_ACT_EXIT };

struct Fiber {
        Context ctx;
        SchedulingGroup *group;
        uint64_t id;
        const char *tag;
        FiberFn fn;
        void *arg;
        char *stack_lo;     /* the stack's lowest byte; its guard lies below it; NULL
                             * before its first run and after its exit */
        size_t stack_size;  /* bytes, guard not included */
        int handoff;        /* wake-up handshake, see waiter.c */
        int refs;           /* 1 running + 1 joinable handle */
        bool cancelled;     /* atomic; set once */
        bool fls_used;      /* it set a fiber-local: its exit clears the slots (fiber.c) */
        int waiter_lock;    /* spinlock over cur_waiter */
        Waiter *cur_waiter; /* the Waiter of the blocking call in progress */
        int join_lock;      /* spinlock over done / joiner */
        bool done;
        Waiter *joiner;
        uint64_t ready_tsc; /* when made ready, for ready-to-run latency */
        bool no_steal;      /* only its own group's workers may run it */
        bool hooks;         /* its blocking calls park it (hook.c): its group's
                             * hook_blocking_calls, FiberAttr.hook_blocking_calls, or
                             * its creator's in the same group */
        uint8_t cls;        /* its job class: an index into its group's classes */
        Fiber *yield_next;  /* its worker's yield list (that worker only) */
        /* Its fiber-locals live at the top of its stack (fiber_fls()), not here: only
         * a running fiber reads them, and a block of two cache lines is what a million
         * joinable handles hold (192 MB with them here, 128 without). */
#ifdef SCHED_ASAN
        void *asan_fake_stack;
#endif
#ifdef SCHED_TSAN
        void *tsan_fiber;
#endif
};

/* FIBER_FLS_BYTES - the top of every fiber stack, above its first frame: the fiber's
 * SCHED_FLS_KEYS locals. Zero on a new stack; a fiber that set one clears them at its
 * exit, before the stack goes back (fiber.c), so a fiber that never does costs nothing. */
#define FIBER_FLS_BYTES (((SCHED_FLS_KEYS * sizeof(void *)) + 15) & ~(size_t)15)

/* fiber_fls - @f's fiber-locals, SCHED_FLS_KEYS of them. Context: @f running (it has
 * a stack only from its first run to its exit). */
static inline void **fiber_fls(const Fiber *f)
{
        return (void **)(f->stack_lo + f->stack_size - FIBER_FLS_BYTES);
}

/* fiber_switch_out - leave the running fiber with @action (YIELD, PARK, EXIT); run the
 * next ready fiber of the group or the worker's idle loop. Context: fiber. */
void fiber_switch_out(Fiber *self, int action);
/* fiber_finish_switch - complete what the previous fiber asked for (push it to the
 * shared queue, the wake-up handshake, release it). Called right after a switch, on
 * the new stack, when w->prev is set (not after a yield that stayed on the worker's
 * yield list). */
void fiber_finish_switch(Worker *w);
/* fiber_run - from a worker's idle loop, run @f until it switches back. */
void fiber_run(Worker *w, Fiber *f);
/* fiber_release - drop a reference; the last one frees the control block (the stack
 * went back at the exit). Context: any. */
void fiber_release(Fiber *f);

/* ------------------------------------------------------------------ slab.c -------- */

/* slab_block_get - a control block for a fiber (uninitialised): from @w's
 * cache, else from the slabs (a batch into @w's cache when @w is not NULL). Return:
 * NULL when no slab can be mapped. Context: @w is the calling thread's worker, or NULL
 * off the workers. */
Fiber *slab_block_get(Worker *w);
/* slab_block_put - give back @f's block (its fiber ended and was joined or detached).
 * Context: as slab_block_get(). */
void slab_block_put(Worker *w, Fiber *f);
/* slab_cache_term - give @w's cached blocks back to the slabs. Context: the group's
 * creator, while @w's thread is not running. */
void slab_cache_term(Worker *w);
/* slab_mapped - slabs mapped now (SLAB_BYTES each), for tests. Context: any. */
size_t slab_mapped(void);

/* ------------------------------------------------------------------ worker.c ------ */

/* Fiber stacks (stack.c): the guard below each stack, STACK_GUARD_SIZE bytes: 2 MiB, so
 * a frame of up to about 1.9 MiB in code built without -fstack-clash-protection (which
 * moves the stack pointer once and writes wherever it likes in the frame) lands in the
 * guard of a 128 KiB stack instead of jumping it into another fiber's stack. */
#define STACK_GUARD_SIZE (2 * 1024 * 1024)

typedef struct StackCache {
        char **slot; /* LIFO of cached stacks, by lowest byte (default size only) */
        unsigned n, cap;
} StackCache;

/* Guard regions: arena slots carved for one worker alone and not taken yet (stack.c). */
typedef struct StackRun {
        char *lo, *end;
        bool guarded; /* their guards are installed (else each at its take) */
} StackRun;

typedef struct StackArena StackArena;

/* A group's default-size stacks beyond its workers' caches (stack.c). */
typedef struct StackPool {
        int lock;                /* spinlock over everything below but arena_mutex */
        char **warm;             /* committed stacks, a LIFO array */
        size_t warm_n, warm_cap; /* warm_n: atomic for the unlocked peek */
        char *dirty[64];         /* freed beyond warm: the next batch to release */
        unsigned dirty_n;        /* atomic for the unlocked peek */
        char **free;             /* released slots (no memory), reused first */
        size_t free_n, free_cap;
        StackArena *arenas;          /* guard regions: reserved arenas, newest first */
        char *carve, *carve_end;     /* the newest arena's part not yet carved into slots */
        size_t arena_next;           /* bytes of the next arena: doubles per arena */
        pthread_mutex_t arena_mutex; /* one thread grows the arenas at a time */
        size_t maps_reserved;        /* mprotect guards: this group's share of the budget */
} StackPool;

struct Worker {
        SchedulingGroup *group;
        unsigned index;
        pthread_t thread;
        Context sched_ctx; /* the worker thread's own stack: the idle loop */
        Fiber *current;    /* running fiber; NULL in the idle loop */
        Fiber *prev;       /* the fiber just switched away from, when it asked for
                            * something (prev_action); NULL after a yield that stayed
                            * on this worker's yield list */
        int prev_action;   /* what to do with it (FIBER_ACT_*) */
        StackCache stacks;
        void *altstack;    /* sigaltstack for the overflow handler */
        uint64_t switches; /* stats: single writer, relaxed */
        uint64_t created;
        uint64_t finished;
        size_t exits_pending;     /* fibers of @group that exited here and are not yet
                                   * taken off its alive count (alive_flush(); atomic:
                                   * sched_group_stats() reads it) */
        uint64_t released_seen;   /* its group's released count as it last read it */
        uint64_t id_next;         /* fiber ids this worker hands out: [id_next, id_end), */
        uint64_t id_end;          /* a block taken from the process's counter */
        uint64_t local_dequeues;  /* from a local run queue (own or a sibling's) */
        uint64_t shared_dequeues; /* from the group's shared run queue */
        unsigned pops;            /* pops so far: every 8th serves the yield list first, and
                                   * (local policy) the shared queue, so neither starves */
        unsigned idle_rounds;     /* rounds without work: paces stealing */
        bool steal_hit;           /* the last steal try found a fiber: try again at once */
        uint8_t spin_misses;      /* spins in a row that found nothing (worker.c), <= 6 */
        uint64_t rescued_tsc;     /* local policy: when the deque's oldest last ran first */
        Histogram latency;
        Fiber *yield_head;   /* fibers that yielded here while no sibling spun: */
        Fiber *yield_tail;   /* a FIFO only this worker touches (no atomics) */
        size_t yield_n;      /* its length; atomic for stats readers */
        uint32_t yield_rng;  /* xorshift32 state: 1 yield in 64 goes to the shared queue */
        bool yield_rotated;  /* one just did: the next pop takes the yield list first */
        Fiber *next;         /* local policy: runs next (Go's runnext); atomic */
        uint64_t next_since; /* TSC when next was set; atomic */
        LocalRunq local;     /* SCHED_QUEUE_LOCAL only */
        /* CPU control (class.c, monitor.c). */
        unsigned cls;             /* classes: the class its runnext and deque hold */
        bool running;             /* in a fiber, not the idle loop (atomic: the monitor
                                   * reads it; written only at idle transitions) */
        uint64_t run_tsc;         /* classes: when the running segment (fibers of one
                                   * class run in a row) started (TSC), for charging
                                   * its class; 0 in the idle loop */
        unsigned segment_left;    /* switches the segment may still go on without a
                                   * clock read (class_account()); 0 when the running
                                   * fiber is not of @group */
        unsigned segment_cls;     /* the class of the running segment */
        uint64_t class_gen_seen;  /* the group's class_gen at this worker's last pick
                                   * at a yield: while it stands, the pick stands
                                   * (ready_yield()) */
        uint64_t charge_tsc;      /* classes: ticks run and not yet charged to their
                                   * class (class_charge()) */
        unsigned charge_cls;      /* the class those ticks belong to */
        uint64_t run_seq;         /* bumped at every switch (atomic: the monitor reads it) */
        uint64_t quota_end_tsc;   /* the task quota's end: fiber_need_preempt() */
        uint64_t quota_seq;       /* the run_seq that quota_end_tsc belongs to */
        uint64_t mon_seq;         /* monitor only: the run_seq it last saw, and */
        uint64_t mon_since_ns;    /* since when it has seen it */
        Histogram *class_latency; /* classes: ready-to-run per class, else NULL */
        bool blocked;             /* the monitor found it inside one fiber too long and
                                 * started a spare in its place (atomic) */
        uint64_t stall_seq;       /* run_seq of the last stall reported (monitor only) */
        int spare_futex;          /* a spare parked in reserve waits here */
        int thread_state;         /* WORKER_THREAD_*: monitor and the thread (atomic) */
        pid_t tid;                /* the thread's kernel id, for /proc/self/task/<tid>
                                   * (atomic: written by the thread, read by the monitor) */
        void *bt[64];             /* the stall backtrace, taken by the signal handler */
        uint64_t bt_seq;          /* run_seq when it was taken: whose frames they are */
        bool bt_intr;             /* the signal cut a syscall short (it returned EINTR) */
        int bt_n;                 /* frames in bt; -1 while asked for (atomic) */
        Fiber *blocks;            /* fibers' free control blocks, a LIFO linked by */
        unsigned nblocks;         /* yield_next; this worker's thread only (slab.c) */
        StackRun carved;          /* this worker's carved slots (stack.c; last: cold, and
                                   * the hot fields above keep their lines) */
#ifdef SCHED_ASAN
        void *asan_stack_bottom;
        size_t asan_stack_size;
#endif
#ifdef SCHED_TSAN
        void *tsan_fiber;
#endif
} __attribute__((aligned(128)));

enum { WORKER_THREAD_NONE, WORKER_THREAD_RUNNING, WORKER_THREAD_EXITED };

/* hook_init - set up the hooks' fork handling (hook.c), once; group_alloc() calls it for
 * every group (any may run hooked fibers). Context: any. */
void hook_init(void);

/* worker_self - the calling thread's Worker, or NULL. Context: any thread.
 * A fiber may resume on another thread than the one it left, so the thread pointer
 * must be read again after every switch: the compiler may keep a TLS variable's
 * address (thread pointer + offset) in a register across a call, as it does any other
 * address, which is right for threads and wrong for fibers (folly's and Boost.Context's
 * "fiber-safe TLS" problem). On x86-64 the read is one volatile asm (initial-exec TLS:
 * the offset from the GOT, the load through %fs), which the compiler can neither move
 * nor merge with another; elsewhere it is a call the compiler cannot see into. */
#if defined(__x86_64__)
extern __thread Worker *sched_tls_worker __attribute__((tls_model("initial-exec")));
static inline Worker *worker_self(void)
{
        Worker *w;
        __asm__ __volatile__("movq sched_tls_worker@gottpoff(%%rip), %0\n\t"
                             "movq %%fs:(%0), %0"
                             : "=r"(w)
                             :
                             : "memory");
        return w;
}
#else
Worker *worker_self(void);
#endif
void worker_set_self(Worker *w);
/* worker_init - set up @w, worker @index of @g, with a stack cache of g->stack_cache
 * stacks (the parts that need no thread of its own; worker.c lists them). Return: 0, -ENOMEM.
 * worker_term - undo worker_init() in reverse; accepts a zeroed, never initialised
 * Worker and one whose worker_init() failed. Context: the group's creator, while @w's
 * thread is not running. */
int worker_init(Worker *w, SchedulingGroup *g, unsigned index);
void worker_term(Worker *w);
/* worker_start - start @w's thread; worker_join - wait for it after the group stopped.
 * Return: 0, -errno from pthread_create. */
int worker_start(Worker *w);
void worker_join(Worker *w);

/* ------------------------------------------------------------------ reactor.c ----- */

typedef struct FdEntry {
        int lock;           /* spinlock over the fields below */
        bool added;         /* registered with the backend (may be stale after close) */
        bool arming;        /* a thread is bringing the backend up to gen (reactor.c) */
        unsigned gen;       /* bumped whenever a waiter registers */
        unsigned armed_gen; /* the gen the backend's interest was last set for */
        Waiter *in, *out;   /* the fibers waiting for input / output */
} FdEntry;

#define FD_CHUNK 1024
#define FD_CHUNKS 4096 /* fds below 4 Mi */

/* Who holds a group's poll set (Reactor.poller): nobody, the reactor thread, or a
 * worker (its index, >= 0). */
#define POLLER_NONE (-1)
#define POLLER_REACTOR (-2)

typedef struct Reactor {
        int epfd;   /* the backend's poll set (reactor-epoll.c) */
        int wakefd; /* eventfd in the poll set: wakes the worker sleeping there */
        int poller __attribute__((aligned(128))); /* POLLER_*, or a worker's index */
        int thread_sleep; /* futex: 1 while the reactor thread sleeps with no timeout,
                           * 2 to stop it */
        pthread_t thread;
        uint64_t worker_events;  /* stats: events a worker took from the poll set */
        uint64_t reactor_events; /* stats: events the reactor thread took */
        uint64_t worker_sleeps;  /* stats: times a worker slept in the poll set */
        uint64_t reactor_looks;  /* stats: times the reactor thread looked at it */
        TimerHeap timers;
        FdEntry *chunks[FD_CHUNKS];
} Reactor;

/* reactor_init - the poll set, the timers, the wake-up eventfd and the reactor thread.
 * Return: 0, -errno. reactor_term - stop and join the thread, release them in
 * reverse. Context: the group's creator. */
int reactor_init(Reactor *r, SchedulingGroup *g);
void reactor_term(Reactor *r);
/* reactor_poll_wait - instead of its wait slot's futex, sleep in the group's poll set
 * (Go's netpoller: an idle worker waits for fds and timers itself, so a ready fd wakes
 * the thread that runs its fiber, not a reactor thread that then wakes a worker).
 * Called by a worker about to sleep, its bit in the sleeping mask set; takes the poll
 * set if nobody holds it. Sleeps until an fd or timer event or a wake of its slot
 * (kickfd), clears its sleeping bit, makes the fibers of the events ready (on this
 * worker: its runnext or the shared queue), and gives the poll set up again.
 * Return: false at once when another thread holds the poll set (the caller sleeps on
 * the futex: the holder wakes it when it lets go), true after the sleep.
 * Context: @w's own thread, in its idle loop. */
bool reactor_poll_wait(SchedulingGroup *g, Worker *w);
/* reactor_poller - the index of the worker sleeping in the poll set, or -1. */
static inline int reactor_poller(const Reactor *r)
{
        int p = __atomic_load_n(&r->poller, __ATOMIC_RELAXED);
        return p >= 0 ? p : -1;
}

/* ------------------------------------------------------------------ reactor-epoll.c */

/* One readiness report: the key an fd was watched under, and epoll event bits. */
typedef struct ReactorEvent {
        uint64_t key;
        uint32_t events;
} ReactorEvent;

/* reactor_backend_init / _term - create / close @r's poll set. Return: 0, -errno. */
int reactor_backend_init(Reactor *r);
void reactor_backend_term(Reactor *r);
/* reactor_backend_add - watch @fd for input for good, reported under @key; with @edge
 * once per change (an eventfd: once per write, never read). Return: 0, -errno.
 * Context: the group's creator. */
int reactor_backend_add(Reactor *r, int fd, uint64_t key, bool edge);
/* reactor_backend_arm - report @fd (under its own number) once when ready for
 * @events; *@added says whether it is registered already and is set once it is.
 * Return: 0, -errno of epoll_ctl. Context: any; the fd entry's lock held. */
int reactor_backend_arm(Reactor *r, int fd, uint32_t events, bool *added);
/* reactor_backend_poll - wait up to @timeout_ms (-1: no limit, 0: a look) and fill up
 * to @max events. Return: their number, or -errno (-EINTR: a signal came).
 * Context: the thread holding the poll set (Reactor.poller). */
int reactor_backend_poll(Reactor *r, ReactorEvent *evs, int max, int timeout_ms);

/* ------------------------------------------------------------------ group.c ------- */

/* A job class of a group (class.c): seastar's task queue with shares. */
typedef struct SchedClass {
        Runq *runq; /* class 0: &group->runq; others their own */
        char name[SCHED_CLASS_NAME_MAX + 1];
        unsigned shares;    /* atomic */
        uint64_t recip_q32; /* 2^32 / shares, seastar's fixed-point reciprocal (atomic) */
        uint64_t vruntime __attribute__((aligned(128))); /* ticks * recip >> 32 (atomic) */
        uint64_t runtime_tsc;                            /* CPU ticks its fibers ran (atomic) */
        size_t queued __attribute__((aligned(128)));     /* fibers in runq (atomic) */
} SchedClass;

struct SchedulingGroup {
        Runq runq;
        uint64_t spinning_mask __attribute__((aligned(128))); /* workers spinning */
        uint64_t sleeping_mask __attribute__((aligned(128))); /* workers in wait slots */
        bool pending_spinner_wakeup __attribute__((aligned(128)));
        bool stopped;
        WaitSlot *slots;
        Worker *workers;
        unsigned nworkers;
        unsigned started; /* worker threads running */
        size_t stack_size;
        size_t max_fibers;
        unsigned stack_cache; /* stacks cached per worker */
        /* Live fibers = admitted - released - the workers' exits_pending. Both only
         * grow: a creation adds to admitted, and a refused one, an exit off the
         * group's workers and a worker's batch of exits (alive_flush()) to released,
         * on its own line, so the creator's line does not move at every exit. */
        uint64_t admitted __attribute__((aligned(128)));
        uint64_t runq_full;
        uint64_t released __attribute__((aligned(128)));
        uint64_t spinner_handoffs __attribute__((aligned(128)));
        uint64_t futex_wakeups;
        uint64_t created_outside; /* fibers created from non-worker threads */
        StackPool stacks;         /* stacks beyond the workers' caches (stack.c) */
        char name[16];
        /* Placement, binding and stealing (scheduler.c, steal.c). */
        Scheduler *owner;  /* the Scheduler it belongs to; NULL for a lone group */
        int node;          /* NUMA node, -1 = not bound */
        cpu_set_t cpus;    /* allowed CPUs for the workers; empty = no affinity */
        bool pin_workers;  /* worker i on the i-th CPU of cpus */
        bool bind;         /* apply cpus / node to threads and memory */
        bool local_queues; /* SCHED_QUEUE_LOCAL */
        bool runnext;      /* a runnext slot per worker: local queues, or a shared queue
                            * with more than one worker (ready.c) */
        unsigned nvictims;
        struct Victim {
                SchedulingGroup *group;
                unsigned every_n; /* idle rounds between tries */
        } victims[16];            /* groups this one steals from (same node first) */
        unsigned nthieves;
        SchedulingGroup *thieves[16]; /* same-node groups that steal from this one */
        uint64_t steals_in __attribute__((aligned(128)));
        uint64_t steals_out;
        Reactor reactor;
        /* CPU control: classes (class.c), quota, stall detector, rescue (monitor.c). */
        unsigned nclasses;      /* 1: the fast paths, no class bookkeeping */
        SchedClass *classes;    /* nclasses entries */
        uint64_t last_vruntime; /* the highest vruntime picked (seastar's
                                  * _last_vruntime): what an activated class inherits */
        uint64_t quota_tsc;     /* task quota, TSC ticks */
        bool hooks;             /* SchedControl.hook_blocking_calls (hook.c) */
        uint64_t stall_ns;      /* stall threshold; 0 = off */
        uint64_t rescue_ns;     /* rescue after; 0 = off */
        uint64_t tick_ns;       /* the monitor's period while workers run */
        unsigned nspare;        /* spare worker slots after the nworkers regular ones */
        /* Bumped whenever a class pick could change: a charge to a vruntime, a class
         * activated (classes only; atomic). A line of its own: read at every yield,
         * written at most once per worker's 20 us of run and per activation. */
        uint64_t class_gen __attribute__((aligned(128)));
        unsigned nslots_live __attribute__((aligned(128))); /* slots that ever had a thread */
        unsigned nblocked; /* workers marked blocked now (atomic) */
        int monitor_idle;  /* 1 while the monitor sleeps for lack of running workers */
        bool monitor_running;
        pthread_mutex_t spare_lock; /* the monitor starting spares vs a spare leaving */
        pthread_t monitor;
        uint64_t stalls; /* stats (atomic) */
        uint64_t rescues;
};

typedef struct GroupParams {
        const SchedGroupConfig *cfg;
        int node;              /* -1 = none */
        const cpu_set_t *cpus; /* NULL = no affinity */
        bool pin_workers;
        bool bind;
        bool local_queues;
        const SchedClassConfig *classes; /* NULL: one class */
        unsigned nclasses;
        const SchedControl *control; /* NULL: defaults */
} GroupParams;
/* group_alloc - allocate a group without threads; group_start - start its workers. */
int group_alloc(SchedulingGroup **ret, const GroupParams *p);
int group_start(SchedulingGroup *g);
/* group_stop - stop and join the workers; group_release - the reactor and memory. A
 * Scheduler stops every group before releasing any: workers touch other groups. */
void group_stop(SchedulingGroup *g);
void group_release(SchedulingGroup *g);
/* group_wake - after a push to the shared queue of a fiber woken or started from
 * outside the group: claim a spinner (it pops at its next pause), else wake the lowest
 * sleeper, else a sleeper of a same-node group that steals from this one.
 * group_wake_idle - after a local push, or a shared push of a fiber spawned by one of the
 * group's own: wake a sleeper only when nobody spins (a spinner polls the queues once a
 * round by itself), else (all busy) a sleeping worker of a same-node group that steals
 * from this one.
 * group_wake_sleeper - wake @g's lowest sleeping worker; false when none sleeps.
 * Context: any. */
void group_wake(SchedulingGroup *g);
void group_wake_idle(SchedulingGroup *g);
/* group_shared_queued - the fibers waiting in @g's shared run queue (or queues, one per
 * job class) now: an estimate, exact when nobody pushes or pops. Context: any. */
size_t group_shared_queued(SchedulingGroup *g);
bool group_wake_sleeper(SchedulingGroup *g);
/* alive_flush - add the exits @w has counted (exits_pending) to its group's released
 * count. A worker counts the exits of its group's fibers and adds them in one atomic
 * add per ALIVE_EXIT_BATCH and when it goes idle, so neither the creator's line
 * (admitted) nor the released one moves at every exit. admitted - released never
 * counts fewer fibers than exist; it counts at most ALIVE_EXIT_BATCH - 1 more per
 * busy worker, which a creation refused on the fast check (fiber_admit()) and
 * sched_group_stats() take off again by reading released, every worker's pending
 * count, then admitted: a snapshot that never reports a live fiber as gone, so the
 * max_fibers bound (which the run queue's capacity relies on) holds and a live count
 * of 0 means none was alive. Context: @w's thread. */
#define ALIVE_EXIT_BATCH 32
void alive_flush(Worker *w);
/* group_ended - the first half of a live-count snapshot of @g: released (also stored
 * in *@released when not NULL) plus every worker's pending exits, read in that order
 * (acquire), since a flush zeroes its worker's count before it adds to released: no
 * exit is counted twice. Read admitted after it (it then holds every creation the
 * result refunded or ended): admitted - ended never counts a live fiber as gone, and
 * each load's acquire makes what the ended fibers did visible. Context: any. */
static inline uint64_t group_ended(const SchedulingGroup *g, uint64_t *released)
{
        uint64_t ended = __atomic_load_n(&g->released, __ATOMIC_ACQUIRE);
        unsigned slots = __atomic_load_n(&g->nslots_live, __ATOMIC_ACQUIRE);

        if (released)
                *released = ended;
        for (unsigned i = 0; i < slots; i++)
                ended += __atomic_load_n(&g->workers[i].exits_pending, __ATOMIC_ACQUIRE);
        return ended;
}

/* ------------------------------------------------------------------ class.c ------- */

/* class_init - @g's classes from @cfg (NULL: "default", 100 shares), run queues of
 * @cap cells for all but class 0 (which is g->runq). Return: 0, -EINVAL, -ENOMEM.
 * class_term - free them. Context: group construction and destruction. */
int class_init(SchedulingGroup *g, const SchedClassConfig *cfg, unsigned n, size_t cap);
void class_term(SchedulingGroup *g);
/* class_push - append @f to its class's queue; a class whose queue was empty inherits
 * the group's last vruntime (no banked credit). Context: any. */
void class_push(SchedulingGroup *g, Fiber *f);
/* class_pop_queued - class_pop() past its empty check. */
Fiber *class_pop_queued(SchedulingGroup *g, unsigned c);
/* class_empty - nothing of class @c queued at the load (a push may land right after).
 * class_pop - the oldest fiber of class @c, or NULL; the empty check inline (a worker
 * looks at its class's queue at most pops). Context: any. */
static inline bool class_empty(const SchedulingGroup *g, unsigned c)
{
        return !__atomic_load_n(&g->classes[c].queued, __ATOMIC_RELAXED);
}

static inline Fiber *class_pop(SchedulingGroup *g, unsigned c)
{
        return class_empty(g, c) ? NULL : class_pop_queued(g, c);
}
/* class_pick - the class to run next: the lowest vruntime among classes with queued
 * fibers, and @cur when @cur_local (its fibers wait in the worker's local queues).
 * Return: the class, or -1 when nothing is queued. Context: a worker of @g. */
int class_pick(SchedulingGroup *g, unsigned cur, bool cur_local);
/* class_pop_any - a fiber from the class class_pick() would choose (thieves, and
 * workers without local queues). Context: any. */
Fiber *class_pop_any(SchedulingGroup *g);
/* class_charge - @ticks of CPU run by a fiber of @f's class on @w: added to what @w
 * has not charged yet, and charged to the class (two atomic adds on the group's
 * shared counters) once that reaches CLASS_CHARGE_BATCH_NS, when the class changes, or
 * with @flush (the worker goes idle). So fibers that switch every few hundred ns cost
 * the shared counters one update per batch, and a pick sees another worker's time at
 * most one batch late, far below the task quota that shares are enforced at. Context:
 * @w's thread, at a switch. */
void class_charge(Worker *w, const Fiber *f, uint64_t ticks, bool flush);
/* class_account - a switch on @w from @cur to @next (either NULL: the idle loop) that
 * ends the running segment: reads the clock, charges the segment to @cur's class
 * (class_charge(), when @cur is of @w's group), and starts the next one. A segment
 * shorter than CLASS_SEGMENT_SHORT_NS may go on for CLASS_SEGMENT_SWITCHES switches
 * between fibers of one class without a clock read (account_switch() counts them down
 * in segment_left), so a class whose fibers switch every few ns pays one read per
 * CLASS_SEGMENT_SWITCHES switches, and a class whose fibers run long pays one a switch
 * (its time is charged at most one segment late). Context: @w's thread, at a switch. */
void class_account(Worker *w, const Fiber *cur, const Fiber *next);

/* ------------------------------------------------------------------ monitor.c ----- */

/* monitor_start / monitor_stop - the group's monitor thread (stall detector and rescue
 * of blocked workers); nothing when both are off. Context: group start / stop. */
int monitor_start(SchedulingGroup *g);
void monitor_stop(SchedulingGroup *g);
/* monitor_wake - a worker of @g starts running fibers: wake the monitor if it sleeps
 * for lack of running workers (one load when it does not). Context: @g's workers. */
static inline void monitor_wake(SchedulingGroup *g)
{
        int one = 1;

        if (!__atomic_load_n(&g->monitor_running, __ATOMIC_RELAXED))
                return;
        /* running was stored seq_cst just before, and this load is seq_cst too (Dekker
         * with the monitor's flag store and second look) */
        if (UNLIKELY(__atomic_load_n(&g->monitor_idle, __ATOMIC_SEQ_CST) == 1) &&
            __atomic_compare_exchange_n(&g->monitor_idle, &one, 0, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_RELAXED))
                syscall(SYS_futex, &g->monitor_idle, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
/* monitor_backtrace_handler_install - the signal a stall report sends to a worker.
 * Context: monitor_start(). */
void monitor_backtrace_handler_install(void);
/* worker_surplus - @w is a spare that no blocked worker needs now. Context: any. */
static inline bool worker_surplus(const Worker *w)
{
        const SchedulingGroup *g = w->group;
        return UNLIKELY(w->index >= g->nworkers) &&
               w->index - g->nworkers >= __atomic_load_n(&g->nblocked, __ATOMIC_ACQUIRE);
}
/* worker_unblock - @w's fiber switched out after the monitor marked it blocked: it is
 * a regular worker again, and the spare started for it becomes surplus (woken so it
 * parks). Context: @w's thread, at a switch. */
void worker_unblock(Worker *w);
/* worker_spare_park - a surplus spare waits in the reserve until it is needed again.
 * Return: true to go on as a worker; false when it lingered unneeded for long enough
 * and its thread should end (its state is EXITED then). Context: @w's thread, in its
 * idle loop, with its local queues flushed. */
bool worker_spare_park(Worker *w);

/* ------------------------------------------------------------------ ready.c ------- */

/* ready_push - make @f, woken, ready: its waker's runnext slot when that worker may run
 * it (local policy; on a shared queue of more than one worker, a fiber woken by a
 * running fiber of its group), else its group's shared run queue; then wake a worker
 * (flare's spinner-first, lowest-sleeper-next order). Context: any. */
void ready_push(Fiber *f);
/* ready_push_new - ready_push() for a fiber just created: runnext only under the local
 * policy, the shared queue otherwise. Context: any. */
void ready_push_new(Fiber *f);
/* ready_push_shared - append @f to @g's shared run queue, waking nobody. Context: any. */
void ready_push_shared(SchedulingGroup *g, Fiber *f);
/* ready_pop - the next fiber for worker @w: its local queue and the group's shared one
 * (local policy), or the shared one, and its yield list. Context: @w's thread. */
Fiber *ready_pop(Worker *w);
/* ready_yield - fiber_yield()'s pick: the fiber to run instead of @self, and where
 * @self goes. NULL: nothing else is ready (in a group with classes, @self's class
 * counts as ready, so NULL also means its class still has the lowest vruntime); @self
 * keeps running and *@action is untouched. Else *@action says where @self goes:
 *  - FIBER_ACT_NONE: it is already on @w's yield list (no atomic operation: the list
 *    is @w's alone and @w pops it only after the switch);
 *  - FIBER_ACT_YIELD: the shared queue after the switch, waking nobody (a sibling
 *    spins, or @self is another group's fiber, stolen);
 *  - FIBER_ACT_YIELD_WAKE: the shared queue after the switch, then a sleeping sibling
 *    woken: @self is of a class @w no longer serves (the pick moved @w on), or one
 *    yield in 64 at random so yielders spread over the workers (in a group of several
 *    workers, or one another group steals from).
 * Context: @w's thread, @self running on it; @w not a surplus spare (fiber_yield()
 * ends a blocked mark first, and sends a spare's yielder to the shared queue). */
Fiber *ready_yield(Worker *w, Fiber *self, int *action);
/* ready_flush - move everything only @w would run (yield list, runnext, deque) to the
 * shared queues and wake a worker for it. Context: @w's thread, in its idle loop. */
void ready_flush(Worker *w);

/* single-writer counter: a plain increment, published for relaxed readers */
static inline void counter_inc(uint64_t *c)
{
        __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ steal.c ------- */

/* steal_siblings - a fiber from a sibling's local queue or (after a while) runnext.
 * steal_remote - one idle round's try at other groups, paced by each victim's every_n.
 * steal_victims_now - a try at every victim group, unpaced: a worker about to sleep, so a
 *   fiber pushed while it was between paced tries does not wait for the next push.
 * steal_idle_acquire - one idle round: own queues, siblings' local queues, other groups.
 * Context: @w's thread. */
Fiber *steal_siblings(Worker *w);
Fiber *steal_remote(Worker *w);
Fiber *steal_victims_now(Worker *w);
Fiber *steal_idle_acquire(Worker *w);

/* ------------------------------------------------------------------ stack.c ------- */

/* Stacks (stack.c). A stack is named by its lowest byte; its guard lies below.
 * stack_alloc - a stack of @size bytes for a fiber of @g: from the calling worker's
 * cache, the group's warm pool, a released slot, or a new slot. Returns 0, or -ENOMEM
 * (out of memory, address space, or in mprotect mode memory maps; logged with the
 * cause). Context: any thread; does not yield.
 * stack_free - give back a stack of @g: to the worker's cache, or (@to_pool, or not on
 * one of @g's workers) the pool; beyond it, released in batches. Context: any thread.
 * stack_budget_reserve - in mprotect mode, reserve @g's 2 * max_fibers memory maps in
 * the process-wide budget: -ENOMEM (logged) when the group alone exceeds
 * vm.max_map_count, a warning when the process's groups together do. Context: group
 * construction. */
int stack_alloc(SchedulingGroup *g, size_t size, char **ret_lo);
void stack_free(SchedulingGroup *g, char *lo, size_t size, bool to_pool);
int stack_budget_reserve(SchedulingGroup *g);
int stack_cache_init(StackCache *c, unsigned cap);
void stack_cache_term(SchedulingGroup *g, StackCache *c);
/* stack_pool_init - after g->max_fibers, stack_size, node and bind are set; before
 * stack_budget_reserve(), whose reservation it would clear. */
int stack_pool_init(SchedulingGroup *g, unsigned nworkers, unsigned cache);
void stack_pool_term(SchedulingGroup *g);
int stack_overflow_handler_install(Worker *w);
void stack_overflow_handler_remove(Worker *w);
size_t page_size(void);

/* ------------------------------------------------------------------ waiter.c ------ */

/* waiter_prepare - set up @w for one blocking call of the calling fiber (or thread). */
void waiter_prepare(Waiter *w);
/* waiter_claim - win @w's token for @reason; only the winner may wake it. Context: any. */
bool waiter_claim(Waiter *w, int reason);
/* waiter_wake - make a claimed waiter run again. @w may be gone once it returns. */
void waiter_wake(Waiter *w);
/* waiter_block - park until claimed (signal), @deadline_ns (-ETIMEDOUT) or cancel
 * (-ECANCELED); returns the reason. The caller has registered @w where its wakers
 * look and released their lock. Context: any. */
int waiter_block(Waiter *w, uint64_t deadline_ns);

/* waiter_handoff_arrive - one of the two arrivals of the wake-up handshake (waiter.c):
 * the second makes @f ready. Inline: fiber_finish_switch() runs it after every park.
 * Context: the winning waker, or the code that runs first after @f's switch away. */
static inline void waiter_handoff_arrive(Fiber *f)
{
        if (__atomic_fetch_add(&f->handoff, 1, __ATOMIC_ACQ_REL) == 1)
                ready_push(f);
}

/* ------------------------------------------------------------------ io.c ---------- */

/* io_errno - errno of the calling thread, read through a call the compiler cannot
 * merge with an earlier one: glibc declares __errno_location() const, so after a
 * context switch to another thread a cached errno address would be the old thread's.
 * Call it right after the syscall, before anything that may switch. */
int io_errno(void);

/* ------------------------------------------------------------------ topology.c ---- */

/* numa_prefer_*: MPOL_PREFERRED for a range (moving pages already there) or for the
 * calling thread; no-ops without NUMA. Context: any. (They keep libnuma-like names, not
 * topology_, while stack.c, which calls numa_prefer_range, is being rewritten.) */
void numa_prefer_range(void *p, size_t len, int node);
void numa_prefer_node(int node);
/* topology_cpuset_format - "0-3,8" (or "any" for an empty set) into @buf. */
void topology_cpuset_format(const cpu_set_t *set, char *buf, size_t len);

/* ------------------------------------------------------------------ log.c --------- */

/* sched_log - a line at syslog @level to the sink set by sched_set_log(). Context: any;
 * not the hot path. */
void sched_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif /* FIBERD_RUNTIME_H */
