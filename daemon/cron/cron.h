/* SPDX-License-Identifier: MIT */
/*
 * cron.h — cron expressions for periodic job schedules: parse one, print it back, and find
 * its next tick after a given second.
 *
 * The language is Vixie cron's five fields, as cronie reads them:
 *
 *     minute  hour  day-of-month  month  day-of-week
 *     0-59    0-23  1-31          1-12   0-7 (0 and 7 are Sunday)
 *
 * A field is a comma list of items; an item is a value (`5`), a range (`1-5`), a range
 * with a step (`0-30/10`), `*` (every value) or `*` with a step (`*`/15, every 15th).
 * Months take the names JAN-DEC and days of the week SUN-SAT, in any case, wherever a
 * number goes. A `*` stands alone in its field (`*,5` is refused: cronie reads it, but
 * it says nothing `*` does not); a range runs upwards (`5-2` is refused, and so is
 * `FRI-SUN`, SUN being 0: write `FRI-7`); a step needs a range or `*` before it (`5/10`
 * is refused rather than guessed at); a step or a value past the field's end is refused.
 * The shortcuts @yearly (= @annually), @monthly, @weekly, @daily (= @midnight) and
 * @hourly stand for the five fields they always meant; @reboot is no schedule and is
 * refused. Fields are separated by blanks; anything else is an error that names the
 * field and the token.
 *
 * The day rule is Vixie cron's, surprising as it is: a day matches when its day of month
 * AND its day of week match, unless both fields are restricted, when EITHER will do.
 * "Restricted" means "does not start with `*`": `0 0 1,15 * 1` runs on the 1st, the 15th
 * and every Monday, and `0 0 1-31/2 * 1` on odd days and every Monday, while the same
 * days of month written with a star (`*`/2) run only on odd days that are Mondays.
 * cron_format() keeps that distinction: a day field prints with a `*` only when it was
 * written with one.
 *
 * Time zones. A tick is a wall-clock time in the expression's zone (UTC, or an IANA name
 * read from CRON_ZONEINFO_DIR through glibc). Where daylight-saving time moves the
 * clock, cronie's rule holds: a wall time skipped by a spring-forward gap runs once, at
 * the first second after the gap (so `30 2 * * *` in Europe/Berlin runs at 03:00 on the
 * last Sunday of March, and every time inside the gap shares that one tick); a wall time
 * repeated by a fall-back runs once, at its first occurrence. Ticks are therefore
 * strictly increasing seconds, never two on one second, none lost to a gap. cronie
 * goes one step further for jobs whose minute or hour field starts with `*`: it runs
 * them in both passes of a repeated hour and not for a gap's minutes. This module does
 * not: every wall time ticks once, so `*`/5 pauses for the hour that repeats, and
 * `0 * * * *` runs at 01:00 once on the night New York falls back.
 *
 * glibc converts times of a zone other than the process's only through the TZ variable,
 * which is process-wide. cron_next() for a zoned expression therefore takes one
 * process-wide lock, sets TZ, calls tzset(), does its localtime_r() calls, and puts TZ
 * back (or unsets it) before it lets go. The lock orders cron's own callers; it cannot
 * order the rest of the process: another thread's localtime_r(), mktime() or strftime()
 * that runs meanwhile (crash.c's report stamp, a plugin's own code) sees the schedule's
 * zone, and a getenv() racing the setenv() is undefined. Call zoned cron_next() where
 * that does not matter (the scheduler computing a job's next due time, not a hot path),
 * never from a signal handler. UTC expressions take no lock and call nothing of the C
 * library's time code: their arithmetic is cron.c's own.
 *
 * The search for the next tick walks the calendar by fields (month, then day, then hour,
 * then minute), so an expression that matches rarely costs a few hundred steps, not a
 * minute-by-minute scan; it gives up after CRON_HORIZON_YEARS (`0 0 30 2 *` never
 * matches; `0 0 29 2 *` from March 2097 would next match in 2104).
 *
 * Pure code: no threads, no allocation but the CronExpr itself, no I/O but the zone
 * file cron_parse() checks and glibc's reading of it.
 */
#ifndef FIBERD_DAEMON_CRON_H
#define FIBERD_DAEMON_CRON_H

#include <stddef.h>
#include <stdint.h>

/* Where zone names are looked up: "Europe/Berlin" is this directory's Europe/Berlin. */
#define CRON_ZONEINFO_DIR "/usr/share/zoneinfo"
/* The longest zone name accepted (the longest IANA name is 32 characters). */
#define CRON_TZ_MAX 64
/* cron_format()'s largest output, its NUL included: enough for any expression. */
#define CRON_FORMAT_MAX 512
/* cron_next() looks this many years past its start, then answers -ERANGE. */
#define CRON_HORIZON_YEARS 5
/* cron_next() answers for starts from the epoch to here (9990-01-01T00:00:00Z). */
#define CRON_MAX_S INT64_C(253086768000)

/* CronExpr - a parsed expression and its zone (cron.c); immutable once parsed. */
typedef struct CronExpr CronExpr;

/*
 * cron_parse - parse a five-field expression or an @shortcut (see the top of this file)
 * in the time zone @tz: NULL, "" or "UTC" is UTC; anything else an IANA name such as
 * "Europe/Berlin" that is a TZif file under CRON_ZONEINFO_DIR. A name with "..", a
 * leading '/', a character outside [A-Za-z0-9/_+-] or more than CRON_TZ_MAX - 1
 * characters is refused before the file system is asked.
 * @ret: out, allocated, freed with cron_free(); written only on success.
 * @err, @err_len: on -EINVAL, a human message naming the field and the bad token
 * ("minute field: 61 is out of range 0-59"), truncated to @err_len (NUL included);
 * NULL or 0: no message. Untouched on other returns.
 * Return: 0; -EINVAL: a bad expression or zone; -ENOMEM.
 * Context: any thread; reads the zone file's first bytes, takes no lock.
 */
int cron_parse(const char *expr, const char *tz, CronExpr **ret, char *err, size_t err_len);

/* cron_free - free @c (NULL is fine). Return: NULL. Context: any thread. */
CronExpr *cron_free(CronExpr *c);

/*
 * cron_next - the first tick of @c strictly after @after_s, both in seconds since the
 * epoch (UTC). Ticks fall on whole minutes of @c's wall clock (see the top of this file
 * for DST gaps and repeats).
 * @ret_s: out, written only on success.
 * Return: 0; -ERANGE: no tick within CRON_HORIZON_YEARS of @after_s (`0 0 30 2 *`), or
 * @after_s before the epoch or after CRON_MAX_S; -ENOMEM: no memory to keep the
 * process's TZ while it is switched (zoned expressions only).
 * Context: any thread, not a signal handler. A zoned @c takes the process-wide TZ lock
 * and switches TZ for the call's duration (the top of this file says what that means
 * for the rest of the process); a UTC @c takes no lock. Costs a few hundred steps at
 * worst, plus two reads of zone files by tzset() for a zoned @c.
 */
int cron_next(const CronExpr *c, int64_t after_s, int64_t *ret_s);

/*
 * cron_format - @c's canonical five fields, as `schedule list` shows them: "*" for a
 * full field (a day field only when it was written with `*`), `*`/n for a step from
 * the field's first value across it (a day field: only when written so), else a comma list of values and runs ("1-5"),
 * Sunday as 0, month and day names as numbers; the shortcuts are spelled out ("@daily"
 * prints "0 0 * * *"). Parsing the output gives an expression with the same ticks and
 * the same output. The zone is not part of it: see cron_tz().
 * @buf, @size: out, NUL-terminated; CRON_FORMAT_MAX is always enough.
 * Return: the length (without the NUL); -ENOBUFS: @size too small (@buf then holds
 * as much as fits, NUL-terminated, when @size > 0).
 * Context: any thread; pure.
 */
int cron_format(const CronExpr *c, char *buf, size_t size);

/*
 * cron_tz - @c's zone name as cron_parse() took it, "UTC" for UTC. Borrowed: valid as
 * long as @c. Context: any thread; pure.
 */
const char *cron_tz(const CronExpr *c);

#endif /* FIBERD_DAEMON_CRON_H */
