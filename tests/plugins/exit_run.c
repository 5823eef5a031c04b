/* SPDX-License-Identifier: MIT */
/*
 * exit_run.c — a test plugin whose run() calls exit(3): the whole daemon exits with it.
 * The job store's crash-only plugins (daemon/plugin/crash.h) must report it as such, naming the
 * job and plugin, and count it as a crash of this plugin at the next start.
 */
#include <stdlib.h>

#include "plugins/fiberd/plugin.h"

static int exit_run_run(FiberdJob *job, const FiberdHost *host)
{
        (void)job;
        (void)host;
        exit(3);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "exit_run",
        .version = "1.0",     .description = "test: run() calls exit(3)",
        .run = exit_run_run,
};
