/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c — the dispatcher: which queued job runs next, and the fibers that run it.
 *
 * Queued jobs wait in a binary min-heap ordered by (priority, id): a lower priority
 * value runs first, equal priorities in submission order. At most d->max_running jobs
 * run at once. That bound is what makes priority real (without it every job would be
 * made ready at once and the run queues would run them in FIFO order), and it keeps
 * each group's live fibers well below max_fibers, so fiber_create() does not refuse
 * with -EAGAIN under load; if it still does (plugins spawning many children), the job
 * goes back to the queue and the next finishing job or the ticker (jobtable_sweep())
 * retries.
 *
 * Placement: every job fiber is created with FiberAttr.scheduler = d->sched and no
 * group, so the runtime places it: its supervisor runs outside the job scheduler, so
 * sched_pick_group() chooses a group on the caller's NUMA node, round robin; the
 * plugin's children stay in the job fiber's group. Idle workers of other groups may
 * still steal them.
 *
 * A running job has two fibers:
 *  - the supervisor (detached), on d->supervise_group (the daemon's server group, not a
 *    job group: a job that blocks its worker thread, or spins without yielding, on
 *    every job worker at once must not keep its own --timeout or a job.cancel from
 *    being acted on): creates the job fiber joinable, publishes its handle in
 *    job->fiber so job.cancel can fiber_cancel() it, waits on job->ran until the job's
 *    deadline, cancels the job fiber when the deadline passes, then clears job->fiber
 *    under the table lock and joins it — in that order, so a handle that the lock lets
 *    anyone see is never a joined one;
 *  - the job fiber (tag "job 42 plugin sha256", shown in stack-overflow and stall
 *    reports), on one of the job scheduler's groups, in the job's class (its children
 *    inherit it): calls the table's run hook (JobTableHooks.run: the plugin host's
 *    entry point call, set by main.c) and sets job->ran.
 * A job cancelled (or timed out) while its job fiber still waits for a job worker ends
 * at once (jobtable_cancel()): every job worker may be stuck for long, and no plugin
 * code of it has run; the fiber, when it gets a worker, sees the final state and skips
 * the plugin. Otherwise the supervisor gives the job its final state: cancelled if
 * cancellation was requested (cooperative: a job that ignored it still ends cancelled),
 * failed if the entry point returned a negative errno, done otherwise; it wakes the
 * job's waiters and pumps the queue.
 */
#include "daemon/dispatch.h"
#include "daemon/jobtable.h"
#include "daemon/log.h"
#include "ipc/status.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ queue ------- */

void dispatch_init(Dispatcher *d, Scheduler *sched, SchedulingGroup *supervise_group,
                   unsigned max_running)
{
        *d = (Dispatcher){.sched = sched,
                          .supervise_group = supervise_group,
                          .max_running = max_running ? max_running : 1};
}

void dispatch_done(Dispatcher *d)
{
        free(d->heap);
        *d = (Dispatcher){0};
}

void dispatch_set_max_running_locked(Dispatcher *d, unsigned max_running)
{
        d->max_running = max_running ? max_running : 1;
}

static bool job_before(const Job *a, const Job *b)
{
        if (a->priority != b->priority)
                return a->priority < b->priority;
        return a->id < b->id;
}

static void heap_set(Dispatcher *d, size_t i, Job *j)
{
        d->heap[i] = j;
        j->heap_index = i;
}

static void heap_up(Dispatcher *d, size_t i)
{
        Job *j = d->heap[i];

        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!job_before(j, d->heap[parent]))
                        break;
                heap_set(d, i, d->heap[parent]);
                i = parent;
        }
        heap_set(d, i, j);
}

static void heap_down(Dispatcher *d, size_t i)
{
        Job *j = d->heap[i];

        for (;;) {
                size_t l = 2 * i + 1, m = i;
                Job *best = j;
                if (l < d->heap_len && job_before(d->heap[l], best))
                        m = l, best = d->heap[l];
                if (l + 1 < d->heap_len && job_before(d->heap[l + 1], best))
                        m = l + 1, best = d->heap[l + 1];
                if (m == i)
                        break;
                heap_set(d, i, best);
                i = m;
        }
        heap_set(d, i, j);
}

int dispatch_push_locked(Dispatcher *d, Job *j)
{
        if (d->heap_len == d->heap_cap) {
                size_t cap = d->heap_cap ? d->heap_cap * 2 : 256;
                Job **h = realloc(d->heap, cap * sizeof(*h));
                if (!h)
                        return -ENOMEM;
                d->heap = h;
                d->heap_cap = cap;
        }
        heap_set(d, d->heap_len++, j);
        heap_up(d, j->heap_index);
        return 0;
}

void dispatch_remove_locked(Dispatcher *d, Job *j)
{
        size_t i = j->heap_index;

        if (i == SIZE_MAX || i >= d->heap_len || d->heap[i] != j)
                return;
        j->heap_index = SIZE_MAX;
        d->heap_len--;
        if (i == d->heap_len)
                return;
        heap_set(d, i, d->heap[d->heap_len]);
        heap_up(d, i);
        heap_down(d, d->heap[i]->heap_index);
}

/* ------------------------------------------------------------------ fibers ------ */

static void job_fiber_main(void *arg)
{
        Job *j = arg;
        const JobTableHooks *h = &j->table->hooks;
        bool ended;

        /* under the lock: jobtable_cancel() ends a job at once only before this */
        jobtable_lock(j->table);
        j->fiber_started = true;
        ended = job_state_final(j->state);
        jobtable_unlock(j->table);
        if (ended) /* cancelled, or timed out, while it waited for a worker */
                j->run_result = -ECANCELED;
        else
                j->run_result = h->run ? h->run(j) : -ENOSYS;
        fiber_event_set(&j->ran);
}

/* Final state and error for a job whose entry point returned. Under the lock. */
static void job_conclude_locked(JobTable *t, Job *j)
{
        char msg[512];

        if (j->cancel_requested) {
                if (j->timed_out)
                        snprintf(msg, sizeof(msg), "the job's timeout of %llu ms passed",
                                 (unsigned long long)(j->timeout_ns / NSEC_PER_MSEC));
                else
                        snprintf(msg, sizeof(msg), "%s",
                                 t->stopping ? "cancelled: fiberd is shutting down"
                                             : "cancelled on request");
                jobtable_finish_locked(t, j, JOB_CANCELLED,
                                       j->timed_out ? IPC_DEADLINE_EXCEEDED : IPC_CANCELLED, msg);
        } else if (j->run_result < 0) {
                snprintf(msg, sizeof(msg), "%s",
                         j->error_message ? j->error_message : strerror(-j->run_result));
                jobtable_finish_locked(t, j, JOB_FAILED,
                                       j->fail_code ? j->fail_code
                                                    : ipc_status_code_from_errno(j->run_result),
                                       msg);
        } else {
                jobtable_finish_locked(t, j, JOB_DONE, NULL, NULL);
        }
}

static void job_supervise(void *arg)
{
        Job *j = arg;
        JobTable *t = j->table;
        Dispatcher *d = &t->dispatch;
        /* not our group (the server group): the runtime picks one of d->sched's */
        FiberAttr attr = {.tag = j->tag, .scheduler = d->sched, .sched_class = j->sched_class};
        Fiber *f;
        int r;

        r = fiber_create(&f, &attr, job_fiber_main, j);
        if (r < 0) {
                jobtable_lock(t);
                d->running--;
                if (r == -EAGAIN && !j->cancel_requested && !t->stopping) {
                        /* the group is full: back to the queue, the ticker retries */
                        jobtable_set_state_locked(t, j, JOB_QUEUED);
                        j->started_ms = 0;
                        if (dispatch_push_locked(d, j) == 0) {
                                d->pump_blocked = true;
                                jobtable_unlock(t);
                                job_unref(j);
                                return;
                        }
                }
                j->run_result = r;
                free(j->error_message);
                j->error_message = strdup("no fiber could be created for the job");
                job_conclude_locked(t, j);
                jobtable_unlock(t);
                log_job(LOG_ERR, j->id, j->plugin_name, "cannot create the job fiber: %s",
                        strerror(-r));
                job_unref(j);
                return;
        }

        jobtable_lock(t);
        j->fiber = f;
        if (j->cancel_requested)
                fiber_cancel(f);
        jobtable_unlock(t);

        r = fiber_event_wait(&j->ran, j->deadline_ns);
        if (r == -ETIMEDOUT) {
                jobtable_cancel(t, j, true);
                r = fiber_event_wait(&j->ran, SCHED_FOREVER);
        }
        if (r < 0)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "supervisor wait failed (%s); joining the job fiber", strerror(-r));

        jobtable_lock(t);
        j->fiber = NULL;
        jobtable_unlock(t);
        while (fiber_join(f) == -ECANCELED)
                ;

        jobtable_lock(t);
        job_conclude_locked(t, j);
        d->running--;
        d->pump_blocked = false; /* a fiber was freed: worth another try */
        dispatch_pump_locked(d);
        jobtable_check_idle_locked(t);
        jobtable_unlock(t);
        if (j->state == JOB_FAILED)
                log_job(LOG_WARNING, j->id, j->plugin_name, "failed: %s", j->error_message);
        else if (j->state == JOB_CANCELLED)
                log_job(LOG_INFO, j->id, j->plugin_name, "cancelled: %s", j->error_message);
        else
                log_job(LOG_DEBUG, j->id, j->plugin_name, "%s", job_state_name(j->state));
        job_unref(j);
}

void dispatch_pump_locked(Dispatcher *d)
{
        uint64_t now = 0;

        while (!d->pump_blocked && d->heap_len && d->running < d->max_running) {
                Job *j = d->heap[0];
                JobTable *t = j->table;
                FiberAttr attr = {.group = d->supervise_group, .detached = true};
                int r;

                if (j->deadline_ns != SCHED_FOREVER) {
                        if (!now)
                                now = sched_now_ns();
                        if (j->deadline_ns <= now) {
                                dispatch_remove_locked(d, j);
                                j->timed_out = true;
                                job_set_cancel_requested(j);
                                jobtable_finish_locked(t, j, JOB_CANCELLED, IPC_DEADLINE_EXCEEDED,
                                                       "the job's timeout passed while it "
                                                       "was queued");
                                continue;
                        }
                }
                r = fiber_create(NULL, &attr, job_supervise, job_ref(j));
                if (r < 0) {
                        job_unref(j);
                        d->pump_blocked = true;
                        log_msg(LOG_WARNING,
                                "dispatcher: cannot create a supervisor fiber (%s); %zu jobs "
                                "wait",
                                strerror(-r), d->heap_len);
                        break;
                }
                dispatch_remove_locked(d, j);
                d->running++;
                jobtable_set_state_locked(t, j, JOB_RUNNING);
                j->started_ms = job_now_ms();
        }
}
