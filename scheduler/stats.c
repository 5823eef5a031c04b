/* SPDX-License-Identifier: MIT */
/*
 * stats.c — a group's statistics, gathered while its workers run: each counter has one
 * writer (its worker, or the group for group-wide ones) and is read here with relaxed
 * loads, so a snapshot is consistent per field, not across fields. Ready-to-run
 * latency comes from the workers' histograms (histogram.c).
 */
#include "scheduler/runtime.h"

void sched_group_stats(const SchedulingGroup *g, SchedGroupStats *ret)
{
        Histogram *hs[SCHED_MAX_WORKERS];
        SchedGroupStats s = {0};
        unsigned n = __atomic_load_n(&g->nslots_live, __ATOMIC_ACQUIRE); /* spares too */

        s.workers = g->nworkers;
        s.spinning = (unsigned)__builtin_popcountll(
                __atomic_load_n(&g->spinning_mask, __ATOMIC_RELAXED));
        s.sleeping = (unsigned)__builtin_popcountll(
                __atomic_load_n(&g->sleeping_mask, __ATOMIC_RELAXED));
        /* A snapshot (group_ended()): a caller that reads 0 had no live fiber when
         * admitted was read, and sees everything the fibers did (daemon shutdown frees
         * what they used), including their workers' finished counts, read after it
         * for that reason. */
        uint64_t ended = group_ended(g, NULL);
        uint64_t admitted = __atomic_load_n(&g->admitted, __ATOMIC_ACQUIRE);
        s.fibers_alive = admitted > ended ? admitted - ended : 0;
        s.fibers_created = __atomic_load_n(&g->created_outside, __ATOMIC_RELAXED);
        for (unsigned i = 0; i < n; i++) {
                Worker *w = &g->workers[i];
                if (i >= g->nworkers &&
                    __atomic_load_n(&w->thread_state, __ATOMIC_RELAXED) == WORKER_THREAD_RUNNING) {
                        s.threads++;
                        s.spares_running += __atomic_load_n(&w->running, __ATOMIC_RELAXED);
                }
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
        s.spinner_handoffs = __atomic_load_n(&g->spinner_handoffs, __ATOMIC_RELAXED);
        s.futex_wakeups = __atomic_load_n(&g->futex_wakeups, __ATOMIC_RELAXED);
        s.worker_poll_events = __atomic_load_n(&g->reactor.worker_events, __ATOMIC_RELAXED);
        s.reactor_poll_events = __atomic_load_n(&g->reactor.reactor_events, __ATOMIC_RELAXED);
        s.poll_sleeps = __atomic_load_n(&g->reactor.worker_sleeps, __ATOMIC_RELAXED);
        s.reactor_looks = __atomic_load_n(&g->reactor.reactor_looks, __ATOMIC_RELAXED);
        s.poll_worker = reactor_poller(&g->reactor);
        for (unsigned c = 0; c < g->nclasses; c++)
                s.runq_depth += runq_size(g->classes[c].runq);
        s.threads += g->nworkers;
        s.stalls = __atomic_load_n(&g->stalls, __ATOMIC_RELAXED);
        s.rescues = __atomic_load_n(&g->rescues, __ATOMIC_RELAXED);
        s.runq_full = __atomic_load_n(&g->runq_full, __ATOMIC_RELAXED);
        s.node = g->node;
        topology_cpuset_format(&g->cpus, s.cpus, sizeof(s.cpus));
        s.steals_in = __atomic_load_n(&g->steals_in, __ATOMIC_RELAXED);
        s.steals_out = __atomic_load_n(&g->steals_out, __ATOMIC_RELAXED);
        histogram_summarize(hs, n, &s.ready_to_run);
        *ret = s;
}

uint64_t sched_fibers_alive(const Scheduler *s)
{
        uint64_t ended = 0, admitted = 0;

        /* Every group's ended count first, then every group's admitted: a fiber that
         * created a child in one group and ended in another was counted ended only
         * after the child was admitted, so the child is in the admitted read later.
         * Group by group, a group read before the child was created and the parent's
         * group after it ended would show neither. */
        for (unsigned i = 0; i < sched_groups(s); i++)
                ended += group_ended(sched_group_at(s, i), NULL);
        for (unsigned i = 0; i < sched_groups(s); i++)
                admitted += __atomic_load_n(&sched_group_at(s, i)->admitted, __ATOMIC_ACQUIRE);
        return admitted > ended ? admitted - ended : 0;
}
