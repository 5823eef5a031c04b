/* SPDX-License-Identifier: MIT */
/*
 * bench.h — what the benchmark driver's files share (tests/bench/).
 *
 * The driver is one binary, build/bench/fiberd-bench, with one subcommand per figure.
 * A figure subcommand measures once, in its own process, and prints one line on stdout
 * (a number, or two for lateness); `fiberd-bench table` runs every figure and its peers
 * several times, interleaved, as child processes of itself and of the Go peer binary,
 * and prints the medians as one markdown table (bench.c).
 *
 *  bench-fiber.c  the fiberd figures, on the runtime's public API (scheduler/sched.h)
 *  bench-sched.c  the multi-group figures: shared vs local queues, 1 vs 2 groups,
 *                 imbalance with and without stealing, fan-out
 *  bench-control.c  CPU control: class shares against their targets, the wait behind a
 *                 CPU-bound fiber
 *  bench-chan.c   channels (ping-pong, unbuffered and buffered) and futures (a fan-out
 *                 joined with when_all), each against its Go peer
 *  bench-hooks.c  the hooks rows: plain blocking calls and libcurl in fiberd jobs against
 *                 Go's raw blocking syscalls and net/http; the cost of a hooked call
 *  slow-server.c  their slow local server (Unix socket or HTTP), one epoll thread
 *  bench-peers.c  the C peers: the bare two-context switch (the floor), ucontext
 *                 swapcontext, pthread_create/join
 *  bench-util.c   clock, bench_die, counts, resident memory (libc only)
 *  product.c      the product rows' load shape and server handling (product.h)
 *  bench-hash.c   row 27: the demo's job (sha256 of every file of a tree through
 *                 fiberctl batch) against xargs -P sha256sum
 *  bench-product.c  the product rows' fiberd side: trivial jobs through fiberd's socket
 *                 with the client library, skynet through fiberctl
 *  peers/beanstalk.c  the beanstalkd generator (a minimal text-protocol client)
 *  peers/gearman-pipe.c  gearmand at its best: pipelining clients and workers speaking
 *                 its binary protocol (no libgearman, so part of this binary)
 *  peers/gearman.c    the gearmand generator, its own binary fiberd-bench-gearman
 *                 (libgearman), built only where libgearman-dev is installed
 *  peers/go/      the Go peers, a stand-alone module with no dependencies
 *
 * Every time is CLOCK_MONOTONIC. A figure that cannot measure (an API error, a wrong
 * skynet sum) prints why on stderr and exits with status 1: the table shows the row as
 * failed instead of a number.
 */
#ifndef FIBERD_BENCH_H
#define FIBERD_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scheduler/base/time-util.h" /* NSEC_PER_*, timespec_store_ns(), clock_now_ns() */

/* The runtime rows measure a fixed number of workers: a creator that spawns a million
 * fibers without switching would otherwise get a spare worker after 20 ms (rescue) and
 * stall reports after 100 ms. The switch path's cost of the monitor (a store and a
 * load) is in every row all the same. */
#define BENCH_NO_MONITOR                                                                           \
        ((SchedControl){.stall_threshold_ns = UINT64_MAX, .rescue_after_ns = UINT64_MAX})

/* bench_now_ns - CLOCK_MONOTONIC now, in ns. Context: any thread or fiber. */
uint64_t bench_now_ns(void);

/* bench_die - print "fiberd-bench: <message>" on stderr and _exit(1). Never returns.
 * Context: any thread or fiber (it does not unwind anything). */
__attribute__((noreturn, format(printf, 1, 2))) void bench_die(const char *fmt, ...);

/* bench_rss_bytes - the process's resident set size, bytes, from /proc/self/statm
 * (second field, in pages). Dies when /proc cannot be read. Context: any. */
uint64_t bench_rss_bytes(void);

/* bench_fibers_cap - the max_fibers (and run-queue capacity) a figure with @live fibers
 * alive at once asks for: the power of two >= @live, at least 16384. Pure. */
size_t bench_fibers_cap(size_t live);

/* bench_maps_needed - vm.max_map_count that @groups groups of @max_fibers each need:
 * sched_stack_maps_per_fiber() per fiber plus slack, or 0 with guard regions (no map
 * per fiber; scheduler/stack.c). */
unsigned long bench_maps_needed(size_t max_fibers, unsigned groups);

/* bench_parse_count - @s as a positive count, or @def when @s is NULL; dies on junk. */
uint64_t bench_parse_count(const char *s, uint64_t def);

/*
 * Figure entry points: each reads its counts from @argv (after the subcommand name),
 * measures once and prints its result line. Return: the exit status (0). They die on
 * any error. Context: the main thread of a fresh process.
 */
int bench_fiber_yield(int argc, char **argv);     /* ns per switch */
int bench_fiber_create(int argc, char **argv);    /* ns per fiber */
int bench_fiber_skynet(int argc, char **argv);    /* ms for the tree */
int bench_fiber_pingpong(int argc, char **argv);  /* ns per round trip */
int bench_fiber_sleepers(int argc, char **argv);  /* resident bytes per fiber */
int bench_fiber_idle(int argc, char **argv);      /* CPU, % of one core */
int bench_fiber_lateness(int argc, char **argv);  /* p50 and p99, µs */
int bench_sched_skynet(int argc, char **argv);    /* ms, per policy and group count */
int bench_sched_create(int argc, char **argv);    /* ns per fiber, per policy and groups */
int bench_sched_fanout(int argc, char **argv);    /* µs per spawn-and-join of 1,000 */
int bench_sched_imbalance(int argc, char **argv); /* ms, balanced / steal / nosteal */
int bench_chan_pingpong(int argc, char **argv);   /* ns per round trip over channels */
int bench_future_fanout(int argc, char **argv);   /* ns per future, async + when_all */
int bench_hooks_fiberd(int argc, char **argv);    /* ms, peak fiberd threads */
int bench_hooks_curl(int argc, char **argv);      /* ms, peak fiberd threads */
int bench_hooks_go(int argc, char **argv);        /* ms, peak Go threads */
int bench_hook_cost(int argc, char **argv);       /* ns per poll(), hooked and real */
int bench_peer_floor(int argc, char **argv);      /* ns per bare context switch */
int bench_peer_ucontext(int argc, char **argv);   /* ns per swapcontext */
int bench_peer_pthread(int argc, char **argv);    /* ns per pthread_create + join */
int bench_peer_c2c(int argc, char **argv);        /* ns per cache-line round trip, 2 CPUs */
int bench_peer_wake(int argc, char **argv);       /* us of waker CPU per futex wake */
int bench_control_fair(int argc, char **argv);    /* max share error, pp */
int bench_control_preempt(int argc, char **argv); /* p50 and p99 µs */
int bench_product_fiberd(int argc, char **argv);
int bench_product_preempt(int argc, char **argv);
/* p50 p99 µs of sleep-0 behind spin */             /* product.h's loads through fiberd */
int bench_product_skynet(int argc, char **argv);    /* ms of skynet through fiberctl */
int bench_product_beanstalk(int argc, char **argv); /* product.h's loads, beanstalkd */
/* tput through gearmand with pipelining clients and workers (the raw protocol) */
int bench_product_gearman_pipe(int argc, char **argv);
/* job store: product-fiberd runs the memory store (like its in-memory peers);
 * these: fiberd with the sqlite store (its default), beanstalkd with its binlog (-b) */
int bench_product_fiberd_sqlite(int argc, char **argv);
int bench_product_fiberd_whole(int argc, char **argv);
int bench_product_fiberd_redis(int argc, char **argv);
int bench_product_fiberd_redis2(int argc, char **argv);
int bench_product_beanstalk_binlog(int argc, char **argv);
/* job scheduling: lateness of due jobs p50 p99 ms and bytes per scheduled job */
int bench_product_due(int argc, char **argv);
int bench_product_record(int argc, char **argv);
int bench_product_beanstalk_due(int argc, char **argv);
/* the product rows with options on every job (FIBERD_BENCH_JOB_OPTS) */
int bench_product_fiberd_attempts(int argc, char **argv);
int bench_product_fiberd_after(int argc, char **argv);
int bench_product_fiberd_sqlite_attempts(int argc, char **argv);
int bench_product_fiberd_sqlite_after(int argc, char **argv);
int bench_product_due_redis(int argc, char **argv);
int bench_product_due_redis2(int argc, char **argv);
int bench_product_fiberd_redis_attempts(int argc, char **argv);
int bench_product_fiberd_redis_after(int argc, char **argv);

/* row 27, hashing a tree: MB/s and seconds of the demo's path and of xargs sha256sum */
int bench_hash_tree(int argc, char **argv);
int bench_hash_tree_xargs(int argc, char **argv);

/* bench_product_fiberd_built - whether the fiberd, fiberctl and plugins this tree built
 * are there; if not, why, in @why. Context: any. */
bool bench_product_fiberd_built(char *why, size_t size);

#endif /* FIBERD_BENCH_H */
