/* SPDX-License-Identifier: MIT */
/*
 * class.c — job classes with shares on an M:N group: seastar's CPU scheduler
 * (shared/seeds/002, reactor::run_some_tasks and task_queue) carried from one thread per
 * core to a group of workers.
 *
 * Each class is a run queue with shares. The time its fibers run (TSC ticks between
 * the switch that started a segment of its fibers on a worker and the one that ended
 * it: class_account()) is charged to the class, scaled by 2^32 / shares (seastar's
 * _reciprocal_shares_times_2_power_32, so charging is a multiply and a shift): the
 * class's vruntime. A worker takes its next fiber from the
 * class with the lowest vruntime among those with ready fibers, so under full load the
 * classes' CPU time follows their shares. A class whose queue goes from empty to
 * non-empty inherits the highest vruntime picked so far (seastar's _last_vruntime), so a
 * class that idled cannot bank credit and then starve the others.
 *
 * On M:N: the vruntimes and queue counts are shared by the group's workers (atomic
 * adds; only when a group has more than one class — with one, none of this runs). Each
 * worker picks on its own, so two workers may serve the same class at once; its
 * vruntime then grows twice as fast and the next picks go elsewhere.
 *
 * Local queues, runnext and stealing (README "CPU control"): a worker's runnext and
 * deque hold fibers of one class only, the class it serves (Worker.cls), so a spawn
 * tree still runs depth-first on warm stacks, and its time is charged to that class.
 * A fiber made ready for another class goes to its class's queue. When the pick moves
 * a worker to another class, the fibers left in its runnext and deque go to their
 * class's queue first, so runnext never runs a class out of its order. A pick can only
 * change when a vruntime changes or a class gets fibers: both bump the group's
 * generation (class_gen), and a yield picks again only when the generation moved since
 * its worker's last pick (seastar picks once per task quota; this is finer, and a yield
 * between changes costs one load). A yielder of the class the worker still serves goes
 * to the worker's yield list as in a group without classes (no atomic operation, no
 * wake-up: ready.c), which holds that class's fibers only and is flushed to the class's
 * queue with the runnext and deque when the worker moves on. Thieves take from a sibling's
 * deque whatever class it holds (the time is charged to the fiber's own class), and
 * from another group's queues in that group's class order.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/runtime.h"

/* The most CPU time a worker runs before charging it to the class (class_charge()):
 * a twenty-fifth of the default task quota. */
#define CLASS_CHARGE_BATCH_NS (20 * NSEC_PER_USEC)

/* A segment shorter than this (fibers of one class switching often) goes on for
 * CLASS_SEGMENT_SWITCHES switches before the next clock read: class_account(). */
#define CLASS_SEGMENT_SHORT_NS (2 * NSEC_PER_USEC)
#define CLASS_SEGMENT_SWITCHES 32

static const SchedClassConfig default_class = {.name = "default", .shares = 100};

static uint64_t reciprocal(unsigned shares)
{
        return (UINT64_C(1) << 32) / shares;
}

static bool class_name_valid(const char *n)
{
        size_t len = n ? strlen(n) : 0;

        if (len == 0 || len > SCHED_CLASS_NAME_MAX)
                return false;
        for (const char *p = n; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                      (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
                        return false;
        return true;
}

int class_init(SchedulingGroup *g, const SchedClassConfig *cfg, unsigned n, size_t cap)
{
        int r;

        if (!cfg) {
                cfg = &default_class;
                n = 1;
        }
        if (n < 1 || n > SCHED_MAX_CLASSES)
                return -EINVAL;
        for (unsigned i = 0; i < n; i++) {
                if (!class_name_valid(cfg[i].name) || cfg[i].shares < SCHED_SHARES_MIN ||
                    cfg[i].shares > SCHED_SHARES_MAX)
                        return -EINVAL;
                for (unsigned j = 0; j < i; j++)
                        if (!strcmp(cfg[i].name, cfg[j].name))
                                return -EINVAL;
        }
        g->classes = aligned_alloc(128, sizeof(SchedClass) * n);
        if (!g->classes)
                return -ENOMEM;
        memset(g->classes, 0, sizeof(SchedClass) * n);
        g->nclasses = n;
        for (unsigned i = 0; i < n; i++) {
                SchedClass *c = &g->classes[i];
                snprintf(c->name, sizeof(c->name), "%s", cfg[i].name);
                c->shares = cfg[i].shares;
                c->recip_q32 = reciprocal(cfg[i].shares);
                if (i == 0) {
                        c->runq = &g->runq;
                        continue;
                }
                c->runq = aligned_alloc(128, sizeof(Runq));
                if (!c->runq)
                        return -ENOMEM;
                r = runq_init(c->runq, cap);
                if (r < 0) {
                        free(c->runq);
                        c->runq = NULL;
                        return r;
                }
        }
        return 0;
}

void class_term(SchedulingGroup *g)
{
        for (unsigned i = 1; g->classes && i < g->nclasses; i++) {
                if (g->classes[i].runq) {
                        runq_term(g->classes[i].runq);
                        free(g->classes[i].runq);
                }
        }
        free(g->classes);
        g->classes = NULL;
}

void class_push(SchedulingGroup *g, Fiber *f)
{
        SchedClass *c = &g->classes[f->cls];

        while (UNLIKELY(!runq_push(c->runq, f)))
                cpu_relax(); /* cannot happen: live fibers <= capacity */
        if (__atomic_fetch_add(&c->queued, 1, __ATOMIC_ACQ_REL) == 0) {
                /* Activated: no credit for the time it was idle (seastar's
                 * activate(): vruntime = max(vruntime, last_vruntime)). */
                uint64_t last = __atomic_load_n(&g->last_vruntime, __ATOMIC_RELAXED);
                uint64_t v = __atomic_load_n(&c->vruntime, __ATOMIC_RELAXED);
                while (v < last && !__atomic_compare_exchange_n(&c->vruntime, &v, last, true,
                                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                        ;
                /* release: a yield that sees the new generation sees it queued */
                __atomic_fetch_add(&g->class_gen, 1, __ATOMIC_RELEASE);
        }
}

Fiber *class_pop_queued(SchedulingGroup *g, unsigned c)
{
        SchedClass *k = &g->classes[c];
        Fiber *f = runq_pop(k->runq);

        if (f)
                __atomic_fetch_sub(&k->queued, 1, __ATOMIC_ACQ_REL);
        return f;
}

static void note_pick(SchedulingGroup *g, uint64_t v)
{
        uint64_t last = __atomic_load_n(&g->last_vruntime, __ATOMIC_RELAXED);
        while (last < v && !__atomic_compare_exchange_n(&g->last_vruntime, &last, v, true,
                                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
}

int class_pick(SchedulingGroup *g, unsigned cur, bool cur_local)
{
        int best = cur_local ? (int)cur : -1;
        uint64_t bestv = cur_local ? __atomic_load_n(&g->classes[cur].vruntime, __ATOMIC_RELAXED)
                                   : UINT64_MAX;

        for (unsigned i = 0; i < g->nclasses; i++) {
                SchedClass *c = &g->classes[i];
                uint64_t v;
                if (!__atomic_load_n(&c->queued, __ATOMIC_RELAXED))
                        continue;
                v = __atomic_load_n(&c->vruntime, __ATOMIC_RELAXED);
                if (v < bestv) {
                        bestv = v;
                        best = (int)i;
                }
        }
        if (best >= 0)
                note_pick(g, bestv);
        return best;
}

Fiber *class_pop_any(SchedulingGroup *g)
{
        /* Two tries: the class picked may be emptied by another worker meanwhile. */
        for (int tries = 0; tries < 2; tries++) {
                int c = class_pick(g, 0, false);
                Fiber *f;
                if (c < 0)
                        return NULL;
                if ((f = class_pop(g, (unsigned)c)))
                        return f;
        }
        return NULL;
}

/* Charge @w's batch to its class. */
static void charge_flush(Worker *w)
{
        SchedClass *c = &w->group->classes[w->charge_cls];
        uint64_t recip = __atomic_load_n(&c->recip_q32, __ATOMIC_RELAXED);
        uint64_t ticks = w->charge_tsc;

        w->charge_tsc = 0;
        __atomic_fetch_add(&c->runtime_tsc, ticks, __ATOMIC_RELAXED);
        __atomic_fetch_add(&c->vruntime, (uint64_t)(((unsigned __int128)ticks * recip) >> 32),
                           __ATOMIC_RELAXED);
        /* release: every yield on the group picks again, having seen the new vruntime */
        __atomic_fetch_add(&w->group->class_gen, 1, __ATOMIC_RELEASE);
}

void class_charge(Worker *w, const Fiber *f, uint64_t ticks, bool flush)
{
        if (w->charge_tsc && w->charge_cls != f->cls)
                charge_flush(w);
        w->charge_cls = f->cls;
        w->charge_tsc += ticks;
        if (flush || w->charge_tsc >= clock_ns_to_tsc(CLASS_CHARGE_BATCH_NS))
                charge_flush(w);
}

void class_account(Worker *w, const Fiber *cur, const Fiber *next)
{
        uint64_t now = clock_tsc_now();
        bool short_run = false;

        if (cur && w->run_tsc && cur->group == w->group) {
                uint64_t ticks = now - w->run_tsc;
                class_charge(w, cur, ticks, !next);
                short_run = ticks < clock_ns_to_tsc(CLASS_SEGMENT_SHORT_NS);
        }
        /* the next segment may go on without a clock read only if it was short and
         * the next fiber is one of this group's (whose class it records) */
        w->segment_left =
                short_run && next && next->group == w->group ? CLASS_SEGMENT_SWITCHES - 1 : 0;
        w->segment_cls = next ? next->cls : 0;
        w->run_tsc = next ? now : 0;
}

/* ------------------------------------------------------------------ public -------- */

int sched_group_class_stats(const SchedulingGroup *g, unsigned cls, SchedClassStats *ret)
{
        Histogram *hs[SCHED_MAX_WORKERS];
        const SchedClass *c;
        SchedClassStats s = {0};
        unsigned n = 0;
        uint64_t runtime = 0;

        if (cls >= g->nclasses)
                return -EINVAL;
        c = &g->classes[cls];
        snprintf(s.name, sizeof(s.name), "%s", c->name);
        s.shares = __atomic_load_n(&c->shares, __ATOMIC_RELAXED);
        if (g->nclasses == 1) {
                /* one class: no clock is read at switches, so no runtime is known */
                s.queued = runq_size(&g->runq);
        } else {
                runtime = __atomic_load_n(&c->runtime_tsc, __ATOMIC_RELAXED);
                s.queued = __atomic_load_n(&c->queued, __ATOMIC_RELAXED);
        }
        s.runtime_ns = clock_tsc_to_ns(runtime);
        /* in ns per 100 shares: a class of 100 shares that never idled has vruntime ==
         * runtime_ns; inheritance on activation moves it up */
        s.vruntime =
                g->nclasses == 1
                        ? s.runtime_ns * 100 / (s.shares ? s.shares : 1)
                        : clock_tsc_to_ns(__atomic_load_n(&c->vruntime, __ATOMIC_RELAXED)) * 100;
        for (unsigned i = 0; i < g->nworkers + g->nspare && n < SCHED_MAX_WORKERS; i++) {
                Worker *w = &g->workers[i];
                hs[n++] = w->class_latency ? &w->class_latency[cls] : &w->latency;
        }
        histogram_summarize(hs, n, &s.ready_to_run);
        *ret = s;
        return 0;
}
