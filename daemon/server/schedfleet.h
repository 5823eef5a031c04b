/* SPDX-License-Identifier: MIT */
/*
 * schedfleet.h — periodic schedules in a fleet ([store] backend = redis): every host
 * holds every schedule of the fleet in its own table (daemon/cron/schedule.h), kept in
 * step with the rows in Redis (store-redis-periodic.c) that the methods of any host
 * write. Each host fires every tick; the fleet's idempotency key makes one job of them.
 */
#ifndef FIBERD_DAEMON_SCHEDFLEET_H
#define FIBERD_DAEMON_SCHEDFLEET_H

#include "daemon/daemon.h"

/* How often a host looks whether another host changed the fleet's schedules, ms: a
 * change through one host holds on every host within about this. */
#define SCHEDFLEET_CHECK_MS 500
/* ... and while Redis does not answer (the store logs each failed look). */
#define SCHEDFLEET_RETRY_MS 5000

/*
 * schedfleet_reload - when the fleet's schedules changed since the table's last look
 * (their version moved: an add, pause, resume or remove through any host) or the table
 * is marked stale, read them all and bring d->schedules in step: a schedule added
 * elsewhere joins (its next tick as stored), one removed elsewhere leaves, a pause or a
 * resume is taken over, and a later last tick of the fleet's is kept. A schedule's
 * ticks move on by this host's own firing otherwise. A read that crossed a change of
 * this host (ScheduleTable.changes) is dropped and made again at the next look.
 * Return: 1 (merged); 0 (nothing changed, not a fleet, or dropped); -ENOMEM; the store's
 * error (logged by the store; the table is read whole at the next look).
 * Context: the schedules fiber (schedrun.c), the only caller; blocks its worker for one
 * round trip to Redis; takes the table's lock.
 */
int schedfleet_reload(Daemon *d);

#endif
