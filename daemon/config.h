/* SPDX-License-Identifier: MIT */
/*
 * config.h — fiberd's settings: built-in defaults, an INI file (parsed with inih), the
 * FIBERD_SOCKET environment variable and the command line, in rising precedence
 * (a flag always wins).
 *
 * The file is --config FILE when given (it must exist), else FIBERD_CONFIG_FILE
 * (/etc/fiberd/fiberd.conf; `make install` puts a commented-out copy there listing every
 * key with its default): read when present, and fiberd starts on the defaults when it is
 * absent. `fiberd --check-config` loads it as a start would and prints the effective
 * settings (config_print(): itself a valid file).
 *
 * The file (all keys optional; an unknown key, a bad value or a key set twice is an
 * error naming file and line, and every error of the file is reported in one run; the
 * file must be a regular file, or /dev/null for none):
 *
 *   [fiberd]
 *   socket = /run/fiberd.sock      ; listening socket path (default: socket_path.h)
 *   plugin_dir = /usr/local/lib/fiberd/plugins
 *   workers = 4                    ; job workers in all groups; 0 = the CPUs this
 *                                  ; process may run on (its affinity mask / cpuset)
 *   log_level = info               ; err, warning, notice, info, debug
 *   log_jobs = true                ; each job's queued, started and finished lines
 *                                  ; at info (false: only failures' and debug)
 *   stop_timeout_ms = 5000         ; on SIGTERM, how long running jobs get to end
 *   [jobs]
 *   max_running = 256              ; jobs running at once; the rest wait by priority
 *   max_queued = 100000            ; jobs waiting at most; beyond, job.submit is OVERLOADED
 *   retention_s = 600              ; finished jobs stay queryable this long
 *   retention_max = 10000          ; and at most this many of them (past it, the
 *                                  ; oldest of the uid with the most finished goes)
 *   retention_max_per_user = 1000  ; finished jobs of one uid kept; past it, its oldest
 *                                  ; goes (never another uid's); 0 = no cap
 *   dead_retention_s = 604800      ; dead jobs (out of attempts) stay this long
 *   dead_retention_max = 10000     ; and at most this many of them
 *   idempotency_window_s = 86400   ; a key answers repeats this long after its job ended
 *   run_inline = true              ; jobs of FIBERD_PLUGIN_INLINE plugins run on the
 *                                  ; server worker that dispatched them (plugin.h)
 *   max_running_per_user = 64      ; running jobs of one uid; 0 = no cap (per-user
 *                                  ; limits bind every uid but root and fiberd's own)
 *   max_queued_per_user = 10000    ; queued jobs of one uid; 0 = no cap
 *   submit_rate_per_user = 0       ; submissions a second per uid; 0 = no limit
 *   submit_burst_per_user = 0      ; the token bucket's size; 0 = submit_rate_per_user
 *   max_bytes_per_user = 268435456 ; bytes of args and results one uid's jobs hold
 *                                  ; (queued to finished); 0 = no cap (jobquota.h)
 *   max_bytes = 2147483648         ; the same for every uid, root included; 0 = no cap
 *   max_result_bytes = 1048576     ; a plugin's result at most, else the job fails
 *                                  ; (bounded by max_message too)
 *   [ipc]
 *   max_message = 1048576          ; bytes; a bigger request closes its connection
 *   max_connections = 0            ; connections open at once; 0 = half the fds that
 *                                  ; RLIMIT_NOFILE leaves after 64 kept for jobs
 *   max_connections_per_user = 64  ; connections one uid may have open at once
 *   max_in_flight = 512            ; requests in flight on one connection; beyond,
 *                                  ; fiberd stops reading it until answers leave
 *   max_in_flight_per_user = 2048  ; the same over all of one uid's connections (root
 *                                  ; is exempt); a reload applies it at once
 *   max_partial_bytes = 67108864   ; bytes of incomplete messages over all connections
 *   read_timeout_ms = 10000        ; a message begun must be whole within this
 *   [server]                       ; the server scheduling group (daemon.h); restart
 *   workers = 1                    ; its worker threads, 0..64: connections' reader and
 *                                  ; request fibers, supervisors and housekeeping share
 *                                  ; them (local run queues when more than 1); 0 = one
 *                                  ; per CONFIG_SERVER_CPUS_PER_WORKER CPUs, 1..8
 *   [access]                       ; access tiers (access.h)
 *   admin_group = fiberd-admin     ; its members (and root) are admins; a group that
 *                                  ; does not exist makes only root admin; "" = none
 *   submit_group =                 ; "" = every local user may submit; a group (name
 *                                  ; or gid): only its members and admins may; it
 *                                  ; must exist
 *   [store]                        ; the job store (store.h); both need a restart
 *   backend = sqlite               ; sqlite (jobs survive crashes and restarts),
 *                                  ; redis (many hosts share one queue) or
 *                                  ; memory (nothing kept: today's behaviour)
 *   path =                         ; the sqlite database; "" = $STATE_DIRECTORY/jobs.db,
 *                                  ; else /var/lib/fiberd/jobs.db as root, else
 *                                  ; $XDG_STATE_HOME/fiberd/jobs.db, else
 *                                  ; ~/.local/state/fiberd/jobs.db
 *   redis = 127.0.0.1:6379         ; backend = redis: unix:/path or host:port
 *   stream = fiberd:jobs           ; the Redis stream every host reads
 *   group = fiberd                 ; its consumer group
 *   node =                         ; this host's consumer name; "" = hostname.pid
 *   claim_idle_ms = 30000          ; a dead host's jobs are taken over after this
 *   commit_delay_us = 1000         ; busy (a batch of 16+ writes): gather the next
 *                                  ; batch this long first; 0 = never (0..100000)
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
 *   task_quota_us = 500            ; 1..1000000: a fiber that ran this long without
 *                                  ; switching is asked to yield (fiber_need_preempt)
 *   stall_threshold_ms = 100       ; 0..3600000: a fiber that runs this long without
 *                                  ; switching is reported with a backtrace; 0 = off
 *   rescue_after_ms = 20           ; 0..3600000: a worker inside one fiber this long
 *                                  ; while its group has ready fibers gets a spare
 *                                  ; worker thread in its place; 0 = off
 *   max_spare_workers = 0          ; 0..64: spare workers per group; 0 = the group's size
 *   [metrics]                      ; the HTTP scrape endpoint (metrics_http.h); both
 *                                  ; need a restart
 *   listen =                       ; HOST:PORT or [IPV6]:PORT, e.g. 127.0.0.1:9464;
 *                                  ; "" = none (the default); systemd's socket named
 *                                  ; "metrics" (fiberd-metrics.socket) wins over it
 *   allow_remote = false           ; serve on an address that is not loopback
 *   [class.NAME]                   ; a job class (job.submit option "class"); NAME is
 *                                  ; [A-Za-z0-9_.-]{1,31}; at most 16 classes in all
 *   shares = 100                   ; 1..1000: its CPU share against the other classes'
 *                                  ; (seastar's shares); required: a section without
 *                                  ; it is ignored
 *   admin_only = false             ; only admins may submit to it
 *   max_running = 0                ; its jobs running at once; 0 = no cap (live)
 *   [plugin.NAME]                  ; limits of one plugin's jobs; NAME is the plugin's
 *                                  ; name, [a-z0-9_-]{1,32}, loaded or not; at most
 *                                  ; CONFIG_MAX_PLUGINS sections
 *   max_running = 0                ; its jobs running at once; 0 = no cap (live)
 *
 * The built-in class "default" (100 shares; the jobs that name no class) is always
 * class 0; a [class.default] section may change its shares. The others follow in the
 * order the file names them.
 *
 * Booleans are true/false, yes/no, on/off or 1/0. The groups' max_fibers is the
 * runtime's default (16384 per group); the dispatcher's max_running keeps the live job
 * fibers well below it.
 *
 * SIGHUP re-reads the file (config_load() again with the same ConfigArgs) and applies
 * what can change while running (log level, plugin dir, stop timeout, [jobs], [ipc],
 * the shares and max_running of classes that already exist, [plugin.NAME]); socket,
 * workers, the [server], [scheduler], [store] and [metrics] keys and adding or removing a class
 * need a restart: config_diff() names the keys of each kind that changed, and the
 * reload logs them in one line.
 */
#ifndef FIBERD_DAEMON_CONFIG_H
#define FIBERD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <stdio.h>

#include "scheduler/sched.h"

#ifndef FIBERD_PLUGIN_DIR
#define FIBERD_PLUGIN_DIR "/usr/local/lib/fiberd/plugins"
#endif

/* The file read when --config is not given (daemon/build.mk: $(SYSCONFDIR)). */
#ifndef FIBERD_CONFIG_FILE
#define FIBERD_CONFIG_FILE "/etc/fiberd/fiberd.conf"
#endif

/* A gid field for a group that is not set or does not exist. */
#define CONFIG_NO_GROUP ((gid_t)-1)

/* One [class.NAME] section (or the built-in "default"). */
typedef struct ConfigClass {
        char name[SCHED_CLASS_NAME_MAX + 1];
        unsigned shares;      /* SCHED_SHARES_MIN..SCHED_SHARES_MAX */
        bool admin_only;      /* only admins may submit to it (the access tiers) */
        unsigned max_running; /* its jobs running at once (dispatch.h); 0 = no cap */
} ConfigClass;

/* [plugin.NAME] sections at most. */
#define CONFIG_MAX_PLUGINS 64
/* Longest plugin name (FIBERD_PLUGIN_NAME_MAX, plugins/fiberd/plugin.h). */
#define CONFIG_PLUGIN_NAME_MAX 32

/* One [plugin.NAME] section: limits of the jobs of the plugin named NAME. */
typedef struct ConfigPlugin {
        char name[CONFIG_PLUGIN_NAME_MAX + 1]; /* [a-z0-9_-]{1,32} */
        unsigned max_running;                  /* its jobs running at once; 0 = no cap */
} ConfigPlugin;

typedef struct Config {
        char *socket_path;              /* owned */
        char *plugin_dir;               /* owned */
        unsigned workers;               /* job workers in all groups; 0 = the process's CPUs */
        int log_level;                  /* syslog priority threshold */
        bool log_jobs;                  /* [fiberd] log_jobs: a job's queued, started and
                                         * finished lines at info (jobtable.h) */
        uint64_t stop_timeout_ns;       /* SIGTERM: grace period for running jobs */
        unsigned max_running;           /* dispatcher's bound on running jobs */
        size_t max_queued;              /* queued jobs at most */
        uint64_t retention_ns;          /* finished jobs are dropped this long after they end */
        size_t retention_max;           /* ... or when more than this many are finished */
        uint64_t dead_retention_ns;     /* dead jobs are dropped this long after they died */
        size_t dead_retention_max;      /* ... or when more than this many are dead */
        uint64_t key_window_ms;         /* an idempotency key answers this long after its
                                         * job ended */
        unsigned max_running_per_user;  /* [jobs]; 0 = no cap */
        bool run_inline;                /* [jobs]: FIBERD_PLUGIN_INLINE jobs on the server
                                         * group (dispatch.c) */
        size_t max_queued_per_user;     /* [jobs]; 0 = no cap */
        unsigned submit_rate_per_user;  /* [jobs]; a second; 0 = no limit */
        unsigned submit_burst_per_user; /* [jobs]; 0 = submit_rate_per_user */
        size_t retention_max_per_user;  /* [jobs]; finished jobs of one uid kept; 0 = no cap */
        uint64_t max_bytes_per_user;    /* [jobs]; args + results one uid holds; 0 = no cap */
        uint64_t max_bytes;             /* [jobs]; args + results of every uid; 0 = no cap */
        size_t max_result_bytes;        /* [jobs]; a plugin's result at most (and within
                                         * max_message) */
        size_t max_message;             /* bytes, the biggest request accepted */
        /* [ipc] resource limits, for ServerLimits (server.h) */
        unsigned max_connections;          /* open at once; 0 = from RLIMIT_NOFILE */
        unsigned max_connections_per_user; /* open at once by one uid */
        unsigned max_in_flight;            /* requests per connection; then it is not read */
        unsigned max_in_flight_per_user;   /* the same over one uid's connections */
        size_t max_partial_bytes;          /* incomplete messages of all connections */
        uint64_t read_timeout_ns;          /* a started message must be whole by then */
        unsigned server_workers;           /* [server] workers: the server group's worker threads,
                                  * 1..64; 0 = from the CPUs (config_server_workers()) */
        char *config_file;                 /* owned: the file read; NULL = none (the default
                                         * file is absent: built-in defaults) */
        char *admin_group;                 /* [access]; owned; "" = none */
        char *submit_group;                /* [access]; owned; "" = everyone may submit */
        gid_t admin_gid;                   /* resolved at load; CONFIG_NO_GROUP = none/absent */
        gid_t submit_gid;                  /* resolved at load; CONFIG_NO_GROUP when "" */
        int store_backend;                 /* [store] backend: a StoreKind (store.h) */
        char *store_path;                  /* [store] path; owned; NULL or "" = the default */
        /* [store] backend = redis (store-redis.c): the fleet's shared stream */
        char *store_redis;              /* [store] redis: unix:/path or host:port; owned */
        char *store_stream;             /* [store] stream; owned */
        char *store_group;              /* [store] group: the consumer group; owned */
        char *store_node;               /* [store] node: the consumer name; owned; "" = host.pid */
        uint64_t store_claim_idle_ns;   /* [store] claim_idle_ms */
        uint64_t store_commit_delay_ns; /* [store] commit_delay_us */
        char *metrics_listen;           /* [metrics] listen; owned; "" = no endpoint */
        bool metrics_allow_remote;      /* [metrics] allow_remote */
        SchedConfig sched;              /* [scheduler]; .concurrency = workers once loaded,
                                         * .steal_every_n and .control already in the
                                         * runtime's terms (UINT_MAX / SCHED_FOREVER =
                                         * never); pointers left NULL
                                         * (config_sched_classes()) */
        ConfigClass classes[SCHED_MAX_CLASSES];   /* [0] is "default" */
        unsigned nclasses;                        /* 1..SCHED_MAX_CLASSES */
        ConfigPlugin plugins[CONFIG_MAX_PLUGINS]; /* [plugin.NAME], in file order */
        unsigned nplugins;
} Config;

/* The server group's workers at most ([server] workers, --server-workers): a scheduling
 * group's limit (sched.h). */
#define CONFIG_SERVER_WORKERS_MAX 64
/* [server] workers = 0: one server worker per this many CPUs the process may use, at
 * least 1 and at most CONFIG_SERVER_WORKERS_AUTO_MAX (docs/scaling.md says why). */
#define CONFIG_SERVER_CPUS_PER_WORKER 8
#define CONFIG_SERVER_WORKERS_AUTO_MAX 8

/*
 * config_server_workers - the server group's worker count @c asks for on a process that
 * may use @ncpus CPUs: [server] workers, or for 0 one per CONFIG_SERVER_CPUS_PER_WORKER
 * of @ncpus, clamped to 1..CONFIG_SERVER_WORKERS_AUTO_MAX. Context: any. Pure.
 */
unsigned config_server_workers(const Config *c, unsigned ncpus);

/* config_class_find - the class named @name in @c, or NULL. Context: any. Pure. */
const ConfigClass *config_class_find(const Config *c, const char *name);

/* config_plugin_find - the [plugin.NAME] section of @name in @c, or NULL. Context: any. */
const ConfigPlugin *config_plugin_find(const Config *c, const char *name);

/*
 * config_plugin_name_valid - @name (@len bytes, not NUL-terminated) is a name a plugin may
 * have: 1..CONFIG_PLUGIN_NAME_MAX of [a-z0-9_-] (plugins/fiberd/plugin.h). Context: any.
 */
bool config_plugin_name_valid(const char *name, size_t len);

/* What the command line said; NULL / 0 / -1 = not given. Strings point into argv. */
typedef struct ConfigArgs {
        const char *socket_path;
        const char *plugin_dir;
        const char *config_file;
        const char *log_level;
        long workers;        /* -1 = not given */
        long server_workers; /* --server-workers; -1 = not given */
        bool check_config;   /* --check-config: validate, print, exit */
        bool user;           /* --user: the per-user socket by default (as when not root) */
        bool socket_passed;  /* not a flag: systemd passed the socket (set once listening, as
                             * sd_listen_fds() unsets LISTEN_PID, so a reload still knows) */
} ConfigArgs;

/*
 * config_parse_args - getopt_long over @argv:
 *   --socket PATH, --plugin-dir DIR, --config FILE, --workers N (0..SCHED_MAX_CPUS),
 *   --server-workers N (0..CONFIG_SERVER_WORKERS_MAX), --log-level L, --check-config, --user, --help, --version.
 * @ret: out, written only on success.
 * Return: 0; 1 when --help or --version was handled (text already printed, exit 0);
 * -EINVAL on a usage error (message already printed to stderr, exit 64).
 * Context: main thread, before anything starts.
 */
int config_parse_args(ConfigArgs *ret, int argc, char **argv);

/*
 * config_load - build a Config: defaults, then the file (@args->config_file when given,
 * else FIBERD_CONFIG_FILE if it exists), then $FIBERD_SOCKET, then @args. On a bad file
 * or value, logs one line per error naming the file, line and key (config_load_report()),
 * and fails. Without a socket from any of
 * them, the default of ipc/socket_path.h: the system socket, or for --user or a non-root
 * fiberd $XDG_RUNTIME_DIR/fiberd.sock (no XDG_RUNTIME_DIR: -EINVAL, logged with the fix).
 * @ret: out, written only on success; release with config_done().
 * Return: 0; the first error: -ENOENT (--config names a missing file); -EACCES and
 * other open errors of the file; -EINVAL (bad value, duplicate key, not a regular
 * file); -ENOMEM.
 * Context: any thread or fiber (does blocking file I/O: the file is small).
 */
int config_load(Config *ret, const ConfigArgs *args);

/* What config_load_report() found wrong: how many errors (each already logged) and
 * the first as a negative errno (0 = none). */
typedef struct ConfigErrors {
        unsigned n;
        int first;
} ConfigErrors;

/*
 * config_load_report - config_load() that does not stop at the first error: each bad
 * line, duplicate key, bad value, unreadable or non-regular file is logged as it is
 * found ("file:line: ..."), counted in @ret_errors, and skipped (that key keeps its
 * default), so `fiberd --check-config` names every error of a file in one run and can
 * still check the rest (the scheduler layout). @ret: written on success even when
 * @ret_errors->n > 0; release with config_done(). Return: 0; -ENOMEM.
 * Context: as config_load().
 */
int config_load_report(Config *ret, const ConfigArgs *args, ConfigErrors *ret_errors);

/*
 * config_load_quiet - config_load() that logs nothing: a SIGHUP reload words its failure
 * in one line of its own. On failure @msg (@size bytes) gets the first error as
 * config_load() would log it ("/etc/fiberd/fiberd.conf:3: unknown key 'x' in [jobs]"),
 * followed by how many more there are. @ret: out, written only on success.
 * Return: as config_load(). Context: as config_load().
 */
int config_load_quiet(Config *ret, const ConfigArgs *args, char *msg, size_t size);

/*
 * config_print - write @c to @f as a configuration file: every section and key with its
 * effective value, in the units of the file (what `fiberd --check-config` prints; fed
 * back with --config it gives the same settings). Return: 0; -EIO when @f fails.
 * Context: any.
 */
int config_print(const Config *c, FILE *f);

/*
 * config_diff - the keys whose values differ between @old and @new, as "socket,
 * [scheduler] numa" (the [fiberd] section unnamed), in two lists: @live for the keys a
 * reload applies, @restart for those that take effect at the next start. Classes: new
 * shares, admin_only or max_running of a class in both are live ("[class.batch]
 * shares"); a class added or removed needs a restart ("[class.new]", "[class.old]
 * (removed)"). [plugin.NAME] sections changed, added or removed are live. Each list is NUL-terminated
 * and truncated to its size ("" when none). Context: any. Pure.
 */
void config_diff(const Config *old, const Config *new, char *live, size_t live_size, char *restart,
                 size_t restart_size);

/*
 * config_keep_restart_keys - give @next the values @running has of every key that needs
 * a restart (the @restart list of config_diff()), so that a reloaded config says what
 * runs and the next reload names them again. Strings are exchanged, not copied: each
 * Config still owns (and config_done() frees) what it holds afterwards. Context: any.
 */
void config_keep_restart_keys(Config *running, Config *next);

/*
 * config_sched_classes - @c's classes as the runtime takes them (SchedConfig.classes):
 * fills @ret (SCHED_MAX_CLASSES entries, names pointing into @c, so valid while @c is
 * unchanged) and returns how many. Context: any.
 */
unsigned config_sched_classes(const Config *c, SchedClassConfig *ret);

/* config_done - free the strings. Accepts a zeroed Config. */
void config_done(Config *c);

#endif
