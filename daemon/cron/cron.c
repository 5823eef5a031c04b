/* SPDX-License-Identifier: MIT */
/*
 * cron.c — cron expressions: the parser, the canonical printer, and the search for the
 * next tick (see cron.h for the language and the DST rules).
 *
 * An expression is five bitmaps and two flags, as in Vixie cron's entry.c: parsing sets
 * bits, matching tests them. The parser reads a field as a comma list of items and each
 * item as alphanumeric tokens between '-' and '/', so an error can name the field and
 * the token it choked on.
 *
 * The search works on wall-clock time, a Civil (year, month, day, hour, minute) in the
 * expression's zone, and moves it forward field by field: a month not in the set skips
 * to the next month that is, a day that does not match to the next day, then the hour,
 * then the minute (the next set bit, not the next value). Two functions tie wall time
 * to instants: the zone's UTC offset at an instant (0 for UTC; localtime_r()'s
 * tm_gmtoff for a zone, under the TZ lock that cron_next() holds), and fire(), the
 * instant a matching wall time ticks at:
 *
 *   - g, the wall time read as if it were UTC, minus an offset is a candidate instant;
 *     the offsets a day before and a day after g give the (at most two) candidates, and
 *     a candidate is real when the zone's offset at it is the one it was made with;
 *   - two real candidates: a repeated wall time (fall-back), the earlier one ticks;
 *   - one: the ordinary case;
 *   - none: a wall time inside a spring-forward gap; it ticks at the transition, found by
 *     bisecting between the two candidates (a dozen offsets for an hour's gap).
 *
 * fire() never decreases as the wall time grows, so the first matching wall time after
 * the wall time of @after_s whose fire() lies after @after_s is the answer; only inside
 * a repeated hour are a few matches skipped (their first occurrence is already past).
 *
 * Calendar arithmetic (days from a civil date and back) is Howard Hinnant's
 * days_from_civil / civil_from_days, exact over the proleptic Gregorian calendar; UTC
 * needs nothing else from the C library.
 */
#include "daemon/cron/cron.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEC_PER_MIN 60
#define SEC_PER_HOUR (60 * SEC_PER_MIN)
#define SEC_PER_DAY (24 * SEC_PER_HOUR)

struct CronExpr {
        uint64_t minutes;     /* bit m: minute m (0-59) matches */
        uint64_t hours;       /* bit h: hour h (0-23) */
        uint64_t days;        /* bit d: day of month d (1-31) */
        uint64_t months;      /* bit m: month m (1-12) */
        uint64_t weekdays;    /* bit d: day of week d (0-6, Sunday 0; a 7 written sets bit 0) */
        bool dom_star;        /* the day-of-month field starts with '*' (the day rule) */
        bool dow_star;        /* the day-of-week field starts with '*' */
        bool utc;             /* no zone: UTC, no lock */
        char tz[CRON_TZ_MAX]; /* the zone's name; "UTC" when @utc */
};

/* ---- the fields */

enum { F_MINUTE, F_HOUR, F_DOM, F_MONTH, F_DOW, F_COUNT };

/* CronField - what one of the five fields may hold. */
typedef struct CronField {
        const char *name;         /* for messages: "minute field: ..." */
        int lo, hi;               /* the values a number may take */
        int star_hi;              /* '*' covers lo..star_hi (day of week: 0-6, not 7) */
        const char *const *names; /* the 3-letter names of lo, lo + 1, ...; or NULL */
        const char *what;         /* "a month" for "'FOO' is not a month (...)" */
} CronField;

static const char *const month_names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                          "jul", "aug", "sep", "oct", "nov", "dec"};
static const char *const day_names[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};

static const CronField cron_fields[F_COUNT] = {
        [F_MINUTE] = {"minute", 0, 59, 59, NULL, NULL},
        [F_HOUR] = {"hour", 0, 23, 23, NULL, NULL},
        [F_DOM] = {"day-of-month", 1, 31, 31, NULL, NULL},
        [F_MONTH] = {"month", 1, 12, 12, month_names, "a month (1-12 or JAN-DEC)"},
        [F_DOW] = {"day-of-week", 0, 7, 6, day_names, "a day of the week (0-7 or SUN-SAT)"},
};

/* The shortcuts and the fields they stand for (cronie's entry.c). */
static const struct {
        const char *name;
        const char *fields;
} cron_shortcuts[] = {
        {"@yearly", "0 0 1 1 *"}, {"@annually", "0 0 1 1 *"}, {"@monthly", "0 0 1 * *"},
        {"@weekly", "0 0 * * 0"}, {"@daily", "0 0 * * *"},    {"@midnight", "0 0 * * *"},
        {"@hourly", "0 * * * *"},
};

/* Longest token quoted in a message. */
#define TOKEN_SHOW 32

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t err_len, const char *fmt,
                                                      ...)
{
        va_list ap;

        if (err && err_len > 0) {
                va_start(ap, fmt);
                vsnprintf(err, err_len, fmt, ap);
                va_end(ap);
        }
        return -EINVAL;
}

static bool is_alnum(char ch)
{
        return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
}

static bool is_blank(char ch)
{
        return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Bits lo..hi set. */
static uint64_t bits_range(int lo, int hi, int step)
{
        uint64_t bits = 0;

        for (int v = lo; v <= hi; v += step)
                bits |= UINT64_C(1) << v;
        return bits;
}

/*
 * The value of the token @s (@len characters, all alphanumeric) in field @f: a number
 * within lo..hi, or one of its names. Return: 0 and *@ret; -EINVAL with a message.
 */
static int parse_value(const CronField *f, const char *s, size_t len, int *ret, char *err,
                       size_t err_len)
{
        int show = (int)(len < TOKEN_SHOW ? len : TOKEN_SHOW);

        if (s[0] >= '0' && s[0] <= '9') {
                long v = 0;
                for (size_t i = 0; i < len; i++) {
                        if (s[i] < '0' || s[i] > '9')
                                return fail(err, err_len, "%s field: '%.*s' is not a number",
                                            f->name, show, s);
                        if (v <= f->hi)
                                v = v * 10 + (s[i] - '0');
                }
                if (v < f->lo || v > f->hi)
                        return fail(err, err_len, "%s field: %.*s is out of range %d-%d", f->name,
                                    show, s, f->lo, f->hi);
                *ret = (int)v;
                return 0;
        }
        if (f->names) {
                for (int i = 0; len == 3 && i <= f->star_hi - f->lo; i++)
                        if (strncasecmp(s, f->names[i], 3) == 0) {
                                *ret = f->lo + i;
                                return 0;
                        }
                return fail(err, err_len, "%s field: '%.*s' is not %s", f->name, show, s, f->what);
        }
        return fail(err, err_len, "%s field: '%.*s' is not a number", f->name, show, s);
}

/*
 * One item of field @f, @s (@len characters, no ','): `*`, `*`/n, a, a-b, a-b/n.
 * Return: 0 and its bits ORed into *@bits; -EINVAL with a message.
 */
static int parse_item(const CronField *f, const char *s, size_t len, uint64_t *bits, char *err,
                      size_t err_len)
{
        int show = (int)(len < TOKEN_SHOW ? len : TOKEN_SHOW);
        size_t i = 0, n;
        int a, b, step = 1, r;
        bool range;

        if (s[0] == '*') {
                a = f->lo;
                b = f->star_hi;
                i = 1;
                range = true;
        } else {
                for (n = 0; i + n < len && is_alnum(s[i + n]); n++)
                        ;
                if (n == 0)
                        return fail(err, err_len, "%s field: unexpected '%c' in '%.*s'", f->name,
                                    s[i], show, s);
                r = parse_value(f, s, n, &a, err, err_len);
                if (r < 0)
                        return r;
                i = n;
                b = a;
                range = i < len && s[i] == '-';
                if (range) {
                        i++;
                        for (n = 0; i + n < len && is_alnum(s[i + n]); n++)
                                ;
                        if (n == 0)
                                return fail(err, err_len, "%s field: range '%.*s' has no end",
                                            f->name, show, s);
                        r = parse_value(f, s + i, n, &b, err, err_len);
                        if (r < 0)
                                return r;
                        i += n;
                        if (b < a)
                                return fail(err, err_len, "%s field: range %.*s runs backwards",
                                            f->name, show, s);
                }
        }
        if (i < len && s[i] == '/') {
                if (!range)
                        return fail(err, err_len,
                                    "%s field: step in '%.*s' needs a range or '*' before it",
                                    f->name, show, s);
                i++;
                for (n = 0; i + n < len && is_alnum(s[i + n]); n++)
                        ;
                if (n == 0)
                        return fail(err, err_len, "%s field: step in '%.*s' has no number", f->name,
                                    show, s);
                long v = 0;
                for (size_t k = 0; k < n; k++) {
                        char ch = s[i + k];
                        if (ch < '0' || ch > '9')
                                return fail(err, err_len, "%s field: step '%.*s' is not a number",
                                            f->name, (int)(n < TOKEN_SHOW ? n : TOKEN_SHOW), s + i);
                        if (v <= f->hi)
                                v = v * 10 + (ch - '0');
                }
                if (v < 1 || v > f->hi)
                        return fail(err, err_len, "%s field: step %.*s is out of range 1-%d",
                                    f->name, (int)(n < TOKEN_SHOW ? n : TOKEN_SHOW), s + i, f->hi);
                step = (int)v;
                i += n;
        }
        if (i < len)
                return fail(err, err_len, "%s field: unexpected '%c' in '%.*s'", f->name, s[i],
                            show, s);
        *bits |= bits_range(a, b, step);
        return 0;
}

/*
 * Field @f from @s (@len characters, no blanks). Return: 0, *@ret_bits and *@ret_star
 * (the field starts with '*'); -EINVAL with a message.
 */
static int parse_field(const CronField *f, const char *s, size_t len, uint64_t *ret_bits,
                       bool *ret_star, char *err, size_t err_len)
{
        int show = (int)(len < TOKEN_SHOW ? len : TOKEN_SHOW);
        uint64_t bits = 0;
        size_t start = 0;

        if (s[0] == '*' && memchr(s, ',', len))
                return fail(err, err_len, "%s field: '*' must stand alone, not in a list ('%.*s')",
                            f->name, show, s);
        while (start <= len) {
                const char *comma = memchr(s + start, ',', len - start);
                size_t end = comma ? (size_t)(comma - s) : len;
                if (end == start)
                        return fail(err, err_len, "%s field: empty item in '%.*s'", f->name, show,
                                    s);
                if (s[start] == '*' && start > 0)
                        return fail(err, err_len,
                                    "%s field: '*' must stand alone, not in a list ('%.*s')",
                                    f->name, show, s);
                int r = parse_item(f, s + start, end - start, &bits, err, err_len);
                if (r < 0)
                        return r;
                start = end + 1;
        }
        *ret_bits = bits;
        *ret_star = s[0] == '*';
        return 0;
}

/* Five fields from @expr (no shortcut) into @c. Return: 0; -EINVAL with a message. */
static int parse_fields(CronExpr *c, const char *expr, char *err, size_t err_len)
{
        const char *word[F_COUNT];
        size_t word_len[F_COUNT];
        int n = 0;
        const char *p = expr;

        for (;;) {
                while (is_blank(*p))
                        p++;
                if (!*p)
                        break;
                const char *start = p;
                while (*p && !is_blank(*p))
                        p++;
                if (n < F_COUNT) {
                        word[n] = start;
                        word_len[n] = (size_t)(p - start);
                }
                n++;
        }
        if (n == 0)
                return fail(err, err_len, "empty expression");
        if (n != F_COUNT)
                return fail(err, err_len,
                            "expected 5 fields (minute hour day-of-month month day-of-week), "
                            "got %d",
                            n);

        uint64_t *bits[F_COUNT] = {&c->minutes, &c->hours, &c->days, &c->months, &c->weekdays};
        bool star[F_COUNT];
        for (int i = 0; i < F_COUNT; i++) {
                int r = parse_field(&cron_fields[i], word[i], word_len[i], bits[i], &star[i], err,
                                    err_len);
                if (r < 0)
                        return r;
        }
        if (c->weekdays & (UINT64_C(1) << 7))
                c->weekdays = (c->weekdays & ~(UINT64_C(1) << 7)) | 1;
        c->dom_star = star[F_DOM];
        c->dow_star = star[F_DOW];
        return 0;
}

/* The expression @expr: a shortcut or five fields. Return: 0; -EINVAL with a message. */
static int parse_expr(CronExpr *c, const char *expr, char *err, size_t err_len)
{
        const char *p = expr, *end;
        size_t len;

        if (!expr)
                return fail(err, err_len, "empty expression");
        while (is_blank(*p))
                p++;
        if (*p != '@')
                return parse_fields(c, p, err, err_len);
        for (end = p; *end && !is_blank(*end); end++)
                ;
        len = (size_t)(end - p);
        for (const char *q = end; *q; q++)
                if (!is_blank(*q))
                        return fail(err, err_len, "%.*s takes no fields after it",
                                    (int)(len < TOKEN_SHOW ? len : TOKEN_SHOW), p);
        for (size_t i = 0; i < sizeof(cron_shortcuts) / sizeof(cron_shortcuts[0]); i++)
                if (strlen(cron_shortcuts[i].name) == len &&
                    strncasecmp(p, cron_shortcuts[i].name, len) == 0)
                        return parse_fields(c, cron_shortcuts[i].fields, err, err_len);
        if (len == 7 && strncasecmp(p, "@reboot", len) == 0)
                return fail(err, err_len, "@reboot is not a schedule: it names no time");
        return fail(err, err_len,
                    "unknown shortcut '%.*s' (@yearly, @annually, @monthly, @weekly, @daily, "
                    "@midnight, @hourly)",
                    (int)(len < TOKEN_SHOW ? len : TOKEN_SHOW), p);
}

/* ---- the zone */

/*
 * Whether @tz names a TZif file under CRON_ZONEINFO_DIR, its name checked first (cron.h).
 * Return: 0 and @c->tz set; -EINVAL with a message.
 */
static int parse_zone(CronExpr *c, const char *tz, char *err, size_t err_len)
{
        char path[sizeof(CRON_ZONEINFO_DIR) + CRON_TZ_MAX + 1], magic[4];
        size_t len;
        struct stat st;
        int fd;
        ssize_t n;

        if (!tz || !*tz || strcmp(tz, "UTC") == 0) {
                c->utc = true;
                strcpy(c->tz, "UTC");
                return 0;
        }
        len = strlen(tz);
        if (len >= CRON_TZ_MAX)
                return fail(err, err_len, "time zone: a name of %zu characters is too long", len);
        if (tz[0] == '/' || strstr(tz, "..") ||
            strspn(tz, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                       "abcdefghijklmnopqrstuvwxyz"
                       "0123456789/_+-") != len)
                return fail(err, err_len,
                            "time zone '%.*s': not a zone name (letters, digits, '/', '_', '+', "
                            "'-'; no '..' and no leading '/')",
                            TOKEN_SHOW, tz);
        /* right/: time_t counts leap seconds there; the offsets would be off by them */
        if (strncmp(tz, "right/", 6) == 0)
                return fail(err, err_len, "time zone '%s': leap-second zones are not supported",
                            tz);
        snprintf(path, sizeof(path), "%s/%s", CRON_ZONEINFO_DIR, tz);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        if (fd < 0)
                return fail(err, err_len, "time zone '%s': no such zone in %s", tz,
                            CRON_ZONEINFO_DIR);
        n = -1;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
                n = read(fd, magic, sizeof(magic));
        close(fd);
        if (n != (ssize_t)sizeof(magic) || memcmp(magic, "TZif", 4) != 0)
                return fail(err, err_len, "time zone '%s': %s/%s is not a zone file", tz,
                            CRON_ZONEINFO_DIR, tz);
        memcpy(c->tz, tz, len + 1);
        return 0;
}

int cron_parse(const char *expr, const char *tz, CronExpr **ret, char *err, size_t err_len)
{
        CronExpr *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        r = parse_expr(c, expr, err, err_len);
        if (r >= 0)
                r = parse_zone(c, tz, err, err_len);
        if (r < 0) {
                free(c);
                return r;
        }
        *ret = c;
        return 0;
}

CronExpr *cron_free(CronExpr *c)
{
        free(c);
        return NULL;
}

const char *cron_tz(const CronExpr *c)
{
        return c->tz;
}

/* ---- the canonical text */

/* Buf - an output buffer that remembers it overflowed. */
typedef struct Buf {
        char *p;
        size_t size, len; /* @len: what would have been written */
} Buf;

__attribute__((format(printf, 2, 3))) static void buf_add(Buf *b, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(b->len < b->size ? b->p + b->len : NULL,
                      b->len < b->size ? b->size - b->len : 0, fmt, ap);
        va_end(ap);
        if (n > 0)
                b->len += (size_t)n;
}

/* Field @bits over lo..hi; @star_ok: `*` and `*`/n may stand for it. */
static void format_field(Buf *b, uint64_t bits, int lo, int hi, int step_max, bool star,
                         bool star_ok)
{
        int count = __builtin_popcountll(bits);
        bool first = true;

        if (star_ok && bits == bits_range(lo, hi, 1)) {
                buf_add(b, "*");
                return;
        }
        if (star_ok && (bits & (UINT64_C(1) << lo)) && (count >= 3 || star)) {
                uint64_t above = bits & ~(UINT64_C(1) << lo);
                int step = above ? __builtin_ctzll(above) - lo : step_max;
                if (bits == bits_range(lo, hi, step)) {
                        buf_add(b, "*/%d", step);
                        return;
                }
        }
        for (int v = lo; v <= hi; v++) {
                int end = v;
                if (!(bits & (UINT64_C(1) << v)))
                        continue;
                while (end < hi && (bits & (UINT64_C(1) << (end + 1))))
                        end++;
                if (end - v >= 2) {
                        buf_add(b, "%s%d-%d", first ? "" : ",", v, end);
                        v = end;
                } else {
                        buf_add(b, "%s%d", first ? "" : ",", v);
                }
                first = false;
        }
}

int cron_format(const CronExpr *c, char *buf, size_t size)
{
        Buf b = {buf, size, 0};

        format_field(&b, c->minutes, 0, 59, 59, false, true);
        buf_add(&b, " ");
        format_field(&b, c->hours, 0, 23, 23, false, true);
        buf_add(&b, " ");
        format_field(&b, c->days, 1, 31, 31, c->dom_star, c->dom_star);
        buf_add(&b, " ");
        format_field(&b, c->months, 1, 12, 12, false, true);
        buf_add(&b, " ");
        format_field(&b, c->weekdays, 0, 6, 7, c->dow_star, c->dow_star);
        if (b.len >= size)
                return -ENOBUFS;
        return (int)b.len;
}

/* ---- calendar arithmetic (Howard Hinnant, "chrono-Compatible Low-Level Date Algorithms") */

/* Civil - a wall-clock minute; fields may run one past their end between search steps. */
typedef struct Civil {
        int year, mon, mday, hour, min; /* mon 1-12, mday 1-31 */
} Civil;

static int64_t days_from_civil(int64_t y, int m, int d)
{
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

        return era * 146097 + doe - 719468;
}

/* The civil minute of @s seconds since the epoch (@s >= 0), its seconds dropped. */
static void civil_from_seconds(int64_t s, Civil *ret)
{
        int64_t z = s / SEC_PER_DAY + 719468, secs = s % SEC_PER_DAY;
        int64_t era = (z >= 0 ? z : z - 146096) / 146097;
        int64_t doe = z - era * 146097;
        int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        int64_t mp = (5 * doy + 2) / 153;
        int m = (int)(mp < 10 ? mp + 3 : mp - 9);

        ret->year = (int)(yoe + era * 400 + (m <= 2));
        ret->mon = m;
        ret->mday = (int)(doy - (153 * mp + 2) / 5 + 1);
        ret->hour = (int)(secs / SEC_PER_HOUR);
        ret->min = (int)(secs % SEC_PER_HOUR / SEC_PER_MIN);
}

/* @w read as if it were UTC, in seconds since the epoch. */
static int64_t civil_seconds(const Civil *w)
{
        return days_from_civil(w->year, w->mon, w->mday) * SEC_PER_DAY + w->hour * SEC_PER_HOUR +
               w->min * SEC_PER_MIN;
}

/* A number that orders civil minutes as time does. */
static int64_t civil_key(const Civil *w)
{
        return ((((int64_t)w->year * 13 + w->mon) * 32 + w->mday) * 24 + w->hour) * 60 + w->min;
}

static bool leap_year(int y)
{
        return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int days_in_month(int y, int m)
{
        static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};

        return m == 2 && leap_year(y) ? 29 : days[m - 1];
}

/* Day of the week of @w's date, Sunday 0 (1970-01-01 was a Thursday). */
static int weekday(const Civil *w)
{
        int64_t wd = (days_from_civil(w->year, w->mon, w->mday) + 4) % 7;

        return (int)(wd < 0 ? wd + 7 : wd);
}

/* Vixie cron's day rule (cron.h). */
static bool day_matches(const CronExpr *c, const Civil *w)
{
        bool dom = c->days & (UINT64_C(1) << w->mday);
        bool dow = c->weekdays & (UINT64_C(1) << weekday(w));

        if (c->dom_star || c->dow_star)
                return dom && dow;
        return dom || dow;
}

/* The first set bit of @bits at or above @from, or -1. */
static int next_bit(uint64_t bits, int from)
{
        bits = from < 64 ? bits >> from : 0;
        return bits ? from + __builtin_ctzll(bits) : -1;
}

/*
 * Move @w (perhaps one past a field's end) to the first wall minute at or after it that
 * @c matches. Return: true; false once past @limit_key (a civil_key()).
 */
static bool civil_next(const CronExpr *c, Civil *w, int64_t limit_key)
{
        for (;;) {
                int v;

                if (w->min > 59) {
                        w->min = 0;
                        w->hour++;
                }
                if (w->hour > 23) {
                        w->hour = 0;
                        w->mday++;
                }
                if (w->mday > days_in_month(w->year, w->mon)) {
                        w->mday = 1;
                        w->mon++;
                }
                if (w->mon > 12) {
                        w->mon = 1;
                        w->year++;
                }
                if (civil_key(w) > limit_key)
                        return false;
                v = next_bit(c->months, w->mon);
                if (v != w->mon) {
                        if (v < 0) {
                                w->year++;
                                v = next_bit(c->months, 1);
                        }
                        *w = (Civil){w->year, v, 1, 0, 0};
                        continue;
                }
                if (!day_matches(c, w)) {
                        *w = (Civil){w->year, w->mon, w->mday + 1, 0, 0};
                        continue;
                }
                v = next_bit(c->hours, w->hour);
                if (v != w->hour) {
                        w->hour = v < 0 ? 24 : v;
                        w->min = 0;
                        continue;
                }
                v = next_bit(c->minutes, w->min);
                if (v != w->min) {
                        w->min = v < 0 ? 60 : v;
                        continue;
                }
                return true;
        }
}

/* ---- wall time and instants */

/* The zone's UTC offset at @t in seconds (east positive). Return: 0; -ERANGE. */
static int zone_offset(const CronExpr *c, int64_t t, int64_t *ret)
{
        time_t tt = (time_t)t;
        struct tm tm;

        if (c->utc) {
                *ret = 0;
                return 0;
        }
        if (!localtime_r(&tt, &tm))
                return -ERANGE;
        *ret = tm.tm_gmtoff;
        return 0;
}

/* Whether @t is an instant whose offset is @off. Return: 1, 0; -ERANGE. */
static int zone_has_offset(const CronExpr *c, int64_t t, int64_t off)
{
        int64_t o;
        int r = zone_offset(c, t, &o);

        return r < 0 ? r : o == off;
}

/* The instant the matching wall time @w ticks at (the top of this file). Return: 0; -ERANGE. */
static int fire(const CronExpr *c, const Civil *w, int64_t *ret)
{
        int64_t g = civil_seconds(w), before, after, ta, tb, lo, hi;
        int va, vb, r;

        if (c->utc) {
                *ret = g;
                return 0;
        }
        r = zone_offset(c, g - SEC_PER_DAY, &before);
        if (r >= 0)
                r = zone_offset(c, g + SEC_PER_DAY, &after);
        if (r < 0)
                return r;
        ta = g - before;
        tb = g - after;
        va = zone_has_offset(c, ta, before);
        vb = zone_has_offset(c, tb, after);
        if (va < 0 || vb < 0)
                return -ERANGE;
        if (va && vb) {
                *ret = ta < tb ? ta : tb; /* repeated: the first occurrence */
                return 0;
        }
        if (va || vb) {
                *ret = va ? ta : tb;
                return 0;
        }
        if (before >= after) {
                /* not a gap by these two offsets (two transitions within two days): the
                 * earlier candidate, as close as this zone allows */
                *ret = ta < tb ? ta : tb;
                return 0;
        }
        /* a gap: the offset is @before at tb and @after at ta; the transition lies in
         * (tb, ta], and the first second with the new offset is where the gap ends */
        lo = tb;
        hi = ta;
        while (hi - lo > 1) {
                int64_t mid = lo + (hi - lo) / 2;
                r = zone_has_offset(c, mid, before);
                if (r < 0)
                        return r;
                if (r)
                        lo = mid;
                else
                        hi = mid;
        }
        *ret = hi;
        return 0;
}

/* cron_next() once the zone is set (the TZ lock held for a zone). */
static int search(const CronExpr *c, int64_t after_s, int64_t *ret_s)
{
        Civil w, limit;
        int64_t off, t, limit_key;
        int r;

        r = zone_offset(c, after_s, &off);
        if (r < 0)
                return r;
        civil_from_seconds(after_s + off, &w);
        limit = w;
        limit.year += CRON_HORIZON_YEARS;
        limit_key = civil_key(&limit);
        /* a wall minute up to the one of @after_s ticks at or before it (fire() grows) */
        w.min++;
        for (;;) {
                if (!civil_next(c, &w, limit_key))
                        return -ERANGE;
                r = fire(c, &w, &t);
                if (r < 0)
                        return r;
                if (t > after_s) {
                        *ret_s = t;
                        return 0;
                }
                /* a repeated wall minute whose first occurrence is past */
                w.min++;
        }
}

/* Serializes the TZ switches of zoned cron_next() calls (cron.h). */
static pthread_mutex_t cron_tz_lock = PTHREAD_MUTEX_INITIALIZER;

int cron_next(const CronExpr *c, int64_t after_s, int64_t *ret_s)
{
        char zone[sizeof(CRON_ZONEINFO_DIR) + CRON_TZ_MAX + 2];
        const char *old;
        char *saved = NULL;
        int64_t t;
        int r;

        if (after_s < 0 || after_s > CRON_MAX_S)
                return -ERANGE;
        if (c->utc)
                return search(c, after_s, ret_s);

        /* glibc reads the path after ':' as the zone file: the very file cron_parse() checked,
         * whatever TZDIR says */
        snprintf(zone, sizeof(zone), ":%s/%s", CRON_ZONEINFO_DIR, c->tz);
        pthread_mutex_lock(&cron_tz_lock);
        old = getenv("TZ");
        if (old && !(saved = strdup(old))) {
                r = -ENOMEM;
                goto out_unlock;
        }
        if (setenv("TZ", zone, 1) < 0) {
                r = -ENOMEM;
                goto out_free_saved;
        }
        tzset();
        r = search(c, after_s, &t);
        if (saved)
                (void)setenv("TZ", saved, 1);
        else
                (void)unsetenv("TZ");
        tzset();
out_free_saved:
        free(saved);
out_unlock:
        pthread_mutex_unlock(&cron_tz_lock);
        if (r < 0)
                return r;
        *ret_s = t;
        return 0;
}
