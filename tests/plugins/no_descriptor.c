/* SPDX-License-Identifier: MIT */
/*
 * no_descriptor.c — a test plugin that exports no `fiberd_plugin`: it misspells the
 * descriptor's name, the mistake a real author makes. A valid shared object otherwise;
 * the loader must refuse it with "no descriptor".
 */
#include "plugins/fiberd/plugin.h"

static int no_descriptor_run(FiberdJob *job, const FiberdHost *host)
{
        return 0;
}

FIBERD_PLUGIN_EXPORT extern const FiberdPlugin fiberd_plugin_descriptor;
const FiberdPlugin fiberd_plugin_descriptor = {
        FIBERD_PLUGIN_HEADER,
        .name = "no_descriptor",
        .run = no_descriptor_run,
};
