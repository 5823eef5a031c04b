/* SPDX-License-Identifier: MIT */
/*
 * methods.c — the RPC methods of ipc/PROTOCOL.md: ping, plugins.list, job.submit,
 * job.status, job.wait, job.result, job.cancel, job.list, stats, and the metrics
 * (OpenMetrics text, openmetrics.c), job.logs (the job's host->log lines, joblog.h;
 * its owner or an admin, as every job method) and pause / resume (admins; pause.c).
 *
 * Each runs in its own request fiber (server.c), except a job.run that cannot park,
 * which runs on its connection's reader (methods_run_inline()); each reads its params
 * with ipc/value.h (which words the INVALID_ARGUMENT messages), and packs one result
 * object. Access
 * (access.h): every client may ping, list plugins, read stats and its own jobs; job.submit
 * and job.run need the submit tier, a negative priority the admin tier
 * (PERMISSION_DENIED naming the tier); another user's job is visible to admins only,
 * and to anyone else answers NOT_FOUND worded as for an id that never existed.
 *
 * job.wait parks on the job's `finished` event (jobwait.c). job.run is job.submit
 * followed by that same wait (jobwait_answer()) in one request, gearman's SUBMIT_JOB:
 * one round trip per job. The job is accepted before the wait starts, so a client that
 * goes away leaves it running, as after job.submit.
 *
 * What a handler does beyond its params and its answer lives in the module it calls:
 * a submission's checks, limits and store wait are submit.c's, a pause's pause.c's, job.list's walk of the table is joblist.c's, the wait of job.wait and job.run is
 * jobwait.c's, and a fleet's reads (job.status, job.wait and job.list of jobs another
 * host holds) are fleet.c's. The schedule.* methods are schedules.c's own handlers.
 */
#include "daemon/server/access.h"
#include "daemon/daemon.h"
#include "daemon/obs/log.h"
#include "daemon/plugin/crash.h"
#include "daemon/store/fleet.h"
#include "daemon/job/joblist.h"
#include "daemon/job/jobwait.h"
#include "daemon/obs/openmetrics.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/server/deadset.h"
#include "daemon/server/pause.h"
#include "daemon/server/schedules.h"
#include "daemon/server/submit.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t retention_minutes(const Daemon *d)
{
        return d->jobs.retention_ns / (60 * NSEC_PER_SEC);
}

/* How long and how many finished jobs are kept, for a NOT_FOUND: "kept for 10 minutes,
 * at most 1000 per user" (the per-user bound, jobquota.h, when there is one). */
static const char *retention_words(const Daemon *d, char *buf, size_t size)
{
        size_t per_user = d->jobs.quota.limits.retention_max_per_user;
        int n = snprintf(buf, size, "finished jobs are kept for %llu minutes",
                         (unsigned long long)retention_minutes(d));

        if (per_user && n > 0 && (size_t)n < size)
                snprintf(buf + n, size - (size_t)n, ", at most %zu per user", per_user);
        return buf;
}

/* Reads params[@i] as a job id and returns the job (referenced) if @req may see it. In a
 * fleet whose store cannot be reached, the lookup is tried again until @deadline_ns
 * (absolute, CLOCK_MONOTONIC; 0: not at all): a waiter keeps waiting through an outage. */
static int job_from_params_until(Daemon *d, Request *req, size_t i, uint64_t deadline_ns, Job **ret,
                                 IpcStatus *st)
{
        char kept[96];
        uint64_t id;
        Job *j;
        int r = ipc_read_uint(ipc_array_at(&req->msg.params, i), "job id", &id, st);

        if (r < 0)
                return r;
        /* this host's table, else the fleet's */
        if (fleet_lookup_until(&d->jobs, d->store, req, id, deadline_ns, &j) == -ENOTCONN)
                return ipc_status_set(st, IPC_UNAVAILABLE, -ENOTCONN,
                                      "the fleet's job store cannot be reached, so job %llu "
                                      "cannot be looked up: retry later (in %llu ms)",
                                      (unsigned long long)id,
                                      (unsigned long long)store_retry_hint_ms(d->store));
        if (j && j->owner != req->uid && access_tier(&d->cfg, req->creds) < ACCESS_ADMIN) {
                /* not yours: as if it did not exist, so ids leak nothing */
                j = job_unref(j);
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT, "no job %llu of yours (%s)",
                                      (unsigned long long)id,
                                      retention_words(d, kept, sizeof(kept)));
        }
        if (!j) {
                if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                              "no job %llu of yours (%s)", (unsigned long long)id,
                                              retention_words(d, kept, sizeof(kept)));
                if (id == 0 || (id >= d->jobs.next_id && !store_fleet(d->store)))
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT, "no job %llu",
                                              (unsigned long long)id);
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT, "no job %llu (%s)",
                                      (unsigned long long)id,
                                      retention_words(d, kept, sizeof(kept)));
        }
        *ret = j;
        return 0;
}

static int job_from_params(Daemon *d, Request *req, size_t i, Job **ret, IpcStatus *st)
{
        return job_from_params_until(d, req, i, 0, ret, st);
}

static int pack_record(Daemon *d, Job *j, msgpack_packer *pk)
{
        return joblist_pack_record(&d->jobs, j, pk);
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
                return access_denied(&d->cfg, ACCESS_ADMIN, "clearing a plugin's quarantine", st);
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

static int method_submit(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Job *j;
        uint64_t existing;
        int r = submit_request(ctx, req, false, false, &j, &existing, st);

        if (r < 0)
                return r;
        r = existing ? IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ID, existing),
                                    IPC_KV_BOOL(IPC_KEY_EXISTING, true))
                     : IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ID, j->id));
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
        r = joblist_pack_status(&d->jobs, j, pk); /* with its args */
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

static int method_wait(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        uint64_t timeout_ms;
        uint32_t fields;
        Job *j;
        int r;

        r = wait_ms_from_params(req, IPC_WAIT_PARAM_TIMEOUT_MS, &timeout_ms, st);
        if (r == 0)
                r = job_fields_parse(ipc_array_at(&req->msg.params, IPC_WAIT_PARAM_FIELDS), &fields,
                                     st);
        if (r < 0)
                return r;
        /* a fleet whose store is away: the lookup waits for it as long as the wait */
        r = job_from_params_until(d, req, IPC_JOB_PARAM_ID, jobwait_deadline(timeout_ms), &j, st);
        if (r < 0)
                return r;
        return jobwait_answer(&d->jobs, d->store, req, j, timeout_ms, fields, pk, st);
}

/* job.run [plugin, args, options, timeout_ms, fields]: job.submit, then job.wait on that
 * job. The wait limit and the fields are read first, so a bad one refuses the request
 * before a job is queued. */
static int method_run(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        uint64_t timeout_ms, existing;
        uint32_t fields;
        Job *j;
        int r;

        r = wait_ms_from_params(req, IPC_RUN_PARAM_TIMEOUT_MS, &timeout_ms, st);
        if (r == 0)
                r = job_fields_parse(ipc_array_at(&req->msg.params, IPC_RUN_PARAM_FIELDS), &fields,
                                     st);
        if (r < 0)
                return r;
        /* without a wait limit its caller learns the id only at the end */
        r = submit_request(d, req, true, jobwait_unbounded(timeout_ms), &j, &existing, st);
        if (r < 0)
                return r;
        /* a key's earlier job this host does not hold: in a fleet, any host's */
        if (!j && (r = fleet_lookup(&d->jobs, d->store, existing, &j)) == -ENOTCONN)
                return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                      "job %llu has this key, and the fleet's job store cannot "
                                      "be reached to wait for it: retry later (in %llu ms)",
                                      (unsigned long long)existing,
                                      (unsigned long long)store_retry_hint_ms(d->store));
        if (!j)
                return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                      "job %llu, which had this key, has ended and its record is "
                                      "gone",
                                      (unsigned long long)existing);
        return jobwait_answer(&d->jobs, d->store, req, j, timeout_ms, fields, pk, st);
}

static int method_result(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        Job *j;
        int r = job_from_params(d, req, IPC_JOB_PARAM_ID, &j, st);

        if (r < 0)
                return r;
        r = jobwait_pack_result(&d->jobs, j, pk, st);
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
                /* held in the fleet's schedule set: any host ends it; else its host */
                r = fleet_cancel(&d->jobs, d->store, j, &j);
                if (r == -EREMOTE)
                        r = ipc_status_set(st, IPC_FAILED_PRECONDITION, r,
                                           "job %llu is %s in the fleet, not on this fiberd "
                                           "host: only the host that runs it can cancel it",
                                           (unsigned long long)j->id, job_state_name(j->state));
                else if (r < 0)
                        r = ipc_status_set(st, IPC_UNAVAILABLE, r,
                                           "the fleet's job store cannot be reached: see "
                                           "fiberd's log");
                if (r < 0) {
                        job_unref(j);
                        return r;
                }
        }
        if (!j->fleet_copy)
                jobtable_cancel(&d->jobs, j, false); /* -EALREADY: finished, not an error */
        r = pack_record(d, j, pk);
        job_unref(j);
        return r;
}

static int method_list(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        const msgpack_object *filter = NULL, *o;
        JobListFilter f = {.uid = req->uid,
                           .all = access_tier(&d->cfg, req->creds) == ACCESS_ADMIN};
        uint64_t limit = UINT64_MAX, cursor = 0;
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
                return fleet_list(&d->jobs, d->store, &f, cursor,
                                  paged && limit > IPC_LIST_PAGE_MAX ? IPC_LIST_PAGE_MAX : limit,
                                  paged, joblist_budget(d->cfg.max_message), pk, st);
        if (paged)
                return joblist_pack_page(&d->jobs, &f, cursor,
                                         limit < IPC_LIST_PAGE_MAX ? limit : IPC_LIST_PAGE_MAX,
                                         joblist_budget(d->cfg.max_message), pk);
        return joblist_pack_all(&d->jobs, &f, limit, joblist_budget(d->cfg.max_message), pk, st);
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

static int method_job_retry(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return deadset_retry(ctx, req, pk, st);
}

static int method_job_discard(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        return deadset_discard(ctx, req, pk, st);
}

/* pause / resume [kind, name]: hold or release a class's or a plugin's queued jobs,
 * kept in the job store. Admin tier. */
static int method_pause(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;

        if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                return access_denied(&d->cfg, ACCESS_ADMIN, "pausing a class or plugin", st);
        return pause_request(d, req, true, pk, st);
}

static int method_resume(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;

        if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN)
                return access_denied(&d->cfg, ACCESS_ADMIN, "resuming a class or plugin", st);
        return pause_request(d, req, false, pk, st);
}

/* reload []: re-read the config and apply what can change live (daemon_reload()), and
 * answer how it went: {reloaded: "applied ..."}, or the error that names why the file
 * was refused. Admin tier: fiberd.service's ExecReload= runs `fiberctl reload` as root.
 * The uid fiberd runs as may too, and only this: it could send SIGHUP anyway, so nothing
 * is lent; it is the user of a per-user fiberd, whose unit (systemd/user/fiberd.service)
 * runs `fiberctl --user reload` as that user. */
static int method_reload(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        Daemon *d = ctx;
        char by[64], msg[512];
        int r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_ADMIN && req->uid != geteuid())
                return access_denied(&d->cfg, ACCESS_ADMIN, "reloading the configuration", st);
        snprintf(by, sizeof(by), "reload asked by uid %u", (unsigned)req->uid);
        r = daemon_reload(d, by, msg, sizeof(msg));
        if (r == -ECANCELED)
                return ipc_status_set(st, IPC_UNAVAILABLE, -ESHUTDOWN, "fiberd is stopping");
        if (r < 0)
                return ipc_status_set(st, r == -EINVAL ? IPC_INVALID_ARGUMENT : IPC_INTERNAL,
                                      r == -EINVAL ? -EINVAL : -EIO,
                                      "reload failed: %s; fiberd keeps the running configuration",
                                      msg);
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_cstr(pk, IPC_KEY_RELOADED, msg);
        return 0;
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
        /* job scheduling */
        {IPC_METHOD_JOB_RETRY, method_job_retry},
        {IPC_METHOD_JOB_DISCARD, method_job_discard},
        {IPC_METHOD_PAUSE, method_pause},
        {IPC_METHOD_RESUME, method_resume},
        /* configuration */
        {IPC_METHOD_RELOAD, method_reload},
        /* periodic schedules (schedules.c) */
        {IPC_METHOD_SCHEDULE_ADD, schedules_add},
        {IPC_METHOD_SCHEDULE_LIST, schedules_list},
        {IPC_METHOD_SCHEDULE_REMOVE, schedules_remove},
        {IPC_METHOD_SCHEDULE_PAUSE, schedules_pause},
        {IPC_METHOD_SCHEDULE_RESUME, schedules_resume},
};

bool methods_run_inline(void *ctx, const Request *req)
{
        const Daemon *d = ctx;
        const Store *store = d->store;
        static const char run[] = IPC_METHOD_JOB_RUN;

        return req->msg.method_len == sizeof(run) - 1 &&
               memcmp(req->msg.method, run, sizeof(run) - 1) == 0 && store &&
               !store_durable(store) &&
               ipc_object_is_nil(ipc_array_at(&req->msg.params, IPC_RUN_PARAM_TIMEOUT_MS));
}

MethodFn methods_lookup(const char *name, size_t len)
{
        for (size_t i = 0; i < ELEMENTSOF(methods); i++)
                if (strlen(methods[i].name) == len && memcmp(methods[i].name, name, len) == 0)
                        return methods[i].fn;
        return NULL;
}
