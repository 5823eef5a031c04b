/* SPDX-License-Identifier: MIT */
/*
 * submit.c — job.submit and the submission half of job.run: from a request's params to
 * an accepted job whose record the store holds (submit.h). The same steps serve a
 * schedule's ticks (schedrun.c), which have params and the owner's creds but no
 * request, and schedule.add, which runs steps 1 to 4 only (submit_check()).
 *
 * The steps, in order; the first that refuses answers, and nothing before it changed
 * anything:
 *  1. access: the submit tier (access.c: PERMISSION_DENIED naming the tier);
 *  2. params: plugin name, args, options priority / timeout_ms / class (ipc/value.h
 *     words INVALID_ARGUMENT);
 *  3. options against access and config: timeout_ms in range; the class is one of the
 *     job scheduler's (INVALID_ARGUMENT listing them); a negative priority, or a class
 *     whose [class.NAME] says admin_only, needs the admin tier; the schedule's times;
 *     the `after` ids (the submitter's jobs, not ended otherwise than done; in a fleet
 *     UNAVAILABLE while the shared store cannot be reached, FAILED_PRECONDITION for a
 *     job.run this host still runs, which has no shared record yet);
 *  4. the plugin: loaded (NOT_FOUND listing the loaded ones), then its own check_args
 *     (plugin_host.c: the plugin's words);
 *  5. the job store can write (store_failing(), store.h): while it cannot (a full disk,
 *     a fleet's lost server), UNAVAILABLE "retry later (in N ms)", N from
 *     store_retry_hint_ms(), and nothing is created;
 *  6. the job table accepts it (jobtable_submit(): admission, id, the job, its first
 *     store write), and the dispatcher's fiber starts it when slots are free;
 *     the table's errnos are worded here: -EAGAIN, -EDQUOT, -EBUSY,
 *     -ENOBUFS, -ENOSPC OVERLOADED naming the limit, -ESHUTDOWN UNAVAILABLE, -ENOTCONN
 *     (a fleet's server cannot be reached for an id or a key) UNAVAILABLE "retry later";
 *  7. the answer waits for the store (jobtable_wait_durable()): a failed write refuses
 *     the submission (the table cancelled the job when the store told it, and nothing
 *     of it is written): UNAVAILABLE "retry later" when the store cannot write for now,
 *     INTERNAL otherwise.
 *
 * Who owns what: the params stay the caller's (a request's zone); the job takes the
 * origin's fds in step 6 (origin->fds is set NULL; submit_request() hands that back to
 * req->fds), its own copy of args and names, and a reference to the creds. The caller
 * gets one reference to the job.
 */
#include "daemon/server/submit.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "daemon/server/access.h"
#include "daemon/store/fleet.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* What job.submit's params say, read but not checked against access or config yet. */
typedef struct SubmitParams {
        const char *plugin; /* not NUL-terminated: plugin_len bytes of the request's zone */
        size_t plugin_len;
        const msgpack_object *args; /* a map, the request's (empty when nil) */
        int64_t priority;
        uint64_t timeout_ms;
        const char *class_name; /* NULL: the default class; else class_len bytes */
        size_t class_len;
        /* job scheduling (PROTOCOL.md, "Scheduling jobs") */
        bool has_delay, has_run_at, has_attempts;
        uint64_t delay_ms, run_at, max_attempts, backoff_ms, backoff_max_ms;
        uint64_t after[IPC_AFTER_MAX];
        size_t n_after;
        char key[IPC_IDEMPOTENCY_KEY_MAX + 1]; /* "" = none */
} SubmitParams;

/* The `after` option: an array of at most IPC_AFTER_MAX job ids. */
static int read_after(const msgpack_object *o, SubmitParams *p, IpcStatus *st)
{
        const msgpack_object *a;
        int r = ipc_read_array(o, IPC_OPT_AFTER, &a, st);

        if (r < 0)
                return r;
        if (a->via.array.size > IPC_AFTER_MAX)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -E2BIG, "after: %u ids; at most %d",
                                      a->via.array.size, IPC_AFTER_MAX);
        for (uint32_t i = 0; i < a->via.array.size; i++)
                if ((r = ipc_read_uint(&a->via.array.ptr[i], "after: a job id", &p->after[i], st)) <
                    0)
                        return r;
        p->n_after = a->via.array.size;
        return 0;
}

/* The `key` option: 1..IPC_IDEMPOTENCY_KEY_MAX bytes, no NUL. */
static int read_key(const msgpack_object *o, SubmitParams *p, IpcStatus *st)
{
        const char *k;
        size_t len;
        int r = ipc_read_strv(o, IPC_OPT_KEY, &k, &len, st);

        if (r < 0)
                return r;
        if (!len || len > IPC_IDEMPOTENCY_KEY_MAX || memchr(k, '\0', len))
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "key: 1 to %d bytes, no NUL byte", IPC_IDEMPOTENCY_KEY_MAX);
        memcpy(p->key, k, len);
        p->key[len] = '\0';
        return 0;
}

/* Step 2: reads params [plugin, args, options] into @p. */
static int read_params(const msgpack_object *params, SubmitParams *p, IpcStatus *st)
{
        static const msgpack_object empty_map = {.type = MSGPACK_OBJECT_MAP};
        const msgpack_object *opts = NULL, *o;
        int r;

        *p = (SubmitParams){.args = &empty_map};
        r = ipc_read_strv(ipc_array_at(params, IPC_SUBMIT_PARAM_PLUGIN), "plugin", &p->plugin,
                          &p->plugin_len, st);
        if (r < 0)
                return r;
        o = ipc_array_at(params, IPC_SUBMIT_PARAM_ARGS);
        if (!ipc_object_is_nil(o) && (r = ipc_read_map(o, "args", &p->args, st)) < 0)
                return r;
        o = ipc_array_at(params, IPC_SUBMIT_PARAM_OPTIONS);
        if (!ipc_object_is_nil(o) && (r = ipc_read_map(o, "options", &opts, st)) < 0)
                return r;
        for (uint32_t i = 0; opts && i < opts->via.map.size; i++) {
                const msgpack_object_kv *kv = &opts->via.map.ptr[i];
                if (ipc_object_streq(&kv->key, IPC_OPT_PRIORITY))
                        r = ipc_read_int_range(&kv->val, IPC_OPT_PRIORITY, INT_MIN, INT_MAX,
                                               &p->priority, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_TIMEOUT_MS))
                        r = ipc_read_uint(&kv->val, IPC_OPT_TIMEOUT_MS, &p->timeout_ms, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_CLASS))
                        r = ipc_read_strv(&kv->val, IPC_OPT_CLASS, &p->class_name, &p->class_len,
                                          st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_DELAY_MS))
                        p->has_delay = true,
                        r = ipc_read_uint(&kv->val, IPC_OPT_DELAY_MS, &p->delay_ms, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_RUN_AT))
                        p->has_run_at = true,
                        r = ipc_read_uint(&kv->val, IPC_OPT_RUN_AT, &p->run_at, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_MAX_ATTEMPTS)) {
                        int64_t v;
                        p->has_attempts = true;
                        r = ipc_read_int_range(&kv->val, IPC_OPT_MAX_ATTEMPTS, 1,
                                               IPC_MAX_ATTEMPTS_MAX, &v, st);
                        p->max_attempts = (uint64_t)v;
                } else if (ipc_object_streq(&kv->key, IPC_OPT_BACKOFF_MS))
                        r = ipc_read_uint(&kv->val, IPC_OPT_BACKOFF_MS, &p->backoff_ms, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_BACKOFF_MAX_MS))
                        r = ipc_read_uint(&kv->val, IPC_OPT_BACKOFF_MAX_MS, &p->backoff_max_ms, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_AFTER))
                        r = read_after(&kv->val, p, st);
                else if (ipc_object_streq(&kv->key, IPC_OPT_KEY))
                        r = read_key(&kv->val, p, st);
                else
                        r = ipc_status_set(
                                st, IPC_INVALID_ARGUMENT, -EINVAL,
                                "unknown option %s%.*s; the options are priority, "
                                "timeout_ms, class, delay_ms, run_at, max_attempts, "
                                "backoff_ms, backoff_max_ms, after and key",
                                kv->key.type == MSGPACK_OBJECT_STR ? "" : "(not a string)",
                                kv->key.type == MSGPACK_OBJECT_STR ? (int)kv->key.via.str.size : 0,
                                kv->key.type == MSGPACK_OBJECT_STR ? kv->key.via.str.ptr : "");
                if (r < 0)
                        return r;
        }
        return 0;
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

/* Step 3: @p's options against the submitter's tier (@admin) and the config; the class
 * index in *@ret_cls and its name in *@ret_class_name (the job scheduler's). What needs
 * the admin tier (a negative priority, a class reserved to admins) is refused in one
 * place, once the class is known. */
static int check_options(Daemon *d, bool admin, const SubmitParams *p, int *ret_cls,
                         const char **ret_class_name, IpcStatus *st)
{
        char what[SCHED_CLASS_NAME_MAX + 16];
        const char *need_admin = NULL, *cname;
        const ConfigClass *k;
        int cls = 0, r;

        if (p->timeout_ms > UINT64_MAX / NSEC_PER_MSEC)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "timeout_ms: %llu is too large",
                                      (unsigned long long)p->timeout_ms);
        if (p->class_name && (r = class_from_option(d, p->class_name, p->class_len, &cls, st)) < 0)
                return r;
        cname = sched_class_name(d->job_sched, (unsigned)cls);
        /* a class reserved to admins ([class.NAME] admin_only; default too) */
        k = config_class_find(&d->cfg, cname);
        if (p->priority < 0)
                need_admin = "a negative priority";
        else if (k && k->admin_only) {
                snprintf(what, sizeof(what), "the class %s", k->name);
                need_admin = what;
        }
        if (need_admin && !admin)
                return access_denied(&d->cfg, ACCESS_ADMIN, need_admin, st);
        if (p->has_delay && p->has_run_at)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "delay_ms and run_at: give one of them, not both");
        if (p->delay_ms > IPC_RUN_AT_MAX_AHEAD_MS ||
            (p->run_at && p->run_at > job_now_ms() + IPC_RUN_AT_MAX_AHEAD_MS))
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "%s: more than 10 years ahead",
                                      p->has_delay ? IPC_OPT_DELAY_MS : IPC_OPT_RUN_AT);
        if (p->backoff_ms > IPC_BACKOFF_MAX_MS_DEFAULT * 24 ||
            p->backoff_max_ms > IPC_BACKOFF_MAX_MS_DEFAULT * 24)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "backoff_ms and backoff_max_ms: at most a day");
        if (p->backoff_max_ms && p->backoff_max_ms < p->backoff_ms)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "backoff_max_ms (%llu) is below backoff_ms (%llu)",
                                      (unsigned long long)p->backoff_max_ms,
                                      (unsigned long long)p->backoff_ms);
        *ret_cls = cls;
        *ret_class_name = cname;
        return 0;
}

/* Step 3, the `after` ids: jobs the submitter (@uid, @admin) may see (its own; an
 * admin's: any), not ended otherwise than done; in a fleet not for a job with fds
 * (@n_fds), nor after a job.run this host runs, unknown to the fleet until its end. */
static int check_after(Daemon *d, uid_t uid, bool admin, size_t n_fds, const SubmitParams *p,
                       IpcStatus *st)
{
        for (size_t i = 0; i < p->n_after; i++) {
                /* in a fleet, any host's job (its shared record) */
                uid_t owner;
                JobState state;
                int r = fleet_job_state(&d->jobs, d->store, p->after[i], &owner, &state);
                if (r == -ENOTCONN)
                        return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                              "after: the fleet's job store cannot be reached "
                                              "to look up job %llu; nothing was accepted; retry "
                                              "later",
                                              (unsigned long long)p->after[i]);
                if (r < 0 || (owner != uid && !admin))
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                                              "after: no job %llu of yours (finished jobs are "
                                              "kept for a while only)",
                                              (unsigned long long)p->after[i]);
                if (job_state_final(state) && state != JOB_DONE)
                        return ipc_status_set(st, IPC_FAILED_PRECONDITION, -EALREADY,
                                              "after: job %llu ended %s; it will never be done",
                                              (unsigned long long)p->after[i],
                                              job_state_name(state));
                /* the fleet waits only on a job whose shared record exists: a job.run
                 * this host runs has none before its end, and would not be waited for */
                if (store_fleet(d->store) && jobtable_unshared(&d->jobs, p->after[i]))
                        return ipc_status_set(st, IPC_FAILED_PRECONDITION, -EAGAIN,
                                              "after: job %llu is a job.run this host still "
                                              "runs, which the fleet learns of only at its "
                                              "end; submit this job once it ended, or send "
                                              "that one as job.submit",
                                              (unsigned long long)p->after[i]);
        }
        if (p->n_after && n_fds && store_fleet(d->store))
                /* it runs on this host only, and its dependencies anywhere */
                return ipc_status_set(st, IPC_FAILED_PRECONDITION, -EOPNOTSUPP,
                                      "after: a job submitted with file descriptors cannot "
                                      "wait for other jobs in fleet mode ([store] backend = "
                                      "redis): wait for them, then submit");
        return 0;
}

/* Step 4, first half: the current instance of the plugin @p names, referenced (the
 * caller releases it: plugin_host_release()), or NOT_FOUND listing the loaded ones. */
static int find_plugin(const SubmitParams *p, const Plugin **ret, IpcStatus *st)
{
        char loaded[512];

        *ret = plugin_host_acquire(p->plugin, p->plugin_len);
        if (*ret)
                return 0;
        plugin_host_names(loaded, sizeof(loaded));
        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                              "no plugin named \"%.*s\" (loaded: %s); see fiberctl plugins",
                              (int)(p->plugin_len > 64 ? 64 : p->plugin_len), p->plugin,
                              *loaded ? loaded : "none");
}

/* Step 5's byte budgets (jobquota.h): what is held, this job's @args, the limit. */
static int refused_bytes(Daemon *d, const Creds *creds, const msgpack_object *args, int r,
                         IpcStatus *st)
{
        const JobQuotaLimits *l = &d->jobs.quota.limits;
        char held[32], need[32], max[32];
        uint64_t user, all;

        jobtable_bytes_held(&d->jobs, creds->uid, &user, &all);
        jobquota_format_bytes(need, sizeof(need), jobquota_packed_size(args));
        if (r == -ENOBUFS)
                return ipc_status_set(
                        st, IPC_OVERLOADED, r,
                        "uid %u holds %s of job arguments and results, and this "
                        "job's %s would pass max_bytes_per_user (%s); retry later, "
                        "or drop finished jobs with fiberctl discard",
                        (unsigned)creds->uid, jobquota_format_bytes(held, sizeof(held), user), need,
                        jobquota_format_bytes(max, sizeof(max), l->max_bytes_per_user));
        return ipc_status_set(st, IPC_OVERLOADED, r,
                              "fiberd holds %s of job arguments and results, and this job's %s "
                              "would pass max_bytes (%s); retry later, or drop finished jobs "
                              "with fiberctl discard",
                              jobquota_format_bytes(held, sizeof(held), all), need,
                              jobquota_format_bytes(max, sizeof(max), l->max_bytes));
}

/* The store cannot write (@r, a transient error: store.h), steps 5 and 7: nothing was
 * accepted. @begun: the id of a job that began under load before its refusal (DUR_EARLY,
 * cancelled since), which the answer names; 0 = none. The answer says when to retry:
 * @retry_ms (store_retry_hint_ms()). */
static int store_refused(int r, uint64_t retry_ms, uint64_t begun, IpcStatus *st)
{
        unsigned long long ms = (unsigned long long)retry_ms;

        if (begun)
                return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                      "the job store cannot write (%s): nothing was accepted "
                                      "(job %llu had begun under load and was cancelled); "
                                      "retry later (in %llu ms)",
                                      strerror(-r), (unsigned long long)begun, ms);
        return ipc_status_set(st, IPC_UNAVAILABLE, r,
                              "the job store cannot write (%s): nothing was accepted; retry "
                              "later (in %llu ms)",
                              strerror(-r), ms);
}

/* Step 6's errnos (jobtable_submit()) as the answer's status. */
static int refused(Daemon *d, const Creds *creds, const msgpack_object *args, int r, IpcStatus *st)
{
        switch (r) {
        case -EAGAIN:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "%zu jobs are queued already (max_queued); retry later",
                                      d->jobs.max_queued);
        case -EDQUOT:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u has %zu jobs queued or scheduled already "
                                      "(max_queued_per_user); retry later",
                                      (unsigned)creds->uid,
                                      d->jobs.dispatch.quotas.max_queued_per_user);
        case -EBUSY:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u submits faster than %u jobs a second "
                                      "(submit_rate_per_user); retry later",
                                      (unsigned)creds->uid,
                                      d->jobs.dispatch.quotas.submit_rate_per_user);
        case -ENOBUFS:
        case -ENOSPC:
                return refused_bytes(d, creds, args, r, st);
        case -ESHUTDOWN:
                return ipc_status_set(st, IPC_UNAVAILABLE, r, "fiberd is shutting down");
        case -ENOTCONN: /* a fleet's store: its server cannot be reached (store-redis.c) */
                return ipc_status_set(st, IPC_UNAVAILABLE, r,
                                      "the fleet's job store cannot be reached or cannot take "
                                      "the job now: nothing was accepted; retry later (in %llu "
                                      "ms)",
                                      (unsigned long long)store_retry_hint_ms(d->store));
        case -E2BIG:
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, r, "after: at most %d ids",
                                      IPC_AFTER_MAX);
        default:
                return ipc_status_errno(st, r, "cannot queue the job: %s", strerror(-r));
        }
}

/* Steps 1 to 4 for @origin: *@p read from @params, the plugin and class they name.
 * On success *@ret_plugin holds a reference (plugin_host_release()): one lookup serves
 * the args check and the submission, and the instance checked is the one queued. */
static int check_submission(Daemon *d, const JobOrigin *origin, const msgpack_object *params,
                            SubmitParams *p, const Plugin **ret_plugin, int *ret_cls,
                            const char **ret_class_name, IpcStatus *st)
{
        AccessTier tier = access_tier(&d->cfg, origin->creds);
        int r;

        if (tier < ACCESS_SUBMIT)
                return access_denied(&d->cfg, ACCESS_SUBMIT, "submitting a job", st);
        r = read_params(params, p, st);
        if (r < 0)
                return r;
        r = check_options(d, tier >= ACCESS_ADMIN, p, ret_cls, ret_class_name, st);
        if (r == 0)
                r = check_after(d, origin->creds->uid, tier >= ACCESS_ADMIN, origin->n_fds, p, st);
        if (r < 0)
                return r;
        r = find_plugin(p, ret_plugin, st);
        if (r < 0)
                return r;
        r = plugin_host_check_args(*ret_plugin, p->args, origin, st); /* its check_args */
        if (r < 0) {
                plugin_host_release(*ret_plugin);
                *ret_plugin = NULL;
        }
        return r;
}

int submit_check(Daemon *d, Creds *creds, const msgpack_object *params, IpcStatus *st)
{
        JobOrigin origin = {.creds = creds};
        const char *class_name;
        const Plugin *plugin;
        SubmitParams p;
        int cls, r;

        r = check_submission(d, &origin, params, &p, &plugin, &cls, &class_name, st);
        if (r == 0)
                plugin_host_release(plugin);
        return r;
}

int submit_params(Daemon *d, JobOrigin *origin, const msgpack_object *params, Job **ret,
                  uint64_t *ret_existing, IpcStatus *st)
{
        uint64_t existing = 0;
        JobPlan plan;
        SubmitParams p;
        const char *class_name;
        const Plugin *plugin;
        Job *j;
        int cls = 0, r;

        r = check_submission(d, origin, params, &p, &plugin, &cls, &class_name, st);
        if (r < 0)
                return r;
        if (d->store && store_failing(d->store)) { /* step 5: read again, with its error */
                uint64_t retry_ms = store_retry_hint_ms(d->store);
                StoreHealth h;
                store_health(d->store, &h);
                if (h.failing) {
                        r = store_refused(h.error, retry_ms, 0, st);
                        goto out;
                }
        }
        plan = (JobPlan){
                .run_at_ms = p.has_delay ? job_now_ms() + p.delay_ms : p.run_at,
                .max_attempts = (uint32_t)(p.has_attempts ? p.max_attempts
                                                          : plugin_host_max_attempts(plugin)),
                .backoff_ms = p.backoff_ms,
                .backoff_max_ms = p.backoff_max_ms,
                .after = p.after,
                .n_after = p.n_after,
                .key = p.key[0] ? p.key : NULL,
        };
        /* the name is the loader's, which keeps it as long as fiberd runs (loader.c) */
        r = jobtable_submit(&d->jobs, origin, plugin, plugin_host_name(plugin), p.args,
                            (int)p.priority, p.timeout_ms * NSEC_PER_MSEC, (unsigned)cls,
                            class_name, &plan, &j, &existing);
        if (r < 0) {
                r = refused(d, origin->creds, p.args, r, st);
                goto out;
        }
        *ret_existing = existing;
        if (existing && !j) { /* not held here (gone; a fleet's other host): the id answers */
                *ret = NULL;
                r = 0;
                goto out;
        }
        /* the job store (store.h): answer only once the job is on disk */
        r = jobtable_wait_durable(&d->jobs, j);
        if (r < 0) {
                if (store_error_transient(r)) {
                        uint64_t begun;
                        jobtable_lock(&d->jobs); /* its plugin ran: dispatched under load */
                        begun = j->durability == DUR_EARLY && j->started_ms ? j->id : 0;
                        jobtable_unlock(&d->jobs);
                        r = store_refused(r, store_retry_hint_ms(d->store), begun, st);
                } else {
                        r = ipc_status_set(st, IPC_INTERNAL, r,
                                           "the job store could not record the job (%s); it "
                                           "was cancelled unless it had ended already: see "
                                           "fiberd's log",
                                           strerror(-r));
                }
                job_unref(j);
                goto out;
        }
        *ret = j;
        r = 0;
out:
        plugin_host_release(plugin);
        return r;
}

int submit_request(Daemon *d, Request *req, bool answer_at_end, bool id_at_end, Job **ret,
                   uint64_t *ret_existing, IpcStatus *st)
{
        JobOrigin origin = {.creds = req->creds,
                            .fds = req->fds,
                            .n_fds = req->n_fds,
                            .answer_at_end = answer_at_end,
                            .id_at_end = id_at_end};
        int r = submit_params(d, &origin, &req->msg.params, ret, ret_existing, st);

        req->fds = origin.fds; /* NULL when the job took them */
        req->n_fds = origin.n_fds;
        return r;
}
