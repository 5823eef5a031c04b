/* SPDX-License-Identifier: MIT */
/* Periodic schedules without a daemon (daemon/cron/schedule.c, and their rows in the
 * SQLite job store): names and policies; an interval's ticks keep their phase however
 * late they are taken; a cron's latest passed tick (found by bisection) is the one a
 * minute-by-minute walk finds, in UTC and across Berlin's DST changes; ticks missed
 * while down are fired once with run_once and dropped with skip; the table keeps
 * (name, owner) order, refuses duplicates and a full owner, and picks the schedule to
 * fire; a schedule's row survives closing and opening the store, replaced and deleted
 * in the order the writes were queued. Expected instants come from timegm(). */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/cron/schedule.h"
#include "daemon/store/store.h"

#define MIN_MS 60000ULL

/* Milliseconds since the epoch of a UTC date and time. */
static uint64_t utc_ms(int y, int mon, int d, int h, int min, int s)
{
        struct tm tm = {.tm_year = y - 1900,
                        .tm_mon = mon - 1,
                        .tm_mday = d,
                        .tm_hour = h,
                        .tm_min = min,
                        .tm_sec = s};

        return (uint64_t)timegm(&tm) * 1000;
}

static void need_zone(const char *tz)
{
        char path[256];

        snprintf(path, sizeof(path), "%s/%s", CRON_ZONEINFO_DIR, tz);
        if (access(path, R_OK) != 0)
                cr_skip_test("no %s (install tzdata)", path);
}

static Schedule *every(uint64_t every_ms)
{
        Schedule *s;

        cr_assert_eq(schedule_new("s", 1000, &s), 0);
        s->every_ms = every_ms;
        return s;
}

static Schedule *cron(const char *expr, const char *tz)
{
        char err[256] = "";
        Schedule *s;

        cr_assert_eq(schedule_new("c", 1000, &s), 0);
        cr_assert_eq(schedule_set_cron(s, expr, tz, err, sizeof(err)), 0, "%s: %s", expr, err);
        return s;
}

/* ---- names and policies */

Test(schedule, names_and_policies)
{
        ScheduleMissed m;

        cr_assert(schedule_name_valid("nightly-backup_2.0", 18));
        cr_assert(schedule_name_valid("x", 1));
        cr_assert(!schedule_name_valid("", 0));
        cr_assert(!schedule_name_valid("a b", 3));
        cr_assert(!schedule_name_valid("a/b", 3));
        cr_assert(!schedule_name_valid("a\0b", 3), "a NUL inside");
        cr_assert(schedule_name_valid(
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 64));
        cr_assert(!schedule_name_valid(
                "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 65));
        cr_assert_eq(schedule_missed_parse("run_once", 8, &m), 0);
        cr_assert_eq(m, SCHEDULE_MISSED_RUN_ONCE);
        cr_assert_eq(schedule_missed_parse("skip", 4, &m), 0);
        cr_assert_eq(m, SCHEDULE_MISSED_SKIP);
        cr_assert_eq(schedule_missed_parse("run-once", 8, &m), -EINVAL);
        cr_assert_str_eq(schedule_missed_name(SCHEDULE_MISSED_RUN_ONCE), "run_once");
}

/* ---- intervals */

Test(schedule, an_interval_keeps_its_phase_however_late_its_ticks_are_taken)
{
        Schedule *s = every(1000);
        uint64_t t0 = 1764000000123ULL, tick = 0;

        cr_assert_eq(schedule_start(s, t0), 0);
        cr_assert_eq(s->next_ms, t0 + 1000, "the first tick is one interval after the start");
        cr_assert_eq(schedule_advance(s, t0 + 999, &tick), 0, "not due yet");
        cr_assert_eq(s->next_ms, t0 + 1000);
        cr_assert_eq(schedule_advance(s, t0 + 1000, &tick), 1, "due on the millisecond");
        cr_assert_eq(tick, t0 + 1000);
        cr_assert_eq(s->next_ms, t0 + 2000, "counted from the tick, not from now");
        /* a slow tick: taken 150 ms late, the next is still on the phase */
        cr_assert_eq(schedule_advance(s, t0 + 2150, &tick), 1);
        cr_assert_eq(tick, t0 + 2000);
        cr_assert_eq(s->next_ms, t0 + 3000);
        /* three and a half intervals late: the ticks collapse into the latest */
        cr_assert_eq(schedule_advance(s, t0 + 6500, &tick), 1);
        cr_assert_eq(tick, t0 + 6000);
        cr_assert_eq(s->next_ms, t0 + 7000);
        /* paused: nothing */
        s->paused = true;
        cr_assert_eq(schedule_advance(s, t0 + 60000, &tick), 0);
        /* resumed: the phase restarts from then */
        cr_assert_eq(schedule_start(s, t0 + 60500), 0);
        cr_assert(!s->paused);
        cr_assert_eq(s->next_ms, t0 + 61500);
        schedule_free(s);
}

Test(schedule, tick_after_counts_an_interval_from_its_phase)
{
        Schedule *s = every(5000);
        uint64_t t;

        s->next_ms = 100000;
        cr_assert_eq(schedule_tick_after(s, 50000, &t), 0);
        cr_assert_eq(t, 100000);
        cr_assert_eq(schedule_tick_after(s, 100000, &t), 0);
        cr_assert_eq(t, 105000, "strictly after");
        cr_assert_eq(schedule_tick_after(s, 112345, &t), 0);
        cr_assert_eq(t, 115000);
        s->next_ms = 0;
        cr_assert_eq(schedule_tick_after(s, 112345, &t), 0);
        cr_assert_eq(t, 117345, "no phase: one interval from the time given");
        schedule_free(s);
}

/* ---- cron */

Test(schedule, a_cron_ticks_on_its_minutes_and_collapses_missed_ones_into_the_latest)
{
        Schedule *s = cron("*/15 * * * *", NULL);
        uint64_t tick = 0;

        cr_assert_str_eq(s->cron_text, "*/15 * * * *");
        cr_assert_str_eq(s->tz, "UTC");
        cr_assert_eq(schedule_start(s, utc_ms(2026, 3, 10, 10, 7, 30) + 250), 0);
        cr_assert_eq(s->next_ms, utc_ms(2026, 3, 10, 10, 15, 0));
        cr_assert_eq(schedule_advance(s, utc_ms(2026, 3, 10, 10, 14, 59), &tick), 0);
        cr_assert_eq(schedule_advance(s, utc_ms(2026, 3, 10, 10, 15, 0) + 500, &tick), 1);
        cr_assert_eq(tick, utc_ms(2026, 3, 10, 10, 15, 0));
        cr_assert_eq(s->next_ms, utc_ms(2026, 3, 10, 10, 30, 0));
        /* three hours and more later */
        cr_assert_eq(schedule_advance(s, utc_ms(2026, 3, 10, 13, 44, 59), &tick), 1);
        cr_assert_eq(tick, utc_ms(2026, 3, 10, 13, 30, 0));
        cr_assert_eq(s->next_ms, utc_ms(2026, 3, 10, 13, 45, 0));
        /* exactly on a tick, a year later */
        cr_assert_eq(schedule_advance(s, utc_ms(2027, 3, 10, 13, 45, 0), &tick), 1);
        cr_assert_eq(tick, utc_ms(2027, 3, 10, 13, 45, 0));
        cr_assert_eq(s->next_ms, utc_ms(2027, 3, 10, 14, 0, 0));
        schedule_free(s);
}

/* The latest tick of @c at or before @now_ms by walking cron_next() from @from_ms. */
static uint64_t walk_latest(const Schedule *c, uint64_t from_ms, uint64_t now_ms)
{
        uint64_t t = from_ms, next;

        while (schedule_tick_after(c, t, &next) == 0 && next <= now_ms)
                t = next;
        return t;
}

/* Bisection against a walk, for @expr in @tz, from @from_ms over @span_ms, @n nows. */
/* Returns how many instants it checked (@n). */
static int latest_matches_a_walk(const char *expr, const char *tz, uint64_t from_ms,
                                 uint64_t span_ms, int n)
{
        int checked = 0;

        Schedule *s = cron(expr, tz);
        uint64_t first, tick;

        cr_assert_eq(schedule_start(s, from_ms), 0);
        first = s->next_ms;
        srand(42);
        for (int i = 0; i < n; i++) {
                uint64_t now = first + (uint64_t)rand() % span_ms,
                         want = walk_latest(s, first, now);
                s->next_ms = first;
                cr_assert_eq(schedule_advance(s, now, &tick), 1);
                cr_assert_eq(tick, want,
                             "\"%s\" in %s at %" PRIu64 ": %" PRIu64 ", walked %" PRIu64, expr,
                             tz ? tz : "UTC", now, tick, want);
                cr_assert_gt(s->next_ms, now);
                cr_assert_eq(s->next_ms, walk_latest(s, want, s->next_ms),
                             "the next tick is the one after the latest");
                checked++;
        }
        schedule_free(s);
        return checked;
}

Test(schedule, the_latest_passed_cron_tick_is_the_one_a_walk_finds)
{
        int n = latest_matches_a_walk("*/7 * * * *", NULL, utc_ms(2026, 1, 1, 0, 0, 0),
                                      3 * 86400000ULL, 40);
        n += latest_matches_a_walk("0 3 * * 1-5", NULL, utc_ms(2026, 1, 1, 0, 0, 0),
                                   60 * 86400000ULL, 40);
        n += latest_matches_a_walk("0 0 29 2 *", NULL, utc_ms(2026, 1, 1, 0, 0, 0),
                                   900 * 86400000ULL, 5);
        cr_assert_eq(n, 85, "%d instants checked", n);
}

Test(schedule, the_latest_passed_tick_across_berlin_dst_changes)
{
        need_zone("Europe/Berlin");
        /* the spring gap (29 March 2026) and the autumn repeat (25 October 2026) */
        int n = latest_matches_a_walk("30 2 * * *", "Europe/Berlin", utc_ms(2026, 3, 25, 0, 0, 0),
                                      10 * 86400000ULL, 30);
        n += latest_matches_a_walk("*/20 1-3 * * *", "Europe/Berlin", utc_ms(2026, 10, 23, 0, 0, 0),
                                   5 * 86400000ULL, 30);
        cr_assert_eq(n, 60, "%d instants checked", n);
}

Test(schedule, a_cron_with_no_tick_ahead_does_not_start)
{
        Schedule *s = cron("0 0 30 2 *", NULL);

        cr_assert_eq(schedule_start(s, utc_ms(2026, 1, 1, 0, 0, 0)), -ERANGE);
        cr_assert_eq(s->next_ms, 0);
        schedule_free(s);
}

/* ---- ticks missed while down */

Test(schedule, run_once_fires_the_latest_missed_tick_and_skip_none)
{
        uint64_t t0 = 1764000000000ULL;
        Schedule *a = every(1000), *b = every(1000), *p = every(1000), *c = every(1000);

        a->missed = SCHEDULE_MISSED_RUN_ONCE;
        a->next_ms = b->next_ms = p->next_ms = t0;
        c->next_ms = t0 + 5000;
        p->missed = SCHEDULE_MISSED_RUN_ONCE;
        p->paused = true;
        /* down from before t0 until t0 + 3.2 s */
        cr_assert_eq(schedule_restore(a, t0 + 3200), 1);
        cr_assert_eq(a->catchup_ms, t0 + 3000, "one job, for the latest missed tick");
        cr_assert_eq(a->next_ms, t0 + 4000);
        cr_assert_eq(schedule_restore(b, t0 + 3200), 1);
        cr_assert_eq(b->catchup_ms, 0, "skip fires nothing");
        cr_assert_eq(b->next_ms, t0 + 4000);
        cr_assert_eq(schedule_restore(p, t0 + 3200), 0, "a paused schedule stays as it was");
        cr_assert_eq(p->catchup_ms, 0);
        cr_assert_eq(schedule_restore(c, t0 + 3200), 0, "no tick passed");
        cr_assert_eq(c->next_ms, t0 + 5000);
        schedule_free(a);
        schedule_free(b);
        schedule_free(p);
        schedule_free(c);
}

/* ---- the table */

Test(schedule, the_table_keeps_name_owner_order_and_refuses_duplicates)
{
        static const struct {
                const char *name;
                uid_t owner;
        } adds[] = {{"b", 1}, {"a", 2}, {"a", 1}, {"ab", 1}, {"c", 0}};
        static const char *const order[] = {"a/1", "a/2", "ab/1", "b/1", "c/0"};
        ScheduleTable t;
        Schedule *s;
        size_t i = 0;

        schedule_table_init(&t);
        for (i = 0; i < sizeof(adds) / sizeof(adds[0]); i++) {
                cr_assert_eq(schedule_new(adds[i].name, adds[i].owner, &s), 0);
                cr_assert_eq(schedule_insert_locked(&t, s), 0);
        }
        cr_assert_eq(schedule_new("a", 2, &s), 0);
        cr_assert_eq(schedule_insert_locked(&t, s), -EEXIST);
        schedule_free(s);
        i = 0;
        for (s = schedule_first_locked(&t); s; s = schedule_after_locked(&t, s), i++) {
                char got[96];
                snprintf(got, sizeof(got), "%s/%u", s->name, (unsigned)s->owner);
                cr_assert_str_eq(got, order[i]);
        }
        cr_assert_eq(i, 5);
        cr_assert_eq(schedule_count(&t), 5);
        s = schedule_find_locked(&t, 2, "a", 1);
        cr_assert(s && s->owner == 2);
        cr_assert_eq(schedule_find_serial_locked(&t, s->serial), s);
        cr_assert_null(schedule_find_locked(&t, 3, "a", 1));
        cr_assert_null(schedule_find_locked(&t, 1, "abc", 3));
        schedule_remove_locked(&t, s);
        schedule_free(s);
        cr_assert_null(schedule_find_locked(&t, 2, "a", 1));
        cr_assert_eq(schedule_count(&t), 4);
        while ((s = schedule_first_locked(&t))) {
                schedule_remove_locked(&t, s);
                schedule_free(s);
        }
}

Test(schedule, an_owner_has_at_most_so_many_schedules)
{
        ScheduleTable t;
        Schedule *s;
        char name[16];

        schedule_table_init(&t);
        for (int i = 0; i < SCHEDULE_MAX_PER_OWNER; i++) {
                snprintf(name, sizeof(name), "n%d", i);
                cr_assert_eq(schedule_new(name, 7, &s), 0);
                cr_assert_eq(schedule_insert_locked(&t, s), 0);
        }
        cr_assert_eq(schedule_new("one-more", 7, &s), 0);
        cr_assert_eq(schedule_insert_locked(&t, s), -EDQUOT);
        s->owner = 8;
        cr_assert_eq(schedule_insert_locked(&t, s), 0, "another owner has room");
}

Test(schedule, the_next_to_fire_is_a_catch_up_then_the_longest_due)
{
        ScheduleTable t;
        Schedule *a = every(1000), *b = every(1000), *c = every(1000), *p = every(1000);
        uint64_t wake;

        schedule_table_init(&t);
        snprintf(a->name, sizeof(a->name), "a");
        snprintf(b->name, sizeof(b->name), "b");
        snprintf(c->name, sizeof(c->name), "c");
        snprintf(p->name, sizeof(p->name), "p");
        a->next_ms = 5000;
        b->next_ms = 3000;
        c->next_ms = 9000;
        p->next_ms = 1000;
        p->paused = true;
        cr_assert_eq(schedule_insert_locked(&t, a), 0);
        cr_assert_eq(schedule_insert_locked(&t, b), 0);
        cr_assert_eq(schedule_insert_locked(&t, c), 0);
        cr_assert_eq(schedule_insert_locked(&t, p), 0);
        cr_assert_null(schedule_next_locked(&t, 2000, &wake));
        cr_assert_eq(wake, 3000, "the earliest tick, paused ones aside");
        cr_assert_eq(schedule_next_locked(&t, 6000, &wake), b, "due longest");
        c->catchup_ms = 500;
        cr_assert_eq(schedule_next_locked(&t, 6000, &wake), c, "a catch-up goes first");
}

/* ---- rows in the SQLite store */

typedef struct Rows {
        int n;
        char names[4][16];
        uint64_t next_ms[4], last_job[4];
        bool paused[4];
        size_t n_groups[4];
        char cron[4][32];
} Rows;

static int collect(const StoreSchedule *sc, void *arg)
{
        Rows *rows = arg;

        cr_assert_lt(rows->n, 4);
        snprintf(rows->names[rows->n], 16, "%s", sc->name);
        snprintf(rows->cron[rows->n], 32, "%s", sc->cron ? sc->cron : "-");
        rows->next_ms[rows->n] = sc->next_ms;
        rows->last_job[rows->n] = sc->last_job;
        rows->paused[rows->n] = sc->paused;
        rows->n_groups[rows->n] = sc->n_groups;
        cr_assert_eq(sc->args_len, 1);
        cr_assert_eq((unsigned char)sc->args[0], 0x80, "args: the empty map, as written");
        rows->n++;
        return 0;
}

static int no_jobs(const StoreRecord *rec, void *arg)
{
        return 0;
}

Test(schedule_store, rows_are_written_replaced_and_deleted_in_order)
{
        char dir[] = "/tmp/fiberd-schedule-XXXXXX", path[64];
        gid_t groups[] = {27, 100};
        StoreSchedule sc = {.owner = 1000,
                            .gid = 1000,
                            .groups = groups,
                            .n_groups = 2,
                            .missed = "skip",
                            .plugin = "echo",
                            .args = "\x80",
                            .args_len = 1,
                            .options = "\x80",
                            .options_len = 1};
        StoreWaiter w;
        Rows rows = {0};
        Store *s;

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/jobs.db", dir);
        cr_assert_eq(store_open(&s, STORE_SQLITE, path, NULL), 0);
        /* before the store thread: committed by this thread */
        sc.name = "nightly";
        sc.cron = "0 3 * * *";
        sc.tz = "UTC";
        sc.next_ms = 111;
        store_waiter_init(&w);
        cr_assert_eq(store_put_schedule(s, &sc, &w), 0);
        cr_assert_eq(store_waiter_wait(&w), 0);
        cr_assert_eq(store_load(s, no_jobs, NULL), 0);
        /* through the store thread */
        sc.name = "tick";
        sc.cron = sc.tz = NULL;
        sc.every_ms = 1000;
        sc.n_groups = 0;
        cr_assert_eq(store_put_schedule(s, &sc, NULL), 0);
        sc.next_ms = 222;
        sc.last_job = 17;
        sc.paused = true;
        cr_assert_eq(store_put_schedule(s, &sc, NULL), 0); /* the last one queued stays */
        sc.name = "gone";
        cr_assert_eq(store_put_schedule(s, &sc, NULL), 0);
        store_waiter_init(&w);
        cr_assert_eq(store_delete_schedule(s, 1000, "gone", &w), 0);
        cr_assert_eq(store_waiter_wait(&w), 0);
        store_close(s);

        cr_assert_eq(store_open(&s, STORE_SQLITE, path, NULL), 0);
        cr_assert_eq(store_schedules(s, collect, &rows), 0);
        store_close(s);
        cr_assert_eq(rows.n, 2);
        cr_assert_str_eq(rows.names[0], "nightly");
        cr_assert_str_eq(rows.cron[0], "0 3 * * *");
        cr_assert_eq(rows.next_ms[0], 111);
        cr_assert_eq(rows.n_groups[0], 2);
        cr_assert_str_eq(rows.names[1], "tick");
        cr_assert_str_eq(rows.cron[1], "-");
        cr_assert_eq(rows.next_ms[1], 222);
        cr_assert_eq(rows.last_job[1], 17);
        cr_assert(rows.paused[1]);
        cr_assert_eq(rows.n_groups[1], 0);
        unlink(path);
        {
                char wal[80];
                snprintf(wal, sizeof(wal), "%s-wal", path);
                unlink(wal);
                snprintf(wal, sizeof(wal), "%s-shm", path);
                unlink(wal);
        }
        rmdir(dir);
}

Test(schedule_store, the_memory_store_keeps_none_and_answers_at_once)
{
        StoreSchedule sc = {.name = "x", .missed = "skip", .plugin = "echo", .every_ms = 1000};
        StoreWaiter w;
        Store *s;
        Rows rows = {0};

        cr_assert_eq(store_open(&s, STORE_MEMORY, NULL, NULL), 0);
        store_waiter_init(&w);
        cr_assert_eq(store_put_schedule(s, &sc, &w), 0);
        cr_assert_eq(store_waiter_wait(&w), 0);
        cr_assert_eq(store_schedules(s, collect, &rows), 0);
        cr_assert_eq(rows.n, 0);
        store_close(s);
}
