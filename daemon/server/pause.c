/* SPDX-License-Identifier: MIT */
/*
 * pause.c — pause and resume a job class or a plugin (PROTOCOL.md, "pause, resume"):
 * the methods' checks and answer, the pauses kept in the job store, and their restore
 * at start-up.
 *
 * What a pause does is the dispatcher's (dispatch.c, "Pauses and caps": the queued jobs
 * of a paused class or plugin stay queued, and hold up nothing else). This file only
 * decides what to pause: a class the job scheduler runs (by name; its Job.sched_class
 * is 1 + its index), or a plugin name, [a-z0-9_-]{1,32}, loaded or not, so a plugin may
 * be paused before its file is dropped in.
 *
 * Kept in the job store as one meta integer per name, "pause:class:NAME" or
 * "pause:plugin:NAME": 1 paused, 0 resumed (the meta table has no delete; a name once
 * paused keeps a row of a few bytes). The write comes first and the answer waits for its
 * commit (store_set_meta()), so an answered pause survives a crash and a failed write
 * changes nothing; then the dispatcher is told. pause_lock orders whole requests, so
 * the store and the dispatcher agree on which of two racing requests came last. At
 * start-up pause_restore() reads the rows back before the store's queued jobs are
 * restored, so none of a paused plugin's jobs starts in between. The memory store keeps
 * nothing (pauses last until exit); the redis store keeps them in the host's own meta
 * hash (store-redis.c): a pause holds the jobs of the host asked, not the fleet's.
 *
 * The store write blocks the request fiber's worker for one commit (store_set_meta()
 * waits on a condition variable, as plugins.clear's write does): a rare admin request,
 * on the server group, never on a job worker.
 */
#include "daemon/server/pause.h"
#include "daemon/obs/log.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define PAUSE_KEY_PREFIX "pause:"
#define PAUSE_CLASS_PREFIX PAUSE_KEY_PREFIX IPC_PAUSE_KIND_CLASS ":"
#define PAUSE_PLUGIN_PREFIX PAUSE_KEY_PREFIX IPC_PAUSE_KIND_PLUGIN ":"

/* Orders pause requests: held across the store write and the dispatcher's change. No
 * fiber parks under it (the write blocks its thread). */
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;

/* "default, batch": the job scheduler's classes, for an unknown class's message. */
static void class_names(const Scheduler *s, char *buf, size_t size)
{
        size_t n = 0;

        buf[0] = '\0';
        for (unsigned i = 0; i < sched_classes(s) && n < size; i++) {
                const char *name = sched_class_name(s, i);
                int w = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", name ? name : "?");
                if (w < 0)
                        break;
                n += (size_t)w;
        }
}

/* Reads params [kind, name]: *@ret_class (0: a plugin) is the Job.sched_class of a
 * class; @name gets the name (@size bytes). */
static int pause_target(Daemon *d, Request *req, unsigned *ret_class, char *name, size_t size,
                        IpcStatus *st)
{
        const char *kind, *v;
        size_t kind_len, len;
        int r, cls;

        r = ipc_read_strv(ipc_array_at(&req->msg.params, 0), IPC_KEY_KIND, &kind, &kind_len, st);
        if (r < 0)
                return r;
        r = ipc_read_strv(ipc_array_at(&req->msg.params, 1), IPC_KEY_NAME, &v, &len, st);
        if (r < 0)
                return r;
        if (kind_len == strlen(IPC_PAUSE_KIND_PLUGIN) &&
            memcmp(kind, IPC_PAUSE_KIND_PLUGIN, kind_len) == 0) {
                if (!config_plugin_name_valid(v, len) || len >= size)
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "name: \"%.*s\" is not a plugin name (1 to %d of "
                                              "a-z 0-9 _ -)",
                                              (int)(len > 40 ? 40 : len), v,
                                              CONFIG_PLUGIN_NAME_MAX);
                memcpy(name, v, len);
                name[len] = '\0';
                *ret_class = 0;
                return 0;
        }
        if (kind_len != strlen(IPC_PAUSE_KIND_CLASS) ||
            memcmp(kind, IPC_PAUSE_KIND_CLASS, kind_len) != 0)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "kind: \"%.*s\" is neither \"" IPC_PAUSE_KIND_CLASS
                                      "\" nor \"" IPC_PAUSE_KIND_PLUGIN "\"",
                                      (int)(kind_len > 16 ? 16 : kind_len), kind);
        cls = -ENOENT;
        if (len > 0 && len < size && !memchr(v, '\0', len)) {
                memcpy(name, v, len);
                name[len] = '\0';
                cls = sched_class_find(d->job_sched, name);
        }
        if (cls < 0) {
                char known[SCHED_MAX_CLASSES * (SCHED_CLASS_NAME_MAX + 2)];
                class_names(d->job_sched, known, sizeof(known));
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "name: no class \"%.*s\"; the classes are %s ([class.NAME] "
                                      "in fiberd's config)",
                                      (int)(len > 32 ? 32 : len), v, known);
        }
        *ret_class = 1 + (unsigned)cls;
        return 0;
}

int pause_request(Daemon *d, Request *req, bool paused, msgpack_packer *pk, IpcStatus *st)
{
        char name[SCHED_CLASS_NAME_MAX + CONFIG_PLUGIN_NAME_MAX + 2], key[96];
        Dispatcher *disp = &d->jobs.dispatch;
        const char *kind;
        unsigned cls = 0;
        size_t queued = 0;
        int r;

        r = pause_target(d, req, &cls, name, sizeof(name), st);
        if (r < 0)
                return r;
        kind = cls ? IPC_PAUSE_KIND_CLASS : IPC_PAUSE_KIND_PLUGIN;
        snprintf(key, sizeof(key), "%s%s", cls ? PAUSE_CLASS_PREFIX : PAUSE_PLUGIN_PREFIX, name);

        pthread_mutex_lock(&pause_lock);
        r = store_set_meta(d->store, key, paused);
        if (r == 0) {
                jobtable_lock(&d->jobs);
                r = cls ? dispatch_pause_class_locked(disp, cls, paused)
                        : dispatch_pause_plugin_locked(disp, name, paused);
                queued = dispatch_count_locked(disp, cls, cls ? NULL : name, false);
                jobtable_unlock(&d->jobs);
                if (r < 0) /* out of memory: the store says paused, the dispatcher not */
                        store_set_meta(d->store, key, !paused);
        } else {
                r = ipc_status_errno(st, r,
                                     "the job store could not keep the %s (%s); nothing "
                                     "changed",
                                     paused ? "pause" : "resume", strerror(-r));
        }
        pthread_mutex_unlock(&pause_lock);
        if (r < 0)
                return ipc_status_failed(st) ? r : ipc_status_errno(st, r, NULL);
        log_msg(LOG_NOTICE, "uid %u %s %s %s: %zu of its jobs queued", (unsigned)req->uid,
                paused ? "paused" : "resumed", kind, name, queued);
        return IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_KIND, kind), IPC_KV_CSTR(IPC_KEY_NAME, name),
                            IPC_KV_BOOL(IPC_KEY_PAUSED, paused),
                            IPC_KV_UINT(IPC_KEY_QUEUED, queued))
                       ? -ENOMEM
                       : 0;
}

/* store_meta_list()'s callback: one "pause:..." row. */
static int restore_one(const char *key, int64_t value, void *arg)
{
        Daemon *d = arg;
        const char *name;
        int r = 0, cls;

        if (!value)
                return 0; /* resumed */
        if (strncmp(key, PAUSE_CLASS_PREFIX, strlen(PAUSE_CLASS_PREFIX)) == 0) {
                name = key + strlen(PAUSE_CLASS_PREFIX);
                cls = sched_class_find(d->job_sched, name);
                if (cls < 0) {
                        log_msg(LOG_WARNING,
                                "class %s was paused and is no longer configured: nothing "
                                "to hold (the pause holds again if the class comes back)",
                                name);
                        return 0;
                }
                jobtable_lock(&d->jobs);
                r = dispatch_pause_class_locked(&d->jobs.dispatch, 1 + (unsigned)cls, true);
                jobtable_unlock(&d->jobs);
                if (r == 0)
                        log_msg(LOG_NOTICE,
                                "class %s is paused (kept in the job store): its "
                                "queued jobs wait until it is resumed",
                                name);
        } else if (strncmp(key, PAUSE_PLUGIN_PREFIX, strlen(PAUSE_PLUGIN_PREFIX)) == 0) {
                name = key + strlen(PAUSE_PLUGIN_PREFIX);
                if (!config_plugin_name_valid(name, strlen(name)))
                        return 0; /* not written by pause_request() */
                jobtable_lock(&d->jobs);
                r = dispatch_pause_plugin_locked(&d->jobs.dispatch, name, true);
                jobtable_unlock(&d->jobs);
                if (r == 0)
                        log_msg(LOG_NOTICE,
                                "plugin %s is paused (kept in the job store): its "
                                "queued jobs wait until it is resumed",
                                name);
        }
        return r;
}

int pause_restore(Daemon *d)
{
        int r = store_meta_list(d->store, PAUSE_KEY_PREFIX, restore_one, d);

        if (r < 0)
                log_msg(LOG_ERR, "cannot read the pauses kept in the job store: %s", strerror(-r));
        return r;
}
