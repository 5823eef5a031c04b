/* SPDX-License-Identifier: MIT */
/*
 * bench-sched.c — the multi-group figures (issue "NUMA-bound scheduling groups"): the
 * same workloads under the shared and the local queue policy, on one group of two
 * workers and on two groups of one, plus imbalance and fan-out.
 *
 *   sched-skynet SPEC [LEAVES]    ms for the 10-ary skynet tree (checked sum)
 *   sched-create SPEC [N]         ns per fiber: one fiber creates N children
 *                                          (each counts down a latch) and waits for them
 *   sched-fanout POLICY [ROUNDS]          µs per round: a fiber spawns 1,000 children and
 *                                          joins them
 *   sched-imbalance MODE [FIBERS]         ms to finish FIBERS CPU-bound fibers (~20 µs of
 *                                          work each, no yields) on two groups of one
 *                                          worker: MODE balanced (alternate groups),
 *                                          steal (all into group 0, stealing on),
 *                                          nosteal (all into group 0, stealing off)
 *
 * SPEC is a policy and a group count: shared1, local1 (one group of two workers),
 * shared2, local2 (two groups of one, same node, stealing on); sched-fanout takes the
 * policy alone. Every run is its own process (bench.c), the first use of
 * each stack is in the time as it is for Go's peers.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "tests/bench/bench.h"

/* "shared", "local", optionally followed by the group count (1 or 2; default 1). */
static SchedQueuePolicy parse_spec(const char *s, unsigned *groups)
{
        size_t n;
        SchedQueuePolicy p;

        if (s && !strncmp(s, "shared", 6)) {
                p = SCHED_QUEUE_SHARED;
                n = 6;
        } else if (s && !strncmp(s, "local", 5)) {
                p = SCHED_QUEUE_LOCAL;
                n = 5;
        } else {
                bench_die("'%s' is neither shared[1|2] nor local[1|2]", s ? s : "(none)");
        }
        *groups = s[n] ? (unsigned)(s[n] - '0') : 1;
        if ((*groups != 1 && *groups != 2) || (s[n] && s[n + 1]))
                bench_die("'%s': the group count is 1 or 2", s);
        return p;
}

static Scheduler *start(SchedQueuePolicy policy, unsigned groups, size_t live, unsigned steal)
{
        SchedConfig cfg = {.groups = groups,
                           .group_size = groups == 1 ? 2 : 1,
                           .queue_policy = policy,
                           .numa = SCHED_NUMA_OFF,
                           .steal_every_n = steal,
                           .max_fibers = bench_fibers_cap(live),
                           .runq_capacity = bench_fibers_cap(live),
                           .control = BENCH_NO_MONITOR};
        Scheduler *s;
        int r;

        if (groups != 1 && groups != 2)
                bench_die("groups must be 1 or 2");
        sched_set_log(NULL);
        r = sched_new(&s, &cfg);
        if (r < 0)
                bench_die("sched_new: %s", strerror(-r));
        return s;
}

/* Run @fn(@arg) in a fiber of group 0 and wait for it. */
static void run_root(Scheduler *s, FiberFn fn, void *arg)
{
        FiberAttr a = {.group = sched_group_at(s, 0)};
        Fiber *f;
        int r = fiber_create(&f, &a, fn, arg);
        if (r < 0)
                bench_die("fiber_create: %s", strerror(-r));
        if (fiber_join(f) < 0)
                bench_die("fiber_join failed");
}

static void spawn(Fiber **ret, FiberFn fn, void *arg)
{
        int r;
        while ((r = fiber_create(ret, NULL, fn, arg)) == -EAGAIN)
                fiber_yield();
        if (r < 0)
                bench_die("fiber_create: %s", strerror(-r));
}

/* ------------------------------------------------------------------ skynet -------- */

typedef struct Node {
        uint64_t num, size, sum;
} Node;

static void skynet(void *arg)
{
        Node *n = arg;
        Node kids[10];
        Fiber *f[10];
        uint64_t sub = n->size / 10;

        if (n->size == 1) {
                n->sum = n->num;
                return;
        }
        for (int i = 0; i < 10; i++) {
                kids[i] = (Node){.num = n->num + (uint64_t)i * sub, .size = sub};
                spawn(&f[i], skynet, &kids[i]);
        }
        n->sum = 0;
        for (int i = 0; i < 10; i++) {
                fiber_join(f[i]);
                n->sum += kids[i].sum;
        }
}

int bench_sched_skynet(int argc, char **argv)
{
        unsigned groups;
        SchedQueuePolicy p = parse_spec(argc > 1 ? argv[1] : NULL, &groups);
        uint64_t leaves = bench_parse_count(argc > 2 ? argv[2] : NULL, 1000000);
        Scheduler *s = start(p, groups, (size_t)(leaves + leaves / 9 + 16), 0);
        Node root = {.size = leaves};
        uint64_t t0 = bench_now_ns();

        run_root(s, skynet, &root);
        uint64_t ns = bench_now_ns() - t0;
        if (root.sum != leaves * (leaves - 1) / 2)
                bench_die("skynet: sum %llu, want %llu", (unsigned long long)root.sum,
                          (unsigned long long)(leaves * (leaves - 1) / 2));
        printf("%.1f\n", (double)ns / 1e6);
        sched_free(s);
        return 0;
}

/* ------------------------------------------------------------------ create -------- */

typedef struct Creator {
        uint64_t n;
        FiberLatch done;
} Creator;

static void child(void *arg)
{
        fiber_latch_count_down(arg);
}

static void creator(void *arg)
{
        Creator *c = arg;
        FiberAttr a = {.detached = true};
        for (uint64_t i = 0; i < c->n; i++) {
                int r;
                while ((r = fiber_create(NULL, &a, child, &c->done)) == -EAGAIN)
                        fiber_yield();
                if (r < 0)
                        bench_die("fiber_create: %s", strerror(-r));
        }
        fiber_latch_wait(&c->done, SCHED_FOREVER);
}

int bench_sched_create(int argc, char **argv)
{
        unsigned groups;
        SchedQueuePolicy p = parse_spec(argc > 1 ? argv[1] : NULL, &groups);
        uint64_t n = bench_parse_count(argc > 2 ? argv[2] : NULL, 1000000);
        Scheduler *s = start(p, groups, 65536, 0);
        Creator c = {.n = n};
        uint64_t t0;

        fiber_latch_init(&c.done, (int64_t)n);
        t0 = bench_now_ns();
        run_root(s, creator, &c);
        printf("%.1f\n", (double)(bench_now_ns() - t0) / (double)n);
        sched_free(s);
        return 0;
}

/* ------------------------------------------------------------------ fan-out ------- */

static void leaf(void *arg)
{
        (void)arg;
}

static void fanout(void *arg)
{
        uint64_t rounds = *(uint64_t *)arg;
        Fiber **f = malloc(1000 * sizeof(*f));
        for (uint64_t r = 0; r < rounds; r++) {
                for (int i = 0; i < 1000; i++)
                        spawn(&f[i], leaf, NULL);
                for (int i = 0; i < 1000; i++)
                        fiber_join(f[i]);
        }
        free(f);
}

int bench_sched_fanout(int argc, char **argv)
{
        unsigned groups;
        SchedQueuePolicy p = parse_spec(argc > 1 ? argv[1] : NULL, &groups);
        uint64_t rounds = bench_parse_count(argc > 2 ? argv[2] : NULL, 200);
        Scheduler *s = start(p, groups, 4096, 0);
        uint64_t t0 = bench_now_ns();

        run_root(s, fanout, &rounds);
        printf("%.1f\n", (double)(bench_now_ns() - t0) / 1e3 / (double)rounds);
        sched_free(s);
        return 0;
}

/* ------------------------------------------------------------------ imbalance ----- */

static void burn(void *arg)
{
        FiberLatch *done = arg;
        uint64_t end = bench_now_ns() + 20000; /* 20 µs of CPU, no yield */
        while (bench_now_ns() < end)
                ;
        fiber_latch_count_down(done);
}

int bench_sched_imbalance(int argc, char **argv)
{
        const char *mode = argc > 1 ? argv[1] : "";
        uint64_t n = bench_parse_count(argc > 2 ? argv[2] : NULL, 5000);
        bool balanced = !strcmp(mode, "balanced"), nosteal = !strcmp(mode, "nosteal");
        FiberLatch done;
        Scheduler *s;
        uint64_t t0;

        if (!balanced && !nosteal && strcmp(mode, "steal"))
                bench_die("imbalance: mode '%s' is not balanced, steal or nosteal", mode);
        s = start(SCHED_QUEUE_SHARED, 2, n + 16, nosteal ? UINT_MAX : 0);
        fiber_latch_init(&done, (int64_t)n);
        t0 = bench_now_ns();
        for (uint64_t i = 0; i < n; i++) {
                FiberAttr a = {.detached = true,
                               .group = sched_group_at(s, balanced ? (unsigned)(i % 2) : 0)};
                int r = fiber_create(NULL, &a, burn, &done);
                if (r < 0)
                        bench_die("fiber_create: %s", strerror(-r));
        }
        fiber_latch_wait(&done, SCHED_FOREVER);
        printf("%.1f\n", (double)(bench_now_ns() - t0) / 1e6);
        sched_free(s);
        return 0;
}
