/* SPDX-License-Identifier: MIT */
/*
 * deadset.c — job.retry and job.discard (see deadset.h).
 *
 * Both take the same params and act on each job in turn; the difference is the action
 * and which jobs it accepts. With ids the request is all or nothing for the checks
 * (a bad id answers before anything changed); a job that changes state between the
 * check and the action (it was retried by someone else meanwhile) is skipped, and left
 * out of the answer.
 */
#include "daemon/server/deadset.h"
#include "daemon/obs/log.h"
#include "daemon/server/access.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DEADSET_IDS_MAX 1000 /* ids in one request */

typedef struct DeadsetOp {
        const char *verb; /* "retry", for messages */
        const char *key;  /* the answer's key */
        bool done_ok;     /* a done job is acceptable (discard) */
        int (*act)(JobTable *t, Job *j);
} DeadsetOp;

/* Collected by jobtable_foreach() for {all: true}: the caller's dead jobs. */
typedef struct AllDead {
        uid_t uid;
        bool admin;
        Job **jobs;
        size_t n, cap;
} AllDead;

static int collect_dead(Job *j, void *arg)
{
        AllDead *a = arg;

        if (j->state != JOB_DEAD || j->fleet_copy || (j->owner != a->uid && !a->admin))
                return 0;
        if (a->n == a->cap) {
                size_t cap = a->cap ? a->cap * 2 : 64;
                Job **p = realloc(a->jobs, cap * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                a->jobs = p;
                a->cap = cap;
        }
        a->jobs[a->n++] = job_ref(j);
        return 0;
}

/* The jobs @req names, referenced, checked: its own (or an admin's), final, and not done
 * unless @op takes done ones. */
static int collect_ids(Daemon *d, Request *req, const msgpack_object *ids, bool admin,
                       const DeadsetOp *op, AllDead *a, IpcStatus *st)
{
        if (ids->via.array.size > DEADSET_IDS_MAX)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -E2BIG, "%s: at most %d ids",
                                      op->verb, DEADSET_IDS_MAX);
        a->jobs = calloc(ids->via.array.size ? ids->via.array.size : 1, sizeof(*a->jobs));
        if (!a->jobs)
                return -ENOMEM;
        for (uint32_t i = 0; i < ids->via.array.size; i++) {
                uint64_t id;
                Job *j;
                JobState state;
                int r = ipc_read_uint(&ids->via.array.ptr[i], "job id", &id, st);
                if (r < 0)
                        return r;
                j = jobtable_get(&d->jobs, id);
                if (!j || (j->owner != req->uid && !admin)) {
                        job_unref(j);
                        return ipc_status_set(st, IPC_NOT_FOUND, -ENOENT, "no job %llu of yours",
                                              (unsigned long long)id);
                }
                a->jobs[a->n++] = j;
                jobtable_lock(&d->jobs);
                state = j->state;
                jobtable_unlock(&d->jobs);
                if (!job_state_final(state) || (state == JOB_DONE && !op->done_ok))
                        return ipc_status_set(st, IPC_FAILED_PRECONDITION, -EALREADY,
                                              "job %llu is %s: only a %s job can be %s",
                                              (unsigned long long)id, job_state_name(state),
                                              op->done_ok ? "finished"
                                                          : "failed, cancelled or dead",
                                              op->done_ok ? "discarded" : "retried");
        }
        return 0;
}

static int deadset_run(Daemon *d, Request *req, const DeadsetOp *op, msgpack_packer *pk,
                       IpcStatus *st)
{
        bool admin = access_tier(&d->cfg, req->creds) >= ACCESS_ADMIN;
        const msgpack_object *p0 = ipc_array_at(&req->msg.params, 0);
        AllDead a = {.uid = req->uid, .admin = admin};
        uint64_t *done = NULL;
        size_t n_done = 0;
        int r;

        if (access_tier(&d->cfg, req->creds) < ACCESS_SUBMIT)
                return access_denied(&d->cfg, ACCESS_SUBMIT, op->verb, st);
        if (p0 && p0->type == MSGPACK_OBJECT_MAP) {
                const msgpack_object *all = ipc_map_find(p0, IPC_KEY_ALL);
                bool yes = false;
                if (!all || (r = ipc_read_bool(all, IPC_KEY_ALL, &yes, st)) < 0 || !yes)
                        return all && r < 0 ? r
                                            : ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                                             "%s: params are [ids] or "
                                                             "[{\"all\": true}]",
                                                             op->verb);
                r = jobtable_foreach(&d->jobs, collect_dead, &a);
        } else if (p0 && p0->type == MSGPACK_OBJECT_ARRAY) {
                r = collect_ids(d, req, p0, admin, op, &a, st);
        } else {
                r = ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                   "%s: params are [ids] or [{\"all\": true}]", op->verb);
        }
        if (r == 0 && a.n && !(done = calloc(a.n, sizeof(*done))))
                r = -ENOMEM;
        for (size_t i = 0; r == 0 && i < a.n; i++)
                if (op->act(&d->jobs, a.jobs[i]) == 0) {
                        done[n_done++] = a.jobs[i]->id;
                        log_job_owner(LOG_INFO, a.jobs[i]->id, a.jobs[i]->plugin_name,
                                      a.jobs[i]->owner, "%s by uid %u", op->key,
                                      (unsigned)req->uid);
                }
        if (r == 0) {
                r = msgpack_pack_map(pk, 1) | ipc_pack_cstr(pk, op->key) |
                    msgpack_pack_array(pk, n_done);
                for (size_t i = 0; r == 0 && i < n_done; i++)
                        r = msgpack_pack_uint64(pk, done[i]);
                if (r)
                        r = -ENOMEM;
        }
        for (size_t i = 0; i < a.n; i++)
                job_unref(a.jobs[i]);
        free(a.jobs);
        free(done);
        return r;
}

int deadset_retry(Daemon *d, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        static const DeadsetOp op = {"retrying a job", IPC_KEY_RETRIED, false, jobtable_retry};

        return deadset_run(d, req, &op, pk, st);
}

int deadset_discard(Daemon *d, Request *req, msgpack_packer *pk, IpcStatus *st)
{
        static const DeadsetOp op = {"discarding a job", IPC_KEY_DISCARDED, true, jobtable_discard};

        return deadset_run(d, req, &op, pk, st);
}
