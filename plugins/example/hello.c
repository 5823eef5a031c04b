/* SPDX-License-Identifier: MIT */
/*
 * hello.c — the smallest complete fiberd plugin: the example of fiberd/plugin.h and the
 * README, built here so the example is known to compile and work (plugins_bundled.c runs
 * it). Not installed, not in the bundled plugin directory.
 *
 * Out of tree:
 *     cc -shared -fPIC $(pkg-config --cflags fiberd-plugin) -o hello.so hello.c
 *     cp hello.so "$(pkg-config --variable=plugindir fiberd-plugin)"/
 *     fiberctl submit hello who=fiberd --wait
 */
#include <fiberd/plugin.h>

static int hello_run(FiberdJob *job, const FiberdHost *host)
{
        char who[64] = "world";
        int r = host->arg_str(job, "who", who, sizeof(who));
        if (r < 0 && r != -ENOENT) /* missing is fine: "who" is optional */
                return r;          /* wrong type: the host recorded the error */
        char msg[96];
        snprintf(msg, sizeof(msg), "hello, %s", who);
        host->log(job, LOG_INFO, "greeting %s", who);
        return host->result_str(job, "greeting", msg);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "hello", .version = "1.0", .description = "greets {\"who\"}",
        .run = hello_run,
};
