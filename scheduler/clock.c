/* SPDX-License-Identifier: MIT */
/*
 * clock.c — the runtime's time: CLOCK_MONOTONIC in nanoseconds (the one time type,
 * STYLE.md rule 9), deadlines, and the TSC, a cheaper tick the hot path reads instead.
 *
 * The TSC rate is measured against CLOCK_MONOTONIC: clock_calibrate(), called before the
 * first group starts, takes a first estimate over 2 ms, from which clock_ns_to_tsc()
 * turns the scheduler's nanosecond thresholds into ticks (one multiply, no call).
 * clock_tsc_to_ns(), for statistics, keeps measuring from the same origin: the longer
 * the process runs, the better the estimate. Without an x86-64 TSC a tick is a
 * nanosecond.
 */
#include <time.h>

#include "scheduler/runtime.h"

#define CALIBRATION_NS (2 * NSEC_PER_MSEC)

uint64_t clock_tsc_per_ns_q32;
static uint64_t tsc0, ns0; /* the calibration's origin */

uint64_t sched_now_ns(void)
{
        return clock_now_ns(CLOCK_MONOTONIC);
}

uint64_t sched_deadline_after(uint64_t timeout_ns)
{
        uint64_t now = sched_now_ns();
        return timeout_ns >= SCHED_FOREVER - now ? SCHED_FOREVER : now + timeout_ns;
}

uint64_t sched_ticks(void)
{
        return clock_tsc_now();
}

uint64_t sched_ns_to_ticks(uint64_t ns)
{
        return clock_ns_to_tsc(ns);
}

uint64_t sched_ticks_to_ns(uint64_t ticks)
{
        return clock_tsc_to_ns(ticks);
}

void clock_calibrate(void)
{
#if defined(__x86_64__)
        uint64_t t0, dt, dn;

        if (__atomic_load_n(&clock_tsc_per_ns_q32, __ATOMIC_ACQUIRE))
                return;
        t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        if (!t0) {
                uint64_t n = sched_now_ns(), t = clock_tsc_now(), zero = 0;
                if (__atomic_compare_exchange_n(&tsc0, &zero, t, false, __ATOMIC_ACQ_REL,
                                                __ATOMIC_ACQUIRE))
                        __atomic_store_n(&ns0, n, __ATOMIC_RELEASE);
                struct timespec ts = timespec_store_ns(CALIBRATION_NS);
                nanosleep(&ts, NULL); /* first use: give the estimate 2 ms */
                t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        }
        dn = sched_now_ns() - __atomic_load_n(&ns0, __ATOMIC_ACQUIRE);
        dt = clock_tsc_now() - t0;
        if (!dt || !dn)
                dt = dn = 1; /* no usable TSC: thresholds compare nanoseconds */
        __atomic_store_n(&clock_tsc_per_ns_q32, (uint64_t)(((unsigned __int128)dt << 32) / dn) ?: 1,
                         __ATOMIC_RELEASE);
#else
        __atomic_store_n(&clock_tsc_per_ns_q32, UINT64_C(1) << 32, __ATOMIC_RELEASE);
#endif
}

uint64_t clock_tsc_to_ns(uint64_t ticks)
{
#if defined(__x86_64__)
        uint64_t t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        if (!t0) {
                clock_calibrate();
                t0 = __atomic_load_n(&tsc0, __ATOMIC_ACQUIRE);
        }
        uint64_t dn = sched_now_ns() - __atomic_load_n(&ns0, __ATOMIC_ACQUIRE);
        uint64_t dt = clock_tsc_now() - t0;
        if (!dt || !dn)
                return ticks;
        return (uint64_t)((unsigned __int128)ticks * dn / dt);
#else
        return ticks;
#endif
}
