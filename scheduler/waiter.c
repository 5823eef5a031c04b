/* SPDX-License-Identifier: MIT */
/*
 * waiter.c — one blocking call's Waiter: the part every wait shares (mutexes,
 * condition variables, sleeps, joins, fd waits).
 *
 * A wait has up to four wakers: whoever signals the wait list, the group's timer, a
 * canceller, and the reactor for fds. They race for the Waiter's token; exactly one
 * wins, records why (0, -ETIMEDOUT, -ECANCELED) and wakes the waiter. A fiber waiter
 * is woken through the handoff handshake (runtime.h), a thread waiter through a futex.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

void waiter_prepare(Waiter *w)
{
        Fiber *f = fiber_self();

        w->next = w->prev = NULL;
        w->fiber = f;
        w->token = 0;
        w->reason = 0;
        w->futex = 0;
        w->linked = false;
        w->uncancellable = false;
        w->data = 0;
        w->timer.armed = false;
        if (f)
                __atomic_store_n(&f->handoff, 0, __ATOMIC_RELAXED);
}

bool waiter_claim(Waiter *w, int reason)
{
        int expected = 0;

        if (!__atomic_compare_exchange_n(&w->token, &expected, 1, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
                return false;
        w->reason = reason;
        return true;
}

void waiter_wake(Waiter *w)
{
        Fiber *f = w->fiber;

        if (f) {
                if (__atomic_fetch_add(&f->handoff, 1, __ATOMIC_ACQ_REL) == 1)
                        sched_make_ready(f);
                return;
        }
        /* The thread may return (and its stack frame go) as soon as it sees 1; a wake
         * on a stale futex address is harmless. */
        __atomic_store_n(&w->futex, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &w->futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static int waiter_block_thread(Waiter *w, uint64_t deadline_ns)
{
        while (!__atomic_load_n(&w->futex, __ATOMIC_ACQUIRE)) {
                struct timespec ts, *tsp = NULL;
                if (deadline_ns != SCHED_FOREVER) {
                        if (sched_now_ns() >= deadline_ns && waiter_claim(w, -ETIMEDOUT))
                                return -ETIMEDOUT;
                        ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
                        ts.tv_nsec = (long)(deadline_ns % 1000000000u);
                        tsp = &ts;
                }
                /* Absolute CLOCK_MONOTONIC timeout: FUTEX_WAIT_BITSET. */
                syscall(SYS_futex, &w->futex, FUTEX_WAIT_BITSET_PRIVATE, 0, tsp, NULL,
                        FUTEX_BITSET_MATCH_ANY);
                if (__atomic_load_n(&w->token, __ATOMIC_ACQUIRE))
                        deadline_ns = SCHED_FOREVER; /* claimed: the wake is coming */
        }
        return w->reason;
}

int waiter_block(Waiter *w, uint64_t deadline_ns)
{
        Fiber *f = w->fiber;
        Reactor *r;

        if (deadline_ns == 0 && waiter_claim(w, -ETIMEDOUT))
                return -ETIMEDOUT;
        if (!f)
                return waiter_block_thread(w, deadline_ns);

        if (!w->uncancellable) {
                spin_lock(&f->waiter_lock);
                f->cur_waiter = w;
                spin_unlock(&f->waiter_lock);
        }
        if (!w->uncancellable && __atomic_load_n(&f->cancelled, __ATOMIC_ACQUIRE) &&
            waiter_claim(w, -ECANCELED)) {
                spin_lock(&f->waiter_lock);
                f->cur_waiter = NULL;
                spin_unlock(&f->waiter_lock);
                return -ECANCELED;
        }
        r = &f->group->reactor;
        if (deadline_ns != SCHED_FOREVER)
                timer_add(r, &w->timer, w, deadline_ns);

        fiber_switch_out(f, FIBER_ACT_PARK);

        if (deadline_ns != SCHED_FOREVER)
                timer_remove(r, &w->timer);
        if (!w->uncancellable) {
                spin_lock(&f->waiter_lock);
                f->cur_waiter = NULL;
                spin_unlock(&f->waiter_lock);
        }
        return w->reason;
}

/* ------------------------------------------------------------------ wait lists ---- */

void wait_list_push(SchedWaitList *l, Waiter *w)
{
        Waiter *tail = l->tail;

        w->next = NULL;
        w->prev = tail;
        if (tail)
                tail->next = w;
        else
                l->head = w;
        l->tail = w;
        w->linked = true;
}

void wait_list_remove(SchedWaitList *l, Waiter *w)
{
        if (!w->linked)
                return;
        if (w->prev)
                w->prev->next = w->next;
        else
                l->head = w->next;
        if (w->next)
                w->next->prev = w->prev;
        else
                l->tail = w->prev;
        w->next = w->prev = NULL;
        w->linked = false;
}

Waiter *wait_list_pop(SchedWaitList *l)
{
        Waiter *w = l->head;
        if (w)
                wait_list_remove(l, w);
        return w;
}
