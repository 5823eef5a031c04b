/* SPDX-License-Identifier: MIT */
/*
 * init_fails.c — a valid test plugin whose init() fails with -ENODEV and a reason. The
 * loader must refuse it with that reason, unload it, and never list it as loaded.
 */
#include "plugins/fiberd/plugin.h"

static int init_fails_init(const FiberdHost *host, char *why, size_t why_size)
{
        snprintf(why, why_size, "the device it needs is missing (test plugin)");
        return -ENODEV;
}

static int init_fails_run(FiberdJob *job, const FiberdHost *host)
{
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,  .name = "init_fails",
        .version = "1.0",      .description = "test: init() fails",
        .run = init_fails_run, .init = init_fails_init,
};
