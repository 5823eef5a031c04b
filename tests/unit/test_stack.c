/* SPDX-License-Identifier: MIT */
/* Stacks: an overflow into the guard is reported (fiber id and tag) and aborts, with
 * guard regions and with mprotect guards, also for a 1 MiB frame built without
 * -fstack-clash-protection (stack_frame.c), also from a slot in the middle of a
 * worker's carved run; guard regions need no memory map per fiber; stacks come back from
 * the cache and, beyond it, give their memory back (also where process_madvise() is
 * refused); the
 * mprotect map budget is the process's; a big custom stack is usable. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>

#include "helpers.h"
#include "stack_frame.h"

#if !defined(__SANITIZE_THREAD__)
/* A seccomp filter on the calling process that answers EPERM to process_madvise(), as
 * a kernel before 6.15 or a unit's SystemCallFilter= without @ipc refuses it. Returns
 * false when it could not be put in place. */
static bool deny_process_madvise(void)
{
        struct sock_filter insns[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = ELEMENTSOF(insns), .filter = insns};

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                return false;
        return syscall(SYS_process_madvise, -10001, NULL, 0, MADV_DONTNEED, 0) == -1 &&
               errno == EPERM;
}
#endif

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static int recurse(int depth)
{
        volatile char frame[512];
        memset((char *)frame, depth & 0xff, sizeof(frame));
        return depth > 1000000 ? frame[0] : recurse(depth + 1) + frame[1];
}

static void overflow(void *arg)
{
        *(int *)arg = recurse(0);
}

/* One frame of 200 KiB on a 128 KiB stack, probed page by page: tests/build.mk compiles
 * this file with -fstack-clash-protection, as plugins are. */
static void __attribute__((noinline)) big_frame(void *arg)
{
        volatile char frame[200 * 1024];
        frame[0] = 1;
        *(int *)arg = frame[0];
}
#endif

/* (The sanitizers install their own SIGSEGV handlers and report an overflow themselves:
 * the runtime's report is checked in the plain build.) */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
static FiberEvent never; /* set by no one: a holder keeps its stack to the end */

static void hold_stack(void *arg)
{
        (void)arg;
        fiber_event_wait(&never, SCHED_FOREVER);
}

/* Run the overflow in a child with stderr on a pipe and FIBERD_STACK_GUARD=@guard, after
 * @holders fibers that keep their stacks (so the overflowing one's stack is the
 * (@holders + 1)th slot of the group), with process_madvise() refused when @deny; it
 * must die of SIGABRT having printed the report. Returns what it printed. */
static void expect_overflow_report_after(const char *guard, unsigned holders, bool deny, FiberFn fn,
                                         char *out, size_t cap)
{
        int fds[2];
        size_t n = 0;
        ssize_t k;
        int status;
        pid_t pid;

        cr_assert_eq(pipe(fds), 0);
        pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
                dup2(fds[1], STDERR_FILENO);
                close(fds[0]);
                if (guard)
                        setenv("FIBERD_STACK_GUARD", guard, 1);
                if (deny && !deny_process_madvise())
                        _exit(7);
                SchedulingGroup *g = NULL;
                SchedGroupConfig cfg = {.workers = 1};
                FiberAttr a = {.tag = "job 42 plugin recurse"};
                Fiber *f;
                int v = 0;
                if (sched_group_new(&g, &cfg) < 0)
                        _exit(3);
                a.group = g;
                fiber_event_init(&never);
                FiberAttr h = {.group = g, .detached = true};
                for (unsigned i = 0; i < holders; i++)
                        if (fiber_create(NULL, &h, hold_stack, NULL) < 0)
                                _exit(6);
                if (fiber_create(&f, &a, fn, &v) < 0)
                        _exit(4);
                fiber_join(f);
                _exit(5); /* not reached: the overflow aborts */
        }
        close(fds[1]);
        while (n + 1 < cap && (k = read(fds[0], out + n, cap - 1 - n)) > 0)
                n += (size_t)k;
        out[n] = 0;
        close(fds[0]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
                  "the child was not aborted (status %#x); it printed: %s", status, out);
        cr_assert(strstr(out, "stack overflow in fiber"), "no report: %s", out);
        cr_assert(strstr(out, "(job 42 plugin recurse)"), "the report lacks the tag: %s", out);
}

static void expect_overflow_report(const char *guard, FiberFn fn, char *out, size_t cap)
{
        expect_overflow_report_after(guard, 0, false, fn, out, cap);
}

/* The report of an overflow on a guard-region stack (@holders, @deny, @fn: as
 * expect_overflow_report_after()); skipped where the kernel has no guard regions. */
static void expect_region_overflow(unsigned holders, bool deny, FiberFn fn)
{
        char out[4096];

        if (sched_stack_guard_mode() != SCHED_GUARD_REGIONS)
                cr_skip_test("this kernel has no MADV_GUARD_INSTALL (Linux >= 6.13)");
        expect_overflow_report_after(NULL, holders, deny, fn, out, sizeof(out));
        cr_assert(strstr(out, "2048 KiB guard region"), "not the guard-region report: %s", out);
}

Test(stack, overflow_is_reported_with_guard_regions)
{
        expect_region_overflow(0, false, overflow);
}

/* A worker carves new arena slots for itself a run at a time and installs the run's
 * guards at once: a slot from the middle of such a run is guarded as the first. */
Test(stack, overflow_is_reported_from_a_slot_carved_in_a_run)
{
        expect_region_overflow(5, false, stack_frame_1mib);
}

/* The same where the kernel refuses to install a run's guards in one process_madvise()
 * call: each slot's is installed as it is taken. */
Test(stack, overflow_is_reported_from_a_carved_run_where_process_madvise_is_refused)
{
        expect_region_overflow(5, true, stack_frame_1mib);
}

Test(stack, overflow_is_reported_with_mprotect_guards)
{
        char out[4096];

        expect_overflow_report("mprotect", overflow, out, sizeof(out));
        cr_assert(strstr(out, "2048 KiB mprotect guard"), "not the mprotect report: %s", out);
}

Test(stack, a_frame_larger_than_the_guard_is_reported)
{
        char out[4096];

        expect_overflow_report(NULL, big_frame, out, sizeof(out));
        cr_assert(strstr(out, "2048 KiB"), "%s", out);
}

/* A 1 MiB frame without stack-clash probes writes 1 MiB below its stack pointer at
 * once: the 2 MiB guard catches it, in both guard modes, instead of a write into the
 * slot below. */
Test(stack, a_1mib_frame_without_clash_protection_is_reported)
{
        char out[4096];

        if (sched_stack_guard_mode() != SCHED_GUARD_REGIONS)
                cr_skip_test("this kernel has no MADV_GUARD_INSTALL (Linux >= 6.13)");
        expect_overflow_report(NULL, stack_frame_1mib, out, sizeof(out));
        cr_assert(strstr(out, "2048 KiB guard region"), "%s", out);
}

Test(stack, a_1mib_frame_without_clash_protection_is_reported_with_mprotect_guards)
{
        char out[4096];

        /* (the guard mode is detected once per process: not here, in the child) */
        expect_overflow_report("mprotect", stack_frame_1mib, out, sizeof(out));
        cr_assert(strstr(out, "2048 KiB mprotect guard"), "%s", out);
}
#endif

/* Resident set size in bytes. */
static inline long rss_bytes(void)
{
        FILE *fp = fopen("/proc/self/statm", "re");
        long size = 0, resident = 0;

        cr_assert_not_null(fp);
        cr_assert_eq(fscanf(fp, "%ld %ld", &size, &resident), 2);
        fclose(fp);
        return resident * sysconf(_SC_PAGESIZE);
}

typedef struct Crowd {
        FiberLatch started; /* counted down by each fiber once it is running */
        FiberEvent go;      /* set once every fiber runs */
        FiberLatch done;
        size_t touch; /* bytes of its stack each fiber writes */
} Crowd;

static inline void crowd_member(void *arg)
{
        Crowd *c = arg;
        char *buf = c->touch ? __builtin_alloca(c->touch) : NULL;

        if (buf)
                memset(buf, 0x5a, c->touch);
        fiber_latch_count_down(&c->started);
        cr_assert_eq(fiber_event_wait(&c->go, SCHED_FOREVER), 0);
        if (buf)
                cr_assert_eq(((volatile char *)buf)[c->touch / 2], 0x5a);
        fiber_latch_count_down(&c->done);
}

/* Start @n detached fibers of @g that each write @touch bytes of their stack, and wait
 * until all run. */
static inline void crowd_start(SchedulingGroup *g, Crowd *c, long n, size_t touch)
{
        FiberAttr a = {.group = g, .detached = true};

        c->touch = touch;
        fiber_latch_init(&c->started, n);
        fiber_latch_init(&c->done, n);
        fiber_event_init(&c->go);
        for (long i = 0; i < n; i++)
                cr_assert_eq(fiber_create(NULL, &a, crowd_member, c), 0, "fiber %ld", i);
        cr_assert_eq(fiber_latch_wait(&c->started, sched_deadline_after(120 * SEC_NS)), 0);
}

static inline void crowd_finish(Crowd *c)
{
        fiber_event_set(&c->go);
        cr_assert_eq(fiber_latch_wait(&c->done, sched_deadline_after(120 * SEC_NS)), 0);
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* /proc/self/maps lines: one per memory map. */
static long maps_lines(void)
{
        FILE *fp = fopen("/proc/self/maps", "re");
        long n = 0;
        int c;

        cr_assert_not_null(fp);
        while ((c = getc(fp)) != EOF)
                n += c == '\n';
        fclose(fp);
        return n;
}

/* With guard regions, 100,000 live guarded stacks add fewer than 100 memory maps (with a
 * map and a guard map per stack they would add 200,000, far past the kernel's default
 * vm.max_map_count of 65530). Plain build only: the sanitizers' shadow maps are not the
 * runtime's. */
Test(stack, guard_regions_need_no_map_per_fiber, .timeout = 300)
{
        enum { N = 100000 };
        SchedGroupConfig cfg = {.workers = 2, .max_fibers = 131072, .runq_capacity = 131072};
        SchedulingGroup *g = NULL;
        Crowd c;
        long before, during;

        if (sched_stack_guard_mode() != SCHED_GUARD_REGIONS)
                cr_skip_test("this kernel has no MADV_GUARD_INSTALL (Linux >= 6.13)");
        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        before = maps_lines();
        crowd_start(g, &c, N, 0);
        during = maps_lines();
        cr_assert_lt(during - before, 100, "%d live fibers added %ld memory maps", N,
                     during - before);
        crowd_finish(&c);
        sched_group_free(g);
}

/* (These two: plain build only, like the one above; under ASan an address-space limit
 * also refuses its shadow memory.) */

/* A fiber waiting for its first run holds no stack (lazy stack binding, fiber.c): with
 * mprotect guards, where every stack is a mapping and its guard another, a fiber of a
 * one-worker group creates 10,000 fibers without yielding, so none of them can run yet;
 * they add no memory map (20,000 if each took its stack at creation). Then all run. */
typedef struct Unstarted {
        long n, maps_before, maps_after, ran;
} Unstarted;

static void unstarted_child(void *arg)
{
        __atomic_fetch_add(&((Unstarted *)arg)->ran, 1, __ATOMIC_RELAXED);
}

static void unstarted_creator(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        Unstarted *u = arg;

        u->maps_before = maps_lines();
        for (long i = 0; i < u->n; i++)
                cr_assert_eq(fiber_create(NULL, &detached, unstarted_child, u), 0, "fiber %ld", i);
        u->maps_after = maps_lines();
}

Test(stack, a_fiber_waiting_for_its_first_run_holds_no_stack)
{
        setenv("FIBERD_STACK_GUARD", "mprotect", 1);
        SchedGroupConfig cfg = {.workers = 1, .max_fibers = 16384, .runq_capacity = 16384};
        Unstarted u = {.n = 10000};
        SchedulingGroup *g = NULL;

        cr_assert_eq(sched_stack_guard_mode(), SCHED_GUARD_MPROTECT);
        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        run_in_fiber(g, unstarted_creator, &u);
        cr_assert_lt(u.maps_after - u.maps_before, 100,
                     "%ld fibers not yet run added %ld memory maps", u.n,
                     u.maps_after - u.maps_before);
        for (int i = 0; i < 6000 && __atomic_load_n(&u.ran, __ATOMIC_RELAXED) < u.n; i++)
                usleep(10000);
        cr_assert_eq(__atomic_load_n(&u.ran, __ATOMIC_RELAXED), u.n, "not every fiber ran");
        sched_group_free(g);
}

/* A stack that cannot be had at a fiber's first run (the creator has returned: nobody
 * to give -ENOMEM to) is logged and retried until it can. In a child, whose rlimit the
 * test may lower, with mprotect guards (each stack its own mapping): a first fiber with a
 * stack of its own size (mapped at its creation, unmapped at its end) brings in the
 * control blocks' slab; then, under an address-space limit, a fiber creates one of the
 * group's stack size and joins it: the child cannot start; once the limit is lifted it
 * runs and the join returns. On a plain group and on one whose blocking calls are hooked,
 * where a nanosleep() of the retry's would park the joining fiber a second time. */
static int bind_failures;

static void count_bind_failures(int level, const char *msg)
{
        (void)level;
        if (strstr(msg, "no stack for its first run"))
                __atomic_fetch_add(&bind_failures, 1, __ATOMIC_RELAXED);
}

static void set_flag(void *arg)
{
        __atomic_store_n((int *)arg, 1, __ATOMIC_RELEASE);
}

/* The parent of the retried fiber: it creates it (a fiber of the group's stack size) and
 * joins it, so the worker binds the child's stack as it switches away from this one. */
typedef struct Parent {
        FiberEvent go; /* set once the limit is in place */
        int created, ran, done;
} Parent;

static void parent_fiber(void *arg)
{
        Parent *p = arg;
        Fiber *f;

        if (fiber_event_wait(&p->go, SCHED_FOREVER) < 0 ||
            fiber_create(&f, NULL, set_flag, &p->ran) < 0)
                return;
        __atomic_store_n(&p->created, 1, __ATOMIC_RELEASE);
        if (fiber_join(f) == 0)
                __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
}

static long vm_bytes(void)
{
        FILE *fp = fopen("/proc/self/statm", "re");
        long size = 0;

        if (!fp || fscanf(fp, "%ld", &size) != 1)
                _exit(10);
        fclose(fp);
        return size * sysconf(_SC_PAGESIZE);
}

/* Runs the check in a child; returns its wait status (exit 0: every check held). */
static int retried_in_a_child(bool hooked)
{
        pid_t pid = fork();
        int status = -1;

        if (pid < 0)
                return -1;
        if (pid == 0) {
                SchedulingGroup *g = NULL;
                SchedGroupConfig cfg = {.workers = 1, .control = {.hook_blocking_calls = hooked}};
                FiberAttr own = {.stack_size = 256 * 1024};
                struct rlimit was, low;
                Parent parent = {0};
                int warm = 0;
                Fiber *f;

                alarm(25); /* a hung child dies rather than outlive the test */
                setenv("FIBERD_STACK_GUARD", "mprotect", 1);
                sched_set_log(count_bind_failures);
                if (sched_group_new(&g, &cfg) < 0)
                        _exit(2);
                own.group = g;
                if (fiber_create(&f, &own, set_flag, &warm) < 0 || fiber_join(f) < 0 || !warm)
                        _exit(3);
                /* the parent, with a stack of its own size (mapped now), waits for go */
                fiber_event_init(&parent.go);
                if (fiber_create(&f, &own, parent_fiber, &parent) < 0)
                        _exit(6);
                if (getrlimit(RLIMIT_AS, &was) < 0)
                        _exit(4);
                low = (struct rlimit){.rlim_cur = (rlim_t)vm_bytes() + (1 << 20),
                                      .rlim_max = was.rlim_max};
                if (setrlimit(RLIMIT_AS, &low) < 0)
                        _exit(5);
                fiber_event_set(&parent.go);
                for (int i = 0; i < 1000 && __atomic_load_n(&bind_failures, __ATOMIC_RELAXED) < 1;
                     i++)
                        usleep(10000);
                usleep(50000); /* a few retries */
                if (!__atomic_load_n(&parent.created, __ATOMIC_ACQUIRE))
                        _exit(12); /* the child's creation failed: it needs no stack */
                if (__atomic_load_n(&bind_failures, __ATOMIC_RELAXED) < 1)
                        _exit(7); /* no failure was logged */
                if (__atomic_load_n(&parent.ran, __ATOMIC_ACQUIRE))
                        _exit(8); /* it ran without a stack? */
                if (setrlimit(RLIMIT_AS, &was) < 0)
                        _exit(9);
                if (fiber_join(f) < 0 || !__atomic_load_n(&parent.ran, __ATOMIC_ACQUIRE) ||
                    !__atomic_load_n(&parent.done, __ATOMIC_ACQUIRE))
                        _exit(11);
                sched_group_free(g);
                _exit(0);
        }
        if (waitpid(pid, &status, 0) != pid)
                return -1;
        return status;
}

#define CHILD_CHECKS                                                                               \
        "(6, 12: creation failed, 7: no failure logged, 8: ran anyway, 11: did not run once "      \
        "the limit was lifted)"

Test(stack, a_stack_that_cannot_be_had_at_the_first_run_is_retried, .timeout = 30)
{
        int status = retried_in_a_child(false);

        cr_assert(status >= 0 && WIFEXITED(status), "the child died (status %#x)", status);
        cr_assert_eq(WEXITSTATUS(status), 0, "child check %d failed " CHILD_CHECKS,
                     WEXITSTATUS(status));
}

Test(stack, a_stack_that_cannot_be_had_at_the_first_run_is_retried_when_hooked, .timeout = 30)
{
        int status = retried_in_a_child(true);

        cr_assert(status >= 0 && WIFEXITED(status), "the child died (status %#x)", status);
        cr_assert_eq(WEXITSTATUS(status), 0, "hooked group: child check %d failed " CHILD_CHECKS,
                     WEXITSTATUS(status));
}
#endif

/* Stacks beyond the caches give their memory back: 6,000 fibers each write 64 KiB of
 * their stack (375 MiB); once they are gone, the group keeps at most its warm pool and
 * caches (about 1,200 stacks), so RSS falls by most of it. Both guard modes. */
enum { MEM_FIBERS = 6000, MEM_TOUCH = 64 * 1024 };

/* Runs MEM_FIBERS fibers that each write MEM_TOUCH bytes of stack, all alive at once, then
 * lets them end; *@ret_peak / *@ret_after: RSS in bytes with all alive / once ended. */
static inline void rss_around_a_crowd(long *ret_peak, long *ret_after)
{
        SchedGroupConfig cfg = {.workers = 2};
        SchedulingGroup *g = NULL;
        Crowd c;

        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        crowd_start(g, &c, MEM_FIBERS, MEM_TOUCH);
        *ret_peak = rss_bytes();
        crowd_finish(&c);
        *ret_after = rss_bytes();
        sched_group_free(g);
}

/* Most of the MEM_FIBERS x MEM_TOUCH bytes are given back. */
#define assert_memory_given_back(peak, after)                                                      \
        cr_assert_lt((after), (peak) - (long)MEM_FIBERS * MEM_TOUCH / 2,                           \
                     "RSS %ld MiB at the peak, %ld MiB after %d fibers of 64 KiB ended",           \
                     (peak) >> 20, (after) >> 20, MEM_FIBERS)

#if !defined(__SANITIZE_THREAD__)
/* (Not under TSan: its shadow of the released pages stays resident.) */
Test(stack, stacks_beyond_the_caches_give_memory_back)
{
        long peak, after;

        rss_around_a_crowd(&peak, &after);
        assert_memory_given_back(peak, after);
}

/* Where the kernel refuses process_madvise() (an older kernel; here a seccomp filter
 * that answers EPERM, as a unit's SystemCallFilter= without @ipc would), the batches go
 * back one madvise per run of slots, and the memory still goes back. */
Test(stack, stacks_give_memory_back_where_process_madvise_is_refused)
{
        long peak, after;

        /* (criterion runs each test in a process of its own: the filter stays in it) */
        cr_assert(deny_process_madvise(), "the seccomp filter is not in place: %s",
                  strerror(errno));
        rss_around_a_crowd(&peak, &after);
        assert_memory_given_back(peak, after);
}

Test(stack, stacks_beyond_the_caches_give_memory_back_with_mprotect_guards)
{
        setenv("FIBERD_STACK_GUARD", "mprotect", 1);
        long peak, after;

        cr_assert_eq(sched_stack_guard_mode(), SCHED_GUARD_MPROTECT);
        rss_around_a_crowd(&peak, &after);
        assert_memory_given_back(peak, after);
}
#endif

/* With mprotect guards the map budget is the whole process's: a group that alone needs
 * more maps than vm.max_map_count fails with a message naming the sysctl; groups that
 * only together need more start with a warning that names it. */
static char logged[8192];
static int logged_warnings;

static void log_capture(int level, const char *msg)
{
        size_t n = strlen(logged);
        if (level <= LOG_WARNING)
                __atomic_fetch_add(&logged_warnings, 1, __ATOMIC_RELAXED);
        snprintf(logged + n, sizeof(logged) - n, "%s\n", msg);
}

Test(stack, mprotect_map_budget_counts_the_whole_process)
{
        FILE *fp = fopen("/proc/sys/vm/max_map_count", "re");
        unsigned long have = 0;
        SchedulingGroup *a = NULL, *b = NULL, *huge = NULL;

        cr_assert_not_null(fp);
        cr_assert_eq(fscanf(fp, "%lu", &have), 1);
        fclose(fp);
        setenv("FIBERD_STACK_GUARD", "mprotect", 1);
        sched_set_log(log_capture);

        /* Each group alone fits (2 maps a fiber + 4096 slack), the two together do not. */
        size_t each = (have - 4096) / 2 * 3 / 4;
        size_t cap = 1;
        while (cap < each)
                cap <<= 1;
        SchedGroupConfig cfg = {.max_fibers = each, .runq_capacity = cap};
        cr_assert_eq(sched_group_new(&a, &cfg), 0);
        cr_assert_eq(logged_warnings, 0, "%s", logged);
        cr_assert_eq(sched_group_new(&b, &cfg), 0);
        cr_assert_eq(logged_warnings, 1, "%s", logged);
        cr_assert(strstr(logged, "vm.max_map_count"), "%s", logged);

        SchedGroupConfig too_big = {.max_fibers = cap * 2, .runq_capacity = cap * 2};
        if (2 * too_big.max_fibers + 4096 > have) {
                cr_assert_eq(sched_group_new(&huge, &too_big), -ENOMEM);
                cr_assert(strstr(logged, "sysctl -w vm.max_map_count="), "%s", logged);
        }
        sched_group_free(b);
        sched_group_free(a);

        /* Freed groups give their maps back: the same two fit again with one warning. */
        logged_warnings = 0;
        cr_assert_eq(sched_group_new(&a, &cfg), 0);
        cr_assert_eq(logged_warnings, 0, "a freed group kept its maps reserved: %s", logged);
        cr_assert_eq(sched_group_new(&b, &cfg), 0);
        cr_assert_eq(logged_warnings, 1, "%s", logged);
        sched_group_free(b);
        sched_group_free(a);
        sched_set_log(NULL);
}

static void touch_deep(void *arg)
{
        volatile char big[200 * 1024];
        memset((char *)big, 1, sizeof(big));
        *(int *)arg = big[sizeof(big) - 1];
}

Test(stack, custom_size_is_usable)
{
        SchedulingGroup *g = test_group(1);
        FiberAttr a = {.group = g, .stack_size = 1024 * 1024};
        Fiber *f;
        int out = 0;
        cr_assert_eq(fiber_create(&f, &a, touch_deep, &out), 0);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(out, 1);
        sched_group_free(g);
}

static void note_stack(void *arg)
{
        char probe;
        *(uintptr_t *)arg = (uintptr_t)&probe >> 17; /* which 128 KiB region */
}

Test(stack, stacks_are_reused_from_the_cache)
{
        SchedulingGroup *g = test_group(1);
        enum { N = 20 };
        uintptr_t where[N] = {0};
        int distinct = 0;
        for (int i = 0; i < N; i++)
                run_in_fiber(g, note_stack, &where[i]);
        for (int i = 0; i < N; i++) {
                int j;
                for (j = 0; j < i && where[j] != where[i]; j++)
                        ;
                distinct += j == i;
        }
        /* One after the other, each fiber finds the stack of one that finished (the
         * last may still be on its way back to the pool): without a cache, 20. */
        cr_assert_leq(distinct, 3, "%d different stacks for %d fibers", distinct, N);
        sched_group_free(g);
}

/* Stacks move between the workers' caches and the group pool in batches. With caches of
 * 4, 40,000 fibers on two workers pass through spills and refills all the time; each
 * fiber fills a slice of its stack with its own id, yields (another fiber runs, perhaps
 * on a recycled stack), and checks the slice is still its own: a stack handed to two
 * live fibers at once, or lost, shows up as a mismatch or as a wrong count. */
/* Under TSan every switch costs ~100x more: 40,000 fibers took about 30 s of the 60 s the
 * test fiber is given, too close on a loaded machine; 10,000 still spill and refill the
 * caches of 4 thousands of times. */
#ifdef __SANITIZE_THREAD__
#define CHURN_FIBERS 10000
#else
#define CHURN_FIBERS 40000
#endif

typedef struct Churn {
        FiberLatch done;
        long bad;
        long ran;
} Churn;

static void churn_fiber(void *arg)
{
        Churn *c = arg;
        uint64_t mine[64];
        uint64_t id = fiber_id(fiber_self());

        for (int i = 0; i < 64; i++)
                __atomic_store_n(&mine[i], id, __ATOMIC_RELAXED);
        for (int round = 0; round < 3; round++) {
                fiber_yield();
                for (int i = 0; i < 64; i++)
                        if (__atomic_load_n(&mine[i], __ATOMIC_RELAXED) != id)
                                __atomic_fetch_add(&c->bad, 1, __ATOMIC_RELAXED);
        }
        __atomic_fetch_add(&c->ran, 1, __ATOMIC_RELAXED);
        fiber_latch_count_down(&c->done);
}

static void churn_parent(void *arg)
{
        static const FiberAttr detached = {.detached = true};
        Churn *c = arg;
        enum { N = CHURN_FIBERS };

        fiber_latch_add(&c->done, N);
        for (int i = 0; i < N; i++) {
                int r;
                while ((r = fiber_create(NULL, &detached, churn_fiber, c)) == -EAGAIN)
                        fiber_yield();
                cr_assert_eq(r, 0);
        }
        cr_assert_eq(fiber_latch_wait(&c->done, SCHED_FOREVER), 0);
}

Test(stack, batches_between_caches_and_pool_lose_and_share_nothing)
{
        SchedGroupConfig cfg = {.workers = 2, .stack_cache = 4, .max_fibers = 1024};
        SchedulingGroup *g = NULL;
        Churn c = {.bad = 0};

        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        fiber_latch_init(&c.done, 0);
        run_in_fiber(g, churn_parent, &c);
        cr_assert_eq(c.ran, CHURN_FIBERS);
        cr_assert_eq(c.bad, 0, "%ld words of a live fiber's stack were overwritten", c.bad);
        sched_group_free(g);
}
