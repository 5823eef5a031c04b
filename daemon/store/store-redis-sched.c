/* SPDX-License-Identifier: MIT */
/*
 * store-redis-sched.c — job scheduling in a fleet (store-redis.h): held jobs in one
 * sorted set that every host moves to the shared queue when they are due, cancels of
 * held jobs, and idempotency keys shared by the fleet.
 *
 * What lives in Redis:
 *   fiberd:scheduled    a sorted set of the ids of the fleet's held jobs, scored by
 *                       their due time (CLOCK_REALTIME ms): a submission with a due time
 *                       ahead (state scheduled) and a failed run with attempts left
 *                       (state retrying). Such a job's hash says its state and its
 *                       schedule (the `sched` field); it is on no stream until it is due.
 *   fiberd:key:<uid>:<key>
 *                       the id of the job an owner's idempotency key names: claimed with
 *                       SET NX (a minute's expiry) before the job is made, made to last
 *                       (PERSIST) by the job's first write, and given the key window
 *                       (EXPIRE) by its final one.
 *
 * Who moves a due job: every host, as Sidekiq's schedule set is polled by every
 * process. Each host's mover thread (a plain pthread with its own connection, beside the
 * reader) runs sched_move_script at most SCHED_POLL_MS apart, sooner when the earliest
 * due time is nearer: one script takes the members due by now off the set (ZREM), sets
 * their hash's state to queued and XADDs them to the stream, in one atomic step, so a
 * job is moved once however many hosts poll at once, and any host that is up moves it.
 * A job whose hosts were all down when it came due moves at the first poll of the
 * first host back. The reader threads then take it as any submission. A job is late by
 * at most SCHED_POLL_MS plus one stream read. The due time is compared with the clock of
 * the moving host: the hosts' clocks should agree (NTP), as created_ms already assumes.
 *
 * Retries: a host whose run of a fleet job fails with attempts left hands the job back
 * (jobtable.c): its record (retrying, the due time, the errors) joins the set and its
 * stream entry is acknowledged, in one MULTI of the store thread (redis_sched_append(),
 * store-redis.c's commit), so the next attempt runs on whichever host is up then.
 *
 * A cancel (job.cancel of a held job, from any host: redis_cancel_held()) is the
 * mirror of a move: ZREM, and only when it took the member out, the final record, in
 * one script. The move and the cancel cannot both win.
 */
#include "daemon/store/store-redis.h"
#include "daemon/obs/log.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SCHED_POLL_MS 50         /* a due job waits at most this long for a mover */
#define SCHED_MOVE_COUNT 128     /* jobs moved per script; a full batch polls again at once */
#define SCHED_KEY_CLAIM_MS 60000 /* a claimed key lasts this long without its job's write */

/*
 * KEYS[1] fiberd:scheduled, KEYS[2] the stream; ARGV[1] now (ms), ARGV[2] how many at
 * most. A member whose hash is gone (retention, a discard) or no longer held (a cancel
 * that lost its ZREM cannot happen; a stale member can) only leaves the set.
 * Returns {members taken off, jobs moved, the earliest due time left or -1}.
 */
static const char sched_move_script[] =
        "local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, "
        "tonumber(ARGV[2]))\n"
        "local moved = 0\n"
        "for _, id in ipairs(ids) do\n"
        "  redis.call('ZREM', KEYS[1], id)\n"
        "  local job = 'fiberd:job:' .. id\n"
        "  local state = redis.call('HGET', job, 'state')\n"
        "  if state == 'scheduled' or state == 'retrying' then\n"
        "    redis.call('HSET', job, 'state', 'queued')\n"
        "    redis.call('XADD', KEYS[2], '*', 'id', id)\n"
        "    moved = moved + 1\n"
        "  end\n"
        "end\n"
        "local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
        "local next_ms = -1\n"
        "if first[2] then next_ms = tonumber(first[2]) end\n"
        "return {#ids, moved, next_ms}\n";

/*
 * KEYS[1] fiberd:scheduled, KEYS[2] the job's hash, KEYS[3] fiberd:finished, KEYS[4]
 * (optional) its idempotency key; ARGV: id, state, error code, message, finished_ms,
 * the record's expiry (s), the key's (s), the host writing it. Returns 1 when the job
 * was held and is final now, 0 when the set no longer held it.
 */
static const char sched_cancel_script[] =
        "if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end\n"
        "redis.call('HSET', KEYS[2], 'state', ARGV[2], 'error_code', ARGV[3], "
        "'error_message', ARGV[4], 'finished_ms', ARGV[5], 'node', ARGV[8])\n"
        "redis.call('EXPIRE', KEYS[2], ARGV[6])\n"
        "redis.call('ZADD', KEYS[3], ARGV[5], ARGV[1])\n"
        "if KEYS[4] then redis.call('EXPIRE', KEYS[4], ARGV[7]) end\n"
        "return 1\n";

/* KEYS[1] the key; ARGV[1] the job id, ARGV[2] the claim's expiry (ms). Returns 0 when
 * claimed, else the id the key names. */
static const char sched_claim_script[] =
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end\n"
        "return tonumber(redis.call('GET', KEYS[1])) or 0\n";

/* KEYS[1] the key; ARGV[1] the job id: the key goes only while it names that job. */
static const char sched_release_script[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
        "return 0\n";

/* The Redis key of @owner's idempotency key @key into @buf; false when too long. */
static bool idem_key(char *buf, size_t size, uid_t owner, const char *key)
{
        int n = snprintf(buf, size, REDIS_IDEM_KEY_FMT, (unsigned)owner, key);

        return n > 0 && (size_t)n < size;
}

/* ------------------------------------------------------------------ commit ------ */

void redis_sched_append(RedisStore *q, redisContext *c, const StoreRecord *rec, size_t *n)
{
        char key[256];

        if (rec->fleet_held) {
                redisAppendCommand(c, "ZADD %s %" PRIu64 " %" PRIu64, REDIS_KEY_SCHEDULED,
                                   rec->due_ms, rec->id);
                (*n)++;
        }
        if (!rec->key || !idem_key(key, sizeof(key), rec->owner, rec->key))
                return;
        if (job_state_final(rec->state)) {
                redisAppendCommand(c, "EXPIRE %s %" PRIu64, key, q->key_window_s);
                (*n)++;
        } else if (rec->args) { /* its first write: the claim lasts while it is not final */
                redisAppendCommand(c, "PERSIST %s", key);
                (*n)++;
        }
}

/* ------------------------------------------------------------------ mover ------- */

/* One run of sched_move_script; the earliest due time left in *@next_ms (0: none).
 * Return: the members taken off the set; -1 on a lost connection or an error. */
static long sched_move(RedisStore *q, uint64_t now_ms, uint64_t *next_ms)
{
        redisReply *rep = redisCommand(q->m, "EVAL %s 2 %s %s %" PRIu64 " %d", sched_move_script,
                                       REDIS_KEY_SCHEDULED, q->stream, now_ms, SCHED_MOVE_COUNT);
        long taken = -1;

        *next_ms = 0;
        if (!rep)
                return -1;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 3 &&
            rep->element[0]->type == REDIS_REPLY_INTEGER) {
                taken = (long)rep->element[0]->integer;
                q->moved += (uint64_t)rep->element[1]->integer;
                if (rep->element[2]->integer > 0)
                        *next_ms = (uint64_t)rep->element[2]->integer;
        } else if (rep->type == REDIS_REPLY_ERROR) {
                log_msg(LOG_ERR, "job store: redis: moving due jobs: %s", rep->str);
        }
        freeReplyObject(rep);
        return taken;
}

static void *sched_mover(void *arg)
{
        Store *s = arg;
        RedisStore *q = redis_of(s);
        bool logged = false;

        while (!redis_stopping(q)) {
                char why[256] = "";
                uint64_t now_ms, next_ms, wait_ms = SCHED_POLL_MS;
                long taken;

                if (!redis_ensure(s, &q->m, why, sizeof(why))) {
                        /* the reader logs the server's absence */
                        redis_pause(q, 500);
                        continue;
                }
                now_ms = job_now_ms();
                taken = sched_move(q, now_ms, &next_ms);
                if (taken < 0) {
                        if (!logged)
                                log_msg(LOG_WARNING,
                                        "job store: redis: due jobs cannot be moved now; "
                                        "retrying");
                        logged = true;
                        redis_pause(q, 500);
                        continue;
                }
                logged = false;
                if (taken == SCHED_MOVE_COUNT)
                        continue; /* more may be due */
                if (next_ms)
                        wait_ms = next_ms <= now_ms ? 1 : MIN(next_ms - now_ms, wait_ms);
                redis_pause(q, wait_ms);
        }
        if (q->m) {
                redisFree(q->m);
                q->m = NULL;
        }
        return NULL;
}

int redis_sched_start(Store *s)
{
        RedisStore *q = redis_of(s);
        int r = -pthread_create(&q->mover, NULL, sched_mover, s);

        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the job store's mover thread: %s", strerror(-r));
                return r;
        }
        q->mover_started = true;
        return 0;
}

void redis_sched_stop(Store *s)
{
        RedisStore *q = redis_of(s);

        if (!q->mover_started)
                return;
        pthread_join(q->mover, NULL); /* redis_stopping() is true: it leaves */
        q->mover_started = false;
        log_msg(LOG_INFO, "job store: moved %llu due jobs to stream %s",
                (unsigned long long)q->moved, q->stream);
}

/* ------------------------------------------------------------------ queries ----- */

/* The integer of an EVAL reply; -1 (and logged) for anything else. */
static long long sched_integer(Store *s, redisReply *rep, const char *what)
{
        long long v = -1;

        if (!rep)
                return -1; /* logged by redis_query() */
        if (rep->type == REDIS_REPLY_INTEGER)
                v = rep->integer;
        else
                log_msg(LOG_ERR, "job store: redis %s: %s: %s", s->path, what,
                        rep->type == REDIS_REPLY_ERROR ? rep->str : "an unexpected reply");
        freeReplyObject(rep);
        return v;
}

int redis_cancel_held(Store *s, const StoreRecord *rec)
{
        RedisStore *q = redis_of(s);
        char job[64], idbuf[24], fin[24], expire[24], window[24], key[256];
        bool with_key = rec->key && idem_key(key, sizeof(key), rec->owner, rec->key);
        const char *argv[] = {"EVAL",
                              sched_cancel_script,
                              with_key ? "4" : "3",
                              REDIS_KEY_SCHEDULED,
                              job,
                              REDIS_KEY_FINISHED,
                              with_key ? key : NULL,
                              idbuf,
                              job_state_name(rec->state),
                              rec->error_code ? rec->error_code : "",
                              rec->error_message ? rec->error_message : "",
                              fin,
                              expire,
                              window,
                              q->consumer};
        const char *args[ELEMENTSOF(argv)];
        int argc = 0;
        long long v;

        snprintf(job, sizeof(job), REDIS_JOB_KEY_FMT, rec->id);
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, rec->id);
        snprintf(fin, sizeof(fin), "%" PRIu64, rec->finished_ms);
        snprintf(expire, sizeof(expire), "%" PRIu64, q->expire_s);
        snprintf(window, sizeof(window), "%" PRIu64, q->key_window_s);
        for (size_t i = 0; i < ELEMENTSOF(argv); i++)
                if (argv[i])
                        args[argc++] = argv[i];
        v = sched_integer(s, redis_query(s, argc, args, NULL), "cancelling a held job");
        return v == 1 ? 0 : v == 0 ? -EALREADY : -EIO;
}

int redis_key_claim(Store *s, uid_t owner, const char *key, uint64_t id, uint64_t *ret_existing)
{
        char name[256], idbuf[24], ms[24];
        const char *argv[] = {"EVAL", sched_claim_script, "1", name, idbuf, ms};
        long long v;

        if (!idem_key(name, sizeof(name), owner, key))
                return -ENAMETOOLONG;
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
        snprintf(ms, sizeof(ms), "%d", SCHED_KEY_CLAIM_MS);
        v = sched_integer(s, redis_query(s, (int)ELEMENTSOF(argv), argv, NULL),
                          "claiming an idempotency key");
        if (v < 0)
                return -EIO;
        *ret_existing = (uint64_t)v;
        return 0;
}

void redis_key_release(Store *s, uid_t owner, const char *key, uint64_t id)
{
        char name[256], idbuf[24];
        const char *argv[] = {"EVAL", sched_release_script, "1", name, idbuf};

        if (!idem_key(name, sizeof(name), owner, key))
                return;
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
        (void)sched_integer(s, redis_query(s, (int)ELEMENTSOF(argv), argv, NULL),
                            "releasing an idempotency key");
}
