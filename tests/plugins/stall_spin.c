/* SPDX-License-Identifier: MIT */
/*
 * stall_spin.c — a test plugin that runs {"ms"} milliseconds (default 300) on the CPU
 * without ever yielding, the way a careless plugin does: the stall detector must report
 * it once, naming its job and plugin, with stall_spin_busy in the backtrace.
 *
 * stall_spin_busy is exported with default visibility (the test plugins are built with
 * -fvisibility=hidden) and never inlined, so it is in the dynamic symbol table and
 * dladdr() resolves the stalled frame to its name.
 */
#include "plugins/fiberd/plugin.h"

#include <time.h>

/* The busy loop. Returns a number so the work is not optimised away. */
__attribute__((visibility("default"), noinline)) uint64_t stall_spin_busy(uint64_t ms);

uint64_t stall_spin_busy(uint64_t ms)
{
        struct timespec ts;
        volatile uint64_t work = 0;
        uint64_t start, now;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        start = now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        while (now - start < ms * 1000000u) {
                for (int i = 0; i < 1024; i++)
                        work += (uint64_t)i * 2654435761u;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        }
        return work;
}

static int stall_spin_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t ms = 300;
        int r = host->arg_uint(job, "ms", &ms);

        if (r < 0 && r != -ENOENT)
                return r;
        return host->result_uint(job, "work", stall_spin_busy(ms));
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,  .name = "stall_spin",
        .version = "1.0",      .description = "test: spins {\"ms\"} (300) without yielding",
        .run = stall_spin_run,
};
