/* SPDX-License-Identifier: MIT */
/*
 * crash_init.c — a test plugin whose init() dereferences NULL: fiberd dies of SIGSEGV
 * while loading it, at every start while the file is there. The job store's crash-only
 * plugins (daemon/plugin/crash.h) must name the file and quarantine it after two crashes,
 * so that fiberd then stays up, and name it (its file's name) in the hint to clear it.
 */
#include "plugins/fiberd/plugin.h"

static int crash_init_init(const FiberdHost *host, char *why, size_t why_size)
{
        volatile int *p = NULL;

        (void)host;
        (void)why;
        (void)why_size;
        *p = 42;
        return 0;
}

static int crash_init_run(FiberdJob *job, const FiberdHost *host)
{
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,  .name = "crash_init",
        .version = "1.0",      .description = "test: init() segfaults",
        .run = crash_init_run, .init = crash_init_init,
};
