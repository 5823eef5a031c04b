/* SPDX-License-Identifier: MIT */
/*
 * chan_future.c — a test plugin of ABI 3: channels and futures through the host table.
 *
 *   {"mode": "work", "n": N}  4 producer futures send 1..N each into a buffered channel,
 *       the job fiber receives them with chan_select (beside a quit channel nobody
 *       signals), then closes the channel; 8 futures compute squares, when_all waits for
 *       them; an unbuffered ping-pong of N rounds with one more future. Result: "sum"
 *       (4 * N(N+1)/2), "squares" (0^2 + ... + 7^2 = 140), "pong" (the last value, N),
 *       "closed" (chan_recv after close: -EPIPE).
 *   {"mode": "block"}  chan_recv on a channel nobody sends to, with no deadline: the job
 *       ends only by cancellation (job.cancel or timeout_ms); returns what chan_recv
 *       returned (-ECANCELED).
 *   {"mode": "nest"}  a tree the job's cancel must walk to its bottom: the job fiber's
 *       future (the parent) spawns a child and returns without joining it once the child
 *       has spawned a grandchild, so the host lets the child go (cancelled); the child
 *       spins without a yield point until the grandchild has returned; the grandchild
 *       parks in chan_recv (logging "grandchild parked in chan_recv"); the job fiber
 *       parks in chan_recv too. Only a cancel that reaches the grandchild itself, under
 *       a child already let go, ends the spin, logged "the spinning child saw its child
 *       return"; after 15 s the child gives up ("the spinning child gave up").
 */
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "plugins/fiberd/plugin.h"

typedef struct Produce {
        FiberdChan *ch;
        int64_t n;
} Produce;

static int produce(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Produce *p = arg;

        for (int64_t i = 1; i <= p->n; i++) {
                int r = host->chan_send(job, p->ch, &i, UINT64_MAX);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct Square {
        int64_t x, out;
} Square;

static int square(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Square *s = arg;

        s->out = s->x * s->x;
        return host->yield(job);
}

typedef struct Echo {
        FiberdChan *ping, *pong;
        int64_t n;
} Echo;

static int echo(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Echo *e = arg;
        int64_t v;
        int r;

        for (int64_t i = 0; i < e->n; i++) {
                if ((r = host->chan_recv(job, e->ping, &v, UINT64_MAX)) < 0 ||
                    (r = host->chan_send(job, e->pong, &v, UINT64_MAX)) < 0)
                        return r;
        }
        return 0;
}

static int run_work(FiberdJob *job, const FiberdHost *host, int64_t n)
{
        FiberdChan *ch = NULL, *quit = NULL, *ping = NULL, *pong = NULL;
        FiberdFuture *prod[4] = {0}, *sq[8] = {0}, *ef = NULL;
        int64_t sum = 0, squares = 0, v = 0, got = 0;
        int r, value;

        if ((r = host->chan_new(job, &ch, sizeof(int64_t), 4)) < 0 ||
            (r = host->chan_new(job, &quit, 0, 0)) < 0)
                return host->fail(job, r, "chan_new failed");
        for (int i = 0; i < 4; i++) {
                Produce p = {.ch = ch, .n = n};
                if ((r = host->async(job, &prod[i], produce, &p, sizeof(p))) < 0)
                        return host->fail(job, r, "async failed");
        }
        while (got < 4 * n) {
                FiberdChanCase k[2] = {
                        {.chan = ch, .op = FIBERD_CHAN_RECV, .elem = &v},
                        {.chan = quit, .op = FIBERD_CHAN_RECV, .elem = NULL},
                };
                r = host->chan_select(job, k, 2, UINT64_MAX);
                if (r < 0)
                        return r;
                if (r != 0 || k[0].result != 0)
                        return host->fail(job, -EPROTO, "select fired %d with %d", r, k[r].result);
                sum += v;
                got++;
        }
        if ((r = host->when_all(job, prod, 4, UINT64_MAX)) < 0)
                return r;
        for (int i = 0; i < 4; i++) {
                if ((r = host->future_get(job, prod[i], 0, &value, NULL)) < 0 || value != 0)
                        return host->fail(job, -EPROTO, "producer %d: %d/%d", i, r, value);
                host->future_free(job, prod[i]);
        }
        host->chan_close(job, ch);
        host->result_int(job, "closed", host->chan_recv(job, ch, &v, UINT64_MAX));

        for (int i = 0; i < 8; i++) {
                Square s = {.x = i};
                if ((r = host->async(job, &sq[i], square, &s, sizeof(s))) < 0)
                        return host->fail(job, r, "async failed");
        }
        if ((r = host->when_all(job, sq, 8, host->now_ns() + 30 * 1000000000ull)) < 0)
                return r;
        for (int i = 0; i < 8; i++) {
                Square s;
                if ((r = host->future_get(job, sq[i], 0, &value, &s)) < 0)
                        return r;
                squares += s.out;
                host->future_free(job, sq[i]);
        }

        if ((r = host->chan_new(job, &ping, sizeof(int64_t), 0)) < 0 ||
            (r = host->chan_new(job, &pong, sizeof(int64_t), 0)) < 0)
                return r;
        Echo e = {.ping = ping, .pong = pong, .n = n};
        if ((r = host->async(job, &ef, echo, &e, sizeof(e))) < 0)
                return r;
        for (int64_t i = 1; i <= n; i++) {
                if ((r = host->chan_send(job, ping, &i, UINT64_MAX)) < 0 ||
                    (r = host->chan_recv(job, pong, &v, UINT64_MAX)) < 0)
                        return r;
                if (v != i)
                        return host->fail(job, -EPROTO, "pong %lld, want %lld", (long long)v,
                                          (long long)i);
        }
        if ((r = host->future_get(job, ef, UINT64_MAX, &value, NULL)) < 0 || value != 0)
                return host->fail(job, -EPROTO, "echo: %d/%d", r, value);
        host->future_free(job, ef);
        host->chan_free(job, ping);
        host->chan_free(job, pong);
        host->chan_free(job, ch);
        /* quit is left to the job's end */
        host->result_int(job, "sum", sum);
        host->result_int(job, "squares", squares);
        return host->result_int(job, "pong", v);
}

/* What the nest's fibers share: the child frees it once the grandchild has returned
 * (a grandchild never reached keeps it: leaked, not freed under it). */
typedef struct Nest {
        FiberdChan *never; /* nobody sends: the grandchild parks until cancelled */
        FiberdChan *ready; /* the child says its grandchild exists */
        int returned;      /* atomic: the grandchild returned */
} Nest;

static int nest_grandchild(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Nest *n = *(Nest **)arg;
        int64_t v;
        int r;

        host->log(job, LOG_INFO, "grandchild parked in chan_recv");
        r = host->chan_recv(job, n->never, &v, UINT64_MAX);
        __atomic_store_n(&n->returned, 1, __ATOMIC_RELEASE);
        return r;
}

static int nest_child(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Nest *n = *(Nest **)arg;
        uint64_t give_up = host->now_ns() + 15ull * 1000000000ull;
        FiberdFuture *g;
        int64_t one = 1;
        int r;

        if ((r = host->async(job, &g, nest_grandchild, &n, sizeof(n))) < 0 ||
            (r = host->chan_send(job, n->ready, &one, UINT64_MAX)) < 0)
                return r;
        /* no host call that could see a cancel: only the grandchild's return ends it */
        while (!__atomic_load_n(&n->returned, __ATOMIC_ACQUIRE) && host->now_ns() < give_up)
                __asm__ __volatile__("" ::: "memory");
        if (!__atomic_load_n(&n->returned, __ATOMIC_ACQUIRE)) {
                host->log(job, LOG_WARNING, "the spinning child gave up");
                return -ETIMEDOUT;
        }
        host->log(job, LOG_INFO, "the spinning child saw its child return");
        host->future_free(job, g);
        free(n);
        return 0;
}

/* Spawns the spinning child, waits until its grandchild exists, and returns without
 * joining it: the host lets the child go (cancelled, which it does not see). */
static int nest_parent(FiberdJob *job, const FiberdHost *host, void *arg)
{
        Nest *n = *(Nest **)arg;
        FiberdFuture *child;
        int64_t v;
        int r;

        if ((r = host->async(job, &child, nest_child, &n, sizeof(n))) < 0)
                return r;
        return host->chan_recv(job, n->ready, &v, UINT64_MAX);
}

static int run_nest(FiberdJob *job, const FiberdHost *host)
{
        Nest *n = calloc(1, sizeof(*n));
        FiberdFuture *parent;
        int64_t v;
        int r, value;

        if (!n)
                return -ENOMEM;
        if ((r = host->chan_new(job, &n->never, sizeof(int64_t), 0)) < 0 ||
            (r = host->chan_new(job, &n->ready, sizeof(int64_t), 1)) < 0 ||
            (r = host->async(job, &parent, nest_parent, &n, sizeof(n))) < 0) {
                free(n);
                return r;
        }
        if ((r = host->future_get(job, parent, UINT64_MAX, &value, NULL)) < 0)
                return r;
        /* the parent returned, its child let go and spinning: park until the cancel */
        return host->chan_recv(job, n->never, &v, UINT64_MAX);
}

static int chan_future_run(FiberdJob *job, const FiberdHost *host)
{
        char mode[16] = "work";
        int64_t n = 1000;
        FiberdChan *ch = NULL;
        int r;

        if (!FIBERD_HOST_HAS(host, future_free))
                return host->fail(job, -ENOSYS, "the host has no channels or futures");
        r = host->arg_str(job, "mode", mode, sizeof(mode));
        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_int(job, "n", &n);
        if (r < 0 && r != -ENOENT)
                return r;
        if (strcmp(mode, "block") == 0) {
                int64_t v;
                if ((r = host->chan_new(job, &ch, sizeof(v), 0)) < 0)
                        return r;
                host->log(job, LOG_INFO, "parked in chan_recv");
                return host->chan_recv(job, ch, &v, UINT64_MAX); /* freed with the job */
        }
        if (strcmp(mode, "nest") == 0)
                return run_nest(job, host);
        return run_work(job, host, n);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "chan_future",
        .version = "1.0",
        .description = "test: channels and futures between a job's fibers {mode, n}",
        .run = chan_future_run,
};
