/* SPDX-License-Identifier: MIT */
/*
 * sleep.c — the bundled "sleep" plugin: park the job for {"ms"} milliseconds.
 *
 * For timers, cancellation and load tests: the job's fiber parks on the runtime's timer
 * (host->sleep_until, no worker is held), and returns -ECANCELED the moment the job is
 * cancelled or its timeout passes. Result {"slept_ms": ms}.
 */
#include "plugins/fiberd/plugin.h"
#include "scheduler/base/time-util.h"

#define SLEEP_MS_MAX (7 * 24 * 3600 * MSEC_PER_SEC) /* a week */

/* The arguments, read the same way by check_args (at submission) and run. */
static int sleep_args(FiberdJob *job, const FiberdHost *host, uint64_t *ret_ms)
{
        uint64_t ms;
        int r;

        r = host->arg_uint(job, "ms", &ms);
        if (r < 0)
                return r;
        if (ms > SLEEP_MS_MAX)
                return host->fail(job, -ERANGE, "ms: %llu is more than a week",
                                  (unsigned long long)ms);
        *ret_ms = ms;
        return 0;
}

/* A bad "ms" is refused at job.submit: INVALID_ARGUMENT, no job. */
static int sleep_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        uint64_t ms;

        return sleep_args(args, host, &ms);
}

static int sleep_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t ms = 0;
        int r;

        r = sleep_args(job, host, &ms);
        if (r < 0)
                return r;
        host->progress(job, 0, ms);
        r = host->sleep_until(job, host->now_ns() + ms * NSEC_PER_MSEC);
        if (r < 0)
                return r;
        host->progress(job, ms, ms);
        return host->result_uint(job, "slept_ms", ms);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "sleep",
        .version = "1.0",
        .description = "sleeps: {\"ms\"} -> {\"slept_ms\"}",
        .run = sleep_run,
        /* sleeping again from the start is harmless: requeued after a crash (store.h) */
        .flags = FIBERD_PLUGIN_RETRY_SAFE,
        .check_args = sleep_check,
};
