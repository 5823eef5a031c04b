/* SPDX-License-Identifier: MIT */
/*
 * duration_histogram.h — the daemon's latency histogram: job queue wait and run time, in
 * nanoseconds, summarized as p50/p90/p99/max for `stats` and exported as an OpenMetrics
 * histogram by `metrics`.
 *
 * Log-linear over decades (HdrHistogram's idea with two significant decimal digits):
 * every decade from 1 µs to 1000 s is cut into 90 equal buckets (10..99 × 10^k ns), so a
 * quantile is off by at most 10% at the bottom of a decade and 1% at its top. Below 1 µs
 * is one bucket, 1000 s and more another. Buckets are (lo, hi]: a value equal to an
 * edge counts below it, as OpenMetrics' `le` means. Because the 1-2-5 series (1 µs, 2 µs,
 * 5 µs, 10 µs, ... 1000 s) are bucket edges, duration_histogram_le() is exact at those edges,
 * which are the `le` bounds `metrics` exports.
 *
 * The scheduler has its own (scheduler/histogram.c, TSC ticks, one writer per worker);
 * daemon/ may not include the runtime's internals, and a job's wait and run time are
 * recorded under the job table's lock, by any thread, far less often.
 *
 * Fixed size, no allocation; not thread-safe: the owner serializes (the job table's
 * lock for JobLatency).
 */
#ifndef FIBERD_DAEMON_DURATION_HISTOGRAM_H
#define FIBERD_DAEMON_DURATION_HISTOGRAM_H

#include <stdint.h>

#define DURATION_HISTOGRAM_DECADES 9 /* 1 µs .. 1000 s */
#define DURATION_HISTOGRAM_PER_DECADE 90
#define DURATION_HISTOGRAM_BUCKETS (2 + DURATION_HISTOGRAM_DECADES * DURATION_HISTOGRAM_PER_DECADE)

typedef struct DurationHistogram {
        uint64_t count;  /* samples */
        uint64_t sum_ns; /* their sum (saturates at UINT64_MAX) */
        uint64_t max_ns; /* the largest */
        uint32_t bucket[DURATION_HISTOGRAM_BUCKETS];
} DurationHistogram;

/* duration_histogram_add - one sample of @ns nanoseconds. Context: the owner's lock held. */
void duration_histogram_add(DurationHistogram *h, uint64_t ns);

/*
 * duration_histogram_quantile - the value at quantile @q (0 < q <= 1) in nanoseconds: the upper
 * edge of the bucket holding that rank, never above max_ns; 0 for an empty histogram.
 * Context: the owner's lock held.
 */
uint64_t duration_histogram_quantile(const DurationHistogram *h, double q);

/*
 * duration_histogram_le - how many samples were at most @edge_ns. Exact when @edge_ns is a bucket
 * edge (any 1-2-5 value from 1 µs to 1000 s is one) or UINT64_MAX; otherwise the count up
 * to the bucket edge below it. Context: the owner's lock held.
 */
uint64_t duration_histogram_le(const DurationHistogram *h, uint64_t edge_ns);

#endif
