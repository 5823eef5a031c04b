/* SPDX-License-Identifier: MIT */
/*
 * chan.c — Go's channels for fibers and plain pthreads: buffered and unbuffered
 * FiberChans, close, and select (libgo's co_chan, shared/seeds/004, on the design of
 * Go's runtime/chan.go and runtime/select.go).
 *
 * A channel is a ring of capacity elements (none for an unbuffered channel), a closed
 * flag and two FIFO queues of parked parties, recvq and sendq, all under one spinlock
 * per channel. The invariants are Go's: a receiver parks only while the ring is empty
 * and no sender is parked, a sender only while the ring is full and no receiver is
 * parked, so at most one of the two queues holds anyone, and a parked receiver means an
 * empty ring.
 *
 * Parked parties are ChanWaiters (Go's sudog): one node per channel operation, on the
 * parking fiber's (or thread's) stack, linked on the channel's queue, pointing at the
 * ChanSelect of its call: one Waiter (waiter.c) shared by every case of a select. A
 * counterpart pops nodes off the queue under the channel's lock and claims the Waiter
 * (waiter_claim(): a compare-and-swap, Go's selectDone); the first claim wins and the
 * value moves straight between the two parties' memory while the lock is held (the
 * winner copies into a parked receiver's elem, or out of a parked sender's), and the
 * winner records which case fired before it wakes the waiter after unlocking. A node
 * whose claim fails belongs to a select already served elsewhere, or to a waiter
 * leaving by timeout or cancellation: it is dropped from the queue and the next one is
 * tried, so no value is lost. A woken waiter locks its channels again to unlink the
 * nodes nobody popped; a claimer only touches a node under its channel's lock, so once
 * the waiter has held each lock its stack may go.
 *
 * Select locks every channel of its cases in address order (Go's lockorder, so two
 * selects over the same channels cannot deadlock), polls the cases in a random order
 * (Go's pollorder: the choice among ready cases is uniform), and only if none is ready
 * enqueues a node per case and parks. Plain send and receive are the one-case path
 * without the shuffling and sorting.
 *
 * Close marks the channel and claims every parked node with result -EPIPE; receivers
 * drain the ring before they see -EPIPE. Sending on a closed channel returns -EPIPE
 * instead of Go's panic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

struct FiberChan {
        int lock;             /* spinlock over everything below */
        bool closed;          /* fiber_chan_close() was called */
        size_t elem_size;     /* bytes per element */
        size_t cap;           /* ring slots; 0: unbuffered */
        size_t head;          /* ring index of the oldest element */
        size_t count;         /* elements in the ring */
        ListHead recvq;       /* ChanWaiter.link: parked receivers, FIFO */
        ListHead sendq;       /* ChanWaiter.link: parked senders, FIFO */
        unsigned char ring[]; /* cap * elem_size bytes, allocated with the channel */
};

/* One blocking call: the Waiter every case shares, and what its claimer recorded. */
typedef struct ChanSelect {
        Waiter w;
        int fired;  /* index of the case that fired; written by the claimer */
        int result; /* 0 or -EPIPE; written by the claimer */
} ChanSelect;

/* One parked operation (Go's sudog), on the parker's stack. */
typedef struct ChanWaiter {
        ListHead link;   /* in its channel's recvq or sendq (channel lock) */
        ChanSelect *sel; /* the call it belongs to */
        void *elem;      /* send: the value; receive: where it goes (NULL: dropped) */
        int index;       /* its case index */
} ChanWaiter;

/* ------------------------------------------------------------------ life ---------- */

int fiber_chan_new(FiberChan **ret, size_t elem_size, size_t capacity)
{
        FiberChan *c;
        size_t bytes;

        if (!ret || __builtin_mul_overflow(elem_size, capacity, &bytes) ||
            bytes > SIZE_MAX - sizeof(*c))
                return -EINVAL;
        c = calloc(1, sizeof(*c) + bytes);
        if (!c)
                return -ENOMEM;
        c->elem_size = elem_size;
        c->cap = capacity;
        list_init(&c->recvq);
        list_init(&c->sendq);
        *ret = c;
        return 0;
}

FiberChan *fiber_chan_free(FiberChan *c)
{
        free(c);
        return NULL;
}

size_t fiber_chan_len(FiberChan *c)
{
        size_t n;

        spin_lock(&c->lock);
        n = c->count;
        spin_unlock(&c->lock);
        return n;
}

size_t fiber_chan_cap(const FiberChan *c)
{
        return c->cap;
}

/* ------------------------------------------------------------------ queues -------- */

/* Pop parked nodes off @q until one's Waiter is claimed; record @result for it. A node
 * whose claim fails is already served or leaving: dropped. Channel lock held. */
static ChanWaiter *chan_dequeue(ListHead *q, int result)
{
        ListHead *e;

        while ((e = list_pop_head(q))) {
                ChanWaiter *cw = list_entry(e, ChanWaiter, link);
                if (waiter_claim(&cw->sel->w, 0)) {
                        cw->sel->fired = cw->index;
                        cw->sel->result = result;
                        return cw;
                }
        }
        return NULL;
}

static void *chan_slot(FiberChan *c, size_t i)
{
        return c->ring + (i % c->cap) * c->elem_size;
}

static void chan_copy(void *dst, const void *src, size_t n)
{
        if (dst && n)
                memcpy(dst, src, n);
}

/*
 * Try to send @elem now: to a parked receiver, else into the ring.
 * Return: 1 sent (*wake: a receiver to wake after unlocking, or NULL); 0 it would park;
 * -EPIPE closed. Channel lock held.
 */
static int chan_try_send_locked(FiberChan *c, const void *elem, ChanWaiter **wake)
{
        ChanWaiter *cw;

        *wake = NULL;
        if (c->closed)
                return -EPIPE;
        cw = chan_dequeue(&c->recvq, 0);
        if (cw) {
                chan_copy(cw->elem, elem, c->elem_size);
                *wake = cw;
                return 1;
        }
        if (c->count < c->cap) {
                chan_copy(chan_slot(c, c->head + c->count), elem, c->elem_size);
                c->count++;
                return 1;
        }
        return 0;
}

/*
 * Try to receive into @out now: from the ring (refilling it from a parked sender), else
 * straight from a parked sender (unbuffered).
 * Return: 1 received (*wake as above); 0 it would park; -EPIPE closed and drained.
 * Channel lock held.
 */
static int chan_try_recv_locked(FiberChan *c, void *out, ChanWaiter **wake)
{
        ChanWaiter *cw;

        *wake = NULL;
        if (c->count > 0) {
                chan_copy(out, chan_slot(c, c->head), c->elem_size);
                c->head = (c->head + 1) % c->cap;
                c->count--;
                /* a parked sender means the ring was full: its value goes in the
                 * slot just freed, behind every older one (FIFO kept) */
                cw = chan_dequeue(&c->sendq, 0);
                if (cw) {
                        chan_copy(chan_slot(c, c->head + c->count), cw->elem, c->elem_size);
                        c->count++;
                        *wake = cw;
                }
                return 1;
        }
        cw = chan_dequeue(&c->sendq, 0);
        if (cw) {
                chan_copy(out, cw->elem, c->elem_size);
                *wake = cw;
                return 1;
        }
        return c->closed ? -EPIPE : 0;
}

static void chan_wake(ChanWaiter *cw)
{
        if (cw)
                waiter_wake(&cw->sel->w);
}

int fiber_chan_close(FiberChan *c)
{
        ListHead batch = LIST_HEAD_INIT(batch);
        ListHead *e, *next;
        ChanWaiter *cw;

        spin_lock(&c->lock);
        if (c->closed) {
                spin_unlock(&c->lock);
                return -EPIPE;
        }
        c->closed = true;
        /* claimed nodes are linked on a local batch through their (free) links */
        while ((cw = chan_dequeue(&c->recvq, -EPIPE)))
                list_add_tail(&batch, &cw->link);
        while ((cw = chan_dequeue(&c->sendq, -EPIPE)))
                list_add_tail(&batch, &cw->link);
        spin_unlock(&c->lock);
        /* each may be gone once woken: the next is read first */
        list_for_each_safe(e, next, &batch) chan_wake(list_entry(e, ChanWaiter, link));
        return 0;
}

/* ------------------------------------------------------------------ send, recv ---- */

/* Park on @q of @c (locked on entry, unlocked on return) until claimed, @deadline_ns or
 * cancellation. Return: the claimer's result (0, -EPIPE); -ETIMEDOUT; -ECANCELED. */
static int chan_park(FiberChan *c, ListHead *q, void *elem, uint64_t deadline_ns)
{
        ChanSelect sel = {.fired = -1};
        ChanWaiter cw = {.sel = &sel, .elem = elem, .index = 0};
        int r;

        waiter_prepare(&sel.w);
        list_add_tail(q, &cw.link);
        spin_unlock(&c->lock);
        r = waiter_block(&sel.w, deadline_ns);
        if (r < 0) {
                spin_lock(&c->lock);
                if (list_linked(&cw.link))
                        list_del(&cw.link);
                spin_unlock(&c->lock);
                return r;
        }
        return sel.result;
}

int fiber_chan_send(FiberChan *c, const void *elem, uint64_t deadline_ns)
{
        ChanWaiter *wake;
        int r;

        if (fiber_cancelled())
                return -ECANCELED;
        spin_lock(&c->lock);
        r = chan_try_send_locked(c, elem, &wake);
        if (r != 0 || deadline_ns == 0) {
                spin_unlock(&c->lock);
                chan_wake(wake);
                return r > 0 ? 0 : r < 0 ? r : -ETIMEDOUT;
        }
        return chan_park(c, &c->sendq, (void *)elem, deadline_ns);
}

int fiber_chan_recv(FiberChan *c, void *ret_elem, uint64_t deadline_ns)
{
        ChanWaiter *wake;
        int r;

        if (fiber_cancelled())
                return -ECANCELED;
        spin_lock(&c->lock);
        r = chan_try_recv_locked(c, ret_elem, &wake);
        if (r != 0 || deadline_ns == 0) {
                spin_unlock(&c->lock);
                chan_wake(wake);
                return r > 0 ? 0 : r < 0 ? r : -ETIMEDOUT;
        }
        return chan_park(c, &c->recvq, ret_elem, deadline_ns);
}

/* ------------------------------------------------------------------ select -------- */

/* A xorshift64* generator per thread, for the poll order. Not inline: the thread-local
 * address must not be kept across a switch (a fiber may resume on another thread), and
 * select draws all its numbers before it parks. */
static __attribute__((noinline)) uint32_t chan_random(void)
{
        static __thread uint64_t state;
        uint64_t x = state;

        if (UNLIKELY(!x))
                x = (clock_tsc_now() ^ (uintptr_t)&state) | 1;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        state = x;
        return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

/* Lock every distinct channel of @order (sorted by address), or unlock in reverse. */
static void select_lock(FiberChanCase *cases, const uint8_t *order, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (i == 0 || cases[order[i]].chan != cases[order[i - 1]].chan)
                        spin_lock(&cases[order[i]].chan->lock);
}

static void select_unlock(FiberChanCase *cases, const uint8_t *order, size_t n)
{
        for (size_t i = n; i-- > 0;)
                if (i == 0 || cases[order[i]].chan != cases[order[i - 1]].chan)
                        spin_unlock(&cases[order[i]].chan->lock);
}

int fiber_chan_select(FiberChanCase *cases, size_t n, uint64_t deadline_ns)
{
        uint8_t poll[FIBER_CHAN_SELECT_MAX] = {0}, lock[FIBER_CHAN_SELECT_MAX] = {0};
        ChanWaiter nodes[FIBER_CHAN_SELECT_MAX];
        ChanSelect sel = {.fired = -1};
        size_t m = 0;
        int r;

        if (n > FIBER_CHAN_SELECT_MAX || (n && !cases))
                return -EINVAL;
        if (fiber_cancelled())
                return -ECANCELED;
        /* pollorder: the live cases, shuffled (Fisher-Yates); lockorder: sorted by
         * channel address (insertion sort: at most 64 cases) */
        for (size_t i = 0; i < n; i++) {
                size_t j;
                if (!cases[i].chan)
                        continue;
                j = chan_random() % (m + 1);
                poll[m] = poll[j];
                poll[j] = (uint8_t)i;
                for (j = m; j > 0 && (uintptr_t)cases[lock[j - 1]].chan > (uintptr_t)cases[i].chan;
                     j--)
                        lock[j] = lock[j - 1];
                lock[j] = (uint8_t)i;
                m++;
        }

        select_lock(cases, lock, m);
        for (size_t i = 0; i < m; i++) {
                FiberChanCase *k = &cases[poll[i]];
                ChanWaiter *wake;
                r = k->op == FIBER_CHAN_SEND ? chan_try_send_locked(k->chan, k->elem, &wake)
                                             : chan_try_recv_locked(k->chan, k->elem, &wake);
                if (r != 0) {
                        select_unlock(cases, lock, m);
                        chan_wake(wake);
                        k->result = r < 0 ? r : 0;
                        return poll[i];
                }
        }
        if (deadline_ns == 0) {
                select_unlock(cases, lock, m);
                return -ETIMEDOUT;
        }

        waiter_prepare(&sel.w);
        for (size_t i = 0; i < m; i++) {
                FiberChanCase *k = &cases[lock[i]];
                nodes[i] = (ChanWaiter){.sel = &sel, .elem = k->elem, .index = lock[i]};
                list_add_tail(k->op == FIBER_CHAN_SEND ? &k->chan->sendq : &k->chan->recvq,
                              &nodes[i].link);
        }
        select_unlock(cases, lock, m);

        r = waiter_block(&sel.w, deadline_ns);

        /* unlink what nobody popped; after holding each lock no claimer touches them.
         * The node that fired is not ours to look at: its claimer popped it and may
         * have linked it on its wake batch (fiber_chan_close()). */
        select_lock(cases, lock, m);
        for (size_t i = 0; i < m; i++)
                if ((r < 0 || nodes[i].index != sel.fired) && list_linked(&nodes[i].link))
                        list_del(&nodes[i].link);
        select_unlock(cases, lock, m);
        if (r < 0)
                return r;
        cases[sel.fired].result = sel.result;
        return sel.fired;
}
