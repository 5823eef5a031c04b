/* SPDX-License-Identifier: MIT */
/*
 * duration_histogram.c — the decimal log-linear histogram of duration_histogram.h.
 *
 * Bucket 0 holds (0, 1 µs] (and 0), the last one (1000 s, ∞); in between, decade d
 * (0 = 1..10 µs) holds 90 buckets of width 10^(d+2) ns: bucket 1 + 90 d + (m - 10) is
 * (m × 10^(d+2), (m + 1) × 10^(d+2)] for m in 10..99. A value v is placed from v - 1 so
 * that the edges themselves fall in the bucket below them.
 */
#include "daemon/obs/duration_histogram.h"

#include <stddef.h>

#define FIRST_EDGE_NS 1000ULL /* 1 µs */

/* The bucket of @v nanoseconds. */
static size_t bucket_of(uint64_t v)
{
        uint64_t w = v ? v - 1 : 0, unit = FIRST_EDGE_NS / 10; /* 100 ns: m × unit */

        if (w < FIRST_EDGE_NS)
                return 0;
        for (size_t d = 0; d < DURATION_HISTOGRAM_DECADES; d++, unit *= 10) {
                uint64_t m = w / unit; /* 10..99 inside this decade */
                if (m < 100)
                        return 1 + d * DURATION_HISTOGRAM_PER_DECADE + (size_t)(m - 10);
        }
        return DURATION_HISTOGRAM_BUCKETS - 1;
}

/* The upper edge of bucket @b in nanoseconds (UINT64_MAX for the last). */
static uint64_t bucket_edge(size_t b)
{
        uint64_t unit = FIRST_EDGE_NS / 10;
        size_t d;

        if (b == 0)
                return FIRST_EDGE_NS;
        if (b >= DURATION_HISTOGRAM_BUCKETS - 1)
                return UINT64_MAX;
        d = (b - 1) / DURATION_HISTOGRAM_PER_DECADE;
        for (size_t i = 0; i < d; i++)
                unit *= 10;
        return (10 + (b - 1) % DURATION_HISTOGRAM_PER_DECADE + 1) * unit;
}

void duration_histogram_add(DurationHistogram *h, uint64_t ns)
{
        h->bucket[bucket_of(ns)]++;
        h->count++;
        h->sum_ns = h->sum_ns + ns < h->sum_ns ? UINT64_MAX : h->sum_ns + ns;
        if (ns > h->max_ns)
                h->max_ns = ns;
}

uint64_t duration_histogram_quantile(const DurationHistogram *h, double q)
{
        uint64_t rank, seen = 0;

        if (h->count == 0)
                return 0;
        if (q > 1)
                q = 1;
        rank = (uint64_t)(q * (double)h->count + 0.999999);
        if (rank == 0)
                rank = 1;
        for (size_t b = 0; b < DURATION_HISTOGRAM_BUCKETS; b++) {
                seen += h->bucket[b];
                if (seen >= rank) {
                        uint64_t edge = bucket_edge(b);
                        return edge < h->max_ns ? edge : h->max_ns;
                }
        }
        return h->max_ns;
}

uint64_t duration_histogram_le(const DurationHistogram *h, uint64_t edge_ns)
{
        uint64_t n = 0;

        if (edge_ns == UINT64_MAX)
                return h->count;
        for (size_t b = 0; b < DURATION_HISTOGRAM_BUCKETS && bucket_edge(b) <= edge_ns; b++)
                n += h->bucket[b];
        return n;
}
