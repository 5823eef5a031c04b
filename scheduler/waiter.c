/* SPDX-License-Identifier: MIT */
/*
 * waiter.c — one blocking call's Waiter and the wake-up handshake: the part every
 * wait shares (mutexes, condition variables, sleeps, joins, fd waits). Wait lists are
 * sync.c's.
 *
 * A wait has up to four wakers: whoever signals the wait list, the group's timer, a
 * canceller, and the reactor for fds. They race for the Waiter's token
 * (waiter_claim()); exactly one wins, records why (0, -ETIMEDOUT, -ECANCELED) and wakes
 * the waiter (waiter_wake()). A thread waiter is woken through a futex.
 *
 * The wake-up handshake (why no lock is held across a switch): a parking fiber sets
 * handoff = 0 (waiter_prepare()), registers its Waiter where its wakers look, and
 * switches away (waiter_block()). The waker that won the token (waiter_wake()) and the
 * code that runs first on the next stack once the switch away from the fiber is
 * complete (fiber_finish_switch(), in fiber.c) each add 1 to handoff
 * (waiter_handoff_arrive(), inline in runtime.h because it is on the switch path); the
 * second arrival makes the fiber ready. So a fiber is never resumed while its
 * registers are still being saved, and never made ready twice.
 */
#include <errno.h>
#include <linux/futex.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

void waiter_prepare(Waiter *w)
{
        Fiber *f = fiber_self();

        list_init(&w->link);
        w->fiber = f;
        w->token = 0;
        w->reason = 0;
        w->futex = 0;
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
                waiter_handoff_arrive(f);
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
                        ts = timespec_store_ns(deadline_ns);
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

/* Set (or, with NULL, clear) the blocking call fiber_cancel() interrupts. */
static void waiter_register(Fiber *f, Waiter *w)
{
        spin_lock(&f->waiter_lock);
        f->cur_waiter = w;
        spin_unlock(&f->waiter_lock);
}

int waiter_block(Waiter *w, uint64_t deadline_ns)
{
        Fiber *f = w->fiber;
        TimerHeap *timers;

        if (deadline_ns == 0 && waiter_claim(w, -ETIMEDOUT))
                return -ETIMEDOUT;
        if (!f)
                return waiter_block_thread(w, deadline_ns);

        if (!w->uncancellable)
                waiter_register(f, w);
        if (!w->uncancellable && __atomic_load_n(&f->cancelled, __ATOMIC_ACQUIRE) &&
            waiter_claim(w, -ECANCELED)) {
                waiter_register(f, NULL);
                return -ECANCELED;
        }
        /* A deadline already past needs no timer and no switch. */
        if (deadline_ns != SCHED_FOREVER && deadline_ns <= sched_now_ns() &&
            waiter_claim(w, -ETIMEDOUT)) {
                if (!w->uncancellable)
                        waiter_register(f, NULL);
                return -ETIMEDOUT;
        }
        timers = &f->group->reactor.timers;
        if (deadline_ns != SCHED_FOREVER)
                timer_add(timers, &w->timer, deadline_ns);

        fiber_switch_out(f, FIBER_ACT_PARK);

        /* Hooked on a group that hooks nothing (fiberd's job run inline): back on a
         * worker, it may hold it for long again, so what yielded there meanwhile goes
         * where a sibling or spare can take it (sched_handoff_yielders()) */
        if (UNLIKELY(f->hooks && !f->group->hooks))
                sched_handoff_yielders();
        if (deadline_ns != SCHED_FOREVER)
                timer_remove(timers, &w->timer);
        if (!w->uncancellable)
                waiter_register(f, NULL);
        return w->reason;
}
