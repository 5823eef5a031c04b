/* SPDX-License-Identifier: MIT */
/*
 * dup_name.c — a valid test plugin named "sleep", the name of a bundled plugin. Loaded
 * after the bundled sleep.so, it must be refused as a duplicate naming the file that
 * holds the name; its init() must not run (it would write to stderr if it did).
 */
#include <unistd.h>

#include "plugins/fiberd/plugin.h"

static int dup_name_init(const FiberdHost *host, char *why, size_t why_size)
{
        static const char msg[] = "dup_name: init ran although the name is taken\n";
        if (write(2, msg, sizeof(msg) - 1) < 0)
                return -EIO;
        return -EEXIST;
}

static int dup_name_run(FiberdJob *job, const FiberdHost *host)
{
        return host->result_str(job, "impostor", "yes");
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "sleep",
        .version = "0.0-dup", .description = "test: a second plugin named sleep",
        .run = dup_name_run,  .init = dup_name_init,
};
