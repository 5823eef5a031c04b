/* SPDX-License-Identifier: MIT */
/*
 * topology.c — what the machine looks like to this process, and how many scheduling
 * groups of which size to run on it.
 *
 * The CPUs are the process's affinity mask (sched_getaffinity), which the kernel has
 * already narrowed to the cgroup's cpuset, so a container limited to 4 CPUs of 64 sizes
 * itself for 4. Their nodes come from libnuma (numa_node_of_cpu).
 *
 * Sizing follows flare's scheduling parameters (shared/seeds/000; flare's
 * fiber/detail/scheduling_parameters.cc): for a workload profile, search a range of
 * group sizes for the one that wastes the fewest workers, preferring layouts whose
 * group count is a multiple of the node count so that no group spans two nodes.
 *   compute-heavy  groups of up to 64, NUMA off (balance above all)
 *   compute        up to 64 per group, per node when concurrency >= half the CPUs
 *   neutral        sizes in [16, 32)
 *   io             [12, 24)
 *   io-heavy       [8, 16)
 * Below the range's low end everything is one group.
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "scheduler/runtime.h"

#define MAX_GROUP_SIZE 64

static bool numa_ok(void)
{
        static int state; /* 0 unknown, 1 yes, -1 no */
        int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
        if (!s) {
                s = numa_available() >= 0 ? 1 : -1;
                __atomic_store_n(&state, s, __ATOMIC_RELAXED);
        }
        return s > 0;
}

int sched_topology_detect(SchedTopology *ret)
{
        cpu_set_t set;
        bool seen[SCHED_MAX_CPUS] = {false};
        long online = sysconf(_SC_NPROCESSORS_ONLN);

        if (sched_getaffinity(0, sizeof(set), &set) < 0)
                return -errno;
        memset(ret, 0, sizeof(*ret));
        for (int cpu = 0; cpu < CPU_SETSIZE && ret->ncpus < SCHED_MAX_CPUS; cpu++) {
                if (!CPU_ISSET(cpu, &set))
                        continue;
                int node = numa_ok() ? numa_node_of_cpu(cpu) : 0;
                if (node < 0 || node >= SCHED_MAX_CPUS)
                        node = 0;
                ret->cpu[ret->ncpus] = cpu;
                ret->node[ret->ncpus] = node;
                ret->ncpus++;
                if (!seen[node]) {
                        seen[node] = true;
                        ret->nodes++;
                }
        }
        ret->fixed_affinity = online > 0 && ret->ncpus < (unsigned)online;
        return 0;
}

typedef struct Layout {
        unsigned groups, size;
        bool numa_aware;
} Layout;

static Layout layout_compute_heavy(unsigned concurrency)
{
        unsigned groups = (concurrency + MAX_GROUP_SIZE - 1) / MAX_GROUP_SIZE;
        return (Layout){groups, (concurrency + groups - 1) / groups, false};
}

static Layout layout_compute(unsigned nodes, unsigned ncpus, unsigned concurrency)
{
        if (nodes < 2 || concurrency * 2 < ncpus)
                return layout_compute_heavy(concurrency);
        unsigned per_node = (concurrency + nodes - 1) / nodes;
        unsigned per_node_groups = (per_node + MAX_GROUP_SIZE - 1) / MAX_GROUP_SIZE;
        return (Layout){per_node_groups * nodes, (per_node + per_node_groups - 1) / per_node_groups,
                        true};
}

/* The size in [lo, hi) that leaves the fewest idle workers, NUMA-friendly first. */
static Layout layout_of_size(unsigned nodes, unsigned concurrency, unsigned lo, unsigned hi)
{
        unsigned best = 0, best_extra = ~0u;

        if (concurrency <= lo)
                return (Layout){1, concurrency, false};
        if (nodes > 1) {
                for (unsigned i = lo; i < hi; i++) {
                        unsigned groups = (concurrency + i - 1) / i,
                                 extra = groups * i - concurrency;
                        if (groups % nodes == 0 && extra < best_extra) {
                                best_extra = extra;
                                best = i;
                        }
                }
        }
        if (best && best_extra <= concurrency / 10)
                return (Layout){(concurrency + best - 1) / best, best, true};
        best_extra = ~0u;
        for (unsigned i = lo; i < hi; i++) {
                unsigned groups = (concurrency + i - 1) / i, extra = groups * i - concurrency;
                if (extra < best_extra) {
                        best_extra = extra;
                        best = i;
                }
        }
        return (Layout){(concurrency + best - 1) / best, best, false};
}

int sched_plan(const SchedConfig *cfg, const SchedTopology *topo, SchedPlan *ret)
{
        unsigned nodes = topo->nodes ? topo->nodes : 1;
        unsigned concurrency = cfg->concurrency ? cfg->concurrency : topo->ncpus;
        Layout l;

        if (!concurrency)
                return -EINVAL;
        if (cfg->groups && cfg->group_size) {
                l = (Layout){cfg->groups, cfg->group_size, cfg->groups % nodes == 0};
        } else if (cfg->groups) {
                l = (Layout){cfg->groups, (concurrency + cfg->groups - 1) / cfg->groups,
                             cfg->groups % nodes == 0};
        } else if (cfg->group_size) {
                l = (Layout){(concurrency + cfg->group_size - 1) / cfg->group_size, cfg->group_size,
                             false};
                l.numa_aware = l.groups % nodes == 0;
        } else {
                switch (cfg->optimize_for) {
                case SCHED_OPTIMIZE_COMPUTE_HEAVY:
                        l = layout_compute_heavy(concurrency);
                        break;
                case SCHED_OPTIMIZE_COMPUTE:
                        l = layout_compute(nodes, topo->ncpus, concurrency);
                        break;
                case SCHED_OPTIMIZE_IO:
                        l = layout_of_size(nodes, concurrency, 12, 24);
                        break;
                case SCHED_OPTIMIZE_IO_HEAVY:
                        l = layout_of_size(nodes, concurrency, 8, 16);
                        break;
                case SCHED_OPTIMIZE_NEUTRAL:
                default:
                        l = layout_of_size(nodes, concurrency, 16, 32);
                        break;
                }
        }
        if (!l.groups || !l.size || l.size > MAX_GROUP_SIZE)
                return -EINVAL;
        ret->groups = l.groups;
        ret->group_size = l.size;
        switch (cfg->numa) {
        case SCHED_NUMA_ON:
                ret->numa = true;
                break;
        case SCHED_NUMA_OFF:
                ret->numa = false;
                break;
        default:
                /* flare's rule: bind when nobody fixed our affinity and every node gets
                 * at least one group. */
                ret->numa = nodes > 1 && l.numa_aware && !topo->fixed_affinity &&
                            l.groups >= nodes && cfg->optimize_for != SCHED_OPTIMIZE_COMPUTE_HEAVY;
                break;
        }
        ret->queue_policy =
                cfg->queue_policy == SCHED_QUEUE_DEFAULT ? SCHED_QUEUE_LOCAL : cfg->queue_policy;
        return 0;
}

/* ------------------------------------------------------------------ helpers ------- */

void numa_prefer_range(void *p, size_t len, int node)
{
        size_t ps = page_size();
        uintptr_t lo = (uintptr_t)p & ~(ps - 1);
        uintptr_t hi = ((uintptr_t)p + len + ps - 1) & ~(ps - 1);
        unsigned long mask[16] = {0};

        if (!numa_ok() || node < 0 || node >= (int)(sizeof(mask) * 8))
                return;
        mask[node / (8 * sizeof(long))] |= 1ul << (node % (8 * sizeof(long)));
        /* Best effort: a failure leaves the kernel's default placement. */
        mbind((void *)lo, hi - lo, MPOL_PREFERRED, mask, sizeof(mask) * 8, MPOL_MF_MOVE);
}

void numa_prefer_node(int node)
{
        if (numa_ok() && node >= 0)
                numa_set_preferred(node);
}

void topology_cpuset_format(const cpu_set_t *set, char *buf, size_t len)
{
        size_t n = 0;
        int cpu = 0;

        if (!len)
                return;
        buf[0] = '\0';
        if (!CPU_COUNT(set)) {
                snprintf(buf, len, "any");
                return;
        }
        while (cpu < CPU_SETSIZE) {
                if (!CPU_ISSET(cpu, set)) {
                        cpu++;
                        continue;
                }
                int first = cpu;
                while (cpu + 1 < CPU_SETSIZE && CPU_ISSET(cpu + 1, set))
                        cpu++;
                int w = first == cpu
                                ? snprintf(buf + n, len - n, "%s%d", n ? "," : "", first)
                                : snprintf(buf + n, len - n, "%s%d-%d", n ? "," : "", first, cpu);
                if (w < 0 || (size_t)w >= len - n) {
                        buf[len - 1] = '\0';
                        return;
                }
                n += (size_t)w;
                cpu++;
        }
}
