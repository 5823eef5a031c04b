/* SPDX-License-Identifier: MIT */
/*
 * schedrow.h — a periodic schedule (daemon/cron/schedule.h) and its row in the job store
 * (StoreSchedule, store.h), both ways: what the firing fiber (schedrun.c), the methods
 * (schedules.c) and a fleet's table (schedfleet.c) share, below all three.
 */
#ifndef FIBERD_DAEMON_SCHEDROW_H
#define FIBERD_DAEMON_SCHEDROW_H

#include "daemon/cron/schedule.h"
#include "daemon/store/store.h"

/*
 * schedrow_read - a new schedule (in no table) from the job store's row @sc, as it was
 * written: its next tick not moved (schedule_restore() is the caller's). A cron whose
 * zone is gone is kept, not ticking, its reason logged. @ret: out, NULL for a row that
 * cannot be read (logged).
 * Return: 0; -ENOMEM. Context: any; does not yield.
 */
int schedrow_read(const StoreSchedule *sc, Schedule **ret);

/*
 * schedrow_save_locked - queue the write of @s's row to @store (the whole row, as @s is
 * now; in a fleet, what @write says of it: StoreScheduleWrite). With @waiter,
 * store_waiter_wait() answers once it is committed, or the fleet's refusal.
 * Return: 0; -ENOMEM (nothing queued).
 * Context: the schedules' table lock held; does not yield.
 */
int schedrow_save_locked(Store *store, const Schedule *s, StoreScheduleWrite write,
                         StoreWaiter *waiter);

#endif
