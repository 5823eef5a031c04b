/* SPDX-License-Identifier: MIT */
/*
 * reactor.c — each scheduling group's reactor thread: it sleeps in the poll backend
 * (reactor-epoll.c) and wakes the fibers whose fd became ready or whose timer expired
 * (timer.c: the timerfd is one more fd in the same poll set), as redis's ae.c does over
 * ae_epoll.c.
 *
 * Design choice (issue "timers: one timer thread per group or per-worker heaps"): one
 * thread per group, like tRPC-Cpp Fiber's TimerWorker (shared/seeds/001), which also
 * owns the group's poll set.
 *
 * fd waits: a table indexed by fd (chunks allocated on first use, never freed) holds at
 * most one input and one output Waiter per fd. A wait arms the fd one-shot, so each
 * readiness is reported once; when it fires the reactor claims the waiter under the
 * entry's lock and wakes it after releasing the lock (a claimed Waiter stays put until
 * it is woken). A fiber leaving by timeout or cancellation clears its slot under the
 * same lock, so the reactor never touches a Waiter that is gone, and a stale event for
 * an fd whose waiter left finds an empty slot.
 *
 * No system call runs under an entry's spinlock: the reactor's fd_ready() and a fiber
 * registering would otherwise spin behind each other's epoll_ctl() and futex wake (13%
 * of fiberd's samples under trivial-job load). A registration bumps the
 * entry's gen; one thread at a time (fd_sync()) calls epoll_ctl() with the interest of
 * the waiters it finds and goes round until the interest it set is the latest, the
 * pattern timer.c uses for the timerfd.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* Poll keys besides fds. */
#define KEY_TIMER UINT64_MAX
#define KEY_STOP (UINT64_MAX - 1)

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

static uint32_t fd_interest(const FdEntry *e)
{
        return (e->in ? EPOLLIN | EPOLLRDHUP : 0) | (e->out ? EPOLLOUT : 0);
}

/* Bring @fd's one-shot interest in the backend up to its current waiters. Called without
 * the entry lock, after bumping e->gen under it; returns at once when another thread is
 * at it (that one goes round and sees the new gen). When arming fails, every waiter
 * then registered is claimed with the error (its wait returns it). Context: any. */
static void fd_sync(Reactor *r, int fd, FdEntry *e)
{
        Waiter *failed[2];
        unsigned nfailed = 0;

        spin_lock(&e->lock);
        if (e->arming) {
                spin_unlock(&e->lock);
                return;
        }
        e->arming = true;
        while (e->armed_gen != e->gen) {
                unsigned gen = e->gen;
                uint32_t events = fd_interest(e);
                bool added = e->added;
                int rc = 0;

                spin_unlock(&e->lock);
                if (events)
                        rc = reactor_backend_arm(r, fd, events, &added);
                spin_lock(&e->lock);
                e->added = added;
                e->armed_gen = gen;
                if (rc < 0) {
                        if (e->in && waiter_claim(e->in, rc))
                                failed[nfailed++] = e->in;
                        if (e->out && e->out != e->in && waiter_claim(e->out, rc))
                                failed[nfailed++] = e->out;
                        e->in = e->out = NULL;
                        e->armed_gen = e->gen;
                }
        }
        e->arming = false;
        spin_unlock(&e->lock);
        for (unsigned i = 0; i < nfailed; i++)
                waiter_wake(failed[i]);
}

static void fd_ready(Reactor *r, int fd, uint32_t revents)
{
        FdEntry *e = fd_entry(r, fd);
        Waiter *wake_in = NULL, *wake_out = NULL;
        bool rearm;

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
        /* The one-shot fired for one direction while the other still waits. */
        rearm = e->in || e->out;
        if (rearm)
                e->gen++;
        spin_unlock(&e->lock);
        if (rearm)
                fd_sync(r, fd, e);
        if (wake_in)
                waiter_wake(wake_in);
        if (wake_out)
                waiter_wake(wake_out);
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
                        ms = deadline_ns <= now ? 0
                                                : (int)((deadline_ns - now + NSEC_PER_MSEC - 1) /
                                                        NSEC_PER_MSEC);
                }
                rc = poll(&p, 1, ms);
                if (rc < 0)
                        return -io_errno();
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
        e->gen++;
        spin_unlock(&e->lock);
        /* Arming may fail (an fd epoll does not take): then fd_sync() claims this
         * Waiter with the error, and waiter_block() returns it at once. */
        fd_sync(r, fd, e);

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
        ReactorEvent evs[64];
        char name[16];

        snprintf(name, sizeof(name), "%.9s-tmr", g->name);
        pthread_setname_np(pthread_self(), name);
        for (;;) {
                int n = reactor_backend_poll(r, evs, (int)ELEMENTSOF(evs));
                if (n < 0) {
                        if (n == -EINTR)
                                continue;
                        sched_log(LOG_CRIT, "reactor: poll: %s", strerror(-n));
                        abort();
                }
                for (int i = 0; i < n; i++) {
                        uint64_t key = evs[i].key;
                        if (key == KEY_STOP)
                                return NULL;
                        if (key == KEY_TIMER)
                                timer_fire(&r->timers);
                        else
                                fd_ready(r, (int)key, evs[i].events);
                }
        }
}

int reactor_init(Reactor *r, SchedulingGroup *g)
{
        int rc;

        memset(r, 0, sizeof(*r));
        r->stopfd = -1;
        rc = reactor_backend_init(r);
        if (rc < 0)
                return rc;
        rc = timer_heap_init(&r->timers);
        if (rc < 0)
                goto out_backend;
        r->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (r->stopfd < 0) {
                rc = -errno;
                goto out_timers;
        }
        rc = reactor_backend_add(r, r->timers.timerfd, KEY_TIMER);
        if (rc < 0)
                goto out_stopfd;
        rc = reactor_backend_add(r, r->stopfd, KEY_STOP);
        if (rc < 0)
                goto out_stopfd;
        rc = -pthread_create(&r->thread, NULL, reactor_main, g);
        if (rc < 0)
                goto out_stopfd;
        return 0;

out_stopfd:
        close(r->stopfd);
out_timers:
        timer_heap_term(&r->timers);
out_backend:
        reactor_backend_term(r);
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
        timer_heap_term(&r->timers);
        reactor_backend_term(r);
        for (unsigned i = 0; i < FD_CHUNKS; i++)
                free(r->chunks[i]);
}
