/* SPDX-License-Identifier: MIT */
/*
 * store.c — the backend-neutral half of the job store (see store.h): the write queue,
 * the store thread and its group commit, the default path.
 *
 * The group commit is the one of PostgreSQL's and InnoDB's logs, reduced to a queue: a
 * writer appends a StoreWrite under Store.lock and signals; the store thread swaps the
 * whole queue out, commits it as one transaction (one fsync), then, without the lock,
 * sets the `durable` event of every submission in it and frees the batch. Whatever
 * arrives while a commit runs waits for the next one, so the batch grows with the load
 * and the fsyncs per second stay bounded by the disk, not by the submissions.
 *
 * A failed commit refuses the submissions in it: they get the error in the job's store
 * part (JobStorePart), the owner hears it first (StoreSubmittedFn: the job table cancels
 * the job), then job.submit answers it, so a client never holds an id the store does
 * not have. A committed submission is told to the owner after its submitter is woken.
 * When the error is transient (the disk full, store.h's essay), every other job of the
 * batch is queued again, and the store thread waits out a backoff (retry_wait_locked())
 * before it takes the queue again, snapshots included, so what is written then is each
 * job's latest record. The writes that are not a job's, and every write after an error
 * that is not transient (a bad record), are reported to their callers and dropped, as
 * one batch's worth.
 */
#include "daemon/store/store.h"
#include "daemon/obs/log.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <msgpack.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const StoreBackend *const store_backends[STORE_KIND_COUNT] = {
        [STORE_SQLITE] = &store_sqlite_backend,
        [STORE_MEMORY] = &store_memory_backend,
        [STORE_REDIS] = &store_redis_backend,
};

const char *store_kind_name(StoreKind k)
{
        return k < STORE_KIND_COUNT ? store_backends[k]->name : "unknown";
}

/* ------------------------------------------------------------------ path -------- */

int store_default_path(char **ret)
{
        const char *env = getenv("STATE_DIRECTORY");
        char *p = NULL;
        int n;

        if (env && *env) {
                /* StateDirectory=a b gives "a:b": ours is the first */
                size_t len = strcspn(env, ":");
                n = asprintf(&p, "%.*s/jobs.db", (int)len, env);
        } else if (geteuid() == 0) {
                n = asprintf(&p, "/var/lib/fiberd/jobs.db");
        } else if ((env = getenv("XDG_STATE_HOME")) && *env == '/') {
                n = asprintf(&p, "%s/fiberd/jobs.db", env);
        } else {
                const char *home = getenv("HOME");
                struct passwd *pw;
                if (!home || *home != '/') {
                        pw = getpwuid(geteuid());
                        home = pw ? pw->pw_dir : NULL;
                }
                if (!home || *home != '/')
                        return -ENOENT;
                n = asprintf(&p, "%s/.local/state/fiberd/jobs.db", home);
        }
        if (n < 0)
                return -ENOMEM;
        *ret = p;
        return 0;
}

/* mkdir -p of @path's parent directory, 0700 for the parts created. */
static int store_make_parent(const char *path)
{
        char *dir = strdup(path), *slash;
        int r = 0;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                /* each prefix ending before a '/', then the whole directory */
                for (char *p = strchr(dir + 1, '/');; p = strchr(p + 1, '/')) {
                        if (p)
                                *p = '\0';
                        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                                r = -errno;
                        if (!p || r < 0)
                                break;
                        *p = '/';
                }
        }
        free(dir);
        return r;
}

/* ------------------------------------------------------------------ writes ------ */

/*
 * The store thread's memory for the writes of one batch: chunks kept from batch to
 * batch (at most STORE_CHUNKS_KEPT of them), so a busy store does not call malloc()
 * and free() for every job it writes. A write too large for a chunk is malloc'ed.
 */
#define STORE_CHUNK_SIZE (256 * 1024)
#define STORE_CHUNKS_KEPT 8

typedef struct StoreChunk {
        struct StoreChunk *next;
        char data[];
} StoreChunk;

/* @size bytes (16-aligned) from the batch's chunks; NULL: too large, or no memory. */
static void *arena_alloc(Store *s, size_t size)
{
        StoreChunk *c;
        void *p;

        size = (size + 15) & ~(size_t)15;
        if (size > STORE_CHUNK_SIZE / 4)
                return NULL;
        if (!s->chunk || s->chunk_used + size > STORE_CHUNK_SIZE) {
                c = s->chunk ? s->chunk->next : s->chunks;
                if (!c) {
                        c = malloc(sizeof(*c) + STORE_CHUNK_SIZE);
                        if (!c)
                                return NULL;
                        c->next = NULL;
                        if (s->chunk)
                                s->chunk->next = c;
                        else
                                s->chunks = c;
                }
                s->chunk = c;
                s->chunk_used = 0;
        }
        p = s->chunk->data + s->chunk_used;
        s->chunk_used += size;
        return p;
}

/* After a batch is released: its chunks are free again; a burst's extra ones go. */
static void arena_reset(Store *s)
{
        StoreChunk *c = s->chunks, *next;
        size_t n = 0;

        for (; c && ++n < STORE_CHUNKS_KEPT; c = c->next)
                ;
        if (c) {
                for (next = c->next, c->next = NULL; next; next = c) {
                        c = next->next;
                        free(next);
                }
        }
        s->chunk = NULL;
        s->chunk_used = 0;
}

static void arena_free(Store *s)
{
        for (StoreChunk *c = s->chunks, *next; c; c = next) {
                next = c->next;
                free(c);
        }
        s->chunks = s->chunk = NULL;
}

/* A StoreWrite with @j's record, its strings and blobs copied inline, from the batch's
 * chunks (or malloc'ed); the caller is the store thread, inside the owner's snapshot
 * (store_set_source()), so @j's mutable fields hold still. */
static StoreWrite *write_from_job(Store *s, const Job *j, bool with_args)
{
        msgpack_sbuffer *sb = &s->pack;
        msgpack_packer pk;
        size_t name_len = strlen(j->plugin_name) + 1;
        size_t code_len = j->error_code ? strlen(j->error_code) + 1 : 0;
        size_t msg_len = j->error_message ? strlen(j->error_message) + 1 : 0;
        size_t class_len = strlen(j->class_name) + 1;
        size_t key_len = job_plan_key(j) ? strlen(job_plan_key(j)) + 1 : 0;
        bool requeued = j->requeued && job_state_final(j->state);
        bool held = j->state == JOB_SCHEDULED || j->state == JOB_RETRYING;
        /* a fleet submission that waits: its dependencies go with its first write */
        size_t after_len = with_args && j->fleet_copy && j->state == JOB_WAITING
                                   ? j->n_after * sizeof(uint64_t)
                                   : 0;
        size_t size;
        StoreWrite *w;
        char *p;

        msgpack_sbuffer *ss = &s->pack_sched;

        msgpack_sbuffer_clear(sb); /* its memory stays, for the next job */
        msgpack_sbuffer_clear(ss);
        if (with_args) {
                msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
                if (msgpack_pack_object(&pk, j->args) != 0)
                        return NULL;
        }
        if (job_has_schedule(j)) {
                msgpack_packer_init(&pk, ss, msgpack_sbuffer_write);
                if (job_pack_schedule(&pk, j) != 0)
                        return NULL;
        }
        if (requeued) {
                /* a retry-safe job that shutdown cancelled while it ran: this process's
                 * copy ended, the store's is queued again for the next start */
                code_len = msg_len = 0;
        }
        size = sizeof(*w) + after_len + name_len + class_len + key_len + code_len + msg_len +
               sb->size + ss->size + j->result_len;
        w = arena_alloc(s, size);
        if (w) {
                *w = (StoreWrite){.op = STORE_OP_PUT, .borrowed = true};
        } else {
                w = malloc(size);
                if (!w)
                        return NULL;
                *w = (StoreWrite){.op = STORE_OP_PUT};
        }
        w->life = j->store.life;
        p = (char *)(w + 1);
        w->rec = (StoreRecord){
                .id = j->id,
                .state = requeued ? JOB_QUEUED : j->state,
                .owner = j->owner,
                .gid = j->creds ? j->creds->gid : (gid_t)-1,
                .priority = j->priority,
                .timeout_ms = j->timeout_ns / NSEC_PER_MSEC,
                .created_ms = j->submitted_ms,
                .started_ms = requeued ? 0 : j->started_ms,
                .finished_ms = requeued ? 0 : j->finished_ms,
                .attempt = j->attempt + requeued,
                .n_fds = (uint32_t)j->n_fds,
                .progress_done = __atomic_load_n(&j->progress_done, __ATOMIC_RELAXED),
                .progress_total = __atomic_load_n(&j->progress_total, __ATOMIC_RELAXED),
                /* a fleet submission; or a job.run this host ran itself that shutdown
                 * leaves queued (its one write, jobtable.c): any host runs it now */
                .enqueue = with_args && (j->fleet_copy || (j->run_here && j->requeued)),
                .handover = with_args && j->run_here && j->requeued,
                /* a fleet submission held until its due time, or a retry a host handed
                 * back (jobtable.c): the fleet's schedule set holds it from now on */
                .fleet_held = held && j->fleet_copy,
                .due_ms = held                      ? job_due_ms(j)
                          : j->state == JOB_WAITING ? job_run_at_ms(j)
                                                    : 0,
        };
        if (after_len) { /* first: uint64_t-aligned right after the write */
                memcpy(p, job_after(j), after_len);
                w->rec.after = (const uint64_t *)(void *)p;
                w->rec.n_after = j->n_after;
                p += after_len;
        }
        memcpy(p, j->plugin_name, name_len);
        w->rec.plugin = p;
        p += name_len;
        memcpy(p, j->class_name, class_len);
        w->rec.class_name = p;
        p += class_len;
        if (key_len) {
                memcpy(p, job_plan_key(j), key_len);
                w->rec.key = p;
                p += key_len;
        }
        if (code_len) {
                memcpy(p, j->error_code, code_len);
                w->rec.error_code = p;
                p += code_len;
        }
        if (msg_len) {
                memcpy(p, j->error_message, msg_len);
                w->rec.error_message = p;
                p += msg_len;
        }
        if (ss->size) {
                memcpy(p, ss->data, ss->size);
                w->rec.sched = p;
                w->rec.sched_len = ss->size;
                p += ss->size;
        }
        if (with_args) {
                memcpy(p, sb->data, sb->size);
                w->rec.args = p;
                w->rec.args_len = sb->size;
                p += sb->size;
        }
        if (j->result && j->state == JOB_DONE && !requeued) {
                memcpy(p, j->result, j->result_len);
                w->rec.result = p;
                w->rec.result_len = j->result_len;
        }
        return w;
}

/* Publishes the outcome (@error) of @w, a write that is not a job's, to its waiter and
 * frees @w. */
static void write_release(StoreWrite *w, int error)
{
        if (w->waiter) {
                StoreWaiter *waiter = w->waiter; /* on a fiber's stack: gone once set */
                waiter->error = error;
                fiber_event_set(&waiter->done);
        }
        if (!w->borrowed)
                free(w);
}

/* One more write is queued (an entry or a drop); the caller holds s->lock. */
static void queue_grew_locked(Store *s)
{
        s->queued++;
        if (s->sleeping) /* a committing thread looks at the queue when it is done */
                pthread_cond_signal(&s->wake);
}

/* Queues @e (a StoreWrite's or a job's entry); the caller holds s->lock. */
static void queue_entry_locked(Store *s, StoreEntry *e)
{
        list_add_tail(&s->queue, &e->link);
        queue_grew_locked(s);
}

/* Marks @j for a write (store_put(), store_submit()); the caller holds s->lock. @ref:
 * the caller gives the queue a reference of its own (consumed either way). A refused
 * submission is never written. */
static void queue_job_locked(Store *s, Job *j, bool with_args, bool notify, bool submit, bool ref)
{
        if (j->store.refused) {
                if (ref)
                        job_unref(j); /* not the last: its table or its submitter holds one */
                return;
        }
        j->store.args |= with_args;
        j->store.notify |= notify;
        j->store.submit |= submit;
        if (j->store.queued) {
                if (ref)
                        job_unref(j); /* not the last: the queue holds one */
                return;
        }
        j->store.queued = true;
        if (!ref)
                job_ref(j);
        queue_entry_locked(s, &j->store.entry);
}

void store_put(Store *s, Job *j, bool with_args, bool notify)
{
        if (!s->backend->commit) {
                if (notify)
                        fiber_event_set(&j->store.committed);
                return;
        }
        pthread_mutex_lock(&s->lock);
        queue_job_locked(s, j, with_args, notify, false, false);
        pthread_mutex_unlock(&s->lock);
}

void store_submit(Store *s, Job *j)
{
        if (!s->backend->commit) {
                fiber_event_set(&j->store.committed);
                return;
        }
        pthread_mutex_lock(&s->lock);
        queue_job_locked(s, j, true, true, true, false);
        pthread_mutex_unlock(&s->lock);
}

/* No watch waits here: store_watch_final() is only asked of a durable store's writes. */
void store_settle(Job *j, bool final)
{
        fiber_event_set(&j->store.committed);
        if (final)
                fiber_event_set(&j->store.final_committed);
}

int store_wait(Job *j, bool final, bool cancellable)
{
        FiberEvent *ev = final ? &j->store.final_committed : &j->store.committed;
        int r;

        /* the store thread always answers: a wait that may not be cancelled retries */
        while ((r = fiber_event_wait(ev, SCHED_FOREVER)) < 0 && !cancellable)
                ;
        return r < 0 ? r : j->store.error;
}

/* Past its deadline, a store_wait_until() looks again this often whether the store
 * still writes. */
#define STORE_WAIT_POLL_NS (100 * NSEC_PER_MSEC)

int store_wait_until(Store *s, Job *j, bool final, uint16_t life, uint64_t deadline_ns)
{
        FiberEvent *ev = final ? &j->store.final_committed : &j->store.committed;

        for (;;) {
                uint64_t now = sched_now_ns(),
                         until = now < deadline_ns ? deadline_ns : now + STORE_WAIT_POLL_NS;
                int r;

                /* a later life (store_revive()): the end of @life is on disk */
                if (final && __atomic_load_n(&j->store.life, __ATOMIC_RELAXED) != life)
                        return 0;
                if (final && until - now > STORE_WAIT_POLL_NS)
                        /* a revive between the look above and the wait resets the event
                         * unseen: looked at again this often */
                        until = now + STORE_WAIT_POLL_NS;
                r = fiber_event_wait(ev, until);
                if (r == 0)
                        return j->store.error;
                /* a cancellation is ignored, as store_wait()'s: the store answers */
                if (r == -ETIMEDOUT && sched_now_ns() >= deadline_ns && store_failing(s))
                        return -ETIMEDOUT;
        }
}

bool store_failing(Store *s)
{
        return s && __atomic_load_n(&s->failing, __ATOMIC_ACQUIRE);
}

void store_retry_now(Store *s)
{
        pthread_mutex_lock(&s->lock);
        if (s->failing) {
                s->retry_at_ns = clock_now_ns(CLOCK_MONOTONIC); /* retry_wait_locked() */
                pthread_cond_signal(&s->wake);
        }
        pthread_mutex_unlock(&s->lock);
}

void store_health(Store *s, StoreHealth *ret)
{
        pthread_mutex_lock(&s->lock);
        *ret = (StoreHealth){.failing = s->failing};
        if (s->failing) {
                ret->error = s->fail_error;
                ret->pending_writes = s->queued;
                ret->since_ms = s->fail_since_ms;
        }
        pthread_mutex_unlock(&s->lock);
}

uint64_t store_retry_hint_ms(Store *s)
{
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC), at, ms;

        if (s->backend->retry_hint_ms)
                return MAX(s->backend->retry_hint_ms(s), (uint64_t)100);
        pthread_mutex_lock(&s->lock);
        at = s->failing ? s->retry_at_ns : 0;
        pthread_mutex_unlock(&s->lock);
        ms = at > now ? (at - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC : 0;
        return MAX(ms, (uint64_t)100);
}

bool store_error_transient(int error)
{
        switch (error) {
        case -ENOSPC:
        case -EDQUOT:
        case -EIO:
        case -EROFS:
        case -EACCES:
        case -EBUSY:
        case -ENOMEM:
                return true;
        default:
                return false;
        }
}

void store_set_source(Store *s, StoreSnapshotFn snapshot, StoreSubmittedFn submitted, void *arg)
{
        pthread_mutex_lock(&s->lock);
        s->snapshot = snapshot;
        s->submitted = submitted;
        s->snapshot_arg = arg;
        pthread_mutex_unlock(&s->lock);
}

void store_set_recorded(Store *s, StoreRecordedFn recorded)
{
        pthread_mutex_lock(&s->lock);
        s->recorded = recorded;
        pthread_mutex_unlock(&s->lock);
}

bool store_watch_final(Store *s, Job *j, JobWatch *w)
{
        bool taken;

        pthread_mutex_lock(&s->lock);
        /* final_committed_set() sets the event and takes the watches under the lock */
        taken = !fiber_event_is_set(&j->store.final_committed);
        if (taken) {
                w->next = j->store.final_watches;
                j->store.final_watches = w;
        }
        pthread_mutex_unlock(&s->lock);
        return taken;
}

void store_revive(Store *s, Job *j)
{
        if (!s->backend->commit)
                return;
        pthread_mutex_lock(&s->lock);
        /* Only once the last life's end is on disk: then nothing waits on the event (its
         * waiters and watches went as it was set) but a store_wait_until() that read the
         * life before this, which sees the new one. An end still being written, or
         * failed for good, is left as it is: its waiters and watches hear that write. */
        if (!j->store.refused && !j->store.error && fiber_event_is_set(&j->store.final_committed)) {
                /* atomic: store_wait_until() reads it with neither lock held */
                __atomic_store_n(&j->store.life, j->store.life + 1, __ATOMIC_RELAXED);
                fiber_event_reset(&j->store.final_committed);
        }
        pthread_mutex_unlock(&s->lock);
}

/* Any life of a job: final_committed_set()'s @life for writes given up at exit, whose
 * end is every life's. (A submission's write is always of the present life: no life
 * starts before a final write of the job is committed, store_revive().) */
#define LIFE_ANY (-1)

/* @j's final write is committed or given up: its waiters, then its watches. A write read
 * in an earlier @life than @j's (revived since: store_revive()) carried the end of a
 * life that is over, and publishes nothing. Context: nothing of the store's held. */
static void final_committed_set(Store *s, Job *j, int life)
{
        JobWatch *w, *next;

        pthread_mutex_lock(&s->lock);
        if (life != LIFE_ANY && life != j->store.life) {
                pthread_mutex_unlock(&s->lock);
                return;
        }
        /* under the lock: store_revive() resets it under the lock too */
        fiber_event_set(&j->store.final_committed);
        w = j->store.final_watches;
        j->store.final_watches = NULL;
        pthread_mutex_unlock(&s->lock);
        for (; w; w = next) {
                next = w->next;
                s->recorded(j, w, s->snapshot_arg);
        }
}

void store_set_commit_delay(Store *s, uint64_t delay_ns)
{
        s->commit_delay_ns = MIN(delay_ns, (uint64_t)NSEC_PER_SEC - 1);
}

bool store_busy(Store *s)
{
        /* failing: no job runs before its record is on disk (its submission may be
         * refused) */
        return __atomic_load_n(&s->busy, __ATOMIC_RELAXED) && !store_failing(s);
}

int store_delete(Store *s, uint64_t id)
{
        if (!s->backend->commit)
                return 0;
        pthread_mutex_lock(&s->lock);
        if (s->n_deletes == s->deletes_cap) {
                size_t cap = s->deletes_cap ? 2 * s->deletes_cap : 256;
                uint64_t *d = realloc(s->deletes, cap * sizeof(*d));
                if (!d) {
                        pthread_mutex_unlock(&s->lock);
                        return -ENOMEM;
                }
                s->deletes = d;
                s->deletes_cap = cap;
        }
        s->deletes[s->n_deletes++] = id;
        queue_grew_locked(s);
        pthread_mutex_unlock(&s->lock);
        return 0;
}

/* Commits @w now and waits for it: on this thread before the store thread runs. */
static int store_write_sync(Store *s, StoreWrite *w)
{
        char why[256] = "";
        ListHead one;
        int r;

        if (!s->backend->commit) {
                free(w);
                return 0;
        }
        pthread_mutex_lock(&s->lock);
        if (s->thread_started) {
                uint64_t errors = s->commit_errors, batch = s->batches_taken + 1;
                queue_entry_locked(s, &w->entry);
                s->urgent = true; /* its caller blocks: not after a backoff */
                pthread_cond_signal(&s->wake);
                /* the next batch taken holds it: wait for that one, not for an empty
                 * queue, which a steady load may never leave */
                while (s->batches_done < batch)
                        pthread_cond_wait(&s->idle, &s->lock);
                /* logged by the store thread */
                r = s->commit_errors != errors ? (s->last_error ? s->last_error : -EIO) : 0;
                pthread_mutex_unlock(&s->lock);
                return r;
        }
        pthread_mutex_unlock(&s->lock);
        list_init(&one);
        list_add_tail(&one, &w->link);
        r = s->backend->commit(s, &one, why, sizeof(why));
        if (r < 0)
                log_msg(LOG_ERR, "job store %s: %s", s->path, why[0] ? why : strerror(-r));
        free(w);
        return r;
}

int store_put_plugin_file(Store *s, const StorePluginFile *pf)
{
        size_t lp = strlen(pf->path) + 1, ln = pf->name ? strlen(pf->name) + 1 : 0;
        size_t lr = pf->reason ? strlen(pf->reason) + 1 : 0;
        size_t lh = pf->sha256 ? strlen(pf->sha256) + 1 : 0;
        StoreWrite *w = calloc(1, sizeof(*w) + lp + ln + lr + lh);
        char *p;

        if (!w)
                return -ENOMEM;
        p = (char *)(w + 1);
        w->op = STORE_OP_PLUGIN;
        w->pf = *pf;
        w->pf.path = memcpy(p, pf->path, lp);
        p += lp;
        w->pf.name = ln ? memcpy(p, pf->name, ln) : NULL;
        p += ln;
        w->pf.reason = lr ? memcpy(p, pf->reason, lr) : NULL;
        p += lr;
        w->pf.sha256 = lh ? memcpy(p, pf->sha256, lh) : NULL;
        return store_write_sync(s, w);
}

int store_set_meta(Store *s, const char *key, int64_t value)
{
        size_t lk = strlen(key) + 1;
        StoreWrite *w = calloc(1, sizeof(*w) + lk);

        if (!w)
                return -ENOMEM;
        w->op = STORE_OP_META;
        w->meta_key = memcpy(w + 1, key, lk);
        w->meta_value = value;
        return store_write_sync(s, w);
}

/* ------------------------------------------------------------------ schedules --- */

/*
 * Queues @w (a schedule's write) for the store thread, or, before that thread runs,
 * commits it on this thread; @w->waiter hears the outcome either way. Return: 0.
 */
static int store_write_async(Store *s, StoreWrite *w)
{
        char why[256] = "";
        ListHead one;
        int r;

        if (!s->backend->commit) {
                write_release(w, 0); /* nothing is kept */
                return 0;
        }
        pthread_mutex_lock(&s->lock);
        if (s->thread_started) {
                queue_entry_locked(s, &w->entry);
                if (w->waiter && s->failing) {
                        s->urgent = true; /* a request waits: not after a backoff */
                        pthread_cond_signal(&s->wake);
                }
                pthread_mutex_unlock(&s->lock);
                return 0;
        }
        pthread_mutex_unlock(&s->lock);
        list_init(&one);
        list_add_tail(&one, &w->link);
        r = s->backend->commit(s, &one, why, sizeof(why));
        if (r < 0)
                log_msg(LOG_ERR, "job store %s: %s", s->path, why[0] ? why : strerror(-r));
        write_release(w, r < 0 ? r : w->refused);
        return 0;
}

/* Copies @len bytes of @src to *@p (moving it on), NUL-terminated; NULL for NULL. */
static const char *copy_inline(char **p, const void *src, size_t len)
{
        char *d = *p;

        if (!src)
                return NULL;
        memcpy(d, src, len);
        d[len] = '\0';
        *p += len + 1;
        return d;
}

static size_t str_size(const char *s)
{
        return s ? strlen(s) + 1 : 0;
}

int store_put_schedule(Store *s, const StoreSchedule *sc, StoreWaiter *waiter)
{
        size_t size = sc->n_groups * sizeof(gid_t) + str_size(sc->name) + str_size(sc->cron) +
                      str_size(sc->tz) + str_size(sc->missed) + str_size(sc->plugin) +
                      sc->args_len + 1 + sc->options_len + 1;
        StoreWrite *w = calloc(1, sizeof(*w) + size);
        char *p;

        if (!w)
                return -ENOMEM;
        w->op = STORE_OP_SCHEDULE;
        w->waiter = waiter;
        w->schedule = *sc;
        p = (char *)(w + 1);
        if (sc->n_groups) { /* first: gid_t's alignment holds right after the StoreWrite */
                w->schedule.groups = memcpy(p, sc->groups, sc->n_groups * sizeof(gid_t));
                p += sc->n_groups * sizeof(gid_t);
        }
        w->schedule.name = copy_inline(&p, sc->name, str_size(sc->name) - 1);
        w->schedule.cron = copy_inline(&p, sc->cron, str_size(sc->cron) - 1);
        w->schedule.tz = copy_inline(&p, sc->tz, str_size(sc->tz) - 1);
        w->schedule.missed = copy_inline(&p, sc->missed, str_size(sc->missed) - 1);
        w->schedule.plugin = copy_inline(&p, sc->plugin, str_size(sc->plugin) - 1);
        w->schedule.args = copy_inline(&p, sc->args ? sc->args : "", sc->args_len);
        w->schedule.options = copy_inline(&p, sc->options ? sc->options : "", sc->options_len);
        return store_write_async(s, w);
}

int store_delete_schedule(Store *s, uid_t owner, const char *name, StoreWaiter *waiter)
{
        size_t ln = strlen(name) + 1;
        StoreWrite *w = calloc(1, sizeof(*w) + ln);

        if (!w)
                return -ENOMEM;
        w->op = STORE_OP_SCHEDULE_DELETE;
        w->waiter = waiter;
        w->schedule.owner = owner;
        w->schedule.name = memcpy(w + 1, name, ln);
        return store_write_async(s, w);
}

void store_waiter_init(StoreWaiter *w)
{
        fiber_event_init(&w->done);
        w->error = 0;
}

int store_waiter_wait(StoreWaiter *w)
{
        while (fiber_event_wait(&w->done, SCHED_FOREVER) < 0)
                ; /* not cancellable: the store thread writes into @w */
        return w->error;
}

int store_schedules(Store *s, StoreScheduleFn fn, void *arg)
{
        return s->backend->schedules ? s->backend->schedules(s, fn, arg) : 0;
}

int store_schedules_changed(Store *s, uint64_t *version, StoreScheduleFn fn, void *arg)
{
        return s->backend->schedules_changed ? s->backend->schedules_changed(s, version, fn, arg)
                                             : 0;
}

int store_get_meta(Store *s, const char *key, int64_t *ret)
{
        return s->backend->meta_get ? s->backend->meta_get(s, key, ret) : -ENOENT;
}

int store_meta_list(Store *s, const char *prefix, StoreMetaFn fn, void *arg)
{
        return s->backend->meta_list ? s->backend->meta_list(s, prefix, fn, arg) : 0;
}

int store_plugin_files(Store *s, StorePluginFn fn, void *arg)
{
        return s->backend->plugin_files ? s->backend->plugin_files(s, fn, arg) : 0;
}

/* ------------------------------------------------------------------ thread ------ */

/* The writes a batch must hold for the store to count as busy (commit_delay). */
#define STORE_DELAY_MIN_BATCH 16

/* StoreTaken - one entry the store thread took off the queue: a job with the flags it
 * had then (the queue's reference) and, once read, its write; or a StoreWrite. */
typedef struct StoreTaken {
        Job *job;
        StoreWrite *w; /* a job's: NULL until snapshot_job(), or without memory */
        bool args, notify, submit;
        bool first; /* StoreRecord.first */
} StoreTaken;

/* Makes s->taken hold @n entries; false when there is no memory for it. */
static bool taken_reserve(Store *s, size_t n)
{
        StoreTaken *t;
        size_t cap = s->taken_cap ? s->taken_cap : 64;

        if (n <= s->taken_cap)
                return true;
        while (cap < n)
                cap *= 2;
        t = realloc(s->taken, cap * sizeof(*t));
        if (!t)
                return false;
        s->taken = t;
        s->taken_cap = cap;
        return true;
}

/* Takes up to s->taken_cap queued entries into s->taken, and the drops queued (into
 * s->deletes_taken, *@n_del of them) when nothing is left behind; the caller holds
 * s->lock. A job taken is off the queue from here on: a change made to it while its
 * snapshot is written queues it again, for the next batch. Return: how many entries. */
static size_t take_locked(Store *s, size_t *n_del)
{
        size_t n = 0;
        ListHead *e;

        *n_del = 0;
        s->urgent = false;
        while (n < s->taken_cap && (e = list_pop_head(&s->queue))) {
                StoreEntry *se = list_entry(e, StoreEntry, link);
                StoreTaken *t = &s->taken[n++];
                if (se->is_job) {
                        Job *j = container_of(se, Job, store.entry);
                        *t = (StoreTaken){.job = j,
                                          .args = j->store.args,
                                          .notify = j->store.notify,
                                          .submit = j->store.submit,
                                          .first = !j->store.sent};
                        j->store.queued = j->store.args = j->store.notify = false;
                        j->store.submit = false;
                        j->store.sent = true;
                } else {
                        *t = (StoreTaken){.w = container_of(se, StoreWrite, entry)};
                }
                s->queued--;
        }
        /* the drops, once every put queued before them is taken */
        if (list_empty(&s->queue) && s->n_deletes) {
                uint64_t *d = s->deletes_taken;
                size_t cap = s->deletes_taken_cap;
                s->deletes_taken = s->deletes;
                s->deletes_taken_cap = s->deletes_cap;
                *n_del = s->n_deletes;
                s->queued -= s->n_deletes;
                s->deletes = d;
                s->deletes_cap = cap;
                s->n_deletes = 0;
        }
        return n;
}

/* The @n drops of s->deletes_taken, whose commit the disk could not take, are queued
 * again (after those queued meanwhile: order does not matter among drops). */
static void requeue_deletes(Store *s, size_t n)
{
        pthread_mutex_lock(&s->lock);
        if (s->n_deletes + n > s->deletes_cap) {
                size_t cap = s->deletes_cap ? s->deletes_cap : 256;
                uint64_t *d;
                while (cap < s->n_deletes + n)
                        cap *= 2;
                d = realloc(s->deletes, cap * sizeof(*d));
                if (!d) {
                        pthread_mutex_unlock(&s->lock);
                        log_msg(LOG_WARNING,
                                "job store %s: out of memory: %zu records of dropped jobs stay "
                                "until the next start",
                                s->path ? s->path : s->backend->name, n);
                        return;
                }
                s->deletes = d;
                s->deletes_cap = cap;
        }
        memcpy(s->deletes + s->n_deletes, s->deletes_taken, n * sizeof(uint64_t));
        s->n_deletes += n;
        s->queued += n;
        pthread_mutex_unlock(&s->lock);
}

/* What snapshot_job() hands the owner's snapshot function, and gets back. */
typedef struct StoreRead {
        Store *s;
        bool with_args;
        StoreWrite *w; /* out: the copy; NULL without memory */
} StoreRead;

/* StoreReadFn of snapshot_job(): the copy, made while the owner holds @j still. */
static void read_job(const Job *j, void *ctx)
{
        StoreRead *rd = ctx;

        rd->w = write_from_job(rd->s, j, rd->with_args);
}

/*
 * The StoreWrite of a taken job: its record as it is now, read inside the owner's
 * snapshot function (the job table's takes its lock), so the submission, start and end
 * that happened since it was queued are one write. NULL without memory for it
 * (job_written() queues it again).
 */
static StoreWrite *snapshot_job(Store *s, const StoreTaken *t)
{
        Job *j = t->job;
        StoreRead rd = {.s = s, .with_args = t->args};

        if (s->snapshot)
                s->snapshot(j, read_job, &rd, s->snapshot_arg);
        else
                read_job(j, &rd); /* no owner: a job in no table, nothing else writes it */
        if (!rd.w)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "out of memory writing its record to the job store: trying again");
        else
                rd.w->rec.first = t->first;
        return rd.w;
}

/*
 * A taken job once the commit of its write came to @error (0: committed), @transient
 * when store_error_transient(): its waiters hear it, or the job is queued again for the
 * next attempt (a transient failure, or no memory to read it): onto @again, which the
 * caller puts at the head of the queue, so the writes land in the order they were
 * queued (one queued again meanwhile keeps its place). A submission's first write that
 * failed refuses it: nothing of it is written from now on, and both its events answer
 * the error. Consumes @t's reference; frees its write.
 */
static void job_written(Store *s, StoreTaken *t, int error, bool transient, ListHead *again)
{
        Job *j = t->job, *unqueued = NULL;
        StoreWrite *w = t->w;
        bool final = w && job_state_final(w->rec.state);

        if (!w || (error && transient && !t->submit)) {
                pthread_mutex_lock(&s->lock);
                j->store.args |= t->args;
                j->store.notify |= t->notify;
                j->store.submit |= t->submit;
                if (j->store.queued) {
                        unqueued = j; /* queued again meanwhile: the queue holds one */
                } else {
                        j->store.queued = true; /* with @t's reference */
                        list_add_tail(again, &j->store.entry.link);
                        s->queued++;
                }
                pthread_mutex_unlock(&s->lock);
                job_unref(unqueued);
                goto out_free_write;
        }
        if (error && t->submit) {
                pthread_mutex_lock(&s->lock);
                j->store.refused = true;
                s->refused++;
                if (j->store.queued) { /* changed during the commit: that write goes too */
                        list_del(&j->store.entry.link);
                        j->store.queued = j->store.args = j->store.notify = false;
                        j->store.submit = false;
                        s->queued--;
                        unqueued = j;
                }
                pthread_mutex_unlock(&s->lock);
                job_unref(unqueued); /* the queue's: not the last, @t holds one */
                final = true;        /* nothing more is written: its final waiters hear it */
        }
        if (error) { /* before the events that publish it; not a revived job's new life's */
                pthread_mutex_lock(&s->lock);
                if (w->life == j->store.life)
                        j->store.error = error;
                pthread_mutex_unlock(&s->lock);
        }
        if (t->submit && error && s->submitted) /* refused: cancelled before it is said */
                s->submitted(j, error, s->snapshot_arg);
        if (t->notify) /* a submission's first write, or a deferred one (store_put()) */
                fiber_event_set(&j->store.committed);
        if (final)
                final_committed_set(s, j, w->life);
        if (t->submit && !error && s->submitted) /* committed: started once answered */
                s->submitted(j, 0, s->snapshot_arg);
        job_unref(j);
out_free_write:
        if (w && !w->borrowed)
                free(w);
}

/*
 * While the store cannot write: waits until the next attempt is due (its backoff
 * passed, or a write whose caller blocks was queued), or, closing, until nothing is
 * left to write. Closing starts an attempt at once and sets the last one's time
 * (Store.close_retry_ns on). The caller holds s->lock.
 */
static void retry_wait_locked(Store *s)
{
        for (;;) {
                uint64_t now = clock_now_ns(CLOCK_MONOTONIC), until = s->retry_at_ns;
                struct timespec ts;

                if (s->closing) {
                        if (!s->queued)
                                return;
                        if (!s->close_deadline_ns) {
                                s->close_deadline_ns = now + s->close_retry_ns;
                                s->retry_at_ns = until = now;
                        }
                        until = MIN(until, s->close_deadline_ns);
                }
                if (s->urgent || now >= until)
                        return;
                ts = timespec_store_ns(until);
                s->sleeping = true;
                pthread_cond_timedwait(&s->wake, &s->lock, &ts);
                s->sleeping = false;
        }
}

/*
 * After an attempt while closing that failed at or past the last one's time: every
 * write still queued is dropped (its waiters, if any, hear @error), and the line says
 * so. The caller holds s->lock; it is dropped and taken again around the releases.
 */
static void give_up_locked(Store *s, int error)
{
        size_t n = s->queued;
        ListHead dropped, *e;

        list_init(&dropped);
        while ((e = list_pop_head(&s->queue)))
                list_add_tail(&dropped, e);
        s->queued = 0;
        s->n_deletes = 0;
        pthread_mutex_unlock(&s->lock);
        while ((e = list_pop_head(&dropped))) {
                StoreEntry *se = list_entry(e, StoreEntry, link);
                if (se->is_job) {
                        Job *j = container_of(se, Job, store.entry);
                        j->store.queued = false;
                        pthread_mutex_lock(&s->lock); /* store_revive() reads it under it */
                        j->store.error = error;
                        pthread_mutex_unlock(&s->lock);
                        if (j->store.submit && s->submitted)
                                s->submitted(j, error, s->snapshot_arg);
                        fiber_event_set(&j->store.committed);
                        final_committed_set(s, j, LIFE_ANY);
                        job_unref(j);
                } else {
                        write_release(container_of(se, StoreWrite, entry), error);
                }
        }
        log_msg(LOG_ERR,
                "job store %s: still cannot write (%s) at exit: %zu writes are lost; after "
                "a restart those jobs are as they were last written",
                s->path ? s->path : s->backend->name, strerror(-error), n);
        pthread_mutex_lock(&s->lock);
}

/*
 * The failing state after an attempt that came to @error (0: committed, with @nwrites
 * writes), @transient when store_error_transient(): writes stop (a line), go on failing
 * (the backoff doubles; a line a minute) or resume (a line). The line, if any, goes to
 * @line (logged by the caller once the lock is dropped). The caller holds s->lock.
 * Return: true when closing has tried long enough (give_up_locked()).
 */
static bool note_attempt_locked(Store *s, int error, bool transient, size_t nwrites, char *line,
                                size_t size)
{
        const char *name = s->path ? s->path : s->backend->name;
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC);

        line[0] = '\0';
        if (error < 0)
                s->last_error = error;
        if (error == 0 && s->failing) {
                /* at LOG_DEBUG when fail_quiet: the backend said it is back */
                snprintf(line, size,
                         "job store %s: writing again after %.1f s; %zu writes caught up", name,
                         (double)(now - s->fail_since_ns) / NSEC_PER_SEC, nwrites);
                __atomic_store_n(&s->failing, false, __ATOMIC_RELEASE);
                s->fail_error = 0;
                return false;
        }
        if (!transient)
                return false;
        if (!s->failing) {
                s->fail_quiet = s->backend->server_away && s->backend->server_away(s);
                snprintf(line, size,
                         "job store %s: cannot write (%s); holding %zu writes in memory and "
                         "retrying",
                         name, strerror(-error), s->queued);
                s->fail_since_ns = s->fail_logged_ns = now;
                s->fail_since_ms = clock_now_ns(CLOCK_REALTIME) / NSEC_PER_MSEC;
                s->retry_ns = STORE_RETRY_MIN_NS;
                __atomic_store_n(&s->failing, true, __ATOMIC_RELEASE);
        } else {
                /* the backoff grows while the disk is full or the server away; a server
                 * that answers but refuses (Redis loading its data, out of memory) is
                 * tried again at the shortest pause, and one back from away at once
                 * (store_retry_now()) */
                bool answers = s->backend->server_away && !s->backend->server_away(s);
                s->retry_ns =
                        answers ? STORE_RETRY_MIN_NS : MIN(2 * s->retry_ns, STORE_RETRY_MAX_NS);
                if (now - s->fail_logged_ns >= 60 * NSEC_PER_SEC && !s->fail_quiet) {
                        snprintf(line, size,
                                 "job store %s: still cannot write (%s) after %.0f s; holding "
                                 "%zu writes in memory",
                                 name, strerror(-error),
                                 (double)(now - s->fail_since_ns) / NSEC_PER_SEC, s->queued);
                        s->fail_logged_ns = now;
                }
        }
        s->fail_error = error;
        s->retry_at_ns = now + s->retry_ns;
        return s->closing && s->close_deadline_ns && now >= s->close_deadline_ns;
}

static void *store_thread(void *arg)
{
        Store *s = arg;
        bool last_busy = false;

        pthread_mutex_lock(&s->lock);
        for (;;) {
                ListHead batch, again;
                char why[256] = "", line[512];
                size_t n, n_del, nwrites = 0;
                StoreWrite del, probe;
                bool transient;
                int r;

                while (!s->queued && !s->closing && !s->failing) {
                        s->sleeping = true;
                        pthread_cond_wait(&s->wake, &s->lock);
                        s->sleeping = false;
                }
                if (s->failing) /* the backoff first; a probe when nothing is held */
                        retry_wait_locked(s);
                if (!s->queued && s->closing)
                        break; /* closing, and everything committed */
                if (s->commit_delay_ns && last_busy && !s->closing && !s->failing) {
                        /* busy: let the next batch gather for commit_delay, as
                         * PostgreSQL's commit_delay does when commit_siblings
                         * transactions are active: fewer, larger commits, and more of
                         * each job's changes folded into one row write */
                        struct timespec ts = {0, (long)s->commit_delay_ns};
                        pthread_mutex_unlock(&s->lock);
                        nanosleep(&ts, NULL);
                        pthread_mutex_lock(&s->lock);
                }
                /* take the whole queue: everything that arrived during the last commit
                 * (without memory for all of it, as much as fits) */
                if (!taken_reserve(s, s->queued) && !s->taken_cap) {
                        pthread_mutex_unlock(&s->lock);
                        log_msg(LOG_WARNING, "job store %s: out of memory: retrying", s->path);
                        usleep(10000);
                        pthread_mutex_lock(&s->lock);
                        continue;
                }
                n = take_locked(s, &n_del);
                /* busy: a batch as large as the ones commit_delay waits after */
                last_busy = n + n_del >= STORE_DELAY_MIN_BATCH;
                __atomic_store_n(&s->busy, last_busy, __ATOMIC_RELAXED);
                s->batches_taken++;
                pthread_mutex_unlock(&s->lock);

                list_init(&batch);
                for (size_t i = 0; i < n; i++) {
                        StoreTaken *t = &s->taken[i];
                        if (t->job)
                                t->w = snapshot_job(s, t);
                        if (t->w) {
                                list_add_tail(&batch, &t->w->link);
                                nwrites++;
                        }
                }
                if (n_del) {
                        /* sorted: the backend deletes runs of ids as ranges */
                        qsort(s->deletes_taken, n_del, sizeof(uint64_t), u64_compare);
                        del = (StoreWrite){.op = STORE_OP_DELETE,
                                           .ids = s->deletes_taken,
                                           .n_ids = n_del,
                                           .borrowed = true};
                        list_add_tail(&batch, &del.link);
                        nwrites += n_del;
                }
                if (s->failing) {
                        /* one small write says whether the disk takes writes again,
                         * also when nothing is held (submissions are refused meanwhile,
                         * submit.c) or what is held writes no page (a drop of a row
                         * that is gone), which a full disk lets pass */
                        probe = (StoreWrite){.op = STORE_OP_META,
                                             .meta_key = "store_probe_ms",
                                             .meta_value = (int64_t)(clock_now_ns(CLOCK_REALTIME) /
                                                                     NSEC_PER_MSEC),
                                             .borrowed = true};
                        list_add_tail(&batch, &probe.link);
                }
                r = list_empty(&batch) ? 0 : s->backend->commit(s, &batch, why, sizeof(why));
                transient = r < 0 && store_error_transient(r);
                if (r < 0) /* a full disk's lines are note_attempt_locked()'s */
                        log_msg(transient ? LOG_DEBUG : LOG_ERR,
                                "job store %s: committing %zu records failed: %s",
                                s->path ? s->path : s->backend->name, nwrites,
                                why[0] ? why : strerror(-r));
                list_init(&again);
                for (size_t i = 0; i < n; i++) {
                        if (s->taken[i].job)
                                job_written(s, &s->taken[i], r, transient, &again);
                        else
                                write_release(s->taken[i].w, r < 0 ? r : s->taken[i].w->refused);
                }
                if (n_del && transient)
                        requeue_deletes(s, n_del);
                arena_reset(s);

                pthread_mutex_lock(&s->lock);
                while (!list_empty(&again)) { /* ahead of what was queued meanwhile */
                        ListHead *e = again.prev;
                        list_del(e);
                        list_add_head(&s->queue, e);
                }
                if (r < 0) {
                        s->commit_errors++;
                } else {
                        s->commits++;
                        s->writes += nwrites;
                }
                if (note_attempt_locked(s, r, transient, nwrites, line, sizeof(line)))
                        give_up_locked(s, r);
                __atomic_store_n(&s->busy, false, __ATOMIC_RELAXED);
                s->batches_done = s->batches_taken;
                pthread_cond_broadcast(&s->idle);
                if (line[0]) {
                        /* the backend's server is away and its lines say so: debug */
                        int level = s->fail_quiet ? LOG_DEBUG : transient ? LOG_ERR : LOG_NOTICE;
                        pthread_mutex_unlock(&s->lock);
                        log_msg(level, "%s", line);
                        pthread_mutex_lock(&s->lock);
                }
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

/* ------------------------------------------------------------------ life -------- */

bool store_durable(const Store *s)
{
        return s->backend->commit != NULL;
}

int store_open(Store **ret, StoreKind kind, const char *path, const StoreFleetOptions *fleet)
{
        Store *s;
        char why[1024] = "";
        int r;

        if (kind >= STORE_KIND_COUNT)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->backend = store_backends[kind];
        pthread_mutex_init(&s->lock, NULL);
        {
                /* the backoff's waits are CLOCK_MONOTONIC deadlines (retry_wait_locked()) */
                pthread_condattr_t ca;
                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&s->wake, &ca);
                pthread_condattr_destroy(&ca);
        }
        pthread_cond_init(&s->idle, NULL);
        list_init(&s->queue);
        s->close_retry_ns = STORE_CLOSE_RETRY_NS;
        msgpack_sbuffer_init(&s->pack);
        msgpack_sbuffer_init(&s->pack_sched);
        if (fleet)
                s->fleet = *fleet;
        if (kind == STORE_REDIS) {
                s->path = strdup(path && *path ? path : "127.0.0.1:6379");
                r = s->path ? 0 : -ENOMEM;
                if (r < 0)
                        goto out_free_store;
        } else if (kind != STORE_MEMORY) {
                if (path && *path) {
                        s->path = strdup(path);
                        r = s->path ? 0 : -ENOMEM;
                } else {
                        r = store_default_path(&s->path);
                        if (r == -ENOENT)
                                snprintf(why, sizeof(why),
                                         "no default place for it: set [store] path, or HOME, "
                                         "XDG_STATE_HOME or STATE_DIRECTORY");
                }
                if (r < 0)
                        goto out_free_store;
                r = store_make_parent(s->path);
                if (r < 0) {
                        snprintf(why, sizeof(why), "cannot create its directory: %s", strerror(-r));
                        goto out_free_store;
                }
        }
        r = s->backend->open(s, s->path, why, sizeof(why));
        if (r < 0)
                goto out_free_store;
        *ret = s;
        return 0;

out_free_store:
        log_msg(LOG_ERR, "cannot open the %s job store%s%s: %s", s->backend->name,
                s->path ? " " : "", s->path ? s->path : "", why[0] ? why : strerror(-r));
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        pthread_mutex_destroy(&s->lock);
        free(s->path);
        free(s);
        return r;
}

int store_load(Store *s, StoreLoadFn fn, void *arg)
{
        char why[512] = "";
        int r = s->backend->load ? s->backend->load(s, fn, arg, why, sizeof(why)) : 0;

        if (r < 0) {
                if (why[0])
                        log_msg(LOG_ERR, "job store %s: %s", s->path ? s->path : s->backend->name,
                                why);
                return r;
        }
        /* only now: the backend's connection is the store thread's from here on, and
         * the writes @fn queued are committed first */
        s->next_id = s->backend->next_id ? s->backend->next_id(s) : 1; /* before the thread */
        if (s->backend->commit && !s->thread_started) {
                pthread_mutex_lock(&s->lock); /* store_write_sync() reads it on its thread */
                r = -pthread_create(&s->thread, NULL, store_thread, s);
                if (r == 0) {
                        s->thread_started = true;
                        /* its CPU apart in top -H and /proc (tests/bench/stages.sh) */
                        pthread_setname_np(s->thread, "fiberd-store");
                }
                pthread_mutex_unlock(&s->lock);
                if (r < 0) {
                        log_msg(LOG_ERR, "cannot start the job store thread: %s", strerror(-r));
                        return r;
                }
        }
        return 0;
}

bool store_fleet(const Store *s)
{
        return s && s->backend->new_id != NULL;
}

int store_new_id(Store *s, uint64_t *ret)
{
        return s->backend->new_id ? s->backend->new_id(s, ret) : -ENOTSUP;
}

int store_fetch(Store *s, uint64_t id, StoreLoadFn fn, void *arg)
{
        return s->backend->fetch ? s->backend->fetch(s, id, fn, arg) : -ENOTSUP;
}

int store_list(Store *s, uint64_t below, size_t max, uint64_t *ids, size_t *ret_n)
{
        return s->backend->list ? s->backend->list(s, below, max, ids, ret_n) : -ENOTSUP;
}

int store_fleet_start(Store *s, const StoreFleetHooks *hooks)
{
        return s->backend->fleet_start ? s->backend->fleet_start(s, hooks) : 0;
}

void store_fleet_stop(Store *s)
{
        if (s && s->backend->fleet_stop)
                s->backend->fleet_stop(s);
}

int store_fetch_many(Store *s, const uint64_t *ids, size_t n, StoreLoadFn fn, void *arg)
{
        return s->backend->fetch_many ? s->backend->fetch_many(s, ids, n, fn, arg) : -ENOTSUP;
}

int store_cancel_remote(Store *s, uint64_t id)
{
        return s->backend->cancel_remote ? s->backend->cancel_remote(s, id) : -ENOTSUP;
}

int store_cancel_held(Store *s, const StoreRecord *rec)
{
        return s->backend->cancel_held ? s->backend->cancel_held(s, rec) : -ENOTSUP;
}

int store_key_claim(Store *s, uid_t owner, const char *key, uint64_t id, uint64_t *ret_existing)
{
        return s->backend->key_claim ? s->backend->key_claim(s, owner, key, id, ret_existing)
                                     : -ENOTSUP;
}

void store_key_release(Store *s, uid_t owner, const char *key, uint64_t id)
{
        if (s->backend->key_release)
                s->backend->key_release(s, owner, key, id);
}

uint64_t store_next_id(Store *s)
{
        return s->next_id;
}

void store_flush(Store *s)
{
        if (!s || !s->thread_started)
                return;
        pthread_mutex_lock(&s->lock);
        {
                uint64_t batch = s->batches_taken + (s->queued ? 1 : 0);
                while (s->batches_done < batch)
                        pthread_cond_wait(&s->idle, &s->lock);
        }
        pthread_mutex_unlock(&s->lock);
}

void store_drain(Store *s, uint64_t timeout_ns)
{
        struct timespec ts;

        store_flush(s);
        if (!s || !s->thread_started)
                return;
        ts = timespec_store_ns(clock_now_ns(CLOCK_REALTIME) + timeout_ns); /* idle's clock */
        pthread_mutex_lock(&s->lock);
        while (s->failing && s->queued &&
               pthread_cond_timedwait(&s->idle, &s->lock, &ts) != ETIMEDOUT)
                ;
        pthread_mutex_unlock(&s->lock);
}

void store_close(Store *s)
{
        if (!s)
                return;
        store_fleet_stop(s); /* no job taken once the table is gone */
        if (s->thread_started) {
                pthread_mutex_lock(&s->lock);
                s->closing = true;
                pthread_cond_signal(&s->wake);
                pthread_mutex_unlock(&s->lock);
                pthread_join(s->thread, NULL);
        }
        s->backend->close(s);
        pthread_cond_destroy(&s->wake);
        pthread_cond_destroy(&s->idle);
        pthread_mutex_destroy(&s->lock);
        free(s->taken);
        free(s->deletes);
        free(s->deletes_taken);
        arena_free(s);
        msgpack_sbuffer_destroy(&s->pack);
        msgpack_sbuffer_destroy(&s->pack_sched);
        free(s->path);
        free(s);
}
