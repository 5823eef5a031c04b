/* SPDX-License-Identifier: MIT */
/* clock.c: nanosecond thresholds become TSC ticks at the measured rate, not at an
 * assumed one, and deadlines saturate. The rate is set by hand where a test needs a
 * known one, so nothing here depends on how fast the machine's TSC runs. */
#include <criterion/criterion.h>

#include "scheduler/runtime.h"

static void set_rate_mhz(uint64_t mhz)
{
        /* ticks per ns = mhz / 1000, in 32.32 fixed point */
        clock_tsc_per_ns_q32 = (mhz << 32) / 1000;
}

Test(clock, ns_to_tsc_follows_the_rate)
{
        set_rate_mhz(1000);
        cr_assert_eq(clock_ns_to_tsc(10 * NSEC_PER_MSEC), 10 * NSEC_PER_MSEC);
        set_rate_mhz(2500);
        cr_assert_eq(clock_ns_to_tsc(4 * NSEC_PER_USEC), 10000);
        /* one tick short at most: the fixed-point rate is rounded down */
        set_rate_mhz(3700);
        uint64_t t = clock_ns_to_tsc(10 * NSEC_PER_MSEC);
        cr_assert(t <= 37000000 && t >= 36999999, "10 ms at 3.7 GHz: %llu ticks",
                  (unsigned long long)t);
}

Test(clock, ns_to_tsc_does_not_overflow_for_long_spans)
{
        set_rate_mhz(5000);
        /* an hour at 5 GHz: 1.8e13 ticks, far past what a 64-bit product of ns and a
         * 32.32 rate could hold */
        uint64_t hour = 3600 * NSEC_PER_SEC;
        uint64_t t = clock_ns_to_tsc(hour);
        cr_assert(t >= 5 * hour - 5 && t <= 5 * hour, "an hour at 5 GHz: %llu ticks",
                  (unsigned long long)t);
}

Test(clock, calibration_measures_a_rate)
{
        clock_calibrate();
        cr_assert_gt(clock_tsc_per_ns_q32, 0);
        cr_assert_gt(clock_ns_to_tsc(NSEC_PER_MSEC), 0);
        /* the second call keeps the first estimate */
        uint64_t rate = clock_tsc_per_ns_q32;
        clock_calibrate();
        cr_assert_eq(clock_tsc_per_ns_q32, rate);
}

Test(clock, deadline_after_saturates)
{
        uint64_t now = sched_now_ns();
        cr_assert_eq(sched_deadline_after(SCHED_FOREVER), SCHED_FOREVER);
        cr_assert_eq(sched_deadline_after(SCHED_FOREVER - 1), SCHED_FOREVER);
        cr_assert_geq(sched_deadline_after(NSEC_PER_SEC), now + NSEC_PER_SEC);
}

/* The public ticks (sched.h) time a sleep as the monotonic clock does, and a threshold
 * in ns compares with them. */
Test(clock, ticks_time_a_sleep_as_the_clock_does)
{
        struct timespec ts = {0, 20 * 1000 * 1000};

        clock_calibrate();
        uint64_t t0 = sched_ticks(), n0 = sched_now_ns();
        nanosleep(&ts, NULL);
        uint64_t dt = sched_ticks() - t0, dn = sched_now_ns() - n0;
        uint64_t ns = sched_ticks_to_ns(dt);
        cr_assert(ns >= dn * 9 / 10 && ns <= dn * 11 / 10,
                  "%llu ticks = %llu ns, the clock says %llu", (unsigned long long)dt,
                  (unsigned long long)ns, (unsigned long long)dn);
        cr_assert(dt > sched_ns_to_ticks(dn / 2) && dt < sched_ns_to_ticks(dn * 2),
                  "%llu ticks against a threshold of %llu ns", (unsigned long long)dt,
                  (unsigned long long)dn);
}
