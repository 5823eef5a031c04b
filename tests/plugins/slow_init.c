/* SPDX-License-Identifier: MIT */
/*
 * slow_init.c — a valid test plugin whose init() takes 3 seconds (it blocks its thread
 * in sleep(3), as a plugin that reads a big model or warms a cache would). fiberd must
 * go on answering requests meanwhile: init() runs on the plugin loader thread, not on
 * the server group. It logs one line as init() begins, so a test knows the
 * load is under way.
 */
#include <unistd.h>

#include "plugins/fiberd/plugin.h"

static int slow_init_init(const FiberdHost *host, char *why, size_t why_size)
{
        host->log(NULL, LOG_NOTICE, "slow_init: init begins, 3 s");
        sleep(3);
        return 0;
}

static int slow_init_run(FiberdJob *job, const FiberdHost *host)
{
        return host->result_str(job, "slow_init", "ran");
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "slow_init",
        .version = "1.0",     .description = "test: init() takes 3 s",
        .run = slow_init_run, .init = slow_init_init,
};
