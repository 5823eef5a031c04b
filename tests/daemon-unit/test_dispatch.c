/* SPDX-License-Identifier: MIT */
/* The dispatcher (daemon/job/dispatch.c) with a fake owner instead of the job table: its
 * DispatchOps are a mutex, a run hook that parks each job until the test lets it go,
 * and a listener that records the order jobs start in. A small Scheduler runs the
 * supervisor and job fibers. Admission (per-user queue cap, token bucket), the
 * max_running and per-user bounds, priority then submission order, a removed job
 * leaving the queue, and round robin between users at equal priority. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "daemon/server/creds.h"
#include "daemon/job/dispatch.h"
#include "daemon/job/job.h"
#include "daemon/job/jobstate.h"

enum { MAX_JOBS = 16 };

typedef struct Owner {
        pthread_mutex_t lock;
        pthread_cond_t changed; /* broadcast at each transition */
        Dispatcher d;
        JobMachine machine;
        uint64_t started[MAX_JOBS]; /* ids in dispatch order */
        int n_started, n_ended;
        int running_now, running_max; /* in the run hook */
        FiberEvent release[MAX_JOBS]; /* by id: the run hook returns once set */
} Owner;

static Owner o;
static Scheduler *sched;
static SchedulingGroup *supervise;

static void op_lock(void *owner)
{
        pthread_mutex_lock(&((Owner *)owner)->lock);
}

static void op_unlock(void *owner)
{
        pthread_mutex_unlock(&((Owner *)owner)->lock);
}

static int op_run(void *owner, Job *j)
{
        Owner *ow = owner;
        int r;

        pthread_mutex_lock(&ow->lock);
        if (++ow->running_now > ow->running_max)
                ow->running_max = ow->running_now;
        pthread_mutex_unlock(&ow->lock);
        r = fiber_event_wait(&ow->release[j->id], SCHED_FOREVER);
        pthread_mutex_lock(&ow->lock);
        ow->running_now--;
        pthread_mutex_unlock(&ow->lock);
        return r;
}

static int op_cancel(void *owner, Job *j, bool timed_out)
{
        return -EALREADY; /* no deadlines in these tests */
}

static bool op_stopping_locked(void *owner)
{
        return false;
}

static void op_idle_locked(void *owner)
{
}

static void op_set_detached_locked(void *owner, Job *j, bool detached)
{
}

static const DispatchOps ops = {
        .lock = op_lock,
        .unlock = op_unlock,
        .run = op_run,
        .cancel = op_cancel,
        .stopping_locked = op_stopping_locked,
        .idle_locked = op_idle_locked,
        .set_detached_locked = op_set_detached_locked,
};

/* The listener: under the owner's lock (the dispatcher's transitions are). */
static void heard(void *ctx, Job *j, JobState from, JobEvent ev)
{
        Owner *ow = ctx;

        if (ev == JOB_EV_DISPATCH && ow->n_started < MAX_JOBS)
                ow->started[ow->n_started++] = j->id;
        if (job_state_final(j->state))
                ow->n_ended++;
        pthread_cond_broadcast(&ow->changed);
}

static const JobStateListener listeners[] = {{"test", heard}};

static void setup(unsigned max_running)
{
        SchedConfig c = {.groups = 1,
                         .group_size = 2,
                         .no_binding = true,
                         .control = {.stall_threshold_ns = SCHED_FOREVER}};

        memset(&o, 0, sizeof(o));
        pthread_mutex_init(&o.lock, NULL);
        pthread_cond_init(&o.changed, NULL);
        for (int i = 0; i < MAX_JOBS; i++)
                fiber_event_init(&o.release[i]);
        o.machine = (JobMachine){.listeners = listeners, .n_listeners = 1, .ctx = &o};
        cr_assert_eq(sched_new(&sched, &c), 0);
        cr_assert_eq(sched_group_new(&supervise, &(SchedGroupConfig){.workers = 1}), 0);
        dispatch_init(&o.d, sched, supervise, max_running, &ops, &o, &o.machine);
}

/* A job @id of @uid at @priority, submitted (queued) and in the dispatcher's queue. */
static Job *push(uint64_t id, uid_t uid, int priority)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};
        JobOrigin origin = {0};
        Creds *c = NULL;
        Job *j = NULL;

        cr_assert_eq(creds_new(uid, uid, NULL, 0, &c), 0);
        origin.creds = c;
        cr_assert_eq(job_new(&j, NULL, id, &origin, NULL, "echo", &args, priority, 0, 0, "default"),
                     0);
        creds_unref(c);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(job_transition(&o.machine, j, JOB_EV_SUBMIT, NULL), 0);
        cr_assert_eq(dispatch_push_locked(&o.d, j), 0);
        pthread_mutex_unlock(&o.lock);
        return j;
}

static void pump(void)
{
        pthread_mutex_lock(&o.lock);
        dispatch_pump_locked(&o.d);
        pthread_mutex_unlock(&o.lock);
}

/* Waits (10 s at most) until @started jobs have started and @ended have ended. */
static void wait_for(int started, int ended)
{
        struct timespec until;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 10;
        pthread_mutex_lock(&o.lock);
        while (o.n_started < started || o.n_ended < ended)
                cr_assert_neq(pthread_cond_timedwait(&o.changed, &o.lock, &until), ETIMEDOUT,
                              "waited for %d started / %d ended, saw %d / %d", started, ended,
                              o.n_started, o.n_ended);
        pthread_mutex_unlock(&o.lock);
}

/* Waits until only the test holds @j (its supervisor let go of it), then drops it. */
static void drop(Job *j)
{
        for (int i = 0; __atomic_load_n(&j->refs, __ATOMIC_ACQUIRE) > 1; i++) {
                cr_assert_lt(i, 10000, "job %llu still referenced", (unsigned long long)j->id);
                sched_yield();
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
        }
        job_unref(j);
}

/* Runs the jobs one by one as they start; returns with @n ended. */
static void run_all(int n)
{
        for (int i = 0; i < n; i++) {
                wait_for(i + 1, i);
                fiber_event_set(&o.release[o.started[i]]);
                wait_for(i + 1, i + 1);
        }
}

Test(dispatch, admission_caps_queued_jobs_and_the_submit_rate)
{
        Job *a, *b;

        setup(1);
        pthread_mutex_lock(&o.lock);
        dispatch_set_quotas_locked(&o.d, &(JobQuotas){.max_queued_per_user = 2, .exempt_uid = 999});
        cr_assert_eq(dispatch_admit_locked(&o.d, 1000), 0);
        pthread_mutex_unlock(&o.lock);
        a = push(1, 1000, 0);
        b = push(2, 1000, 0);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_admit_locked(&o.d, 1000), -EDQUOT);
        cr_assert_eq(dispatch_admit_locked(&o.d, 1001), 0, "another user is not capped");
        cr_assert_eq(dispatch_admit_locked(&o.d, 0), 0, "root is exempt");
        cr_assert_eq(dispatch_admit_locked(&o.d, 999), 0, "fiberd's own uid is exempt");
        dispatch_set_quotas_locked(&o.d, &(JobQuotas){.submit_rate_per_user = 1,
                                                      .submit_burst_per_user = 2,
                                                      .exempt_uid = 999});
        cr_assert_eq(dispatch_admit_locked(&o.d, 2000), 0);
        cr_assert_eq(dispatch_admit_locked(&o.d, 2000), 0);
        cr_assert_eq(dispatch_admit_locked(&o.d, 2000), -EBUSY, "a burst of 2 took a third");
        dispatch_remove_locked(&o.d, a);
        dispatch_remove_locked(&o.d, b);
        cr_assert_eq(dispatch_queued_locked(&o.d), 0);
        pthread_mutex_unlock(&o.lock);
        job_unref(a);
        job_unref(b);
}

Test(dispatch, priority_then_submission_order_under_max_running)
{
        Job *j[3];

        setup(1);
        j[0] = push(1, 1000, 5);
        j[1] = push(2, 1000, 1);
        j[2] = push(3, 1000, 1);
        pump();
        wait_for(1, 0);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.running, 1);
        cr_assert_eq(dispatch_queued_locked(&o.d), 2);
        pthread_mutex_unlock(&o.lock);
        run_all(3);
        cr_assert_eq(o.started[0], 2, "first %llu", (unsigned long long)o.started[0]);
        cr_assert_eq(o.started[1], 3, "then %llu", (unsigned long long)o.started[1]);
        cr_assert_eq(o.started[2], 1, "last %llu", (unsigned long long)o.started[2]);
        cr_assert_eq(o.running_max, 1, "%d ran at once under max_running 1", o.running_max);
        for (int i = 0; i < 3; i++) {
                cr_assert_eq(j[i]->state, JOB_DONE, "job %d %s", i, job_state_name(j[i]->state));
                drop(j[i]);
        }
        pthread_mutex_lock(&o.lock);
        cr_assert(dispatch_idle_locked(&o.d));
        pthread_mutex_unlock(&o.lock);
}

Test(dispatch, max_running_per_user_leaves_room_for_others)
{
        Job *j[4];

        setup(4);
        pthread_mutex_lock(&o.lock);
        dispatch_set_quotas_locked(&o.d,
                                   &(JobQuotas){.max_running_per_user = 1, .exempt_uid = 999});
        pthread_mutex_unlock(&o.lock);
        j[0] = push(1, 1000, 0);
        j[1] = push(2, 1000, 0);
        j[2] = push(3, 1000, 0);
        j[3] = push(4, 1001, 0);
        pump();
        wait_for(2, 0);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.running, 2, "%u running with 2 users capped at 1", o.d.running);
        cr_assert_eq(dispatch_queued_locked(&o.d), 2);
        cr_assert_eq(o.started[0], 1);
        cr_assert_eq(o.started[1], 4, "user 1001 waited behind 1000's queue");
        pthread_mutex_unlock(&o.lock);
        fiber_event_set(&o.release[1]);
        wait_for(3, 1);
        cr_assert_eq(o.started[2], 2);
        for (int id = 2; id <= 4; id++)
                fiber_event_set(&o.release[id]);
        wait_for(4, 4);
        for (int i = 0; i < 4; i++)
                drop(j[i]);
}

Test(dispatch, a_removed_job_leaves_the_queue)
{
        Job *a, *b;

        setup(1);
        a = push(1, 1000, 0);
        b = push(2, 1000, 0);
        pump();
        wait_for(1, 0);
        pthread_mutex_lock(&o.lock);
        dispatch_remove_locked(&o.d, b);
        cr_assert_eq(dispatch_queued_locked(&o.d), 0);
        cr_assert_eq(b->heap_index, SIZE_MAX);
        cr_assert_null(dispatch_first_locked(&o.d));
        dispatch_remove_locked(&o.d, b); /* not queued: nothing happens */
        cr_assert_eq(dispatch_queued_locked(&o.d), 0);
        pthread_mutex_unlock(&o.lock);
        fiber_event_set(&o.release[1]);
        wait_for(1, 1);
        drop(a);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.n_started, 1, "the removed job started");
        cr_assert(dispatch_idle_locked(&o.d));
        pthread_mutex_unlock(&o.lock);
        job_unref(b);
}

Test(dispatch, users_take_turns_at_equal_priority)
{
        static const uint64_t want[] = {1, 5, 2, 6, 3, 4};
        Job *j[6];

        setup(1);
        for (int i = 0; i < 4; i++)
                j[i] = push(1 + (uint64_t)i, 1000, 0);
        j[4] = push(5, 1001, 0);
        j[5] = push(6, 1001, 0);
        pump();
        run_all(6);
        for (int i = 0; i < 6; i++)
                cr_assert_eq(o.started[i], want[i], "start %d was job %llu, not %llu", i,
                             (unsigned long long)o.started[i], (unsigned long long)want[i]);
        for (int i = 0; i < 6; i++)
                drop(j[i]);
}
