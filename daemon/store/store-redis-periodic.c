/* SPDX-License-Identifier: MIT */
/*
 * store-redis-periodic.c — periodic schedules in a fleet (store-redis-periodic.h): the
 * rows that schedule.add, pause, resume and remove write through any host, the outcome
 * of each tick, and the version every host watches to bring its table in step
 * (schedfleet.c).
 *
 * What lives in Redis:
 *   fiberd:schedules    a hash, field "<uid>:<name>", value the row the sqlite store
 *                       keeps (StoreSchedule) packed as a msgpack map; written by the
 *                       methods only: HSETNX for an add (a name any host added is
 *                       taken), HSET for a pause or a resume while the schedule still
 *                       exists, HDEL for a remove;
 *   fiberd:schedules:ticks
 *                       a hash, same fields, value "<created_ms> <next_ms> <last_ms>
 *                       <last_job>": where its ticks stand. Written with the row by
 *                       every method, and after a tick by the host that fired it, each
 *                       number only moving on (a later next tick, a later last tick),
 *                       and only while created_ms is the schedule's (one removed and
 *                       added again under its name is another);
 *   fiberd:schedules:version
 *                       a counter: INCR by every add, change and removal, in the same
 *                       script. A tick does not move it, so a host reads the table only
 *                       when a method changed it, not at every tick of the fleet.
 *
 * Why two hashes: a tick's write and a method's cross. A host that fires a tick while
 * another pauses the schedule must not write the row back unpaused; so a tick writes
 * only its numbers, in their own hash, compared in a script, and a method's row never
 * loses a later tick (its script keeps the later last tick). Every write is one script
 * inside the store thread's MULTI (store-redis.c's commit), so it lands whole.
 *
 * A read (redis_periodic_changed()) is one script too: the version, and when it is not
 * the one the host holds, every row with its ticks, in one atomic step: a host never
 * holds a version with rows older than it.
 */
#include "daemon/store/store-redis-periodic.h"
#include "daemon/obs/log.h"
#include "ipc/encoder.h"
#include "scheduler/base/macro.h"

#include <errno.h>
#include <inttypes.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A schedule's field: "<uid>:<name>" (a name is at most 64 bytes). */
#define PERIODIC_FIELD_MAX 96

/*
 * KEYS[1] fiberd:schedules, KEYS[2] its ticks, KEYS[3] its version; ARGV[1] the field,
 * ARGV[2] the packed row, ARGV[3] its ticks. Returns 1 when added, 0 when the name is
 * taken (any host's).
 */
static const char periodic_add_script[] =
        "if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end\n"
        "redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])\n"
        "redis.call('INCR', KEYS[3])\n"
        "return 1\n";

/* Reads the ticks of ARGV[1] into c, n, l, j; the script returns 0 unless its
 * created_ms is @arg (the schedule is gone, or is another of the same name). */
#define PERIODIC_LUA_TICKS(arg)                                                                    \
        "local t = redis.call('HGET', KEYS[2], ARGV[1])\n"                                         \
        "if not t then return 0 end\n"                                                             \
        "local c, n, l, j = string.match(t, '^(%d+) (%d+) (%d+) (%d+)$')\n"                        \
        "if c ~= " arg " then return 0 end\n"

/*
 * A method's change: ARGV[1] the field, ARGV[2] the packed row, ARGV[3] created_ms,
 * ARGV[4] next_ms, ARGV[5] last_ms, ARGV[6] last_job. The row and next_ms are the
 * method's (a resume starts the phase again); the later last tick stays. Returns 1, or 0
 * when the schedule is gone.
 */
#define PERIODIC_LUA_CHANGE                                                                        \
        "local last, job = ARGV[5], ARGV[6]\n"                                                     \
        "if tonumber(l) > tonumber(last) then last, job = l, j end\n"                              \
        "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\n"                                          \
        "redis.call('HSET', KEYS[2], ARGV[1], c .. ' ' .. ARGV[4] .. ' ' .. last .. ' ' .. job)\n" \
        "redis.call('INCR', KEYS[3])\n"                                                            \
        "return 1\n"
static const char periodic_change_script[] = PERIODIC_LUA_TICKS("ARGV[3]") PERIODIC_LUA_CHANGE;

/*
 * A tick's outcome: ARGV[1] the field, ARGV[2] created_ms, ARGV[3] next_ms, ARGV[4]
 * last_ms, ARGV[5] last_job; each moves on only. Returns 1, or 0 when the schedule is
 * gone (nothing is written: a tick never brings a removed schedule back).
 */
#define PERIODIC_LUA_TICK                                                                          \
        "if tonumber(ARGV[3]) > tonumber(n) then n = ARGV[3] end\n"                                \
        "if tonumber(ARGV[4]) > tonumber(l) then l, j = ARGV[4], ARGV[5] end\n"                    \
        "redis.call('HSET', KEYS[2], ARGV[1], c .. ' ' .. n .. ' ' .. l .. ' ' .. j)\n"            \
        "return 1\n"
static const char periodic_tick_script[] = PERIODIC_LUA_TICKS("ARGV[2]") PERIODIC_LUA_TICK;

/*
 * A read: ARGV[1] the version the host holds. Returns {version} when it is that one,
 * else {version, rows, row, ticks, row, ticks, ...}: how many rows, then each with its
 * ticks ("" for a row without ticks).
 */
static const char periodic_read_script[] =
        "local v = redis.call('GET', KEYS[3]) or '0'\n"
        "if v == ARGV[1] then return {v} end\n"
        "local all = redis.call('HGETALL', KEYS[1])\n"
        "local out = {v, #all / 2}\n"
        "for i = 1, #all, 2 do\n"
        "  out[#out + 1] = all[i + 1]\n"
        "  out[#out + 1] = redis.call('HGET', KEYS[2], all[i]) or ''\n"
        "end\n"
        "return out\n";

static void periodic_field(char *buf, const StoreSchedule *sc)
{
        snprintf(buf, PERIODIC_FIELD_MAX, "%u:%.64s", (unsigned)sc->owner, sc->name);
}

/* ------------------------------------------------------------------ rows -------- */

/* @sc packed as a msgpack map into @sb (initialised here). Return 0; -ENOMEM. */
static int periodic_pack(const StoreSchedule *sc, msgpack_sbuffer *sb)
{
        msgpack_packer pk;
        int e = 0;

        msgpack_sbuffer_init(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        e |= msgpack_pack_map(&pk, 16);
        e |= ipc_pack_kv_uint(&pk, "owner", sc->owner);
        e |= ipc_pack_kv_cstr(&pk, "name", sc->name);
        e |= ipc_pack_kv_uint(&pk, "gid", sc->gid);
        e |= ipc_pack_cstr(&pk, "groups");
        e |= msgpack_pack_array(&pk, (uint32_t)sc->n_groups);
        for (size_t i = 0; i < sc->n_groups; i++)
                e |= msgpack_pack_uint64(&pk, sc->groups[i]);
        e |= ipc_pack_kv_cstr(&pk, "cron", sc->cron);
        e |= ipc_pack_kv_cstr(&pk, "tz", sc->tz);
        e |= ipc_pack_kv_uint(&pk, "every_ms", sc->every_ms);
        e |= ipc_pack_kv_cstr(&pk, "missed", sc->missed);
        e |= ipc_pack_kv_cstr(&pk, "plugin", sc->plugin);
        e |= ipc_pack_cstr(&pk, "args");
        e |= msgpack_pack_bin(&pk, sc->args_len);
        e |= msgpack_pack_bin_body(&pk, sc->args, sc->args_len);
        e |= ipc_pack_cstr(&pk, "options");
        e |= msgpack_pack_bin(&pk, sc->options_len);
        e |= msgpack_pack_bin_body(&pk, sc->options, sc->options_len);
        e |= ipc_pack_kv_bool(&pk, "paused", sc->paused);
        e |= ipc_pack_kv_uint(&pk, "next_ms", sc->next_ms);
        e |= ipc_pack_kv_uint(&pk, "last_ms", sc->last_ms);
        e |= ipc_pack_kv_uint(&pk, "last_job", sc->last_job);
        e |= ipc_pack_kv_uint(&pk, "created_ms", sc->created_ms);
        if (e) {
                msgpack_sbuffer_destroy(sb);
                return -ENOMEM;
        }
        return 0;
}

static bool key_is(const msgpack_object *k, const char *name)
{
        return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(name) &&
               memcmp(k->via.str.ptr, name, k->via.str.size) == 0;
}

static uint64_t obj_uint(const msgpack_object *v)
{
        return v->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? v->via.u64 : 0;
}

/* A NUL-terminated copy of string @v at *@p (moving it on); NULL when not a string. */
static const char *obj_cstr(const msgpack_object *v, char **p)
{
        char *d = *p;

        if (v->type != MSGPACK_OBJECT_STR)
                return NULL;
        memcpy(d, v->via.str.ptr, v->via.str.size);
        d[v->via.str.size] = '\0';
        *p += v->via.str.size + 1;
        return d;
}

/* The bytes of bin (or str) @v into *@ret, *@ret_len; false when neither. */
static bool obj_bytes(const msgpack_object *v, const char **ret, size_t *ret_len)
{
        if (v->type == MSGPACK_OBJECT_BIN) {
                *ret = v->via.bin.ptr;
                *ret_len = v->via.bin.size;
        } else if (v->type == MSGPACK_OBJECT_STR) {
                *ret = v->via.str.ptr;
                *ret_len = v->via.str.size;
        } else {
                return false;
        }
        return true;
}

/*
 * @fn with the row packed in @data (@len bytes) and its ticks @ticks ("" = none).
 * Return: @fn's; 0 for a row that cannot be read (logged, left out); -ENOMEM.
 */
static int periodic_unpack(const char *data, size_t len, const char *ticks, StoreScheduleFn fn,
                           void *arg)
{
        StoreSchedule sc = {0};
        uint64_t created, next, last, job;
        gid_t *groups = NULL;
        char *strings = malloc(len + 8), *p = strings;
        msgpack_unpacked u;
        int r = 0;

        if (!strings)
                return -ENOMEM;
        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, data, len, NULL) != MSGPACK_UNPACK_SUCCESS ||
            u.data.type != MSGPACK_OBJECT_MAP)
                goto out_unreadable;
        for (uint32_t i = 0; i < u.data.via.map.size; i++) {
                const msgpack_object *k = &u.data.via.map.ptr[i].key,
                                     *v = &u.data.via.map.ptr[i].val;
                if (key_is(k, "owner"))
                        sc.owner = (uid_t)obj_uint(v);
                else if (key_is(k, "name"))
                        sc.name = obj_cstr(v, &p);
                else if (key_is(k, "gid"))
                        sc.gid = (gid_t)obj_uint(v);
                else if (key_is(k, "groups") && v->type == MSGPACK_OBJECT_ARRAY &&
                         v->via.array.size && !groups) {
                        groups = calloc(v->via.array.size, sizeof(*groups));
                        if (!groups) {
                                r = -ENOMEM;
                                goto out_free;
                        }
                        for (uint32_t g = 0; g < v->via.array.size; g++)
                                groups[g] = (gid_t)obj_uint(&v->via.array.ptr[g]);
                        sc.groups = groups;
                        sc.n_groups = v->via.array.size;
                } else if (key_is(k, "cron"))
                        sc.cron = obj_cstr(v, &p);
                else if (key_is(k, "tz"))
                        sc.tz = obj_cstr(v, &p);
                else if (key_is(k, "every_ms"))
                        sc.every_ms = obj_uint(v);
                else if (key_is(k, "missed"))
                        sc.missed = obj_cstr(v, &p);
                else if (key_is(k, "plugin"))
                        sc.plugin = obj_cstr(v, &p);
                else if (key_is(k, "args"))
                        obj_bytes(v, &sc.args, &sc.args_len);
                else if (key_is(k, "options"))
                        obj_bytes(v, &sc.options, &sc.options_len);
                else if (key_is(k, "paused"))
                        sc.paused = v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
                else if (key_is(k, "next_ms"))
                        sc.next_ms = obj_uint(v);
                else if (key_is(k, "last_ms"))
                        sc.last_ms = obj_uint(v);
                else if (key_is(k, "last_job"))
                        sc.last_job = obj_uint(v);
                else if (key_is(k, "created_ms"))
                        sc.created_ms = obj_uint(v);
        }
        if (!sc.name || !sc.missed || !sc.plugin || !sc.args || !sc.options)
                goto out_unreadable;
        /* where its ticks stand: later than the row when a host fired one since */
        if (sscanf(ticks, "%" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64, &created, &next, &last,
                   &job) == 4 &&
            created == sc.created_ms) {
                sc.next_ms = next;
                sc.last_ms = last;
                sc.last_job = job;
        }
        r = fn(&sc, arg);
        goto out_free;

out_unreadable:
        log_msg(LOG_ERR,
                "job store: redis: a row of " REDIS_KEY_SCHEDULES " cannot be read: left out");
out_free:
        msgpack_unpacked_destroy(&u);
        free(groups);
        free(strings);
        return r;
}

/* ------------------------------------------------------------------ writes ------ */

bool redis_periodic_checked(const StoreWrite *w)
{
        return w->op == STORE_OP_SCHEDULE && w->schedule.write != STORE_SCHEDULE_TICK;
}

int redis_periodic_refusal(const StoreWrite *w, const redisReply *rep)
{
        if (!redis_periodic_checked(w) || rep->type != REDIS_REPLY_INTEGER || rep->integer != 0)
                return 0;
        return w->schedule.write == STORE_SCHEDULE_ADD ? -EEXIST : -ENOENT;
}

int redis_periodic_append(redisContext *c, const StoreWrite *w, size_t *n)
{
        const StoreSchedule *sc = &w->schedule;
        char field[PERIODIC_FIELD_MAX], num[4][24], ticks[100];
        const char *argv[12] = {"EVAL",
                                NULL,
                                "3",
                                REDIS_KEY_SCHEDULES,
                                REDIS_KEY_SCHEDULE_TICKS,
                                REDIS_KEY_SCHEDULES_VERSION};
        size_t len[12], k = 6;
        msgpack_sbuffer row = {0};
        int r;

        periodic_field(field, sc);
        if (w->op == STORE_OP_SCHEDULE_DELETE) {
                redisAppendCommand(c, "HDEL %s %s", REDIS_KEY_SCHEDULES, field);
                redisAppendCommand(c, "HDEL %s %s", REDIS_KEY_SCHEDULE_TICKS, field);
                redisAppendCommand(c, "INCR %s", REDIS_KEY_SCHEDULES_VERSION);
                *n += 3;
                return 0;
        }
        if (w->op != STORE_OP_SCHEDULE)
                return 0;
        snprintf(num[0], sizeof(num[0]), "%" PRIu64, sc->created_ms);
        snprintf(num[1], sizeof(num[1]), "%" PRIu64, sc->next_ms);
        snprintf(num[2], sizeof(num[2]), "%" PRIu64, sc->last_ms);
        snprintf(num[3], sizeof(num[3]), "%" PRIu64, sc->last_job);
        argv[k++] = field;
        if (sc->write != STORE_SCHEDULE_TICK) {
                r = periodic_pack(sc, &row);
                if (r < 0)
                        return r;
                argv[k++] = row.data;
        }
        switch (sc->write) {
        case STORE_SCHEDULE_ADD:
                argv[1] = periodic_add_script;
                snprintf(ticks, sizeof(ticks), "%s %s %s %s", num[0], num[1], num[2], num[3]);
                argv[k++] = ticks;
                break;
        case STORE_SCHEDULE_CHANGE:
                argv[1] = periodic_change_script;
                for (size_t i = 0; i < 4; i++)
                        argv[k++] = num[i];
                break;
        case STORE_SCHEDULE_TICK:
                argv[1] = periodic_tick_script;
                for (size_t i = 0; i < 4; i++)
                        argv[k++] = num[i];
                break;
        }
        for (size_t i = 0; i < k; i++)
                len[i] = argv[i] == row.data ? row.size : strlen(argv[i]);
        redisAppendCommandArgv(c, (int)k, argv, len); /* copies */
        (*n)++;
        if (sc->write != STORE_SCHEDULE_TICK)
                msgpack_sbuffer_destroy(&row);
        return 0;
}

/* ------------------------------------------------------------------ reads ------- */

int redis_periodic_changed(Store *s, uint64_t *version, StoreScheduleFn fn, void *arg)
{
        char known[24];
        const char *argv[] = {"EVAL",
                              periodic_read_script,
                              "3",
                              REDIS_KEY_SCHEDULES,
                              REDIS_KEY_SCHEDULE_TICKS,
                              REDIS_KEY_SCHEDULES_VERSION,
                              known};
        redisReply *rep;
        int r = 1;

        snprintf(known, sizeof(known), "%" PRIu64, *version);
        rep = redis_query(s, (int)ELEMENTSOF(argv), argv, NULL);
        if (!rep)
                return -EIO; /* logged by redis_query() */
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 1 ||
            rep->element[0]->type != REDIS_REPLY_STRING) {
                log_msg(LOG_ERR, "job store: redis %s: reading the schedules: %s", s->path,
                        rep->type == REDIS_REPLY_ERROR ? rep->str : "an unexpected reply");
                freeReplyObject(rep);
                return -EIO;
        }
        if (rep->elements == 1) {
                freeReplyObject(rep);
                return 0; /* the version it holds */
        }
        for (size_t i = 2; i + 1 < rep->elements && r >= 0; i += 2) {
                const redisReply *row = rep->element[i], *ticks = rep->element[i + 1];
                if (row->type != REDIS_REPLY_STRING)
                        continue;
                r = periodic_unpack(row->str, row->len,
                                    ticks->type == REDIS_REPLY_STRING ? ticks->str : "", fn, arg);
        }
        if (r >= 0) {
                *version = strtoull(rep->element[0]->str, NULL, 10);
                r = 1;
        }
        freeReplyObject(rep);
        return r;
}

int redis_periodic_all(Store *s, StoreScheduleFn fn, void *arg)
{
        uint64_t version = UINT64_MAX; /* no version is that: every row */
        int r = redis_periodic_changed(s, &version, fn, arg);

        return r < 0 ? r : 0;
}
