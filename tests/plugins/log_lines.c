/* SPDX-License-Identifier: MIT */
/*
 * log_lines.c — a test plugin that writes {"n"} (default 3) lines with host->log, "<text>
 * <i>" for i from 1 ({"text"}, default "line"), at LOG_INFO; with {"raw": "..."} it logs
 * that string once more, as is (a test of the escaping of control characters); with
 * {"delay_ms": d} it sleeps d ms before each line (host->sleep_until), so a follower
 * (`fiberctl logs -f`) sees the lines come one by one. Result {"logged": n}. Tests of
 * job.logs, `fiberctl logs` and the journal fields use it.
 */
#include "plugins/fiberd/plugin.h"

#include <stdbool.h>
#include <syslog.h>

static int log_lines_run(FiberdJob *job, const FiberdHost *host)
{
        char text[256] = "line", raw[256];
        bool have_raw;
        uint64_t n = 3, delay_ms = 0;
        int r = host->arg_uint(job, "n", &n);

        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_uint(job, "delay_ms", &delay_ms);
        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_str(job, "text", text, sizeof(text));
        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_str(job, "raw", raw, sizeof(raw));
        if (r < 0 && r != -ENOENT)
                return r;
        have_raw = r >= 0;
        for (uint64_t i = 1; i <= n; i++) {
                if (delay_ms &&
                    (r = host->sleep_until(job, host->now_ns() + delay_ms * 1000000)) < 0)
                        return r;
                host->log(job, LOG_INFO, "%s %llu", text, (unsigned long long)i);
        }
        if (have_raw)
                host->log(job, LOG_WARNING, "%s", raw);
        return host->result_uint(job, "logged", n);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "log_lines",
        .version = "1.0",
        .description = "test: logs {\"n\"} (3) lines \"{text} i\" with host->log",
        .run = log_lines_run,
};
