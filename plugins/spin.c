/* SPDX-License-Identifier: MIT */
/*
 * spin.c — the bundled "spin" plugin: burn CPU for {"ms"} milliseconds, cooperatively.
 *
 * Busy-loops on the monotonic clock and calls host->maybe_yield() after every short
 * round of work, so it yields once it has used the daemon's task quota (0.5 ms by
 * default) and a cancelled job stops within a round; a worker running spin jobs still
 * runs every other ready fiber once per quota, and the job classes' shares are charged
 * for the time spin really ran. Against a daemon without maybe_yield (an older host)
 * it yields between slices of SPIN_SLICE_NS instead. For CPU-bound load tests of the
 * scheduler's fairness. Result {"spun_ms": ms, "yields": how many times it yielded}.
 */
#include "plugins/fiberd/plugin.h"
#include "scheduler/base/time-util.h"

#define SPIN_MS_MAX (3600 * MSEC_PER_SEC) /* an hour */
#define SPIN_SLICE_NS (NSEC_PER_MSEC / 5) /* old hosts: 0.2 ms of work between yields */

/* A round of work between two clock reads. */
static void spin_round(volatile uint64_t *work)
{
        for (int i = 0; i < 256; i++)
                *work += (uint64_t)i * 2654435761u;
}

/* With the preemption points: yield when the task quota is used. Return: 0 and
 * *@ret_yields; -ECANCELED. */
static int spin_preemptible(FiberdJob *job, const FiberdHost *host, uint64_t ms,
                            uint64_t *ret_yields)
{
        uint64_t start, end, now, yields = 0;
        volatile uint64_t work = 0;
        int r;

        start = now = host->now_ns();
        end = start + ms * NSEC_PER_MSEC;
        while (now < end) {
                bool due;

                spin_round(&work);
                due = host->need_preempt(job);
                if (due)
                        host->progress(job, (now - start) / NSEC_PER_MSEC, ms);
                r = host->maybe_yield(job);
                if (r < 0)
                        return r;
                yields += due;
                now = host->now_ns();
        }
        *ret_yields = yields;
        return 0;
}

/* The arguments, read the same way by check_args (at submission) and run. */
static int spin_args(FiberdJob *job, const FiberdHost *host, uint64_t *ret_ms)
{
        uint64_t ms;
        int r;

        r = host->arg_uint(job, "ms", &ms);
        if (r < 0)
                return r;
        if (ms > SPIN_MS_MAX)
                return host->fail(job, -ERANGE, "ms: %llu is more than an hour",
                                  (unsigned long long)ms);
        *ret_ms = ms;
        return 0;
}

/* A bad "ms" is refused at job.submit: INVALID_ARGUMENT, no job. */
static int spin_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        uint64_t ms;

        return spin_args(args, host, &ms);
}

static int spin_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t ms = 0, start, end, now, yields = 0;
        volatile uint64_t work = 0;
        int r;

        r = spin_args(job, host, &ms);
        if (r < 0)
                return r;
        start = now = host->now_ns();
        end = start + ms * NSEC_PER_MSEC;
        if (FIBERD_HOST_HAS(host, maybe_yield) && host->maybe_yield && host->need_preempt) {
                r = spin_preemptible(job, host, ms, &yields);
                if (r < 0)
                        return r;
                now = end; /* done: skip the old host's loop */
        }
        while (now < end) {
                uint64_t slice_end = now + SPIN_SLICE_NS;
                while (now < slice_end && now < end) {
                        spin_round(&work);
                        now = host->now_ns();
                }
                host->progress(job, (now - start) / NSEC_PER_MSEC, ms);
                r = host->yield(job);
                if (r < 0)
                        return r;
                yields++;
                now = host->now_ns();
        }
        r = host->result_uint(job, "spun_ms", ms);
        if (r >= 0)
                r = host->result_uint(job, "yields", yields);
        return r < 0 ? r : 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "spin",
        .version = "1.0",
        .description = "burns CPU, yielding: {\"ms\"} -> {\"spun_ms\", \"yields\"}",
        .run = spin_run,
        .check_args = spin_check,
};
