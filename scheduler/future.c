/* SPDX-License-Identifier: MIT */
/*
 * future.c — futures and promises (flare's and tRPC-Cpp Fiber's Future/Promise,
 * shared/seeds/000, 001): fiber_async() runs a function in a new fiber and hands back
 * the future of its value; fiber_future_then() chains a continuation; a promise lets
 * any thread fulfil a future by hand.
 *
 * A FiberFuture is a one-shot slot (ready flag + one void * value) with a list of
 * parked waiters, under a spinlock. Setting it (future_set(): the async fiber when its
 * function returns, the continuation fiber, or fiber_promise_set()) stores the value,
 * then claims and wakes every waiter, as sync.c's FiberEvent does; a waiter that is
 * leaving (timeout, cancellation) lost the claim and unlinks itself.
 *
 * Waiters are FutureWaiter nodes on the waiter's stack pointing at one Waiter
 * (waiter.c), so one call can wait on several futures at once: fiber_when_any() links a
 * node into each, and the first future set claims the shared Waiter with a
 * compare-and-swap (the same claim chan.c's select uses); the others skip it.
 *
 * Ownership: two references at birth, the caller's and the producer's (the fiber that
 * will compute the value, or the promise). A continuation fiber holds one more on the
 * future it follows until that one is ready. Freeing never cancels anything: a
 * computation whose future nobody wants any more still runs to its end. The
 * continuation fiber is made when then() is called and parks on its source, so
 * fiber_create()'s errors (a full group) come back to the caller at once instead of
 * being lost at the moment the source is set.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

struct FiberFuture {
        int refs;         /* atomic: the caller's, the producer's, continuations' */
        int lock;         /* spinlock over ready, value and waiters */
        bool ready;       /* the value is set */
        bool promise;     /* made by fiber_promise_new(): fiber_promise_set() sets it */
        void *value;      /* valid once ready */
        ListHead waiters; /* FutureWaiter.link, parked until ready */
        /* the producer fiber's work: fn(arg), or then_fn(value of source, arg) */
        FiberAsyncFn fn;
        FiberThenFn then_fn;
        void *arg;
        FiberFuture *source; /* then(): the future it follows, referenced until ready */
};

/* One blocking call, over one or several futures. */
typedef struct FutureWait {
        Waiter w;
        int fired; /* index of the future that claimed it; written by the claimer */
} FutureWait;

/* A parked waiter's node in one future's list, on the waiter's stack. */
typedef struct FutureWaiter {
        ListHead link; /* in the future's waiters (its lock) */
        FutureWait *wait;
        int index;
} FutureWaiter;

/* ------------------------------------------------------------------ life ---------- */

static FiberFuture *future_alloc(void)
{
        FiberFuture *f = calloc(1, sizeof(*f));

        if (!f)
                return NULL;
        f->refs = 2; /* the caller's and the producer's */
        list_init(&f->waiters);
        return f;
}

FiberFuture *fiber_future_free(FiberFuture *f)
{
        if (f && __atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) == 0)
                free(f);
        return NULL;
}

/* Store @value, wake every waiter. Return: 0; -EALREADY when already set. */
static int future_set(FiberFuture *f, void *value)
{
        ListHead batch = LIST_HEAD_INIT(batch);
        ListHead *e, *next;

        spin_lock(&f->lock);
        if (f->ready) {
                spin_unlock(&f->lock);
                return -EALREADY;
        }
        f->value = value;
        f->ready = true;
        while ((e = list_pop_head(&f->waiters))) {
                FutureWaiter *fw = list_entry(e, FutureWaiter, link);
                if (!waiter_claim(&fw->wait->w, 0))
                        continue; /* leaving, or another future of its when_any won */
                fw->wait->fired = fw->index;
                list_add_tail(&batch, &fw->link);
        }
        spin_unlock(&f->lock);
        /* each may be gone once woken: the next is read first */
        list_for_each_safe(e, next, &batch)
                waiter_wake(&list_entry(e, FutureWaiter, link)->wait->w);
        return 0;
}

bool fiber_future_ready(FiberFuture *f)
{
        bool ready;

        spin_lock(&f->lock);
        ready = f->ready;
        spin_unlock(&f->lock);
        return ready;
}

/* ------------------------------------------------------------------ waiting ------- */

int fiber_future_get(FiberFuture *f, void **ret_value, uint64_t deadline_ns)
{
        FutureWait wait = {.fired = -1};
        FutureWaiter node = {.wait = &wait, .index = 0};
        int r;

        if (fiber_cancelled())
                return -ECANCELED;
        spin_lock(&f->lock);
        if (!f->ready) {
                if (deadline_ns == 0) {
                        spin_unlock(&f->lock);
                        return -ETIMEDOUT;
                }
                waiter_prepare(&wait.w);
                list_add_tail(&f->waiters, &node.link);
                spin_unlock(&f->lock);
                r = waiter_block(&wait.w, deadline_ns);
                if (r < 0) {
                        spin_lock(&f->lock);
                        if (list_linked(&node.link))
                                list_del(&node.link);
                        spin_unlock(&f->lock);
                        return r;
                }
                spin_lock(&f->lock); /* pairs with future_set()'s: the value is seen */
        }
        if (ret_value)
                *ret_value = f->value;
        spin_unlock(&f->lock);
        return 0;
}

int fiber_when_all(FiberFuture *const *futs, size_t n, uint64_t deadline_ns)
{
        for (size_t i = 0; i < n; i++) {
                int r = fiber_future_get(futs[i], NULL, deadline_ns);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Unlink @nodes[0..@n) from futures that did not pop them. The node of @fired (-1:
 * none) is skipped: its claimer popped it and may still have it on its wake batch. */
static void when_any_unlink(FiberFuture *const *futs, FutureWaiter *nodes, size_t n, int fired)
{
        for (size_t i = 0; i < n; i++) {
                spin_lock(&futs[i]->lock);
                if ((int)i != fired && list_linked(&nodes[i].link))
                        list_del(&nodes[i].link);
                spin_unlock(&futs[i]->lock);
        }
}

int fiber_when_any(FiberFuture *const *futs, size_t n, uint64_t deadline_ns)
{
        FutureWaiter nodes[FIBER_CHAN_SELECT_MAX];
        FutureWait wait = {.fired = -1};
        size_t linked;
        int r;

        if (n == 0 || n > FIBER_CHAN_SELECT_MAX || !futs)
                return -EINVAL;
        if (fiber_cancelled())
                return -ECANCELED;
        for (size_t i = 0; i < n; i++)
                if (fiber_future_ready(futs[i]))
                        return (int)i;
        if (deadline_ns == 0)
                return -ETIMEDOUT;

        waiter_prepare(&wait.w);
        for (linked = 0; linked < n; linked++) {
                FiberFuture *f = futs[linked];
                spin_lock(&f->lock);
                if (f->ready) {
                        spin_unlock(&f->lock);
                        break;
                }
                nodes[linked] = (FutureWaiter){.wait = &wait, .index = (int)linked};
                list_add_tail(&f->waiters, &nodes[linked].link);
                spin_unlock(&f->lock);
        }
        if (linked < n) {
                /* futs[linked] turned ready while we linked the others: take our own
                 * Waiter back, unless one of those claimed it first (its wake is then
                 * coming, and must be waited for before this frame goes) */
                if (waiter_claim(&wait.w, 0)) {
                        wait.fired = (int)linked;
                        r = 0;
                } else {
                        r = waiter_block(&wait.w, SCHED_FOREVER);
                }
        } else {
                r = waiter_block(&wait.w, deadline_ns);
        }
        when_any_unlink(futs, nodes, linked, r < 0 ? -1 : wait.fired);
        return r < 0 ? r : wait.fired;
}

/* ------------------------------------------------------------------ producers ----- */

/* The body of an async or continuation fiber: compute, set, drop the producer's
 * reference (and the continuation's on its source). */
static void future_main(void *arg)
{
        FiberFuture *f = arg;
        void *value;

        if (f->source) {
                void *in;
                int r = fiber_future_get(f->source, &in, SCHED_FOREVER);
                f->source = fiber_future_free(f->source);
                value = r < 0 ? (void *)(intptr_t)r : f->then_fn(in, f->arg);
        } else {
                value = f->fn(f->arg);
        }
        future_set(f, value);
        fiber_future_free(f);
}

/* Start @f's producer fiber. On failure @f is freed (both references). */
static int future_start(FiberFuture **ret, FiberFuture *f, const FiberAttr *attr)
{
        FiberAttr a = attr ? *attr : (FiberAttr){0};
        int r;

        a.detached = true;
        r = fiber_create(NULL, &a, future_main, f);
        if (r < 0) {
                fiber_future_free(f->source);
                free(f);
                return r;
        }
        *ret = f;
        return 0;
}

int fiber_async(FiberFuture **ret, const FiberAttr *attr, FiberAsyncFn fn, void *arg)
{
        FiberFuture *f;

        if (!ret || !fn)
                return -EINVAL;
        f = future_alloc();
        if (!f)
                return -ENOMEM;
        f->fn = fn;
        f->arg = arg;
        return future_start(ret, f, attr);
}

int fiber_future_then(FiberFuture **ret, FiberFuture *src, const FiberAttr *attr, FiberThenFn fn,
                      void *arg)
{
        FiberFuture *f;

        if (!ret || !src || !fn)
                return -EINVAL;
        f = future_alloc();
        if (!f)
                return -ENOMEM;
        __atomic_add_fetch(&src->refs, 1, __ATOMIC_RELAXED);
        f->source = src;
        f->then_fn = fn;
        f->arg = arg;
        return future_start(ret, f, attr);
}

int fiber_promise_new(FiberFuture **ret)
{
        FiberFuture *f;

        if (!ret)
                return -EINVAL;
        f = future_alloc();
        if (!f)
                return -ENOMEM;
        f->promise = true;
        *ret = f;
        return 0;
}

int fiber_promise_set(FiberFuture *f, void *value)
{
        int r;

        if (!f || !f->promise)
                return -EINVAL;
        r = future_set(f, value);
        if (r < 0)
                return r;
        fiber_future_free(f); /* the promise's reference */
        return 0;
}
