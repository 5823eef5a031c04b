/* SPDX-License-Identifier: MIT */
/*
 * progress.h — the progress line of `wait`, `submit --wait` and `batch` (client/): jobs
 * done / total, their rate and the time left, and for a single job the plugin's own
 * progress (the job record's {done, total}). One line on stderr, redrawn in place with
 * '\r' and erased at the end, so what remains on the screen is the verb's own output.
 * Internal to the fiberctl binary; every function is for the main thread.
 *
 * Drawn only for a person: stdout and stderr both terminals, no --json. Otherwise every
 * function does nothing, so the callers need no test of their own.
 */
#ifndef FIBERD_CLIENT_PROGRESS_H
#define FIBERD_CLIENT_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "client/fiberctl.h"

/* How often a verb that shows progress wakes to redraw it, in milliseconds. */
#define PROGRESS_TICK_MS 250

typedef struct Progress {
        bool on;           /* drawing at all (progress_init() decided) */
        bool drawn;        /* the line is on the screen now */
        uint64_t start_ns; /* CLOCK_MONOTONIC when progress_init() ran */
        uint64_t drawn_ns; /* when last drawn, to redraw at most every PROGRESS_TICK_MS */
} Progress;

/* progress_enabled - whether a progress line would be drawn: stdout and stderr are
 * terminals and there is no --json. */
bool progress_enabled(const Ctl *ctl);

/* progress_init - start the clock; decide whether to draw (progress_enabled()). */
void progress_init(Progress *p, const Ctl *ctl);

/*
 * progress_draw - redraw the line: "@done/@total jobs done, R/s, ETA T" (@total_known
 * false: the total is still growing, "@done/@total+" and no ETA); when @job_progress is a
 * job record's {done, total} (one job), the plugin's own progress with its rate and ETA
 * instead. @force: draw even if the last draw was less than PROGRESS_TICK_MS ago.
 */
void progress_draw(Progress *p, uint64_t done, uint64_t total, bool total_known,
                   const json_t *job_progress, bool force);

/* progress_clear - erase the line (before the verb prints a line, and at the end). */
void progress_clear(Progress *p);

#endif /* FIBERD_CLIENT_PROGRESS_H */
