/* SPDX-License-Identifier: MIT */
/* The job store's queue and store thread (daemon/store/store.c) without a daemon or a disk:
 * a fake backend kept in memory (its commit can be held shut or made to fail) stands
 * in for SQLite, and a fake owner's snapshot function stands in for the job table. A
 * burst of writes queued during one commit is the next commit, a job's `durable` event
 * is set only once its write is committed, a failed commit reaches the job
 * (JobStorePart.error) and a synchronous writer, and records are read on the store thread.
 * A full disk (commits failing with -ENOSPC for a while): every accepted job's write is
 * held and lands once, in order and as the job is by then, when commits succeed again;
 * its waiters are answered only then (a fiber's store_wait_until() gives up at its
 * deadline meanwhile); a submission is refused at once and never written, and the
 * owner hears a refusal before the submitter does and a commit after; attempts back
 * off; a write that is not a job's hears the error without waiting out the backoff;
 * store_drain() and store_close() wait a while for space, and the close then drops
 * what it still cannot write, answering its waiters; store_retry_now() (a fleet's Redis
 * back) ends the backoff at once, and a server that answers while it refuses is retried
 * at the shortest pause. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/server/creds.h"
#include "daemon/job/job.h"
#include "daemon/store/store.h"
#include "scheduler/base/time-util.h"

enum { MAX_COMMITS = 64, MAX_IDS = 256 };

/* What the fake backend saw, and how it behaves; guarded by @lock. */
typedef struct Fake {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool gate_shut; /* commit waits while true */
        bool in_commit; /* a commit is waiting at the gate */
        int fail;       /* commit returns this (negative errno) when non-zero */
        int n_commits;  /* commit calls */
        size_t sizes[MAX_COMMITS];
        bool failed[MAX_COMMITS];    /* that commit returned an error */
        uint64_t at_ns[MAX_COMMITS]; /* CLOCK_MONOTONIC when it was called */
        size_t metas[MAX_COMMITS];   /* its STORE_OP_META writes (the store's probe) */
        uint64_t ids[MAX_IDS];       /* ids of the PUT records, in commit order */
        bool had_args[MAX_IDS];
        bool first[MAX_IDS]; /* StoreRecord.first */
        JobState states[MAX_IDS];
        int commit_of[MAX_IDS]; /* the commit (index) that carried it */
        char plugin[MAX_IDS][32];
        size_t n_ids;
        pthread_t commit_thread;
        int n_snapshots;
        pthread_t snapshot_thread;
        bool snapshot_mismatch; /* a snapshot ran on another thread than the commits */
        /* the owner's StoreSubmittedFn calls */
        int n_submitted;
        uint64_t submitted_ids[MAX_IDS];
        int submitted_errors[MAX_IDS];
        bool heard_before[MAX_IDS]; /* its waiters had been answered before the owner */
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
        r = fake.fail;
        for (ListHead *e = batch->next; e != batch; e = e->next) {
                StoreWrite *w = list_entry(e, StoreWrite, link);
                n++;
                if (w->op == STORE_OP_META && fake.n_commits < MAX_COMMITS)
                        fake.metas[fake.n_commits]++;
                if (w->op != STORE_OP_PUT || fake.n_ids == MAX_IDS)
                        continue;
                fake.had_args[fake.n_ids] = w->rec.args != NULL;
                fake.first[fake.n_ids] = w->rec.first;
                fake.states[fake.n_ids] = w->rec.state;
                fake.commit_of[fake.n_ids] = fake.n_commits;
                snprintf(fake.plugin[fake.n_ids], sizeof(fake.plugin[0]), "%s", w->rec.plugin);
                fake.ids[fake.n_ids++] = w->rec.id;
        }
        if (fake.n_commits < MAX_COMMITS) {
                fake.sizes[fake.n_commits] = n;
                fake.failed[fake.n_commits] = r != 0;
                fake.at_ns[fake.n_commits] = clock_now_ns(CLOCK_MONOTONIC);
        }
        fake.n_commits++;
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

/* A backend whose server answers while it refuses writes (server_away: never). */
static bool fake_server_answers(Store *s)
{
        return false;
}

static const StoreBackend fake_answering_backend = {
        .name = "fake",
        .open = fake_open,
        .commit = fake_commit,
        .close = fake_close,
        .server_away = fake_server_answers,
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

/* The owner's StoreSubmittedFn: notes each outcome, and whether the submission's
 * waiters had heard it already (they must not have). */
static void fake_submitted(Job *j, int error, void *arg)
{
        cr_assert_eq(arg, &fake);
        pthread_mutex_lock(&fake.lock);
        if (fake.n_submitted < MAX_IDS) {
                fake.submitted_ids[fake.n_submitted] = j->id;
                fake.submitted_errors[fake.n_submitted] = error;
                fake.heard_before[fake.n_submitted] = fiber_event_is_set(&j->store.committed);
        }
        fake.n_submitted++;
        pthread_mutex_unlock(&fake.lock);
}

/* A memory store whose backend is the fake one (store_open() has no hook for a
 * backend of a test's own; the memory backend keeps no state to lose). */
static Store *open_fake(void)
{
        Store *s = NULL;

        cr_assert_eq(store_open(&s, STORE_MEMORY, NULL, NULL), 0);
        s->backend = &fake_backend;
        store_set_source(s, fake_snapshot, fake_submitted, &fake);
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
        return fiber_event_is_set(&j->store.committed);
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

        /* an error no retry would cure (a record the database refuses): not held */
        fake.fail = -EINVAL;
        store_put(s, j, true, true);
        store_flush(s);
        cr_assert(durable(j), "the job's waiters were never woken");
        cr_assert_eq(j->store.error, -EINVAL, "store.error %d", j->store.error);
        cr_assert_eq(s->commit_errors, 1);
        cr_assert_eq(s->commits, 0);
        cr_assert_not(store_failing(s), "a bad record is not a full disk");
        /* a synchronous writer hears it as well */
        cr_assert_eq(store_set_meta(s, "k", 1), -EINVAL);
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

/* ------------------------------------------------------------ a full disk -------- */

static bool final_durable(Job *j)
{
        return fiber_event_is_set(&j->store.final_committed);
}

static void set_fail(int error)
{
        pthread_mutex_lock(&fake.lock);
        fake.fail = error;
        pthread_mutex_unlock(&fake.lock);
}

static int commits(void)
{
        int n;

        pthread_mutex_lock(&fake.lock);
        n = fake.n_commits;
        pthread_mutex_unlock(&fake.lock);
        return n;
}

/* Waits (10 s at most) until store_failing(@s) is @want. */
static void wait_failing(Store *s, bool want)
{
        uint64_t until = clock_now_ns(CLOCK_MONOTONIC) + 10 * NSEC_PER_SEC;

        while (store_failing(s) != want) {
                cr_assert(clock_now_ns(CLOCK_MONOTONIC) < until,
                          "the store is%s failing after 10 s", want ? " not" : " still");
                usleep(1000);
        }
}

/* Waits (10 s at most) until the fake saw @n commit attempts. */
static void wait_commits(int n)
{
        uint64_t until = clock_now_ns(CLOCK_MONOTONIC) + 10 * NSEC_PER_SEC;

        while (commits() < n) {
                cr_assert(clock_now_ns(CLOCK_MONOTONIC) < until, "%d commit attempts, not %d",
                          commits(), n);
                usleep(1000);
        }
}

/* How many times job @id was in a commit that succeeded; *@state: the last such write's. */
static int landed(uint64_t id, JobState *state)
{
        int n = 0;

        pthread_mutex_lock(&fake.lock);
        for (size_t i = 0; i < fake.n_ids; i++) {
                if (fake.ids[i] != id || fake.failed[fake.commit_of[i]])
                        continue;
                n++;
                if (state)
                        *state = fake.states[i];
        }
        pthread_mutex_unlock(&fake.lock);
        return n;
}

/* A job whose submission is on disk (accepted), in @state. */
static Job *accepted(Store *s, uint64_t id, JobState state)
{
        Job *j = new_job(id, "echo");

        store_submit(s, j);
        store_flush(s);
        cr_assert(durable(j) && j->store.error == 0, "job %llu not accepted",
                  (unsigned long long)id);
        j->state = state;
        return j;
}

Test(store, a_full_disk_holds_accepted_writes_until_space_returns)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING), *b = accepted(s, 2, JOB_QUEUED);
        Job *c = new_job(3, "sha256");
        StoreHealth h;
        JobState st;
        int k = -1;

        /* the disk fills while a's start is committed; c (a job.run's record, written
         * at its end) and b's change come during that commit */
        fake.gate_shut = true;
        fake.fail = -ENOSPC;
        store_put(s, a, false, false);
        wait_in_commit();
        c->state = JOB_DONE;
        store_put(s, c, true, true);
        b->state = JOB_CANCELLED;
        store_put(s, b, false, false);
        open_gate();
        wait_failing(s, true);
        store_health(s, &h);
        cr_assert(h.failing);
        cr_assert_eq(h.error, -ENOSPC, "error %d", h.error);
        cr_assert_eq(h.pending_writes, 3, "%zu writes held", h.pending_writes);
        cr_assert(h.since_ms > 0);
        cr_assert_not(store_busy(s));
        /* a ends while the disk is full: still one write, of its state by then */
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_commits(5); /* a few attempts fail */
        cr_assert_not(final_durable(a), "a's final state answered before it was written");
        cr_assert_not(final_durable(b));
        cr_assert_not(durable(c), "a job.run answered before its record was written");
        cr_assert_eq(landed(1, NULL) + landed(2, NULL), 2, "only the submissions landed");
        cr_assert_eq(landed(3, NULL), 0);

        set_fail(0);
        wait_failing(s, false);
        store_flush(s);
        cr_assert(final_durable(a) && final_durable(b) && final_durable(c));
        cr_assert(durable(c));
        cr_assert_eq(a->store.error + b->store.error + c->store.error, 0);
        /* each write landed once, as the job was by then, in the order queued */
        cr_assert_eq(landed(1, &st), 2); /* its submission, then the rest in one */
        cr_assert_eq(st, JOB_DONE, "a landed %s", job_state_name(st));
        cr_assert_eq(landed(2, &st), 2);
        cr_assert_eq(st, JOB_CANCELLED);
        cr_assert_eq(landed(3, &st), 1);
        cr_assert_eq(st, JOB_DONE);
        pthread_mutex_lock(&fake.lock);
        for (int i = 0; i < fake.n_commits && k < 0; i++)
                if (i > 1 && !fake.failed[i])
                        k = i;
        cr_assert(k > 0);
        {
                uint64_t order[3];
                size_t n = 0;
                for (size_t i = 0; i < fake.n_ids; i++)
                        if (fake.commit_of[i] == k && n < 3)
                                order[n++] = fake.ids[i];
                cr_assert_eq(n, 3, "the recovery commit held %zu of the 3 jobs", n);
                cr_assert(order[0] == 1 && order[1] == 3 && order[2] == 2,
                          "landed as %llu %llu %llu, not 1 3 2", (unsigned long long)order[0],
                          (unsigned long long)order[1], (unsigned long long)order[2]);
        }
        pthread_mutex_unlock(&fake.lock);
        cr_assert_eq(s->refused, 0);
        store_close(s);
        job_unref(a);
        job_unref(b);
        job_unref(c);
}

/*
 * StoreRecord.first, which lets a backend take a record as new (the redis backend's
 * job.run leaves its defaults out): a job's first write at its first try only. The try
 * after a failed commit, which the server may have applied all the same, and every
 * later write are not first.
 */
Test(store, a_write_is_first_only_at_its_first_try)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING), *c = new_job(3, "sha256");
        bool first_try = false, retry_first = true, seen_retry = false, later_first = true;

        set_fail(-ENOSPC);
        c->state = JOB_DONE; /* a job.run's one write, at its end */
        store_put(s, c, true, true);
        wait_failing(s, true);
        set_fail(0);
        wait_failing(s, false);
        store_flush(s);
        cr_assert(durable(c));
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        store_flush(s);
        pthread_mutex_lock(&fake.lock);
        for (size_t i = 0; i < fake.n_ids; i++) {
                if (fake.ids[i] == 3 && fake.failed[fake.commit_of[i]] && !seen_retry)
                        first_try = fake.first[i] && i == 1; /* after a's submission */
                if (fake.ids[i] == 3 && !fake.failed[fake.commit_of[i]]) {
                        seen_retry = true;
                        retry_first = fake.first[i];
                }
                if (fake.ids[i] == 1 && fake.states[i] == JOB_DONE)
                        later_first = fake.first[i];
        }
        cr_assert(fake.first[0], "a submission's write is its first");
        pthread_mutex_unlock(&fake.lock);
        cr_assert(first_try, "the job.run's first try was not first");
        cr_assert(seen_retry, "the job.run's write never landed");
        cr_assert_not(retry_first, "a try after a failed commit was first");
        cr_assert_not(later_first, "a job's later write was first");
        store_close(s);
        job_unref(a);
        job_unref(c);
}

Test(store, a_submission_while_the_disk_is_full_is_refused_and_never_written)
{
        Store *s = open_fake();
        Job *j = new_job(5, "echo");
        StoreHealth h;
        bool probed = false;

        fake.fail = -ENOSPC;
        store_submit(s, j);
        store_flush(s);
        cr_assert(durable(j), "the submitter was not answered");
        cr_assert_eq(j->store.error, -ENOSPC, "store.error %d", j->store.error);
        cr_assert(store_error_transient(j->store.error), "not an error to retry later");
        cr_assert(final_durable(j), "a waiter on its final state would wait forever");
        cr_assert_eq(s->refused, 1);
        pthread_mutex_lock(&fake.lock);
        cr_assert_eq(fake.n_submitted, 1, "the owner was told %d times", fake.n_submitted);
        cr_assert_eq(fake.submitted_errors[0], -ENOSPC, "the owner heard %d",
                     fake.submitted_errors[0]);
        cr_assert_not(fake.heard_before[0], "the submitter heard before the owner");
        pthread_mutex_unlock(&fake.lock);
        /* its owner cancels it: that change is not written either */
        j->state = JOB_CANCELLED;
        store_put(s, j, false, false);
        wait_failing(s, true);
        store_health(s, &h);
        cr_assert_eq(h.pending_writes, 0, "%zu writes held for a refused job", h.pending_writes);
        /* nothing held: a probe write says when the disk takes writes again */
        wait_commits(3);
        set_fail(0);
        wait_failing(s, false);
        store_flush(s);
        pthread_mutex_lock(&fake.lock);
        for (int i = 1; i < fake.n_commits && i < MAX_COMMITS; i++)
                probed |= fake.metas[i] > 0;
        pthread_mutex_unlock(&fake.lock);
        cr_assert(probed, "no probe write while nothing was held");
        cr_assert_eq(landed(5, NULL), 0, "a refused submission was written");
        store_close(s);
        job_unref(j);
}

Test(store, the_owner_hears_a_refusal_before_the_submitter_and_a_commit_after)
{
        Store *s = open_fake();
        Job *a = new_job(11, "echo"), *b = new_job(12, "echo"), *c = new_job(13, "echo");

        store_submit(s, a);
        store_put(s, b, true, true); /* a deferred first write, not a submission */
        store_flush(s);
        cr_assert(durable(a) && durable(b));
        fake.fail = -EINVAL; /* a record the database refuses: the submission is refused */
        store_submit(s, c);
        store_flush(s);
        cr_assert(durable(c));
        pthread_mutex_lock(&fake.lock);
        cr_assert_eq(fake.n_submitted, 2,
                     "the owner was told %d times, not once per "
                     "submission",
                     fake.n_submitted);
        cr_assert_eq(fake.submitted_ids[0], 11);
        cr_assert_eq(fake.submitted_errors[0], 0, "a committed submission came to %d",
                     fake.submitted_errors[0]);
        cr_assert_eq(fake.submitted_ids[1], 13);
        cr_assert_eq(fake.submitted_errors[1], -EINVAL);
        /* a commit is told once the submitter is woken (its job starts behind the answer),
         * a refusal before (the job is cancelled by the time the submitter hears) */
        cr_assert(fake.heard_before[0], "job 11 was told to its owner before its submitter");
        cr_assert_not(fake.heard_before[1], "job 13's submitter heard of the refusal first");
        pthread_mutex_unlock(&fake.lock);
        store_close(s);
        job_unref(a);
        job_unref(b);
        job_unref(c);
}

Test(store, attempts_back_off_while_the_disk_is_full)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        int n;

        set_fail(-ENOSPC);
        store_put(s, a, false, false);
        wait_failing(s, true);
        usleep(1600 * 1000); /* attempts at 0, 0.1, 0.3, 0.7 and 1.5 s */
        pthread_mutex_lock(&fake.lock);
        n = fake.n_commits - 1; /* the submission's */
        cr_assert(n >= 3 && n <= 7, "%d attempts in 1.6 s", n);
        for (int i = 2; i + 1 < fake.n_commits && i < 5; i++) {
                uint64_t gap = fake.at_ns[i + 1] - fake.at_ns[i];
                uint64_t want = STORE_RETRY_MIN_NS << (i - 1);
                cr_assert(gap >= want * 9 / 10,
                          "attempt %d came %llu ms after the one before, "
                          "not %llu",
                          i + 1, (unsigned long long)(gap / NSEC_PER_MSEC),
                          (unsigned long long)(want / NSEC_PER_MSEC));
        }
        pthread_mutex_unlock(&fake.lock);
        set_fail(0);
        wait_failing(s, false);
        store_close(s);
        job_unref(a);
}

Test(store, a_write_that_is_not_a_jobs_hears_the_error_without_the_backoff)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        uint64_t t0;

        set_fail(-ENOSPC);
        store_put(s, a, false, false);
        wait_commits(6); /* the backoff is 1.6 s by now */
        t0 = clock_now_ns(CLOCK_MONOTONIC);
        cr_assert_eq(store_set_meta(s, "k", 1), -ENOSPC);
        cr_assert(clock_now_ns(CLOCK_MONOTONIC) - t0 < NSEC_PER_SEC,
                  "a synchronous write waited out the backoff");
        cr_assert(store_failing(s));
        set_fail(0);
        wait_failing(s, false);
        store_flush(s);
        cr_assert_eq(landed(1, NULL), 2, "the held write was dropped with the meta write");
        store_close(s);
        job_unref(a);
}

Test(store, a_server_that_answers_but_refuses_is_retried_without_a_growing_backoff)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);

        s->backend = &fake_answering_backend;
        set_fail(-EIO);
        store_put(s, a, false, false);
        wait_commits(9); /* the submission, then 8 attempts: 0.1 s apart, not 0.1 .. 12.7 s */
        pthread_mutex_lock(&fake.lock);
        for (int i = 2; i + 1 < 9; i++) {
                uint64_t gap = fake.at_ns[i + 1] - fake.at_ns[i];
                cr_assert(gap < 2 * STORE_RETRY_MIN_NS,
                          "attempt %d came %llu ms after the one before: a growing backoff", i + 1,
                          (unsigned long long)(gap / NSEC_PER_MSEC));
        }
        pthread_mutex_unlock(&fake.lock);
        set_fail(0);
        wait_failing(s, false);
        store_close(s);
        job_unref(a);
}

Test(store, a_server_back_is_written_to_at_once_not_after_the_backoff)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        uint64_t t0;
        JobState st;

        set_fail(-EIO);
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_commits(6); /* the submission, attempts at 0, 0.1, 0.3, 0.7 and 1.5 s: the
                          * next one 1.6 s on */
        set_fail(0);
        t0 = clock_now_ns(CLOCK_MONOTONIC);
        store_retry_now(s); /* as a fleet's link does when its Redis is back */
        wait_failing(s, false);
        cr_assert(clock_now_ns(CLOCK_MONOTONIC) - t0 < NSEC_PER_SEC,
                  "the held write waited out the backoff after the server was back");
        store_flush(s);
        cr_assert_eq(landed(1, &st), 2, "the submission and the held write");
        cr_assert_eq(st, JOB_DONE, "the held final write landed as %d", st);
        store_close(s);
        job_unref(a);
}

/* Sets the fake's disk free after 300 ms: the space an operator makes while fiberd
 * stops. */
static void *free_later(void *arg)
{
        usleep(300 * 1000);
        set_fail(0);
        return NULL;
}

Test(store, close_writes_what_is_held_once_space_returns)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        pthread_t t;

        set_fail(-ENOSPC);
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_failing(s, true);
        cr_assert_eq(pthread_create(&t, NULL, free_later, NULL), 0);
        store_close(s); /* tries on (STORE_CLOSE_RETRY_NS) */
        pthread_join(t, NULL);
        cr_assert(final_durable(a));
        cr_assert_eq(a->store.error, 0);
        cr_assert_eq(landed(1, NULL), 2);
        job_unref(a);
}

/* ------------------------------------------------------------ waiters ----------- */

typedef struct Waiter {
        Store *s;
        Job *j;
        uint64_t timeout_ns; /* SCHED_FOREVER = none */
        int r;
        uint64_t waited_ns;
} Waiter;

static void waiter_main(void *arg)
{
        Waiter *w = arg;
        uint64_t t0 = sched_now_ns();

        w->r = store_wait_until(w->s, w->j, true, w->j->store.life,
                                w->timeout_ns == SCHED_FOREVER
                                        ? SCHED_FOREVER
                                        : sched_deadline_after(w->timeout_ns));
        w->waited_ns = sched_now_ns() - t0;
}

static Fiber *start_waiter(SchedulingGroup *g, Waiter *w)
{
        Fiber *f = NULL;

        cr_assert_eq(fiber_create(&f, &(FiberAttr){.group = g}, waiter_main, w), 0);
        return f;
}

Test(store, waiters_are_answered_once_written_or_give_up_at_their_deadline)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING), *b = accepted(s, 2, JOB_RUNNING);
        SchedulingGroup *g = NULL;
        Waiter early = {.s = s, .j = a, .timeout_ns = 200 * NSEC_PER_MSEC};
        Waiter patient = {.s = s, .j = a, .timeout_ns = SCHED_FOREVER};
        Waiter busy = {.s = s, .j = b, .timeout_ns = 0};
        Fiber *f1, *f2, *f3;

        cr_assert_eq(sched_group_new(&g, &(SchedGroupConfig){.workers = 2}), 0);
        /* a store that writes is waited for past the deadline: a commit is short */
        fake.gate_shut = true;
        b->state = JOB_DONE;
        store_put(s, b, false, false);
        wait_in_commit();
        f3 = start_waiter(g, &busy);
        usleep(300 * 1000);
        open_gate();
        cr_assert_eq(fiber_join(f3), 0);
        cr_assert_eq(busy.r, 0, "gave up on a store that writes (%d)", busy.r);

        /* a full disk: one waiter gives up at its deadline, one waits for the write */
        set_fail(-ENOSPC);
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_failing(s, true);
        f1 = start_waiter(g, &early);
        f2 = start_waiter(g, &patient);
        cr_assert_eq(fiber_join(f1), 0);
        cr_assert_eq(early.r, -ETIMEDOUT, "a waiter past its deadline got %d", early.r);
        cr_assert(early.waited_ns >= 190 * NSEC_PER_MSEC && early.waited_ns < 2 * NSEC_PER_SEC,
                  "gave up after %llu ms", (unsigned long long)(early.waited_ns / NSEC_PER_MSEC));
        usleep(200 * 1000);
        cr_assert_not(final_durable(a));
        set_fail(0);
        cr_assert_eq(fiber_join(f2), 0);
        cr_assert_eq(patient.r, 0, "the patient waiter got %d", patient.r);
        cr_assert_eq(landed(1, NULL), 2);
        store_close(s); /* its thread may still be waking the group's worker */
        sched_group_free(g);
        job_unref(a);
        job_unref(b);
}

/* job.retry revives a final job (store_revive()): its next end waits for its own write,
 * a write read in the last life publishes nothing for the new one, and a waiter that
 * read the last life hears that its end is on disk. */
Test(store, a_revived_job_waits_for_its_own_end)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        uint16_t life;
        JobState st = JOB_NEW;

        a->state = JOB_FAILED;
        store_put(s, a, false, false);
        store_flush(s);
        cr_assert(final_durable(a));
        life = a->store.life;

        /* a write of that life is being committed as the job is revived */
        fake.gate_shut = true;
        store_put(s, a, false, false);
        wait_in_commit();
        store_revive(s, a);
        cr_assert_eq(a->store.life, (uint16_t)(life + 1));
        cr_assert_not(final_durable(a), "a revived job's new end is not on disk yet");
        a->state = JOB_QUEUED;
        open_gate();
        store_flush(s);
        cr_assert_eq(landed(1, &st), 3);
        cr_assert_eq(st, JOB_FAILED, "the write read in the last life landed");
        cr_assert_not(final_durable(a), "a write of the last life published the new end");
        /* a waiter that read the last life: that end is on disk */
        cr_assert_eq(store_wait_until(s, a, true, life, sched_deadline_after(0)), 0);

        /* the new life ends: its own write publishes it */
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        store_flush(s);
        cr_assert(final_durable(a));
        cr_assert_eq(landed(1, &st), 4);
        cr_assert_eq(st, JOB_DONE);
        store_close(s);
        job_unref(a);
}

/* A revive while the end is still being written changes nothing: that end's waiters
 * hear its write, as before. */
Test(store, a_revive_during_the_ends_write_leaves_it_to_its_waiters)
{
        Store *s = open_fake();
        Job *b = accepted(s, 1, JOB_RUNNING);
        uint16_t life = b->store.life;

        b->state = JOB_CANCELLED;
        fake.gate_shut = true;
        store_put(s, b, false, false);
        wait_in_commit();
        store_revive(s, b);
        cr_assert_eq(b->store.life, life, "a new life before the last end was on disk");
        open_gate();
        store_flush(s);
        cr_assert(final_durable(b), "the end's write did not reach its waiters");
        store_close(s);
        job_unref(b);
}

Test(store, a_drain_waits_for_held_writes_a_while)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        uint64_t t0;
        pthread_t t;

        set_fail(-ENOSPC);
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_failing(s, true);
        t0 = clock_now_ns(CLOCK_MONOTONIC);
        store_drain(s, 200 * NSEC_PER_MSEC); /* the disk stays full: back after 200 ms */
        cr_assert(clock_now_ns(CLOCK_MONOTONIC) - t0 < 2 * NSEC_PER_SEC);
        cr_assert_not(final_durable(a));
        cr_assert_eq(pthread_create(&t, NULL, free_later, NULL), 0);
        store_drain(s, 10 * NSEC_PER_SEC); /* space returns meanwhile */
        pthread_join(t, NULL);
        cr_assert(final_durable(a), "store_drain() returned before the held write landed");
        cr_assert_eq(landed(1, NULL), 2);
        store_close(s);
        job_unref(a);
}

Test(store, close_drops_what_it_still_cannot_write_and_says_so)
{
        Store *s = open_fake();
        Job *a = accepted(s, 1, JOB_RUNNING);
        uint64_t t0;

        s->close_retry_ns = 300 * NSEC_PER_MSEC;
        set_fail(-ENOSPC);
        a->state = JOB_DONE;
        store_put(s, a, false, false);
        wait_failing(s, true);
        t0 = clock_now_ns(CLOCK_MONOTONIC);
        store_close(s); /* the disk stays full: it gives up */
        cr_assert(clock_now_ns(CLOCK_MONOTONIC) - t0 < 5 * NSEC_PER_SEC,
                  "store_close() took %llu ms",
                  (unsigned long long)((clock_now_ns(CLOCK_MONOTONIC) - t0) / NSEC_PER_MSEC));
        cr_assert(final_durable(a), "a waiter on the dropped write would wait forever");
        cr_assert_eq(a->store.error, -ENOSPC);
        cr_assert_eq(landed(1, NULL), 1, "only its submission is on disk");
        job_unref(a);
}
