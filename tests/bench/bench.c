/* SPDX-License-Identifier: MIT */
/*
 * bench.c — fiberd-bench's main: one subcommand per figure, and `table`, which runs
 * every figure and its peers and prints one markdown table of medians.
 *
 *   fiberd-bench <figure> [counts]     measure once, print the result line
 *   fiberd-bench table [--runs N] [--go PATH | --no-go] [--only a,b] [--smoke]
 *
 * Why the table is built this way:
 *  - Every measurement is a child process (fork + exec of this binary or of the Go
 *    peer), so memory figures start from a clean heap, a crash or a hang costs one row,
 *    not the table, and a hung child is killed at its time limit.
 *  - Runs are interleaved: round 1 of every figure and its peers, then round 2, ... so
 *    a burst of noise on a shared 2-core machine hits ours and the peer alike, and a
 *    row's ratio is the median of each round's ratio (row_ratio()), which holds even
 *    when absolute numbers wander, and when a VM's host moves its vCPUs between rounds.
 *  - Medians, not means: one descheduled run does not move them.
 *  - With guard regions (Linux >= 6.13) a fiber costs no memory map, so the
 *    1,000,000-fiber figures run at the kernel's default vm.max_map_count. With
 *    mprotect guards (older kernels, or FIBERD_STACK_GUARD=mprotect) a fiber costs two
 *    (scheduler/stack.c): a row that needs more than vm.max_map_count is skipped with
 *    the reason and the command to run; the table never changes the sysctl itself.
 *
 * `--smoke` uses tiny counts, one round and no Go: it proves that every figure still
 * runs (make bench-smoke), in a few seconds.
 *
 * The product rows (12-17) measure fiberd as a product: trivial jobs end to end through
 * its socket against beanstalkd and gearmand, each server started on loopback by its
 * generator (product.h), and skynet through `fiberctl submit --wait` against Go's
 * skynet. A peer whose server (beanstalkd, gearmand) or generator (fiberd-bench-gearman,
 * which needs libgearman-dev) is not installed is skipped with the reason; `make
 * deps-bench` installs them.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scheduler/base/macro.h"
#include "scheduler/sched.h"
#include "tests/bench/bench.h"
#include "tests/bench/product.h"

/* ------------------------------------------------------------------ helpers ------- */

size_t bench_fibers_cap(size_t live)
{
        size_t cap = 16384;

        while (cap < live)
                cap <<= 1;
        return cap;
}

unsigned long bench_maps_needed(size_t max_fibers, unsigned groups)
{
        size_t per_fiber = sched_stack_maps_per_fiber();

        return per_fiber ? per_fiber * max_fibers * groups + 4096 : 0;
}

/* ------------------------------------------------------------------ jobs ---------- */

/* fiberd-bench-gearman, the gearmand generator: beside this binary. */
static char bench_gearman_path[4096];

#define MAX_RUNS 15

/* One measurement repeated over the rounds: a figure of ours or a peer. */
typedef struct Job {
        const char *figure; /* group name for --only: yield, create, ... */
        const char *also;   /* a second --only name that selects it, or NULL */
        const char *label;  /* for progress lines */
        bool go;            /* run the Go peer binary instead of ourselves */
        bool gearman;       /* run fiberd-bench-gearman (beside this binary) instead */
        bool go_self;       /* with go: run ourselves, which runs the Go peer (hooks-go) */
        const char *cmd;    /* subcommand */
        char args[4][24];   /* counts, "" when absent */
        unsigned runs;      /* rounds it takes part in */
        unsigned values;    /* numbers per result line: 1 to 3 (lateness: 2, rate: 3) */
        size_t max_fibers;  /* the cap it asks sched_group_new for; 0: no fibers */
        unsigned groups;    /* scheduling groups with that cap (0 = 1) */
        unsigned timeout_s; /* kill after this long */
        double v[3][MAX_RUNS];
        unsigned ok;     /* runs that produced numbers */
        unsigned failed; /* runs that crashed, hung or failed */
        char skip[200];  /* non-empty: not run, and why */
        char why[300];   /* first failure, for the table */
} Job;

enum {
        J_YIELD,
        J_YIELD_CLASSES,
        J_FLOOR,
        J_UCONTEXT,
        J_GO_YIELD,
        J_C2C, /* before the cross-core rows of each round: the host's placement then */
        J_WAKE,
        J_CREATE,
        J_CREATE_LATCH,
        J_GO_CREATE,
        J_PTHREAD,
        J_SKYNET,
        J_SKYNET_LOCAL,
        J_GO_SKYNET,
        J_PINGPONG,
        J_PINGPONG_LOCAL,
        J_GO_PINGPONG,
        J_SLEEPERS,
        J_GO_SLEEPERS,
        J_IDLE,
        J_LATENESS,
        J_GO_LATENESS,
        J_SKY_S1, /* multi-group figures (bench-sched.c) */
        J_SKY_L1,
        J_SKY_S2,
        J_SKY_L2,
        J_CR_S1,
        J_CR_L1,
        J_CR_S2,
        J_CR_L2,
        J_FAN_S,
        J_FAN_L,
        J_IMB_BAL,
        J_IMB_STEAL,
        J_IMB_NOSTEAL,
        J_CHAN_PP0, /* channels and futures (bench-chan.c) */
        J_GO_CHAN_PP0,
        J_CHAN_PP1,
        J_GO_CHAN_PP1,
        J_FUT_FAN,
        J_GO_FAN,
        J_HK_SLEEP_S, /* hooks (bench-hooks.c): 200 jobs, each one 100 ms call */
        J_HK_USLEEP_S,
        J_HK_POLL_S,
        J_HK_READ_S,
        J_HK_GO_NANO_S,
        J_HK_GO_POLL_S,
        J_HK_GO_READ_S,
        J_HK_SLEEP_L, /* the same, 10,000 jobs */
        J_HK_USLEEP_L,
        J_HK_POLL_L,
        J_HK_READ_L,
        J_HK_GO_NANO_L,
        J_HK_GO_POLL_L,
        J_HK_GO_READ_L,
        J_HK_CURL,
        J_HK_GO_HTTP,
        J_HK_COST_T, /* hooked and real in one process: 2 numbers */
        J_HK_COST_F,
        J_P_FIBERD_1, /* product rows (bench-product.c, peers/) */
        J_P_BEAN_1,
        J_P_GEAR_1,
        J_P_FIBERD_8,
        J_P_BEAN_8,
        J_P_GEAR_8,
        J_P_FIBERD_RATE,
        J_P_BEAN_RATE,
        J_P_GEAR_RATE,
        J_P_GEARP_8, /* gearmand with pipelining workers and clients (peers/gearman-pipe.c) */
        J_P_FIBERD_RSS,
        J_P_FIBERD_SQL_8,      /* job store: fiberd with the sqlite store (the */
        J_P_BEANB_8,           /* default; the rows above: memory), beanstalkd with its */
        J_P_FIBERD_SQL_RATE,   /* binlog (-b, -f0), the sqlite store at 1,000 jobs/s */
        J_P_FIBERD_REDIS_8,    /* fleet mode: the redis store, 1 and 2 fiberd */
        J_P_FIBERD_REDIS2_8,   /* hosts on one private redis-server, 8 connections and */
        J_P_FIBERD_REDIS_RATE, /* at 1,000 jobs/s */
        J_P_FIBERD_REDIS2_RATE,
        J_P_DUE,       /* job scheduling: due jobs' lateness and memory, fiberd */
        J_P_BEAN_DUE,  /* and beanstalkd's delayed jobs */
        J_P_ATT_8,     /* trivial jobs with max_attempts 3, memory store */
        J_P_AFTER_8,   /* trivial jobs after one done job, memory store */
        J_P_SQL_ATT_8, /* the same two with the sqlite store */
        J_P_SQL_AFTER_8,
        J_P_DUE_R1, /* due jobs in fleet mode: 1 and 2 hosts */
        J_P_DUE_R2,
        J_P_R_ATT_8, /* max_attempts and after in fleet mode, 1 host */
        J_P_R_AFTER_8,
        J_P_WHOLE_8, /* row 12 answered with the whole record (no fields) */
        J_P_SKYNET,
        J_P_GO_SKYNET,
        J_CTL_FAIR1, /* CPU control (bench-control.c) */
        J_CTL_FAIR2,
        J_CTL_DUTY,
        J_CTL_PREEMPT,
        J_P_PREEMPT,
        J_HASH_FIBERD, /* row 27: hashing a tree (bench-hash.c) */
        J_HASH_XARGS,
        J_COUNT
};

/* How a row judges ours against its peer. */
typedef enum Cmp {
        CMP_FLOOR,  /* ours / peer <= target ("x the floor") */
        CMP_FASTER, /* peer / ours >= target ("x faster") */
        CMP_SCALE,  /* peer / ours shown, no target */
        CMP_MEMORY, /* ours / peer <= target ("x Go") */
        CMP_LIMIT,  /* ours <= target, no peer */
        CMP_INFO,   /* numbers only */
        CMP_TIMES,  /* ours / peer shown; <= target when target > 0 */
        CMP_RATE,   /* ours / peer >= target (throughput: higher is better) */
        CMP_DIFF,   /* ours - peer <= target when target > 0 ("+x ns") */
        CMP_ROUNDS, /* numbers only, each round's shown after the median */
} Cmp;

typedef struct Row {
        const char *figure;
        int ours, peer; /* job indexes; peer -1 for none, ours: the next number of its line */
        int value;      /* which number of the result line */
        const char *unit;
        const char *peer_name;
        Cmp cmp;
        double target;
        const char *target_text;
} Row;

static const Row rows[] = {
        {"0. a cache line's round trip between the two CPUs, each round (ns; on a VM, the host's "
         "placement of the vCPUs: it moves the cross-core rows, see \"Two regimes\")",
         J_C2C, -1, 0, "ns", NULL, CMP_ROUNDS, 0, "(the machine)"},
        {"0b. a futex wake of a sleeping thread on the other CPU: the waker's CPU time (us; "
         "on a VM, an IPI that exits to the host: every cross-thread wake-up pays it)",
         J_WAKE, -1, 0, "us", NULL, CMP_ROUNDS, 0, "(the machine)"},
        {"1. yield, 2 fibers on 1 worker (ns/switch)", J_YIELD, J_FLOOR, 0, "ns",
         "bare context_switch", CMP_FLOOR, 2.5, "<= 2.5x floor"},
        {"1. yield, 2 fibers on 1 worker (ns/switch)", J_YIELD, J_UCONTEXT, 0, "ns",
         "ucontext swapcontext", CMP_SCALE, 0, "(scale)"},
        {"1. yield, 2 fibers on 1 worker (ns/switch)", J_YIELD, J_GO_YIELD, 0, "ns",
         "Go Gosched, GOMAXPROCS=1", CMP_FASTER, 3, ">= 3x faster"},
        {"1c. the same on a group with job classes (default 100, batch 50 shares; ns/switch)",
         J_YIELD_CLASSES, J_FLOOR, 0, "ns", "bare context_switch", CMP_FLOOR, 2.5, "<= 2.5x floor"},
        {"2. create+start 1M fibers from a fiber, then join each handle, 2 workers (ns/fiber)",
         J_CREATE, J_GO_CREATE, 0, "ns", "Go goroutine + WaitGroup", CMP_FASTER, 1, "<= Go"},
        {"2. create+start 1M fibers from a fiber, then join each handle, 2 workers (ns/fiber)",
         J_CREATE, J_PTHREAD, 0, "ns", "pthread_create+join (20k)", CMP_SCALE, 0, "(scale)"},
        {"2b. same, detached + FiberLatch (Go's WaitGroup shape) (ns/fiber)", J_CREATE_LATCH,
         J_GO_CREATE, 0, "ns", "Go goroutine + WaitGroup", CMP_FASTER, 2, ">= 2x faster"},
        {"3. skynet, 1M leaves, 2 workers, local deques (ms)", J_SKYNET_LOCAL, J_GO_SKYNET, 0, "ms",
         "Go skynet (channels)", CMP_FASTER, 2, ">= 2x faster"},
        {"3b. skynet, 1M leaves, 2 workers, shared queue (ms)", J_SKYNET, J_GO_SKYNET, 0, "ms",
         "Go skynet (channels)", CMP_FASTER, 2, ">= 2x faster"},
        {"4. ping-pong via FiberSemaphore, 2 workers (ns/round trip)", J_PINGPONG, J_GO_PINGPONG, 0,
         "ns", "Go unbuffered chan, GOMAXPROCS=2", CMP_FASTER, 1, "<= Go"},
        {"4b. same, local deques: the woken fiber goes to its waker's runnext, as in Go (ns/round "
         "trip)",
         J_PINGPONG_LOCAL, J_GO_PINGPONG, 0, "ns", "Go unbuffered chan, GOMAXPROCS=2", CMP_FASTER,
         1, "<= Go"},
        {"5. 1M sleeping fibers, resident bytes per fiber", J_SLEEPERS, J_GO_SLEEPERS, 0, "B",
         "Go 1M goroutines in time.Sleep", CMP_MEMORY, 2, "<= 2x Go"},
        {"6. idle group, 2 workers, CPU over 10 s (% of a core)", J_IDLE, -1, 0, "%", NULL,
         CMP_LIMIT, 0.1, "<= 0.1%"},
        {"7. sleep_for(1 ms) lateness p50, 100 fibers (µs)", J_LATENESS, J_GO_LATENESS, 0, "µs",
         "Go time.Sleep", CMP_INFO, 0, "(measured)"},
        {"7. sleep_for(1 ms) lateness p99, 100 fibers (µs)", J_LATENESS, J_GO_LATENESS, 1, "µs",
         "Go time.Sleep", CMP_FASTER, 1, "<= Go"},
        {"8. skynet 100k, local vs shared queues, 1 group of 2 (ms)", J_SKY_L1, J_SKY_S1, 0, "ms",
         "shared queue", CMP_SCALE, 0, "(trade-off)"},
        {"8. skynet 100k, local vs shared queues, 2 groups of 1 (ms)", J_SKY_L2, J_SKY_S2, 0, "ms",
         "shared queue", CMP_SCALE, 0, "(trade-off)"},
        {"8. skynet 100k, local queues: 2 groups of 1 vs 1 group of 2 (ms)", J_SKY_L2, J_SKY_L1, 0,
         "ms", "1 group of 2", CMP_SCALE, 0, "(trade-off)"},
        {"9. create 1M + latch, local vs shared, 1 group of 2 (ns/fiber)", J_CR_L1, J_CR_S1, 0,
         "ns", "shared queue", CMP_SCALE, 0, "(trade-off)"},
        {"9. create 1M + latch, local vs shared, 2 groups of 1 (ns/fiber)", J_CR_L2, J_CR_S2, 0,
         "ns", "shared queue", CMP_SCALE, 0, "(trade-off)"},
        {"10. fan-out: spawn 1,000 and join, local vs shared (µs)", J_FAN_L, J_FAN_S, 0, "µs",
         "shared queue", CMP_SCALE, 0, "(trade-off)"},
        {"11. imbalance, all work into 1 of 2 groups, stealing on (ms)", J_IMB_STEAL, J_IMB_BAL, 0,
         "ms", "balanced run", CMP_TIMES, 1.3, "<= 1.3x balanced"},
        {"11. imbalance, all work into 1 of 2 groups, stealing off (ms)", J_IMB_NOSTEAL, J_IMB_BAL,
         0, "ms", "balanced run", CMP_TIMES, 0, "(the cost)"},
        {"12. trivial jobs end to end, 1 connection, 64 outstanding (jobs/s)", J_P_FIBERD_1,
         J_P_GEAR_1, 0, "/s", "gearmand -t 1", CMP_RATE, 1, ">= gearmand"},
        {"12. trivial jobs end to end, 1 connection, 64 outstanding (jobs/s)", J_P_FIBERD_1,
         J_P_BEAN_1, 0, "/s", "beanstalkd", CMP_RATE, 3, ">= 3x beanstalkd"},
        {"12. trivial jobs end to end, 8 connections, 64 outstanding each (jobs/s)", J_P_FIBERD_8,
         J_P_GEAR_8, 0, "/s", "gearmand -t 1", CMP_RATE, 1, ">= gearmand"},
        {"12. trivial jobs end to end, 8 connections, 64 outstanding each (jobs/s)", J_P_FIBERD_8,
         J_P_BEAN_8, 0, "/s", "beanstalkd", CMP_RATE, 3, ">= 3x beanstalkd"},
        {"12. the same, 8 connections: answered with the whole record vs the keys read (fields) "
         "(jobs/s)",
         J_P_WHOLE_8, J_P_FIBERD_8, 0, "/s", "fields: id, state, result, error", CMP_RATE, 0,
         "(the cost)"},
        {"13. the same: server CPU per 1,000 jobs, the whole record vs fields (ms)", J_P_WHOLE_8,
         J_P_FIBERD_8, 1, "ms", "fields", CMP_TIMES, 0, "(the cost)"},
        {"12. the same, 8 connections: the sqlite job store vs the memory store (jobs/s)",
         J_P_FIBERD_SQL_8, J_P_FIBERD_8, 0, "/s", "memory store", CMP_RATE, 0.8, ">= 0.8x memory"},
        {"12. the same, 8 connections: the sqlite job store vs beanstalkd -b -f0 (jobs/s)",
         J_P_FIBERD_SQL_8, J_P_BEANB_8, 0, "/s", "beanstalkd binlog", CMP_RATE, 1,
         ">= beanstalkd binlog"},
        {"12g. trivial jobs, 8 connections × 64 outstanding, pipelined gearmand workers (jobs/s)",
         J_P_FIBERD_8, J_P_GEARP_8, 0, "/s", "gearmand -t 1, pipelined", CMP_RATE, 1,
         ">= gearmand"},
        {"13g. server CPU per 1,000 trivial jobs (ms)", J_P_FIBERD_8, J_P_GEARP_8, 1, "ms",
         "gearmand -t 1, pipelined", CMP_TIMES, 1, "<= gearmand"},
        {"13. server CPU per 1,000 trivial jobs, 8 connections (ms)", J_P_FIBERD_8, J_P_GEAR_8, 1,
         "ms", "gearmand -t 1", CMP_TIMES, 1, "<= gearmand"},
        {"13. server CPU per 1,000 trivial jobs, 8 connections (ms)", J_P_FIBERD_8, J_P_BEAN_8, 1,
         "ms", "beanstalkd", CMP_TIMES, 0, "(scale)"},
        {"14. latency at an offered 1,000 jobs/s, p50 (µs)", J_P_FIBERD_RATE, J_P_BEAN_RATE, 0,
         "µs", "beanstalkd", CMP_TIMES, 1, "<= beanstalkd"},
        {"14. latency at an offered 1,000 jobs/s, p50 (µs)", J_P_FIBERD_RATE, J_P_GEAR_RATE, 0,
         "µs", "gearmand -t 1", CMP_TIMES, 0, "(scale)"},
        {"14. latency at an offered 1,000 jobs/s, p99 (µs)", J_P_FIBERD_RATE, J_P_BEAN_RATE, 1,
         "µs", "beanstalkd", CMP_LIMIT, 1000, "<= 1 ms"},
        {"14. latency at 1,000 jobs/s, p50: the fsync of the sqlite store vs memory (µs)",
         J_P_FIBERD_SQL_RATE, J_P_FIBERD_RATE, 0, "µs", "memory store", CMP_TIMES, 0, "(the cost)"},
        {"14. latency at 1,000 jobs/s, p99: the sqlite store vs memory (µs)", J_P_FIBERD_SQL_RATE,
         J_P_FIBERD_RATE, 1, "µs", "memory store", CMP_TIMES, 0, "(the cost)"},
        {"12r. the same, 8 connections: the redis store, 1 fiberd host vs memory (jobs/s)",
         J_P_FIBERD_REDIS_8, J_P_FIBERD_8, 0, "/s", "memory store", CMP_RATE, 0.5,
         ">= 0.5x memory"},
        {"12r. the same, 8 connections: the redis store, 2 fiberd hosts vs 1 (jobs/s)",
         J_P_FIBERD_REDIS2_8, J_P_FIBERD_REDIS_8, 0, "/s", "1 host", CMP_RATE, 0, "(scale)"},
        {"14r. latency at 1,000 jobs/s, p50: the redis store, 1 fiberd host vs memory (µs)",
         J_P_FIBERD_REDIS_RATE, J_P_FIBERD_RATE, 0, "µs", "memory store", CMP_TIMES, 0,
         "(the cost)"},
        {"14r. latency at 1,000 jobs/s, p99: the redis store, 1 fiberd host vs memory (µs)",
         J_P_FIBERD_REDIS_RATE, J_P_FIBERD_RATE, 1, "µs", "memory store", CMP_TIMES, 0,
         "(the cost)"},
        {"14r. latency at 1,000 jobs/s, p50: the redis store, 2 fiberd hosts vs 1 (µs)",
         J_P_FIBERD_REDIS2_RATE, J_P_FIBERD_REDIS_RATE, 0, "µs", "1 host", CMP_TIMES, 0, "(scale)"},
        {"14r. latency at 1,000 jobs/s, p99: the redis store, 2 fiberd hosts vs 1 (µs)",
         J_P_FIBERD_REDIS2_RATE, J_P_FIBERD_REDIS_RATE, 1, "µs", "1 host", CMP_TIMES, 0, "(scale)"},
        {"15. server CPU at an offered 1,000 jobs/s (ms per s)", J_P_FIBERD_RATE, J_P_BEAN_RATE, 2,
         "ms", "beanstalkd", CMP_TIMES, 2, "<= 2x beanstalkd"},
        {"15r. the same, the redis store, 1 fiberd host: fiberd and redis-server (ms per s)",
         J_P_FIBERD_REDIS_RATE, J_P_FIBERD_RATE, 2, "ms", "memory store", CMP_TIMES, 2,
         "<= 2x memory"},
        {"16. fiberd RSS after 1,000,000 trivial jobs, default retention (MiB)", J_P_FIBERD_RSS, -1,
         0, "MiB", NULL, CMP_LIMIT, 100, "<= 100 MiB"},
        {"17. skynet 1M through fiberd, fiberctl submit --wait (ms)", J_P_SKYNET, J_P_GO_SKYNET, 0,
         "ms", "Go skynet (channels)", CMP_FASTER, 2, ">= 2x faster"},
        {"18. class shares 100:20:50, CPU-bound fibers, 1 group of 2 workers, 10 s (largest "
         "error, percentage points; seastar's demo: 0.3 on one core)",
         J_CTL_FAIR1, -1, 0, "pp", NULL, CMP_LIMIT, 2, "<= 2 pp"},
        {"18. the same on 2 groups of 1 worker (pp)", J_CTL_FAIR2, -1, 0, "pp", NULL, CMP_LIMIT, 2,
         "<= 2 pp"},
        {"18. shares 50:100, the 100 busy half the time (seed 002's 2:1 case; pp)", J_CTL_DUTY, -1,
         0, "pp", NULL, CMP_LIMIT, 2, "<= 2 pp"},
        {"19. a fiber behind a CPU-bound one on 1 worker, made ready to running, p50 (µs)",
         J_CTL_PREEMPT, -1, 0, "µs", NULL, CMP_LIMIT, 2000, "<= 4 task quotas"},
        {"19. the same, p99 (µs)", J_CTL_PREEMPT, -1, 1, "µs", NULL, CMP_LIMIT, 2000,
         "<= 4 task quotas"},
        {"19b. through fiberd: job.run sleep ms=0 while two spin jobs hold its 1 job worker, "
         "p50 (µs)",
         J_P_PREEMPT, -1, 0, "µs", NULL, CMP_LIMIT, 2000, "<= 4 task quotas"},
        {"19b. the same, p99 (µs; the client, server worker and reactor share the other core)",
         J_P_PREEMPT, -1, 1, "µs", NULL, CMP_INFO, 0, "(measured)"},
        {"20. ping-pong over two unbuffered FiberChans, 2 workers (ns/round trip)", J_CHAN_PP0,
         J_GO_CHAN_PP0, 0, "ns", "Go unbuffered chan, GOMAXPROCS=2", CMP_TIMES, 0, "(measured)"},
        {"20. ping-pong over two FiberChans of capacity 1, 2 workers (ns/round trip)", J_CHAN_PP1,
         J_GO_CHAN_PP1, 0, "ns", "Go chan of capacity 1, GOMAXPROCS=2", CMP_TIMES, 0, "(measured)"},
        {"21. fan-out: fiber_async 10,000 futures, when_all, 2 workers (ns/future)", J_FUT_FAN,
         J_GO_FAN, 0, "ns", "Go goroutines + WaitGroup", CMP_TIMES, 0, "(measured)"},
        {"22. 200 jobs through fiberd's socket, each one 100 ms call, 2 job workers, all "
         "submitted then all waited for: the bundled sleep plugin (host->sleep_until) (ms)",
         J_HK_SLEEP_S, J_HK_GO_NANO_S, 0, "ms", "Go syscall.Nanosleep", CMP_TIMES, 0,
         "(the floor)"},
        {"22. 200 jobs, plain usleep(100 ms) (ms)", J_HK_USLEEP_S, J_HK_SLEEP_S, 0, "ms",
         "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 200 jobs, plain usleep(100 ms) (ms)", J_HK_USLEEP_S, J_HK_GO_NANO_S, 0, "ms",
         "Go syscall.Nanosleep", CMP_TIMES, 1, "<= Go"},
        {"22. 200 jobs, usleep: peak threads of the process", J_HK_USLEEP_S, J_HK_GO_NANO_S, 1,
         "threads", "Go syscall.Nanosleep", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 200 jobs, usleep: threads the idle daemon did not have", J_HK_USLEEP_S, -1, 2,
         "threads", NULL, CMP_LIMIT, 4, "<= +4"},
        {"22. 200 jobs, plain poll(NULL, 0, 100) (ms)", J_HK_POLL_S, J_HK_SLEEP_S, 0, "ms",
         "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 200 jobs, plain poll(NULL, 0, 100) (ms)", J_HK_POLL_S, J_HK_GO_POLL_S, 0, "ms",
         "Go poll(2) syscall", CMP_TIMES, 1, "<= Go"},
        {"22. 200 jobs, poll: peak threads of the process", J_HK_POLL_S, J_HK_GO_POLL_S, 1,
         "threads", "Go poll(2) syscall", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 200 jobs, poll: threads the idle daemon did not have", J_HK_POLL_S, -1, 2, "threads",
         NULL, CMP_LIMIT, 4, "<= +4"},
        {"22. 200 jobs, plain connect + blocking read(), slow Unix server (ms)", J_HK_READ_S,
         J_HK_SLEEP_S, 0, "ms", "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 200 jobs, plain connect + blocking read(), slow Unix server (ms)", J_HK_READ_S,
         J_HK_GO_READ_S, 0, "ms", "Go read(2), blocking socket", CMP_TIMES, 1, "<= Go"},
        {"22. 200 jobs, read: peak threads of the process", J_HK_READ_S, J_HK_GO_READ_S, 1,
         "threads", "Go read(2), blocking socket", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 200 jobs, read: threads the idle daemon did not have", J_HK_READ_S, -1, 2, "threads",
         NULL, CMP_LIMIT, 4, "<= +4"},
        {"22. 10,000 jobs through fiberd's socket, each one 100 ms call, 2 job workers, all "
         "submitted then all waited for: the bundled sleep plugin (host->sleep_until) (ms)",
         J_HK_SLEEP_L, J_HK_GO_NANO_L, 0, "ms", "Go syscall.Nanosleep", CMP_TIMES, 0,
         "(the floor)"},
        {"22. 10,000 jobs, plain usleep(100 ms) (ms)", J_HK_USLEEP_L, J_HK_SLEEP_L, 0, "ms",
         "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 10,000 jobs, plain usleep(100 ms) (ms)", J_HK_USLEEP_L, J_HK_GO_NANO_L, 0, "ms",
         "Go syscall.Nanosleep", CMP_TIMES, 1, "<= Go"},
        {"22. 10,000 jobs, usleep: peak threads of the process", J_HK_USLEEP_L, J_HK_GO_NANO_L, 1,
         "threads", "Go syscall.Nanosleep", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 10,000 jobs, usleep: threads the idle daemon did not have", J_HK_USLEEP_L, -1, 2,
         "threads", NULL, CMP_LIMIT, 4, "<= +4"},
        {"22. 10,000 jobs, plain poll(NULL, 0, 100) (ms)", J_HK_POLL_L, J_HK_SLEEP_L, 0, "ms",
         "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 10,000 jobs, plain poll(NULL, 0, 100) (ms)", J_HK_POLL_L, J_HK_GO_POLL_L, 0, "ms",
         "Go poll(2) syscall", CMP_TIMES, 1, "<= Go"},
        {"22. 10,000 jobs, poll: peak threads of the process", J_HK_POLL_L, J_HK_GO_POLL_L, 1,
         "threads", "Go poll(2) syscall", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 10,000 jobs, poll: threads the idle daemon did not have", J_HK_POLL_L, -1, 2,
         "threads", NULL, CMP_LIMIT, 4, "<= +4"},
        {"22. 10,000 jobs, plain connect + blocking read(), slow Unix server (ms)", J_HK_READ_L,
         J_HK_SLEEP_L, 0, "ms", "sleep plugin", CMP_FLOOR, 1.2, "<= 1.2x floor"},
        {"22. 10,000 jobs, plain connect + blocking read(), slow Unix server (ms)", J_HK_READ_L,
         J_HK_GO_READ_L, 0, "ms", "Go read(2), blocking socket", CMP_TIMES, 1, "<= Go"},
        {"22. 10,000 jobs, read: peak threads of the process", J_HK_READ_L, J_HK_GO_READ_L, 1,
         "threads", "Go read(2), blocking socket", CMP_LIMIT, 6, "<= workers + 4"},
        {"22. 10,000 jobs, read: threads the idle daemon did not have", J_HK_READ_L, -1, 2,
         "threads", NULL, CMP_LIMIT, 4, "<= +4"},
        {"23. 2,000 HTTP fetches, server answers after 50 ms: libcurl in curl_fetch jobs (ms)",
         J_HK_CURL, J_HK_GO_HTTP, 0, "ms", "Go net/http, 2,000 goroutines", CMP_TIMES, 1, "<= Go"},
        {"23. the same: peak threads of the process", J_HK_CURL, J_HK_GO_HTTP, 1, "threads",
         "Go net/http", CMP_LIMIT, 6, "<= workers + 4"},
        {"23. the same: threads the idle daemon did not have", J_HK_CURL, -1, 2, "threads", NULL,
         CMP_LIMIT, 4, "<= +4"},
        {"24. poll(fd, 1, 1000) of a ready pipe from a plain thread of a binary with the hooks "
         "(ns/call)",
         J_HK_COST_T, J_HK_COST_T, 0, "ns", "the C library's poll()", CMP_DIFF, 5, "<= +5 ns"},
        {"24. the same on a fiber of a hook_blocking_calls group, nothing to park (ns/call)",
         J_HK_COST_F, J_HK_COST_F, 0, "ns", "the C library's poll()", CMP_DIFF, 0, "(measured)"},
        {"25. due jobs: lateness p50, 1M scheduled over the next hour, 10,000/s coming due (ms)",
         J_P_DUE, J_P_BEAN_DUE, 0, "ms", "beanstalkd delayed jobs", CMP_TIMES, 0, "(measured)"},
        {"25. the same: lateness p99 (ms)", J_P_DUE, J_P_BEAN_DUE, 1, "ms",
         "beanstalkd delayed jobs", CMP_TIMES, 0, "(measured)"},
        {"25. the same: resident bytes per scheduled job", J_P_DUE, J_P_BEAN_DUE, 2, "B",
         "beanstalkd delayed jobs", CMP_TIMES, 0, "(measured)"},
        {"26. trivial jobs with max_attempts 3 (never needed), 8 connections (jobs/s)", J_P_ATT_8,
         J_P_FIBERD_8, 0, "/s", "plain submission", CMP_TIMES, 0, "(measured)"},
        {"26. trivial jobs after one done job, 8 connections (jobs/s)", J_P_AFTER_8, J_P_FIBERD_8,
         0, "/s", "plain submission", CMP_TIMES, 0, "(measured)"},
        {"26. the same with the sqlite store: max_attempts 3 (jobs/s)", J_P_SQL_ATT_8,
         J_P_FIBERD_SQL_8, 0, "/s", "plain submission, sqlite", CMP_TIMES, 0, "(measured)"},
        {"26. the same with the sqlite store: after one done job (jobs/s)", J_P_SQL_AFTER_8,
         J_P_FIBERD_SQL_8, 0, "/s", "plain submission, sqlite", CMP_TIMES, 0, "(measured)"},
        {"25r. due jobs in fleet mode, 1 host, 100k scheduled: lateness p50 (ms)", J_P_DUE_R1,
         J_P_DUE, 0, "ms", "memory store, 1M", CMP_TIMES, 0, "(measured)"},
        {"25r. the same: lateness p99 (ms)", J_P_DUE_R1, J_P_DUE, 1, "ms", "memory store, 1M",
         CMP_TIMES, 0, "(measured)"},
        {"25r. the same: redis-server's resident bytes per scheduled job", J_P_DUE_R1, J_P_DUE, 2,
         "B", "fiberd's, memory store", CMP_TIMES, 0, "(measured)"},
        {"25r. due jobs in fleet mode, 2 hosts: lateness p50 (ms)", J_P_DUE_R2, J_P_DUE_R1, 0, "ms",
         "1 host", CMP_TIMES, 0, "(measured)"},
        {"25r. the same, 2 hosts: lateness p99 (ms)", J_P_DUE_R2, J_P_DUE_R1, 1, "ms", "1 host",
         CMP_TIMES, 0, "(measured)"},
        {"26r. fleet mode, 1 host: max_attempts 3 (jobs/s)", J_P_R_ATT_8, J_P_FIBERD_REDIS_8, 0,
         "/s", "plain submission, redis", CMP_TIMES, 0, "(measured)"},
        {"26r. fleet mode, 1 host: after one done job (jobs/s)", J_P_R_AFTER_8, J_P_FIBERD_REDIS_8,
         0, "/s", "plain submission, redis", CMP_TIMES, 0, "(measured)"},
        {"27. hash a tree (/usr/include): fiberd demo path vs xargs -P$(nproc) sha256sum (MB/s)",
         J_HASH_FIBERD, J_HASH_XARGS, 0, "MB/s", "xargs -P sha256sum", CMP_RATE, 1, ">= xargs"},
        {"27. the same: wall time (s)", J_HASH_FIBERD, J_HASH_XARGS, 1, "s", "xargs -P sha256sum",
         CMP_TIMES, 0, "(measured)"},
        {"27. the same: CPU time, client + fiberd or xargs + sha256sum (s)", J_HASH_FIBERD,
         J_HASH_XARGS, 2, "s", "xargs -P sha256sum", CMP_TIMES, 0, "(measured)"},
};

typedef struct Options {
        unsigned runs;
        const char *go;   /* Go peer binary, NULL when --no-go */
        const char *only; /* comma-separated figure names, NULL for all */
        bool smoke;
} Options;

static void job_set(Job *j, const char *figure, const char *label, bool go, const char *cmd,
                    unsigned runs, const char *a0, const char *a1)
{
        memset(j, 0, sizeof(*j));
        j->figure = figure;
        j->label = label;
        j->go = go;
        j->cmd = cmd;
        snprintf(j->args[0], sizeof(j->args[0]), "%s", a0 ? a0 : "");
        snprintf(j->args[1], sizeof(j->args[1]), "%s", a1 ? a1 : "");
        j->args[2][0] = j->args[3][0] = '\0';
        j->runs = runs < MAX_RUNS ? runs : MAX_RUNS;
        j->values = 1;
        j->timeout_s = 180;
}

/*
 * The product rows' jobs: "tput N C W", "rate N RATE", "rss N C W" (product.h) for
 * fiberd, beanstalkd and gearmand alike. Full sizes: 200,000 jobs with 64 outstanding
 * per connection (the figures), 5,000 jobs offered at 1,000/s, 1,000,000 jobs for
 * the RSS (one run: a minute or more today), skynet 1M; smoke sizes take milliseconds.
 */
static void product_jobs_setup(Job *jobs, const Options *o)
{
        static const struct {
                int job;
                const char *figure, *label, *cmd, *mode;
                unsigned conns;
                bool gearman;
        } p[] = {
                {J_P_FIBERD_1, "product-tput", "fiberd 1 conn", "product-fiberd", "tput", 1, 0},
                {J_P_BEAN_1, "product-tput", "beanstalkd 1 conn", "product-beanstalk", "tput", 1,
                 0},
                {J_P_GEAR_1, "product-tput", "gearmand 1 conn", "product-gearman", "tput", 1, 1},
                {J_P_FIBERD_8, "product-tput", "fiberd 8 conns", "product-fiberd", "tput", 8, 0},
                {J_P_BEAN_8, "product-tput", "beanstalkd 8 conns", "product-beanstalk", "tput", 8,
                 0},
                {J_P_GEAR_8, "product-tput", "gearmand 8 conns", "product-gearman", "tput", 8, 1},
                {J_P_GEARP_8, "product-tput", "gearmand pipelined 8 conns", "product-gearman-pipe",
                 "tput", 8, 0},
                {J_P_FIBERD_RATE, "product-rate", "fiberd 1k/s", "product-fiberd", "rate", 1, 0},
                {J_P_BEAN_RATE, "product-rate", "beanstalkd 1k/s", "product-beanstalk", "rate", 1,
                 0},
                {J_P_GEAR_RATE, "product-rate", "gearmand 1k/s", "product-gearman", "rate", 1, 1},
                {J_P_FIBERD_RSS, "product-rss", "fiberd RSS 1M", "product-fiberd", "rss", 8, 0},
                {J_P_FIBERD_SQL_8, "product-tput", "fiberd sqlite store 8 conns",
                 "product-fiberd-sqlite", "tput", 8, 0},
                {J_P_BEANB_8, "product-tput", "beanstalkd -b 8 conns", "product-beanstalk-binlog",
                 "tput", 8, 0},
                {J_P_FIBERD_SQL_RATE, "product-rate", "fiberd sqlite store 1k/s",
                 "product-fiberd-sqlite", "rate", 1, 0},
                {J_P_FIBERD_REDIS_8, "product-tput", "fiberd redis store 1 host 8 conns",
                 "product-fiberd-redis", "tput", 8, 0},
                {J_P_FIBERD_REDIS2_8, "product-tput", "fiberd redis store 2 hosts 8 conns",
                 "product-fiberd-redis2", "tput", 8, 0},
                {J_P_FIBERD_REDIS_RATE, "product-rate", "fiberd redis store 1 host 1k/s",
                 "product-fiberd-redis", "rate", 1, 0},
                {J_P_FIBERD_REDIS2_RATE, "product-rate", "fiberd redis store 2 hosts 1k/s",
                 "product-fiberd-redis2", "rate", 1, 0},
                {J_P_ATT_8, "product-sched", "fiberd max_attempts 3, 8 conns",
                 "product-fiberd-attempts", "tput", 8, 0},
                {J_P_AFTER_8, "product-sched", "fiberd after a done job, 8 conns",
                 "product-fiberd-after", "tput", 8, 0},
                {J_P_SQL_ATT_8, "product-sched", "fiberd sqlite max_attempts 3, 8 conns",
                 "product-fiberd-sqlite-attempts", "tput", 8, 0},
                {J_P_SQL_AFTER_8, "product-sched", "fiberd sqlite after a done job, 8 conns",
                 "product-fiberd-sqlite-after", "tput", 8, 0},
                {J_P_R_ATT_8, "product-sched", "fiberd redis max_attempts 3, 8 conns",
                 "product-fiberd-redis-attempts", "tput", 8, 0},
                {J_P_WHOLE_8, "product-tput", "fiberd 8 conns, whole record",
                 "product-fiberd-whole", "tput", 8, 0},
                {J_P_R_AFTER_8, "product-sched", "fiberd redis after a done job, 8 conns",
                 "product-fiberd-redis-after", "tput", 8, 0},
        };
        unsigned r = o->runs, few = r < 3 ? r : 3;
        bool s = o->smoke;

        for (size_t i = 0; i < ELEMENTSOF(p); i++) {
                Job *j = &jobs[p[i].job];
                bool rate = !strcmp(p[i].mode, "rate"), rss = !strcmp(p[i].mode, "rss");
                const char *n = rate  ? (s ? "50" : "5000")
                                : rss ? (s ? "2000" : "1000000")
                                      : (s ? (p[i].conns > 1 ? "400" : "200") : "200000");
                job_set(j, p[i].figure, p[i].label, false, p[i].cmd, rss ? 1 : r, p[i].mode, n);
                j->gearman = p[i].gearman;
                if (rate) {
                        snprintf(j->args[2], sizeof(j->args[2]), "1000");
                        j->values = 3;
                } else {
                        snprintf(j->args[2], sizeof(j->args[2]), "%u", p[i].conns);
                        snprintf(j->args[3], sizeof(j->args[3]), "%s", s ? "8" : "64");
                        j->values = rss ? 1 : 2;
                }
                if (rss)
                        j->timeout_s = 600;
        }
        /* due jobs: 1M scheduled over the next hour, 10,000 a second coming due for 5 s */
        job_set(&jobs[J_P_DUE], "product-sched", "fiberd due jobs", false, "product-due", few,
                s ? "2000" : "1000000", s ? "1000" : "10000");
        job_set(&jobs[J_P_BEAN_DUE], "product-sched", "beanstalkd delayed jobs", false,
                "product-beanstalk-due", few, s ? "2000" : "1000000", s ? "1000" : "10000");
        /* the same in fleet mode, 100,000 scheduled (a fleet submission is a round trip to
         * Redis: 1M would take minutes) */
        job_set(&jobs[J_P_DUE_R1], "product-sched", "fiberd due jobs, redis 1 host", false,
                "product-due-redis", few, s ? "2000" : "100000", s ? "1000" : "10000");
        job_set(&jobs[J_P_DUE_R2], "product-sched", "fiberd due jobs, redis 2 hosts", false,
                "product-due-redis2", few, s ? "2000" : "100000", s ? "1000" : "10000");
        for (int k = J_P_DUE; k <= J_P_DUE_R2; k++) {
                if (k > J_P_BEAN_DUE && k < J_P_DUE_R1)
                        continue;
                snprintf(jobs[k].args[2], sizeof(jobs[k].args[2]), "%s", s ? "1" : "5");
                jobs[k].values = 3;
                jobs[k].timeout_s = 300;
        }
        /* rows 12g/13g alone: BENCH_ONLY=product-gearpipe (the fiberd side of row 12 and
         * the pipelined gearmand) */
        jobs[J_P_FIBERD_8].also = jobs[J_P_GEARP_8].also = "product-gearpipe";
        /* row 27: the whole of /usr/include, 500 files of it in a smoke run */
        job_set(&jobs[J_HASH_FIBERD], "hash-tree", "fiberd hash tree", false, "hash-tree", r,
                "/usr/include", s ? "500" : NULL);
        job_set(&jobs[J_HASH_XARGS], "hash-tree", "xargs sha256sum", false, "hash-tree-xargs", r,
                "/usr/include", s ? "500" : NULL);
        jobs[J_HASH_FIBERD].values = jobs[J_HASH_XARGS].values = 3;
        job_set(&jobs[J_P_SKYNET], "product-skynet", "fiberd skynet job", false, "product-skynet",
                few, s ? "1000" : "1000000", NULL);
        jobs[J_P_SKYNET].timeout_s = 120;
        job_set(&jobs[J_P_GO_SKYNET], "product-skynet", "Go skynet", true, "skynet", few, NULL,
                NULL);
}

/* Skip the product rows whose server or generator is missing, with the reason. */
static void product_jobs_filter(Job *jobs)
{
        char path[512], why[200];
        bool fiberd = bench_product_fiberd_built(why, sizeof(why));
        bool bean = product_find_server("beanstalkd", path, sizeof(path));
        bool gear = product_find_server("gearmand", path, sizeof(path));
        bool redis = product_find_server("redis-server", path, sizeof(path));

        for (int i = J_HK_SLEEP_S; i <= J_HK_GO_HTTP; i++)
                if (!jobs[i].skip[0] && !jobs[i].go && !fiberd)
                        snprintf(jobs[i].skip, sizeof(jobs[i].skip), "%s", why);
        for (int i = J_P_FIBERD_1; i < J_COUNT; i++) {
                Job *j = &jobs[i];
                if (j->skip[0] || j->go)
                        continue;
                if (j->gearman && !gear)
                        snprintf(j->skip, sizeof(j->skip),
                                 "gearmand not installed (apt-get install gearman-job-server, or "
                                 "make deps-bench)");
                else if (j->gearman && access(bench_gearman_path, X_OK) < 0)
                        snprintf(j->skip, sizeof(j->skip),
                                 "fiberd-bench-gearman not built: libgearman-dev not installed "
                                 "(make deps-bench)");
                else if ((!strncmp(j->cmd, "product-fiberd-redis", 20) ||
                          !strncmp(j->cmd, "product-due-redis", 17)) &&
                         !redis)
                        snprintf(j->skip, sizeof(j->skip),
                                 "redis-server not installed (apt-get install redis-server, or "
                                 "make deps)");
                else if (!strcmp(j->cmd, "product-gearman-pipe") && !gear)
                        snprintf(j->skip, sizeof(j->skip),
                                 "gearmand not installed (apt-get install gearman-job-server, or "
                                 "make deps-bench)");
                else if (!strncmp(j->cmd, "product-beanstalk", 17) && !bean)
                        snprintf(j->skip, sizeof(j->skip),
                                 "beanstalkd not installed (apt-get install beanstalkd, or make "
                                 "deps-bench)");
                else if (!strncmp(j->cmd, "hash-tree", 9) && access("/usr/include", R_OK) < 0)
                        snprintf(j->skip, sizeof(j->skip), "no /usr/include to hash");
                else if (!strncmp(j->cmd, "product-f", 9) || !strcmp(j->cmd, "product-skynet") ||
                         !strcmp(j->cmd, "hash-tree") || !strcmp(j->cmd, "product-preempt") ||
                         !strncmp(j->cmd, "product-due", 11))
                        if (!fiberd)
                                snprintf(j->skip, sizeof(j->skip), "%s", why);
        }
}

/*
 * The hooks rows' jobs (bench-hooks.c): 200 and 10,000 jobs of one 100 ms call each, the
 * Go peers through `hooks-go` (which runs the slow server and samples Go's threads),
 * 2,000 fetches, 2,000,000 polls; smoke sizes take a few hundred milliseconds per run.
 */
static void hooks_jobs_setup(Job *jobs, const Options *o)
{
        static const struct {
                int job;
                const char *cmd, *call, *label;
                bool large, go;
        } h[] = {
                {J_HK_SLEEP_S, "hooks-fiberd", "sleep", "fiberd 200 sleep", 0, 0},
                {J_HK_USLEEP_S, "hooks-fiberd", "usleep", "fiberd 200 usleep", 0, 0},
                {J_HK_POLL_S, "hooks-fiberd", "poll", "fiberd 200 poll", 0, 0},
                {J_HK_READ_S, "hooks-fiberd", "read", "fiberd 200 read", 0, 0},
                {J_HK_GO_NANO_S, "hooks-go", "nanosleep", "Go 200 nanosleep", 0, 1},
                {J_HK_GO_POLL_S, "hooks-go", "poll", "Go 200 poll", 0, 1},
                {J_HK_GO_READ_S, "hooks-go", "read", "Go 200 read", 0, 1},
                {J_HK_SLEEP_L, "hooks-fiberd", "sleep", "fiberd 10k sleep", 1, 0},
                {J_HK_USLEEP_L, "hooks-fiberd", "usleep", "fiberd 10k usleep", 1, 0},
                {J_HK_POLL_L, "hooks-fiberd", "poll", "fiberd 10k poll", 1, 0},
                {J_HK_READ_L, "hooks-fiberd", "read", "fiberd 10k read", 1, 0},
                {J_HK_GO_NANO_L, "hooks-go", "nanosleep", "Go 10k nanosleep", 1, 1},
                {J_HK_GO_POLL_L, "hooks-go", "poll", "Go 10k poll", 1, 1},
                {J_HK_GO_READ_L, "hooks-go", "read", "Go 10k read", 1, 1},
        };
        unsigned r = o->runs;
        bool s = o->smoke;

        for (size_t i = 0; i < ELEMENTSOF(h); i++) {
                Job *j = &jobs[h[i].job];
                job_set(j, "hooks-block", h[i].label, h[i].go, h[i].cmd, r, h[i].call,
                        h[i].large ? (s ? "50" : "10000") : (s ? "20" : "200"));
                j->go_self = h[i].go;
                j->values = h[i].go ? 2 : 3;
                j->timeout_s = 120;
        }
        job_set(&jobs[J_HK_CURL], "hooks-curl", "fiberd 2k curl", false, "hooks-curl", r,
                s ? "20" : "2000", NULL);
        jobs[J_HK_CURL].values = 3;
        job_set(&jobs[J_HK_GO_HTTP], "hooks-curl", "Go 2k net/http", true, "hooks-go", r, "http",
                "2000");
        jobs[J_HK_GO_HTTP].go_self = true;
        jobs[J_HK_GO_HTTP].values = 2;
        job_set(&jobs[J_HK_COST_T], "hooks-cost", "poll, thread", false, "hook-cost", r, "thread",
                s ? "20000" : "2000000");
        jobs[J_HK_COST_T].values = 2;
        job_set(&jobs[J_HK_COST_F], "hooks-cost", "poll, fiber", false, "hook-cost", r, "fiber",
                s ? "20000" : "2000000");
        jobs[J_HK_COST_F].values = 2;
}

/* Fill @jobs with the counts of a full run or of a smoke run. */
static void jobs_setup(Job *jobs, const Options *o)
{
        unsigned r = o->runs, few = r < 3 ? r : 3;
        bool s = o->smoke;

        job_set(&jobs[J_YIELD], "yield", "fiberd yield", false, "yield", r, s ? "10000" : "2000000",
                NULL);
        job_set(&jobs[J_YIELD_CLASSES], "yield", "fiberd yield, classes", false, "yield", r,
                s ? "10000" : "2000000", "classes");
        job_set(&jobs[J_FLOOR], "yield", "bare switch", false, "floor", r, s ? "10000" : "5000000",
                NULL);
        job_set(&jobs[J_UCONTEXT], "yield", "ucontext", false, "ucontext", r,
                s ? "10000" : "1000000", NULL);
        job_set(&jobs[J_GO_YIELD], "yield", "Go Gosched", true, "yield", r, "1000000", NULL);
        job_set(&jobs[J_C2C], "create", "c2c round trip", false, "c2c", r, s ? "10000" : "1000000",
                NULL);
        job_set(&jobs[J_WAKE], "create", "futex wake", false, "wake", r, s ? "20" : "1000", NULL);
        job_set(&jobs[J_CREATE], "create", "fiberd create", false, "create", few,
                s ? "2000" : "1000000", "join");
        jobs[J_CREATE].max_fibers = bench_fibers_cap(s ? 2000 : 1000000);
        job_set(&jobs[J_CREATE_LATCH], "create", "fiberd create/latch", false, "create", r,
                s ? "2000" : "1000000", "latch");
        jobs[J_CREATE_LATCH].max_fibers = bench_fibers_cap(s ? 2000 : 1000000);
        job_set(&jobs[J_GO_CREATE], "create", "Go create", true, "create", r, "1000000", NULL);
        job_set(&jobs[J_PTHREAD], "create", "pthread create", false, "pthread", r,
                s ? "200" : "20000", NULL);
        job_set(&jobs[J_SKYNET], "skynet", "fiberd skynet", false, "skynet", few,
                s ? "1000" : "1000000", NULL);
        jobs[J_SKYNET].max_fibers = bench_fibers_cap(s ? 1125 : 1125000);
        jobs[J_SKYNET].timeout_s = 120;
        job_set(&jobs[J_SKYNET_LOCAL], "skynet", "fiberd skynet/local", false, "skynet", r,
                s ? "1000" : "1000000", "local");
        jobs[J_SKYNET_LOCAL].max_fibers = bench_fibers_cap(s ? 1125 : 1125000);
        job_set(&jobs[J_GO_SKYNET], "skynet", "Go skynet", true, "skynet", few, NULL, NULL);
        job_set(&jobs[J_PINGPONG], "pingpong", "fiberd ping-pong", false, "pingpong", r,
                s ? "2000" : "200000", NULL);
        job_set(&jobs[J_PINGPONG_LOCAL], "pingpong", "fiberd ping-pong/local", false, "pingpong", r,
                s ? "2000" : "200000", "local");
        job_set(&jobs[J_GO_PINGPONG], "pingpong", "Go ping-pong", true, "pingpong", r, "200000",
                NULL);
        job_set(&jobs[J_SLEEPERS], "sleepers", "fiberd sleepers", false, "sleepers", few,
                s ? "1000" : "1000000", s ? "100" : "3000");
        jobs[J_SLEEPERS].max_fibers = bench_fibers_cap(s ? 1016 : 1000016);
        job_set(&jobs[J_GO_SLEEPERS], "sleepers", "Go sleepers", true, "sleepers", few, "1000000",
                NULL);
        job_set(&jobs[J_IDLE], "idle", "fiberd idle", false, "idle", 1, s ? "200" : "10000", NULL);
        job_set(&jobs[J_LATENESS], "lateness", "fiberd lateness", false, "lateness", r,
                s ? "10" : "100", s ? "5" : "200");
        jobs[J_LATENESS].values = 2;
        job_set(&jobs[J_GO_LATENESS], "lateness", "Go lateness", true, "lateness", r, "100", "200");
        jobs[J_GO_LATENESS].values = 2;

        static const struct {
                int job;
                const char *figure, *cmd, *spec;
        } sched_jobs[] = {
                {J_SKY_S1, "sched-skynet", "sched-skynet", "shared1"},
                {J_SKY_L1, "sched-skynet", "sched-skynet", "local1"},
                {J_SKY_S2, "sched-skynet", "sched-skynet", "shared2"},
                {J_SKY_L2, "sched-skynet", "sched-skynet", "local2"},
                {J_CR_S1, "sched-create", "sched-create", "shared1"},
                {J_CR_L1, "sched-create", "sched-create", "local1"},
                {J_CR_S2, "sched-create", "sched-create", "shared2"},
                {J_CR_L2, "sched-create", "sched-create", "local2"},
                {J_FAN_S, "sched-fanout", "sched-fanout", "shared"},
                {J_FAN_L, "sched-fanout", "sched-fanout", "local"},
                {J_IMB_BAL, "sched-imbalance", "sched-imbalance", "balanced"},
                {J_IMB_STEAL, "sched-imbalance", "sched-imbalance", "steal"},
                {J_IMB_NOSTEAL, "sched-imbalance", "sched-imbalance", "nosteal"},
        };
        for (size_t i = 0; i < sizeof(sched_jobs) / sizeof(sched_jobs[0]); i++) {
                const char *count = NULL;
                bool skynet = sched_jobs[i].job <= J_SKY_L2;
                if (skynet)
                        count = s ? "1000" : "100000";
                else if (sched_jobs[i].job <= J_CR_L2)
                        count = s ? "2000" : "1000000";
                else if (sched_jobs[i].job <= J_FAN_L)
                        count = s ? "2" : "200";
                else
                        count = s ? "50" : "5000";
                job_set(&jobs[sched_jobs[i].job], sched_jobs[i].figure, sched_jobs[i].spec, false,
                        sched_jobs[i].cmd, skynet ? few : r, sched_jobs[i].spec, count);
                jobs[sched_jobs[i].job].max_fibers = bench_fibers_cap(skynet ? 112500 : 65536);
                jobs[sched_jobs[i].job].groups = strchr(sched_jobs[i].spec, '2') ? 2 : 1;
        }
        job_set(&jobs[J_CHAN_PP0], "chan", "fiberd chan ping-pong", false, "chan-pingpong", r,
                s ? "2000" : "200000", "0");
        job_set(&jobs[J_GO_CHAN_PP0], "chan", "Go chan ping-pong", true, "pingpong", r, "200000",
                NULL);
        job_set(&jobs[J_CHAN_PP1], "chan", "fiberd chan(1) ping-pong", false, "chan-pingpong", r,
                s ? "2000" : "200000", "1");
        job_set(&jobs[J_GO_CHAN_PP1], "chan", "Go chan(1) ping-pong", true, "pingpong-buffered", r,
                "200000", NULL);
        job_set(&jobs[J_FUT_FAN], "future", "fiberd future fan-out", false, "future-fanout", r,
                s ? "1000" : "10000", NULL);
        jobs[J_FUT_FAN].max_fibers = bench_fibers_cap(10016);
        job_set(&jobs[J_GO_FAN], "future", "Go fan-out", true, "fanout", r, "10000", NULL);
        const char *fair_ms = s ? "300" : "10000";
        job_set(&jobs[J_CTL_FAIR1], "control-fair", "shares 1 group", false, "control-fair", 1,
                "1g", fair_ms);
        job_set(&jobs[J_CTL_FAIR2], "control-fair", "shares 2 groups", false, "control-fair", 1,
                "2g", fair_ms);
        job_set(&jobs[J_CTL_DUTY], "control-fair", "shares 50% duty", false, "control-fair", 1,
                "duty", fair_ms);
        job_set(&jobs[J_CTL_PREEMPT], "control-preempt", "behind a hog", false, "control-preempt",
                r, s ? "20" : "300", NULL);
        jobs[J_CTL_PREEMPT].values = 2;
        job_set(&jobs[J_P_PREEMPT], "control-preempt", "fiberd behind spin", false,
                "product-preempt", r, s ? "20" : "300", NULL);
        jobs[J_P_PREEMPT].values = 2;
        hooks_jobs_setup(jobs, o);
        product_jobs_setup(jobs, o);
}

static bool figure_selected(const char *only, const char *figure)
{
        size_t len = strlen(figure);

        if (!only)
                return true;
        for (const char *p = only; *p;) {
                const char *comma = strchr(p, ',');
                size_t n = comma ? (size_t)(comma - p) : strlen(p);
                if (n == len && !strncmp(p, figure, n))
                        return true;
                if (!comma)
                        break;
                p = comma + 1;
        }
        return false;
}

/* Whether --only @only selects job @j: by its figure or its second name. */
static bool job_selected(const char *only, const Job *j)
{
        return figure_selected(only, j->figure) || (j->also && figure_selected(only, j->also));
}

/* Whether --only @only prints @row: its figure's job is selected by its figure name, or
 * by its second name when the peer is selected too (BENCH_ONLY=product-gearpipe prints
 * rows 12g and 13g, not every row of product-fiberd's 8 connections). */
static bool row_selected(const char *only, const Row *row, const Job *jobs)
{
        const Job *o = &jobs[row->ours];

        if (figure_selected(only, o->figure))
                return true;
        return o->also && figure_selected(only, o->also) && row->peer >= 0 &&
               job_selected(only, &jobs[row->peer]);
}

/* Decide which jobs run: --only, Go present, and (with mprotect guards, on a kernel
 * without guard regions) vm.max_map_count: a row it cannot hold is skipped with the
 * reason, never failed, and the host's sysctl is left as it is. */
static void jobs_filter(Job *jobs, const Options *o)
{
        unsigned long have = 0, need = 0;
        FILE *fp = fopen("/proc/sys/vm/max_map_count", "re");

        if (fp) {
                if (fscanf(fp, "%lu", &have) != 1)
                        have = 0;
                fclose(fp);
        }
        for (int i = 0; i < J_COUNT; i++) {
                Job *j = &jobs[i];
                unsigned long maps = bench_maps_needed(j->max_fibers, j->groups ? j->groups : 1);
                if (!job_selected(o->only, j))
                        snprintf(j->skip, sizeof(j->skip), "not selected");
                else if (j->go && !o->go)
                        snprintf(j->skip, sizeof(j->skip), "go not installed");
                else if (j->max_fibers && have && maps > have) {
                        snprintf(j->skip, sizeof(j->skip),
                                 "mprotect guards need vm.max_map_count >= %lu (is %lu): "
                                 "'sudo sysctl -w vm.max_map_count=%lu', or Linux >= 6.13",
                                 maps, have, maps);
                        need = maps > need ? maps : need;
                }
        }
        if (need)
                fprintf(stderr,
                        "bench: this kernel has no guard regions and vm.max_map_count is %lu: "
                        "skipping the rows that need more maps; run 'sudo sysctl -w "
                        "vm.max_map_count=%lu' first to include them\n",
                        have, need);
}

/* ------------------------------------------------------------------ children ------ */

/* The last line of @text (a child's stderr), trimmed, into @out. */
static void last_line(const char *text, char *out, size_t size)
{
        size_t n = strlen(text);
        const char *end, *start;

        while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
                n--;
        end = text + n;
        start = end;
        while (start > text && start[-1] != '\n')
                start--;
        snprintf(out, size, "%.*s", (int)(end - start), start);
}

static void read_all(FILE *fp, char *buf, size_t size)
{
        size_t n;

        rewind(fp);
        n = fread(buf, 1, size - 1, fp);
        buf[n] = '\0';
}

/*
 * Run @argv as a child with stdout and stderr captured, kill it after @timeout_s.
 * Return: 0 with its stdout in @out; -1 with what went wrong (exit status, signal,
 * time limit, last stderr line) in @why.
 */
static int run_child(char *const argv[], unsigned timeout_s, char *out, size_t out_size, char *why,
                     size_t why_size)
{
        FILE *fo = tmpfile(), *fe = tmpfile();
        uint64_t deadline = bench_now_ns() + timeout_s * NSEC_PER_SEC;
        char err[4096], tail[200];
        bool killed = false;
        int status = 0;
        pid_t pid;

        out[0] = '\0';
        if (!fo || !fe) {
                snprintf(why, why_size, "tmpfile: %s", strerror(errno));
                goto out_close;
        }
        fflush(stdout);
        fflush(stderr);
        pid = fork();
        if (pid < 0) {
                snprintf(why, why_size, "fork: %s", strerror(errno));
                goto out_close;
        }
        if (pid == 0) {
                dup2(fileno(fo), STDOUT_FILENO);
                dup2(fileno(fe), STDERR_FILENO);
                execv(argv[0], argv);
                fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        for (;;) {
                pid_t r = waitpid(pid, &status, WNOHANG);
                if (r == pid)
                        break;
                if (r < 0 && errno != EINTR) {
                        snprintf(why, why_size, "waitpid: %s", strerror(errno));
                        goto out_close;
                }
                if (!killed && bench_now_ns() > deadline) {
                        kill(pid, SIGKILL);
                        killed = true;
                }
                usleep(10000);
        }
        read_all(fo, out, out_size);
        read_all(fe, err, sizeof(err));
        last_line(err, tail, sizeof(tail));
        fclose(fo);
        fclose(fe);
        if (killed) {
                snprintf(why, why_size, "hung: killed after %u s%s%s", timeout_s,
                         tail[0] ? "; stderr: " : "", tail);
                return -1;
        }
        if (WIFSIGNALED(status)) {
                snprintf(why, why_size, "crashed: signal %d (%s)%s%s", WTERMSIG(status),
                         strsignal(WTERMSIG(status)), tail[0] ? "; stderr: " : "", tail);
                return -1;
        }
        if (WEXITSTATUS(status)) {
                snprintf(why, why_size, "failed: exit %d%s%s", WEXITSTATUS(status),
                         tail[0] ? ": " : "", tail);
                return -1;
        }
        return 0;

out_close:
        if (fo)
                fclose(fo);
        if (fe)
                fclose(fe);
        return -1;
}

static void job_run(Job *j, const char *self, const char *go, unsigned round, unsigned rounds)
{
        char *argv[7];
        char out[256], why[300];
        int n = 0;

        argv[n++] = (char *)(j->go && !j->go_self ? go : j->gearman ? bench_gearman_path : self);
        argv[n++] = (char *)j->cmd;
        for (int i = 0; i < 4; i++)
                if (j->args[i][0])
                        argv[n++] = j->args[i];
        argv[n] = NULL;

        if (run_child(argv, j->timeout_s, out, sizeof(out), why, sizeof(why)) == 0) {
                char *p = out, *end;
                double v[3];
                int got = 0;
                for (; got < (int)j->values; got++) {
                        v[got] = strtod(p, &end);
                        if (end == p)
                                break;
                        p = end;
                }
                if (got == (int)j->values) {
                        for (int i = 0; i < got; i++)
                                j->v[i][j->ok] = v[i];
                        j->ok++;
                        fprintf(stderr, "bench: round %u/%u  %-18s %s", round + 1, rounds, j->label,
                                out);
                        return;
                }
                snprintf(why, sizeof(why), "printed '%.60s', not %u number(s)", out, j->values);
        }
        j->failed++;
        if (!j->why[0])
                snprintf(j->why, sizeof(j->why), "%s", why);
        fprintf(stderr, "bench: round %u/%u  %-18s %s\n", round + 1, rounds, j->label, why);
}

/* ------------------------------------------------------------------ table --------- */

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;
        return x < y ? -1 : x > y;
}

static double job_median(const Job *j, int value)
{
        double v[MAX_RUNS];

        memcpy(v, j->v[value], j->ok * sizeof(double));
        qsort(v, j->ok, sizeof(double), cmp_double);
        return j->ok % 2 ? v[j->ok / 2] : (v[j->ok / 2 - 1] + v[j->ok / 2]) / 2;
}

static void format_value(char *buf, size_t size, double v, const char *unit)
{
        if (v >= 100 || !strcmp(unit, "threads"))
                snprintf(buf, size, "%.0f %s", v, unit);
        else if (v >= 1)
                snprintf(buf, size, "%.1f %s", v, unit);
        else
                snprintf(buf, size, "%.3f %s", v, unit);
}

/* A cell for job @j: its median, or why there is none. Return: true if a median. */
static bool format_cell(char *buf, size_t size, const Job *j, int value, const char *unit)
{
        char num[64];

        if (j->skip[0]) {
                snprintf(buf, size, "skipped: %s", j->skip);
                return false;
        }
        if (!j->ok) {
                snprintf(buf, size, "**%s**", j->why);
                return false;
        }
        format_value(num, sizeof(num), job_median(j, value), unit);
        if (j->failed)
                snprintf(buf, size, "%s (%u of %u runs failed: %s)", num, j->failed,
                         j->failed + j->ok, j->why);
        else
                snprintf(buf, size, "%s", num);
        return true;
}

/*
 * The ratio of a row: the median over the rounds of each round's ratio (ours and the
 * peer run seconds apart within a round), or, when a run of either failed (its numbers
 * no longer line up with the rounds), the ratio of the two medians. Paired, a round in
 * which the host moved the two vCPUs apart (docs/benchmarks.md, "Two regimes": every
 * cross-core figure three to four times slower for minutes) is compared with itself, not
 * with a peer's round on the other placement. @op: 'q' for ours / peer, 'r' for peer /
 * ours, 'd' for ours - peer. Context: after every round; a and b, the medians, > 0.
 */
static double row_ratio(const Job *o, int ov, const Job *p, int pv, char op)
{
        double r[MAX_RUNS], a = job_median(o, ov), b = job_median(p, pv);
        unsigned n = o->ok < p->ok ? o->ok : p->ok;
        bool paired = !o->failed && !p->failed && n;

        for (unsigned i = 0; paired && i < n; i++) {
                double x = o->v[ov][i], y = p->v[pv][i];
                /* a round of 0 (a coarse unit) cannot be divided by: medians then */
                if ((op == 'q' && y <= 0) || (op == 'r' && x <= 0))
                        paired = false;
                else
                        r[i] = op == 'd' ? x - y : op == 'q' ? x / y : y / x;
        }
        if (!paired)
                return op == 'd' ? a - b : op == 'q' ? a / b : b / a;
        qsort(r, n, sizeof(double), cmp_double);
        return n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
}

static void print_row(const Row *row, const Job *jobs)
{
        char ours[400], peer[460], cell[400], ratio[64] = "—", met[16] = "—";
        const Job *o = &jobs[row->ours];
        bool have_ours = format_cell(ours, sizeof(ours), o, row->value, row->unit);
        bool have_peer = false;
        double a = have_ours ? job_median(o, row->value) : 0, b = 0, q;
        const Job *p = row->peer >= 0 ? &jobs[row->peer] : NULL;
        int pv = row->value + (row->peer == row->ours);

        if (p) {
                have_peer = format_cell(cell, sizeof(cell), p, pv, row->unit);
                snprintf(peer, sizeof(peer), "%s: %s", row->peer_name, cell);
                if (have_peer)
                        b = job_median(p, pv);
        } else {
                snprintf(peer, sizeof(peer), "—");
        }

        if (row->cmp == CMP_ROUNDS && have_ours && !o->failed) {
                size_t len = strlen(ours);
                for (unsigned i = 0; i < o->ok && len + 16 < sizeof(ours); i++)
                        len += (size_t)snprintf(ours + len, sizeof(ours) - len, "%s%.3g%s",
                                                i ? ", " : " (rounds: ", o->v[row->value][i],
                                                i + 1 == o->ok ? ")" : "");
        }
        if (row->cmp == CMP_LIMIT && have_ours) {
                snprintf(met, sizeof(met), "%s", a <= row->target ? "yes" : "**no**");
        } else if (have_ours && have_peer && a > 0 && b > 0) {
                switch (row->cmp) {
                case CMP_FLOOR:
                        q = row_ratio(o, row->value, p, pv, 'q');
                        snprintf(ratio, sizeof(ratio), "%.2fx the floor", q);
                        snprintf(met, sizeof(met), "%s", q <= row->target ? "yes" : "**no**");
                        break;
                case CMP_FASTER:
                case CMP_SCALE:
                        q = row_ratio(o, row->value, p, pv, 'r');
                        if (q >= 1)
                                snprintf(ratio, sizeof(ratio), "%.2fx faster", q);
                        else
                                snprintf(ratio, sizeof(ratio), "%.2fx slower", 1 / q);
                        if (row->cmp == CMP_FASTER)
                                snprintf(met, sizeof(met), "%s",
                                         q >= row->target ? "yes" : "**no**");
                        break;
                case CMP_TIMES:
                        q = row_ratio(o, row->value, p, pv, 'q');
                        snprintf(ratio, sizeof(ratio), "%.2fx %s", q, row->peer_name);
                        snprintf(met, sizeof(met), "%s",
                                 row->target <= 0   ? "—"
                                 : q <= row->target ? "yes"
                                                    : "**no**");
                        break;
                case CMP_RATE:
                        q = row_ratio(o, row->value, p, pv, 'q');
                        snprintf(ratio, sizeof(ratio), "%.2fx %s", q, row->peer_name);
                        snprintf(met, sizeof(met), "%s",
                                 row->target <= 0   ? "—" /* a scale or a cost */
                                 : q >= row->target ? "yes"
                                                    : "**no**");
                        break;
                case CMP_DIFF:
                        q = row_ratio(o, row->value, p, pv, 'd');
                        snprintf(ratio, sizeof(ratio), "%+.1f %s", q, row->unit);
                        snprintf(met, sizeof(met), "%s",
                                 row->target <= 0   ? "—"
                                 : q <= row->target ? "yes"
                                                    : "**no**");
                        break;
                case CMP_MEMORY:
                        q = row_ratio(o, row->value, p, pv, 'q');
                        snprintf(ratio, sizeof(ratio), "%.2fx Go", q);
                        snprintf(met, sizeof(met), "%s", q <= row->target ? "yes" : "**no**");
                        break;
                default:
                        break;
                }
        }
        printf("| %s | %s | %s | %s | %s | %s |\n", row->figure, ours, peer, ratio,
               row->target_text, met);
}

static void print_header(const char *go)
{
        char model[256] = "unknown CPU", line[512], gov[200] = "", out[128], why[300];
        struct utsname u;
        time_t now = time(NULL);
        struct tm tm;
        FILE *fp = fopen("/proc/cpuinfo", "re");

        while (fp && fgets(line, sizeof(line), fp)) {
                char *colon = strchr(line, ':');
                if (!strncmp(line, "model name", 10) && colon) {
                        snprintf(model, sizeof(model), "%s", colon + 2);
                        model[strcspn(model, "\n")] = '\0';
                        break;
                }
        }
        if (fp)
                fclose(fp);
        if (go) {
                char *argv[] = {(char *)go, "version", NULL};
                if (run_child(argv, 30, out, sizeof(out), why, sizeof(why)) == 0) {
                        out[strcspn(out, "\n")] = '\0';
                        snprintf(gov, sizeof(gov), "; peers built with %s", out);
                }
        }
        uname(&u);
        gmtime_r(&now, &tm);
        strftime(line, sizeof(line), "%Y-%m-%d %H:%M UTC", &tm);
        /* the CPU on a line of its own: a figure means little without it (lscpu's
         * "Model name" is /proc/cpuinfo's "model name") */
        printf("\nfiberd benchmarks, %s, Linux %s%s\nCPU: %s, %ld CPUs\n\n", line, u.release, gov,
               model, sysconf(_SC_NPROCESSORS_ONLN));
}

static int table_main(int argc, char **argv)
{
        Options o = {.runs = 5};
        Job jobs[J_COUNT];
        char self[4096];
        unsigned rounds = 0;
        ssize_t n;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--runs") && i + 1 < argc)
                        o.runs = (unsigned)bench_parse_count(argv[++i], 5);
                else if (!strcmp(argv[i], "--go") && i + 1 < argc)
                        o.go = argv[++i];
                else if (!strcmp(argv[i], "--no-go"))
                        o.go = NULL;
                else if (!strcmp(argv[i], "--only") && i + 1 < argc)
                        o.only = argv[++i];
                else if (!strcmp(argv[i], "--smoke"))
                        o.smoke = true;
                else
                        bench_die("table: unknown option '%s' (see the top of tests/bench/bench.c)",
                                  argv[i]);
        }
        if (o.smoke) {
                o.runs = 1;
                o.go = NULL;
        }
        if (o.runs > MAX_RUNS)
                o.runs = MAX_RUNS;
        if (o.go && access(o.go, X_OK) < 0) {
                fprintf(stderr, "bench: Go peer %s not found: Go rows skipped\n", o.go);
                o.go = NULL;
        }
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n < 0)
                bench_die("readlink /proc/self/exe: %s", strerror(errno));
        self[n] = '\0';
        snprintf(bench_gearman_path, sizeof(bench_gearman_path), "%.*s/fiberd-bench-gearman",
                 (int)(strrchr(self, '/') - self), self);

        if (o.go)
                setenv("FIBERD_BENCH_GO", o.go, 1); /* for hooks-go, which runs it */
        jobs_setup(jobs, &o);
        if (!o.smoke)
                jobs_filter(jobs, &o);
        else if (o.only)
                for (int i = 0; i < J_COUNT; i++)
                        if (!job_selected(o.only, &jobs[i]))
                                snprintf(jobs[i].skip, sizeof(jobs[i].skip), "not selected");
        for (int i = 0; i < J_COUNT; i++) {
                if (jobs[i].go && !o.go && !jobs[i].skip[0])
                        snprintf(jobs[i].skip, sizeof(jobs[i].skip), "%s",
                                 o.smoke ? "no Go in a smoke run" : "go not installed");
        }
        product_jobs_filter(jobs);
        for (int i = 0; i < J_COUNT; i++)
                if (!jobs[i].skip[0] && jobs[i].runs > rounds)
                        rounds = jobs[i].runs;

        for (unsigned r = 0; r < rounds; r++)
                for (int i = 0; i < J_COUNT; i++)
                        if (!jobs[i].skip[0] && r < jobs[i].runs)
                                job_run(&jobs[i], self, o.go, r, jobs[i].runs);

        print_header(o.go);
        printf("| figure | fiberd median | peer median | ratio | target | met? |\n");
        printf("|---|---|---|---|---|---|\n");
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
                if (row_selected(o.only, &rows[i], jobs))
                        print_row(&rows[i], jobs);
        printf("\nMedians of %u runs (create with join, skynet, sleepers: %u; idle: 1), each "
               "run a fresh process, fiberd and its peers interleaved round by round. A "
               "ratio is the median of each round's ratio (ours and the peer seconds apart), "
               "so a change of the host's placement of the vCPUs between rounds (row 0) "
               "is not compared across.%s\n",
               o.runs, o.runs < 3 ? o.runs : 3, o.smoke ? " SMOKE SIZES: not a measurement." : "");
        printf("Fibers use the default 128 KiB stacks. 2: one fiber creates all 1M joinable "
               "fibers, then joins each handle (a joinable fiber's stack goes back when it "
               "ends, its 128-byte control block when it is joined: 1M of them exist at "
               "once); 2b: detached fibers counted down on a FiberLatch, as Go's WaitGroup. "
               "5: RSS delta / 1M, each side in its own process.\n");
        printf("12-16: each run starts its own server (fiberd on a Unix socket; beanstalkd "
               "and gearmand -t 1 on 127.0.0.1, in memory) and its workers in the generator "
               "process; a job counts when the client has seen it complete (fiberd: its final "
               "record, job.run asked for the keys the client reads, fields [result, error], "
               "the row 'the whole record' without; gearmand: WORK_COMPLETE; beanstalkd: the "
               "worker's delete acknowledged, handed to the client in memory). Server CPU is "
               "the server process's utime + "
               "stime. 14-15: one connection, jobs sent on a fixed schedule, latency from the "
               "scheduled send (tests/bench/product.h). 16: one run, 8 connections.\n");
        printf("12g-13g: row 12's load, 8 connections, through gearmand -t 1 driven at its best: "
               "the clients pipeline SUBMIT_JOB and the workers keep 64 GRAB_JOBs outstanding "
               "each, on the binary protocol (tests/bench/peers/gearman-pipe.c).\n");
        printf("27: each run starts its own fiberd as make demo does (default settings: the "
               "sqlite job store) and submits one sha256 job per file with fiberctl --json "
               "batch --wait --window 1024 (log level warning); the peer is xargs -0 -P<CPUs> -n "
               "500 sha256sum. "
               "Each makes one untimed pass first (a warm page cache); the file list is made "
               "before the clock starts. CPU time: fiberctl's and fiberd's, or xargs' and its "
               "sha256sum children's.\n");
        printf("22-23: each run starts its own fiberd (2 job workers, max_running 16384, memory "
               "store) and submits all N jobs on one connection, then waits for all; time from "
               "the first submit to the last final record; threads sampled every ms from "
               "/proc/PID/status, \"did not have\": beyond the connected idle daemon. The slow "
               "servers and the thread sampling of the Go peer run in fiberd-bench "
               "(tests/bench/bench-hooks.c). 24: one process alternates the two calls.\n");
        if (o.smoke)
                printf("Reproduce: make bench-smoke (= %s table --smoke)\n", self);
        else
                printf("Reproduce: make bench (as root for the 1M-fiber rows; = %s table "
                       "--runs %u %s%s%s%s)\n",
                       self, o.runs, o.go ? "--go " : "--no-go", o.go ? o.go : "",
                       o.only ? " --only " : "", o.only ? o.only : "");

        for (int i = 0; i < J_COUNT; i++)
                if (!jobs[i].skip[0] && jobs[i].failed)
                        return 1;
        return 0;
}

/* ------------------------------------------------------------------ main ---------- */

static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
        const char *help;
} commands[] = {
        {"yield", bench_fiber_yield, "[N] [classes]  ns per switch, 2 fibers x N yields, 1 worker"},
        {"create", bench_fiber_create, "[N [join|latch]] ns per fiber, create N from a fiber"},
        {"skynet", bench_fiber_skynet,
         "[LEAVES [shared|local]] ms for the skynet tree (power of 10)"},
        {"pingpong", bench_fiber_pingpong, "[N] [shared|local]  ns per round trip, 2 workers"},
        {"sleepers", bench_fiber_sleepers, "[N [MS]] resident bytes per sleeping fiber"},
        {"idle", bench_fiber_idle, "[MS]        CPU % of a core of an idle 2-worker group"},
        {"lateness", bench_fiber_lateness, "[G [K]] p50 p99 µs of fiber_sleep_for(1 ms)"},
        {"sched-skynet", bench_sched_skynet,
         "SPEC [LEAVES] ms; SPEC shared1|local1|shared2|local2"},
        {"sched-create", bench_sched_create, "SPEC [N]  ns per fiber, create + latch"},
        {"sched-fanout", bench_sched_fanout, "POLICY [ROUNDS] µs per spawn+join of 1,000"},
        {"sched-imbalance", bench_sched_imbalance, "MODE [N] ms, balanced|steal|nosteal"},
        {"control-fair", bench_control_fair, "1g|2g|duty [MS] largest share error, pp"},
        {"control-preempt", bench_control_preempt, "[N] p50 p99 µs behind a CPU-bound fiber"},
        {"product-preempt", bench_product_preempt,
         "[N] p50 p99 µs of job.run sleep ms=0 behind spin jobs, 1 job worker"},
        {"chan-pingpong", bench_chan_pingpong,
         "[N [CAP]] ns per round trip over 2 channels of capacity CAP, 2 workers"},
        {"future-fanout", bench_future_fanout, "[N] ns per future, async N + when_all"},
        {"hooks-fiberd", bench_hooks_fiberd,
         "sleep|usleep|poll|read [N]  ms, peak threads: N jobs of one 100 ms call"},
        {"hooks-curl", bench_hooks_curl, "[N]  ms, peak threads: N curl_fetch jobs, 50 ms server"},
        {"hooks-go", bench_hooks_go,
         "nanosleep|poll|read|http [N]  the same through the Go peer ($FIBERD_BENCH_GO)"},
        {"hook-cost", bench_hook_cost,
         "thread|fiber [N]  ns per poll() of a ready fd: hooked, then syscall(2)"},
        {"floor", bench_peer_floor, "[N]        ns per bare context_switch"},
        {"ucontext", bench_peer_ucontext, "[N]     ns per swapcontext"},
        {"pthread", bench_peer_pthread, "[N]      ns per pthread_create+join"},
        {"c2c", bench_peer_c2c, "[N]          ns per cache-line round trip between 2 CPUs"},
        {"wake", bench_peer_wake, "[N [GAP_US]] us of the waker's CPU per futex wake of a sleeper"},
        {"product-fiberd", bench_product_fiberd,
         "tput N C W | rate N RATE | rss N C W: trivial jobs through fiberd"},
        {"product-beanstalk", bench_product_beanstalk,
         "tput N C W | rate N RATE: the same through beanstalkd"},
        {"product-gearman-pipe", bench_product_gearman_pipe,
         "tput N C W: the same through gearmand, pipelining clients and workers (raw protocol)"},
        {"product-fiberd-whole", bench_product_fiberd_whole,
         "tput N C W: product-fiberd answered with the whole job record (no fields)"},
        {"product-fiberd-sqlite", bench_product_fiberd_sqlite,
         "tput N C W | rate N RATE: product-fiberd with the sqlite job store (the default)"},
        {"product-fiberd-redis", bench_product_fiberd_redis,
         "tput N C W | rate N RATE: product-fiberd with the redis store, 1 host"},
        {"product-fiberd-redis2", bench_product_fiberd_redis2,
         "tput N C W | rate N RATE: the same, 2 fiberd hosts sharing the stream"},
        {"product-beanstalk-binlog", bench_product_beanstalk_binlog,
         "tput N C W | rate N RATE: product-beanstalk with its binlog (-b, -f0)"},
        {"hash-tree", bench_hash_tree,
         "DIR [MAXFILES]  MB/s s: sha256 of every file through fiberd, as make demo"},
        {"hash-tree-xargs", bench_hash_tree_xargs,
         "DIR [MAXFILES]  MB/s s: the same with xargs -0 -P<CPUs> -n 500 sha256sum"},
        {"product-skynet", bench_product_skynet, "[LEAVES] ms of fiberctl submit skynet --wait"},
        {"product-due", bench_product_due,
         "FAR RATE SECONDS: lateness p50 p99 ms of due jobs, bytes per scheduled job"},
        {"product-record", bench_product_record,
         "N: resident bytes per finished trivial job record (N kept)"},
        {"product-beanstalk-due", bench_product_beanstalk_due,
         "FAR RATE SECONDS: the same with beanstalkd's delayed jobs"},
        {"product-fiberd-attempts", bench_product_fiberd_attempts,
         "tput N C W: product-fiberd, every job with max_attempts 3"},
        {"product-fiberd-after", bench_product_fiberd_after,
         "tput N C W: product-fiberd, every job after one done job"},
        {"product-fiberd-sqlite-attempts", bench_product_fiberd_sqlite_attempts,
         "tput N C W: product-fiberd-attempts with the sqlite job store"},
        {"product-fiberd-sqlite-after", bench_product_fiberd_sqlite_after,
         "tput N C W: product-fiberd-after with the sqlite job store"},
        {"product-due-redis", bench_product_due_redis,
         "FAR RATE SECONDS: product-due in fleet mode, 1 host"},
        {"product-due-redis2", bench_product_due_redis2,
         "FAR RATE SECONDS: product-due in fleet mode, 2 hosts"},
        {"product-fiberd-redis-attempts", bench_product_fiberd_redis_attempts,
         "tput N C W: product-fiberd-attempts in fleet mode, 1 host"},
        {"product-fiberd-redis-after", bench_product_fiberd_redis_after,
         "tput N C W: product-fiberd-after in fleet mode, 1 host"},
};

int main(int argc, char **argv)
{
        if (argc >= 2 && !strcmp(argv[1], "table"))
                return table_main(argc - 1, argv + 1);
        for (size_t i = 0; argc >= 2 && i < sizeof(commands) / sizeof(commands[0]); i++)
                if (!strcmp(argv[1], commands[i].name))
                        return commands[i].fn(argc - 1, argv + 1);
        fprintf(stderr, "usage: fiberd-bench table [--runs N] [--go PATH | --no-go] [--only a,b] "
                        "[--smoke]\n       fiberd-bench FIGURE [counts], one measurement:\n");
        for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                fprintf(stderr, "  %s %s\n", commands[i].name, commands[i].help);
        return 2;
}
