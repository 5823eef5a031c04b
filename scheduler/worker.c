/* SPDX-License-Identifier: MIT */
/*
 * worker.c — a worker: one pthread of a scheduling group, its per-thread state, and the
 * idle loop it runs on its own stack when no fiber is ready.
 *
 * Per-worker state is composed from per-module parts (libdill's ctx.c), set up in one
 * order and torn down in reverse:
 *  - worker_init(), on the thread that creates the group, before the worker runs:
 *    identity (group, index), the wait slot, the yield list's random seed, the local
 *    run queue and the latency histogram (both zeroed), and the stack cache;
 *    worker_term() frees them in reverse, after the thread has been joined;
 *  - thread_init(), on the worker thread itself, first thing: the thread name, the
 *    thread pointer (worker_self()), the sanitizers' view of the thread's own stack
 *    (ASan bounds, the TSan fiber handle), the sigaltstack and stack-overflow handler,
 *    then CPU and NUMA binding; thread_term() undoes them in reverse before it returns.
 *
 * A worker with nothing to run (flare's acquire rounds, shared/seeds/000, 003):
 *  1. takes a fiber from its own queues, its siblings' local queues, other groups
 *     (steal_idle_acquire());
 *  2. otherwise tries to become one of at most two spinners (CAS its bit into the
 *     spinning mask) and polls for a short while — in a group that steals from no
 *     other, for long only while fewer than half of its busy siblings spin, else for a
 *     few rounds (Go's rule, runtime/proc.go findRunnable: idle workers beside sleeping
 *     siblings burned 0.5 CPU-seconds per second of a daemon serving 1,000 jobs/s), and
 *     each spin that found nothing halves the next (bounded spinning that adapts to
 *     load; a spin that finds work restores it); a spinner that sees the pending
 *     wake-up flag claims it and wakes a sleeper to spin in its place; a spinner that
 *     gets work and leaves more in the shared queue wakes a sleeper for it (in a group
 *     of more than two workers), unless someone still spins (a burst of spawns may all
 *     have counted on it: Go's resetspinning()), and one that leaves none sets the flag
 *     (if fewer than two spin) instead of waking someone itself, because it now has
 *     real work to do;
 *  3. otherwise sets its bit in the sleeping mask, looks once more, other groups
 *     included and unpaced (a producer may have read the mask before the bit was
 *     set), and sleeps: in the group's poll set if nobody is there (reactor.c, Go's
 *     netpoller: fds and timers then wake it directly), else on its wait slot.
 * The producer's side of this is in group.c: a fiber woken, or started from outside the
 * group, claims a spinner or wakes a sleeper (group_wake()); one spawned by a fiber of
 * the group, or pushed to a local queue, wakes a sleeper only when nobody spins, and a
 * spinner finds it at its next round (group_wake_idle()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

#ifdef SCHED_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SCHED_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#define MAX_SPINNERS 2
#define SPIN_ROUNDS 64      /* polls of the run queue per spin */
#define SPIN_ROUNDS_IDLE 4  /* the same when Go's rule says the group is idle */
#define PAUSES_PER_ROUND 64 /* pause instructions between polls */

/* The calling thread's Worker (runtime.h, worker_self()). */
__thread Worker *sched_tls_worker __attribute__((tls_model("initial-exec")));

#if !defined(__x86_64__)
__attribute__((noinline)) Worker *worker_self(void)
{
        Worker *w;
        __asm__ __volatile__("" ::: "memory");
        w = sched_tls_worker;
        return w;
}
#endif

void worker_set_self(Worker *w)
{
        sched_tls_worker = w;
}

/* ------------------------------------------------------------------ idle loop ----- */

static Fiber *spinning_acquire(Worker *w)
{
        SchedulingGroup *g = w->group;
        uint64_t me = 1ull << w->index;
        uint64_t spinning = __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED);
        Fiber *f = NULL;
        bool spin = false;
        int rounds = SPIN_ROUNDS;

        /* Go's rule (runtime/proc.go, findRunnable): spin long only while fewer than half
         * of the busy workers spin. A worker that goes idle while its siblings sleep or
         * spin already would burn a CPU the busy ones may need; it spins a few rounds
         * (about 10 us), enough for a partner that answers at once (ping-pong halved
         * without them), then sleeps. A group that steals from others keeps the long
         * spin: its spin rounds are when it steals (steal_remote() paces its tries by
         * idle rounds), and Go's count covers every P, not one group. */
        if (!g->nvictims) {
                unsigned spinners = (unsigned)__builtin_popcountll(spinning);
                unsigned sleepers = (unsigned)__builtin_popcountll(
                        __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED));
                unsigned others = g->nworkers - 1;
                unsigned busy = others > spinners + sleepers ? others - spinners - sleepers : 0;
                if (2 * spinners >= busy)
                        rounds = SPIN_ROUNDS_IDLE;
                /* Bounded spinning that adapts to load: each spin that found nothing
                 * halves the next one (down to one round); one that finds work
                 * restores it. At a low request rate every spin misses, so an idle
                 * transition costs a round, not 64. */
                rounds = MAX(1, rounds >> w->spin_misses);
        }
        while (__builtin_popcountll(spinning) < MAX_SPINNERS) {
                if (__atomic_compare_exchange_n(&g->spinning_mask, &spinning, spinning | me, true,
                                                __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                        spin = true;
                        break;
                }
        }
        if (!spin)
                return NULL;
        full_fence();

        for (int round = 0; round < rounds; round++) {
                if ((f = steal_idle_acquire(w)))
                        break;
                for (int i = 0; i < PAUSES_PER_ROUND; i++) {
                        /* Claimed by a producer: the fiber is in the queue now. Looked
                         * at every pause, not every round: a pause takes 15-20 ns on
                         * the Xeon of docs/benchmarks.md (140 cycles on Skylake), so a
                         * round is about 1 us, and a hand-off waited half of one. */
                        if (!(__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED) & me))
                                goto claimed;
                        if (__atomic_load_n(&g->pending_spinner_wakeup, __ATOMIC_RELAXED) &&
                            __atomic_exchange_n(&g->pending_spinner_wakeup, false,
                                                __ATOMIC_ACQ_REL)) {
                                group_wake_sleeper(g);
                        } else {
                                cpu_relax();
                        }
                }
        }
claimed:
        __atomic_fetch_and(&g->spinning_mask, ~me, __ATOMIC_ACQ_REL);
        if (!f)
                f = ready_pop(w);
        w->spin_misses = f ? 0 : (uint8_t)MIN(w->spin_misses + 1, 6);
        if (f) {
                bool woke = false;
                /* Work left behind in the shared queue while a worker sleeps: a fiber
                 * spawned by a fiber of this group did not claim us (ready.c), so a
                 * burst of them may all have counted on this one spinner, which takes
                 * one. Wake a sleeper for the rest unless someone still spins (Go's
                 * resetspinning() calls wakep() for the same reason). The fence pairs
                 * with the producer's between its push and its look at the spinning
                 * mask: it saw our bit, so we see its push. A worker that goes to sleep
                 * after our look at the sleeping mask looks at the queue itself. With two
                 * workers there is none to wake: the other is the one that spawned. */
                if (__atomic_load_n(&g->nslots_live, __ATOMIC_RELAXED) > 2 &&
                    __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED)) {
                        full_fence();
                        if (group_shared_queued(g) &&
                            !__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED))
                                woke = group_wake_sleeper(g);
                }
                /* Busy: ask another spinner to wake a replacement for us. */
                if (!woke && __builtin_popcountll(__atomic_load_n(&g->spinning_mask,
                                                                  __ATOMIC_RELAXED)) < MAX_SPINNERS)
                        __atomic_store_n(&g->pending_spinner_wakeup, true, __ATOMIC_RELEASE);
        }
        return f;
}

/* Sleep once on the wait slot. Return: a fiber, or NULL after a wake-up that brought
 * no work of this group's (a stop, or a hint to steal: the caller goes round again). */
static Fiber *wait_for_fiber(Worker *w)
{
        SchedulingGroup *g = w->group;
        uint64_t me = 1ull << w->index;
        Fiber *f;

        __atomic_fetch_or(&g->sleeping_mask, me, __ATOMIC_ACQ_REL);
        full_fence();
        /* A producer may have read the mask before our bit was set; a producer in a
         * group we steal from wakes us only if our bit was set (group_wake()), and
         * our paced tries may not have looked since its push. */
        if ((f = ready_pop(w)) || (f = steal_siblings(w)) || (f = steal_victims_now(w))) {
                if (!(__atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL) & me))
                        group_wake(g); /* its wake-up was meant for work */
                return f;
        }
        if (__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE)) {
                __atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL);
                return NULL;
        }
        /* In the poll set if nobody is (fds and timers wake this worker directly), else
         * on the futex. */
        if (!reactor_poll_wait(g, w))
                wait_slot_wait(&g->slots[w->index]);
        __atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL);
        return ready_pop(w);
}

/* ------------------------------------------------------------------ the thread ---- */

/* Apply the group's CPU set (or one CPU of it) and NUMA node to the calling worker. */
static void worker_bind(Worker *w)
{
        SchedulingGroup *g = w->group;
        cpu_set_t one;
        int r;

        if (!g->bind)
                return;
        if (CPU_COUNT(&g->cpus)) {
                const cpu_set_t *set = &g->cpus;
                if (g->pin_workers) {
                        int n = CPU_COUNT(&g->cpus), k = (int)(w->index % (unsigned)n), cpu;
                        for (cpu = 0; cpu < CPU_SETSIZE; cpu++)
                                if (CPU_ISSET(cpu, &g->cpus) && k-- == 0)
                                        break;
                        CPU_ZERO(&one);
                        CPU_SET(cpu, &one);
                        set = &one;
                }
                r = pthread_setaffinity_np(pthread_self(), sizeof(*set), set);
                if (r)
                        sched_log(LOG_WARNING, "worker %s/%u: cannot set CPU affinity: %s", g->name,
                                  w->index, strerror(r));
        }
        if (g->node >= 0)
                numa_prefer_node(g->node);
}

/* The parts of a worker that belong to its thread. Context: @w's own thread, first. */
static void thread_init(Worker *w)
{
        char name[16];

        snprintf(name, sizeof(name), "%.9s-w%u", w->group->name, w->index);
        pthread_setname_np(pthread_self(), name);
        __atomic_store_n(&w->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
        worker_set_self(w);
#ifdef SCHED_ASAN
        {
                pthread_attr_t a;
                pthread_getattr_np(pthread_self(), &a);
                pthread_attr_getstack(&a, &w->asan_stack_bottom, &w->asan_stack_size);
                pthread_attr_destroy(&a);
        }
#endif
#ifdef SCHED_TSAN
        w->tsan_fiber = __tsan_get_current_fiber();
#endif
        stack_overflow_handler_install(w);
        worker_bind(w);
}

/* thread_init() in reverse (the binding ends with the thread). Context: @w's thread. */
static void thread_term(Worker *w)
{
        stack_overflow_handler_remove(w);
        worker_set_self(NULL);
}

static void *worker_main(void *arg)
{
        Worker *w = arg;
        SchedulingGroup *g = w->group;

        thread_init(w);
        for (;;) {
                /* idle from here on: the exits it counted leave the alive count now */
                alive_flush(w);
                if (UNLIKELY(worker_surplus(w))) {
                        /* a spare no blocked worker needs now (monitor.c) */
                        ready_flush(w);
                        if (!worker_spare_park(w))
                                break;
                        if (__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE))
                                break;
                        continue;
                }
                Fiber *f = steal_idle_acquire(w);
                if (!f)
                        f = spinning_acquire(w);
                if (!f)
                        f = wait_for_fiber(w);
                if (f) {
                        w->idle_rounds = 0;
                        fiber_run(w, f);
                } else if (__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE)) {
                        break;
                }
        }
        thread_term(w);
        return NULL;
}

/* ------------------------------------------------------------------ lifecycle ----- */

int worker_init(Worker *w, SchedulingGroup *g, unsigned index)
{
        memset(w, 0, sizeof(*w)); /* also the local run queue and the histogram: empty */
        w->group = g;
        w->index = index;
        if (g->nclasses > 1) {
                w->class_latency = calloc(g->nclasses, sizeof(Histogram));
                if (!w->class_latency)
                        return -ENOMEM;
        }
        wait_slot_init(&g->slots[index]);
        w->yield_rng = 0x9e3779b9u ^ (index + 1); /* xorshift32: any nonzero seed */
        return stack_cache_init(&w->stacks, g->stack_cache);
}

void worker_term(Worker *w)
{
        if (!w->group)
                return; /* never initialised */
        free(w->class_latency);
        slab_cache_term(w);
        stack_cache_term(w->group, &w->stacks);
}

int worker_start(Worker *w)
{
        return -pthread_create(&w->thread, NULL, worker_main, w);
}

void worker_join(Worker *w)
{
        pthread_join(w->thread, NULL);
}
