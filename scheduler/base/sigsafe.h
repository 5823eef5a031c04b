/* SPDX-License-Identifier: MIT */
/*
 * sigsafe.h — building a message in a signal handler: appending text and decimal
 * numbers to a fixed buffer with no libc call that is not async-signal-safe
 * (signal-safety(7)), for a report a handler then writes with one write(2). The stack
 * overflow report (scheduler/stack.c) and the fatal-signal report of a plugin's crash
 * (daemon/crash.c) use it. Header-only, libc only: every folder may include it.
 */
#ifndef FIBERD_BASE_SIGSAFE_H
#define FIBERD_BASE_SIGSAFE_H

#include <stddef.h>
#include <stdint.h>

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
