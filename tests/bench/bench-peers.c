/* SPDX-License-Identifier: MIT */
/*
 * bench-peers.c — the C peers of fiberd's benchmarks: what a switch or a thread costs
 * without the runtime.
 *
 *  floor     two contexts made with context_init() that context_switch() to each other
 *            N times each: the bare switch (scheduler/context.h, the assembly one on
 *            x86-64) with no run queue, no bookkeeping. The yield figure is judged
 *            against it (<= 2.5x).
 *  ucontext  the same loop with getcontext/makecontext/swapcontext, for scale: glibc's
 *            swapcontext also saves the signal mask, a sigprocmask syscall per switch.
 *  pthread   pthread_create + pthread_join of N threads (default 20,000: the kernel
 *            cost makes 1,000,000 pointless), in batches of 256, per thread; the scale
 *            for the fiber-creation figure.
 *  c2c       a cache line passed back and forth N times (default 1,000,000) between two
 *            threads pinned to the first two CPUs the process may use: the round trip
 *            every cross-core hand-off pays at least twice (the run queue's cell, the
 *            fiber's control block). On a VM it is the host's placement of the two
 *            vCPUs, and it can change under a running guest: on the AMD EPYC VM of
 *            docs/benchmarks.md it is 43-68 ns for minutes, then 360-440 ns for minutes
 *            ("Two regimes" there), and the cross-core rows move with it.
 *  wake      what a futex wake of a sleeping thread costs the waker, in microseconds of
 *            its own CPU time (CLOCK_THREAD_CPUTIME_ID around the FUTEX_WAKE, less the
 *            cost of the empty bracket): N wakes (default 1,000), one every GAP us
 *            (default 1,000: past a KVM guest's halt-polling window, so the sleeper's
 *            vCPU has halted), the waker busy in between and the sleeper on the other
 *            CPU, as a server worker wakes an idle job worker. Only wakes that found the
 *            sleeper waiting count. On bare metal that is a system call and an IPI, a
 *            microsecond or two; on the 2-vCPU AMD EPYC KVM guest of
 *            docs/benchmarks.md 12-30 us, the IPI's exit to the host included, which
 *            makes every cross-thread wake-up in fiberd's path a cost to count.
 *
 * The two switch loops run on one thread with stacks from malloc, so nothing here
 * depends on the runtime's groups: they ran (and can run) before libsched was built,
 * from scheduler/context.c and context-x86_64.S alone.
 */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "scheduler/base/spinlock.h"
#include "scheduler/context.h"
#include "tests/bench/bench.h"

#define PEER_STACK_SIZE (64 * 1024)

/* ------------------------------------------------------------------ floor --------- */

static Context floor_main;
static Context floor_ctx[2];
static uint64_t floor_rounds;

/* Each side switches to the other floor_rounds times; side 0, which starts and so
 * finishes first, then returns to the main context. */
static void floor_entry(void *arg)
{
        int me = (int)(intptr_t)arg;

        for (uint64_t i = 0; i < floor_rounds; i++)
                context_switch(&floor_ctx[me], &floor_ctx[!me]);
        context_switch(&floor_ctx[me], &floor_main);
        abort(); /* never resumed */
}

int bench_peer_floor(int argc, char **argv)
{
        void *stacks[2];
        uint64_t t0, t1;

        floor_rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 5000000);
        for (int i = 0; i < 2; i++) {
                stacks[i] = malloc(PEER_STACK_SIZE);
                if (!stacks[i])
                        bench_die("floor: out of memory");
                context_init(&floor_ctx[i], stacks[i], PEER_STACK_SIZE, floor_entry,
                             (void *)(intptr_t)i);
        }
        t0 = bench_now_ns();
        context_switch(&floor_main, &floor_ctx[0]);
        t1 = bench_now_ns();
        printf("%.2f\n", (double)(t1 - t0) / (double)(2 * floor_rounds));
        free(stacks[0]);
        free(stacks[1]);
        return 0;
}

/* ------------------------------------------------------------------ ucontext ------ */

static ucontext_t uc_main;
static ucontext_t uc_ctx[2];
static uint64_t uc_rounds;

/* makecontext passes ints only: the side number. */
static void uc_entry(int me)
{
        for (uint64_t i = 0; i < uc_rounds; i++)
                swapcontext(&uc_ctx[me], &uc_ctx[!me]);
        swapcontext(&uc_ctx[me], &uc_main);
        abort(); /* never resumed */
}

int bench_peer_ucontext(int argc, char **argv)
{
        void *stacks[2];
        uint64_t t0, t1;

        uc_rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000);
        for (int i = 0; i < 2; i++) {
                stacks[i] = malloc(PEER_STACK_SIZE);
                if (!stacks[i])
                        bench_die("ucontext: out of memory");
                if (getcontext(&uc_ctx[i]) < 0)
                        bench_die("ucontext: getcontext failed");
                uc_ctx[i].uc_stack.ss_sp = stacks[i];
                uc_ctx[i].uc_stack.ss_size = PEER_STACK_SIZE;
                uc_ctx[i].uc_link = NULL;
                makecontext(&uc_ctx[i], (void (*)(void))uc_entry, 1, i);
        }
        t0 = bench_now_ns();
        if (swapcontext(&uc_main, &uc_ctx[0]) < 0)
                bench_die("ucontext: swapcontext failed");
        t1 = bench_now_ns();
        printf("%.2f\n", (double)(t1 - t0) / (double)(2 * uc_rounds));
        free(stacks[0]);
        free(stacks[1]);
        return 0;
}

/* ------------------------------------------------------------------ pthread ------- */

#define PTHREAD_BATCH 256

static void *pthread_body(void *arg)
{
        __atomic_fetch_add((uint64_t *)arg, 1, __ATOMIC_RELAXED);
        return NULL;
}

int bench_peer_pthread(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 20000);
        pthread_t threads[PTHREAD_BATCH];
        uint64_t ran = 0, t0, t1;

        t0 = bench_now_ns();
        for (uint64_t done = 0; done < n;) {
                unsigned batch = n - done < PTHREAD_BATCH ? (unsigned)(n - done) : PTHREAD_BATCH;
                for (unsigned i = 0; i < batch; i++) {
                        int r = pthread_create(&threads[i], NULL, pthread_body, &ran);
                        if (r)
                                bench_die("pthread: pthread_create: %s", strerror(r));
                }
                for (unsigned i = 0; i < batch; i++)
                        pthread_join(threads[i], NULL);
                done += batch;
        }
        t1 = bench_now_ns();
        if (ran != n)
                bench_die("pthread: %llu threads ran, want %llu", (unsigned long long)ran,
                          (unsigned long long)n);
        printf("%.2f\n", (double)(t1 - t0) / (double)n);
        return 0;
}

/* ------------------------------------------------------------------ c2c ----------- */

static uint64_t c2c_line __attribute__((aligned(128)));
static uint64_t c2c_rounds;
static int c2c_ready __attribute__((aligned(128))); /* the echo side is pinned */

static void pin_to_cpu(int cpu)
{
        cpu_set_t one;

        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_setaffinity_np(pthread_self(), sizeof(one), &one))
                bench_die("cannot pin a thread to CPU %d", cpu);
}

/* The other side: answers each odd value with the next even one. */
static void *c2c_echo(void *arg)
{
        pin_to_cpu((int)(intptr_t)arg);
        __atomic_store_n(&c2c_ready, 1, __ATOMIC_RELEASE);
        for (uint64_t v = 1; v < 2 * c2c_rounds; v += 2) {
                while (__atomic_load_n(&c2c_line, __ATOMIC_ACQUIRE) != v)
                        cpu_relax();
                __atomic_store_n(&c2c_line, v + 1, __ATOMIC_RELEASE);
        }
        return NULL;
}

/* The first two CPUs the process may use, into @cpus; dies naming @who without two. */
static void two_cpus(const char *who, int cpus[2])
{
        cpu_set_t allowed;
        int n = 0;

        if (sched_getaffinity(0, sizeof(allowed), &allowed))
                bench_die("%s: sched_getaffinity failed", who);
        for (int cpu = 0; cpu < CPU_SETSIZE && n < 2; cpu++)
                if (CPU_ISSET(cpu, &allowed))
                        cpus[n++] = cpu;
        if (n < 2)
                bench_die("%s: needs two CPUs, the process may use %d", who, n);
}

int bench_peer_c2c(int argc, char **argv)
{
        int cpus[2];
        pthread_t t;
        uint64_t t0, t1;

        c2c_rounds = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000);
        two_cpus("c2c", cpus);
        c2c_line = 0;
        if (pthread_create(&t, NULL, c2c_echo, (void *)(intptr_t)cpus[1]))
                bench_die("c2c: pthread_create failed");
        pin_to_cpu(cpus[0]);
        while (!__atomic_load_n(&c2c_ready, __ATOMIC_ACQUIRE)) /* its start is not timed */
                cpu_relax();
        t0 = bench_now_ns();
        for (uint64_t v = 0; v < 2 * c2c_rounds; v += 2) {
                while (__atomic_load_n(&c2c_line, __ATOMIC_ACQUIRE) != v)
                        cpu_relax();
                __atomic_store_n(&c2c_line, v + 1, __ATOMIC_RELEASE);
        }
        while (__atomic_load_n(&c2c_line, __ATOMIC_ACQUIRE) != 2 * c2c_rounds)
                cpu_relax();
        t1 = bench_now_ns();
        pthread_join(t, NULL);
        printf("%.1f\n", (double)(t1 - t0) / (double)c2c_rounds);
        return 0;
}

/* ------------------------------------------------------------------ wake ---------- */

static uint32_t wake_word __attribute__((aligned(128)));
static int wake_stop, wake_ready;

/* The sleeper: waits on wake_word until it is set, takes it, and waits again. */
static void *wake_sleeper(void *arg)
{
        pin_to_cpu((int)(intptr_t)arg);
        __atomic_store_n(&wake_ready, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&wake_stop, __ATOMIC_ACQUIRE))
                if (!__atomic_exchange_n(&wake_word, 0, __ATOMIC_ACQ_REL))
                        syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
        return NULL;
}

static uint64_t thread_cpu_ns(void)
{
        struct timespec t;

        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

int bench_peer_wake(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000);
        uint64_t gap_ns = bench_parse_count(argc > 2 ? argv[2] : NULL, 1000) * 1000;
        uint64_t cpu = 0, bracket = 0, woke = 0;
        int cpus[2];
        pthread_t t;

        two_cpus("wake", cpus);
        if (pthread_create(&t, NULL, wake_sleeper, (void *)(intptr_t)cpus[1]))
                bench_die("wake: pthread_create failed");
        pin_to_cpu(cpus[0]);
        while (!__atomic_load_n(&wake_ready, __ATOMIC_ACQUIRE))
                cpu_relax();
        /* what the bracket itself costs: two reads of the thread's CPU clock */
        for (int i = 0; i < 1000; i++) {
                uint64_t c0 = thread_cpu_ns();

                bracket += thread_cpu_ns() - c0;
        }
        bracket /= 1000;
        for (uint64_t i = 0; i < n; i++) {
                uint64_t t0 = bench_now_ns(), c0, c1;
                long r;

                /* busy, not asleep: the sleeper's CPU goes idle meanwhile */
                while (bench_now_ns() - t0 < gap_ns)
                        cpu_relax();
                c0 = thread_cpu_ns();
                __atomic_store_n(&wake_word, 1, __ATOMIC_RELEASE);
                r = syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
                c1 = thread_cpu_ns();
                if (r == 1) { /* it was asleep: a wake that found nobody costs no IPI */
                        cpu += c1 - c0 > bracket ? c1 - c0 - bracket : 0;
                        woke++;
                }
        }
        __atomic_store_n(&wake_stop, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&wake_word, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        pthread_join(t, NULL);
        if (woke < n / 2)
                bench_die("wake: only %llu of %llu wakes found the sleeper asleep",
                          (unsigned long long)woke, (unsigned long long)n);
        printf("%.2f\n", (double)cpu / (double)woke / 1000.0);
        return 0;
}
