/* SPDX-License-Identifier: MIT */
/*
 * reactor.c — each scheduling group's reactor thread: timers and fd readiness.
 *
 * Design choice (issue "timers: one timer thread per group or per-worker heaps"): one
 * thread per group, like tRPC-Cpp Fiber's TimerWorker (shared/seeds/001), which also
 * owns the group's epoll set. It sleeps in epoll_wait with no timeout; the earliest
 * deadline is programmed into a CLOCK_MONOTONIC timerfd (absolute, nanosecond
 * resolution) that sits in the same epoll set. Workers never sleep with a timeout, so a
 * busy worker never has to look at timers, and an idle group makes no wake-ups at all.
 *
 * Timers are an intrusive pairing heap under a spinlock: arming one never allocates;
 * the timerfd is re-programmed only when the earliest deadline changes.
 *
 * fd waits: a table indexed by fd (chunks allocated on first use, never freed) holds at
 * most one input and one output Waiter per fd. A wait registers the fd with
 * EPOLLONESHOT, so each readiness is reported once; when it fires the reactor claims
 * the waiter under the entry's lock. A fiber leaving by timeout or cancellation clears
 * its slot under the same lock, so the reactor never touches a Waiter that is gone, and
 * a stale event for an fd whose waiter left finds an empty slot.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/spinlock.h"

#define EV_TIMER UINT64_MAX
#define EV_STOP (UINT64_MAX - 1)

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

static void timerfd_program(Reactor *r)
{
        struct itimerspec its = {0};
        uint64_t deadline = r->timers ? r->timers->deadline_ns : 0;

        if (deadline == r->armed_ns)
                return;
        r->armed_ns = deadline;
        if (deadline) {
                its.it_value.tv_sec = (time_t)(deadline / 1000000000u);
                its.it_value.tv_nsec = (long)(deadline % 1000000000u);
                if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
                        its.it_value.tv_nsec = 1;
        }
        timerfd_settime(r->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

void timer_add(Reactor *r, TimerNode *n, Waiter *w, uint64_t deadline_ns)
{
        (void)w; /* the node is embedded in its Waiter; container_of finds it */
        n->deadline_ns = deadline_ns;
        n->child = n->sibling = n->prev = NULL;
        spin_lock(&r->timer_lock);
        n->armed = true;
        r->timers = heap_meld(r->timers, n);
        if (r->timers == n)
                timerfd_program(r);
        spin_unlock(&r->timer_lock);
}

void timer_remove(Reactor *r, TimerNode *n)
{
        spin_lock(&r->timer_lock);
        if (n->armed) {
                r->timers = heap_remove(r->timers, n);
                n->armed = false;
        }
        spin_unlock(&r->timer_lock);
}

#define waiter_of_timer(n) ((Waiter *)((char *)(n)-offsetof(Waiter, timer)))

static void timers_fire(Reactor *r)
{
        uint64_t now = sched_now_ns();
        Waiter *batch[64];
        unsigned n_batch;
        TimerNode *n;

        do {
                n_batch = 0;
                spin_lock(&r->timer_lock);
                while (n_batch < 64 && (n = r->timers) && n->deadline_ns <= now) {
                        Waiter *w = waiter_of_timer(n);
                        r->timers = heap_merge_pairs(n->child);
                        n->armed = false;
                        /* A claimed Waiter stays put until we wake it (its fiber cannot
                         * resume, its thread waits on the futex), so the wake-ups, which
                         * make syscalls, happen after the lock is released: workers in
                         * timer_remove() must not spin behind them. */
                        if (waiter_claim(w, -ETIMEDOUT))
                                batch[n_batch++] = w;
                }
                r->armed_ns = UINT64_MAX; /* force re-programming: the timerfd has expired */
                timerfd_program(r);
                spin_unlock(&r->timer_lock);
                for (unsigned i = 0; i < n_batch; i++)
                        waiter_wake(batch[i]);
        } while (n_batch == 64);
}

/* ------------------------------------------------------------------ fds ----------- */

static FdEntry *fd_entry(Reactor *r, int fd)
{
        unsigned chunk = (unsigned)fd / FD_CHUNK;
        FdEntry *c;

        if (fd < 0 || chunk >= FD_CHUNKS)
                return NULL;
        c = __atomic_load_n(&r->chunks[chunk], __ATOMIC_ACQUIRE);
        if (!c) {
                FdEntry *fresh = calloc(FD_CHUNK, sizeof(FdEntry));
                if (!fresh)
                        return NULL;
                if (!__atomic_compare_exchange_n(&r->chunks[chunk], &c, fresh, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                        free(fresh); /* someone else installed it: c is theirs */
                else
                        c = fresh;
        }
        return &c[(unsigned)fd % FD_CHUNK];
}

/* (Re)arm @fd for whatever its waiters want. Called with the entry locked. */
static int fd_arm(Reactor *r, int fd, FdEntry *e)
{
        struct epoll_event ev = {0};
        int rc;

        ev.events = EPOLLONESHOT | (e->in ? EPOLLIN | EPOLLRDHUP : 0) | (e->out ? EPOLLOUT : 0);
        ev.data.u64 = (uint64_t)fd;
        if (e->added) {
                rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev);
                if (rc == 0)
                        return 0;
                rc = sched_errno();
                if (rc != ENOENT)
                        return -rc;
                /* The fd was closed and reused since: add it again. */
        }
        rc = epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
        if (rc < 0 && sched_errno() == EEXIST) /* read before any switch */
                rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev);
        if (rc < 0)
                return -sched_errno();
        e->added = true;
        return 0;
}

static void fd_ready(Reactor *r, int fd, uint32_t revents)
{
        FdEntry *e = fd_entry(r, fd);
        Waiter *wake_in = NULL, *wake_out = NULL;

        if (!e)
                return;
        spin_lock(&e->lock);
        if (e->in && (revents & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP))) {
                if (waiter_claim(e->in, 0)) {
                        e->in->data = revents;
                        wake_in = e->in;
                }
                e->in = NULL;
        }
        if (e->out && (revents & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                if (waiter_claim(e->out, 0)) {
                        e->out->data = revents;
                        wake_out = e->out;
                }
                e->out = NULL;
        }
        if (e->in || e->out)
                fd_arm(r, fd, e); /* the one-shot fired for the other direction */
        /* Wake under the entry lock, like the timers: the waiter re-takes it to leave. */
        if (wake_in)
                waiter_wake(wake_in);
        if (wake_out)
                waiter_wake(wake_out);
        spin_unlock(&e->lock);
}

int fiber_wait_fd(int fd, uint32_t events, uint64_t deadline_ns)
{
        Fiber *f = fiber_self();
        Reactor *r;
        FdEntry *e;
        Waiter w;
        int rc;

        if (!(events & (EPOLLIN | EPOLLOUT)))
                return -EINVAL;
        if (!f) {
                /* A plain pthread: poll(2) with a millisecond timeout. */
                struct pollfd p = {.fd = fd,
                                   .events = (short)((events & EPOLLIN ? POLLIN : 0) |
                                                     (events & EPOLLOUT ? POLLOUT : 0))};
                int ms = -1;
                if (deadline_ns != SCHED_FOREVER) {
                        uint64_t now = sched_now_ns();
                        ms = deadline_ns <= now ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
                }
                rc = poll(&p, 1, ms);
                if (rc < 0)
                        return -sched_errno();
                if (rc == 0)
                        return -ETIMEDOUT;
                return (p.revents & POLLIN ? EPOLLIN : 0) | (p.revents & POLLOUT ? EPOLLOUT : 0) |
                       (p.revents & POLLERR ? EPOLLERR : 0) | (p.revents & POLLHUP ? EPOLLHUP : 0);
        }
        if (__atomic_load_n(&f->cancelled, __ATOMIC_ACQUIRE))
                return -ECANCELED;
        if (deadline_ns == 0)
                return -ETIMEDOUT;
        r = &f->group->reactor;
        e = fd_entry(r, fd);
        if (!e)
                return fd < 0 ? -EBADF : -ENOMEM;

        waiter_prepare(&w);
        spin_lock(&e->lock);
        if (((events & EPOLLIN) && e->in) || ((events & EPOLLOUT) && e->out)) {
                spin_unlock(&e->lock);
                return -EBUSY;
        }
        if (events & EPOLLIN)
                e->in = &w;
        if (events & EPOLLOUT)
                e->out = &w;
        rc = fd_arm(r, fd, e);
        if (rc < 0) {
                if (e->in == &w)
                        e->in = NULL;
                if (e->out == &w)
                        e->out = NULL;
                spin_unlock(&e->lock);
                return rc;
        }
        spin_unlock(&e->lock);

        rc = waiter_block(&w, deadline_ns);

        spin_lock(&e->lock);
        if (e->in == &w)
                e->in = NULL;
        if (e->out == &w)
                e->out = NULL;
        spin_unlock(&e->lock);
        return rc < 0 ? rc : (int)w.data;
}

/* ------------------------------------------------------------------ thread -------- */

static void *reactor_main(void *arg)
{
        SchedulingGroup *g = arg;
        Reactor *r = &g->reactor;
        struct epoll_event evs[64];
        char name[16];

        snprintf(name, sizeof(name), "%.9s-tmr", g->name);
        pthread_setname_np(pthread_self(), name);
        for (;;) {
                int n = epoll_wait(r->epfd, evs, 64, -1);
                if (n < 0) {
                        int e = errno; /* the reactor is a plain thread */
                        if (e == EINTR)
                                continue;
                        sched_log(LOG_CRIT, "reactor: epoll_wait: %s", strerror(e));
                        abort();
                }
                for (int i = 0; i < n; i++) {
                        uint64_t key = evs[i].data.u64;
                        if (key == EV_STOP)
                                return NULL;
                        if (key == EV_TIMER) {
                                uint64_t expirations;
                                if (read(r->timerfd, &expirations, sizeof(expirations)) < 0) {
                                        /* EAGAIN: re-programmed in between; fine */
                                }
                                timers_fire(r);
                        } else {
                                fd_ready(r, (int)key, evs[i].events);
                        }
                }
        }
}

int reactor_init(Reactor *r, SchedulingGroup *g)
{
        struct epoll_event ev = {.events = EPOLLIN};
        int rc;

        memset(r, 0, sizeof(*r));
        r->epfd = r->timerfd = r->stopfd = -1;
        r->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (r->epfd < 0)
                goto out_errno;
        r->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (r->timerfd < 0)
                goto out_errno;
        r->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (r->stopfd < 0)
                goto out_errno;
        ev.data.u64 = EV_TIMER;
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->timerfd, &ev) < 0)
                goto out_errno;
        ev.data.u64 = EV_STOP;
        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->stopfd, &ev) < 0)
                goto out_errno;
        rc = -pthread_create(&r->thread, NULL, reactor_main, g);
        if (rc < 0)
                goto out_close;
        return 0;

out_errno:
        rc = -errno;
out_close:
        if (r->stopfd >= 0)
                close(r->stopfd);
        if (r->timerfd >= 0)
                close(r->timerfd);
        if (r->epfd >= 0)
                close(r->epfd);
        return rc;
}

void reactor_term(Reactor *r)
{
        uint64_t one = 1;

        if (write(r->stopfd, &one, sizeof(one)) < 0) {
                /* an eventfd write of 1 cannot fail short of a bug */
        }
        pthread_join(r->thread, NULL);
        close(r->stopfd);
        close(r->timerfd);
        close(r->epfd);
        for (unsigned i = 0; i < FD_CHUNKS; i++)
                free(r->chunks[i]);
}
