/* SPDX-License-Identifier: MIT */
/*
 * config.h — fiberd's settings: built-in defaults, an INI file (parsed with inih), the
 * FIBERD_SOCKET environment variable and the command line, in rising precedence
 * (a flag always wins).
 *
 * The file (all keys optional, unknown keys are an error naming file and line):
 *
 *   [fiberd]
 *   socket = /run/fiberd.sock      ; listening socket path
 *   plugin_dir = /usr/local/lib/fiberd/plugins
 *   workers = 4                    ; job workers in all groups; 0 = the CPUs this
 *                                  ; process may run on (its affinity mask / cpuset)
 *   log_level = info               ; err, warning, notice, info, debug
 *   stop_timeout_ms = 5000         ; on SIGTERM, how long running jobs get to end
 *   [jobs]
 *   max_running = 256              ; jobs running at once; the rest wait by priority
 *   max_queued = 100000            ; jobs waiting at most; beyond, job.submit is OVERLOADED
 *   retention_s = 600              ; finished jobs stay queryable this long
 *   retention_max = 10000          ; and at most this many of them
 *   [ipc]
 *   max_message = 1048576          ; bytes; a bigger request closes its connection
 *   max_connections = 0            ; connections open at once; 0 = half the fds that
 *                                  ; RLIMIT_NOFILE leaves after 64 kept for jobs
 *   max_connections_per_user = 64  ; connections one uid may have open at once
 *   max_in_flight = 128            ; requests in flight on one connection; beyond,
 *                                  ; fiberd stops reading it until answers leave
 *   max_partial_bytes = 67108864   ; bytes of incomplete messages over all connections
 *   read_timeout_ms = 10000        ; a message begun must be whole within this
 *   [scheduler]                    ; how the job workers are split into scheduling
 *                                  ; groups (SchedConfig, scheduler/sched.h)
 *   optimize_for = neutral         ; compute-heavy, compute, neutral, io, io-heavy:
 *                                  ; the workload profile that sizes the groups
 *   groups = 0                     ; number of job groups; 0 = from the profile
 *   group_size = 0                 ; workers per group, 0..64; 0 = from the profile
 *                                  ; (groups and group_size both set: exactly that)
 *   numa = auto                    ; auto, on, off: bind each group to a NUMA node
 *                                  ; (auto: when the affinity is not narrowed and
 *                                  ; every node gets a group)
 *   pin_workers = false            ; true: each worker on one CPU of its group's set
 *   steal_every_n = 16             ; an idle worker tries to steal from another group
 *                                  ; of its node every n idle rounds; 0 = never
 *   cross_node_steal_every_n = 0   ; ... and from a group on another node; 0 = never
 *   queue_policy = default         ; shared (one run queue per group), local (plus a
 *                                  ; queue per worker), default (the runtime's choice)
 *
 * Booleans are true/false, yes/no, on/off or 1/0. The groups' max_fibers is the
 * runtime's default (16384 per group); the dispatcher's max_running keeps the live job
 * fibers well below it.
 *
 * SIGHUP re-reads the file (config_load() again with the same ConfigArgs) and applies
 * what can change while running (log level, plugin dir, job limits, retention, message
 * cap); socket, workers and the [scheduler] keys need a restart and say so in the log.
 */
#ifndef FIBERD_DAEMON_CONFIG_H
#define FIBERD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scheduler/sched.h"

#ifndef FIBERD_PLUGIN_DIR
#define FIBERD_PLUGIN_DIR "/usr/local/lib/fiberd/plugins"
#endif

typedef struct Config {
        char *socket_path;        /* owned */
        char *plugin_dir;         /* owned */
        unsigned workers;         /* job workers in all groups; 0 = the process's CPUs */
        int log_level;            /* syslog priority threshold */
        uint64_t stop_timeout_ns; /* SIGTERM: grace period for running jobs */
        unsigned max_running;     /* dispatcher's bound on running jobs */
        size_t max_queued;        /* queued jobs at most */
        uint64_t retention_ns;    /* finished jobs are dropped this long after they end */
        size_t retention_max;     /* ... or when more than this many are finished */
        size_t max_message;       /* bytes, the biggest request accepted */
        /* [ipc] resource limits, for ServerLimits (server.h) */
        unsigned max_connections;          /* open at once; 0 = from RLIMIT_NOFILE */
        unsigned max_connections_per_user; /* open at once by one uid */
        unsigned max_in_flight;            /* requests per connection; then it is not read */
        size_t max_partial_bytes;          /* incomplete messages of all connections */
        uint64_t read_timeout_ns;          /* a started message must be whole by then */
        SchedConfig sched;                 /* [scheduler]; .concurrency = workers once loaded,
                                   * .steal_every_n already in the runtime's terms
                                   * (UINT_MAX = never); pointers left NULL */
} Config;

/* What the command line said; NULL / 0 / -1 = not given. Strings point into argv. */
typedef struct ConfigArgs {
        const char *socket_path;
        const char *plugin_dir;
        const char *config_file;
        const char *log_level;
        long workers; /* -1 = not given */
} ConfigArgs;

/*
 * config_parse_args - getopt_long over @argv:
 *   --socket PATH, --plugin-dir DIR, --config FILE, --workers N (0..SCHED_MAX_CPUS),
 *   --log-level L, --help, --version.
 * @ret: out, written only on success.
 * Return: 0; 1 when --help or --version was handled (text already printed, exit 0);
 * -EINVAL on a usage error (message already printed to stderr, exit 64).
 * Context: main thread, before anything starts.
 */
int config_parse_args(ConfigArgs *ret, int argc, char **argv);

/*
 * config_load - build a Config: defaults, then @args->config_file when given, then
 * $FIBERD_SOCKET, then @args. On a bad file or value, logs one line naming the file,
 * line and key. @ret: out, written only on success; release with config_done().
 * Return: 0; -ENOENT (file missing); -EINVAL (bad value); -ENOMEM.
 * Context: any thread or fiber (does blocking file I/O: the file is small).
 */
int config_load(Config *ret, const ConfigArgs *args);

/* config_default_socket - the default socket path, as documented in the README:
 * "/run/fiberd.sock" for root, else "$XDG_RUNTIME_DIR/fiberd.sock" (falls back to
 * "/tmp/fiberd-<uid>.sock" without XDG_RUNTIME_DIR). Returns a malloc'ed string or NULL. */
char *config_default_socket(void);

/*
 * config_sched_equal - whether @a and @b give the same job scheduler (workers and every
 * [scheduler] key): SIGHUP says "takes effect at restart" when they do not.
 * Context: any. Pure.
 */
bool config_sched_equal(const Config *a, const Config *b);

/* config_done - free the strings. Accepts a zeroed Config. */
void config_done(Config *c);

#endif
