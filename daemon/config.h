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
 *   workers = 4                    ; job workers; 0 = one per online CPU
 *   log_level = info               ; err, warning, notice, info, debug
 *   stop_timeout_ms = 5000         ; on SIGTERM, how long running jobs get to end
 *   [jobs]
 *   max_running = 256              ; jobs running at once; the rest wait by priority
 *   max_queued = 100000            ; jobs waiting at most; beyond, job.submit is OVERLOADED
 *   retention_s = 600              ; finished jobs stay queryable this long
 *   retention_max = 10000          ; and at most this many of them
 *   [ipc]
 *   max_message = 1048576          ; bytes; a bigger request closes its connection
 *
 * SIGHUP re-reads the file (config_load() again with the same ConfigArgs) and applies
 * what can change while running (log level, plugin dir, job limits, retention, message
 * cap); socket and workers need a restart and say so in the log.
 */
#ifndef FIBERD_DAEMON_CONFIG_H
#define FIBERD_DAEMON_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifndef FIBERD_PLUGIN_DIR
#define FIBERD_PLUGIN_DIR "/usr/local/lib/fiberd/plugins"
#endif

typedef struct Config {
        char *socket_path;        /* owned */
        char *plugin_dir;         /* owned */
        unsigned workers;         /* job group's worker pthreads, >= 1 once loaded */
        int log_level;            /* syslog priority threshold */
        uint64_t stop_timeout_ns; /* SIGTERM: grace period for running jobs */
        unsigned max_running;     /* dispatcher's bound on running jobs */
        size_t max_queued;        /* queued jobs at most */
        uint64_t retention_ns;    /* finished jobs are dropped this long after they end */
        size_t retention_max;     /* ... or when more than this many are finished */
        size_t max_message;       /* bytes, the biggest request accepted */
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
 *   --socket PATH, --plugin-dir DIR, --config FILE, --workers N, --log-level L,
 *   --help, --version.
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

/* config_done - free the strings. Accepts a zeroed Config. */
void config_done(Config *c);

#endif
