/* SPDX-License-Identifier: MIT */
/*
 * io.c — fiber-aware read / write / accept / connect on non-blocking fds: try the
 * syscall; on EAGAIN park on fiber_wait_fd() (the group's reactor) and try again.
 * errno is read once, right after each syscall, through io_errno(): a fiber may come
 * back from fiber_wait_fd() on another thread, and errno is per thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "scheduler/runtime.h"

__attribute__((noinline)) int io_errno(void)
{
        __asm__ __volatile__("" ::: "memory");
        return errno;
}

/*
 * After a syscall returned -1: 1 to retry it now (EINTR), 0 to retry once @fd is ready
 * for @events (parked meanwhile), or the negative errno to return.
 */
static int retry_after(int fd, uint32_t events, uint64_t deadline_ns)
{
        int e = io_errno();
        if (e == EINTR)
                return 1;
        if (e != EAGAIN && e != EWOULDBLOCK)
                return -e;
        int r = fiber_wait_fd(fd, events, deadline_ns);
        return r < 0 ? r : 0;
}

ssize_t fiber_read(int fd, void *buf, size_t len, uint64_t deadline_ns)
{
        for (;;) {
                ssize_t n = read(fd, buf, len);
                if (n >= 0)
                        return n;
                int r = retry_after(fd, EPOLLIN, deadline_ns);
                if (r < 0)
                        return r;
        }
}

ssize_t fiber_write(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
        for (;;) {
                ssize_t n = write(fd, buf, len);
                if (n >= 0)
                        return n;
                int r = retry_after(fd, EPOLLOUT, deadline_ns);
                if (r < 0)
                        return r;
        }
}

ssize_t fiber_write_all(int fd, const void *buf, size_t len, uint64_t deadline_ns)
{
        size_t done = 0;
        while (done < len) {
                ssize_t n = fiber_write(fd, (const char *)buf + done, len - done, deadline_ns);
                if (n < 0)
                        return n;
                done += (size_t)n;
        }
        return (ssize_t)len;
}

int fiber_accept(int fd, uint64_t deadline_ns)
{
        for (;;) {
                int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (c >= 0)
                        return c;
                if (io_errno() == ECONNABORTED)
                        continue; /* the peer gave up before we took it: take the next */
                int r = retry_after(fd, EPOLLIN, deadline_ns);
                if (r < 0)
                        return r;
        }
}

int fiber_connect(int fd, const void *addr, unsigned addrlen, uint64_t deadline_ns)
{
        int err = 0;
        socklen_t len = sizeof(err);

        if (connect(fd, addr, addrlen) == 0)
                return 0;
        int e = io_errno();
        if (e != EINPROGRESS && e != EAGAIN && e != EINTR)
                return -e;
        int r = fiber_wait_fd(fd, EPOLLOUT, deadline_ns);
        if (r < 0)
                return r;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                return -io_errno();
        return err ? -err : 0;
}
