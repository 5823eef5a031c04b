/* SPDX-License-Identifier: MIT */
/* Sync primitives under many fibers on several workers (plus plain pthreads), each
 * with its invariant checked: mutual exclusion counters, no lost signals, semaphore
 * units conserved, readers never beside a writer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "helpers.h"

#define FIBERS 64
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define ROUNDS 200
#else
#define ROUNDS 2000
#endif

static void spawn_all(SchedulingGroup *g, FiberFn fn, void *arg, int n)
{
        FiberAttr a = {.group = g};
        Fiber **f = calloc((size_t)n, sizeof(*f));
        for (int i = 0; i < n; i++)
                cr_assert_eq(fiber_create(&f[i], &a, fn, arg), 0);
        for (int i = 0; i < n; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        free(f);
}

/* ------------------------------------------------------------------ mutex --------- */

typedef struct Shared {
        FiberMutex mu;
        int inside; /* fibers inside the critical section: must stay <= 1 */
        int violations;
        long counter;
} Shared;

static void mutex_worker(void *arg)
{
        Shared *s = arg;
        for (int i = 0; i < ROUNDS; i++) {
                cr_assert_eq(fiber_mutex_lock(&s->mu), 0);
                if (++s->inside != 1)
                        s->violations++;
                s->counter++;
                if (i % 7 == 0)
                        fiber_yield(); /* hold it across a switch sometimes */
                s->inside--;
                fiber_mutex_unlock(&s->mu);
        }
}

static void *mutex_thread(void *arg)
{
        Shared *s = arg;
        for (int i = 0; i < ROUNDS; i++) {
                fiber_mutex_lock(&s->mu);
                if (++s->inside != 1)
                        s->violations++;
                s->counter++;
                s->inside--;
                fiber_mutex_unlock(&s->mu);
        }
        return NULL;
}

Test(sync, mutex_excludes_fibers_and_threads)
{
        SchedulingGroup *g = test_group(2);
        Shared s = {0};
        pthread_t t;
        fiber_mutex_init(&s.mu);
        pthread_create(&t, NULL, mutex_thread, &s);
        spawn_all(g, mutex_worker, &s, FIBERS);
        pthread_join(t, NULL);
        cr_assert_eq(s.violations, 0);
        cr_assert_eq(s.counter, (long)(FIBERS + 1) * ROUNDS);
        cr_assert(fiber_mutex_trylock(&s.mu));
        cr_assert_not(fiber_mutex_trylock(&s.mu));
        fiber_mutex_unlock(&s.mu);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ cond ---------- */

typedef struct Queue {
        FiberMutex mu;
        FiberCond not_empty, not_full;
        int items[8];
        int n;
        long produced_sum, consumed_sum;
        int consumed;
} Queue;

#define ITEMS_PER_PRODUCER ROUNDS

static void producer(void *arg)
{
        Queue *q = arg;
        for (int i = 1; i <= ITEMS_PER_PRODUCER; i++) {
                fiber_mutex_lock(&q->mu);
                while (q->n == 8)
                        fiber_cond_wait(&q->not_full, &q->mu, SCHED_FOREVER);
                q->items[q->n++] = i;
                q->produced_sum += i;
                fiber_cond_signal(&q->not_empty);
                fiber_mutex_unlock(&q->mu);
        }
}

static void consumer(void *arg)
{
        Queue *q = arg;
        for (int i = 0; i < ITEMS_PER_PRODUCER; i++) {
                fiber_mutex_lock(&q->mu);
                while (q->n == 0)
                        fiber_cond_wait(&q->not_empty, &q->mu, SCHED_FOREVER);
                q->consumed_sum += q->items[--q->n];
                q->consumed++;
                fiber_cond_signal(&q->not_full);
                fiber_mutex_unlock(&q->mu);
        }
}

static void half_and_half(void *arg)
{
        static int k;
        if (__atomic_fetch_add(&k, 1, __ATOMIC_RELAXED) % 2)
                producer(arg);
        else
                consumer(arg);
}

Test(sync, condvar_loses_no_signal)
{
        SchedulingGroup *g = test_group(2);
        Queue q = {0};
        fiber_mutex_init(&q.mu);
        fiber_cond_init(&q.not_empty);
        fiber_cond_init(&q.not_full);
        spawn_all(g, half_and_half, &q, 32); /* 16 producers, 16 consumers */
        cr_assert_eq(q.consumed, 16 * ITEMS_PER_PRODUCER);
        cr_assert_eq(q.consumed_sum, q.produced_sum);
        cr_assert_eq(q.n, 0);
        sched_group_free(g);
}

static void cond_timeout(void *arg)
{
        int *rc = arg;
        FiberMutex mu;
        FiberCond c;
        fiber_mutex_init(&mu);
        fiber_cond_init(&c);
        fiber_mutex_lock(&mu);
        rc[0] = fiber_cond_wait(&c, &mu, sched_deadline_after(2 * MS_NS));
        rc[1] = fiber_mutex_trylock(&mu); /* still held by us: must fail */
        fiber_mutex_unlock(&mu);
}

Test(sync, condvar_timeout_reacquires)
{
        SchedulingGroup *g = test_group(1);
        int rc[2] = {0, 1};
        run_in_fiber(g, cond_timeout, rc);
        cr_assert_eq(rc[0], -ETIMEDOUT);
        cr_assert_eq(rc[1], 0, "the mutex is held again after a timed-out wait");
        sched_group_free(g);
}

/* ------------------------------------------------------------------ semaphore ----- */

typedef struct Pool {
        FiberSemaphore sem;
        int in_use, max_in_use;
} Pool;

static void pool_user(void *arg)
{
        Pool *p = arg;
        for (int i = 0; i < ROUNDS / 10; i++) {
                cr_assert_eq(fiber_sem_wait(&p->sem, SCHED_FOREVER), 0);
                int now = __atomic_add_fetch(&p->in_use, 1, __ATOMIC_ACQ_REL);
                int max = __atomic_load_n(&p->max_in_use, __ATOMIC_RELAXED);
                while (now > max &&
                       !__atomic_compare_exchange_n(&p->max_in_use, &max, now, false,
                                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                        ;
                fiber_yield();
                __atomic_sub_fetch(&p->in_use, 1, __ATOMIC_ACQ_REL);
                fiber_sem_post(&p->sem, 1);
        }
}

Test(sync, semaphore_bounds_concurrency)
{
        SchedulingGroup *g = test_group(2);
        Pool p = {0};
        fiber_sem_init(&p.sem, 3);
        spawn_all(g, pool_user, &p, FIBERS);
        cr_assert_leq(p.max_in_use, 3);
        cr_assert_geq(p.max_in_use, 1);
        /* all units are back */
        int units = 0;
        while (fiber_sem_trywait(&p.sem))
                units++;
        cr_assert_eq(units, 3);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ latch --------- */

typedef struct Gate {
        FiberLatch start, done;
        int passed;
} Gate;

static void gate_user(void *arg)
{
        Gate *gt = arg;
        cr_assert_eq(fiber_latch_wait(&gt->start, SCHED_FOREVER), 0);
        __atomic_fetch_add(&gt->passed, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&gt->done);
}

Test(sync, latch_releases_everyone_once)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g, .detached = true};
        Gate gt = {0};
        fiber_latch_init(&gt.start, 1);
        fiber_latch_init(&gt.done, 0);
        fiber_latch_add(&gt.done, FIBERS); /* Go's WaitGroup.Add */
        for (int i = 0; i < FIBERS; i++)
                cr_assert_eq(fiber_create(NULL, &a, gate_user, &gt), 0);
        cr_assert_eq(fiber_latch_wait(&gt.done, sched_deadline_after(MS_NS)), -ETIMEDOUT);
        cr_assert_eq(gt.passed, 0, "nobody passes a closed latch");
        fiber_latch_count_down(&gt.start);
        cr_assert_eq(fiber_latch_wait(&gt.done, sched_deadline_after(60 * SEC_NS)), 0);
        cr_assert_eq(gt.passed, FIBERS);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ rwlock -------- */

typedef struct Rw {
        FiberRwLock l;
        int readers, writers, violations;
        long value;
} Rw;

static void rw_user(void *arg)
{
        Rw *rw = arg;
        for (int i = 0; i < ROUNDS / 4; i++) {
                if (i % 5 == 0) {
                        cr_assert_eq(fiber_rwlock_wrlock(&rw->l), 0);
                        if (__atomic_add_fetch(&rw->writers, 1, __ATOMIC_ACQ_REL) != 1 ||
                            __atomic_load_n(&rw->readers, __ATOMIC_ACQUIRE))
                                __atomic_fetch_add(&rw->violations, 1, __ATOMIC_RELAXED);
                        rw->value++;
                        fiber_yield();
                        __atomic_sub_fetch(&rw->writers, 1, __ATOMIC_ACQ_REL);
                } else {
                        cr_assert_eq(fiber_rwlock_rdlock(&rw->l), 0);
                        __atomic_add_fetch(&rw->readers, 1, __ATOMIC_ACQ_REL);
                        if (__atomic_load_n(&rw->writers, __ATOMIC_ACQUIRE))
                                __atomic_fetch_add(&rw->violations, 1, __ATOMIC_RELAXED);
                        fiber_yield();
                        __atomic_sub_fetch(&rw->readers, 1, __ATOMIC_ACQ_REL);
                }
                fiber_rwlock_unlock(&rw->l);
        }
}

Test(sync, rwlock_never_mixes_readers_and_writer)
{
        SchedulingGroup *g = test_group(2);
        Rw rw = {0};
        fiber_rwlock_init(&rw.l);
        spawn_all(g, rw_user, &rw, 32);
        cr_assert_eq(rw.violations, 0);
        cr_assert_eq(rw.value, 32L * ((ROUNDS / 4 + 4) / 5));
        sched_group_free(g);
}

/* ------------------------------------------------------------------ event --------- */

typedef struct Ev {
        FiberEvent e;
        FiberLatch waiting, done;
        int woken;
} Ev;

static void ev_waiter(void *arg)
{
        Ev *ev = arg;
        fiber_latch_count_down(&ev->waiting);
        cr_assert_eq(fiber_event_wait(&ev->e, SCHED_FOREVER), 0);
        __atomic_fetch_add(&ev->woken, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&ev->done);
}

static void *setter_thread(void *arg)
{
        Ev *ev = arg;
        fiber_latch_wait(&ev->waiting, SCHED_FOREVER); /* a pthread waits too */
        fiber_event_set(&ev->e);
        return NULL;
}

Test(sync, event_set_by_a_foreign_pthread)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g, .detached = true};
        Ev ev = {0};
        pthread_t t;
        fiber_event_init(&ev.e);
        fiber_latch_init(&ev.waiting, FIBERS);
        fiber_latch_init(&ev.done, FIBERS);
        cr_assert(!fiber_event_is_set(&ev.e));
        for (int i = 0; i < FIBERS; i++)
                cr_assert_eq(fiber_create(NULL, &a, ev_waiter, &ev), 0);
        pthread_create(&t, NULL, setter_thread, &ev);
        cr_assert_eq(fiber_latch_wait(&ev.done, sched_deadline_after(60 * SEC_NS)), 0);
        pthread_join(t, NULL);
        cr_assert_eq(ev.woken, FIBERS);
        cr_assert(fiber_event_is_set(&ev.e));
        cr_assert_eq(fiber_event_wait(&ev.e, 0), 0, "stays set");
        fiber_event_reset(&ev.e);
        cr_assert(!fiber_event_is_set(&ev.e));
        cr_assert_eq(fiber_event_wait(&ev.e, 0), -ETIMEDOUT);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ cancel -------- */

typedef struct Blocked {
        FiberMutex mu;
        FiberSemaphore sem;
        FiberRwLock rw;
        int rc[3];
        FiberLatch parked;
} Blocked;

static void block_everywhere(void *arg)
{
        Blocked *b = arg;
        fiber_latch_count_down(&b->parked);
        b->rc[0] = fiber_sem_wait(&b->sem, SCHED_FOREVER); /* cancelled here */
        b->rc[1] = fiber_mutex_lock(&b->mu);
        b->rc[2] = fiber_rwlock_wrlock(&b->rw);
}

Test(sync, cancel_makes_every_wait_fail)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        Blocked b;
        Fiber *f;
        fiber_mutex_init(&b.mu);
        fiber_sem_init(&b.sem, 0);
        fiber_rwlock_init(&b.rw);
        fiber_latch_init(&b.parked, 1);
        cr_assert(fiber_mutex_trylock(&b.mu)); /* held by the test: lock would block */
        cr_assert_eq(fiber_create(&f, &a, block_everywhere, &b), 0);
        cr_assert_eq(fiber_latch_wait(&b.parked, SCHED_FOREVER), 0);
        fiber_cancel(f);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(b.rc[0], -ECANCELED);
        cr_assert_eq(b.rc[1], -ECANCELED);
        cr_assert_eq(b.rc[2], -ECANCELED);
        fiber_sem_post(&b.sem, 1);
        cr_assert(fiber_sem_trywait(&b.sem), "the cancelled waiter took no unit");
        fiber_mutex_unlock(&b.mu);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ zeroed -------- */

/* Every primitive may be zeroed instead of initialised (sched.h): an all-zero wait list
 * is a valid empty one, set up by the first waiter that queues on it. */
typedef struct Zeroed {
        FiberMutex mu;
        FiberCond cond;
        FiberSemaphore sem;
        int rc[3];
} Zeroed;

static void zeroed_waiter(void *arg)
{
        Zeroed *z = arg;
        z->rc[0] = fiber_mutex_lock(&z->mu); /* queues: the test holds it */
        z->rc[1] = fiber_cond_wait(&z->cond, &z->mu, sched_deadline_after(MS_NS));
        fiber_mutex_unlock(&z->mu);
        z->rc[2] = fiber_sem_wait(&z->sem, SCHED_FOREVER);
}

Test(sync, zeroed_primitives_queue_waiters)
{
        static Zeroed z; /* all zero, never _init()ed */
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        Fiber *f;

        cr_assert(fiber_mutex_trylock(&z.mu));
        cr_assert_eq(fiber_create(&f, &a, zeroed_waiter, &z), 0);
        /* State 2 is set under the list lock with the push: unlock hands it over. */
        while (__atomic_load_n(&z.mu.state, __ATOMIC_ACQUIRE) != 2)
                sched_yield();
        fiber_mutex_unlock(&z.mu);
        fiber_sem_post(&z.sem, 1);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(z.rc[0], 0);
        cr_assert_eq(z.rc[1], -ETIMEDOUT);
        cr_assert_eq(z.rc[2], 0);
        cr_assert(fiber_mutex_trylock(&z.mu), "the mutex was released");
        sched_group_free(g);
}
