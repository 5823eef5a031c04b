/* SPDX-License-Identifier: MIT */
/*
 * test_control.c — CPU control: job classes with shares (class.c), the task quota and
 * preemption points, the stall detector and the rescue of blocked workers (monitor.c).
 * Ratios are checked loosely and every wait is on a condition with a generous
 * deadline: these tests must not flake on a loaded 2-core machine.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

static SchedulingGroup *control_group(unsigned workers, const SchedClassConfig *classes, unsigned n,
                                      SchedControl ctl)
{
        SchedGroupConfig cfg = {.workers = workers,
                                .classes = classes,
                                .nclasses = n,
                                .control = ctl,
                                .queue_policy = SCHED_QUEUE_LOCAL};
        SchedulingGroup *g = NULL;
        cr_assert_eq(sched_group_new(&g, &cfg), 0);
        return g;
}

/* ------------------------------------------------------------------ preemption ---- */

typedef struct Spin {
        int stop;     /* atomic: set by the test */
        int started;  /* atomic */
        int preempts; /* need_preempt seen true */
        int cleared;  /* ... and false again right after a yield with nothing else ready */
} Spin;

static void spin_until_quota(void *arg)
{
        Spin *s = arg;
        uint64_t deadline = sched_deadline_after(30 * SEC_NS);

        while (!fiber_need_preempt() && sched_now_ns() < deadline)
                ;
        s->preempts = fiber_need_preempt();
        fiber_yield(); /* nothing else is ready: a new quota starts */
        s->cleared = !fiber_need_preempt();
}

Test(control, need_preempt_turns_true_after_the_quota)
{
        SchedulingGroup *g = control_group(1, NULL, 0, (SchedControl){.task_quota_ns = MS_NS});
        Spin s = {0};

        cr_assert_not(fiber_need_preempt(), "a plain thread is never asked to yield");
        run_in_fiber(g, spin_until_quota, &s);
        cr_assert(s.preempts, "need_preempt never turned true");
        cr_assert(s.cleared, "a yield with nothing else ready did not start a new quota");
        sched_group_free(g);
}

static void spin_with_maybe_yield(void *arg)
{
        Spin *s = arg;
        uint64_t deadline = sched_deadline_after(30 * SEC_NS);

        __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE) && sched_now_ns() < deadline)
                fiber_maybe_yield();
}

static void set_stop(void *arg)
{
        __atomic_store_n(&((Spin *)arg)->stop, 1, __ATOMIC_RELEASE);
}

Test(control, maybe_yield_lets_a_fiber_behind_it_run)
{
        /* One worker, no rescue (it would run the second fiber on a spare): only the
         * preemption point can let it run. */
        SchedulingGroup *g =
                control_group(1, NULL, 0, (SchedControl){.rescue_after_ns = SCHED_FOREVER});
        Spin s = {0};
        Fiber *f;
        FiberAttr a = {.group = g};

        cr_assert_eq(fiber_create(&f, &a, spin_with_maybe_yield, &s), 0);
        while (!__atomic_load_n(&s.started, __ATOMIC_ACQUIRE))
                sched_yield();
        run_in_fiber(g, set_stop, &s); /* fails after 60 s if never run */
        cr_assert_eq(fiber_join(f), 0);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ classes ------- */

typedef struct Busy {
        int stop;
        bool short_runs; /* yield at every turn, not at the task quota's end */
} Busy;

static void busy(void *arg)
{
        Busy *b = arg;
        while (!__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE)) {
                if (b->short_runs)
                        fiber_yield();
                else
                        fiber_maybe_yield();
        }
}

static uint64_t class_runtime(SchedulingGroup *g, unsigned c)
{
        SchedClassStats cs;
        cr_assert_eq(sched_group_class_stats(g, c, &cs), 0);
        return cs.runtime_ns;
}

static void start_busy(SchedulingGroup *g, unsigned cls, unsigned n, Busy *b, Fiber **fs)
{
        for (unsigned i = 0; i < n; i++) {
                FiberAttr a = {.group = g, .sched_class = cls + 1};
                cr_assert_eq(fiber_create(&fs[i], &a, busy, b), 0);
        }
}

static void stop_busy(Busy *b, Fiber **fs, unsigned n)
{
        __atomic_store_n(&b->stop, 1, __ATOMIC_RELEASE);
        for (unsigned i = 0; i < n; i++)
                cr_assert_eq(fiber_join(fs[i]), 0);
}

/* Two classes of 100 and 50 shares, two busy fibers each, on one worker, until they
 * have run 600 ms between them. The group is left for the caller's checks. */
typedef struct ShareRun {
        SchedulingGroup *g;
        uint64_t a, h; /* ns charged to the classes of 100 and 50 shares */
        uint64_t wall; /* ns that passed meanwhile */
} ShareRun;

static ShareRun share_run(bool short_runs)
{
        static const SchedClassConfig classes[] = {{"default", 100}, {"half", 50}};
        ShareRun r = {.g = control_group(1, classes, 2, (SchedControl){0})};
        Busy b = {.short_runs = short_runs};
        Fiber *fs[4];

        start_busy(r.g, 0, 2, &b, fs);
        start_busy(r.g, 1, 2, &b, fs + 2);
        uint64_t a0 = class_runtime(r.g, 0), b0 = class_runtime(r.g, 1);
        uint64_t t0 = sched_now_ns();
        /* until the two have run 600 ms between them (a condition, not a time) */
        uint64_t deadline = sched_deadline_after(60 * SEC_NS);
        do {
                usleep(10000);
                r.a = class_runtime(r.g, 0) - a0;
                r.h = class_runtime(r.g, 1) - b0;
        } while (r.a + r.h < 600 * MS_NS && sched_now_ns() < deadline);
        r.wall = sched_now_ns() - t0;
        stop_busy(&b, fs, 4);
        cr_log_info("charged %.1f%% of the time that passed; runtime 100:50 shares = %.3f "
                    "(want 2)",
                    100.0 * (double)(r.a + r.h) / (double)r.wall,
                    r.h ? (double)r.a / (double)r.h : 0.0);
        return r;
}

Test(control, classes_share_the_cpu_by_their_shares)
{
        ShareRun r = share_run(false);
        SchedClassStats cs;

        cr_assert(r.h > 0, "the class of 50 shares never ran");
        /* the one worker ran fibers all along: the time charged is the time that passed
         * (the clock is the TSC, so a thread the kernel preempted is charged too) */
        cr_assert((double)(r.a + r.h) >= 0.7 * (double)r.wall,
                  "charged %" PRIu64 " ns of %" PRIu64 " ns", r.a + r.h, r.wall);
        double ratio = (double)r.a / (double)r.h;
        cr_assert(ratio > 1.4 && ratio < 2.8, "runtime ratio %.2f for shares 100:50", ratio);
        cr_assert_eq(sched_group_class_stats(r.g, 1, &cs), 0);
        cr_assert_str_eq(cs.name, "half");
        cr_assert_eq(cs.shares, 50);
        cr_assert_eq(sched_group_class_stats(r.g, 2, &cs), -EINVAL);
        sched_group_free(r.g);
}

/* Fibers that yield every few ns: the class's time is charged by segments of several
 * switches without a clock read, and the class picked again only every few yields;
 * the shares, and the time charged, must hold all the same. */
Test(control, classes_share_the_cpu_by_their_shares_when_fibers_yield_at_once)
{
        ShareRun r = share_run(true);
        SchedClassStats cs;

        cr_assert(r.h > 0, "the class of 50 shares never ran");
        cr_assert((double)(r.a + r.h) >= 0.7 * (double)r.wall,
                  "charged %" PRIu64 " ns of %" PRIu64 " ns", r.a + r.h, r.wall);
        double ratio = (double)r.a / (double)r.h;
        cr_assert(ratio > 1.4 && ratio < 2.8, "runtime ratio %.2f for shares 100:50", ratio);
        cr_assert_eq(sched_group_class_stats(r.g, 1, &cs), 0);
        cr_assert_str_eq(cs.name, "half");
        cr_assert_eq(cs.shares, 50);
        cr_assert_eq(sched_group_class_stats(r.g, 2, &cs), -EINVAL);
        sched_group_free(r.g);
}

Test(control, an_idle_class_banks_no_credit)
{
        static const SchedClassConfig classes[] = {{"default", 100}, {"late", 100}};
        SchedulingGroup *g = control_group(1, classes, 2, (SchedControl){0});
        Busy b = {0};
        Fiber *fs[4];
        uint64_t a0, l0, a, l;
        uint64_t deadline = sched_deadline_after(60 * SEC_NS);

        start_busy(g, 0, 2, &b, fs);
        /* class 0 alone for 300 ms of CPU: without inheritance, "late" would then
         * run alone for as long */
        while (class_runtime(g, 0) < 300 * MS_NS && sched_now_ns() < deadline)
                usleep(10000);
        a0 = class_runtime(g, 0);
        l0 = class_runtime(g, 1);
        start_busy(g, 1, 2, &b, fs + 2);
        do {
                usleep(5000);
                a = class_runtime(g, 0) - a0;
                l = class_runtime(g, 1) - l0;
        } while (a + l < 200 * MS_NS && sched_now_ns() < deadline);
        stop_busy(&b, fs, 4);
        double late_share = (double)l / (double)(a + l);
        cr_log_info("the class that idled got %.1f%% of the next 200 ms (want 50)",
                    100 * late_share);
        cr_assert(late_share < 0.75, "the class that idled took %.0f%%: banked credit",
                  100 * late_share);
        sched_group_free(g);
}

Test(control, bad_class_config_and_attr_are_refused)
{
        static const SchedClassConfig zero[] = {{"default", 0}};
        static const SchedClassConfig dup[] = {{"a", 1}, {"a", 2}};
        static const SchedClassConfig bad[] = {{"a b", 10}};
        SchedGroupConfig cfg = {.workers = 1, .classes = zero, .nclasses = 1};
        SchedulingGroup *g = NULL;

        cr_assert_eq(sched_group_new(&g, &cfg), -EINVAL);
        cfg.classes = dup;
        cfg.nclasses = 2;
        cr_assert_eq(sched_group_new(&g, &cfg), -EINVAL);
        cfg.classes = bad;
        cfg.nclasses = 1;
        cr_assert_eq(sched_group_new(&g, &cfg), -EINVAL);

        g = test_group(1);
        FiberAttr a = {.group = g, .detached = true, .sched_class = 2}; /* one class only */
        cr_assert_eq(fiber_create(NULL, &a, busy, NULL), -EINVAL);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ stalls -------- */

typedef struct StallSeen {
        int count;
        char backtrace[8192];
        char tag[64];
        uint64_t ran_ns;
} StallSeen;

static void on_stall(const SchedStall *st, void *arg)
{
        StallSeen *s = arg;
        if (__atomic_load_n(&s->count, __ATOMIC_ACQUIRE) == 0) {
                snprintf(s->backtrace, sizeof(s->backtrace), "%s", st->backtrace);
                snprintf(s->tag, sizeof(s->tag), "%s", st->tag ? st->tag : "");
                s->ran_ns = st->ran_ns;
        }
        __atomic_fetch_add(&s->count, 1, __ATOMIC_ACQ_REL);
}

void test_stall_busy(uint64_t ns);

/* Exported and not inlined, so the backtrace can name it (the test links -rdynamic). */
__attribute__((noinline, visibility("default"))) void test_stall_busy(uint64_t ns)
{
        uint64_t end = sched_now_ns() + ns;
        while (sched_now_ns() < end)
                __asm__ __volatile__("" ::: "memory");
}

static void stall_fiber(void *arg)
{
        (void)arg;
        test_stall_busy(300 * MS_NS);
}

Test(control, a_stall_is_reported_once_with_its_backtrace)
{
        static StallSeen seen;
        SchedulingGroup *g = control_group(1, NULL, 0,
                                           (SchedControl){.stall_threshold_ns = 100 * MS_NS,
                                                          .rescue_after_ns = SCHED_FOREVER});
        FiberAttr a = {.group = g, .tag = "job 7 plugin stall"};
        Fiber *f;

        sched_set_stall_hook(on_stall, &seen);
        cr_assert_eq(fiber_create(&f, &a, stall_fiber, NULL), 0);
        cr_assert_eq(fiber_join(f), 0);
        sched_set_stall_hook(NULL, NULL);
        cr_assert_eq(__atomic_load_n(&seen.count, __ATOMIC_ACQUIRE), 1, "%d reports for one stall",
                     seen.count);
        cr_assert_str_eq(seen.tag, "job 7 plugin stall");
        cr_assert(seen.ran_ns >= 100 * MS_NS);
        cr_assert(strstr(seen.backtrace, "test_stall_busy"),
                  "no test_stall_busy in the backtrace:\n%s", seen.backtrace);
        SchedGroupStats st;
        sched_group_stats(g, &st);
        cr_assert_eq(st.stalls, 1);
        sched_group_free(g);
}

/* Every report of a run, in order (at most 8). */
typedef struct StallLog {
        int count; /* atomic */
        struct {
                uint64_t fiber_id;
                char tag[64];
                long syscall;
                char syscall_name[32];
                char backtrace[4096];
        } r[8];
} StallLog;

static void on_stall_log(const SchedStall *st, void *arg)
{
        StallLog *s = arg;
        int i = __atomic_load_n(&s->count, __ATOMIC_ACQUIRE);

        if (i < 8) {
                s->r[i].fiber_id = st->fiber_id;
                snprintf(s->r[i].tag, sizeof(s->r[i].tag), "%s", st->tag ? st->tag : "");
                s->r[i].syscall = st->syscall;
                snprintf(s->r[i].syscall_name, sizeof(s->r[i].syscall_name), "%s",
                         st->syscall_name ? st->syscall_name : "");
                snprintf(s->r[i].backtrace, sizeof(s->r[i].backtrace), "%s", st->backtrace);
        }
        __atomic_store_n(&s->count, i + 1, __ATOMIC_RELEASE);
}

typedef struct Sleeper {
        long nanosleep_ret, poll_ret;
        int nanosleep_errno, poll_errno;
        uint64_t nanosleep_ns, poll_ns; /* how long each took */
} Sleeper;

/* Raw syscalls, as a plugin or a library makes them: nothing of the runtime knows. The
 * worker thread sleeps 300 ms twice, far past the 20 ms threshold. */
static void sleep_raw(void *arg)
{
        Sleeper *s = arg;
        struct timespec ts = {.tv_nsec = 300 * MS_NS}, rem;
        uint64_t t0 = sched_now_ns();

        s->nanosleep_ret = syscall(SYS_nanosleep, &ts, &rem);
        s->nanosleep_errno = errno;
        s->nanosleep_ns = sched_now_ns() - t0;
        t0 = sched_now_ns();
        s->poll_ret = poll(NULL, 0, 300);
        s->poll_errno = errno;
        s->poll_ns = sched_now_ns() - t0;
}

Test(control, a_stall_in_a_syscall_is_reported_without_cutting_the_syscall_short)
{
        static StallLog log;
        SchedulingGroup *g = control_group(
                1, NULL, 0,
                (SchedControl){.stall_threshold_ns = 20 * MS_NS, .rescue_after_ns = SCHED_FOREVER});
        FiberAttr a = {.group = g, .tag = "job 8 plugin sleepy"};
        Sleeper s = {0};
        Fiber *f;

        sched_set_stall_hook(on_stall_log, &log);
        cr_assert_eq(fiber_create(&f, &a, sleep_raw, &s), 0);
        cr_assert_eq(fiber_join(f), 0);
        cr_assert_eq(s.nanosleep_ret, 0, "nanosleep: %s after %" PRIu64 " ms",
                     strerror(s.nanosleep_errno), s.nanosleep_ns / MS_NS);
        cr_assert_geq(s.nanosleep_ns, 300 * MS_NS);
        cr_assert_eq(s.poll_ret, 0, "poll: %s after %" PRIu64 " ms", strerror(s.poll_errno),
                     s.poll_ns / MS_NS);
        cr_assert_geq(s.poll_ns, 299 * MS_NS); /* poll's timeout is in ms, rounded up */
        /* one fiber that never switched: one stall, found in its first syscall */
        cr_assert_eq(__atomic_load_n(&log.count, __ATOMIC_ACQUIRE), 1, "%d reports", log.count);
        cr_assert_eq(log.r[0].syscall, SYS_nanosleep, "syscall %ld", log.r[0].syscall);
        cr_assert_str_eq(log.r[0].syscall_name, "nanosleep");
        cr_assert_str_eq(log.r[0].backtrace, "");
        cr_assert_str_eq(log.r[0].tag, "job 8 plugin sleepy");

        /* the same kind of group still takes a CPU-bound fiber's backtrace */
        a.tag = "job 9 plugin busy";
        cr_assert_eq(fiber_create(&f, &a, stall_fiber, NULL), 0);
        cr_assert_eq(fiber_join(f), 0);
        sched_set_stall_hook(NULL, NULL);
        cr_assert_eq(__atomic_load_n(&log.count, __ATOMIC_ACQUIRE), 2, "%d reports", log.count);
        cr_assert_eq(log.r[1].syscall, -1);
        cr_assert_str_eq(log.r[1].tag, "job 9 plugin busy");
        cr_assert(strstr(log.r[1].backtrace, "test_stall_busy"),
                  "no test_stall_busy in the backtrace:\n%s", log.r[1].backtrace);
        SchedGroupStats st;
        sched_group_stats(g, &st);
        cr_assert_eq(st.stalls, 2);
        sched_group_free(g);
}

/* Spins with the backtrace signal blocked, so the worker never answers it. */
static void stall_deaf(void *arg)
{
        sigset_t urg, old;

        (void)arg;
        sigemptyset(&urg);
        sigaddset(&urg, SIGURG);
        pthread_sigmask(SIG_BLOCK, &urg, &old);
        test_stall_busy(300 * MS_NS);
        pthread_sigmask(SIG_SETMASK, &old, NULL); /* the handler runs now, and does nothing */
}

Test(control, a_stall_report_names_its_fiber_even_without_a_backtrace)
{
        static StallLog log;
        SchedulingGroup *g = control_group(
                1, NULL, 0,
                (SchedControl){.stall_threshold_ns = 50 * MS_NS, .rescue_after_ns = SCHED_FOREVER});
        FiberAttr a = {.group = g, .tag = "job 10 plugin deaf"};
        Fiber *f;
        uint64_t id;

        sched_set_stall_hook(on_stall_log, &log);
        cr_assert_eq(fiber_create(&f, &a, stall_deaf, NULL), 0);
        id = fiber_id(f);
        cr_assert_eq(fiber_join(f), 0);
        sched_set_stall_hook(NULL, NULL);
        cr_assert_eq(__atomic_load_n(&log.count, __ATOMIC_ACQUIRE), 1, "%d reports", log.count);
        cr_assert_eq(log.r[0].fiber_id, id, "fiber %" PRIu64 ", not %" PRIu64, log.r[0].fiber_id,
                     id);
        cr_assert_str_eq(log.r[0].tag, "job 10 plugin deaf");
        cr_assert_str_eq(log.r[0].backtrace, "",
                         "a backtrace from a worker that blocks the signal");
        SchedGroupStats st;
        sched_group_stats(g, &st);
        cr_assert_eq(st.stalls, 1);
        sched_group_free(g);
}

/* ------------------------------------------------------------------ rescue -------- */

static void block_on_pipe(void *arg)
{
        int fd = *(int *)arg;
        char c;
        /* a plain blocking read: the worker thread itself is stuck */
        while (read(fd, &c, 1) < 0)
                ;
}

static unsigned thread_count(void)
{
        DIR *d = opendir("/proc/self/task");
        unsigned n = 0;
        struct dirent *e;
        cr_assert(d);
        while ((e = readdir(d)))
                n += e->d_name[0] != '.';
        closedir(d);
        return n;
}

Test(control, a_blocked_worker_is_rescued_and_the_spare_goes_away)
{
        SchedulingGroup *g = control_group(
                1, NULL, 0,
                (SchedControl){.rescue_after_ns = 20 * MS_NS, .stall_threshold_ns = SCHED_FOREVER});
        int p[2];
        Fiber *f;
        FiberAttr a = {.group = g};
        unsigned before = thread_count();

        cr_assert_eq(pipe(p), 0);
        cr_assert_eq(fiber_create(&f, &a, block_on_pipe, &p[0]), 0);
        /* the only worker is stuck in read(2): this fiber runs only on a spare */
        run_in_fiber(g, set_stop, &(Spin){0});
        SchedGroupStats st;
        sched_group_stats(g, &st);
        cr_assert_geq(st.rescues, 1);
        cr_assert_eq(st.threads, 2, "one worker and one spare, not %u", st.threads);

        cr_assert_eq(write(p[1], "x", 1), 1);
        cr_assert_eq(fiber_join(f), 0);
        /* the spare lingers 2 s in reserve, then its thread ends */
        uint64_t deadline = sched_deadline_after(30 * SEC_NS);
        while (thread_count() > before && sched_now_ns() < deadline)
                usleep(20000);
        cr_assert_eq(thread_count(), before, "threads %u, %u before", thread_count(), before);
        sched_group_stats(g, &st);
        cr_assert_eq(st.threads, 1);

        /* and it comes back the next time */
        cr_assert_eq(fiber_create(&f, &a, block_on_pipe, &p[0]), 0);
        run_in_fiber(g, set_stop, &(Spin){0});
        cr_assert_eq(write(p[1], "x", 1), 1);
        cr_assert_eq(fiber_join(f), 0);
        sched_group_stats(g, &st);
        cr_assert_geq(st.rescues, 2);
        close(p[0]);
        close(p[1]);
        sched_group_free(g);
}
