/* SPDX-License-Identifier: MIT */
/*
 * schedule.c — the table of periodic schedules and the arithmetic of their ticks
 * (schedule.h).
 *
 * The table is a list kept in (name, owner) order, which is the order schedule.list
 * answers in; a daemon holds a handful of schedules per user (SCHEDULE_MAX_PER_OWNER
 * at most), and each look-up walks it, as a tick does to find the earliest one. A
 * heap would pay off with tens of thousands of schedules; nothing here asks for that.
 *
 * The latest tick at or before a time. An interval's is arithmetic. cron.h answers only
 * "the first tick after", so for a cron expression the latest tick L at or before now is
 * found by bisection: f(x) = cron_next(x) is monotonic, and L is the least second x at
 * or after next_ms with f(x) > now (for every x below L, f(x) <= L <= now; for L and
 * every x above it, f(x) is a tick after L, so after now). Some forty cron_next() calls
 * for a year of missed minutes, instead of one per minute missed.
 */
#include "daemon/cron/schedule.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MS_PER_S 1000

bool schedule_name_valid(const char *name, size_t len)
{
        static const char ok[] =
                "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-";

        if (len < 1 || len > IPC_SCHEDULE_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++)
                if (!name[i] || !strchr(ok, name[i]))
                        return false;
        return true;
}

const char *schedule_missed_name(ScheduleMissed m)
{
        return m == SCHEDULE_MISSED_RUN_ONCE ? IPC_MISSED_RUN_ONCE : IPC_MISSED_SKIP;
}

int schedule_missed_parse(const char *s, size_t len, ScheduleMissed *ret)
{
        if (len == strlen(IPC_MISSED_SKIP) && memcmp(s, IPC_MISSED_SKIP, len) == 0)
                *ret = SCHEDULE_MISSED_SKIP;
        else if (len == strlen(IPC_MISSED_RUN_ONCE) && memcmp(s, IPC_MISSED_RUN_ONCE, len) == 0)
                *ret = SCHEDULE_MISSED_RUN_ONCE;
        else
                return -EINVAL;
        return 0;
}

int schedule_new(const char *name, uid_t owner, Schedule **ret)
{
        size_t len = strlen(name);
        Schedule *s;

        if (len > IPC_SCHEDULE_NAME_MAX)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        memcpy(s->name, name, len + 1);
        s->owner = owner;
        list_init(&s->link);
        *ret = s;
        return 0;
}

Schedule *schedule_free(Schedule *s)
{
        if (!s)
                return NULL;
        cron_free(s->cron);
        free(s->cron_text);
        free(s->tz);
        free(s->groups);
        free(s->plugin);
        free(s->args);
        free(s->options);
        free(s->broken);
        free(s);
        return NULL;
}

int schedule_set_copy(char **dst, size_t *ret_len, const void *src, size_t len)
{
        char *p = malloc(len + 1);

        if (!p)
                return -ENOMEM;
        if (len)
                memcpy(p, src, len);
        p[len] = '\0';
        free(*dst);
        *dst = p;
        if (ret_len)
                *ret_len = len;
        return 0;
}

int schedule_set_cron(Schedule *s, const char *expr, const char *tz, char *err, size_t err_len)
{
        char text[CRON_FORMAT_MAX];
        char *t = NULL, *z = NULL;
        CronExpr *c;
        int r = cron_parse(expr, tz, &c, err, err_len);

        if (r < 0)
                return r;
        r = cron_format(c, text, sizeof(text));
        if (r < 0 || !(t = strdup(text)) || !(z = strdup(cron_tz(c)))) {
                free(t);
                cron_free(c);
                return r < 0 ? r : -ENOMEM;
        }
        cron_free(s->cron);
        free(s->cron_text);
        free(s->tz);
        free(s->broken);
        s->cron = c;
        s->cron_text = t;
        s->tz = z;
        s->broken = NULL;
        s->every_ms = 0;
        return 0;
}

/* cron_next() in ms: the first tick of @c strictly after @after_ms. */
static int cron_after_ms(const CronExpr *c, uint64_t after_ms, uint64_t *ret_ms)
{
        int64_t t;
        int r = cron_next(c, (int64_t)(after_ms / MS_PER_S), &t);

        if (r < 0)
                return r;
        *ret_ms = (uint64_t)t * MS_PER_S;
        return 0;
}

int schedule_tick_after(const Schedule *s, uint64_t after_ms, uint64_t *ret_ms)
{
        uint64_t phase = s->next_ms;

        if (s->broken || (!s->cron && !s->every_ms))
                return -EINVAL;
        if (s->cron)
                return cron_after_ms(s->cron, after_ms, ret_ms);
        if (!phase)
                *ret_ms = after_ms + s->every_ms;
        else if (phase > after_ms)
                *ret_ms = phase;
        else
                *ret_ms = phase + ((after_ms - phase) / s->every_ms + 1) * s->every_ms;
        return 0;
}

/* The latest tick of cron @c at or before @now_ms, knowing @first_ms is a tick at or
 * before it (the bisection at the top of this file). */
static int cron_latest(const CronExpr *c, uint64_t first_ms, uint64_t now_ms, uint64_t *ret_ms)
{
        int64_t lo = (int64_t)(first_ms / MS_PER_S), hi = (int64_t)(now_ms / MS_PER_S);
        int64_t now_s = hi;

        /* invariant: the answer is in [lo, hi], and f(hi) > now (f(x) > x >= now) */
        while (lo < hi) {
                int64_t mid = lo + (hi - lo) / 2, t;
                int r = cron_next(c, mid, &t);
                if (r < 0 && r != -ERANGE)
                        return r;
                if (r == -ERANGE || t > now_s)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        *ret_ms = (uint64_t)lo * MS_PER_S;
        return 0;
}

int schedule_advance(Schedule *s, uint64_t now_ms, uint64_t *ret_tick_ms)
{
        uint64_t latest, next;
        int r;

        if (s->paused || s->broken || !s->next_ms || s->next_ms > now_ms)
                return 0;
        if (s->cron) {
                r = cron_latest(s->cron, s->next_ms, now_ms, &latest);
                if (r < 0)
                        return r;
                r = cron_after_ms(s->cron, latest, &next);
                if (r < 0 && r != -ERANGE)
                        return r;
                s->next_ms = r < 0 ? 0 : next; /* -ERANGE: it will not tick again */
        } else if (s->every_ms) {
                latest = s->next_ms + (now_ms - s->next_ms) / s->every_ms * s->every_ms;
                s->next_ms = latest + s->every_ms;
        } else {
                return -EINVAL;
        }
        *ret_tick_ms = latest;
        return 1;
}

int schedule_start(Schedule *s, uint64_t now_ms)
{
        uint64_t next;
        int r;

        s->next_ms = 0; /* an interval takes its phase from now */
        r = schedule_tick_after(s, now_ms, &next);
        if (r < 0)
                return r;
        s->next_ms = next;
        s->paused = false;
        return 0;
}

int schedule_restore(Schedule *s, uint64_t now_ms)
{
        uint64_t tick;
        int r;

        s->catchup_ms = 0;
        if (s->paused || s->broken)
                return 0;
        if (!s->next_ms) /* no tick was ahead when it was written: perhaps there is now */
                return schedule_start(s, now_ms) == 0 ? 0 : -ERANGE;
        r = schedule_advance(s, now_ms, &tick);
        if (r == 1 && s->missed == SCHEDULE_MISSED_RUN_ONCE)
                s->catchup_ms = tick;
        return r;
}

void schedule_table_init(ScheduleTable *t)
{
        pthread_mutex_init(&t->lock, NULL);
        list_init(&t->all);
        t->count = 0;
        t->next_serial = 1;
        fiber_event_init(&t->wake);
        t->running = t->stopping = false;
        fiber_event_init(&t->stopped);
        t->fleet_version = UINT64_MAX;
        t->changes = 0;
        t->fleet_stale = false;
}

/* (name, owner) order: negative when @s comes before (@name, @owner). */
static int schedule_cmp(const Schedule *s, const char *name, size_t len, uid_t owner)
{
        size_t n = strlen(s->name);
        int c = memcmp(s->name, name, n < len ? n : len);

        if (c)
                return c;
        if (n != len)
                return n < len ? -1 : 1;
        return s->owner == owner ? 0 : s->owner < owner ? -1 : 1;
}

Schedule *schedule_find_locked(ScheduleTable *t, uid_t owner, const char *name, size_t len)
{
        for (Schedule *s = schedule_first_locked(t); s; s = schedule_after_locked(t, s)) {
                int c = schedule_cmp(s, name, len, owner);
                if (c == 0)
                        return s;
                if (c > 0)
                        break;
        }
        return NULL;
}

Schedule *schedule_find_serial_locked(ScheduleTable *t, uint64_t serial)
{
        for (Schedule *s = schedule_first_locked(t); s; s = schedule_after_locked(t, s))
                if (s->serial == serial)
                        return s;
        return NULL;
}

int schedule_insert_locked(ScheduleTable *t, Schedule *s)
{
        size_t len = strlen(s->name), mine = 0;
        ListHead *before = &t->all;

        for (Schedule *o = schedule_first_locked(t); o; o = schedule_after_locked(t, o)) {
                int c = schedule_cmp(o, s->name, len, s->owner);
                if (c == 0)
                        return -EEXIST;
                if (c > 0 && before == &t->all)
                        before = &o->link;
                mine += o->owner == s->owner;
        }
        if (mine >= SCHEDULE_MAX_PER_OWNER)
                return -EDQUOT;
        list_add_tail(before, &s->link); /* just before @before: the order holds */
        s->serial = t->next_serial++;
        t->count++;
        fiber_event_set(&t->wake);
        return 0;
}

void schedule_remove_locked(ScheduleTable *t, Schedule *s)
{
        list_del(&s->link);
        list_init(&s->link);
        t->count--;
}

Schedule *schedule_next_locked(ScheduleTable *t, uint64_t now_ms, uint64_t *ret_wake_ms)
{
        Schedule *due = NULL;
        uint64_t wake = UINT64_MAX;

        for (Schedule *s = schedule_first_locked(t); s; s = schedule_after_locked(t, s)) {
                if (s->catchup_ms && !s->paused)
                        return s;
                if (s->paused || s->broken || !s->next_ms)
                        continue;
                if (s->next_ms <= now_ms) {
                        if (!due || s->next_ms < due->next_ms)
                                due = s;
                } else if (s->next_ms < wake) {
                        wake = s->next_ms;
                }
        }
        *ret_wake_ms = wake;
        return due;
}

size_t schedule_count(ScheduleTable *t)
{
        size_t n;

        pthread_mutex_lock(&t->lock);
        n = t->count;
        pthread_mutex_unlock(&t->lock);
        return n;
}
