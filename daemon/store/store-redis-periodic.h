/* SPDX-License-Identifier: MIT */
/*
 * store-redis-periodic.h — the redis backend's periodic schedules
 * (store-redis-periodic.c): the fleet's schedule rows, where their ticks stand and the
 * version of their changes in Redis; what store-redis.c calls of it.
 */
#ifndef FIBERD_DAEMON_STORE_REDIS_PERIODIC_H
#define FIBERD_DAEMON_STORE_REDIS_PERIODIC_H

#include "daemon/store/store-redis-conn.h"

/*
 * redis_periodic_append - the commands of schedule write @w (STORE_OP_SCHEDULE,
 * STORE_OP_SCHEDULE_DELETE) in a commit's pipeline on @c (inside its MULTI); *@n counts
 * them. Return 0; -ENOMEM (nothing appended). Context: the store thread.
 */
int redis_periodic_append(redisContext *c, const StoreWrite *w, size_t *n);

/* redis_periodic_checked - does @w's one command answer whether the fleet took it (an
 * add, a change)? Context: any. */
bool redis_periodic_checked(const StoreWrite *w);

/* redis_periodic_refusal - @w's outcome from @rep, its command's answer in EXEC's: 0;
 * -EEXIST (an add of a name taken); -ENOENT (a change of a schedule gone). */
int redis_periodic_refusal(const StoreWrite *w, const redisReply *rep);

/* StoreBackend.schedules and schedules_changed (store.h): on the query connection. */
int redis_periodic_all(Store *s, StoreScheduleFn fn, void *arg);
int redis_periodic_changed(Store *s, uint64_t *version, StoreScheduleFn fn, void *arg);

#endif
