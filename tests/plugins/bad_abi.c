/* SPDX-License-Identifier: MIT */
/*
 * bad_abi.c — a test plugin built against an ABI fiberd does not speak: its descriptor
 * says FIBERD_PLUGIN_ABI_VERSION + 41. The loader must refuse it after reading
 * abi_version and before touching anything else (the rest of the descriptor is valid, so
 * only the version check can catch it).
 */
#include "plugins/fiberd/plugin.h"

static int bad_abi_run(FiberdJob *job, const FiberdHost *host)
{
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        .abi_version = FIBERD_PLUGIN_ABI_VERSION + 41,
        .size = sizeof(FiberdPlugin),
        .name = "bad_abi",
        .version = "1.0",
        .description = "test: wrong ABI version",
        .run = bad_abi_run,
};
