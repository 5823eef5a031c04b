/* SPDX-License-Identifier: MIT */
/* Hooks (scheduler/hook.c): on a group with hook_blocking_calls, the C library's
 * blocking calls park the fiber and keep their meaning; elsewhere they are the real
 * call. Every test runs on ONE worker, so a call that blocked its thread instead of
 * parking its fiber would stop the other fibers the test needs and fail it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

static SchedulingGroup *hooked_group(unsigned workers)
{
        SchedGroupConfig cfg = {.workers = workers,
                                .control = {.stall_threshold_ns = SCHED_FOREVER,
                                            .rescue_after_ns = SCHED_FOREVER,
                                            .hook_blocking_calls = true}};
        SchedulingGroup *g = NULL;
        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        return g;
}

/* Start @n detached fibers of fn(arg) on @g and wait for all of them (a latch). */
typedef struct Many {
        FiberFn fn;
        void *arg;
        FiberLatch *done;
} Many;

static void many_trampoline(void *p)
{
        Many *m = p;
        m->fn(m->arg);
        fiber_latch_count_down(m->done);
}

static void run_many_attr(SchedulingGroup *g, unsigned n, FiberFn fn, void *arg, FiberEvent *go,
                          bool hook)
{
        FiberLatch done;
        Many *m = calloc(n, sizeof(*m));
        FiberAttr a = {.group = g, .detached = true, .hook_blocking_calls = hook};

        cr_assert(m);
        fiber_latch_init(&done, n);
        for (unsigned i = 0; i < n; i++) {
                m[i] = (Many){.fn = fn, .arg = arg, .done = &done};
                cr_assert_eq(fiber_create(NULL, &a, many_trampoline, &m[i]), 0);
        }
        if (go)
                fiber_event_set(go);
        cr_assert_eq(fiber_latch_wait(&done, sched_deadline_after(60 * SEC_NS)), 0,
                     "the fibers did not finish within 60 s");
        free(m);
}

static void run_many(SchedulingGroup *g, unsigned n, FiberFn fn, void *arg, FiberEvent *go)
{
        run_many_attr(g, n, fn, arg, go, false);
}

/* ------------------------------------------------------------------ sleeps -------- */

typedef struct Overlap {
        FiberEvent go; /* set once every fiber is created: they call at once */
        int in;        /* fibers inside the call now; atomic */
        int max;       /* the most at once */
        int errors;
        uint64_t min_ns; /* the shortest call */
} Overlap;

/* Wait for the start, so slow fiber creation (TSan) cannot spread the calls out. */
static void overlap_start(Overlap *o)
{
        cr_assert_eq(fiber_event_wait(&o->go, sched_deadline_after(60 * SEC_NS)), 0);
}

static void overlap_enter(Overlap *o)
{
        int now = __atomic_add_fetch(&o->in, 1, __ATOMIC_RELAXED);
        int max = __atomic_load_n(&o->max, __ATOMIC_RELAXED);
        while (now > max && !__atomic_compare_exchange_n(&o->max, &max, now, true, __ATOMIC_RELAXED,
                                                         __ATOMIC_RELAXED))
                ;
}

static void overlap_leave(Overlap *o, uint64_t t0, int rc)
{
        uint64_t took = sched_now_ns() - t0;
        uint64_t min = __atomic_load_n(&o->min_ns, __ATOMIC_RELAXED);
        while (took < min && !__atomic_compare_exchange_n(&o->min_ns, &min, took, true,
                                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
        if (rc != 0)
                __atomic_add_fetch(&o->errors, 1, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&o->in, 1, __ATOMIC_RELAXED);
}

static void do_usleep(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        uint64_t t0 = sched_now_ns();
        overlap_enter(o);
        int rc = usleep(50 * 1000);
        overlap_leave(o, t0, rc);
}

static void do_nanosleep(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        struct timespec ts = {.tv_nsec = 50 * 1000 * 1000};
        uint64_t t0 = sched_now_ns();
        overlap_enter(o);
        int rc = nanosleep(&ts, NULL);
        overlap_leave(o, t0, rc);
}

static void do_poll_nothing(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        uint64_t t0 = sched_now_ns();
        overlap_enter(o);
        int rc = poll(NULL, 0, 50);
        overlap_leave(o, t0, rc);
}

static void do_select_nothing(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        struct timeval tv = {.tv_usec = 50 * 1000};
        uint64_t t0 = sched_now_ns();
        overlap_enter(o);
        int rc = select(0, NULL, NULL, NULL, &tv);
        overlap_leave(o, t0, rc);
}

static void do_clock_nanosleep_abs(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        uint64_t t0 = sched_now_ns();
        overlap_enter(o);
        int rc = clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL);
        overlap_leave(o, t0, rc);
}

/* 100 fibers on one worker all sleep at once, and each sleeps its whole time. */
static bool check_sleeps(FiberFn fn, const char *what)
{
        SchedulingGroup *g = hooked_group(1);
        Overlap o = {.min_ns = UINT64_MAX};
        fiber_event_init(&o.go);
        run_many(g, 100, fn, &o, &o.go);
        cr_assert_eq(o.errors, 0, "%s failed in %d fibers", what, o.errors);
        cr_assert_eq(o.max, 100, "%s: only %d of 100 fibers slept at once on one worker", what,
                     o.max);
        cr_assert_geq(o.min_ns, 49 * MS_NS, "%s of 50 ms returned after %lu ns", what,
                      (unsigned long)o.min_ns);
        sched_group_free(g);
        return o.max == 100;
}

Test(hook, usleep_parks_the_fiber)
{
        cr_assert(check_sleeps(do_usleep, "usleep"));
}

Test(hook, nanosleep_parks_the_fiber)
{
        cr_assert(check_sleeps(do_nanosleep, "nanosleep"));
}

Test(hook, poll_without_fds_parks_the_fiber)
{
        cr_assert(check_sleeps(do_poll_nothing, "poll(NULL, 0, 50)"));
}

Test(hook, select_without_fds_parks_the_fiber)
{
        cr_assert(check_sleeps(do_select_nothing, "select(0, ..., 50 ms)"));
}

Test(hook, clock_nanosleep_absolute_realtime)
{
        cr_assert(check_sleeps(do_clock_nanosleep_abs, "clock_nanosleep(REALTIME, ABSTIME)"));
}

/* Off a hooked group the hooks are the real call: a fiber of a plain group blocks its
 * only worker, so two sleepers never overlap. */
Test(hook, plain_group_gets_the_real_call)
{
        SchedulingGroup *g = test_group(1);
        Overlap o = {.min_ns = UINT64_MAX};
        fiber_event_init(&o.go);
        run_many(g, 3, do_usleep, &o, &o.go);
        cr_assert_eq(o.errors, 0);
        cr_assert_eq(o.max, 1, "%d sleepers overlapped on a group without hooks", o.max);
        cr_assert(!sched_hook_active());
        sched_group_free(g);
}

static void check_active(void *arg)
{
        *(bool *)arg = sched_hook_active();
}

Test(hook, active_only_on_hooked_fibers)
{
        SchedulingGroup *g = hooked_group(1), *plain = test_group(1);
        bool on = false, off = true;
        run_in_fiber(g, check_active, &on);
        run_in_fiber(plain, check_active, &off);
        cr_assert(on);
        cr_assert(!off);
        cr_assert(!sched_hook_active(), "the test's main thread is no hooked fiber");
        sched_group_free(g);
        sched_group_free(plain);
}

/* FiberAttr.hook_blocking_calls on a plain group: those fibers' sleeps park (three
 * overlap on one worker), a child one of them creates is hooked too, and a fiber
 * created without it on the same group is not. */
typedef struct Child {
        bool parent, child, plain;
} Child;

static void check_child(void *arg)
{
        ((Child *)arg)->child = sched_hook_active();
}

static void check_parent(void *arg)
{
        Child *c = arg;
        Fiber *kid;
        c->parent = sched_hook_active();
        cr_assert_eq(fiber_create(&kid, NULL, check_child, c), 0);
        cr_assert_eq(fiber_join(kid), 0);
}

static void check_plain(void *arg)
{
        ((Child *)arg)->plain = sched_hook_active();
}

Test(hook, attr_hooks_a_fiber_and_its_children_on_a_plain_group)
{
        SchedulingGroup *g = test_group(1);
        Overlap o = {.min_ns = UINT64_MAX};
        Child c = {.plain = true};
        FiberAttr a = {.group = g, .hook_blocking_calls = true};
        Fiber *f;

        fiber_event_init(&o.go);
        run_many_attr(g, 3, do_usleep, &o, &o.go, true);
        cr_assert_eq(o.errors, 0);
        cr_assert_eq(o.max, 3, "%d of 3 hooked sleepers overlapped on one worker", o.max);
        cr_assert_eq(fiber_create(&f, &a, check_parent, &c), 0);
        cr_assert_eq(fiber_join(f), 0);
        run_in_fiber(g, check_plain, &c);
        cr_assert(c.parent, "a fiber created with hook_blocking_calls is not hooked");
        cr_assert(c.child, "its child in the same group is not hooked");
        cr_assert(!c.plain, "a fiber created without it is hooked");
        sched_group_free(g);
}

/* ------------------------------------------------------------------ sockets ------- */

typedef struct Pair {
        int fd[2];
        char buf[1 << 16];
        ssize_t got;
        int err;
        int flags_after; /* F_GETFL of the reader's fd after its read */
} Pair;

static void pair_reader(void *arg)
{
        Pair *p = arg;
        p->got = read(p->fd[0], p->buf, 5); /* blocking socket: parks until data */
        p->err = p->got < 0 ? errno : 0;
        p->flags_after = fcntl(p->fd[0], F_GETFL);
}

static void pair_writer(void *arg)
{
        Pair *p = arg;
        usleep(20 * 1000); /* the reader parks first */
        if (write(p->fd[1], "hello", 5) != 5)
                p->err = -1;
}

Test(hook, blocking_socket_read_parks_until_data)
{
        SchedulingGroup *g = hooked_group(1);
        FiberAttr a = {.group = g};
        Pair *p = calloc(1, sizeof(*p));
        Fiber *r, *w;

        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fd), 0);
        cr_assert_eq(fiber_create(&r, &a, pair_reader, p), 0);
        cr_assert_eq(fiber_create(&w, &a, pair_writer, p), 0);
        cr_assert_eq(fiber_join(r), 0);
        cr_assert_eq(fiber_join(w), 0);
        cr_assert_eq(p->err, 0, "read failed: %s", strerror(p->err));
        cr_assert_eq(p->got, 5);
        cr_assert_eq(memcmp(p->buf, "hello", 5), 0);
        cr_assert_eq(p->flags_after & O_NONBLOCK, 0, "the hooks changed the socket's flags");
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
        sched_group_free(g);
}

/* A caller's SO_RCVTIMEO holds: a read with no data fails with EAGAIN after it. */
static void timed_reader(void *arg)
{
        Pair *p = arg;
        struct timeval tv = {.tv_usec = 30 * 1000};
        cr_assert_eq(setsockopt(p->fd[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
        uint64_t t0 = sched_now_ns();
        p->got = recv(p->fd[0], p->buf, 5, 0);
        p->err = p->got < 0 ? errno : 0;
        p->flags_after = (int)((sched_now_ns() - t0) / MS_NS);
}

Test(hook, so_rcvtimeo_is_honoured)
{
        SchedulingGroup *g = hooked_group(1);
        Pair *p = calloc(1, sizeof(*p));
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fd), 0);
        run_in_fiber(g, timed_reader, p);
        cr_assert_eq(p->got, -1);
        cr_assert_eq(p->err, EAGAIN, "recv said %s", strerror(p->err));
        cr_assert_geq(p->flags_after, 29, "recv timed out after %d ms of 30", p->flags_after);
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
        sched_group_free(g);
}

/* The caller's own O_NONBLOCK is honoured: EAGAIN at once, no parking. */
static void nonblocking_reader(void *arg)
{
        Pair *p = arg;
        int fl = fcntl(p->fd[0], F_GETFL);
        cr_assert_eq(fcntl(p->fd[0], F_SETFL, fl | O_NONBLOCK), 0);
        p->got = read(p->fd[0], p->buf, 5);
        p->err = p->got < 0 ? errno : 0;
}

Test(hook, callers_nonblocking_flag_is_kept)
{
        SchedulingGroup *g = hooked_group(1);
        Pair *p = calloc(1, sizeof(*p));
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p->fd), 0);
        run_in_fiber(g, nonblocking_reader, p);
        cr_assert_eq(p->got, -1);
        cr_assert_eq(p->err, EAGAIN);
        close(p->fd[0]);
        close(p->fd[1]);
        free(p);
        sched_group_free(g);
}

/* connect + accept + a 256 KiB exchange over TCP loopback between two fibers of one
 * worker, both on blocking sockets. */
typedef struct Tcp {
        int lfd;
        struct sockaddr_in addr;
        size_t sent, received;
        int err;
        char *data;
} Tcp;

#define TCP_BYTES (256 * 1024)

static void tcp_server(void *arg)
{
        Tcp *t = arg;
        int c = accept(t->lfd, NULL, NULL);
        if (c < 0) {
                t->err = errno;
                return;
        }
        char buf[4096];
        for (;;) {
                ssize_t n = recv(c, buf, sizeof(buf), 0);
                if (n <= 0)
                        break;
                for (ssize_t i = 0; i < n; i++)
                        if (buf[i] != t->data[t->received + (size_t)i])
                                t->err = EBADMSG;
                t->received += (size_t)n;
        }
        close(c);
}

static void tcp_client(void *arg)
{
        Tcp *t = arg;
        int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(s, (struct sockaddr *)&t->addr, sizeof(t->addr)) < 0) {
                t->err = errno;
                close(s);
                return;
        }
        cr_assert_eq(fcntl(s, F_GETFL) & O_NONBLOCK, 0, "connect left O_NONBLOCK set");
        while (t->sent < TCP_BYTES) {
                ssize_t n = send(s, t->data + t->sent, TCP_BYTES - t->sent, 0);
                if (n < 0) {
                        t->err = errno;
                        break;
                }
                t->sent += (size_t)n;
        }
        close(s);
}

Test(hook, tcp_connect_accept_and_stream_on_one_worker)
{
        SchedulingGroup *g = hooked_group(1);
        FiberAttr a = {.group = g};
        Tcp t = {.addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)}};
        socklen_t len = sizeof(t.addr);
        Fiber *s, *c;

        t.data = malloc(TCP_BYTES);
        for (size_t i = 0; i < TCP_BYTES; i++)
                t.data[i] = (char)(i * 7);
        t.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(bind(t.lfd, (struct sockaddr *)&t.addr, sizeof(t.addr)), 0);
        cr_assert_eq(listen(t.lfd, 4), 0);
        cr_assert_eq(getsockname(t.lfd, (struct sockaddr *)&t.addr, &len), 0);
        cr_assert_eq(fiber_create(&s, &a, tcp_server, &t), 0);
        cr_assert_eq(fiber_create(&c, &a, tcp_client, &t), 0);
        cr_assert_eq(fiber_join(c), 0);
        cr_assert_eq(fiber_join(s), 0);
        cr_assert_eq(t.err, 0, "%s", strerror(t.err));
        cr_assert_eq(t.sent, TCP_BYTES);
        cr_assert_eq(t.received, TCP_BYTES);
        close(t.lfd);
        free(t.data);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ pipes, poll --- */

#define PIPE_BYTES (1 << 20) /* 16 times a pipe's capacity */

static void pipe_writer(void *arg)
{
        Pair *p = arg;
        char *buf = malloc(PIPE_BYTES);
        memset(buf, 'x', PIPE_BYTES);
        ssize_t n = write(p->fd[1], buf, PIPE_BYTES); /* blocking: whole */
        if (n != PIPE_BYTES)
                p->err = n < 0 ? errno : EIO;
        close(p->fd[1]);
        free(buf);
}

static void pipe_reader(void *arg)
{
        Pair *p = arg;
        for (;;) {
                ssize_t n = read(p->fd[0], p->buf, sizeof(p->buf));
                if (n <= 0)
                        break;
                p->got += n;
        }
}

Test(hook, blocking_pipe_write_of_a_mebibyte_on_one_worker)
{
        SchedulingGroup *g = hooked_group(1);
        FiberAttr a = {.group = g};
        Pair *p = calloc(1, sizeof(*p));
        Fiber *r, *w;

        cr_assert_eq(pipe2(p->fd, O_CLOEXEC), 0);
        cr_assert_eq(fiber_create(&w, &a, pipe_writer, p), 0);
        cr_assert_eq(fiber_create(&r, &a, pipe_reader, p), 0);
        cr_assert_eq(fiber_join(w), 0);
        cr_assert_eq(fiber_join(r), 0);
        cr_assert_eq(p->err, 0, "%s", strerror(p->err));
        cr_assert_eq(p->got, PIPE_BYTES);
        close(p->fd[0]);
        free(p);
        sched_group_free(g);
}

/* poll over three pipes: the fiber parks until the third becomes readable, and only
 * that one is reported. */
typedef struct Three {
        int fd[3][2];
        int rc;
        short revents[3];
} Three;

static void three_poller(void *arg)
{
        Three *t = arg;
        struct pollfd p[3];
        for (int i = 0; i < 3; i++)
                p[i] = (struct pollfd){.fd = t->fd[i][0], .events = POLLIN};
        t->rc = poll(p, 3, 10000);
        for (int i = 0; i < 3; i++)
                t->revents[i] = p[i].revents;
}

static void three_writer(void *arg)
{
        Three *t = arg;
        usleep(20 * 1000);
        if (write(t->fd[2][1], "!", 1) != 1)
                t->rc = -100;
}

Test(hook, poll_over_several_fds_parks_until_one_is_ready)
{
        SchedulingGroup *g = hooked_group(1);
        FiberAttr a = {.group = g};
        Three t = {0};
        Fiber *p, *w;

        for (int i = 0; i < 3; i++)
                cr_assert_eq(pipe2(t.fd[i], O_CLOEXEC), 0);
        cr_assert_eq(fiber_create(&p, &a, three_poller, &t), 0);
        cr_assert_eq(fiber_create(&w, &a, three_writer, &t), 0);
        cr_assert_eq(fiber_join(p), 0);
        cr_assert_eq(fiber_join(w), 0);
        cr_assert_eq(t.rc, 1);
        cr_assert_eq(t.revents[0], 0);
        cr_assert_eq(t.revents[1], 0);
        cr_assert(t.revents[2] & POLLIN);
        for (int i = 0; i < 3; i++) {
                close(t.fd[i][0]);
                close(t.fd[i][1]);
        }
        sched_group_free(g);
}

/* A blocking read of a timerfd (no socket, no pipe) parks until it expires. */
static void timerfd_reader(void *arg)
{
        Overlap *o = arg;
        overlap_start(o);
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
        struct itimerspec its = {.it_value = {.tv_nsec = 50 * 1000 * 1000}};
        uint64_t ticks = 0, t0 = sched_now_ns();
        timerfd_settime(fd, 0, &its, NULL);
        overlap_enter(o);
        ssize_t n = read(fd, &ticks, sizeof(ticks));
        overlap_leave(o, t0, n == sizeof(ticks) && ticks == 1 ? 0 : -1);
        close(fd);
}

Test(hook, timerfd_read_parks_the_fiber)
{
        cr_assert(check_sleeps(timerfd_reader, "read(timerfd)"));
}

/* ------------------------------------------------------------------ cancellation -- */

typedef struct Blocked {
        int fd[2];
        ssize_t rc;
        int err;
        FiberEvent parked;
} Blocked;

static void blocked_reader(void *arg)
{
        Blocked *b = arg;
        fiber_event_set(&b->parked);
        char c;
        b->rc = read(b->fd[0], &c, 1);
        b->err = errno;
}

static void blocked_sleeper(void *arg)
{
        Blocked *b = arg;
        fiber_event_set(&b->parked);
        b->rc = usleep(30 * 1000 * 1000);
        b->err = errno;
}

static bool check_cancel(FiberFn fn, bool use_socket)
{
        SchedulingGroup *g = hooked_group(1);
        FiberAttr a = {.group = g};
        Blocked b = {0};
        Fiber *f;

        fiber_event_init(&b.parked);
        if (use_socket)
                cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, b.fd), 0);
        else
                cr_assert_eq(pipe2(b.fd, O_CLOEXEC), 0);
        cr_assert_eq(fiber_create(&f, &a, fn, &b), 0);
        cr_assert_eq(fiber_event_wait(&b.parked, sched_deadline_after(10 * SEC_NS)), 0);
        usleep(20 * 1000); /* (the test's thread: a real sleep) let it park */
        uint64_t t0 = sched_now_ns();
        fiber_cancel(f);
        cr_assert_eq(fiber_join(f), 0);
        uint64_t took = sched_now_ns() - t0;
        cr_assert_eq(b.rc, -1);
        cr_assert_eq(b.err, ECANCELED, "the call failed with %s", strerror(b.err));
        cr_log_info("cancel reached the parked call in %lu us", (unsigned long)(took / 1000));
        cr_assert_lt(took, 5 * SEC_NS, "the cancel took %lu ms", (unsigned long)(took / MS_NS));
        close(b.fd[0]);
        close(b.fd[1]);
        sched_group_free(g);
        return b.err == ECANCELED;
}

Test(hook, cancel_wakes_a_blocking_socket_read)
{
        cr_assert(check_cancel(blocked_reader, true));
}

Test(hook, cancel_wakes_a_blocking_pipe_read)
{
        cr_assert(check_cancel(blocked_reader, false));
}

Test(hook, cancel_wakes_a_usleep)
{
        cr_assert(check_cancel(blocked_sleeper, false));
}

/* ------------------------------------------------------------------ files, names -- */

typedef struct FileRead {
        char path[64];
        size_t size;
        uint64_t sum;
        ssize_t wrote;
        int err;
} FileRead;

static void file_roundtrip(void *arg)
{
        FileRead *fr = arg;
        char *buf = malloc(fr->size);
        for (size_t i = 0; i < fr->size; i++)
                buf[i] = (char)(i * 13 + 1);
        int fd = open(fr->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
                fr->err = errno;
                free(buf);
                return;
        }
        fr->wrote = write(fd, buf, fr->size);
        memset(buf, 0, fr->size);
        if (lseek(fd, 0, SEEK_SET) != 0)
                fr->err = errno;
        size_t at = 0;
        while (at < fr->size) {
                ssize_t n = read(fd, buf + at, fr->size - at);
                if (n <= 0) {
                        fr->err = n < 0 ? errno : EIO;
                        break;
                }
                at += (size_t)n;
        }
        for (size_t i = 0; i < at; i++)
                fr->sum += (unsigned char)buf[i] ^ (unsigned char)(i * 13 + 1);
        char tail;
        if (read(fd, &tail, 1) != 0) /* at the end: 0 */
                fr->err = EIO;
        close(fd);
        free(buf);
}

static bool check_file(const char *blockio)
{
        SchedulingGroup *g;
        FileRead fr = {.size = 3 * 1024 * 1024 + 17};
        if (blockio)
                setenv("FIBERD_BLOCKIO", blockio, 1);
        g = hooked_group(1);
        snprintf(fr.path, sizeof(fr.path), "/var/tmp/fiberd-hook-%d", (int)getpid());
        run_in_fiber(g, file_roundtrip, &fr);
        unlink(fr.path);
        cr_assert_eq(fr.err, 0, "%s", strerror(fr.err));
        cr_assert_eq(fr.wrote, (ssize_t)fr.size, "a 3 MiB write was not whole");
        cr_assert_eq(fr.sum, 0, "the bytes read back differ");
        cr_log_info("%s", sched_hook_blockio());
        sched_group_free(g);
        return fr.sum == 0;
}

Test(hook, regular_file_write_and_read)
{
        cr_assert(check_file(NULL));
}

Test(hook, regular_file_on_blocking_io_threads)
{
        cr_assert(check_file("threads"));
        cr_assert(strstr(sched_hook_blockio(), "threads"), "%s", sched_hook_blockio());
}

typedef struct Lookup {
        int rc;
        int family;
} Lookup;

static void lookup(void *arg)
{
        Lookup *l = arg;
        struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
        l->rc = getaddrinfo("127.0.0.1", "80", &hints, &res);
        if (l->rc == 0) {
                l->family = res->ai_family;
                freeaddrinfo(res);
        }
}

Test(hook, getaddrinfo_answers_on_a_fiber)
{
        SchedulingGroup *g = hooked_group(1);
        Lookup l = {0};
        run_in_fiber(g, lookup, &l);
        cr_assert_eq(l.rc, 0, "%s", gai_strerror(l.rc));
        cr_assert_eq(l.family, AF_INET);
        sched_group_free(g);
}

/* sched_hook_set_open: a hooked fiber's open() goes through the program's function;
 * a plain thread's does not. */
static int open_calls;
static int fake_open(int dirfd, const char *path, int flags, unsigned mode)
{
        (void)dirfd;
        (void)flags;
        (void)mode;
        __atomic_add_fetch(&open_calls, 1, __ATOMIC_RELAXED);
        return strcmp(path, "/nonexistent/refused") == 0 ? -EACCES : -ENOSYS;
}

static void opener(void *arg)
{
        int *r = arg;
        errno = 0;
        r[0] = open("/nonexistent/refused", O_RDONLY);
        r[1] = errno;
        FILE *f = fopen("/nonexistent/refused", "r");
        r[2] = f ? 0 : errno;
        r[3] = open("/dev/null", O_RDONLY | O_CLOEXEC); /* declined: the real open */
        if (r[3] >= 0)
                close(r[3]);
}

Test(hook, open_goes_through_the_programs_hook)
{
        SchedulingGroup *g = hooked_group(1);
        int r[4] = {0};
        sched_hook_set_open(fake_open);
        run_in_fiber(g, opener, r);
        cr_assert_eq(r[0], -1);
        cr_assert_eq(r[1], EACCES);
        cr_assert_eq(r[2], EACCES);
        cr_assert_geq(r[3], 0, "the declined open failed");
        cr_assert_eq(open_calls, 3);
        int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        close(fd);
        cr_assert_eq(open_calls, 3, "a plain thread's open went through the hook");
        sched_hook_set_open(NULL);
        sched_group_free(g);
}
