/* SPDX-License-Identifier: MIT */
/*
 * store-redis-conn.h — the Redis backend's private ground floor: what its files share and
 * nothing else includes. store-redis.c holds the records, the shared queue (the stream,
 * its reader thread, the group commit) and the queries; store-redis-sched.c the fleet's
 * schedule: the sorted set of held jobs, the thread that moves them to the stream when
 * they are due, the cancel of a held job and the idempotency keys (store-redis-sched.h);
 * store-redis-periodic.c the fleet's periodic schedules (store-redis-periodic.h);
 * store-redis-conn.c the connection helpers all use. store-redis.c calls the schedule
 * and the periodic schedules; they call only the connection helpers, so the files are
 * layers, not a loop. None includes anything above the store.
 *
 * Every key the fleet keeps is named here (store-redis.c's header comment says what
 * each holds; store-redis-sched.c's the schedule's).
 */
#ifndef FIBERD_DAEMON_STORE_REDIS_CONN_H
#define FIBERD_DAEMON_STORE_REDIS_CONN_H

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/store/store.h"

#define REDIS_KEY_NEXT_ID "fiberd:next_id"
#define REDIS_KEY_INDEX "fiberd:index"
#define REDIS_KEY_FINISHED "fiberd:finished"
#define REDIS_KEY_SCHEDULED "fiberd:scheduled" /* held jobs by due time (store-redis-sched.c) */
#define REDIS_KEY_SCHEDULES "fiberd:schedules" /* periodic schedules (store-redis-periodic.c) */
#define REDIS_KEY_SCHEDULE_TICKS "fiberd:schedules:ticks"
#define REDIS_KEY_SCHEDULES_VERSION "fiberd:schedules:version"
#define REDIS_KEY_CANCELS "fiberd:cancels" /* cancels asked through another host */
#define REDIS_JOB_KEY_FMT "fiberd:job:%" PRIu64
#define REDIS_HOST_KEY_FMT "fiberd:host:%s:%s" /* the host's name, then plugins / meta */
#define REDIS_IDEM_KEY_FMT "fiberd:key:%u:%s"  /* an owner's idempotency key */
#define REDIS_ENTRY_BUCKETS 1024
#define REDIS_CMD_MAX_ARGS 64
#define REDIS_READ_COUNT 16
#define REDIS_IO_TIMEOUT_S 5         /* the store thread's, the reader's and the mover's */
#define REDIS_QUERY_TIMEOUT_MS 2000  /* the query connection's: it blocks a server worker */
#define REDIS_LINK_RETRY_MIN_MS 100  /* a lost server is tried again after this, doubling */
#define REDIS_LINK_RETRY_MAX_MS 2000 /* ... up to this */
#define REDIS_LINK_NOTE_S 60         /* while it stays away: a line this often */
#define REDIS_ID_BLOCK 64            /* ids a host takes from fiberd:next_id at once */
#define REDIS_ID_BLOCK_STR "64"

/* RedisEntry - a stream entry this host holds: its job runs or waits here. */
typedef struct RedisEntry {
        uint64_t id;    /* the job */
        char entry[48]; /* its stream entry id, "ms-seq" */
        struct RedisEntry *next;
} RedisEntry;

/*
 * RedisLink - whether the server answers, shared by every connection of the process
 * (store-redis-conn.c): the first failure marks it away (one line), every later one
 * doubles the pause before the next try (REDIS_LINK_RETRY_MIN_MS to _MAX_MS), and the
 * first answer marks it back (one line). While it is away and the pause has not passed,
 * a call fails at once without touching the network (-ENOTCONN), so a request fiber
 * never waits on a server that is known to be gone.
 */
typedef struct RedisLink {
        pthread_mutex_t lock;
        bool away;            /* atomic: read unlocked by redis_link_away() */
        uint64_t since_ns;    /* CLOCK_MONOTONIC: when it went away */
        uint64_t next_try_ns; /* no connection attempt before this */
        uint64_t pause_ms;    /* the current pause between tries */
        uint64_t noted_ns;    /* the last line about it */
        uint64_t refused;     /* calls failed at once while away */
        uint64_t outages;     /* times it went away (stats, tests) */
} RedisLink;

typedef struct RedisStore {
        char *consumer;         /* owned: the consumer name (node, or hostname.pid) */
        char *plugins_key;      /* owned: fiberd:host:<node or hostname>:plugins */
        char *meta_key;         /* owned: fiberd:host:<node or hostname>:meta */
        char *local_key;        /* owned: fiberd:host:<node or hostname>:local */
        char *stream, *group;   /* owned copies of the options */
        uint64_t claim_idle_ms; /* a pending entry idle this long is taken over */
        uint64_t expire_s;      /* a final job's hash lives this long */
        uint64_t keep_max;      /* and at most this many final jobs' hashes are kept */
        uint64_t key_window_s;  /* a final job's idempotency key lives this long */

        RedisLink link; /* whether the server answers (store-redis-conn.c) */

        redisContext *w;   /* the store thread's (commit); at start the main thread's */
        bool w_scripts;    /* w's server has the scripts its commits call (the shas) */
        char put_sha[48];  /* SCRIPT LOAD of store-redis.c's put_script */
        char trim_sha[48]; /* ... and of its commit_trim_script */
        uint64_t *doubt;   /* fleet submissions whose commit got no answer (store thread) */
        size_t n_doubt, doubt_cap;
        RedisEntry *handback; /* entries the commit being made acknowledges (store thread) */
        size_t n_handback, handback_cap;

        pthread_mutex_t q_lock; /* guards q */
        redisContext *q;        /* queries: ids, records, listings, keys, cancels */

        pthread_mutex_t id_lock;  /* guards the id block */
        uint64_t id_next, id_end; /* this host's ids left: [id_next, id_end) */

        pthread_mutex_t map_lock;                 /* guards entries */
        RedisEntry *entries[REDIS_ENTRY_BUCKETS]; /* held entries, by job id */
        size_t held;                              /* entries in the map */

        redisContext *r; /* the reader's */
        pthread_t reader;
        bool reader_started;
        bool stop;                /* atomic: the reader and the mover leave */
        StoreFleetHooks hooks;    /* store_fleet_start()'s */
        uint64_t taken, claimed;  /* entries read / taken over (reader thread only) */
        uint64_t reader_error_ns; /* when the reader last logged a refusal (reader thread) */
        uint64_t let_go;          /* held entries let go: not run here, or taken over by
                                  * another host meanwhile (reader thread only) */

        redisContext *m; /* the mover's (store-redis-sched.c) */
        pthread_t mover;
        bool mover_started;
        uint64_t moved; /* held jobs this host moved to the stream (mover thread only) */
} RedisStore;

static inline RedisStore *redis_of(Store *s)
{
        return s->backend_data;
}

/* ---- store-redis.c ---- */

/*
 * redis_connect - a connection to @addr: "unix:/path", "/path", or "host:port" (port
 * 6379 when absent), with REDIS_IO_TIMEOUT_S on every call. NULL with the reason in
 * @why. Context: any thread.
 */
redisContext *redis_connect(const char *addr, char *why, size_t why_size);

/* redis_connect_within - the same with @timeout_ms for the connect and every call (a
 * host name is still resolved by getaddrinfo(), which has no timeout). */
redisContext *redis_connect_within(const char *addr, uint64_t timeout_ms, char *why,
                                   size_t why_size);

/* redis_ensure - *@c, connected again to @s's server if a failure dropped it; NULL when
 * the server is away (@why says why): at once, without a try, while the link's pause
 * runs (RedisLink). A failed connect marks the link away. Context: the thread that owns
 * *@c. */
redisContext *redis_ensure(Store *s, redisContext **c, char *why, size_t why_size);

/* redis_query - one command on the query connection, under its lock; reconnects once
 * after a loss. NULL when the server cannot be reached (the link is marked away: one
 * line, not one per call). Context: any thread; blocks it for one round trip, at most
 * REDIS_QUERY_TIMEOUT_MS; none while the link is away and its pause runs. */
redisReply *redis_query(Store *s, int argc, const char **argv, const size_t *len);

/* redis_call_failed - a call on *@c got no answer: a timeout (a server that hangs) marks
 * the link away; a dropped connection is connected again at once, and only a connect
 * that fails marks the link away (a connection left over from before a restart of the
 * server is not an outage). Return true when *@c is connected again (the caller may try
 * once more). Context: the thread that owns *@c. */
bool redis_call_failed(Store *s, redisContext **c);

/* redis_link_failed - a call on a connection failed (@why): the link is away from now
 * (its first failure logs one line; later ones a line each REDIS_LINK_NOTE_S) and the
 * next try waits for the pause. Context: any thread. */
void redis_link_failed(Store *s, const char *why);

/* redis_link_ok - a call sent at @asked_ns (CLOCK_MONOTONIC ns, taken before it was sent) was answered: a link
 * that was away since before @asked_ns is back (one line). An answer to a call sent
 * before the link went away says nothing of now (another thread's reply read late, while
 * this one already failed), so it changes nothing. Cheap when the link was never away
 * (one atomic load). Context: any thread. */
void redis_link_ok(Store *s, uint64_t asked_ns);

/* redis_link_away - the server is known to be away now (a hint, read unlocked). */
bool redis_link_away(RedisStore *q);

/* redis_link_retry_ms - when a client should try again: the time until the link's next
 * try, at least REDIS_LINK_RETRY_MIN_MS; that minimum while the link is up. */
uint64_t redis_link_retry_ms(RedisStore *q);

/* redis_stopping - store_fleet_stop() was called: the reader and the mover leave. */
bool redis_stopping(RedisStore *q);

/* redis_pause - sleep @ms in steps of at most 50 ms, returning early once stopping. */
void redis_pause(RedisStore *q, uint64_t ms);

#endif
