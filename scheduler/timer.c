/* SPDX-License-Identifier: MIT */
/*
 * timer.c — a group's timers: deadlines of blocking calls in an intrusive pairing heap
 * (Fredman et al. 1986: insert O(1), pop-min and remove O(log n) amortized), and the
 * CLOCK_MONOTONIC timerfd (absolute, nanosecond resolution) that always holds the
 * earliest deadline. The timerfd sits in the reactor's poll set (reactor.c), so the
 * reactor thread sleeps without a timeout and an idle group makes no wake-ups at all;
 * workers never sleep with a timeout, so a busy worker never looks at timers.
 *
 * The heap is guarded by a spinlock: arming a timer never allocates (the node is
 * embedded in its Waiter), and the timerfd is re-programmed only when the earliest
 * deadline changes. No system call runs under the spinlock: a change of the earliest
 * deadline marks the heap dirty, and one thread at a time (whoever finds no other
 * doing it) re-reads the earliest deadline and calls timerfd_settime() until the heap
 * is clean (timerfd_sync()), so workers that arm timers never spin behind a syscall,
 * and the last setting always matches the heap. Expired timers are claimed under the
 * lock and woken after it is released (timer_fire()).
 */
#include <errno.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* ------------------------------------------------------------------ pairing heap -- */

static TimerNode *heap_meld(TimerNode *a, TimerNode *b)
{
        if (!a)
                return b;
        if (!b)
                return a;
        if (b->deadline_ns < a->deadline_ns) {
                TimerNode *t = a;
                a = b;
                b = t;
        }
        /* b becomes a's first child */
        b->prev = a;
        b->sibling = a->child;
        if (a->child)
                a->child->prev = b;
        a->child = b;
        a->sibling = NULL;
        a->prev = NULL;
        return a;
}

/* Two-pass pairing of a sibling list: left to right in pairs, then right to left. */
static TimerNode *heap_merge_pairs(TimerNode *first)
{
        TimerNode *pairs = NULL, *a, *b, *next, *root = NULL;

        while (first) {
                a = first;
                b = a->sibling;
                next = b ? b->sibling : NULL;
                a->sibling = a->prev = NULL;
                if (b)
                        b->sibling = b->prev = NULL;
                a = heap_meld(a, b);
                a->sibling = pairs; /* a stack of melded pairs */
                pairs = a;
                first = next;
        }
        while (pairs) {
                next = pairs->sibling;
                pairs->sibling = NULL;
                root = heap_meld(root, pairs);
                pairs = next;
        }
        return root;
}

static TimerNode *heap_remove(TimerNode *root, TimerNode *n)
{
        TimerNode *sub;

        if (n == root)
                return heap_merge_pairs(n->child);
        /* Unlink n from its sibling list (prev is the parent for a first child). */
        if (n->prev->child == n)
                n->prev->child = n->sibling;
        else
                n->prev->sibling = n->sibling;
        if (n->sibling)
                n->sibling->prev = n->prev;
        n->sibling = n->prev = NULL;
        sub = heap_merge_pairs(n->child);
        return heap_meld(root, sub);
}

/* ------------------------------------------------------------------ timers -------- */

/* Bring the timerfd up to the heap's earliest deadline. Any thread may call it after
 * marking the heap dirty; if another thread is at it already, that one sees the mark
 * and goes round again (the exchanges and loads are sequentially consistent, so one
 * of the two always sees the other). Context: any; no lock held. */
static void timerfd_sync(TimerHeap *h)
{
        struct itimerspec its;
        uint64_t want;
        bool change;

        do {
                if (__atomic_exchange_n(&h->programming, 1, __ATOMIC_SEQ_CST))
                        return; /* the thread at it will see dirty */
                while (__atomic_exchange_n(&h->dirty, 0, __ATOMIC_SEQ_CST)) {
                        spin_lock(&h->lock);
                        want = h->root ? h->root->deadline_ns : 0;
                        change = want != h->armed_ns;
                        h->armed_ns = want;
                        spin_unlock(&h->lock);
                        if (!change)
                                continue;
                        its = (struct itimerspec){0};
                        if (want) {
                                its.it_value = timespec_store_ns(want);
                                if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
                                        its.it_value.tv_nsec = 1;
                        }
                        timerfd_settime(h->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
                }
                __atomic_store_n(&h->programming, 0, __ATOMIC_SEQ_CST);
        } while (__atomic_load_n(&h->dirty, __ATOMIC_SEQ_CST));
}

void timer_add(TimerHeap *h, TimerNode *n, uint64_t deadline_ns)
{
        n->deadline_ns = deadline_ns;
        n->child = n->sibling = n->prev = NULL;
        spin_lock(&h->lock);
        n->armed = true;
        h->root = heap_meld(h->root, n);
        bool earliest = h->root == n && deadline_ns != h->armed_ns;
        spin_unlock(&h->lock);
        if (earliest) {
                __atomic_store_n(&h->dirty, 1, __ATOMIC_SEQ_CST);
                timerfd_sync(h);
        }
}

void timer_remove(TimerHeap *h, TimerNode *n)
{
        spin_lock(&h->lock);
        if (n->armed) {
                h->root = heap_remove(h->root, n);
                n->armed = false;
        }
        spin_unlock(&h->lock);
}

void timer_fire(TimerHeap *h)
{
        uint64_t now, expirations;
        Waiter *batch[64];
        unsigned n_batch;
        TimerNode *n;

        if (read(h->timerfd, &expirations, sizeof(expirations)) < 0) {
                /* EAGAIN: re-programmed in between; fine */
        }
        now = sched_now_ns();
        do {
                n_batch = 0;
                spin_lock(&h->lock);
                while (n_batch < 64 && (n = h->root) && n->deadline_ns <= now) {
                        Waiter *w = container_of(n, Waiter, timer);
                        h->root = heap_merge_pairs(n->child);
                        n->armed = false;
                        /* A claimed Waiter stays put until we wake it (its fiber cannot
                         * resume, its thread waits on the futex), so the wake-ups, which
                         * make syscalls, happen after the lock is released: workers in
                         * timer_remove() must not spin behind them. */
                        if (waiter_claim(w, -ETIMEDOUT))
                                batch[n_batch++] = w;
                }
                h->armed_ns = UINT64_MAX; /* force re-programming: the timerfd has expired */
                spin_unlock(&h->lock);
                __atomic_store_n(&h->dirty, 1, __ATOMIC_SEQ_CST);
                timerfd_sync(h);
                for (unsigned i = 0; i < n_batch; i++)
                        waiter_wake(batch[i]);
        } while (n_batch == 64);
}

int timer_heap_init(TimerHeap *h)
{
        *h = (TimerHeap){.timerfd = -1};
        h->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (h->timerfd < 0)
                return -errno;
        return 0;
}

void timer_heap_term(TimerHeap *h)
{
        if (h->timerfd >= 0)
                close(h->timerfd);
        h->timerfd = -1;
}
