/* SPDX-License-Identifier: MIT */
/*
 * schedules.c — schedule.add, schedule.list, schedule.remove, schedule.pause and
 * schedule.resume (schedules.h).
 *
 * Every change is made in the table under its lock, with the row's write queued to the
 * job store in the same hold (so the store's writes come in the order of the changes,
 * whatever the firing fiber queues meanwhile); the answer is packed there too, then the
 * request waits, without the lock, for the commit. A schedule.add whose write fails is
 * taken out again; a remove, pause or resume whose write fails has changed this
 * process's table only, and says so (INTERNAL): the store may bring the old state back
 * at the next start.
 *
 * Once fiberd stops (jobtable_stop()), changes answer UNAVAILABLE: the job store is
 * about to close, and the firing fiber has stopped.
 *
 * In a fleet ([store] backend = redis) the row is the fleet's, which every host's
 * table follows (schedfleet.c): an add of a name another host added meanwhile is
 * refused by the store (-EEXIST) and taken out again, a pause or resume of a schedule
 * another host removed meanwhile answers NOT_FOUND, and each change moves the table's
 * `changes` before its write and once it is committed, so a read of the fleet's that
 * crossed it is not merged over it.
 *
 * schedule.add reads the spec here, refuses what a repeating job cannot carry (the
 * options `key`, which each tick's job gets from fiberd, and `run_at`, one point in
 * time; fd arguments, which do not outlive the request), then hands [plugin, args,
 * options] to submit_check(), so a schedule is refused for what job.submit would refuse
 * in the same words.
 */
#include "daemon/server/schedules.h"
#include "daemon/daemon.h"
#include "daemon/job/joblist.h"
#include "daemon/obs/log.h"
#include "daemon/server/access.h"
#include "daemon/server/schedrow.h"
#include "daemon/server/submit.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/macro.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A cron expression's longest spelling accepted (cron_format()'s output fits). */
#define SCHEDULES_CRON_MAX 256

/* Raw bytes of a packed object, copied in as they are (IPC_KV_PACK). */
typedef struct Packed {
        const char *data;
        size_t len;
} Packed;

static int pack_packed(msgpack_packer *pk, const void *arg)
{
        const Packed *p = arg;

        return pk->callback(pk->data, p->data, p->len);
}

#define KV_UINT_OR_NIL(k, v) ((v) ? (IpcKv)IPC_KV_UINT((k), (v)) : (IpcKv)IPC_KV_NIL(k))

/* The schedule map of PROTOCOL.md. Context: the table's lock held. */
static int pack_schedule(msgpack_packer *pk, const Schedule *s)
{
        Packed args = {s->args, s->args_len}, options = {s->options, s->options_len};

        return IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_NAME, s->name),
                            IPC_KV_UINT(IPC_KEY_OWNER, s->owner),
                            IPC_KV_CSTR(IPC_KEY_CRON, s->cron_text), IPC_KV_CSTR(IPC_KEY_TZ, s->tz),
                            KV_UINT_OR_NIL(IPC_KEY_EVERY_MS, s->every_ms),
                            IPC_KV_CSTR(IPC_KEY_MISSED, schedule_missed_name(s->missed)),
                            IPC_KV_CSTR(IPC_KEY_PLUGIN, s->plugin),
                            IPC_KV_PACK(IPC_KEY_ARGS, pack_packed, &args),
                            IPC_KV_PACK(IPC_KEY_OPTIONS, pack_packed, &options),
                            IPC_KV_BOOL(IPC_KEY_PAUSED, s->paused),
                            KV_UINT_OR_NIL(IPC_KEY_NEXT_MS, s->paused ? 0 : s->next_ms),
                            KV_UINT_OR_NIL(IPC_KEY_LAST_MS, s->last_ms),
                            KV_UINT_OR_NIL(IPC_KEY_LAST_JOB, s->last_job))
                       ? -ENOMEM
                       : 0;
}

/* UNAVAILABLE once fiberd stops: the store is about to close under a change. */
static int refuse_when_stopping(Daemon *d, IpcStatus *st)
{
        if (!jobtable_stopping(&d->jobs))
                return 0;
        return ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                              "fiberd is shutting down: change the schedule once it is back");
}

/* ------------------------------------------------------------------ add ---------- */

/* The spec map {cron, tz} or {every_ms}, plus missed, into @s. */
static int read_spec(Schedule *s, const msgpack_object *o, IpcStatus *st)
{
        char cron[SCHEDULES_CRON_MAX], tz[CRON_TZ_MAX], err[256] = "";
        bool has_cron = false, has_tz = false, has_every = false;
        const msgpack_object *spec;
        const char *missed;
        size_t len;
        int r;

        r = ipc_read_map(o, "spec", &spec, st);
        if (r < 0)
                return r;
        for (uint32_t i = 0; i < spec->via.map.size; i++) {
                const msgpack_object_kv *kv = &spec->via.map.ptr[i];
                if (ipc_object_streq(&kv->key, IPC_KEY_CRON)) {
                        r = ipc_read_str(&kv->val, IPC_KEY_CRON, cron, sizeof(cron), st);
                        has_cron = true;
                } else if (ipc_object_streq(&kv->key, IPC_KEY_TZ)) {
                        r = ipc_read_str(&kv->val, IPC_KEY_TZ, tz, sizeof(tz), st);
                        has_tz = true;
                } else if (ipc_object_streq(&kv->key, IPC_KEY_EVERY_MS)) {
                        r = ipc_read_uint(&kv->val, IPC_KEY_EVERY_MS, &s->every_ms, st);
                        has_every = true;
                } else if (ipc_object_streq(&kv->key, IPC_KEY_MISSED)) {
                        r = ipc_read_strv(&kv->val, IPC_KEY_MISSED, &missed, &len, st);
                        if (r == 0 && schedule_missed_parse(missed, len, &s->missed) < 0)
                                r = ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                                   "missed: \"%.*s\" is not " IPC_MISSED_SKIP
                                                   " or " IPC_MISSED_RUN_ONCE,
                                                   (int)MIN(len, (size_t)32), missed);
                } else {
                        r = ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                           "spec: unknown key %.*s; the keys are cron, tz, "
                                           "every_ms and missed",
                                           kv->key.type == MSGPACK_OBJECT_STR
                                                   ? (int)MIN(kv->key.via.str.size, 32u)
                                                   : 0,
                                           kv->key.type == MSGPACK_OBJECT_STR ? kv->key.via.str.ptr
                                                                              : "");
                }
                if (r < 0)
                        return r;
        }
        if (has_cron == has_every)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      has_cron ? "spec: cron or every_ms, not both"
                                               : "spec: cron or every_ms is missing");
        if (has_tz && !has_cron)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "tz: goes with cron (an interval has no time zone)");
        if (has_every && s->every_ms < IPC_SCHEDULE_EVERY_MS_MIN)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "every_ms: %llu is below the least interval, %d ms",
                                      (unsigned long long)s->every_ms, IPC_SCHEDULE_EVERY_MS_MIN);
        if (has_every && s->every_ms > IPC_RUN_AT_MAX_AHEAD_MS)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "every_ms: more than 10 years");
        if (!has_cron)
                return 0;
        r = schedule_set_cron(s, cron, has_tz ? tz : NULL, err, sizeof(err));
        if (r == -EINVAL)
                /* cron_parse() names the field or the zone: say which param it was */
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, r, "%s: %s",
                                      strncmp(err, "time zone", 9) == 0 ? IPC_KEY_TZ : IPC_KEY_CRON,
                                      err);
        return r;
}

/* Copies @o (nil: an empty map) packed into *@dst. */
static int copy_packed(const msgpack_object *o, char **dst, size_t *ret_len)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        int r;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        r = ipc_object_is_nil(o) ? msgpack_pack_map(&pk, 0) : msgpack_pack_object(&pk, *o);
        r = r ? -ENOMEM : schedule_set_copy(dst, ret_len, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
        return r;
}

/* [plugin, args, options] of schedule.add's @params: checked as job.submit checks them,
 * less what cannot repeat, then copied into @s. */
static int read_job(Daemon *d, Request *req, Schedule *s, const msgpack_object *params,
                    IpcStatus *st)
{
        const msgpack_object *args = ipc_array_at(params, IPC_SCHEDULE_PARAM_ARGS);
        const msgpack_object *opts = ipc_array_at(params, IPC_SCHEDULE_PARAM_OPTIONS);
        msgpack_object job = {.type = MSGPACK_OBJECT_ARRAY};
        const char *plugin;
        size_t len;
        int r;

        if (opts && opts->type == MSGPACK_OBJECT_MAP) {
                if (ipc_map_find(opts, IPC_OPT_KEY))
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "options: key is fiberd's in a schedule: each "
                                              "tick's job gets the key schedule:<name>:<tick ms>");
                if (ipc_map_find(opts, IPC_OPT_RUN_AT))
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "options: run_at is one point in time; a "
                                              "schedule's jobs run at its ticks (delay_ms "
                                              "delays each)");
        }
        if (args && ipc_object_fds_needed(args))
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "args: a schedule cannot keep an fd argument (an fd does "
                                      "not outlive its request); give a path");
        /* [plugin, args, options]: the params from IPC_SCHEDULE_PARAM_PLUGIN on */
        if (params->via.array.size > IPC_SCHEDULE_PARAM_PLUGIN) {
                job.via.array.ptr = params->via.array.ptr + IPC_SCHEDULE_PARAM_PLUGIN;
                job.via.array.size =
                        MIN(params->via.array.size - IPC_SCHEDULE_PARAM_PLUGIN, IPC_SUBMIT_NPARAMS);
        }
        r = submit_check(d, req->creds, &job, st);
        if (r < 0)
                return r;
        r = ipc_read_strv(ipc_array_at(params, IPC_SCHEDULE_PARAM_PLUGIN), "plugin", &plugin, &len,
                          st);
        if (r == 0 && ((r = schedule_set_copy(&s->plugin, NULL, plugin, len)) < 0 ||
                       (r = copy_packed(args, &s->args, &s->args_len)) < 0 ||
                       (r = copy_packed(opts, &s->options, &s->options_len)) < 0))
                return r;
        if (r == 0 && s->args_len + s->options_len > SCHEDULE_PACKED_MAX)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -E2BIG,
                                      "args and options: %zu bytes packed; a schedule keeps at "
                                      "most %d",
                                      s->args_len + s->options_len, SCHEDULE_PACKED_MAX);
        return r;
}

/* The caller's ids, kept: its ticks submit as they. */
static int copy_creds(Schedule *s, const Creds *c)
{
        size_t n = MIN(c->n_groups, (size_t)SCHEDULE_GROUPS_MAX);

        s->gid = c->gid;
        if (!n)
                return 0;
        s->groups = malloc(n * sizeof(gid_t));
        if (!s->groups)
                return -ENOMEM;
        memcpy(s->groups, c->groups, n * sizeof(gid_t));
        s->n_groups = n;
        return 0;
}

int schedules_add(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        ScheduleTable *t = &d->schedules;
        const msgpack_object *params = &req->msg.params;
        char name[IPC_SCHEDULE_NAME_MAX + 1];
        uint64_t now_ms = job_now_ms(), serial = 0;
        StoreWaiter waiter;
        Schedule *s = NULL;
        const char *nv;
        size_t len;
        int r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_SUBMIT)
                return access_denied(&d->cfg, ACCESS_SUBMIT, "adding a schedule", st);
        r = refuse_when_stopping(d, st);
        if (r < 0)
                return r;
        r = ipc_read_strv(ipc_array_at(params, IPC_SCHEDULE_PARAM_NAME), IPC_KEY_NAME, &nv, &len,
                          st);
        if (r < 0)
                return r;
        if (!schedule_name_valid(nv, len))
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "name: \"%.*s\" is not a schedule name: 1 to %d of A-Z a-z "
                                      "0-9 _ . -",
                                      (int)MIN(len, (size_t)IPC_SCHEDULE_NAME_MAX + 1), nv,
                                      IPC_SCHEDULE_NAME_MAX);
        memcpy(name, nv, len);
        name[len] = '\0';
        r = schedule_new(name, req->uid, &s);
        if (r == 0 && (r = read_spec(s, ipc_array_at(params, IPC_SCHEDULE_PARAM_SPEC), st)) == 0 &&
            (r = read_job(d, req, s, params, st)) == 0)
                r = copy_creds(s, req->creds);
        if (r < 0)
                goto out_free;
        s->created_ms = now_ms;
        r = schedule_start(s, now_ms);
        if (r == -ERANGE) {
                r = ipc_status_set(st, IPC_INVALID_ARGUMENT, r,
                                   "cron: \"%s\" has no tick in the next %d years", s->cron_text,
                                   CRON_HORIZON_YEARS);
                goto out_free;
        }
        if (r < 0)
                goto out_free;

        store_waiter_init(&waiter);
        pthread_mutex_lock(&t->lock);
        r = schedule_insert_locked(t, s);
        if (r == 0) {
                serial = s->serial;
                r = pack_schedule(pk, s);
                if (r == 0)
                        r = schedrow_save_locked(d->store, s, STORE_SCHEDULE_ADD, &waiter);
                if (r < 0)
                        schedule_remove_locked(t, s);
                else
                        s = NULL; /* the table's */
                schedule_changed_locked(t);
        }
        pthread_mutex_unlock(&t->lock);
        if (r == -EEXIST) {
                r = ipc_status_set(st, IPC_ALREADY_EXISTS, r,
                                   "a schedule named %s of yours exists already: remove it first "
                                   "(schedule.remove)",
                                   name);
                goto out_free;
        }
        if (r == -EDQUOT) {
                r = ipc_status_set(st, IPC_OVERLOADED, r,
                                   "uid %u has %d schedules already: remove some first",
                                   (unsigned)req->uid, SCHEDULE_MAX_PER_OWNER);
                goto out_free;
        }
        if (r < 0)
                goto out_free;
        r = store_waiter_wait(&waiter);
        pthread_mutex_lock(&t->lock);
        schedule_changed_locked(t); /* committed: a fleet's reads see it from now on */
        if (r < 0) {
                s = schedule_find_serial_locked(t, serial);
                if (s)
                        schedule_remove_locked(t, s);
                t->fleet_stale |= r == -EEXIST; /* a fleet: the other host's, read it */
        }
        pthread_mutex_unlock(&t->lock);
        if (r == -EEXIST) {
                r = ipc_status_set(st, IPC_ALREADY_EXISTS, r,
                                   "a schedule named %s of yours exists already (added through "
                                   "another fiberd host of the fleet): remove it first "
                                   "(schedule.remove)",
                                   name);
                goto out_free;
        }
        if (r < 0) {
                r = ipc_status_set(st, IPC_INTERNAL, r,
                                   "the job store could not record the schedule (%s); it was not "
                                   "added: see fiberd's log",
                                   strerror(-r));
                goto out_free;
        }
        log_msg(LOG_INFO, "uid %u added schedule %s", (unsigned)req->uid, name);
        return 0;

out_free:
        schedule_free(s);
        return r;
}

/* ------------------------------------------------------------------ list --------- */

int schedules_list(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        ScheduleTable *t = &d->schedules;
        bool all = access_tier(&d->cfg, req->creds) >= ACCESS_ADMIN;
        size_t budget = joblist_budget(d->cfg.max_message);
        msgpack_sbuffer sb;
        msgpack_packer spk;
        uint32_t n = 0;
        int r = 0;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&spk, &sb, msgpack_sbuffer_write);
        pthread_mutex_lock(&t->lock);
        for (Schedule *s = schedule_first_locked(t); s; s = schedule_after_locked(t, s))
                n += all || s->owner == req->uid;
        r = msgpack_pack_array(&spk, n) ? -ENOMEM : 0;
        for (Schedule *s = schedule_first_locked(t); s && r == 0 && sb.size <= budget;
             s = schedule_after_locked(t, s))
                if (all || s->owner == req->uid)
                        r = pack_schedule(&spk, s);
        pthread_mutex_unlock(&t->lock);
        if (r == 0 && sb.size > budget)
                r = ipc_status_set(st, IPC_MESSAGE_TOO_LARGE, -EMSGSIZE,
                                   "%u schedules do not fit in one answer of %zu bytes",
                                   (unsigned)n, budget);
        else if (r == 0 && pk->callback(pk->data, sb.data, sb.size))
                r = -ENOMEM;
        msgpack_sbuffer_destroy(&sb);
        return r;
}

/* ------------------------------------------------------------------ by name ------ */

typedef enum NamedOp {
        NAMED_REMOVE,
        NAMED_PAUSE,
        NAMED_RESUME,
} NamedOp;

/* The verbs of PERMISSION_DENIED messages, and the log's. */
static const char *const named_verb[] = {
        [NAMED_REMOVE] = "removed",
        [NAMED_PAUSE] = "paused",
        [NAMED_RESUME] = "resumed",
};

/* @op on @s: the change in the table and its write queued (@waiter told once it is
 * committed; *@ret_wait false when nothing changed). Context: the table's lock held. */
static int act_locked(Daemon *d, Schedule *s, NamedOp op, StoreWaiter *waiter, bool *ret_wait,
                      IpcStatus *st)
{
        int r;

        *ret_wait = true;
        switch (op) {
        case NAMED_REMOVE:
                r = store_delete_schedule(d->store, s->owner, s->name, waiter);
                if (r == 0) {
                        schedule_remove_locked(&d->schedules, s);
                        schedule_changed_locked(&d->schedules);
                }
                return r;
        case NAMED_PAUSE:
                if (s->paused) {
                        *ret_wait = false;
                        return 0;
                }
                s->paused = true;
                s->catchup_ms = 0;
                s->next_ms = 0;
                break;
        case NAMED_RESUME:
                if (!s->paused && !s->broken) {
                        *ret_wait = false;
                        return 0;
                }
                r = schedule_start(s, job_now_ms());
                if (r == -EINVAL)
                        return ipc_status_set(st, IPC_FAILED_PRECONDITION, r,
                                              "schedule %s cannot tick: %s; remove it and add "
                                              "it again",
                                              s->name, s->broken ? s->broken : "no spec");
                if (r == -ERANGE)
                        return ipc_status_set(st, IPC_FAILED_PRECONDITION, r,
                                              "schedule %s has no tick in the next %d years",
                                              s->name, CRON_HORIZON_YEARS);
                if (r < 0)
                        return r;
                s->failing = false;
                fiber_event_set(&d->schedules.wake);
                break;
        }
        schedule_changed_locked(&d->schedules);
        return schedrow_save_locked(d->store, s, STORE_SCHEDULE_CHANGE, waiter);
}

/* schedule.remove, schedule.pause, schedule.resume [name, owner?]. */
static int schedules_named(Daemon *d, Request *req, NamedOp op, msgpack_packer *pk, IpcStatus *st)
{
        ScheduleTable *t = &d->schedules;
        const msgpack_object *params = &req->msg.params, *o;
        AccessTier tier = access_tier(&d->cfg, req->creds);
        uint64_t owner = req->uid;
        StoreWaiter waiter;
        Schedule *s, *removed = NULL;
        const char *name;
        bool wait = false;
        size_t len;
        int r, committed = 0;

        if (op == NAMED_RESUME && tier < ACCESS_SUBMIT)
                return access_denied(&d->cfg, ACCESS_SUBMIT, "resuming a schedule", st);
        r = refuse_when_stopping(d, st);
        if (r < 0)
                return r;
        r = ipc_read_strv(ipc_array_at(params, IPC_SCHEDULE_PARAM_NAME), IPC_KEY_NAME, &name, &len,
                          st);
        if (r < 0)
                return r;
        o = ipc_array_at(params, IPC_SCHEDULE_PARAM_OWNER);
        if (!ipc_object_is_nil(o) && (r = ipc_read_uint(o, IPC_KEY_OWNER, &owner, st)) < 0)
                return r;
        if (owner != req->uid && tier < ACCESS_ADMIN)
                return access_denied(&d->cfg, ACCESS_ADMIN, "acting on another user's schedule",
                                     st);
        len = MIN(len, (size_t)IPC_SCHEDULE_NAME_MAX + 1);
        store_waiter_init(&waiter);
        pthread_mutex_lock(&t->lock);
        s = owner <= UINT32_MAX ? schedule_find_locked(t, (uid_t)owner, name, len) : NULL;
        if (!s) {
                pthread_mutex_unlock(&t->lock);
                if (owner == req->uid)
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                              "no schedule named \"%.*s\" of yours (see "
                                              "schedule.list)",
                                              (int)len, name);
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "no schedule named \"%.*s\" of uid %llu", (int)len, name,
                                      (unsigned long long)owner);
        }
        /* remove answers the schedule as it was; the others as they leave it */
        r = op == NAMED_REMOVE ? pack_schedule(pk, s) : 0;
        if (r == 0)
                r = act_locked(d, s, op, &waiter, &wait, st);
        if (r == 0 && op != NAMED_REMOVE)
                r = pack_schedule(pk, s);
        if (op == NAMED_REMOVE && !list_linked(&s->link))
                removed = s; /* out of the table: freed below */
        if (r == 0)
                log_msg(LOG_INFO, "uid %u %s schedule %s of uid %u", (unsigned)req->uid,
                        named_verb[op], s->name, (unsigned)s->owner);
        pthread_mutex_unlock(&t->lock);
        if (r == 0 && wait) {
                committed = store_waiter_wait(&waiter);
                pthread_mutex_lock(&t->lock);
                schedule_changed_locked(t); /* committed: a fleet's reads see it from now on */
                t->fleet_stale |= committed == -ENOENT;
                pthread_mutex_unlock(&t->lock);
        }
        if (committed == -ENOENT) /* a fleet: gone there; this host's copy leaves soon */
                r = ipc_status_set(st, IPC_NOT_FOUND, committed,
                                   "schedule %.*s was removed through another fiberd host of the "
                                   "fleet",
                                   (int)len, name);
        else if (committed < 0)
                r = ipc_status_set(st, IPC_INTERNAL, committed,
                                   "the job store could not record it (%s): fiberd goes on with "
                                   "it %s, but may not remember that after a restart; see "
                                   "fiberd's log",
                                   strerror(-committed), named_verb[op]);
        schedule_free(removed);
        return r;
}

int schedules_remove(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return schedules_named(ctx, req, NAMED_REMOVE, pk, st);
}

int schedules_pause(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return schedules_named(ctx, req, NAMED_PAUSE, pk, st);
}

int schedules_resume(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return schedules_named(ctx, req, NAMED_RESUME, pk, st);
}
