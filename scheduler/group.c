/* SPDX-License-Identifier: MIT */
/*
 * group.c — a scheduling group: N workers sharing one run queue, the group's life
 * (allocate, start, stop, release), and the producer's half of flare's wake-up
 * algorithm (shared/seeds/000 "pthread workers唤醒算法", seeds/003).
 *
 * Shared state: the bounded MPMC run queue, a spinning mask and a sleeping mask (one
 * bit per worker, so at most 64 workers) and a pending-wake-up flag; per worker, a
 * futex wait slot. The worker's half (spin, then sleep) is in worker.c.
 *
 * A producer pushes the fiber, then claims the lowest spinning worker (a CAS that
 * clears its bit: no syscall, the spinner will find the fiber), else the lowest
 * sleeping worker, whose wait slot it wakes (group_wake()). Preferring low-numbered
 * workers keeps a lightly loaded group on few, warm CPUs. A fiber spawned by a fiber of
 * its own group claims nobody while a worker spins (group_wake_idle(), ready.c): the
 * spinner finds it at its next round and, if it leaves fibers behind, wakes a sleeper
 * for them (worker.c), as Go's spinning M does.
 *
 * Backpressure: a group holds at most max_fibers live fibers and max_fibers <= the run
 * queue's capacity, so making a fiber ready never finds the queue full; fiber_create()
 * returns -EAGAIN at the limit instead of waiting (flare retries and aborts after 5 s).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/blockio.h"
#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

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

bool group_wake_sleeper(SchedulingGroup *g)
{
        uint64_t mask;

        int poller = reactor_poller(&g->reactor);
        uint64_t poller_bit = poller >= 0 ? 1ull << poller : 0;

        while ((mask = __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED))) {
                /* A worker asleep on its futex first: the one in the poll set stays
                 * there watching fds and timers (woken, it would wake a futex sleeper
                 * to take its place) */
                uint64_t pick = mask & ~poller_bit ? mask & ~poller_bit : mask;
                uint64_t bit = pick & -pick;
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
        if (wake_one_spinning_worker(g) || group_wake_sleeper(g))
                return;
        /* Every worker of the group is busy: wake an idle worker of a same-node group
         * that steals from this one, so that an imbalance is noticed even when the
         * other group has gone to sleep. */
        for (unsigned i = 0; i < g->nthieves; i++)
                if (group_wake_sleeper(g->thieves[i]))
                        return;
}

void group_wake_idle(SchedulingGroup *g)
{
        full_fence();
        if (__atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED) || group_wake_sleeper(g))
                return;
        /* Every worker of the group is busy and the fiber waits in a local deque:
         * a same-node thief that is neither spinning (it will look by itself) nor
         * busy can take it from there. */
        for (unsigned i = 0; i < g->nthieves; i++)
                if (!__atomic_load_n(&g->thieves[i]->spinning_mask, __ATOMIC_RELAXED) &&
                    group_wake_sleeper(g->thieves[i]))
                        return;
}

/* ------------------------------------------------------------------ lifecycle ----- */

static void group_destroy(SchedulingGroup *g)
{
        if (!g)
                return;
        for (unsigned i = g->nworkers + g->nspare; g->workers && i-- > 0;)
                worker_term(&g->workers[i]);
        stack_pool_term(g);
        free(g->workers);
        free(g->slots);
        class_term(g);
        runq_term(&g->runq);
        pthread_mutex_destroy(&g->spare_lock);
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
        static const SchedControl no_control;
        const SchedControl *ctl = p->control ? p->control : &no_control;
        unsigned nslots;

        if (nworkers > SCHED_MAX_WORKERS || cap < 2 || (cap & (cap - 1)) || stack % page_size() ||
            stack < 4 * page_size() || max_fibers > cap)
                return -EINVAL;
        clock_calibrate(); /* thresholds in TSC ticks need the rate before workers run */
        if (ctl->task_quota_ns == SCHED_FOREVER)
                return -EINVAL;

        g = aligned_alloc(128, (sizeof(*g) + 127) & ~(size_t)127);
        if (!g)
                return -ENOMEM;
        memset(g, 0, sizeof(*g));
        pthread_mutex_init(&g->spare_lock, NULL);
        snprintf(g->name, sizeof(g->name), "%s", cfg->name ? cfg->name : "fiberd");
        g->nworkers = nworkers;
        g->stack_size = stack;
        g->max_fibers = max_fibers;
        g->stack_cache = cache;
        g->node = p->node;
        if (p->cpus)
                g->cpus = *p->cpus;
        else
                CPU_ZERO(&g->cpus);
        g->pin_workers = p->pin_workers;
        g->bind = p->bind;
        g->local_queues = p->local_queues;
        g->runnext = p->local_queues || nworkers > 1; /* ready.c: hand-offs */
        /* CPU control (class.c, monitor.c) */
        g->quota_tsc =
                clock_ns_to_tsc(ctl->task_quota_ns ? ctl->task_quota_ns : 500 * NSEC_PER_USEC);
        uint64_t stall = ctl->stall_threshold_ns ? ctl->stall_threshold_ns : 100 * NSEC_PER_MSEC;
        uint64_t rescue = ctl->rescue_after_ns ? ctl->rescue_after_ns : 20 * NSEC_PER_MSEC;
        g->hooks = ctl->hook_blocking_calls;
        hook_init(); /* any group may run hooked fibers (FiberAttr.hook_blocking_calls) */
        g->stall_ns = stall == SCHED_FOREVER ? 0 : stall;
        g->rescue_ns = rescue == SCHED_FOREVER ? 0 : rescue;
        g->tick_ns = MIN(stall, rescue) / 4;
        g->tick_ns = MAX((uint64_t)NSEC_PER_MSEC, MIN(g->tick_ns, 50 * NSEC_PER_MSEC));
        if (g->rescue_ns) {
                g->nspare = ctl->max_spare_workers ? ctl->max_spare_workers : nworkers;
                g->nspare = MIN(g->nspare, SCHED_MAX_WORKERS - nworkers);
        }
        g->nslots_live = nworkers;
        nslots = nworkers + g->nspare;
        r = class_init(g, p->classes, p->classes ? p->nclasses : 1, cap);
        if (r < 0)
                goto out_free;
        r = stack_pool_init(g, nworkers, cache);
        if (r < 0)
                goto out_free;
        r = stack_budget_reserve(g);
        if (r < 0)
                goto out_free;
        r = runq_init(&g->runq, cap);
        if (r < 0)
                goto out_free;
        g->slots = aligned_alloc(128, sizeof(WaitSlot) * nslots);
        g->workers = aligned_alloc(128, sizeof(Worker) * nslots);
        if (g->workers) /* zeroed first: worker_term() skips a never-initialised Worker */
                memset(g->workers, 0, sizeof(Worker) * nslots);
        if (!g->slots || !g->workers) {
                r = -ENOMEM;
                goto out_free;
        }
        for (unsigned i = 0; i < nslots; i++) {
                r = worker_init(&g->workers[i], g, i);
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
                int r = worker_start(&g->workers[g->started]);
                if (r < 0)
                        return r;
        }
        return monitor_start(g);
}

int sched_group_new(SchedulingGroup **ret, const SchedGroupConfig *cfg)
{
        GroupParams p = {.cfg = cfg, .node = -1};
        SchedulingGroup *g;
        int r;

        if (cfg && (unsigned)cfg->queue_policy > SCHED_QUEUE_LOCAL)
                return -EINVAL;
        p.local_queues = cfg && cfg->queue_policy == SCHED_QUEUE_LOCAL;
        if (cfg) {
                p.classes = cfg->classes;
                p.nclasses = cfg->nclasses;
                p.control = &cfg->control;
        }

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
        monitor_stop(g); /* no spare is started after this */
        for (unsigned i = 0; i < g->nworkers + g->nspare; i++) {
                Worker *s = &g->workers[i];
                wait_slot_wake_forever(&g->slots[i]);
                if (i >= g->nworkers) {
                        __atomic_store_n(&s->spare_futex, 1, __ATOMIC_RELEASE);
                        syscall(SYS_futex, &s->spare_futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
                }
        }
        for (; g->started; g->started--)
                worker_join(&g->workers[g->started - 1]);
        for (unsigned i = g->nworkers; i < g->nworkers + g->nspare; i++) {
                Worker *s = &g->workers[i];
                if (__atomic_load_n(&s->thread_state, __ATOMIC_ACQUIRE) != WORKER_THREAD_NONE) {
                        worker_join(s);
                        s->thread_state = WORKER_THREAD_NONE;
                }
        }
}

void group_release(SchedulingGroup *g)
{
        blockio_quiesce(); /* no blocking-I/O thread is still inside a wake-up of ours */
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

bool sched_group_blocked(const SchedulingGroup *g)
{
        return __atomic_load_n(&g->nblocked, __ATOMIC_ACQUIRE) > 0;
}
