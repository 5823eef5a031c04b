/* SPDX-License-Identifier: MIT */
/*
 * schedule.h — periodic schedules (PROTOCOL.md, "schedule.add"): the table of them,
 * keyed by (owner, name), and the arithmetic of their ticks.
 *
 * A schedule submits one job at each tick of a cron expression (cron.h) or of an
 * interval (every_ms), as the user who added it. This file knows nothing of jobs, the
 * store or fibers but the FiberEvent that wakes whoever fires the ticks: the firing
 * (schedrun.c) and the methods (schedules.c) live in daemon/server/, which call in here.
 *
 * Ticks. A schedule's `next_ms` is the earliest tick not yet fired (0: none: paused,
 * or a cron expression with no tick within CRON_HORIZON_YEARS). An interval's ticks
 * are next_ms + k * every_ms, so the first tick (every_ms after the add, or after a
 * resume) fixes their phase and a slow tick does not make the next one drift; a cron
 * expression's are cron_next()'s. schedule_advance() moves next_ms past a time and
 * says which tick passed last: when several passed at once (fiberd was busy, the
 * machine slept, the wall clock stepped, or fiberd was down) they collapse into that
 * one, the latest. Whether it is fired is the caller's choice: a tick that comes due
 * while fiberd runs always is; one that passed while fiberd was down only with the
 * `run_once` policy (schedule_restore()).
 *
 * Context: the table's lock (ScheduleTable.lock, a plain mutex held for short
 * sections that never yield) guards every Schedule field; functions named *_locked
 * expect it held. The tick arithmetic is pure but for cron_next()'s zone lock.
 */
#ifndef FIBERD_DAEMON_SCHEDULE_H
#define FIBERD_DAEMON_SCHEDULE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/cron/cron.h"
#include "ipc/protocol.h"
#include "scheduler/base/list.h"
#include "scheduler/sched.h"

/* Schedules one owner may have: a client cannot grow the table without bound. */
#define SCHEDULE_MAX_PER_OWNER 1000
/* The packed args and options of one schedule together, bytes (they are kept, listed
 * and stored with every tick's row). */
#define SCHEDULE_PACKED_MAX (64 * 1024)
/* The supplementary groups kept of the owner (the rest are dropped). */
#define SCHEDULE_GROUPS_MAX 64

typedef enum ScheduleMissed {
        SCHEDULE_MISSED_SKIP,     /* a tick that passed while fiberd was down is dropped */
        SCHEDULE_MISSED_RUN_ONCE, /* ... submits one job at the next start */
} ScheduleMissed;

/* Schedule - one periodic schedule. Owned by its table once inserted. */
typedef struct Schedule {
        ListHead link;   /* ScheduleTable.all, by (name, owner) */
        uint64_t serial; /* unique in this process: a schedule removed and added again
                          * under its name is another one (schedrun.c checks it) */
        uid_t owner;
        gid_t gid;     /* the owner's primary group when it added the schedule */
        gid_t *groups; /* ... and supplementary groups; owned */
        size_t n_groups;
        char name[IPC_SCHEDULE_NAME_MAX + 1];
        CronExpr *cron;    /* owned; NULL for an interval (or a cron that no longer parses) */
        char *cron_text;   /* owned: cron_format()'s spelling; NULL for an interval */
        char *tz;          /* owned: the cron's zone ("UTC"); NULL for an interval */
        uint64_t every_ms; /* the interval; 0 for a cron expression */
        ScheduleMissed missed;
        char *plugin; /* owned */
        char *args;   /* owned: a packed msgpack map */
        size_t args_len;
        char *options; /* owned: a packed msgpack map (job.submit's options) */
        size_t options_len;
        bool paused;
        uint64_t next_ms;    /* the next tick, ms since the epoch (UTC); 0 = none */
        uint64_t last_ms;    /* the last tick a job was submitted for; 0 = never */
        uint64_t last_job;   /* that job's id; 0 = none */
        uint64_t created_ms; /* when it was added */
        uint64_t catchup_ms; /* a tick missed while fiberd was down, to fire now (run_once);
                              * 0 = none */
        bool failing;        /* its last tick's submission failed (logged once) */
        char *broken;        /* owned: why it cannot tick (its zone is gone); NULL = fine */
        bool seen;           /* a fleet's: its row was in the read being merged (schedfleet.c) */
} Schedule;

typedef struct ScheduleTable {
        pthread_mutex_t lock;
        ListHead all; /* Schedule.link, by (name, owner) */
        size_t count;
        uint64_t next_serial;
        FiberEvent wake; /* set when the earliest tick may have moved earlier */
        /* the firing fiber's life (schedrun.c) */
        bool running;       /* it was started */
        bool stopping;      /* atomic: it is asked to return */
        FiberEvent stopped; /* set once it returned */
        /* a fleet's, whose hosts all change the schedules (daemon/server/schedfleet.c) */
        uint64_t fleet_version; /* the version of the fleet's schedules last merged;
                                 * UINT64_MAX = none yet */
        uint64_t changes;       /* moved by each change of this host, before its write is
                                 * queued and once it is committed (schedule_changed_locked()):
                                 * a read of the fleet's made meanwhile is dropped */
        bool fleet_stale;       /* read the fleet's at the next look, whatever its version */
} ScheduleTable;

/* schedule_name_valid - is @name (@len bytes) a schedule name, [A-Za-z0-9_.-]{1,64}?
 * Context: any; pure. */
bool schedule_name_valid(const char *name, size_t len);

/* schedule_missed_name - "skip", "run_once" (static). Context: any; pure. */
const char *schedule_missed_name(ScheduleMissed m);

/* schedule_missed_parse - the policy named @s (@len bytes); -EINVAL when none is.
 * Context: any; pure. */
int schedule_missed_parse(const char *s, size_t len, ScheduleMissed *ret);

/*
 * schedule_new - an empty schedule named @name (checked by the caller) of @owner, with
 * no spec, plugin or args yet. @ret: out, written only on success.
 * Return: 0; -ENOMEM. Context: any.
 */
int schedule_new(const char *name, uid_t owner, Schedule **ret);

/* schedule_free - free @s and everything it owns (NULL is fine); @s must be in no table.
 * Return: NULL. Context: any. */
Schedule *schedule_free(Schedule *s);

/*
 * schedule_set_cron - make @s tick at @expr in zone @tz (NULL or "": UTC).
 * @err, @err_len: cron_parse()'s message on -EINVAL.
 * Return: 0; -EINVAL; -ENOMEM. Context: not yet in a table, or its lock held.
 */
int schedule_set_cron(Schedule *s, const char *expr, const char *tz, char *err, size_t err_len);

/*
 * schedule_set_copy - copy @len bytes of @src into *@dst (freeing what it held), NUL
 * terminated. Return: 0; -ENOMEM (nothing changed). Context: as schedule_set_cron().
 */
int schedule_set_copy(char **dst, size_t *ret_len, const void *src, size_t len);

/*
 * schedule_tick_after - the first tick of @s strictly after @after_ms, ms since the
 * epoch; an interval counts its ticks from next_ms (its phase), or from @after_ms when
 * it has none. @ret_ms: out, written only on success.
 * Return: 0; -ERANGE: no tick within cron's horizon; -EINVAL: @s cannot tick (broken);
 * -ENOMEM. Context: no lock needed but the one that keeps @s still.
 */
int schedule_tick_after(const Schedule *s, uint64_t after_ms, uint64_t *ret_ms);

/*
 * schedule_advance - the ticks of @s at or before @now_ms: *@ret_tick_ms the latest of
 * them (the earliest is next_ms as it was), and next_ms set to the first tick after
 * @now_ms. Nothing happens when @s is paused, has no next_ms, or its next tick is still
 * ahead.
 * Return: 1 when a tick passed (next_ms 0 when no tick follows it within cron's
 * horizon: the schedule will not tick again); 0 when none did; -EINVAL (broken);
 * -ENOMEM (nothing changed).
 * Context: the table's lock held (or @s in no table); does not yield.
 */
int schedule_advance(Schedule *s, uint64_t now_ms, uint64_t *ret_tick_ms);

/*
 * schedule_start - (re)start the ticks of @s from @now_ms: next_ms is its first tick
 * after @now_ms (an interval's: @now_ms + every_ms), paused cleared.
 * Return: 0; -ERANGE (no tick within the horizon); -EINVAL (broken); -ENOMEM.
 * Context: the table's lock held (or @s in no table).
 */
int schedule_start(Schedule *s, uint64_t now_ms);

/*
 * schedule_restore - @s was read back from the store at start-up, fiberd having been
 * down until @now_ms: when a tick passed meanwhile, next_ms moves past @now_ms and, with
 * the run_once policy, catchup_ms is the latest tick missed (to be fired now).
 * Return: what schedule_advance() returns. Context: start-up, @s in no table yet.
 */
int schedule_restore(Schedule *s, uint64_t now_ms);

/* schedule_table_init - an empty table. Context: start-up, before any other call. */
void schedule_table_init(ScheduleTable *t);

/*
 * schedule_find_locked - @owner's schedule @name (@len bytes), or NULL. Not referenced:
 * valid while the lock is held. Context: the lock held.
 */
Schedule *schedule_find_locked(ScheduleTable *t, uid_t owner, const char *name, size_t len);

/* schedule_find_serial_locked - the schedule with @serial, or NULL. Context: the lock held. */
Schedule *schedule_find_serial_locked(ScheduleTable *t, uint64_t serial);

/*
 * schedule_insert_locked - add @s (taken on success) to @t, giving it a serial, and set
 * @t->wake. Return: 0; -EEXIST: its owner has one of that name; -EDQUOT: its owner has
 * SCHEDULE_MAX_PER_OWNER already. Context: the lock held.
 */
int schedule_insert_locked(ScheduleTable *t, Schedule *s);

/* schedule_remove_locked - take @s out of @t (the caller frees it). Context: the lock held. */
void schedule_remove_locked(ScheduleTable *t, Schedule *s);

/*
 * schedule_next_locked - the schedule to fire at @now_ms (a catch-up first, else the
 * one whose next tick passed longest ago), or NULL; *@ret_wake_ms: when to look again
 * when none is (UINT64_MAX: nothing will tick). Context: the lock held.
 */
Schedule *schedule_next_locked(ScheduleTable *t, uint64_t now_ms, uint64_t *ret_wake_ms);

/* schedule_first_locked, schedule_after_locked - walk @t by (name, owner), NULL after the
 * last. Context: the lock held. */
static inline Schedule *schedule_first_locked(ScheduleTable *t)
{
        return list_empty(&t->all) ? NULL : list_entry(t->all.next, Schedule, link);
}

static inline Schedule *schedule_after_locked(ScheduleTable *t, Schedule *s)
{
        return s->link.next == &t->all ? NULL : list_entry(s->link.next, Schedule, link);
}

/* schedule_changed_locked - this host changes @t (a method): a read of a fleet's
 * schedules that began before is not merged (ScheduleTable.changes). Context: the lock
 * held. */
static inline void schedule_changed_locked(ScheduleTable *t)
{
        t->changes++;
}

/* schedule_count - the schedules in @t. Context: any; takes the lock briefly. */
size_t schedule_count(ScheduleTable *t);

#endif /* FIBERD_DAEMON_SCHEDULE_H */
