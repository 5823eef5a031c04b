/* SPDX-License-Identifier: MIT */
/*
 * reactor-epoll.c — the reactor's poll backend on Linux epoll, behind the small
 * interface reactor.c uses (redis's ae_epoll.c under ae.c): a poll set, fds watched for
 * good (the timerfd, the wake-up eventfd) under a key of their own, fds armed one shot
 * (EPOLLONESHOT) under their own number, and a wait with a timeout.
 *
 * Event bits are epoll's: fiber_wait_fd() takes EPOLLIN / EPOLLOUT in its public API.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "scheduler/runtime.h"

int reactor_backend_init(Reactor *r)
{
        r->epfd = epoll_create1(EPOLL_CLOEXEC);
        if (r->epfd < 0)
                return -errno;
        return 0;
}

void reactor_backend_term(Reactor *r)
{
        if (r->epfd >= 0)
                close(r->epfd);
        r->epfd = -1;
}

int reactor_backend_add(Reactor *r, int fd, uint64_t key, bool edge)
{
        struct epoll_event ev = {.events = EPOLLIN | (edge ? EPOLLET : 0), .data.u64 = key};

        if (epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                return -errno;
        return 0;
}

int reactor_backend_arm(Reactor *r, int fd, uint32_t events, bool *added)
{
        struct epoll_event ev = {.events = EPOLLONESHOT | events, .data.u64 = (uint64_t)fd};
        int rc;

        /* errno is read right after each call, through io_errno(): a fiber calls this. */
        if (*added) {
                rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev);
                if (rc == 0)
                        return 0;
                rc = io_errno();
                if (rc != ENOENT)
                        return -rc;
                /* The fd was closed and reused since: add it again. */
        }
        rc = epoll_ctl(r->epfd, EPOLL_CTL_ADD, fd, &ev);
        if (rc < 0 && io_errno() == EEXIST)
                rc = epoll_ctl(r->epfd, EPOLL_CTL_MOD, fd, &ev);
        if (rc < 0)
                return -io_errno();
        *added = true;
        return 0;
}

int reactor_backend_poll(Reactor *r, ReactorEvent *evs, int max, int timeout_ms)
{
        struct epoll_event ev[64];
        int n;

        if (max > (int)ELEMENTSOF(ev))
                max = (int)ELEMENTSOF(ev);
        n = epoll_wait(r->epfd, ev, max, timeout_ms);
        if (n < 0)
                return -errno; /* no fiber runs on the polling thread's stack */
        for (int i = 0; i < n; i++)
                evs[i] = (ReactorEvent){.key = ev[i].data.u64, .events = ev[i].events};
        return n;
}
