/* SPDX-License-Identifier: MIT */
/*
 * waitslot.h — a worker's wait slot: where an idle worker sleeps on a futex until a
 * producer claims it from the group's sleeping mask and wakes it.
 *
 * It keeps a wake-up count, so a wake that comes before the wait is not lost: the wait
 * then returns at once (flare's WaitSlot, shared/seeds/003). One thread waits on a slot;
 * any thread may wake it.
 *
 * A worker that sleeps in its group's poll set instead (reactor_poll_wait(), Go's
 * netpoller shape) publishes the poll set's wake-up eventfd in kickfd while it does: a
 * wake then writes that eventfd instead of making a futex call.
 */
#ifndef FIBERD_WAITSLOT_H
#define FIBERD_WAITSLOT_H

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct WaitSlot {
        int wakeups; /* pending wake-ups + 1; 0 while its worker sleeps */
        int kickfd;  /* eventfd to write while its worker sleeps in the poll set; -1 */
} __attribute__((aligned(128))) WaitSlot;

static inline void wait_slot_init(WaitSlot *s)
{
        __atomic_store_n(&s->wakeups, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->kickfd, -1, __ATOMIC_RELAXED);
}

/* Wake a worker that sleeps either on the futex or in the poll set (kickfd). */
static inline void wait_slot_kick(WaitSlot *s, int nr)
{
        int fd = __atomic_load_n(&s->kickfd, __ATOMIC_ACQUIRE);

        if (fd >= 0) {
                const unsigned long long one = 1;
                if (syscall(SYS_write, fd, &one, sizeof(one)) < 0) {
                        /* an eventfd add fails only when the counter would overflow,
                         * and then it is readable already */
                }
                return;
        }
        syscall(SYS_futex, &s->wakeups, FUTEX_WAKE_PRIVATE, nr, NULL, NULL, 0);
}

/* wait_slot_wake - wake the slot's worker, or let its next wait return at once.
 * Return: true when a wake syscall (futex, or eventfd write) was made. Context: any
 * thread. */
static inline int wait_slot_wake(WaitSlot *s)
{
        if (__atomic_fetch_add(&s->wakeups, 1, __ATOMIC_ACQ_REL) == 0) {
                wait_slot_kick(s, 1);
                return 1;
        }
        return 0;
}

/* wait_slot_wait - consume one wake-up, sleeping until there is one.
 * Context: the slot's own worker thread only. */
static inline void wait_slot_wait(WaitSlot *s)
{
        if (__atomic_fetch_sub(&s->wakeups, 1, __ATOMIC_ACQ_REL) == 1) {
                do {
                        syscall(SYS_futex, &s->wakeups, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
                } while (__atomic_load_n(&s->wakeups, __ATOMIC_ACQUIRE) == 0);
        }
}

/* wait_slot_wake_forever - make every later wait return at once (group stop). */
static inline void wait_slot_wake_forever(WaitSlot *s)
{
        __atomic_exchange_n(&s->wakeups, 0x40000000, __ATOMIC_ACQ_REL);
        wait_slot_kick(s, INT_MAX);
}

#endif
