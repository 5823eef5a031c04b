/* SPDX-License-Identifier: MIT */
/* Cron expressions and durations (daemon/cron/cron.c, daemon/cron/duration.c) without a
 * daemon: the parser takes the standard forms and every shortcut and names the field and
 * token of what it refuses, the canonical text parses back to itself, the next tick
 * crosses month, year and leap-day ends, follows Vixie cron's day rule and gives up on
 * dates that never come, DST gaps and repeats in New York and Berlin tick once each,
 * the process's TZ is left as it was, bad zone names are refused, and durations parse
 * or are refused. The expected instants are written in UTC, with the wall times they
 * stand for beside them, and computed by timegm(), not by the code under test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/cron/cron.h"
#include "daemon/cron/duration.h"

/* Seconds since the epoch of a UTC date and time. */
static int64_t utc(int y, int mon, int d, int h, int min, int s)
{
        struct tm tm = {.tm_year = y - 1900,
                        .tm_mon = mon - 1,
                        .tm_mday = d,
                        .tm_hour = h,
                        .tm_min = min,
                        .tm_sec = s};

        return (int64_t)timegm(&tm);
}

/* Skip the test when the system has no zone file for @tz (Debian's tzdata). */
static void need_zone(const char *tz)
{
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", CRON_ZONEINFO_DIR, tz);
        if (access(path, R_OK) != 0)
                cr_skip_test("no %s (install tzdata)", path);
}

static CronExpr *parse_ok(const char *expr, const char *tz)
{
        char err[256] = "";
        CronExpr *c = NULL;
        int r = cron_parse(expr, tz, &c, err, sizeof(err));

        cr_assert_eq(r, 0, "cron_parse(\"%s\", %s): %d (%s)", expr, tz ? tz : "NULL", r, err);
        cr_assert_not_null(c);
        return c;
}

/* The canonical text of @expr. */
static void format_of(const char *expr, char *buf, size_t size)
{
        CronExpr *c = parse_ok(expr, NULL);
        int n = cron_format(c, buf, size);

        cr_assert_geq(n, 0, "cron_format(\"%s\"): %d", expr, n);
        cr_assert_eq((size_t)n, strlen(buf));
        cron_free(c);
}

/* The next tick of @expr in @tz after @after_s; fails the test on an error. */
static int64_t next_of(const char *expr, const char *tz, int64_t after_s)
{
        CronExpr *c = parse_ok(expr, tz);
        int64_t t = -1;
        int r = cron_next(c, after_s, &t);

        cr_assert_eq(r, 0, "cron_next(\"%s\", %s, %" PRId64 "): %d", expr, tz ? tz : "UTC", after_s,
                     r);
        cr_assert_gt(t, after_s);
        cron_free(c);
        return t;
}

/* Assert the ticks of @expr in @tz after @after_s are @want[0..n). */
static void expect_ticks(const char *expr, const char *tz, int64_t after_s, const int64_t *want,
                         size_t n)
{
        CronExpr *c = parse_ok(expr, tz);
        int64_t t = after_s;

        for (size_t i = 0; i < n; i++) {
                int64_t prev = t;
                cr_assert_eq(cron_next(c, prev, &t), 0);
                cr_assert_eq(t, want[i],
                             "\"%s\" in %s, tick %zu after %" PRId64 ": %" PRId64
                             ", expected %" PRId64 " (off by %" PRId64 " s)",
                             expr, tz ? tz : "UTC", i, prev, t, want[i], t - want[i]);
        }
        cron_free(c);
}

/* ---- parsing and the canonical text */

Test(cron_parse, standard_forms_and_their_canonical_text)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"* * * * *", "* * * * *"},
                {"*/5 * * * *", "*/5 * * * *"},
                {"0 3 * * 1-5", "0 3 * * 1-5"},
                {"0 0 1,15 * *", "0 0 1,15 * *"},
                {"0,15,30,45 * * * *", "*/15 * * * *"},
                {"0-59/20 */6 * * *", "*/20 */6 * * *"},
                {"0-10/5 * * * *", "0,5,10 * * * *"},
                {"5-7,6-9 1,2 * * *", "5-9 1,2 * * *"},
                {"  0\t12  *   * * ", "0 12 * * *"},
                {"0 12 * jan-MAR,Dec Mon-fri", "0 12 * 1-3,12 1-5"},
                {"0 0 * * 7", "0 0 * * 0"},
                {"0 0 * * 5-7", "0 0 * * 0,5,6"},
                {"0 0 * * 0-7", "0 0 * * 0-6"},
                {"0 0 * * SUN,sat", "0 0 * * 0,6"},
                {"0 0 1-31 * 1", "0 0 1-31 * 1"},
                {"0 0 */2 * 1", "0 0 */2 * 1"},
                {"0 0 1-31/2 * 1", "0 0 1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31 * 1"},
                {"0 0 */31 * *", "0 0 */31 * *"},
                {"0 0 * * */7", "0 0 * * */7"},
                {"0 0 * * */2", "0 0 * * */2"},
                {"0 0 * */3 *", "0 0 * */3 *"},
                {"0 0 * 1,4,7,10 *", "0 0 * */3 *"},
                {"0,30 * * * *", "0,30 * * * *"},
                {"59 23 31 12 6", "59 23 31 12 6"},
                {"00 007 01 01 00", "0 7 1 1 0"},
        };
        char buf[CRON_FORMAT_MAX];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                format_of(cases[i].in, buf, sizeof(buf));
                cr_expect_str_eq(buf, cases[i].out, "\"%s\" printed \"%s\", expected \"%s\"",
                                 cases[i].in, buf, cases[i].out);
        }
}

Test(cron_parse, every_shortcut)
{
        static const struct {
                const char *in, *out;
        } cases[] = {
                {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"},  {"@monthly", "0 0 1 * *"},
                {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},     {"@midnight", "0 0 * * *"},
                {"@hourly", "0 * * * *"}, {"  @Daily\t", "0 0 * * *"}, {"@HOURLY", "0 * * * *"},
        };
        char buf[CRON_FORMAT_MAX];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                format_of(cases[i].in, buf, sizeof(buf));
                cr_expect_str_eq(buf, cases[i].out, "\"%s\" printed \"%s\", expected \"%s\"",
                                 cases[i].in, buf, cases[i].out);
        }
        /* and they tick where they say: @weekly on Sunday midnight, @yearly on New Year */
        cr_assert_eq(next_of("@weekly", NULL, utc(2024, 9, 4, 12, 0, 0)), utc(2024, 9, 8, 0, 0, 0));
        cr_assert_eq(next_of("@annually", NULL, utc(2024, 1, 1, 0, 0, 0)),
                     utc(2025, 1, 1, 0, 0, 0));
        cr_assert_eq(next_of("@hourly", NULL, utc(2024, 1, 1, 5, 0, 0)), utc(2024, 1, 1, 6, 0, 0));
        cr_assert_eq(next_of("@monthly", NULL, utc(2024, 1, 15, 0, 0, 0)),
                     utc(2024, 2, 1, 0, 0, 0));
        cr_assert_eq(next_of("@midnight", NULL, utc(2024, 1, 15, 0, 0, 0)),
                     utc(2024, 1, 16, 0, 0, 0));
}

Test(cron_parse, refuses_bad_expressions_naming_field_and_token)
{
        static const struct {
                const char *in, *msg;
        } cases[] = {
                {"61 * * * *", "minute field: 61 is out of range 0-59"},
                {"* 24 * * *", "hour field: 24 is out of range 0-23"},
                {"* * 0 * *", "day-of-month field: 0 is out of range 1-31"},
                {"* * 32 * *", "day-of-month field: 32 is out of range 1-31"},
                {"* * * 13 *", "month field: 13 is out of range 1-12"},
                {"* * * * 8", "day-of-week field: 8 is out of range 0-7"},
                {"99999999999999999999 * * * *",
                 "minute field: 99999999999999999999 is out of range 0-59"},
                {"* * * FOO *", "month field: 'FOO' is not a month (1-12 or JAN-DEC)"},
                {"* * * January *", "month field: 'January' is not a month (1-12 or JAN-DEC)"},
                {"* * * * MONDAY",
                 "day-of-week field: 'MONDAY' is not a day of the week (0-7 or SUN-SAT)"},
                {"MON * * * *", "minute field: 'MON' is not a number"},
                {"5x * * * *", "minute field: '5x' is not a number"},
                {"5-2 * * * *", "minute field: range 5-2 runs backwards"},
                {"* * * * FRI-SUN", "day-of-week field: range FRI-SUN runs backwards"},
                {"1- * * * *", "minute field: range '1-' has no end"},
                {"*/0 * * * *", "minute field: step 0 is out of range 1-59"},
                {"* */24 * * *", "hour field: step 24 is out of range 1-23"},
                {"*/ * * * *", "minute field: step in '*/' has no number"},
                {"*/x * * * *", "minute field: step 'x' is not a number"},
                {"5/10 * * * *", "minute field: step in '5/10' needs a range or '*' before it"},
                {"1,,2 * * * *", "minute field: empty item in '1,,2'"},
                {"1, * * * *", "minute field: empty item in '1,'"},
                {"*,5 * * * *", "minute field: '*' must stand alone, not in a list ('*,5')"},
                {"* 5,* * * *", "hour field: '*' must stand alone, not in a list ('5,*')"},
                {"*5 * * * *", "minute field: unexpected '5' in '*5'"},
                {"1#2 * * * *", "minute field: unexpected '#' in '1#2'"},
                {"* * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got 4"},
                {"* * * * * *",
                 "expected 5 fields (minute hour day-of-month month day-of-week), got 6"},
                {"", "empty expression"},
                {" \t ", "empty expression"},
                {"@reboot", "@reboot is not a schedule: it names no time"},
                {"@daily 5", "@daily takes no fields after it"},
                {"@fortnightly",
                 "unknown shortcut '@fortnightly' (@yearly, @annually, @monthly, @weekly, "
                 "@daily, @midnight, @hourly)"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char err[256] = "";
                CronExpr *c = (CronExpr *)&err; /* any non-NULL pointer: must stay */
                int r = cron_parse(cases[i].in, NULL, &c, err, sizeof(err));
                cr_expect_eq(r, -EINVAL, "\"%s\": %d", cases[i].in, r);
                cr_expect_eq(c, (CronExpr *)&err, "\"%s\": *ret written on failure", cases[i].in);
                cr_expect_str_eq(err, cases[i].msg, "\"%s\": got \"%s\"", cases[i].in, err);
        }
}

Test(cron_parse, error_message_is_optional_and_truncated)
{
        char err[12];
        CronExpr *c = NULL;

        cr_assert_eq(cron_parse(NULL, NULL, &c, NULL, 0), -EINVAL);
        cr_assert_eq(cron_parse("61 * * * *", NULL, &c, NULL, 100), -EINVAL);
        memset(err, 'x', sizeof(err));
        cr_assert_eq(cron_parse("61 * * * *", NULL, &c, err, sizeof(err)), -EINVAL);
        cr_assert_str_eq(err, "minute fiel");
        cr_assert_null(c);
}

Test(cron_parse, canonical_text_parses_back_to_itself)
{
        static const char *const exprs[] = {
                "*/7 1-3,5,22-23 */2 FEB-apr,nov 0,6",
                "1,2,4,5,7,8,10,11,13,14,16,17,19,20,22,23,25,26,28,29,31,32,34,35,37,38,40,41,43,"
                "44,46,47,49,50,52,53,55,56,58,59 0,2,3,5,7,8,10,13,17,19,23 2,4,6,9,11,14,17,20,"
                "22,25,28,31 1,3,4,6,8,9,11 1,3,5",
                "0 0 13 * 5",
                "0 0 */3 * 2-4",
                "0 0 1-31 * *",
                "0 0 * * 0-6",
                "*/59 * * * *",
                "@weekly",
        };
        char once[CRON_FORMAT_MAX], twice[CRON_FORMAT_MAX];

        for (size_t i = 0; i < sizeof(exprs) / sizeof(exprs[0]); i++) {
                format_of(exprs[i], once, sizeof(once));
                format_of(once, twice, sizeof(twice));
                cr_expect_str_eq(once, twice, "\"%s\" -> \"%s\" -> \"%s\"", exprs[i], once, twice);
        }
        /* the day rule survives the trip: a restricted day-of-month stays restricted */
        format_of("0 0 1-31 * 1", once, sizeof(once));
        cr_assert_eq(next_of(once, NULL, utc(2024, 9, 2, 12, 0, 0)), utc(2024, 9, 3, 0, 0, 0));
        format_of("0 0 * * 1", once, sizeof(once));
        cr_assert_eq(next_of(once, NULL, utc(2024, 9, 2, 12, 0, 0)), utc(2024, 9, 9, 0, 0, 0));
}

Test(cron_parse, format_reports_a_short_buffer)
{
        CronExpr *c = parse_ok("*/5 * * * *", NULL);
        char buf[5];

        cr_assert_eq(cron_format(c, buf, sizeof(buf)), -ENOBUFS);
        cr_assert_str_eq(buf, "*/5 ");
        cr_assert_eq(cron_format(c, NULL, 0), -ENOBUFS);
        cron_free(c);
        cr_assert_null(cron_free(NULL));
}

/* ---- the next tick, in UTC */

Test(cron_next, steps_and_ranges)
{
        const int64_t day2 = utc(2024, 1, 2, 0, 0, 0);
        const int64_t want[] = {day2 + 9 * 3600,        day2 + 9 * 3600 + 900,
                                day2 + 9 * 3600 + 1800, day2 + 9 * 3600 + 2700,
                                day2 + 13 * 3600,       day2 + 13 * 3600 + 900};

        /* hours 9, 13, 17; minutes 0, 15, 30, 45 */
        expect_ticks("*/15 9-17/4 * * *", NULL, utc(2024, 1, 1, 17, 50, 0), want, 6);
        cr_assert_eq(next_of("10-20/5 * * * *", NULL, utc(2024, 1, 1, 0, 12, 0)),
                     utc(2024, 1, 1, 0, 15, 0));
        cr_assert_eq(next_of("10-20/5 * * * *", NULL, utc(2024, 1, 1, 0, 20, 0)),
                     utc(2024, 1, 1, 1, 10, 0));
        cr_assert_eq(next_of("0 0 * * 1-5", NULL, utc(2024, 9, 6, 12, 0, 0)), /* a Friday */
                     utc(2024, 9, 9, 0, 0, 0));
        cr_assert_eq(next_of("0 0 * * 7", NULL, utc(2024, 9, 2, 0, 0, 0)), /* 7 is Sunday */
                     utc(2024, 9, 8, 0, 0, 0));
}

Test(cron_next, strictly_after_on_whole_minutes)
{
        int64_t t0 = utc(2024, 5, 5, 10, 0, 0);

        cr_assert_eq(next_of("* * * * *", NULL, t0), t0 + 60);
        cr_assert_eq(next_of("* * * * *", NULL, t0 - 1), t0);
        cr_assert_eq(next_of("* * * * *", NULL, t0 + 30), t0 + 60);
        cr_assert_eq(next_of("0 10 * * *", NULL, t0), utc(2024, 5, 6, 10, 0, 0));
        cr_assert_eq(next_of("0 10 * * *", NULL, t0 - 1), t0);
}

Test(cron_next, month_and_year_ends)
{
        cr_assert_eq(next_of("0 0 1 * *", NULL, utc(2024, 12, 31, 23, 59, 59)),
                     utc(2025, 1, 1, 0, 0, 0));
        cr_assert_eq(next_of("59 23 31 12 *", NULL, utc(2023, 12, 31, 23, 59, 0)),
                     utc(2024, 12, 31, 23, 59, 0));
        cr_assert_eq(next_of("0 0 31 * *", NULL, utc(2024, 4, 1, 0, 0, 0)), /* not in April */
                     utc(2024, 5, 31, 0, 0, 0));
        cr_assert_eq(next_of("*/10 * * * *", NULL, utc(2024, 2, 29, 23, 55, 0)),
                     utc(2024, 3, 1, 0, 0, 0));
        cr_assert_eq(next_of("0 12 * * *", NULL, utc(2023, 2, 28, 12, 0, 0)), /* no Feb 29 */
                     utc(2023, 3, 1, 12, 0, 0));
        cr_assert_eq(next_of("0 0 * 1 *", NULL, utc(2024, 1, 31, 0, 0, 0)),
                     utc(2025, 1, 1, 0, 0, 0));
}

Test(cron_next, leap_days)
{
        cr_assert_eq(next_of("0 0 29 2 *", NULL, utc(2024, 3, 1, 0, 0, 0)),
                     utc(2028, 2, 29, 0, 0, 0));
        cr_assert_eq(next_of("0 0 29 2 *", NULL, utc(2023, 6, 1, 0, 0, 0)),
                     utc(2024, 2, 29, 0, 0, 0));
        cr_assert_eq(next_of("0 0 29 2 *", NULL, utc(2095, 3, 1, 0, 0, 0)),
                     utc(2096, 2, 29, 0, 0, 0));
        cr_assert_eq(next_of("0 0 29 2 *", NULL, utc(1999, 3, 1, 0, 0, 0)), /* 2000 is leap */
                     utc(2000, 2, 29, 0, 0, 0));

        /* 2100 is no leap year: after 2096 the next Feb 29 is 2104, past the horizon */
        CronExpr *c = parse_ok("0 0 29 2 *", NULL);
        int64_t t = 42;
        cr_assert_eq(cron_next(c, utc(2096, 3, 1, 0, 0, 0), &t), -ERANGE);
        cr_assert_eq(t, 42);
        cron_free(c);
}

Test(cron_next, a_date_that_never_comes_is_erange)
{
        static const char *const never[] = {"0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 *"};

        for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
                CronExpr *c = parse_ok(never[i], NULL);
                int64_t t = 42;
                cr_expect_eq(cron_next(c, utc(2024, 1, 1, 0, 0, 0), &t), -ERANGE, "%s", never[i]);
                cr_expect_eq(t, 42, "%s: *ret_s written on failure", never[i]);
                cron_free(c);
        }
}

Test(cron_next, starts_out_of_range_are_erange)
{
        CronExpr *c = parse_ok("* * * * *", NULL);
        int64_t t = 42;

        cr_assert_eq(cron_next(c, -1, &t), -ERANGE);
        cr_assert_eq(cron_next(c, CRON_MAX_S + 1, &t), -ERANGE);
        cr_assert_eq(t, 42);
        cr_assert_eq(cron_next(c, 0, &t), 0);
        cr_assert_eq(t, 60);
        cr_assert_eq(cron_next(c, CRON_MAX_S, &t), 0);
        cr_assert_eq(t, CRON_MAX_S + 60);
        cron_free(c);
}

Test(cron_next, day_of_month_or_day_of_week_when_both_are_restricted)
{
        /* September 2024: Fridays are the 6th, 13th, 20th, 27th */
        const int64_t or_rule[] = {utc(2024, 9, 6, 0, 0, 0),   utc(2024, 9, 13, 0, 0, 0),
                                   utc(2024, 9, 20, 0, 0, 0),  utc(2024, 9, 27, 0, 0, 0),
                                   utc(2024, 10, 4, 0, 0, 0),  utc(2024, 10, 11, 0, 0, 0),
                                   utc(2024, 10, 13, 0, 0, 0), /* a Sunday, the 13th */
                                   utc(2024, 10, 18, 0, 0, 0)};
        /* a day-of-month field starting with '*' makes it AND: odd days that are Fridays */
        const int64_t and_rule[] = {utc(2024, 9, 13, 0, 0, 0), utc(2024, 9, 27, 0, 0, 0),
                                    utc(2024, 10, 11, 0, 0, 0), utc(2024, 10, 25, 0, 0, 0)};
        const int64_t dom_only[] = {utc(2024, 9, 13, 0, 0, 0), utc(2024, 10, 13, 0, 0, 0)};
        const int64_t dow_only[] = {utc(2024, 9, 6, 0, 0, 0), utc(2024, 9, 13, 0, 0, 0),
                                    utc(2024, 9, 20, 0, 0, 0)};
        int64_t start = utc(2024, 9, 1, 0, 0, 0);

        expect_ticks("0 0 13 * 5", NULL, start, or_rule, 8);
        expect_ticks("0 0 13 * fri", NULL, start, or_rule, 8);
        expect_ticks("0 0 */2 * 5", NULL, start, and_rule, 4);
        expect_ticks("0 0 13 * *", NULL, start, dom_only, 2);
        expect_ticks("0 0 * * 5", NULL, start, dow_only, 3);
        /* restricted to everything is still restricted: 1-31 OR Friday = every day */
        cr_assert_eq(next_of("0 0 1-31 * 5", NULL, start), utc(2024, 9, 2, 0, 0, 0));
        /* Feb 29 OR a Monday in February: the Mondays come first */
        cr_assert_eq(next_of("0 0 29 2 1", NULL, utc(2025, 1, 1, 0, 0, 0)),
                     utc(2025, 2, 3, 0, 0, 0));
}

/* ---- time zones and daylight-saving time */

Test(cron_dst, new_york_spring_gap_runs_once_at_the_jump)
{
        need_zone("America/New_York");
        /* 2024-03-10 02:00 EST (07:00Z) became 03:00 EDT; 02:30 does not exist that day */
        const int64_t daily[] = {
                utc(2024, 3, 9, 7, 30, 0),  /* 02:30 EST */
                utc(2024, 3, 10, 7, 0, 0),  /* in the gap: at the jump, 03:00 EDT */
                utc(2024, 3, 11, 6, 30, 0), /* 02:30 EDT */
        };
        /* every 15 minutes: 02:00-02:45 are all the jump's one tick, then 03:15 EDT */
        const int64_t quarter[] = {utc(2024, 3, 10, 6, 45, 0), utc(2024, 3, 10, 7, 0, 0),
                                   utc(2024, 3, 10, 7, 15, 0), utc(2024, 3, 10, 7, 30, 0)};

        expect_ticks("30 2 * * *", "America/New_York", utc(2024, 3, 8, 12, 0, 0), daily, 3);
        expect_ticks("*/15 * * * *", "America/New_York", utc(2024, 3, 10, 6, 30, 0), quarter, 4);
        /* 03:00 EDT itself is the same instant as the gap's tick */
        cr_assert_eq(next_of("0 3 * * *", "America/New_York", utc(2024, 3, 9, 12, 0, 0)),
                     utc(2024, 3, 10, 7, 0, 0));
        /* a start inside the new hour does not bring the gap's tick back */
        cr_assert_eq(next_of("30 2 * * *", "America/New_York", utc(2024, 3, 10, 7, 0, 0)),
                     utc(2024, 3, 11, 6, 30, 0));
}

Test(cron_dst, new_york_fall_back_runs_the_first_occurrence_only)
{
        need_zone("America/New_York");
        /* 2024-11-03 02:00 EDT (06:00Z) became 01:00 EST: 01:00-01:59 happen twice */
        const int64_t daily[] = {
                utc(2024, 11, 2, 5, 30, 0), /* 01:30 EDT */
                utc(2024, 11, 3, 5, 30, 0), /* 01:30 EDT, the first; not 06:30Z (EST) */
                utc(2024, 11, 4, 6, 30, 0), /* 01:30 EST */
        };
        const int64_t half[] = {
                utc(2024, 11, 3, 5, 0, 0),  /* 01:00 EDT */
                utc(2024, 11, 3, 5, 30, 0), /* 01:30 EDT */
                utc(2024, 11, 3, 7, 0, 0),  /* 02:00 EST: the repeats of 01:00, 01:30 skipped */
                utc(2024, 11, 3, 7, 30, 0),
        };

        expect_ticks("30 1 * * *", "America/New_York", utc(2024, 11, 1, 12, 0, 0), daily, 3);
        expect_ticks("*/30 * * * *", "America/New_York", utc(2024, 11, 3, 4, 50, 0), half, 4);
        /* a start inside the second pass: on to 02:00 EST */
        cr_assert_eq(next_of("*/30 * * * *", "America/New_York", utc(2024, 11, 3, 6, 10, 0)),
                     utc(2024, 11, 3, 7, 0, 0));
        cr_assert_eq(next_of("0 * * * *", "America/New_York", utc(2024, 11, 3, 5, 0, 0)),
                     utc(2024, 11, 3, 7, 0, 0));
}

Test(cron_dst, berlin_gap_and_repeat)
{
        need_zone("Europe/Berlin");
        /* 2024-03-31 02:00 CET (01:00Z) became 03:00 CEST; 2024-10-27 03:00 CEST (01:00Z)
         * became 02:00 CET */
        const int64_t spring[] = {
                utc(2024, 3, 30, 1, 30, 0), /* 02:30 CET */
                utc(2024, 3, 31, 1, 0, 0),  /* in the gap: 03:00 CEST */
                utc(2024, 4, 1, 0, 30, 0),  /* 02:30 CEST */
        };
        const int64_t autumn[] = {
                utc(2024, 10, 26, 0, 30, 0), /* 02:30 CEST */
                utc(2024, 10, 27, 0, 30, 0), /* 02:30 CEST, the first; not 01:30Z (CET) */
                utc(2024, 10, 28, 1, 30, 0), /* 02:30 CET */
        };

        expect_ticks("30 2 * * *", "Europe/Berlin", utc(2024, 3, 29, 12, 0, 0), spring, 3);
        expect_ticks("30 2 * * *", "Europe/Berlin", utc(2024, 10, 25, 12, 0, 0), autumn, 3);
        /* from 02:50 CEST the next new wall time is 03:00 CET, 70 minutes later */
        cr_assert_eq(next_of("*/15 * * * *", "Europe/Berlin", utc(2024, 10, 27, 0, 50, 0)),
                     utc(2024, 10, 27, 2, 0, 0));
        /* ordinary days: 09:00 CET is 08:00Z in winter, 07:00Z in summer */
        cr_assert_eq(next_of("0 9 * * 1-5", "Europe/Berlin", utc(2024, 1, 5, 12, 0, 0)),
                     utc(2024, 1, 8, 8, 0, 0));
        cr_assert_eq(next_of("0 9 * * 1-5", "Europe/Berlin", utc(2024, 7, 5, 12, 0, 0)),
                     utc(2024, 7, 8, 7, 0, 0));
}

Test(cron_dst, zones_without_dst_and_utc_by_name)
{
        need_zone("Asia/Kolkata");
        need_zone("Etc/UTC");
        /* +05:30 all year */
        cr_assert_eq(next_of("0 9 * * *", "Asia/Kolkata", utc(2024, 1, 1, 0, 0, 0)),
                     utc(2024, 1, 1, 3, 30, 0));
        cr_assert_eq(next_of("0 0 29 2 *", "Etc/UTC", utc(2024, 3, 1, 0, 0, 0)),
                     utc(2028, 2, 29, 0, 0, 0));
        CronExpr *c = parse_ok("0 0 30 2 *", "Europe/Berlin");
        int64_t t = 42;
        cr_assert_eq(cron_next(c, utc(2024, 1, 1, 0, 0, 0), &t), -ERANGE);
        cr_assert_eq(t, 42);
        cron_free(c);
}

Test(cron_dst, leaves_the_process_tz_as_it_found_it)
{
        need_zone("Europe/Berlin");
        need_zone("America/New_York");
        CronExpr *c = parse_ok("30 2 * * *", "Europe/Berlin");
        time_t summer = (time_t)utc(2024, 7, 1, 12, 0, 0);
        struct tm tm;
        int64_t t;

        cr_assert_eq(setenv("TZ", "America/New_York", 1), 0);
        tzset();
        cr_assert_eq(cron_next(c, utc(2024, 3, 30, 12, 0, 0), &t), 0);
        cr_assert_eq(t, utc(2024, 3, 31, 1, 0, 0));
        cr_assert_str_eq(getenv("TZ"), "America/New_York");
        cr_assert_not_null(localtime_r(&summer, &tm));
        cr_assert_eq(tm.tm_gmtoff, -4 * 3600, "localtime after cron_next: %ld", tm.tm_gmtoff);

        cr_assert_eq(unsetenv("TZ"), 0);
        tzset();
        cr_assert_eq(cron_next(c, utc(2024, 3, 30, 12, 0, 0), &t), 0);
        cr_assert_null(getenv("TZ"));
        cron_free(c);
}

/* Two threads, two zones, the same questions: each must get its own zone's answers. */
typedef struct ZoneRun {
        const char *tz;
        int64_t after, want;
        int wrong;
} ZoneRun;

static void *zone_thread(void *arg)
{
        ZoneRun *z = arg;
        CronExpr *c;
        int64_t t;

        if (cron_parse("30 2 * * *", z->tz, &c, NULL, 0) < 0) {
                z->wrong = -1;
                return NULL;
        }
        for (int i = 0; i < 300; i++)
                if (cron_next(c, z->after, &t) < 0 || t != z->want)
                        z->wrong++;
        cron_free(c);
        return NULL;
}

Test(cron_dst, threads_in_two_zones_do_not_see_each_other)
{
        need_zone("Europe/Berlin");
        need_zone("America/New_York");
        ZoneRun runs[] = {
                {"Europe/Berlin", utc(2024, 3, 30, 12, 0, 0), utc(2024, 3, 31, 1, 0, 0), 0},
                {"America/New_York", utc(2024, 3, 9, 12, 0, 0), utc(2024, 3, 10, 7, 0, 0), 0},
        };
        pthread_t th[2];

        for (int i = 0; i < 2; i++)
                cr_assert_eq(pthread_create(&th[i], NULL, zone_thread, &runs[i]), 0);
        for (int i = 0; i < 2; i++) {
                pthread_join(th[i], NULL);
                cr_expect_eq(runs[i].wrong, 0, "%s: %d wrong answers", runs[i].tz, runs[i].wrong);
        }
}

/* ---- zone names */

Test(cron_zone, utc_spellings)
{
        static const char *const names[] = {NULL, "", "UTC"};

        for (size_t i = 0; i < 3; i++) {
                CronExpr *c = parse_ok("0 0 * * *", names[i]);
                cr_expect_str_eq(cron_tz(c), "UTC");
                cron_free(c);
        }
        need_zone("Europe/Berlin");
        CronExpr *c = parse_ok("0 0 * * *", "Europe/Berlin");
        cr_assert_str_eq(cron_tz(c), "Europe/Berlin");
        cron_free(c);
}

Test(cron_zone, refuses_bad_zone_names)
{
        /* @needs: a file under CRON_ZONEINFO_DIR the row's message depends on (tzdata's) */
        static const struct {
                const char *tz, *msg, *needs;
        } cases[] = {
                {"../../etc/passwd", "time zone '../../etc/passwd': not a zone name", NULL},
                {"Europe/../Europe/Berlin", "time zone 'Europe/../Europe/Berlin': not a zone name",
                 NULL},
                {"/etc/localtime", "time zone '/etc/localtime': not a zone name", NULL},
                {"Europe/Berlin;rm", "time zone 'Europe/Berlin;rm': not a zone name", NULL},
                {"Europe/Berlin ", "time zone 'Europe/Berlin ': not a zone name", NULL},
                {"Europe/Nowhere", "time zone 'Europe/Nowhere': no such zone in " CRON_ZONEINFO_DIR,
                 NULL},
                {"utc", "time zone 'utc': no such zone", NULL},
                {"right/Europe/Berlin", "time zone 'right/Europe/Berlin': leap-second zones", NULL},
                {"Europe/BerlinEurope/BerlinEurope/BerlinEurope/BerlinEurope/BerlinEurope/Berlin",
                 "time zone: a name of 78 characters is too long", NULL},
                /* files that are there but are no zone: a folder, a text file */
                {"Europe", "time zone 'Europe': " CRON_ZONEINFO_DIR "/Europe is not a zone file",
                 "Europe"},
                {"leapseconds",
                 "time zone 'leapseconds': " CRON_ZONEINFO_DIR "/leapseconds is not a zone file",
                 "leapseconds"},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char err[256] = "", path[256];
                CronExpr *c = NULL;

                snprintf(path, sizeof(path), "%s/%s", CRON_ZONEINFO_DIR,
                         cases[i].needs ? cases[i].needs : "");
                if (cases[i].needs && access(path, F_OK) != 0) {
                        cr_log_warn("no %s: the row for \"%s\" skipped", path, cases[i].tz);
                        continue;
                }
                int r = cron_parse("0 0 * * *", cases[i].tz, &c, err, sizeof(err));
                cr_expect_eq(r, -EINVAL, "\"%s\": %d", cases[i].tz, r);
                cr_expect_null(c);
                cr_expect(strncmp(err, cases[i].msg, strlen(cases[i].msg)) == 0,
                          "\"%s\": got \"%s\", expected it to start \"%s\"", cases[i].tz, err,
                          cases[i].msg);
        }
}

/* ---- durations */

Test(duration, accepts_units_combinations_and_bare_seconds)
{
        static const struct {
                const char *in;
                uint64_t ms;
        } cases[] = {
                {"500ms", 500},
                {"30s", 30000},
                {"5m", 300000},
                {"2h", 7200000},
                {"1d", 86400000},
                {"1h30m", 5400000},
                {"1d12h", 129600000},
                {"2m30s500ms", 150500},
                {"1d1h1m1s1ms", 90061001},
                {"90", 90000},
                {"0005s", 5000},
                {"0h5m", 300000},
                {"18446744073709551615ms", UINT64_MAX},
                {"213503982334d14h", UINT64_C(213503982334) * 86400000 + 14 * 3600000},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t ms = 0;
                int r = duration_parse_ms(cases[i].in, &ms);
                cr_expect_eq(r, 0, "\"%s\": %d", cases[i].in, r);
                cr_expect_eq(ms, cases[i].ms, "\"%s\": %" PRIu64 ", expected %" PRIu64, cases[i].in,
                             ms, cases[i].ms);
        }
}

Test(duration, refuses_garbage_zero_and_overflow)
{
        static const char *const bad[] = {
                "",
                "0",
                "0s",
                "0h0m0s",
                "abc",
                "5x",
                "1.5h",
                "-5s",
                "+5s",
                " 5s",
                "5s ",
                "5 s",
                "1m30",
                "30m1h",
                "1h1h",
                "ms",
                "m5",
                "1min",
                "5S",
                "1h30m20x",
                "18446744073709551616",
                "18446744073709551616ms",
                "213503982335d",
                "213503982334d15h",
                "99999999999999999999999d",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                uint64_t ms = 42;
                int r = duration_parse_ms(bad[i], &ms);
                cr_expect_eq(r, -EINVAL, "\"%s\": %d", bad[i], r);
                cr_expect_eq(ms, 42, "\"%s\": *ret_ms written on failure", bad[i]);
        }
        uint64_t ms = 42;
        cr_assert_eq(duration_parse_ms(NULL, &ms), -EINVAL);
        cr_assert_eq(ms, 42);
}
