/* SPDX-License-Identifier: MIT */
/*
 * schedfleet.c — periodic schedules in a fleet (schedfleet.h): this host's table kept in
 * step with the fleet's rows.
 *
 * Who does what. Any host's methods change a schedule: its own table at once, and the
 * fleet's row through the job store (schedules.c; an add the fleet refuses because
 * another host has the name is taken out again). Every host fires every tick of every
 * schedule it holds, as the schedule's owner with the key "schedule:<name>:<tick ms>";
 * the key is the fleet's (SET NX in Redis), so one submission makes the job and the
 * others answer its id. The host whose submission made it writes the tick down (where
 * the ticks stand, store-redis-periodic.c), so `last_ms` and `last_job` are written once
 * per tick. No host is special: a host that dies between ticks leaves the others firing,
 * with nothing to hand over.
 *
 * How a change reaches the other hosts. A method's write moves the version of the
 * fleet's schedules; each host's schedules fiber asks for it every SCHEDFLEET_CHECK_MS
 * (one GET in a script: a small, constant load on Redis), and when it moved reads every
 * row and merges them here. A tick does not move it: the hosts fire the same ticks
 * (an interval's phase is in the row; a cron's ticks are the wall clock's), so they do
 * not need each other's ticks, only each other's changes.
 *
 * The merge. A row whose schedule this host holds (same owner, name and created_ms)
 * gives it its paused flag; a resume through another host gives it its next tick (the
 * phase starts again there); otherwise this host's next tick moves on only (to a later
 * one the fleet fired), and a later last tick of the fleet's is taken. A row of a name
 * this host does not hold, or holds as an older schedule (removed and added again
 * elsewhere), joins the table; a schedule without a row leaves it. A change of this host
 * crossing a read would look undone by it (the read may predate the write), so each
 * change moves ScheduleTable.changes before its write and once it is committed, and a
 * read made meanwhile is dropped, to be made again at the next look.
 */
#include "daemon/server/schedfleet.h"
#include "daemon/obs/log.h"
#include "daemon/server/schedrow.h"

#include <errno.h>
#include <string.h>

/* store_schedules_changed()'s callback: one row of the fleet's, as a schedule in no
 * table, onto the list @arg (Schedule.link). */
static int collect(const StoreSchedule *sc, void *arg)
{
        ListHead *rows = arg;
        Schedule *s;
        int r = schedrow_read(sc, &s);

        if (r == 0 && s)
                list_add_tail(rows, &s->link);
        return r;
}

static void free_all(ListHead *h)
{
        ListHead *e;

        while ((e = list_pop_head(h)))
                schedule_free(list_entry(e, Schedule, link));
}

/* Does @s tick at the times an interval with the next tick @next_ms does? A cron's
 * ticks are the wall clock's: always. */
static bool same_phase(const Schedule *s, uint64_t next_ms)
{
        return !s->every_ms || s->next_ms % s->every_ms == next_ms % s->every_ms;
}

/* @l, this host's copy, takes what @f, the fleet's row of it, says. Context: the lock. */
static void merge_locked(ScheduleTable *t, Schedule *l, const Schedule *f)
{
        bool was_paused = l->paused;

        l->paused = f->paused;
        if (f->paused) {
                l->next_ms = 0;
                l->catchup_ms = 0;
        } else if (f->next_ms && (was_paused || !l->next_ms || !same_phase(l, f->next_ms))) {
                l->next_ms = f->next_ms; /* resumed elsewhere: its phase starts there */
                l->failing = false;
                fiber_event_set(&t->wake);
        } else if (f->next_ms > l->next_ms) {
                l->next_ms = f->next_ms; /* the fleet fired a tick this host has not */
        }
        if (f->last_ms > l->last_ms) {
                l->last_ms = f->last_ms;
                l->last_job = f->last_job;
        }
}

/* The table takes the fleet's @rows (emptied; what is not kept goes to @spent), and
 * what no row names goes to @spent too. Context: the lock held. */
static void merge_all_locked(ScheduleTable *t, ListHead *rows, ListHead *spent)
{
        Schedule *s, *next;
        ListHead *e;

        for (s = schedule_first_locked(t); s; s = schedule_after_locked(t, s))
                s->seen = false;
        while ((e = list_pop_head(rows))) {
                Schedule *f = list_entry(e, Schedule, link), *l;
                int r;

                list_init(&f->link);
                l = schedule_find_locked(t, f->owner, f->name, strlen(f->name));
                if (l && l->created_ms == f->created_ms) {
                        merge_locked(t, l, f);
                        l->seen = true;
                        list_add_tail(spent, &f->link);
                        continue;
                }
                if (l) { /* removed and added again through another host: another one */
                        schedule_remove_locked(t, l);
                        list_add_tail(spent, &l->link);
                }
                r = schedule_insert_locked(t, f);
                if (r < 0) { /* -EDQUOT: the fleet holds more of one owner than one host */
                        log_msg(LOG_WARNING,
                                "schedule %s of uid %u, added through another host of the "
                                "fleet, is left out here: %s",
                                f->name, (unsigned)f->owner, strerror(-r));
                        list_add_tail(spent, &f->link);
                        continue;
                }
                f->seen = true;
                log_msg(LOG_INFO, "schedule %s of uid %u: added through another host of the fleet",
                        f->name, (unsigned)f->owner);
        }
        for (s = schedule_first_locked(t); s; s = next) {
                next = schedule_after_locked(t, s);
                if (s->seen)
                        continue;
                log_msg(LOG_INFO,
                        "schedule %s of uid %u: removed through another host of the fleet", s->name,
                        (unsigned)s->owner);
                schedule_remove_locked(t, s);
                list_add_tail(spent, &s->link);
        }
}

int schedfleet_reload(Daemon *d)
{
        ScheduleTable *t = &d->schedules;
        ListHead rows, spent;
        uint64_t version, changes;
        bool dropped;
        int r;

        if (!store_fleet(d->store))
                return 0;
        list_init(&rows);
        list_init(&spent);
        pthread_mutex_lock(&t->lock);
        version = t->fleet_stale ? UINT64_MAX : t->fleet_version;
        t->fleet_stale = false;
        changes = t->changes;
        pthread_mutex_unlock(&t->lock);

        r = store_schedules_changed(d->store, &version, collect, &rows);
        if (r <= 0) {
                free_all(&rows);
                if (r < 0) {
                        pthread_mutex_lock(&t->lock);
                        t->fleet_stale = true; /* read again at the next look */
                        pthread_mutex_unlock(&t->lock);
                }
                return r;
        }
        pthread_mutex_lock(&t->lock);
        dropped = t->changes != changes;
        if (dropped) {
                t->fleet_stale = true; /* it may predate this host's change: again */
        } else {
                merge_all_locked(t, &rows, &spent);
                t->fleet_version = version;
        }
        pthread_mutex_unlock(&t->lock);
        free_all(&rows);
        free_all(&spent);
        return dropped ? 0 : 1;
}
