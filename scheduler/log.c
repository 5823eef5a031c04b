/* SPDX-License-Identifier: MIT */
/*
 * log.c — where the runtime's few log lines go: start-up checks and warnings, never
 * the hot path. The embedding program (the daemon) routes them with sched_set_log();
 * without a sink they go to stderr with an sd-daemon "<N>" priority prefix, and debug
 * lines are dropped. A stack overflow is not logged here: its handler writes to fd 2
 * directly (stack.c), since it runs in a signal handler.
 *
 * The internal entry point keeps the library's sched_ prefix, as the twin of the public
 * sched_set_log(): a log_ prefix would collide with the daemon's own log.c at link time.
 */
#include <stdarg.h>
#include <stdio.h>

#include "scheduler/runtime.h"

static SchedLogFn log_fn;

void sched_set_log(SchedLogFn fn)
{
        __atomic_store_n(&log_fn, fn, __ATOMIC_RELEASE);
}

void sched_log(int level, const char *fmt, ...)
{
        SchedLogFn fn = __atomic_load_n(&log_fn, __ATOMIC_ACQUIRE);
        char buf[512];
        va_list ap;

        if (!fn && level >= LOG_DEBUG)
                return; /* the default sink is for what an operator must see */
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (fn)
                fn(level, buf);
        else
                fprintf(stderr, "<%d>sched: %s\n", level, buf);
}
