/* SPDX-License-Identifier: MIT */
/*
 * ready.c — where a ready fiber goes, and where its worker takes it from: making a
 * fiber ready (ready_push), the pick of a yield and where the yielder goes
 * (ready_yield), and a worker's next pick from its own queues (ready_pop). Taking from
 * other workers and other groups is steal.c.
 *
 * Local queues (SCHED_QUEUE_LOCAL; tRPC-Cpp Fiber's v2 policy, shared/seeds/001; Go's
 * per-P queue and runnext): a fiber made ready by code running on a worker of its
 * group (spawned, or woken by a post, an unlock, a join) goes to that worker's
 * runnext slot and runs as soon as the current fiber parks; the previous occupant
 * moves to the tail of the worker's deque. The owner takes the newest fiber from the
 * deque (work-first, as Cilk and Chase-Lev deques do), so a tree of fibers runs
 * depth-first and a skynet of a million leaves keeps a few hundred fibers (and warm
 * stacks) alive instead of a million. Every 64th pop the owner looks at its own
 * oldest: one that has waited over LOCAL_STARVE_NS (a time slice) runs before runnext
 * and the newest (at most one such per slice), so a chain of spawns cannot hold it
 * back forever. An idle worker is woken only when nobody spins, and only for a fiber a
 * sibling may take now: one alone in runnext wakes nobody (the monitor wakes a sibling
 * for it when the worker's fiber runs on instead of parking; in a group with neither
 * stall detector nor rescue there is no monitor, and it waits for that fiber's next
 * switch). Wake-ups from timers,
 * fds and other threads go to the shared queue, which a worker reads first on every
 * 8th pop so they are not starved (flare's acquire rounds).
 *
 * A fiber of another group made ready on a worker of a group that steals from it (a
 * stolen fiber spawning or waking) also goes to that worker's runnext, so a stolen
 * subtree runs depth-first on the thief instead of flowing back through its home
 * group's FIFO queue; a fiber created non-stealable always goes home.
 *
 * Shared queue (SCHED_QUEUE_SHARED; flare's one run queue per group, shared/seeds/000):
 * every spawn and every wake-up from a timer, an fd or another thread goes to the
 * group's queue, FIFO, where any worker takes it. With more than one worker, a fiber
 * woken by a running fiber of its group (a post, an unlock, a join: a hand-off) goes to
 * the waker's runnext slot instead, as above, and wakes nobody: the waker usually parks
 * at once and its worker runs the woken fiber on warm caches. Through the queue, a
 * spinning sibling took it first and every hand-off crossed cores (ping-pong 1.9x
 * slower). A sibling steals it after RUNNEXT_STEAL_NS, and the worker takes the queue
 * first on every 8th pop. A group of one worker has no slot: its queue stays one FIFO.
 *
 * Yield (both policies): a fiber that yields while no sibling spins goes to the tail
 * of its worker's yield list, a FIFO only that worker touches, so a yield costs no
 * atomic read-modify-write; the list is read after every queue (and first on every
 * 8th pop, so a stream of new work cannot starve it). With a sibling spinning, it goes
 * to the shared queue instead, where the spinner can take it. So does one yield in 64
 * (at random), waking a sleeping sibling, and this worker's next pop takes its own
 * yield list first to give the others a chance at it: CPU-bound fibers that yield
 * spread over the group's workers instead of staying where they first ran (not in a
 * group of one worker that no group steals from: nobody to spread to).
 *
 * Thresholds are in nanoseconds and compared in TSC ticks through the rate clock.c
 * measured at start-up (clock_ns_to_tsc()), so they hold on any TSC frequency.
 */
#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* A time slice: a fiber older than this in its worker's deque runs before runnext and
 * the newest (checked every 64th pop, once per slice). */
#define LOCAL_STARVE_NS (10 * NSEC_PER_MSEC)

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

static inline Fiber *shared_pop(Worker *w)
{
        SchedulingGroup *g = w->group;
        Fiber *f = g->nclasses > 1 ? class_pop(g, w->cls)
                   : w->yield_head ? runq_pop_glance(&g->runq)
                                   : runq_pop(&g->runq);

        if (f)
                counter_inc(&w->shared_dequeues);
        return f;
}

/* The oldest fiber of @w's deque has waited a time slice, and the last one taken that
 * way was a time slice ago: one rescue per slice, so a busy tree is not turned
 * breadth-first (its oldest fibers are its biggest subtrees, all of them old). */
static bool local_starving(Worker *w)
{
        uint64_t now = clock_tsc_now(), since = localq_oldest_since(&w->local);
        uint64_t local_starve_tsc = clock_ns_to_tsc(LOCAL_STARVE_NS);

        if (since == UINT64_MAX || now - since < local_starve_tsc ||
            now - w->rescued_tsc < local_starve_tsc)
                return false;
        w->rescued_tsc = now;
        return true;
}

/* A worker with a runnext slot: the shared queue first on every 8th pop (flare's
 * acquire rounds, so a chain of hand-offs cannot starve it), the deque's oldest when
 * it has waited a time slice (every 64th), then runnext, the deque (newest first), the
 * shared queue. On a shared queue the deque stays empty: a
 * displaced runnext fiber goes to the queue (ready_push()). */
static Fiber *local_pop(Worker *w, unsigned n)
{
        Fiber *f;

        if (n % 8 == 0 && (f = shared_pop(w)))
                return f;
        if (n % 64 == 32 && local_starving(w) && (f = localq_pop(&w->local))) {
                counter_inc(&w->local_dequeues);
                return f;
        }
        if (__atomic_load_n(&w->next, __ATOMIC_RELAXED) &&
            (f = __atomic_exchange_n(&w->next, NULL, __ATOMIC_ACQ_REL))) {
                counter_inc(&w->local_dequeues);
                return f;
        }
        if ((f = localq_pop_newest(&w->local))) {
                counter_inc(&w->local_dequeues);
                return f;
        }
        return shared_pop(w);
}

/* Whether @w's own lists hold fibers (all of class w->cls): its yield list, and with
 * local queues its runnext and deque. */
static inline bool own_nonempty(Worker *w)
{
        return w->yield_head ||
               (w->group->runnext &&
                (__atomic_load_n(&w->next, __ATOMIC_RELAXED) || localq_size(&w->local)));
}

/* Move @w's yield list to its fibers' shared queues, oldest first. Return: whether it
 * moved any. */
static bool yield_flush(Worker *w)
{
        Fiber *f;
        bool any = false;

        while ((f = yield_pop(w))) {
                ready_push_shared(f->group, f);
                any = true;
        }
        return any;
}

/* Move @w's yield list, runnext and deque to their classes' queues (oldest first), so
 * that a worker moving to another class, or a spare about to park, leaves nothing
 * behind that only it would run. */
static void own_flush(Worker *w)
{
        SchedulingGroup *g = w->group;
        Fiber *f;
        bool any = yield_flush(w);

        while ((f = localq_pop(&w->local))) {
                ready_push_shared(f->group, f);
                any = true;
        }
        if ((f = __atomic_exchange_n(&w->next, NULL, __ATOMIC_ACQ_REL))) {
                ready_push_shared(f->group, f);
                any = true;
        }
        if (any)
                group_wake(g);
}

/* @w's (a worker of @g) next fiber of the class it serves (of @g, without classes), pop number
 * @n: its queues, then its yield list, which goes first on every 8th pop and after a
 * rotation so that a stream of new work cannot starve it. */
static inline Fiber *own_pop(SchedulingGroup *g, Worker *w, unsigned n)
{
        Fiber *f;

        if (UNLIKELY(w->yield_head) && (n % 8 == 4 || w->yield_rotated)) {
                w->yield_rotated = false;
                return yield_pop(w);
        }
        if (g->runnext)
                f = local_pop(w, n);
        else if (w->yield_head &&
                 (g->nclasses == 1 ? runq_glance_empty(&g->runq) : class_empty(g, w->cls)))
                return yield_pop(w); /* every yield of a lone worker: the empty check of
                                      * shared_pop(), without the call */
        else
                f = shared_pop(w);
        return f ? f : yield_pop(w);
}

/* A group with classes: serve the class with the lowest vruntime (class.c). With
 * @cur_active (a fiber of class w->cls yields), that class counts as ready even when
 * its queues are empty, and NULL means "keep running the yielder". */
static Fiber *class_ready_pop(Worker *w, unsigned n, bool cur_active)
{
        SchedulingGroup *g = w->group;
        bool own = own_nonempty(w);
        int c = class_pick(g, w->cls, own || cur_active);
        Fiber *f;

        if (c < 0)
                return NULL;
        if ((unsigned)c == w->cls)
                return own_pop(g, w, n);
        if (own)
                own_flush(w);
        w->cls = (unsigned)c;
        f = shared_pop(w);
        return f ? f : class_pop_any(g);
}

static inline Fiber *pop_next(Worker *w)
{
        unsigned n = ++w->pops;

        if (w->group->nclasses > 1)
                return class_ready_pop(w, n, false);
        return own_pop(w->group, w, n);
}

Fiber *ready_pop(Worker *w)
{
        return pop_next(w);
}

void sched_handoff_yielders(void)
{
        Worker *w = worker_self();

        if (w && w->yield_head && yield_flush(w))
                group_wake(w->group);
}

void ready_flush(Worker *w)
{
        own_flush(w);
}

static inline Fiber *pop_yield(Worker *w, Fiber *self)
{
        SchedulingGroup *g = w->group;
        uint64_t gen;
        unsigned n;

        if (g->nclasses == 1 || self->group != g)
                return pop_next(w);
        /* acquire: a generation seen is a charge or an activation seen */
        gen = __atomic_load_n(&g->class_gen, __ATOMIC_ACQUIRE);
        n = ++w->pops;
        if (self->cls != w->cls) {
                /* a fiber of another class runs here (stolen, or runnext of a
                 * sibling): this worker serves its class from now on, and picks */
                if (own_nonempty(w))
                        own_flush(w);
                w->cls = self->cls;
        } else if (gen == w->class_gen_seen) {
                /* The pick can change only when a vruntime does (a charge) or a class
                 * gets fibers (an activation), and both move the group's generation:
                 * it stands until that moved since this worker's last pick. */
                return own_pop(g, w, n);
        }
        w->class_gen_seen = gen;
        return class_ready_pop(w, n, true);
}

void ready_push_shared(SchedulingGroup *g, Fiber *f)
{
        if (g->nclasses > 1) {
                class_push(g, f);
                return;
        }
        while (UNLIKELY(!runq_push(&g->runq, f)))
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

/* Whether @f, made ready on @w (@wake: woken, not spawned), goes to @w's runnext slot.
 * With local queues: a fiber of @w's group or of a group it steals from, spawned or
 * woken. On a shared queue of more than one worker: only a fiber of the group woken by
 * a running fiber, a hand-off whose waker is about to park; a spawn goes to the
 * shared queue, where the group's FIFO spreads new work (flare), and so do the
 * wake-ups of timers and fds the idle loop delivers, many at a time. */
static inline bool runs_next_here(Worker *w, const Fiber *f, bool wake)
{
        SchedulingGroup *g = f->group;

        if (!w->group->runnext || (g->nclasses > 1 && f->cls != w->cls) || worker_surplus(w))
                return false;
        if (!w->group->local_queues)
                return wake && w->group == g && w->current;
        return w->group == g || (!f->no_steal && is_thief_of(w->group, g));
}

static inline void ready_push_common(Fiber *f, bool wake)
{
        SchedulingGroup *g = f->group;
        Worker *w;

        /* when it was made ready: ready-to-run latency, and runnext's age */
        __atomic_store_n(&f->ready_tsc, clock_tsc_now(), __ATOMIC_RELAXED);
        if ((w = worker_self()) && runs_next_here(w, f, wake)) {
                /* Go's runnext: it runs next on this worker (its waker or creator is
                 * about to park, or busy); the previous occupant moves to the deque.
                 * On a thief of @f's group the same holds (a stolen fiber spawning
                 * or waking), so a stolen subtree stays there, depth-first; a fiber
                 * of a group this one does not steal from (a server group's, say)
                 * goes home. */
                uint64_t now = clock_tsc_now();
                __atomic_store_n(&w->next_since, now, __ATOMIC_RELAXED);
                Fiber *old = __atomic_exchange_n(&w->next, f, __ATOMIC_ACQ_REL);
                if (!old)
                        return;
                /* The displaced one waits in the deque, where a sibling may take it
                 * at once: wake an idle one. A fiber alone in runnext wakes nobody:
                 * a sibling could not take it for RUNNEXT_STEAL_NS, by which time the
                 * waker has usually parked and this worker runs it (a hand-off, where
                 * the wake-up cost more than the hand-off itself); when the waker
                 * keeps running instead, the monitor wakes a sibling to take it
                 * (monitor_scan()). */
                if (!w->group->local_queues || !localq_push(&w->local, old, now))
                        ready_push_shared(old->group, old);
                group_wake_idle(w->group);
                return;
        }
        ready_push_shared(g, f);
        /* A woken fiber, or one started from outside the group (a thread, another
         * group's fiber: the daemon's dispatcher starting a job), claims a spinner,
         * which pops it at its next pause: the hand-off is the latency. A fiber
         * spawned by a fiber of its own group does not: its creator runs on, so a
         * spinner finds it at its next round, and if it leaves more behind it wakes
         * a sleeper for them (worker.c; Go's wakep() does nothing while an M spins,
         * and its spinning M that finds work calls wakep()). Claimed per
         * spawn, a spinner faster than the creator took each fiber as it came, the
         * two cores trading the spinning mask, the queue's cell and tail and the
         * fiber for every one: create + latch 300-350 ns against 245-300 unclaimed
         * when a cache line's round trip between the two vCPUs costs 370 ns, the
         * same at 45 ns (docs/benchmarks.md, "Two regimes"). */
        if (wake || !w || w->group != g)
                group_wake(g);
        else
                group_wake_idle(g);
}

void ready_push(Fiber *f)
{
        ready_push_common(f, true);
}

void ready_push_new(Fiber *f)
{
        ready_push_common(f, false);
}

/* Whether this yield on @w goes to the shared queue for the siblings: 1 in 64 at
 * random (a counter would pick the same fiber of two that take turns every time, and
 * the other would never move), never in a group of one worker that no other group
 * steals from (nobody to spread to). */
static inline bool yield_rotates(Worker *w)
{
        if (UNLIKELY(w->group->nworkers == 1 && !w->group->nthieves))
                return false;
        w->yield_rng ^= w->yield_rng << 13;
        w->yield_rng ^= w->yield_rng >> 17;
        w->yield_rng ^= w->yield_rng << 5;
        return (w->yield_rng & 63) == 0;
}

/* Where @f, which yields on @w, goes: FIBER_ACT_NONE when it stays on @w's yield list
 * (appended here, before the switch: the list is @w's alone, and @w pops it only after
 * the switch has saved @f's context), else the shared push fiber_finish_switch() does
 * once @f's context is saved: FIBER_ACT_YIELD waking nobody (a sibling spins, or @f is
 * another group's), FIBER_ACT_YIELD_WAKE waking a sleeping sibling. @w is not a surplus
 * spare (fiber_yield() sends a spare's yielder to the shared queue itself). */
static inline int yield_place(Worker *w, Fiber *f)
{
        SchedulingGroup *g = f->group;

        if (w->group != g || __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED))
                return FIBER_ACT_YIELD;
        if (g->nclasses > 1 && f->cls != w->cls) {
                /* a fiber of a class this worker no longer serves (the pick at its
                 * yield moved the worker on) */
                return FIBER_ACT_YIELD_WAKE;
        }
        if (yield_rotates(w)) {
                /* This worker has more ready fibers than it can run: let a sleeping
                 * sibling take one. */
                w->yield_rotated = true; /* our next pop leaves it to the others */
                return FIBER_ACT_YIELD_WAKE;
        }
        f->yield_next = NULL;
        if (w->yield_tail)
                w->yield_tail->yield_next = f;
        else
                w->yield_head = f;
        w->yield_tail = f;
        __atomic_store_n(&w->yield_n, w->yield_n + 1, __ATOMIC_RELAXED);
        return FIBER_ACT_NONE;
}

Fiber *ready_yield(Worker *w, Fiber *self, int *action)
{
        Fiber *next = pop_yield(w, self);

        if (next)
                *action = yield_place(w, self);
        return next;
}
