/* SPDX-License-Identifier: MIT */
/*
 * abi_v1.c — a plugin built against ABI version 1 (before the submitter's rights, the
 * preemption points and the descriptor's flags were appended): its descriptor is the
 * version-1 size and says version 1. fiberd must still load and run it.
 */
#include <stddef.h>

#include "plugins/fiberd/plugin.h"

static int abi_v1_run(FiberdJob *job, const FiberdHost *host)
{
        return host->result_str(job, "abi", "1");
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        .abi_version = 1,
        .size = offsetof(FiberdPlugin, flags), /* the version-1 descriptor ended there */
        .name = "abi_v1",
        .version = "1.0",
        .description = "test: a plugin of ABI version 1",
        .run = abi_v1_run,
};
