/* SPDX-License-Identifier: MIT */
/*
 * store-redis-sched.h — the redis backend's schedule set (store-redis-sched.c): held
 * fleet jobs by due time, their mover, dependencies and idempotency keys in Redis; what
 * store-redis.c calls of it.
 */
#ifndef FIBERD_DAEMON_STORE_REDIS_SCHED_H
#define FIBERD_DAEMON_STORE_REDIS_SCHED_H

#include "daemon/store/store-redis-conn.h"

/*
 * redis_sched_append - the schedule's commands for @rec in a commit's pipeline on @c
 * (inside its MULTI): a held fleet job joins fiberd:scheduled; a fleet submission that
 * waits joins the sets of the jobs it runs after (or goes on at once); a job's
 * idempotency key lasts from its first write until it is final, then for the key
 * window. *@n counts the commands appended. Context: the store thread.
 */
void redis_sched_append(RedisStore *q, redisContext *c, const StoreRecord *rec, size_t *n);

/* RedisEnded - a job a commit writes final, and the state it ended in. */
typedef struct RedisEnded {
        uint64_t id;
        JobState state;
} RedisEnded;

/*
 * redis_sched_release_append - after a commit's writes (in its MULTI): the jobs waiting
 * on the @n_ended jobs of @ended (final in this commit) go on (all their dependencies
 * done: queued, or scheduled) or fail. *@n counts the commands appended. Return 0;
 * -ENOMEM (nothing appended). Context: the store thread.
 */
int redis_sched_release_append(RedisStore *q, redisContext *c, const RedisEnded *ended,
                               size_t n_ended, size_t *n);

/* redis_sched_start / redis_sched_stop - the mover thread (started by
 * redis_fleet_start(), stopped once redis_stopping() says so). Context: main thread. */
int redis_sched_start(Store *s);
void redis_sched_stop(Store *s);

/* StoreBackend.cancel_held, key_claim and key_release (store.h). */
int redis_cancel_held(Store *s, const StoreRecord *rec);
int redis_key_claim(Store *s, uid_t owner, const char *key, uint64_t id, uint64_t *ret_existing);
void redis_key_release(Store *s, uid_t owner, const char *key, uint64_t id);

#endif
