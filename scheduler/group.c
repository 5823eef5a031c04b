/* SPDX-License-Identifier: MIT */
/*
 * group.c — a scheduling group: N worker pthreads sharing one run queue, and flare's
 * wake-up algorithm (shared/seeds/000 "pthread workers唤醒算法", seeds/003).
 *
 * Shared state: the bounded MPMC run queue, a spinning mask and a sleeping mask (one
 * bit per worker, so at most 64 workers) and a pending-wake-up flag; per worker, a
 * futex wait slot.
 *
 * A worker with nothing to run:
 *  1. pops the run queue;
 *  2. otherwise tries to become one of at most two spinners (CAS its bit into the
 *     spinning mask) and polls the queue for a short while; a spinner that sees the
 *     pending-wake-up flag claims it and wakes a sleeper to spin in its place; a
 *     spinner that gets work sets the flag (if fewer than two spin) instead of waking
 *     someone itself, because it now has real work to do;
 *  3. otherwise sets its bit in the sleeping mask, pops once more (a producer may
 *     have looked at the mask before the bit was set), and sleeps on its wait slot.
 * A producer pushes the fiber, then claims the lowest spinning worker (a CAS that
 * clears its bit: no syscall, the spinner will find the fiber), else the lowest
 * sleeping worker, whose wait slot it wakes. Preferring low-numbered workers keeps a
 * lightly loaded group on few, warm CPUs.
 *
 * Backpressure: a group holds at most max_fibers live fibers and max_fibers <= the run
 * queue's capacity, so making a fiber ready never finds the queue full; fiber_create()
 * returns -EAGAIN at the limit instead of waiting (flare retries and aborts after 5 s).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

#ifdef SCHED_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SCHED_TSAN
#include <sanitizer/tsan_interface.h>
#endif

#define MAX_SPINNERS 2
#define SPIN_ROUNDS 64      /* polls of the run queue per spin */
#define PAUSES_PER_ROUND 64 /* pause instructions between polls */

/* ------------------------------------------------------------------ wake-up ------- */

static bool wake_one_spinning_worker(SchedulingGroup *g)
{
        uint64_t mask;

        while ((mask = __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED))) {
                uint64_t bit = mask & -mask;
                if (__atomic_fetch_and(&g->spinning_mask, ~bit, __ATOMIC_ACQ_REL) & bit) {
                        __atomic_fetch_add(&g->spinner_handoffs, 1, __ATOMIC_RELAXED);
                        return true;
                }
                cpu_relax();
        }
        return false;
}

static bool wake_one_sleeping_worker(SchedulingGroup *g)
{
        uint64_t mask;

        while ((mask = __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED))) {
                uint64_t bit = mask & -mask;
                if (__atomic_fetch_and(&g->sleeping_mask, ~bit, __ATOMIC_ACQ_REL) & bit) {
                        wait_slot_wake(&g->slots[__builtin_ctzll(bit)]);
                        __atomic_fetch_add(&g->futex_wakeups, 1, __ATOMIC_RELAXED);
                        return true;
                }
                cpu_relax();
        }
        return false;
}

void group_wake(SchedulingGroup *g)
{
        /* A full barrier between the push and reading the masks, paired with the one
         * between setting a mask bit and re-polling the queue in the worker. */
        full_fence();
        if (wake_one_spinning_worker(g) || wake_one_sleeping_worker(g))
                return;
        /* Every worker of the group is busy: wake an idle worker of a same-node group
         * that steals from this one, so that an imbalance is noticed even when the
         * other group has gone to sleep. */
        for (unsigned i = 0; i < g->nthieves; i++)
                if (wake_one_sleeping_worker(g->thieves[i]))
                        return;
}

void group_wake_idle(SchedulingGroup *g)
{
        full_fence();
        if (__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED) || wake_one_sleeping_worker(g))
                return;
        /* Every worker of the group is busy and the fiber waits in a local deque:
         * a same-node thief that is neither spinning (it will look by itself) nor
         * busy can take it from there. */
        for (unsigned i = 0; i < g->nthieves; i++)
                if (!__atomic_load_n(&g->thieves[i]->spinning_mask, __ATOMIC_RELAXED) &&
                    wake_one_sleeping_worker(g->thieves[i]))
                        return;
}

/* ------------------------------------------------------------------ workers ------- */

static Fiber *spinning_acquire(Worker *w)
{
        SchedulingGroup *g = w->group;
        uint64_t me = 1ull << w->index;
        uint64_t spinning = __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED);
        Fiber *f = NULL;
        bool spin = false;

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

        for (int round = 0; round < SPIN_ROUNDS; round++) {
                if ((f = idle_acquire(w)))
                        break;
                if (!(__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED) & me))
                        break; /* a producer claimed us: the fiber is on its way */
                for (int i = 0; i < PAUSES_PER_ROUND; i++) {
                        if (__atomic_load_n(&g->pending_spinner_wakeup, __ATOMIC_RELAXED) &&
                            __atomic_exchange_n(&g->pending_spinner_wakeup, false,
                                                __ATOMIC_ACQ_REL)) {
                                wake_one_sleeping_worker(g);
                        } else {
                                cpu_relax();
                        }
                }
        }
        __atomic_fetch_and(&g->spinning_mask, ~me, __ATOMIC_ACQ_REL);
        if (f || (f = group_pop(w))) {
                /* Busy: ask another spinner to wake a replacement for us. */
                if (__builtin_popcountll(__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED)) <
                    MAX_SPINNERS)
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
        /* A producer may have read the mask before our bit was set. */
        if ((f = group_pop(w)) || (f = steal_siblings(w))) {
                if (!(__atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL) & me))
                        group_wake(g); /* its wake-up was meant for work */
                return f;
        }
        if (__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE)) {
                __atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL);
                return NULL;
        }
        wait_slot_wait(&g->slots[w->index]);
        __atomic_fetch_and(&g->sleeping_mask, ~me, __ATOMIC_ACQ_REL);
        return group_pop(w);
}

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

static void *worker_main(void *arg)
{
        Worker *w = arg;
        SchedulingGroup *g = w->group;
        char name[16];

        snprintf(name, sizeof(name), "%.9s-w%u", g->name, w->index);
        pthread_setname_np(pthread_self(), name);
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

        for (;;) {
                Fiber *f = idle_acquire(w);
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
        stack_overflow_handler_remove(w);
        worker_set_self(NULL);
        return NULL;
}

/* ------------------------------------------------------------------ lifecycle ----- */

static void group_destroy(SchedulingGroup *g)
{
        if (!g)
                return;
        for (unsigned i = 0; g->workers && i < g->nworkers; i++)
                stack_cache_term(g, &g->workers[i].stacks);
        stack_pool_term(g);
        free(g->workers);
        free(g->slots);
        runq_term(&g->runq);
        free(g);
}

int group_alloc(SchedulingGroup **ret, const GroupParams *p)
{
        static const SchedGroupConfig defaults;
        const SchedGroupConfig *cfg = p->cfg ? p->cfg : &defaults;
        SchedulingGroup *g;
        int r;

        unsigned nworkers = cfg->workers ? cfg->workers : 1;
        size_t cap = cfg->runq_capacity ? cfg->runq_capacity : 65536;
        size_t stack = cfg->stack_size ? cfg->stack_size : 128 * 1024;
        size_t max_fibers = cfg->max_fibers ? cfg->max_fibers : 16384;
        unsigned cache = cfg->stack_cache ? cfg->stack_cache : 64;

        if (nworkers > SCHED_MAX_WORKERS || cap < 2 || (cap & (cap - 1)) || stack % page_size() ||
            stack < 4 * page_size() || max_fibers > cap)
                return -EINVAL;

        g = aligned_alloc(128, (sizeof(*g) + 127) & ~(size_t)127);
        if (!g)
                return -ENOMEM;
        memset(g, 0, sizeof(*g));
        snprintf(g->name, sizeof(g->name), "%s", cfg->name ? cfg->name : "fiberd");
        g->nworkers = nworkers;
        g->stack_size = stack;
        g->max_fibers = max_fibers;
        g->node = p->node;
        if (p->cpus)
                g->cpus = *p->cpus;
        else
                CPU_ZERO(&g->cpus);
        g->pin_workers = p->pin_workers;
        g->bind = p->bind;
        g->local_queues = p->local_queues;
        r = stack_budget_reserve(g);
        if (r < 0)
                goto out_free;
        r = stack_pool_init(g, nworkers, cache);
        if (r < 0)
                goto out_free;
        r = runq_init(&g->runq, cap);
        if (r < 0)
                goto out_free;
        g->slots = aligned_alloc(128, sizeof(WaitSlot) * nworkers);
        g->workers = aligned_alloc(128, sizeof(Worker) * nworkers);
        if (!g->slots || !g->workers) {
                r = -ENOMEM;
                goto out_free;
        }
        memset(g->workers, 0, sizeof(Worker) * nworkers);
        for (unsigned i = 0; i < nworkers; i++) {
                Worker *w = &g->workers[i];
                wait_slot_init(&g->slots[i]);
                w->group = g;
                w->index = i;
                w->yield_rng = 0x9e3779b9u ^ (i + 1); /* xorshift32: any nonzero seed */
                r = stack_cache_init(&w->stacks, cache);
                if (r < 0)
                        goto out_free;
        }
        if (g->bind && g->node >= 0) {
                /* Group-owned memory on the group's node (pages already touched move). */
                numa_prefer_range(g->runq.cells, (g->runq.mask + 1) * sizeof(RunqCell), g->node);
                numa_prefer_range(g->workers, sizeof(Worker) * nworkers, g->node);
        }
        r = reactor_init(&g->reactor, g);
        if (r < 0)
                goto out_free;
        *ret = g;
        return 0;

out_free:
        group_destroy(g);
        return r;
}

int group_start(SchedulingGroup *g)
{
        for (; g->started < g->nworkers; g->started++) {
                int r = -pthread_create(&g->workers[g->started].thread, NULL, worker_main,
                                        &g->workers[g->started]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int sched_group_new(SchedulingGroup **ret, const SchedGroupConfig *cfg)
{
        GroupParams p = {.cfg = cfg, .node = -1};
        SchedulingGroup *g;
        int r;

        if (cfg && (unsigned)cfg->queue_policy > SCHED_QUEUE_LOCAL)
                return -EINVAL;
        p.local_queues = cfg && cfg->queue_policy == SCHED_QUEUE_LOCAL;

        r = group_alloc(&g, &p);
        if (r < 0)
                return r;
        r = group_start(g);
        if (r < 0) {
                sched_group_free(g);
                return r;
        }
        *ret = g;
        return 0;
}

void group_stop(SchedulingGroup *g)
{
        __atomic_store_n(&g->stopped, true, __ATOMIC_RELEASE);
        for (unsigned i = 0; i < g->nworkers; i++)
                wait_slot_wake_forever(&g->slots[i]);
        for (; g->started; g->started--)
                pthread_join(g->workers[g->started - 1].thread, NULL);
}

void group_release(SchedulingGroup *g)
{
        reactor_term(&g->reactor);
        group_destroy(g);
}

SchedulingGroup *sched_group_free(SchedulingGroup *g)
{
        if (!g)
                return NULL;
        group_stop(g);
        group_release(g);
        return NULL;
}

unsigned sched_group_workers(const SchedulingGroup *g)
{
        return g->nworkers;
}

void sched_group_stats(const SchedulingGroup *g, SchedGroupStats *ret)
{
        Histogram *hs[SCHED_MAX_WORKERS];
        SchedGroupStats s = {0};

        s.workers = g->nworkers;
        s.spinning = (unsigned)__builtin_popcountll(
                __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED));
        s.sleeping = (unsigned)__builtin_popcountll(
                __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED));
        s.fibers_created = __atomic_load_n(&g->created_outside, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < g->nworkers; i++) {
                Worker *w = &g->workers[i];
                s.fibers_created += __atomic_load_n(&w->created, __ATOMIC_RELAXED);
                s.fibers_finished += __atomic_load_n(&w->finished, __ATOMIC_RELAXED);
                s.context_switches += __atomic_load_n(&w->switches, __ATOMIC_RELAXED);
                s.local_dequeues += __atomic_load_n(&w->local_dequeues, __ATOMIC_RELAXED);
                s.shared_dequeues += __atomic_load_n(&w->shared_dequeues, __ATOMIC_RELAXED);
                s.runq_depth += localq_size(&w->local) +
                                __atomic_load_n(&w->yield_n, __ATOMIC_RELAXED) +
                                (__atomic_load_n(&w->next, __ATOMIC_RELAXED) != NULL);
                hs[i] = &w->latency;
        }
        s.fibers_alive = __atomic_load_n(&g->alive, __ATOMIC_RELAXED);
        s.spinner_handoffs = __atomic_load_n(&g->spinner_handoffs, __ATOMIC_RELAXED);
        s.futex_wakeups = __atomic_load_n(&g->futex_wakeups, __ATOMIC_RELAXED);
        s.runq_depth += runq_size(&g->runq);
        s.runq_full = __atomic_load_n(&g->runq_full, __ATOMIC_RELAXED);
        s.node = g->node;
        cpuset_format(&g->cpus, s.cpus, sizeof(s.cpus));
        s.steals_in = __atomic_load_n(&g->steals_in, __ATOMIC_RELAXED);
        s.steals_out = __atomic_load_n(&g->steals_out, __ATOMIC_RELAXED);
        histogram_summarize(hs, g->nworkers, &s.ready_to_run);
        *ret = s;
}

/* ------------------------------------------------------------------ logging ------- */

static SchedLogFn log_fn;

void sched_set_log(SchedLogFn fn)
{
        __atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

void sched_log(int level, const char *fmt, ...)
{
        SchedLogFn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
        char buf[512];
        va_list ap;

        if (!fn && level >= LOG_DEBUG)
                return; /* the default sink is for what an operator must see */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (fn)
                fn(level, buf);
        else
                fprintf(stderr, "<%d>sched: %s\n", level, buf);
}
