/* SPDX-License-Identifier: MIT */
/* Futures and promises (scheduler/future.c): values from async fibers, continuations,
 * a promise fulfilled by a plain pthread, deadlines and cancellation of a waiter,
 * when_all over a fan-out with a checksum, when_any, and freeing a future before its
 * producer is done. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "helpers.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define FANOUT 1000
#else
#define FANOUT 10000
#endif

#define V(x) ((void *)(intptr_t)(x))
#define I(p) ((intptr_t)(p))

/* Wait (yielding, at most 60 s) until at most @keep fibers of @g are alive (the caller,
 * when it is one): producers of futures nobody waits on any more run to their end. */
static void wait_idle(SchedulingGroup *g, uint64_t keep)
{
        uint64_t deadline = sched_deadline_after(60 * SEC_NS);
        SchedGroupStats st;

        for (;;) {
                sched_group_stats(g, &st);
                if (st.fibers_alive <= keep)
                        return;
                cr_assert_lt(sched_now_ns(), deadline, "%llu fibers still alive",
                             (unsigned long long)st.fibers_alive);
                fiber_yield();
        }
}

static void *times_two(void *arg)
{
        return V(I(arg) * 2);
}

Test(future, async_value_is_got_by_every_waiter)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        FiberFuture *f = NULL;
        void *v = NULL;

        cr_assert_eq(fiber_async(&f, &a, times_two, V(21)), 0);
        cr_assert_eq(fiber_future_get(f, &v, SCHED_FOREVER), 0);
        cr_assert_eq(I(v), 42);
        cr_assert(fiber_future_ready(f));
        v = NULL;
        cr_assert_eq(fiber_future_get(f, &v, 0), 0, "a ready future answers a poll");
        cr_assert_eq(I(v), 42);
        cr_assert_eq(fiber_promise_set(f, V(1)), -EINVAL, "not a promise");
        cr_assert_null(fiber_future_free(f));
        cr_assert_null(fiber_future_free(NULL));
        cr_assert_eq(fiber_async(&f, &a, NULL, NULL), -EINVAL);
        wait_idle(g, 0);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ promises ------ */

typedef struct Waiting {
        FiberFuture *f;
        int rc;
        void *value;
        int started;
} Waiting;

static void wait_get(void *arg)
{
        Waiting *w = arg;
        __atomic_store_n(&w->started, 1, __ATOMIC_RELEASE);
        w->rc = fiber_future_get(w->f, &w->value, SCHED_FOREVER);
}

static void *promise_thread(void *arg)
{
        cr_assert_eq(fiber_promise_set(arg, V(7)), 0);
        return NULL;
}

Test(future, promise_set_by_a_thread_wakes_fibers)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        FiberFuture *p = NULL;
        Waiting w[4];
        Fiber *f[4];
        pthread_t t;

        cr_assert_eq(fiber_promise_new(&p), 0);
        cr_assert_not(fiber_future_ready(p));
        cr_assert_eq(fiber_future_get(p, NULL, 0), -ETIMEDOUT);
        for (int i = 0; i < 4; i++) {
                w[i] = (Waiting){.f = p, .rc = 1};
                cr_assert_eq(fiber_create(&f[i], &a, wait_get, &w[i]), 0);
        }
        cr_assert_eq(pthread_create(&t, NULL, promise_thread, p), 0);
        cr_assert_eq(pthread_join(t, NULL), 0);
        for (int i = 0; i < 4; i++) {
                cr_assert_eq(fiber_join(f[i]), 0);
                cr_assert_eq(w[i].rc, 0);
                cr_assert_eq(I(w[i].value), 7);
        }
        cr_assert_eq(fiber_promise_set(p, V(8)), -EALREADY, "set once");
        fiber_future_free(p);
        sched_group_free(g);
}

Test(future, get_deadline_passes)
{
        FiberFuture *p = NULL;
        uint64_t t0 = sched_now_ns();

        cr_assert_eq(fiber_promise_new(&p), 0);
        cr_assert_eq(fiber_future_get(p, NULL, t0 + 20 * MS_NS), -ETIMEDOUT);
        cr_assert_geq(sched_now_ns() - t0, 20 * MS_NS);
        cr_assert_eq(fiber_when_all(&p, 1, 0), -ETIMEDOUT);
        cr_assert_eq(fiber_when_any(&p, 1, sched_deadline_after(5 * MS_NS)), -ETIMEDOUT);
        cr_assert_eq(fiber_promise_set(p, V(1)), 0);
        cr_assert_eq(fiber_when_any(&p, 1, 0), 0);
        fiber_future_free(p);
}

typedef struct CancelGet {
        FiberFuture *p;
        Waiting w;
} CancelGet;

static void cancel_getter(void *arg)
{
        CancelGet *k = arg;
        Fiber *f = NULL;

        cr_assert_eq(fiber_create(&f, NULL, wait_get, &k->w), 0);
        while (!__atomic_load_n(&k->w.started, __ATOMIC_ACQUIRE))
                fiber_yield(); /* one worker: it is parked once we run again */
        fiber_cancel(f);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(k->w.rc, -ECANCELED);
        cr_assert_null(k->w.value);
}

Test(future, cancel_interrupts_a_parked_getter)
{
        SchedulingGroup *g = test_group(1);
        CancelGet k = {0};
        void *v = NULL;

        cr_assert_eq(fiber_promise_new(&k.p), 0);
        k.w.f = k.p;
        run_in_fiber(g, cancel_getter, &k);
        /* the cancelled waiter left: setting wakes nobody stale */
        cr_assert_eq(fiber_promise_set(k.p, V(5)), 0);
        cr_assert_eq(fiber_future_get(k.p, &v, 0), 0);
        cr_assert_eq(I(v), 5);
        fiber_future_free(k.p);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ then ---------- */

static void *add_arg(void *value, void *arg)
{
        return V(I(value) + I(arg));
}

static void *times_arg(void *value, void *arg)
{
        return V(I(value) * I(arg));
}

Test(future, then_chains_in_order)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        FiberFuture *f0 = NULL, *f1 = NULL, *f2 = NULL, *p = NULL, *f3 = NULL;
        void *v = NULL;

        cr_assert_eq(fiber_async(&f0, &a, times_two, V(3)), 0);         /* 6 */
        cr_assert_eq(fiber_future_then(&f1, f0, &a, add_arg, V(1)), 0); /* 7 */
        f0 = fiber_future_free(f0); /* the continuation keeps its own reference */
        cr_assert_eq(fiber_future_then(&f2, f1, &a, times_arg, V(10)), 0); /* 70 */
        f1 = fiber_future_free(f1);
        cr_assert_eq(fiber_future_get(f2, &v, sched_deadline_after(60 * SEC_NS)), 0);
        cr_assert_eq(I(v), 70);

        /* a continuation of a promise runs only once the promise is set */
        cr_assert_eq(fiber_promise_new(&p), 0);
        cr_assert_eq(fiber_future_then(&f3, p, &a, add_arg, V(100)), 0);
        cr_assert_eq(fiber_future_get(f3, NULL, sched_deadline_after(5 * MS_NS)), -ETIMEDOUT);
        cr_assert_eq(fiber_promise_set(p, V(1)), 0);
        cr_assert_eq(fiber_future_get(f3, &v, sched_deadline_after(60 * SEC_NS)), 0);
        cr_assert_eq(I(v), 101);
        fiber_future_free(f2);
        fiber_future_free(f3);
        fiber_future_free(p);
        wait_idle(g, 0);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ fan-out ------- */

static void *square(void *arg)
{
        intptr_t x = I(arg);
        if (x % 16 == 0)
                fiber_yield(); /* some switch before they return */
        return V(x * x);
}

typedef struct FanOut {
        SchedulingGroup *g;
        FiberFuture **futs;
        int n;
        long long sum, expect; /* what when_all gathered, and what it should have */
} FanOut;

static void fan_out(void *arg)
{
        FanOut *fo = arg;
        long long sum = 0, expect = 0;

        for (int i = 0; i < fo->n; i++)
                cr_assert_eq(fiber_async(&fo->futs[i], NULL, square, V(i)), 0);
        cr_assert_eq(fiber_when_all(fo->futs, (size_t)fo->n, sched_deadline_after(60 * SEC_NS)), 0);
        for (int i = 0; i < fo->n; i++) {
                void *v = NULL;
                cr_assert(fiber_future_ready(fo->futs[i]));
                cr_assert_eq(fiber_future_get(fo->futs[i], &v, 0), 0);
                sum += I(v);
                expect += (long long)i * i;
                fiber_future_free(fo->futs[i]);
        }
        cr_assert_eq(sum, expect);
        fo->sum = sum;
        fo->expect = expect;
}

Test(future, when_all_over_a_fan_out)
{
        FanOut fo = {.g = test_group(2), .n = FANOUT};

        fo.futs = calloc(FANOUT, sizeof(*fo.futs));
        run_in_fiber(fo.g, fan_out, &fo);
        cr_assert_eq(fo.sum, fo.expect);
        cr_assert_neq(fo.expect, 0);
        free(fo.futs);
        sched_group_free(fo.g);
}

static void *promise_setter(void *arg)
{
        cr_assert_eq(fiber_promise_set(arg, V(33)), 0);
        return NULL;
}

Test(future, when_any_returns_the_one_set)
{
        FiberFuture *p[4];
        pthread_t t;

        for (int i = 0; i < 4; i++)
                cr_assert_eq(fiber_promise_new(&p[i]), 0);
        cr_assert_eq(fiber_when_any(p, 4, 0), -ETIMEDOUT);
        cr_assert_eq(fiber_when_any(p, 0, 0), -EINVAL);
        cr_assert_eq(pthread_create(&t, NULL, promise_setter, p[2]), 0);
        cr_assert_eq(fiber_when_any(p, 4, sched_deadline_after(60 * SEC_NS)), 2);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert_eq(fiber_promise_set(p[3], V(1)), 0);
        cr_assert_eq(fiber_when_any(p, 4, 0), 2, "the lowest ready one");
        for (int i = 0; i < 4; i++) {
                if (i != 2 && i != 3)
                        cr_assert_eq(fiber_promise_set(p[i], NULL), 0);
                fiber_future_free(p[i]);
        }
}

/* Many rounds of when_any against setters racing on two workers: each when_any returns
 * a future that is ready; its nodes are unlinked from the others (ASan sees a stale
 * one being woken). */
typedef struct AnyRace {
        FiberFuture *p[3];
        int rounds;
        int won; /* rounds whose when_any named a ready future */
} AnyRace;

static void any_set(void *arg)
{
        fiber_promise_set(arg, V(1));
}

static void any_race(void *arg)
{
        AnyRace *r = arg;

        for (int i = 0; i < r->rounds; i++) {
                FiberFuture *p[3];
                int k;
                for (int j = 0; j < 3; j++) {
                        cr_assert_eq(fiber_promise_new(&p[j]), 0);
                        FiberAttr a = {.detached = true};
                        cr_assert_eq(fiber_create(NULL, &a, any_set, p[j]), 0);
                }
                k = fiber_when_any(p, 3, sched_deadline_after(60 * SEC_NS));
                cr_assert(k >= 0 && k < 3, "when_any returned %d", k);
                cr_assert(fiber_future_ready(p[k]));
                r->won++;
                cr_assert_eq(fiber_when_all(p, 3, sched_deadline_after(60 * SEC_NS)), 0);
                for (int j = 0; j < 3; j++)
                        fiber_future_free(p[j]);
        }
        wait_idle(fiber_group(fiber_self()), 1); /* the detached setters have returned */
}

Test(future, when_any_races_with_setters)
{
        SchedulingGroup *g = test_group(2);
        AnyRace r = {.rounds = FANOUT / 10};

        run_in_fiber(g, any_race, &r);
        cr_assert_eq(r.won, r.rounds);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ lifetime ------ */

static void *wait_then_return(void *arg)
{
        fiber_event_wait(arg, SCHED_FOREVER);
        return V(9);
}

typedef struct FreeEarly {
        SchedulingGroup *g;
        bool producers_done; /* every producer has returned */
} FreeEarly;

static void free_early(void *arg)
{
        FreeEarly *fe = arg;
        SchedulingGroup *g = fe->g;
        FiberEvent go;
        FiberFuture *f = NULL, *t = NULL;

        fiber_event_init(&go);
        cr_assert_eq(fiber_async(&f, NULL, wait_then_return, &go), 0);
        cr_assert_eq(fiber_future_then(&t, f, NULL, add_arg, V(1)), 0);
        fiber_future_free(f); /* both dropped before the producers ran */
        fiber_future_free(t);
        fiber_event_set(&go);
        wait_idle(g, 1); /* the producers set and free them: ASan checks the rest */
        fe->producers_done = true;
}

Test(future, freed_before_ready_is_finished_by_its_producer)
{
        FreeEarly fe = {.g = test_group(2)};
        run_in_fiber(fe.g, free_early, &fe);
        cr_assert(fe.producers_done);
        sched_group_free(fe.g);
}
