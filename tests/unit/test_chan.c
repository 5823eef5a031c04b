/* SPDX-License-Identifier: MIT */
/* Channels (scheduler/chan.c): FIFO order and capacity, the unbuffered rendezvous,
 * close semantics, deadlines, cancellation of parked senders and receivers, select's
 * fairness and its exactly-once wake-up, and many producers and consumers on two
 * workers (fibers and a pthread) with a checksum. Waits are on conditions: a fiber on a
 * one-worker group is known to be parked once the fiber that created it runs again. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "helpers.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define ITEMS 4000
#define ROUNDS 6000
#else
#define ITEMS 40000
#define ROUNDS 30000
#endif

static FiberChan *chan(size_t elem_size, size_t cap)
{
        FiberChan *c = NULL;
        cr_assert_eq(fiber_chan_new(&c, elem_size, cap), 0);
        cr_assert_not_null(c);
        return c;
}

static Fiber *spawn(SchedulingGroup *g, FiberFn fn, void *arg)
{
        FiberAttr a = {.group = g};
        Fiber *f = NULL;
        cr_assert_eq(fiber_create(&f, &a, fn, arg), 0);
        return f;
}

/* ------------------------------------------------------------------ basics -------- */

Test(chan, buffered_is_fifo_and_bounded)
{
        FiberChan *c = chan(sizeof(int), 4);
        int v;

        cr_assert_eq(fiber_chan_cap(c), 4);
        for (int i = 0; i < 4; i++)
                cr_assert_eq(fiber_chan_send(c, &i, 0), 0);
        v = 99;
        cr_assert_eq(fiber_chan_send(c, &v, 0), -ETIMEDOUT, "a full ring takes no more");
        cr_assert_eq(fiber_chan_len(c), 4);
        for (int i = 0; i < 4; i++) {
                cr_assert_eq(fiber_chan_recv(c, &v, 0), 0);
                cr_assert_eq(v, i);
        }
        cr_assert_eq(fiber_chan_recv(c, &v, 0), -ETIMEDOUT);
        /* wrap the ring around a few times */
        for (int i = 0; i < 10; i++) {
                cr_assert_eq(fiber_chan_send(c, &i, 0), 0);
                cr_assert_eq(fiber_chan_recv(c, &v, 0), 0);
                cr_assert_eq(v, i);
        }
        cr_assert_null(fiber_chan_free(c));
        cr_assert_null(fiber_chan_free(NULL));
}

Test(chan, new_refuses_overflow)
{
        FiberChan *c = NULL;
        cr_assert_eq(fiber_chan_new(&c, SIZE_MAX / 2, 4), -EINVAL);
        cr_assert_null(c);
        cr_assert_eq(fiber_chan_new(&c, 0, 0), 0, "a channel of signals");
        cr_assert_eq(fiber_chan_send(c, NULL, 0), -ETIMEDOUT, "unbuffered: nobody receives");
        fiber_chan_free(c);
}

Test(chan, close_drains_then_reports_closed)
{
        FiberChan *c = chan(sizeof(int), 4);
        int v;

        for (int i = 1; i <= 3; i++)
                cr_assert_eq(fiber_chan_send(c, &i, 0), 0);
        cr_assert_eq(fiber_chan_close(c), 0);
        cr_assert_eq(fiber_chan_close(c), -EPIPE, "closing twice is an error, not a panic");
        v = 7;
        cr_assert_eq(fiber_chan_send(c, &v, SCHED_FOREVER), -EPIPE);
        for (int i = 1; i <= 3; i++) {
                cr_assert_eq(fiber_chan_recv(c, &v, SCHED_FOREVER), 0);
                cr_assert_eq(v, i);
        }
        v = -1;
        cr_assert_eq(fiber_chan_recv(c, &v, SCHED_FOREVER), -EPIPE);
        cr_assert_eq(v, -1, "a closed receive leaves the element untouched");
        fiber_chan_free(c);
}

/* ------------------------------------------------------------------ rendezvous ---- */

typedef struct Pair {
        FiberChan *c;
        int sent; /* atomic: sends that have returned */
        int n;
} Pair;

static void rendezvous_sender(void *arg)
{
        Pair *p = arg;
        for (int i = 1; i <= p->n; i++) {
                cr_assert_eq(fiber_chan_send(p->c, &i, SCHED_FOREVER), 0);
                __atomic_store_n(&p->sent, i, __ATOMIC_RELEASE);
        }
}

Test(chan, unbuffered_send_waits_for_the_receiver)
{
        SchedulingGroup *g = test_group(2);
        Pair p = {.c = chan(sizeof(int), 0), .n = 2000};
        Fiber *f = spawn(g, rendezvous_sender, &p);

        /* the receiver is this pthread: a send cannot return before its value is taken */
        for (int i = 1; i <= p.n; i++) {
                int v = 0;
                cr_assert_leq(__atomic_load_n(&p.sent, __ATOMIC_ACQUIRE), i - 1,
                              "send %d returned before anyone received it", i);
                cr_assert_eq(fiber_chan_recv(p.c, &v, SCHED_FOREVER), 0);
                cr_assert_eq(v, i);
        }
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(p.sent, p.n);
        fiber_chan_free(p.c);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ parked -------- */

typedef struct Parked {
        FiberChan *c;
        int op; /* FIBER_CHAN_SEND or FIBER_CHAN_RECV */
        int value;
        int started; /* set just before the blocking call */
        int rc;
} Parked;

static void parked_op(void *arg)
{
        Parked *p = arg;
        __atomic_store_n(&p->started, 1, __ATOMIC_RELEASE);
        p->rc = p->op == FIBER_CHAN_SEND ? fiber_chan_send(p->c, &p->value, SCHED_FOREVER)
                                         : fiber_chan_recv(p->c, &p->value, SCHED_FOREVER);
}

/* On a one-worker group: start @p and return once it is parked (it ran from `started`
 * to its park without a switch, and this fiber runs again only after that). */
static Fiber *start_parked(Parked *p)
{
        Fiber *f = NULL;
        cr_assert_eq(fiber_create(&f, NULL, parked_op, p), 0);
        while (!__atomic_load_n(&p->started, __ATOMIC_ACQUIRE))
                fiber_yield();
        fiber_yield();
        return f;
}

typedef struct CloseCase {
        FiberChan *unbuf, *full;
        Parked r[3], s[2];
} CloseCase;

static void close_wakes_everyone(void *arg)
{
        CloseCase *k = arg;
        Fiber *f[5];
        int v;

        for (int i = 0; i < 3; i++) {
                k->r[i] = (Parked){.c = k->unbuf, .op = FIBER_CHAN_RECV, .value = -1};
                f[i] = start_parked(&k->r[i]);
        }
        for (int i = 0; i < 2; i++) {
                k->s[i] = (Parked){.c = k->full, .op = FIBER_CHAN_SEND, .value = 100 + i};
                f[3 + i] = start_parked(&k->s[i]);
        }
        cr_assert_eq(fiber_chan_close(k->unbuf), 0);
        cr_assert_eq(fiber_chan_close(k->full), 0);
        for (int i = 0; i < 5; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        for (int i = 0; i < 3; i++) {
                cr_assert_eq(k->r[i].rc, -EPIPE);
                cr_assert_eq(k->r[i].value, -1);
        }
        for (int i = 0; i < 2; i++)
                cr_assert_eq(k->s[i].rc, -EPIPE, "a parked sender sees the close");
        /* the ring keeps what it held before the close, and nothing of the parked */
        cr_assert_eq(fiber_chan_recv(k->full, &v, 0), 0);
        cr_assert_eq(v, 42);
        cr_assert_eq(fiber_chan_recv(k->full, &v, 0), -EPIPE);
}

Test(chan, close_wakes_parked_senders_and_receivers)
{
        SchedulingGroup *g = test_group(1);
        CloseCase k = {.unbuf = chan(sizeof(int), 0), .full = chan(sizeof(int), 1)};
        int v = 42;

        cr_assert_eq(fiber_chan_send(k.full, &v, 0), 0);
        run_in_fiber(g, close_wakes_everyone, &k);
        fiber_chan_free(k.unbuf);
        fiber_chan_free(k.full);
        sched_group_free(g);
}

typedef struct CancelCase {
        FiberChan *unbuf, *full;
        Parked r, s;
} CancelCase;

static void cancel_parked(void *arg)
{
        CancelCase *k = arg;
        Fiber *fr, *fs;
        int v = 5;

        k->r = (Parked){.c = k->unbuf, .op = FIBER_CHAN_RECV, .value = -1};
        k->s = (Parked){.c = k->full, .op = FIBER_CHAN_SEND, .value = 77};
        fr = start_parked(&k->r);
        fs = start_parked(&k->s);
        fiber_cancel(fr);
        fiber_cancel(fs);
        cr_assert_eq(fiber_join(fr), 0);
        cr_assert_eq(fiber_join(fs), 0);
        cr_assert_eq(k->r.rc, -ECANCELED);
        cr_assert_eq(k->r.value, -1);
        cr_assert_eq(k->s.rc, -ECANCELED);
        /* the cancelled receiver is gone from the queue: nobody takes a value now */
        cr_assert_eq(fiber_chan_send(k->unbuf, &v, 0), -ETIMEDOUT);
        /* the cancelled sender's value never went in */
        cr_assert_eq(fiber_chan_recv(k->full, &v, 0), 0);
        cr_assert_eq(v, 1);
        cr_assert_eq(fiber_chan_recv(k->full, &v, 0), -ETIMEDOUT);
        /* and a cancelled fiber's every later channel call fails at once */
        fiber_cancel(fiber_self());
        cr_assert_eq(fiber_chan_recv(k->full, &v, SCHED_FOREVER), -ECANCELED);
        cr_assert_eq(fiber_chan_send(k->full, &v, SCHED_FOREVER), -ECANCELED);
}

Test(chan, cancel_interrupts_parked_sender_and_receiver)
{
        SchedulingGroup *g = test_group(1);
        CancelCase k = {.unbuf = chan(sizeof(int), 0), .full = chan(sizeof(int), 1)};
        int one = 1;

        cr_assert_eq(fiber_chan_send(k.full, &one, 0), 0);
        run_in_fiber(g, cancel_parked, &k);
        fiber_chan_free(k.unbuf);
        fiber_chan_free(k.full);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ deadlines ----- */

static void deadline_in_fiber(void *arg)
{
        FiberChan *c = arg;
        uint64_t t0 = sched_now_ns();
        int v = 0;

        cr_assert_eq(fiber_chan_recv(c, &v, t0 + 20 * MS_NS), -ETIMEDOUT);
        cr_assert_geq(sched_now_ns() - t0, 20 * MS_NS);
        t0 = sched_now_ns();
        cr_assert_eq(fiber_chan_send(c, &v, t0 + 20 * MS_NS), -ETIMEDOUT);
        cr_assert_geq(sched_now_ns() - t0, 20 * MS_NS);
}

Test(chan, deadlines_pass_in_fibers_and_threads)
{
        SchedulingGroup *g = test_group(1);
        FiberChan *c = chan(sizeof(int), 0);
        uint64_t t0;
        int v = 0;

        run_in_fiber(g, deadline_in_fiber, c);
        t0 = sched_now_ns();
        cr_assert_eq(fiber_chan_recv(c, &v, t0 + 20 * MS_NS), -ETIMEDOUT);
        cr_assert_geq(sched_now_ns() - t0, 20 * MS_NS);
        /* a timed-out waiter left no node behind */
        cr_assert_eq(fiber_chan_send(c, &v, 0), -ETIMEDOUT);
        fiber_chan_free(c);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ select -------- */

Test(chan, select_default_nil_and_limits)
{
        FiberChan *a = chan(sizeof(int), 1), *b = chan(sizeof(int), 0);
        FiberChanCase k[FIBER_CHAN_SELECT_MAX + 1] = {0};
        int v = 3, out = 0;

        k[0] = (FiberChanCase){.chan = a, .op = FIBER_CHAN_RECV, .elem = &out};
        k[1] = (FiberChanCase){.chan = b, .op = FIBER_CHAN_SEND, .elem = &v};
        k[2] = (FiberChanCase){.chan = NULL, .op = FIBER_CHAN_RECV, .elem = &out};
        cr_assert_eq(fiber_chan_select(k, 3, 0), -ETIMEDOUT, "nothing ready: default");
        cr_assert_eq(fiber_chan_select(k, 3, sched_deadline_after(5 * MS_NS)), -ETIMEDOUT);
        cr_assert_eq(fiber_chan_send(a, &v, 0), 0);
        cr_assert_eq(fiber_chan_select(k, 3, 0), 0);
        cr_assert_eq(k[0].result, 0);
        cr_assert_eq(out, 3);
        cr_assert_eq(fiber_chan_select(k, FIBER_CHAN_SELECT_MAX + 1, 0), -EINVAL);
        cr_assert_eq(fiber_chan_select(NULL, 0, 0), -ETIMEDOUT, "an empty select");
        /* closed: the receive case fires with -EPIPE, the send case too */
        cr_assert_eq(fiber_chan_close(b), 0);
        k[0].chan = NULL;
        cr_assert_eq(fiber_chan_select(k, 3, SCHED_FOREVER), 1);
        cr_assert_eq(k[1].result, -EPIPE);
        fiber_chan_free(a);
        fiber_chan_free(b);
}

Test(chan, select_picks_fairly_among_ready_cases)
{
        enum { N = 3 };
        FiberChan *c[N];
        FiberChanCase k[N];
        int out[N], hits[N] = {0};

        for (int i = 0; i < N; i++) {
                c[i] = chan(sizeof(int), 1);
                cr_assert_eq(fiber_chan_send(c[i], &i, 0), 0);
                k[i] = (FiberChanCase){.chan = c[i], .op = FIBER_CHAN_RECV, .elem = &out[i]};
        }
        for (int r = 0; r < ROUNDS; r++) {
                int i = fiber_chan_select(k, N, 0);
                cr_assert(i >= 0 && i < N, "select returned %d", i);
                cr_assert_eq(out[i], i);
                hits[i]++;
                cr_assert_eq(fiber_chan_send(c[i], &i, 0), 0); /* ready again */
        }
        for (int i = 0; i < N; i++) {
                /* uniform: ROUNDS / 3 each; 10% off is over 10 standard deviations */
                cr_assert_geq(hits[i], ROUNDS / N * 9 / 10, "case %d fired %d of %d times", i,
                              hits[i], ROUNDS);
                fiber_chan_free(c[i]);
        }
}

/* Selects over two unbuffered channels against senders on both: each value must arrive
 * exactly once, so a select woken twice (two senders both thinking they handed it a
 * value) shows up as a lost value and a wrong checksum. */
typedef struct SelectRun {
        FiberChan *a, *b;
        FiberLatch senders;
        long received, sum; /* atomic */
        int per_sender;
} SelectRun;

static void select_sender_a(void *arg)
{
        SelectRun *s = arg;
        for (int i = 1; i <= s->per_sender; i++)
                cr_assert_eq(fiber_chan_send(s->a, &i, SCHED_FOREVER), 0);
        fiber_latch_count_down(&s->senders);
}

static void select_sender_b(void *arg)
{
        SelectRun *s = arg;
        for (int i = 1; i <= s->per_sender; i++) {
                int v = 1000000 + i;
                cr_assert_eq(fiber_chan_send(s->b, &v, SCHED_FOREVER), 0);
        }
        fiber_latch_count_down(&s->senders);
}

static void select_receiver(void *arg)
{
        SelectRun *s = arg;
        int va = 0, vb = 0;
        FiberChanCase k[2] = {{.chan = s->a, .op = FIBER_CHAN_RECV, .elem = &va},
                              {.chan = s->b, .op = FIBER_CHAN_RECV, .elem = &vb}};

        while (k[0].chan || k[1].chan) {
                int i = fiber_chan_select(k, 2, SCHED_FOREVER);
                cr_assert(i == 0 || i == 1, "select returned %d", i);
                if (k[i].result == -EPIPE) {
                        k[i].chan = NULL;
                        continue;
                }
                cr_assert_eq(k[i].result, 0);
                __atomic_add_fetch(&s->received, 1, __ATOMIC_RELAXED);
                __atomic_add_fetch(&s->sum, i == 0 ? va : vb, __ATOMIC_RELAXED);
        }
}

Test(chan, select_is_woken_exactly_once)
{
        SchedulingGroup *g = test_group(2);
        SelectRun s = {
                .a = chan(sizeof(int), 0), .b = chan(sizeof(int), 0), .per_sender = ITEMS / 8};
        Fiber *f[12];
        long expect = 0;

        fiber_latch_init(&s.senders, 8);
        for (int i = 0; i < 4; i++)
                f[i] = spawn(g, select_receiver, &s);
        for (int i = 0; i < 4; i++) {
                f[4 + 2 * i] = spawn(g, select_sender_a, &s);
                f[5 + 2 * i] = spawn(g, select_sender_b, &s);
        }
        cr_assert_eq(fiber_latch_wait(&s.senders, sched_deadline_after(60 * SEC_NS)), 0);
        cr_assert_eq(fiber_chan_close(s.a), 0);
        cr_assert_eq(fiber_chan_close(s.b), 0);
        for (int i = 0; i < 12; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        for (int i = 1; i <= s.per_sender; i++)
                expect += 4L * i + 4L * (1000000 + i);
        cr_assert_eq(s.received, 8L * s.per_sender);
        cr_assert_eq(s.sum, expect);
        fiber_chan_free(s.a);
        fiber_chan_free(s.b);
        sched_group_free(g);
}

/* A select that sends and receives: a ping-pong where one side selects. */
static void select_echo(void *arg)
{
        FiberChan **c = arg; /* c[0]: in, c[1]: out, c[2]: quit */
        int v = 0;

        for (;;) {
                FiberChanCase k[2] = {{.chan = c[0], .op = FIBER_CHAN_RECV, .elem = &v},
                                      {.chan = c[2], .op = FIBER_CHAN_RECV, .elem = NULL}};
                int i = fiber_chan_select(k, 2, SCHED_FOREVER);
                if (i == 1)
                        return;
                cr_assert_eq(i, 0);
                v *= 2;
                FiberChanCase out[1] = {{.chan = c[1], .op = FIBER_CHAN_SEND, .elem = &v}};
                cr_assert_eq(fiber_chan_select(out, 1, SCHED_FOREVER), 0);
                cr_assert_eq(out[0].result, 0);
        }
}

Test(chan, select_sends_and_receives)
{
        SchedulingGroup *g = test_group(2);
        FiberChan *c[3] = {chan(sizeof(int), 0), chan(sizeof(int), 0), chan(0, 0)};
        Fiber *f = spawn(g, select_echo, c);

        for (int i = 1; i <= 500; i++) {
                int v = i;
                cr_assert_eq(fiber_chan_send(c[0], &v, SCHED_FOREVER), 0);
                cr_assert_eq(fiber_chan_recv(c[1], &v, SCHED_FOREVER), 0);
                cr_assert_eq(v, 2 * i);
        }
        cr_assert_eq(fiber_chan_close(c[2]), 0);
        cr_assert_eq(fiber_join(f), 0);
        for (int i = 0; i < 3; i++)
                fiber_chan_free(c[i]);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ many ---------- */

typedef struct Mpmc {
        FiberChan *c;
        FiberLatch producers;
        int per_producer;
        long received, sum; /* atomic */
} Mpmc;

static void mpmc_produce(Mpmc *m)
{
        for (int i = 1; i <= m->per_producer; i++)
                cr_assert_eq(fiber_chan_send(m->c, &i, SCHED_FOREVER), 0);
        fiber_latch_count_down(&m->producers);
}

static void mpmc_producer(void *arg)
{
        mpmc_produce(arg);
}

static void *mpmc_thread(void *arg)
{
        mpmc_produce(arg);
        return NULL;
}

static void mpmc_consumer(void *arg)
{
        Mpmc *m = arg;
        long n = 0, sum = 0;
        int v, r;

        while ((r = fiber_chan_recv(m->c, &v, SCHED_FOREVER)) == 0) {
                n++;
                sum += v;
        }
        cr_assert_eq(r, -EPIPE);
        __atomic_add_fetch(&m->received, n, __ATOMIC_RELAXED);
        __atomic_add_fetch(&m->sum, sum, __ATOMIC_RELAXED);
}

/* Returns the items received (asserted to be all of them), for the test to check. */
static long mpmc_run(size_t cap)
{
        SchedulingGroup *g = test_group(2);
        Mpmc m = {.c = chan(sizeof(int), cap), .per_producer = ITEMS / 5};
        Fiber *f[8];
        pthread_t t;

        fiber_latch_init(&m.producers, 5);
        for (int i = 0; i < 4; i++)
                f[i] = spawn(g, mpmc_consumer, &m);
        for (int i = 0; i < 4; i++)
                f[4 + i] = spawn(g, mpmc_producer, &m);
        cr_assert_eq(pthread_create(&t, NULL, mpmc_thread, &m), 0);
        cr_assert_eq(fiber_latch_wait(&m.producers, sched_deadline_after(60 * SEC_NS)), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_eq(fiber_chan_close(m.c), 0);
        for (int i = 0; i < 8; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        cr_assert_eq(m.received, 5L * m.per_producer);
        cr_assert_eq(m.sum, 5L * m.per_producer * (m.per_producer + 1) / 2);
        fiber_chan_free(m.c);
        sched_group_free(g);
        return (long)m.received;
}

Test(chan, many_producers_and_consumers_buffered)
{
        cr_assert_eq(mpmc_run(16), 5L * (ITEMS / 5));
}

Test(chan, many_producers_and_consumers_unbuffered)
{
        cr_assert_eq(mpmc_run(0), 5L * (ITEMS / 5));
}
