/* SPDX-License-Identifier: MIT */
/*
 * joblatency.h — queue wait (submitted → started) and run time (started → finished) of
 * finished jobs, one pair of histograms (duration_histogram.h) per plugin and job class, for
 * `stats` ("latency") and `metrics` (PROTOCOL.md).
 *
 * A job is recorded once, when it reaches its final state (jobtable.c's latency listener),
 * if it had started: a job cancelled while queued ran nothing and is only counted as
 * cancelled. Times are CLOCK_MONOTONIC nanoseconds (Job.submitted_mono_ns,
 * Job.started_mono_ns), not the records' wall-clock milliseconds.
 *
 * The set lives in the JobTable and is read and written under its lock; entries are
 * made on first use and kept until exit (one per plugin name × class name seen, about
 * 7 KiB each).
 */
#ifndef FIBERD_DAEMON_JOBLATENCY_H
#define FIBERD_DAEMON_JOBLATENCY_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/obs/duration_histogram.h"
#include "scheduler/sched.h"

typedef struct JobLatency {
        char *plugin;                                 /* owned */
        char class_name[SCHED_CLASS_NAME_MAX + 1];    /* the job class */
        const char *plugin_interned, *class_interned; /* jobnames_intern() of the two (NULL
                                                       * without memory): a job's names,
                                                       * interned too, match by pointer */
        DurationHistogram queue_wait;                 /* submitted → started, ns */
        DurationHistogram run_time;                   /* started → finished, ns */
} JobLatency;

typedef struct JobLatencies {
        JobLatency **v; /* owned, in order of first use */
        size_t n;
} JobLatencies;

/*
 * joblatency_record - add one finished job of @plugin in class @class_name that waited
 * @wait_ns in the queue and ran @run_ns. Return: 0; -ENOMEM (the sample is lost, the
 * set unchanged). Context: the job table's lock held; does not yield.
 */
int joblatency_record(JobLatencies *l, const char *plugin, const char *class_name, uint64_t wait_ns,
                      uint64_t run_ns);

#endif
