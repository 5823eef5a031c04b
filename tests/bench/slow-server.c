/* SPDX-License-Identifier: MIT */
/*
 * slow-server.c — the hooks rows' slow server (slow-server.h): one thread, one epoll
 * set, one timerfd. A connection waiting for its answer costs an fd and a FIFO slot,
 * not a thread, so 10,000 of them at once cost the generator nothing it would notice.
 *
 * Every answer is due the same delay after its start (the accept, or the end of the HTTP
 * request head), so the deadlines are set in increasing order and a FIFO ring is the
 * whole timer queue: the timerfd is armed at the head's deadline (absolute,
 * CLOCK_MONOTONIC), and each wake-up answers every connection that is due.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/bench/slow-server.h"

/* A connection due for its answer. */
typedef struct SlowDue {
        int fd;
        uint64_t deadline_ns;
} SlowDue;

struct SlowServer {
        SlowKind kind;
        uint64_t delay_ns;
        int lfd, epfd, tfd, stopfd;
        pthread_t thread;
        char address[128];
        uint8_t *head_match; /* per fd: bytes of "\r\n\r\n" matched so far (HTTP) */
        size_t nfds;         /* entries of head_match: the fd limit */
        SlowDue *ring;       /* FIFO of deadlines, a power of two >= nfds */
        size_t ring_mask, ring_head, ring_tail;
        uint64_t served; /* atomic */
};

static const char http_answer[] =
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n"
        "Content-Type: text/plain\r\nConnection: close\r\n\r\nhello fiber";

static void slow_add(SlowServer *s, int fd, uint32_t events)
{
        struct epoll_event ev = {.events = events, .data.fd = fd};

        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
                bench_die("slow server: epoll_ctl: %s", strerror(errno));
}

static void slow_due(SlowServer *s, int fd)
{
        if (s->ring_tail - s->ring_head > s->ring_mask)
                bench_die("slow server: more than %zu connections waiting", s->ring_mask + 1);
        s->ring[s->ring_tail++ & s->ring_mask] =
                (SlowDue){.fd = fd, .deadline_ns = bench_now_ns() + s->delay_ns};
}

static void slow_accept(SlowServer *s)
{
        for (;;) {
                int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0) {
                        if (errno == EINTR || errno == ECONNABORTED)
                                continue;
                        if (errno != EAGAIN)
                                fprintf(stderr, "fiberd-bench: slow server: accept: %s\n",
                                        strerror(errno));
                        return;
                }
                if ((size_t)fd >= s->nfds)
                        bench_die("slow server: fd %d over the limit", fd);
                if (s->kind == SLOW_UNIX_BYTE) {
                        slow_due(s, fd);
                } else {
                        s->head_match[fd] = 0;
                        slow_add(s, fd, EPOLLIN);
                }
        }
}

/* HTTP: read what came; once the head is whole, the answer is due @delay later. */
static void slow_read_head(SlowServer *s, int fd)
{
        static const char end[] = "\r\n\r\n";
        char buf[4096];
        ssize_t n;

        while ((n = read(fd, buf, sizeof(buf))) > 0) {
                for (ssize_t i = 0; i < n; i++) {
                        uint8_t m = s->head_match[fd];
                        m = buf[i] == end[m] ? m + 1 : buf[i] == '\r' ? 1 : 0;
                        s->head_match[fd] = m;
                        if (m == 4) {
                                epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
                                slow_due(s, fd);
                                return;
                        }
                }
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                epoll_ctl(s->epfd, EPOLL_CTL_DEL, fd, NULL);
                close(fd);
        }
}

/* Answer every connection that is due, then arm the timer at the next deadline. */
static void slow_answer_due(SlowServer *s)
{
        uint64_t now = bench_now_ns();
        struct itimerspec it = {{0, 0}, {0, 0}};

        while (s->ring_head != s->ring_tail) {
                SlowDue *d = &s->ring[s->ring_head & s->ring_mask];
                if (d->deadline_ns > now)
                        break;
                if (s->kind == SLOW_HTTP) {
                        if (write(d->fd, http_answer, sizeof(http_answer) - 1) < 0) {
                                /* the client gave up */
                        }
                } else if (write(d->fd, "!", 1) < 0) {
                        /* the client gave up */
                }
                close(d->fd);
                s->ring_head++;
                __atomic_add_fetch(&s->served, 1, __ATOMIC_RELAXED);
        }
        if (s->ring_head != s->ring_tail)
                it.it_value = timespec_store_ns(s->ring[s->ring_head & s->ring_mask].deadline_ns);
        if (timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &it, NULL) < 0)
                bench_die("slow server: timerfd_settime: %s", strerror(errno));
}

static void *slow_thread(void *arg)
{
        SlowServer *s = arg;
        struct epoll_event evs[256];

        for (;;) {
                int n = epoll_wait(s->epfd, evs, 256, -1);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        bench_die("slow server: epoll_wait: %s", strerror(errno));
                for (int i = 0; i < n; i++) {
                        int fd = evs[i].data.fd;
                        if (fd == s->stopfd)
                                return NULL;
                        if (fd == s->lfd)
                                slow_accept(s);
                        else if (fd != s->tfd)
                                slow_read_head(s, fd);
                }
                slow_answer_due(s);
        }
}

static size_t fd_limit_raise(void)
{
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                bench_die("getrlimit: %s", strerror(errno));
        if (rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        bench_die("setrlimit: %s", strerror(errno));
        }
        return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 20) ? (1u << 20)
                                                                        : (size_t)rl.rlim_cur;
}

static void slow_listen(SlowServer *s, const char *path)
{
        if (s->kind == SLOW_UNIX_BYTE) {
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                if (strlen(path) >= sizeof(a.sun_path))
                        bench_die("slow server: path too long: %s", path);
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
                unlink(path);
                s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0)
                        bench_die("slow server: bind %s: %s", path, strerror(errno));
                snprintf(s->address, sizeof(s->address), "%s", path);
        } else {
                struct sockaddr_in a = {.sin_family = AF_INET,
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                socklen_t len = sizeof(a);
                s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
                if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
                    getsockname(s->lfd, (struct sockaddr *)&a, &len) < 0)
                        bench_die("slow server: bind 127.0.0.1: %s", strerror(errno));
                snprintf(s->address, sizeof(s->address), "http://127.0.0.1:%u/x",
                         (unsigned)ntohs(a.sin_port));
        }
        /* the kernel caps the backlog at net.core.somaxconn */
        if (listen(s->lfd, 65535) < 0)
                bench_die("slow server: listen: %s", strerror(errno));
}

SlowServer *slow_server_start(SlowKind kind, const char *path, uint64_t delay_ns)
{
        SlowServer *s = calloc(1, sizeof(*s));
        size_t ring = 1;

        if (!s)
                bench_die("out of memory");
        s->kind = kind;
        s->delay_ns = delay_ns;
        s->nfds = fd_limit_raise();
        while (ring < s->nfds)
                ring <<= 1;
        s->ring_mask = ring - 1;
        s->ring = calloc(ring, sizeof(*s->ring));
        s->head_match = calloc(s->nfds, 1);
        if (!s->ring || !s->head_match)
                bench_die("out of memory");
        slow_listen(s, path);
        s->epfd = epoll_create1(EPOLL_CLOEXEC);
        s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        s->stopfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (s->epfd < 0 || s->tfd < 0 || s->stopfd < 0)
                bench_die("slow server: %s", strerror(errno));
        slow_add(s, s->lfd, EPOLLIN);
        slow_add(s, s->tfd, EPOLLIN);
        slow_add(s, s->stopfd, EPOLLIN);
        if (pthread_create(&s->thread, NULL, slow_thread, s))
                bench_die("slow server: pthread_create failed");
        return s;
}

const char *slow_server_address(const SlowServer *s)
{
        return s->address;
}

uint64_t slow_server_served(const SlowServer *s)
{
        return __atomic_load_n(&s->served, __ATOMIC_RELAXED);
}

void slow_server_stop(SlowServer *s)
{
        uint64_t one = 1;

        if (!s)
                return;
        if (write(s->stopfd, &one, sizeof(one)) < 0)
                bench_die("slow server: eventfd: %s", strerror(errno));
        pthread_join(s->thread, NULL);
        for (size_t i = s->ring_head; i != s->ring_tail; i++)
                close(s->ring[i & s->ring_mask].fd);
        close(s->lfd);
        close(s->epfd);
        close(s->tfd);
        close(s->stopfd);
        if (s->kind == SLOW_UNIX_BYTE)
                unlink(s->address);
        free(s->ring);
        free(s->head_match);
        free(s);
}
