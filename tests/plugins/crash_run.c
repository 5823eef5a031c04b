/* SPDX-License-Identifier: MIT */
/*
 * crash_run.c — a test plugin whose run() dereferences NULL (after {"ms"} ms parked, when
 * given): fiberd dies of SIGSEGV in the job. The job store's crash-only plugins (daemon/plugin/crash.h) must report the job and
 * plugin, fail that job with INTERRUPTED at the next start, and quarantine the plugin
 * after two such crashes, even with a clean restart or another plugin's crash between.
 */
#include "plugins/fiberd/plugin.h"

static int crash_run_run(FiberdJob *job, const FiberdHost *host)
{
        volatile int *p = NULL;
        uint64_t ms = 0;

        /* {"ms": N}: first N ms parked, so the submission is answered before the crash */
        if (host->arg_uint(job, "ms", &ms) == 0 && ms)
                host->sleep_until(job, host->now_ns() + ms * 1000000ull);
        *p = 42;
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "crash_run",
        .version = "1.0",     .description = "test: run() segfaults",
        .run = crash_run_run,
};
