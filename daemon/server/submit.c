/* SPDX-License-Identifier: MIT */
/*
 * submit.c — job.submit and the submission half of job.run: from a request's params to
 * an accepted job whose record the store holds (submit.h).
 *
 * The steps, in order; the first that refuses answers, and nothing before it changed
 * anything:
 *  1. access: the submit tier (access.c: PERMISSION_DENIED naming the tier);
 *  2. params: plugin name, args, options priority / timeout_ms / class (ipc/value.h
 *     words INVALID_ARGUMENT);
 *  3. options against access and config: a negative priority needs the admin tier;
 *     timeout_ms in range; the class is one of the job scheduler's (INVALID_ARGUMENT
 *     listing them) and, when [class.NAME] says admin_only, needs the admin tier;
 *  4. the plugin: loaded (NOT_FOUND listing the loaded ones), then its own check_args
 *     (plugin_host.c: the plugin's words);
 *  5. the job table accepts it (jobtable_submit(): admission, id, the job, its first
 *     store write, dispatch); its errnos are worded here: -EAGAIN, -EDQUOT, -EBUSY
 *     OVERLOADED naming the limit, -ESHUTDOWN UNAVAILABLE;
 *  6. the answer waits for the store (jobtable_wait_durable()): a failed write cancels
 *     the job and answers INTERNAL.
 *
 * Who owns what: the params stay the request's (its zone); the job takes the request's
 * fds in step 5 (req->fds is set NULL), its own copy of args and names, and a
 * reference to the creds. The caller gets one reference to the job.
 */
#include "daemon/server/submit.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "daemon/server/access.h"
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
} SubmitParams;

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

/* Step 3: @p's options against @req's tier and the config; the class index in *@ret_cls. */
static int check_options(Daemon *d, const Request *req, const SubmitParams *p, int *ret_cls,
                         IpcStatus *st)
{
        bool admin = access_tier(&d->cfg, req->creds) >= ACCESS_ADMIN;
        const ConfigClass *k;
        int cls = 0, r;

        if (p->priority < 0 && !admin)
                return access_denied(&d->cfg, ACCESS_ADMIN, "a negative priority", st);
        if (p->timeout_ms > UINT64_MAX / NSEC_PER_MSEC)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "timeout_ms: %llu is too large",
                                      (unsigned long long)p->timeout_ms);
        if (p->class_name && (r = class_from_option(d, p->class_name, p->class_len, &cls, st)) < 0)
                return r;
        /* a class reserved to admins ([class.NAME] admin_only; default too) */
        k = config_class_find(&d->cfg, sched_class_name(d->job_sched, (unsigned)cls));
        if (k && k->admin_only && !admin) {
                char what[SCHED_CLASS_NAME_MAX + 16];
                snprintf(what, sizeof(what), "the class %s", k->name);
                return access_denied(&d->cfg, ACCESS_ADMIN, what, st);
        }
        *ret_cls = cls;
        return 0;
}

/* Step 4, first half: the loaded plugin @p names, or NOT_FOUND listing the loaded ones. */
static int find_plugin(const SubmitParams *p, const Plugin **ret, IpcStatus *st)
{
        char loaded[512];

        *ret = plugin_host_find(p->plugin, p->plugin_len);
        if (*ret)
                return 0;
        plugin_host_names(loaded, sizeof(loaded));
        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT,
                              "no plugin named \"%.*s\" (loaded: %s); see fiberctl plugins",
                              (int)(p->plugin_len > 64 ? 64 : p->plugin_len), p->plugin,
                              *loaded ? loaded : "none");
}

/* Step 5's errnos (jobtable_submit()) as the answer's status. */
static int refused(Daemon *d, const Request *req, int r, IpcStatus *st)
{
        switch (r) {
        case -EAGAIN:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "%zu jobs are queued already (max_queued); retry later",
                                      d->jobs.max_queued);
        case -EDQUOT:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u has %zu jobs queued already "
                                      "(max_queued_per_user); retry later",
                                      (unsigned)req->uid,
                                      d->jobs.dispatch.quotas.max_queued_per_user);
        case -EBUSY:
                return ipc_status_set(st, IPC_OVERLOADED, r,
                                      "uid %u submits faster than %u jobs a second "
                                      "(submit_rate_per_user); retry later",
                                      (unsigned)req->uid,
                                      d->jobs.dispatch.quotas.submit_rate_per_user);
        case -ESHUTDOWN:
                return ipc_status_set(st, IPC_UNAVAILABLE, r, "fiberd is shutting down");
        default:
                return ipc_status_errno(st, r, "cannot queue the job: %s", strerror(-r));
        }
}

int submit_request(Daemon *d, Request *req, bool answer_at_end, Job **ret, IpcStatus *st)
{
        SubmitParams p;
        char cname[128];
        const Plugin *plugin;
        JobOrigin origin;
        Job *j;
        int cls = 0, r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_SUBMIT)
                return access_denied(&d->cfg, ACCESS_SUBMIT, "submitting a job", st);
        r = read_params(&req->msg.params, &p, st);
        if (r < 0)
                return r;
        r = check_options(d, req, &p, &cls, st);
        if (r < 0)
                return r;
        r = find_plugin(&p, &plugin, st);
        if (r < 0)
                return r;
        snprintf(cname, sizeof(cname), "%s", plugin_host_name(plugin));
        origin = (JobOrigin){.creds = req->creds,
                             .fds = req->fds,
                             .n_fds = req->n_fds,
                             .answer_at_end = answer_at_end};
        r = plugin_host_check_args(plugin, p.args, &origin, st); /* the plugin's check_args */
        if (r < 0)
                return r;
        r = jobtable_submit(&d->jobs, &origin, plugin, cname, p.args, (int)p.priority,
                            p.timeout_ms * NSEC_PER_MSEC, (unsigned)cls,
                            sched_class_name(d->job_sched, (unsigned)cls), &j);
        req->fds = origin.fds; /* NULL when the job took them */
        req->n_fds = origin.n_fds;
        if (r < 0)
                return refused(d, req, r, st);
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
