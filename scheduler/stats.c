/* SPDX-License-Identifier: MIT */
/*
 * stats.c — time and the runtime's statistics helpers: CLOCK_MONOTONIC in ns, the
 * TSC-to-ns conversion used for ready-to-run latency, and the log-linear histogram
 * (HdrHistogram's idea at 8 sub-buckets per power of two: ~12% resolution, fixed
 * size, no allocation, one relaxed store per sample).
 */
#include <errno.h>
#include <time.h>

#include "scheduler/runtime.h"

__attribute__((noinline)) int sched_errno(void)
{
        return errno;
}

uint64_t sched_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t sched_deadline_after(uint64_t timeout_ns)
{
        uint64_t now = sched_now_ns();
        return timeout_ns >= SCHED_FOREVER - now ? SCHED_FOREVER : now + timeout_ns;
}

/* The TSC rate is measured against CLOCK_MONOTONIC from the first call on; the longer
 * the process runs, the better the estimate. */
static uint64_t tsc0, ns0;

uint64_t tsc_to_ns(uint64_t ticks)
{
#if defined(__x86_64__)
        uint64_t t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        if (!t0) {
                uint64_t n = sched_now_ns(), t = tsc_now(), zero = 0;
                if (__atomic_compare_exchange_n(&tsc0, &zero, t, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE))
                        __atomic_store_n(&ns0, n, __ATOMIC_RELEASE);
                struct timespec ts = {0, 2000000};
                nanosleep(&ts, NULL); /* first use: give the estimate 2 ms */
                t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        }
        uint64_t dn = sched_now_ns() - __atomic_load_n(&ns0, __ATOMIC_ACQUIRE);
        uint64_t dt = tsc_now() - t0;
        if (!dt || !dn)
                return ticks;
        return (uint64_t)((unsigned __int128)ticks * dn / dt);
#else
        return ticks;
#endif
}

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
        ret->p50_ns = tsc_to_ns(p50);
        ret->p99_ns = tsc_to_ns(p99);
        ret->max_ns = tsc_to_ns(max);
        if (ret->p99_ns > ret->max_ns)
                ret->p99_ns = ret->max_ns;
        if (ret->p50_ns > ret->max_ns)
                ret->p50_ns = ret->max_ns;
}
