/* SPDX-License-Identifier: MIT */
/*
 * reactor.c — each scheduling group's poll set (reactor-epoll.c; the timerfd of
 * timer.c is one more fd in it, as in redis's ae.c over ae_epoll.c) and who waits in it.
 *
 * Go's netpoller shape (runtime/netpoll.go, proc.go findRunnable): a worker about to
 * sleep with nothing to run takes the poll set if nobody holds it and sleeps in it
 * instead of on its wait slot's futex (reactor_poll_wait()); a ready fd or an expired
 * timer wakes it directly, it makes the fibers ready on itself and runs them. One
 * thread at a time holds the poll set (Reactor.poller), so events are handled by one
 * thread in order; the group's other idle workers sleep on their futexes and are woken
 * first for new work (group_wake_sleeper()), so the holder stays where it is. A wake of
 * the holder's slot writes an eventfd in the set (WaitSlot.kickfd). Letting go of the
 * set, the holder wakes a sibling asleep on its futex to take it.
 *
 * While every worker is busy nobody sleeps in the set, and the group's reactor thread
 * looks at it every tick (1 ms, backing off to 10 ms while it finds nothing), as Go's
 * sysmon polls the network when no P has: a
 * fiber that yields in a loop never lets its worker go idle, and fibers other groups
 * may steal must still be made ready. While a worker holds the set the reactor thread
 * sleeps with no timeout; the holder wakes it when it lets go. Before this, the
 * reactor thread (tRPC-Cpp Fiber's TimerWorker, shared/seeds/001) held the set for
 * good, and every ready fd cost a wake-up of it and then one of a worker: at 1,000
 * jobs/s the reactor thread alone took a fifth of the daemon's CPU (docs/benchmarks.md).
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
#include <time.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* Poll keys besides fds. */
#define KEY_TIMER UINT64_MAX
#define KEY_WAKE (UINT64_MAX - 1)

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

/* ------------------------------------------------------------------ the poll set -- */

/* Handle what one poll brought. Context: the poll set's holder. */
static void reactor_dispatch(Reactor *r, const ReactorEvent *evs, int n)
{
        for (int i = 0; i < n; i++) {
                uint64_t key = evs[i].key;
                if (key == KEY_TIMER) {
                        timer_fire(&r->timers);
                } else if (key == KEY_WAKE) {
                        /* edge-triggered: reported once per write, never read (its
                         * count cannot reach 2^64 - 1 at one write per wake-up) */
                } else {
                        fd_ready(r, (int)key, evs[i].events);
                }
        }
}

static bool poll_take(Reactor *r, int who)
{
        int none = POLLER_NONE;

        return __atomic_load_n(&r->poller, __ATOMIC_RELAXED) == POLLER_NONE &&
               __atomic_compare_exchange_n(&r->poller, &none, who, false, __ATOMIC_SEQ_CST,
                                           __ATOMIC_RELAXED);
}

/* Give the poll set up. Somebody must watch it again soon: a worker asleep on its futex
 * (it would not know the poll set is free) is woken to take it on its way back to
 * sleep, and the reactor thread, if it sleeps with no timeout, is woken to look every
 * tick while no worker does (the woken worker may find work and never come to the poll
 * set). The stores and loads are seq_cst, paired with a worker setting its sleeping bit
 * before it tries to take the poll set and with the reactor thread announcing its sleep
 * before it looks at the holder. */
static void poll_release(SchedulingGroup *g)
{
        Reactor *r = &g->reactor;
        int one = 1;

        __atomic_store_n(&r->poller, POLLER_NONE, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&g->sleeping_mask, __ATOMIC_SEQ_CST) &&
            __atomic_load_n(&r->poller, __ATOMIC_SEQ_CST) == POLLER_NONE)
                group_wake_sleeper(g);
        if (__atomic_load_n(&r->thread_sleep, __ATOMIC_SEQ_CST) == 1 &&
            __atomic_compare_exchange_n(&r->thread_sleep, &one, 0, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
                futex_wake(&r->thread_sleep);
}

bool reactor_poll_wait(SchedulingGroup *g, Worker *w)
{
        Reactor *r = &g->reactor;
        WaitSlot *s = &g->slots[w->index];
        ReactorEvent evs[64];
        int n = 0, zero = 0;

        if (!poll_take(r, (int)w->index))
                return false;
        __atomic_store_n(&s->kickfd, r->wakefd, __ATOMIC_SEQ_CST);
        if (__atomic_fetch_sub(&s->wakeups, 1, __ATOMIC_ACQ_REL) == 1) {
                __atomic_fetch_add(&r->worker_sleeps, 1, __ATOMIC_RELAXED);
                n = reactor_backend_poll(r, evs, (int)ELEMENTSOF(evs), -1);
                /* Not necessarily woken: back to "awake, nothing pending" unless a waker
                 * added its wake-up meanwhile (then that one is the wake consumed). */
                __atomic_compare_exchange_n(&s->wakeups, &zero, 1, false, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE);
        }
        __atomic_store_n(&s->kickfd, -1, __ATOMIC_RELEASE);
        /* Awake before the fibers are made ready, so that their wake-ups do not pick
         * this worker from the sleeping mask. */
        __atomic_fetch_and(&g->sleeping_mask, ~(1ull << w->index), __ATOMIC_ACQ_REL);
        if (n > 0) {
                reactor_dispatch(r, evs, n);
                __atomic_fetch_add(&r->worker_events, (uint64_t)n, __ATOMIC_RELAXED);
        }
        poll_release(g);
        return true;
}

/* ------------------------------------------------------------------ thread -------- */

/* The reactor thread looks at the poll set every tick (1 ms, backing off to 10 ms while
 * it finds nothing) while nobody sleeps in it (every worker of the group busy), as Go's
 * sysmon polls the network when no P has for 10 ms:
 * so fds and timers are served while fibers keep every worker running (a fiber that
 * yields in a loop never lets its worker go idle), and fibers other groups may steal
 * are made ready. After REACTOR_IDLE_TICKS looks in a row that found nothing or found
 * a worker in the poll set, it sleeps with no timeout while a worker holds the poll
 * set; the worker wakes it when it lets go (poll_release()). */
#define REACTOR_TICK_NS NSEC_PER_MSEC
#define REACTOR_TICK_MAX_NS (10 * NSEC_PER_MSEC)
#define REACTOR_IDLE_TICKS 8

static void *reactor_main(void *arg)
{
        SchedulingGroup *g = arg;
        Reactor *r = &g->reactor;
        ReactorEvent evs[64];
        unsigned idle = 0;
        uint64_t tick = REACTOR_TICK_NS;
        char name[16];

        snprintf(name, sizeof(name), "%.9s-tmr", g->name);
        pthread_setname_np(pthread_self(), name);
        while (__atomic_load_n(&r->thread_sleep, __ATOMIC_ACQUIRE) != 2) {
                int n = 0;
                if (poll_take(r, POLLER_REACTOR)) {
                        __atomic_fetch_add(&r->reactor_looks, 1, __ATOMIC_RELAXED);
                        n = reactor_backend_poll(r, evs, (int)ELEMENTSOF(evs), 0);
                        if (n < 0 && n != -EINTR) {
                                sched_log(LOG_CRIT, "reactor: poll: %s", strerror(-n));
                                abort();
                        }
                        if (n > 0) {
                                reactor_dispatch(r, evs, n);
                                __atomic_fetch_add(&r->reactor_events, (uint64_t)n,
                                                   __ATOMIC_RELAXED);
                        }
                        poll_release(g);
                }
                idle = n > 0 ? 0 : idle + 1;
                /* Go's sysmon backs off the same way: a look that found nothing doubles
                 * the next delay, up to 10 ms; one that found events restores 1 ms. A
                 * thread waking every millisecond beside a busy worker costs it a few
                 * per cent on a VM whose idle vCPU polls before it halts. */
                tick = n > 0 ? REACTOR_TICK_NS : MIN(2 * tick, (uint64_t)REACTOR_TICK_MAX_NS);
                if (idle < REACTOR_IDLE_TICKS) {
                        futex_wait(&r->thread_sleep, 0, tick);
                        continue;
                }
                idle = 0;
                /* Announce the sleep, then look: a worker lets go of the poll set before
                 * it reads the flag (both seq_cst), so one of the two sees the other. */
                int zero = 0;
                if (!__atomic_compare_exchange_n(&r->thread_sleep, &zero, 1, false,
                                                 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
                        continue; /* stopping */
                full_fence();
                if (__atomic_load_n(&r->poller, __ATOMIC_SEQ_CST) >= 0)
                        futex_wait(&r->thread_sleep, 1, SCHED_FOREVER);
                zero = 1;
                __atomic_compare_exchange_n(&r->thread_sleep, &zero, 0, false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST);
        }
        return NULL;
}

int reactor_init(Reactor *r, SchedulingGroup *g)
{
        int rc;

        memset(r, 0, sizeof(*r));
        r->wakefd = -1;
        r->poller = POLLER_NONE;
        rc = reactor_backend_init(r);
        if (rc < 0)
                return rc;
        rc = timer_heap_init(&r->timers);
        if (rc < 0)
                goto out_backend;
        r->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (r->wakefd < 0) {
                rc = -errno;
                goto out_timers;
        }
        rc = reactor_backend_add(r, r->timers.timerfd, KEY_TIMER, false);
        if (rc < 0)
                goto out_wakefd;
        rc = reactor_backend_add(r, r->wakefd, KEY_WAKE, true);
        if (rc < 0)
                goto out_wakefd;
        rc = -pthread_create(&r->thread, NULL, reactor_main, g);
        if (rc < 0)
                goto out_wakefd;
        return 0;

out_wakefd:
        close(r->wakefd);
out_timers:
        timer_heap_term(&r->timers);
out_backend:
        reactor_backend_term(r);
        return rc;
}

void reactor_term(Reactor *r)
{
        __atomic_store_n(&r->thread_sleep, 2, __ATOMIC_SEQ_CST);
        futex_wake(&r->thread_sleep);
        pthread_join(r->thread, NULL);
        close(r->wakefd);
        timer_heap_term(&r->timers);
        reactor_backend_term(r);
        for (unsigned i = 0; i < FD_CHUNKS; i++)
                free(r->chunks[i]);
}
