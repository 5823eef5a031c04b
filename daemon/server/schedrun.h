/* SPDX-License-Identifier: MIT */
/*
 * schedrun.h — the daemon's periodic schedules at work (PROTOCOL.md, "schedule.add"):
 * read back from the job store at start-up, fired at their ticks by one fiber on the
 * server group, each change written to the store. The table and the tick arithmetic are
 * daemon/cron/schedule.h's; the methods that change the table are schedules.c's.
 */
#ifndef FIBERD_DAEMON_SCHEDRUN_H
#define FIBERD_DAEMON_SCHEDRUN_H

#include "daemon/cron/schedule.h"
#include "daemon/daemon.h"
#include "daemon/store/store.h"

/*
 * schedrun_restore - an empty d->schedules, then every schedule of the job store in it:
 * a tick that passed while fiberd was down moves its next tick past now and, with the
 * run_once policy, is fired once when the fiber starts (schedule_restore()); in a fleet,
 * a tick no host fired for a couple of seconds (the whole fleet was down), and the
 * version of the fleet's schedules is kept for schedfleet_reload(). A row that cannot
 * be read is logged and left out; a cron whose zone is gone is kept, but does not tick
 * (its reason is logged).
 * Return: 0; -ENOMEM; the store's error (logged).
 * Context: main thread at start-up, before store_load() (the store's connection is
 * still the main thread's).
 */
int schedrun_restore(Daemon *d);

/*
 * schedrun_start - start the fiber that fires the schedules' ticks, on the server group:
 * it sleeps until the earliest tick (d->schedules.wake moves it earlier, and it looks
 * again at least once a second, so a step of the wall clock is noticed; in a fleet
 * every SCHEDFLEET_CHECK_MS, when it also brings the table in step with what the other
 * hosts changed: schedfleet_reload()), then submits one job per tick as the schedule's
 * owner (submit_params(): the checks and limits of job.submit) with the key
 * "schedule:<name>:<tick ms>". A tick whose submission fails is logged once per
 * schedule (until one succeeds again), and the schedule goes on. In a fleet every host
 * fires every tick and the fleet's key makes one job of them; the host whose
 * submission made it writes the tick down.
 * Return: 0; the error of fiber_create() (logged). Context: main thread, after the
 * job table and the store were restored.
 */
int schedrun_start(Daemon *d);

/*
 * schedrun_stop - ask the fiber to return and wait for it (at most a few seconds: it may
 * be inside a submission), so the store can close under it. Context: main thread at
 * shutdown, after jobtable_stop().
 */
void schedrun_stop(Daemon *d);

#endif
