/* SPDX-License-Identifier: MIT */
/*
 * monitor.c — a group's monitor thread: the stall detector and the rescue of blocked
 * workers.
 *
 * Every worker publishes whether it runs a fiber (Worker.running, written only when it
 * leaves or enters its idle loop) and a switch count (run_seq, a plain store per
 * switch). The monitor reads them every tick (a quarter of the smaller threshold,
 * 1..50 ms) while any worker runs a fiber (and for 4 ticks after); a count that stood still since the monitor
 * first saw it means one fiber has run all that time (libgo's Dispatcher compares
 * switch counts the same way), so the switch path reads no clock. The monitor
 * sleeps on a futex while none does: the first worker to leave its idle loop wakes it
 * (monitor_wake(), one load when the monitor is awake). So an idle daemon costs no
 * wake-ups at all — libgo's Dispatcher (shared/seeds/004) wakes every millisecond
 * forever; Go's sysmon backs off to 10 ms and parks when everything idles, which is
 * what this does.
 *
 * Stall detector (seastar's cpu_stall_detector, shared/seeds/002): a fiber that has run
 * stall_threshold without switching is reported once per stall (per run_seq), and only
 * when the monitor can name it: it copies the running Fiber through /proc/self/mem and
 * checks that run_seq has not moved (stall_fiber_read()), so a worker between fibers
 * is never reported. A worker thread inside a syscall (/proc/self/task/<tid>/syscall)
 * gets no signal, because poll, nanosleep, epoll_wait and select return EINTR on any
 * handled signal: the report names the syscall instead of a backtrace. Otherwise the
 * backtrace is taken on the stalled worker's own thread: the monitor sends it SIGURG
 * (Go's preemption signal, ignored by default by everything else) and the handler, on
 * the worker's sigaltstack, calls backtrace(3) into the worker's buffer. The monitor
 * resolves the frames (the program's symbolizer, sched_set_symbolizer(), else
 * backtrace_symbols(3): dladdr) and hands the report to the stall hook. At most 10
 * reports per second per group; the stalls counter counts every stall that names a
 * fiber. The window between the syscall check and the signal is described at
 * stall_report().
 *
 * Fibers waiting behind one (Go's sysmon): a fiber made ready into a worker's runnext
 * wakes no sibling (ready.c), so when the worker's fiber runs on for a tick instead of
 * parking, the monitor wakes an idle sibling, which steals it.
 *
 * Rescue (libgo's Dispatcher marks a processer whose coroutine has not switched for a
 * while as blocking and moves its work; Go's sysmon retakes a P from an M stuck in a
 * syscall and hands it to another M): when a worker has been inside one fiber for
 * rescue_after while its group has ready fibers, the monitor marks it blocked
 * (g->nblocked counts them) and makes spare worker number nblocked-1 run: it starts
 * its thread, or wakes it from the reserve. Spare workers are ordinary workers with
 * slots after the group's regular ones; they steal the blocked worker's local deque
 * and runnext like any sibling, so its waiting work moves. A blocked worker's yield
 * list is its own (no atomics) and waits for it. When the blocked worker's fiber
 * switches out, worker_unblock() decrements nblocked; the spare that is now surplus
 * finishes the fiber it runs, moves what it holds to the shared queues and parks in
 * the reserve; after SPARE_LINGER_NS without being needed its thread exits, so the
 * number of OS threads returns to normal.
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>

#include "scheduler/runtime.h"

#define STALL_SIGNAL SIGURG
#define SPARE_LINGER_NS (2 * NSEC_PER_SEC)
#define STALL_REPORTS_PER_SEC 10
#define BACKTRACE_WAIT_NS (100 * NSEC_PER_MSEC)
#define MONITOR_IDLE_SCANS 4 /* idle ticks in a row before the monitor sleeps */

static SchedStallFn stall_hook;
static void *stall_hook_arg;

void sched_set_stall_hook(SchedStallFn fn, void *arg)
{
        __atomic_store_n(&stall_hook_arg, arg, __ATOMIC_RELEASE);
        __atomic_store_n(&stall_hook, fn, __ATOMIC_RELEASE);
}

static SchedSymbolizeFn symbolizer;
static void *symbolizer_arg;

void sched_set_symbolizer(SchedSymbolizeFn fn, void *arg)
{
        __atomic_store_n(&symbolizer_arg, arg, __ATOMIC_RELEASE);
        __atomic_store_n(&symbolizer, fn, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ backtrace ----- */

/*
 * The handler must change nothing the interrupted code can see: it saves errno, writes
 * only the worker's own bt fields, and claims the request first (-1 -> -2) so that a
 * monitor that gave up waiting never reads frames being written. backtrace(3) was
 * warmed up at install time, so it neither allocates nor loads libgcc_s here.
 */
static void backtrace_handler(int sig, siginfo_t *si, void *uc)
{
        int saved = errno, asked = -1;
        Worker *w = worker_self();

        (void)sig;
        (void)si;
        if (!w || !__atomic_compare_exchange_n(&w->bt_n, &asked, -2, false, __ATOMIC_ACQ_REL,
                                               __ATOMIC_RELAXED))
                goto out;
        w->bt_seq = __atomic_load_n(&w->run_seq, __ATOMIC_RELAXED);
        w->bt_intr = false;
#if defined(__x86_64__)
        {
                /* The kernel has already turned an interrupted poll(2), nanosleep(2),
                 * epoll_wait(2)... into -EINTR: rax holds it and rip follows the
                 * syscall instruction (0f 05). Read rip - 2 only when it lies on rip's
                 * own page, which is mapped since it was executing. */
                const ucontext_t *u = uc;
                uintptr_t ip = (uintptr_t)u->uc_mcontext.gregs[REG_RIP];
                if (u->uc_mcontext.gregs[REG_RAX] == -EINTR && (ip & 4095) >= 2)
                        w->bt_intr = ((const unsigned char *)ip)[-2] == 0x0f &&
                                     ((const unsigned char *)ip)[-1] == 0x05;
        }
#else
        (void)uc;
#endif
        __atomic_store_n(&w->bt_n, backtrace(w->bt, (int)ELEMENTSOF(w->bt)), __ATOMIC_RELEASE);
out:
        errno = saved;
}

static int mem_fd = -1; /* /proc/self/mem: reads that cannot fault (stall_fiber_read()) */

void monitor_backtrace_handler_install(void)
{
        static int installed;
        struct sigaction sa = {0};
        void *warm[2];

        if (__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL))
                return;
        /* kept open for the life of the process, like the handler */
        __atomic_store_n(&mem_fd, open("/proc/self/mem", O_RDONLY | O_CLOEXEC), __ATOMIC_RELEASE);
        if (__atomic_load_n(&mem_fd, __ATOMIC_RELAXED) < 0)
                sched_log(LOG_WARNING,
                          "stall detector: cannot open /proc/self/mem (%s): stalls "
                          "are neither reported nor counted without /proc",
                          strerror(errno));
        /* the first backtrace() loads libgcc_s (malloc, dlopen): not in a handler */
        backtrace(warm, 2);
        sa.sa_sigaction = backtrace_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(STALL_SIGNAL, &sa, NULL);
}

/* ------------------------------------------------------------------ the stalled ---- */

/* The syscalls a stalled fiber is most often found in, by number (this architecture's). */
static const struct {
        long nr;
        const char *name;
} syscall_names[] = {
        {SYS_read, "read"},
        {SYS_write, "write"},
        {SYS_pread64, "pread64"},
        {SYS_pwrite64, "pwrite64"},
        {SYS_readv, "readv"},
        {SYS_writev, "writev"},
        {SYS_openat, "openat"},
        {SYS_close, "close"},
        {SYS_fsync, "fsync"},
        {SYS_fdatasync, "fdatasync"},
        {SYS_flock, "flock"},
        {SYS_fcntl, "fcntl"},
        {SYS_ioctl, "ioctl"},
        {SYS_futex, "futex"},
        {SYS_nanosleep, "nanosleep"},
        {SYS_clock_nanosleep, "clock_nanosleep"},
        {SYS_ppoll, "ppoll"},
        {SYS_pselect6, "pselect6"},
        {SYS_epoll_pwait, "epoll_pwait"},
        {SYS_connect, "connect"},
        {SYS_accept4, "accept4"},
        {SYS_recvfrom, "recvfrom"},
        {SYS_sendto, "sendto"},
        {SYS_recvmsg, "recvmsg"},
        {SYS_sendmsg, "sendmsg"},
        {SYS_wait4, "wait4"},
        {SYS_waitid, "waitid"},
        {SYS_getrandom, "getrandom"},
#ifdef SYS_poll
        {SYS_poll, "poll"},
#endif
#ifdef SYS_select
        {SYS_select, "select"},
#endif
#ifdef SYS_epoll_wait
        {SYS_epoll_wait, "epoll_wait"},
#endif
#ifdef SYS_accept
        {SYS_accept, "accept"},
#endif
#ifdef SYS_open
        {SYS_open, "open"},
#endif
#ifdef SYS_pause
        {SYS_pause, "pause"},
#endif
};

static const char *syscall_name(long nr)
{
        for (size_t i = 0; i < ELEMENTSOF(syscall_names); i++)
                if (syscall_names[i].nr == nr)
                        return syscall_names[i].name;
        return NULL;
}

#define SYSCALL_NONE -1    /* in user code (or in the kernel outside a syscall: a fault) */
#define SYSCALL_UNKNOWN -2 /* /proc could not tell */

/* The syscall @w's thread sits in, from /proc/self/task/<tid>/syscall: its number,
 * SYSCALL_NONE ("running", or "-1": in the kernel for a fault or preemption, where a
 * signal interrupts nothing), or SYSCALL_UNKNOWN. Context: the monitor. */
static long worker_syscall(const Worker *w)
{
        pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
        char path[64], buf[256], *end;
        ssize_t n;
        long nr;
        int fd;

        snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return SYSCALL_UNKNOWN;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return SYSCALL_UNKNOWN;
        buf[n] = 0;
        if (strncmp(buf, "running", 7) == 0)
                return SYSCALL_NONE;
        nr = strtol(buf, &end, 10);
        if (end == buf)
                return SYSCALL_UNKNOWN;
        return nr < 0 ? SYSCALL_NONE : nr;
}

/* What the monitor knows of the fiber a worker runs, copied while it ran. */
typedef struct StallFiber {
        uint64_t id;
        unsigned cls;
        bool tagged;
        char tag[128];
} StallFiber;

/* Copy @len bytes at @src through /proc/self/mem: memory unmapped meanwhile (the fiber
 * ended and a stack of its own size was unmapped; its tag, which its owner may free
 * once it ended) gives a short read instead of a fault. Return: the bytes copied. */
static size_t mem_peek(void *dst, const void *src, size_t len)
{
        int fd = __atomic_load_n(&mem_fd, __ATOMIC_ACQUIRE);
        ssize_t n = fd < 0 ? -1 : pread(fd, dst, len, (off_t)(uintptr_t)src);

        return n > 0 ? (size_t)n : 0;
}

/*
 * stall_fiber_read - the fiber @w runs, if it still runs the one it ran at @seq: the
 * monitor cannot stop the worker, so it copies the Fiber (and its tag) through
 * mem_peek() and then checks that run_seq still reads @seq. Nothing else changes
 * w->current at a fixed run_seq (a switch bumps run_seq, then stores current; the
 * monitor looks only at a run_seq it has seen standing still for the stall threshold).
 * Return: true with *@ret filled; false between fibers, when the fiber switched, or
 * without /proc. Context: the monitor.
 */
static bool stall_fiber_read(Worker *w, uint64_t seq, StallFiber *ret)
{
        Fiber *f = __atomic_load_n(&w->current, __ATOMIC_RELAXED);
        Fiber copy;

        if (!f || !__atomic_load_n(&w->running, __ATOMIC_ACQUIRE))
                return false; /* the worker is between fibers */
        if (mem_peek(&copy, f, sizeof(copy)) != sizeof(copy))
                return false;
        ret->id = copy.id;
        ret->cls = copy.cls;
        ret->tagged = copy.tag != NULL;
        ret->tag[0] = 0;
        if (copy.tag)
                ret->tag[mem_peek(ret->tag, copy.tag, sizeof(ret->tag) - 1)] = 0;
        return copy.id && __atomic_load_n(&w->run_seq, __ATOMIC_ACQUIRE) == seq;
}

/* ------------------------------------------------------------------ stalls -------- */

static bool stall_rate_ok(SchedulingGroup *g, uint64_t now_ns)
{
        static __thread uint64_t window_start, in_window; /* one monitor thread per group */

        (void)g;
        if (now_ns - window_start >= NSEC_PER_SEC) {
                window_start = now_ns;
                in_window = 0;
        }
        return in_window++ < STALL_REPORTS_PER_SEC;
}

/* Ask @w's thread for its backtrace (SIGURG) and wait for it at most
 * BACKTRACE_WAIT_NS. Return: the frames in w->bt, 0 when there are none for @seq (no
 * answer, or the fiber switched before the signal came). Context: the monitor. */
static int stall_backtrace(Worker *w, uint64_t seq)
{
        uint64_t deadline = sched_now_ns() + BACKTRACE_WAIT_NS;
        int n = -1, asked = -1;

        __atomic_store_n(&w->bt_n, -1, __ATOMIC_RELEASE);
        pthread_kill(w->thread, STALL_SIGNAL);
        while (sched_now_ns() < deadline) {
                n = __atomic_load_n(&w->bt_n, __ATOMIC_ACQUIRE);
                if (n >= 0)
                        break;
                nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
        }
        if (n < 0 && !__atomic_compare_exchange_n(&w->bt_n, &asked, 0, false, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE)) {
                /* the handler claimed it (-2) and is writing: it is running, wait */
                while ((n = __atomic_load_n(&w->bt_n, __ATOMIC_ACQUIRE)) < 0)
                        sched_yield();
        }
        if (n > 0 && w->bt_seq != seq)
                n = 0; /* it switched before the signal came: the frames are another's */
        return n > 0 ? n : 0;
}

/*
 * stall_report - @w has run one fiber since run_seq @seq for @ran_ns, past the
 * threshold. A report is made, and counted, only for a fiber that is still the one
 * running at @seq when the monitor looks (stall_fiber_read()).
 *
 * No signal goes to a thread inside a syscall: poll(2), nanosleep(2), epoll_wait(2)
 * and select(2) return EINTR on any handled signal, SA_RESTART or not, so a plugin's
 * usleep(1 s) would end after the threshold. Such a stall is reported as "blocked in
 * syscall N" without a backtrace. The check (/proc/self/task/<tid>/syscall) and the
 * signal are not atomic: a thread that enters a syscall in between, or that is on a CPU
 * inside one (shown as "running") and about to sleep, still sees EINTR. The window is
 * microseconds once per stall; the handler recognises it (bt_intr) and the report says
 * so. Context: the monitor.
 */
static void stall_report(SchedulingGroup *g, Worker *w, uint64_t seq, uint64_t ran_ns)
{
        SchedStallFn hook = __atomic_load_n(&stall_hook, __ATOMIC_ACQUIRE);
        char *text = NULL;
        size_t len = 0;
        StallFiber sf;
        long nr;
        FILE *out;
        int n = 0;

        if (!stall_fiber_read(w, seq, &sf))
                return;
        __atomic_fetch_add(&g->stalls, 1, __ATOMIC_RELAXED);
        if (!stall_rate_ok(g, sched_now_ns()))
                return;
        nr = worker_syscall(w);
        if (nr == SYSCALL_NONE)
                n = stall_backtrace(w, seq);

        out = open_memstream(&text, &len);
        if (out && n > 0) {
                SchedSymbolizeFn fn = __atomic_load_n(&symbolizer, __ATOMIC_ACQUIRE);
                void *arg = __atomic_load_n(&symbolizer_arg, __ATOMIC_ACQUIRE);
                char **sym = backtrace_symbols(w->bt, n);
                char line[512];
                /* frame 0 is the handler, 1 the signal trampoline */
                for (int i = 2; i < n; i++) {
                        line[0] = 0;
                        if (fn && fn(w->bt[i], line, sizeof(line), arg))
                                fprintf(out, "#%d %.*s\n", i - 2, (int)sizeof(line), line);
                        else
                                fprintf(out, "#%d %s\n", i - 2, sym ? sym[i] : "?");
                }
                free(sym);
        }
        if (out)
                fclose(out);

        SchedStall st = {
                .group = g->name,
                .worker = w->index,
                .fiber_id = sf.id,
                .tag = sf.tagged ? sf.tag : NULL,
                .class_name = g->classes[sf.cls < g->nclasses ? sf.cls : 0].name,
                .ran_ns = ran_ns,
                .backtrace = text ? text : "",
                .syscall = nr >= 0 ? nr : -1,
                .syscall_name = nr >= 0 ? syscall_name(nr) : NULL,
                .interrupted = n > 0 && w->bt_intr,
        };
        if (hook) {
                hook(&st, __atomic_load_n(&stall_hook_arg, __ATOMIC_ACQUIRE));
        } else if (st.syscall >= 0) {
                sched_log(LOG_WARNING,
                          "stall: group %s worker %u: fiber %" PRIu64 " (%s, class %s) has been "
                          "blocked in syscall %ld (%s) for %" PRIu64 " ms",
                          st.group, st.worker, st.fiber_id, st.tag ? st.tag : "no tag",
                          st.class_name, st.syscall, st.syscall_name ? st.syscall_name : "?",
                          st.ran_ns / NSEC_PER_MSEC);
        } else {
                sched_log(LOG_WARNING,
                          "stall: group %s worker %u: fiber %" PRIu64 " (%s, class %s) has run "
                          "%" PRIu64 " ms without switching%s\n%s",
                          st.group, st.worker, st.fiber_id, st.tag ? st.tag : "no tag",
                          st.class_name, st.ran_ns / NSEC_PER_MSEC,
                          st.interrupted ? " (the backtrace signal cut a syscall short)" : "",
                          st.backtrace);
        }
        free(text);
}

/* ------------------------------------------------------------------ rescue -------- */

/* Fibers wait in @w's own runnext slot or deque (groups with runnext slots only). */
static bool worker_has_ready(const SchedulingGroup *g, const Worker *w)
{
        return g->runnext &&
               (__atomic_load_n(&w->next, __ATOMIC_RELAXED) || localq_size(&w->local));
}

/* Fibers wait for a worker of @g: its queues, its workers' deques and runnext slots. */
static bool group_has_ready(const SchedulingGroup *g)
{
        unsigned n = __atomic_load_n(&g->nslots_live, __ATOMIC_ACQUIRE);

        for (unsigned c = 0; c < g->nclasses; c++)
                if (runq_size(g->classes[c].runq))
                        return true;
        for (unsigned i = 0; i < n; i++)
                if (worker_has_ready(g, &g->workers[i]))
                        return true;
        return false;
}

/* Make spare @k of @g run: wake it from the reserve, or start its thread.
 * Context: the monitor, g->spare_lock held. */
static void spare_activate(SchedulingGroup *g, unsigned k)
{
        Worker *s = &g->workers[g->nworkers + k];
        int state = __atomic_load_n(&s->thread_state, __ATOMIC_ACQUIRE);
        int r;

        if (state == WORKER_THREAD_RUNNING) {
                __atomic_store_n(&s->spare_futex, 1, __ATOMIC_RELEASE);
                futex_wake(&s->spare_futex);
                wait_slot_wake(&g->slots[s->index]);
                return;
        }
        if (state == WORKER_THREAD_EXITED)
                worker_join(s);
        if (__atomic_load_n(&g->nslots_live, __ATOMIC_RELAXED) < s->index + 1)
                __atomic_store_n(&g->nslots_live, s->index + 1, __ATOMIC_RELEASE);
        __atomic_store_n(&s->thread_state, WORKER_THREAD_RUNNING, __ATOMIC_RELEASE);
        r = worker_start(s);
        if (r < 0) {
                __atomic_store_n(&s->thread_state, WORKER_THREAD_NONE, __ATOMIC_RELEASE);
                sched_log(LOG_WARNING, "group %s: cannot start a spare worker: %s", g->name,
                          strerror(-r));
        }
}

static void rescue(SchedulingGroup *g, Worker *w)
{
        bool expected = false;
        unsigned k;

        pthread_mutex_lock(&g->spare_lock);
        k = __atomic_load_n(&g->nblocked, __ATOMIC_ACQUIRE);
        if (k >= g->nspare || !__atomic_compare_exchange_n(&w->blocked, &expected, true, false,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
                pthread_mutex_unlock(&g->spare_lock);
                return; /* every spare is in use, or it was marked already */
        }
        __atomic_fetch_add(&g->nblocked, 1, __ATOMIC_ACQ_REL);
        __atomic_fetch_add(&g->rescues, 1, __ATOMIC_RELAXED);
        spare_activate(g, k);
        pthread_mutex_unlock(&g->spare_lock);
}

void worker_unblock(Worker *w)
{
        SchedulingGroup *g = w->group;
        bool expected = true;
        unsigned k;

        if (!__atomic_compare_exchange_n(&w->blocked, &expected, false, false, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
                return;
        k = __atomic_sub_fetch(&g->nblocked, 1, __ATOMIC_ACQ_REL);
        /* spare k is surplus now: let it see so, wherever it waits */
        wait_slot_wake(&g->slots[g->nworkers + k]);
}

bool worker_spare_park(Worker *w)
{
        SchedulingGroup *g = w->group;

        while (worker_surplus(w) && !__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE)) {
                __atomic_store_n(&w->spare_futex, 0, __ATOMIC_RELEASE);
                if (!worker_surplus(w))
                        break;
                if (futex_wait(&w->spare_futex, 0, SPARE_LINGER_NS) == -ETIMEDOUT) {
                        bool leave;
                        pthread_mutex_lock(&g->spare_lock);
                        leave = worker_surplus(w);
                        if (leave)
                                __atomic_store_n(&w->thread_state, WORKER_THREAD_EXITED,
                                                 __ATOMIC_RELEASE);
                        pthread_mutex_unlock(&g->spare_lock);
                        if (leave)
                                return false;
                }
        }
        return true;
}

/* ------------------------------------------------------------------ the thread ---- */

/* One look at every worker. Return: whether any runs a fiber. */
static bool monitor_scan(SchedulingGroup *g)
{
        unsigned n = __atomic_load_n(&g->nslots_live, __ATOMIC_ACQUIRE);
        uint64_t now = sched_now_ns();
        bool busy = false, ready_known = false, ready = false;

        for (unsigned i = 0; i < n; i++) {
                Worker *w = &g->workers[i];
                uint64_t seq = __atomic_load_n(&w->run_seq, __ATOMIC_ACQUIRE);
                uint64_t ran;

                if (!__atomic_load_n(&w->running, __ATOMIC_ACQUIRE)) {
                        w->mon_seq = seq - 1; /* the next busy look starts afresh */
                        continue;
                }
                busy = true;
                if (seq != w->mon_seq) {
                        w->mon_seq = seq;
                        w->mon_since_ns = now;
                        continue;
                }
                ran = now - w->mon_since_ns; /* at least this long in one fiber */
                /* Go's sysmon does the same for a P running one goroutine: fibers
                 * made ready on this worker (runnext, which wakes nobody, or its
                 * deque) wait behind the fiber it runs, while a sibling may sleep.
                 * Woken, the sibling steals them (steal_siblings()). */
                if (worker_has_ready(g, w))
                        group_wake_idle(g);
                if (g->stall_ns && ran >= g->stall_ns && w->stall_seq != seq) {
                        w->stall_seq = seq;
                        stall_report(g, w, seq, ran);
                }
                if (g->rescue_ns && ran >= g->rescue_ns &&
                    !__atomic_load_n(&w->blocked, __ATOMIC_ACQUIRE)) {
                        if (!ready_known) {
                                ready = group_has_ready(g);
                                ready_known = true;
                        }
                        if (ready)
                                rescue(g, w);
                }
        }
        return busy;
}

static void *monitor_main(void *arg)
{
        SchedulingGroup *g = arg;
        char name[16];

        snprintf(name, sizeof(name), "%.11s-mon", g->name);
        pthread_setname_np(pthread_self(), name);
        unsigned idle_scans = 0;

        while (!__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE)) {
                /* Idle for a few ticks in a row before it sleeps: a group serving jobs
                 * one at a time is idle between most of them, and a futex wake per job
                 * would cost more than the ticks do. */
                idle_scans = monitor_scan(g) ? 0 : idle_scans + 1;
                if (idle_scans < MONITOR_IDLE_SCANS) {
                        futex_wait(&g->monitor_idle, 0, g->tick_ns); /* stop wakes it */
                        continue;
                }
                idle_scans = 0;
                /* Nobody runs a fiber: sleep until a worker leaves its idle loop. The
                 * flag is set before the second look, and a worker sets running before
                 * it reads the flag (both seq_cst), so one of the two sees the other. */
                __atomic_store_n(&g->monitor_idle, 1, __ATOMIC_SEQ_CST);
                if (!monitor_scan(g) && !__atomic_load_n(&g->stopped, __ATOMIC_ACQUIRE))
                        futex_wait(&g->monitor_idle, 1, SCHED_FOREVER);
                __atomic_store_n(&g->monitor_idle, 0, __ATOMIC_SEQ_CST);
        }
        return NULL;
}

int monitor_start(SchedulingGroup *g)
{
        int r;

        if (!g->stall_ns && !g->rescue_ns)
                return 0;
        if (g->stall_ns)
                monitor_backtrace_handler_install();
        r = -pthread_create(&g->monitor, NULL, monitor_main, g);
        if (r < 0)
                return r;
        __atomic_store_n(&g->monitor_running, true, __ATOMIC_RELAXED);
        return 0;
}

void monitor_stop(SchedulingGroup *g)
{
        if (!__atomic_load_n(&g->monitor_running, __ATOMIC_RELAXED))
                return;
        /* g->stopped is set: wake it from either wait */
        __atomic_store_n(&g->monitor_idle, 2, __ATOMIC_SEQ_CST);
        syscall(SYS_futex, &g->monitor_idle, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        pthread_join(g->monitor, NULL);
        __atomic_store_n(&g->monitor_running, false, __ATOMIC_RELAXED); /* workers still read it */
}
