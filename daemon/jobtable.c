/* SPDX-License-Identifier: MIT */
/*
 * jobtable.c — the job hash, the id-ordered and finish-ordered lists, retention and
 * counters (see jobtable.h). The dispatcher's queue lives in dispatch.c.
 *
 * All lists are intrusive (links inside Job), so nothing but job_new() and the
 * occasional hash doubling allocates. The table holds one reference to every job it
 * lists; dropping a job from the hash and lists drops that reference.
 */
#include "daemon/jobtable.h"
#include "daemon/log.h"
#include "ipc/status.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void jobtable_lock(JobTable *t)
{
        pthread_mutex_lock(&t->lock);
}

void jobtable_unlock(JobTable *t)
{
        pthread_mutex_unlock(&t->lock);
}

int jobtable_init(JobTable *t, Scheduler *sched, SchedulingGroup *supervise_group,
                  unsigned max_running, size_t max_queued, uint64_t retention_ns,
                  size_t retention_max)
{
        memset(t, 0, sizeof(*t));
        t->nbuckets = 1024;
        t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
        if (!t->buckets)
                return -ENOMEM;
        pthread_mutex_init(&t->lock, NULL);
        t->next_id = 1;
        dispatch_init(&t->dispatch, sched, supervise_group, max_running);
        t->max_queued = max_queued;
        t->retention_ns = retention_ns;
        t->retention_max = retention_max;
        list_init(&t->all);
        list_init(&t->finished);
        fiber_event_init(&t->idle);
        return 0;
}

void jobtable_set_hooks(JobTable *t, const JobTableHooks *hooks)
{
        jobtable_lock(t);
        t->hooks = *hooks;
        jobtable_unlock(t);
}

void jobtable_done(JobTable *t)
{
        ListHead *pos, *tmp;

        list_for_each_safe(pos, tmp, &t->all)
        {
                job_unref(list_entry(pos, Job, all_link));
        }
        for (size_t i = 0; i < t->nplugins; i++)
                free(t->plugins[i].name);
        free(t->plugins);
        joblatency_done(&t->latency);
        free(t->buckets);
        dispatch_done(&t->dispatch);
        pthread_mutex_destroy(&t->lock);
        memset(t, 0, sizeof(*t));
}

void jobtable_configure(JobTable *t, unsigned max_running, size_t max_queued, uint64_t retention_ns,
                        size_t retention_max)
{
        jobtable_lock(t);
        dispatch_set_max_running_locked(&t->dispatch, max_running);
        t->max_queued = max_queued;
        t->retention_ns = retention_ns;
        t->retention_max = retention_max;
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
}

/* ------------------------------------------------------------------ hash -------- */

static size_t bucket_of(const JobTable *t, uint64_t id)
{
        /* ids are dense: a multiplicative hash spreads consecutive ids anyway */
        return (size_t)((id * 0x9e3779b97f4a7c15ULL) >> 20) & (t->nbuckets - 1);
}

static void hash_grow_locked(JobTable *t)
{
        size_t n = t->nbuckets * 2;
        Job **b = calloc(n, sizeof(*b));
        Job **old = t->buckets;
        size_t oldn = t->nbuckets;

        if (!b)
                return; /* longer chains, still correct */
        t->buckets = b;
        t->nbuckets = n;
        for (size_t i = 0; i < oldn; i++) {
                Job *j = old[i];
                while (j) {
                        Job *next = j->hash_next;
                        size_t k = bucket_of(t, j->id);
                        j->hash_next = b[k];
                        b[k] = j;
                        j = next;
                }
        }
        free(old);
}

static void hash_remove_locked(JobTable *t, Job *j)
{
        Job **p = &t->buckets[bucket_of(t, j->id)];

        while (*p && *p != j)
                p = &(*p)->hash_next;
        if (*p)
                *p = j->hash_next;
        j->hash_next = NULL;
        t->count--;
}

Job *jobtable_get(JobTable *t, uint64_t id)
{
        Job *j;

        jobtable_lock(t);
        for (j = t->buckets[bucket_of(t, id)]; j; j = j->hash_next)
                if (j->id == id)
                        break;
        if (j)
                job_ref(j);
        jobtable_unlock(t);
        return j;
}

/* ------------------------------------------------------------------ counters ---- */

static JobCounts *plugin_counts_locked(JobTable *t, const char *name)
{
        PluginCounts *p;

        for (size_t i = 0; i < t->nplugins; i++)
                if (strcmp(t->plugins[i].name, name) == 0)
                        return &t->plugins[i].counts;
        p = realloc(t->plugins, (t->nplugins + 1) * sizeof(*p));
        if (!p)
                return NULL;
        t->plugins = p;
        p = &t->plugins[t->nplugins];
        memset(p, 0, sizeof(*p));
        p->name = strdup(name);
        if (!p->name)
                return NULL;
        t->nplugins++;
        return &p->counts;
}

void jobtable_count_stall(JobTable *t, const char *plugin_name)
{
        jobtable_lock(t);
        for (size_t i = 0; i < t->nplugins; i++)
                if (strcmp(t->plugins[i].name, plugin_name) == 0) {
                        t->plugins[i].stalls++;
                        break;
                }
        jobtable_unlock(t);
}

static uint64_t *count_field(JobCounts *c, JobState s)
{
        switch (s) {
        case JOB_QUEUED:
                return &c->queued;
        case JOB_RUNNING:
                return &c->running;
        case JOB_DONE:
                return &c->done;
        case JOB_FAILED:
                return &c->failed;
        default:
                return &c->cancelled;
        }
}

void jobtable_set_state_locked(JobTable *t, Job *j, JobState s)
{
        JobCounts *pc = plugin_counts_locked(t, j->plugin_name);
        JobState old = j->state;

        /* queued and running are gauges: leave the old one */
        if (old == JOB_QUEUED || old == JOB_RUNNING) {
                (*count_field(&t->counts, old))--;
                if (pc)
                        (*count_field(pc, old))--;
        }
        (*count_field(&t->counts, s))++;
        if (pc)
                (*count_field(pc, s))++;
        j->state = s;
}

void jobtable_counts(JobTable *t, JobCounts *ret, void (*fn)(const PluginCounts *pc, void *arg),
                     void *arg)
{
        jobtable_lock(t);
        *ret = t->counts;
        for (size_t i = 0; fn && i < t->nplugins; i++)
                fn(&t->plugins[i], arg);
        jobtable_unlock(t);
}

/* ------------------------------------------------------------------ lifecycle --- */

void jobtable_check_idle_locked(JobTable *t)
{
        if (t->stopping && dispatch_idle_locked(&t->dispatch))
                fiber_event_set(&t->idle);
}

int jobtable_submit(JobTable *t, JobOrigin *origin, const Plugin *plugin, const char *plugin_name,
                    const msgpack_object *args, int priority, uint64_t timeout_ns, unsigned cls,
                    const char *class_name, Job **ret)
{
        JobCounts *pc;
        Job *j;
        int r;

        jobtable_lock(t);
        if (t->stopping) {
                r = -ESHUTDOWN;
                goto out_unlock;
        }
        if (dispatch_queued_locked(&t->dispatch) >= t->max_queued) {
                r = -EAGAIN;
                goto out_unlock;
        }
        r = dispatch_admit_locked(&t->dispatch, origin->creds->uid);
        if (r < 0)
                goto out_unlock;
        r = job_new(&j, t, t->next_id, origin, plugin, plugin_name, args, priority, timeout_ns, cls,
                    class_name);
        if (r < 0)
                goto out_unlock;
        r = dispatch_push_locked(&t->dispatch, j);
        if (r < 0) {
                job_unref(j);
                goto out_unlock;
        }
        t->next_id++;
        if (t->count >= t->nbuckets)
                hash_grow_locked(t);
        j->hash_next = t->buckets[bucket_of(t, j->id)];
        t->buckets[bucket_of(t, j->id)] = j;
        t->count++;
        list_add_tail(&t->all, &j->all_link);
        t->counts.submitted++;
        t->counts.queued++;
        pc = plugin_counts_locked(t, plugin_name);
        if (pc) {
                pc->submitted++;
                pc->queued++;
        }
        *ret = job_ref(j);
        log_job_owner(LOG_DEBUG, j->id, plugin_name, j->owner,
                      "queued (owner %u, priority %d, timeout %llu ms)", (unsigned)j->owner,
                      priority, (unsigned long long)(timeout_ns / NSEC_PER_MSEC));
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
        return 0;

out_unlock:
        jobtable_unlock(t);
        return r;
}

void jobtable_finish_locked(JobTable *t, Job *j, JobState s, const char *code, const char *message)
{
        if (job_state_final(j->state))
                return;
        jobtable_set_state_locked(t, j, s);
        j->finished_ms = job_now_ms();
        j->finished_mono_ns = sched_now_ns();
        /* the one place a job becomes final: its queue wait and run time, if it started */
        if (j->started_mono_ns)
                joblatency_record(&t->latency, j->plugin_name, j->class_name,
                                  j->started_mono_ns - j->submitted_mono_ns,
                                  j->finished_mono_ns - j->started_mono_ns);
        if (code) {
                char *m = strdup(message ? message : "");
                j->error_code = code;
                free(j->error_message);
                j->error_message = m;
        }
        list_add_tail(&t->finished, &j->fin_link);
        t->fin_count++;
        fiber_event_set(&j->finished);
        jobtable_check_idle_locked(t);
}

int jobtable_cancel(JobTable *t, Job *j, bool timed_out)
{
        int r = 0;

        jobtable_lock(t);
        if (job_state_final(j->state)) {
                r = -EALREADY;
        } else if (j->state == JOB_QUEUED) {
                dispatch_remove_locked(&t->dispatch, j);
                job_set_cancel_requested(j);
                j->timed_out = timed_out;
                if (timed_out)
                        jobtable_finish_locked(t, j, JOB_CANCELLED, IPC_DEADLINE_EXCEEDED,
                                               "the job's timeout passed while it was queued");
                else
                        jobtable_finish_locked(t, j, JOB_CANCELLED, IPC_CANCELLED,
                                               "cancelled while queued");
        } else if (!j->cancel_requested) {
                job_set_cancel_requested(j);
                j->timed_out = timed_out;
                if (j->fiber)
                        fiber_cancel(j->fiber);
                if (t->hooks.cancel)
                        t->hooks.cancel(j);
                /* Its fiber waits for a job worker that may be stuck for long (issue 9):
                 * no plugin code of it ran, so it ends now; the fiber, when it runs,
                 * skips the plugin, and its supervisor still joins it. */
                if (!j->fiber_started)
                        jobtable_finish_locked(t, j, JOB_CANCELLED,
                                               timed_out ? IPC_DEADLINE_EXCEEDED : IPC_CANCELLED,
                                               timed_out ? "the job's timeout passed before it "
                                                           "started running"
                                                         : "cancelled before it started running");
        }
        jobtable_unlock(t);
        if (r == 0)
                log_job_owner(LOG_INFO, j->id, j->plugin_name, j->owner, "%s",
                              timed_out ? "timeout passed, cancelling" : "cancel requested");
        return r;
}

/* Unlinks @j from the hash and both lists and drops the table's reference. */
static void retire_locked(JobTable *t, Job *j)
{
        hash_remove_locked(t, j);
        list_del(&j->all_link);
        list_del(&j->fin_link);
        t->fin_count--;
        job_unref(j);
}

void jobtable_set_quotas(JobTable *t, const JobQuotas *q)
{
        jobtable_lock(t);
        dispatch_set_quotas_locked(&t->dispatch, q);
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
}

void jobtable_sweep(JobTable *t)
{
        uint64_t now = sched_now_ns();
        Job *expired[64];
        size_t nexpired = 0;

        jobtable_lock(t);
        for (ListHead *e; (e = list_first(&t->finished));) {
                Job *oldest = list_entry(e, Job, fin_link);
                if (t->fin_count <= t->retention_max &&
                    oldest->finished_mono_ns + t->retention_ns > now)
                        break;
                retire_locked(t, oldest);
        }
        for (size_t i = 0; i < dispatch_queued_locked(&t->dispatch) && nexpired < 64; i++) {
                Job *q = dispatch_at_locked(&t->dispatch, i);
                if (q->deadline_ns <= now)
                        expired[nexpired++] = job_ref(q);
        }
        t->dispatch.pump_blocked = false;
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
        for (size_t i = 0; i < nexpired; i++) {
                jobtable_cancel(t, expired[i], true);
                job_unref(expired[i]);
        }
}

void jobtable_stop(JobTable *t)
{
        Job *j;

        jobtable_lock(t);
        t->stopping = true;
        while ((j = dispatch_first_locked(&t->dispatch))) {
                dispatch_remove_locked(&t->dispatch, j);
                job_set_cancel_requested(j);
                jobtable_finish_locked(t, j, JOB_CANCELLED, IPC_CANCELLED,
                                       "cancelled while queued: fiberd is shutting down");
        }
        for (j = jobtable_next_locked(t, NULL); j; j = jobtable_next_locked(t, j)) {
                if (j->state != JOB_RUNNING || j->cancel_requested)
                        continue;
                job_set_cancel_requested(j);
                if (j->fiber)
                        fiber_cancel(j->fiber);
                if (t->hooks.cancel)
                        t->hooks.cancel(j);
        }
        jobtable_check_idle_locked(t);
        jobtable_unlock(t);
}

int jobtable_foreach(JobTable *t, int (*fn)(Job *j, void *arg), void *arg)
{
        int r = 0;

        jobtable_lock(t);
        for (Job *j = jobtable_next_locked(t, NULL); j && r == 0; j = jobtable_next_locked(t, j))
                r = fn(j, arg);
        jobtable_unlock(t);
        return r;
}
