/* SPDX-License-Identifier: MIT */
/*
 * fiber.c — fibers: creation, the switch between them, exit and join, yield, sleep,
 * cancellation and fiber-local storage.
 *
 * A switch always goes fiber -> fiber or fiber <-> the worker's idle loop, and the
 * code that runs first on the new stack calls fiber_finish_switch() to finish what
 * the old fiber asked for: push it to the shared queue (a yield that leaves its
 * worker), take part in the wake-up handshake (park, see waiter.c), or drop its
 * reference (exit). Doing that after the switch is what makes it safe: nobody can
 * resume a fiber whose registers are still being saved. A yielder that stays on its
 * worker's yield list is appended before the switch, and nothing is left to finish:
 * that list is the worker's alone, and the worker pops it only after the switch.
 *
 * A fiber may resume on another worker than the one it left, so nothing here keeps a
 * Worker pointer or reads errno across a switch (worker_self() is re-read).
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

#ifdef SCHED_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef SCHED_TSAN
#include <sanitizer/tsan_interface.h>
#endif

static uint64_t next_fiber_id = 1;
static int fls_keys_used;

Fiber *fiber_self(void)
{
        Worker *w = worker_self();
        return w ? w->current : NULL;
}

uint64_t fiber_id(const Fiber *f)
{
        return f->id;
}

SchedulingGroup *fiber_group(const Fiber *f)
{
        return f->group;
}

const char *fiber_tag(const Fiber *f)
{
        return f->tag;
}

bool fiber_cancelled(void)
{
        Fiber *f = fiber_self();
        return f && __atomic_load_n(&f->cancelled, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------ switching ----- */

static void fiber_entry(void *arg);

/* Gives @f the stack at @lo (f->stack_size bytes) and the frame its first switch enters,
 * below the fiber-locals at the top (zero: a new stack's, or cleared by the last exit). */
static void fiber_take_stack(Fiber *f, char *lo)
{
#ifdef SCHED_ASAN
        /* A cached stack still carries the poisoned redzones of the fiber that used it
         * last: this one starts clean. */
        __asan_unpoison_memory_region(lo, f->stack_size);
#endif
        f->stack_lo = lo;
        context_init(&f->ctx, lo, f->stack_size - FIBER_FLS_BYTES, fiber_entry, f);
}

/*
 * Lazy stack binding: a fiber gets its stack when it first runs, not when it is created
 * (Go's newproc allocates a goroutine's small stack at creation; here a stack is a
 * guarded slot of 128 KiB by default, whose first use costs a guard install and page
 * faults). So a fiber waiting for its first run holds only its control block: a creator
 * that runs ahead of the workers that run its fibers fills the run queue with blocks,
 * not with stacks, and the stacks in use are those of the fibers that have started and
 * not ended, recycled hot through the running worker's cache. Only stacks of the group's
 * default size are bound late: another size is its own mapping, never cached, so
 * fiber_create() maps it at once and a failure still reaches the creator. The stack is
 * taken on the worker about to run @f, from its cache (stack_alloc()), before @f becomes
 * the worker's current fiber (the overflow handler and the stall detector look at that).
 * A failure there (no memory for a new arena slot: the system is out of memory) cannot
 * be given back to the creator, which has returned, so the worker logs it and retries
 * with a growing pause rather than lose the fiber; the pause is a raw system call, not
 * the nanosleep() the hooks would turn into a park of the fiber being switched in.
 * Context: the worker's thread, on the stack it leaves.
 */
static __attribute__((noinline)) void fiber_bind_stack(Fiber *f)
{
        char *lo;
        int r;

        for (unsigned ms = 1; (r = stack_alloc(f->group, f->stack_size, &lo)) < 0;
             ms = MIN(ms * 2, 1000u)) {
                if (ms == 1 || ms == 1000) /* the first failure, then about once a second */
                        sched_log(LOG_ERR, "fiber %llu: no stack for its first run (%s); retrying",
                                  (unsigned long long)f->id, strerror(-r));
                struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
                syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
        }
        fiber_take_stack(f, lo);
}

/* Switch from @from to @to with the sanitizers told. @to_bottom/@to_size describe the
 * destination stack for ASan; @exiting says @from will never run again. */
static inline void switch_to(Context *from, Context *to, Fiber *to_fiber, Worker *w, bool exiting)
{
#ifdef SCHED_ASAN
        void *fake = NULL;
        const void *bottom;
        size_t size;
        if (to_fiber) {
                bottom = to_fiber->stack_lo;
                size = to_fiber->stack_size;
        } else {
                bottom = w->asan_stack_bottom;
                size = w->asan_stack_size;
        }
        __sanitizer_start_switch_fiber(exiting ? NULL : &fake, bottom, size);
#endif
#ifdef SCHED_TSAN
        __tsan_switch_to_fiber(to_fiber ? to_fiber->tsan_fiber : w->tsan_fiber, 0);
#endif
        (void)to_fiber;
        (void)w;
        (void)exiting;
        context_switch(from, to);
#ifdef SCHED_ASAN
        __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
}

/* A switch on @w to @next (NULL: the idle loop). The switch count is what the monitor
 * watches (a worker whose count stands still is inside one fiber) and what starts a
 * new task quota (fiber_need_preempt() arms it lazily), so the common path costs a
 * store and a load, no clock read. In a group with classes the time run is charged to
 * the class by segments (class_account()): a switch between two fibers of @w's group
 * and of one class, while the segment's switches are short, only counts down the
 * switches until the next clock read. Context: @w's thread. */
static inline void account_switch(Worker *w, Fiber *next)
{
        SchedulingGroup *g = w->group;

        if (UNLIKELY(g->nclasses > 1)) {
                /* segment_left > 0: the running fiber is of w->segment_cls and @g */
                if (w->segment_left && next && next->cls == w->segment_cls && next->group == g)
                        w->segment_left--;
                else
                        class_account(w, w->current, next);
        }
        if (UNLIKELY(__atomic_load_n(&w->blocked, __ATOMIC_RELAXED)))
                worker_unblock(w);
        __atomic_store_n(&w->run_seq, w->run_seq + 1, __ATOMIC_RELAXED);
}

static inline void note_running(Worker *w, Fiber *f)
{
        /* Ready-to-run latency is measured from a wake-up or a creation; a fiber that
         * only yielded (ready_tsc == 0) was never waiting for anything. */
        /* Atomic: an idle sibling may be looking at it to decide on stealing. */
        uint64_t ready = __atomic_load_n(&f->ready_tsc, __ATOMIC_RELAXED);
        if (ready) {
                uint64_t now = clock_tsc_now();
                histogram_add(&w->latency, now - ready);
                if (w->class_latency && f->group == w->group)
                        histogram_add(&w->class_latency[f->cls], now - ready);
                __atomic_store_n(&f->ready_tsc, 0, __ATOMIC_RELAXED);
        }
        account_switch(w, f);
        __atomic_store_n(&w->current, f, __ATOMIC_RELAXED); /* the monitor reads it */
        __atomic_store_n(&w->switches, w->switches + 1, __ATOMIC_RELAXED);
}

/* Leave @self for @next (the worker's idle loop when NULL), asking the code that runs
 * first on the new stack to finish @action for @self. */
static void switch_away(Worker *w, Fiber *self, Fiber *next, int action)
{
        /* nothing to finish for a yielder already on its worker's yield list */
        w->prev = action != FIBER_ACT_NONE ? self : NULL;
        w->prev_action = action;
        if (next) {
                if (UNLIKELY(!next->stack_lo))
                        fiber_bind_stack(next); /* its first run */
                note_running(w, next);
                switch_to(&self->ctx, &next->ctx, next, w, action == FIBER_ACT_EXIT);
        } else {
                account_switch(w, NULL);
                __atomic_store_n(&w->running, false, __ATOMIC_RELAXED);
                __atomic_store_n(&w->current, NULL, __ATOMIC_RELAXED);
                switch_to(&self->ctx, &w->sched_ctx, NULL, w, action == FIBER_ACT_EXIT);
        }
        /* on the new stack, perhaps another worker's thread: what the fiber that ran
         * before asked for, if anything (the call only then) */
        w = worker_self();
        if (w->prev)
                fiber_finish_switch(w);
}

void fiber_switch_out(Fiber *self, int action)
{
        Worker *w = worker_self();
        /* a surplus spare goes to its idle loop, where it parks */
        switch_away(w, self, worker_surplus(w) ? NULL : ready_pop(w), action);
}

void fiber_run(Worker *w, Fiber *f)
{
        w->prev = NULL;
        w->prev_action = FIBER_ACT_NONE;
        if (UNLIKELY(!f->stack_lo))
                fiber_bind_stack(f); /* its first run */
        note_running(w, f);
        __atomic_store_n(&w->running, true, __ATOMIC_SEQ_CST); /* see monitor_wake() */
        monitor_wake(w->group);
        switch_to(&w->sched_ctx, &f->ctx, f, w, false);
        fiber_finish_switch(w);
}

static __attribute__((noinline)) void fiber_finish_exit(Worker *w, Fiber *f)
{
        Waiter *joiner;

        /* nothing runs on it any more; a joinable fiber's block waits for the join */
        if (f->fls_used) /* the next fiber on this stack starts with its locals NULL */
                memset(fiber_fls(f), 0, FIBER_FLS_BYTES);
        stack_free(f->group, f->stack_lo, f->stack_size, false);
        f->stack_lo = NULL;
        __atomic_store_n(&w->finished, w->finished + 1, __ATOMIC_RELAXED);
        if (f->group == w->group) {
                /* release: a stats reader that counts this exit sees what it did */
                __atomic_store_n(&w->exits_pending, w->exits_pending + 1, __ATOMIC_RELEASE);
                if (w->exits_pending >= ALIVE_EXIT_BATCH)
                        alive_flush(w);
        } else {
                __atomic_fetch_add(&f->group->released, 1, __ATOMIC_RELEASE);
        }
#ifdef SCHED_TSAN
        __tsan_destroy_fiber(f->tsan_fiber);
        f->tsan_fiber = NULL;
#endif
        /* The last reference is the fiber's own (detached, or its handle given back):
         * nobody can join it or look at it any more, so the block goes back without the
         * join lock and the reference count's atomic (no call takes a reference after
         * fiber_create(); the acquire pairs with the handle's release). */
        if (__atomic_load_n(&f->refs, __ATOMIC_ACQUIRE) == 1) {
                slab_block_put(w, f);
                return;
        }
        spin_lock(&f->join_lock);
        __atomic_store_n(&f->done, true, __ATOMIC_RELEASE);
        joiner = f->joiner;
        f->joiner = NULL;
        if (joiner && !waiter_claim(joiner, 0))
                joiner = NULL; /* it is leaving (cancelled) and will see done */
        spin_unlock(&f->join_lock);
        if (joiner)
                waiter_wake(joiner);
        fiber_release(f);
}

void fiber_finish_switch(Worker *w)
{
        Fiber *prev = w->prev;

        if (!prev)
                return;
        w->prev = NULL;
        switch (w->prev_action) {
        case FIBER_ACT_YIELD:
        case FIBER_ACT_YIELD_WAKE: {
                /* A yield that leaves its worker's yield list (ready_yield()): once in
                 * the shared queue the fiber may run, end and be freed on another
                 * worker, so its group is read first. */
                SchedulingGroup *g = prev->group;

                ready_push_shared(g, prev);
                if (w->prev_action == FIBER_ACT_YIELD_WAKE)
                        group_wake_idle(g);
                break;
        }
        case FIBER_ACT_PARK:
                waiter_handoff_arrive(prev); /* the wake-up handshake: waiter.c */
                break;
        case FIBER_ACT_EXIT:
                fiber_finish_exit(w, prev);
                break;
        default:
                break;
        }
}

/* ------------------------------------------------------------------ lifecycle ----- */

static void fiber_entry(void *arg)
{
        Fiber *f = arg;

#ifdef SCHED_ASAN
        __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
        fiber_finish_switch(worker_self());
        f->fn(f->arg);
        fiber_switch_out(f, FIBER_ACT_EXIT);
        abort(); /* not reached: an exited fiber is never resumed */
}

void alive_flush(Worker *w)
{
        size_t n = w->exits_pending;

        if (n) {
                /* zero first: a stats reader (released, then each worker's pending)
                 * may then miss an exit, never count one twice */
                __atomic_store_n(&w->exits_pending, 0, __ATOMIC_RELAXED);
                __atomic_fetch_add(&w->group->released, n, __ATOMIC_RELEASE);
        }
}

/* A process-unique id: from the worker's block of ids, taken 1024 at a time from the
 * process's counter (one locked add per 1024 creations, not one each), or from the
 * counter itself off a worker. */
static uint64_t fiber_id_next(Worker *w)
{
        enum { ID_BLOCK = 1024 };

        if (!w)
                return __atomic_fetch_add(&next_fiber_id, 1, __ATOMIC_RELAXED);
        if (w->id_next == w->id_end) {
                w->id_next = __atomic_fetch_add(&next_fiber_id, ID_BLOCK, __ATOMIC_RELAXED);
                w->id_end = w->id_next + ID_BLOCK;
        }
        return w->id_next++;
}

/* Count a creation on @g against max_fibers. Return: false (and it counts as
 * released again) when @g already has max_fibers live fibers. */
static bool fiber_admit(SchedulingGroup *g, Worker *w)
{
        uint64_t n = __atomic_add_fetch(&g->admitted, 1, __ATOMIC_ACQ_REL);
        bool own = w && w->group == g;

        /* Fast: the released count this worker read last. It was read before our add,
         * so every creation it refunded or exit it counted came before ours, and n
         * minus it can only count more fibers than live. */
        if (own && n - w->released_seen <= g->max_fibers)
                return true;
        /* Else a snapshot as sched_group_stats() takes it: released, then the exits
         * the workers counted and have not added (a flush zeroes its count before it
         * adds), then admitted, which by then holds every creation those counts
         * refunded or ended, ours included. n itself would not do: released may by
         * now hold the refund of a creation after ours. */
        uint64_t rel;
        uint64_t ended = group_ended(g, &rel);
        uint64_t adm = __atomic_load_n(&g->admitted, __ATOMIC_ACQUIRE);
        if (own)
                w->released_seen = rel;
        if (adm - ended <= g->max_fibers)
                return true;
        __atomic_fetch_add(&g->released, 1, __ATOMIC_RELEASE);
        return false;
}

void fiber_release(Fiber *f)
{
        if (__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return;
        slab_block_put(worker_self(), f); /* its stack went back at the exit */
}

int fiber_create(Fiber **ret, const FiberAttr *attr, FiberFn fn, void *arg)
{
        static const FiberAttr defaults;
        SchedulingGroup *g;
        Fiber *self = fiber_self();
        Worker *w;
        size_t size, ps = page_size();
        Fiber *f;
        bool own; /* created on a worker of its own group */

        if (!attr)
                attr = &defaults;
        if (!fn || (!ret) != attr->detached)
                return -EINVAL;
        /* Placement: an explicit group; else, for a scheduler, the caller's own group if
         * it is one of that scheduler's, or a group on the caller's node; else the
         * caller's group. */
        if (attr->group)
                g = attr->group;
        else if (attr->scheduler)
                g = self && self->group->owner == attr->scheduler
                            ? self->group
                            : sched_pick_group(attr->scheduler);
        else
                g = self ? self->group : NULL;
        if (!g)
                return -EINVAL;
        size = attr->stack_size ? attr->stack_size : g->stack_size;
        if (size % ps || size < 4 * ps || attr->sched_class > g->nclasses)
                return -EINVAL;

        w = worker_self();
        own = w && w->group == g;
        if (!fiber_admit(g, w)) {
                __atomic_fetch_add(&g->runq_full, 1, __ATOMIC_RELAXED);
                return -EAGAIN;
        }
        /* The control block: its stack comes at its first run (fiber_bind_stack()),
         * goes back at its exit, the block at the join or the exit (slab.c) */
        f = slab_block_get(w);
        if (!f) {
                __atomic_fetch_add(&g->released, 1, __ATOMIC_RELEASE);
                return -ENOMEM;
        }
        memset(f, 0, sizeof(*f));
        f->group = g;
        f->id = fiber_id_next(w);
        f->tag = attr->tag;
        f->fn = fn;
        f->arg = arg;
        f->stack_size = size;
        f->refs = attr->detached ? 1 : 2;
        if (size != g->stack_size) {
                /* a stack of its own size: mapped now, so a failure reaches the caller */
                char *lo;
                int r = stack_alloc(g, size, &lo);
                if (r < 0) {
                        slab_block_put(w, f);
                        __atomic_fetch_add(&g->released, 1, __ATOMIC_RELEASE);
                        return r;
                }
                fiber_take_stack(f, lo);
        }
        f->no_steal = attr->no_steal;
        /* a child of a hooked fiber in its group stays hooked, also in a group that
         * hooks nothing (FiberAttr.hook_blocking_calls): it runs the same kind of code */
        f->hooks =
                g->hooks || attr->hook_blocking_calls || (self && self->hooks && self->group == g);
        if (attr->sched_class) {
                f->cls = (uint8_t)(attr->sched_class - 1);
        } else if (self && (self->group == g || (g->owner && self->group->owner == g->owner))) {
                f->cls = self->cls; /* the classes of one scheduler's groups are the same */
        }
#ifdef SCHED_TSAN
        f->tsan_fiber = __tsan_create_fiber(0);
#endif
        if (own) {
                __atomic_store_n(&w->created, w->created + 1, __ATOMIC_RELAXED);
        } else {
                __atomic_fetch_add(&g->created_outside, 1, __ATOMIC_RELAXED);
        }
        if (ret)
                *ret = f;
        ready_push_new(f);
        return 0;
}

int fiber_join(Fiber *f)
{
        Waiter w;
        int r;

        if (f == fiber_self())
                return -EINVAL;
        waiter_prepare(&w);
        spin_lock(&f->join_lock);
        if (__atomic_load_n(&f->done, __ATOMIC_ACQUIRE)) {
                spin_unlock(&f->join_lock);
                fiber_release(f);
                return 0;
        }
        f->joiner = &w;
        spin_unlock(&f->join_lock);

        r = waiter_block(&w, SCHED_FOREVER);
        if (r < 0) {
                spin_lock(&f->join_lock);
                if (f->joiner == &w)
                        f->joiner = NULL;
                spin_unlock(&f->join_lock);
                return r;
        }
        fiber_release(f);
        return 0;
}

void fiber_detach(Fiber *f)
{
        fiber_release(f);
}

void fiber_cancel(Fiber *f)
{
        Waiter *w;

        __atomic_store_n(&f->cancelled, true, __ATOMIC_RELEASE);
        spin_lock(&f->waiter_lock);
        w = f->cur_waiter;
        if (w && !waiter_claim(w, -ECANCELED))
                w = NULL;
        spin_unlock(&f->waiter_lock);
        if (w)
                waiter_wake(w);
}

/* ------------------------------------------------------------------ yield, sleep -- */

int fiber_yield(void)
{
        Worker *w = worker_self();
        Fiber *self = w ? w->current : NULL;
        Fiber *next;
        int action;

        if (!self) {
                sched_yield();
                return 0;
        }
        if (__atomic_load_n(&self->cancelled, __ATOMIC_ACQUIRE))
                return -ECANCELED;
        /* A worker marked blocked is not (it yields): end the mark now, as the switch
         * would, so that a spare it makes surplus is seen as one below, before the
         * yielder is placed on that spare's own list. */
        if (UNLIKELY(__atomic_load_n(&w->blocked, __ATOMIC_RELAXED)))
                worker_unblock(w);
        if (UNLIKELY(worker_surplus(w))) {
                /* a surplus spare parks; @self goes to the shared queue for the others
                 * (a stolen fiber of another group, waking nobody) */
                switch_away(w, self, NULL,
                            self->group == w->group ? FIBER_ACT_YIELD_WAKE : FIBER_ACT_YIELD);
                return 0;
        }
        next = ready_yield(w, self, &action);
        if (!next) {
                /* nothing else is ready: keep running, with a new task quota; for the
                 * monitor it is a switch (a fiber that yields is not stalled) */
                account_switch(w, self);
                return 0;
        }
        switch_away(w, self, next, action);
        return 0;
}

bool fiber_need_preempt(void)
{
        Worker *w = worker_self();
        uint64_t now;

        if (!w || !w->current)
                return false;
        now = clock_tsc_now();
        if (UNLIKELY(w->quota_seq != w->run_seq)) {
                /* the first look since the fiber was switched to: its quota starts
                 * now (a fiber that checks often, as a preemption point should, loses
                 * nothing; no clock is read at the switch itself) */
                w->quota_seq = w->run_seq;
                w->quota_end_tsc = now + w->group->quota_tsc;
                return false;
        }
        if (now < w->quota_end_tsc)
                return false;
        /* a fiber that ran out its task quota ends its class's segment: the switch
         * reads the clock and charges it, however short the segment before it was */
        w->segment_left = 0;
        return true;
}

int fiber_maybe_yield(void)
{
        return fiber_need_preempt() ? fiber_yield() : 0;
}

int fiber_sleep_until(uint64_t deadline_ns)
{
        Waiter w;
        int r;

        waiter_prepare(&w);
        r = waiter_block(&w, deadline_ns);
        return r == -ETIMEDOUT ? 0 : r == 0 ? 0 : r;
}

int fiber_sleep_for(uint64_t ns)
{
        return fiber_sleep_until(sched_deadline_after(ns));
}

/* ------------------------------------------------------------------ locals -------- */

int fiber_key_create(void)
{
        int k = __atomic_fetch_add(&fls_keys_used, 1, __ATOMIC_RELAXED);
        if (k >= SCHED_FLS_KEYS) {
                __atomic_fetch_sub(&fls_keys_used, 1, __ATOMIC_RELAXED);
                return -ENOSPC;
        }
        return k;
}

int fiber_local_set(int key, void *value)
{
        Fiber *f = fiber_self();
        if (key < 0 || key >= SCHED_FLS_KEYS)
                return -EINVAL;
        if (!f)
                return -EPERM;
        fiber_fls(f)[key] = value;
        f->fls_used = true;
        return 0;
}

void *fiber_local_get(int key)
{
        Fiber *f = fiber_self();
        if (key < 0 || key >= SCHED_FLS_KEYS || !f)
                return NULL;
        return fiber_fls(f)[key];
}
