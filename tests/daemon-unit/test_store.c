/* SPDX-License-Identifier: MIT */
/* The job store's queue and store thread (daemon/store/store.c) without a daemon or a disk:
 * a fake backend kept in memory (its commit can be held shut or made to fail) stands
 * in for SQLite, and a fake owner's snapshot function stands in for the job table. A
 * burst of writes queued during one commit is the next commit, a job's `durable` event
 * is set only once its write is committed, a failed commit reaches the job
 * (JobStorePart.error) and a synchronous writer, and records are read on the store thread. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "daemon/server/creds.h"
#include "daemon/job/job.h"
#include "daemon/store/store.h"

enum { MAX_COMMITS = 16, MAX_IDS = 64 };

/* What the fake backend saw, and how it behaves; guarded by @lock. */
typedef struct Fake {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool gate_shut; /* commit waits while true */
        bool in_commit; /* a commit is waiting at the gate */
        int fail;       /* commit returns this (negative errno) when non-zero */
        int n_commits;  /* commit calls */
        size_t sizes[MAX_COMMITS];
        uint64_t ids[MAX_IDS]; /* ids of the PUT records, in commit order */
        bool had_args[MAX_IDS];
        char plugin[MAX_IDS][32];
        size_t n_ids;
        pthread_t commit_thread;
        int n_snapshots;
        pthread_t snapshot_thread;
        bool snapshot_mismatch; /* a snapshot ran on another thread than the commits */
} Fake;

static Fake fake = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int fake_open(Store *s, const char *path, char *why, size_t why_size)
{
        return 0;
}

static void fake_close(Store *s)
{
}

static int fake_commit(Store *s, ListHead *batch, char *why, size_t why_size)
{
        size_t n = 0;
        int r;

        pthread_mutex_lock(&fake.lock);
        fake.in_commit = true;
        pthread_cond_broadcast(&fake.cond);
        while (fake.gate_shut)
                pthread_cond_wait(&fake.cond, &fake.lock);
        fake.in_commit = false;
        fake.commit_thread = pthread_self();
        for (ListHead *e = batch->next; e != batch; e = e->next) {
                StoreWrite *w = list_entry(e, StoreWrite, link);
                n++;
                if (w->op != STORE_OP_PUT || fake.n_ids == MAX_IDS)
                        continue;
                fake.had_args[fake.n_ids] = w->rec.args != NULL;
                snprintf(fake.plugin[fake.n_ids], sizeof(fake.plugin[0]), "%s", w->rec.plugin);
                fake.ids[fake.n_ids++] = w->rec.id;
        }
        if (fake.n_commits < MAX_COMMITS)
                fake.sizes[fake.n_commits] = n;
        fake.n_commits++;
        r = fake.fail;
        if (r)
                snprintf(why, why_size, "the fake disk is full");
        pthread_cond_broadcast(&fake.cond);
        pthread_mutex_unlock(&fake.lock);
        return r;
}

static const StoreBackend fake_backend = {
        .name = "fake",
        .open = fake_open,
        .commit = fake_commit,
        .close = fake_close,
};

/* The owner's StoreSnapshotFn: counts, notes the thread, reads with nothing held. */
static void fake_snapshot(Job *j, StoreReadFn read, void *ctx, void *arg)
{
        cr_assert_eq(arg, &fake);
        pthread_mutex_lock(&fake.lock);
        fake.n_snapshots++;
        fake.snapshot_thread = pthread_self();
        pthread_mutex_unlock(&fake.lock);
        read(j, ctx);
}

/* A memory store whose backend is the fake one (store_open() has no hook for a
 * backend of a test's own; the memory backend keeps no state to lose). */
static Store *open_fake(void)
{
        Store *s = NULL;

        cr_assert_eq(store_open(&s, STORE_MEMORY, NULL, NULL), 0);
        s->backend = &fake_backend;
        store_set_source(s, fake_snapshot, &fake);
        cr_assert_eq(store_load(s, NULL, NULL), 0); /* starts the store thread */
        return s;
}

static Job *new_job(uint64_t id, const char *plugin)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};
        JobOrigin origin = {0};
        Creds *c = NULL;
        Job *j = NULL;

        cr_assert_eq(creds_new(1000, 1000, NULL, 0, &c), 0);
        origin.creds = c;
        cr_assert_eq(job_new(&j, NULL, id, &origin, NULL, plugin, &args, 0, 0, 0, "default"), 0);
        creds_unref(c);
        return j;
}

static bool durable(Job *j)
{
        return __atomic_load_n(&j->store.committed.set, __ATOMIC_ACQUIRE) != 0;
}

/* Waits (10 s at most) until the fake's commit is held at the shut gate. */
static void wait_in_commit(void)
{
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_mutex_lock(&fake.lock);
        while (!fake.in_commit)
                cr_assert_neq(pthread_cond_timedwait(&fake.cond, &fake.lock, &until), ETIMEDOUT,
                              "the store thread never committed");
        pthread_mutex_unlock(&fake.lock);
}

static void open_gate(void)
{
        pthread_mutex_lock(&fake.lock);
        fake.gate_shut = false;
        pthread_cond_broadcast(&fake.cond);
        pthread_mutex_unlock(&fake.lock);
}

Test(store, a_burst_during_a_commit_is_the_next_commit)
{
        Store *s = open_fake();
        Job *j[6];

        for (int i = 0; i < 6; i++)
                j[i] = new_job(100 + (uint64_t)i, "echo");
        fake.gate_shut = true;
        store_put(s, j[0], true, true);
        wait_in_commit(); /* j[0] is taken; the store thread is held in its commit */
        cr_assert_not(durable(j[0]), "durable before its commit returned");
        for (int i = 1; i < 6; i++)
                store_put(s, j[i], true, true);
        store_put(s, j[3], false, false); /* queued already: no second write */
        open_gate();
        store_flush(s);

        pthread_mutex_lock(&fake.lock);
        cr_assert_eq(fake.n_commits, 2, "%d commits for a job and a burst", fake.n_commits);
        cr_assert_eq(fake.sizes[0], 1);
        cr_assert_eq(fake.sizes[1], 5, "the burst took %zu commits' writes", fake.sizes[1]);
        cr_assert_eq(fake.n_ids, 6);
        for (size_t i = 0; i < 6; i++) {
                cr_assert_eq(fake.ids[i], 100 + i, "write %zu is job %llu", i,
                             (unsigned long long)fake.ids[i]);
                cr_assert(fake.had_args[i], "job %llu written without its arguments",
                          (unsigned long long)fake.ids[i]);
                cr_assert_str_eq(fake.plugin[i], "echo");
        }
        pthread_mutex_unlock(&fake.lock);
        for (int i = 0; i < 6; i++) {
                cr_assert(durable(j[i]), "job %d not durable after the commit", i);
                cr_assert_eq(j[i]->store.error, 0);
        }
        cr_assert_eq(s->commits, 2);
        cr_assert_eq(s->writes, 6);
        cr_assert_eq(s->commit_errors, 0);
        store_close(s);
        for (int i = 0; i < 6; i++)
                job_unref(j[i]);
}

Test(store, a_failed_commit_reaches_the_job_and_the_waiter)
{
        Store *s = open_fake();
        Job *j = new_job(7, "echo");

        fake.fail = -EIO;
        store_put(s, j, true, true);
        store_flush(s);
        cr_assert(durable(j), "the job's waiters were never woken");
        cr_assert_eq(j->store.error, -EIO, "store.error %d", j->store.error);
        cr_assert_eq(s->commit_errors, 1);
        cr_assert_eq(s->commits, 0);
        /* a synchronous writer hears it as well */
        cr_assert_eq(store_set_meta(s, "k", 1), -EIO);
        fake.fail = 0;
        cr_assert_eq(store_set_meta(s, "k", 2), 0, "the next batch is tried afresh");
        store_close(s);
        job_unref(j);
}

Test(store, records_are_read_through_the_owner_on_the_store_thread)
{
        Store *s = open_fake();
        Job *j = new_job(9, "sha256");

        store_put(s, j, true, true);
        store_flush(s);
        pthread_mutex_lock(&fake.lock);
        cr_assert_eq(fake.n_snapshots, 1, "%d snapshots of one queued job", fake.n_snapshots);
        cr_assert_not(pthread_equal(fake.snapshot_thread, pthread_self()),
                      "the snapshot ran on the writer's thread");
        cr_assert(pthread_equal(fake.snapshot_thread, fake.commit_thread),
                  "the snapshot ran elsewhere than the store thread");
        cr_assert_eq(fake.n_ids, 1);
        cr_assert_eq(fake.ids[0], 9);
        cr_assert_str_eq(fake.plugin[0], "sha256");
        pthread_mutex_unlock(&fake.lock);
        /* a change after the commit is a new write, read afresh */
        store_put(s, j, false, false);
        store_flush(s);
        pthread_mutex_lock(&fake.lock);
        cr_assert_eq(fake.n_snapshots, 2);
        cr_assert_eq(fake.n_ids, 2);
        cr_assert_not(fake.had_args[1], "an update carried the arguments again");
        pthread_mutex_unlock(&fake.lock);
        store_close(s);
        job_unref(j);
}
