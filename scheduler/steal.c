/* SPDX-License-Identifier: MIT */
/*
 * steal.c — where a worker finds its next fiber: its local run queue and the group's
 * shared one, its siblings' local queues, and, at a limited rate, other groups.
 *
 * Local queues (SCHED_QUEUE_LOCAL; tRPC-Cpp Fiber's v2 policy, shared/seeds/001; Go's
 * per-P queue and runnext): a fiber made ready by code running on a worker of its
 * group (spawned, or woken by a post, an unlock, a join) goes to that worker's
 * runnext slot and runs as soon as the current fiber parks; the previous occupant
 * moves to the worker's ring. A fiber that yields goes to the ring's tail. An idle
 * worker is woken only when nobody spins; idle siblings take from the ring, and from
 * runnext once it has waited a few microseconds. Spawning this way runs a tree of
 * fibers depth-first, so a skynet of a million leaves keeps few fibers (and stacks)
 * alive at once. Wake-ups from timers, fds and other threads go to the shared queue,
 * which a worker reads first on every 8th pop so they are not starved (flare's
 * acquire rounds).
 *
 * Stealing between groups (flare / tRPC-Cpp, seeds 000, 001, 003): an idle worker tries
 * each victim group's shared queue every `every_n` idle rounds — same-node victims at
 * steal_every_n (default 16), other nodes only when enabled, at their own, rarer rate.
 * A fiber created non-stealable is pushed back to the tail of its own group's queue
 * and the thief looks at the next one (at most 8 per try). A stolen fiber keeps
 * its home group: its wake-ups, timers and children go there.
 */
#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

/* ~4 us at 2.5 GHz: how long a runnext fiber belongs to its worker alone. */
#define RUNNEXT_STEAL_TICKS 10000

static inline void count(uint64_t *c)
{
        __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED); /* single writer: its worker */
}

Fiber *group_pop(Worker *w)
{
        SchedulingGroup *g = w->group;
        Fiber *f;

        if (!g->local_queues) {
                f = runq_pop(&g->runq);
                if (f)
                        count(&w->shared_dequeues);
                return f;
        }
        if (++w->pops % 8 == 0 && (f = runq_pop(&g->runq))) {
                count(&w->shared_dequeues);
                return f;
        }
        if (__atomic_load_n(&w->next, __ATOMIC_RELAXED) &&
            (f = __atomic_exchange_n(&w->next, NULL, __ATOMIC_ACQ_REL))) {
                count(&w->local_dequeues);
                return f;
        }
        if ((f = localq_pop(&w->local))) {
                count(&w->local_dequeues);
                return f;
        }
        if ((f = runq_pop(&g->runq))) {
                count(&w->shared_dequeues);
                return f;
        }
        return NULL;
}

static void push_shared(SchedulingGroup *g, Fiber *f)
{
        while (SCHED_UNLIKELY(!runq_push(&g->runq, f)))
                cpu_relax(); /* cannot happen: live fibers <= capacity */
}

void sched_make_ready(Fiber *f)
{
        SchedulingGroup *g = f->group;
        Worker *w;

        /* when it was made ready: ready-to-run latency, and runnext's age */
        __atomic_store_n(&f->ready_tsc, tsc_now(), __ATOMIC_RELAXED);
        if (g->local_queues && (w = worker_self()) && w->group == g) {
                /* Go's runnext: it runs next on this worker (its waker or creator is
                 * about to park, or busy); the previous occupant moves to the ring. */
                __atomic_store_n(&w->next_since, tsc_now(), __ATOMIC_RELAXED);
                Fiber *old = __atomic_exchange_n(&w->next, f, __ATOMIC_ACQ_REL);
                if (old && !localq_push(&w->local, old))
                        push_shared(g, old);
                group_wake_idle(g);
                return;
        }
        push_shared(g, f);
        group_wake(g);
}

void sched_requeue(Fiber *f)
{
        SchedulingGroup *g = f->group;
        Worker *w;

        if (g->local_queues && (w = worker_self()) && w->group == g && localq_push(&w->local, f))
                return;
        push_shared(g, f);
}

/* Take from the siblings' local queues, starting after our own index. */
Fiber *steal_siblings(Worker *w)
{
        SchedulingGroup *g = w->group;

        if (!g->local_queues)
                return NULL;
        for (unsigned i = 1; i < g->nworkers; i++) {
                Worker *sib = &g->workers[(w->index + i) % g->nworkers];
                Fiber *f = localq_pop(&sib->local);
                if (!f) {
                        /* Its runnext only once it has waited a while: the owner is
                         * probably about to run it (Go waits ~3 us the same way). The
                         * fiber is not touched before the CAS makes it ours: it may
                         * have run and gone meanwhile. */
                        f = __atomic_load_n(&sib->next, __ATOMIC_ACQUIRE);
                        if (!f || tsc_now() - __atomic_load_n(&sib->next_since, __ATOMIC_RELAXED) <
                                          RUNNEXT_STEAL_TICKS)
                                continue;
                        if (!__atomic_compare_exchange_n(&sib->next, &f, NULL, false,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                                continue;
                }
                count(&w->local_dequeues);
                return f;
        }
        return NULL;
}

/* One idle round's try at other groups, paced by each victim's every_n. */
Fiber *steal_remote(Worker *w)
{
        SchedulingGroup *g = w->group;
        unsigned round = ++w->idle_rounds;

        for (unsigned i = 0; i < g->nvictims; i++) {
                struct Victim *v = &g->victims[i];
                /* Paced, except right after a hit: a victim that had one may well
                 * have more, and a thief that just ran a stolen fiber is idle now. */
                if (!v->every_n || (round % v->every_n && !w->steal_hit))
                        continue;
                /* Look past a few non-stealable fibers (they go back to the tail of
                 * their own queue) before giving up on this victim. */
                for (int tries = 0; tries < 8; tries++) {
                        Fiber *f = runq_pop(&v->group->runq);
                        if (!f)
                                break;
                        if (f->no_steal) {
                                sched_requeue(f);
                                continue;
                        }
                        w->steal_hit = true;
                        __atomic_fetch_add(&g->steals_in, 1, __ATOMIC_RELAXED);
                        __atomic_fetch_add(&v->group->steals_out, 1, __ATOMIC_RELAXED);
                        return f;
                }
        }
        w->steal_hit = false;
        return NULL;
}

Fiber *idle_acquire(Worker *w)
{
        Fiber *f = group_pop(w);
        if (!f)
                f = steal_siblings(w);
        if (!f)
                f = steal_remote(w);
        return f;
}
