/* SPDX-License-Identifier: MIT */
/*
 * bench-chan.c — the channel and future figures (scheduler/chan.c, future.c), each
 * shaped like its Go peer (peers/go/main.go) so the two numbers compare:
 *
 *  chan-pingpong N CAP  a group of 2 workers; two fibers bounce an int through two
 *                  channels of capacity CAP (0: unbuffered, Go's `make(chan int)`; 1:
 *                  `make(chan int, 1)`), N round trips: ns per round trip. Go's peer:
 *                  two goroutines, GOMAXPROCS=2, the same channels.
 *  future-fanout N  from a fiber on a group of 2 workers: fiber_async() N futures that
 *                  each return their index, fiber_when_all(), sum the values (checked),
 *                  free them: ns per future. Go's peer: N goroutines writing into a
 *                  slice, a sync.WaitGroup, the same sum.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/sched.h"
#include "tests/bench/bench.h"

static SchedulingGroup *chan_group(size_t max_fibers)
{
        SchedGroupConfig cfg = {
                .workers = 2,
                .runq_capacity = max_fibers,
                .max_fibers = max_fibers,
                .name = "bench",
                .queue_policy = SCHED_QUEUE_SHARED,
                .control = BENCH_NO_MONITOR,
        };
        SchedulingGroup *g = NULL;
        int r = sched_group_new(&g, &cfg);

        if (r < 0)
                bench_die("sched_group_new: %s", strerror(-r));
        return g;
}

static Fiber *chan_fiber(SchedulingGroup *g, FiberFn fn, void *arg)
{
        FiberAttr attr = {.group = g};
        Fiber *f = NULL;
        int r = fiber_create(&f, &attr, fn, arg);

        if (r < 0)
                bench_die("fiber_create: %s", strerror(-r));
        return f;
}

/* ------------------------------------------------------------------ ping-pong ----- */

typedef struct ChanPingPong {
        uint64_t rounds;
        FiberChan *ping, *pong;
} ChanPingPong;

static void chan_echo(void *arg)
{
        ChanPingPong *p = arg;
        int64_t v;

        for (uint64_t i = 0; i < p->rounds; i++) {
                if (fiber_chan_recv(p->ping, &v, SCHED_FOREVER) < 0)
                        bench_die("chan-pingpong: recv failed");
                v++;
                if (fiber_chan_send(p->pong, &v, SCHED_FOREVER) < 0)
                        bench_die("chan-pingpong: send failed");
        }
}

static void chan_client(void *arg)
{
        ChanPingPong *p = arg;

        for (uint64_t i = 0; i < p->rounds; i++) {
                int64_t v = (int64_t)i;
                if (fiber_chan_send(p->ping, &v, SCHED_FOREVER) < 0 ||
                    fiber_chan_recv(p->pong, &v, SCHED_FOREVER) < 0)
                        bench_die("chan-pingpong: send/recv failed");
                if (v != (int64_t)i + 1)
                        bench_die("chan-pingpong: got %lld, want %llu", (long long)v,
                                  (unsigned long long)i + 1);
        }
}

int bench_chan_pingpong(int argc, char **argv)
{
        ChanPingPong p = {.rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 200000)};
        size_t cap = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 0;
        SchedulingGroup *g = chan_group(16384);
        Fiber *echo, *client;
        uint64_t t0, t1;

        if (fiber_chan_new(&p.ping, sizeof(int64_t), cap) < 0 ||
            fiber_chan_new(&p.pong, sizeof(int64_t), cap) < 0)
                bench_die("chan-pingpong: fiber_chan_new failed");
        t0 = bench_now_ns();
        echo = chan_fiber(g, chan_echo, &p);
        client = chan_fiber(g, chan_client, &p);
        if (fiber_join(client) < 0 || fiber_join(echo) < 0)
                bench_die("chan-pingpong: fiber_join failed");
        t1 = bench_now_ns();
        sched_group_free(g);
        fiber_chan_free(p.ping);
        fiber_chan_free(p.pong);
        printf("%.2f\n", (double)(t1 - t0) / (double)p.rounds);
        return 0;
}

/* ------------------------------------------------------------------ fan-out ------- */

typedef struct FanOut {
        uint64_t n;
        FiberFuture **futs;
        uint64_t elapsed_ns;
} FanOut;

static void *fanout_leaf(void *arg)
{
        return arg; /* its index */
}

static void fanout_root(void *arg)
{
        FanOut *fo = arg;
        uint64_t t0 = bench_now_ns(), sum = 0;
        int r;

        for (uint64_t i = 0; i < fo->n; i++) {
                r = fiber_async(&fo->futs[i], NULL, fanout_leaf, (void *)(uintptr_t)i);
                if (r < 0)
                        bench_die("future-fanout: fiber_async: %s", strerror(-r));
        }
        r = fiber_when_all(fo->futs, fo->n, SCHED_FOREVER);
        if (r < 0)
                bench_die("future-fanout: fiber_when_all: %s", strerror(-r));
        for (uint64_t i = 0; i < fo->n; i++) {
                void *v = NULL;
                fiber_future_get(fo->futs[i], &v, 0);
                sum += (uintptr_t)v;
                fiber_future_free(fo->futs[i]);
        }
        fo->elapsed_ns = bench_now_ns() - t0;
        if (sum != fo->n * (fo->n - 1) / 2)
                bench_die("future-fanout: sum %llu, want %llu", (unsigned long long)sum,
                          (unsigned long long)(fo->n * (fo->n - 1) / 2));
}

int bench_future_fanout(int argc, char **argv)
{
        FanOut fo = {.n = bench_parse_count(argc > 1 ? argv[1] : NULL, 10000)};
        SchedulingGroup *g = chan_group(bench_fibers_cap(fo.n + 16));

        fo.futs = calloc(fo.n, sizeof(*fo.futs));
        if (!fo.futs)
                bench_die("future-fanout: out of memory");
        if (fiber_join(chan_fiber(g, fanout_root, &fo)) < 0)
                bench_die("future-fanout: fiber_join failed");
        sched_group_free(g);
        free(fo.futs);
        printf("%.2f\n", (double)fo.elapsed_ns / (double)fo.n);
        return 0;
}
