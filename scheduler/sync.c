/* SPDX-License-Identifier: MIT */
/*
 * sync.c — synchronisation primitives that park fibers, not threads: mutex, condition
 * variable, semaphore, latch (wait group), read-write lock and event.
 *
 * Each is a little state plus a SchedWaitList guarded by the list's spinlock. A waiter
 * that is signalled is *handed* what it waited for (the mutex, a semaphore unit, the
 * read or write lock) by the signaller, under the list lock, so nothing can overtake it
 * and no wake-up is spurious. A waiter that leaves by timeout or cancellation unlinks
 * itself; a signaller whose claim on a waiter fails (it is leaving) skips to the next,
 * so no signal is lost. Waking happens after the list lock is released.
 *
 * Wait lists are FIFO lists of Waiters (base/list.h) under the list's spinlock. An
 * all-zero SchedWaitList is a valid empty list (sched.h lets a primitive be zeroed
 * instead of initialised), so the list head is set up by the first push.
 *
 * Plain pthreads may use every primitive too (they block on a futex), which is how a
 * pthread waits for fibers or sets an event for them (tRPC-Cpp's FiberEvent).
 */
#include <errno.h>

#include "scheduler/runtime.h"
#include "scheduler/base/spinlock.h"

/* ------------------------------------------------------------------ wait lists ---- */

static inline ListHead *wait_list_head(SchedWaitList *l)
{
        if (UNLIKELY(!l->head.next))
                list_init(&l->head); /* zeroed, never used yet */
        return &l->head;
}

static bool wait_list_empty(SchedWaitList *l)
{
        return !l->head.next || list_empty(&l->head);
}

static Waiter *wait_list_first(SchedWaitList *l)
{
        ListHead *e = l->head.next ? list_first(&l->head) : NULL;
        return e ? list_entry(e, Waiter, link) : NULL;
}

static void wait_list_push(SchedWaitList *l, Waiter *w)
{
        list_add_tail(wait_list_head(l), &w->link);
}

static void wait_list_remove(Waiter *w)
{
        if (list_linked(&w->link))
                list_del(&w->link);
}

static Waiter *wait_list_pop(SchedWaitList *l)
{
        Waiter *w = wait_list_first(l);
        if (w)
                list_del(&w->link);
        return w;
}

/* Pop waiters until one can be claimed with reason 0. Called with the list locked. */
static Waiter *claim_first(SchedWaitList *l)
{
        Waiter *w;
        while ((w = wait_list_pop(l)))
                if (waiter_claim(w, 0))
                        return w;
        return NULL;
}

/* Wake a batch of claimed waiters, linked on a local list through their (unlinked)
 * wait-list links. Each may be gone once woken, so the next is read first. */
static void wake_batch(ListHead *batch)
{
        ListHead *e, *next;
        list_for_each_safe(e, next, batch) waiter_wake(list_entry(e, Waiter, link));
}

/* Block on @l after the caller pushed @w and unlocked; unlink on failure. */
static int block_on(SchedWaitList *l, Waiter *w, uint64_t deadline_ns)
{
        int r = waiter_block(w, deadline_ns);
        if (r < 0) {
                spin_lock(&l->lock);
                wait_list_remove(w);
                spin_unlock(&l->lock);
        }
        return r;
}

/* ------------------------------------------------------------------ mutex --------- */

void fiber_mutex_init(FiberMutex *m)
{
        *m = (FiberMutex){0};
}

bool fiber_mutex_trylock(FiberMutex *m)
{
        int expected = 0;
        return __atomic_compare_exchange_n(&m->state, &expected, 1, false, __ATOMIC_ACQUIRE,
                                           __ATOMIC_RELAXED);
}

static int mutex_lock(FiberMutex *m, bool cancellable)
{
        Waiter w;
        int r;

        if (fiber_mutex_trylock(m))
                return 0;
        waiter_prepare(&w);
        /* Re-taking the mutex after a condition wait must succeed even when the fiber
         * is cancelled: such a waiter is invisible to fiber_cancel(). */
        w.uncancellable = !cancellable;
        spin_lock(&m->waiters.lock);
        /* state 2: locked, and waiters may exist, so unlock must look at the list. */
        if (__atomic_exchange_n(&m->state, 2, __ATOMIC_ACQUIRE) == 0) {
                /* It was free: we own it now. Leave 2 only if someone else waits. */
                if (wait_list_empty(&m->waiters))
                        __atomic_store_n(&m->state, 1, __ATOMIC_RELAXED);
                spin_unlock(&m->waiters.lock);
                return 0;
        }
        wait_list_push(&m->waiters, &w);
        spin_unlock(&m->waiters.lock);
        r = block_on(&m->waiters, &w, SCHED_FOREVER);
        return r; /* 0: handed the mutex by fiber_mutex_unlock() */
}

int fiber_mutex_lock(FiberMutex *m)
{
        if (fiber_cancelled())
                return -ECANCELED;
        return mutex_lock(m, true);
}

void fiber_mutex_unlock(FiberMutex *m)
{
        int expected = 1;
        Waiter *w;

        if (__atomic_compare_exchange_n(&m->state, &expected, 0, false, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
                return;
        spin_lock(&m->waiters.lock);
        w = claim_first(&m->waiters);
        if (w) {
                /* Hand over: the state stays locked; 2 while more may wait. */
                __atomic_store_n(&m->state, wait_list_empty(&m->waiters) ? 1 : 2, __ATOMIC_RELEASE);
        } else {
                __atomic_store_n(&m->state, 0, __ATOMIC_RELEASE);
        }
        spin_unlock(&m->waiters.lock);
        if (w)
                waiter_wake(w);
}

/* ------------------------------------------------------------------ condition ----- */

void fiber_cond_init(FiberCond *c)
{
        *c = (FiberCond){0};
}

int fiber_cond_wait(FiberCond *c, FiberMutex *m, uint64_t deadline_ns)
{
        Waiter w;
        int r;

        if (fiber_cancelled())
                return -ECANCELED;
        waiter_prepare(&w);
        spin_lock(&c->waiters.lock);
        wait_list_push(&c->waiters, &w);
        spin_unlock(&c->waiters.lock);
        fiber_mutex_unlock(m);
        r = block_on(&c->waiters, &w, deadline_ns);
        mutex_lock(m, false);
        return r;
}

void fiber_cond_signal(FiberCond *c)
{
        Waiter *w;

        spin_lock(&c->waiters.lock);
        w = claim_first(&c->waiters);
        spin_unlock(&c->waiters.lock);
        if (w)
                waiter_wake(w);
}

/* Wake every waiter on @l with reason 0; the list lock is held on entry and released. */
static void wake_all_locked(SchedWaitList *l)
{
        ListHead batch = LIST_HEAD_INIT(batch);
        Waiter *w;

        while ((w = claim_first(l)))
                list_add_head(&batch, &w->link); /* newest first, as before */
        spin_unlock(&l->lock);
        wake_batch(&batch);
}

void fiber_cond_broadcast(FiberCond *c)
{
        spin_lock(&c->waiters.lock);
        wake_all_locked(&c->waiters);
}

/* ------------------------------------------------------------------ semaphore ----- */

void fiber_sem_init(FiberSemaphore *s, int64_t count)
{
        *s = (FiberSemaphore){.count = count};
}

bool fiber_sem_trywait(FiberSemaphore *s)
{
        bool ok = false;
        spin_lock(&s->waiters.lock);
        if (s->count > 0) {
                s->count--;
                ok = true;
        }
        spin_unlock(&s->waiters.lock);
        return ok;
}

int fiber_sem_wait(FiberSemaphore *s, uint64_t deadline_ns)
{
        Waiter w;

        if (fiber_cancelled())
                return -ECANCELED;
        waiter_prepare(&w);
        spin_lock(&s->waiters.lock);
        if (s->count > 0) {
                s->count--;
                spin_unlock(&s->waiters.lock);
                return 0;
        }
        wait_list_push(&s->waiters, &w);
        spin_unlock(&s->waiters.lock);
        return block_on(&s->waiters, &w, deadline_ns); /* 0: handed a unit */
}

void fiber_sem_post(FiberSemaphore *s, int64_t n)
{
        ListHead batch = LIST_HEAD_INIT(batch);
        Waiter *w;

        spin_lock(&s->waiters.lock);
        s->count += n;
        while (s->count > 0 && (w = claim_first(&s->waiters))) {
                s->count--;
                list_add_head(&batch, &w->link);
        }
        spin_unlock(&s->waiters.lock);
        wake_batch(&batch);
}

/* ------------------------------------------------------------------ latch --------- */

void fiber_latch_init(FiberLatch *l, int64_t count)
{
        *l = (FiberLatch){.count = count};
}

void fiber_latch_add(FiberLatch *l, int64_t n)
{
        spin_lock(&l->waiters.lock);
        l->count += n;
        if (l->count <= 0) {
                wake_all_locked(&l->waiters);
                return;
        }
        spin_unlock(&l->waiters.lock);
}

void fiber_latch_count_down(FiberLatch *l)
{
        fiber_latch_add(l, -1);
}

int fiber_latch_wait(FiberLatch *l, uint64_t deadline_ns)
{
        Waiter w;

        if (fiber_cancelled())
                return -ECANCELED;
        waiter_prepare(&w);
        spin_lock(&l->waiters.lock);
        if (l->count <= 0) {
                spin_unlock(&l->waiters.lock);
                return 0;
        }
        wait_list_push(&l->waiters, &w);
        spin_unlock(&l->waiters.lock);
        return block_on(&l->waiters, &w, deadline_ns);
}

/* ------------------------------------------------------------------ event --------- */

void fiber_event_init(FiberEvent *e)
{
        *e = (FiberEvent){0};
}

void fiber_event_set(FiberEvent *e)
{
        spin_lock(&e->waiters.lock);
        __atomic_store_n(&e->waiters.word, 1, __ATOMIC_RELEASE); /* fiber_event_is_set() */
        wake_all_locked(&e->waiters);
}

bool fiber_event_is_set(const FiberEvent *e)
{
        return __atomic_load_n(&e->waiters.word, __ATOMIC_ACQUIRE);
}

void fiber_event_reset(FiberEvent *e)
{
        spin_lock(&e->waiters.lock);
        __atomic_store_n(&e->waiters.word, 0, __ATOMIC_RELAXED);
        spin_unlock(&e->waiters.lock);
}

int fiber_event_wait(FiberEvent *e, uint64_t deadline_ns)
{
        Waiter w;

        if (fiber_cancelled())
                return -ECANCELED;
        waiter_prepare(&w);
        spin_lock(&e->waiters.lock);
        if (__atomic_load_n(&e->waiters.word, __ATOMIC_RELAXED)) {
                spin_unlock(&e->waiters.lock);
                return 0;
        }
        wait_list_push(&e->waiters, &w);
        spin_unlock(&e->waiters.lock);
        return block_on(&e->waiters, &w, deadline_ns);
}

/* ------------------------------------------------------------------ rwlock -------- */

enum { RW_READ = 1, RW_WRITE = 2 };

void fiber_rwlock_init(FiberRwLock *l)
{
        *l = (FiberRwLock){0};
}

/* Grant the lock to the waiters at the head of the queue that can have it now: one
 * writer, or every reader up to the first writer. Collects them in @batch. */
static void rwlock_grant_locked(FiberRwLock *l, ListHead *batch)
{
        Waiter *w;

        while (!l->writer && (w = wait_list_first(&l->waiters))) {
                if (w->data == RW_WRITE) {
                        if (l->readers)
                                break;
                        wait_list_remove(w);
                        l->writers_waiting--;
                        if (!waiter_claim(w, 0))
                                continue; /* leaving; the next may proceed */
                        l->writer = true;
                } else {
                        wait_list_remove(w);
                        if (!waiter_claim(w, 0))
                                continue;
                        l->readers++;
                }
                list_add_head(batch, &w->link);
        }
}

static int rwlock_lock(FiberRwLock *l, uint32_t kind)
{
        ListHead batch = LIST_HEAD_INIT(batch);
        Waiter w;
        int r;

        if (fiber_cancelled())
                return -ECANCELED;
        waiter_prepare(&w);
        w.data = kind;
        spin_lock(&l->waiters.lock);
        if (kind == RW_READ && !l->writer && !l->writers_waiting) {
                l->readers++;
                spin_unlock(&l->waiters.lock);
                return 0;
        }
        if (kind == RW_WRITE && !l->writer && !l->readers && wait_list_empty(&l->waiters)) {
                l->writer = true;
                spin_unlock(&l->waiters.lock);
                return 0;
        }
        if (kind == RW_WRITE)
                l->writers_waiting++;
        wait_list_push(&l->waiters, &w);
        spin_unlock(&l->waiters.lock);

        r = waiter_block(&w, SCHED_FOREVER);
        if (r == 0)
                return 0; /* granted by an unlock */
        spin_lock(&l->waiters.lock);
        if (list_linked(&w.link)) {
                wait_list_remove(&w);
                if (kind == RW_WRITE)
                        l->writers_waiting--;
        }
        /* A writer leaving may let the readers queued behind it in. */
        rwlock_grant_locked(l, &batch);
        spin_unlock(&l->waiters.lock);
        wake_batch(&batch);
        return r;
}

int fiber_rwlock_rdlock(FiberRwLock *l)
{
        return rwlock_lock(l, RW_READ);
}

int fiber_rwlock_wrlock(FiberRwLock *l)
{
        return rwlock_lock(l, RW_WRITE);
}

void fiber_rwlock_unlock(FiberRwLock *l)
{
        ListHead batch = LIST_HEAD_INIT(batch);

        spin_lock(&l->waiters.lock);
        if (l->writer)
                l->writer = false;
        else
                l->readers--;
        rwlock_grant_locked(l, &batch);
        spin_unlock(&l->waiters.lock);
        wake_batch(&batch);
}
