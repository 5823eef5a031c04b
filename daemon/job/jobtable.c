/* SPDX-License-Identifier: MIT */
/*
 * jobtable.c — the job hash, the id-ordered and finish-ordered lists, retention and
 * counters (see jobtable.h). The dispatcher's queue lives in dispatch.c.
 *
 * The table owns its Dispatcher and calls down into it; the dispatcher reaches back
 * only through the DispatchOps handed over at dispatch_init() (jobtable_dispatch_ops
 * below: the lock, the run hook, the cancel, the idle and detached bookkeeping), and
 * the store reads a job's record through jobtable_snapshot(), handed over by
 * jobtable_set_store(). So neither dispatch.c nor store.c names the table, and the
 * three are layers (table over dispatcher and store), not one call circle.
 *
 * All lists are intrusive (links inside Job), so nothing but job_new() and the
 * occasional hash doubling allocates. The table holds one reference to every job it
 * lists; dropping a job from the hash and lists drops that reference.
 *
 * Which finished jobs are dropped is the quota's to say (jobquota.h): each job is
 * charged to its owner for its args and result (listen_quota), a user past its own
 * bounds loses its own oldest finished jobs, the global bounds take from whoever holds
 * the most (trim_locked(), at every finish and sweep), and a submission past a byte
 * budget is admitted when its sender's own oldest finished jobs make room
 * (admit_locked()), which go once it is charged (listen_retention()). Time (retention_s) drops from the front of the finished list, for
 * everyone alike.
 */
#include "daemon/job/jobtable.h"
#include "daemon/job/jobhold.h"
#include "daemon/job/joblines.h"
#include "daemon/job/jobnames.h"
#include "daemon/obs/log.h"
#include "ipc/protocol.h"
#include "ipc/status.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static void machine_init(JobTable *t);

/* JobHoldOwner.find_locked: the table's hash. */
static Job *find_locked(void *owner, uint64_t id)
{
        return jobtable_find_locked(owner, id);
}
static void trim_all_locked(JobTable *t);
static const DispatchOps jobtable_dispatch_ops;

void jobtable_lock(JobTable *t)
{
        pthread_mutex_lock(&t->lock);
}

void jobtable_unlock(JobTable *t)
{
        pthread_mutex_unlock(&t->lock);
}

static int u64_descending(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? 1 : x > y ? -1 : 0;
}

size_t jobtable_unwritten(JobTable *t, uint64_t below, uint64_t *ids, size_t max)
{
        size_t n = 0, seen = 0;

        jobtable_lock(t);
        /* from the last one listed: a job.run in progress is among the newest jobs */
        for (Job *j = jobtable_prev_locked(t, NULL); j && n < max && seen < t->unwritten;
             j = jobtable_prev_locked(t, j)) {
                if (j->durability != DUR_DEFERRED)
                        continue;
                seen++;
                if (!below || j->id < below)
                        ids[n++] = j->id;
        }
        jobtable_unlock(t);
        /* the table lists jobs as they were accepted, and a fleet's ids are taken before
         * the lock: with more than one server worker, not quite in id order */
        qsort(ids, n, sizeof(*ids), u64_descending);
        return n;
}

size_t jobtable_fleet_room_locked(JobTable *t)
{
        size_t cap = 2 * (size_t)t->dispatch.max_running;
        size_t held = t->counts.queued + t->counts.running;

        /* the store cannot write (Redis loading, or its disk full): a job run now could
         * not record its end, and a host killed meanwhile would leave it to run again;
         * the stream keeps it for a host that can, or for this one once it writes */
        if (store_failing(t->store))
                return 0;
        return held < cap ? cap - held : 0;
}

int jobtable_init(JobTable *t, Scheduler *sched, SchedulingGroup *supervise_group,
                  unsigned max_running, size_t max_queued, uint64_t retention_ns,
                  size_t retention_max)
{
        int r;

        memset(t, 0, sizeof(*t));
        t->nbuckets = 1024;
        t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
        if (!t->buckets)
                return -ENOMEM;
        /* Adaptive: the lock is held for short sections (by the server group's fibers and
         * the store thread; never by the job workers, dispatch.c), so a waiter spins a
         * while before it sleeps in the kernel, and the holder's unlock seldom has a
         * sleeper to wake with a system call of its own. */
        t->lock = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
        t->next_id = 1;
        t->max_queued = max_queued;
        t->retention_ns = retention_ns;
        jobquota_init(&t->quota);
        t->quota.limits.retention_max = retention_max;
        list_init(&t->all);
        list_init(&t->finished);
        list_init(&t->dead);
        t->dead_retention_ns = 7ull * 24 * 3600 * NSEC_PER_SEC;
        t->dead_retention_max = 10000;
        t->key_window_ms = 24ull * 3600 * 1000;
        jobhold_init(&t->hold, &(JobHoldOwner){.lock = &t->lock,
                                               .machine = &t->machine,
                                               .dispatch = &t->dispatch,
                                               .stopping = &t->stopping,
                                               .find_locked = find_locked,
                                               .owner = t});
        fiber_event_init(&t->idle);
        t->watches_due_tail = &t->watches_due;
        machine_init(t);
        /* last: its fiber may run at once (it waits for the first kick) */
        r = dispatch_init(&t->dispatch, sched, supervise_group, max_running, &jobtable_dispatch_ops,
                          t, &t->machine);
        if (r < 0) {
                free(t->buckets);
                t->buckets = NULL;
        }
        return r;
}

void jobtable_set_hooks(JobTable *t, const JobTableHooks *hooks)
{
        jobtable_lock(t);
        t->hooks = *hooks;
        jobtable_unlock(t);
}

void jobtable_configure(JobTable *t, unsigned max_running, size_t max_queued, uint64_t retention_ns,
                        size_t retention_max)
{
        jobtable_lock(t);
        dispatch_set_max_running_locked(&t->dispatch, max_running);
        t->max_queued = max_queued;
        t->retention_ns = retention_ns;
        t->quota.limits.retention_max = retention_max;
        trim_all_locked(t);
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
}

/* ------------------------------------------------------------------ hash -------- */

/* Links @j at the head of the chain @head. */
static void hash_link(Job **head, Job *j)
{
        j->hash_next = *head;
        if (*head)
                (*head)->hash_pprev = &j->hash_next;
        *head = j;
        j->hash_pprev = head;
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
                        hash_link(&b[jobtable_bucket_of(t, j->id)], j);
                        j = next;
                }
        }
        free(old);
}

/* Unlinks @j through its back link: no walk of its bucket's chain, whose newer jobs are
 * cold lines by the time retention drops @j (the oldest, at the chain's end); the line
 * the back link points into is fetched ahead (trim_locked()). */
static void hash_remove_locked(JobTable *t, Job *j)
{
        if (j->hash_pprev) {
                *j->hash_pprev = j->hash_next;
                if (j->hash_next)
                        j->hash_next->hash_pprev = j->hash_pprev;
        }
        j->hash_next = NULL;
        j->hash_pprev = NULL;
        t->count--;
}

Job *jobtable_get(JobTable *t, uint64_t id)
{
        Job *j;

        jobtable_lock(t);
        j = jobtable_find_locked(t, id);
        if (j)
                job_ref(j);
        jobtable_unlock(t);
        return j;
}

int jobtable_job_state(JobTable *t, uint64_t id, uid_t *ret_owner, JobState *ret_state)
{
        Job *j;

        jobtable_lock(t);
        j = jobtable_find_locked(t, id);
        if (j) {
                *ret_owner = j->owner;
                *ret_state = j->state;
        }
        jobtable_unlock(t);
        return j ? 0 : -ENOENT;
}

bool jobtable_unshared(JobTable *t, uint64_t id)
{
        bool unshared;
        Job *j;

        jobtable_lock(t);
        j = jobtable_find_locked(t, id);
        /* deferred: a job.run (run here, or with fds) whose one write is at its end;
         * jobtable_record_locked() ends that at its end or at a stop's requeue */
        unshared = j && j->durability == DUR_DEFERRED;
        jobtable_unlock(t);
        return unshared;
}

/* ------------------------------------------------------------------ counters ---- */

static JobCounts *plugin_counts_locked(JobTable *t, const char *name)
{
        PluginCounts *p;

        for (size_t i = 0; i < t->nplugins; i++)
                if (jobnames_match(t->plugins[i].interned, t->plugins[i].name, name))
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
        p->interned = jobnames_intern(name, 0);
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

/* The counter of @s in @c: a gauge (queued, running, the held states) or a total since
 * start; NULL for new. */
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
        case JOB_CANCELLED:
                return &c->cancelled;
        case JOB_SCHEDULED:
                return &c->scheduled;
        case JOB_WAITING:
                return &c->waiting;
        case JOB_RETRYING:
                return &c->retrying;
        case JOB_DEAD:
                return &c->dead;
        default:
                return NULL;
        }
}

/* @c's counter of @s, by @delta (+1 / -1), when @s has one. */
static void count_add(JobCounts *c, JobState s, int delta)
{
        uint64_t *n = c ? count_field(c, s) : NULL;

        if (n)
                *n += (uint64_t)(int64_t)delta;
}

void jobtable_set_detached_locked(JobTable *t, Job *j, bool detached)
{
        JobCounts *pc;

        if (j->detached == detached)
                return;
        pc = plugin_counts_locked(t, j->plugin_name);
        __atomic_store_n(&j->detached, detached, __ATOMIC_RELEASE);
        if (detached) {
                t->counts.detached++;
                if (pc)
                        pc->detached++;
        } else {
                t->counts.detached--;
                if (pc && pc->detached)
                        pc->detached--;
        }
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

/*
 * The job table's machine (jobstate.h): what each transition of a listed job tells the
 * rest of the daemon, in this order. Each runs under the table lock. A fleet copy
 * (Job.fleet_copy: not listed here, never run here) is only counted as submitted and
 * its submission written to the shared store.
 */

/* table: a job submitted or restored here joins the hash and the id-ordered list (the
 * table's reference is the one job_new() gave), and new ids start after it. */
static void listen_table(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;

        if (j->fleet_copy || from != JOB_NEW)
                return;
        if (t->count >= t->nbuckets)
                hash_grow_locked(t);
        hash_link(&t->buckets[jobtable_bucket_of(t, j->id)], j);
        t->count++;
        list_add_tail(&t->all, &j->all_link);
        if (j->id >= t->next_id)
                t->next_id = j->id + 1;
}

/* quota: a job listed here is charged to its owner (jobquota.h) for its args and
 * result, again at every transition (a result came, or went with a retry). Out of
 * memory for the owner's entry, the job is not charged (and logged). */
static void listen_quota(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;

        if (j->fleet_copy)
                return;
        if (from == JOB_NEW && !j->quota.user) {
                JobQuotaUser *u = jobquota_user(&t->quota, j->owner);
                if (!u) {
                        log_job(LOG_WARNING, j->id, j->plugin_name,
                                "out of memory: its bytes are not counted against its owner");
                        return;
                }
                jobquota_attach(&j->quota, u);
        }
        jobquota_charge(&t->quota, &j->quota, j->args_bytes + j->result_len);
}

/* counts: the queued and running gauges, the totals since start, in all and per plugin.
 * A restored final job is not counted: it did not end since this start. */
static void listen_counts(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;
        JobCounts *pc;

        if (j->fleet_copy) {
                if (from == JOB_NEW && ev != JOB_EV_RESTORE) /* accepted: queued, scheduled */
                        t->counts.submitted++;
                return;
        }
        if (ev == JOB_EV_RESTORE && job_state_final(j->state))
                return;
        pc = plugin_counts_locked(t, j->plugin_name);
        if (from == JOB_NEW && ev != JOB_EV_RESTORE) { /* accepted: submit, schedule, wait */
                t->counts.submitted++;
                if (pc)
                        pc->submitted++;
        }
        if (job_state_active(from) || job_state_held(from)) { /* gauges: leave the old one */
                count_add(&t->counts, from, -1);
                count_add(pc, from, -1);
        }
        count_add(&t->counts, j->state, +1);
        count_add(pc, j->state, +1);
}

/* latency: a job that started and ends now adds its queue wait and run time. */
static void listen_latency(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;

        if (j->fleet_copy || ev == JOB_EV_RESTORE || !job_state_final(j->state) ||
            !j->live->started_mono_ns)
                return;
        joblatency_record(&t->latency, j->plugin_name, j->class_name,
                          j->live->started_mono_ns - j->live->submitted_mono_ns,
                          j->finished_mono_ns - j->live->started_mono_ns);
}

/* log: one debug line a transition (the lines that say why stay with their callers). */
static void listen_log(void *ctx, Job *j, JobState from, JobEvent ev)
{
        (void)ctx;
        if (log_get_level() < LOG_DEBUG)
                return;
        log_job(LOG_DEBUG, j->id, j->plugin_name, "%s --%s--> %s", job_state_name(from),
                job_event_name(ev), job_state_name(j->state));
}

/* store: a submission's first write as its Job.durability says (job.h; the plan is
 * jobtable_submit()'s), then every change is queued for the store. A retry-safe job
 * that shutdown cancelled while it ran is kept queued there for the next start. */
static void listen_store(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;

        if (from == JOB_NEW && ev != JOB_EV_RESTORE) { /* accepted */
                if (j->durability == DUR_NONE)
                        store_settle(j, false);         /* nothing kept: nothing to wait for */
                else if (j->durability != DUR_DEFERRED) /* deferred: at its end */
                        store_submit(t->store, j);      /* refused if its commit fails */
                return;
        }
        if (j->fleet_copy || ev == JOB_EV_RESTORE)
                return;
        if (ev == JOB_EV_REVIVE && t->store)
                store_revive(t->store, j); /* its next end is not on disk yet */
        if (job_state_final(j->state) && j->interrupted && t->store && store_durable(t->store) &&
            t->hooks.retry_safe && t->hooks.retry_safe(j))
                j->requeued = true; /* its record says queued: store.c's snapshot */
        jobtable_store_locked(t, j);
}

/* Hands @w to the dispatcher fiber's next round (dispatch_op_after_round()). */
static void watch_due_locked(JobTable *t, JobWatch *w)
{
        w->next = NULL;
        /* atomic: dispatch_op_after_round() peeks at the head without the lock */
        __atomic_store_n(t->watches_due_tail, w, __ATOMIC_RELAXED);
        t->watches_due_tail = &w->next;
        dispatch_kick(&t->dispatch);
}

/* Wakes @j's waiters (Job.finished) and hands its watches (jobtable_watch()) to the
 * dispatcher fiber's next round. Context: the table lock held. */
static void finished_set_locked(JobTable *t, Job *j)
{
        JobWatch *w;

        fiber_event_set(&j->finished);
        while ((w = j->watches)) {
                j->watches = w->next;
                watch_due_locked(t, w);
        }
}

void jobtable_watch(JobTable *t, Job *j, JobWatch *w)
{
        w->job = j;
        w->next = NULL;
        jobtable_lock(t);
        if (fiber_event_is_set(&j->finished)) {
                watch_due_locked(t, w);
        } else {
                w->next = j->watches;
                j->watches = w;
        }
        jobtable_unlock(t);
}

/* The dispatcher fiber after each round: the watches due, in order, no lock held. */
static void dispatch_op_after_round(void *owner)
{
        JobTable *t = owner;
        JobWatch *w, *next;

        /* the usual round: nothing to take, no lock (a watch made due after this is
         * kicked, and that round sees it) */
        if (!__atomic_load_n(&t->watches_due, __ATOMIC_RELAXED))
                return;
        jobtable_lock(t);
        w = t->watches_due;
        __atomic_store_n(&t->watches_due, NULL, __ATOMIC_RELAXED);
        t->watches_due_tail = &t->watches_due;
        jobtable_unlock(t);
        for (; w; w = next) {
                next = w->next;
                w->fn(t, w);
        }
}

/* waiters: `finished` once the state is final; the table's `idle` when it stops. */
static void listen_waiters(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;

        if (j->fleet_copy || !job_state_final(j->state))
                return;
        finished_set_locked(t, j);
        if (ev != JOB_EV_RESTORE)
                jobtable_check_idle_locked(t);
}

static void retire_locked(JobTable *t, Job *j);
static void restore_finished_locked(JobTable *t, Job *j);

/* The job whose quota entry is @e. */
static Job *quota_job(JobQuotaEntry *e)
{
        return container_of(e, Job, quota);
}

/*
 * Drops finished jobs while a bound of the quota is passed (jobquota.h): @u's own bounds
 * (NULL: none checked) take @u's oldest finished jobs, the global ones the oldest of
 * whoever holds the most. @keep (the job that just finished, for its waiters; NULL:
 * none) stays, and so does what it would have taken to drop it.
 */
static void trim_locked(JobTable *t, JobQuotaUser *u, Job *keep)
{
        JobQuotaEntry *k = keep ? &keep->quota : NULL, *e;
        Job *next;

        while ((e = jobquota_user_excess(&t->quota, u)) && e != k)
                retire_locked(t, quota_job(e));
        while ((e = jobquota_global_excess(&t->quota)) && e != k)
                retire_locked(t, quota_job(e));
        /* The jobs the next two finishes of @u's drop: finished a retention's worth of
         * jobs ago, so out of the caches by now. Their lines are fetched while other work
         * runs, not when their unlinking waits on them (hash_remove_locked()'s wait alone
         * was 6 % of a trivial job's server CPU in perf): the second oldest's own lines
         * now, and the oldest's (fetched at the finish before, as the second oldest) back
         * link's target, the line of the newer job that the hash unlink writes. */
        if (u && (e = jobquota_oldest(u)) && e != k) {
                next = quota_job(e);
                __builtin_prefetch(next->hash_pprev, 1); /* NULL is fine: no fault */
                if ((e = jobquota_next_oldest(u, e)) && e != k)
                        next = quota_job(e);
                __builtin_prefetch(next, 1);
                __builtin_prefetch(&next->quota, 1);
                __builtin_prefetch(&next->hash_next, 1);
                __builtin_prefetch(&next->fin_link, 1);
        }
}

/* retention: a final job joins the finished list (and its owner's, jobquota.h); the
 * quota's bounds hold at every finish, not only at the ticker's sweep: at 100k jobs/s a
 * second's burst would otherwise keep 100k records alive (and the allocator keeps the
 * memory they had). The one just finished stays, for its waiters; the table's reference
 * is all that is dropped. */
static void listen_retention(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;
        JobQuotaEntry *e;

        if (j->fleet_copy)
                return;
        if (job_state_final(from) && !job_state_final(j->state)) { /* revived */
                list_del(&j->fin_link);
                list_init(&j->fin_link);
                if (from == JOB_DEAD) {
                        t->dead_count--;
                } else {
                        t->fin_count--;
                        jobquota_unfinish(&t->quota, &j->quota);
                }
                return;
        }
        if (!job_state_final(j->state)) {
                /* a new job, charged now (listen_quota): admission found room for it
                 * in its owner's finished jobs (admit_locked()), which go, oldest first */
                if (from == JOB_NEW && ev != JOB_EV_RESTORE)
                        while ((e = jobquota_room(&t->quota, j->quota.user)))
                                retire_locked(t, quota_job(e));
                return;
        }
        if (ev == JOB_EV_RESTORE) {
                restore_finished_locked(t, j);
                return;
        }
        if (j->state == JOB_DEAD) { /* the dead set: its own retention */
                list_add_tail(&t->dead, &j->fin_link);
                t->dead_count++;
                while (t->dead_count > t->dead_retention_max) {
                        Job *oldest = list_entry(list_first(&t->dead), Job, fin_link);
                        if (oldest == j)
                                break;
                        retire_locked(t, oldest);
                }
                return;
        }
        list_add_tail(&t->finished, &j->fin_link);
        t->fin_count++;
        jobquota_finish(&t->quota, &j->quota, NULL);
        trim_locked(t, j->quota.user, j);
}

/* fleet: a job this host took off the fleet's shared queue (Job.from_fleet) whose run
 * failed with attempts left goes back to the fleet. The store listener queued its record
 * (retrying, its due time and errors), and the store thread reads it after this, under
 * the same lock: as a fleet copy it joins the fleet's schedule set and its stream entry is
 * acknowledged (store-redis-sched.c), so whichever host is up runs the next attempt.
 * This host forgets it (the hold listener left it out of the due set): its gauge, the
 * hash and the id list. Whoever still holds it has a fleet copy from here on; a waiter
 * here is woken and goes on from the shared record (jobwait.c). */
static void listen_fleet(void *ctx, Job *j, JobState from, JobEvent ev)
{
        JobTable *t = ctx;
        JobCounts *pc;

        if (!j->from_fleet || j->fleet_copy || j->state != JOB_RETRYING || ev == JOB_EV_RESTORE)
                return;
        pc = plugin_counts_locked(t, j->plugin_name);
        count_add(&t->counts, j->state, -1);
        count_add(pc, j->state, -1);
        hash_remove_locked(t, j);
        list_del(&j->all_link);
        list_init(&j->all_link);
        jobquota_detach(&t->quota, &j->quota); /* the fleet holds its bytes now */
        j->fleet_copy = true;
        finished_set_locked(t, j);
        log_job(LOG_DEBUG, j->id, j->plugin_name,
                "attempt %u is due at %llu ms: handed back to the fleet", j->attempt + 1,
                (unsigned long long)j->live->due_ms);
        job_unref(j); /* the table's: its queued write holds one */
}

/* dispatch: a job that enters the queue is started by the dispatcher's fiber
 * (dispatch_kick()), whichever way it came: submitted, due, released by its
 * dependencies, revived by job.retry. Not a submission that waits for the disk first
 * (jobtable_submitted() kicks once the store has it), a job put back because no fiber
 * could be made (the ticker retries), a restored one (jobtable_restore_done() starts
 * the restored queue), nor a fleet copy (the shared queue's). */
static void listen_dispatch(void *ctx, Job *j, JobState from, JobEvent ev)
{
        if (j->state != JOB_QUEUED || j->fleet_copy || ev == JOB_EV_REQUEUE ||
            ev == JOB_EV_RESTORE || (from == JOB_NEW && j->durability == DUR_PENDING))
                return;
        dispatch_kick(&((JobTable *)ctx)->dispatch);
}

/* live: a job that is final and that nothing runs (Job.supervisors) gives back its
 * JobLive (job.h): what a finished record is kept with is the Job alone. Last: every
 * listener before it may still use the JobLive (the due set, the dependents, the latency
 * clock). A run or a supervisor that still runs it drops it as it ends (dispatch.c). */
static void listen_live(void *ctx, Job *j, JobState from, JobEvent ev)
{
        (void)ctx;
        if (job_state_final(j->state) && !j->supervisors)
                job_live_drop(j);
}

/* held: the held states' part (jobhold.h): the due set, dependencies, keys. */
static void listen_held(void *ctx, Job *j, JobState from, JobEvent ev)
{
        jobhold_listen(&((JobTable *)ctx)->hold, j, from, ev);
}

static const JobStateListener jobtable_listeners[] = {
        {"table", listen_table},       {"quota", listen_quota},
        {"counts", listen_counts},     {"latency", listen_latency},
        {"log", listen_log},           {"store", listen_store},
        {"waiters", listen_waiters},   {"retention", listen_retention},
        {"held", listen_held},         {"fleet", listen_fleet},
        {"dispatch", listen_dispatch}, {"live", listen_live},
};

/* The table's machine: its listeners above, in that order, told about @t's jobs. */
static void machine_init(JobTable *t)
{
        t->machine = (JobMachine){.listeners = jobtable_listeners,
                                  .n_listeners = ELEMENTSOF(jobtable_listeners),
                                  .ctx = t};
}

void jobtable_check_idle_locked(JobTable *t)
{
        if (t->stopping && dispatch_idle_locked(&t->dispatch))
                fiber_event_set(&t->idle);
}

/* ---- the dispatcher's view of its owner (DispatchOps, dispatch.h) ---- */

static void dispatch_op_lock(void *owner)
{
        jobtable_lock(owner);
}

static void dispatch_op_unlock(void *owner)
{
        jobtable_unlock(owner);
}

static int dispatch_op_run(void *owner, Job *j)
{
        JobTable *t = owner;

        return t->hooks.run ? t->hooks.run(j) : -ENOSYS;
}

static bool dispatch_op_run_inline(void *owner, const Job *j)
{
        JobTable *t = owner;

        return t->hooks.run_inline && t->hooks.run_inline(j);
}

static int dispatch_op_cancel(void *owner, Job *j, bool timed_out)
{
        return jobtable_cancel(owner, j, timed_out);
}

static bool dispatch_op_stopping_locked(void *owner)
{
        return ((JobTable *)owner)->stopping;
}

static void dispatch_op_idle_locked(void *owner)
{
        jobtable_check_idle_locked(owner);
}

static void dispatch_op_set_detached_locked(void *owner, Job *j, bool detached)
{
        jobtable_set_detached_locked(owner, j, detached);
}

static const DispatchOps jobtable_dispatch_ops = {
        .lock = dispatch_op_lock,
        .unlock = dispatch_op_unlock,
        .run = dispatch_op_run,
        .run_inline = dispatch_op_run_inline,
        .cancel = dispatch_op_cancel,
        .stopping_locked = dispatch_op_stopping_locked,
        .idle_locked = dispatch_op_idle_locked,
        .set_detached_locked = dispatch_op_set_detached_locked,
        .after_round = dispatch_op_after_round,
};

/*
 * A submission's plan, made before the table lock is taken: a fleet's id is a round
 * trip to the shared store, and where the job's first write stands against its run
 * (Job.durability, job.h) is the store's to say.
 */
typedef struct SubmitPlan {
        uint64_t id;     /* the fleet's shared counter; 0: the table's next_id, under the lock */
        bool fleet;      /* a fleet store: ids and idempotency keys are the fleet's */
        bool fleet_copy; /* the shared queue runs it, on whichever host reads it first */
        bool run_here;   /* a fleet's job.run this host runs itself if it has room */
        JobDurability durability;
} SubmitPlan;

/* Where @p's first write stands against its run (Job.durability), once @p says whether
 * the job is a fleet copy. */
static void plan_durability(JobTable *t, const JobOrigin *origin, const JobPlan *jp, SubmitPlan *p)
{
        if (p->fleet_copy)
                p->durability = DUR_PENDING; /* job.submit answers once it is shared */
        else if (!t->store || !store_durable(t->store))
                p->durability = DUR_NONE; /* nothing kept: nothing to wait for */
        else if (origin->answer_at_end && !(p->fleet && jp->key))
                /* job.run: nothing is answered before the job ends, so its first write
                 * waits for that (jobtable_store_locked()): one row write and one fsync,
                 * and a crash before it loses only a submission never answered (in a
                 * fleet a key's claim lasts only once that write is made: not deferred) */
                p->durability = DUR_DEFERRED;
        else
                /*
                 * job.submit answers once the submission is on disk
                 * (jobtable_wait_durable()). With a busy commit in progress this record
                 * waits for the next one, so under load the job is dispatched now and its
                 * record written with the state it reached by then (one row write for a
                 * trivial job, not three; a crash before the commit loses only a
                 * submission not answered yet). With the store idle,
                 * the table dispatches it once it is on disk (jobtable_submitted()): one
                 * fsync of latency either way, and a plugin that crashes fiberd at once
                 * then leaves an answered job with an INTERRUPTED record.
                 */
                p->durability = store_busy(t->store) ? DUR_EARLY : DUR_PENDING;
}

static int plan_submission(JobTable *t, const JobOrigin *origin, const JobPlan *jp, SubmitPlan *p)
{
        bool fleet = t->store && store_fleet(t->store);
        int r;

        /*
         * A fleet's job.run without a wait limit: its caller waits on this host for the
         * end, and nobody learns its id before, so this host runs it itself while it has
         * room (jobtable_submit() looks, under the lock), with one write at the end as
         * outside a fleet, instead of a submission, a read off the stream and three
         * writes through Redis; should this host stop first, that write puts it on the
         * stream (Job.run_here). What needs the fleet's own sets goes through the shared
         * queue: an idempotency key, jobs to run after, a start time ahead, retries (its
         * own max_attempts or its plugin's default; each attempt is any host's to run).
         */
        *p = (SubmitPlan){.fleet = fleet,
                          .run_here = fleet && !origin->n_fds && origin->id_at_end && !jp->key &&
                                      !jp->n_after && jp->max_attempts <= 1 &&
                                      jp->run_at_ms <= job_now_ms()};
        p->fleet_copy = fleet && !origin->n_fds && !p->run_here;
        if (fleet && (r = store_new_id(t->store, &p->id)) < 0)
                return r;
        plan_durability(t, origin, jp, p);
        return 0;
}

/*
 * Admission: may @uid queue one more job, of @need bytes of args, now? The errnos of
 * jobtable_submit(). Held jobs (scheduled, waiting, retrying) count as queued for the
 * global bound. The byte budgets (jobquota.h) are checked before the dispatcher takes a
 * token. Nothing is dropped here, so a refusal drops nothing: the room admission found
 * in the sender's own oldest finished jobs is made once the new job is charged, by the
 * retention listener (listen_retention(), jobquota_room()), the one place that drops
 * records to hold the bounds. A fleet copy is not held here (the shared store holds
 * it): no byte budget. Locked.
 */
static int admit_locked(JobTable *t, uid_t uid, uint64_t need, bool fleet)
{
        int r;

        if (t->stopping)
                return -ESHUTDOWN;
        if (dispatch_queued_locked(&t->dispatch) + t->counts.scheduled + t->counts.waiting +
                    t->counts.retrying >=
            t->max_queued)
                return -EAGAIN;
        if (!fleet) {
                JobQuotaUser *u = jobquota_user(&t->quota, uid);
                if (!u)
                        return -ENOMEM;
                r = jobquota_admit(&t->quota, u, need);
                if (r < 0)
                        return r;
        }
        return dispatch_admit_locked(&t->dispatch, uid);
}

/* Whether an earlier job of @uid with @key still answers for it (jobkeys.h): its id in
 * *@ret_id. Locked. */
static bool key_find_locked(JobTable *t, uid_t uid, const char *key, uint64_t *ret_id)
{
        return key &&
               jobkeys_find_locked(&t->hold.keys, uid, key, job_now_ms(), t->key_window_ms, ret_id);
}

/*
 * The steps: the plan (id, first write), an idempotency key's earlier job (in a fleet,
 * the fleet's: store_key_claim(), released again if the submission is refused later),
 * admission, the job, then its first transition (jobhold_accept_locked(): queued,
 * scheduled or waiting; a fleet copy is queued by the store instead: the shared queue,
 * the fleet's schedule set when its due time is ahead, or the sets of the jobs it runs
 * after), whose listeners list the job in the table (listen_table) and queue its first
 * write (listen_store); last, a kick of the dispatcher fiber, which starts it, unless
 * the job waits for the disk first (DUR_PENDING: jobtable_submitted() kicks once it is
 * on disk).
 */
int jobtable_submit(JobTable *t, JobOrigin *origin, const Plugin *plugin, const char *plugin_name,
                    const msgpack_object *args, int priority, uint64_t timeout_ns, unsigned cls,
                    const char *class_name, const JobPlan *jp, Job **ret, uint64_t *ret_existing)
{
        static const JobPlan no_plan;
        Job *deps[IPC_AFTER_MAX];
        SubmitPlan plan;
        Job *j = NULL;
        bool claimed = false;
        JobState accepted = JOB_NEW;
        uint64_t existing = 0, need;
        int r;

        if (!jp)
                jp = &no_plan;
        if (jp->n_after > IPC_AFTER_MAX)
                return -E2BIG;
        need = jobquota_packed_size(args); /* counted outside the lock */
        r = plan_submission(t, origin, jp, &plan);
        if (r < 0)
                return r;
        if (plan.fleet && jp->key) {
                r = store_key_claim(t->store, origin->creds->uid, jp->key, plan.id, &existing);
                if (r < 0)
                        return r;
                claimed = !existing;
        }
        jobtable_lock(t);
        if (existing ||
            (!plan.fleet && key_find_locked(t, origin->creds->uid, jp->key, &existing))) {
                /* a repeat: the earlier job, referenced, or NULL when this host does not
                 * hold it (its record is gone; in a fleet, the caller asks the fleet) */
                Job *earlier = jobtable_find_locked(t, existing);
                if (earlier)
                        job_ref(earlier);
                jobtable_unlock(t);
                *ret = earlier;
                *ret_existing = existing;
                return 0;
        }
        if (plan.run_here && jobtable_fleet_room_locked(t) == 0) {
                /* full here (or the store cannot write): the shared queue, where a host
                 * with room takes it, as the reader takes entries (fleet_room()) */
                plan.run_here = false;
                plan.fleet_copy = true;
                plan_durability(t, origin, jp, &plan);
        }
        r = admit_locked(t, origin->creds->uid, need, plan.fleet_copy);
        if (r == 0)
                r = job_new(&j, t, plan.id ? plan.id : t->next_id, origin, plugin, plugin_name,
                            args, priority, timeout_ns, cls, class_name);
        if (r == 0 && (r = job_set_plan(j, jp)) < 0)
                j = job_unref(j);
        if (r == 0) {
                j->fleet_copy = plan.fleet_copy;
                j->run_here = plan.run_here;
                j->durability = plan.durability;
                if (j->durability == DUR_DEFERRED) /* before a transition may record it */
                        t->unwritten++;
                if (plan.fleet_copy && jp->n_after) {
                        /* the sets of the jobs it runs after hold it until they end
                         * (store-redis-sched.c); then it is queued or scheduled */
                        job_transition(&t->machine, j, JOB_EV_WAIT, NULL);
                } else if (plan.fleet_copy && job_run_at_ms(j) > job_now_ms()) {
                        /* the fleet's schedule set holds it until then (store-redis-sched.c) */
                        j->live->due_ms = job_run_at_ms(j);
                        job_transition(&t->machine, j, JOB_EV_SCHEDULE, NULL);
                } else if (plan.fleet_copy) {
                        job_transition(&t->machine, j, JOB_EV_SUBMIT, NULL);
                } else {
                        for (size_t i = 0; i < jp->n_after; i++)
                                deps[i] = jobtable_find_locked(t, jp->after[i]);
                        r = jobhold_accept_locked(&t->hold, j, deps, jp->n_after);
                        if (r < 0 && j->durability == DUR_DEFERRED)
                                t->unwritten--; /* never in the table */
                        if (r < 0)
                                j = job_unref(j);
                }
        }
        if (r == 0 && jp->key && !plan.fleet && !job_state_final(j->state) &&
            jobkeys_put_locked(&t->hold.keys, j->owner, jp->key, j->id, 0) < 0)
                log_job(LOG_WARNING, j->id, plugin_name,
                        "out of memory: its idempotency key does not answer repeats");
        if (r == 0) {
                accepted = j->state;
                /* the caller's reference: a fleet copy's only one, else beside the table's */
                *ret = j->fleet_copy ? j : job_ref(j);
                *ret_existing = 0;
        }
        jobtable_unlock(t);
        if (r < 0 && claimed)
                store_key_release(t->store, origin->creds->uid, jp->key, plan.id);
        if (r < 0)
                return r;
        joblines_queued(j, accepted, plan.fleet_copy);
        return 0;
}

/*
 * Asks a running @j to stop: its flag, its fiber and its children cancelled, the time
 * noted and its run's supervisor woken (started if it had none), which gives its fiber
 * JOB_DETACH_GRACE_NS to return (dispatch.c). The caller sets timed_out / interrupted
 * first. Under the lock.
 */
static void cancel_running_locked(JobTable *t, Job *j)
{
        job_set_cancel_requested(j);
        if (j->live->run)
                j->live->run->cancel_mono_ns = sched_now_ns();
        /* the children first: the job fiber, once cancelled, may return at once on
         * its worker and let go of them before the hook could walk them */
        if (t->hooks.cancel)
                t->hooks.cancel(j);
        if (j->live->fiber) /* else the dispatcher cancels it as it publishes it */
                fiber_cancel(j->live->fiber);
        if (j->live->run) {
                fiber_event_set(&j->live->run->wake);
                dispatch_supervise_locked(&t->dispatch, j); /* the grace, then a detach */
        }
}

int jobtable_cancel(JobTable *t, Job *j, bool timed_out)
{
        int r = 0;

        jobtable_lock(t);
        if (job_state_final(j->state)) {
                r = -EALREADY;
        } else if (job_state_held(j->state)) {
                job_set_cancel_requested(j);
                j->timed_out = timed_out;
                job_transition(
                        &t->machine, j, timed_out ? JOB_EV_TIMEOUT : JOB_EV_CANCEL,
                        &(JobChange){.code = timed_out ? IPC_DEADLINE_EXCEEDED : IPC_CANCELLED,
                                     .message = timed_out ? "the job's timeout passed"
                                                          : "cancelled before it ran"});
        } else if (j->state == JOB_QUEUED) {
                dispatch_remove_locked(&t->dispatch, j);
                job_set_cancel_requested(j);
                j->timed_out = timed_out;
                if (timed_out)
                        job_transition(&t->machine, j, JOB_EV_TIMEOUT,
                                       &(JobChange){.code = IPC_DEADLINE_EXCEEDED,
                                                    .message = "the job's timeout passed while "
                                                               "it was queued"});
                else
                        job_transition(&t->machine, j, JOB_EV_CANCEL,
                                       &(JobChange){.code = IPC_CANCELLED,
                                                    .message = "cancelled while queued"});
        } else if (!j->cancel_requested) {
                j->timed_out = timed_out;
                cancel_running_locked(t, j);
                /* Its fiber waits for a job worker that may be stuck for long:
                 * no plugin code of it ran, so it ends now; the fiber, when it runs,
                 * skips the plugin, and the dispatcher still joins it. */
                if (job_fiber_forestall(j))
                        job_transition(&t->machine, j, timed_out ? JOB_EV_TIMEOUT : JOB_EV_CANCEL,
                                       &(JobChange){.code = timed_out ? IPC_DEADLINE_EXCEEDED
                                                                      : IPC_CANCELLED,
                                                    .message = timed_out
                                                                       ? "the job's timeout passed "
                                                                         "before it started running"
                                                                       : "cancelled before it "
                                                                         "started running"});
        }
        jobtable_unlock(t);
        if (r == 0)
                log_job_owner(LOG_INFO, j->id, j->plugin_name, j->owner, "%s",
                              timed_out ? "timeout passed, cancelling" : "cancel requested");
        return r;
}

/* Unlinks @j from the hash and both lists and drops the table's reference, leaving
 * the store alone (retire_locked() drops its row too). */
static void unlink_locked(JobTable *t, Job *j)
{
        hash_remove_locked(t, j);
        list_del(&j->all_link);
        list_del(&j->fin_link);
        if (j->state == JOB_DEAD)
                t->dead_count--;
        else
                t->fin_count--;
        jobquota_detach(&t->quota, &j->quota);
        job_unref(j);
}

/* Drops @j: its row in the store, then its place in the table (unlink_locked()). */
static void retire_locked(JobTable *t, Job *j)
{
        if (t->store && store_delete(t->store, j->id) < 0)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "out of memory: the store keeps its record until the next start");
        unlink_locked(t, j);
}

int jobtable_retry(JobTable *t, Job *j)
{
        int r;

        jobtable_lock(t);
        r = jobhold_revive_locked(&t->hold, j); /* queued: the dispatch listener kicks */
        jobtable_unlock(t);
        if (r == 0)
                log_job_owner(LOG_INFO, j->id, j->plugin_name, j->owner,
                              "queued again (job.retry)");
        return r;
}

int jobtable_discard(JobTable *t, Job *j)
{
        int r = 0;

        jobtable_lock(t);
        if (!job_state_final(j->state) || j->fleet_copy)
                r = -EALREADY;
        else if (j->detached || job_fiber(j))
                r = -EBUSY;
        else if (jobtable_find_locked(t, j->id) == j)
                retire_locked(t, j);
        else
                r = -ENOENT; /* retired already */
        jobtable_unlock(t);
        return r;
}

void jobtable_run_timer(JobTable *t)
{
        jobhold_timer(&t->hold);
}

void jobtable_set_scheduling(JobTable *t, uint64_t dead_retention_ns, size_t dead_retention_max,
                             uint64_t key_window_ms)
{
        jobtable_lock(t);
        t->dead_retention_ns = dead_retention_ns;
        t->dead_retention_max = dead_retention_max;
        t->key_window_ms = key_window_ms;
        jobtable_unlock(t);
}

void jobtable_set_quotas(JobTable *t, const JobQuotas *q)
{
        jobtable_lock(t);
        dispatch_set_quotas_locked(&t->dispatch, q);
        jobquota_set_limits(&t->quota,
                            &(JobQuotaLimits){.max_bytes_per_user = q->max_bytes_per_user,
                                              .max_bytes = q->max_bytes,
                                              .retention_max_per_user = q->retention_max_per_user,
                                              .retention_max = t->quota.limits.retention_max,
                                              .exempt_uid = q->exempt_uid});
        trim_all_locked(t);
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
}

void jobtable_bytes_held(JobTable *t, uid_t uid, uint64_t *ret_user, uint64_t *ret_all)
{
        JobQuotaUser *u;

        jobtable_lock(t);
        u = jobquota_user(&t->quota, uid);
        *ret_user = u ? u->bytes : 0;
        *ret_all = t->quota.bytes;
        jobtable_unlock(t);
}

/* Every user's bounds, then the global ones (after new limits, and at each sweep). */
static void trim_all_locked(JobTable *t)
{
        /* dropping jobs makes no user: the array stays as it is */
        for (size_t i = 0; i < t->quota.n_users; i++)
                trim_locked(t, t->quota.users[i], NULL);
        trim_locked(t, NULL, NULL);
}

void jobtable_sweep(JobTable *t)
{
        uint64_t now = sched_now_ns();
        Job *expired[64];
        size_t nexpired = 0;

        jobtable_lock(t);
        for (ListHead *e; (e = list_first(&t->finished));) {
                Job *oldest = list_entry(e, Job, fin_link);
                if (oldest->finished_mono_ns + t->retention_ns > now)
                        break;
                retire_locked(t, oldest);
        }
        trim_all_locked(t); /* what a restore brought back, bounds lowered meanwhile */
        for (ListHead *e; (e = list_first(&t->dead));) {
                Job *oldest = list_entry(e, Job, fin_link);
                if (t->dead_count <= t->dead_retention_max &&
                    oldest->finished_mono_ns + t->dead_retention_ns > now)
                        break;
                retire_locked(t, oldest);
        }
        jobkeys_sweep_locked(&t->hold.keys, job_now_ms(), t->key_window_ms);
        nexpired = dispatch_expired_locked(&t->dispatch, now, expired, ELEMENTSOF(expired));
        for (size_t i = 0; i < nexpired; i++)
                job_ref(expired[i]);
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
                if (t->store && store_durable(t->store)) {
                        /* kept queued in the store for the next start; its waiters
                         * answer UNAVAILABLE (they see a job that is not final) */
                        j->requeued = true;
                        jobtable_record_locked(t, j); /* a job.run's first write */
                        finished_set_locked(t, j);
                        continue;
                }
                job_set_cancel_requested(j);
                job_transition(&t->machine, j, JOB_EV_CANCEL,
                               &(JobChange){.code = IPC_CANCELLED,
                                            .message = "cancelled while queued: fiberd is "
                                                       "shutting down"});
        }
        fiber_event_set(&t->hold.due.wake); /* the due set's timer returns */
        dispatch_kick(&t->dispatch);        /* and the dispatcher fiber */
        for (j = jobtable_next_locked(t, NULL); j; j = jobtable_next_locked(t, j)) {
                if (job_state_held(j->state)) {
                        if (t->store && store_durable(t->store)) {
                                /* kept held in the store for the next start; its waiters
                                 * answer UNAVAILABLE, as for a queued one */
                                jobtable_record_locked(t, j);
                                finished_set_locked(t, j);
                        } else {
                                job_set_cancel_requested(j);
                                job_transition(&t->machine, j, JOB_EV_CANCEL,
                                               &(JobChange){.code = IPC_CANCELLED,
                                                            .message = "cancelled before it ran: "
                                                                       "fiberd is shutting down"});
                        }
                        continue;
                }
                if (j->state != JOB_RUNNING || j->cancel_requested)
                        continue;
                j->interrupted = true;
                cancel_running_locked(t, j);
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

/* ------------------------------------------------------------------ store ------- */

/* StoreSnapshotFn of the table's store: the store thread reads @j under the lock of
 * its table, the one every change of @j is made under (@arg, the table, is unused:
 * a job knows its table). */
static void jobtable_snapshot(Job *j, StoreReadFn read, void *ctx, void *arg)
{
        (void)arg;
        jobtable_lock(j->table);
        read(j, ctx);
        jobtable_unlock(j->table);
}

/*
 * StoreSubmittedFn of the table's store: what @j's first write came to (@error, 0 when
 * committed). A job that waited for the disk (DUR_PENDING) is dispatched now, its
 * submitter already woken, so it is answered first. A refused one, told before its
 * submitter hears (jobtable_wait_durable()), nothing of it ever written and its id told
 * to nobody, is cancelled and leaves the table, no row to drop, unless a run begun under
 * load is still ending: then it stays until its retention. A fleet copy was never in the
 * table: its idempotency key is released, so that a repeat may try again.
 * Context: the store thread; does not yield.
 */
static void jobtable_submitted(Job *j, int error, void *arg)
{
        JobTable *t = arg;

        if (j->fleet_copy) {
                if (error && job_plan_key(j))
                        store_key_release(t->store, j->owner, job_plan_key(j), j->id);
                return;
        }
        if (error)
                jobtable_cancel(t, j, false);
        jobtable_lock(t);
        if (!error && j->durability == DUR_PENDING)
                dispatch_kick(&t->dispatch);
        else if (error && job_state_final(j->state) && !job_fiber(j) && !j->detached &&
                 jobtable_find_locked(t, j->id) == j)
                unlink_locked(t, j);
        jobtable_unlock(t);
}

/* StoreRecordedFn of the table's store: a deferred answer's final write is on disk, so
 * its watch is the dispatcher fiber's again (jobwait.c). */
static void jobtable_recorded(Job *j, JobWatch *w, void *arg)
{
        JobTable *t = arg;

        (void)j;
        jobtable_lock(t);
        watch_due_locked(t, w);
        jobtable_unlock(t);
}

void jobtable_set_store(JobTable *t, Store *s)
{
        if (s) {
                store_set_source(s, jobtable_snapshot, jobtable_submitted, t);
                store_set_recorded(s, jobtable_recorded);
        }
        jobtable_lock(t);
        t->store = s;
        jobtable_unlock(t);
}

void jobtable_store_locked(JobTable *t, Job *j)
{
        if (!t->store)
                return;
        if (j->durability == DUR_DEFERRED) {
                /* its first write (jobtable_submit()) waits for its end, or for a
                 * shutdown that leaves it queued */
                if (job_state_final(j->state) || j->requeued)
                        jobtable_record_locked(t, j);
                return;
        }
        store_put(t->store, j, false, false);
}

void jobtable_record_locked(JobTable *t, Job *j)
{
        if (j->durability != DUR_DEFERRED)
                return;
        t->unwritten--;
        j->durability = DUR_EARLY;          /* it was dispatched at once */
        store_put(t->store, j, true, true); /* store_wait() answers once committed */
}

int jobtable_wait_recorded(JobTable *t, Job *j, uint64_t deadline_ns)
{
        uint16_t life;
        bool final;

        if (!t->store || !store_durable(t->store))
                return 0;
        jobtable_lock(t);
        if (j->run_here && j->durability == DUR_DEFERRED && !job_state_final(j->state) &&
            !j->requeued) {
                /* a fleet's job.run its host runs: nothing of it is kept before its end
                 * (jobtable_submit()), and a record written now would be a second
                 * one, off the stream; the answer shows its state here */
                jobtable_unlock(t);
                return 0;
        }
        jobtable_record_locked(t, j);
        final = job_state_final(j->state) && !j->requeued; /* the write that carries it */
        life = j->store.life; /* a job.retry meanwhile: this end is on disk (store_revive()) */
        jobtable_unlock(t);
        return store_wait_until(t->store, j, final, life, deadline_ns);
}

int jobtable_wait_durable(JobTable *t, Job *j)
{
        JobDurability durability;

        jobtable_lock(t);
        durability = j->durability;
        jobtable_unlock(t);
        /* job.run: the answer waits for jobtable_wait_recorded(); else the store told the
         * table first (jobtable_submitted()): dispatched, or cancelled if refused */
        return durability == DUR_DEFERRED ? 0 : store_wait(j, false, false);
}

/* Where a restored final job goes in the finished list, or a dead one in the dead list
 * (their own retention, as at a death: listen_retention()): by finish time (its
 * finished_mono_ns, which job_transition() derived from the record). */
static void restore_finished_locked(JobTable *t, Job *j)
{
        bool dead = j->state == JOB_DEAD;
        ListHead *list = dead ? &t->dead : &t->finished;
        ListHead *pos = list->prev;

        while (pos != list &&
               list_entry(pos, Job, fin_link)->finished_mono_ns > j->finished_mono_ns)
                pos = pos->prev;
        list_add_head(pos, &j->fin_link); /* after pos: pos taken as a head */
        if (dead) {
                t->dead_count++;
                return;
        }
        t->fin_count++;
        if (j->quota.user) { /* its owner's list, by finish time too */
                ListHead *ul = &j->quota.user->finished;
                for (pos = ul->prev;
                     pos != ul &&
                     list_entry(pos, Job, quota.link)->finished_mono_ns > j->finished_mono_ns;
                     pos = pos->prev)
                        ;
                jobquota_finish(&t->quota, &j->quota, pos);
        }
}

/* @rec's job as a Job (not listed). */
static int restore_job(JobTable *t, const StoreRecord *rec, const Plugin *plugin, Job **ret)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};
        msgpack_zone zone;
        Creds *creds;
        JobOrigin origin;
        Job *j;
        int r;

        if (!msgpack_zone_init(&zone, 1024))
                return -ENOMEM;
        if (rec->args && rec->args_len) {
                size_t off = 0;
                if (msgpack_unpack(rec->args, rec->args_len, &off, &zone, &args) !=
                            MSGPACK_UNPACK_SUCCESS ||
                    args.type != MSGPACK_OBJECT_MAP) {
                        r = -EIO;
                        goto out_zone;
                }
        }
        r = creds_new(rec->owner, rec->gid, NULL, 0, &creds);
        if (r < 0)
                goto out_zone;
        origin = (JobOrigin){.creds = creds};
        /* its class, if the configuration still has it; else the default class */
        const char *class_name = rec->class_name ? rec->class_name : "default";
        int cls = t->dispatch.sched ? sched_class_find(t->dispatch.sched, class_name) : 0;
        if (cls < 0) {
                log_job(LOG_WARNING, rec->id, rec->plugin,
                        "its class '%s' is no longer configured: it runs in 'default'", class_name);
                cls = 0;
                class_name = "default";
        }
        r = job_new(&j, t, rec->id, &origin, plugin, rec->plugin, &args, rec->priority,
                    rec->timeout_ms * NSEC_PER_MSEC, (unsigned)cls, class_name);
        creds_unref(creds);
        if (r < 0)
                goto out_zone;
        j->submitted_ms = rec->created_ms;
        j->started_ms = rec->started_ms;
        j->finished_ms = rec->finished_ms;
        j->from_fleet = rec->shared;
        if (rec->sched && (r = job_unpack_schedule(j, rec->sched, rec->sched_len)) < 0) {
                job_unref(j);
                goto out_zone;
        }
        j->attempt = rec->attempt;
        j->progress_done = rec->progress_done;
        j->progress_total = rec->progress_total;
        if (rec->result && rec->result_len) {
                j->result = malloc(rec->result_len);
                if (!j->result) {
                        r = -ENOMEM;
                        goto out_job;
                }
                memcpy(j->result, rec->result, rec->result_len);
                j->result_len = rec->result_len;
        }
        if (rec->error_code) {
                j->error_code = ipc_status_canonical_code(rec->error_code, strlen(rec->error_code));
                j->error_message = strdup(rec->error_message ? rec->error_message : "");
                if (!j->error_message) {
                        r = -ENOMEM;
                        goto out_job;
                }
        }
        store_settle(j, job_state_final(rec->state)); /* read back from the store */
        msgpack_zone_destroy(&zone);
        *ret = j;
        return 0;

out_job:
        job_unref(j);
out_zone:
        msgpack_zone_destroy(&zone);
        return r;
}

int jobtable_fleet_copy(JobTable *t, const StoreRecord *rec, Job **ret)
{
        Job *j;
        int r = restore_job(t, rec, NULL, &j);

        if (r < 0)
                return r;
        j->fleet_copy = true;
        job_transition(&t->machine, j, JOB_EV_RESTORE, &(JobChange){.restored = rec->state});
        *ret = j;
        return 0;
}

bool jobtable_stopping(JobTable *t)
{
        bool stopping;

        jobtable_lock(t);
        stopping = t->stopping;
        jobtable_unlock(t);
        return stopping;
}

int jobtable_restore(JobTable *t, const StoreRecord *rec, const Plugin *plugin, const char *crashed)
{
        char msg[256];
        Job *j;
        int r;

        r = restore_job(t, rec, plugin, &j);
        if (r < 0) {
                log_job(LOG_ERR, rec->id, rec->plugin, "cannot be restored from the store: %s",
                        strerror(-r));
                return r;
        }
        jobtable_lock(t);
        job_transition(&t->machine, j, JOB_EV_RESTORE, &(JobChange){.restored = rec->state});
        if (job_plan_key(j) &&
            jobkeys_put_locked(&t->hold.keys, j->owner, job_plan_key(j), j->id,
                               job_state_final(j->state) ? j->finished_ms : 0) < 0)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "out of memory: its idempotency key does not answer repeats");

        if (job_state_final(j->state)) {
                jobtable_unlock(t);
                return 0;
        }
        if (crashed) {
                job_transition(&t->machine, j, JOB_EV_INTERRUPT,
                               &(JobChange){.code = IPC_INTERRUPTED, .message = crashed});
                jobtable_unlock(t);
                log_job(LOG_WARNING, j->id, j->plugin_name, "failed: %s", crashed);
                return 0;
        }
        if (j->state == JOB_RUNNING && plugin && !rec->n_fds && j->max_attempts > 1 &&
            !(t->hooks.retry_safe && t->hooks.retry_safe(j))) {
                /* it asked for retries: the run fiberd stopped in is a failed attempt (a
                 * fleet job's retry leaves the table, listen_fleet(): held till logged) */
                JobEvent ev = job_retry_event(j, IPC_INTERRUPTED);
                job_ref(j);
                job_transition(&t->machine, j, ev,
                               &(JobChange){.code = IPC_INTERRUPTED,
                                            .message = "fiberd stopped while this run was "
                                                       "going on"});
                jobtable_unlock(t);
                log_job(LOG_NOTICE, j->id, j->plugin_name, "was running when fiberd stopped: %s",
                        job_state_name(j->state));
                job_unref(j);
                return 0;
        }
        if (j->state == JOB_RUNNING) {
                if (!plugin || !t->hooks.retry_safe || !t->hooks.retry_safe(j) || rec->n_fds) {
                        job_transition(&t->machine, j, JOB_EV_INTERRUPT,
                                       &(JobChange){.code = IPC_INTERRUPTED,
                                                    .message = "fiberd stopped while this job "
                                                               "ran; it was not retried"});
                        jobtable_unlock(t);
                        log_job(LOG_WARNING, j->id, j->plugin_name,
                                "was running when fiberd stopped: failed (INTERRUPTED)");
                        return 0;
                }
                /* retry-safe: queued again (the requeue writes it back) */
                j->attempt++;
                job_transition(&t->machine, j, JOB_EV_REQUEUE, NULL);
                log_job(LOG_NOTICE, j->id, j->plugin_name,
                        "was running when fiberd stopped: attempt %u was cut short; queued "
                        "again",
                        j->attempt); /* the record's attempt, as "attempt N of M failed" */
        }
        if (!plugin || rec->n_fds) {
                if (!plugin)
                        snprintf(msg, sizeof(msg),
                                 "no plugin named \"%s\" is loaded after fiberd restarted",
                                 j->plugin_name);
                else
                        snprintf(msg, sizeof(msg),
                                 "fiberd stopped before this job ran, and the %u file "
                                 "descriptor(s) passed with it did not survive",
                                 rec->n_fds);
                job_transition(&t->machine, j, JOB_EV_INTERRUPT,
                               &(JobChange){.code = plugin ? IPC_INTERRUPTED : IPC_NOT_FOUND,
                                            .message = msg});
                jobtable_unlock(t);
                log_job(LOG_WARNING, j->id, j->plugin_name, "not restored: %s", msg);
                return 0;
        }
        if (j->state == JOB_WAITING) /* its dependencies, restored before it */
                jobhold_restore_waiting_locked(&t->hold, j);
        if (j->state != JOB_QUEUED || j->live->heap_index != SIZE_MAX) {
                /* held (the due set or its dependencies have it), or released into the
                 * queue just now */
                jobtable_unlock(t);
                return 0;
        }
        r = dispatch_push_locked(&t->dispatch, j);
        if (r < 0)
                job_transition(&t->machine, j, JOB_EV_INTERRUPT,
                               &(JobChange){.code = IPC_OUT_OF_MEMORY,
                                            .message = "out of memory while fiberd restarted"});
        jobtable_unlock(t);
        return 0;
}

void jobtable_restore_done(JobTable *t, uint64_t next_id)
{
        jobtable_lock(t);
        if (next_id > t->next_id)
                t->next_id = next_id;
        dispatch_pump_locked(&t->dispatch);
        jobtable_unlock(t);
}
