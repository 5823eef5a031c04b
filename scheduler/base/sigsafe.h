/* SPDX-License-Identifier: MIT */
/*
 * sigsafe.h — building a message in a signal handler: appending text and decimal
 * numbers to a fixed buffer with no libc call that is not async-signal-safe
 * (signal-safety(7)), for a report a handler then writes with one write(2). The stack
 * overflow report (scheduler/stack.c) and the fatal-signal report of a plugin's crash
 * (daemon/plugin/crash.c) use it. Header-only, libc only: every folder may include it.
 */
#ifndef FIBERD_BASE_SIGSAFE_H
#define FIBERD_BASE_SIGSAFE_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/*
 * sigsafe_write / sigsafe_open / sigsafe_close - the raw system calls, for signal
 * handlers and exit paths: the C library's write(), open() and close() are the
 * runtime's hooks in fiberd (scheduler/hook.c), which may park the running fiber —
 * never what a handler that interrupted it may do. Return: as the system calls (-1 and
 * errno). Context: any, a signal handler included.
 */
static inline long sigsafe_write(int fd, const void *buf, size_t len)
{
        return syscall(SYS_write, fd, buf, len);
}

static inline int sigsafe_open(const char *path, int flags, unsigned mode)
{
        return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static inline int sigsafe_close(int fd)
{
        return (int)syscall(SYS_close, fd);
}

/* sigsafe_put_str - append @s (NULL: nothing) to @buf, which holds *@len of @cap bytes;
 * cut at cap - 1, so a NUL still fits. Context: any, a signal handler included. */
static inline void sigsafe_put_str(char *buf, size_t *len, size_t cap, const char *s)
{
        while (s && *s && *len + 1 < cap)
                buf[(*len)++] = *s++;
}

/* sigsafe_put_u64 - append @v in decimal, as sigsafe_put_str(). Context: any. */
static inline void sigsafe_put_u64(char *buf, size_t *len, size_t cap, uint64_t v)
{
        char tmp[24];
        int n = 0;

        do {
                tmp[n++] = (char)('0' + v % 10);
                v /= 10;
        } while (v);
        while (n && *len + 1 < cap)
                buf[(*len)++] = tmp[--n];
}

#endif
