/* SPDX-License-Identifier: MIT */
/*
 * product.h — what the product rows' load generators share (tests/bench/): one load
 * shape, the servers they start on loopback or on a Unix socket, and the numbers they
 * read from those servers.
 *
 * The product rows run a trivial job end to end through a job server: fiberd (through
 * its socket, with the C client library: bench-product.c), beanstalkd
 * (peers/beanstalk.c) and gearmand (peers/gearman.c, its own binary because it links
 * libgearman). Every generator:
 *  - starts its server itself, in a fresh temporary directory or on a free 127.0.0.1
 *    port, as a child that dies with the generator (PR_SET_PDEATHSIG), and stops it at
 *    the end, so each measurement has a server of its own;
 *  - runs its workers (the peers') in its own process;
 *  - offers one of the loads below and prints one line: the numbers of that mode.
 *
 * Loads (argv after the subcommand, the same for every system):
 *   tput N C W   N jobs over C connections (N/C each), at most W jobs outstanding per
 *                connection, each submitted and seen complete by the client. Prints
 *                "jobs_per_s server_cpu_ms_per_1000_jobs".
 *   rate N R     N jobs offered at R jobs/s on a fixed schedule (open loop). Prints
 *                "p50_us p99_us server_cpu_ms_per_s": latency from the submit to the
 *                completion seen by the client, and the server's CPU per wall second.
 *   rss N C W    (fiberd only) as tput, then prints fiberd's VmRSS in MiB.
 *
 * Server CPU is utime + stime of the server process (all its threads, /proc/PID/stat,
 * clock ticks: 10 ms at USER_HZ 100) read just before the first submit and just after
 * the last completion.
 */
#ifndef FIBERD_BENCH_PRODUCT_H
#define FIBERD_BENCH_PRODUCT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The peers' workers: worker connections, each its own thread in the generator, 2 per
 * client connection and at least 4, so that the peers' own workers are not what limits
 * them (1 per connection gave beanstalkd and gearmand 25-35% less on 2 cores; more than
 * this gave nothing more). FIBERD_BENCH_PEER_WORKERS=N sets the number instead. */
#define PRODUCT_PEER_WORKERS_PER_CONN 2
#define PRODUCT_PEER_WORKERS_MIN 4

typedef enum ProductMode {
        PRODUCT_TPUT, /* closed loop: W outstanding per connection */
        PRODUCT_RATE, /* open loop: a fixed rate */
        PRODUCT_RSS,  /* closed loop, then the server's resident memory */
} ProductMode;

/* The load one generator run offers. */
typedef struct ProductLoad {
        ProductMode mode;
        uint64_t jobs;    /* N, in all */
        unsigned conns;   /* C; 1 in rate mode */
        unsigned window;  /* W, jobs outstanding per connection at most */
        unsigned rate;    /* jobs/s, rate mode only */
        unsigned workers; /* peers: worker connections (threads) in the generator */
} ProductLoad;

/* A server started by a generator. */
typedef struct ProductServer {
        pid_t pid;        /* 0 when not running */
        char dir[64];     /* its temporary directory (log, socket), removed at the end */
        char log[96];     /* its stdout and stderr */
        unsigned port;    /* TCP port on 127.0.0.1, 0 for a Unix socket */
        char socket[100]; /* Unix socket path, "" for TCP (fits sun_path) */
} ProductServer;

/* product_parse - the load from @argv (argv[0] is the subcommand, argv[1] the mode).
 * Dies with a usage line on anything else. @allow_rss: whether "rss" is accepted. */
void product_parse(ProductLoad *ret, int argc, char **argv, bool allow_rss);

/* product_find_server - the path of server binary @name: searched in $PATH, then
 * /usr/sbin and /sbin (gearmand lives there and a user's PATH may lack it).
 * Return: true and the path in @buf; false when not installed. Context: any. */
bool product_find_server(const char *name, char *buf, size_t size);

/* product_free_port - a TCP port on 127.0.0.1 nobody listens on now (bind to port 0;
 * another process may still take it before the server does: product_start_tcp retries).
 * Dies on socket errors. */
unsigned product_free_port(void);

/*
 * product_start - start @argv (argv[0] an absolute path) as a child with @env_name=@env
 * set (when @env_name is not NULL), output to @s->log, dying with this process; then
 * wait until it accepts on @s->socket (when set) or 127.0.0.1:@s->port, at most 15 s.
 * The caller fills @s->dir (made by product_tmpdir), @s->socket or @s->port first.
 * Return: 0; -ETIMEDOUT or -ECHILD (it exited: the log's last line is on stderr). */
int product_start(ProductServer *s, char *const argv[], const char *env_name, const char *env);

/*
 * product_start_tcp - start a peer server listening on a free 127.0.0.1 port: @argv names
 * @port (a buffer of PRODUCT_PORT_LEN bytes) where the port goes; each try writes a new
 * port into it and s->port, up to 3 tries (another process may take a free port first).
 * Dies, saying @name did not start, when none works. Context: the generator's main.
 */
#define PRODUCT_PORT_LEN 16
void product_start_tcp(ProductServer *s, char *const argv[], char *port, const char *name);

/* product_start_gearmand - start gearmand 1.1 (Debian gearman-job-server) the way both
 * gearmand generators use it: `-t 1` (one I/O thread), on a free 127.0.0.1 port, its
 * built-in in-memory queue, errors only in @s->log. Dies when it is not installed or does
 * not start. Context: the generator's main. */
void product_start_gearmand(ProductServer *s);

/* product_start_fiberd - start the fiberd this tree built, with its bundled plugins, on a
 * socket in @s's new temporary directory (@s->socket), its job store in that directory
 * (FIBERD_BENCH_STORE picks the backend; unset: fiberd's default, sqlite), log level
 * warning. Dies when it does not start. In fiberd-bench only (bench-product.c).
 * Context: a generator's main. */
void product_start_fiberd(ProductServer *s);

/* product_fiberctl_path - the fiberctl this tree built (fiberd-bench only). Static. */
const char *product_fiberctl_path(void);

/* product_tmpdir - make @s->dir (/tmp/fiberd-bench-XXXXXX) and @s->log in it. Dies on
 * error. */
void product_tmpdir(ProductServer *s);

/* product_stop - SIGTERM, wait at most 5 s, then SIGKILL; remove @s->dir. Accepts a
 * server that never started. */
void product_stop(ProductServer *s);

/* product_cpu_ns - utime + stime of process @pid so far, all threads, in ns. Dies when
 * /proc/@pid/stat cannot be read. */
uint64_t product_cpu_ns(pid_t pid);

/* product_rss_bytes - VmRSS of process @pid, bytes (/proc/@pid/status). Dies on error. */
uint64_t product_rss_bytes(pid_t pid);

/* product_wait_until - sleep until CLOCK_MONOTONIC @deadline_ns (absolute). */
void product_wait_until(uint64_t deadline_ns);

/*
 * product_report - print the result line of @l: for tput/rss the jobs/s over
 * @elapsed_ns and the server CPU per 1,000 jobs; for rate the p50 and p99 of @lat_ns
 * (@l->jobs latencies in ns; sorted in place) and the CPU per wall second.
 */
void product_report(const ProductLoad *l, uint64_t elapsed_ns, uint64_t cpu_ns, uint64_t *lat_ns);

#endif /* FIBERD_BENCH_PRODUCT_H */
