/* SPDX-License-Identifier: MIT */
/*
 * bench-util.c — the helpers every benchmark binary uses (clock, dying with a message,
 * counts, resident memory): libc only, so fiberd-bench-gearman links it without the
 * runtime.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/bench.h"

uint64_t bench_now_ns(void)
{
        return clock_now_ns(CLOCK_MONOTONIC);
}

void bench_die(const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        if ((size_t)n > sizeof(buf) - 2)
                n = (int)sizeof(buf) - 2;
        buf[n++] = '\n';
        fflush(stdout);
        if (write(STDERR_FILENO, "fiberd-bench: ", 14) < 0 || write(STDERR_FILENO, buf, n) < 0) {
                /* nothing left to report with */
        }
        _exit(1);
}

uint64_t bench_rss_bytes(void)
{
        unsigned long size = 0, resident = 0;
        FILE *fp = fopen("/proc/self/statm", "re");

        if (!fp)
                bench_die("cannot open /proc/self/statm: %s", strerror(errno));
        if (fscanf(fp, "%lu %lu", &size, &resident) != 2)
                bench_die("cannot parse /proc/self/statm");
        fclose(fp);
        return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t bench_parse_count(const char *s, uint64_t def)
{
        unsigned long long v;
        char *end;

        if (!s)
                return def;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno || end == s || *end || v == 0)
                bench_die("bad count '%s'", s);
        return v;
}
