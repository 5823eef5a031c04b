/* SPDX-License-Identifier: MIT */
/* Group sizing (flare's rules), NUMA binding decisions, layouts on injected two-node
 * machines, and placement of fibers started from pthreads. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

/* A machine of @nodes nodes with @per_node CPUs each, CPU ids 0.. in node order. */
static SchedTopology machine(unsigned nodes, unsigned per_node)
{
        SchedTopology t;
        memset(&t, 0, sizeof(t));
        for (unsigned n = 0; n < nodes; n++)
                for (unsigned c = 0; c < per_node; c++) {
                        t.cpu[t.ncpus] = (int)t.ncpus;
                        t.node[t.ncpus] = (int)n;
                        t.ncpus++;
                }
        t.nodes = nodes;
        return t;
}

static SchedPlan plan(SchedOptimizeFor p, unsigned nodes, unsigned per_node, unsigned conc)
{
        SchedTopology t = machine(nodes, per_node);
        SchedConfig c = {.optimize_for = p, .concurrency = conc};
        SchedPlan out;
        cr_assert_eq(sched_plan(&c, &t, &out), 0);
        return out;
}

#define EXPECT(pl, g, s, n)                                                                        \
        do {                                                                                       \
                SchedPlan p_ = (pl);                                                               \
                cr_assert_eq(p_.groups, (g), "groups %u, expected %u", p_.groups, (unsigned)(g));  \
                cr_assert_eq(p_.group_size, (s), "size %u, expected %u", p_.group_size,            \
                             (unsigned)(s));                                                       \
                cr_assert_eq(p_.numa, (n), "numa %d, expected %d", p_.numa, (int)(n));             \
        } while (0)

Test(topology, sizing_follows_the_profiles)
{
        /* small machines: one group */
        EXPECT(plan(SCHED_OPTIMIZE_NEUTRAL, 1, 2, 0), 1, 2, false);
        EXPECT(plan(SCHED_OPTIMIZE_IO_HEAVY, 1, 8, 0), 1, 8, false);
        /* neutral searches [16, 32): 64 CPUs on 2 nodes -> 4 x 16, bound */
        EXPECT(plan(SCHED_OPTIMIZE_NEUTRAL, 2, 32, 0), 4, 16, true);
        /* io [12, 24) and io-heavy [8, 16) on 48 CPUs, 2 nodes */
        EXPECT(plan(SCHED_OPTIMIZE_IO, 2, 24, 0), 4, 12, true);
        EXPECT(plan(SCHED_OPTIMIZE_IO_HEAVY, 2, 24, 0), 6, 8, true);
        /* compute-heavy: groups of up to 64, never NUMA */
        EXPECT(plan(SCHED_OPTIMIZE_COMPUTE_HEAVY, 2, 64, 0), 2, 64, false);
        EXPECT(plan(SCHED_OPTIMIZE_COMPUTE_HEAVY, 1, 90, 0), 2, 45, false);
        /* compute: per node once concurrency is at least half the CPUs */
        EXPECT(plan(SCHED_OPTIMIZE_COMPUTE, 2, 40, 0), 2, 40, true);
        EXPECT(plan(SCHED_OPTIMIZE_COMPUTE, 2, 40, 30), 1, 30, false);
        /* no NUMA-friendly size within 10% waste: UMA layout */
        EXPECT(plan(SCHED_OPTIMIZE_NEUTRAL, 3, 17, 0), 3, 17, true);
        /* io-heavy keeps every group in [8, 16) above its low end, covering every worker */
        for (unsigned conc = 9; conc <= 200; conc++) {
                SchedPlan p = plan(SCHED_OPTIMIZE_IO_HEAVY, 1, 256, conc);
                cr_assert(p.group_size >= 8 && p.group_size < 16, "size %u at %u", p.group_size,
                          conc);
                cr_assert_geq(p.groups * p.group_size, conc);
        }
}

Test(topology, explicit_layout_and_numa_switches)
{
        SchedTopology t = machine(2, 8);
        SchedConfig c = {.groups = 4, .group_size = 3};
        SchedPlan p;
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        EXPECT(p, 4, 3, true);
        c.numa = SCHED_NUMA_OFF;
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        cr_assert_not(p.numa);
        c = (SchedConfig){.groups = 3, .numa = SCHED_NUMA_AUTO};
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        EXPECT(p, 3, 6, false); /* 3 groups cannot split evenly over 2 nodes */
        c.numa = SCHED_NUMA_ON;
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        cr_assert(p.numa, "forced on");
        /* a fixed affinity turns automatic binding off (flare's rule) */
        t.fixed_affinity = true;
        c = (SchedConfig){.groups = 2};
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        cr_assert_not(p.numa);
        /* fewer groups than nodes: not bound */
        t = machine(4, 4);
        c = (SchedConfig){.groups = 2};
        cr_assert_eq(sched_plan(&c, &t, &p), 0);
        cr_assert_not(p.numa);
        c = (SchedConfig){.group_size = 65, .concurrency = 65};
        cr_assert_eq(sched_plan(&c, &t, &p), -EINVAL);
}

Test(topology, detect_matches_the_affinity_mask)
{
        SchedTopology t;
        cpu_set_t set;
        cr_assert_eq(sched_topology_detect(&t), 0);
        cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
        cr_assert_eq(t.ncpus, (unsigned)CPU_COUNT(&set));
        cr_assert_geq(t.nodes, 1);
        for (unsigned i = 0; i < t.ncpus; i++)
                cr_assert(CPU_ISSET(t.cpu[i], &set));
}

/* The real CPUs of this process, split into two injected nodes. */
static SchedTopology split_real_cpus(void)
{
        SchedTopology t;
        cr_assert_eq(sched_topology_detect(&t), 0);
        for (unsigned i = 0; i < t.ncpus; i++)
                t.node[i] = i < (t.ncpus + 1) / 2 ? 0 : 1;
        t.nodes = t.ncpus > 1 ? 2 : 1;
        t.fixed_affinity = false;
        return t;
}

Test(topology, two_node_layout_binds_groups_to_nodes)
{
        SchedTopology t = split_real_cpus();
        SchedConfig c = {.groups = 4, .group_size = 1, .topology = &t, .no_binding = true};
        Scheduler *s;
        char text[1024];

        if (t.ncpus < 2)
                cr_skip_test("needs two CPUs");
        cr_assert_eq(sched_new(&s, &c), 0);
        cr_assert_eq(sched_groups(s), 4);
        for (unsigned i = 0; i < 4; i++) {
                SchedGroupStats st;
                sched_group_stats(sched_group_at(s, i), &st);
                cr_assert_eq(st.node, i < 2 ? 0 : 1, "group %u on node %d", i, st.node);
                cr_assert_str_neq(st.cpus, "any");
        }
        sched_describe(s, text, sizeof(text));
        cr_assert(strstr(text, "group 0: node 0") != NULL, "%s", text);
        cr_assert(strstr(text, "group 3: node 1") != NULL, "%s", text);
        /* cross-node stealing off by default: each group steals only from its sibling */
        cr_assert(strstr(text, "steals from 1") != NULL, "%s", text);
        cr_assert(strstr(text, "steals from 3") == NULL, "%s", text);
        sched_free(s);
}

typedef struct Pick {
        Scheduler *s;
        int cpu;
        SchedulingGroup *picked[8];
} Pick;

static void *pick_from_cpu(void *arg)
{
        Pick *p = arg;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(p->cpu, &one);
        cr_assert_eq(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);
        for (int i = 0; i < 8; i++)
                p->picked[i] = sched_pick_group(p->s);
        return NULL;
}

Test(topology, pthread_fibers_go_to_the_callers_node_round_robin)
{
        SchedTopology t = split_real_cpus();
        SchedConfig c = {.groups = 4, .group_size = 1, .topology = &t, .no_binding = true};
        Pick p0 = {0}, p1 = {0};
        pthread_t a, b;

        if (t.ncpus < 2)
                cr_skip_test("needs two CPUs");
        cr_assert_eq(sched_new(&p0.s, &c), 0);
        p1.s = p0.s;
        p0.cpu = t.cpu[0];
        p1.cpu = t.cpu[t.ncpus - 1];
        pthread_create(&a, NULL, pick_from_cpu, &p0);
        pthread_join(a, NULL);
        pthread_create(&b, NULL, pick_from_cpu, &p1);
        pthread_join(b, NULL);
        int seen0[4] = {0}, seen1[4] = {0};
        for (int i = 0; i < 8; i++) {
                for (unsigned g = 0; g < 4; g++) {
                        seen0[g] += p0.picked[i] == sched_group_at(p0.s, g);
                        seen1[g] += p1.picked[i] == sched_group_at(p0.s, g);
                }
        }
        cr_assert_eq(seen0[2] + seen0[3], 0, "a node-0 caller got a node-1 group");
        cr_assert_eq(seen1[0] + seen1[1], 0, "a node-1 caller got a node-0 group");
        cr_assert(seen0[0] && seen0[1], "round robin over both node-0 groups");
        cr_assert(seen1[2] && seen1[3], "round robin over both node-1 groups");
        sched_free(p0.s);
}

typedef struct Placed {
        Scheduler *s;
        SchedulingGroup *parent, *child;
} Placed;

static void note_group(void *arg)
{
        *(SchedulingGroup **)arg = fiber_group(fiber_self());
}

static void spawn_with_scheduler(void *arg)
{
        Placed *p = arg;
        FiberAttr a = {.scheduler = p->s};
        Fiber *f;
        p->parent = fiber_group(fiber_self());
        cr_assert_eq(fiber_create(&f, &a, note_group, &p->child), 0);
        cr_assert_eq(fiber_join(f), 0);
}

Test(topology, scheduler_placement_from_fibers)
{
        SchedTopology t = split_real_cpus();
        SchedConfig c = {.groups = 2, .group_size = 1, .topology = &t, .no_binding = true};
        SchedulingGroup *lone = test_group(1);
        Placed from_lone = {0}, from_inside = {0};

        cr_assert_eq(sched_new(&from_lone.s, &c), 0);
        from_inside.s = from_lone.s;
        /* from a group outside the scheduler: placed in one of the scheduler's */
        run_in_fiber(lone, spawn_with_scheduler, &from_lone);
        cr_assert_eq(from_lone.parent, lone);
        cr_assert(from_lone.child == sched_group_at(from_lone.s, 0) ||
                  from_lone.child == sched_group_at(from_lone.s, 1));
        /* from inside: stays in the caller's group */
        run_in_fiber(sched_group_at(from_inside.s, 1), spawn_with_scheduler, &from_inside);
        cr_assert_eq(from_inside.parent, sched_group_at(from_inside.s, 1));
        cr_assert_eq(from_inside.child, from_inside.parent);
        sched_free(from_lone.s);
        sched_group_free(lone);
}

/* What a layout takes at start (budget.c): a worker per slot, a reactor, a monitor while
 * the stall detector or the rescue is on; spares apart; one run queue per class. */
Test(topology, budget_counts_what_a_layout_starts)
{
        SchedConfig c = {0};
        SchedPlan p = {.groups = 4, .group_size = 16};
        SchedClassConfig classes[3] = {{"default", 100}, {"batch", 50}, {"web", 200}};
        SchedBudget one, three;

        cr_assert_eq(sched_budget(&c, &p, &one), 0);
        cr_assert_eq(one.groups, 4);
        cr_assert_eq(one.threads, 4 * (16 + 2), "workers, reactor and monitor per group");
        cr_assert_eq(one.spare_threads, 4 * 16, "rescue on: a spare per worker by default");
        cr_assert_eq(one.fds, 4 * 3);
        cr_assert_gt(one.stack_bytes, 0);
        /* a run queue of 65536 cells per class and group: more classes, more memory */
        c.classes = classes;
        c.nclasses = 3;
        cr_assert_eq(sched_budget(&c, &p, &three), 0);
        cr_assert_geq(three.memory_bytes - one.memory_bytes, 4ull * 2 * 65536 * 16);
        /* stall detector and rescue off: no monitor, no spares */
        c.control.stall_threshold_ns = SCHED_FOREVER;
        c.control.rescue_after_ns = SCHED_FOREVER;
        cr_assert_eq(sched_budget(&c, &p, &three), 0);
        cr_assert_eq(three.threads, 4 * (16 + 1));
        cr_assert_eq(three.spare_threads, 0);
        /* groups of 64 leave no room for spares */
        p.group_size = 64;
        c.control.rescue_after_ns = 0;
        cr_assert_eq(sched_budget(&c, &p, &three), 0);
        cr_assert_eq(three.spare_threads, 0);
        p.group_size = 65;
        cr_assert_eq(sched_budget(&c, &p, &three), -EINVAL);
}

/* sched_check() passes what can start here, and refuses a layout no limit can hold,
 * naming why, without starting a thread. */
Test(topology, check_refuses_what_cannot_start)
{
        SchedTopology t = machine(1, 2);
        SchedConfig c = {.topology = &t};
        SchedBudget huge = {.threads = 1u << 30};
        SchedPlan p;
        char why[512];

        cr_assert_eq(sched_check(&c, NULL, NULL, &p, NULL, why, sizeof(why)), 0, "%s", why);
        cr_assert_eq(p.groups, 1);
        cr_assert_str_eq(why, "");
        /* a billion more threads than any kernel gives */
        cr_assert_eq(sched_check(&c, NULL, &huge, NULL, NULL, why, sizeof(why)), -EAGAIN);
        cr_assert(strstr(why, "threads"), "%s", why);
        /* no layout at all */
        c.group_size = 65;
        c.groups = 1;
        cr_assert_eq(sched_check(&c, NULL, NULL, NULL, NULL, why, sizeof(why)), -EINVAL);
        cr_assert(strstr(why, "no scheduling group layout"), "%s", why);
}
