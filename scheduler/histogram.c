/* SPDX-License-Identifier: MIT */
/*
 * histogram.c — the log-linear latency histogram behind ready-to-run latency
 * (HdrHistogram's idea at 8 sub-buckets per power of two: ~12% resolution, fixed size,
 * no allocation, one relaxed store per sample). Samples are TSC ticks, added by one
 * writer (the worker); summaries are read anywhere and converted to nanoseconds.
 */
#include "scheduler/runtime.h"

static unsigned bucket_of(uint64_t v)
{
        if (v < HIST_SUB)
                return (unsigned)v;
        unsigned msb = 63u - (unsigned)__builtin_clzll(v); /* >= 3 */
        unsigned sub = (unsigned)(v >> (msb - 3)) & (HIST_SUB - 1);
        return (msb - 2) * HIST_SUB + sub;
}

static uint64_t bucket_value(unsigned b)
{
        if (b < HIST_SUB)
                return b;
        unsigned msb = b / HIST_SUB + 2, sub = b % HIST_SUB;
        /* upper edge of the bucket: a conservative percentile */
        return ((uint64_t)(HIST_SUB + sub + 1) << (msb - 3)) - 1;
}

void histogram_add(Histogram *h, uint64_t v)
{
        unsigned b = bucket_of(v);
        if (b >= HIST_BUCKETS)
                b = HIST_BUCKETS - 1;
        __atomic_store_n(&h->count[b], h->count[b] + 1, __ATOMIC_RELAXED);
        if (v > h->max)
                __atomic_store_n(&h->max, v, __ATOMIC_RELAXED);
}

void histogram_summarize(Histogram *const *hs, unsigned n, SchedLatency *ret)
{
        static uint64_t sum[HIST_BUCKETS];
        static int lock;
        uint64_t total = 0, max = 0, acc = 0;
        uint64_t p50 = 0, p99 = 0;
        bool have50 = false;

        /* sum[] is static to keep a 4 KiB array off small fiber stacks. */
        while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
                ;
        for (unsigned b = 0; b < HIST_BUCKETS; b++) {
                sum[b] = 0;
                for (unsigned i = 0; i < n; i++)
                        sum[b] += __atomic_load_n(&hs[i]->count[b], __ATOMIC_RELAXED);
                total += sum[b];
        }
        for (unsigned i = 0; i < n; i++) {
                uint64_t m = __atomic_load_n(&hs[i]->max, __ATOMIC_RELAXED);
                if (m > max)
                        max = m;
        }
        for (unsigned b = 0; b < HIST_BUCKETS && total; b++) {
                acc += sum[b];
                if (!have50 && acc * 2 >= total) {
                        p50 = bucket_value(b);
                        have50 = true;
                }
                if (acc * 100 >= total * 99) {
                        p99 = bucket_value(b);
                        break;
                }
        }
        __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
        ret->count = total;
        ret->p50_ns = clock_tsc_to_ns(p50);
        ret->p99_ns = clock_tsc_to_ns(p99);
        ret->max_ns = clock_tsc_to_ns(max);
        if (ret->p99_ns > ret->max_ns)
                ret->p99_ns = ret->max_ns;
        if (ret->p50_ns > ret->max_ns)
                ret->p50_ns = ret->max_ns;
}
