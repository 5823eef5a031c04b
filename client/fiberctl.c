/* SPDX-License-Identifier: MIT */
/*
 * fiberctl.c — fiberctl's main: global options, verb dispatch, the call helpers every
 * verb uses, and the daemon-wide verbs (ping, plugins, stats). Job verbs are in
 * fiberctl-job.c, batch in fiberctl-batch.c, top in fiberctl-top.c.
 *
 * Arguments are parsed with getopt_long twice: once for the global options up to the
 * verb ("+" stops at the first non-option), then by the verb over its own argv.
 * Failures are reported once, on stderr, as "fiberctl: <cause> — <fix>", and become a
 * sysexits.h exit code (fiberctl.h).
 */
#include "client/fiberctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <sysexits.h>
#include <time.h>

#include "client/convert.h"
#include "client/table.h"
#include "client/term.h"
#include "ipc/socket_path.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

static const char help_text[] =
        "Usage: fiberctl [-s SOCKET | --user] [--json] VERB [ARGS...]\n"
        "\n"
        "Talk to fiberd, the fiber job daemon. Options go anywhere on the line;\n"
        "'fiberctl VERB --help' describes one verb.\n"
        "\n"
        "Verbs:\n"
        "  ping                          check that fiberd answers\n"
        "  plugins                       loaded plugins and refused files\n"
        "  submit PLUGIN [KEY=VALUE...] [--priority N] [--timeout DUR] [--class NAME]\n"
        "         [--in DUR | --at TIME] [--retries N] [--backoff DUR] [--backoff-max DUR]\n"
        "         [--after ID[,ID...]] [--key K] [--wait]\n"
        "                                queue a job (in a [class.NAME] of fiberd's\n"
        "                                config), later (--in, --at), after others\n"
        "                                (--after), retried when it fails (--retries);\n"
        "                                prints its id (or, with --wait, waits and\n"
        "                                prints its final state)\n"
        "  status ID                     a job's state, progress, result or error\n"
        "  wait [--timeout DUR] ID...    wait until the jobs finish; one line each\n"
        "  result ID                     a finished job's result (JSON)\n"
        "  cancel ID                     ask a job to stop\n"
        "  logs [-f] ID                  the lines a job logged (kept with the job);\n"
        "                                -f: follow them until it ends\n"
        "  list [--state S] [--plugin P] [--limit N]\n"
        "                                jobs you can see (root: all)\n"
        "  dead [--plugin P] [--limit N] jobs that ran out of attempts\n"
        "  retry ID... | --all           queue dead, failed or cancelled jobs again\n"
        "  discard ID... | --all         drop finished jobs' records now\n"
        "  pause class|plugin NAME       hold a class's or plugin's queued jobs (admin)\n"
        "  resume class|plugin NAME      let them run again (admin)\n"
        "  reload [--quiet]              re-read fiberd's config; fails when it is\n"
        "                                refused (admin)\n"
        "  schedule add NAME (--cron 'EXPR' [--tz ZONE] | --every DUR)\n"
        "         [--missed skip|run-once] PLUGIN [KEY=VALUE...] [job options]\n"
        "  schedule list | remove|pause|resume NAME [--owner UID]\n"
        "                                periodic jobs: a cron expression or an\n"
        "                                interval submits one at each tick\n"
        "  stats [--openmetrics | --prometheus]\n"
        "                                daemon, job and scheduler counters; latency,\n"
        "                                CPU, memory; or as OpenMetrics or Prometheus\n"
        "                                text\n"
        "  batch [--wait] [--window N] [--class NAME]\n"
        "                                submit JSON Lines job specs from stdin,\n"
        "                                {\"plugin\": ..., \"args\": {...}, \"options\": {...}};\n"
        "                                --class for the lines whose options name none\n"
        "  top [--delay DUR] [--iterations N]\n"
        "                                a live view: jobs per state and class, run\n"
        "                                queues and latency, the longest-running jobs\n"
        "  web [--assets DIR] [--chartjs FILE]\n"
        "                                a dashboard in the browser: prints a URL on\n"
        "                                127.0.0.1 with a token; speaks to fiberd as you\n"
        "\n"
        "Options:\n"
        "  -s, --socket PATH   fiberd's socket (default: $FIBERD_SOCKET, else the system\n"
        "                      socket /run/fiberd.sock)\n"
        "  -u, --user          your own fiberd (fiberd --user): $XDG_RUNTIME_DIR/fiberd.sock\n"
        "  -j, --json          machine-readable output (JSON; JSON Lines for wait/batch);\n"
        "                      errors too, as {\"error\": {...}} on stderr\n"
        "  -h, --help          this text\n"
        "  -V, --version       fiberctl's version and the protocol version it speaks\n"
        "\n"
        "KEY=VALUE: numbers become numbers, true/false booleans, null nil, the rest\n"
        "strings; quote to force a string: n='\"42\"'. KEY=@FILE (submit): open FILE\n"
        "yourself and pass it to fiberd as an fd. DUR: 500ms, 10s, 2m, 1h, 1d, 1h30m.\n"
        "TIME (--at): 2026-12-01T03:00:00Z, 2026-12-01T03:00:00+02:00 or @EPOCH_SECONDS.\n"
        "\n"
        "Exit status: 0 ok, 1 a job failed, was cancelled or is dead, 64 usage, 65 invalid\n"
        "argument, 66 no such job/plugin, 69 fiberd unreachable, 70 internal error,\n"
        "75 try again (overloaded, timed out, not finished), 76 protocol error,\n"
        "77 permission denied.\n";

/* The exit code for an error status (0 for a clear one). */
static int ctl_exit_code(const IpcStatus *st)
{
        /* the protocol's error table holds each code's exit status (ipc/protocol.c) */
        return ipc_protocol_exit_status(st ? st->code : NULL);
}

/* --json anywhere on the line: errors become JSON on stderr too (set before anything
 * can fail, so a usage error is JSON as well). */
static bool json_errors;

__attribute__((format(printf, 3, 0))) static int ctl_errorv(const char *code, int exit_code,
                                                            const char *fmt, va_list ap)
{
        char msg[2048];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        if (json_errors) {
                json_t *e = json_pack("{s:{s:s, s:s, s:i}}", "error", IPC_KEY_CODE,
                                      code ? code : IPC_INTERNAL, IPC_KEY_MESSAGE, msg, "exit",
                                      exit_code);
                char *s = e ? json_dumps(e, JSON_COMPACT) : NULL;
                if (s)
                        fprintf(stderr, "%s\n", s);
                free(s);
                json_decref(e);
        } else {
                fprintf(stderr, "fiberctl: %s\n", msg);
        }
        return exit_code;
}

int ctl_error(const char *code, int exit_code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        ctl_errorv(code, exit_code, fmt, ap);
        va_end(ap);
        return exit_code;
}

int ctl_exit_status(const CtlStatus *cs)
{
        switch (cs->step) {
        case CTL_STEP_CONNECT:
                return cs->st.error == -EACCES || cs->st.error == -EPERM ? EX_NOPERM
                                                                         : EX_UNAVAILABLE;
        case CTL_STEP_ENCODE:
                return EX_SOFTWARE;
        case CTL_STEP_ANSWER:
                break;
        }
        return ctl_exit_code(&cs->st) ? ctl_exit_code(&cs->st) : EX_SOFTWARE;
}

int ctl_fail(const CtlStatus *cs)
{
        const IpcStatus *st = &cs->st;

        return ctl_error(st->code, ctl_exit_status(cs), "%s",
                         st->message[0] ? st->message : st->code);
}

int ctl_fail_on(const CtlStatus *cs, const char *fmt, ...)
{
        char what[512];
        va_list ap;

        if (cs->step != CTL_STEP_ANSWER)
                return ctl_fail(cs);
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        return ctl_error(cs->st.code, ctl_exit_status(cs), "%s: %s", what, cs->st.message);
}

int ctl_usage(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        ctl_errorv(CTL_USAGE, EX_USAGE, fmt, ap);
        va_end(ap);
        if (!json_errors)
                fputs("Try 'fiberctl --help'.\n", stderr);
        return EX_USAGE;
}

bool ctl_mentions_job(const char *message, uint64_t id)
{
        char word[32];
        int n = snprintf(word, sizeof(word), "job %" PRIu64, id);

        for (const char *p = strstr(message, word); p; p = strstr(p + 1, word))
                if (p[n] < '0' || p[n] > '9')
                        return true;
        return false;
}

int ctl_connect(Ctl *ctl, CtlStatus *cs)
{
        FiberdClientError err;

        if (ctl->client)
                return 0;
        int r = fiberd_client_connect(&ctl->client, ctl->socket, &err);
        if (r < 0) {
                ctl_status(&cs->st, &err);
                cs->st.error = r; /* the exit status tells EACCES / EPERM apart */
                cs->step = CTL_STEP_CONNECT;
                return r;
        }
        return 0;
}

int ctl_send(Ctl *ctl, const char *method, json_t *params, uint32_t *ret_msgid, CtlStatus *cs)
{
        int r = ctl_connect(ctl, cs);
        if (r < 0) {
                json_decref(params);
                return r;
        }
        msgpack_packer *pk = fiberd_client_request(ctl->client, method,
                                                   (uint32_t)json_array_size(params), ret_msgid);
        size_t i;
        json_t *p;
        int e = pk ? 0 : -ENOMEM;
        json_array_foreach(params, i, p)
        {
                if (e == 0)
                        e = convert_json_to_msgpack(pk, p);
        }
        json_decref(params);
        if (e < 0) {
                cs->step = CTL_STEP_ENCODE;
                return ipc_status_set(&cs->st, IPC_INTERNAL, e, "cannot encode the %s request: %s",
                                      method, strerror(-e));
        }
        return 0;
}

int ctl_status(IpcStatus *st, const FiberdClientError *err)
{
        const char *name = fiberd_client_code_name(err->code);

        st->code = ipc_status_canonical_code(name, strlen(name));
        st->error = err->error;
        snprintf(st->message, sizeof(st->message), "%s", err->message);
        return err->error;
}

int ctl_response(const FiberdClientReply *resp, json_t **ret_result, IpcStatus *st)
{
        FiberdClientError err;
        int r = fiberd_client_reply_error(resp, &err);
        if (r < 0)
                return ctl_status(st, &err);
        json_t *j = convert_msgpack_to_json(fiberd_client_reply_result(resp));
        if (!j)
                return ipc_status_errno(st, -ENOMEM, NULL);
        *ret_result = j;
        return 0;
}

int ctl_call(Ctl *ctl, const char *method, json_t *params, json_t **ret_result, CtlStatus *cs)
{
        uint32_t msgid;
        FiberdClientReply *resp;
        FiberdClientError err;
        int r = ctl_send(ctl, method, params, &msgid, cs);
        if (r < 0)
                return r;
        cs->step = CTL_STEP_ANSWER;
        r = fiberd_client_wait_reply(ctl->client, msgid, -1, &resp, &err);
        if (r < 0) {
                ctl_status(&cs->st, &err);
                return r;
        }
        r = ctl_response(resp, ret_result, &cs->st);
        fiberd_client_reply_free(resp);
        return r;
}

void ctl_print_json(const json_t *j)
{
        /* One buffer kept for the process: a batch prints a record a job, and
         * json_dumps() would grow a fresh string by doubling for each (a dozen
         * reallocations for a 500-byte record) and free it. */
        static char *buf;
        static size_t cap;
        size_t n = json_dumpb(j, buf, cap, JSON_COMPACT | JSON_ENCODE_ANY);

        if (n > cap) {
                size_t want = MAX(n, 2 * cap);
                char *b = realloc(buf, want);
                if (!b)
                        return;
                buf = b;
                cap = want;
                n = json_dumpb(j, buf, cap, JSON_COMPACT | JSON_ENCODE_ANY);
        }
        if (n == 0 || n > cap)
                return; /* not encodable (json_dumps() would give NULL too) */
        fwrite(buf, 1, n, stdout);
        fputc('\n', stdout);
}

bool ctl_parse_id(const char *s, uint64_t *ret)
{
        char *end;
        if (!s || !*s || strspn(s, "0123456789") != strlen(s))
                return false;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || *end || v == 0)
                return false;
        *ret = v;
        return true;
}

/* A call whose failure is printed as is; for the verbs without a job id. */
static int simple_call(Ctl *ctl, const char *method, json_t **ret_result)
{
        CtlStatus cs;
        int r = ctl_call(ctl, method, json_array(), ret_result, &cs);
        if (r < 0)
                return ctl_fail_on(&cs, "%s", method);
        return 0;
}

static double now_s(void)
{
        return (double)clock_now_ns(CLOCK_MONOTONIC) / NSEC_PER_SEC;
}

static int no_args(int argc, char **argv)
{
        if (argc > 1)
                return ctl_usage("%s takes no arguments, got '%s'", argv[0], argv[1]);
        return 0;
}

static int verb_ping(Ctl *ctl, int argc, char **argv)
{
        json_t *res;
        CtlStatus cs;
        int r = no_args(argc, argv);
        if (r)
                return r;
        if (ctl_connect(ctl, &cs) < 0)
                return ctl_fail(&cs);
        double t0 = now_s();
        r = simple_call(ctl, IPC_METHOD_PING, &res);
        if (r)
                return r;
        double rtt_ms = (now_s() - t0) * 1e3;
        if (ctl->json) {
                if (json_is_object(res))
                        json_object_set_new(res, "rtt_ms", json_real(rtt_ms));
                ctl_print_json(res);
        } else {
                const char *version = json_string_value(json_object_get(res, IPC_KEY_VERSION));
                json_int_t pid = json_integer_value(json_object_get(res, IPC_KEY_PID));
                json_int_t up = json_integer_value(json_object_get(res, IPC_KEY_UPTIME_MS));
                json_t *proto = json_object_get(res, IPC_KEY_PROTOCOL);
                printf("fiberd %s (pid %" JSON_INTEGER_FORMAT ") on %s: up %.1fs, round trip "
                       "%.2f ms",
                       version ? version : "?", pid, fiberd_client_path(ctl->client), up / 1e3,
                       rtt_ms);
                if (json_is_integer(proto))
                        printf(", protocol %" JSON_INTEGER_FORMAT, json_integer_value(proto));
                putchar('\n');
        }
        json_decref(res);
        return 0;
}

static const char *str_or(const json_t *o, const char *key, const char *dflt)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : dflt;
}

/* fiberctl plugins --clear NAME: plugins.clear (the job store's quarantine). */
static int plugins_clear(Ctl *ctl, const char *name)
{
        CtlStatus cs;
        json_t *res;

        if (ctl_call(ctl, IPC_METHOD_PLUGINS_CLEAR, json_pack("[s]", name), &res, &cs) < 0)
                return ctl_fail_on(&cs, "%s", IPC_METHOD_PLUGINS_CLEAR);
        if (ctl->json)
                ctl_print_json(res);
        else
                printf("cleared the quarantine of %s; fiberd loads it again (see fiberctl "
                       "plugins)\n",
                       name);
        json_decref(res);
        return 0;
}

/* A table for a verb's human output: coloured on a terminal unless --json or NO_COLOR. */
static Table *ctl_table(const Ctl *ctl)
{
        return table_new(!ctl->json && term_colour(stdout), 0);
}

/* Prints @t (when it was made) and frees it; returns 0 or the exit code of a failure. */
static int print_table(Table *t)
{
        int r = t ? table_print(t, stdout) : -ENOMEM;

        table_free(t);
        if (r < 0)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "cannot print a table: %s",
                                 strerror(-r));
        return 0;
}

static int verb_plugins(Ctl *ctl, int argc, char **argv)
{
        json_t *res, *p;
        size_t i;
        int r;

        if (argc >= 2 && strcmp(argv[1], "--clear") == 0) {
                if (argc != 3)
                        return ctl_usage("plugins --clear takes one plugin name");
                return plugins_clear(ctl, argv[2]);
        }
        r = no_args(argc, argv);
        if (r)
                return r;
        r = simple_call(ctl, IPC_METHOD_PLUGINS_LIST, &res);
        if (r)
                return r;
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        json_t *plugins = json_object_get(res, IPC_KEY_PLUGINS);
        json_t *refused = json_object_get(res, IPC_KEY_REFUSED);
        Table *t = ctl_table(ctl);
        if (t) {
                table_column(t, "NAME", 0, 0);
                table_column(t, "VERSION", 0, 0);
                table_column(t, "DESCRIPTION", TABLE_TRUNC, 0);
        }
        json_array_foreach(plugins, i, p)
        {
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", str_or(p, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%s", str_or(p, IPC_KEY_VERSION, "?"));
                table_cell(t, 2, "%s", str_or(p, IPC_KEY_DESCRIPTION, ""));
        }
        r = print_table(t);
        if (r == 0 && json_array_size(refused) > 0) {
                printf("\nrefused:\n");
                json_array_foreach(refused, i, p)
                {
                        printf("  %s: %s\n", str_or(p, IPC_KEY_PATH, "?"),
                               str_or(p, IPC_KEY_REASON, "?"));
                }
        }
        /* plugins in place: old versions still finishing their jobs */
        json_t *draining = json_object_get(res, IPC_KEY_DRAINING);
        if (r == 0 && json_array_size(draining) > 0) {
                printf("\ndraining (replaced or removed, unloaded when their jobs end):\n");
                json_array_foreach(draining, i, p)
                {
                        json_int_t n = json_integer_value(json_object_get(p, IPC_KEY_RUNNING));
                        printf("  %s %s: %" JSON_INTEGER_FORMAT " running job%s\n",
                               str_or(p, IPC_KEY_NAME, "?"), str_or(p, IPC_KEY_VERSION, "?"), n,
                               n == 1 ? "" : "s");
                }
        }
        json_decref(res);
        return r;
}

static json_int_t int_of(const json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

/* Adds columns headed by @names (the first left-aligned and cut on a terminal, the
 * others right-aligned numbers). */
static void numeric_columns(Table *t, const char *const *names, size_t n)
{
        for (size_t i = 0; t && i < n; i++)
                table_column(t, names[i], i == 0 ? TABLE_TRUNC : TABLE_RIGHT, 0);
}

/* One row of the JOBS table; the STALLS cell only for plugins (the total has none). */
static void counts_row(Table *t, const char *name, const json_t *c)
{
        static const char *const keys[] = {IPC_KEY_SUBMITTED, IPC_KEY_QUEUED, IPC_KEY_RUNNING,
                                           IPC_KEY_DONE,      IPC_KEY_FAILED, IPC_KEY_CANCELLED};

        if (!t || table_row(t) < 0)
                return;
        table_cell(t, 0, "%s", name);
        for (size_t i = 0; i < ELEMENTSOF(keys); i++)
                table_cell(t, i + 1, "%" JSON_INTEGER_FORMAT, int_of(c, keys[i]));
        if (json_is_integer(json_object_get(c, IPC_KEY_STALLS)))
                table_cell(t, ELEMENTSOF(keys) + 1, "%" JSON_INTEGER_FORMAT,
                           int_of(c, IPC_KEY_STALLS));
}

/* stats --openmetrics / --prometheus: the `metrics` method's text, as is. */
static int stats_openmetrics(Ctl *ctl, bool prometheus)
{
        CtlStatus cs;
        json_t *res;

        if (!prometheus) {
                int r = simple_call(ctl, IPC_METHOD_METRICS, &res);
                if (r)
                        return r;
        } else if (ctl_call(ctl, IPC_METHOD_METRICS, json_pack("[s]", IPC_METRICS_PROMETHEUS), &res,
                            &cs) < 0) {
                return ctl_fail_on(&cs, "%s", IPC_METHOD_METRICS);
        }
        if (!json_is_string(res)) {
                json_decref(res);
                return ctl_error(IPC_MALFORMED_MESSAGE, EX_PROTOCOL,
                                 "metrics: fiberd's answer is not text");
        }
        fwrite(json_string_value(res), 1, json_string_length(res), stdout);
        json_decref(res);
        return 0;
}

/* The LATENCY and PROCESS sections of `stats`. */
static void print_latency_and_process(const json_t *res)
{
        const json_t *v, *p = json_object_get(res, IPC_KEY_PROCESS);
        size_t i;

        printf("\n%-16s %-12s %8s %10s %10s %10s %10s %10s %10s\n", "LATENCY(ms)", "CLASS", "JOBS",
               "WAIT-P50", "WAIT-P99", "WAIT-MAX", "RUN-P50", "RUN-P99", "RUN-MAX");
        json_array_foreach(json_object_get(res, IPC_KEY_LATENCY), i, v)
        {
                const json_t *w = json_object_get(v, IPC_KEY_QUEUE_WAIT);
                const json_t *rt = json_object_get(v, IPC_KEY_RUN_TIME);
                printf("%-16s %-12s %8" JSON_INTEGER_FORMAT
                       " %10.3f %10.3f %10.3f %10.3f %10.3f %10.3f\n",
                       str_or(v, IPC_KEY_PLUGIN, "?"), str_or(v, IPC_KEY_CLASS, "?"),
                       int_of(v, IPC_KEY_SAMPLES), int_of(w, IPC_KEY_P50_NS) / 1e6,
                       int_of(w, IPC_KEY_P99_NS) / 1e6, int_of(w, IPC_KEY_MAX_NS) / 1e6,
                       int_of(rt, IPC_KEY_P50_NS) / 1e6, int_of(rt, IPC_KEY_P99_NS) / 1e6,
                       int_of(rt, IPC_KEY_MAX_NS) / 1e6);
        }
        if (p)
                printf("\nprocess: cpu %.2fs user, %.2fs system; rss %.1f MiB; "
                       "%" JSON_INTEGER_FORMAT " fds open (limit %" JSON_INTEGER_FORMAT
                       "); %" JSON_INTEGER_FORMAT " connections\n",
                       int_of(p, IPC_KEY_USER_CPU_NS) / 1e9, int_of(p, IPC_KEY_SYSTEM_CPU_NS) / 1e9,
                       int_of(p, IPC_KEY_RSS_BYTES) / 1048576.0, int_of(p, IPC_KEY_OPEN_FDS),
                       int_of(p, IPC_KEY_MAX_FDS),
                       int_of(json_object_get(res, IPC_KEY_SERVER), IPC_KEY_CONNECTIONS));
}

static int verb_stats(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {{"openmetrics", no_argument, NULL, 'm'},
                                                {"prometheus", no_argument, NULL, 'P'},
                                                {0}};
        static const char *const jobs_cols[] = {"JOBS", "SUBMITTED", "QUEUED",    "RUNNING",
                                                "DONE", "FAILED",    "CANCELLED", "STALLS"};
        static const char *const group_cols[] = {"GROUP",   "WORKERS", "SPINNING", "SLEEPING",
                                                 "RUNQ",    "FIBERS",  "ALIVE",    "SWITCHES",
                                                 "P50(us)", "P99(us)"};
        static const char *const stall_cols[] = {"GROUP", "STALLS", "RESCUES", "SPARES-RUNNING",
                                                 "THREADS"};
        static const char *const class_cols[] = {"CLASS",  "SHARES",  "RUNTIME(ms)", "VRUNTIME(ms)",
                                                 "QUEUED", "P50(us)", "P99(us)"};
        json_t *res, *v;
        const char *key;
        bool openmetrics = false, prometheus = false;
        size_t i;
        Table *t;
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "mP", options, NULL)) != -1) {
                if (c != 'm' && c != 'P')
                        return ctl_usage("%s: unknown option '%s'", argv[0], argv[optind - 1]);
                openmetrics = c == 'm' || openmetrics;
                prometheus = c == 'P' || prometheus;
        }
        if (optind < argc)
                return ctl_usage("%s takes no arguments, got '%s'", argv[0], argv[optind]);
        if (openmetrics || prometheus)
                return stats_openmetrics(ctl, prometheus);
        r = simple_call(ctl, IPC_METHOD_STATS, &res);
        if (r)
                return r;
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        printf("uptime %.1fs\n\n", int_of(res, IPC_KEY_UPTIME_MS) / 1e3);
        fflush(stdout);

        t = ctl_table(ctl);
        numeric_columns(t, jobs_cols, ELEMENTSOF(jobs_cols));
        counts_row(t, "all", json_object_get(res, IPC_KEY_JOBS));
        json_object_foreach(json_object_get(res, IPC_KEY_PLUGINS), key, v)
        {
                counts_row(t, key, v);
        }
        r = print_table(t);

        json_t *groups = json_object_get(res, IPC_KEY_GROUPS);
        t = r ? NULL : ctl_table(ctl);
        numeric_columns(t, group_cols, ELEMENTSOF(group_cols));
        json_array_foreach(groups, i, v)
        {
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", str_or(v, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_WORKERS));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_SPINNING));
                table_cell(t, 3, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_SLEEPING));
                table_cell(t, 4, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_RUNQ_DEPTH));
                table_cell(t, 5, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_FIBERS_CREATED));
                table_cell(t, 6, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_FIBERS_ALIVE));
                table_cell(t, 7, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_CONTEXT_SWITCHES));
                table_cell(t, 8, "%.1f", int_of(v, IPC_KEY_READY_TO_RUN_P50_NS) / 1e3);
                table_cell(t, 9, "%.1f", int_of(v, IPC_KEY_READY_TO_RUN_P99_NS) / 1e3);
        }
        if (r == 0) {
                putchar('\n');
                r = print_table(t);
        }

        t = r ? NULL : ctl_table(ctl);
        numeric_columns(t, stall_cols, ELEMENTSOF(stall_cols));
        json_array_foreach(groups, i, v)
        {
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", str_or(v, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_STALLS));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_RESCUES));
                table_cell(t, 3, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_SPARES_RUNNING));
                table_cell(t, 4, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_THREADS));
        }
        if (r == 0) {
                putchar('\n');
                r = print_table(t);
        }

        t = r ? NULL : ctl_table(ctl);
        numeric_columns(t, class_cols, ELEMENTSOF(class_cols));
        json_array_foreach(json_object_get(res, IPC_KEY_CLASSES), i, v)
        {
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", str_or(v, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_SHARES));
                table_cell(t, 2, "%.1f", int_of(v, IPC_KEY_RUNTIME_NS) / 1e6);
                table_cell(t, 3, "%.1f", int_of(v, IPC_KEY_VRUNTIME) / 1e6);
                table_cell(t, 4, "%" JSON_INTEGER_FORMAT, int_of(v, IPC_KEY_QUEUED));
                table_cell(t, 5, "%.1f", int_of(v, IPC_KEY_READY_TO_RUN_P50_NS) / 1e3);
                table_cell(t, 6, "%.1f", int_of(v, IPC_KEY_READY_TO_RUN_P99_NS) / 1e3);
        }
        if (r == 0) {
                putchar('\n');
                r = print_table(t);
        }
        print_latency_and_process(res);
        json_decref(res);
        return r;
}

typedef struct Verb {
        const char *name;
        int (*fn)(Ctl *ctl, int argc, char **argv);
        const char *usage;      /* after "fiberctl [OPTIONS] " */
        const char *help;       /* what it does, and its own options */
        const char *value_opts; /* its options that take a value, " --x -x " (global
                                 * options found after them are the value, not global) */
} Verb;

static const Verb verbs[] = {
        {"ping", verb_ping, "ping",
         "Check that fiberd answers: its version, pid, uptime and the round trip.\n", ""},
        {"plugins", verb_plugins, "plugins [--clear NAME]",
         "The loaded plugins, and the files refused with the reason.\n\n"
         "  --clear NAME        forget the crashes of quarantined plugin NAME and load it\n"
         "                      again (admin)\n",
         " --clear "},
        {"submit", verb_submit,
         "submit PLUGIN [KEY=VALUE...] [--priority N] [--timeout DUR] [--class NAME]\n"
         "           [--in DUR | --at TIME] [--retries N] [--backoff DUR] [--backoff-max DUR]\n"
         "           [--after ID[,ID...]] [--key K] [--wait]",
         "Queue a job and print its id; with --wait, wait and print its final state.\n"
         "A job given --in or --at is scheduled until then, one given --after waits for\n"
         "those jobs; --wait waits through both.\n\n" CTL_JOB_OPTIONS_HELP
         "  -w, --wait          wait for the job (exit 1 when it fails, is cancelled or\n"
         "                      is dead)\n",
         CTL_JOB_VALUE_OPTS},
        {"status", verb_status, "status ID",
         "A job's state, timestamps, progress, result or error.\n", ""},
        {"wait", verb_wait, "wait [--timeout DUR] ID...",
         "Wait until the jobs finish; one line each as each finishes (exit 1 when one failed\n"
         "or was cancelled, 75 when the timeout passed first).\n\n"
         "  -t, --timeout DUR   give up waiting after DUR\n",
         " --timeout -t "},
        {"result", verb_result, "result ID", "A finished job's result, as JSON.\n", ""},
        {"cancel", verb_cancel, "cancel ID",
         "Ask a job to stop; a running job stops at its next yield.\n", ""},
        {"list", verb_list, "list [--state S] [--plugin P] [--limit N]",
         "The jobs you may see (root: all), newest first, fetched page by page. Columns\n"
         "ATTEMPT, DUE and ERROR appear when a job is retried, scheduled or dead.\n\n"
         "  -S, --state S       queued, running, done, failed, cancelled, scheduled,\n"
         "                      waiting, retrying or dead\n"
         "  -p, --plugin P      only jobs of plugin P\n"
         "  -n, --limit N       at most N jobs, the newest\n",
         " --state -S --plugin -p --limit -n "},
        {"dead", verb_dead, "dead [--plugin P] [--limit N]",
         "The jobs that ran out of attempts (the dead set), newest first, as list prints\n"
         "them; fiberctl retry queues them again, fiberctl discard drops them.\n\n"
         "  -p, --plugin P      only jobs of plugin P\n"
         "  -n, --limit N       at most N jobs, the newest\n",
         " --plugin -p --limit -n "},
        {"retry", verb_retry, "retry ID... | --all",
         "Queue dead, failed or cancelled jobs again: their attempts count from the first\n"
         "again, their errors are kept. All or none of the ids are retried.\n\n"
         "  -a, --all           every dead job you may see\n",
         ""},
        {"discard", verb_discard, "discard ID... | --all",
         "Drop the records of finished jobs now, instead of at the end of their retention.\n\n"
         "  -a, --all           every dead job you may see\n",
         ""},
        {"pause", verb_pause, "pause class|plugin NAME",
         "Hold the queued jobs of a job class or of a plugin (admin): running ones finish,\n"
         "new ones are accepted and wait. Kept across restarts.\n",
         ""},
        {"resume", verb_resume, "resume class|plugin NAME",
         "Let the queued jobs of a paused class or plugin run again (admin).\n", ""},
        {"reload", verb_reload, "reload [--quiet]",
         "Re-read fiberd's config and apply what can change live (admin); waits for the\n"
         "outcome and exits 65 when fiberd refused the file (it keeps running on the\n"
         "old one). fiberd.service's ExecReload= runs it: systemctl reload fails too.\n\n"
         "  -q, --quiet         do not print fiberd's refusal (its log names it)\n",
         ""},
        {"schedule", verb_schedule,
         "schedule add NAME (--cron 'EXPR' [--tz ZONE] | --every DUR)\n"
         "           [--missed skip|run-once] PLUGIN [KEY=VALUE...] [job options]\n"
         "       fiberctl [OPTIONS] schedule list\n"
         "       fiberctl [OPTIONS] schedule remove|pause|resume NAME [--owner UID]",
         "Periodic jobs: a schedule submits one job, as you, at each tick of a cron\n"
         "expression or an interval; the job's arguments and options are submit's\n"
         "(not KEY=@FILE, --at or --key). list shows yours (an admin's: everyone's);\n"
         "remove, pause and resume act on one (an admin may name another user's with\n"
         "--owner).\n\n"
         "  --cron EXPR         5 fields (minute hour day month weekday) or @hourly,\n"
         "                      @daily, @weekly, @monthly, @yearly\n"
         "  --tz ZONE           the cron's time zone (Europe/Berlin; default UTC)\n"
         "  --every DUR         an interval instead: 30s, 5m, 1h (at least 1s)\n"
         "  --missed WHAT       a tick that passed while fiberd was down: skip (the\n"
         "                      default) or run-once (one job at start)\n"
         "  --owner UID         remove, pause or resume another user's schedule (admin)\n"
         "\nJob options:\n" CTL_JOB_OPTIONS_HELP,
         " --cron --tz --every --missed --owner" CTL_JOB_VALUE_OPTS},
        {"stats", verb_stats, "stats [--openmetrics | --prometheus]",
         "Job counts (all, per plugin), queue wait and run time per plugin and class,\n"
         "scheduling groups, job classes, server counters, fiberd's CPU, memory and fds.\n\n"
         "  -m, --openmetrics   the same figures as OpenMetrics text (for a scraper)\n"
         "  -P, --prometheus    the same in Prometheus's text format (node_exporter's\n"
         "                      textfile collector, promtool check metrics)\n",
         ""},
        {"logs", verb_logs, "logs [--follow] ID",
         "The lines a job wrote to the log, kept with the job (the last 64 lines, 8 KiB);\n"
         "its owner and admins may read them. The journal has them too:\n"
         "journalctl FIBERD_JOB=ID.\n\n"
         "  -f, --follow        print new lines as the job logs them, until it ends\n"
         "                      (then a line naming its final state)\n",
         ""},
        {"batch", verb_batch, "batch [--wait] [--window N] [--class NAME]",
         "Submit JSON Lines job specs from stdin, {\"plugin\": ..., \"args\": {...},\n"
         "\"options\": {...}}; one line per job as it is accepted, or with --wait as it\n"
         "finishes.\n\n"
         "  -w, --wait          wait for each job\n"
         "  -n, --window N      jobs in flight at once (default 64)\n"
         "  -c, --class NAME    the job class of lines whose options name none\n",
         " --window -n --class -c "},
        {"top", verb_top, "top [--delay DUR] [--iterations N]",
         "A live view of fiberd, redrawn every second until q or Ctrl-C: jobs per state,\n"
         "throughput, per-plugin and per-user rows, the newest failed jobs, the job\n"
         "classes (shares, queued, running, ready-to-run latency), the scheduling groups\n"
         "(workers, run-queue depth, ready-to-run latency, stalls, rescues) and the\n"
         "running jobs that have run longest. Not on a terminal: one frame (with\n"
         "--iterations, N), then exit.\n\n"
         "  -d, --delay DUR     time between frames (default 1s)\n"
         "  -n, --iterations N  stop after N frames\n",
         " --delay -d --iterations -n "},
        {"web", verb_web, "web [--assets DIR] [--chartjs FILE]",
         "A dashboard in the browser, served by fiberctl as you until Ctrl-C: live counts\n"
         "and throughput, jobs by state, schedules, latency charts, a job's arguments,\n"
         "result, progress and logs, cancel and retry buttons. It listens on 127.0.0.1\n"
         "at a random port and prints the URL with its token (?token=), which every\n"
         "request needs; fiberd sees your own connection, so you may do on the page what\n"
         "you may do with fiberctl. The charts need Debian's libjs-chart.js.\n\n"
         "  --assets DIR        the page's files (default: the build tree's client/web,\n"
         "                      else $(PREFIX)/share/fiberd/web of the install)\n"
         "  --chartjs FILE      Chart.js (default /usr/share/javascript/chart.js/\n"
         "                      chart.min.js)\n",
         " --assets --chartjs "},
};

static void verb_help(const Verb *v)
{
        printf("Usage: fiberctl [OPTIONS] %s\n\n%s\n"
               "Options (anywhere on the line): -s, --socket PATH; -u, --user; -j, --json;\n"
               "-h, --help; -V, --version (see 'fiberctl --help').\n",
               v->usage, v->help);
}

static const Verb *verb_find(const char *name)
{
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (strcmp(verbs[i].name, name) == 0)
                        return &verbs[i];
        return NULL;
}

/* Whether @word is one of @v's options that take the next word as their value. */
static bool verb_takes_value(const Verb *v, const char *word)
{
        char key[64];

        if (!v || word[0] != '-' || strchr(word, '='))
                return false;
        snprintf(key, sizeof(key), " %s ", word);
        return strstr(v->value_opts, key) != NULL;
}

/* What the global options said, wherever they stood. */
typedef struct Globals {
        bool help, version, user;
        const Verb *verb;
        const char *verb_name; /* as typed, also when unknown */
        int vargc;
        char **vargv; /* the verb's name, then its own words; NULL-terminated */
} Globals;

/*
 * Splits @argv into the global options (anywhere, up to a "--") and the verb's argv,
 * as `git` and `kubectl` do: `fiberctl list --json`, `fiberctl -j list` and
 * `fiberctl list -s PATH` all mean what they say. A word that is the value of a verb's
 * own option (`submit --priority -1`) stays the verb's. Return: 0, or the usage exit
 * code (reported).
 */
static int parse_globals(int argc, char **argv, Ctl *ctl, Globals *g)
{
        bool rest = false;

        g->vargv = calloc((size_t)argc + 1, sizeof(char *));
        if (!g->vargv)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");
        for (int i = 1; i < argc; i++) {
                const char *w = argv[i];

                if (rest || w[0] != '-' || w[1] == '\0') {
                        if (!g->verb_name) {
                                g->verb_name = w;
                                g->verb = verb_find(w);
                        }
                        g->vargv[g->vargc++] = argv[i];
                        continue;
                }
                if (strcmp(w, "--") == 0) {
                        rest = true;
                        if (g->verb_name)
                                g->vargv[g->vargc++] = argv[i];
                } else if (strcmp(w, "-j") == 0 || strcmp(w, "--json") == 0) {
                        ctl->json = true;
                } else if (strcmp(w, "-u") == 0 || strcmp(w, "--user") == 0) {
                        g->user = true;
                } else if (strcmp(w, "-h") == 0 || strcmp(w, "--help") == 0) {
                        g->help = true;
                } else if (strcmp(w, "-V") == 0 || strcmp(w, "--version") == 0) {
                        g->version = true;
                } else if (strcmp(w, "-s") == 0 || strcmp(w, "--socket") == 0) {
                        if (i + 1 >= argc)
                                return ctl_usage("option '%s' needs an argument", w);
                        ctl->socket = argv[++i];
                } else if (strncmp(w, "--socket=", 9) == 0) {
                        ctl->socket = w + 9;
                } else if (strncmp(w, "-s", 2) == 0) {
                        ctl->socket = w + 2;
                } else if (!g->verb_name) {
                        return ctl_usage("unknown option '%s'", w);
                } else {
                        /* the verb's own option (its getopt judges it), with its value */
                        g->vargv[g->vargc++] = argv[i];
                        if (verb_takes_value(g->verb, w) && i + 1 < argc)
                                g->vargv[g->vargc++] = argv[++i];
                }
        }
        g->vargv[g->vargc] = NULL;
        return 0;
}

int main(int argc, char **argv)
{
        char user_socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
        Globals g = {0};
        Ctl ctl = {0};
        int r;

        for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
                if (strcmp(argv[i], "-j") == 0 || strcmp(argv[i], "--json") == 0)
                        json_errors = true;
        r = parse_globals(argc, argv, &ctl, &g);
        if (r)
                goto out;
        if (g.version) {
                printf("fiberctl %s (protocol %d)\n", FIBERD_VERSION, FIBERD_PROTOCOL_VERSION);
                goto out;
        }
        if (g.help && g.verb) {
                verb_help(g.verb);
                goto out;
        }
        if (g.help) {
                fputs(help_text, stdout);
                goto out;
        }
        if (!g.verb_name) {
                r = ctl_usage("no verb given");
                goto out;
        }
        if (!g.verb) {
                r = ctl_usage("unknown verb '%s'", g.verb_name);
                goto out;
        }
        /* --user: the per-user fiberd's socket (ipc/socket_path.h); -s still wins */
        if (g.user && !ctl.socket) {
                r = socket_path_default(true, user_socket, sizeof(user_socket));
                if (r == -ENOENT) {
                        r = ctl_usage("--user: XDG_RUNTIME_DIR is not set, so there is no "
                                      "per-user fiberd socket to find; run in a login "
                                      "session, or name the socket with -s PATH");
                        goto out;
                }
                if (r < 0) {
                        r = ctl_usage("--user: $XDG_RUNTIME_DIR/fiberd.sock is longer than "
                                      "a Unix socket address allows; use -s PATH");
                        goto out;
                }
                ctl.socket = user_socket;
        }
        optind = 0; /* 0: getopt re-initialises for the verb's argv */
        r = g.verb->fn(&ctl, g.vargc, g.vargv);
        fflush(stdout);
        fiberd_client_free(ctl.client);
out:
        free(g.vargv);
        return r;
}
