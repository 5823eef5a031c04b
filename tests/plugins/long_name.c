/* SPDX-License-Identifier: MIT */
/*
 * long_name.c — a test plugin whose name is as long as a name may be
 * (FIBERD_PLUGIN_NAME_MAX, 32 characters), so fiberctl's tables are seen to stay in line
 * with it (tests/tui.sh). It reports its own progress in steps: {"steps"} (default 10)
 * of {"step_ms"} milliseconds each (default 100), progress {i, steps} after each, the way
 * a plugin that works through a file does; so `fiberctl wait` on one job has a plugin
 * progress to show. Result {"steps": steps}.
 */
#include "plugins/fiberd/plugin.h"

#include "scheduler/base/time-util.h"

#define LONG_NAME "long-name-plugin-of-32-chars-abc"

_Static_assert(sizeof(LONG_NAME) - 1 == FIBERD_PLUGIN_NAME_MAX, "the name is the longest");

static int long_name_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t steps = 10, step_ms = 100;
        int r = host->arg_uint(job, "steps", &steps);

        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_uint(job, "step_ms", &step_ms);
        if (r < 0 && r != -ENOENT)
                return r;
        for (uint64_t i = 0; i < steps; i++) {
                host->progress(job, i, steps);
                r = host->sleep_until(job, host->now_ns() + step_ms * NSEC_PER_MSEC);
                if (r < 0)
                        return r;
        }
        host->progress(job, steps, steps);
        return host->result_uint(job, "steps", steps);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = LONG_NAME,
        .version = "1.0",
        .description = "a 32-character name; progress in {\"steps\"} of {\"step_ms\"}",
        .run = long_name_run,
};
