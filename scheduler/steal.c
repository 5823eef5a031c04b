/* SPDX-License-Identifier: MIT */
/*
 * steal.c — where an idle worker finds work beyond its own queues: its siblings' local
 * queues and, at a limited rate, other groups (steal_idle_acquire() is one idle round:
 * own queues, siblings, other groups). Where a ready fiber goes in the first place is
 * ready.c.
 *
 * Siblings take the oldest fiber of a local deque (the biggest subtree of a spawning
 * tree), and a sibling's runnext once it has waited RUNNEXT_STEAL_NS (Go waits ~3 us
 * the same way): until then its owner is probably about to run it. On a shared queue of
 * more than one worker there are no deques, only the runnext slots of hand-offs.
 *
 * Stealing between groups (flare / tRPC-Cpp, seeds 000, 001, 003): an idle worker tries
 * each victim group every `every_n` idle rounds — same-node victims at steal_every_n
 * (default 16), other nodes only when enabled, at their own, rarer rate — taking from
 * its shared queue, then the oldest of each of its workers' local deques. A fiber
 * created non-stealable goes to the tail of its own group's shared queue and the thief
 * looks at the next one, past as many as were queued when the try began (a fixed bound
 * left a movable fiber behind more pinned ones than that unseen). A stolen fiber keeps its home group
 * (its stack, its accounting, the wake-ups from timers and fds); what it spawns or
 * wakes while on the thief stays there (ready.c). With every worker of a group busy, a
 * push wakes a sleeping worker of a same-node thief group (group.c); a thief about to
 * sleep looks at its victims once more, unpaced (steal_victims_now()), so that a push
 * made while it was between its paced tries and its sleeping bit is not left behind.
 * (A fiber spawned by a fiber of its own group wakes a thief's sleeper only when its
 * group has no spinner: the spinner that takes it wakes a sleeper of its own group if
 * it leaves work behind, and a thief finds the rest at its paced tries.)
 */
#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* How long a runnext fiber belongs to its worker alone. */
#define RUNNEXT_STEAL_NS (4 * NSEC_PER_USEC)

/* Take from the siblings' local queues, starting after our own index. */
Fiber *steal_siblings(Worker *w)
{
        SchedulingGroup *g = w->group;

        if (!g->runnext)
                return NULL;
        unsigned n = __atomic_load_n(&g->nslots_live, __ATOMIC_ACQUIRE); /* spares too */

        for (unsigned i = 1; i < n; i++) {
                Worker *sib = &g->workers[(w->index + i) % n];
                Fiber *f = localq_pop(&sib->local); /* empty on a shared queue */
                if (!f) {
                        /* Its runnext only once it has waited a while: the owner is
                         * probably about to run it (Go waits ~3 us the same way). The
                         * fiber is not touched before the CAS makes it ours: it may
                         * have run and gone meanwhile. */
                        f = __atomic_load_n(&sib->next, __ATOMIC_ACQUIRE);
                        if (!f ||
                            clock_tsc_now() - __atomic_load_n(&sib->next_since, __ATOMIC_RELAXED) <
                                    clock_ns_to_tsc(RUNNEXT_STEAL_NS))
                                continue;
                        if (!__atomic_compare_exchange_n(&sib->next, &f, NULL, false,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                                continue;
                }
                counter_inc(&w->local_dequeues);
                return f;
        }
        return NULL;
}

size_t group_shared_queued(SchedulingGroup *v)
{
        size_t n = 0;

        if (v->nclasses <= 1)
                return runq_size(&v->runq);
        for (unsigned i = 0; i < v->nclasses; i++)
                n += __atomic_load_n(&v->classes[i].queued, __ATOMIC_RELAXED);
        return n;
}

/* Take one stealable fiber from group @v: its shared queue, then the oldest fiber of
 * each worker's local deque (with a spawning tree, the biggest subtree). A
 * non-stealable one goes to the tail of its group's shared queue (still ready, still
 * its group's) and the thief looks further: past as many as were queued when it began
 * (and 8 more, for those arriving meanwhile), so a try that finds nothing has seen
 * every fiber that was waiting. */
static Fiber *steal_from(SchedulingGroup *v)
{
        unsigned source = 0;
        size_t skipped = 0, limit = group_shared_queued(v) + 8;

        Fiber *f;

        while (source <=
                       (v->local_queues ? __atomic_load_n(&v->nslots_live, __ATOMIC_ACQUIRE) : 0) &&
               skipped < limit) {
                f = source == 0 ? (v->nclasses > 1 ? class_pop_any(v) : runq_pop(&v->runq))
                                : localq_pop(&v->workers[source - 1].local);
                if (!f) {
                        source++;
                        continue;
                }
                if (!f->no_steal)
                        goto out;
                ready_push_shared(f->group, f);
                skipped++;
        }
        f = NULL;
out:
        /* A fiber put back may be the one its group's last worker looked for before it
         * went to sleep, in the moment the thief held it: wake that worker. */
        if (skipped)
                group_wake_idle(v);
        return f;
}

/* A try at other groups: every victim (@paced false), or each whose turn it is in this
 * idle round (every_n rounds, or right after a hit). */
static Fiber *steal_victims(Worker *w, bool paced)
{
        SchedulingGroup *g = w->group;
        unsigned round = paced ? ++w->idle_rounds : 0;

        for (unsigned i = 0; i < g->nvictims; i++) {
                struct Victim *v = &g->victims[i];
                /* Paced, except right after a hit: a victim that had one may well
                 * have more, and a thief that just ran a stolen fiber is idle now. */
                if (!v->every_n || (paced && round % v->every_n && !w->steal_hit))
                        continue;
                Fiber *f = steal_from(v->group);
                if (f) {
                        w->steal_hit = true;
                        __atomic_fetch_add(&g->steals_in, 1, __ATOMIC_RELAXED);
                        __atomic_fetch_add(&v->group->steals_out, 1, __ATOMIC_RELAXED);
                        return f;
                }
        }
        if (paced)
                w->steal_hit = false;
        return NULL;
}

Fiber *steal_remote(Worker *w)
{
        return steal_victims(w, true);
}

Fiber *steal_victims_now(Worker *w)
{
        return steal_victims(w, false);
}

Fiber *steal_idle_acquire(Worker *w)
{
        Fiber *f = ready_pop(w);
        if (!f)
                f = steal_siblings(w);
        if (!f)
                f = steal_remote(w);
        return f;
}
