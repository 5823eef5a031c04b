/* SPDX-License-Identifier: MIT */
/*
 * store-redis-sched.c — job scheduling in a fleet (store-redis-sched.h): held jobs in one
 * sorted set that every host moves to the shared queue when they are due, jobs waiting
 * for others (`after`), cancels of both, and idempotency keys shared by the fleet.
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
 *   fiberd:dependents:<id>
 *                       a set of the waiting jobs that run after job <id>, while <id>
 *                       has not ended; a waiting job's hash counts its dependencies not
 *                       ended yet (`deps_pending`).
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
 * Dependencies, as pueue's --after and Celery's chains, shared: a fleet submission with
 * `after` is written `waiting`, and in the same MULTI sched_wait_script puts it in the
 * set of each dependency not ended (a dependency that ended otherwise than done fails
 * it at once). Every commit that makes jobs final runs sched_release_script over them,
 * after their writes: their dependents count down, and one with none left goes to the
 * stream (or the schedule set, its run_at ahead); any other end fails the dependents,
 * and theirs in turn. Both scripts run inside transactions, so a submission and the
 * end of its dependency are ordered: the dependency is seen ended, or it sees the
 * dependent in its set. Whichever host ends a dependency releases what waited on it.
 *
 * A cancel (job.cancel of a held or waiting job, from any host: redis_cancel_held()) is
 * the mirror of a move: ZREM (a waiting job: its state still waiting), and only when it
 * took the member out, the final record, in one script; the jobs waiting on it fail.
 * The move and the cancel cannot both win.
 */
#include "daemon/store/store-redis-sched.h"
#include "daemon/obs/log.h"
#include "ipc/protocol.h"
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
 * Dependencies: what the scripts below share (a script cannot call another, so each
 * begins with these). A waiting job's hash has `deps_pending` (its dependencies not
 * ended yet), `due_ms` (its run_at: scheduled rather than queued when released before
 * it) and, with an idempotency key, `key_name`; each dependency not ended has the set
 * fiberd:dependents:<id> of the jobs waiting on it.
 *   release(id)      a waiting job whose dependencies are all done: scheduled (the set)
 *                    when its due time is ahead, else queued (the stream);
 *   finish(id, ...)  a job ended without running: its final record, retention, key;
 *   ended(todo)      for each {id, state} that ended: its dependents count one down
 *                    (done) or fail (any other end), and a failed one's own dependents
 *                    are ended in turn.
 * ARGV[1] .. ARGV[4] are always the stream, now (ms), the record's expiry (s) and the
 * key's (s).
 */
#define SCHED_LUA_DEPS                                                                             \
        "local stream, now = ARGV[1], tonumber(ARGV[2])\n"                                         \
        "local expire, window = ARGV[3], ARGV[4]\n"                                                \
        "local function release(id)\n"                                                             \
        "  local job = 'fiberd:job:' .. id\n"                                                      \
        "  local due = tonumber(redis.call('HGET', job, 'due_ms') or '0') or 0\n"                  \
        "  if due > now then\n"                                                                    \
        "    redis.call('HSET', job, 'state', 'scheduled')\n"                                      \
        "    redis.call('ZADD', '" REDIS_KEY_SCHEDULED "', due, id)\n"                             \
        "  else\n"                                                                                 \
        "    redis.call('HSET', job, 'state', 'queued')\n"                                         \
        "    redis.call('XADD', stream, '*', 'id', id)\n"                                          \
        "  end\n"                                                                                  \
        "end\n"                                                                                    \
        "local function finish(id, state, code, msg)\n"                                            \
        "  local job = 'fiberd:job:' .. id\n"                                                      \
        "  redis.call('HSET', job, 'state', state, 'error_code', code, 'error_message', msg, "     \
        "'finished_ms', now)\n"                                                                    \
        "  redis.call('EXPIRE', job, expire)\n"                                                    \
        "  redis.call('ZADD', '" REDIS_KEY_FINISHED "', now, id)\n"                                \
        "  local key = redis.call('HGET', job, 'key_name')\n"                                      \
        "  if key then redis.call('EXPIRE', key, window) end\n"                                    \
        "end\n"                                                                                    \
        "local function ended(todo)\n"                                                             \
        "  local i = 1\n"                                                                          \
        "  while i <= #todo do\n"                                                                  \
        "    local dep, state = todo[i][1], todo[i][2]\n"                                          \
        "    i = i + 1\n"                                                                          \
        "    local set = 'fiberd:dependents:' .. dep\n"                                            \
        "    local members = redis.call('SMEMBERS', set)\n"                                        \
        "    if #members > 0 then redis.call('DEL', set) end\n"                                    \
        "    for _, m in ipairs(members) do\n"                                                     \
        "      local job = 'fiberd:job:' .. m\n"                                                   \
        "      if redis.call('HGET', job, 'state') == 'waiting' then\n"                            \
        "        if state == 'done' then\n"                                                        \
        "          if redis.call('HINCRBY', job, 'deps_pending', -1) <= 0 then release(m) end\n"   \
        "        else\n"                                                                           \
        "          finish(m, 'failed', 'FAILED_PRECONDITION', 'job ' .. dep .. "                   \
        "', which this job runs after, ended ' .. state)\n"                                        \
        "          todo[#todo + 1] = {m, 'failed'}\n"                                              \
        "        end\n"                                                                            \
        "      end\n"                                                                              \
        "    end\n"                                                                                \
        "  end\n"                                                                                  \
        "end\n"

/*
 * A fleet submission that waits (in its first write's MULTI, after its HSET): ARGV[5]
 * the job, ARGV[6] its due time, ARGV[7] its key's name ("" = none), ARGV[8..] the jobs
 * it runs after. A dependency that is done, or whose record is gone (it ended long
 * ago), is not waited for; one that ended otherwise fails the job at once (the
 * submission checked them, but they may have ended since); each other one gets the job
 * in its set. None left: released at once. Returns how many it waits for.
 */
#define SCHED_LUA_WAIT                                                                             \
        "local id = ARGV[5]\n"                                                                     \
        "local job = 'fiberd:job:' .. id\n"                                                        \
        "redis.call('HSET', job, 'due_ms', ARGV[6])\n"                                             \
        "if ARGV[7] ~= '' then redis.call('HSET', job, 'key_name', ARGV[7]) end\n"                 \
        "local pending = 0\n"                                                                      \
        "for i = 8, #ARGV do\n"                                                                    \
        "  local dep = ARGV[i]\n"                                                                  \
        "  local state = redis.call('HGET', 'fiberd:job:' .. dep, 'state')\n"                      \
        "  if state == 'failed' or state == 'cancelled' or state == 'dead' then\n"                 \
        "    finish(id, 'failed', 'FAILED_PRECONDITION', 'job ' .. dep .. "                        \
        "', which this job runs after, ended ' .. state)\n"                                        \
        "    return -1\n"                                                                          \
        "  elseif state and state ~= 'done' then\n"                                                \
        "    if redis.call('SADD', 'fiberd:dependents:' .. dep, id) == 1 then\n"                   \
        "      pending = pending + 1\n"                                                            \
        "    end\n"                                                                                \
        "  end\n"                                                                                  \
        "end\n"                                                                                    \
        "if pending == 0 then release(id) else "                                                   \
        "redis.call('HSET', job, 'deps_pending', pending) end\n"                                   \
        "return pending\n"
static const char sched_wait_script[] = SCHED_LUA_DEPS SCHED_LUA_WAIT;

/*
 * Every final write of a commit (after the batch's HSETs): ARGV[5..] pairs of a job and
 * the final state it reached; the jobs waiting on them go on or fail.
 */
#define SCHED_LUA_RELEASE                                                                          \
        "local todo = {}\n"                                                                        \
        "for i = 5, #ARGV, 2 do todo[#todo + 1] = {ARGV[i], ARGV[i + 1]} end\n"                    \
        "ended(todo)\n"                                                                            \
        "return #todo\n"
static const char sched_release_script[] = SCHED_LUA_DEPS SCHED_LUA_RELEASE;

/*
 * A cancel: ARGV[5] the job, ARGV[6] the state it ends in, ARGV[7] error code, ARGV[8]
 * message, ARGV[9] the host writing it, ARGV[10] its key's name ("" = none). A held job
 * ends only when the cancel takes it out of fiberd:scheduled (else a mover won); a
 * waiting one only while its hash still says waiting. Its dependents fail. Returns 1
 * when it ended now, 0 when it was not held or waiting any more.
 */
#define SCHED_LUA_CANCEL                                                                           \
        "local id = ARGV[5]\n"                                                                     \
        "local job = 'fiberd:job:' .. id\n"                                                        \
        "local state = redis.call('HGET', job, 'state')\n"                                         \
        "if state == 'waiting' then\n"                                                             \
        "  if ARGV[10] ~= '' then redis.call('HSET', job, 'key_name', ARGV[10]) end\n"             \
        "elseif redis.call('ZREM', '" REDIS_KEY_SCHEDULED "', id) == 0 then\n"                     \
        "  return 0\n"                                                                             \
        "elseif ARGV[10] ~= '' then\n"                                                             \
        "  redis.call('HSET', job, 'key_name', ARGV[10])\n"                                        \
        "end\n"                                                                                    \
        "finish(id, ARGV[6], ARGV[7], ARGV[8])\n"                                                  \
        "redis.call('HSET', job, 'node', ARGV[9])\n"                                               \
        "ended({{id, ARGV[6]}})\n"                                                                 \
        "return 1\n"
static const char sched_cancel_script[] = SCHED_LUA_DEPS SCHED_LUA_CANCEL;

/* KEYS[1] the key; ARGV[1] the job id, ARGV[2] the claim's expiry (ms). Returns 0 when
 * claimed, else the id the key names. */
static const char sched_claim_script[] =
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 0 end\n"
        "return tonumber(redis.call('GET', KEYS[1])) or 0\n";

/* KEYS[1] the key; ARGV[1] the job id: the key goes only while it names that job. */
static const char sched_unclaim_script[] =
        "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end\n"
        "return 0\n";

/* The Redis key of @owner's idempotency key @key into @buf; false when too long. */
static bool idem_key(char *buf, size_t size, uid_t owner, const char *key)
{
        int n = snprintf(buf, size, REDIS_IDEM_KEY_FMT, (unsigned)owner, key);

        return n > 0 && (size_t)n < size;
}

/* ------------------------------------------------------------------ commit ------ */

/* The arguments every SCHED_LUA_DEPS script begins with, into @argv (4 slots, numbers in
 * @num: 3 of 24 bytes). */
static void deps_args(RedisStore *q, const char **argv, char (*num)[24], uint64_t now_ms)
{
        snprintf(num[0], sizeof(num[0]), "%" PRIu64, now_ms);
        snprintf(num[1], sizeof(num[1]), "%" PRIu64, q->expire_s);
        snprintf(num[2], sizeof(num[2]), "%" PRIu64, q->key_window_s);
        argv[0] = q->stream;
        argv[1] = num[0];
        argv[2] = num[1];
        argv[3] = num[2];
}

/* The wait script of a fleet submission that waits for @rec->after. */
static void append_wait(RedisStore *q, redisContext *c, const StoreRecord *rec, size_t *n)
{
        const char *argv[8 + IPC_AFTER_MAX];
        char num[3][24], id[24], due[24], deps[IPC_AFTER_MAX][24], key[256] = "";
        size_t k = 0, n_after = MIN(rec->n_after, (size_t)IPC_AFTER_MAX);

        if (rec->key && !idem_key(key, sizeof(key), rec->owner, rec->key))
                key[0] = '\0';
        argv[k++] = "EVAL";
        argv[k++] = sched_wait_script;
        argv[k++] = "0";
        deps_args(q, argv + k, num, job_now_ms());
        k += 4;
        snprintf(id, sizeof(id), "%" PRIu64, rec->id);
        snprintf(due, sizeof(due), "%" PRIu64, rec->due_ms);
        argv[k++] = id;
        argv[k++] = due;
        argv[k++] = key;
        for (size_t i = 0; i < n_after; i++) {
                snprintf(deps[i], sizeof(deps[i]), "%" PRIu64, rec->after[i]);
                argv[k++] = deps[i];
        }
        redisAppendCommandArgv(c, (int)k, argv, NULL);
        (*n)++;
}

void redis_sched_append(RedisStore *q, redisContext *c, const StoreRecord *rec, size_t *n)
{
        char key[256];

        if (rec->enqueue && rec->state == JOB_WAITING)
                append_wait(q, c, rec, n);
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

int redis_sched_release_append(RedisStore *q, redisContext *c, const RedisEnded *ended,
                               size_t n_ended, size_t *n)
{
        const char **argv = malloc((7 + 2 * n_ended) * sizeof(*argv));
        char(*ids)[24] = malloc(n_ended * sizeof(*ids));
        char num[3][24];
        size_t k = 0;

        if (!argv || !ids) {
                free(argv);
                free(ids);
                return -ENOMEM;
        }
        argv[k++] = "EVAL";
        argv[k++] = sched_release_script;
        argv[k++] = "0";
        deps_args(q, argv + k, num, job_now_ms());
        k += 4;
        for (size_t f = 0; f < n_ended; f++) {
                snprintf(ids[f], sizeof(ids[f]), "%" PRIu64, ended[f].id);
                argv[k++] = ids[f];
                argv[k++] = job_state_name(ended[f].state);
        }
        redisAppendCommandArgv(c, (int)k, argv, NULL); /* copies */
        (*n)++;
        free(argv);
        free(ids);
        return 0;
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
                        /* the link logs the server's absence (store-redis-conn.c) */
                        redis_pause(q, MIN(redis_link_retry_ms(q), (uint64_t)500));
                        continue;
                }
                uint64_t asked = clock_now_ns(CLOCK_MONOTONIC);
                now_ms = job_now_ms();
                taken = sched_move(q, now_ms, &next_ms);
                if (taken < 0 && q->m->err) { /* no answer: the link's line, not ours */
                        (void)redis_call_failed(s, &q->m);
                        redis_pause(q, MIN(redis_link_retry_ms(q), (uint64_t)500));
                        continue;
                }
                redis_link_ok(s, asked);
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
        pthread_setname_np(q->mover, "fiberd-rd-move"); /* its CPU apart: stages.sh */
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

/* The integer of an EVAL reply; -2 for no reply (the server cannot be reached: the link
 * says so, redis_query()); -1 (and logged) for anything else. */
static long long sched_integer(Store *s, redisReply *rep, const char *what)
{
        long long v = -1;

        if (!rep)
                return -2;
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
        char num[3][24], id[24], key[256] = "";
        const char *argv[13] = {"EVAL", sched_cancel_script, "0"};
        long long v;

        if (rec->key && !idem_key(key, sizeof(key), rec->owner, rec->key))
                key[0] = '\0';
        deps_args(q, argv + 3, num, rec->finished_ms);
        snprintf(id, sizeof(id), "%" PRIu64, rec->id);
        argv[7] = id;
        argv[8] = job_state_name(rec->state);
        argv[9] = rec->error_code ? rec->error_code : "";
        argv[10] = rec->error_message ? rec->error_message : "";
        argv[11] = q->consumer;
        argv[12] = key;
        v = sched_integer(s, redis_query(s, (int)ELEMENTSOF(argv), argv, NULL),
                          "cancelling a held job");
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
        if (v < 0) /* no answer, or an error (logged): the submission answers UNAVAILABLE */
                return -ENOTCONN;
        *ret_existing = (uint64_t)v;
        return 0;
}

void redis_key_release(Store *s, uid_t owner, const char *key, uint64_t id)
{
        char name[256], idbuf[24];
        const char *argv[] = {"EVAL", sched_unclaim_script, "1", name, idbuf};

        if (!idem_key(name, sizeof(name), owner, key))
                return;
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
        (void)sched_integer(s, redis_query(s, (int)ELEMENTSOF(argv), argv, NULL),
                            "releasing an idempotency key");
}
