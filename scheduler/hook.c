/* SPDX-License-Identifier: MIT */
/*
 * hook.c — libgo's hooks (shared/seeds/004): the blocking calls of the C library,
 * interposed so that code written for threads runs on fibers unchanged. A plugin that
 * calls usleep(), poll() or a blocking read(), or links a library that does (libcurl,
 * libpq, hiredis), parks its fiber instead of its worker thread.
 *
 * Mechanism: symbol interposition from the executable. These functions are defined
 * here under the C library's names and, in fiberd, exported from the executable
 * (daemon/build.mk links it with --dynamic-list=scheduler/hook.sym). The dynamic linker
 * looks a symbol up in the executable first, so every shared object fiberd loads later
 * — a plugin and every library it links — binds its read(), poll(), ... to these, while
 * the C library's own internal calls (stdio's buffer refills, getaddrinfo's sockets) stay
 * on glibc's private aliases. The real function is found once with
 * dlsym(RTLD_NEXT, name): the C library's, or a sanitizer's interceptor in front of it.
 * Chosen over a hooks library in LD_PRELOAD (libgo's other way) because the executable
 * needs no environment and no second file, and over patching code because nothing is
 * rewritten: a plugin that really wants the raw call still has syscall(2).
 *
 * Scope: a hook acts only on a hooked fiber: one of a group created with
 * SchedControl.hook_blocking_calls (fiberd's job groups), one created with
 * FiberAttr.hook_blocking_calls (fiberd's inline jobs on its server group), and their
 * children in the same group. Anywhere else — a plain pthread, another fiber (fiberd's
 * own server fibers), a worker's idle loop — it makes the real call at once: one call
 * to worker_self() and two loads, a few nanoseconds (bench row "hooked call outside a
 * fiber").
 *
 * On a hooked fiber, by the kind of the fd (fstat once; sockets cached in a table):
 *  - a socket the caller keeps blocking: recv/send with MSG_DONTWAIT, and on EAGAIN the
 *    fiber parks on the group's reactor (fiber_wait_fd) until the fd is ready or the
 *    socket's SO_RCVTIMEO / SO_SNDTIMEO passes (then EAGAIN, as the kernel would say).
 *    The file's own O_NONBLOCK flag is never changed, so threads and child processes
 *    sharing the socket see exactly what they set (libgo sets O_NONBLOCK on every
 *    socket it creates and keeps the caller's wish aside; that leaks into fork+exec).
 *    connect() is the exception: it sets O_NONBLOCK for the length of the call.
 *  - another pollable fd the caller keeps blocking (a pipe, FIFO, tty, eventfd, timerfd): the
 *    fiber parks until poll(2) says ready, then the real call; writes go in chunks of
 *    at most PIPE_BUF, each of which a ready pipe takes whole, until all is written.
 *    Another thread reading the same pipe can still take the data first: then the real
 *    read blocks its worker, as it would have without hooks.
 *  - a regular file: see blockio.c (page-cache hits inline with RWF_NOWAIT, the rest on
 *    io_uring or the blocking-I/O threads).
 *  - an fd the caller made non-blocking, a directory, anything else: the real call.
 * poll/ppoll/select/pselect: the real call with a zero timeout first; if nothing is
 * ready, a one-fd wait parks on the reactor directly, more fds park on a private epoll
 * set holding them all (an epoll fd is itself pollable). Sleeps park on the group's
 * timers.
 *
 * Cancellation: a cancelled fiber (fiber_cancel(), a job's cancel or timeout) is woken
 * from the call it is parked in, and that call and every later hooked call that would
 * wait fail at once with errno ECANCELED (sleep() returns the seconds left). ECANCELED
 * is not EINTR on purpose: libraries retry EINTR in a loop, and treat an errno they do
 * not know as a hard error and return — which is what a cancelled job should do.
 *
 * epoll_wait/epoll_pwait park on the epoll fd itself. A child that plugin code forks
 * from a fiber makes only real calls (a pthread_atfork handler forgets the worker).
 *
 * Not hooked: calls glibc makes internally (fread on a FILE, getaddrinfo's own sockets
 * — getaddrinfo itself runs on the blocking-I/O threads, see below), raw syscall(2),
 * and inline system calls. The hooks are no sandbox: they make honest code cheap and
 * act for the right user; the unit's sandbox is the boundary against dishonest code.
 */
/* The C library's own names are defined below, each once: its headers must not turn
 * open() into open64() and the like (a -D_FILE_OFFSET_BITS=64 from some library's
 * pkg-config flags would), which on LP64 changes no type anyway. */
#undef _FILE_OFFSET_BITS

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "scheduler/blockio.h"
#include "scheduler/runtime.h"

#define HOOK __attribute__((visibility("default")))

/* glibc's fortified and mode-less entry points, which its headers do not declare. */
ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                       struct sockaddr *addr, socklen_t *addrlen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

/* ------------------------------------------------------------------ the real calls */

/* Each real function, found once with dlsym(RTLD_NEXT): benign race, every thread
 * stores the same pointer. */
#define REAL(name)                                                                                 \
        static __typeof__(name) *real_##name##_fn;                                                 \
        static __typeof__(name) *real_##name(void)                                                 \
        {                                                                                          \
                __typeof__(name) *fn = __atomic_load_n(&real_##name##_fn, __ATOMIC_RELAXED);       \
                if (__builtin_expect(!fn, 0)) {                                                    \
                        fn = (__typeof__(name) *)dlsym(RTLD_NEXT, #name);                          \
                        __atomic_store_n(&real_##name##_fn, fn, __ATOMIC_RELAXED);                 \
                }                                                                                  \
                return fn;                                                                         \
        }

REAL(read)
REAL(write)
REAL(readv)
REAL(writev)
REAL(pread)
REAL(pwrite)
REAL(recv)
REAL(recvfrom)
REAL(recvmsg)
REAL(send)
REAL(sendto)
REAL(sendmsg)
REAL(connect)
REAL(accept)
REAL(accept4)
REAL(poll)
REAL(ppoll)
REAL(select)
REAL(pselect)
REAL(sleep)
REAL(usleep)
REAL(nanosleep)
REAL(clock_nanosleep)
REAL(socket)
REAL(socketpair)
REAL(close)
REAL(dup)
REAL(dup2)
REAL(dup3)
REAL(fcntl)
REAL(ioctl)
REAL(setsockopt)
REAL(open)
REAL(openat)
REAL(creat)
REAL(fopen)
REAL(epoll_wait)
REAL(epoll_pwait)
REAL(getaddrinfo)
REAL(gethostbyname)

/* ------------------------------------------------------------------ scope --------- */

static SchedHookOpenFn hook_open_fn;

void sched_hook_set_open(SchedHookOpenFn fn)
{
        __atomic_store_n(&hook_open_fn, fn, __ATOMIC_RELEASE);
}

/* In a child that plugin code forked from a fiber, the worker's thread pointer is a
 * copy of a scheduler that does not exist there: every call is the real one. */
static void hook_atfork_child(void)
{
        worker_set_self(NULL);
}

static pthread_once_t hook_atfork_once = PTHREAD_ONCE_INIT;
static void hook_atfork_register(void)
{
        pthread_atfork(NULL, NULL, hook_atfork_child);
}

void hook_init(void)
{
        pthread_once(&hook_atfork_once, hook_atfork_register);
}

/* The calling fiber when its blocking calls are hooked (Fiber.hooks: its group hooks
 * them, or it was created to be hooked), else NULL. */
static inline Fiber *hooked(void)
{
        Worker *w = worker_self();
        if (__builtin_expect(!w, 1))
                return NULL;
        Fiber *f = w->current;
        return f && f->hooks ? f : NULL;
}

const char *sched_hook_blockio(void)
{
        return blockio_describe();
}

bool sched_hook_active(void)
{
        return hooked() != NULL;
}

/* Return -1 with errno @e (a positive errno). */
static inline int fail(int e)
{
        errno = e;
        return -1;
}

/* ------------------------------------------------------------------ the fd table -- */

/* What the hooks know of a socket fd, kept from the calls that made or changed it.
 * Entries are cleared by close() and the dup*() that replace them; an entry a glibc
 * internal close left behind is caught when a socket call answers ENOTSOCK. */
enum {
        HFD_SOCK = 1u << 0,    /* a socket */
        HFD_USER_NB = 1u << 1, /* the caller set O_NONBLOCK itself */
};
typedef struct HookFd {
        uint32_t state;    /* HFD_*; 0 = unknown; atomic */
        uint32_t rcvto_ms; /* SO_RCVTIMEO, ms; 0 = none; atomic */
        uint32_t sndto_ms; /* SO_SNDTIMEO, ms; 0 = none; atomic */
} HookFd;

#define HFD_CHUNK 4096
#define HFD_CHUNKS 256 /* fds up to 1M */
static HookFd *hfd_chunks[HFD_CHUNKS];

/* The entry of @fd; with @create, allocated on first use. NULL when out of range or out
 * of memory (the hooks then treat the fd as unknown). */
static HookFd *hfd(int fd, bool create)
{
        unsigned c = (unsigned)fd / HFD_CHUNK;
        HookFd *chunk;

        if (fd < 0 || c >= HFD_CHUNKS)
                return NULL;
        chunk = __atomic_load_n(&hfd_chunks[c], __ATOMIC_ACQUIRE);
        if (!chunk) {
                if (!create)
                        return NULL;
                HookFd *fresh = calloc(HFD_CHUNK, sizeof(HookFd));
                if (!fresh)
                        return NULL;
                if (!__atomic_compare_exchange_n(&hfd_chunks[c], &chunk, fresh, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                        free(fresh);
                else
                        chunk = fresh;
        }
        return &chunk[(unsigned)fd % HFD_CHUNK];
}

static void hfd_set(int fd, uint32_t state)
{
        HookFd *e = hfd(fd, state != 0);
        if (!e)
                return;
        __atomic_store_n(&e->rcvto_ms, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->sndto_ms, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

static void hfd_copy(int from, int to)
{
        HookFd *src = hfd(from, false);
        uint32_t st = src ? __atomic_load_n(&src->state, __ATOMIC_ACQUIRE) : 0;
        hfd_set(to, st);
        if (st) {
                HookFd *dst = hfd(to, false);
                if (dst) {
                        __atomic_store_n(&dst->rcvto_ms,
                                         __atomic_load_n(&src->rcvto_ms, __ATOMIC_RELAXED),
                                         __ATOMIC_RELAXED);
                        __atomic_store_n(&dst->sndto_ms,
                                         __atomic_load_n(&src->sndto_ms, __ATOMIC_RELAXED),
                                         __ATOMIC_RELAXED);
                }
        }
}

/* How a hooked fiber treats an fd. */
typedef enum FdKind {
        FD_REAL, /* make the real call: non-blocking by the caller's choice, or no kind */
        FD_SOCK, /* a blocking socket: MSG_DONTWAIT and park */
        FD_POLL, /* another blocking pollable fd: park until ready, then the call */
        FD_FILE, /* a regular file: blockio.c */
} FdKind;

/* The kind of @fd for a hooked fiber; @ret_e: its table entry for sockets (may be NULL
 * when the table has no room). An fstat(2) for anything not known as a socket. */
static FdKind fd_kind(int fd, HookFd **ret_e)
{
        HookFd *e = hfd(fd, false);
        uint32_t st = e ? __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) : 0;
        struct stat sb;

        *ret_e = e;
        if (st & HFD_SOCK)
                return st & HFD_USER_NB ? FD_REAL : FD_SOCK;
        if (fstat(fd, &sb) < 0)
                return FD_REAL; /* the real call says EBADF */
        if (S_ISREG(sb.st_mode))
                return FD_FILE;
        /* anonymous inodes (eventfd, timerfd, signalfd, inotify) have no type bits */
        bool anon = (sb.st_mode & S_IFMT) == 0;
        if (!S_ISSOCK(sb.st_mode) && !S_ISFIFO(sb.st_mode) && !S_ISCHR(sb.st_mode) && !anon)
                return FD_REAL;
        int fl = real_fcntl()(fd, F_GETFL);
        if (fl < 0)
                return FD_REAL;
        if (S_ISSOCK(sb.st_mode)) {
                hfd_set(fd, HFD_SOCK | (fl & O_NONBLOCK ? HFD_USER_NB : 0));
                *ret_e = hfd(fd, false);
                return fl & O_NONBLOCK ? FD_REAL : FD_SOCK;
        }
        return fl & O_NONBLOCK ? FD_REAL : FD_POLL;
}

/* The deadline of a socket wait: SO_RCVTIMEO or SO_SNDTIMEO as the caller set it. */
static uint64_t sock_deadline(const HookFd *e, bool out)
{
        uint32_t ms = 0;
        if (e)
                ms = __atomic_load_n(out ? &e->sndto_ms : &e->rcvto_ms, __ATOMIC_RELAXED);
        return ms ? sched_deadline_after((uint64_t)ms * NSEC_PER_MSEC) : SCHED_FOREVER;
}

/*
 * After a non-blocking try said EAGAIN: park until @fd is ready for @events or
 * @deadline_ns. Return: 0 to try again; -1 with errno set (EAGAIN at the deadline, as a
 * socket timeout says; ECANCELED).
 */
static int park(int fd, uint32_t events, uint64_t deadline_ns)
{
        int r = fiber_wait_fd(fd, events, deadline_ns);
        if (r >= 0)
                return 0;
        if (r == -ETIMEDOUT)
                return fail(EAGAIN);
        if (r == -ECANCELED)
                return fail(ECANCELED);
        if (r == -EBUSY) {
                /* another fiber of the process waits on this fd in that direction (the
                 * reactor holds one per direction): look again a moment later */
                r = fiber_sleep_for(NSEC_PER_MSEC);
                return r == -ECANCELED ? fail(ECANCELED) : 0;
        }
        return fail(-r);
}

/* Park until the blocking, pollable @fd is ready for @events (a POLL* mask) or
 * @deadline_ns, checking first with a zero-timeout poll(2). Return: 0; -1 with errno
 * (EAGAIN at the deadline, ECANCELED). */
static int park_until_ready(int fd, short events, uint64_t deadline_ns)
{
        struct pollfd p = {.fd = fd, .events = events};
        for (;;) {
                int n = real_poll()(&p, 1, 0);
                if (n > 0)
                        return 0; /* ready, or an error the real call will report */
                if (n < 0 && io_errno() != EINTR)
                        return -1;
                if (n == 0 &&
                    park(fd, (events & POLLOUT ? EPOLLOUT : 0) | (events & POLLIN ? EPOLLIN : 0),
                         deadline_ns) < 0) {
                        if (errno == EPERM)
                                return 0; /* epoll cannot watch it: the real call */
                        return -1;
                }
        }
}

/* ------------------------------------------------------------------ data ---------- */

/*
 * sock_io - one data call on a blocking socket from a hooked fiber: @try does it with
 * MSG_DONTWAIT; on EAGAIN park for @events until the socket's timeout.
 */
typedef ssize_t (*SockTry)(int fd, void *ctx);
static ssize_t sock_io(int fd, HookFd *e, uint32_t events, SockTry try, void *ctx)
{
        uint64_t deadline = sock_deadline(e, events & EPOLLOUT);
        for (;;) {
                ssize_t n = try(fd, ctx);
                if (n >= 0)
                        return n;
                int err = io_errno();
                if (err == EINTR)
                        continue;
                if (err == ENOTSOCK) {
                        hfd_set(fd, 0); /* a stale entry: an fd glibc closed and reused */
                        return -2;      /* the caller makes the real call */
                }
                if (err != EAGAIN && err != EWOULDBLOCK)
                        return fail(err);
                if (park(fd, events, deadline) < 0)
                        return -1;
        }
}

typedef struct MsgCtx {
        struct msghdr *msg;
        int flags;
} MsgCtx;

static ssize_t try_recvmsg(int fd, void *ctx)
{
        MsgCtx *m = ctx;
        return real_recvmsg()(fd, m->msg, m->flags | MSG_DONTWAIT);
}

static ssize_t try_sendmsg(int fd, void *ctx)
{
        MsgCtx *m = ctx;
        return real_sendmsg()(fd, m->msg, m->flags | MSG_DONTWAIT);
}

/* A receive or send on a hooked fiber, through recvmsg/sendmsg. Return: bytes, -1 with
 * errno, or -2 for "make the real call" (not a blocking socket). */
static ssize_t sock_msg(int fd, struct msghdr *msg, int flags, bool out)
{
        HookFd *e;
        if (flags & MSG_DONTWAIT)
                return -2;
        if (fd_kind(fd, &e) != FD_SOCK)
                return -2;
        MsgCtx m = {.msg = msg, .flags = flags};
        return sock_io(fd, e, out ? EPOLLOUT : EPOLLIN, out ? try_sendmsg : try_recvmsg, &m);
}

/* read()/readv() on a hooked fiber: -2 for "make the real call". */
static ssize_t hooked_readv(int fd, const struct iovec *iov, int iovcnt, off_t off, bool positional)
{
        HookFd *e;
        switch (fd_kind(fd, &e)) {
        case FD_SOCK: {
                if (positional)
                        return -2; /* pread on a socket: ESPIPE from the real call */
                struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
                MsgCtx m = {.msg = &msg};
                return sock_io(fd, e, EPOLLIN, try_recvmsg, &m);
        }
        case FD_POLL:
                if (park_until_ready(fd, POLLIN, SCHED_FOREVER) < 0)
                        return -1;
                return -2;
        case FD_FILE:
                return blockio_readv(fd, iov, iovcnt, positional ? off : -1);
        case FD_REAL:
        default:
                return -2;
        }
}

/* write()/writev() on a hooked fiber: -2 for "make the real call". */
static ssize_t hooked_writev(int fd, const struct iovec *iov, int iovcnt, off_t off,
                             bool positional)
{
        HookFd *e;
        switch (fd_kind(fd, &e)) {
        case FD_SOCK: {
                if (positional)
                        return -2;
                struct msghdr msg = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt};
                MsgCtx m = {.msg = &msg};
                return sock_io(fd, e, EPOLLOUT, try_sendmsg, &m);
        }
        case FD_POLL: {
                /* whole writes, in chunks a ready pipe takes without blocking */
                size_t done = 0;
                for (int i = 0; i < iovcnt; i++) {
                        const char *p = iov[i].iov_base;
                        size_t left = iov[i].iov_len;
                        while (left > 0) {
                                if (park_until_ready(fd, POLLOUT, SCHED_FOREVER) < 0)
                                        return done ? (ssize_t)done : -1;
                                ssize_t n = real_write()(fd, p, MIN(left, (size_t)PIPE_BUF));
                                if (n < 0) {
                                        int err = io_errno();
                                        if (err == EINTR || err == EAGAIN)
                                                continue;
                                        return done ? (ssize_t)done : fail(err);
                                }
                                p += n;
                                left -= (size_t)n;
                                done += (size_t)n;
                        }
                }
                return (ssize_t)done;
        }
        case FD_FILE:
                return blockio_writev(fd, iov, iovcnt, positional ? off : -1);
        case FD_REAL:
        default:
                return -2;
        }
}

HOOK ssize_t read(int fd, void *buf, size_t count)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = buf, .iov_len = count};
                ssize_t n = hooked_readv(fd, &iov, 1, 0, false);
                if (n != -2)
                        return n;
        }
        return real_read()(fd, buf, count);
}

HOOK ssize_t write(int fd, const void *buf, size_t count)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = (void *)buf, .iov_len = count};
                ssize_t n = hooked_writev(fd, &iov, 1, 0, false);
                if (n != -2)
                        return n;
        }
        return real_write()(fd, buf, count);
}

HOOK ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
        if (hooked() && iovcnt > 0 && iovcnt <= IOV_MAX) {
                ssize_t n = hooked_readv(fd, iov, iovcnt, 0, false);
                if (n != -2)
                        return n;
        }
        return real_readv()(fd, iov, iovcnt);
}

HOOK ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
        if (hooked() && iovcnt > 0 && iovcnt <= IOV_MAX) {
                ssize_t n = hooked_writev(fd, iov, iovcnt, 0, false);
                if (n != -2)
                        return n;
        }
        return real_writev()(fd, iov, iovcnt);
}

HOOK ssize_t pread(int fd, void *buf, size_t count, off_t offset)
{
        if (hooked() && offset >= 0) {
                struct iovec iov = {.iov_base = buf, .iov_len = count};
                ssize_t n = hooked_readv(fd, &iov, 1, offset, true);
                if (n != -2)
                        return n;
        }
        return real_pread()(fd, buf, count, offset);
}

HOOK ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset)
{
        if (hooked() && offset >= 0) {
                struct iovec iov = {.iov_base = (void *)buf, .iov_len = count};
                ssize_t n = hooked_writev(fd, &iov, 1, offset, true);
                if (n != -2)
                        return n;
        }
        return real_pwrite()(fd, buf, count, offset);
}

/* glibc's 64-bit-offset names are the same functions on LP64. */
HOOK ssize_t pread64(int fd, void *buf, size_t count, off_t offset)
{
        return pread(fd, buf, count, offset);
}

HOOK ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset)
{
        return pwrite(fd, buf, count, offset);
}

HOOK ssize_t recv(int fd, void *buf, size_t len, int flags)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = buf, .iov_len = len};
                struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n = sock_msg(fd, &msg, flags, false);
                if (n != -2)
                        return n;
        }
        return real_recv()(fd, buf, len, flags);
}

HOOK ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *addr,
                      socklen_t *addrlen)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = buf, .iov_len = len};
                struct msghdr msg = {.msg_name = addr,
                                     .msg_namelen = addr && addrlen ? *addrlen : 0,
                                     .msg_iov = &iov,
                                     .msg_iovlen = 1};
                ssize_t n = sock_msg(fd, &msg, flags, false);
                if (n >= 0 && addr && addrlen)
                        *addrlen = msg.msg_namelen;
                if (n != -2)
                        return n;
        }
        return real_recvfrom()(fd, buf, len, flags, addr, addrlen);
}

HOOK ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
        if (hooked()) {
                ssize_t n = sock_msg(fd, msg, flags, false);
                if (n != -2)
                        return n;
        }
        return real_recvmsg()(fd, msg, flags);
}

HOOK ssize_t send(int fd, const void *buf, size_t len, int flags)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
                struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
                ssize_t n = sock_msg(fd, &msg, flags, true);
                if (n != -2)
                        return n;
        }
        return real_send()(fd, buf, len, flags);
}

HOOK ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *addr,
                    socklen_t addrlen)
{
        if (hooked()) {
                struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
                struct msghdr msg = {.msg_name = (void *)addr,
                                     .msg_namelen = addr ? addrlen : 0,
                                     .msg_iov = &iov,
                                     .msg_iovlen = 1};
                ssize_t n = sock_msg(fd, &msg, flags, true);
                if (n != -2)
                        return n;
        }
        return real_sendto()(fd, buf, len, flags, addr, addrlen);
}

HOOK ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
        if (hooked()) {
                ssize_t n = sock_msg(fd, (struct msghdr *)msg, flags, true);
                if (n != -2)
                        return n;
        }
        return real_sendmsg()(fd, msg, flags);
}

/* Fortified callers (_FORTIFY_SOURCE) reach these instead of read(), recv(), ... */
HOOK ssize_t __read_chk(int fd, void *buf, size_t count, size_t buflen)
{
        if (count > buflen)
                abort(); /* glibc's __chk_fail() */
        return read(fd, buf, count);
}

HOOK ssize_t __pread_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen)
{
        if (count > buflen)
                abort();
        return pread(fd, buf, count, offset);
}

HOOK ssize_t __pread64_chk(int fd, void *buf, size_t count, off_t offset, size_t buflen)
{
        if (count > buflen)
                abort();
        return pread(fd, buf, count, offset);
}

HOOK ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags)
{
        if (len > buflen)
                abort();
        return recv(fd, buf, len, flags);
}

HOOK ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
                            struct sockaddr *addr, socklen_t *addrlen)
{
        if (len > buflen)
                abort();
        return recvfrom(fd, buf, len, flags, addr, addrlen);
}

/* ------------------------------------------------------------------ connections --- */

HOOK int connect(int fd, const struct sockaddr *addr, socklen_t addrlen)
{
        HookFd *e;
        if (!hooked() || fd_kind(fd, &e) != FD_SOCK)
                return real_connect()(fd, addr, addrlen);

        /* O_NONBLOCK for the length of the call, then the caller's flags again */
        int fl = real_fcntl()(fd, F_GETFL);
        if (fl < 0 || real_fcntl()(fd, F_SETFL, fl | O_NONBLOCK) < 0)
                return real_connect()(fd, addr, addrlen);
        int r = real_connect()(fd, addr, addrlen);
        int err = r < 0 ? io_errno() : 0;
        uint64_t deadline = sock_deadline(e, true);
        /* a Unix socket whose listener's backlog is full says EAGAIN where a blocking
         * connect would wait, and gives no readiness to wait for: try again shortly */
        while (r < 0 && err == EAGAIN && addr && addr->sa_family == AF_UNIX) {
                if (sched_now_ns() >= deadline) {
                        err = ETIMEDOUT;
                        break;
                }
                if (fiber_sleep_for(NSEC_PER_MSEC) == -ECANCELED) {
                        err = ECANCELED;
                        break;
                }
                r = real_connect()(fd, addr, addrlen);
                err = r < 0 ? io_errno() : 0;
        }
        if (r < 0 && err == EINPROGRESS) {
                r = park(fd, EPOLLOUT, deadline);
                err = r < 0 ? errno : 0;
                if (r == 0) {
                        int soerr = 0;
                        socklen_t len = sizeof(soerr);
                        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
                                err = io_errno();
                        else
                                err = soerr;
                        r = err ? -1 : 0;
                } else if (err == EAGAIN) {
                        err = ETIMEDOUT; /* a blocking connect past SO_SNDTIMEO */
                }
        }
        real_fcntl()(fd, F_SETFL, fl);
        return r < 0 ? fail(err) : 0;
}

static int hooked_accept(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags, bool four)
{
        HookFd *e;
        int c;

        if (!hooked() || fd_kind(fd, &e) != FD_SOCK) {
                c = four ? real_accept4()(fd, addr, addrlen, flags)
                         : real_accept()(fd, addr, addrlen);
        } else {
                if (park_until_ready(fd, POLLIN, sock_deadline(e, false)) < 0)
                        return -1;
                c = real_accept4()(fd, addr, addrlen, flags);
        }
        if (c >= 0)
                hfd_set(c, HFD_SOCK | (flags & SOCK_NONBLOCK ? HFD_USER_NB : 0));
        return c;
}

HOOK int accept(int fd, struct sockaddr *addr, socklen_t *addrlen)
{
        return hooked_accept(fd, addr, addrlen, 0, false);
}

HOOK int accept4(int fd, struct sockaddr *addr, socklen_t *addrlen, int flags)
{
        return hooked_accept(fd, addr, addrlen, flags, true);
}

/* ------------------------------------------------------------------ poll, select -- */

/* Nanoseconds from now until @deadline_ns; 0 once it has passed. */
static uint64_t ns_left(uint64_t deadline_ns)
{
        uint64_t now = sched_now_ns();
        return deadline_ns > now ? deadline_ns - now : 0;
}

static bool timespec_valid(const struct timespec *ts)
{
        return ts && ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < (long)NSEC_PER_SEC;
}

/*
 * Wait until one of @fds is ready or @deadline_ns, on a hooked fiber: the real poll with
 * a zero timeout, then park (one fd: on the reactor; more: on a private epoll set) and
 * look again. Return: as poll(2); -1 with errno ECANCELED when cancelled.
 */
static int hooked_poll(struct pollfd *fds, nfds_t nfds, uint64_t deadline_ns)
{
        int epfd = -1, rc;

        for (;;) {
                rc = real_poll()(fds, nfds, 0);
                if (rc != 0 || deadline_ns == 0)
                        break;
                if (sched_now_ns() >= deadline_ns)
                        break;
                if (nfds == 0) {
                        if (fiber_sleep_until(deadline_ns) == -ECANCELED) {
                                rc = fail(ECANCELED);
                                break;
                        }
                        continue;
                }
                int wait_fd;
                uint32_t events;
                if (nfds == 1 && fds[0].fd >= 0) {
                        wait_fd = fds[0].fd;
                        events = (fds[0].events & POLLOUT ? EPOLLOUT : 0) |
                                 (fds[0].events & (POLLIN | POLLPRI | POLLRDHUP) ? EPOLLIN : 0);
                        if (!events)
                                events = EPOLLIN; /* only errors or hang-ups asked for */
                } else {
                        if (epfd < 0) {
                                epfd = epoll_create1(EPOLL_CLOEXEC);
                                if (epfd < 0) {
                                        rc = -1;
                                        break;
                                }
                                for (nfds_t i = 0; i < nfds; i++) {
                                        if (fds[i].fd < 0)
                                                continue;
                                        struct epoll_event ev = {
                                                .events = (uint32_t)(fds[i].events &
                                                                     (POLLIN | POLLOUT | POLLPRI |
                                                                      POLLRDHUP))};
                                        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i].fd, &ev) < 0 &&
                                            io_errno() == EEXIST) {
                                                /* the same fd twice: wait for both asks */
                                                for (nfds_t j = 0; j < i; j++)
                                                        if (fds[j].fd == fds[i].fd)
                                                                ev.events |=
                                                                        (uint32_t)(fds[j].events &
                                                                                   (POLLIN |
                                                                                    POLLOUT |
                                                                                    POLLPRI |
                                                                                    POLLRDHUP));
                                                epoll_ctl(epfd, EPOLL_CTL_MOD, fds[i].fd, &ev);
                                        }
                                }
                        }
                        wait_fd = epfd;
                        events = EPOLLIN;
                }
                if (park(wait_fd, events, deadline_ns) < 0) {
                        if (errno == EAGAIN) { /* the deadline */
                                rc = 0;
                                break;
                        }
                        if (errno == EPERM) { /* epoll cannot watch it: the real poll */
                                uint64_t now = sched_now_ns();
                                int ms = deadline_ns == SCHED_FOREVER
                                                 ? -1
                                                 : (int)MIN((deadline_ns - MIN(deadline_ns, now)) /
                                                                    NSEC_PER_MSEC,
                                                            (uint64_t)INT_MAX);
                                rc = real_poll()(fds, nfds, ms);
                                break;
                        }
                        rc = -1;
                        break;
                }
        }
        if (epfd >= 0) {
                int e = errno;
                real_close()(epfd);
                errno = e;
        }
        return rc;
}

static uint64_t deadline_ms(int timeout_ms)
{
        return timeout_ms < 0 ? SCHED_FOREVER
                              : sched_deadline_after((uint64_t)timeout_ms * NSEC_PER_MSEC);
}

static uint64_t deadline_ts(const struct timespec *ts)
{
        if (!ts)
                return SCHED_FOREVER;
        if (ts->tv_sec < 0 || ts->tv_nsec < 0)
                return 0;
        return sched_deadline_after(timespec_load_ns(ts));
}

HOOK int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
        if (!hooked() || timeout == 0)
                return real_poll()(fds, nfds, timeout);
        return hooked_poll(fds, nfds, deadline_ms(timeout));
}

HOOK int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen)
{
        if (fdslen / sizeof(*fds) < nfds)
                abort();
        return poll(fds, nfds, timeout);
}

HOOK int ppoll(struct pollfd *fds, nfds_t nfds, const struct timespec *tmo, const sigset_t *sigmask)
{
        /* the signal mask is not applied on a fiber: its worker's mask is not its own */
        if (!hooked() || (tmo && tmo->tv_sec == 0 && tmo->tv_nsec == 0))
                return real_ppoll()(fds, nfds, tmo, sigmask);
        return hooked_poll(fds, nfds, deadline_ts(tmo));
}

/* select()/pselect() as a poll over the fds in the sets. */
static int hooked_select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, uint64_t deadline_ns)
{
        struct pollfd *p;
        nfds_t n = 0;
        int rc;

        if (nfds < 0 || nfds > FD_SETSIZE)
                return fail(EINVAL);
        p = calloc((size_t)nfds ? (size_t)nfds : 1, sizeof(*p));
        if (!p)
                return fail(ENOMEM);
        for (int fd = 0; fd < nfds; fd++) {
                short ev = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) |
                                   (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
                                   (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
                if (ev)
                        p[n++] = (struct pollfd){.fd = fd, .events = ev};
        }
        rc = hooked_poll(p, n, deadline_ns);
        if (rc >= 0) {
                int count = 0;
                for (nfds_t i = 0; i < n; i++) {
                        if (p[i].revents & POLLNVAL) {
                                free(p);
                                return fail(EBADF);
                        }
                }
                if (rd)
                        FD_ZERO(rd);
                if (wr)
                        FD_ZERO(wr);
                if (ex)
                        FD_ZERO(ex);
                for (nfds_t i = 0; i < n; i++) {
                        short ev = p[i].events, re = p[i].revents;
                        if (rd && (ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
                                FD_SET(p[i].fd, rd);
                                count++;
                        }
                        if (wr && (ev & POLLOUT) && (re & (POLLOUT | POLLERR))) {
                                FD_SET(p[i].fd, wr);
                                count++;
                        }
                        if (ex && (ev & POLLPRI) && (re & POLLPRI)) {
                                FD_SET(p[i].fd, ex);
                                count++;
                        }
                }
                rc = count;
        }
        int e = errno;
        free(p);
        errno = e;
        return rc;
}

HOOK int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv)
{
        if (!hooked() || (tv && tv->tv_sec == 0 && tv->tv_usec == 0))
                return real_select()(nfds, rd, wr, ex, tv);
        if (!tv)
                return hooked_select(nfds, rd, wr, ex, SCHED_FOREVER);
        uint64_t deadline = sched_deadline_after((uint64_t)tv->tv_sec * NSEC_PER_SEC +
                                                 (uint64_t)tv->tv_usec * NSEC_PER_USEC);
        int rc = hooked_select(nfds, rd, wr, ex, deadline);
        uint64_t left = ns_left(deadline); /* Linux writes the time left back */
        tv->tv_sec = (time_t)(left / NSEC_PER_SEC);
        tv->tv_usec = (suseconds_t)(left % NSEC_PER_SEC / NSEC_PER_USEC);
        return rc;
}

HOOK int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *ts,
                 const sigset_t *sigmask)
{
        if (!hooked() || (ts && ts->tv_sec == 0 && ts->tv_nsec == 0))
                return real_pselect()(nfds, rd, wr, ex, ts, sigmask);
        return hooked_select(nfds, rd, wr, ex, deadline_ts(ts));
}

/* An epoll set is itself pollable: wait for it as for any fd, then take the events. */
static int hooked_epoll_wait(int epfd, struct epoll_event *events, int max, uint64_t deadline_ns)
{
        for (;;) {
                int n = real_epoll_wait()(epfd, events, max, 0);
                if (n != 0 || deadline_ns == 0 || sched_now_ns() >= deadline_ns)
                        return n;
                if (park(epfd, EPOLLIN, deadline_ns) < 0)
                        return errno == EAGAIN ? 0 : -1; /* the deadline: nothing */
        }
}

HOOK int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
        if (!hooked() || timeout == 0)
                return real_epoll_wait()(epfd, events, maxevents, timeout);
        return hooked_epoll_wait(epfd, events, maxevents, deadline_ms(timeout));
}

HOOK int epoll_pwait(int epfd, struct epoll_event *events, int maxevents, int timeout,
                     const sigset_t *sigmask)
{
        /* the signal mask is not applied on a fiber, as for ppoll */
        if (!hooked() || timeout == 0)
                return real_epoll_pwait()(epfd, events, maxevents, timeout, sigmask);
        return hooked_epoll_wait(epfd, events, maxevents, deadline_ms(timeout));
}

/* ------------------------------------------------------------------ sleeps -------- */

HOOK int nanosleep(const struct timespec *req, struct timespec *rem)
{
        if (!hooked())
                return real_nanosleep()(req, rem);
        if (!timespec_valid(req))
                return fail(EINVAL);
        uint64_t deadline = sched_deadline_after(timespec_load_ns(req));
        if (fiber_sleep_until(deadline) < 0) {
                if (rem)
                        *rem = timespec_store_ns(ns_left(deadline));
                return fail(ECANCELED);
        }
        return 0;
}

HOOK int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
                         struct timespec *rem)
{
        if (!hooked() ||
            (clock != CLOCK_MONOTONIC && clock != CLOCK_REALTIME && clock != CLOCK_BOOTTIME))
                return real_clock_nanosleep()(clock, flags, req, rem);
        if (!timespec_valid(req))
                return EINVAL;
        uint64_t ns = timespec_load_ns(req), deadline;
        if (flags & TIMER_ABSTIME) {
                struct timespec now;
                clock_gettime(clock, &now);
                uint64_t now_ns = timespec_load_ns(&now);
                deadline = ns <= now_ns ? 0 : sched_deadline_after(ns - now_ns);
        } else {
                deadline = sched_deadline_after(ns);
        }
        if (deadline && fiber_sleep_until(deadline) < 0) {
                if (rem && !(flags & TIMER_ABSTIME))
                        *rem = timespec_store_ns(ns_left(deadline));
                return ECANCELED;
        }
        return 0;
}

HOOK int usleep(useconds_t usec)
{
        if (!hooked())
                return real_usleep()(usec);
        if (fiber_sleep_until(sched_deadline_after((uint64_t)usec * NSEC_PER_USEC)) < 0)
                return fail(ECANCELED);
        return 0;
}

HOOK unsigned int sleep(unsigned int seconds)
{
        if (!hooked())
                return real_sleep()(seconds);
        uint64_t deadline = sched_deadline_after((uint64_t)seconds * NSEC_PER_SEC);
        if (fiber_sleep_until(deadline) < 0)
                return (unsigned)((ns_left(deadline) + NSEC_PER_SEC - 1) / NSEC_PER_SEC);
        return 0;
}

/* ------------------------------------------------------------------ fd bookkeeping */

HOOK int socket(int domain, int type, int protocol)
{
        int fd = real_socket()(domain, type, protocol);
        if (fd >= 0)
                hfd_set(fd, HFD_SOCK | (type & SOCK_NONBLOCK ? HFD_USER_NB : 0));
        return fd;
}

HOOK int socketpair(int domain, int type, int protocol, int sv[2])
{
        int r = real_socketpair()(domain, type, protocol, sv);
        if (r == 0) {
                uint32_t st = HFD_SOCK | (type & SOCK_NONBLOCK ? HFD_USER_NB : 0);
                hfd_set(sv[0], st);
                hfd_set(sv[1], st);
        }
        return r;
}

HOOK int close(int fd)
{
        hfd_set(fd, 0);
        return real_close()(fd);
}

HOOK int dup(int fd)
{
        int n = real_dup()(fd);
        if (n >= 0)
                hfd_copy(fd, n);
        return n;
}

HOOK int dup2(int fd, int fd2)
{
        int n = real_dup2()(fd, fd2);
        if (n >= 0 && n != fd)
                hfd_copy(fd, n);
        return n;
}

HOOK int dup3(int fd, int fd2, int flags)
{
        int n = real_dup3()(fd, fd2, flags);
        if (n >= 0)
                hfd_copy(fd, n);
        return n;
}

/* A change of O_NONBLOCK on a socket through fcntl(F_SETFL) or ioctl(FIONBIO). */
static void hfd_set_nonblock(int fd, bool nb)
{
        HookFd *e = hfd(fd, false);
        uint32_t st = e ? __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) : 0;
        if (st & HFD_SOCK)
                __atomic_store_n(&e->state, nb ? st | HFD_USER_NB : st & ~HFD_USER_NB,
                                 __ATOMIC_RELEASE);
}

static int hooked_fcntl(int fd, int cmd, va_list ap)
{
        switch (cmd) {
        case F_DUPFD:
        case F_DUPFD_CLOEXEC: {
                int n = real_fcntl()(fd, cmd, va_arg(ap, int));
                if (n >= 0)
                        hfd_copy(fd, n);
                return n;
        }
        case F_SETFL: {
                int fl = va_arg(ap, int);
                int r = real_fcntl()(fd, cmd, fl);
                if (r == 0)
                        hfd_set_nonblock(fd, fl & O_NONBLOCK);
                return r;
        }
        default:
                /* every other command takes an int, a pointer or nothing: pass a word */
                return real_fcntl()(fd, cmd, va_arg(ap, void *));
        }
}

HOOK int fcntl(int fd, int cmd, ...)
{
        va_list ap;
        va_start(ap, cmd);
        int r = hooked_fcntl(fd, cmd, ap);
        va_end(ap);
        return r;
}

HOOK int fcntl64(int fd, int cmd, ...)
{
        va_list ap;
        va_start(ap, cmd);
        int r = hooked_fcntl(fd, cmd, ap);
        va_end(ap);
        return r;
}

HOOK int ioctl(int fd, unsigned long request, ...)
{
        va_list ap;
        va_start(ap, request);
        void *arg = va_arg(ap, void *);
        va_end(ap);
        int r = real_ioctl()(fd, request, arg);
        if (r == 0 && request == FIONBIO && arg)
                hfd_set_nonblock(fd, *(int *)arg != 0);
        return r;
}

HOOK int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
        int r = real_setsockopt()(fd, level, name, val, len);
        if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) && val &&
            len >= sizeof(struct timeval)) {
                const struct timeval *tv = val;
                uint64_t ms = (uint64_t)tv->tv_sec * 1000 + (uint64_t)tv->tv_usec / 1000;
                if (!ms && tv->tv_usec)
                        ms = 1;
                HookFd *e = hfd(fd, true);
                if (e) {
                        if (!(__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) & HFD_SOCK))
                                __atomic_store_n(&e->state, HFD_SOCK, __ATOMIC_RELEASE);
                        __atomic_store_n(name == SO_RCVTIMEO ? &e->rcvto_ms : &e->sndto_ms,
                                         (uint32_t)MIN(ms, (uint64_t)UINT32_MAX), __ATOMIC_RELAXED);
                }
        }
        return r;
}

/* ------------------------------------------------------------------ opening ------- */

/* An open on a hooked fiber through the program's open hook: the fd, or -1 with errno;
 * -2 for "make the real call" (no hook, or the hook declined). */
static int hooked_openat(int dirfd, const char *path, int flags, mode_t mode)
{
        SchedHookOpenFn fn = __atomic_load_n(&hook_open_fn, __ATOMIC_ACQUIRE);
        if (!fn || !hooked())
                return -2;
        int fd = fn(dirfd, path, flags, mode);
        if (fd == -ENOSYS)
                return -2;
        return fd < 0 ? fail(-fd) : fd;
}

static mode_t open_mode(int flags, va_list ap)
{
        return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

HOOK int open(const char *path, int flags, ...)
{
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        int fd = hooked_openat(AT_FDCWD, path, flags, mode);
        return fd != -2 ? fd : real_open()(path, flags, mode);
}

HOOK int open64(const char *path, int flags, ...)
{
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return open(path, flags, mode);
}

HOOK int openat(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        int fd = hooked_openat(dirfd, path, flags, mode);
        return fd != -2 ? fd : real_openat()(dirfd, path, flags, mode);
}

HOOK int openat64(int dirfd, const char *path, int flags, ...)
{
        va_list ap;
        va_start(ap, flags);
        mode_t mode = open_mode(flags, ap);
        va_end(ap);
        return openat(dirfd, path, flags, mode);
}

/* Fortified open()s without a mode argument. */
HOOK int __open_2(const char *path, int flags)
{
        return open(path, flags);
}

HOOK int __open64_2(const char *path, int flags)
{
        return open(path, flags);
}

HOOK int __openat_2(int dirfd, const char *path, int flags)
{
        return openat(dirfd, path, flags);
}

HOOK int __openat64_2(int dirfd, const char *path, int flags)
{
        return openat(dirfd, path, flags);
}

HOOK int creat(const char *path, mode_t mode)
{
        int fd = hooked_openat(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
        return fd != -2 ? fd : real_creat()(path, mode);
}

HOOK int creat64(const char *path, mode_t mode)
{
        return creat(path, mode);
}

/* fopen(3)'s mode string as open(2) flags; -1 for a mode fopen refuses. */
static int fopen_flags(const char *mode)
{
        int flags;
        switch (mode[0]) {
        case 'r':
                flags = O_RDONLY;
                break;
        case 'w':
                flags = O_WRONLY | O_CREAT | O_TRUNC;
                break;
        case 'a':
                flags = O_WRONLY | O_CREAT | O_APPEND;
                break;
        default:
                return -1;
        }
        for (const char *m = mode + 1; *m && *m != ','; m++) {
                if (*m == '+')
                        flags = (flags & ~O_ACCMODE) | O_RDWR;
                else if (*m == 'e')
                        flags |= O_CLOEXEC;
                else if (*m == 'x')
                        flags |= O_EXCL;
        }
        return flags;
}

HOOK FILE *fopen(const char *path, const char *mode)
{
        int flags = mode ? fopen_flags(mode) : -1;
        if (flags >= 0) {
                int fd = hooked_openat(AT_FDCWD, path, flags, 0666);
                if (fd >= 0) {
                        FILE *f = fdopen(fd, mode);
                        if (!f) {
                                int e = errno;
                                real_close()(fd);
                                errno = e;
                        }
                        return f;
                }
                if (fd == -1)
                        return NULL;
        }
        return real_fopen()(path, mode);
}

HOOK FILE *fopen64(const char *path, const char *mode)
{
        return fopen(path, mode);
}

/* ------------------------------------------------------------------ name lookups -- */

typedef struct GaiCall {
        BlockioCall call;
        char *node, *service; /* owned copies */
        struct addrinfo hints;
        bool has_hints;
        struct addrinfo *res; /* the answer, owned until taken */
        int rc;
} GaiCall;

static void gai_run(BlockioCall *c)
{
        GaiCall *g = container_of(c, GaiCall, call);
        g->rc = real_getaddrinfo()(g->node, g->service, g->has_hints ? &g->hints : NULL, &g->res);
}

static void gai_free(BlockioCall *c)
{
        GaiCall *g = container_of(c, GaiCall, call);
        if (g->res)
                freeaddrinfo(g->res);
        free(g->node);
        free(g->service);
        free(g);
}

HOOK int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                     struct addrinfo **res)
{
        if (!hooked())
                return real_getaddrinfo()(node, service, hints, res);
        GaiCall *g = calloc(1, sizeof(*g));
        if (!g)
                return EAI_MEMORY;
        g->node = node ? strdup(node) : NULL;
        g->service = service ? strdup(service) : NULL;
        if ((node && !g->node) || (service && !g->service)) {
                gai_free(&g->call);
                return EAI_MEMORY;
        }
        if (hints) {
                g->hints = *hints;
                g->hints.ai_addr = NULL;
                g->hints.ai_canonname = NULL;
                g->hints.ai_next = NULL;
                g->has_hints = true;
        }
        g->call.run = gai_run;
        g->call.free = gai_free;
        int r = blockio_call(&g->call);
        if (r < 0) {
                /* cancelled: the blocking-I/O thread frees the call when it is done */
                errno = -r;
                return EAI_SYSTEM;
        }
        int rc = g->rc;
        *res = g->res;
        g->res = NULL;
        blockio_call_put(&g->call);
        return rc;
}

typedef struct GhbnCall {
        BlockioCall call;
        char *name;
        struct hostent *he;
        int herr;
} GhbnCall;

static void ghbn_run(BlockioCall *c)
{
        GhbnCall *g = container_of(c, GhbnCall, call);
        g->he = real_gethostbyname()(g->name);
        g->herr = h_errno;
}

static void ghbn_free(BlockioCall *c)
{
        GhbnCall *g = container_of(c, GhbnCall, call);
        free(g->name);
        free(g);
}

HOOK struct hostent *gethostbyname(const char *name)
{
        if (!hooked() || !name)
                return real_gethostbyname()(name);
        GhbnCall *g = calloc(1, sizeof(*g));
        if (!g || !(g->name = strdup(name))) {
                free(g);
                h_errno = NO_RECOVERY;
                return NULL;
        }
        g->call.run = ghbn_run;
        g->call.free = ghbn_free;
        if (blockio_call(&g->call) < 0) {
                h_errno = TRY_AGAIN;
                return NULL;
        }
        /* glibc's answer lives in its static buffer, as for a direct call */
        struct hostent *he = g->he;
        h_errno = g->herr;
        blockio_call_put(&g->call);
        return he;
}
