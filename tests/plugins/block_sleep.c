/* SPDX-License-Identifier: MIT */
/*
 * block_sleep.c — a test plugin that blocks its worker thread for {"ms"} milliseconds
 * (default 2000) in a plain clock_nanosleep(2), the way a plugin that calls sleep(3) or
 * a blocking read() does: the runtime must hand the worker's other fibers to a spare
 * worker (rescue), and the daemon's supervision must not need the blocked worker.
 *
 * The sleep is the raw system call (syscall(2)), which fiberd's hooks do not reach, to
 * an absolute deadline and resumed after EINTR, so the thread stays blocked for the whole
 * time and never yields. Progress {0, ms} is reported before the sleep, so a test knows the thread
 * is blocked. Result {"slept_ms": ms}.
 */
#include "plugins/fiberd/plugin.h"

#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int block_sleep_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t ms = 2000;
        struct timespec until;
        int r = host->arg_uint(job, "ms", &ms);

        if (r < 0 && r != -ENOENT)
                return r;
        host->progress(job, 0, ms); /* tests see that it has started */
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(ms / 1000);
        until.tv_nsec += (long)(ms % 1000) * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
        }
        while (syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) < 0 &&
               errno == EINTR)
                ;
        return host->result_uint(job, "slept_ms", ms);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "block_sleep",
        .version = "1.0",
        .description = "test: blocks its thread {\"ms\"} (2000) in clock_nanosleep",
        .run = block_sleep_run,
};
