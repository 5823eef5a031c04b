/* SPDX-License-Identifier: MIT */
/*
 * spin.c — the bundled "spin" plugin: burn CPU for {"ms"} milliseconds, cooperatively.
 *
 * Busy-loops on the monotonic clock in slices of SPIN_SLICE_NS and calls host->yield()
 * between slices, so a worker running spin jobs still runs every other ready fiber at
 * least once per slice, and a cancelled job stops within one slice. For CPU-bound load
 * tests of the scheduler's fairness. Result {"spun_ms": ms, "yields": slices}.
 */
#include "plugins/fiberd/plugin.h"
#include "scheduler/base/time-util.h"

#define SPIN_MS_MAX (3600 * MSEC_PER_SEC) /* an hour */
#define SPIN_SLICE_NS (NSEC_PER_MSEC / 5) /* 0.2 ms of work between yields */

static int spin_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t ms, start, end, now, yields = 0;
        volatile uint64_t work = 0;
        int r;

        r = host->arg_uint(job, "ms", &ms);
        if (r < 0)
                return r;
        if (ms > SPIN_MS_MAX)
                return host->fail(job, -ERANGE, "ms: %llu is more than an hour",
                                  (unsigned long long)ms);
        start = now = host->now_ns();
        end = start + ms * NSEC_PER_MSEC;
        while (now < end) {
                uint64_t slice_end = now + SPIN_SLICE_NS;
                while (now < slice_end && now < end) {
                        for (int i = 0; i < 256; i++)
                                work += (uint64_t)i * 2654435761u;
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
};
