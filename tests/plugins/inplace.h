/* SPDX-License-Identifier: MIT */
/*
 * inplace.h — the body of the test plugin "inplace", built twice (inplace_v1.c,
 * inplace_v2.c) with INPLACE_VERSION "1" and "2", to replace one with the other under a
 * running job (plugins in place).
 *
 * run: with {"until": PATH}, waits (10 ms naps on the runtime's timer) until PATH
 * exists, so a test holds the job running as long as it likes without timing; then the
 * result {"version": INPLACE_VERSION}. fini() logs "inplace INPLACE_VERSION fini", so a
 * test sees the old version unloaded.
 */
#include <unistd.h>

#include "plugins/fiberd/plugin.h"
#include "scheduler/base/time-util.h"

static int inplace_run(FiberdJob *job, const FiberdHost *host)
{
        char until[512];
        int r = host->arg_str(job, "until", until, sizeof(until));

        if (r < 0 && r != -ENOENT)
                return r;
        while (r == 0 && access(until, F_OK) != 0) {
                int s = host->sleep_until(job, host->now_ns() + 10 * NSEC_PER_MSEC);
                if (s < 0)
                        return s;
        }
        return host->result_str(job, "version", INPLACE_VERSION);
}

static void inplace_fini(const FiberdHost *host)
{
        host->log(NULL, LOG_NOTICE, "inplace " INPLACE_VERSION " fini");
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,       .name = "inplace",
        .version = INPLACE_VERSION, .description = "test: {\"until\": path} -> {\"version\"}",
        .run = inplace_run,         .fini = inplace_fini,
};
