/* SPDX-License-Identifier: MIT */
/*
 * bench-control.c — the CPU-control figures (issue "Control of CPU and time"): how close
 * job classes come to their shares, and how soon a fiber behind a CPU-bound one runs.
 *
 *   control-fair SPEC [MS]    seastar's demo (shared/seeds/002) on fiberd's M:N groups.
 *                             SPEC 1g: three classes of shares 100 : 20 : 50, each kept
 *                             busy by 4 CPU-bound fibers (fiber_maybe_yield() at every
 *                             task quota) on one group of 2 workers, for MS (10,000);
 *                             2g: the same on two groups of one worker (each class's
 *                             fibers on both); duty: classes of 50 and 100 shares, the
 *                             50 always busy and the 100 busy half the time (all its
 *                             fibers the first 50 ms of every 100 ms), 1 group of 2 workers (seastar: 2 : 1).
 *                             Prints the largest error, in percentage points, of a
 *                             class's CPU share against the expected one (58.8 / 11.8
 *                             / 29.4 %; duty: 66.7 / 33.3 %), then the shares seen.
 *   control-preempt [N]       one worker runs a CPU-bound fiber that calls
 *                             fiber_maybe_yield(); N times (200) a fiber is created
 *                             from outside the group (as a submitted job's is) and
 *                             the time until it runs is taken. Prints p50 and p99 µs
 *                             (the task quota is 500 µs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scheduler/sched.h"
#include "tests/bench/bench.h"
#include "scheduler/base/macro.h"

#define FAIR_FIBERS 4 /* per class */

typedef struct Hog {
        int *stop;
        uint64_t t0;               /* the duty cycle's origin, shared by the class */
        uint64_t on_ns, period_ns; /* busy the first on_ns of every period; 0 = always */
} Hog;

static void hog(void *arg)
{
        const Hog *h = arg;

        while (!__atomic_load_n(h->stop, __ATOMIC_ACQUIRE)) {
                if (h->period_ns) {
                        /* the whole class is busy or idle together, as seastar's
                         * 50%-utilisation group is */
                        uint64_t at = (bench_now_ns() - h->t0) % h->period_ns;
                        if (at >= h->on_ns)
                                fiber_sleep_for(h->period_ns - at);
                }
                fiber_maybe_yield();
        }
}

int bench_control_fair(int argc, char **argv)
{
        static const SchedClassConfig three[] = {{"c100", 100}, {"c20", 20}, {"c50", 50}};
        static const SchedClassConfig duty[] = {{"c50", 50}, {"c100", 100}};
        const char *spec = argc > 1 ? argv[1] : "1g";
        uint64_t ms = bench_parse_count(argc > 2 ? argv[2] : NULL, 10000);
        bool is_duty = !strcmp(spec, "duty"), two = !strcmp(spec, "2g");
        const SchedClassConfig *classes = is_duty ? duty : three;
        unsigned n = is_duty ? 2 : 3;
        double expect[3] = {100.0 / 170, 20.0 / 170, 50.0 / 170};
        Fiber *fs[3 * FAIR_FIBERS];
        Hog hogs[3];
        int stop = 0, r;
        uint64_t before[3], after[3], total = 0;
        Scheduler *s;

        if (!is_duty && !two && strcmp(spec, "1g"))
                bench_die("control-fair: SPEC is 1g, 2g or duty, not '%s'", spec);
        if (is_duty) {
                expect[0] = 2.0 / 3;
                expect[1] = 1.0 / 3;
        }
        SchedConfig cfg = {.groups = two ? 2 : 1,
                           .group_size = two ? 1 : 2,
                           .numa = SCHED_NUMA_OFF,
                           .queue_policy = SCHED_QUEUE_LOCAL,
                           .classes = classes,
                           .nclasses = n,
                           .control = {.rescue_after_ns = SCHED_FOREVER}};
        r = sched_new(&s, &cfg);
        if (r < 0)
                bench_die("sched_new: %s", strerror(-r));
        for (unsigned c = 0; c < n; c++) {
                SchedClassStats cs;
                hogs[c] = (Hog){.stop = &stop};
                if (is_duty && c == 1) {
                        hogs[c].t0 = bench_now_ns();
                        hogs[c].on_ns = 50 * NSEC_PER_MSEC;
                        hogs[c].period_ns = 100 * NSEC_PER_MSEC;
                }
                for (unsigned i = 0; i < FAIR_FIBERS; i++) {
                        FiberAttr a = {.group = sched_group_at(s, i % sched_groups(s)),
                                       .sched_class = c + 1};
                        r = fiber_create(&fs[c * FAIR_FIBERS + i], &a, hog, &hogs[c]);
                        if (r < 0)
                                bench_die("fiber_create: %s", strerror(-r));
                }
                sched_class_stats(s, c, &cs);
                before[c] = cs.runtime_ns;
        }
        usleep((useconds_t)(ms * 1000));
        for (unsigned c = 0; c < n; c++) {
                SchedClassStats cs;
                sched_class_stats(s, c, &cs);
                after[c] = cs.runtime_ns - before[c];
                total += after[c];
        }
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        for (unsigned i = 0; i < n * FAIR_FIBERS; i++)
                fiber_join(fs[i]);
        sched_free(s);
        if (!total)
                bench_die("control-fair: no class ran");
        double err = 0, d;
        char seen[128] = "";
        for (unsigned c = 0; c < n; c++) {
                double share = (double)after[c] / (double)total;
                d = (share - expect[c]) * 100;
                d = d < 0 ? -d : d;
                err = d > err ? d : err;
                snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), " %.1f", share * 100);
        }
        printf("%.2f%s\n", err, seen);
        return 0;
}

typedef struct Probe {
        uint64_t created_ns;
        uint64_t ran_ns;
        FiberEvent done;
} Probe;

static void probe(void *arg)
{
        Probe *p = arg;
        p->ran_ns = bench_now_ns();
        fiber_event_set(&p->done);
}

int bench_control_preempt(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 200);
        SchedGroupConfig cfg = {.workers = 1, .control = {.rescue_after_ns = SCHED_FOREVER}};
        SchedulingGroup *g;
        uint64_t *lat = calloc(n, sizeof(*lat));
        Probe *probes = calloc(n, sizeof(*probes)); /* outlive their fibers' last touch */
        int stop = 0, r;
        Hog h = {.stop = &stop};
        Fiber *f;

        if (!lat || !probes)
                bench_die("out of memory");
        r = sched_group_new(&g, &cfg);
        if (r < 0)
                bench_die("sched_group_new: %s", strerror(-r));
        FiberAttr a = {.group = g};
        if ((r = fiber_create(&f, &a, hog, &h)) < 0)
                bench_die("fiber_create: %s", strerror(-r));
        for (uint64_t i = 0; i < n; i++) {
                Probe *p = &probes[i];
                FiberAttr d = {.group = g, .detached = true};
                fiber_event_init(&p->done);
                usleep(1000 + (useconds_t)(i % 7) * 137); /* land anywhere in a quota */
                p->created_ns = bench_now_ns();
                if ((r = fiber_create(NULL, &d, probe, p)) < 0)
                        bench_die("fiber_create: %s", strerror(-r));
                if (fiber_event_wait(&p->done, sched_deadline_after(10 * NSEC_PER_SEC)) < 0)
                        bench_die("control-preempt: a fiber behind the hog never ran");
                lat[i] = p->ran_ns - p->created_ns;
        }
        __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
        fiber_join(f);
        sched_group_free(g);
        qsort(lat, n, sizeof(*lat), u64_compare);
        printf("%.1f %.1f\n", (double)lat[n / 2] / 1000, (double)lat[(n * 99) / 100] / 1000);
        free(lat);
        free(probes);
        return 0;
}
