/* SPDX-License-Identifier: MIT */
/* The dispatcher (daemon/job/dispatch.c) with a fake owner instead of the job table: its
 * DispatchOps are a mutex, a run hook that parks each job until the test lets it go
 * (or, for a stubborn job, blocks its worker thread, ignoring cancellation), a cancel
 * that does what the table's does, and a listener that records the order jobs start in.
 * A small Scheduler runs the dispatcher, supervisor and job fibers. Runs that end
 * together are each concluded once and give back their slots and JobLive; a deadline
 * cancels a running job through its supervisor; a cancelled job whose code does not
 * return is detached after the grace and concluded when it returns. Admission
 * (per-user queue cap, token bucket), the
 * max_running and per-user bounds, priority then submission order (also in a queue
 * hundreds deep, and through a queue's FIFO ring and the removals from its middle), a
 * removed job leaving the queue, the deadline scan, round robin between users at equal priority; pauses of a class or
 * a plugin and caps on a class's or a plugin's running jobs hold their jobs queued
 * without holding up the same user's other jobs, and let them go on resume, on a
 * raised cap or when one of theirs ends. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
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
        int detached;                 /* the detached gauge (set_detached_locked) */
        FiberEvent release[MAX_JOBS]; /* by id: the run hook returns once set */
        bool stubborn[MAX_JOBS];      /* by id: the run hook blocks its thread until let_go */
        bool let_go;                  /* atomic: stubborn run hooks return */
        int stamps_out_of_order;      /* a start before its submission, an end before its
                                       * start */
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
        if (j->id >= MAX_JOBS) {
                r = 0; /* a job of a burst: it returns at once */
        } else if (ow->stubborn[j->id]) {
                JobRun *run = j->live->run;
                /* inside the plugin's code, as the plugin host says (JobRun.host_job) */
                pthread_mutex_lock(&run->host_lock);
                run->host_job = ow;
                pthread_mutex_unlock(&run->host_lock);
                /* code that never comes back to a yield point: a cancel cannot reach it */
                while (!__atomic_load_n(&ow->let_go, __ATOMIC_ACQUIRE)) {
                        struct timespec ts = {0, 1000000};
                        nanosleep(&ts, NULL);
                }
                pthread_mutex_lock(&run->host_lock);
                run->host_job = NULL;
                pthread_mutex_unlock(&run->host_lock);
                r = 0;
        } else {
                r = fiber_event_wait(&ow->release[j->id], SCHED_FOREVER);
        }
        pthread_mutex_lock(&ow->lock);
        ow->running_now--;
        pthread_mutex_unlock(&ow->lock);
        return r;
}

/* What the job table's cancel does to a running job (jobtable.c): the flag, the time,
 * the fiber cancelled, its run's supervisor woken or started. */
static int op_cancel(void *owner, Job *j, bool timed_out)
{
        Owner *ow = owner;
        int r = 0;

        pthread_mutex_lock(&ow->lock);
        if (job_state_final(j->state) || j->state != JOB_RUNNING || j->cancel_requested) {
                r = -EALREADY;
        } else {
                j->timed_out = timed_out;
                job_set_cancel_requested(j);
                if (j->live->run)
                        j->live->run->cancel_mono_ns = sched_now_ns();
                if (j->live->fiber)
                        fiber_cancel(j->live->fiber);
                if (j->live->run) {
                        fiber_event_set(&j->live->run->wake);
                        dispatch_supervise_locked(&ow->d, j);
                }
        }
        pthread_mutex_unlock(&ow->lock);
        return r;
}

static bool op_stopping_locked(void *owner)
{
        return false;
}

static void op_idle_locked(void *owner)
{
}

/* The table's gauge (jobtable_set_detached_locked()): the job's flag and a count. */
static void op_set_detached_locked(void *owner, Job *j, bool detached)
{
        if (j->detached == detached)
                return;
        __atomic_store_n(&j->detached, detached, __ATOMIC_RELEASE);
        ((Owner *)owner)->detached += detached ? 1 : -1;
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
        /* a round's starts and ends share one clock read: each stamp still follows the
         * one before it */
        if (ev == JOB_EV_DISPATCH && j->live->started_mono_ns < j->live->submitted_mono_ns)
                ow->stamps_out_of_order++;
        if (job_state_final(j->state)) {
                ow->n_ended++;
                if (j->live && j->live->started_mono_ns &&
                    (j->finished_mono_ns < j->live->started_mono_ns ||
                     j->finished_ms < j->started_ms))
                        ow->stamps_out_of_order++;
        }
        pthread_cond_broadcast(&ow->changed);
}

static const JobStateListener listeners[] = {{"test", heard}};

static void setup(unsigned max_running)
{
        static const SchedClassConfig classes[] = {{"default", 100}, {"batch", 100}};
        SchedConfig c = {.groups = 1,
                         .group_size = 2,
                         .no_binding = true,
                         .classes = classes,
                         .nclasses = 2,
                         .control = {.stall_threshold_ns = SCHED_FOREVER}};

        memset(&o, 0, sizeof(o));
        pthread_mutex_init(&o.lock, NULL);
        pthread_cond_init(&o.changed, NULL);
        for (int i = 0; i < MAX_JOBS; i++)
                fiber_event_init(&o.release[i]);
        o.machine = (JobMachine){.listeners = listeners, .n_listeners = 1, .ctx = &o};
        cr_assert_eq(sched_new(&sched, &c), 0);
        cr_assert_eq(sched_group_new(&supervise, &(SchedGroupConfig){.workers = 1}), 0);
        cr_assert_eq(dispatch_init(&o.d, sched, supervise, max_running, &ops, &o, &o.machine), 0);
}

/* A job @id of @uid at @priority in class @cls (0-based: Job.sched_class is 1 + it) of
 * plugin @plugin with a timeout of @timeout_ns (0 = none), submitted (queued) and in the
 * dispatcher's queue. */
static Job *push_timed(uint64_t id, uid_t uid, int priority, unsigned cls, const char *plugin,
                       uint64_t timeout_ns)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};
        JobOrigin origin = {0};
        Creds *c = NULL;
        Job *j = NULL;

        cr_assert_eq(creds_new(uid, uid, NULL, 0, &c), 0);
        origin.creds = c;
        cr_assert_eq(job_new(&j, NULL, id, &origin, NULL, plugin, &args, priority, timeout_ns, cls,
                             cls ? "batch" : "default"),
                     0);
        creds_unref(c);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(job_transition(&o.machine, j, JOB_EV_SUBMIT, NULL), 0);
        cr_assert_eq(dispatch_push_locked(&o.d, j), 0);
        pthread_mutex_unlock(&o.lock);
        return j;
}

static Job *push_to(uint64_t id, uid_t uid, int priority, unsigned cls, const char *plugin)
{
        return push_timed(id, uid, priority, cls, plugin, 0);
}

/* A job of plugin "echo" in the default class. */
static Job *push(uint64_t id, uid_t uid, int priority)
{
        return push_to(id, uid, priority, 0, "echo");
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
        cr_assert_eq(b->live->heap_index, SIZE_MAX);
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

/* Takes the @left queued jobs one by one: each in (priority, id) order after the one
 * before, none of the ids marked in @gone (@ngone of them) taken out earlier, each out of
 * the queue once taken; the queue is empty then. Under o.lock. */
static void drain_in_order(int left, const bool *gone, size_t ngone)
{
        int prev_priority = INT_MIN;
        uint64_t prev_id = 0;

        for (int n = 0; n < left; n++) {
                Job *first = dispatch_first_locked(&o.d);
                cr_assert_not_null(first, "the queue ran dry after %d of %d", n, left);
                cr_assert(first->id >= ngone || !gone[first->id],
                          "job %llu was taken out, and came back", (unsigned long long)first->id);
                cr_assert(first->priority > prev_priority ||
                                  (first->priority == prev_priority && first->id > prev_id),
                          "job %llu (priority %d) came after job %llu (priority %d)",
                          (unsigned long long)first->id, first->priority,
                          (unsigned long long)prev_id, prev_priority);
                prev_priority = first->priority;
                prev_id = first->id;
                dispatch_remove_locked(&o.d, first);
                cr_assert_eq(first->live->heap_index, SIZE_MAX);
        }
        cr_assert_null(dispatch_first_locked(&o.d));
        cr_assert_eq(dispatch_queued_locked(&o.d), 0);
}

/* Hundreds of jobs in one lane, pushed out of id order at mixed priorities, some taken
 * out of the middle: the queue gives the rest by (priority, id), each once. */
Test(dispatch, a_deep_queue_gives_its_jobs_by_priority_then_id)
{
        enum { N = 500 };
        static Job *j[N];
        uint32_t rng = 12345;
        int left = 0;
        bool gone[100 + N] = {false};

        setup(1);
        for (int i = 0; i < N; i++) {
                uint64_t id = 100 + (uint64_t)(i * 7919 % N); /* every id once, shuffled */
                rng = rng * 1103515245 + 12345;
                j[i] = push(id, 1000, (int)((rng >> 16) % 7) - 3);
        }
        pthread_mutex_lock(&o.lock);
        for (int i = 0; i < N; i++)
                if (j[i]->id % 5 == 0) {
                        dispatch_remove_locked(&o.d, j[i]);
                        cr_assert_eq(j[i]->live->heap_index, SIZE_MAX);
                        gone[j[i]->id] = true;
                } else {
                        left++;
                }
        cr_assert_eq(dispatch_queued_locked(&o.d), (size_t)left);
        drain_in_order(left, gone, ELEMENTSOF(gone));
        pthread_mutex_unlock(&o.lock);
        for (int i = 0; i < N; i++)
                job_unref(j[i]);
}

/* Jobs in submission order go to the lane's FIFO ring, the few that would break its
 * order (a higher priority) to its heap; removals from the middle of the ring, the
 * compaction they cause, the ring's growth, and the deadline scan over both: the queue
 * still gives every job left by (priority, id), each once. */
Test(dispatch, a_queue_in_submission_order_keeps_it_through_removals)
{
        enum { N = 600 };
        static Job *j[2 * N];
        Job *expired[8];
        int left = 0;
        bool gone[2 * N + 1] = {false};

        setup(1);
        for (int i = 0; i < N; i++) {
                uint64_t id = (uint64_t)i + 1;
                j[i] = push(id, 1000, id % 50 == 0 ? -1 : 0);
                if (id % 50 == 0)
                        cr_assert(!(j[i]->live->heap_index & JOB_QUEUE_FIFO),
                                  "job %llu came ahead of the ring's tail, yet went to the ring",
                                  (unsigned long long)id);
                else
                        cr_assert(j[i]->live->heap_index & JOB_QUEUE_FIFO,
                                  "job %llu came in order, yet went to the heap",
                                  (unsigned long long)id);
        }
        pthread_mutex_lock(&o.lock);
        /* two in three taken out of the middle: the ring is compacted on the way */
        for (int i = 0; i < N; i++)
                if (j[i]->id % 3 != 0 && j[i]->id != N) {
                        dispatch_remove_locked(&o.d, j[i]);
                        cr_assert_eq(j[i]->live->heap_index, SIZE_MAX);
                        gone[j[i]->id] = true;
                }
        pthread_mutex_unlock(&o.lock);
        for (int i = N; i < 2 * N; i++)
                j[i] = push((uint64_t)i + 1, 1000, 0); /* the ring grows past its first size */
        pthread_mutex_lock(&o.lock);
        for (int i = 0; i < 2 * N; i++)
                left += !gone[j[i]->id];
        cr_assert_eq(dispatch_queued_locked(&o.d), (size_t)left);
        /* deadlines: three jobs past theirs, one in the heap, two in the ring */
        uint64_t now = sched_now_ns();
        j[299]->live->deadline_ns = now - 1;   /* id 300: priority -1, the heap */
        j[599]->live->deadline_ns = now;       /* id 600: the ring */
        j[2 * N - 1]->live->deadline_ns = now; /* the last one */
        j[2]->live->deadline_ns = now - 1;     /* id 3 */
        j[1]->live->deadline_ns = now - 1;     /* id 2: taken out, not counted */
        cr_assert_eq(dispatch_expired_locked(&o.d, now, expired, ELEMENTSOF(expired)), 4);
        cr_assert_eq(dispatch_expired_locked(&o.d, now, expired, 2), 2, "the bound is not kept");
        drain_in_order(left, gone, ELEMENTSOF(gone));
        cr_assert_eq(dispatch_expired_locked(&o.d, now, expired, ELEMENTSOF(expired)), 0);
        pthread_mutex_unlock(&o.lock);
        for (int i = 0; i < 2 * N; i++)
                job_unref(j[i]);
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

/* ------------------------------------------------------------ pauses and caps ---- */

/* Queued jobs now: in all, and those a pause or a cap holds. */
static void assert_queued(size_t queued, size_t held)
{
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_queued_locked(&o.d), queued, "%zu queued, not %zu",
                     dispatch_queued_locked(&o.d), queued);
        cr_assert_eq(dispatch_count_locked(&o.d, 0, NULL, true), held, "%zu held, not %zu",
                     dispatch_count_locked(&o.d, 0, NULL, true), held);
        pthread_mutex_unlock(&o.lock);
}

/* The dispatch transition happens inside the pump, under the lock: what has started is
 * known as soon as it returns. */
static int started_now(void)
{
        int n;

        pthread_mutex_lock(&o.lock);
        n = o.n_started;
        pthread_mutex_unlock(&o.lock);
        return n;
}

Test(dispatch, a_paused_class_holds_its_jobs_and_not_the_others)
{
        Job *j[4];

        setup(4);
        j[0] = push_to(1, 1000, 0, 1, "echo"); /* batch (sched_class 2), its best job */
        j[1] = push_to(2, 1000, 5, 0, "echo"); /* default */
        j[2] = push_to(3, 1001, 0, 1, "echo"); /* batch, another user */
        j[3] = push_to(4, 1001, 0, 1, "echo");
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_pause_class_locked(&o.d, 2, true), 0);
        cr_assert_eq(dispatch_pause_class_locked(&o.d, 0, true), -EINVAL);
        cr_assert_eq(dispatch_pause_class_locked(&o.d, SCHED_MAX_CLASSES + 1, true), -EINVAL);
        pthread_mutex_unlock(&o.lock);
        pump();
        cr_assert_eq(started_now(), 1, "%d started with batch paused", started_now());
        cr_assert_eq(o.started[0], 2, "job %llu started, not the default class's",
                     (unsigned long long)o.started[0]);
        assert_queued(3, 3);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_count_locked(&o.d, 2, NULL, false), 3);
        cr_assert_eq(dispatch_count_locked(&o.d, 1, NULL, false), 0);
        cr_assert_eq(dispatch_count_locked(&o.d, 0, "echo", false), 3);
        cr_assert_eq(dispatch_count_locked(&o.d, 0, "never", false), 0);
        dispatch_remove_locked(&o.d, j[3]); /* a held job is cancelled as any queued one */
        cr_assert_eq(j[3]->live->heap_index, SIZE_MAX);
        pthread_mutex_unlock(&o.lock);
        assert_queued(2, 2);

        /* running jobs are not touched, and one ending starts nothing held */
        fiber_event_set(&o.release[2]);
        wait_for(1, 1);
        cr_assert_eq(started_now(), 1);
        assert_queued(2, 2);

        /* resume pumps: both start at once */
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_pause_class_locked(&o.d, 2, false), 0);
        pthread_mutex_unlock(&o.lock);
        cr_assert_eq(started_now(), 3);
        assert_queued(0, 0);
        fiber_event_set(&o.release[1]);
        fiber_event_set(&o.release[3]);
        wait_for(3, 3);
        for (int i = 0; i < 3; i++)
                drop(j[i]);
        job_unref(j[3]);
}

Test(dispatch, a_paused_plugin_does_not_hold_up_its_users_other_jobs)
{
        Job *j[3];

        setup(1);
        j[0] = push_to(1, 1000, 0, 0, "slow"); /* the user's best job, paused */
        j[1] = push_to(2, 1000, 9, 0, "echo");
        j[2] = push_to(3, 1000, 9, 0, "echo");
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_pause_plugin_locked(&o.d, "slow", true), 0);
        cr_assert_eq(dispatch_pause_plugin_locked(&o.d, "not-loaded", true), 0);
        cr_assert_eq(dispatch_pause_plugin_locked(&o.d, "never-paused", false), 0);
        pthread_mutex_unlock(&o.lock);
        pump();
        cr_assert_eq(started_now(), 1);
        cr_assert_eq(o.started[0], 2, "job %llu started first", (unsigned long long)o.started[0]);
        assert_queued(2, 1);
        fiber_event_set(&o.release[2]);
        wait_for(2, 1); /* its end pumps: the next echo job, not the paused one */
        cr_assert_eq(o.started[1], 3);
        assert_queued(1, 1);
        fiber_event_set(&o.release[3]);
        wait_for(2, 2);
        cr_assert_eq(started_now(), 2, "the paused plugin's job started");

        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_count_locked(&o.d, 0, "slow", true), 1);
        cr_assert_eq(dispatch_pause_plugin_locked(&o.d, "slow", false), 0);
        pthread_mutex_unlock(&o.lock);
        cr_assert_eq(started_now(), 3, "resume did not start it");
        cr_assert_eq(o.started[2], 1);
        fiber_event_set(&o.release[1]);
        wait_for(3, 3);
        for (int i = 0; i < 3; i++)
                drop(j[i]);
}

Test(dispatch, class_and_plugin_caps_hold_until_a_job_ends_or_the_cap_rises)
{
        static const unsigned no_caps[SCHED_MAX_CLASSES + 1];
        unsigned class_max[SCHED_MAX_CLASSES + 1] = {[2] = 1};
        DispatchPluginCap p2 = {"p", 2};
        Job *j[6];

        setup(8);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_set_caps_locked(&o.d, class_max, &p2, 1), 0);
        pthread_mutex_unlock(&o.lock);
        j[0] = push_to(1, 1000, 0, 1, "x"); /* batch, capped at 1 */
        j[1] = push_to(2, 1000, 0, 1, "x");
        j[2] = push_to(3, 1000, 0, 0, "p"); /* plugin p, capped at 2 */
        j[3] = push_to(4, 1000, 0, 0, "p");
        j[4] = push_to(5, 1000, 0, 0, "p");
        j[5] = push_to(6, 1000, 0, 0, "x"); /* neither */
        pump();
        cr_assert_eq(started_now(), 4);
        cr_assert_eq(o.started[0], 1);
        cr_assert_eq(o.started[1], 3);
        cr_assert_eq(o.started[2], 4);
        cr_assert_eq(o.started[3], 6, "job 6 waited behind the capped ones");
        assert_queued(2, 2);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.classes[2].running, 1);
        cr_assert_eq(dispatch_count_locked(&o.d, 0, "p", true), 1);
        cr_assert_eq(dispatch_count_locked(&o.d, 2, NULL, true), 1);
        pthread_mutex_unlock(&o.lock);

        /* one of p's ends: its next job takes the slot */
        fiber_event_set(&o.release[3]);
        wait_for(5, 1);
        cr_assert_eq(o.started[4], 5);
        assert_queued(1, 1);

        /* the class's cap lifted (a reload): its job starts at once */
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(dispatch_set_caps_locked(&o.d, no_caps, &p2, 1), 0);
        cr_assert_eq(o.d.classes[2].max_running, 0);
        pthread_mutex_unlock(&o.lock);
        cr_assert_eq(started_now(), 6);
        cr_assert_eq(o.started[5], 2);
        assert_queued(0, 0);
        for (int id = 1; id <= 6; id++)
                fiber_event_set(&o.release[id]);
        wait_for(6, 6);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.classes[2].running, 0, "class count %u after every job ended",
                     o.d.classes[2].running);
        cr_assert(dispatch_idle_locked(&o.d));
        pthread_mutex_unlock(&o.lock);
        for (int i = 0; i < 6; i++)
                drop(j[i]);
}

/* Waits (10 s at most) until @j's JobLive is gone: every run and supervisor of it ended
 * (Job.supervisors), the job final. */
static void wait_no_live(Job *j)
{
        for (int i = 0;; i++) {
                pthread_mutex_lock(&o.lock);
                bool gone = j->live == NULL;
                pthread_mutex_unlock(&o.lock);
                if (gone)
                        return;
                cr_assert_lt(i, 10000, "job %llu keeps its JobLive", (unsigned long long)j->id);
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
        }
}

/* Waits (10 s at most) until @n jobs are inside the run hook. */
static void wait_in_run_hook(int n)
{
        for (int i = 0;; i++) {
                pthread_mutex_lock(&o.lock);
                int now = o.running_now;
                pthread_mutex_unlock(&o.lock);
                if (now >= n)
                        return;
                cr_assert_lt(i, 10000, "%d of %d jobs in the run hook", now, n);
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
        }
}

/* Each of the @n jobs @j is done, its JobLive and every reference but the test's gone
 * (then dropped), once; none runs and nothing is queued. */
static void assert_all_concluded(Job **j, int n)
{
        for (int i = 0; i < n; i++) {
                wait_no_live(j[i]);
                cr_assert_eq(j[i]->state, JOB_DONE, "job %llu %s", (unsigned long long)j[i]->id,
                             job_state_name(j[i]->state));
                drop(j[i]);
        }
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.n_ended, n, "%d final states for %d jobs", o.n_ended, n);
        cr_assert_eq(o.stamps_out_of_order, 0, "%d stamps before the one before them",
                     o.stamps_out_of_order);
        cr_assert_eq(o.d.running, 0);
        cr_assert(dispatch_idle_locked(&o.d));
        pthread_mutex_unlock(&o.lock);
}

/* Runs whose job fibers return together come back to the dispatcher fiber together:
 * each is concluded once (done, its slot back, its JobLive and references gone). */
Test(dispatch, runs_that_end_together_are_each_concluded_once)
{
        Job *j[MAX_JOBS - 1];
        int n = MAX_JOBS - 1;

        setup(MAX_JOBS);
        for (int i = 0; i < n; i++)
                j[i] = push(i + 1, 1000 + i % 3, 0);
        pump();
        wait_for(n, 0);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.running, (unsigned)n);
        pthread_mutex_unlock(&o.lock);
        for (int id = 1; id <= n; id++)
                fiber_event_set(&o.release[id]);
        wait_for(n, n);
        assert_all_concluded(j, n);
}

/* A run with a deadline gets a supervisor: past the deadline it cancels the job as a
 * timeout (DEADLINE_EXCEEDED); a run that ends before its deadline leaves nothing
 * behind. */
Test(dispatch, a_deadline_cancels_a_running_job_through_its_supervisor)
{
        Job *late, *quick;

        setup(4);
        late = push_timed(1, 1000, 0, 0, "echo", 50 * NSEC_PER_MSEC);
        quick = push_timed(2, 1000, 0, 0, "echo", 60 * NSEC_PER_SEC);
        pump();
        wait_for(2, 0);
        fiber_event_set(&o.release[2]);
        wait_for(2, 1);
        wait_for(2, 2); /* job 1: its deadline, 50 ms */
        wait_no_live(late);
        wait_no_live(quick);
        cr_assert_eq(quick->state, JOB_DONE, "%s", job_state_name(quick->state));
        cr_assert_eq(late->state, JOB_CANCELLED, "%s", job_state_name(late->state));
        cr_assert(late->timed_out);
        cr_assert_str_eq(late->error_code, IPC_DEADLINE_EXCEEDED);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.d.running, 0);
        cr_assert_eq(o.detached, 0, "a cancelled job that returned counted as detached");
        pthread_mutex_unlock(&o.lock);
        drop(late);
        drop(quick);
}

/* A cancelled job whose code does not return is ended without it once the grace has
 * passed: final, its slot back, counted detached; when the code returns at last, its
 * run is concluded without touching the job, the gauge goes down and the JobLive goes. */
Test(dispatch, a_cancelled_job_that_does_not_return_is_detached_after_the_grace)
{
        Job *j;

        setup(2);
        o.stubborn[1] = true;
        j = push(1, 1000, 0);
        pump();
        wait_for(1, 0);
        wait_in_run_hook(1); /* its fiber exists: the cancel must start a supervisor */
        cr_assert_eq(op_cancel(&o, j, false), 0);
        wait_for(1, 1); /* JOB_DETACH_GRACE_NS after the cancel */
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(j->state, JOB_CANCELLED, "%s", job_state_name(j->state));
        cr_assert_str_eq(j->error_code, IPC_CANCELLED);
        cr_assert(j->detached, "the job ended without its fiber but is not marked detached");
        cr_assert_eq(o.detached, 1);
        cr_assert_eq(o.d.running, 0, "the detached job kept its slot");
        cr_assert_not_null(j->live, "its run still holds the JobLive");
        pthread_mutex_unlock(&o.lock);

        __atomic_store_n(&o.let_go, true, __ATOMIC_RELEASE);
        wait_no_live(j);
        pthread_mutex_lock(&o.lock);
        cr_assert_eq(o.detached, 0, "the gauge stayed up after the code returned");
        cr_assert_eq(j->state, JOB_CANCELLED, "the late return changed the job");
        cr_assert_eq(o.n_ended, 1);
        pthread_mutex_unlock(&o.lock);
        drop(j);
}

/* A burst of runs larger than one lock hold's share (DISPATCH_CONCLUDE_MAX, 256) comes
 * back while the dispatcher fiber still creates the rest: every run is concluded, once,
 * across the holds. */
Test(dispatch, a_burst_larger_than_one_lock_hold_is_concluded_completely)
{
        enum { BURST = 700 };
        static Job *j[BURST];

        setup(BURST);
        for (int i = 0; i < BURST; i++)
                j[i] = push(MAX_JOBS + i, 1000, 0);
        pump();
        wait_for(MAX_JOBS, BURST);
        assert_all_concluded(j, BURST);
}
