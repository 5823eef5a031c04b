/* SPDX-License-Identifier: MIT */
/*
 * time-util.h — named time units (systemd's time-util.h): one time type across fiberd,
 * uint64_t nanoseconds of CLOCK_MONOTONIC, and constants instead of bare 1000000s.
 * Header-only, libc only: every folder may include it (see macro.h).
 */
#ifndef FIBERD_BASE_TIME_UTIL_H
#define FIBERD_BASE_TIME_UTIL_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC UINT64_C(1000000000)
#define NSEC_PER_MSEC UINT64_C(1000000)
#define NSEC_PER_USEC UINT64_C(1000)
#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)
#define MSEC_PER_SEC UINT64_C(1000)

/* timespec_load_ns - @ts as nanoseconds. */
static inline uint64_t timespec_load_ns(const struct timespec *ts)
{
        return (uint64_t)ts->tv_sec * NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}

/* timespec_store_ns - nanoseconds @ns as a struct timespec. */
static inline struct timespec timespec_store_ns(uint64_t ns)
{
        return (struct timespec){.tv_sec = (time_t)(ns / NSEC_PER_SEC),
                                 .tv_nsec = (long)(ns % NSEC_PER_SEC)};
}

/* clock_now_ns - @clock (CLOCK_MONOTONIC, CLOCK_REALTIME…) in nanoseconds; 0 if the
 * clock cannot be read. Context: any thread, async-signal-safe. */
static inline uint64_t clock_now_ns(clockid_t clock)
{
        struct timespec ts;
        if (clock_gettime(clock, &ts) < 0)
                return 0;
        return timespec_load_ns(&ts);
}

/*
 * jitter_below - a pseudo-random number in [0, @n) (0 when @n is 0), for spreading
 * retries and polls apart: a per-thread xorshift64 (Marsaglia) seeded from the monotonic
 * clock and the state's address. Not for secrets. Context: any thread; it does not
 * yield, so a fiber never keeps another thread's state.
 */
static inline uint64_t jitter_below(uint64_t n)
{
        static __thread uint64_t state;
        uint64_t x = state;

        if (!x)
                x = (clock_now_ns(CLOCK_MONOTONIC) ^ (uint64_t)(uintptr_t)&state) | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state = x;
        return n ? x % n : 0;
}

#endif /* FIBERD_BASE_TIME_UTIL_H */
