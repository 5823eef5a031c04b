/* SPDX-License-Identifier: MIT */
/*
 * steal.c — where a worker finds its next fiber: its local run queue and the group's
 * shared one, its siblings' local queues, and, at a limited rate, other groups.
 *
 * Local queues (SCHED_QUEUE_LOCAL; tRPC-Cpp Fiber's v2 policy, shared/seeds/001; Go's
 * per-P queue and runnext): a fiber made ready by code running on a worker of its
 * group (spawned, or woken by a post, an unlock, a join) goes to that worker's
 * runnext slot and runs as soon as the current fiber parks; the previous occupant
 * moves to the tail of the worker's deque. The owner takes the newest fiber from the
 * deque (work-first, as Cilk and Chase-Lev deques do), so a tree of fibers runs
 * depth-first and a skynet of a million leaves keeps a few hundred fibers (and warm
 * stacks) alive instead of a million. Idle siblings take the oldest (the biggest
 * subtrees), and runnext once it has waited a few microseconds. Every 64th pop the
 * owner looks at its own oldest: one that has waited over ~10 ms runs before runnext
 * and the newest (at most one such per ~10 ms), so a chain of spawns cannot hold it
 * back forever. An idle worker is woken only when nobody spins. Wake-ups from timers,
 * fds and other threads go to the shared queue, which a worker reads first on every
 * 8th pop so they are not starved (flare's acquire rounds).
 *
 * Yield (both policies): a fiber that yields while no sibling spins goes to the tail
 * of its worker's yield list, a FIFO only that worker touches, so a yield costs no
 * atomic read-modify-write; the list is read after every queue (and first on every
 * 8th pop, so a stream of new work cannot starve it). With a sibling spinning, it goes
 * to the shared queue instead, where the spinner can take it. So does one yield in 64
 * (at random), waking a sleeping sibling, and this worker's next pop takes its own
 * yield list first to give the others a chance at it: CPU-bound fibers that yield
 * spread over the group's workers instead of staying where they first ran.
 *
 * Stealing between groups (flare / tRPC-Cpp, seeds 000, 001, 003): an idle worker tries
 * each victim group every `every_n` idle rounds — same-node victims at steal_every_n
 * (default 16), other nodes only when enabled, at their own, rarer rate — taking from
 * its shared queue, then the oldest of each of its workers' local deques. A fiber
 * created non-stealable goes to the tail of its own group's shared queue and the thief
 * looks at the next one (past 8 at most per try). A stolen fiber keeps its home group
 * (its stack, its accounting, the wake-ups from timers and fds), but the fibers of
 * that group it spawns or wakes while running on the thief go to the thief's runnext
 * like anything else made ready there, so a stolen subtree runs depth-first on the
 * thief instead of flowing back through its home group's FIFO queue. With every worker of a group busy,
 * a local push wakes a sleeping worker of a same-node thief group.
 */
#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

/* ~4 us at 2.5 GHz: how long a runnext fiber belongs to its worker alone. */
#define RUNNEXT_STEAL_TICKS 10000
/* ~10 ms at 2.5 GHz (a time slice): a fiber older than this in its worker's deque
 * runs before runnext and the newest (checked every 64th pop, once per slice). */
#define LOCAL_STARVE_TICKS 25000000

static inline void count(uint64_t *c)
{
        __atomic_store_n(c, *c + 1, __ATOMIC_RELAXED); /* single writer: its worker */
}

static Fiber *yield_pop(Worker *w)
{
        Fiber *f = w->yield_head;

        if (f) {
                w->yield_head = f->yield_next;
                if (!w->yield_head)
                        w->yield_tail = NULL;
                __atomic_store_n(&w->yield_n, w->yield_n - 1, __ATOMIC_RELAXED);
        }
        return f;
}

static Fiber *shared_pop(Worker *w)
{
        Fiber *f = runq_pop(&w->group->runq);
        if (f)
                count(&w->shared_dequeues);
        return f;
}

/* The oldest fiber of @w's deque has waited a time slice, and the last one taken that
 * way was a time slice ago: one rescue per slice, so a busy tree is not turned
 * breadth-first (its oldest fibers are its biggest subtrees, all of them old). */
static bool local_starving(Worker *w)
{
        uint64_t now = tsc_now(), since = localq_oldest_since(&w->local);

        if (since == UINT64_MAX || now - since < LOCAL_STARVE_TICKS ||
            now - w->rescued_tsc < LOCAL_STARVE_TICKS)
                return false;
        w->rescued_tsc = now;
        return true;
}

static Fiber *local_pop(Worker *w, unsigned n)
{
        Fiber *f;

        if (n % 8 == 0 && (f = shared_pop(w)))
                return f;
        if (n % 64 == 32 && local_starving(w) && (f = localq_pop(&w->local))) {
                count(&w->local_dequeues);
                return f;
        }
        if (__atomic_load_n(&w->next, __ATOMIC_RELAXED) &&
            (f = __atomic_exchange_n(&w->next, NULL, __ATOMIC_ACQ_REL))) {
                count(&w->local_dequeues);
                return f;
        }
        if ((f = localq_pop_newest(&w->local))) {
                count(&w->local_dequeues);
                return f;
        }
        return shared_pop(w);
}

Fiber *group_pop(Worker *w)
{
        unsigned n = ++w->pops;
        Fiber *f;

        if (SCHED_UNLIKELY(w->yield_head) && (n % 8 == 4 || w->yield_rotated)) {
                w->yield_rotated = false;
                return yield_pop(w);
        }
        f = w->group->local_queues ? local_pop(w, n) : shared_pop(w);
        return f ? f : yield_pop(w);
}

static void push_shared(SchedulingGroup *g, Fiber *f)
{
        while (SCHED_UNLIKELY(!runq_push(&g->runq, f)))
                cpu_relax(); /* cannot happen: live fibers <= capacity */
}

/* Whether @thief's workers may run fibers of @victim (stealing from it is on). */
static bool is_thief_of(const SchedulingGroup *thief, const SchedulingGroup *victim)
{
        for (unsigned i = 0; i < thief->nvictims; i++)
                if (thief->victims[i].group == victim && thief->victims[i].every_n)
                        return true;
        return false;
}

void sched_make_ready(Fiber *f)
{
        SchedulingGroup *g = f->group;
        Worker *w;

        /* when it was made ready: ready-to-run latency, and runnext's age */
        __atomic_store_n(&f->ready_tsc, tsc_now(), __ATOMIC_RELAXED);
        if ((w = worker_self()) && w->group->local_queues &&
            (w->group == g || (!f->no_steal && is_thief_of(w->group, g)))) {
                /* Go's runnext: it runs next on this worker (its waker or creator is
                 * about to park, or busy); the previous occupant moves to the deque.
                 * On a thief of @f's group the same holds (a stolen fiber spawning
                 * or waking), so a stolen subtree stays there, depth-first; a fiber
                 * of a group this one does not steal from (a server group's, say)
                 * goes home. */
                uint64_t now = tsc_now();
                __atomic_store_n(&w->next_since, now, __ATOMIC_RELAXED);
                Fiber *old = __atomic_exchange_n(&w->next, f, __ATOMIC_ACQ_REL);
                if (old && !localq_push(&w->local, old, now))
                        push_shared(old->group, old);
                group_wake_idle(w->group);
                return;
        }
        push_shared(g, f);
        group_wake(g);
}

void sched_requeue(Worker *w, Fiber *f)
{
        if (w->group != f->group || __atomic_load_n(&f->group->spinning_mask, __ATOMIC_RELAXED)) {
                push_shared(f->group, f);
                return;
        }
        /* 1 in 64 at random: a counter would pick the same fiber of two that take
         * turns every time, and the other would never move. */
        w->yield_rng ^= w->yield_rng << 13;
        w->yield_rng ^= w->yield_rng >> 17;
        w->yield_rng ^= w->yield_rng << 5;
        if ((w->yield_rng & 63) == 0) {
                /* This worker has more ready fibers than it can run: let a sleeping
                 * sibling take one. */
                push_shared(f->group, f);
                group_wake_idle(f->group);
                w->yield_rotated = true; /* our next pop leaves it to the others */
                return;
        }
        f->yield_next = NULL;
        if (w->yield_tail)
                w->yield_tail->yield_next = f;
        else
                w->yield_head = f;
        w->yield_tail = f;
        __atomic_store_n(&w->yield_n, w->yield_n + 1, __ATOMIC_RELAXED);
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

/* Take one stealable fiber from group @v: its shared queue, then the oldest fiber of
 * each worker's local deque (with a spawning tree, the biggest subtree). A
 * non-stealable one goes to the tail of its group's shared queue (still ready, still
 * its group's) and the thief looks further, past 8 of them at most. */
static Fiber *steal_from(SchedulingGroup *v)
{
        unsigned source = 0, skipped = 0;

        while (source <= (v->local_queues ? v->nworkers : 0) && skipped < 8) {
                Fiber *f = source == 0 ? runq_pop(&v->runq)
                                       : localq_pop(&v->workers[source - 1].local);
                if (!f) {
                        source++;
                        continue;
                }
                if (!f->no_steal)
                        return f;
                push_shared(f->group, f);
                skipped++;
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
                Fiber *f = steal_from(v->group);
                if (f) {
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
