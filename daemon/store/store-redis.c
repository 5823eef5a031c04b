/* SPDX-License-Identifier: MIT */
/*
 * store-redis.c — the Redis backend of the job store (store.h): many fiberd hosts share
 * one queue, in the way Sidekiq and Faktory keep theirs in Redis, on Redis Streams.
 *
 * What lives in Redis (keys fixed, the stream and group names from [store]):
 *   fiberd:next_id      the last job id handed out: a host takes ids in blocks of
 *                       REDIS_ID_BLOCK (INCRBY, store_new_id()), so no host ever hands
 *                       out an id another host had, also after a restart of all of
 *                       them; one host's ids rise, the fleet's interleave by block;
 *   fiberd:job:<id>     a hash, the job record (StoreRecord's fields, plus `node`: the
 *                       consumer that wrote it last); EXPIRE'd retention_s after the job
 *                       reached a final state, so retention by time is Redis's job;
 *   fiberd:index        a sorted set of every job id (score = id): job.list's order;
 *                       an id whose hash expired is dropped when a listing meets it;
 *   fiberd:finished     a sorted set of the final jobs' ids (score = finished_ms): the
 *                       oldest beyond [jobs] retention_max lose their hash and their
 *                       index entry (commit_trim_script by EVALSHA, once per batch,
 *                       inside its MULTI), so retention by count holds fleet-wide; the newest
 *                       final job always stays, for its waiters, as in the job table;
 *   <stream>            one entry per fleet submission, {id: <id>}, read by every host
 *                       through the consumer group <group>;
 *   fiberd:host:<name>:plugins, fiberd:host:<name>:meta
 *                       one host's crash-only plugin state (crash.h): a hash of its
 *                       plugin files (field = path, value = the StorePluginFile packed
 *                       as a msgpack map) and one of its meta integers (the "clean"
 *                       flag; the pauses of pause.c, so a pause holds this host's
 *                       jobs, not the fleet's). <name> is the host's stable name, `node` when set, else
 *                       its hostname (never hostname.pid: strikes must outlive the run
 *                       that crashed). The crash note itself stays on the host (crash.c).
 *   fiberd:host:<name>:local
 *                       a set of the ids of this host's jobs that are not on the stream
 *                       (submitted with fds, below) and not final yet: SADD in the MULTI
 *                       of a job's first write, SREM in the MULTI of its final one;
 *   fiberd:scheduled, fiberd:key:<uid>:<key>, fiberd:dependents:<id>
 *                       the fleet's held jobs by due time, its idempotency keys and the
 *                       jobs waiting on each job: store-redis-sched.c, which says what
 *                       they hold and who moves a held or released job to the stream;
 *   fiberd:cancels      a sorted set of the ids of jobs cancelled through a host that does
 *                       not run them (score: when, ms): every host's reader looks every
 *                       200 ms and ends those it runs; the job's final write (put_script)
 *                       drops its id, and ids older than an hour are dropped;
 *   fiberd:schedules, fiberd:schedules:ticks, fiberd:schedules:version
 *                       the fleet's periodic schedules (schedule.add), where their ticks
 *                       stand and a counter of their changes: store-redis-periodic.c.
 *
 * Writes (the store thread, store.c's group commit): a batch is one MULTI/EXEC sent as
 * one pipeline, so a burst of submissions costs one round trip, as one fsync does in
 * the sqlite backend. A fleet submission (StoreRecord.enqueue) is HSET + ZADD + XADD in
 * that transaction: when job.submit answers, the job is in Redis, as durable as the
 * server's own persistence makes it (appendonly yes, appendfsync always for a promise
 * like sqlite's). A job's writes go through put_script (EVALSHA: an HSET that never
 * replaces a final state by another one, nor by running or retrying, so a job has one
 * final state even when two hosts ran it, or a write reached the server after its
 * sender gave up on it; a write of a state the script would always let through, such
 * as a submission's queued, is a plain HSET); the one that makes it final also EXPIREs
 * the hash, adds it to fiberd:finished and XACKs the job's stream entry, in the same
 * script after its HSET, so that a write the server refuses acknowledges nothing. A fleet
 * submission with a due time ahead is HSET + ZADD of the schedule set instead of XADD,
 * one that waits for others is HSET + a script joining their sets, and a retry this
 * host hands back to the fleet is HSET + ZADD + XACK (StoreRecord.fleet_held;
 * redis_sched_append()); a batch with final writes releases their dependents
 * (redis_sched_release_append()) before its retention trim, all but a job.run's: its
 * first write, final already, is a plain HSET, EXPIRE and ZADD (commit_append()), and
 * nothing can wait on a job whose record did not exist.
 *
 * Reads of the queue (the reader thread, a plain pthread with its own connection,
 * never a worker): XREADGROUP ... BLOCK (at most 500 ms, so store_fleet_stop() is
 * prompt) hands each entry's job to the job table through the `take` callback (main.c),
 * which queues it there as a restored job (jobtable_restore()). The entry stays pending
 * in the group, owned by this host's consumer, until the job is final (the XACK above).
 * While this host holds an entry, the reader re-claims it every claim_idle_ms / 3 (the
 * heartbeat, heartbeat_script: XCLAIM ... JUSTID, resetting its idle time), but only an
 * entry whose job the job table still holds as its own (StoreFleetHooks.runs) and that
 * is still pending for this consumer: one another host took over while this one could
 * not reach the server is let go, never claimed back, and one of a job not run here
 * idles until any host takes it over. An entry idle longer than claim_idle_ms belongs to
 * a host that stopped, and XAUTOCLAIM gives it to this one (polled at random periods
 * around claim_idle_ms / 3, so that no host is always first to a due entry); after a heartbeat came late
 * (the server or this host stalled: every host's heartbeats stalled with it), no entry
 * is taken over until claim_idle_ms passed, so live hosts claim theirs again first.
 * Its record then says what happened: still queued runs; running ends INTERRUPTED, or
 * runs again with attempt + 1 when the plugin is retry-safe, exactly as the sqlite
 * recovery at start-up does. At start, the reader first re-reads this consumer's own
 * pending entries (a host restarted under the same `node` name takes its jobs back).
 *
 * Queries (job.status, job.wait, job.list for ids not in the local table, and
 * store_new_id()) share a third connection under a mutex; each blocks the calling
 * worker for one round trip (tens of microseconds on a local socket).
 *
 * When the server goes away every connection reports to the link (RedisLink,
 * store-redis-conn.c): one line each way, calls that fail at once while it is away
 * (submissions answer UNAVAILABLE with a retry hint: -ENOTCONN from store_new_id()),
 * and commits that fail with -EIO, which the store holds and tries again (store.c).
 *
 * A job submitted with file descriptors (SCM_RIGHTS) is not a fleet submission: fds
 * cannot cross hosts, so it runs on the host that received it and never goes on the
 * stream (its record is still written here, for job.status through any host). No other
 * host can take it over, so its host keeps it in fiberd:host:<name>:local until it is
 * final; at start-up (redis_load(), store_load()) every id left there, by a host that
 * died or stopped with jobs queued, goes through the recovery of the single-host
 * stores (jobtable_restore()): queued with fds or running, it ends failed INTERRUPTED,
 * and that final write takes it out of the set. A host that never starts again under
 * the same name (`node`, or the hostname) leaves its local jobs as they were.
 *
 * job.list through a host reads the records it does not hold a page of ids at a time
 * (store_fetch_many()): one HGETALL per job, all of a page sent as one pipeline on the
 * query connection and answered in one round trip, not one round trip per job.
 */
#include "daemon/store/store-redis-conn.h"
#include "daemon/store/store-redis-periodic.h"
#include "daemon/store/store-redis-sched.h"
#include "daemon/obs/log.h"
#include "ipc/encoder.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ connection -- */

/* ------------------------------------------------------------------ commands ---- */

/* RedisCmd - one command's arguments, numbers formatted in place. */
typedef struct RedisCmd {
        int argc;
        const char *argv[REDIS_CMD_MAX_ARGS];
        size_t len[REDIS_CMD_MAX_ARGS];
        char num[REDIS_CMD_MAX_ARGS][24];
} RedisCmd;

static void cmd_bin(RedisCmd *c, const void *p, size_t len)
{
        c->argv[c->argc] = p;
        c->len[c->argc] = len;
        c->argc++;
}

static void cmd_str(RedisCmd *c, const char *s)
{
        cmd_bin(c, s ? s : "", s ? strlen(s) : 0);
}

static void cmd_u64(RedisCmd *c, uint64_t v)
{
        int n = snprintf(c->num[c->argc], sizeof(c->num[0]), "%" PRIu64, v);
        cmd_bin(c, c->num[c->argc], (size_t)n);
}

static void cmd_i64(RedisCmd *c, int64_t v)
{
        int n = snprintf(c->num[c->argc], sizeof(c->num[0]), "%" PRId64, v);
        cmd_bin(c, c->num[c->argc], (size_t)n);
}

/* The field @name = @v, left out when @lean and @v is 0 (its default: cmd_hset()). */
static void cmd_u64_field(RedisCmd *c, const char *name, uint64_t v, bool lean)
{
        if (lean && !v)
                return;
        cmd_str(c, name);
        cmd_u64(c, v);
}

/* The field @name = @v (NULL: ""), left out when @lean and @v is NULL or "". */
static void cmd_str_field(RedisCmd *c, const char *name, const char *v, bool lean)
{
        if (lean && (!v || !*v))
                return;
        cmd_str(c, name);
        cmd_str(c, v);
}

/* The field @name = @len bytes at @p (NULL: ""), left out when @lean and @p is NULL. */
static void cmd_bin_field(RedisCmd *c, const char *name, const void *p, size_t len, bool lean)
{
        if (lean && !p)
                return;
        cmd_str(c, name);
        cmd_bin(c, p ? p : "", p ? len : 0);
}

/*
 * A job's write: KEYS[1] its hash, KEYS[2] fiberd:cancels, KEYS[3] fiberd:finished, KEYS[4]
 * the stream (ARGV[1] "x") or this host's local set (ARGV[1] "s"); ARGV[2] the expiry of
 * a final record (s), ARGV[3] its finished_ms, ARGV[4] the group, ARGV[5] the job's stream
 * entry; ARGV[6..] the fields and values to set, "state" and its value first. A final
 * state is written once: once the hash is done, failed, cancelled or dead, a write of
 * another final state, or of running or retrying (a host that was cut off and ran a job
 * another host took over meanwhile, a write that reached the server after its sender
 * gave up on it), changes nothing; only a job queued again (job.retry) leaves a final
 * state. A final write drops the job's cancel request, and then, written or not, gives
 * the hash its expiry, puts the job in fiberd:finished and acknowledges its entry (or
 * takes it out of the local set): after the HSET, in the script, so that an HSET the
 * server refuses (out of memory, an ACL) leaves the entry pending: acknowledged in the
 * same MULTI beside a failed write, a job whose host then died would stay running with
 * no entry for any host to take over. Return 1 written, 0 not.
 */
static const char put_script[] =
        "local final = {done = true, failed = true, cancelled = true, dead = true}\n"
        "local cur = redis.call('HGET', KEYS[1], 'state')\n"
        "local new = ARGV[7]\n"
        "local id = string.match(KEYS[1], '%d+$')\n"
        "local written = 0\n"
        "if not (cur and final[cur] and (final[new] or new == 'running' or new == 'retrying')) "
        "then\n"
        "  redis.call('HSET', KEYS[1], unpack(ARGV, 6))\n"
        "  if final[new] then\n"
        "    redis.call('ZREM', KEYS[2], id)\n"
        "  end\n"
        "  written = 1\n"
        "end\n"
        "if final[new] then\n"
        "  redis.call('EXPIRE', KEYS[1], ARGV[2])\n"
        "  redis.call('ZADD', KEYS[3], ARGV[3], id)\n"
        "  if ARGV[1] == 'x' then\n"
        "    redis.call('XACK', KEYS[4], ARGV[4], ARGV[5])\n"
        "  elseif ARGV[1] == 's' then\n"
        "    redis.call('SREM', KEYS[4], id)\n"
        "  end\n"
        "end\n"
        "return written\n";

/*
 * retention_max, fleet-wide: KEYS[1] is fiberd:finished (final job ids scored by their
 * finished_ms), KEYS[2] fiberd:index; ARGV[1] how many to keep. The oldest beyond it
 * lose their hash and their place in both sets. A script runs atomically, inside the
 * batch's MULTI: no host sees a job finished and not yet trimmed for long.
 */
static const char commit_trim_script[] =
        "local n = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[1])\n"
        "if n <= 0 then return 0 end\n"
        "local ids = redis.call('ZRANGE', KEYS[1], 0, n - 1)\n"
        "for _, id in ipairs(ids) do\n"
        "  redis.call('DEL', 'fiberd:job:' .. id)\n"
        "  redis.call('ZREM', KEYS[2], id)\n"
        "end\n"
        "redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)\n"
        "return n\n";

/* SCRIPT LOAD of @script on @c into @sha (48 bytes). Return 0; -EIO (the link is told
 * when no answer came). */
static int script_load(Store *s, redisContext *c, const char *script, char *sha)
{
        RedisStore *q = redis_of(s);
        redisReply *rep = redisCommand(c, "SCRIPT LOAD %s", script);
        int r = -EIO;

        if (!rep)
                (void)redis_call_failed(s, &q->w); /* w_scripts stays false */
        else if (rep->type == REDIS_REPLY_STRING && rep->len < sizeof(q->put_sha)) {
                memcpy(sha, rep->str, rep->len + 1);
                r = 0;
        } else
                log_msg(LOG_ERR, "job store: redis %s: SCRIPT LOAD: %s", s->path,
                        rep->type == REDIS_REPLY_ERROR ? rep->str : "an unexpected reply");
        if (rep)
                freeReplyObject(rep);
        return r;
}

/* The scripts every commit may call, on @c (a new connection: a restarted server has
 * none): put_script into q->put_sha, commit_trim_script into q->trim_sha. Called by its
 * sha, a script's text is neither sent nor hashed at each commit (INFO commandstats at
 * 1,000 job.runs a second: the trim 10.6 us a call by EVAL, 8.0 by EVALSHA). A server
 * that lost them under a live connection (SCRIPT FLUSH) answers NOSCRIPT, and the next
 * commit loads them again first: the trim's NOSCRIPT leaves its batch standing (it was
 * applied; the next batch trims), the put script's fails the batch, tried again.
 * Return 0; -EIO. */
static int commit_scripts_load(Store *s, redisContext *c)
{
        RedisStore *q = redis_of(s);
        int r = script_load(s, c, put_script, q->put_sha);

        return r < 0 ? r : script_load(s, c, commit_trim_script, q->trim_sha);
}

/* Every field of @rec (the arguments only when given), by q's consumer: through
 * put_script (EVALSHA) when the new state is one the script may refuse (final, running,
 * retrying), with what a final write does beside it (@expire: the expiry, s; @entry: the
 * job's stream entry held here, or NULL: the job is maybe in the local set); a plain HSET
 * otherwise (queued, scheduled, waiting: a fleet submission, a revive), which the script
 * would always let through and drop no cancel request for, so a job's first write costs
 * Redis no script and two commands fewer, and when @fresh (a first write, final already:
 * redis_append() adds the rest). @key and @expire must outlive @c's use. */
static void cmd_hset(RedisCmd *c, RedisStore *q, const char *key, const StoreRecord *rec,
                     const char *expire, const char *entry, bool fresh)
{
        bool final = job_state_final(rec->state);

        c->argc = 0;
        if (!fresh && (final || rec->state == JOB_RUNNING || rec->state == JOB_RETRYING)) {
                cmd_str(c, "EVALSHA");
                cmd_str(c, q->put_sha);
                cmd_str(c, "4");
                cmd_str(c, key);
                cmd_str(c, REDIS_KEY_CANCELS);
                cmd_str(c, REDIS_KEY_FINISHED);
                cmd_str(c, entry ? q->stream : q->local_key);
                cmd_str(c, !final ? "" : entry ? "x" : "s");
                cmd_str(c, expire);
                cmd_u64(c, rec->finished_ms);
                cmd_str(c, q->group);
                cmd_str(c, entry ? entry : "");
        } else {
                cmd_str(c, "HSET");
                cmd_str(c, key);
        }
        /* A fresh record (its hash is new) leaves out every field that reads back as
         * its default anyway (record_parse(): 0, or none): about half of a job.run's */
        cmd_str(c, "state");
        cmd_str(c, job_state_name(rec->state));
        cmd_str(c, "plugin");
        cmd_str(c, rec->plugin);
        cmd_u64_field(c, "owner", rec->owner, fresh);
        cmd_u64_field(c, "gid", rec->gid, fresh);
        if (!fresh || rec->priority) {
                cmd_str(c, "priority");
                cmd_i64(c, rec->priority);
        }
        cmd_u64_field(c, "timeout_ms", rec->timeout_ms, fresh);
        cmd_u64_field(c, "created_ms", rec->created_ms, false);
        cmd_u64_field(c, "started_ms", rec->started_ms, false);
        cmd_u64_field(c, "finished_ms", rec->finished_ms, false);
        cmd_u64_field(c, "attempt", rec->attempt, fresh);
        cmd_u64_field(c, "n_fds", rec->n_fds, fresh);
        if (rec->args)
                cmd_bin_field(c, "args", rec->args, rec->args_len, false);
        /* "" = nil: a packed object is never empty */
        cmd_bin_field(c, "result", rec->result, rec->result_len, fresh);
        cmd_str_field(c, "error_code", rec->error_code, fresh);
        cmd_str_field(c, "error_message", rec->error_message, fresh);
        cmd_u64_field(c, "progress_done", rec->progress_done, fresh);
        cmd_u64_field(c, "progress_total", rec->progress_total, fresh);
        cmd_str_field(c, "class", rec->class_name ? rec->class_name : "default", false);
        /* "" = none: a packed map is never empty */
        cmd_bin_field(c, "sched", rec->sched, rec->sched_len, fresh);
        cmd_str(c, "node");
        cmd_str(c, rec->enqueue ? "" : q->consumer);
}

/* ------------------------------------------------------------------ held entries - */

static size_t entry_bucket(uint64_t id)
{
        return (size_t)(id * 0x9e3779b97f4a7c15ULL >> 32) % REDIS_ENTRY_BUCKETS;
}

/* The entry held for job @id copied into @ret (48 bytes); false when none. */
static bool entry_find(RedisStore *q, uint64_t id, char *ret)
{
        bool found = false;

        pthread_mutex_lock(&q->map_lock);
        for (RedisEntry *e = q->entries[entry_bucket(id)]; e; e = e->next)
                if (e->id == id) {
                        memcpy(ret, e->entry, sizeof(e->entry));
                        found = true;
                        break;
                }
        pthread_mutex_unlock(&q->map_lock);
        return found;
}

/* Holds @entry for job @id; false when one is held already (or no memory). */
static bool entry_add(RedisStore *q, uint64_t id, const char *entry, size_t len)
{
        RedisEntry *e, **head = &q->entries[entry_bucket(id)];

        if (len >= sizeof(e->entry))
                return false;
        pthread_mutex_lock(&q->map_lock);
        for (e = *head; e; e = e->next)
                if (e->id == id) {
                        pthread_mutex_unlock(&q->map_lock);
                        return false;
                }
        e = calloc(1, sizeof(*e));
        if (e) {
                e->id = id;
                memcpy(e->entry, entry, len);
                e->next = *head;
                *head = e;
                q->held++;
        }
        pthread_mutex_unlock(&q->map_lock);
        return e != NULL;
}

static void entry_remove(RedisStore *q, uint64_t id)
{
        pthread_mutex_lock(&q->map_lock);
        for (RedisEntry **pe = &q->entries[entry_bucket(id)]; *pe; pe = &(*pe)->next)
                if ((*pe)->id == id) {
                        RedisEntry *e = *pe;
                        *pe = e->next;
                        free(e);
                        q->held--;
                        break;
                }
        pthread_mutex_unlock(&q->map_lock);
}

/* ------------------------------------------------------------------ records ----- */

static bool field_is(const redisReply *k, const char *name)
{
        return k->type == REDIS_REPLY_STRING && k->len == strlen(name) &&
               memcmp(k->str, name, k->len) == 0;
}

static uint64_t field_u64(const redisReply *v)
{
        return v->type == REDIS_REPLY_STRING ? strtoull(v->str, NULL, 10) : 0;
}

/* The string of @v, NULL when empty. */
static const char *field_str(const redisReply *v)
{
        return v->type == REDIS_REPLY_STRING && v->len ? v->str : NULL;
}

/*
 * Fills @rec from an HGETALL reply @h for job @id (pointers into @h).
 * Return: 0; -ENOENT (no such hash); -EIO (no state or plugin).
 */
static int record_parse(const redisReply *h, uint64_t id, StoreRecord *rec)
{
        const char *state = NULL;

        if (h->type != REDIS_REPLY_ARRAY)
                return -EIO;
        if (h->elements == 0)
                return -ENOENT;
        *rec = (StoreRecord){.id = id};
        for (size_t i = 0; i + 1 < h->elements; i += 2) {
                const redisReply *k = h->element[i], *v = h->element[i + 1];
                if (field_is(k, "state"))
                        state = field_str(v);
                else if (field_is(k, "plugin"))
                        rec->plugin = field_str(v);
                else if (field_is(k, "owner"))
                        rec->owner = (uid_t)field_u64(v);
                else if (field_is(k, "gid"))
                        rec->gid = (gid_t)field_u64(v);
                else if (field_is(k, "priority"))
                        rec->priority = v->type == REDIS_REPLY_STRING ? atoi(v->str) : 0;
                else if (field_is(k, "timeout_ms"))
                        rec->timeout_ms = field_u64(v);
                else if (field_is(k, "created_ms"))
                        rec->created_ms = field_u64(v);
                else if (field_is(k, "started_ms"))
                        rec->started_ms = field_u64(v);
                else if (field_is(k, "finished_ms"))
                        rec->finished_ms = field_u64(v);
                else if (field_is(k, "attempt"))
                        rec->attempt = (uint32_t)field_u64(v);
                else if (field_is(k, "n_fds"))
                        rec->n_fds = (uint32_t)field_u64(v);
                else if (field_is(k, "args") && v->type == REDIS_REPLY_STRING) {
                        rec->args = v->str;
                        rec->args_len = v->len;
                } else if (field_is(k, "result") && v->type == REDIS_REPLY_STRING && v->len) {
                        rec->result = v->str;
                        rec->result_len = v->len;
                } else if (field_is(k, "error_code"))
                        rec->error_code = field_str(v);
                else if (field_is(k, "error_message"))
                        rec->error_message = field_str(v);
                else if (field_is(k, "progress_done"))
                        rec->progress_done = field_u64(v);
                else if (field_is(k, "progress_total"))
                        rec->progress_total = field_u64(v);
                else if (field_is(k, "class"))
                        rec->class_name = field_str(v);
                else if (field_is(k, "sched") && v->type == REDIS_REPLY_STRING && v->len) {
                        rec->sched = v->str;
                        rec->sched_len = v->len;
                }
        }
        if (!state || !rec->plugin || job_state_parse(state, strlen(state), &rec->state) < 0)
                return -EIO;
        return 0;
}

/* ------------------------------------------------------------------ plugin files - */

/*
 * @pf packed as a msgpack map (its path is the hash field, not in the map) into @ret,
 * to free with msgpack_sbuffer_destroy(); written only on success. Return 0; -ENOMEM.
 */
static int plugin_file_pack(const StorePluginFile *pf, msgpack_sbuffer *ret)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        int e = 0;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        e |= IPC_PACK_MAP(&pk, IPC_KV_CSTR("name", pf->name), IPC_KV_UINT("size", pf->size),
                          IPC_KV_UINT("ino", pf->ino), IPC_KV_UINT("dev", pf->dev),
                          IPC_KV_INT("mtime_ns", pf->mtime_ns), IPC_KV_BOOL("loading", pf->loading),
                          IPC_KV_UINT("strikes", pf->strikes), IPC_KV_CSTR("reason", pf->reason),
                          IPC_KV_CSTR("sha256", pf->sha256));
        if (e) {
                msgpack_sbuffer_destroy(&sb);
                return -ENOMEM;
        }
        *ret = sb;
        return 0;
}

static bool obj_key_is(const msgpack_object *k, const char *name)
{
        return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(name) &&
               memcmp(k->via.str.ptr, name, k->via.str.size) == 0;
}

static uint64_t obj_u64(const msgpack_object *v)
{
        if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
                return v->via.u64;
        if (v->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
                return (uint64_t)v->via.i64;
        return 0;
}

/* A copy of string @v into @buf (@size bytes), NULL when nil or not a string. */
static const char *obj_str(const msgpack_object *v, char *buf, size_t size)
{
        if (v->type != MSGPACK_OBJECT_STR)
                return NULL;
        snprintf(buf, size, "%.*s", (int)MIN(v->via.str.size, (uint32_t)(size - 1)),
                 v->via.str.ptr);
        return buf;
}

/*
 * Calls @fn with the plugin file at @path packed in @data (@len bytes).
 * Return: @fn's; 0 for a value that is not such a map (skipped, logged).
 */
static int plugin_file_unpack(const char *path, const char *data, size_t len, StorePluginFn fn,
                              void *arg)
{
        char name[256], reason[1024], sha256[72];
        msgpack_unpacked u;
        StorePluginFile pf = {.path = path};
        int r = 0;

        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, data, len, NULL) != MSGPACK_UNPACK_SUCCESS ||
            u.data.type != MSGPACK_OBJECT_MAP) {
                log_msg(LOG_ERR,
                        "job store: redis: the stored plugin file %s is unreadable; "
                        "it is ignored",
                        path);
                goto out_destroy;
        }
        for (uint32_t i = 0; i < u.data.via.map.size; i++) {
                const msgpack_object *k = &u.data.via.map.ptr[i].key,
                                     *v = &u.data.via.map.ptr[i].val;
                if (obj_key_is(k, "name"))
                        pf.name = obj_str(v, name, sizeof(name));
                else if (obj_key_is(k, "size"))
                        pf.size = obj_u64(v);
                else if (obj_key_is(k, "ino"))
                        pf.ino = obj_u64(v);
                else if (obj_key_is(k, "dev"))
                        pf.dev = obj_u64(v);
                else if (obj_key_is(k, "mtime_ns"))
                        pf.mtime_ns = (int64_t)obj_u64(v);
                else if (obj_key_is(k, "loading"))
                        pf.loading = v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
                else if (obj_key_is(k, "strikes"))
                        pf.strikes = (uint32_t)obj_u64(v);
                else if (obj_key_is(k, "reason"))
                        pf.reason = obj_str(v, reason, sizeof(reason));
                else if (obj_key_is(k, "sha256"))
                        pf.sha256 = obj_str(v, sha256, sizeof(sha256));
        }
        r = fn(&pf, arg);
out_destroy:
        msgpack_unpacked_destroy(&u);
        return r;
}

/* ------------------------------------------------------------------ backend ----- */

static void redis_close(Store *s)
{
        RedisStore *q = redis_of(s);

        if (!q)
                return;
        if (q->w)
                redisFree(q->w);
        if (q->q)
                redisFree(q->q);
        if (q->m)
                redisFree(q->m);
        for (size_t i = 0; i < REDIS_ENTRY_BUCKETS; i++)
                while (q->entries[i]) {
                        RedisEntry *e = q->entries[i];
                        q->entries[i] = e->next;
                        free(e);
                }
        pthread_mutex_destroy(&q->link.lock);
        pthread_mutex_destroy(&q->q_lock);
        pthread_mutex_destroy(&q->id_lock);
        pthread_mutex_destroy(&q->map_lock);
        free(q->consumer);
        free(q->plugins_key);
        free(q->meta_key);
        free(q->local_key);
        free(q->stream);
        free(q->group);
        free(q->doubt);
        free(q->handback);
        free(q);
        s->backend_data = NULL;
}

/*
 * The consumer group, from the stream's first entry (jobs submitted before any host read
 * it are read too), made on @c; BUSYGROUP: it exists already, which is as good. Return:
 * 0; -EIO with the reason in @why.
 */
static int group_create(RedisStore *q, redisContext *c, char *why, size_t why_size)
{
        redisReply *rep = redisCommand(c, "XGROUP CREATE %s %s 0 MKSTREAM", q->stream, q->group);
        int r = 0;

        if (!rep || (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "BUSYGROUP", 9) != 0)) {
                snprintf(why, why_size, "cannot create the consumer group %s of stream %s: %s",
                         q->group, q->stream,
                         rep            ? rep->str
                         : c->errstr[0] ? c->errstr
                                        : "connection lost");
                r = -EIO;
        }
        if (rep)
                freeReplyObject(rep);
        return r;
}

static int redis_open(Store *s, const char *path, char *why, size_t why_size)
{
        const StoreFleetOptions *o = &s->fleet;
        RedisStore *q = calloc(1, sizeof(*q));
        char host[256];
        int r;

        if (!q)
                return -ENOMEM;
        s->backend_data = q;
        pthread_mutex_init(&q->link.lock, NULL);
        pthread_mutex_init(&q->q_lock, NULL);
        pthread_mutex_init(&q->id_lock, NULL);
        pthread_mutex_init(&q->map_lock, NULL);
        q->stream = strdup(o->stream && *o->stream ? o->stream : "fiberd:jobs");
        q->group = strdup(o->group && *o->group ? o->group : "fiberd");
        if (o->node && *o->node) {
                q->consumer = strdup(o->node);
                snprintf(host, sizeof(host), "%s", o->node);
        } else {
                if (gethostname(host, sizeof(host)) < 0)
                        snprintf(host, sizeof(host), "fiberd");
                host[sizeof(host) - 1] = '\0';
                r = asprintf(&q->consumer, "%s.%ld", host, (long)getpid());
                if (r < 0)
                        q->consumer = NULL;
        }
        /* the crash-only plugin state is this host's: keyed by its stable name (node, or
         * the hostname), never by hostname.pid, which changes at every start */
        if (asprintf(&q->plugins_key, REDIS_HOST_KEY_FMT, host, "plugins") < 0)
                q->plugins_key = NULL;
        if (asprintf(&q->meta_key, REDIS_HOST_KEY_FMT, host, "meta") < 0)
                q->meta_key = NULL;
        /* so are the ids of its jobs that are not on the stream (redis_load()) */
        if (asprintf(&q->local_key, REDIS_HOST_KEY_FMT, host, "local") < 0)
                q->local_key = NULL;
        if (!q->stream || !q->group || !q->consumer || !q->plugins_key || !q->meta_key ||
            !q->local_key) {
                redis_close(s);
                return -ENOMEM;
        }
        q->claim_idle_ms = o->claim_idle_ns ? o->claim_idle_ns / NSEC_PER_MSEC : 30000;
        if (q->claim_idle_ms < 3)
                q->claim_idle_ms = 3;
        q->expire_s = o->retention_ns / NSEC_PER_SEC;
        if (q->expire_s < 1)
                q->expire_s = 1;
        /* the job that just finished stays for its waiters, as in the job table */
        q->keep_max = MAX(o->retention_max, (size_t)1);
        q->key_window_s = o->key_window_ms ? (o->key_window_ms + 999) / 1000 : 86400;

        q->w = redis_connect(path, why, why_size);
        if (!q->w) {
                redis_close(s);
                return -ECONNREFUSED;
        }
        if (group_create(q, q->w, why, why_size) < 0) {
                redis_close(s);
                return -EIO;
        }
        /* logged by redis_fleet_start(): after a crash, crash_init()'s line is first */
        return 0;
}

static uint64_t redis_next_id(Store *s)
{
        RedisStore *q = redis_of(s);
        redisReply *rep = redisCommand(q->w, "GET " REDIS_KEY_NEXT_ID);
        uint64_t v = 0;

        if (rep && rep->type == REDIS_REPLY_STRING)
                v = strtoull(rep->str, NULL, 10);
        if (rep)
                freeReplyObject(rep);
        return v + 1;
}

/*
 * At start-up: the jobs this host ran or queued outside the stream (submitted with fds)
 * whose final state was never written, because the host stopped first (kill -9, a
 * crash, a shutdown that left queued jobs). No other host can take them: each record
 * goes to @fn, the recovery of the single-host stores (jobtable_restore(): queued with
 * fds or running, it ends INTERRUPTED), whose final write drops it from the set. An id
 * whose record is gone, unreadable or final already leaves the set here.
 * Context: main thread at start-up (the store thread's connection is not in use yet).
 */
static int redis_load(Store *s, StoreLoadFn fn, void *arg, char *why, size_t why_size)
{
        RedisStore *q = redis_of(s);
        redisContext *c = redis_ensure(s, &q->w, why, why_size);
        redisReply *set;
        uint64_t *ids = NULL;
        size_t n = 0, restored = 0, drop = 0;
        int r = 0;

        if (!c)
                return -EIO;
        set = redisCommand(c, "SMEMBERS %s", q->local_key);
        if (!set || set->type != REDIS_REPLY_ARRAY) {
                snprintf(why, why_size, "redis SMEMBERS %s: %s", q->local_key,
                         set && set->type == REDIS_REPLY_ERROR ? set->str
                         : c->errstr[0]                        ? c->errstr
                                                               : "no reply");
                if (set)
                        freeReplyObject(set);
                return -EIO;
        }
        if (set->elements) {
                ids = calloc(set->elements, sizeof(*ids));
                if (!ids) {
                        freeReplyObject(set);
                        return -ENOMEM;
                }
        }
        for (size_t i = 0; i < set->elements; i++)
                if (set->element[i]->type == REDIS_REPLY_STRING)
                        ids[n++] = strtoull(set->element[i]->str, NULL, 10);
        freeReplyObject(set);
        qsort(ids, n, sizeof(*ids), u64_compare); /* in id order, as StoreBackend.load */
        for (size_t i = 0; i < n; i++)
                redisAppendCommand(c, "HGETALL " REDIS_JOB_KEY_FMT, ids[i]);
        for (size_t i = 0; i < n; i++) {
                redisReply *h = NULL;
                StoreRecord rec;
                int p;

                if (redisGetReply(c, (void **)&h) != REDIS_OK || !h) {
                        snprintf(why, why_size, "redis: %s", c->errstr[0] ? c->errstr : "no reply");
                        r = -EIO;
                        break;
                }
                p = h->type == REDIS_REPLY_ERROR ? -EIO : record_parse(h, ids[i], &rec);
                if (p == 0 && !job_state_final(rec.state) && r == 0) {
                        r = fn(&rec, arg); /* its final write leaves the set */
                        restored += r == 0;
                } else if (p < 0 || job_state_final(rec.state)) {
                        if (p == -EIO)
                                log_msg(LOG_ERR,
                                        "job store: redis: job %" PRIu64 " of this host has "
                                        "a bad record; it is not restored",
                                        ids[i]);
                        ids[drop++] = ids[i]; /* nothing to end: only its place in the set */
                }
                freeReplyObject(h);
        }
        for (size_t i = 0; i < drop && r == 0; i++) {
                /* after the pipeline's replies: a command now would read one of them */
                redisReply *d = redisCommand(c, "SREM %s %" PRIu64, q->local_key, ids[i]);
                if (d)
                        freeReplyObject(d);
        }
        if (restored)
                log_msg(LOG_NOTICE,
                        "job store: redis: %zu job(s) this host held outside the stream "
                        "were taken back",
                        restored);
        free(ids);
        return r;
}

/* Does Redis keep anything of @w? Retention drops are EXPIRE's (and the trim's). */
static bool commit_kept(const StoreWrite *w)
{
        return w->op != STORE_OP_DELETE;
}

/* Notes that the commit being made acknowledges entry @entry of job @id. Return: false
 * when there is no memory to (the entry then stays in the map). Store thread. */
static bool handback_note(RedisStore *q, uint64_t id, const char *entry)
{
        if (q->n_handback == q->handback_cap) {
                size_t cap = q->handback_cap ? 2 * q->handback_cap : 16;
                RedisEntry *v = realloc(q->handback, cap * sizeof(*v));
                if (!v)
                        return false;
                q->handback = v;
                q->handback_cap = cap;
        }
        q->handback[q->n_handback] = (RedisEntry){.id = id};
        snprintf(q->handback[q->n_handback].entry, sizeof(q->handback[0].entry), "%s", entry);
        q->n_handback++;
        return true;
}

/* The commit failed: the entries it would have acknowledged are held again, and the
 * batch's next try acknowledges them. Store thread. */
static void handback_undo(RedisStore *q)
{
        for (size_t i = 0; i < q->n_handback; i++)
                (void)entry_add(q, q->handback[i].id, q->handback[i].entry,
                                strlen(q->handback[i].entry));
        q->n_handback = 0;
}

/*
 * ZaddBatch - the members a commit adds to one sorted set (fiberd:finished, fiberd:index),
 * gathered over its writes by commit_append() and sent as one ZADD after them: one
 * command a batch, not one a job. The store thread's, for one commit.
 */
typedef struct ZaddBatch {
        const char *key;
        uint64_t (*pairs)[2]; /* score, member */
        size_t n, cap;
} ZaddBatch;

/* @member joins @z with @score. Return 0; -ENOMEM. */
static int zadd_add(ZaddBatch *z, uint64_t score, uint64_t member)
{
        if (z->n == z->cap) {
                size_t cap = z->cap ? 2 * z->cap : 64;
                uint64_t(*grown)[2] = reallocarray(z->pairs, cap, sizeof(*grown));
                if (!grown)
                        return -ENOMEM;
                z->pairs = grown;
                z->cap = cap;
        }
        z->pairs[z->n][0] = score;
        z->pairs[z->n][1] = member;
        z->n++;
        return 0;
}

/* @z's ZADD (none when empty) appended to @c's pipeline; *@n counts it. Return 0;
 * -ENOMEM (nothing appended). */
static int zadd_append(redisContext *c, const ZaddBatch *z, size_t *n)
{
        size_t argc = 2 + 2 * z->n;
        const char **argv;
        size_t *len;
        char(*num)[24];

        if (!z->n)
                return 0;
        argv = malloc(argc * sizeof(*argv));
        len = malloc(argc * sizeof(*len));
        num = malloc(2 * z->n * sizeof(*num));
        if (!argv || !len || !num) {
                free(argv);
                free(len);
                free(num);
                return -ENOMEM;
        }
        argv[0] = "ZADD";
        len[0] = 4;
        argv[1] = z->key;
        len[1] = strlen(z->key);
        for (size_t i = 0; i < 2 * z->n; i++) {
                len[2 + i] = (size_t)snprintf(num[i], sizeof(num[i]), "%" PRIu64,
                                              z->pairs[i / 2][i % 2]);
                argv[2 + i] = num[i];
        }
        redisAppendCommandArgv(c, (int)argc, argv, len); /* copies */
        (*n)++;
        free(argv);
        free(len);
        free(num);
        return 0;
}

/* Appends @w's commands to @c's pipeline; *@n counts them. *@ended: @w is a final write
 * whose dependents, if any, the commit releases (redis_sched_release_append()). Return
 * 0; -ENOMEM. */
static int commit_append(RedisStore *q, redisContext *c, const StoreWrite *w, size_t *n,
                         bool *ended, ZaddBatch *finished, ZaddBatch *index)
{
        const StoreRecord *rec = &w->rec;
        char key[64], idbuf[24], expire[24], entry[48];
        RedisCmd cmd;
        bool held, fresh;

        *ended = false;
        if (w->op == STORE_OP_PLUGIN) {
                msgpack_sbuffer sb;
                int r = plugin_file_pack(&w->pf, &sb);
                if (r < 0)
                        return r;
                cmd.argc = 0;
                cmd_str(&cmd, "HSET");
                cmd_str(&cmd, q->plugins_key);
                cmd_str(&cmd, w->pf.path);
                cmd_bin(&cmd, sb.data, sb.size);
                redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.len); /* copies */
                msgpack_sbuffer_destroy(&sb);
                (*n)++;
                return 0;
        }
        if (w->op == STORE_OP_META) {
                cmd.argc = 0;
                cmd_str(&cmd, "HSET");
                cmd_str(&cmd, q->meta_key);
                cmd_str(&cmd, w->meta_key);
                cmd_i64(&cmd, w->meta_value);
                redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.len);
                (*n)++;
                return 0;
        }
        if (w->op == STORE_OP_SCHEDULE || w->op == STORE_OP_SCHEDULE_DELETE)
                return redis_periodic_append(c, w, n);
        if (w->op != STORE_OP_PUT)
                return 0; /* retention by time is EXPIRE's */
        snprintf(key, sizeof(key), REDIS_JOB_KEY_FMT, rec->id);
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, rec->id);
        snprintf(expire, sizeof(expire), "%" PRIu64, q->expire_s);
        held = entry_find(q, rec->id, entry);
        /* A job's first write that is final already (a job.run this host ran, its write
         * deferred to its end; jobtable.c): no host knew its id before, so there is no
         * final state to guard, no cancel request to drop, no stream entry or local-set
         * id to let go. A plain HSET, its expiry and fiberd:finished, without the
         * script's call. Only its first try (StoreRecord.first): a commit reported
         * failed may have been applied, and a later write must then replace every
         * field and go through the script. */
        fresh = rec->first && rec->args && !rec->enqueue && !held && job_state_final(rec->state);
        /* nor can any job wait on it: a submission's wait script waits only on a job
         * whose record exists, and this write makes it, final (so no release script's
         * call either: 10 us of Redis a job at 1,000 jobs/s) */
        *ended = !fresh && job_state_final(rec->state);
        /* else a final write's expiry, fiberd:finished and acknowledgement are the
         * script's */
        cmd_hset(&cmd, q, key, rec, expire, held ? entry : NULL, fresh);
        redisAppendCommandArgv(c, cmd.argc, cmd.argv, cmd.len);
        (*n)++;
        if (fresh) {
                redisAppendCommand(c, "EXPIRE %s %s", key, expire);
                (*n)++;
                if (zadd_add(finished, rec->finished_ms, rec->id) < 0)
                        return -ENOMEM;
        }
        if (rec->args && zadd_add(index, rec->id, rec->id) < 0)
                return -ENOMEM;
        if (rec->enqueue && !rec->fleet_held && rec->state != JOB_WAITING) {
                redisAppendCommand(c, "XADD %s * id %s", q->stream, idbuf);
                (*n)++;
        }
        if (rec->fleet_held && held) {
                /* a retry handed back to the fleet (jobtable.c): its next attempt is the
                 * schedule set's, whichever host is up then. The entry leaves the map
                 * now, before the EXEC: the heartbeat stops, and a new entry of the same
                 * job (due at once) is read as new. Should the commit fail, it comes back
                 * (handback_undo()), so that the batch's next try acknowledges it too:
                 * left pending, another host would take it over, read a record that is
                 * not final and run the job beside its scheduled retry. No memory to note
                 * it: it stays in the map, and the heartbeat drops it once acknowledged */
                redisAppendCommand(c, "XACK %s %s %s", q->stream, q->group, entry);
                (*n)++;
                if (handback_note(q, rec->id, entry))
                        entry_remove(q, rec->id);
        }
        redis_sched_append(q, c, rec, n);
        if (rec->args && !rec->enqueue && !job_state_final(rec->state)) {
                /* a job that runs here only (fds): this host's, until its final write */
                redisAppendCommand(c, "SADD %s %s", q->local_key, idbuf);
                (*n)++;
        }
        return 0;
}

/*
 * A submission whose commit got no answer: KEYS[1] its hash, KEYS[2] fiberd:finished,
 * KEYS[3] fiberd:scheduled; ARGV[1] its id, ARGV[2] now (ms), ARGV[3] the expiry (s),
 * ARGV[4] this consumer. Its client was told UNAVAILABLE (store.c refuses a submission
 * whose first write failed), but the write may have reached the server all the same (a
 * server that hung and resumed): if it did and the job has not started, it ends
 * cancelled, never run. One that started already runs (the docs say so).
 */
static const char doubt_script[] =
        "local st = redis.call('HGET', KEYS[1], 'state')\n"
        "if st ~= 'queued' and st ~= 'scheduled' and st ~= 'waiting' then return 0 end\n"
        "redis.call('HSET', KEYS[1], 'state', 'cancelled', 'error_code', 'CANCELLED',\n"
        "  'error_message', 'its submission was answered UNAVAILABLE (the job store did '\n"
        "  .. 'not answer in time): it never runs', 'finished_ms', ARGV[2], 'node', ARGV[4])\n"
        "redis.call('EXPIRE', KEYS[1], ARGV[3])\n"
        "redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])\n"
        "redis.call('ZREM', KEYS[3], ARGV[1])\n"
        "return 1\n";

/* The fleet submissions of @batch, whose commit got no answer, join q->doubt: the next
 * commit ends them unless they started (doubt_script). Context: the store thread. */
static void commit_doubt(RedisStore *q, ListHead *batch)
{
        ListHead *pos, *tmp;

        list_for_each_safe(pos, tmp, batch)
        {
                const StoreWrite *w = list_entry(pos, StoreWrite, link);
                uint64_t *grown;
                if (w->op != STORE_OP_PUT || !w->rec.enqueue || !w->rec.args || w->rec.handover)
                        continue;
                if (q->n_doubt == q->doubt_cap) {
                        size_t cap = q->doubt_cap ? 2 * q->doubt_cap : 64;
                        grown = reallocarray(q->doubt, cap, sizeof(*grown));
                        if (!grown)
                                return; /* those run if they reached the server */
                        q->doubt = grown;
                        q->doubt_cap = cap;
                }
                q->doubt[q->n_doubt++] = w->rec.id;
        }
}

/* CommitCheck - a write whose command's answer says whether the fleet took it
 * (redis_periodic_checked()): where that answer is in EXEC's. */
typedef struct CommitCheck {
        StoreWrite *w;
        size_t at;
} CommitCheck;

static int redis_commit(Store *s, ListHead *batch, char *why, size_t why_size)
{
        RedisStore *q = redis_of(s);
        redisContext *c, *was;
        redisReply *rep = NULL;
        ListHead *pos, *tmp;
        CommitCheck *checks = NULL;
        RedisEnded *ended = NULL;
        ZaddBatch finished = {.key = REDIS_KEY_FINISHED}, index = {.key = REDIS_KEY_INDEX};
        size_t n = 0, finals = 0, n_checks = 0, n_ended = 0, trim_at = SIZE_MAX;
        uint64_t asked;
        int r = 0;

        list_for_each_safe(pos, tmp, batch)
        {
                const StoreWrite *w = list_entry(pos, StoreWrite, link);
                n += commit_kept(w);
                n_checks += redis_periodic_checked(w);
                finals += w->op == STORE_OP_PUT && job_state_final(w->rec.state);
        }
        if (n == 0)
                return 0; /* nothing Redis keeps (retention drops) */
        if ((n_checks && !(checks = calloc(n_checks, sizeof(*checks)))) ||
            (finals && !(ended = malloc(finals * sizeof(*ended))))) {
                free(checks);
                return -ENOMEM;
        }
        asked = clock_now_ns(CLOCK_MONOTONIC);
        was = q->w;
        c = redis_ensure(s, &q->w, why, why_size);
        if (c != was)
                q->w_scripts = false; /* a new connection: maybe a restarted server */
        if (c && !q->w_scripts && commit_scripts_load(s, c) == 0)
                q->w_scripts = true;
        if (!c || !q->w_scripts) {
                /* held and tried again (store.c); the link logged the server's absence */
                /* (a failed SCRIPT LOAD told the link) */
                free(checks);
                free(ended);
                return -EIO;
        }
        n = n_checks = 0;
        q->n_handback = 0;
        redisAppendCommand(c, "MULTI");
        for (size_t i = 0; i < q->n_doubt; i++) {
                redisAppendCommand(c,
                                   "EVAL %s 3 " REDIS_JOB_KEY_FMT " %s %s %" PRIu64 " %" PRIu64
                                   " %" PRIu64 " %s",
                                   doubt_script, q->doubt[i], REDIS_KEY_FINISHED,
                                   REDIS_KEY_SCHEDULED, q->doubt[i], job_now_ms(), q->expire_s,
                                   q->consumer);
                n++;
        }
        list_for_each_safe(pos, tmp, batch)
        {
                StoreWrite *w = list_entry(pos, StoreWrite, link);
                if (redis_periodic_checked(w))
                        checks[n_checks++] = (CommitCheck){.w = w, .at = n};
                bool end = false;
                if (r == 0)
                        r = commit_append(q, c, w, &n, &end, &finished, &index);
                if (end)
                        ended[n_ended++] = (RedisEnded){.id = w->rec.id, .state = w->rec.state};
        }
        /* the sets' members of the batch's new records, before the release and the trim */
        if (r == 0)
                r = zadd_append(c, &finished, &n);
        if (r == 0)
                r = zadd_append(c, &index, &n);
        free(finished.pairs);
        free(index.pairs);
        if (n_ended && r == 0)
                /* the jobs waiting on those that ended (they may fail: before the trim) */
                r = redis_sched_release_append(q, c, ended, n_ended, &n);
        free(ended);
        if (finals) {
                /* one trim per batch, after its jobs joined fiberd:finished */
                trim_at = n;
                redisAppendCommand(c, "EVALSHA %s 2 %s %s %" PRIu64, q->trim_sha,
                                   REDIS_KEY_FINISHED, REDIS_KEY_INDEX, q->keep_max);
                n++;
        }
        if (r < 0) {
                /* the commands sent so far are queued in the transaction: drop them */
                snprintf(why, why_size, "redis: out of memory packing a batch");
                redisAppendCommand(c, "DISCARD");
        } else {
                redisAppendCommand(c, "EXEC");
        }
        /* MULTI, the n queued answers, EXEC */
        for (size_t i = 0; i < n + 2; i++) {
                if (redisGetReply(c, (void **)&rep) != REDIS_OK || !rep) {
                        snprintf(why, why_size, "redis: %s", c->errstr[0] ? c->errstr : "no reply");
                        (void)redis_call_failed(s, &q->w);
                        q->w_scripts = false; /* maybe a new connection, to a new server */
                        commit_doubt(q, batch);
                        handback_undo(q);
                        free(checks);
                        return -EIO;
                }
                if (rep->type == REDIS_REPLY_ERROR && r == 0) {
                        snprintf(why, why_size, "redis: %s", rep->str);
                        r = -EIO;
                }
                if (rep->type == REDIS_REPLY_ERROR && strncmp(rep->str, "NOSCRIPT", 8) == 0)
                        q->w_scripts = false; /* a server restarted under this connection */
                if (i == n + 1 && rep->type == REDIS_REPLY_ARRAY) {
                        for (size_t k = 0; k < rep->elements && r == 0; k++) {
                                const redisReply *e = rep->element[k];
                                bool noscript;
                                if (e->type != REDIS_REPLY_ERROR)
                                        continue;
                                noscript = strncmp(e->str, "NOSCRIPT", 8) == 0;
                                if (noscript)
                                        q->w_scripts = false;
                                /* the trim alone (the scripts flushed under a live
                                 * connection): what the batch wrote stands, applied,
                                 * and the next batch trims once they are loaded again */
                                if (noscript && k == trim_at)
                                        continue;
                                snprintf(why, why_size, "redis: %s", e->str);
                                r = -EIO;
                        }
                        /* a schedule's add or change the fleet refused: that write only */
                        for (size_t k = 0; k < n_checks && r == 0; k++)
                                if (checks[k].at < rep->elements)
                                        checks[k].w->refused = redis_periodic_refusal(
                                                checks[k].w, rep->element[checks[k].at]);
                }
                freeReplyObject(rep);
        }
        free(checks);
        redis_link_ok(s, asked);
        if (r < 0) {
                handback_undo(q);
                return r;
        }
        q->n_handback = 0;
        q->n_doubt = 0; /* ended, or started: either way settled */
        /* acknowledged: the final jobs' entries are no longer held here */
        list_for_each_safe(pos, tmp, batch)
        {
                const StoreWrite *w = list_entry(pos, StoreWrite, link);
                if (w->op == STORE_OP_PUT && job_state_final(w->rec.state))
                        entry_remove(q, w->rec.id);
        }
        return 0;
}

static int redis_plugin_files(Store *s, StorePluginFn fn, void *arg)
{
        RedisStore *q = redis_of(s);
        const char *argv[] = {"HGETALL", q->plugins_key};
        redisReply *rep = redis_query(s, 2, argv, NULL);
        int r = 0;

        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
                if (rep)
                        freeReplyObject(rep);
                return -EIO;
        }
        for (size_t i = 0; i + 1 < rep->elements && r == 0; i += 2) {
                const redisReply *k = rep->element[i], *v = rep->element[i + 1];
                if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING)
                        r = plugin_file_unpack(k->str, v->str, v->len, fn, arg);
        }
        freeReplyObject(rep);
        return r;
}

static int redis_meta_get(Store *s, const char *key, int64_t *ret)
{
        RedisStore *q = redis_of(s);
        const char *argv[] = {"HGET", q->meta_key, key};
        redisReply *rep = redis_query(s, 3, argv, NULL);
        int r = -ENOENT;

        if (!rep)
                return -EIO;
        if (rep->type == REDIS_REPLY_STRING) {
                *ret = strtoll(rep->str, NULL, 10);
                r = 0;
        } else if (rep->type != REDIS_REPLY_NIL) {
                r = -EIO;
        }
        freeReplyObject(rep);
        return r;
}

static int redis_meta_list(Store *s, const char *prefix, StoreMetaFn fn, void *arg)
{
        RedisStore *q = redis_of(s);
        const char *argv[] = {"HGETALL", q->meta_key};
        redisReply *rep = redis_query(s, 2, argv, NULL);
        size_t n = strlen(prefix);
        int r = 0;

        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
                if (rep)
                        freeReplyObject(rep);
                return -EIO;
        }
        for (size_t i = 0; i + 1 < rep->elements && r == 0; i += 2) {
                const redisReply *k = rep->element[i], *v = rep->element[i + 1];
                if (k->type == REDIS_REPLY_STRING && v->type == REDIS_REPLY_STRING &&
                    strncmp(k->str, prefix, n) == 0)
                        r = fn(k->str, strtoll(v->str, NULL, 10), arg);
        }
        freeReplyObject(rep);
        return r;
}

static int redis_new_id(Store *s, uint64_t *ret)
{
        RedisStore *q = redis_of(s);
        const char *argv[] = {"INCRBY", REDIS_KEY_NEXT_ID, REDIS_ID_BLOCK_STR};
        redisReply *rep;
        int r = 0;

        pthread_mutex_lock(&q->id_lock);
        if (q->id_next == q->id_end) {
                /* a block of ids for this host: one round trip per REDIS_ID_BLOCK jobs */
                rep = redis_query(s, 3, argv, NULL);
                if (rep && rep->type == REDIS_REPLY_INTEGER && rep->integer >= REDIS_ID_BLOCK) {
                        q->id_end = (uint64_t)rep->integer + 1;
                        q->id_next = q->id_end - REDIS_ID_BLOCK;
                } else {
                        /* no answer, or an error (a server loading its data after a
                         * restart, out of memory): the submission answers UNAVAILABLE */
                        r = -ENOTCONN;
                }
                if (rep)
                        freeReplyObject(rep);
        }
        if (r == 0)
                *ret = q->id_next++;
        pthread_mutex_unlock(&q->id_lock);
        return r;
}

static int redis_fetch(Store *s, uint64_t id, StoreLoadFn fn, void *arg)
{
        char key[64];
        const char *argv[] = {"HGETALL", key};
        redisReply *rep;
        StoreRecord rec;
        int r;

        snprintf(key, sizeof(key), REDIS_JOB_KEY_FMT, id);
        rep = redis_query(s, 2, argv, NULL);
        if (!rep)
                return -EIO;
        r = rep->type == REDIS_REPLY_ERROR ? -EIO : record_parse(rep, id, &rec);
        if (r == 0)
                r = fn(&rec, arg);
        freeReplyObject(rep);
        return r;
}

/*
 * The records of @ids in one pipeline (an HGETALL each, then every reply) on the query
 * connection, under its lock; @fn is called after it is released, so it may query too.
 */
static int redis_fetch_many(Store *s, const uint64_t *ids, size_t n, StoreLoadFn fn, void *arg)
{
        RedisStore *q = redis_of(s);
        char why[256] = "";
        redisReply **reps;
        size_t got = 0;
        uint64_t asked = clock_now_ns(CLOCK_MONOTONIC);
        int r = 0;

        if (n == 0)
                return 0;
        reps = calloc(n, sizeof(*reps));
        if (!reps)
                return -ENOMEM;
        pthread_mutex_lock(&q->q_lock);
        /* a second try only when the connection was lost before any reply (as redis_query()) */
        for (int tries = 0; tries < 2 && got == 0; tries++) {
                if (!redis_ensure(s, &q->q, why, sizeof(why)))
                        break; /* the link is away */
                for (size_t i = 0; i < n; i++)
                        redisAppendCommand(q->q, "HGETALL " REDIS_JOB_KEY_FMT, ids[i]);
                for (got = 0; got < n; got++)
                        if (redisGetReply(q->q, (void **)&reps[got]) != REDIS_OK || !reps[got])
                                break;
                /* a new connection after a dropped one: once more; else not now */
                if (got < n && (got > 0 || !redis_call_failed(s, &q->q)))
                        break;
        }
        pthread_mutex_unlock(&q->q_lock);
        if (got < n)
                r = -EIO; /* the link says why */
        else
                redis_link_ok(s, asked);
        for (size_t i = 0; i < got && r == 0; i++) {
                StoreRecord rec;
                int p = reps[i]->type == REDIS_REPLY_ERROR ? -EIO
                                                           : record_parse(reps[i], ids[i], &rec);
                if (p == 0)
                        r = fn(&rec, arg);
                else if (p == -EIO) /* one bad record hides no other */
                        log_msg(LOG_ERR, "job store: redis: job %" PRIu64 " has a bad record",
                                ids[i]);
        }
        for (size_t i = 0; i < got; i++)
                freeReplyObject(reps[i]);
        free(reps);
        return r;
}

static int redis_list(Store *s, uint64_t below, size_t max, uint64_t *ids, size_t *ret_n)
{
        char from[32], count[24];
        const char *argv[] = {
                "ZREVRANGEBYSCORE", REDIS_KEY_INDEX, from, "-inf", "LIMIT", "0", count};
        redisReply *rep;
        size_t n = 0;

        if (below)
                snprintf(from, sizeof(from), "(%" PRIu64, below);
        else
                snprintf(from, sizeof(from), "+inf");
        snprintf(count, sizeof(count), "%zu", max);
        rep = redis_query(s, (int)ELEMENTSOF(argv), argv, NULL);
        if (!rep || rep->type != REDIS_REPLY_ARRAY) {
                if (rep)
                        freeReplyObject(rep);
                return -EIO;
        }
        for (size_t i = 0; i < rep->elements && n < max; i++)
                if (rep->element[i]->type == REDIS_REPLY_STRING)
                        ids[n++] = strtoull(rep->element[i]->str, NULL, 10);
        freeReplyObject(rep);
        *ret_n = n;
        return 0;
}

/* ------------------------------------------------------------------ reader ------ */

/* reader_read()'s answer when the server refused the read: the reader pauses. */
#define READ_REFUSED (-2)
/* How often the reader says again that the server refuses what it asks. */
#define READER_ERROR_LOG_S 60

/*
 * The server answered the reader's @what with error @err: said once a minute at most
 * (a server loading its data answers LOADING to every call until it is done). NOGROUP:
 * the consumer group is gone (a server restarted without its data, a FLUSHALL), and no
 * host would read the stream again: it is made again from the stream's first entry, as
 * redis_open() does; entries of jobs already final are acknowledged as they are read.
 * Reader thread.
 */
static void reader_error(RedisStore *q, const char *what, const char *err)
{
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC);
        char why[256];

        if (!q->reader_error_ns || now - q->reader_error_ns >= READER_ERROR_LOG_S * NSEC_PER_SEC) {
                log_msg(LOG_ERR, "job store: redis %s: %s", what, err);
                q->reader_error_ns = now;
        }
        if (strncmp(err, "NOGROUP", 7) != 0)
                return;
        if (group_create(q, q->r, why, sizeof(why)) == 0)
                log_msg(LOG_WARNING,
                        "job store: redis had no consumer group %s of stream %s (a server "
                        "that restarted without its data?): made it again",
                        q->group, q->stream);
}

static void reader_ack(RedisStore *q, const char *entry)
{
        redisReply *rep = redisCommand(q->r, "XACK %s %s %s", q->stream, q->group, entry);

        if (rep)
                freeReplyObject(rep);
}

/* The stream entry id (into @entry, 48 bytes) and job id of entry @e; 0 when none. */
static uint64_t entry_parse(const redisReply *e, char *entry)
{
        const redisReply *eid, *fields;
        uint64_t id = 0;

        entry[0] = '\0';
        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2)
                return 0;
        eid = e->element[0];
        fields = e->element[1];
        if (eid->type != REDIS_REPLY_STRING || eid->len >= 48)
                return 0;
        memcpy(entry, eid->str, eid->len + 1);
        if (fields->type == REDIS_REPLY_ARRAY)
                for (size_t i = 0; i + 1 < fields->elements; i += 2)
                        if (field_is(fields->element[i], "id"))
                                id = field_u64(fields->element[i + 1]);
        return id;
}

/*
 * Stream entry @entry of job @id, read or claimed by this host, with @h its record
 * (HGETALL): the job goes to the job table unless it is final or gone.
 */
static void reader_take(Store *s, const char *entry, uint64_t id, const redisReply *h, bool claimed)
{
        RedisStore *q = redis_of(s);
        StoreRecord rec;
        int r;

        if (h->type == REDIS_REPLY_ERROR) {
                /* the server could not answer for it (loading, busy): the entry stays
                 * pending, and is read again after claim_idle_ms, by whichever host */
                log_msg(LOG_WARNING,
                        "job store: redis could not read job %" PRIu64 " (%s): its stream "
                        "entry %s is read again later",
                        id, h->str, entry);
                return;
        }
        r = record_parse(h, id, &rec);
        if (r < 0 || job_state_final(rec.state)) {
                /* its record is gone (retention), unreadable, or the job ended before its
                 * host could acknowledge it */
                if (r == -EIO)
                        log_msg(LOG_ERR,
                                "job store: redis: job %" PRIu64 " has a bad record; "
                                "its stream entry %s is dropped",
                                id, entry);
                reader_ack(q, entry);
                return;
        }
        if (!entry_add(q, id, entry, strlen(entry)))
                return; /* held here already (a pending entry read again) */
        /* its retries go back to the fleet (jobtable.c) */
        rec.shared = true;
        r = q->hooks.take(&rec, q->hooks.arg);
        if (r < 0) {
                entry_remove(q, id); /* left pending: another host (or this one) takes it */
                return;
        }
        q->taken++;
        if (claimed) {
                /* said once it is taken: a host that does not load the job's plugin
                 * leaves it (the take hook says so), which is no takeover */
                q->claimed++;
                log_msg(LOG_NOTICE, "job %" PRIu64 ": taken over from a silent host (%s)", id,
                        job_state_name(rec.state));
        }
}

/*
 * Each entry of an XREADGROUP / XAUTOCLAIM entry array, their records read in one
 * pipeline; the last entry id in @last. Return the entries seen.
 */
static size_t reader_handle_all(Store *s, const redisReply *entries, bool claimed, char *last,
                                size_t last_size)
{
        RedisStore *q = redis_of(s);
        char entry[REDIS_READ_COUNT][48];
        uint64_t ids[REDIS_READ_COUNT];
        redisReply *h[REDIS_READ_COUNT] = {0};
        size_t n, asked = 0;

        if (!entries || entries->type != REDIS_REPLY_ARRAY)
                return 0;
        n = MIN(entries->elements, (size_t)REDIS_READ_COUNT);
        for (size_t i = 0; i < n; i++) {
                ids[i] = entry_parse(entries->element[i], entry[i]);
                if (entry[i][0] && last)
                        snprintf(last, last_size, "%.47s", entry[i]);
                if (ids[i] && entry_find(q, ids[i], (char[48]){0})) {
                        ids[i] = 0; /* held here already (a pending entry read again) */
                        entry[i][0] = '\0';
                        continue;
                }
                if (ids[i]) {
                        redisAppendCommand(q->r, "HGETALL " REDIS_JOB_KEY_FMT, ids[i]);
                        asked++;
                }
        }
        /* every reply of the pipeline first: a command sent before the last one is read
         * (reader_take()'s XACK) would read another command's reply */
        for (size_t i = 0; i < n && asked; i++) {
                if (!ids[i])
                        continue;
                asked--;
                if (redisGetReply(q->r, (void **)&h[i]) != REDIS_OK || !h[i]) {
                        h[i] = NULL;
                        break; /* connection lost: the entries stay pending, read again */
                }
        }
        for (size_t i = 0; i < n; i++) {
                if (!ids[i] && entry[i][0] && !q->r->err)
                        reader_ack(q, entry[i]); /* not a job: nothing to run */
                else if (h[i] && !redis_stopping(q))
                        reader_take(s, entry[i], ids[i], h[i], claimed);
                if (h[i])
                        freeReplyObject(h[i]);
        }
        return n;
}

/*
 * The heartbeat: KEYS[1] the stream; ARGV[1] the group, ARGV[2] this consumer, ARGV[3..]
 * the entries this host runs. Each one still pending for this consumer is claimed again
 * (XCLAIM ... JUSTID: its idle time starts over); one owned by another consumer (taken
 * over while this host was cut off from the server) or acknowledged meanwhile (its job
 * ended) is left alone, never claimed back. Return {taken over, acknowledged}.
 */
static const char heartbeat_script[] =
        "local taken, gone = {}, {}\n"
        "for i = 3, #ARGV do\n"
        "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1)\n"
        "  if not p[1] then\n"
        "    gone[#gone + 1] = ARGV[i]\n"
        "  elseif p[1][2] == ARGV[2] then\n"
        "    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')\n"
        "  else\n"
        "    taken[#taken + 1] = ARGV[i]\n"
        "  end\n"
        "end\n"
        "return {taken, gone}\n";

/* The entries of @list (a heartbeat_script answer's array) leave the map, when @held
 * (@k copies) still has them as they were; return how many. */
static size_t heartbeat_drop(RedisStore *q, const redisReply *list, const RedisEntry *held,
                             size_t k)
{
        size_t n = 0;

        if (list->type != REDIS_REPLY_ARRAY)
                return 0;
        for (size_t i = 0; i < list->elements; i++) {
                const redisReply *e = list->element[i];
                for (size_t h = 0; e->type == REDIS_REPLY_STRING && h < k; h++)
                        if (strcmp(held[h].entry, e->str) == 0) {
                                char now[48];
                                /* the same entry still held (not a new one of the job) */
                                if (entry_find(q, held[h].id, now) && strcmp(now, e->str) == 0) {
                                        entry_remove(q, held[h].id);
                                        n++;
                                }
                                break;
                        }
        }
        return n;
}

/*
 * The heartbeat of the entries held here, checked against what this host runs: an
 * entry whose job the job table no longer holds as its own (StoreFleetHooks.runs) is
 * let go (no longer claimed: it idles, and after claim_idle_ms any host takes it over
 * and its record says what to do); one the server no longer has pending for this
 * consumer (taken over by another host; acknowledged, its job ended) leaves the map.
 * The rest are claimed again in one script. One line when any was let go.
 */
static int reader_heartbeat(Store *s)
{
        RedisStore *q = redis_of(s);
        RedisEntry *held = NULL;
        const char **argv = NULL;
        size_t k = 0, n = 0, not_here = 0, taken = 0;
        redisReply *rep = NULL;
        int r = 0;

        pthread_mutex_lock(&q->map_lock);
        if (q->held) {
                /* copies: the store thread drops entries as their jobs end */
                held = malloc(q->held * sizeof(*held));
                for (size_t b = 0; held && b < REDIS_ENTRY_BUCKETS; b++)
                        for (RedisEntry *e = q->entries[b]; e; e = e->next)
                                held[k++] = *e;
        }
        pthread_mutex_unlock(&q->map_lock);
        if (k)
                argv = malloc((k + 6) * sizeof(*argv));
        if (!argv)
                goto out;
        argv[n++] = "EVAL";
        argv[n++] = heartbeat_script;
        argv[n++] = "1";
        argv[n++] = q->stream;
        argv[n++] = q->group;
        argv[n++] = q->consumer;
        for (size_t i = 0; i < k; i++) {
                if (q->hooks.runs && !q->hooks.runs(held[i].id, q->hooks.arg)) {
                        entry_remove(q, held[i].id);
                        not_here++;
                        continue;
                }
                argv[n++] = held[i].entry;
        }
        if (n > 6 && !(rep = redisCommandArgv(q->r, (int)n, argv, NULL)))
                r = -EIO; /* no answer: the caller tells the link */
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements == 2) {
                taken = heartbeat_drop(q, rep->element[0], held, k);
                (void)heartbeat_drop(q, rep->element[1], held, k); /* ended: nothing to say */
        } else if (rep && rep->type == REDIS_REPLY_ERROR) {
                /* nothing was claimed again: not a beat (a takeover must wait) */
                reader_error(q, "heartbeat", rep->str);
                r = -EIO;
        }
        if (rep)
                freeReplyObject(rep);
        if (not_here || taken) {
                q->let_go += not_here + taken;
                log_msg(LOG_NOTICE,
                        "job store: let go of %zu stream entries: %zu of jobs this host does "
                        "not run, %zu taken over by another host while this one could not "
                        "reach redis (a job run on both keeps the first final state written)",
                        not_here + taken, not_here, taken);
        }
out:
        free(argv);
        free(held);
        return r;
}

/*
 * Cancels asked through another host (store_cancel_remote()): every id in fiberd:cancels
 * goes to StoreFleetHooks.cancel, which ends the job if this host runs it. The request
 * stays until the job's final write (put_script) drops it, so a host that takes the job
 * over later ends it too; requests older than an hour are dropped.
 */
static void reader_cancels(Store *s)
{
        RedisStore *q = redis_of(s);
        uint64_t old = job_now_ms() - 3600 * 1000ULL;
        redisReply *rep = redisCommand(q->r, "ZRANGE %s 0 255", REDIS_KEY_CANCELS);

        if (rep && rep->type == REDIS_REPLY_ARRAY && q->hooks.cancel)
                for (size_t i = 0; i < rep->elements; i++)
                        if (rep->element[i]->type == REDIS_REPLY_STRING)
                                q->hooks.cancel(strtoull(rep->element[i]->str, NULL, 10),
                                                q->hooks.arg);
        if (rep && rep->type == REDIS_REPLY_ARRAY && rep->elements) {
                freeReplyObject(rep);
                rep = redisCommand(q->r, "ZREMRANGEBYSCORE %s -inf %" PRIu64, REDIS_KEY_CANCELS,
                                   old);
        }
        if (rep)
                freeReplyObject(rep);
}

/* XAUTOCLAIM of every entry idle longer than claim_idle_ms: their hosts stopped. */
static void reader_autoclaim(Store *s)
{
        RedisStore *q = redis_of(s);
        char cursor[48] = "0-0", idle[24];

        snprintf(idle, sizeof(idle), "%" PRIu64, q->claim_idle_ms);
        for (int rounds = 0; rounds < 64 && !redis_stopping(q); rounds++) {
                redisReply *rep =
                        redisCommand(q->r, "XAUTOCLAIM %s %s %s %s %s COUNT %d", q->stream,
                                     q->group, q->consumer, idle, cursor, REDIS_READ_COUNT);
                bool more;
                if (!rep)
                        return;
                if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 ||
                    rep->element[0]->type != REDIS_REPLY_STRING) {
                        if (rep->type == REDIS_REPLY_ERROR)
                                reader_error(q, "XAUTOCLAIM", rep->str);
                        freeReplyObject(rep);
                        return;
                }
                snprintf(cursor, sizeof(cursor), "%s", rep->element[0]->str);
                reader_handle_all(s, rep->element[1], true, NULL, 0);
                more = strcmp(cursor, "0-0") != 0;
                freeReplyObject(rep);
                if (!more)
                        return;
        }
}

/*
 * One XREADGROUP: this consumer's own pending entries after @pending_from when
 * @pending_from is set (a restart under the same name), else new entries, blocking at
 * most @block_ms. Return the entries read; -1 on a lost connection; READ_REFUSED when the
 * server answered an error (reader_error() said it and, for NOGROUP, made the group).
 */
static long reader_read(Store *s, char *pending_from, size_t from_size, uint64_t block_ms,
                        size_t want)
{
        RedisStore *q = redis_of(s);
        char count[16], block[24];
        const char *argv[] = {"XREADGROUP",
                              "GROUP",
                              q->group,
                              q->consumer,
                              "COUNT",
                              count,
                              "BLOCK",
                              block,
                              "STREAMS",
                              q->stream,
                              pending_from ? pending_from : ">"};
        redisReply *rep;
        long n = 0;

        snprintf(count, sizeof(count), "%zu", MIN(want, (size_t)REDIS_READ_COUNT));
        snprintf(block, sizeof(block), "%" PRIu64, block_ms);
        if (pending_from) { /* no BLOCK: the history answers at once */
                argv[6] = "STREAMS";
                argv[7] = q->stream;
                argv[8] = pending_from;
        }
        rep = redisCommandArgv(q->r, pending_from ? 9 : 11, argv, NULL);
        if (!rep)
                return -1;
        if (rep->type == REDIS_REPLY_ARRAY && rep->elements >= 1 &&
            rep->element[0]->type == REDIS_REPLY_ARRAY && rep->element[0]->elements >= 2)
                n = (long)reader_handle_all(s, rep->element[0]->element[1], false, pending_from,
                                            from_size);
        else if (rep->type == REDIS_REPLY_ERROR) {
                reader_error(q, "XREADGROUP", rep->str);
                n = READ_REFUSED;
        }
        freeReplyObject(rep);
        return n;
}

static void *redis_reader(void *arg)
{
        Store *s = arg;
        RedisStore *q = redis_of(s);
        uint64_t beat_ns = q->claim_idle_ms * NSEC_PER_MSEC / 3;
        uint64_t block_ms = MIN(q->claim_idle_ms / 3, 500);
        uint64_t next_beat = 0, next_claim = 0, next_cancels = 0, beat_ok = 0;
        char pending[48] = "0";
        bool own_pending = true;

        if (block_ms == 0)
                block_ms = 1;
        while (!redis_stopping(q)) {
                char why[256] = "";
                uint64_t now;
                size_t want;

                if (!redis_ensure(s, &q->r, why, sizeof(why))) {
                        /* the link logged it (store-redis-conn.c): one line, not one a try */
                        redis_pause(q, MIN(redis_link_retry_ms(q), (uint64_t)500));
                        continue;
                }
                now = clock_now_ns(CLOCK_MONOTONIC);
                if (now >= next_beat) {
                        /* a heartbeat late by more than one period: the server (or this
                         * host) stalled, and every host's heartbeats with it, so entries
                         * idle now belong to live hosts too. No takeover until each had a
                         * full claim_idle_ms to claim its own again. */
                        bool late = beat_ok && now - beat_ok > 2 * beat_ns;
                        if (reader_heartbeat(s) == 0) {
                                if (late)
                                        next_claim = MAX(next_claim,
                                                         now + q->claim_idle_ms * NSEC_PER_MSEC);
                                beat_ok = now;
                        }
                        next_beat = now + beat_ns;
                }
                if (now >= next_claim && !q->r->err) {
                        reader_autoclaim(s);
                        /* a period drawn from [beat / 2, beat * 3 / 2): an entry a host
                         * claimed idles again for claim_idle_ms, three of its periods, so
                         * with a fixed period the host that claimed it would poll first
                         * each time it came due and keep it from every other; a host that
                         * leaves a job whose plugin it does not load would keep the job
                         * from the host that loads it */
                        next_claim = now + beat_ns / 2 + jitter_below(beat_ns);
                }
                if (now >= next_cancels && !q->r->err) {
                        reader_cancels(s);
                        next_cancels = now + 200 * NSEC_PER_MSEC;
                }
                if (q->r->err) {
                        /* no answer: the link says so; held entries are claimed again once
                         * it is back, the heartbeat first */
                        (void)redis_call_failed(s, &q->r);
                        next_beat = 0;
                        continue;
                }
                if (own_pending) {
                        /* this consumer's own entries: its jobs whatever the room */
                        uint64_t asked = clock_now_ns(CLOCK_MONOTONIC);
                        long n = reader_read(s, pending, sizeof(pending), 0, REDIS_READ_COUNT);
                        if (n == 0)
                                own_pending = false;
                        else if (n == READ_REFUSED)
                                redis_pause(q, block_ms);
                        else if (n < 0)
                                (void)redis_call_failed(s, &q->r);
                        else
                                redis_link_ok(s, asked);
                        continue;
                }
                want = q->hooks.room ? q->hooks.room(q->hooks.arg) : REDIS_READ_COUNT;
                if (want == 0) {
                        /* full: the jobs wait in the stream for a host with room */
                        redis_pause(q, MIN(block_ms, 50));
                        continue;
                }
                uint64_t asked = clock_now_ns(CLOCK_MONOTONIC);
                long n = reader_read(s, NULL, 0, block_ms, want);
                if (n == READ_REFUSED) {
                        /* answered, but not read: not a lost link, and no busy loop */
                        redis_pause(q, block_ms);
                } else if (n < 0) {
                        (void)redis_call_failed(s, &q->r);
                        next_beat = 0;
                } else {
                        redis_link_ok(s, asked);
                }
        }
        if (q->r) {
                redisFree(q->r);
                q->r = NULL;
        }
        return NULL;
}

static int redis_fleet_start(Store *s, const StoreFleetHooks *hooks)
{
        RedisStore *q = redis_of(s);
        int r;

        q->hooks = *hooks;
        log_msg(LOG_INFO,
                "job store: redis %s, stream %s, group %s, consumer %s, claim after %llu ms",
                s->path, q->stream, q->group, q->consumer, (unsigned long long)q->claim_idle_ms);
        r = -pthread_create(&q->reader, NULL, redis_reader, s);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the job store's reader thread: %s", strerror(-r));
                return r;
        }
        q->reader_started = true;
        /* named: its CPU shows apart (tests/bench/stages.sh) */
        pthread_setname_np(q->reader, "fiberd-rd-read");
        return redis_sched_start(s); /* held jobs to the stream when due */
}

static void redis_fleet_stop(Store *s)
{
        RedisStore *q = redis_of(s);

        if (!q || !q->reader_started)
                return;
        __atomic_store_n(&q->stop, true, __ATOMIC_RELEASE);
        pthread_join(q->reader, NULL);
        q->reader_started = false;
        redis_sched_stop(s);
        log_msg(LOG_INFO,
                "job store: took %llu jobs off stream %s (%llu from silent hosts), let go of "
                "%llu; redis was away %llu times",
                (unsigned long long)q->taken, q->stream, (unsigned long long)q->claimed,
                (unsigned long long)q->let_go, (unsigned long long)q->link.outages);
}

/* KEYS[1] the job's hash, KEYS[2] fiberd:cancels; ARGV[1] now (ms), ARGV[2] the id.
 * Return -1 no such job, 0 final already, 1 asked. */
static const char cancel_remote_script[] =
        "local final = {done = true, failed = true, cancelled = true, dead = true}\n"
        "local st = redis.call('HGET', KEYS[1], 'state')\n"
        "if not st then return -1 end\n"
        "if final[st] then return 0 end\n"
        "redis.call('ZADD', KEYS[2], 'NX', ARGV[1], ARGV[2])\n"
        "return 1\n";

static int redis_cancel_remote(Store *s, uint64_t id)
{
        char key[64], now[24], idbuf[24];
        const char *argv[] = {"EVAL", cancel_remote_script, "2", key, REDIS_KEY_CANCELS, now,
                              idbuf};
        redisReply *rep;
        int r = -EIO;

        snprintf(key, sizeof(key), REDIS_JOB_KEY_FMT, id);
        snprintf(now, sizeof(now), "%" PRIu64, job_now_ms());
        snprintf(idbuf, sizeof(idbuf), "%" PRIu64, id);
        rep = redis_query(s, (int)ELEMENTSOF(argv), argv, NULL);
        if (!rep)
                return -EIO; /* the link says why */
        if (rep->type == REDIS_REPLY_INTEGER)
                r = rep->integer == 1 ? 0 : rep->integer == 0 ? -EALREADY : -ENOENT;
        else
                log_msg(LOG_ERR, "job store: redis %s: asking for a cancel: %s", s->path,
                        rep->type == REDIS_REPLY_ERROR ? rep->str : "an unexpected reply");
        freeReplyObject(rep);
        return r;
}

static bool redis_server_away(Store *s)
{
        return redis_link_away(redis_of(s));
}

static uint64_t redis_retry_hint_ms(Store *s)
{
        return redis_link_retry_ms(redis_of(s));
}

const StoreBackend store_redis_backend = {
        .name = "redis",
        .open = redis_open,
        .load = redis_load, /* this host's local jobs; the stream is the reader's */
        .next_id = redis_next_id,
        .commit = redis_commit,
        .plugin_files = redis_plugin_files,
        .meta_get = redis_meta_get,
        .meta_list = redis_meta_list,
        .schedules = redis_periodic_all,
        .schedules_changed = redis_periodic_changed,
        .close = redis_close,
        .new_id = redis_new_id,
        .fetch = redis_fetch,
        .list = redis_list,
        .fleet_start = redis_fleet_start,
        .fleet_stop = redis_fleet_stop,
        .fetch_many = redis_fetch_many,
        .cancel_held = redis_cancel_held,
        .cancel_remote = redis_cancel_remote,
        .server_away = redis_server_away,
        .retry_hint_ms = redis_retry_hint_ms,
        .key_claim = redis_key_claim,
        .key_release = redis_key_release,
};
