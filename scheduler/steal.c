/* SPDX-License-Identifier: MIT */
/*
 * steal.c — where a worker finds its next fiber: its local run queue and the group's
 * shared one, its siblings' local queues, and, at a limited rate, other groups.
 *
 * Local queues (SCHED_QUEUE_LOCAL; tRPC-Cpp Fiber's v2 policy, shared/seeds/001; Go's
 * per-P queue): a fiber spawned or yielding on a worker goes to that worker's ring,
 * without a wake-up fence, and an idle worker is woken only when nobody spins (the
 * spawning worker itself is busy and will get to it). Wake-ups from timers, events
 * and other threads still go to the shared queue, which a worker reads first on every
 * 8th pop so that they are not starved by a worker that keeps spawning (flare's
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

void group_push_local(Worker *w, Fiber *f, bool wake)
{
        SchedulingGroup *g = w->group;

        if (g->local_queues && f->group == g && localq_push(&w->local, f)) {
                if (wake)
                        group_wake_idle(g);
                return;
        }
        if (wake)
                sched_make_ready(f);
        else
                sched_requeue(f);
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
                if (f) {
                        count(&w->local_dequeues);
                        return f;
                }
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
                if (!v->every_n || round % v->every_n)
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
                        __atomic_fetch_add(&g->steals_in, 1, __ATOMIC_RELAXED);
                        __atomic_fetch_add(&v->group->steals_out, 1, __ATOMIC_RELAXED);
                        return f;
                }
        }
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
