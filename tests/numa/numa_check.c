/* SPDX-License-Identifier: MIT */
/*
 * numa_check.c — run inside a real multi-node machine (tests/numa/vm.sh boots one under
 * qemu) to check what unit tests can only fake:
 *   1. each group's fibers run on its node's CPUs (sched_getcpu);
 *   2. their stacks live on its node (get_mempolicy MPOL_F_NODE|MPOL_F_ADDR on a page
 *      the fiber touched);
 *   3. cross-node stealing stays off by default, and happens when enabled.
 * Prints "check: ..." lines and, last, "NUMA-CHECK PASS" or "NUMA-CHECK FAIL".
 * Built statically, so the guest needs nothing but a kernel.
 */
#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"

static int failures;

#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                printf("check: %s: ", (cond) ? "ok" : "FAIL");                                     \
                printf(__VA_ARGS__);                                                               \
                printf("\n");                                                                      \
                fflush(stdout);                                                                    \
                if (!(cond))                                                                       \
                        failures++;                                                                \
        } while (0)

typedef struct Probe {
        int cpu;
        int stack_node;
        FiberLatch *done;
} Probe;

static void probe(void *arg)
{
        Probe *p = arg;
        volatile char page[8192];
        int node = -1;

        memset((char *)page, 1, sizeof(page)); /* fault the pages in, here */
        p->cpu = sched_getcpu();
        if (get_mempolicy(&node, NULL, 0, (void *)&page[4096], MPOL_F_NODE | MPOL_F_ADDR) < 0)
                node = -2;
        p->stack_node = node;
        fiber_latch_count_down(p->done);
}

static void check_binding(Scheduler *s)
{
        enum { PER_GROUP = 16 };
        unsigned groups = sched_groups(s);
        Probe *probes = calloc((size_t)groups * PER_GROUP, sizeof(*probes));
        FiberLatch done;

        fiber_latch_init(&done, (int64_t)groups * PER_GROUP);
        for (unsigned g = 0; g < groups; g++) {
                FiberAttr a = {.group = sched_group_at(s, g), .detached = true, .no_steal = true};
                for (unsigned i = 0; i < PER_GROUP; i++) {
                        Probe *p = &probes[g * PER_GROUP + i];
                        p->done = &done;
                        if (fiber_create(NULL, &a, probe, p) < 0)
                                CHECK(0, "fiber_create in group %u", g);
                }
        }
        if (fiber_latch_wait(&done, sched_deadline_after(60ull * 1000000000u)) < 0) {
                CHECK(0, "probes did not finish in 60 s");
                return;
        }
        for (unsigned g = 0; g < groups; g++) {
                SchedGroupStats st;
                int wrong_cpu = 0, wrong_mem = 0;
                sched_group_stats(sched_group_at(s, g), &st);
                for (unsigned i = 0; i < PER_GROUP; i++) {
                        Probe *p = &probes[g * PER_GROUP + i];
                        wrong_cpu += numa_node_of_cpu(p->cpu) != st.node;
                        wrong_mem += p->stack_node != st.node;
                }
                CHECK(st.node >= 0, "group %u is bound to node %d (cpus %s)", g, st.node, st.cpus);
                CHECK(!wrong_cpu, "group %u: %d/%d fibers ran off node %d", g, wrong_cpu, PER_GROUP,
                      st.node);
                CHECK(!wrong_mem, "group %u: %d/%d fiber stacks off node %d", g, wrong_mem,
                      PER_GROUP, st.node);
        }
        free(probes);
}

static int release;
static FiberEvent hog_running;

static void hog(void *arg)
{
        fiber_event_set(&hog_running);
        while (!__atomic_load_n(&release, __ATOMIC_ACQUIRE))
                ;
}

static void nothing(void *arg)
{
        fiber_latch_count_down(arg);
}

/* Hold group 0's only worker, queue work there, keep group 1 busy waking up; return
 * how many fibers group 1 stole within @rounds rounds. */
static uint64_t steals_while_hogged(Scheduler *s, int rounds)
{
        FiberAttr pin = {.group = sched_group_at(s, 0), .detached = true, .no_steal = true};
        FiberAttr a0 = {.group = sched_group_at(s, 0), .detached = true};
        FiberAttr a1 = {.group = sched_group_at(s, 1), .detached = true};
        FiberLatch queued, nudges;
        SchedGroupStats st;

        release = 0;
        fiber_event_init(&hog_running);
        fiber_create(NULL, &pin, hog, NULL);
        fiber_event_wait(&hog_running, SCHED_FOREVER);
        fiber_latch_init(&queued, 8);
        for (int i = 0; i < 8; i++)
                fiber_create(NULL, &a0, nothing, &queued);
        for (int r = 0; r < rounds; r++) {
                if (fiber_latch_wait(&queued, 0) == 0)
                        break;
                fiber_latch_init(&nudges, 1);
                fiber_create(NULL, &a1, nothing, &nudges);
                fiber_latch_wait(&nudges, SCHED_FOREVER);
                fiber_sleep_for(1000000);
        }
        sched_group_stats(sched_group_at(s, 1), &st);
        __atomic_store_n(&release, 1, __ATOMIC_RELEASE);
        fiber_latch_wait(&queued, SCHED_FOREVER);
        return st.steals_in;
}

int main(void)
{
        SchedConfig cfg = {.groups = 2, .group_size = 1, .numa = SCHED_NUMA_ON};
        Scheduler *s;
        SchedTopology t;
        char text[1024];

        if (numa_available() < 0 || sched_topology_detect(&t) < 0 || t.nodes < 2) {
                printf("check: FAIL: not a NUMA machine (%u nodes)\nNUMA-CHECK FAIL\n", t.nodes);
                return 1;
        }
        CHECK(t.nodes == 2, "%u nodes, %u cpus", t.nodes, t.ncpus);
        if (sched_new(&s, &cfg) < 0) {
                printf("NUMA-CHECK FAIL\n");
                return 1;
        }
        sched_describe(s, text, sizeof(text));
        printf("%s\n", text);
        check_binding(s);
        uint64_t off = steals_while_hogged(s, 200);
        CHECK(off == 0, "cross-node stealing off by default: %llu stolen", (unsigned long long)off);
        sched_free(s);

        cfg.cross_node_steal_every_n = 64;
        if (sched_new(&s, &cfg) < 0) {
                printf("NUMA-CHECK FAIL\n");
                return 1;
        }
        uint64_t on = steals_while_hogged(s, 2000);
        CHECK(on > 0, "cross-node stealing when enabled: %llu stolen", (unsigned long long)on);
        sched_free(s);

        printf("NUMA-CHECK %s\n", failures ? "FAIL" : "PASS");
        return failures ? 1 : 0;
}
