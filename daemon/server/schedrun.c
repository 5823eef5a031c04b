/* SPDX-License-Identifier: MIT */
/*
 * schedrun.c — the schedules at work (schedrun.h): read back at start-up, fired at their
 * ticks, written to the job store.
 *
 * One fiber on the server group fires every schedule, the way jobhold.c's timer queues
 * every scheduled job: it takes the schedule whose tick passed (a catch-up from the
 * start first), moves its next tick on under the table's lock (so no other pass fires
 * that tick again), copies what the job needs, and lets go of the lock to submit it
 * (submit_params() yields while the store commits the job). Then it writes down the
 * outcome (last_ms, last_job) on the schedule, if the schedule is still the one it
 * took (its serial: a schedule removed meanwhile, or removed and added again, is left
 * alone), and queues the schedule's row for the store without waiting for it.
 *
 * What a crash between the two writes costs: the job's record is committed before the
 * schedule's row is queued, so after a kill -9 the row may still name the tick as the
 * next one. At the next start that tick counts as missed; with run_once it is fired
 * again under the same key "schedule:<name>:<tick ms>", which answers the job already
 * submitted (jobkeys.h) instead of a second one; with skip it is dropped. No tick is
 * ever submitted twice, and none that was answered is lost.
 *
 * Every tick is submitted exactly as job.submit would be, as the schedule's owner (the
 * uid, gid and supplementary groups it had when it added the schedule): access tier,
 * options, class, plugin, check_args, quotas. A refusal is logged once per schedule
 * with its reason (and once more when it submits again), never retried: the next tick
 * comes as planned.
 *
 * In a fleet every host runs this fiber over the fleet's schedules, which it also keeps
 * in step with the other hosts' changes (schedfleet.c, every SCHEDFLEET_CHECK_MS). The
 * key is the fleet's, so of the hosts' submissions of one tick one makes the job; that
 * host writes the tick down (a tick's write: StoreScheduleWrite), the others only note
 * the id. A tick that came due less than SCHEDRUN_FLEET_GRACE_MS before a host starts is
 * fired as the running hosts fire it; only older ones count as missed.
 */
#include "daemon/server/schedrun.h"
#include "daemon/obs/log.h"
#include "daemon/server/creds.h"
#include "daemon/server/schedfleet.h"
#include "daemon/server/schedrow.h"
#include "daemon/server/submit.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The fiber looks at the table at least this often: a step of the wall clock (a tick is
 * a wall-clock time) is noticed within it. */
#define SCHEDRUN_POLL_MS 1000
/* How long shutdown waits for the fiber to return. */
#define SCHEDRUN_STOP_NS (5 * NSEC_PER_SEC)
/* A fleet: a tick that came due this long before a host starts is not one the whole
 * fleet missed (the hosts that run may be firing it): the host fires it as they do. */
#define SCHEDRUN_FLEET_GRACE_MS 2000

/* "2026-11-26 03:00:00 UTC" for @ms since the epoch, for log lines. */
static const char *format_utc(uint64_t ms, char buf[40])
{
        time_t t = (time_t)(ms / 1000);
        struct tm tm;

        if (!gmtime_r(&t, &tm) || !strftime(buf, 40, "%Y-%m-%d %H:%M:%S UTC", &tm))
                snprintf(buf, 40, "%llu ms", (unsigned long long)ms);
        return buf;
}

/* ------------------------------------------------------------------ the store ---- */

/* store_schedules()'s callback: one row back into @arg's table. */
static int restore_one(const StoreSchedule *sc, void *arg)
{
        Daemon *d = arg;
        ScheduleTable *t = &d->schedules;
        bool fleet = store_fleet(d->store);
        uint64_t now_ms = job_now_ms(), was_ms;
        char when[40], next[40];
        Schedule *s;
        int r;

        r = schedrow_read(sc, &s);
        if (r < 0 || !s)
                return r;
        was_ms = s->next_ms;
        /* a fleet: the other hosts may be firing a tick that just came due; only one no
         * host fired for SCHEDRUN_FLEET_GRACE_MS passed while the whole fleet was down */
        r = schedule_restore(s, fleet ? now_ms - MIN(now_ms, SCHEDRUN_FLEET_GRACE_MS) : now_ms);
        if (r == 1 && s->catchup_ms)
                log_msg(LOG_NOTICE,
                        "schedule %s of uid %u: its tick at %s passed while %s was down "
                        "(missed = run_once): one job is submitted now",
                        s->name, (unsigned)s->owner, format_utc(s->catchup_ms, when),
                        fleet ? "every fiberd host of the fleet" : "fiberd");
        else if (r == 1)
                log_msg(LOG_INFO,
                        "schedule %s of uid %u: ticks from %s on passed while %s was down "
                        "(missed = skip): next tick at %s",
                        s->name, (unsigned)s->owner, format_utc(was_ms, when),
                        fleet ? "every fiberd host of the fleet" : "fiberd",
                        s->next_ms ? format_utc(s->next_ms, next) : "none");
        else if (r < 0 && r != -ERANGE) {
                schedule_free(s);
                return -ENOMEM;
        }
        pthread_mutex_lock(&t->lock);
        r = schedule_insert_locked(t, s);
        pthread_mutex_unlock(&t->lock);
        if (r < 0) { /* -EDQUOT: more rows of one owner than schedule.add allows */
                log_msg(LOG_ERR, "job store: schedule %s of uid %u left out: %s", s->name,
                        (unsigned)s->owner, strerror(-r));
                schedule_free(s);
        }
        return 0;
}

int schedrun_restore(Daemon *d)
{
        ScheduleTable *t = &d->schedules;
        size_t n;
        int r;

        schedule_table_init(t);
        /* a fleet: the version read with the rows, so the fiber reads them again only
         * once a host changes them */
        r = store_fleet(d->store)
                    ? store_schedules_changed(d->store, &t->fleet_version, restore_one, d)
                    : store_schedules(d->store, restore_one, d);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot take back the schedules of the job store: %s",
                        strerror(-r));
                return r;
        }
        n = schedule_count(t);
        if (n)
                log_msg(LOG_INFO, "job store: %zu schedule%s", n, n == 1 ? "" : "s");
        return 0;
}

/* ------------------------------------------------------------------ a tick ------- */

/* What one tick's submission needs, copied under the lock so that it can be made
 * without it. */
typedef struct Fire {
        uint64_t serial;
        uid_t owner;
        gid_t gid;
        gid_t groups[SCHEDULE_GROUPS_MAX];
        size_t n_groups;
        char name[IPC_SCHEDULE_NAME_MAX + 1];
        uint64_t tick_ms;
        bool catchup;
        msgpack_sbuffer params; /* [plugin, args, options + key] */
} Fire;

/* Packs @s's options with the key of tick @tick_ms into @pk. */
static int pack_options(msgpack_packer *pk, const Schedule *s, uint64_t tick_ms)
{
        char key[IPC_IDEMPOTENCY_KEY_MAX + 1];
        msgpack_zone zone;
        msgpack_object o;
        size_t off = 0;
        uint32_t n = 0;
        int r = 0;

        msgpack_zone_init(&zone, 1024);
        if (msgpack_unpack(s->options, s->options_len, &off, &zone, &o) != MSGPACK_UNPACK_SUCCESS ||
            o.type != MSGPACK_OBJECT_MAP) {
                msgpack_zone_destroy(&zone);
                return -EIO;
        }
        for (uint32_t i = 0; i < o.via.map.size; i++)
                n += !ipc_object_streq(&o.via.map.ptr[i].key, IPC_OPT_KEY);
        r |= msgpack_pack_map(pk, n + 1);
        for (uint32_t i = 0; i < o.via.map.size; i++) {
                if (ipc_object_streq(&o.via.map.ptr[i].key, IPC_OPT_KEY))
                        continue; /* schedule.add refuses it: a row written otherwise */
                r |= msgpack_pack_object(pk, o.via.map.ptr[i].key);
                r |= msgpack_pack_object(pk, o.via.map.ptr[i].val);
        }
        snprintf(key, sizeof(key), "schedule:%s:%llu", s->name, (unsigned long long)tick_ms);
        r |= ipc_pack_kv_cstr(pk, IPC_OPT_KEY, key);
        msgpack_zone_destroy(&zone);
        return r ? -ENOMEM : 0;
}

/* @f for the tick @tick_ms of @s. Context: the table's lock held. */
static int fire_init_locked(Fire *f, const Schedule *s, uint64_t tick_ms, bool catchup)
{
        msgpack_packer pk;
        int r;

        *f = (Fire){.serial = s->serial,
                    .owner = s->owner,
                    .gid = s->gid,
                    .n_groups = MIN(s->n_groups, (size_t)SCHEDULE_GROUPS_MAX),
                    .tick_ms = tick_ms,
                    .catchup = catchup};
        if (f->n_groups)
                memcpy(f->groups, s->groups, f->n_groups * sizeof(gid_t));
        memcpy(f->name, s->name, sizeof(f->name));
        msgpack_sbuffer_init(&f->params);
        msgpack_packer_init(&pk, &f->params, msgpack_sbuffer_write);
        r = msgpack_pack_array(&pk, IPC_SUBMIT_NPARAMS) | ipc_pack_cstr(&pk, s->plugin);
        r |= msgpack_sbuffer_write(&f->params, s->args, s->args_len); /* packed already */
        r = r ? -ENOMEM : pack_options(&pk, s, tick_ms);
        if (r < 0)
                msgpack_sbuffer_destroy(&f->params);
        return r;
}

/*
 * Takes the schedule to fire at @now_ms, its next tick moved on, into @f; false when
 * none is due (*@ret_wake_ms: when one may be). Context: the table's lock held.
 */
static bool take_due_locked(Daemon *d, uint64_t now_ms, Fire *f, uint64_t *ret_wake_ms)
{
        ScheduleTable *t = &d->schedules;
        Schedule *s;
        uint64_t tick;
        bool catchup;
        int r;

        while ((s = schedule_next_locked(t, now_ms, ret_wake_ms))) {
                catchup = s->catchup_ms != 0;
                if (catchup) {
                        tick = s->catchup_ms;
                        s->catchup_ms = 0;
                } else {
                        r = schedule_advance(s, now_ms, &tick);
                        if (r <= 0) {
                                /* out of memory (or a bug): look again in a moment */
                                log_msg(LOG_WARNING, "schedule %s of uid %u: no next tick: %s",
                                        s->name, (unsigned)s->owner, strerror(r ? -r : EINVAL));
                                *ret_wake_ms = now_ms + SCHEDRUN_POLL_MS;
                                return false;
                        }
                        if (!s->next_ms)
                                log_msg(LOG_WARNING,
                                        "schedule %s of uid %u: its cron has no tick within %d "
                                        "years after this one: it stops",
                                        s->name, (unsigned)s->owner, CRON_HORIZON_YEARS);
                }
                if (fire_init_locked(f, s, tick, catchup) == 0)
                        return true;
                log_msg(LOG_WARNING,
                        "schedule %s of uid %u: out of memory for the job of its tick: skipped",
                        s->name, (unsigned)s->owner);
        }
        return false;
}

/* Submits @f's job, then writes down the outcome on its schedule. Yields. */
static void fire(Daemon *d, Fire *f)
{
        ScheduleTable *t = &d->schedules;
        msgpack_zone zone;
        msgpack_object params;
        IpcStatus st = {0};
        JobOrigin origin = {0};
        uint64_t existing = 0, id = 0;
        char when[40];
        size_t off = 0;
        Schedule *s;
        Job *j = NULL;
        bool theirs;
        int r;

        msgpack_zone_init(&zone, 4096);
        r = creds_new(f->owner, f->gid, f->groups, f->n_groups, &origin.creds);
        if (r == 0 && msgpack_unpack(f->params.data, f->params.size, &off, &zone, &params) !=
                              MSGPACK_UNPACK_SUCCESS)
                r = -ENOMEM;
        if (r < 0)
                ipc_status_errno(&st, r, NULL);
        else
                r = submit_params(d, &origin, &params, &j, &existing, &st);
        if (r == 0)
                id = j ? j->id : existing;
        job_unref(j);
        creds_unref(origin.creds);
        msgpack_zone_destroy(&zone);

        /* a fleet: another host's submission of this tick made its job (the key is the
         * fleet's); that host writes the tick down, this one only learns the id */
        theirs = r == 0 && existing && store_fleet(d->store);
        pthread_mutex_lock(&t->lock);
        s = schedule_find_serial_locked(t, f->serial);
        if (s && r == 0) {
                s->last_ms = f->tick_ms;
                s->last_job = id;
                if (s->failing)
                        log_msg(LOG_NOTICE, "schedule %s of uid %u submits again: job %llu",
                                s->name, (unsigned)s->owner, (unsigned long long)id);
                s->failing = false;
                log_msg(LOG_DEBUG, "schedule %s of uid %u: job %llu%s for its tick at %s", s->name,
                        (unsigned)s->owner, (unsigned long long)id,
                        existing ? " (submitted before)" : "", format_utc(f->tick_ms, when));
        } else if (s && r != -ESHUTDOWN && !s->failing) {
                s->failing = true;
                log_msg(LOG_WARNING,
                        "schedule %s of uid %u: the job of its %stick at %s was not submitted: "
                        "%s: %s; the schedule goes on (logged once until a tick submits again)",
                        s->name, (unsigned)s->owner, f->catchup ? "missed " : "",
                        format_utc(f->tick_ms, when), st.code ? st.code : "INTERNAL", st.message);
        }
        /* the tick has moved on either way; at shutdown the row stays as it was, and
         * the next start counts that tick as missed */
        if (s && r != -ESHUTDOWN && !theirs &&
            schedrow_save_locked(d->store, s, STORE_SCHEDULE_TICK, NULL) < 0)
                log_msg(LOG_WARNING, "schedule %s of uid %u: no memory to write its row", s->name,
                        (unsigned)s->owner);
        pthread_mutex_unlock(&t->lock);
}

static bool stopping(Daemon *d)
{
        return __atomic_load_n(&d->schedules.stopping, __ATOMIC_ACQUIRE) ||
               jobtable_stopping(&d->jobs);
}

static void schedrun_fiber(void *arg)
{
        Daemon *d = arg;
        ScheduleTable *t = &d->schedules;
        bool fleet = store_fleet(d->store);
        uint64_t check_ns = 0; /* a fleet: when to look at its schedules' version again */

        while (!stopping(d)) {
                uint64_t now_ms, wake_ms, wait_ms, mono_ns;
                Fire f;
                bool due;

                fiber_event_reset(&t->wake); /* a change from here on sets it again */
                mono_ns = clock_now_ns(CLOCK_MONOTONIC);
                if (fleet && mono_ns >= check_ns) /* what another host changed */
                        check_ns = mono_ns + (schedfleet_reload(d) < 0 ? SCHEDFLEET_RETRY_MS
                                                                       : SCHEDFLEET_CHECK_MS) *
                                                     NSEC_PER_MSEC;
                now_ms = job_now_ms();
                pthread_mutex_lock(&t->lock);
                due = take_due_locked(d, now_ms, &f, &wake_ms);
                pthread_mutex_unlock(&t->lock);
                if (due) {
                        fire(d, &f);
                        msgpack_sbuffer_destroy(&f.params);
                        continue;
                }
                wait_ms = wake_ms <= now_ms ? 0 : MIN(wake_ms - now_ms, (uint64_t)SCHEDRUN_POLL_MS);
                if (fleet) /* the mono_ns before the check: at most a few ms early */
                        wait_ms = MIN(wait_ms, (check_ns - mono_ns) / NSEC_PER_MSEC);
                if (fiber_event_wait(&t->wake, sched_deadline_after(wait_ms * NSEC_PER_MSEC)) ==
                    -ECANCELED)
                        break;
        }
        fiber_event_set(&t->stopped);
}

int schedrun_start(Daemon *d)
{
        FiberAttr attr = {.group = d->server_group, .detached = true, .tag = "schedules"};
        int r = fiber_create(NULL, &attr, schedrun_fiber, d);

        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the schedules fiber: %s", strerror(-r));
                return r;
        }
        d->schedules.running = true;
        return 0;
}

void schedrun_stop(Daemon *d)
{
        if (!d->schedules.running)
                return;
        __atomic_store_n(&d->schedules.stopping, true, __ATOMIC_RELEASE);
        fiber_event_set(&d->schedules.wake);
        if (fiber_event_wait(&d->schedules.stopped, sched_deadline_after(SCHEDRUN_STOP_NS)) < 0)
                log_msg(LOG_WARNING, "the schedules fiber did not return at shutdown");
}
