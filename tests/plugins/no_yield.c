/* SPDX-License-Identifier: MIT */
/*
 * no_yield.c — a test plugin whose code does not come back to a yield point for {"ms"}
 * milliseconds (default 3000), so cancellation cannot reach it:
 *  - {"how": "spin"} (the default): a pure CPU loop that calls nothing of the host;
 *  - {"how": "read"}: one blocking read(2) of a timerfd that expires after ms, made
 *    with syscall(SYS_read) so that no libc wrapper, nor any hook fiberd may put on
 *    read() one day, turns it into a fiber wait.
 * The daemon must end such a job at its cancel or timeout without it (detached).
 *
 * Progress {0, ms} is reported before, so a test knows the code runs. When the code
 * returns it reports progress {ms, ms} and sets the result {"ms": ms}: a job that ended
 * meanwhile must keep its record as it ended, so a test sees neither.
 * no_yield_inline.c builds it under another name, declared FIBERD_PLUGIN_INLINE (a
 * plugin that lies: its job holds a server worker).
 */
#include "plugins/fiberd/plugin.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Busy for @ms. Returns a number so the work is not optimised away. */
static uint64_t spin(uint64_t ms)
{
        volatile uint64_t work = 0;
        uint64_t start = now_ns();

        while (now_ns() - start < ms * 1000000u)
                for (int i = 0; i < 1024; i++)
                        work += (uint64_t)i * 2654435761u;
        return work;
}

/* Blocks the thread in read(2) for @ms. Return: 0; -errno. */
static int block_in_read(uint64_t ms)
{
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)(ms / 1000),
                                              .tv_nsec = (long)(ms % 1000) * 1000000L}};
        uint64_t expirations;
        long n;
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);

        if (fd < 0)
                return -errno;
        if (ms == 0)
                its.it_value.tv_nsec = 1; /* 0 would disarm it */
        if (timerfd_settime(fd, 0, &its, NULL) < 0) {
                int r = -errno;
                close(fd);
                return r;
        }
        /* EINTR: the stall detector's signal; the timer stays armed */
        do
                n = syscall(SYS_read, fd, &expirations, sizeof(expirations));
        while (n < 0 && errno == EINTR);
        close(fd);
        return n < 0 ? -errno : 0;
}

static int no_yield_run(FiberdJob *job, const FiberdHost *host)
{
        char how[16] = "spin";
        uint64_t ms = 3000;
        int r = host->arg_uint(job, "ms", &ms);

        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_str(job, "how", how, sizeof(how));
        if (r < 0 && r != -ENOENT)
                return r;
        host->progress(job, 0, ms); /* tests see that the code runs */
        if (strcmp(how, "read") == 0) {
                r = block_in_read(ms);
                if (r < 0)
                        return host->fail(job, r, "read of a timerfd: %s", strerror(-r));
        } else if (strcmp(how, "spin") == 0) {
                spin(ms);
        } else {
                return host->fail(job, -EINVAL, "how: spin or read, not %s", how);
        }
        host->progress(job, ms, ms);
        return host->result_uint(job, "ms", ms);
}

#ifndef NO_YIELD_NAME
#define NO_YIELD_NAME "no_yield"
#define NO_YIELD_FLAGS 0
#endif

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = NO_YIELD_NAME,
        .version = "1.0",
        .description = "test: {\"ms\"} (3000) in a CPU loop or a blocking read, never yielding",
        .run = no_yield_run,
        .flags = NO_YIELD_FLAGS,
};
