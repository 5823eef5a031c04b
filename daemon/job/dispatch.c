/* SPDX-License-Identifier: MIT */
/*
 * dispatch.c — the dispatcher: which queued job runs next, and the fibers that run it.
 *
 * Queued jobs wait in queues per user (uid), one per class and plugin it used (its
 * lanes, below; each a FIFO ring with a 4-ary min-heap beside it for the jobs that come
 * out of order: "The lane's queue"), ordered by (priority, id): a lower priority value
 * runs first, equal priorities in submission order. The next job is the best of the users' best
 * tops that no pause or cap holds: lowest priority value, then the user with the
 * fewest jobs running, then the user served longest ago (round robin) — so a user who queued thousands of jobs gets
 * every other slot at most while someone else waits at the same priority. A user at
 * max_running_per_user is passed over until one of its jobs ends; root and fiberd's
 * own uid are not limited. Finding the next user is O(lanes of the users that ever
 * submitted), which local users keep small. At most d->max_running jobs run at once. That bound is what makes priority real (without it every job would be
 * made ready at once and the run queues would run them in FIFO order), and it keeps
 * each group's live fibers well below max_fibers, so fiber_create() does not refuse
 * with -EAGAIN under load; if it still does (plugins spawning many children), the job
 * goes back to the queue and the next finishing job or the owner's ticker (the job
 * table's sweep) retries.
 *
 * Pauses and caps. An admin's pause (the `pause` method) holds the queued jobs of a
 * class or of a plugin; [class.NAME] and [plugin.NAME] max_running cap how many jobs of
 * a class or of a plugin run at once. A held job stays queued, its state untouched, so
 * job.cancel, the deadline sweep, shutdown and the store see it as any queued job. It
 * must not block what is queued behind it: a user whose best job is in a paused class
 * would otherwise see none of its other jobs start (head-of-line blocking). So a user's
 * queued jobs are not one heap but one *lane* per (class, plugin name) it used, each a
 * min-heap by (priority, id) (DispatchLane): every job of a lane has the same class and
 * plugin, so a pause or a cap holds whole lanes, and a user's next job is the best top
 * among its lanes that nothing holds. Holding and releasing move no job: a resume, a
 * raised cap or a job of a capped class ending only makes lanes eligible again at the
 * next pump. A pick costs O(lanes) instead of O(users) (a user has a lane per class and
 * plugin it queued: a handful), and a cap of 2 on a plugin with 10,000 jobs queued costs
 * nothing per finishing job. (Moving held jobs to a list per class or plugin would move
 * a capped backlog back at every finish, or release it in (priority, id) order and lose
 * the round robin between users; skipping held jobs inside one heap costs O(queued) per
 * pick.) Jobs running per class and per plugin name (DispatchKey.running) are counted
 * where a job takes and gives back its max_running slot, beside its user's count.
 *
 * The owner. dispatch.c never names the job table: its lock, the run hook, the cancel of
 * a job past its deadline, the idle and detached bookkeeping come as DispatchOps at
 * dispatch_init(), and a job finds its dispatcher through Job.dispatcher. The table
 * calls down into the dispatcher, never the reverse, so the two are layers rather than
 * a call circle (a table-specific ops struct was the smallest change: moving the lock
 * into a lower module would still leave the cancel and the counters behind), and the
 * dispatcher is unit-tested with a fake owner (tests/daemon-unit/test_dispatch.c).
 *
 * Placement: every job fiber but an inline one (below) is created with
 * FiberAttr.scheduler = d->sched and no group, so the runtime places it: the dispatcher
 * fiber that creates it runs outside the job scheduler, so sched_pick_group() chooses a
 * group on the caller's NUMA node, round robin; the plugin's children stay in the job
 * fiber's group. Idle workers of other groups may still steal them.
 *
 * Inline (dispatch_set_inline(), [jobs] run_inline): the job fiber of a plugin that
 * declared FIBERD_PLUGIN_INLINE (its jobs take microseconds and wait on nothing the hooks
 * do not park) is created on d->supervise_group instead, hooked, in no class, and runs on
 * the worker that runs this dispatcher fiber, after it: a lone trivial job wakes one
 * thread (the server worker the client's request woke) instead of three (a job worker,
 * then the server worker again to conclude it). Its children go to the job groups (the
 * plugin host names d->sched). What keeps a plugin that declared it wrongly from holding
 * the server group: the rescue's spare worker serves the rest while one is held, the
 * fibers that yielded on that worker are handed to the group first
 * (sched_handoff_yielders()), no job is placed inline while a server worker is held, and
 * one placed but not yet begun moves to the job groups (inline_moved()); the plugin host
 * takes the privilege away after a stall or runs that take too long. At most
 * DISPATCH_INLINE_MAX (4096) job fibers are inline at once, and one the server group
 * refuses (its max_fibers) goes to a job group. The inline job fibers count in
 * Dispatcher.inline_alive, so the daemon's exit does not call fini() under their code.
 *
 * A run. The pump (dispatch_pump_locked(), under the lock) gives a job it starts a
 * JobRun (job.h: the run's events, the job fiber's tag, its outcome), publishes it in
 * job->live->run and puts it on d->starting. Then the dispatcher fiber, on
 * d->supervise_group (the daemon's server group), goes through three steps per kick,
 * each for every run at hand at once:
 *  - start (dispatch_start()): creates the job fibers, joinable, outside the lock (a
 *    creation may wake a job worker), then under one lock hold publishes each handle in
 *    job->live->fiber, so job.cancel can fiber_cancel() it, cancels the fibers whose job
 *    was asked to stop meanwhile, and starts the supervisors that are wanted (below);
 *  - the job fiber (tag "job 42 plugin sha256", shown in stack-overflow and stall
 *    reports), on one of the job scheduler's groups, in the job's class (its children
 *    get it too), or inline on this group, waits, when the store says so
 *    (Job.durability), until the job's record is on disk, then calls the owner's run
 *    hook (DispatchOps.run: the plugin host's entry point call, set by main.c, which
 *    knows nothing of the store), which leaves the run's outcome in the JobRun, sets
 *    run->ran and hands the run back: a compare-and-swap push on d->done and a kick, no
 *    lock;
 *  - conclude (dispatch_conclude()): takes the whole done stack and, under one lock
 *    hold for up to DISPATCH_CONCLUDE_MAX runs (a yield between two), clears each
 *    job->live->fiber, moves each outcome into its job (job_take_outcome_locked()),
 *    gives the job its final state and gives back its slot; then it joins the fibers —
 *    after the handles were cleared, so a handle that the lock lets anyone see is never
 *    a joined one, and after the waiters were woken, so no answer waits for a fiber's
 *    exit — and frees the runs.
 * A trivial job so costs no fiber on the server group but its job fiber when it runs
 * inline, and a share of a few lock holds, however many jobs end together: one fiber
 * per run used to wait for each job and took the lock four times for it (a fifth of a
 * trivial job's server CPU).
 * A job cancelled (or timed out) while its job fiber still waits for a job worker ends
 * at once (the owner's cancel): every job worker may be stuck for long, and no plugin
 * code of it has run; the fiber, when it gets a worker, finds it forestalled
 * (job_fiber_begin()) and skips the plugin. Otherwise the conclusion gives the job its
 * final state: cancelled if cancellation was requested (cooperative: a job that ignored
 * it still ends cancelled), failed if the entry point returned a negative errno, done
 * otherwise; it wakes the job's waiters and, when jobs wait, kicks the dispatcher fiber.
 *
 * The dispatcher fiber. It is also what starts queued jobs: a submission (the request
 * fiber), a finishing job (the conclusion) and the store thread (a job that waited for
 * the disk) only kick it, so none of them creates fibers or stacks under the table lock
 * on its own stack, and a burst of kicks before it runs is one round (one lock hold for
 * many starts). The control paths (a pause lifted, a cap or max_running raised, the
 * owner's ticker, restore) pump at once, under the lock they hold anyway, and kick it
 * to create the fibers.
 *
 * Supervisors and detaching. A run with a deadline (--timeout), or one asked to stop
 * (job.cancel, shutdown: the owner notes the time, sets run->wake and calls
 * dispatch_supervise_locked()), gets a supervisor fiber on d->supervise_group (the
 * server group, not a job group: a job that blocks its worker thread, or spins without
 * yielding, on every job worker at once must not keep its own --timeout or a job.cancel
 * from being acted on). It waits on run->wake until the deadline and cancels the job as
 * a timeout when it passes. A fiber cannot be killed, and cancellation only reaches code
 * that comes back to a yield point: a CPU loop that never yields, or a blocking system
 * call, keeps its worker thread whatever fiberd does. So the job lets go of the fiber
 * instead: the supervisor gives a cancelled fiber JOB_DETACH_GRACE_NS to return; past
 * that it ends the job without it (job_detach_locked(): the same final state, error and
 * store write a returning job would get, its waiters answered), gives back its
 * max_running slot (global and its user's) so queued jobs start, counts the fiber in the
 * detached gauge (JobCounts.detached) and logs a warning. When the code returns, its
 * run comes back to the dispatcher fiber like any other, whatever it returned is
 * discarded (run->released), the gauge goes down and the fiber is joined. The FiberdJob
 * (plugin_job.c) holds the job and the plugin instance until then, so a replaced plugin
 * is not unloaded under running code.
 *
 * Lifetimes. A run holds a reference on its job and counts in Job.supervisors (which
 * keeps its JobLive) until it is concluded; a supervisor holds a reference on the run
 * (JobRun.refs) and counts in Job.supervisors until it ends; the last reference frees
 * the run.
 */
#include "daemon/job/dispatch.h"
#include "daemon/job/joblines.h"
#include "daemon/job/jobnames.h"
#include "daemon/obs/log.h"
#include "daemon/store/store.h"
#include "ipc/status.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ queue ------- */

/*
 * The dispatcher fiber: after each kick, the runs handed back since the last one are
 * concluded (dispatch_conclude()), queued jobs are started (dispatch_pump_locked(), not
 * once the owner stops), and the job fibers of the runs just started are created
 * (dispatch_start()), then the owner's after_round hook runs (the answers that waited
 * for jobs to end). The flag is cleared before the done stack is taken and the lock
 * is taken, so a run handed back or a job queued after a kick that found it still set is
 * seen by this round, and one later kicks again. It runs as long as the process: runs
 * still come back after the owner stops.
 */
static void dispatch_conclude(Dispatcher *d, JobRun *done);
static void dispatch_start(Dispatcher *d, JobRun *list);

static void dispatch_fiber(void *arg)
{
        Dispatcher *d = arg;
        JobRun *done, *starting;

        while (fiber_sem_wait(&d->kick, SCHED_FOREVER) == 0) {
                __atomic_store_n(&d->kicked, false, __ATOMIC_SEQ_CST);
                done = __atomic_exchange_n(&d->done, NULL, __ATOMIC_ACQUIRE);
                if (done)
                        dispatch_conclude(d, done);
                d->ops->lock(d->owner);
                if (!d->ops->stopping_locked(d->owner)) {
                        d->pumping = true;
                        dispatch_pump_locked(d);
                        d->pumping = false;
                }
                starting = d->starting;
                d->starting = NULL;
                d->starting_tail = &d->starting;
                d->ops->unlock(d->owner);
                if (starting)
                        dispatch_start(d, starting);
                if (d->ops->after_round)
                        d->ops->after_round(d->owner);
        }
}

int dispatch_init(Dispatcher *d, Scheduler *sched, SchedulingGroup *supervise_group,
                  unsigned max_running, const DispatchOps *ops, void *owner,
                  const JobMachine *machine)
{
        FiberAttr attr = {.group = supervise_group, .detached = true, .tag = "dispatcher"};

        *d = (Dispatcher){.ops = ops,
                          .owner = owner,
                          .machine = machine,
                          .sched = sched,
                          .supervise_group = supervise_group,
                          .max_running = max_running ? max_running : 1};
        d->starting_tail = &d->starting;
        fiber_sem_init(&d->kick, 0);
        return fiber_create(NULL, &attr, dispatch_fiber, d);
}

void dispatch_kick(Dispatcher *d)
{
        if (!__atomic_exchange_n(&d->kicked, true, __ATOMIC_SEQ_CST))
                fiber_sem_post(&d->kick, 1);
}

void dispatch_set_inline(Dispatcher *d, bool on)
{
        __atomic_store_n(&d->run_inline, on, __ATOMIC_RELEASE);
}

unsigned dispatch_inline_alive(const Dispatcher *d)
{
        return __atomic_load_n(&d->inline_alive, __ATOMIC_ACQUIRE);
}

void dispatch_set_max_running_locked(Dispatcher *d, unsigned max_running)
{
        d->max_running = max_running ? max_running : 1;
}

void dispatch_set_quotas_locked(Dispatcher *d, const JobQuotas *q)
{
        d->quotas = *q;
}

static bool slot_before(const JobHeapSlot *a, const JobHeapSlot *b)
{
        return a->priority != b->priority ? a->priority < b->priority : a->id < b->id;
}

#define HEAP_ARITY 4

static void heap_set(JobHeap *h, size_t i, JobHeapSlot s)
{
        h->v[i] = s;
        s.live->heap_index = i;
}

static void heap_up(JobHeap *h, size_t i)
{
        JobHeapSlot s = h->v[i];

        while (i > 0) {
                size_t parent = (i - 1) / HEAP_ARITY;
                if (!slot_before(&s, &h->v[parent]))
                        break;
                heap_set(h, i, h->v[parent]);
                i = parent;
        }
        heap_set(h, i, s);
}

static void heap_down(JobHeap *h, size_t i)
{
        JobHeapSlot s = h->v[i];

        for (;;) {
                size_t first = HEAP_ARITY * i + 1, end = first + HEAP_ARITY, m = i;
                const JobHeapSlot *best = &s;
                if (first >= h->len)
                        break;
                if (end > h->len)
                        end = h->len;
                for (size_t c = first; c < end; c++)
                        if (slot_before(&h->v[c], best))
                                m = c, best = &h->v[c];
                if (m == i)
                        break;
                heap_set(h, i, *best);
                i = m;
        }
        heap_set(h, i, s);
}

static int heap_push(JobHeap *h, Job *j)
{
        if (h->len == h->cap) {
                size_t cap = h->cap ? h->cap * 2 : 16;
                JobHeapSlot *v = realloc(h->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                h->v = v;
                h->cap = cap;
        }
        h->v[h->len++] = (JobHeapSlot){j->priority, j->id, j, j->live};
        heap_up(h, h->len - 1);
        return 0;
}

static void heap_remove_at(JobHeap *h, size_t i)
{
        h->len--;
        if (i < h->len) {
                heap_set(h, i, h->v[h->len]);
                heap_up(h, i);
                heap_down(h, h->v[i].live->heap_index);
        }
}

/*
 * The lane's queue. Jobs mostly come in order: one priority, and ids that grow with
 * every submission. A heap pays for that at each pop, sifting the last slot down from
 * the top and writing the JobLive line of every job it moves (one cold line per level,
 * most of the dispatcher's time per job at a steady 512 queued). So a job whose key is
 * not before the last one of the FIFO ring goes to the ring's tail, and only one that
 * would break its order (a higher priority, a job back from a run) goes to the heap;
 * the next job is the better of the heap's top and the ring's head. A push and a pop
 * of the ring move no other job. A job removed from the middle (a cancel, a deadline)
 * leaves its slot with its key and no job; the ring's head never rests on such a slot,
 * and the ring is compacted when such slots are more than half of it (each compaction
 * moves what the removals before it paid for).
 */

static JobHeapSlot *fifo_slot(const JobHeap *h, uint64_t seq)
{
        return &h->fifo[(h->fifo_head + (size_t)(seq - h->fifo_seq)) & (h->fifo_cap - 1)];
}

/* Drop the removed slots at the head, so that the head holds a job (or the ring is
 * empty). */
static void fifo_trim_head(JobHeap *h)
{
        while (h->fifo_n && !h->fifo[h->fifo_head].job) {
                h->fifo_head = (h->fifo_head + 1) & (h->fifo_cap - 1);
                h->fifo_n--;
                h->fifo_seq++;
        }
}

/* Lay the ring out again from index 0 in a ring of @cap slots, without its removed slots
 * when @compact (then every job's sequence number changes: JobLive.heap_index). */
static int fifo_relayout(JobHeap *h, size_t cap, bool compact)
{
        JobHeapSlot *v = malloc(cap * sizeof(*v));
        size_t n = 0;

        if (!v)
                return -ENOMEM;
        for (size_t k = 0; k < h->fifo_n; k++) {
                const JobHeapSlot *s = fifo_slot(h, h->fifo_seq + k);
                if (compact && !s->job)
                        continue;
                if (compact)
                        s->live->heap_index = JOB_QUEUE_FIFO | (size_t)(h->fifo_seq + n);
                v[n++] = *s;
        }
        free(h->fifo);
        h->fifo = v;
        h->fifo_cap = cap;
        h->fifo_head = 0;
        h->fifo_n = n;
        return 0;
}

static size_t queue_len(const JobHeap *h)
{
        return h->len + h->fifo_live;
}

/* The lane's next job: the better of the heap's top and the ring's head; NULL when
 * the lane is empty. */
static const JobHeapSlot *queue_top(const JobHeap *h)
{
        const JobHeapSlot *f = h->fifo_live ? &h->fifo[h->fifo_head] : NULL;

        if (!h->len)
                return f;
        return f && slot_before(f, &h->v[0]) ? f : &h->v[0];
}

static int queue_push(JobHeap *h, Job *j)
{
        JobHeapSlot s = {j->priority, j->id, j, j->live};

        if (h->fifo_n && slot_before(&s, fifo_slot(h, h->fifo_seq + h->fifo_n - 1)))
                return heap_push(h, j);
        if (h->fifo_n == h->fifo_cap &&
            fifo_relayout(h, h->fifo_cap ? h->fifo_cap * 2 : 16, false) < 0)
                return -ENOMEM;
        *fifo_slot(h, h->fifo_seq + h->fifo_n) = s;
        j->live->heap_index = JOB_QUEUE_FIFO | (size_t)(h->fifo_seq + h->fifo_n);
        h->fifo_n++;
        h->fifo_live++;
        return 0;
}

/* Whether @h holds @j (JobLive.heap_index names a slot of @h that holds it). */
static bool queue_has(const JobHeap *h, const Job *j)
{
        size_t i = j->live->heap_index;

        if (i == SIZE_MAX)
                return false;
        if (i & JOB_QUEUE_FIFO) {
                uint64_t seq = i & ~JOB_QUEUE_FIFO;
                return seq - h->fifo_seq < h->fifo_n && fifo_slot(h, seq)->job == j;
        }
        return i < h->len && h->v[i].job == j;
}

static bool queue_remove(JobHeap *h, Job *j)
{
        size_t i = j->live->heap_index;

        if (!queue_has(h, j))
                return false;
        j->live->heap_index = SIZE_MAX;
        if (!(i & JOB_QUEUE_FIFO)) {
                heap_remove_at(h, i);
                return true;
        }
        fifo_slot(h, i & ~JOB_QUEUE_FIFO)->job = NULL; /* the key stays: the tail's order */
        h->fifo_live--;
        fifo_trim_head(h);
        if (h->fifo_n > 64 && h->fifo_live < h->fifo_n / 2)
                (void)fifo_relayout(h, h->fifo_cap, true); /* on ENOMEM it stays as it is */
        return true;
}

/* Call @fn on each job of @h (the heap's, then the ring's, in no particular order);
 * stop when it returns false. */
static bool queue_each(const JobHeap *h, bool (*fn)(Job *j, void *ctx), void *ctx)
{
        for (size_t k = 0; k < h->len; k++)
                if (!fn(h->v[k].job, ctx))
                        return false;
        for (size_t k = 0; k < h->fifo_n; k++) {
                Job *j = fifo_slot(h, h->fifo_seq + k)->job;
                if (j && !fn(j, ctx))
                        return false;
        }
        return true;
}

/* The DispatchUser of @uid, made when @create; NULL when absent (or out of memory). */
static DispatchUser *user_find(Dispatcher *d, uid_t uid, bool create)
{
        for (size_t i = 0; i < d->n_users; i++)
                if (d->users[i].uid == uid)
                        return &d->users[i];
        if (!create)
                return NULL;
        if (d->n_users == d->cap_users) {
                size_t cap = d->cap_users ? d->cap_users * 2 : 8;
                DispatchUser *u = realloc(d->users, cap * sizeof(*u));
                if (!u)
                        return NULL;
                d->users = u;
                d->cap_users = cap;
        }
        d->users[d->n_users] = (DispatchUser){.uid = uid, .tokens = -1};
        return &d->users[d->n_users++];
}

static bool user_exempt(const Dispatcher *d, uid_t uid)
{
        return uid == 0 || uid == d->quotas.exempt_uid;
}

/* The Dispatcher.plugins index of @name (NULL taken as ""), or SIZE_MAX. */
static size_t plugin_find(const Dispatcher *d, const char *name)
{
        if (!name)
                name = "";
        for (size_t i = 0; i < d->n_plugins; i++)
                if (jobnames_match(d->plugins[i].interned, d->plugins[i].name, name))
                        return i;
        return SIZE_MAX;
}

/* The same, made when absent; SIZE_MAX when out of memory. */
static size_t plugin_add(Dispatcher *d, const char *name)
{
        size_t i = plugin_find(d, name);
        char *copy;

        if (i != SIZE_MAX)
                return i;
        if (d->n_plugins == d->cap_plugins) {
                size_t cap = d->cap_plugins ? d->cap_plugins * 2 : 8;
                DispatchPlugin *p = realloc(d->plugins, cap * sizeof(*p));
                if (!p)
                        return SIZE_MAX;
                d->plugins = p;
                d->cap_plugins = cap;
        }
        copy = strdup(name ? name : "");
        if (!copy)
                return SIZE_MAX;
        d->plugins[d->n_plugins] =
                (DispatchPlugin){.name = copy, .interned = jobnames_intern(copy, 0)};
        return d->n_plugins++;
}

/* Job.sched_class as an index of Dispatcher.classes (0, which nothing pauses or caps,
 * for a value out of range). */
static unsigned job_class(const Job *j)
{
        return j->sched_class <= SCHED_MAX_CLASSES ? j->sched_class : 0;
}

/* A pause, or a cap reached, holds @k's queued jobs. */
static bool key_holds(const DispatchKey *k)
{
        return k->paused || (k->max_running && k->running >= k->max_running);
}

static bool lane_held(const Dispatcher *d, const DispatchLane *l)
{
        return key_holds(&d->classes[l->cls]) || key_holds(&d->plugins[l->plugin].key);
}

/* @u's lane for class @cls and plugin index @plugin, made when absent; NULL when out of
 * memory. */
static DispatchLane *lane_get(DispatchUser *u, unsigned cls, size_t plugin)
{
        for (size_t i = 0; i < u->n_lanes; i++)
                if (u->lanes[i].cls == cls && u->lanes[i].plugin == plugin)
                        return &u->lanes[i];
        if (u->n_lanes == u->cap_lanes) {
                size_t cap = u->cap_lanes ? u->cap_lanes * 2 : 4;
                DispatchLane *l = realloc(u->lanes, cap * sizeof(*l));
                if (!l)
                        return NULL;
                u->lanes = l;
                u->cap_lanes = cap;
        }
        u->lanes[u->n_lanes] = (DispatchLane){.cls = cls, .plugin = plugin};
        return &u->lanes[u->n_lanes++];
}

/* The lane of @u whose queue holds @j, or NULL: no name compared, the slot tells. */
static DispatchLane *lane_of(const DispatchUser *u, const Job *j)
{
        for (size_t k = 0; k < u->n_lanes; k++)
                if (queue_has(&u->lanes[k].queue, j))
                        return &u->lanes[k];
        return NULL;
}

void dispatch_count_held_locked(Dispatcher *d, uid_t uid, int delta)
{
        DispatchUser *u = user_find(d, uid, true);

        if (u && (delta > 0 || u->held))
                u->held += (uint64_t)(int64_t)delta;
}

int dispatch_admit_locked(Dispatcher *d, uid_t uid)
{
        const JobQuotas *q = &d->quotas;
        DispatchUser *u;
        double burst;
        uint64_t now;

        if (user_exempt(d, uid))
                return 0;
        u = user_find(d, uid, true);
        if (!u)
                return -ENOMEM;
        if (q->max_queued_per_user && u->queued + u->held >= q->max_queued_per_user)
                return -EDQUOT;
        if (!q->submit_rate_per_user)
                return 0;
        burst = q->submit_burst_per_user ? q->submit_burst_per_user : q->submit_rate_per_user;
        now = sched_now_ns();
        if (u->tokens < 0) { /* first submission: a full bucket */
                u->tokens = burst;
        } else {
                u->tokens += (double)(now - u->refill_ns) * q->submit_rate_per_user / NSEC_PER_SEC;
                if (u->tokens > burst)
                        u->tokens = burst;
        }
        u->refill_ns = now;
        if (u->tokens < 1)
                return -EBUSY;
        u->tokens -= 1;
        return 0;
}

int dispatch_push_locked(Dispatcher *d, Job *j)
{
        DispatchUser *u = user_find(d, j->owner, true);
        DispatchLane *l;
        size_t plugin;
        int r;

        if (!u)
                return -ENOMEM;
        plugin = plugin_add(d, j->plugin_name);
        if (plugin == SIZE_MAX)
                return -ENOMEM;
        l = lane_get(u, job_class(j), plugin);
        if (!l)
                return -ENOMEM;
        r = queue_push(&l->queue, j);
        if (r < 0)
                return r;
        j->live->dispatch_user = (uint32_t)(u - d->users);
        j->live->dispatcher = d;
        u->queued++;
        d->queued++;
        return 0;
}

void dispatch_remove_locked(Dispatcher *d, Job *j)
{
        DispatchUser *u;
        DispatchLane *l;

        if (!j->live || j->live->heap_index == SIZE_MAX || j->live->dispatch_user >= d->n_users)
                return;
        u = &d->users[j->live->dispatch_user];
        l = lane_of(u, j);
        if (l && queue_remove(&l->queue, j)) {
                u->queued--;
                d->queued--;
        }
}

Job *dispatch_first_locked(const Dispatcher *d)
{
        for (size_t i = 0; i < d->n_users; i++)
                for (size_t k = 0; d->users[i].queued && k < d->users[i].n_lanes; k++)
                        if (queue_len(&d->users[i].lanes[k].queue))
                                return queue_top(&d->users[i].lanes[k].queue)->job;
        return NULL;
}

typedef struct Expired {
        uint64_t now;
        Job **ret;
        size_t n, max;
} Expired;

static bool expired_add(Job *j, void *ctx)
{
        Expired *e = ctx;

        if (j->live->deadline_ns <= e->now)
                e->ret[e->n++] = j;
        return e->n < e->max;
}

size_t dispatch_expired_locked(const Dispatcher *d, uint64_t now, Job **ret, size_t max)
{
        Expired e = {.now = now, .ret = ret, .max = max};

        for (size_t u = 0; u < d->n_users && max; u++)
                for (size_t k = 0; d->users[u].queued && k < d->users[u].n_lanes; k++)
                        if (!queue_each(&d->users[u].lanes[k].queue, expired_add, &e))
                                return e.n;
        return e.n;
}

int dispatch_pause_class_locked(Dispatcher *d, unsigned sched_class, bool paused)
{
        if (sched_class == 0 || sched_class > SCHED_MAX_CLASSES)
                return -EINVAL;
        d->classes[sched_class].paused = paused;
        if (!paused)
                dispatch_pump_locked(d);
        return 0;
}

int dispatch_pause_plugin_locked(Dispatcher *d, const char *name, bool paused)
{
        size_t p = paused ? plugin_add(d, name) : plugin_find(d, name);

        if (p == SIZE_MAX) /* resuming a name never heard of: nothing was held */
                return paused ? -ENOMEM : 0;
        d->plugins[p].key.paused = paused;
        if (!paused)
                dispatch_pump_locked(d);
        return 0;
}

int dispatch_set_caps_locked(Dispatcher *d, const unsigned *class_max,
                             const DispatchPluginCap *plugins, size_t n)
{
        int r = 0;

        for (unsigned c = 1; c <= SCHED_MAX_CLASSES; c++)
                d->classes[c].max_running = class_max ? class_max[c] : 0;
        for (size_t i = 0; i < d->n_plugins; i++)
                d->plugins[i].key.max_running = 0;
        for (size_t i = 0; i < n; i++) {
                size_t p = plugin_add(d, plugins[i].name);
                if (p == SIZE_MAX) {
                        r = -ENOMEM;
                        break;
                }
                d->plugins[p].key.max_running = plugins[i].max_running;
        }
        dispatch_pump_locked(d);
        return r;
}

size_t dispatch_count_locked(const Dispatcher *d, unsigned sched_class, const char *plugin,
                             bool held_only)
{
        size_t p = plugin ? plugin_find(d, plugin) : SIZE_MAX, n = 0;

        if (plugin && p == SIZE_MAX)
                return 0; /* no job of that plugin was ever queued */
        for (size_t i = 0; i < d->n_users; i++)
                for (size_t k = 0; d->users[i].queued && k < d->users[i].n_lanes; k++) {
                        const DispatchLane *l = &d->users[i].lanes[k];
                        if (!queue_len(&l->queue) || (sched_class && l->cls != sched_class) ||
                            (plugin && l->plugin != p) || (held_only && !lane_held(d, l)))
                                continue;
                        n += queue_len(&l->queue);
                }
        return n;
}

/* The lane of @u whose best job runs next: the lowest (priority, id) among the tops of
 * the lanes that no pause or cap holds; NULL when every lane is empty or held. */
static DispatchLane *user_lane_next(const Dispatcher *d, DispatchUser *u)
{
        DispatchLane *best = NULL;

        for (size_t i = 0; i < u->n_lanes; i++) {
                DispatchLane *l = &u->lanes[i];
                if (!queue_len(&l->queue) || lane_held(d, l))
                        continue;
                if (!best || slot_before(queue_top(&l->queue), queue_top(&best->queue)))
                        best = l;
        }
        return best;
}

/* The lane whose top job runs next, of the user dispatch_pump_locked() says, or NULL. */
static DispatchLane *lane_next(Dispatcher *d)
{
        unsigned cap = d->quotas.max_running_per_user;
        DispatchUser *best = NULL;
        DispatchLane *best_lane = NULL;

        for (size_t i = 0; i < d->n_users; i++) {
                DispatchUser *u = &d->users[i];
                DispatchLane *l;
                const JobHeapSlot *j, *b;
                if (!u->queued || (cap && u->running >= cap && !user_exempt(d, u->uid)))
                        continue;
                l = user_lane_next(d, u);
                if (!l)
                        continue;
                if (!best) {
                        best = u;
                        best_lane = l;
                        continue;
                }
                j = queue_top(&l->queue);
                b = queue_top(&best_lane->queue);
                if (j->priority != b->priority          ? j->priority < b->priority
                    : u->running != best->running       ? u->running < best->running
                    : u->last_start != best->last_start ? u->last_start < best->last_start
                                                        : j->id < b->id) {
                        best = u;
                        best_lane = l;
                }
        }
        return best_lane;
}

/* @j stopped running (ended, or went back to the queue): its user's, class's and
 * plugin's running counts. */
static void job_stopped_locked(Dispatcher *d, Job *j)
{
        DispatchKey *cls = &d->classes[job_class(j)];
        /* the index its start counted it under: no name compared at each end */
        size_t p = j->live->dispatch_plugin ? j->live->dispatch_plugin - 1
                                            : plugin_find(d, j->plugin_name);

        if (j->live->dispatch_user < d->n_users && d->users[j->live->dispatch_user].running)
                d->users[j->live->dispatch_user].running--;
        if (cls->running)
                cls->running--;
        if (p != SIZE_MAX && d->plugins[p].key.running)
                d->plugins[p].key.running--;
}

/* ------------------------------------------------------------------ fibers ------ */

/*
 * The job store (store.h): with the store idle (DUR_PENDING), no plugin code runs for a
 * job that is not on disk yet, so a plugin that crashes fiberd at once leaves an
 * answered submission and a record naming it; under load (DUR_EARLY) the job runs while
 * its record is committed (the table's submit). Return: 0 to run it; -ECANCELED when its
 * record could not be written (the submitter cancels it); the wait's error.
 * Context: @j's job fiber, before its run hook; yields.
 */
static int job_wait_disk(Job *j, const JobRun *run)
{
        int r;

        if (!run->wait_disk)
                return 0;
        r = store_wait(j, false, true);
        return r < 0 ? -ECANCELED : 0; /* the store failed: job.submit cancels it */
}

/* Drops a reference on @run (JobRun.refs): the last one frees it, with what its job did
 * not take of its outcome, and drops the run's reference on the job. Context: any; no
 * lock held (the job's last reference may go). */
static void run_unref(JobRun *run)
{
        Job *j = run->job;

        if (__atomic_sub_fetch(&run->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return;
        free(run->result);
        free(run->error_message);
        pthread_mutex_destroy(&run->host_lock);
        free(run);
        job_unref(j);
}

/* Job fibers inline at once at most (Dispatcher.inline_alive): the server group's fibers
 * (max_fibers 16384) are its connections' and requests' too, and inline jobs that park
 * (a hooked sleep) must not take them all; beyond, a job goes to the job groups. */
#define DISPATCH_INLINE_MAX 4096

static void job_fiber_main(void *arg);

/* The attributes of @run's job fiber: on the job groups, placed by the runtime (not our
 * group, the server group: one of d->sched's), in the job's class; or, @here, inline on
 * d->supervise_group, hooked as on a job group, in no class. The tag is run->tag,
 * formatted once by dispatch_start(). */
static FiberAttr job_fiber_attr(const Dispatcher *d, const JobRun *run, bool here)
{
        return (FiberAttr){.tag = run->tag,
                           .group = here ? d->supervise_group : NULL,
                           .scheduler = d->sched,
                           .sched_class = here ? 0 : run->job->sched_class,
                           .hook_blocking_calls = here};
}

/* Whether @j's job fiber may run inline, on d->supervise_group: [jobs] run_inline, its
 * plugin allows it (DispatchOps.run_inline), and no worker of the group is held by a
 * fiber past the rescue's threshold (an inline job of some plugin that does not return:
 * what waits there runs on the spare, and no more plugin code should join it). */
static bool inline_ok(Dispatcher *d, const Job *j)
{
        return __atomic_load_n(&d->run_inline, __ATOMIC_ACQUIRE) && d->ops->run_inline &&
               !sched_group_blocked(d->supervise_group) && d->ops->run_inline(d->owner, j);
}

/*
 * An inline job fiber, before any of its job's code: when the placement no longer holds
 * (inline_ok(): the plugin lost the privilege, or a server worker is held, since the
 * dispatcher placed it) its job fiber is created again on the job groups, which takes
 * over the run and its handle (run->fiber and job->live->fiber, swapped under the lock,
 * so a cancel and the conclusion's join reach the new fiber; dispatch_start() publishes
 * run->fiber under the same lock), and this fiber gives its handle up and returns. The
 * new fiber cannot hand the run back before the swap: it is created under the lock (a
 * wake-up of a job worker under it, on this rare path).
 * Return: true when moved; false to run here (still allowed, or no fiber could be made).
 */
static bool inline_moved(Dispatcher *d, JobRun *run)
{
        Job *j = run->job;
        Fiber *self = fiber_self(), *f;
        FiberAttr attr = job_fiber_attr(d, run, false);
        int r;

        /* a job that ended before its fiber began runs no plugin code: end it here */
        if (inline_ok(d, j) ||
            __atomic_load_n(&j->fiber_start, __ATOMIC_ACQUIRE) == JOB_FIBER_FORESTALLED)
                return false;
        run->run_inline = false; /* read by the new fiber, and by the plugin host */
        d->ops->lock(d->owner);
        r = fiber_create(&f, &attr, job_fiber_main, run);
        if (r == 0) {
                run->fiber = f;
                if (j->live->fiber == self)
                        j->live->fiber = f;
                if (j->cancel_requested)
                        fiber_cancel(f);
        }
        d->ops->unlock(d->owner);
        if (r < 0) {
                run->run_inline = true;
                return false;
        }
        fiber_detach(self);
        __atomic_fetch_sub(&d->inline_alive, 1, __ATOMIC_RELEASE);
        log_job(LOG_INFO, j->id, j->plugin_name,
                "placed inline, moved to the job workers before it began (%s)",
                sched_group_blocked(d->supervise_group) ? "a server worker is held"
                                                        : "its plugin runs inline no more");
        return true;
}

/* The job fiber hands @run back to the dispatcher fiber: onto Dispatcher.done, a
 * Treiber stack (job workers push, the dispatcher fiber takes the whole stack at once,
 * so no pop can meet an ABA), then a kick. The run stays valid after the push: the
 * dispatcher fiber joins this fiber before it frees it. */
static void run_hand_back(Dispatcher *d, JobRun *run)
{
        JobRun *head = __atomic_load_n(&d->done, __ATOMIC_RELAXED);

        do
                run->done_next = head;
        while (!__atomic_compare_exchange_n(&d->done, &head, run, true, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED));
        dispatch_kick(d);
}

static void job_fiber_main(void *arg)
{
        JobRun *run = arg;
        Job *j = run->job;
        Dispatcher *d = j->live->dispatcher; /* its JobLive stays while the run lasts */
        bool here = run->run_inline;
        int r;

        if (here && inline_moved(d, run))
                return; /* a fiber of the job groups runs it */
        /* the owner's cancel, or a detach, ends a job at once only before this; no lock:
         * one compare-and-swap decides */
        if (!job_fiber_begin(j)) /* cancelled, or timed out, while it waited for a worker */
                run->run_result = -ECANCELED;
        else if ((r = job_wait_disk(j, run)) < 0)
                run->run_result = r; /* no plugin code ran */
        else {
                joblines_started(j);
                /* inline: what yielded on this server worker must not wait for the job */
                if (here)
                        sched_handoff_yielders();
                run->run_result = d->ops->run(d->owner, j);
        }
        fiber_event_set(&run->ran);
        fiber_event_set(&run->wake); /* its supervisor, if it has one */
        run_hand_back(d, run);
        if (here) /* no plugin code of it runs now (its children are the job groups') */
                __atomic_fetch_sub(&d->inline_alive, 1, __ATOMIC_RELEASE);
}

/* Final state and error for a job whose entry point returned, or that ends without it
 * (@detached: its code did not return after the cancel), from what its @run came to; a
 * no-op for a job that ended already (cancelled before its fiber started). @now: the
 * round's clock read to stamp the end with (JobChange.now_ns), or 0. Under the lock. */
static void job_conclude_locked(Dispatcher *d, Job *j, const JobRun *run, bool detached,
                                uint64_t now)
{
        const char *left = detached ? " (its code did not return to a yield point; it "
                                      "runs on, detached, and its result is discarded)"
                                    : "";
        char msg[512];

        if (job_state_final(j->state))
                return;
        if (j->cancel_requested) {
                if (j->timed_out)
                        snprintf(msg, sizeof(msg), "the job's timeout of %llu ms passed%s",
                                 (unsigned long long)(j->timeout_ns / NSEC_PER_MSEC), left);
                else
                        snprintf(msg, sizeof(msg), "%s%s",
                                 d->ops->stopping_locked(d->owner)
                                         ? "cancelled: fiberd is shutting down"
                                         : "cancelled on request",
                                 left);
                job_transition(
                        d->machine, j,
                        detached       ? JOB_EV_DETACH
                        : j->timed_out ? JOB_EV_TIMEOUT
                                       : JOB_EV_CANCEL,
                        &(JobChange){.code = j->timed_out ? IPC_DEADLINE_EXCEEDED : IPC_CANCELLED,
                                     .message = msg,
                                     .now_ns = now});
        } else if (run->run_result < 0) {
                /* failed: again later when it has attempts left (job_retry_event()) */
                const char *code = run->fail_code ? run->fail_code
                                                  : ipc_status_code_from_errno(run->run_result);
                snprintf(msg, sizeof(msg), "%s",
                         j->error_message ? j->error_message : strerror(-run->run_result));
                job_transition(d->machine, j, job_retry_event(j, code),
                               &(JobChange){.code = code, .message = msg, .now_ns = now});
        } else {
                job_transition(d->machine, j, JOB_EV_RETURN_OK, &(JobChange){.now_ns = now});
        }
}

/* @j stops holding a max_running slot (its own and its user's): what waits is started by
 * the dispatcher fiber (dispatch_kick()). Under the lock. */
static void job_release_locked(Dispatcher *d, Job *j)
{
        d->running--;
        job_stopped_locked(d, j);
        d->pump_blocked = false; /* a fiber was freed: worth another try */
        if (d->queued)
                dispatch_kick(d);
        d->ops->idle_locked(d->owner);
}

/*
 * The job fiber of @run has not returned JOB_DETACH_GRACE_NS after its cancel: the job
 * ends now (cancelled, its waiters answered, its record written; a no-op when it had
 * ended already) and gives back its slot. When the fiber is inside the plugin's run()
 * (Job.host_job), it counts as detached until it returns. A fiber that has not started
 * yet (every job worker is held) skips the plugin when it starts, and one outside run()
 * returns without running plugin code: neither is detached.
 * Return: the job has a detached fiber. Under the lock.
 */
static bool job_detach_locked(Dispatcher *d, Job *j, JobRun *run)
{
        bool in_plugin;

        /* a fiber that has not begun never will run the plugin */
        if (job_fiber_forestall(j))
                in_plugin = false;
        else {
                pthread_mutex_lock(&run->host_lock);
                in_plugin = run->host_job != NULL;
                pthread_mutex_unlock(&run->host_lock);
        }

        job_conclude_locked(d, j, run, in_plugin, 0);
        job_release_locked(d, j);
        run->released = true;
        if (in_plugin)
                d->ops->set_detached_locked(d->owner, j, true);
        return in_plugin;
}

/* Something that ran @j is done with it (a run concluded, a supervisor ended): once
 * nothing runs a final job, its JobLive goes (job.h; the table's listener drops it when
 * the job ends with nothing running it). Under the lock. */
static void job_supervisor_end_locked(Job *j)
{
        if (--j->supervisors == 0 && job_state_final(j->state))
                job_live_drop(j);
}

/*
 * A run's supervisor, on d->supervise_group (the server group, not a job group: a job
 * that blocks its worker thread, or spins without yielding, on every job worker at once
 * must not keep its own timeout or a job.cancel from being acted on; a job run inline
 * that holds a server worker leaves it to the rescue's spare). Only a run with a
 * deadline, or one asked to stop, has one (dispatch_supervise_locked()): a run without
 * either ends through the dispatcher fiber alone. It waits on run->wake until the job's
 * deadline and cancels the job as a timeout when the deadline passes; then, after a
 * cancel, it gives the fiber JOB_DETACH_GRACE_NS to return, past which the job ends
 * without it (job_detach_locked()). It ends there: the fiber's return, whenever it
 * comes, reaches the dispatcher fiber like any other. Context: its own fiber; yields.
 */
static void job_supervise(void *arg)
{
        JobRun *run = arg;
        Job *j = run->job;
        Dispatcher *d = j->live->dispatcher; /* its JobLive stays while this runs */
        uint64_t deadline_ns, cancel_ns, ran_for_ms = 0;
        const char *why = "cancel", *state = "";
        bool detached = false;
        int r;

        d->ops->lock(d->owner);
        deadline_ns = j->live->deadline_ns;
        d->ops->unlock(d->owner);
        /* the fiber returns, or a cancel (job.cancel, shutdown) comes, or the deadline */
        if (fiber_event_wait(&run->wake, deadline_ns) == -ETIMEDOUT)
                d->ops->cancel(d->owner, j, true);
        d->ops->lock(d->owner);
        cancel_ns = run->cancel_mono_ns;
        d->ops->unlock(d->owner);
        r = fiber_event_wait(&run->ran,
                             cancel_ns ? cancel_ns + JOB_DETACH_GRACE_NS : SCHED_FOREVER);
        if (r == -ETIMEDOUT) {
                d->ops->lock(d->owner);
                if (!run->concluded) { /* else it returned just in time */
                        detached = job_detach_locked(d, j, run);
                        ran_for_ms = (sched_now_ns() - j->live->started_mono_ns) / NSEC_PER_MSEC;
                        why = j->timed_out                        ? "timeout"
                              : d->ops->stopping_locked(d->owner) ? "shutdown's cancel"
                                                                  : "cancel";
                        state = job_state_name(j->state);
                }
                d->ops->unlock(d->owner);
        } else if (r < 0) {
                log_job_owner(LOG_WARNING, j->id, j->plugin_name, j->owner,
                              "supervisor wait failed (%s); the job ends when its fiber returns",
                              strerror(-r));
        }
        if (detached)
                log_job_owner(LOG_WARNING, j->id, j->plugin_name, j->owner,
                              "its code did not return to a yield point within %llu ms of the "
                              "%s (running for %llu ms): the job ended %s, and its fiber "
                              "keeps running detached, holding a worker thread, until the "
                              "code returns",
                              (unsigned long long)(JOB_DETACH_GRACE_NS / NSEC_PER_MSEC), why,
                              (unsigned long long)ran_for_ms, state);
        d->ops->lock(d->owner);
        job_supervisor_end_locked(j);
        d->ops->unlock(d->owner);
        run_unref(run);
}

/* Starts @run's supervisor fiber (job_supervise()): it holds a reference on the run and
 * keeps the job's JobLive. One that cannot be created is logged: the job's timeout and
 * a cancel's grace then go unenforced, and the job ends when its code returns. Under
 * the lock. */
static void supervise_start_locked(Dispatcher *d, JobRun *run)
{
        FiberAttr attr = {.group = d->supervise_group, .detached = true};
        Job *j = run->job;
        int r;

        __atomic_add_fetch(&run->refs, 1, __ATOMIC_RELAXED);
        j->supervisors++;
        r = fiber_create(NULL, &attr, job_supervise, run);
        if (r < 0) {
                j->supervisors--;                                    /* the run holds one */
                __atomic_sub_fetch(&run->refs, 1, __ATOMIC_RELAXED); /* and the dispatcher */
                log_job_owner(LOG_WARNING, j->id, j->plugin_name, j->owner,
                              "cannot create its supervisor fiber (%s): its timeout and a "
                              "cancel's grace go unenforced; it ends when its code returns",
                              strerror(-r));
        }
}

void dispatch_supervise_locked(Dispatcher *d, Job *j)
{
        JobRun *run = j->live ? j->live->run : NULL;

        /* a concluded run is no job's run any more; a released one was detached by its
         * supervisor, so it has one */
        if (!run || run->supervised)
                return;
        run->supervised = true;
        if (run->started) /* else the dispatcher fiber starts it with the job fiber */
                supervise_start_locked(d, run);
}

/*
 * No job fiber could be created for @j (fiber_create()'s @error): back to the queue when
 * the group is only full for now (-EAGAIN; the owner's ticker retries), else the job
 * fails, and *@note says so for the log. Under the lock.
 */
static void job_no_fiber_locked(Dispatcher *d, Job *j, JobRun *run, int error, char *note,
                                size_t size)
{
        j->live->run = NULL;
        d->running--;
        job_stopped_locked(d, j);
        if (error == -EAGAIN && !j->cancel_requested && !d->ops->stopping_locked(d->owner)) {
                job_transition(d->machine, j, JOB_EV_REQUEUE, NULL);
                if (dispatch_push_locked(d, j) == 0) {
                        d->pump_blocked = true;
                        return;
                }
        }
        run->run_result = error;
        free(j->error_message);
        j->error_message = strdup("no fiber could be created for the job");
        job_conclude_locked(d, j, run, false, 0);
        snprintf(note, size, "cannot create the job fiber: %s", strerror(-error));
}

/* Moves what @run came to (JobRun, job.h) into @j unless @j ended without it (then it
 * stays in @run, which frees it). Under the lock. */
static void job_take_outcome_locked(Job *j, JobRun *run)
{
        if (job_state_final(j->state))
                return;
        if (run->result) {
                free(j->result);
                j->result = run->result;
                j->result_len = run->result_len;
                run->result = NULL;
        }
        if (run->error_message) { /* the plugin's failure, in its words */
                free(j->error_message);
                j->error_message = run->error_message;
                run->error_message = NULL;
                j->fail_permanent = run->fail_permanent;
        }
}

/* After the lock: @run's log line (JobRun.note), its job's "ended" line when it ended
 * here (joblines.h: a user's job failing is not the daemon's trouble, info or notice),
 * then the dispatcher's reference on it. */
static void run_finish(JobRun *run)
{
        Job *j = run->job;

        if (run->note[0])
                log_job_owner(run->note_level, j->id, j->plugin_name, j->owner, "%s", run->note);
        if (run->ended)
                joblines_ended(j, run->started_mono_ns, run->due_ms);
        run_unref(run);
}

/*
 * Creates the job fibers of the runs the pump started (@list, oldest first), outside the
 * lock (a creation may wake a job worker), then under one lock hold publishes each
 * handle in job->live->fiber (job.cancel's fiber_cancel() needs it), cancels a fiber
 * whose job was asked to stop meanwhile, starts the supervisors of the runs that want
 * one (a deadline, a cancel), and sends a job whose fiber could not be created back to
 * the queue or to failed (job_no_fiber_locked()). Context: the dispatcher fiber.
 */
static void dispatch_start(Dispatcher *d, JobRun *list)
{
        JobRun *run, *next;

        for (run = list; run; run = run->next) {
                Job *j = run->job;
                /* a job inline runs here, on the worker that runs this dispatcher fiber
                 * now (its runnext or the one shared queue) */
                bool here =
                        __atomic_load_n(&d->inline_alive, __ATOMIC_RELAXED) < DISPATCH_INLINE_MAX &&
                        inline_ok(d, j);
                FiberAttr attr;

                job_format_tag(j, run->tag, sizeof(run->tag));
                attr = job_fiber_attr(d, run, here);
                run->run_inline = here;
                if (here)
                        __atomic_fetch_add(&d->inline_alive, 1, __ATOMIC_RELAXED);
                run->create_error = fiber_create(&run->fiber, &attr, job_fiber_main, run);
                if (here && run->create_error < 0) {
                        __atomic_fetch_sub(&d->inline_alive, 1, __ATOMIC_RELEASE);
                        if (run->create_error == -EAGAIN) {
                                /* the server group is full (its max_fibers; its
                                 * runq_full counts this refusal): a job group then */
                                run->run_inline = false;
                                attr = job_fiber_attr(d, run, false);
                                run->create_error =
                                        fiber_create(&run->fiber, &attr, job_fiber_main, run);
                        }
                }
        }
        d->ops->lock(d->owner);
        for (run = list; run; run = run->next) {
                Job *j = run->job;

                if (run->create_error < 0) {
                        run->note_level = LOG_ERR;
                        job_no_fiber_locked(d, j, run, run->create_error, run->note,
                                            sizeof(run->note));
                        run->concluded = true;
                        job_supervisor_end_locked(j);
                        continue;
                }
                j->live->fiber = run->fiber;
                run->started = true;
                if (j->cancel_requested)
                        fiber_cancel(run->fiber);
                if (run->supervised)
                        supervise_start_locked(d, run);
        }
        d->ops->unlock(d->owner);
        for (run = list; run; run = next) {
                next = run->next;
                if (run->create_error < 0)
                        run_finish(run);
        }
}

/* Runs concluded under one lock hold at most (dispatch_conclude()): a trivial job's
 * conclusion took about 0.75 us in perf on the 2-vCPU AMD EPYC of docs/benchmarks.md,
 * so 256 hold the lock for about 0.2 ms. */
#define DISPATCH_CONCLUDE_MAX 256

/*
 * Concludes the runs on @list (oldest first, linked by done_next), handed back by their
 * job fibers (run_hand_back()): under one lock hold, each job fiber's handle is cleared
 * and each run's outcome goes into its job, which gets its final state and gives back
 * its slot (job_conclude_locked(), job_release_locked()), unless the job ended without
 * its fiber (a detach: only the detached gauge changes). Then the fibers are joined:
 * after their handles were cleared, so a handle that the lock lets anyone see is never
 * a joined one, and after the waiters were woken, so an answer does not wait for a
 * fiber's exit. The runs are freed after the joins (their tags are the fibers'), and
 * the log lines come last. Context: the dispatcher fiber; yields (the joins).
 */
static void conclude_some(Dispatcher *d, JobRun *list)
{
        JobRun *run, *next;
        /* one clock read for the round: every run here was handed back before it */
        uint64_t now = sched_now_ns();

        d->ops->lock(d->owner);
        for (run = list; run; run = run->done_next) {
                Job *j = run->job;

                if (j->live->fiber == run->fiber)
                        j->live->fiber = NULL;
                run->concluded = true;
                if (j->live->run == run) /* before the run is concluded: a retry may start
                                          * the next one */
                        j->live->run = NULL;
                if (run->released) {
                        /* the job ended long ago: its result and errors are not looked
                         * at, and only the count of detached fibers changes */
                        if (j->detached) {
                                run->note_level = LOG_NOTICE;
                                snprintf(run->note, sizeof(run->note),
                                         "its detached code returned %llu ms after the job "
                                         "ended; what it returned is discarded",
                                         (unsigned long long)((sched_now_ns() -
                                                               j->finished_mono_ns) /
                                                              NSEC_PER_MSEC));
                        }
                        d->ops->set_detached_locked(d->owner, j, false);
                } else {
                        job_take_outcome_locked(j, run);
                        job_conclude_locked(d, j, run, false, now);
                        job_release_locked(d, j);
                        run->due_ms = job_due_ms(j); /* a retry's; its JobLive may go below */
                        run->started_mono_ns = j->live->started_mono_ns;
                        run->ended = true;
                }
                job_supervisor_end_locked(j);
        }
        d->ops->unlock(d->owner);
        /* after the waiters were woken: a fiber that handed its run back a moment ago
         * may still be on its way out, and the answer need not wait for that */
        for (run = list; run; run = run->done_next)
                while (fiber_join(run->fiber) == -ECANCELED)
                        ; /* the dispatcher fiber is never cancelled */
        for (run = list; run; run = next) {
                next = run->done_next;
                run_finish(run);
        }
}

/* dispatch_conclude(): @done oldest first, then DISPATCH_CONCLUDE_MAX runs at a time,
 * with a yield between, so a burst of thousands of runs (a large max_running) neither
 * holds the lock nor keeps this worker's other fibers waiting for long. */
static void dispatch_conclude(Dispatcher *d, JobRun *done)
{
        JobRun *list = NULL, *run, *next, *rest;
        unsigned n;

        for (run = done; run; run = next) {
                next = run->done_next;
                run->done_next = list;
                list = run;
        }
        while (list) {
                for (n = 1, run = list; n < DISPATCH_CONCLUDE_MAX && run->done_next; n++)
                        run = run->done_next;
                rest = run->done_next;
                run->done_next = NULL;
                conclude_some(d, list);
                list = rest;
                if (list)
                        fiber_yield();
        }
}

void dispatch_pump_locked(Dispatcher *d)
{
        uint64_t now = 0;
        bool started = false;
        DispatchLane *l;

        while (!d->pump_blocked && d->queued && d->running < d->max_running && (l = lane_next(d))) {
                Job *j = queue_top(&l->queue)->job;
                unsigned cls = l->cls;
                size_t plugin = l->plugin;
                JobRun *run;

                if (j->live->deadline_ns != SCHED_FOREVER) {
                        if (!now)
                                now = sched_now_ns();
                        if (j->live->deadline_ns <= now) {
                                dispatch_remove_locked(d, j);
                                j->timed_out = true;
                                job_set_cancel_requested(j);
                                job_transition(d->machine, j, JOB_EV_TIMEOUT,
                                               &(JobChange){.code = IPC_DEADLINE_EXCEEDED,
                                                            .message = "the job's timeout "
                                                                       "passed while it was "
                                                                       "queued"});
                                continue;
                        }
                }
                run = calloc(1, sizeof(*run));
                if (!run) {
                        d->pump_blocked = true; /* the owner's ticker tries again */
                        log_msg(LOG_WARNING,
                                "dispatcher: out of memory for a job's run; %zu jobs wait",
                                d->queued);
                        break;
                }
                fiber_event_init(&run->ran);
                fiber_event_init(&run->wake);
                run->host_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
                run->refs = 1; /* the dispatcher's, until it concludes the run */
                run->job = job_ref(j);
                run->wait_disk = j->durability == DUR_PENDING; /* set at submission, never
                                                                * again */
                run->supervised = j->live->deadline_ns != SCHED_FOREVER;
                dispatch_remove_locked(d, j);
                j->live->run = run;
                j->supervisors++; /* until the run is concluded (dispatch_conclude()) */
                d->running++;
                d->users[j->live->dispatch_user].running++;
                d->users[j->live->dispatch_user].last_start = ++d->starts;
                d->classes[cls].running++;
                d->plugins[plugin].key.running++;
                j->live->dispatch_plugin = (uint32_t)plugin + 1;
                /* its record says which plugin runs, for recovery (the store listener) */
                if (!now) /* one clock read for the round's starts and deadlines */
                        now = sched_now_ns();
                job_transition(d->machine, j, JOB_EV_DISPATCH, &(JobChange){.now_ns = now});
                *d->starting_tail = run;
                d->starting_tail = &run->next;
                started = true;
        }
        if (started && !d->pumping) /* the dispatcher fiber creates their fibers */
                dispatch_kick(d);
}
