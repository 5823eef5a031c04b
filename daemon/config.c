/* SPDX-License-Identifier: MIT */
/*
 * config.c — defaults, inih file parsing, getopt_long flags (see config.h for the
 * precedence and the keys).
 *
 * The file is parsed with inih's ini_parse() into a Config that starts from the
 * defaults; every key has one row in a table (section, name, parser, field), so the
 * file format, the error messages and config.h's comment stay in step. Keys with a
 * fixed set of words ([scheduler] optimize_for, numa, queue_policy) carry their word
 * list in the row, so a bad value's message names the words accepted. The [class.NAME]
 * and [plugin.NAME] sections are the exceptions: their section name is data
 * (config_class_key(), config_plugin_key()).
 */
#include "daemon/config.h"
#include "daemon/obs/log.h"
#include "daemon/obs/metrics_http.h"
#include "daemon/store/store.h"
#include "ipc/protocol.h"
#include "ipc/socket_path.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

static void usage(FILE *f, const char *argv0)
{
        fprintf(f,
                "Usage: %s [OPTIONS]\n"
                "Run fiberd, the fiber job daemon, in the foreground.\n\n"
                "  -s, --socket PATH      listening socket (default: $FIBERD_SOCKET, else\n"
                "                         the file's socket, else /run/fiberd.sock; with --user\n"
                "                         or when not root, $XDG_RUNTIME_DIR/fiberd.sock)\n"
                "      --user             a per-user fiberd: $XDG_RUNTIME_DIR/fiberd.sock, as\n"
                "                         `fiberctl --user` expects (the default when not root)\n"
                "  -p, --plugin-dir DIR   plugin directory (default: %s)\n"
                "  -c, --config FILE      INI configuration file (flags win over it)\n"
                "  -w, --workers N        job worker threads in all scheduling groups\n"
                "                         (default 0: one per CPU this process may use)\n"
                "      --server-workers N worker threads of the server group, 0..%d\n"
                "                         (default 1; 0: one per %d CPUs, 1..%d)\n"
                "  -l, --log-level LEVEL  err, warning, notice, info (default), debug\n"
                "      --check-config     load the configuration as a start would, print the\n"
                "                         effective settings and exit: 0 valid, 1 not\n"
                "  -h, --help             this text\n"
                "      --version          print the version\n"
                "\n"
                "The configuration file is %s when it exists\n"
                "(absent: the built-in defaults); --config FILE reads FILE instead.\n",
                argv0, FIBERD_PLUGIN_DIR, CONFIG_SERVER_WORKERS_MAX, CONFIG_SERVER_CPUS_PER_WORKER,
                CONFIG_SERVER_WORKERS_AUTO_MAX, FIBERD_CONFIG_FILE);
}

/* Parses a decimal in [@min, @max]. Return: 0 and *@ret, or -EINVAL. */
static int parse_ulong(const char *s, unsigned long min, unsigned long max, unsigned long *ret)
{
        char *end;
        unsigned long v;

        if (!s || !*s || *s == '-')
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || *end || v < min || v > max)
                return -EINVAL;
        *ret = v;
        return 0;
}

int config_parse_args(ConfigArgs *ret, int argc, char **argv)
{
        static const struct option opts[] = {
                {"socket", required_argument, NULL, 's'},
                {"plugin-dir", required_argument, NULL, 'p'},
                {"config", required_argument, NULL, 'c'},
                {"workers", required_argument, NULL, 'w'},
                {"server-workers", required_argument, NULL, 'S'},
                {"log-level", required_argument, NULL, 'l'},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {"check-config", no_argument, NULL, 'C'},
                {"user", no_argument, NULL, 'U'},
                {NULL, 0, NULL, 0},
        };
        ConfigArgs a = {.workers = -1, .server_workers = -1};
        unsigned long w;
        int c;

        optind = 1;
        while ((c = getopt_long(argc, argv, "s:p:c:w:l:h", opts, NULL)) != -1) {
                switch (c) {
                case 's':
                        a.socket_path = optarg;
                        break;
                case 'p':
                        a.plugin_dir = optarg;
                        break;
                case 'c':
                        a.config_file = optarg;
                        break;
                case 'w':
                        if (parse_ulong(optarg, 0, SCHED_MAX_CPUS, &w) < 0) {
                                fprintf(stderr, "%s: --workers wants 0..%d, got '%s'\n", argv[0],
                                        SCHED_MAX_CPUS, optarg);
                                return -EINVAL;
                        }
                        a.workers = (long)w;
                        break;
                case 'S':
                        if (parse_ulong(optarg, 0, CONFIG_SERVER_WORKERS_MAX, &w) < 0) {
                                fprintf(stderr, "%s: --server-workers wants 0..%d, got '%s'\n",
                                        argv[0], CONFIG_SERVER_WORKERS_MAX, optarg);
                                return -EINVAL;
                        }
                        a.server_workers = (long)w;
                        break;
                case 'l':
                        if (log_level_parse(optarg) < 0) {
                                fprintf(stderr,
                                        "%s: --log-level wants err, warning, notice, info "
                                        "or debug, got '%s'\n",
                                        argv[0], optarg);
                                return -EINVAL;
                        }
                        a.log_level = optarg;
                        break;
                case 'h':
                        usage(stdout, argv[0]);
                        return 1;
                case 'V':
                        printf("fiberd %s\n", FIBERD_VERSION);
                        return 1;
                case 'C':
                        a.check_config = true;
                        break;
                case 'U':
                        a.user = true;
                        break;
                default:
                        usage(stderr, argv[0]);
                        return -EINVAL;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", argv[0],
                        argv[optind]);
                return -EINVAL;
        }
        *ret = a;
        return 0;
}

/* ------------------------------------------------------------------ the file ---- */

typedef enum { KEY_STRING, KEY_UINT, KEY_LEVEL, KEY_BOOL, KEY_WORD } KeyKind;

/* One accepted word of a KEY_WORD key and the enum value it stands for. */
typedef struct ConfigWord {
        const char *word;
        int value;
} ConfigWord;

typedef struct ConfigKey {
        const char *section;
        const char *name;
        KeyKind kind;
        size_t offset;           /* of the field in Config */
        unsigned long min, max;  /* KEY_UINT bounds, in the file's unit */
        uint64_t scale;          /* KEY_UINT: file unit -> field unit */
        unsigned width;          /* KEY_UINT: sizeof the field */
        const ConfigWord *words; /* KEY_WORD: the accepted words, NULL-terminated; the
                                  * field is an enum (int-sized) */
} ConfigKey;

_Static_assert(sizeof(SchedOptimizeFor) == sizeof(int) && sizeof(SchedNuma) == sizeof(int) &&
                       sizeof(SchedQueuePolicy) == sizeof(int),
               "KEY_WORD fields are stored as int");

#define UKEY(sec, key, field, lo, hi, mul)                                                         \
        {                                                                                          \
                sec, key, KEY_UINT, offsetof(Config, field), lo, hi, mul,                          \
                        sizeof(((Config *)0)->field), NULL                                         \
        }
#define WKEY(sec, key, field, list)                                                                \
        {                                                                                          \
                sec, key, KEY_WORD, offsetof(Config, field), 0, 0, 0, 0, list                      \
        }

static const ConfigWord optimize_words[] = {
        {"compute-heavy", SCHED_OPTIMIZE_COMPUTE_HEAVY},
        {"compute", SCHED_OPTIMIZE_COMPUTE},
        {"neutral", SCHED_OPTIMIZE_NEUTRAL},
        {"io", SCHED_OPTIMIZE_IO},
        {"io-heavy", SCHED_OPTIMIZE_IO_HEAVY},
        {NULL, 0},
};

static const ConfigWord numa_words[] = {
        {"auto", SCHED_NUMA_AUTO},
        {"on", SCHED_NUMA_ON},
        {"off", SCHED_NUMA_OFF},
        {NULL, 0},
};

static const ConfigWord queue_words[] = {
        {"shared", SCHED_QUEUE_SHARED},
        {"local", SCHED_QUEUE_LOCAL},
        {"default", SCHED_QUEUE_DEFAULT},
        {NULL, 0},
};

/* [store] backend: StoreKind values (store.h) */
static const ConfigWord store_words[] = {
        {"sqlite", STORE_SQLITE},
        {"memory", STORE_MEMORY},
        {"redis", STORE_REDIS},
        {NULL, 0},
};

static const ConfigKey config_keys[] = {
        {"fiberd", "socket", KEY_STRING, offsetof(Config, socket_path), 0, 0, 0, 0, NULL},
        {"fiberd", "plugin_dir", KEY_STRING, offsetof(Config, plugin_dir), 0, 0, 0, 0, NULL},
        {"fiberd", "log_level", KEY_LEVEL, offsetof(Config, log_level), 0, 0, 0, 0, NULL},
        {"fiberd", "log_jobs", KEY_BOOL, offsetof(Config, log_jobs), 0, 0, 0, 0, NULL},
        UKEY("fiberd", "workers", workers, 0, SCHED_MAX_CPUS, 1),
        UKEY("fiberd", "stop_timeout_ms", stop_timeout_ns, 0, 3600000, NSEC_PER_MSEC),
        UKEY("jobs", "max_running", max_running, 1, 65536, 1),
        UKEY("jobs", "max_queued", max_queued, 1, 100000000, 1),
        UKEY("jobs", "retention_s", retention_ns, 0, 30 * 86400, NSEC_PER_SEC),
        UKEY("jobs", "retention_max", retention_max, 0, 10000000, 1),
        UKEY("jobs", "retention_max_per_user", retention_max_per_user, 0, 10000000, 1),
        UKEY("jobs", "dead_retention_s", dead_retention_ns, 0, 366 * 86400, NSEC_PER_SEC),
        UKEY("jobs", "dead_retention_max", dead_retention_max, 0, 10000000, 1),
        UKEY("jobs", "idempotency_window_s", key_window_ms, 0, 366 * 86400, 1000),
        {"jobs", "run_inline", KEY_BOOL, offsetof(Config, run_inline), 0, 0, 0, 0, NULL},
        UKEY("jobs", "max_running_per_user", max_running_per_user, 0, 65536, 1),
        UKEY("jobs", "max_queued_per_user", max_queued_per_user, 0, 100000000, 1),
        UKEY("jobs", "submit_rate_per_user", submit_rate_per_user, 0, 10000000, 1),
        UKEY("jobs", "submit_burst_per_user", submit_burst_per_user, 0, 10000000, 1),
        UKEY("jobs", "max_bytes_per_user", max_bytes_per_user, 0, 1UL << 40, 1),
        UKEY("jobs", "max_bytes", max_bytes, 0, 1UL << 40, 1),
        UKEY("jobs", "max_result_bytes", max_result_bytes, 1024, 1UL << 30, 1),
        UKEY("ipc", "max_message", max_message, 1024, 1UL << 30, 1),
        /* resource limits of the server (server.h's ServerLimits) */
        UKEY("ipc", "max_connections", max_connections, 0, 1000000, 1),
        UKEY("ipc", "max_connections_per_user", max_connections_per_user, 1, 1000000, 1),
        UKEY("ipc", "max_in_flight", max_in_flight, 1, 65536, 1),
        UKEY("ipc", "max_in_flight_per_user", max_in_flight_per_user, 1, 1048576, 1),
        UKEY("ipc", "max_partial_bytes", max_partial_bytes, 65536, 1UL << 40, 1),
        UKEY("ipc", "read_timeout_ms", read_timeout_ns, 100, 3600000, NSEC_PER_MSEC),
        UKEY("server", "workers", server_workers, 0, CONFIG_SERVER_WORKERS_MAX, 1),
        {"access", "admin_group", KEY_STRING, offsetof(Config, admin_group), 0, 0, 0, 0, NULL},
        {"access", "submit_group", KEY_STRING, offsetof(Config, submit_group), 0, 0, 0, 0, NULL},
        WKEY("store", "backend", store_backend, store_words),
        {"store", "path", KEY_STRING, offsetof(Config, store_path), 0, 0, 0, 0, NULL},
        {"store", "redis", KEY_STRING, offsetof(Config, store_redis), 0, 0, 0, 0, NULL},
        {"store", "stream", KEY_STRING, offsetof(Config, store_stream), 0, 0, 0, 0, NULL},
        {"store", "group", KEY_STRING, offsetof(Config, store_group), 0, 0, 0, 0, NULL},
        {"store", "node", KEY_STRING, offsetof(Config, store_node), 0, 0, 0, 0, NULL},
        UKEY("store", "claim_idle_ms", store_claim_idle_ns, 1, 86400000, NSEC_PER_MSEC),
        UKEY("store", "commit_delay_us", store_commit_delay_ns, 0, 100000, NSEC_PER_USEC),
        WKEY("scheduler", "optimize_for", sched.optimize_for, optimize_words),
        UKEY("scheduler", "groups", sched.groups, 0, SCHED_MAX_CPUS, 1),
        UKEY("scheduler", "group_size", sched.group_size, 0, 64, 1),
        WKEY("scheduler", "numa", sched.numa, numa_words),
        {"scheduler", "pin_workers", KEY_BOOL, offsetof(Config, sched.pin_workers), 0, 0, 0, 0,
         NULL},
        UKEY("scheduler", "steal_every_n", sched.steal_every_n, 0, 1000000, 1),
        UKEY("scheduler", "cross_node_steal_every_n", sched.cross_node_steal_every_n, 0, 1000000,
             1),
        WKEY("scheduler", "queue_policy", sched.queue_policy, queue_words),
        UKEY("scheduler", "task_quota_us", sched.control.task_quota_ns, 1, 1000000, NSEC_PER_USEC),
        UKEY("scheduler", "stall_threshold_ms", sched.control.stall_threshold_ns, 0, 3600000,
             NSEC_PER_MSEC),
        UKEY("scheduler", "rescue_after_ms", sched.control.rescue_after_ns, 0, 3600000,
             NSEC_PER_MSEC),
        UKEY("scheduler", "max_spare_workers", sched.control.max_spare_workers, 0, 64, 1),
        {"scheduler", "hooks", KEY_BOOL, offsetof(Config, sched.control.hook_blocking_calls), 0, 0,
         0, 0, NULL},
        {"metrics", "listen", KEY_STRING, offsetof(Config, metrics_listen), 0, 0, 0, 0, NULL},
        {"metrics", "allow_remote", KEY_BOOL, offsetof(Config, metrics_allow_remote), 0, 0, 0, 0,
         NULL},
};

#define CLASS_SECTION_PREFIX "class."
#define PLUGIN_SECTION_PREFIX "plugin."

/* [A-Za-z0-9_.-]{1,SCHED_CLASS_NAME_MAX} */
static bool class_name_valid(const char *name)
{
        size_t n = strlen(name);

        if (n == 0 || n > SCHED_CLASS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char ch = name[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
                        return false;
        }
        return true;
}

/* true/false, yes/no, on/off, 1/0. Return: 0 and *@ret, or -EINVAL. */
static int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return -EINVAL;
}

/* One of @words, exactly. Return: 0 and *@ret, or -EINVAL. */
static int parse_word(const char *s, const ConfigWord *words, int *ret)
{
        for (; words->word; words++)
                if (strcmp(s, words->word) == 0) {
                        *ret = words->value;
                        return 0;
                }
        return -EINVAL;
}

/* "a, b or c" from @words into @buf (truncated to @size). */
static void format_words(const ConfigWord *words, char *buf, size_t size)
{
        size_t n = 0;

        buf[0] = '\0';
        for (size_t i = 0; words[i].word && n < size; i++) {
                const char *sep = i == 0 ? "" : words[i + 1].word ? ", " : " or ";
                int w = snprintf(buf + n, size - n, "%s%s", sep, words[i].word);
                if (w < 0)
                        break;
                n += (size_t)w;
        }
}

/* A key the file set, for the duplicate check: "section\0name" and its line. */
typedef struct ConfigSeen {
        char *key; /* owned */
        unsigned line;
} ConfigSeen;

/*
 * The state of one file's parse. inih reads the file through config_read_line(), one
 * physical line per call, so @line is the line of the key the handler sees (Debian's
 * inih has no INI_HANDLER_LINENO); every error is logged as "file:line: text" when it
 * is found, and the parse goes on, so one run names them all.
 */
typedef struct ConfigParse {
        Config *cfg;
        const char *file;
        FILE *f;
        char *buf; /* getline()'s */
        size_t buf_size;
        unsigned line;    /* the line read last, from 1 */
        unsigned errors;  /* errors logged */
        int error;        /* -ENOMEM: the parse stopped; else 0 */
        int first_error;  /* the first error, negative errno; 0 = none */
        ConfigSeen *seen; /* keys set so far */
        size_t nseen, seen_cap;
        char message[256]; /* what was wrong with the key in hand */
        bool quiet;        /* config_load_quiet(): keep the errors, log none */
        char first[320];   /* the first error as it would be logged; "" = none */
} ConfigParse;

/* Counts an error, worded in @line, and logs it unless @p is quiet; the first is kept
 * in p->first either way. */
static void config_report_line(ConfigParse *p, const char *line)
{
        if (!p->first[0])
                snprintf(p->first, sizeof(p->first), "%s", line);
        if (!p->quiet)
                log_msg(LOG_ERR, "%s", line);
        p->errors++;
}

/* Logs p->message as the error of the current line (none: of the file, or of the
 * settings when no file is read) and counts it. */
static void config_report(ConfigParse *p)
{
        char line[sizeof(p->first)];

        if (p->file && p->line)
                snprintf(line, sizeof(line), "%s:%u: %s", p->file, p->line, p->message);
        else if (p->file)
                snprintf(line, sizeof(line), "%s: %s", p->file, p->message);
        else
                snprintf(line, sizeof(line), "%s", p->message);
        config_report_line(p, line);
        if (!p->first_error)
                p->first_error = -EINVAL;
}

/* One key of a [class.NAME] section: finds or appends the class. Return: 1 (inih's
 * "go on"), also after a bad key (logged and counted: config_report()). */
static int config_class_key(ConfigParse *p, const char *section, const char *name,
                            const char *value)
{
        const char *cname = section + strlen(CLASS_SECTION_PREFIX);
        Config *c = p->cfg;
        unsigned long v = 0;
        bool admin_only = false;
        unsigned i;

        if (!class_name_valid(cname)) {
                snprintf(p->message, sizeof(p->message),
                         "[%s]: bad class name (want 1..%d of A-Z a-z 0-9 _ . -)", section,
                         SCHED_CLASS_NAME_MAX);
                goto out_invalid;
        }
        if (strcmp(name, "shares") != 0 && strcmp(name, "admin_only") != 0 &&
            strcmp(name, "max_running") != 0) {
                snprintf(p->message, sizeof(p->message),
                         "unknown key '%s' in section [%s]; a class has shares, admin_only "
                         "and max_running",
                         name, section);
                goto out_invalid;
        }
        if (strcmp(name, "max_running") == 0 && parse_ulong(value, 0, UINT_MAX, &v) < 0) {
                snprintf(p->message, sizeof(p->message),
                         "[%s] max_running: bad value '%s' (want 0..%u; 0 = no cap)", section,
                         value, UINT_MAX);
                goto out_invalid;
        }
        if (strcmp(name, "admin_only") == 0 && parse_bool(value, &admin_only) < 0) {
                snprintf(p->message, sizeof(p->message),
                         "[%s] admin_only: bad value '%s' (want true or false)", section, value);
                goto out_invalid;
        }
        if (strcmp(name, "shares") == 0 &&
            parse_ulong(value, SCHED_SHARES_MIN, SCHED_SHARES_MAX, &v) < 0) {
                snprintf(p->message, sizeof(p->message),
                         "[%s] shares: bad value '%s' (want %d..%d)", section, value,
                         SCHED_SHARES_MIN, SCHED_SHARES_MAX);
                goto out_invalid;
        }
        for (i = 0; i < c->nclasses; i++)
                if (strcmp(c->classes[i].name, cname) == 0)
                        break;
        if (i == c->nclasses) {
                if (c->nclasses == SCHED_MAX_CLASSES) {
                        snprintf(p->message, sizeof(p->message),
                                 "[%s]: too many classes (at most %d, \"default\" included)",
                                 section, SCHED_MAX_CLASSES);
                        goto out_invalid;
                }
                snprintf(c->classes[i].name, sizeof(c->classes[i].name), "%s", cname);
                c->classes[i].shares = 100; /* until its shares key says otherwise */
                c->classes[i].admin_only = false;
                c->nclasses++;
        }
        if (strcmp(name, "shares") == 0)
                c->classes[i].shares = (unsigned)v;
        else if (strcmp(name, "max_running") == 0)
                c->classes[i].max_running = (unsigned)v;
        else
                c->classes[i].admin_only = admin_only;
        return 1;

out_invalid:
        config_report(p);
        return 1;
}

bool config_plugin_name_valid(const char *name, size_t len)
{
        if (len == 0 || len > CONFIG_PLUGIN_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char ch = name[i];
                if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' ||
                      ch == '-'))
                        return false;
        }
        return true;
}

/* One key of a [plugin.NAME] section: finds or appends the plugin. Return: 1 (inih's
 * "go on"), also after a bad key (logged and counted: config_report()). */
static int config_plugin_key(ConfigParse *p, const char *section, const char *name,
                             const char *value)
{
        const char *pname = section + strlen(PLUGIN_SECTION_PREFIX);
        Config *c = p->cfg;
        unsigned long v;
        unsigned i;

        if (!config_plugin_name_valid(pname, strlen(pname))) {
                snprintf(p->message, sizeof(p->message),
                         "[%s]: bad plugin name (want 1..%d of a-z 0-9 _ -)", section,
                         CONFIG_PLUGIN_NAME_MAX);
                goto out_invalid;
        }
        if (strcmp(name, "max_running") != 0) {
                snprintf(p->message, sizeof(p->message),
                         "unknown key '%s' in section [%s]; a plugin section has max_running", name,
                         section);
                goto out_invalid;
        }
        if (parse_ulong(value, 0, UINT_MAX, &v) < 0) {
                snprintf(p->message, sizeof(p->message),
                         "[%s] max_running: bad value '%s' (want 0..%u; 0 = no cap)", section,
                         value, UINT_MAX);
                goto out_invalid;
        }
        for (i = 0; i < c->nplugins; i++)
                if (strcmp(c->plugins[i].name, pname) == 0)
                        break;
        if (i == c->nplugins) {
                if (c->nplugins == CONFIG_MAX_PLUGINS) {
                        snprintf(p->message, sizeof(p->message),
                                 "[%s]: too many plugin sections (at most %d)", section,
                                 CONFIG_MAX_PLUGINS);
                        goto out_invalid;
                }
                snprintf(c->plugins[i].name, sizeof(c->plugins[i].name), "%s", pname);
                c->nplugins++;
        }
        c->plugins[i].max_running = (unsigned)v;
        return 1;

out_invalid:
        config_report(p);
        return 1;
}

/* Debian's inih is built without INI_HANDLER_LINENO: the line comes from ini_parse(). */
/*
 * Whether [@section] @name was set before in this file: then an error naming both
 * lines (the file says two things; which one wins is nobody's guess to make), else
 * noted with its line. Return: 1 when a duplicate (reported), 0, -ENOMEM.
 */
static int config_seen(ConfigParse *p, const char *section, const char *name)
{
        size_t slen = strlen(section), nlen = strlen(name);
        char *key;

        for (size_t i = 0; i < p->nseen; i++)
                if (strcmp(p->seen[i].key, section) == 0 &&
                    strcmp(p->seen[i].key + slen + 1, name) == 0) {
                        snprintf(p->message, sizeof(p->message),
                                 "[%s] %s is set again (first on line %u); set it once", section,
                                 name, p->seen[i].line);
                        config_report(p);
                        return 1;
                }
        if (p->nseen == p->seen_cap) {
                size_t cap = p->seen_cap ? 2 * p->seen_cap : 64;
                ConfigSeen *n = realloc(p->seen, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                p->seen = n;
                p->seen_cap = cap;
        }
        key = malloc(slen + nlen + 2);
        if (!key)
                return -ENOMEM;
        memcpy(key, section, slen + 1);
        memcpy(key + slen + 1, name, nlen + 1);
        p->seen[p->nseen++] = (ConfigSeen){.key = key, .line = p->line};
        return 0;
}

static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
        ConfigParse *p = user;
        int r;

        if (p->error)
                return 0; /* out of memory: the parse is over */
        r = config_seen(p, section, name);
        if (r != 0) {
                if (r < 0)
                        p->error = r;
                return r == 0;
        }
        if (strncmp(section, CLASS_SECTION_PREFIX, strlen(CLASS_SECTION_PREFIX)) == 0)
                return config_class_key(p, section, name, value);
        if (strncmp(section, PLUGIN_SECTION_PREFIX, strlen(PLUGIN_SECTION_PREFIX)) == 0)
                return config_plugin_key(p, section, name, value);

        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                const ConfigKey *k = &config_keys[i];
                char *field = (char *)p->cfg + k->offset;
                unsigned long v;
                int level, word;
                bool b;

                if (strcmp(k->section, section) != 0 || strcmp(k->name, name) != 0)
                        continue;
                switch (k->kind) {
                case KEY_STRING: {
                        char *s = strdup(value);
                        if (!s) {
                                p->error = -ENOMEM;
                                return 0;
                        }
                        free(*(char **)field);
                        *(char **)field = s;
                        return 1;
                }
                case KEY_LEVEL:
                        level = log_level_parse(value);
                        if (level < 0)
                                break;
                        *(int *)field = level;
                        return 1;
                case KEY_UINT:
                        if (parse_ulong(value, k->min, k->max, &v) < 0)
                                break;
                        if (k->width == sizeof(uint64_t))
                                *(uint64_t *)field = (uint64_t)v * k->scale;
                        else
                                *(unsigned *)field = (unsigned)(v * k->scale);
                        return 1;
                case KEY_BOOL:
                        if (parse_bool(value, &b) < 0)
                                break;
                        *(bool *)field = b;
                        return 1;
                case KEY_WORD:
                        if (parse_word(value, k->words, &word) < 0)
                                break;
                        *(int *)field = word;
                        return 1;
                }
                {
                        char want[128];
                        if (k->kind == KEY_WORD)
                                format_words(k->words, want, sizeof(want));
                        else if (k->kind == KEY_BOOL)
                                snprintf(want, sizeof(want), "true or false");
                        else if (k->kind == KEY_UINT)
                                snprintf(want, sizeof(want), "%lu..%lu", k->min, k->max);
                        else
                                snprintf(want, sizeof(want), "err, warning, notice, info or debug");
                        snprintf(p->message, sizeof(p->message),
                                 "[%s] %s: bad value '%s' (want %s)", section, name, value, want);
                        config_report(p);
                }
                return 1;
        }
        snprintf(p->message, sizeof(p->message), "unknown key '%s' in section [%s]", name, section);
        config_report(p);
        return 1;
}

/*
 * inih's reader (ini_parse_stream()): one physical line a call, so p->line is the line
 * the handler sees. Leading blanks are dropped, so an indented line is never inih's
 * continuation of the key above (it would silently append to that key's value), and
 * the lines inih would refuse are reported here, each with its line (inih itself
 * returns only the first): a section without its ']', a line without '=' (or ':'),
 * a line longer than inih takes (@size, with its newline). Such a line reaches inih
 * blank. Return: @str, or NULL at the end of the file.
 */
static char *config_read_line(char *str, int size, void *stream)
{
        ConfigParse *p = stream;
        const char *s, *c;
        ssize_t n = getline(&p->buf, &p->buf_size, p->f);
        size_t len;

        if (n < 0)
                return NULL;
        p->line++;
        s = p->buf;
        if (p->line == 1 && strncmp(s, "\xEF\xBB\xBF", 3) == 0)
                s += 3; /* a UTF-8 byte order mark */
        s += strspn(s, " \t");
        len = strlen(s);
        while (len > 0 && strchr(" \t\r\n", s[len - 1]))
                len--;
        p->message[0] = '\0';
        if (len + 3 > (size_t)size)
                snprintf(p->message, sizeof(p->message), "line too long (%zu bytes; at most %d)",
                         len, size - 3);
        else if (len == 0 || *s == ';' || *s == '#')
                ; /* blank or a comment */
        else if (*s == '[' && !memchr(s, ']', len))
                snprintf(p->message, sizeof(p->message), "expected ']' to end the section name");
        else if (*s != '[') {
                /* inih's rule: '=' or ':' before an inline comment (" ;") */
                for (c = s; c < s + len; c++)
                        if (*c == '=' || *c == ':' || (*c == ';' && c > s && strchr(" \t", c[-1])))
                                break;
                if (c == s + len || *c == ';')
                        snprintf(p->message, sizeof(p->message),
                                 "syntax error (expected key = value, or [section])");
        }
        if (p->message[0]) {
                config_report(p);
                len = 0;
        }
        memcpy(str, s, len);
        str[len] = '\n';
        str[len + 1] = '\0';
        return str;
}

/* Whether systemd passed us listening sockets (sd_listen_fds(3)'s protocol: LISTEN_PID
 * is our pid). Then we are the system's fiberd whoever we run as (the hardened unit runs
 * it as a dynamic user), and the socket's path is the system one. */
static bool socket_activated(void)
{
        const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
        return pid && fds && strtol(pid, NULL, 10) == (long)getpid() && atoi(fds) > 0;
}

/* No path from the file, $FIBERD_SOCKET or -s: the default of socket_path.h, the system
 * socket or, for a per-user fiberd, $XDG_RUNTIME_DIR's. Never a shared /tmp path. */
static int config_default_socket(Config *c, bool user, ConfigParse *p)
{
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        int r = socket_path_default(user, path, sizeof(path));

        if (r == -ENOENT) {
                char line[sizeof(p->first)];

                snprintf(line, sizeof(line),
                         "no socket path: a %s fiberd listens on $XDG_RUNTIME_DIR/%s, and "
                         "XDG_RUNTIME_DIR is not set (or not absolute); run it in a login "
                         "session (or as a systemd --user service), or name the socket with "
                         "--socket PATH or FIBERD_SOCKET",
                         geteuid() != 0 ? "non-root" : "--user", SOCKET_PATH_USER_NAME);
                config_report_line(p, line);
                return -EINVAL;
        }
        if (r < 0) {
                char line[sizeof(p->first)];

                snprintf(line, sizeof(line),
                         "the default socket path under XDG_RUNTIME_DIR is longer than %zu "
                         "bytes, the limit of a Unix socket address; use --socket PATH",
                         sizeof(path) - 1);
                config_report_line(p, line);
                return -EINVAL;
        }
        c->socket_path = strdup(path);
        return c->socket_path ? 0 : -ENOMEM;
}

static int config_set_string(char **field, const char *value)
{
        char *s = strdup(value);

        if (!s)
                return -ENOMEM;
        free(*field);
        *field = s;
        return 0;
}

/* The gid of group @name (a name, or a number), or CONFIG_NO_GROUP for "" or a group
 * the database does not know. */
static gid_t config_group_gid(const char *name)
{
        struct group gr, *res = NULL;
        char buf[4096], *end;
        unsigned long v;

        if (!name || !*name)
                return CONFIG_NO_GROUP;
        v = strtoul(name, &end, 10);
        if (!*end && v < CONFIG_NO_GROUP)
                return (gid_t)v;
        if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
                return CONFIG_NO_GROUP;
        return gr.gr_gid;
}

/* [metrics] listen: an address metrics_http.c can bind, loopback unless allow_remote
 * (checked here too, so --check-config says so). Return: 0; -EINVAL, reported naming
 * @file. */
static int config_check_metrics(const Config *c, const char *file, ConfigParse *p)
{
        char line[sizeof(p->first)];
        struct sockaddr_storage ss;
        socklen_t len;

        if (!*c->metrics_listen)
                return 0;
        if (metrics_http_parse_address(c->metrics_listen, &ss, &len) < 0) {
                snprintf(line, sizeof(line),
                         "%s: [metrics] listen: bad value '%s' (want HOST:PORT with an IPv4 "
                         "address or localhost, or [IPV6]:PORT)",
                         file, c->metrics_listen);
                config_report_line(p, line);
                return -EINVAL;
        }
        if (!c->metrics_allow_remote && !metrics_http_is_loopback((struct sockaddr *)&ss)) {
                snprintf(line, sizeof(line),
                         "%s: [metrics] listen = %s is not a loopback address; set [metrics] "
                         "allow_remote = true to serve the metrics to other hosts",
                         file, c->metrics_listen);
                config_report_line(p, line);
                return -EINVAL;
        }
        return 0;
}

/* The line of the file that set [@section] @name; 0 = the file did not set it. */
static unsigned config_line_of(const ConfigParse *p, const char *section, const char *name)
{
        size_t slen = strlen(section);

        for (size_t i = 0; i < p->nseen; i++)
                if (strcmp(p->seen[i].key, section) == 0 &&
                    strcmp(p->seen[i].key + slen + 1, name) == 0)
                        return p->seen[i].line;
        return 0;
}

static void config_parse_done(ConfigParse *p)
{
        for (size_t i = 0; i < p->nseen; i++)
                free(p->seen[i].key);
        free(p->seen);
        free(p->buf);
        p->seen = NULL;
        p->buf = NULL;
        p->nseen = p->seen_cap = 0;
}

/* Whether @st is /dev/null's device (1:3): "no settings", as tests and scripts pass. */
static bool config_is_dev_null(const struct stat *st)
{
        return S_ISCHR(st->st_mode) && major(st->st_rdev) == 1 && minor(st->st_rdev) == 3;
}

/*
 * Reads @file into @c through @p (p->cfg is @c), every error logged and counted in @p.
 * A missing file is no error unless @must_exist (--config names it). Anything but a
 * regular file (or /dev/null) is refused before a byte is read: opened O_NONBLOCK, so a
 * FIFO with no writer does not hang the start, and checked with fstat(). The file read
 * is noted in c->config_file. Return: 0 (errors are in @p); -ENOMEM.
 */
static int config_read_file(Config *c, const char *file, bool must_exist, ConfigParse *p)
{
        int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
        struct stat st;
        int r;

        p->file = file;
        p->line = 0;
        if (fd < 0) {
                r = -errno;
                if (r == -ENOENT && !must_exist)
                        return 0; /* the default file may be absent: the defaults */
                goto out_report;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto out_close;
        }
        if (!S_ISREG(st.st_mode) && !config_is_dev_null(&st)) {
                snprintf(p->message, sizeof(p->message),
                         "not a regular file (%s): the configuration is a file of INI text",
                         S_ISDIR(st.st_mode)    ? "a directory"
                         : S_ISFIFO(st.st_mode) ? "a FIFO"
                         : S_ISSOCK(st.st_mode) ? "a socket"
                         : S_ISCHR(st.st_mode)  ? "a character device"
                                                : "a block device");
                config_report(p);
                close(fd);
                return 0;
        }
        /* back to blocking reads: it is a file */
        if (fcntl(fd, F_SETFL, 0) < 0 || !(p->f = fdopen(fd, "r"))) {
                r = -errno;
                goto out_close;
        }
        r = ini_parse_stream(config_read_line, p, config_ini_handler, p);
        fclose(p->f);
        p->f = NULL;
        if (p->error < 0)
                return p->error;
        if (r != 0 && p->errors == 0) {
                /* a line inih refused that config_read_line() let through */
                p->line = r > 0 ? (unsigned)r : 0;
                snprintf(p->message, sizeof(p->message), "%s",
                         r > 0 ? "syntax error (expected key = value, or [section])"
                               : "cannot parse the file");
                config_report(p);
        }
        /* named as read even with errors: --check-config says which file it checked */
        c->config_file = strdup(file);
        return c->config_file ? 0 : -ENOMEM;

out_close:
        close(fd);
out_report:
        if (r == -ENOMEM)
                return r;
        if (!p->first_error)
                p->first_error = r; /* -ENOENT, -EACCES, ...: config_load()'s return */
        snprintf(p->message, sizeof(p->message), "cannot open config file: %s", strerror(-r));
        config_report(p);
        return 0;
}

static int config_load_impl(Config *ret, const ConfigArgs *args, bool quiet,
                            ConfigErrors *ret_errors, char *first, size_t first_size)
{
        Config c = {
                .workers = 0,
                .log_level = LOG_INFO,
                .log_jobs = true,
                .stop_timeout_ns = 5000 * NSEC_PER_MSEC,
                .max_running = 256,
                .max_queued = 100000,
                .retention_ns = 600 * NSEC_PER_SEC,
                .retention_max = 10000,
                .dead_retention_ns = 7ull * 86400 * NSEC_PER_SEC,
                .dead_retention_max = 10000,
                .key_window_ms = 86400ull * 1000,
                .max_running_per_user = 64,
                .run_inline = true,
                .max_queued_per_user = 10000,
                .retention_max_per_user = 1000,
                .max_bytes_per_user = 256ull << 20,
                .max_bytes = 2ull << 30,
                .max_result_bytes = 1 << 20,
                .max_message = 1 << 20,
                .store_claim_idle_ns = 30000 * NSEC_PER_MSEC,
                .store_commit_delay_ns = 1000 * NSEC_PER_USEC,
                .max_connections = 0,
                .max_connections_per_user = 64,
                .max_in_flight = 512,
                .max_in_flight_per_user = 2048,
                .max_partial_bytes = 64 << 20,
                .read_timeout_ns = 10 * NSEC_PER_SEC,
                .server_workers = 1, /* one: what fiberd always ran */
                .sched = {.optimize_for = SCHED_OPTIMIZE_NEUTRAL,
                          .numa = SCHED_NUMA_AUTO,
                          .steal_every_n = 16,
                          .queue_policy = SCHED_QUEUE_DEFAULT,
                          .control = {.task_quota_ns = 500 * NSEC_PER_USEC,
                                      .stall_threshold_ns = 100 * NSEC_PER_MSEC,
                                      .rescue_after_ns = 20 * NSEC_PER_MSEC,
                                      .max_spare_workers = 0,
                                      .hook_blocking_calls = true}},
                .classes = {{.name = "default", .shares = 100}},
                .nclasses = 1,
        };
        ConfigParse p = {.cfg = &c, .quiet = quiet};
        const char *env;
        int r;

        c.plugin_dir = strdup(FIBERD_PLUGIN_DIR);
        c.admin_group = strdup("fiberd-admin");
        c.submit_group = strdup("");
        c.store_redis = strdup("127.0.0.1:6379");
        c.store_stream = strdup("fiberd:jobs");
        c.store_group = strdup("fiberd");
        c.store_node = strdup("");
        c.metrics_listen = strdup("");
        if (!c.plugin_dir || !c.admin_group || !c.submit_group || !c.store_redis ||
            !c.store_stream || !c.store_group || !c.store_node || !c.metrics_listen) {
                r = -ENOMEM;
                goto out_free;
        }
        r = config_read_file(&c, args->config_file ? args->config_file : FIBERD_CONFIG_FILE,
                             args->config_file != NULL, &p);
        if (r < 0)
                goto out_free;
        env = getenv("FIBERD_SOCKET");
        if (env && *env && (r = config_set_string(&c.socket_path, env)) < 0)
                goto out_free;
        if (args->socket_path && (r = config_set_string(&c.socket_path, args->socket_path)) < 0)
                goto out_free;
        if (args->plugin_dir && (r = config_set_string(&c.plugin_dir, args->plugin_dir)) < 0)
                goto out_free;
        if (!c.socket_path) {
                r = config_default_socket(&c,
                                          args->user || (geteuid() != 0 && !socket_activated() &&
                                                         !args->socket_passed),
                                          &p);
                if (r == -ENOMEM)
                        goto out_free;
                if (r < 0) /* reported */
                        p.first_error = p.first_error ? p.first_error : r;
        }
        if (args->workers >= 0)
                c.workers = (unsigned)args->workers;
        if (args->server_workers >= 0)
                c.server_workers = (unsigned)args->server_workers;
        if (args->log_level)
                c.log_level = log_level_parse(args->log_level);
        c.admin_gid = config_group_gid(c.admin_group);
        c.submit_gid = config_group_gid(c.submit_group);
        if (*c.submit_group && c.submit_gid == CONFIG_NO_GROUP) {
                /* the file's line, when the file set it */
                p.line = config_line_of(&p, "access", "submit_group");
                snprintf(p.message, sizeof(p.message),
                         "[access] submit_group: there is no group '%s'", c.submit_group);
                config_report(&p);
        }
        if (config_check_metrics(&c, args->config_file ? args->config_file : FIBERD_CONFIG_FILE,
                                 &p) < 0) /* reported */
                p.first_error = p.first_error ? p.first_error : -EINVAL;
        /* 0 stays 0: sched_new() then takes the CPUs in this process's affinity mask */
        c.sched.concurrency = c.workers;
        /* the file's 0 is "never"; the runtime's 0 would be its default of 16 */
        if (c.sched.steal_every_n == 0)
                c.sched.steal_every_n = UINT_MAX;
        /* the file's 0 is "off"; the runtime's 0 would be its default */
        if (c.sched.control.stall_threshold_ns == 0)
                c.sched.control.stall_threshold_ns = SCHED_FOREVER;
        if (c.sched.control.rescue_after_ns == 0)
                c.sched.control.rescue_after_ns = SCHED_FOREVER;
        *ret_errors = (ConfigErrors){.n = p.errors, .first = p.first_error};
        if (first && first_size)
                snprintf(first, first_size, "%s", p.first);
        config_parse_done(&p);
        *ret = c;
        return 0;

out_free:
        config_parse_done(&p);
        config_done(&c);
        return r;
}

int config_load_report(Config *ret, const ConfigArgs *args, ConfigErrors *ret_errors)
{
        return config_load_impl(ret, args, false, ret_errors, NULL, 0);
}

int config_load_quiet(Config *ret, const ConfigArgs *args, char *msg, size_t size)
{
        char first[sizeof(((ConfigParse *)0)->first)];
        ConfigErrors e;
        Config c;
        int r = config_load_impl(&c, args, true, &e, first, sizeof(first));

        if (r < 0) {
                snprintf(msg, size, "%s", strerror(-r));
                return r;
        }
        if (e.n > 0) {
                if (e.n > 1)
                        snprintf(msg, size,
                                 "%s (and %u more errors: fiberd --check-config names each)", first,
                                 e.n - 1);
                else
                        snprintf(msg, size, "%s", first);
                config_done(&c);
                return e.first;
        }
        *ret = c;
        return 0;
}

int config_load(Config *ret, const ConfigArgs *args)
{
        ConfigErrors e;
        Config c;
        int r = config_load_report(&c, args, &e);

        if (r < 0)
                return r;
        if (e.n > 0) {
                if (e.n > 1)
                        log_msg(LOG_ERR, "%u errors in the configuration", e.n);
                config_done(&c);
                return e.first;
        }
        *ret = c;
        return 0;
}

unsigned config_sched_classes(const Config *c, SchedClassConfig *ret)
{
        for (unsigned i = 0; i < c->nclasses; i++)
                ret[i] = (SchedClassConfig){.name = c->classes[i].name,
                                            .shares = c->classes[i].shares};
        return c->nclasses;
}

/* The class named @name in @c, or NULL. */
const ConfigClass *config_class_find(const Config *c, const char *name)
{
        for (unsigned i = 0; i < c->nclasses; i++)
                if (strcmp(c->classes[i].name, name) == 0)
                        return &c->classes[i];
        return NULL;
}

const ConfigPlugin *config_plugin_find(const Config *c, const char *name)
{
        for (unsigned i = 0; i < c->nplugins; i++)
                if (strcmp(c->plugins[i].name, name) == 0)
                        return &c->plugins[i];
        return NULL;
}

/* ---------------------------------------------------------- print, diff ---- */

/* The names log_level_parse() reads, by syslog priority; below LOG_ERR, the digit. */
static const char *const level_names[] = {
        [LOG_ERR] = "err",   [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
        [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
};

/* @k's value in @c, written as the file writes it, into @buf. */
static void key_format(const Config *c, const ConfigKey *k, char *buf, size_t size)
{
        const char *field = (const char *)c + k->offset;
        uint64_t v;
        int level;

        switch (k->kind) {
        case KEY_STRING:
                snprintf(buf, size, "%s", *(char *const *)field ? *(char *const *)field : "");
                return;
        case KEY_LEVEL:
                level = *(const int *)field;
                if (level >= 0 && level < (int)ELEMENTSOF(level_names) && level_names[level])
                        snprintf(buf, size, "%s", level_names[level]);
                else
                        snprintf(buf, size, "%d", level);
                return;
        case KEY_UINT:
                v = k->width == sizeof(uint64_t) ? *(const uint64_t *)field
                                                 : *(const unsigned *)field;
                /* config_load() turned the file's 0 ("never") into the runtime's UINT_MAX */
                if (k->offset == offsetof(Config, sched.steal_every_n) && v == UINT_MAX)
                        v = 0;
                /* ... and the 0 ("off") of the stall detector and rescue into SCHED_FOREVER */
                if ((k->offset == offsetof(Config, sched.control.stall_threshold_ns) ||
                     k->offset == offsetof(Config, sched.control.rescue_after_ns)) &&
                    v == SCHED_FOREVER)
                        v = 0;
                snprintf(buf, size, "%llu", (unsigned long long)(v / k->scale));
                return;
        case KEY_BOOL:
                snprintf(buf, size, "%s", *(const bool *)field ? "true" : "false");
                return;
        case KEY_WORD:
                for (const ConfigWord *w = k->words; w->word; w++)
                        if (w->value == *(const int *)field) {
                                snprintf(buf, size, "%s", w->word);
                                return;
                        }
                snprintf(buf, size, "%d", *(const int *)field);
                return;
        }
}

/* Whether a reload applies @k: the socket, the workers, the server group, the job
 * scheduler's layout, the store and the metrics endpoint are built once, at start. */
static bool key_is_live(const ConfigKey *k)
{
        if (strcmp(k->section, "scheduler") == 0 || strcmp(k->section, "store") == 0 ||
            strcmp(k->section, "metrics") == 0 || strcmp(k->section, "server") == 0)
                return false;
        return !(strcmp(k->section, "fiberd") == 0 &&
                 (strcmp(k->name, "socket") == 0 || strcmp(k->name, "workers") == 0));
}

unsigned config_server_workers(const Config *c, unsigned ncpus)
{
        unsigned n;

        if (c->server_workers > 0)
                return c->server_workers;
        n = (ncpus + CONFIG_SERVER_CPUS_PER_WORKER - 1) / CONFIG_SERVER_CPUS_PER_WORKER;
        return n < 1 ? 1 : n > CONFIG_SERVER_WORKERS_AUTO_MAX ? CONFIG_SERVER_WORKERS_AUTO_MAX : n;
}

int config_print(const Config *c, FILE *f)
{
        const char *section = "";
        char value[PATH_MAX];

        fprintf(f, "# fiberd %s: the effective configuration\n", FIBERD_VERSION);
        if (c->config_file)
                fprintf(f, "# read from %s\n", c->config_file);
        else
                fprintf(f, "# no file read (%s is absent): the built-in defaults\n",
                        FIBERD_CONFIG_FILE);
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                const ConfigKey *k = &config_keys[i];

                if (strcmp(k->section, section) != 0) {
                        section = k->section;
                        fprintf(f, "[%s]\n", section);
                }
                key_format(c, k, value, sizeof(value));
                fprintf(f, "%s = %s\n", k->name, value);
        }
        for (unsigned i = 0; i < c->nclasses; i++)
                fprintf(f, "[%s%s]\nshares = %u\nadmin_only = %s\nmax_running = %u\n",
                        CLASS_SECTION_PREFIX, c->classes[i].name, c->classes[i].shares,
                        c->classes[i].admin_only ? "true" : "false", c->classes[i].max_running);
        for (unsigned i = 0; i < c->nplugins; i++)
                fprintf(f, "[%s%s]\nmax_running = %u\n", PLUGIN_SECTION_PREFIX, c->plugins[i].name,
                        c->plugins[i].max_running);
        return fflush(f) == 0 && !ferror(f) ? 0 : -EIO;
}

/* Appends @word to the ", "-separated list in @buf (truncated to @size). */
static void list_append(char *buf, size_t size, const char *word)
{
        size_t n = strlen(buf);

        if (n + 1 < size)
                snprintf(buf + n, size - n, "%s%s", n ? ", " : "", word);
}

void config_diff(const Config *old, const Config *new, char *live, size_t live_size, char *restart,
                 size_t restart_size)
{
        char a[PATH_MAX], b[PATH_MAX], name[96];

        live[0] = restart[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                const ConfigKey *k = &config_keys[i];

                key_format(old, k, a, sizeof(a));
                key_format(new, k, b, sizeof(b));
                if (strcmp(a, b) == 0)
                        continue;
                if (strcmp(k->section, "fiberd") == 0)
                        snprintf(name, sizeof(name), "%s", k->name);
                else
                        snprintf(name, sizeof(name), "[%s] %s", k->section, k->name);
                if (key_is_live(k))
                        list_append(live, live_size, name);
                else
                        list_append(restart, restart_size, name);
        }
        /* classes: new shares, admin_only and max_running apply at once; a class added
         * or removed waits for a restart */
        for (unsigned i = 0; i < new->nclasses; i++) {
                const ConfigClass *o = config_class_find(old, new->classes[i].name);

                if (o && o->shares == new->classes[i].shares &&
                    o->admin_only == new->classes[i].admin_only &&
                    o->max_running == new->classes[i].max_running)
                        continue;
                snprintf(name, sizeof(name), "[%s%s]%s", CLASS_SECTION_PREFIX, new->classes[i].name,
                         !o                                            ? ""
                         : o->shares != new->classes[i].shares         ? " shares"
                         : o->admin_only != new->classes[i].admin_only ? " admin_only"
                                                                       : " max_running");
                list_append(o ? live : restart, o ? live_size : restart_size, name);
        }
        /* plugin sections: all live */
        for (unsigned i = 0; i < new->nplugins; i++) {
                const ConfigPlugin *o = config_plugin_find(old, new->plugins[i].name);

                if (o && o->max_running == new->plugins[i].max_running)
                        continue;
                snprintf(name, sizeof(name), "[%s%s] max_running", PLUGIN_SECTION_PREFIX,
                         new->plugins[i].name);
                list_append(live, live_size, name);
        }
        for (unsigned i = 0; i < old->nplugins; i++)
                if (!config_plugin_find(new, old->plugins[i].name)) {
                        snprintf(name, sizeof(name), "[%s%s] (removed)", PLUGIN_SECTION_PREFIX,
                                 old->plugins[i].name);
                        list_append(live, live_size, name);
                }
        for (unsigned i = 0; i < old->nclasses; i++)
                if (!config_class_find(new, old->classes[i].name)) {
                        snprintf(name, sizeof(name), "[%s%s] (removed)", CLASS_SECTION_PREFIX,
                                 old->classes[i].name);
                        list_append(restart, restart_size, name);
                }
}

void config_keep_restart_keys(Config *running, Config *next)
{
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++) {
                const ConfigKey *k = &config_keys[i];
                char *a = (char *)running + k->offset, *b = (char *)next + k->offset;
                size_t width = k->kind == KEY_STRING ? sizeof(char *)
                               : k->kind == KEY_UINT ? k->width
                               : k->kind == KEY_BOOL ? sizeof(bool)
                                                     : sizeof(int);
                char tmp[sizeof(uint64_t)];

                if (key_is_live(k))
                        continue;
                _Static_assert(sizeof(char *) <= sizeof(tmp), "a field fits tmp");
                memcpy(tmp, b, width);
                memcpy(b, a, width);
                memcpy(a, tmp, width); /* strings: each side keeps one to free */
        }
}

void config_done(Config *c)
{
        free(c->socket_path);
        free(c->plugin_dir);
        free(c->admin_group);
        free(c->submit_group);
        free(c->store_path);
        free(c->store_redis);
        free(c->store_stream);
        free(c->store_group);
        free(c->store_node);
        free(c->config_file);
        free(c->metrics_listen);
        c->socket_path = NULL;
        c->plugin_dir = NULL;
        c->admin_group = NULL;
        c->submit_group = NULL;
        c->store_path = NULL;
        c->store_redis = NULL;
        c->store_stream = NULL;
        c->store_group = NULL;
        c->store_node = NULL;
        c->config_file = NULL;
        c->metrics_listen = NULL;
}
