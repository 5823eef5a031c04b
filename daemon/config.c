/* SPDX-License-Identifier: MIT */
/*
 * config.c — defaults, inih file parsing, getopt_long flags (see config.h for the
 * precedence and the keys).
 *
 * The file is parsed with inih's ini_parse() into a Config that starts from the
 * defaults; every key has one row in a table (section, name, parser, field), so the
 * file format, the error messages and config.h's comment stay in step. Keys with a
 * fixed set of words ([scheduler] optimize_for, numa, queue_policy) carry their word
 * list in the row, so a bad value's message names the words accepted.
 */
#include "daemon/config.h"
#include "daemon/log.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <getopt.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

char *config_default_socket(void)
{
        const char *env = getenv("XDG_RUNTIME_DIR");
        char *p = NULL;

        if (geteuid() == 0)
                return strdup("/run/fiberd.sock");
        if (env && env[0] == '/') {
                if (asprintf(&p, "%s/fiberd.sock", env) < 0)
                        return NULL;
                return p;
        }
        if (asprintf(&p, "/tmp/fiberd-%u.sock", (unsigned)geteuid()) < 0)
                return NULL;
        return p;
}

static void usage(FILE *f, const char *argv0)
{
        fprintf(f,
                "Usage: %s [OPTIONS]\n"
                "Run fiberd, the fiber job daemon, in the foreground.\n\n"
                "  -s, --socket PATH      listening socket (default: /run/fiberd.sock as root,\n"
                "                         else $XDG_RUNTIME_DIR/fiberd.sock; $FIBERD_SOCKET\n"
                "                         overrides the default)\n"
                "  -p, --plugin-dir DIR   plugin directory (default: %s)\n"
                "  -c, --config FILE      INI configuration file (flags win over it)\n"
                "  -w, --workers N        job worker threads in all scheduling groups\n"
                "                         (default 0: one per CPU this process may use)\n"
                "  -l, --log-level LEVEL  err, warning, notice, info (default), debug\n"
                "  -h, --help             this text\n"
                "      --version          print the version\n",
                argv0, FIBERD_PLUGIN_DIR);
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
                {"log-level", required_argument, NULL, 'l'},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {NULL, 0, NULL, 0},
        };
        ConfigArgs a = {.workers = -1};
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

static const ConfigKey config_keys[] = {
        {"fiberd", "socket", KEY_STRING, offsetof(Config, socket_path), 0, 0, 0, 0, NULL},
        {"fiberd", "plugin_dir", KEY_STRING, offsetof(Config, plugin_dir), 0, 0, 0, 0, NULL},
        {"fiberd", "log_level", KEY_LEVEL, offsetof(Config, log_level), 0, 0, 0, 0, NULL},
        UKEY("fiberd", "workers", workers, 0, SCHED_MAX_CPUS, 1),
        UKEY("fiberd", "stop_timeout_ms", stop_timeout_ns, 0, 3600000, NSEC_PER_MSEC),
        UKEY("jobs", "max_running", max_running, 1, 65536, 1),
        UKEY("jobs", "max_queued", max_queued, 1, 100000000, 1),
        UKEY("jobs", "retention_s", retention_ns, 0, 30 * 86400, NSEC_PER_SEC),
        UKEY("jobs", "retention_max", retention_max, 0, 10000000, 1),
        UKEY("ipc", "max_message", max_message, 1024, 1UL << 30, 1),
        /* resource limits of the server (server.h's ServerLimits) */
        UKEY("ipc", "max_connections", max_connections, 0, 1000000, 1),
        UKEY("ipc", "max_connections_per_user", max_connections_per_user, 1, 1000000, 1),
        UKEY("ipc", "max_in_flight", max_in_flight, 1, 65536, 1),
        UKEY("ipc", "max_partial_bytes", max_partial_bytes, 65536, 1UL << 40, 1),
        UKEY("ipc", "read_timeout_ms", read_timeout_ns, 100, 3600000, NSEC_PER_MSEC),
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
};

/* true/false, yes/no, on/off, 1/0. Return: 0 and *@ret, or -EINVAL. */
static int parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"true", "yes", "on", "1"};
        static const char *const no[] = {"false", "no", "off", "0"};

        for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
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

typedef struct ConfigParse {
        Config *cfg;
        int error;         /* first error, negative errno */
        char message[256]; /* what was wrong with it; ini_parse() gives the line */
} ConfigParse;

/* Debian's inih is built without INI_HANDLER_LINENO: the line comes from ini_parse(). */
static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
        ConfigParse *p = user;

        for (size_t i = 0; i < sizeof(config_keys) / sizeof(config_keys[0]); i++) {
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
                if (!p->error) {
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
                        p->error = -EINVAL;
                }
                return 0;
        }
        if (!p->error) {
                snprintf(p->message, sizeof(p->message), "unknown key '%s' in section [%s]", name,
                         section);
                p->error = -EINVAL;
        }
        return 0;
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

int config_load(Config *ret, const ConfigArgs *args)
{
        Config c = {
                .workers = 0,
                .log_level = LOG_INFO,
                .stop_timeout_ns = 5000 * NSEC_PER_MSEC,
                .max_running = 256,
                .max_queued = 100000,
                .retention_ns = 600 * NSEC_PER_SEC,
                .retention_max = 10000,
                .max_message = 1 << 20,
                .max_connections = 0,
                .max_connections_per_user = 64,
                .max_in_flight = 128,
                .max_partial_bytes = 64 << 20,
                .read_timeout_ns = 10 * NSEC_PER_SEC,
                .sched = {.optimize_for = SCHED_OPTIMIZE_NEUTRAL,
                          .numa = SCHED_NUMA_AUTO,
                          .steal_every_n = 16,
                          .queue_policy = SCHED_QUEUE_DEFAULT},
        };
        const char *env;
        int r;

        c.socket_path = config_default_socket();
        c.plugin_dir = strdup(FIBERD_PLUGIN_DIR);
        if (!c.socket_path || !c.plugin_dir) {
                r = -ENOMEM;
                goto out_free;
        }
        if (args->config_file) {
                ConfigParse p = {.cfg = &c};
                r = ini_parse(args->config_file, config_ini_handler, &p);
                if (r == -1) {
                        log_msg(LOG_ERR, "cannot open config file %s: %m", args->config_file);
                        r = -ENOENT;
                        goto out_free;
                }
                if (p.error || r != 0) {
                        log_msg(LOG_ERR, "%s:%d: %s", args->config_file, r,
                                p.error ? p.message : "syntax error (expected key = value)");
                        r = p.error ? p.error : -EINVAL;
                        goto out_free;
                }
        }
        env = getenv("FIBERD_SOCKET");
        if (env && *env && (r = config_set_string(&c.socket_path, env)) < 0)
                goto out_free;
        if (args->socket_path && (r = config_set_string(&c.socket_path, args->socket_path)) < 0)
                goto out_free;
        if (args->plugin_dir && (r = config_set_string(&c.plugin_dir, args->plugin_dir)) < 0)
                goto out_free;
        if (args->workers >= 0)
                c.workers = (unsigned)args->workers;
        if (args->log_level)
                c.log_level = log_level_parse(args->log_level);
        /* 0 stays 0: sched_new() then takes the CPUs in this process's affinity mask */
        c.sched.concurrency = c.workers;
        /* the file's 0 is "never"; the runtime's 0 would be its default of 16 */
        if (c.sched.steal_every_n == 0)
                c.sched.steal_every_n = UINT_MAX;
        *ret = c;
        return 0;

out_free:
        config_done(&c);
        return r;
}

bool config_sched_equal(const Config *a, const Config *b)
{
        const SchedConfig *x = &a->sched, *y = &b->sched;

        return a->workers == b->workers && x->optimize_for == y->optimize_for &&
               x->groups == y->groups && x->group_size == y->group_size && x->numa == y->numa &&
               x->pin_workers == y->pin_workers && x->steal_every_n == y->steal_every_n &&
               x->cross_node_steal_every_n == y->cross_node_steal_every_n &&
               x->queue_policy == y->queue_policy;
}

void config_done(Config *c)
{
        free(c->socket_path);
        free(c->plugin_dir);
        c->socket_path = NULL;
        c->plugin_dir = NULL;
}
