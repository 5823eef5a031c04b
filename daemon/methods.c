/* SPDX-License-Identifier: MIT */
/*
 * methods.c — the RPC methods of ipc/PROTOCOL.md: ping, plugins.list, job.submit,
 * job.status, job.wait, job.result, job.cancel, job.list, stats, and the metrics
 * (OpenMetrics text, openmetrics.c) and job.logs (the job's host->log lines, joblog.h;
 * its owner or an admin, as every job method).
 *
 * Each runs in its own request fiber (server.c), reads its params with ipc/value.h
 * (which words the INVALID_ARGUMENT messages), and packs one result object. Access
 * (access.h): every client may ping, list plugins, read stats and its own jobs; job.submit
 * and job.run need the submit tier, a negative priority the admin tier
 * (PERMISSION_DENIED naming the tier); another user's job is visible to admins only,
 * and to anyone else answers NOT_FOUND worded as for an id that never existed.
 *
 * job.wait parks on the job's `finished` event in slices of at most a second, so a
 * waiter whose connection broke stops waiting instead of holding its fiber until the
 * job ends. job.run is job.submit followed by that same wait (wait_final()) in one
 * request, gearman's SUBMIT_JOB: one round trip per job. The job is accepted before the
 * wait starts, so a client that goes away leaves it running, as after job.submit.
 */
#include "daemon/access.h"
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/crash.h"
#include "daemon/openmetrics.h"
#include "daemon/plugin_host.h"
#include "daemon/plugin_job.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_SLICE_NS NSEC_PER_SEC

static uint64_t retention_minutes(const Daemon *d)
{
        return d->jobs.retention_ns / (60 * NSEC_PER_SEC);
}

/* ------------------------------------------------------------------ fleet ------- */

/*
 * A fleet (store-redis.c) runs a job on whichever host read it off the shared queue:
 * an id this host's table does not hold is looked up in the shared store, and the
 * answer is built from a copy of its record (jobtable_fleet_copy()). job.wait on such a
 * copy polls, from FLEET_POLL_MIN_NS doubling to FLEET_POLL_MAX_NS: this host's table
 * each time (it waits on the job itself as soon as the table holds it), the shared
 * record once the pause reached FLEET_POLL_REMOTE_NS (after 0.2 + 0.4 + 0.8 ms).
 */
#define FLEET_POLL_MIN_NS (200 * NSEC_PER_USEC)
#define FLEET_POLL_MAX_NS (100 * NSEC_PER_MSEC)
#define FLEET_POLL_REMOTE_NS (1600 * NSEC_PER_USEC) /* polls before: local only */

typedef struct FleetFetch {
        JobTable *table;
        Job *job;
} FleetFetch;

static int fleet_copy_one(const StoreRecord *rec, void *arg)
{
        FleetFetch *f = arg;
        return jobtable_fleet_copy(f->table, rec, &f->job);
}

/* Job @id of the fleet: this host's (referenced), else a copy of its shared record; NULL
 * when neither exists (or the store cannot be read: logged). */
static Job *fleet_get(Daemon *d, uint64_t id)
{
        FleetFetch f = {.table = &d->jobs};
        Job *j = jobtable_get(&d->jobs, id);

        if (j || !d->store || !store_fleet(d->store))
                return j;
        return store_fetch(d->store, id, fleet_copy_one, &f) == 0 ? f.job : NULL;
}

/*
 * job.wait on a fleet copy @j (reference taken): polls its shared record until it is
 * final, @deadline passes or @req's connection closed; once this host runs the job,
 * waits on it instead. Returns the newest copy or the local job (referenced).
 */
static Job *fleet_wait(Daemon *d, Request *req, Job *j, uint64_t deadline)
{
        uint64_t pause = FLEET_POLL_MIN_NS;

        while (j->fleet_copy && !job_state_final(j->state)) {
                uint64_t now = sched_now_ns();
                Job *n = jobtable_get(&d->jobs, j->id);

                if (n) { /* this host took it: its own events from here on */
                        job_unref(j);
                        return n;
                }
                if (now >= deadline || request_conn_closed(req))
                        break;
                fiber_sleep_until(deadline - now > pause ? now + pause : deadline);
                pause = pause * 2 < FLEET_POLL_MAX_NS ? pause * 2 : FLEET_POLL_MAX_NS;
                /* the first polls look here only: most jobs are taken within a few ms,
                 * by this host as often as not, and a read of the shared record costs
                 * the server worker a round trip */
                if (pause < FLEET_POLL_REMOTE_NS)
                        continue;
                n = fleet_get(d, j->id);
                if (n) {
                        job_unref(j);
                        j = n;
                }
        }
        return j;
}

/* Reads params[@i] as a job id and returns the job (referenced) if @req may see it. */
static int job_from_params(Daemon *d, Request *req, size_t i, Job **ret, IpcStatus *st)
{
        uint64_t id;
        Job *j;
        int r = ipc_read_uint(ipc_array_at(&req->msg.params, i), "job id", &id, st);

        if (r < 0)
                return r;
        j = fleet_get(d, id); /* this host's table, else a fleet's shared store */
        if (j && j->owner != req->uid && access_tier(&d->cfg, req->creds) < ACCESS_ADMIN) {
                /* not yours: as if it did not exist, so ids leak nothing */
                j = job_unref(j);
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "no job %llu of yours (finished jobs are kept for %llu "
                                      "minutes)",
                                      (unsigned long long)id,
                                      (unsigned long long)retention_minutes(d));
        }
        if (!j) {
                if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                              "no job %llu of yours (finished jobs are kept "
                                              "for %llu minutes)",
                                              (unsigned long long)id,
                                              (unsigned long long)retention_minutes(d));
                if (id == 0 || (id >= d->jobs.next_id && !store_fleet(d->store)))
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT, "no job %llu",
                                              (unsigned long long)id);
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "no job %llu (finished jobs are kept for %llu minutes)",
                                      (unsigned long long)id,
                                      (unsigned long long)retention_minutes(d));
        }
        *ret = j;
        return 0;
}

/* PERMISSION_DENIED for @what, naming the tier it needs and who has it. */
static int access_denied(Daemon *d, AccessTier needed, const char *what, IpcStatus *st)
{
        char who[160];

        access_who_has(&d->cfg, needed, who, sizeof(who));
        return ipc_status_set(st, IPC_PERMISSION_DENIED, -EACCES,
                              "%s needs the %s tier (held by %s; see [access] in fiberd's "
                              "config)",
                              what, access_tier_name(needed), who);
}

static int pack_record(Daemon *d, Job *j, msgpack_packer *pk)
{
        int r;

        jobtable_lock(&d->jobs);
        r = job_pack_record(pk, j, true);
        jobtable_unlock(&d->jobs);
        return r;
}

/* ------------------------------------------------------------------ methods ----- */

static int method_ping(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        int r = IPC_PACK_MAP(
                pk, IPC_KV_CSTR(IPC_KEY_VERSION, FIBERD_VERSION),
                IPC_KV_UINT(IPC_KEY_PROTOCOL, FIBERD_PROTOCOL_VERSION),
                IPC_KV_UINT(IPC_KEY_PID, (uint64_t)getpid()),
                IPC_KV_UINT(IPC_KEY_UPTIME_MS, (sched_now_ns() - d->start_ns) / NSEC_PER_MSEC));

        return r ? -ENOMEM : 0;
}

static int method_plugins_list(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return plugin_host_pack_list(pk);
}

/* plugins.clear [name]: forget the crashes of a quarantined plugin (crash.h) and scan
 * the plugin directory again, so it loads. Admin tier. */
static int method_plugins_clear(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        const char *name;
        size_t len;
        int r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                return access_denied(d, ACCESS_ADMIN, "clearing a plugin's quarantine", st);
        r = ipc_read_strv(ipc_array_at(&req->msg.params, 0), "name", &name, &len, st);
        if (r < 0)
                return r;
        r = crash_clear(name, len);
        if (r < 0)
                return ipc_status_errno(st, r, "cannot clear the quarantine: %s", strerror(-r));
        if (r == 0)
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "no quarantined plugin named \"%.*s\" (see fiberctl "
                                      "plugins)",
                                      (int)(len > 64 ? 64 : len), name);
        log_msg(LOG_NOTICE, "uid %u cleared the quarantine of plugin %.*s; loading it again",
                (unsigned)req->uid, (int)(len > 64 ? 64 : len), name);
        plugin_host_rescan(d->cfg.plugin_dir);
        return msgpack_pack_map(pk, 1) | ipc_pack_kv_uint(pk, IPC_KEY_CLEARED, (uint64_t)r)
                       ? -ENOMEM
                       : 0;
}

/*
 * The index of the job class named by the `class` option (@name, @len bytes, not
 * NUL-terminated), or INVALID_ARGUMENT "unknown class NAME (known: a, b)".
 */
static int class_from_option(Daemon *d, const char *name, size_t len, int *ret, IpcStatus *st)
{
        char want[SCHED_CLASS_NAME_MAX + 1], known[SCHED_MAX_CLASSES * (SCHED_CLASS_NAME_MAX + 2)];
        size_t n = 0;
        int cls = -ENOENT;

        if (len < sizeof(want) && !memchr(name, '\0', len)) {
                memcpy(want, name, len);
                want[len] = '\0';
                cls = sched_class_find(d->job_sched, want);
        }
        if (cls >= 0) {
                *ret = cls;
                return 0;
        }
        known[0] = '\0';
        for (unsigned i = 0; i < sched_classes(d->job_sched) && n < sizeof(known); i++) {
                int w = snprintf(known + n, sizeof(known) - n, "%s%s", i ? ", " : "",
                                 sched_class_name(d->job_sched, i));
                if (w < 0)
                        break;
                n += (size_t)w;
        }
        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL, "unknown class %.*s (known: %s)",
                              (int)(len > 64 ? 64 : len), name, known);
}

/*
 * Accepts the job that params [plugin, args, options] (job.submit's, also the first
 * three of job.run's) describe, owned by @req's uid: every check, error and limit of
 * job.submit is here. @ret: out, one reference, written only on success.
 */
static int submit_from_params(Daemon *d, Request *req, bool answer_at_end, Job **ret, IpcStatus *st)
{
        static const msgpack_object empty_map = {.type = MSGPACK_OBJECT_MAP};
        const msgpack_object *params = &req->msg.params;
        const msgpack_object *args = &empty_map, *opts = NULL, *o;
        const char *name;
        size_t name_len;
        int64_t priority = 0;
        uint64_t timeout_ms = 0;
        const char *class_name = NULL;
        size_t class_len = 0;
        int cls = 0;
        char cname[128];
        const Plugin *p;
        JobOrigin origin;
        Job *j;
        int r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_SUBMIT)
                return access_denied(d, ACCESS_SUBMIT, "submitting a job", st);
        r = ipc_read_strv(ipc_array_at(params, IPC_SUBMIT_PARAM_PLUGIN), "plugin", &name, &name_len,
                          st);
        if (r < 0)
                return r;
        o = ipc_array_at(params, IPC_SUBMIT_PARAM_ARGS);
        if (!ipc_object_is_nil(o) && (r = ipc_read_map(o, "args", &args, st)) < 0)
                return r;
        o = ipc_array_at(params, IPC_SUBMIT_PARAM_OPTIONS);
        if (!ipc_object_is_nil(o) && (r = ipc_read_map(o, "options", &opts, st)) < 0)
                return r;
        for (uint32_t i = 0; opts && i < opts->via.map.size; i++) {
                const msgpack_object_kv *kv = &opts->via.map.ptr[i];
                if (ipc_object_streq(&kv->key, IPC_OPT_PRIORITY))
                        r = ipc_read_int_range(&kv->val, IPC_OPT_PRIORITY, INT_MIN, INT_MAX,
                                               &priority, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_TIMEOUT_MS))
                        r = ipc_read_uint(&kv->val, IPC_OPT_TIMEOUT_MS, &timeout_ms, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_CLASS))
                        r = ipc_read_strv(&kv->val, IPC_OPT_CLASS, &class_name, &class_len, st);
                else
                        r = ipc_status_set(
                                st, IPC_INVALID_ARGUMENT, -EINVAL,
                                "unknown option %s%.*s; the options are priority, "
                                "timeout_ms and class",
                                kv->key.type == MSGPACK_OBJECT_STR ? "" : "(not a string)",
                                kv->key.type == MSGPACK_OBJECT_STR ? (int)kv->key.via.str.size : 0,
                                kv->key.type == MSGPACK_OBJECT_STR ? kv->key.via.str.ptr : "");
                if (r < 0)
                        return r;
        }
        if (priority < 0 && access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                return access_denied(d, ACCESS_ADMIN, "a negative priority", st);
        if (timeout_ms > UINT64_MAX / NSEC_PER_MSEC)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "timeout_ms: %llu is too large",
                                      (unsigned long long)timeout_ms);
        if (class_name && (r = class_from_option(d, class_name, class_len, &cls, st)) < 0)
                return r;
        {
                /* a class reserved to admins ([class.NAME] admin_only; default too) */
                const ConfigClass *k =
                        config_class_find(&d->cfg, sched_class_name(d->job_sched, (unsigned)cls));
                if (k && k->admin_only && access_tier(&d->cfg, req->creds) < ACCESS_ADMIN) {
                        char what[SCHED_CLASS_NAME_MAX + 16];
                        snprintf(what, sizeof(what), "the class %s", k->name);
                        return access_denied(d, ACCESS_ADMIN, what, st);
                }
        }
        p = plugin_host_find(name, name_len);
        if (!p) {
                char loaded[512];
                plugin_host_names(loaded, sizeof(loaded));
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "no plugin named \"%.*s\" (loaded: %s); see fiberctl plugins",
                                      (int)(name_len > 64 ? 64 : name_len), name,
                                      *loaded ? loaded : "none");
        }
        snprintf(cname, sizeof(cname), "%s", plugin_host_name(p));
        origin = (JobOrigin){.creds = req->creds,
                             .fds = req->fds,
                             .n_fds = req->n_fds,
                             .answer_at_end = answer_at_end};
        r = plugin_host_check_args(p, args, &origin, st); /* the plugin's check_args */
        if (r < 0)
                return r;
        r = jobtable_submit(&d->jobs, &origin, p, cname, args, (int)priority,
                            timeout_ms * NSEC_PER_MSEC, (unsigned)cls,
                            sched_class_name(d->job_sched, (unsigned)cls), &j);
        req->fds = origin.fds; /* NULL when the job took them */
        req->n_fds = origin.n_fds;
        if (r == -EAGAIN)
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "%zu jobs are queued already (max_queued); retry later",
                                      d->jobs.max_queued);
        if (r == -EDQUOT)
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u has %zu jobs queued already "
                                      "(max_queued_per_user); retry later",
                                      (unsigned)req->uid,
                                      d->jobs.dispatch.quotas.max_queued_per_user);
        if (r == -EBUSY)
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u submits faster than %u jobs a second "
                                      "(submit_rate_per_user); retry later",
                                      (unsigned)req->uid,
                                      d->jobs.dispatch.quotas.submit_rate_per_user);
        if (r == -ESHUTDOWN)
                return ipc_status_set(st, IPC_UNAVAILABLE, r, "fiberd is shutting down");
        if (r < 0)
                return ipc_status_errno(st, r, "cannot queue the job: %s", strerror(-r));
        /* the job store (store.h): answer only once the job is on disk */
        r = jobtable_wait_durable(&d->jobs, j);
        if (r < 0) {
                job_unref(j);
                return ipc_status_set(st, IPC_INTERNAL, r,
                                      "the job store could not record the job (%s); it was "
                                      "cancelled unless it had ended already: see fiberd's "
                                      "log",
                                      strerror(-r));
        }
        *ret = j;
        return 0;
}

static int method_submit(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Job *j;
        int r = submit_from_params(ctx, req, false, &j, st);

        if (r < 0)
                return r;
        r = msgpack_pack_map(pk, 1) | ipc_pack_kv_uint(pk, IPC_KEY_ID, j->id);
        job_unref(j);
        return r ? -ENOMEM : 0;
}

static int method_status(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        Job *j;
        int r = job_from_params(d, req, IPC_JOB_PARAM_ID, &j, st);

        if (r < 0)
                return r;
        r = pack_record(d, j, pk);
        job_unref(j);
        return r;
}

/* Reads the wait limit at params[@i] (nil or absent = no limit) into *@ret_ms. */
static int wait_ms_from_params(Request *req, size_t i, uint64_t *ret_ms, IpcStatus *st)
{
        const msgpack_object *o = ipc_array_at(&req->msg.params, i);
        uint64_t ms = UINT64_MAX;
        int r;

        if (!ipc_object_is_nil(o) && (r = ipc_read_uint(o, IPC_OPT_TIMEOUT_MS, &ms, st)) < 0)
                return r;
        *ret_ms = ms;
        return 0;
}

/*
 * Parks the request fiber on @j's `finished` event until the job is final, @deadline
 * passes (absolute; SCHED_FOREVER = no limit) or @req's connection is gone (checked
 * once per WAIT_SLICE_NS slice). Never an error: the caller packs the record as it is.
 */
static void wait_final(Request *req, Job *j, uint64_t deadline)
{
        for (;;) {
                uint64_t now = sched_now_ns(), slice;

                if (now >= deadline)
                        break;
                slice = deadline - now > WAIT_SLICE_NS ? now + WAIT_SLICE_NS : deadline;
                if (fiber_event_wait(&j->finished, slice) != -ETIMEDOUT || request_conn_closed(req))
                        break;
        }
}

/* Waits (at most @timeout_ms) for @j to be final, then answers with its record, final
 * or as it stands; drops the caller's reference. Context: a request fiber. */
static int answer_when_final(Daemon *d, Request *req, Job *j, uint64_t timeout_ms,
                             msgpack_packer *pk, IpcStatus *st)
{
        uint64_t deadline =
                timeout_ms == UINT64_MAX || timeout_ms > UINT64_MAX / (2 * NSEC_PER_MSEC)
                        ? SCHED_FOREVER
                        : sched_deadline_after(timeout_ms * NSEC_PER_MSEC);
        bool unavailable;
        int r;

        if (j->fleet_copy) /* run by the fleet: its shared record until this host has it */
                j = fleet_wait(d, req, j, timeout_ms ? deadline : 0);
        if (timeout_ms && !j->fleet_copy)
                wait_final(req, j, deadline);
        jobtable_lock(&d->jobs);
        /* shutdown left the job queued in the store (store.h): not this process's to end */
        unavailable = d->jobs.stopping && (j->requeued || !job_state_final(j->state));
        jobtable_unlock(&d->jobs);
        if (unavailable) {
                r = ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN,
                                   "fiberd is shutting down; job %llu stays queued in its "
                                   "store: wait for it again once fiberd is back",
                                   (unsigned long long)j->id);
                job_unref(j);
                return r;
        }
        /* what the answer shows is on disk first: a final state (a job.run
         * has no record before that), or at least the submission */
        if (!j->fleet_copy && (r = jobtable_wait_recorded(&d->jobs, j)) < 0) {
                job_unref(j);
                return ipc_status_set(st, IPC_INTERNAL, r,
                                      "the job store could not record job %llu (%s): see "
                                      "fiberd's log",
                                      (unsigned long long)j->id, strerror(-r));
        }
        r = pack_record(d, j, pk);
        job_unref(j);
        return r;
}

static int method_wait(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        uint64_t timeout_ms;
        Job *j;
        int r;

        r = wait_ms_from_params(req, IPC_WAIT_PARAM_TIMEOUT_MS, &timeout_ms, st);
        if (r < 0)
                return r;
        r = job_from_params(d, req, IPC_JOB_PARAM_ID, &j, st);
        if (r < 0)
                return r;
        return answer_when_final(d, req, j, timeout_ms, pk, st);
}

/* job.run [plugin, args, options, timeout_ms]: job.submit, then job.wait on that job. The
 * wait limit is read first, so a bad one refuses the request before a job is queued. */
static int method_run(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        uint64_t timeout_ms;
        Job *j;
        int r;

        r = wait_ms_from_params(req, IPC_RUN_PARAM_TIMEOUT_MS, &timeout_ms, st);
        if (r < 0)
                return r;
        r = submit_from_params(d, req, true, &j, st);
        if (r < 0)
                return r;
        return answer_when_final(d, req, j, timeout_ms, pk, st);
}

static int method_result(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        Job *j;
        int r = job_from_params(d, req, IPC_JOB_PARAM_ID, &j, st);

        if (r < 0)
                return r;
        jobtable_lock(&d->jobs);
        switch (j->state) {
        case JOB_DONE:
                if (j->result)
                        r = pk->callback(pk->data, j->result, j->result_len) ? -ENOMEM : 0;
                else
                        r = msgpack_pack_nil(pk) ? -ENOMEM : 0;
                break;
        case JOB_FAILED:
        case JOB_CANCELLED:
                r = ipc_status_set(st, j->error_code ? j->error_code : IPC_INTERNAL, 0,
                                   "job %llu %s: %s", (unsigned long long)j->id,
                                   job_state_name(j->state),
                                   j->error_message ? j->error_message : "no reason given");
                break;
        default:
                r = ipc_status_set(st, IPC_FAILED_PRECONDITION, -EINPROGRESS,
                                   "job %llu is %s; use job.wait", (unsigned long long)j->id,
                                   job_state_name(j->state));
                break;
        }
        jobtable_unlock(&d->jobs);
        job_unref(j);
        return r;
}

static int method_cancel(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        Job *j;
        int r = job_from_params(d, req, IPC_JOB_PARAM_ID, &j, st);

        if (r < 0)
                return r;
        if (j->fleet_copy && !job_state_final(j->state)) {
                r = ipc_status_set(st, IPC_FAILED_PRECONDITION, -EREMOTE,
                                   "job %llu is %s in the fleet, not on this fiberd host: "
                                   "only the host that runs it can cancel it",
                                   (unsigned long long)j->id, job_state_name(j->state));
                job_unref(j);
                return r;
        }
        if (!j->fleet_copy)
                jobtable_cancel(&d->jobs, j, false); /* -EALREADY: finished, not an error */
        r = pack_record(d, j, pk);
        job_unref(j);
        return r;
}

typedef struct ListFilter {
        bool by_state;
        JobState state;
        const char *plugin; /* view, NULL = any */
        size_t plugin_len;
        uid_t uid;
        bool all; /* every user's jobs (an admin asks) */
} ListFilter;

static bool list_match(const ListFilter *f, const Job *j)
{
        if (!f->all && f->uid != j->owner)
                return false;
        if (f->by_state && j->state != f->state)
                return false;
        if (f->plugin && (strlen(j->plugin_name) != f->plugin_len ||
                          memcmp(j->plugin_name, f->plugin, f->plugin_len) != 0))
                return false;
        return true;
}

/* The bytes a job.list answer's records may take: under the daemon's message cap and
 * the client decoder's default one, less room for the envelope. */
static size_t list_budget(const Daemon *d)
{
        size_t cap = d->cfg.max_message < IPC_DEFAULT_MAX_MESSAGE ? d->cfg.max_message
                                                                  : IPC_DEFAULT_MAX_MESSAGE;
        return cap - cap / 16;
}

/* Appends the @len bytes at @buf to @pk's output as they are (already msgpack). */
static int list_pack_raw(msgpack_packer *pk, const char *buf, size_t len)
{
        return len ? pk->callback(pk->data, buf, len) : 0;
}

/*
 * One page of job.list: the jobs matching @f with an id below @cursor (0: from the
 * newest), newest first, at most @limit of them and no more bytes than list_budget()
 * (one record at least, so every page moves on). Packs {jobs, next_cursor}: the id of
 * the page's last job when more match, else nil. Return: 0; -ENOMEM.
 */
static int list_pack_page(Daemon *d, const ListFilter *f, uint64_t cursor, uint64_t limit,
                          msgpack_packer *pk)
{
        size_t budget = list_budget(d);
        msgpack_sbuffer body;
        msgpack_packer bp;
        uint64_t next = 0, last = 0;
        uint32_t n = 0;
        int r = 0;

        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        jobtable_lock(&d->jobs);
        for (Job *j = jobtable_prev_locked(&d->jobs, NULL); j;
             j = jobtable_prev_locked(&d->jobs, j)) {
                size_t before = body.size;

                if ((cursor && j->id >= cursor) || !list_match(f, j))
                        continue;
                if (n == limit) {
                        next = last;
                        break;
                }
                if ((r = job_pack_record(&bp, j, true)) < 0)
                        break;
                if (body.size > budget && n > 0) {
                        body.size = before; /* this record starts the next page */
                        next = last;
                        break;
                }
                n++;
                last = j->id;
        }
        jobtable_unlock(&d->jobs);
        if (r == 0)
                r = msgpack_pack_map(pk, 2) | ipc_pack_cstr(pk, IPC_KEY_JOBS) |
                    msgpack_pack_array(pk, n) | list_pack_raw(pk, body.data, body.size) |
                    (next ? ipc_pack_kv_uint(pk, IPC_KEY_NEXT_CURSOR, next)
                          : ipc_pack_kv_nil(pk, IPC_KEY_NEXT_CURSOR));
        msgpack_sbuffer_destroy(&body);
        return r ? -ENOMEM : 0;
}

/* FleetPage - one page of ids of fleet_list(): the job of each, this host's or a copy. */
typedef struct FleetPage {
        JobTable *table;
        const uint64_t *ids; /* the page's ids */
        Job **jobs;          /* referenced; NULL: neither here nor in the shared store */
        size_t n, next;      /* ids; where the next fetched record's id is looked for */
} FleetPage;

/* store_fetch_many()'s callback: the copy of @rec goes to its id's slot. */
static int fleet_page_one(const StoreRecord *rec, void *arg)
{
        FleetPage *p = arg;

        while (p->next < p->n && (p->ids[p->next] != rec->id || p->jobs[p->next]))
                p->next++;
        /* a record that cannot be copied is skipped, as fleet_get() skips it */
        if (p->next < p->n && jobtable_fleet_copy(p->table, rec, &p->jobs[p->next]) < 0)
                p->jobs[p->next] = NULL;
        return 0;
}

/*
 * The jobs of @p's ids: this host's where it has them, the others' shared records read
 * in one round trip (store_fetch_many()); a job in neither (or a store that cannot be
 * read: logged) stays NULL. Return 0; -ENOMEM.
 */
static int fleet_page_fill(Daemon *d, FleetPage *p)
{
        uint64_t *missing = malloc(p->n * sizeof(*missing));
        size_t k = 0;

        if (!missing)
                return -ENOMEM;
        for (size_t i = 0; i < p->n; i++) {
                p->jobs[i] = jobtable_get(&d->jobs, p->ids[i]);
                if (!p->jobs[i])
                        missing[k++] = p->ids[i];
        }
        p->next = 0;
        if (k)
                (void)store_fetch_many(d->store, missing, k, fleet_page_one, p);
        free(missing);
        return 0;
}

/*
 * job.list in a fleet: the fleet's jobs, newest first from the shared index
 * (store_list()), this host's copy of each where it has one, else its shared record
 * (one round trip per page of ids for all of those, store_fetch_many()).
 * Paged (@paged): one page below @cursor, as list_pack_page(). Unpaged: the newest
 * @limit matches, oldest first. At most FLEET_LIST_SCAN ids are looked at per answer:
 * a page that stops there says where to go on. Return: 0; -ENOMEM; an error in @st.
 */
#define FLEET_LIST_SCAN 4096
static int fleet_list(Daemon *d, const ListFilter *f, uint64_t cursor, uint64_t limit, bool paged,
                      msgpack_packer *pk, IpcStatus *st)
{
        size_t budget = list_budget(d), cap = 64, n = 0, bytes = 0, scanned = 0;
        uint64_t ids[256], next = 0, below = cursor;
        Job **jobs = malloc(cap * sizeof(*jobs));
        Job **page = malloc(ELEMENTSOF(ids) * sizeof(*page));
        FleetPage fp = {.table = &d->jobs, .ids = ids, .jobs = page};
        msgpack_sbuffer body;
        msgpack_packer bp;
        bool more = true, full = false;
        int r = 0;

        if (!jobs || !page) {
                free(jobs);
                free(page);
                return -ENOMEM;
        }
        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        while (more && !full && r == 0) {
                size_t got = 0;
                r = store_list(d->store, below, ELEMENTSOF(ids), ids, &got);
                if (r < 0) {
                        r = ipc_status_set(st, IPC_UNAVAILABLE, r,
                                           "the fleet's job store cannot be read: see "
                                           "fiberd's log");
                        break;
                }
                more = got == ELEMENTSOF(ids);
                fp.n = got;
                if ((r = fleet_page_fill(d, &fp)) < 0)
                        break;
                for (size_t i = 0; i < got && !full; i++) {
                        Job *j = page[i];
                        page[i] = NULL; /* ours now */
                        below = ids[i];
                        scanned++;
                        if (j && list_match(f, j) && n == limit) {
                                next = n ? jobs[n - 1]->id : 0;
                                full = true;
                        } else if (j && list_match(f, j)) {
                                size_t before = body.size, size;
                                Job **grown;
                                if ((r = pack_record(d, j, &bp)) < 0) {
                                        job_unref(j);
                                        break;
                                }
                                size = body.size - before;
                                body.size = before; /* packed again below, in order */
                                if (bytes + size > budget && n > 0) {
                                        next = jobs[n - 1]->id;
                                        full = true;
                                        bytes += size; /* unpaged: too large an answer */
                                } else if (n == cap &&
                                           !(grown = reallocarray(jobs, cap * 2, sizeof(*jobs)))) {
                                        r = -ENOMEM;
                                } else {
                                        if (n == cap) {
                                                jobs = grown;
                                                cap *= 2;
                                        }
                                        jobs[n++] = job_ref(j);
                                        bytes += size;
                                }
                        }
                        if (j)
                                job_unref(j);
                        if (scanned == FLEET_LIST_SCAN && paged && !full) {
                                next = below; /* go on below the last id looked at */
                                full = true;
                        }
                }
                for (size_t i = 0; i < got; i++) /* the ones not looked at */
                        if (page[i])
                                page[i] = job_unref(page[i]);
        }
        free(page);
        body.size = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                /* a page: newest first; one array: oldest first */
                r = pack_record(d, jobs[paged ? i : n - 1 - i], &bp);
        }
        for (size_t i = 0; i < n; i++)
                job_unref(jobs[i]);
        free(jobs);
        if (r == 0 && !paged && (bytes > budget || body.size > budget))
                r = ipc_status_set(st, IPC_MESSAGE_TOO_LARGE, -EMSGSIZE,
                                   "%zu jobs match, more than one answer holds: ask for pages "
                                   "with the filter key \"cursor\" (fiberctl list does), or "
                                   "set a limit",
                                   n);
        else if (r == 0 && paged)
                r = msgpack_pack_map(pk, 2) | ipc_pack_cstr(pk, IPC_KEY_JOBS) |
                                    msgpack_pack_array(pk, (uint32_t)n) |
                                    list_pack_raw(pk, body.data, body.size) |
                                    (next ? ipc_pack_kv_uint(pk, IPC_KEY_NEXT_CURSOR, next)
                                          : ipc_pack_kv_nil(pk, IPC_KEY_NEXT_CURSOR))
                            ? -ENOMEM
                            : 0;
        else if (r == 0)
                r = msgpack_pack_array(pk, (uint32_t)n) | list_pack_raw(pk, body.data, body.size)
                            ? -ENOMEM
                            : 0;
        msgpack_sbuffer_destroy(&body);
        return r;
}

static int method_list(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        const msgpack_object *filter = NULL, *o;
        ListFilter f = {.uid = req->uid, .all = access_tier(&d->cfg, req->creds) == ACCESS_ADMIN};
        uint64_t limit = UINT64_MAX, matches = 0, skip, cursor = 0;
        bool paged = false;
        const char *sv;
        size_t sl;
        int r = 0;

        o = ipc_array_at(&req->msg.params, IPC_LIST_PARAM_FILTER);
        if (!ipc_object_is_nil(o) && (r = ipc_read_map(o, "filter", &filter, st)) < 0)
                return r;
        for (uint32_t i = 0; filter && i < filter->via.map.size; i++) {
                const msgpack_object_kv *kv = &filter->via.map.ptr[i];
                if (ipc_object_streq(&kv->key, IPC_FILTER_STATE)) {
                        if ((r = ipc_read_strv(&kv->val, IPC_FILTER_STATE, &sv, &sl, st)) < 0)
                                return r;
                        if (job_state_parse(sv, sl, &f.state) < 0)
                                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                                      "state: \"%.*s\" is not one of queued, "
                                                      "running, done, failed, cancelled",
                                                      (int)(sl > 32 ? 32 : sl), sv);
                        f.by_state = true;
                } else if (ipc_object_streq(&kv->key, IPC_FILTER_PLUGIN)) {
                        if ((r = ipc_read_strv(&kv->val, IPC_FILTER_PLUGIN, &f.plugin,
                                               &f.plugin_len, st)) < 0)
                                return r;
                } else if (ipc_object_streq(&kv->key, IPC_FILTER_LIMIT)) {
                        if ((r = ipc_read_uint(&kv->val, IPC_FILTER_LIMIT, &limit, st)) < 0)
                                return r;
                } else if (ipc_object_streq(&kv->key, IPC_FILTER_CURSOR)) {
                        /* nil or 0: the first page */
                        if (!ipc_object_is_nil(&kv->val) &&
                            (r = ipc_read_uint(&kv->val, IPC_FILTER_CURSOR, &cursor, st)) < 0)
                                return r;
                        paged = true;
                } else {
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "unknown filter key; the keys are state, plugin, "
                                              "limit and cursor");
                }
        }
        if (store_fleet(d->store))
                return fleet_list(d, &f, cursor,
                                  paged && limit > IPC_LIST_PAGE_MAX ? IPC_LIST_PAGE_MAX : limit,
                                  paged, pk, st);
        if (paged)
                return list_pack_page(d, &f, cursor,
                                      limit < IPC_LIST_PAGE_MAX ? limit : IPC_LIST_PAGE_MAX, pk);
        /* Without a cursor: one array, oldest first, as before pages; refused rather than
         * sent when it would pass the message cap (the client could not read it). */
        msgpack_sbuffer body;
        msgpack_packer bp;
        uint64_t count;

        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        jobtable_lock(&d->jobs);
        for (Job *j = jobtable_next_locked(&d->jobs, NULL); j;
             j = jobtable_next_locked(&d->jobs, j))
                matches += list_match(&f, j);
        skip = matches > limit ? matches - limit : 0;
        count = matches - skip;
        for (Job *j = jobtable_next_locked(&d->jobs, NULL);
             j && r == 0 && body.size <= list_budget(d); j = jobtable_next_locked(&d->jobs, j)) {
                if (!list_match(&f, j))
                        continue;
                if (skip) {
                        skip--;
                        continue;
                }
                r |= job_pack_record(&bp, j, true);
        }
        jobtable_unlock(&d->jobs);
        if (r != 0)
                r = -ENOMEM;
        else if (body.size > list_budget(d))
                r = ipc_status_set(st, IPC_MESSAGE_TOO_LARGE, -EMSGSIZE,
                                   "%llu jobs match, more than one answer holds: ask for pages "
                                   "with the filter key \"cursor\" (fiberctl list does), or "
                                   "set a limit",
                                   (unsigned long long)count);
        else if (msgpack_pack_array(pk, (uint32_t)count) | list_pack_raw(pk, body.data, body.size))
                r = -ENOMEM;
        msgpack_sbuffer_destroy(&body);
        return r;
}

static int method_stats(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return stats_pack(ctx, pk);
}

/* The OpenMetrics text as one string (every client may read stats); with the
 * param "prometheus", Prometheus's text format. */
static int method_metrics(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        const msgpack_object *fmt = ipc_array_at(&req->msg.params, 0);
        bool prometheus = false;
        char *text;
        size_t len;
        int r;

        if (fmt && !ipc_object_streq(fmt, IPC_METRICS_OPENMETRICS)) {
                if (!ipc_object_streq(fmt, IPC_METRICS_PROMETHEUS))
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "metrics: the format is \"" IPC_METRICS_OPENMETRICS
                                              "\" (the default) or \"" IPC_METRICS_PROMETHEUS "\"");
                prometheus = true;
        }
        r = openmetrics_render(ctx, prometheus, &text, &len);

        if (r < 0)
                return r;
        r = ipc_pack_strn(pk, text, len);
        free(text);
        return r ? -ENOMEM : 0;
}

/* The lines a job wrote with host->log; job_from_params() lets only its owner
 * and admins see the job. */
static int method_job_logs(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Job *j;
        int r = job_from_params(ctx, req, IPC_JOB_PARAM_ID, &j, st);

        if (r < 0)
                return r;
        r = joblog_pack(&j->log, j->id, pk);
        job_unref(j);
        return r;
}

static const struct {
        const char *name;
        MethodFn fn;
} methods[] = {
        {IPC_METHOD_PING, method_ping},
        {IPC_METHOD_PLUGINS_LIST, method_plugins_list},
        {IPC_METHOD_JOB_SUBMIT, method_submit},
        {IPC_METHOD_JOB_RUN, method_run},
        {IPC_METHOD_JOB_STATUS, method_status},
        {IPC_METHOD_JOB_WAIT, method_wait},
        {IPC_METHOD_JOB_RESULT, method_result},
        {IPC_METHOD_JOB_CANCEL, method_cancel},
        {IPC_METHOD_JOB_LIST, method_list},
        {IPC_METHOD_STATS, method_stats},
        /* job store */
        {IPC_METHOD_PLUGINS_CLEAR, method_plugins_clear},
        /* metrics and job logs */
        {IPC_METHOD_METRICS, method_metrics},
        {IPC_METHOD_JOB_LOGS, method_job_logs},
};

MethodFn methods_lookup(const char *name, size_t len)
{
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (strlen(methods[i].name) == len && memcmp(methods[i].name, name, len) == 0)
                        return methods[i].fn;
        return NULL;
}
