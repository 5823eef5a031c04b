/* SPDX-License-Identifier: MIT */
/*
 * schedrow.c — a periodic schedule and its row in the job store, both ways (schedrow.h).
 *
 * A row is read back as it was written; whether its ticks moved on while fiberd was down
 * is the reader's question (schedrun.c at start-up, schedfleet.c never: a fleet's rows
 * are current). A row that no longer makes a schedule (a name or an interval schedule.add
 * would refuse) is logged and left out; one whose zone left the system is kept, not
 * ticking, so it can be listed and removed.
 */
#include "daemon/server/schedrow.h"
#include "daemon/obs/log.h"
#include "ipc/protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int schedrow_save_locked(Store *store, const Schedule *s, StoreScheduleWrite write,
                         StoreWaiter *waiter)
{
        StoreSchedule sc = {
                .owner = s->owner,
                .name = s->name,
                .gid = s->gid,
                .groups = s->groups,
                .n_groups = s->n_groups,
                .cron = s->cron_text,
                .tz = s->tz,
                .every_ms = s->every_ms,
                .missed = schedule_missed_name(s->missed),
                .plugin = s->plugin,
                .args = s->args,
                .args_len = s->args_len,
                .options = s->options,
                .options_len = s->options_len,
                .paused = s->paused,
                /* a catch-up not fired yet: its tick is still the next one on disk */
                .next_ms = s->catchup_ms ? s->catchup_ms : s->next_ms,
                .last_ms = s->last_ms,
                .last_job = s->last_job,
                .created_ms = s->created_ms,
                .write = write,
        };

        return store_put_schedule(store, &sc, waiter);
}

int schedrow_read(const StoreSchedule *sc, Schedule **ret)
{
        char err[256] = "";
        Schedule *s;
        int r;

        *ret = NULL;
        if (!schedule_name_valid(sc->name, strlen(sc->name)) ||
            (!sc->cron && sc->every_ms < IPC_SCHEDULE_EVERY_MS_MIN)) {
                log_msg(LOG_ERR, "job store: schedule \"%.64s\" of uid %u cannot be read: left out",
                        sc->name, (unsigned)sc->owner);
                return 0;
        }
        r = schedule_new(sc->name, sc->owner, &s);
        if (r < 0)
                return r;
        s->gid = sc->gid;
        s->every_ms = sc->every_ms;
        s->paused = sc->paused;
        s->next_ms = sc->next_ms;
        s->last_ms = sc->last_ms;
        s->last_job = sc->last_job;
        s->created_ms = sc->created_ms;
        if (schedule_missed_parse(sc->missed, strlen(sc->missed), &s->missed) < 0)
                s->missed = SCHEDULE_MISSED_SKIP;
        if (sc->n_groups && !(s->groups = malloc(sc->n_groups * sizeof(gid_t))))
                goto out_nomem;
        if (sc->n_groups)
                memcpy(s->groups, sc->groups, sc->n_groups * sizeof(gid_t));
        s->n_groups = sc->n_groups;
        if (schedule_set_copy(&s->plugin, NULL, sc->plugin, strlen(sc->plugin)) < 0 ||
            schedule_set_copy(&s->args, &s->args_len, sc->args ? sc->args : "\x80",
                              sc->args ? sc->args_len : 1) < 0 ||
            schedule_set_copy(&s->options, &s->options_len, sc->options ? sc->options : "\x80",
                              sc->options ? sc->options_len : 1) < 0)
                goto out_nomem;
        if (sc->cron) {
                r = schedule_set_cron(s, sc->cron, sc->tz, err, sizeof(err));
                if (r == -ENOMEM)
                        goto out_nomem;
                if (r < 0) {
                        /* its zone left the system: kept (listed, removable), not ticking */
                        if (schedule_set_copy(&s->cron_text, NULL, sc->cron, strlen(sc->cron)) <
                                    0 ||
                            (sc->tz &&
                             schedule_set_copy(&s->tz, NULL, sc->tz, strlen(sc->tz)) < 0) ||
                            !(s->broken = strdup(err)))
                                goto out_nomem;
                        log_msg(LOG_ERR,
                                "schedule %s of uid %u cannot tick: %s; remove it and add it "
                                "again",
                                s->name, (unsigned)s->owner, err);
                }
        }
        *ret = s;
        return 0;

out_nomem:
        schedule_free(s);
        return -ENOMEM;
}
