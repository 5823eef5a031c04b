/* SPDX-License-Identifier: MIT */
/*
 * scheduler.c — a Scheduler: the scheduling groups of one process, laid out by
 * sched_plan(), bound to NUMA nodes, with stealing wired between them.
 *
 * Binding (flare, tRPC-Cpp; shared/seeds/000, 001): with NUMA on, group i belongs to
 * node i * nodes / groups; its workers may run on that node's CPUs only (or, with
 * pin_workers, each on one of them), prefer that node's memory, and the group's run
 * queue, workers and fresh stacks are placed there (mbind MPOL_PREFERRED). With NUMA
 * off, groups are not bound unless pin_workers asks for one CPU per worker.
 *
 * Stealing: every group lists the others as victims. Same-node victims (all of them,
 * with NUMA off) are tried every steal_every_n idle rounds; other nodes only when
 * cross_node_steal_every_n is set. flare's own set-up skips same-node victims by
 * mistake (a `return` where a `continue` belongs); tests/unit/test_steal.c shows that
 * ours steal. Same-node thieves are also woken when a group's own workers are all
 * busy, so a sleeping group notices the imbalance.
 *
 * Placement: a fiber started by a fiber stays in its group (fiber.c); one started from
 * a plain pthread goes to a group on the caller's node, round robin.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/runtime.h"

struct Scheduler {
        SchedPlan plan;
        unsigned ngroups;
        SchedulingGroup **groups;
        unsigned rr;                  /* round-robin counter for placement */
        int node_of_cpu[CPU_SETSIZE]; /* -1 where unknown */
};

static int node_ids(const SchedTopology *t, int *ids)
{
        int n = 0;
        for (unsigned i = 0; i < t->ncpus; i++) {
                int j;
                for (j = 0; j < n && ids[j] != t->node[i]; j++)
                        ;
                if (j == n)
                        ids[n++] = t->node[i];
        }
        /* ascending, so that group 0 is on the lowest node */
        for (int i = 1; i < n; i++)
                for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
                        int tmp = ids[j];
                        ids[j] = ids[j - 1];
                        ids[j - 1] = tmp;
                }
        return n;
}

static void wire_stealing(Scheduler *s, const SchedConfig *cfg)
{
        unsigned same = cfg->steal_every_n ? cfg->steal_every_n : 16;
        unsigned cross = cfg->cross_node_steal_every_n;

        for (unsigned i = 0; i < s->ngroups; i++) {
                SchedulingGroup *g = s->groups[i];
                /* nearest first: same node, then the others */
                for (int pass = 0; pass < 2; pass++) {
                        for (unsigned k = 1; k < s->ngroups; k++) {
                                SchedulingGroup *v = s->groups[(i + k) % s->ngroups];
                                bool same_node = !s->plan.numa || v->node == g->node;
                                unsigned every = same_node ? same : cross;
                                if (same_node != (pass == 0) || !every || every == UINT_MAX ||
                                    g->nvictims == ELEMENTSOF(g->victims))
                                        continue;
                                g->victims[g->nvictims++] = (struct Victim){v, every};
                                if (same_node && v->nthieves < ELEMENTSOF(v->thieves))
                                        v->thieves[v->nthieves++] = g;
                        }
                }
        }
}

int sched_new(Scheduler **ret, const SchedConfig *cfg)
{
        static const SchedConfig defaults;
        SchedTopology *detected = NULL;
        const SchedTopology *topo;
        Scheduler *s;
        int ids[SCHED_MAX_CPUS], nnodes, r;

        if (!cfg)
                cfg = &defaults;
        topo = cfg->topology;
        if (!topo) {
                detected = malloc(sizeof(*detected));
                if (!detected)
                        return -ENOMEM;
                r = sched_topology_detect(detected);
                if (r < 0)
                        goto out_topo;
                topo = detected;
        }
        s = calloc(1, sizeof(*s));
        if (!s) {
                r = -ENOMEM;
                goto out_topo;
        }
        r = sched_plan(cfg, topo, &s->plan);
        if (r < 0)
                goto out_free;
        s->groups = calloc(s->plan.groups, sizeof(*s->groups));
        if (!s->groups) {
                r = -ENOMEM;
                goto out_free;
        }
        for (int c = 0; c < CPU_SETSIZE; c++)
                s->node_of_cpu[c] = -1;
        for (unsigned i = 0; i < topo->ncpus; i++)
                if (topo->cpu[i] < CPU_SETSIZE)
                        s->node_of_cpu[topo->cpu[i]] = topo->node[i];
        nnodes = node_ids(topo, ids);

        for (unsigned i = 0; i < s->plan.groups; i++) {
                SchedGroupConfig gc = {.workers = s->plan.group_size,
                                       .runq_capacity = cfg->runq_capacity,
                                       .stack_size = cfg->stack_size,
                                       .max_fibers = cfg->max_fibers,
                                       .stack_cache = cfg->stack_cache,
                                       .name = cfg->name};
                GroupParams p = {.cfg = &gc,
                                 .node = -1,
                                 .pin_workers = cfg->pin_workers,
                                 .bind = !cfg->no_binding,
                                 .local_queues = s->plan.queue_policy == SCHED_QUEUE_LOCAL,
                                 .classes = cfg->classes,
                                 .nclasses = cfg->nclasses,
                                 .control = &cfg->control};
                cpu_set_t cpus;
                CPU_ZERO(&cpus);
                if (s->plan.numa && nnodes > 0) {
                        p.node = ids[(unsigned long)i * (unsigned)nnodes / s->plan.groups];
                        for (unsigned c = 0; c < topo->ncpus; c++)
                                if (topo->node[c] == p.node && topo->cpu[c] < CPU_SETSIZE)
                                        CPU_SET(topo->cpu[c], &cpus);
                } else if (cfg->pin_workers && topo->ncpus) {
                        /* a slice of the CPUs per group, wrapping when oversubscribed */
                        for (unsigned w = 0; w < s->plan.group_size; w++) {
                                int cpu = topo->cpu[(i * s->plan.group_size + w) % topo->ncpus];
                                if (cpu < CPU_SETSIZE)
                                        CPU_SET(cpu, &cpus);
                        }
                }
                p.cpus = &cpus;
                r = group_alloc(&s->groups[i], &p);
                if (r < 0)
                        goto out_groups;
                s->groups[i]->owner = s;
                s->ngroups++;
        }
        wire_stealing(s, cfg);
        for (unsigned i = 0; i < s->ngroups; i++) {
                r = group_start(s->groups[i]);
                if (r < 0)
                        goto out_groups;
        }
        {
                char line[1024];
                sched_describe(s, line, sizeof(line));
                sched_log(LOG_DEBUG,
                          "%u scheduling group(s) of %u worker(s), NUMA binding %s, %s queues:\n%s",
                          s->plan.groups, s->plan.group_size, s->plan.numa ? "on" : "off",
                          s->plan.queue_policy == SCHED_QUEUE_LOCAL ? "local" : "shared", line);
        }
        free(detected);
        *ret = s;
        return 0;

out_groups:
        for (unsigned i = 0; i < s->ngroups; i++)
                group_stop(s->groups[i]);
        for (unsigned i = 0; i < s->ngroups; i++)
                group_release(s->groups[i]);
out_free:
        free(s->groups);
        free(s);
out_topo:
        free(detected);
        return r;
}

Scheduler *sched_free(Scheduler *s)
{
        if (!s)
                return NULL;
        /* Stop every group before releasing any: a worker may be stealing from, or
         * waking, another group. */
        for (unsigned i = 0; i < s->ngroups; i++)
                group_stop(s->groups[i]);
        for (unsigned i = 0; i < s->ngroups; i++)
                group_release(s->groups[i]);
        free(s->groups);
        free(s);
        return NULL;
}

unsigned sched_groups(const Scheduler *s)
{
        return s->ngroups;
}

SchedulingGroup *sched_group_at(const Scheduler *s, unsigned i)
{
        return i < s->ngroups ? s->groups[i] : NULL;
}

void sched_get_plan(const Scheduler *s, SchedPlan *ret)
{
        *ret = s->plan;
}

SchedulingGroup *sched_pick_group(Scheduler *s)
{
        unsigned n = __atomic_fetch_add(&s->rr, 1, __ATOMIC_RELAXED);

        if (s->plan.numa) {
                int cpu = sched_getcpu();
                int node = cpu >= 0 && cpu < CPU_SETSIZE ? s->node_of_cpu[cpu] : -1;
                unsigned on_node = 0;
                for (unsigned i = 0; i < s->ngroups; i++)
                        on_node += s->groups[i]->node == node;
                if (on_node) {
                        unsigned k = n % on_node;
                        for (unsigned i = 0; i < s->ngroups; i++)
                                if (s->groups[i]->node == node && k-- == 0)
                                        return s->groups[i];
                }
        }
        return s->groups[n % s->ngroups];
}

size_t sched_describe(const Scheduler *s, char *buf, size_t len)
{
        size_t n = 0;

        if (len)
                buf[0] = '\0';
        for (unsigned i = 0; i < s->ngroups; i++) {
                const SchedulingGroup *g = s->groups[i];
                char cpus[64], node[16];
                int w;
                topology_cpuset_format(&g->cpus, cpus, sizeof(cpus));
                if (g->node >= 0)
                        snprintf(node, sizeof(node), "node %d", g->node);
                else
                        snprintf(node, sizeof(node), "no node");
                w = snprintf(n < len ? buf + n : NULL, n < len ? len - n : 0,
                             "%sgroup %u: %s, cpus %s%s, %u workers, %s queues, steals from %u",
                             i ? "\n" : "", i, node, cpus, g->pin_workers ? " (pinned)" : "",
                             g->nworkers, g->local_queues ? "local" : "shared", g->nvictims);
                if (w > 0)
                        n += (size_t)w;
        }
        return n;
}

/* ------------------------------------------------------------------ classes ------- */

unsigned sched_classes(const Scheduler *s)
{
        return s->ngroups ? s->groups[0]->nclasses : 1;
}

int sched_class_find(const Scheduler *s, const char *name)
{
        for (unsigned c = 0; s->ngroups && name && c < s->groups[0]->nclasses; c++)
                if (!strcmp(s->groups[0]->classes[c].name, name))
                        return (int)c;
        return -ENOENT;
}

const char *sched_class_name(const Scheduler *s, unsigned cls)
{
        return s->ngroups && cls < s->groups[0]->nclasses ? s->groups[0]->classes[cls].name : NULL;
}

int sched_class_set_shares(Scheduler *s, unsigned cls, unsigned shares)
{
        if (cls >= sched_classes(s) || shares < SCHED_SHARES_MIN || shares > SCHED_SHARES_MAX)
                return -EINVAL;
        for (unsigned i = 0; i < s->ngroups; i++) {
                SchedClass *c = &s->groups[i]->classes[cls];
                __atomic_store_n(&c->recip_q32, (UINT64_C(1) << 32) / shares, __ATOMIC_RELAXED);
                __atomic_store_n(&c->shares, shares, __ATOMIC_RELAXED);
        }
        return 0;
}

int sched_class_stats(const Scheduler *s, unsigned cls, SchedClassStats *ret)
{
        SchedClassStats sum = {0};
        uint64_t p50 = 0, p99 = 0;

        if (cls >= sched_classes(s))
                return -EINVAL;
        for (unsigned i = 0; i < s->ngroups; i++) {
                SchedClassStats one;
                sched_group_class_stats(s->groups[i], cls, &one);
                if (i == 0) {
                        memcpy(sum.name, one.name, sizeof(sum.name));
                        sum.shares = one.shares;
                }
                sum.runtime_ns += one.runtime_ns;
                sum.vruntime = MAX(sum.vruntime, one.vruntime);
                sum.queued += one.queued;
                sum.ready_to_run.count += one.ready_to_run.count;
                sum.ready_to_run.max_ns = MAX(sum.ready_to_run.max_ns, one.ready_to_run.max_ns);
                /* percentiles of the union are not sums: the worst group's, a bound */
                p50 = MAX(p50, one.ready_to_run.p50_ns);
                p99 = MAX(p99, one.ready_to_run.p99_ns);
        }
        sum.ready_to_run.p50_ns = p50;
        sum.ready_to_run.p99_ns = p99;
        *ret = sum;
        return 0;
}
