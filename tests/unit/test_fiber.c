/* SPDX-License-Identifier: MIT */
/* Fibers: create / join / detach, yield, ids and tags, fiber-local storage,
 * cancellation, backpressure, migration between workers, and the group's stats. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"
#include "scheduler/runtime.h"

static void add_one(void *arg)
{
        __atomic_fetch_add((int *)arg, 1, __ATOMIC_RELAXED);
}

Test(fiber, create_join_from_a_pthread)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        Fiber *f[100];
        int n = 0;

        for (int i = 0; i < 100; i++)
                cr_assert_eq(fiber_create(&f[i], &a, add_one, &n), 0);
        for (int i = 0; i < 100; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        cr_assert_eq(n, 100);
        sched_group_free(g);
}

Test(fiber, rejects_bad_arguments)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        FiberAttr d = {.group = g, .detached = true};
        FiberAttr s = {.group = g, .stack_size = 12345};
        Fiber *f;
        int n = 0;

        cr_assert_eq(fiber_create(NULL, &a, add_one, &n), -EINVAL, "joinable needs a handle");
        cr_assert_eq(fiber_create(&f, &d, add_one, &n), -EINVAL, "detached takes none");
        cr_assert_eq(fiber_create(&f, &s, add_one, &n), -EINVAL, "stack not a page multiple");
        cr_assert_eq(fiber_create(&f, NULL, add_one, &n), -EINVAL, "no group from a pthread");
        cr_assert_null(fiber_self());
        sched_group_free(g);
}

Test(fiber, group_config_is_checked)
{
        SchedulingGroup *g;
        SchedGroupConfig too_many = {.workers = 65};
        SchedGroupConfig not_pow2 = {.runq_capacity = 1000};
        SchedGroupConfig over_cap = {.runq_capacity = 1024, .max_fibers = 2048};
        cr_assert_eq(sched_group_new(&g, &too_many), -EINVAL);
        cr_assert_eq(sched_group_new(&g, &not_pow2), -EINVAL);
        cr_assert_eq(sched_group_new(&g, &over_cap), -EINVAL);
}

Test(fiber, nested_spawn_and_join)
{
        SchedulingGroup *g = test_group(2);
        Tree t = {.depth = 6};
        run_in_fiber(g, tree, &t);
        cr_assert_eq(t.sum, 4096);
        SchedGroupStats s;
        sched_group_stats(g, &s);
        cr_assert_geq(s.fibers_created, 1 + 5460);
        sched_group_free(g);
}

static int yields_seen[2];
static int turn;

static void yielder(void *arg)
{
        int me = (int)(intptr_t)arg;
        for (int i = 0; i < 1000; i++) {
                yields_seen[me]++;
                __atomic_store_n(&turn, me, __ATOMIC_RELAXED);
                cr_assert_eq(fiber_yield(), 0);
        }
}

static void two_yielders(void *arg)
{
        Fiber *f0, *f1;
        /* Both are queued before either runs: this fiber holds the only worker. */
        cr_assert_eq(fiber_create(&f0, NULL, yielder, (void *)0), 0);
        cr_assert_eq(fiber_create(&f1, NULL, yielder, (void *)1), 0);
        cr_assert_eq(fiber_join(f0), 0);
        cr_assert_eq(fiber_join(f1), 0);
}

Test(fiber, yield_alternates_on_one_worker)
{
        SchedulingGroup *g = test_group(1);
        run_in_fiber(g, two_yielders, NULL);
        cr_assert_eq(yields_seen[0], 1000);
        cr_assert_eq(yields_seen[1], 1000);
        SchedGroupStats s;
        sched_group_stats(g, &s);
        cr_assert_geq(s.context_switches, 2000, "each yield switched to the other fiber");
        sched_group_free(g);
}

/* A fiber that yields must get the worker back even while a chain of new fibers
 * (each spawning the next) keeps the run queue busy: yields are served every 8th pop. */
#define YIELD_CHAIN_CAP 2000000

static void yield_race_yielder(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        SpawnChain *c = arg;
        cr_assert_eq(fiber_create(NULL, &detached, spawn_chain_link, c), 0);
        for (int i = 0; i < 100; i++)
                cr_assert_eq(fiber_yield(), 0);
        __atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
}

Test(fiber, yield_is_not_starved_by_new_work)
{
        SchedulingGroup *g = test_group(1);
        SpawnChain c;

        spawn_chain_init(&c, YIELD_CHAIN_CAP);
        run_in_fiber(g, yield_race_yielder, &c);
        cr_assert_lt(spawn_chain_wait(&c), YIELD_CHAIN_CAP,
                     "the yielder waited for the whole chain");
        sched_group_free(g);
}

/* Three CPU-bound fibers that yield, on two workers: each must get to run on both
 * workers (the yield list alone would keep two of them on one worker forever, each
 * with a third of the CPU the lone one gets). The worker is told apart by its thread
 * id, read with a system call the compiler cannot cache across a switch. The 30 s
 * deadline only bounds a failing run: a lone fiber yields fast, and a worker held off
 * its CPU by a loaded machine must not make a yield count run out first. */
typedef struct Spread {
        struct SpreadRun *run;
        pid_t first;
        int moved;
        long yields;
} Spread;

typedef struct SpreadRun {
        Spread s[3];
        uint64_t deadline_ns;
} SpreadRun;

static int spread_all_moved(SpreadRun *r)
{
        int n = 0;
        for (int i = 0; i < 3; i++)
                n += __atomic_load_n(&r->s[i].moved, __ATOMIC_ACQUIRE);
        return n == 3;
}

static void spreader(void *arg)
{
        Spread *me = arg;

        me->first = (pid_t)syscall(SYS_gettid);
        while (!spread_all_moved(me->run) && sched_now_ns() < me->run->deadline_ns) {
                cr_assert_eq(fiber_yield(), 0);
                me->yields++;
                if ((pid_t)syscall(SYS_gettid) != me->first)
                        __atomic_store_n(&me->moved, 1, __ATOMIC_RELEASE);
        }
}

Test(fiber, yielders_spread_over_the_workers)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        SpreadRun r = {.deadline_ns = sched_deadline_after(30 * SEC_NS)};
        Fiber *f[3];

        for (int i = 0; i < 3; i++) {
                r.s[i].run = &r;
                cr_assert_eq(fiber_create(&f[i], &a, spreader, &r.s[i]), 0);
        }
        for (int i = 0; i < 3; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        for (int i = 0; i < 3; i++)
                cr_assert_eq(r.s[i].moved, 1, "fiber %d stayed on one worker for %ld yields", i,
                             r.s[i].yields);
        sched_group_free(g);
}

static void check_identity(void *arg)
{
        Fiber *self = fiber_self();
        cr_assert_not_null(self);
        cr_assert_str_eq(fiber_tag(self), "job 7 plugin test");
        cr_assert_gt(fiber_id(self), 0);
        *(uint64_t *)arg = fiber_id(self);
}

Test(fiber, id_and_tag)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g, .tag = "job 7 plugin test"};
        uint64_t id1 = 0, id2 = 0;
        Fiber *f1, *f2;
        cr_assert_eq(fiber_create(&f1, &a, check_identity, &id1), 0);
        cr_assert_eq(fiber_create(&f2, &a, check_identity, &id2), 0);
        cr_assert_eq(fiber_id(f1) != fiber_id(f2), true);
        cr_assert_eq(fiber_join(f1), 0);
        cr_assert_eq(fiber_join(f2), 0);
        cr_assert_neq(id1, id2);
        sched_group_free(g);
}

static int fls_key;

static void fls_user(void *arg)
{
        int *bad = arg;
        intptr_t mine = (intptr_t)fiber_id(fiber_self());
        cr_assert_null(fiber_local_get(fls_key), "a new fiber starts with NULL");
        cr_assert_eq(fiber_local_set(fls_key, (void *)mine), 0);
        for (int i = 0; i < 50; i++) {
                fiber_yield();
                if ((intptr_t)fiber_local_get(fls_key) != mine)
                        __atomic_fetch_add(bad, 1, __ATOMIC_RELAXED);
        }
}

Test(fiber, local_storage_is_per_fiber)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        Fiber *f[20];
        int bad = 0;

        fls_key = fiber_key_create();
        cr_assert_geq(fls_key, 0);
        cr_assert_eq(fiber_local_set(fls_key, &bad), -EPERM, "not in a fiber");
        cr_assert_eq(fiber_local_set(SCHED_FLS_KEYS, &bad), -EINVAL);
        for (int i = 0; i < 20; i++)
                cr_assert_eq(fiber_create(&f[i], &a, fls_user, &bad), 0);
        for (int i = 0; i < 20; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
        cr_assert_eq(bad, 0);
        sched_group_free(g);
}

/* Where a fiber's slots were and what it found in them, and a value it leaves there. */
typedef struct FlsReuse {
        void **slots;
        void *seen;
} FlsReuse;

static void fls_leave_value(void *arg)
{
        FlsReuse *r = arg;

        r->slots = fiber_fls(fiber_self());
        r->seen = fiber_local_get(fls_key);
        cr_assert_eq(fiber_local_set(fls_key, r), 0);
        cr_assert_eq(r->slots[fls_key], r, "its value is where fiber_fls() says");
}

/* The slots live at the top of the stack (runtime.h): a fiber that takes a stack another
 * one set a value on still starts with NULL (the first one's exit cleared it). */
Test(fiber, local_storage_starts_empty_on_a_reused_stack)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        FlsReuse first = {0}, second = {0};
        Fiber *f;

        fls_key = fiber_key_create();
        cr_assert_geq(fls_key, 0);
        cr_assert_eq(fiber_create(&f, &a, fls_leave_value, &first), 0);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(fiber_create(&f, &a, fls_leave_value, &second), 0);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(second.slots, first.slots,
                     "the second fiber took the first one's stack from the worker's cache");
        cr_assert_null(second.seen, "the first fiber's value was still in the slot");
        sched_group_free(g);
}

static void sleep_until_cancelled(void *arg)
{
        int *r = arg;
        r[0] = fiber_sleep_for(3600 * SEC_NS);
        r[1] = fiber_sleep_for(1); /* every later blocking call too */
        r[2] = fiber_yield();
        r[3] = fiber_cancelled();
}

Test(fiber, cancel_interrupts_a_sleep)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g};
        Fiber *f;
        int r[4] = {1, 1, 1, 0};
        SchedGroupStats s;

        cr_assert_eq(fiber_create(&f, &a, sleep_until_cancelled, r), 0);
        do { /* wait until it is parked: a switch happened and nothing is ready */
                sched_group_stats(g, &s);
        } while (s.context_switches < 1 || s.runq_depth);
        fiber_cancel(f);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(r[0], -ECANCELED);
        cr_assert_eq(r[1], -ECANCELED);
        cr_assert_eq(r[2], -ECANCELED);
        cr_assert_eq(r[3], 1);
        sched_group_free(g);
}

static void block_on_event(void *arg)
{
        FiberEvent *e = arg;
        fiber_event_wait(e, SCHED_FOREVER);
}

Test(fiber, backpressure_returns_eagain)
{
        SchedGroupConfig cfg = {.workers = 1, .runq_capacity = 64, .max_fibers = 16};
        SchedulingGroup *g;
        FiberAttr a = {.detached = true};
        FiberEvent e;
        int n = 0;

        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        a.group = g;
        fiber_event_init(&e);
        for (int i = 0; i < 16; i++)
                cr_assert_eq(fiber_create(NULL, &a, block_on_event, &e), 0);
        cr_assert_eq(fiber_create(NULL, &a, add_one, &n), -EAGAIN);
        SchedGroupStats s;
        sched_group_stats(g, &s);
        cr_assert_eq(s.runq_full, 1);
        fiber_event_set(&e);
        do { /* the slots come back as the fibers finish */
                sched_group_stats(g, &s);
        } while (s.fibers_alive);
        cr_assert_eq(fiber_create(NULL, &a, add_one, &n), 0);
        sched_group_free(g);
}

/* A worker counts the exits of its group's fibers and takes them off the group's
 * alive count in batches (alive_flush()): a worker that never goes idle must still
 * report them in the stats at once, and a creation at max_fibers must see them. */
typedef struct BusyCreator {
        SchedulingGroup *g;
        int ran;
        uint64_t alive_seen;
        int second_round; /* creations that succeeded after the first round ended */
} BusyCreator;

static void busy_creator(void *arg)
{
        BusyCreator *b = arg;
        FiberAttr a = {.group = b->g, .detached = true};
        SchedGroupStats s;

        /* 15 children and this fiber: the group's max_fibers of 16 */
        for (int i = 0; i < 15; i++)
                cr_assert_eq(fiber_create(NULL, &a, add_one, &b->ran), 0);
        /* one worker: they run as this fiber yields, and it never goes idle */
        while (__atomic_load_n(&b->ran, __ATOMIC_RELAXED) < 15)
                fiber_yield();
        fiber_yield(); /* the last one's exit is done at the switch after it */
        sched_group_stats(b->g, &s);
        b->alive_seen = s.fibers_alive;
        for (int i = 0; i < 15; i++)
                b->second_round += fiber_create(NULL, &a, add_one, &b->ran) == 0;
}

Test(fiber, exits_are_counted_while_their_worker_stays_busy)
{
        SchedGroupConfig cfg = {.workers = 1, .runq_capacity = 64, .max_fibers = 16};
        BusyCreator b = {0};

        cr_assert_eq(sched_group_new(&b.g, &cfg), 0);
        run_in_fiber(b.g, busy_creator, &b);
        cr_assert_eq(b.alive_seen, 1, "fibers_alive %llu with only the creator left",
                     (unsigned long long)b.alive_seen);
        cr_assert_eq(b.second_round, 15, "only %d of 15 creations after 15 exits", b.second_round);
        sched_group_free(b.g);
}

/* The same seen from a thread off the group: the exits a busy worker counted and has
 * not added to the group's count yet must not make a creation at max_fibers fail. */
typedef struct BusyYielder {
        SchedulingGroup *g;
        int ran;     /* children that ran */
        int stop;    /* set by the test */
        int created; /* children it created */
} BusyYielder;

static void busy_yielder(void *arg)
{
        BusyYielder *b = arg;
        FiberAttr a = {.group = b->g, .detached = true};

        for (int i = 0; i < 14; i++)
                b->created += fiber_create(NULL, &a, add_one, &b->ran) == 0;
        /* one worker: its children run as it yields, and it never goes idle */
        while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE))
                fiber_yield();
}

Test(fiber, a_creator_off_the_group_sees_the_exits_a_busy_worker_counted)
{
        SchedGroupConfig cfg = {.workers = 1, .runq_capacity = 64, .max_fibers = 16};
        FiberAttr a = {.detached = true};
        BusyYielder b = {0};
        Fiber *busy;
        int ok = 0, more = 0;

        cr_assert_eq(sched_group_new(&b.g, &cfg), 0);
        a.group = b.g;
        FiberAttr ja = {.group = b.g};
        cr_assert_eq(fiber_create(&busy, &ja, busy_yielder, &b), 0);
        uint64_t deadline = sched_deadline_after(60 * SEC_NS);
        while (__atomic_load_n(&b.ran, __ATOMIC_RELAXED) < 14 && sched_now_ns() < deadline)
                usleep(1000);
        cr_assert_eq(__atomic_load_n(&b.ran, __ATOMIC_RELAXED), 14);
        /* 1 live (the yielder) of 16: 15 more fit, whatever its worker still counts */
        for (int i = 0; i < 15; i++)
                ok += fiber_create(NULL, &a, add_one, &more) == 0;
        __atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
        cr_assert_eq(fiber_join(busy), 0);
        cr_assert_eq(b.created, 14);
        cr_assert_eq(ok, 15, "only %d of 15 creations with 1 fiber of 16 alive", ok);
        sched_group_free(b.g);
}

/* errno safety and migration: a fiber's locals survive resuming on another worker. */
/* The kernel thread id, through a real syscall each time: glibc declares
 * pthread_self() const, so the compiler may reuse a value from before a switch. */
static long tid(void)
{
        return syscall(SYS_gettid);
}

static long workers_seen[64];
static int nseen;
static int seen_lock;

static void note_thread(void)
{
        long me = tid();
        while (__atomic_exchange_n(&seen_lock, 1, __ATOMIC_ACQUIRE))
                ;
        int i;
        for (i = 0; i < nseen; i++)
                if (workers_seen[i] == me)
                        break;
        if (i == nseen && nseen < 64)
                workers_seen[nseen++] = me;
        __atomic_store_n(&seen_lock, 0, __ATOMIC_RELEASE);
}

static void migrator(void *arg)
{
        int *moved = arg;
        char pattern[256];
        volatile long acc = 0;
        memset(pattern, 0x5a, sizeof(pattern));
        long first = tid();
        for (int i = 0; i < 2000 && !*moved; i++) {
                acc += i;
                note_thread();
                fiber_sleep_for(10000); /* the timer makes it ready on any worker */
                /* the thread pointer is read again after the switch: the Worker is
                 * the one whose thread runs the fiber now */
                cr_assert_eq(__atomic_load_n(&worker_self()->tid, __ATOMIC_ACQUIRE), tid());
                if (tid() != first)
                        __atomic_store_n(moved, 1, __ATOMIC_RELAXED);
        }
        note_thread();
        for (size_t i = 0; i < sizeof(pattern); i++)
                cr_assert_eq(pattern[i], 0x5a);
        cr_assert_geq(acc, 0);
}

static void busy(void *arg)
{
        int *stop = arg;
        while (!__atomic_load_n(stop, __ATOMIC_RELAXED))
                fiber_yield();
}

/* A joinable fiber gives its stack back when it ends, not when it is joined: its
 * control block is apart from the stack and is all the join needs. So a creator that
 * joins late does not hold a stack (a slot with a 2 MiB guard) per ended fiber. */
typedef struct StackSpot {
        uintptr_t frame; /* an address in the fiber's stack */
        int ran;
} StackSpot;

static void note_stack(void *arg)
{
        StackSpot *s = arg;

        s->frame = (uintptr_t)__builtin_frame_address(0);
        __atomic_store_n(&s->ran, 1, __ATOMIC_RELEASE);
}

static void ended_then_joined(void *arg)
{
        StackSpot *s = arg; /* two of them */
        Fiber *a, *b;

        cr_assert_eq(fiber_create(&a, NULL, note_stack, &s[0]), 0);
        /* one worker: when the yield returns after it ran, its exit is done too */
        while (!__atomic_load_n(&s[0].ran, __ATOMIC_ACQUIRE))
                cr_assert_eq(fiber_yield(), 0);
        cr_assert_eq(fiber_create(&b, NULL, note_stack, &s[1]), 0);
        while (!__atomic_load_n(&s[1].ran, __ATOMIC_ACQUIRE))
                cr_assert_eq(fiber_yield(), 0);
        cr_assert_eq(fiber_join(a), 0);
        cr_assert_eq(fiber_join(b), 0);
}

Test(fiber, an_ended_fiber_gives_its_stack_back_before_its_join)
{
        SchedulingGroup *g = test_group(1);
        StackSpot s[2] = {0};

        run_in_fiber(g, ended_then_joined, s);
        cr_assert_neq(s[0].frame, 0);
        /* the worker's stack cache is a LIFO: the second fiber got the first's stack */
        uintptr_t d = s[0].frame > s[1].frame ? s[0].frame - s[1].frame : s[1].frame - s[0].frame;
        cr_assert_lt(d, 64 * 1024,
                     "the second fiber ran %zu bytes away from the first: "
                     "the first, ended and not joined, still held its stack",
                     (size_t)d);
        sched_group_free(g);
}

/* The blocks of a burst of joinable fibers come from slabs, and the slabs go back once
 * the fibers are joined (but one kept as the spare). */
#define BURST 20000

static void burst(void *arg)
{
        size_t *mapped = arg; /* out: slabs mapped with every fiber of the burst ended */
        static Fiber *f[BURST];
        int n = 0;

        for (int i = 0; i < BURST; i++)
                cr_assert_eq(fiber_create(&f[i], NULL, add_one, &n), 0);
        while (__atomic_load_n(&n, __ATOMIC_ACQUIRE) < BURST)
                cr_assert_eq(fiber_yield(), 0);
        *mapped = slab_mapped();
        for (int i = 0; i < BURST; i++)
                cr_assert_eq(fiber_join(f[i]), 0);
}

Test(fiber, a_burst_of_joinable_fibers_gives_its_blocks_back)
{
#ifdef SCHED_ASAN
        cr_skip_test("under AddressSanitizer the blocks come from malloc");
#endif
        SchedGroupConfig cfg = {.workers = 2, .runq_capacity = 32768, .max_fibers = 32768};
        SchedulingGroup *g;
        size_t before = slab_mapped(), during = 0;

        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        run_in_fiber(g, burst, &during);
        sched_group_free(g); /* the workers' caches go back too */
        /* 20,000 blocks of 128 bytes (16,383 a slab) fill 2 slabs of 2 MiB */
        cr_assert_geq(during, before + 2, "%zu slabs mapped for %d live blocks", during, BURST);
        cr_assert_leq(slab_mapped(), before + 1,
                      "%zu slabs still mapped after the joins (%zu before)", slab_mapped(), before);
}

Test(fiber, migrates_between_workers_with_state_intact)
{
        SchedulingGroup *g = test_group(2);
        FiberAttr a = {.group = g};
        Fiber *m[4], *b;
        int moved[4] = {0}, stop = 0, any = 0;

        cr_assert_eq(fiber_create(&b, &a, busy, &stop), 0); /* keeps workers trading */
        for (int i = 0; i < 4; i++)
                cr_assert_eq(fiber_create(&m[i], &a, migrator, &moved[i]), 0);
        for (int i = 0; i < 4; i++) {
                cr_assert_eq(fiber_join(m[i]), 0);
                any |= moved[i];
        }
        __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
        cr_assert_eq(fiber_join(b), 0);
        cr_assert(any, "no fiber ever resumed on another worker");
        cr_assert_eq(nseen, 2, "a moved fiber was seen on both workers");
        sched_group_free(g);
}
