/* SPDX-License-Identifier: MIT */
/* fd waits: the reactor resumes a fiber on readiness or timeout without blocking its
 * worker, and the fiber-aware read/write/accept/connect work on non-blocking fds. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "helpers.h"

typedef struct Pipe {
        int fd[2];
        int rc;
        int read_rc;
        char buf[16];
        int worker_free; /* another fiber ran while this one waited */
} Pipe;

static void reader(void *arg)
{
        Pipe *p = arg;
        p->rc = fiber_wait_fd(p->fd[0], EPOLLIN, sched_deadline_after(30 * SEC_NS));
        p->read_rc = (int)fiber_read(p->fd[0], p->buf, sizeof(p->buf), SCHED_FOREVER);
}

static void other(void *arg)
{
        Pipe *p = arg;
        p->worker_free = 1;
        if (write(p->fd[1], "hello", 5) != 5)
                p->worker_free = -1;
}

Test(fd, readiness_wakes_and_worker_stays_free)
{
        SchedulingGroup *g = test_group(1); /* one worker: the writer must run meanwhile */
        FiberAttr a = {.group = g};
        Pipe p = {0};
        Fiber *r, *w;

        cr_assert_eq(pipe2(p.fd, O_NONBLOCK | O_CLOEXEC), 0);
        cr_assert_eq(fiber_create(&r, &a, reader, &p), 0);
        cr_assert_eq(fiber_create(&w, &a, other, &p), 0);
        cr_assert_eq(fiber_join(r), 0);
        cr_assert_eq(fiber_join(w), 0);
        cr_assert_eq(p.worker_free, 1);
        cr_assert(p.rc & EPOLLIN);
        cr_assert_eq(p.read_rc, 5);
        cr_assert_eq(memcmp(p.buf, "hello", 5), 0);
        close(p.fd[0]);
        close(p.fd[1]);
        sched_group_free(g);
}

static void timeout_and_busy(void *arg)
{
        int *rc = arg;
        int fd[2];
        cr_assert_eq(pipe2(fd, O_NONBLOCK), 0);
        rc[0] = fiber_wait_fd(fd[0], EPOLLIN, sched_deadline_after(2 * MS_NS));
        rc[1] = (int)fiber_read(fd[0], rc, 1, sched_deadline_after(MS_NS));
        rc[2] = fiber_wait_fd(fd[0], 0, SCHED_FOREVER);
        rc[3] = fiber_wait_fd(-1, EPOLLIN, SCHED_FOREVER);
        /* the write end of an empty pipe is writable at once */
        rc[4] = fiber_wait_fd(fd[1], EPOLLOUT, sched_deadline_after(SEC_NS));
        close(fd[0]);
        close(fd[1]);
        /* an fd epoll does not take: the arming error, not a hang */
        int file = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(file, 0);
        rc[5] = fiber_wait_fd(file, EPOLLIN, sched_deadline_after(SEC_NS));
        close(file);
}

Test(fd, timeouts_and_errors)
{
        SchedulingGroup *g = test_group(1);
        int rc[6];
        run_in_fiber(g, timeout_and_busy, rc);
        cr_assert_eq(rc[0], -ETIMEDOUT);
        cr_assert_eq(rc[1], -ETIMEDOUT);
        cr_assert_eq(rc[2], -EINVAL);
        cr_assert_eq(rc[3], -EBADF);
        cr_assert(rc[4] & EPOLLOUT);
        cr_assert_eq(rc[5], -EPERM, "%d", rc[5]);
        sched_group_free(g);
}

/* An input and an output waiter on one fd register from two workers at once, 2,000
 * times: the one-shot interest set for them must cover both, whichever registers and
 * arms first (a lost interest leaves a waiter parked for ever, and the bounded waits
 * below fail). */
typedef struct BothWays {
        int fd[2]; /* a socketpair: fd[0] is waited on both ways */
        FiberLatch round_done;
        int bad;
} BothWays;

static void out_waiter(void *arg)
{
        BothWays *b = arg;
        int rc = fiber_wait_fd(b->fd[0], EPOLLOUT, sched_deadline_after(10 * SEC_NS));
        if (!(rc > 0 && (rc & EPOLLOUT)))
                __atomic_fetch_add(&b->bad, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&b->round_done);
}

static void in_waiter(void *arg)
{
        BothWays *b = arg;
        char c;
        int rc = fiber_wait_fd(b->fd[0], EPOLLIN, sched_deadline_after(10 * SEC_NS));
        if (!(rc > 0 && (rc & EPOLLIN)) || read(b->fd[0], &c, 1) != 1)
                __atomic_fetch_add(&b->bad, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&b->round_done);
}

static void both_ways(void *arg)
{
        BothWays *b = arg;
        FiberAttr a = {.detached = true};

        for (int i = 0; i < 2000 && !b->bad; i++) {
                fiber_latch_init(&b->round_done, 2);
                cr_assert_eq(fiber_create(NULL, &a, in_waiter, b), 0);
                cr_assert_eq(fiber_create(NULL, &a, out_waiter, b), 0);
                if (i % 2)
                        fiber_yield();
                cr_assert_eq(write(b->fd[1], "x", 1), 1);
                cr_assert_eq(fiber_latch_wait(&b->round_done, sched_deadline_after(30 * SEC_NS)), 0,
                             "round %d: a waiter never woke", i);
        }
}

Test(fd, input_and_output_waiters_arm_together)
{
        SchedulingGroup *g = test_group(2);
        BothWays b = {.bad = 0};

        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, b.fd), 0);
        run_in_fiber(g, both_ways, &b);
        cr_assert_eq(b.bad, 0);
        close(b.fd[0]);
        close(b.fd[1]);
        sched_group_free(g);
}

typedef struct Busy {
        int fd;
        FiberEvent started;
        int rc;
} Busy;

static void wait_long(void *arg)
{
        Busy *b = arg;
        fiber_event_set(&b->started);
        /* second_waiter may hold the slot for a moment first: wait until it is ours */
        while ((b->rc = fiber_wait_fd(b->fd, EPOLLIN, SCHED_FOREVER)) == -EBUSY)
                fiber_sleep_for(MS_NS / 10);
}

static void second_waiter(void *arg)
{
        Busy *b = arg;
        fiber_event_wait(&b->started, SCHED_FOREVER);
        /* the first may not be registered yet: retry until the slot is taken; wait_long
         * retries on -EBUSY, so whichever registers first, this loop ends */
        int rc;
        do {
                rc = fiber_wait_fd(b->fd, EPOLLIN, sched_deadline_after(MS_NS));
        } while (rc == -ETIMEDOUT);
        *(int *)&b[1].rc = rc;
}

Test(fd, one_input_waiter_per_fd_and_cancel)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        int fd[2];
        Busy b[2] = {0};
        Fiber *f1, *f2;

        cr_assert_eq(pipe2(fd, O_NONBLOCK), 0);
        b[0].fd = fd[0];
        fiber_event_init(&b[0].started);
        cr_assert_eq(fiber_create(&f1, &a, wait_long, &b[0]), 0);
        cr_assert_eq(fiber_create(&f2, &a, second_waiter, &b[0]), 0);
        cr_assert_eq(fiber_join(f2), 0);
        cr_assert_eq(b[1].rc, -EBUSY);
        fiber_cancel(f1);
        cr_assert_eq(fiber_join(f1), 0);
        cr_assert_eq(b[0].rc, -ECANCELED);
        close(fd[0]);
        close(fd[1]);
        sched_group_free(g);
}

typedef struct Net {
        int listen_fd;
        struct sockaddr_un addr;
        char got[64];
        ssize_t got_len;
        int connect_rc;
        size_t big;
} Net;

static void server(void *arg)
{
        Net *n = arg;
        int c = fiber_accept(n->listen_fd, sched_deadline_after(30 * SEC_NS));
        cr_assert_geq(c, 0);
        size_t total = 0;
        char buf[4096];
        for (;;) {
                ssize_t r = fiber_read(c, buf, sizeof(buf), sched_deadline_after(30 * SEC_NS));
                cr_assert_geq(r, 0);
                if (r == 0)
                        break;
                if (total == 0)
                        memcpy(n->got, buf, r < 64 ? (size_t)r : 64);
                total += (size_t)r;
        }
        n->got_len = (ssize_t)total;
        close(c);
}

static void client(void *arg)
{
        Net *n = arg;
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        n->connect_rc = fiber_connect(s, &n->addr, sizeof(n->addr), sched_deadline_after(SEC_NS));
        char *big = malloc(n->big);
        memset(big, 'x', n->big);
        memcpy(big, "ping", 4);
        /* far more than the socket buffer: write_all must wait for the reader */
        cr_assert_eq(fiber_write_all(s, big, n->big, sched_deadline_after(30 * SEC_NS)),
                     (ssize_t)n->big);
        free(big);
        close(s);
}

Test(fd, accept_connect_read_write)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        Net n = {.big = 4 << 20};
        Fiber *sf, *cf;
        char dir[] = "/tmp/fiberd-test-XXXXXX";

        cr_assert_not_null(mkdtemp(dir));
        n.addr.sun_family = AF_UNIX;
        snprintf(n.addr.sun_path, sizeof(n.addr.sun_path), "%s/s", dir);
        n.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        cr_assert_eq(bind(n.listen_fd, (struct sockaddr *)&n.addr, sizeof(n.addr)), 0);
        cr_assert_eq(listen(n.listen_fd, 16), 0);
        cr_assert_eq(fiber_create(&sf, &a, server, &n), 0);
        cr_assert_eq(fiber_create(&cf, &a, client, &n), 0);
        cr_assert_eq(fiber_join(cf), 0);
        cr_assert_eq(fiber_join(sf), 0);
        cr_assert_eq(n.connect_rc, 0);
        cr_assert_eq(n.got_len, (ssize_t)n.big);
        cr_assert_eq(memcmp(n.got, "ping", 4), 0);
        close(n.listen_fd);
        unlink(n.addr.sun_path);
        rmdir(dir);
        sched_group_free(g);
}

/* Go's netpoller shape: a worker with nothing to run sleeps in its group's poll set
 * itself, so a ready fd wakes the thread that runs the fiber; and while every worker
 * is busy (a fiber that yields in a loop never lets its worker go idle), the reactor
 * thread's look every millisecond still serves fds and timers. */
Test(fd, an_idle_worker_takes_fd_events_itself)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        SchedGroupStats st;
        uint64_t until = sched_deadline_after(30 * SEC_NS);
        Pipe p = {0};
        Fiber *r;

        cr_assert_eq(pipe2(p.fd, O_NONBLOCK | O_CLOEXEC), 0);
        cr_assert_eq(fiber_create(&r, &a, reader, &p), 0);
        /* the reader parked, its worker gone to sleep in the poll set and staying there */
        st = wait_poll_set_settled(g, until);
        uint64_t by_worker = st.worker_poll_events, by_reactor = st.reactor_poll_events;
        cr_assert_eq(write(p.fd[1], "hello", 5), 5);
        cr_assert_eq(fiber_join(r), 0);
        cr_assert(p.rc & EPOLLIN);
        cr_assert_eq(p.read_rc, 5);
        sched_group_stats(g, &st);
        cr_assert_gt(st.worker_poll_events, by_worker, "the worker took the event");
        cr_assert_eq(st.reactor_poll_events, by_reactor,
                     "the reactor thread looked while a worker held the poll set");
        close(p.fd[0]);
        close(p.fd[1]);
        sched_group_free(g);
}

typedef struct Hogged {
        int stop;
        Pipe pipe;
        FiberEvent done;
} Hogged;

static void yielder(void *arg)
{
        Hogged *b = arg;
        while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE))
                fiber_yield();
}

static void sleeper_then_reader(void *arg)
{
        Hogged *b = arg;
        fiber_sleep_for(2 * MS_NS); /* a timer */
        reader(&b->pipe);           /* an fd */
        __atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
        fiber_event_set(&b->done);
}

Test(fd, timers_and_fds_are_served_while_every_worker_is_busy)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        SchedGroupStats st;
        Hogged b = {0};
        Fiber *y, *s;

        cr_assert_eq(pipe2(b.pipe.fd, O_NONBLOCK | O_CLOEXEC), 0);
        cr_assert_eq(write(b.pipe.fd[1], "x", 1), 1); /* ready before the wait */
        fiber_event_init(&b.done);
        cr_assert_eq(fiber_create(&y, &a, yielder, &b), 0);
        cr_assert_eq(fiber_create(&s, &a, sleeper_then_reader, &b), 0);
        cr_assert_eq(fiber_event_wait(&b.done, sched_deadline_after(30 * SEC_NS)), 0,
                     "the timer or the fd was never served");
        cr_assert_eq(fiber_join(s), 0);
        cr_assert_eq(fiber_join(y), 0);
        cr_assert(b.pipe.rc & EPOLLIN);
        cr_assert_eq(b.pipe.read_rc, 1);
        sched_group_stats(g, &st);
        cr_assert_geq(st.reactor_poll_events, 2, "the reactor thread took the timer and the fd");
        close(b.pipe.fd[0]);
        close(b.pipe.fd[1]);
        sched_group_free(g);
}
