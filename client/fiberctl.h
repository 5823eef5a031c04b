/* SPDX-License-Identifier: MIT */
/*
 * fiberctl.h — what fiberctl's source files share (client/): the command context, the
 * call helpers that turn every failure into a message and a sysexits.h exit code, and
 * the printers of job records. Internal to the fiberctl binary.
 *
 * Shape of a verb: it parses its own options (getopt_long over its argv), builds params
 * as a JSON array (jansson), calls ctl_call(), and prints the JSON result — as a table or
 * sentence by default, as JSON with --json. Every verb returns the process exit code.
 *
 * Errors: the ctl_connect() / ctl_send() / ctl_call() helpers print nothing and return
 * a negative errno with the reason in a CtlStatus; the verb reports it once
 * (ctl_fail(), ctl_fail_on(), or its own words) and only there does it become an exit
 * status (ctl_exit_status()), as main() turns the verb's into the process' own.
 *
 * Exit codes (sysexits.h), also in the README:
 *   0   success                       1   a job ended failed, cancelled or dead
 *   64  usage error (EX_USAGE)        65  the daemon refused an argument (INVALID_ARGUMENT)
 *   66  no such job or plugin (NOT_FOUND)
 *   69  daemon unreachable or stopping (EX_UNAVAILABLE)
 *   70  internal error (EX_SOFTWARE)  75  try again: overloaded, timed out, job not finished
 *   76  protocol error (EX_PROTOCOL)  77  permission denied (EX_NOPERM)
 */
#ifndef FIBERD_CLIENT_FIBERCTL_H
#define FIBERD_CLIENT_FIBERCTL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "client/fiberd/client.h"
#include "ipc/ipc.h"

#define EXIT_JOB_FAILED IPC_EXIT_JOB_FAILED /* ipc/protocol.h */

typedef struct Ctl {
        const char *socket;   /* -s, or --user's path; NULL = the library's default socket */
        bool json;            /* --json */
        FiberdClient *client; /* connected by ctl_connect() (libfiberd-client) */
} Ctl;

/* Where a call to fiberd failed: what its message says, and so how it is reported. */
typedef enum CtlStep {
        CTL_STEP_ANSWER,  /* fiberd's error answer, or the connection failed meanwhile */
        CTL_STEP_CONNECT, /* no connection to fiberd; the message is whole */
        CTL_STEP_ENCODE,  /* the request could not be encoded; the message is whole */
} CtlStep;

/* CtlStatus - why a call failed, not yet reported. */
typedef struct CtlStatus {
        IpcStatus st; /* the wire code (IPC_*), negative errno and message */
        CtlStep step;
} CtlStatus;

/*
 * ctl_exit_status - the exit status for @cs: EX_NOPERM or EX_UNAVAILABLE for a failed
 * connect, EX_SOFTWARE for a request that could not be encoded, else the wire code's
 * (the protocol table's, ipc_protocol_exit_status(); EX_SOFTWARE for none).
 */
int ctl_exit_status(const CtlStatus *cs);

/* The code of a usage error in --json errors (not a wire code: no request was made). */
#define CTL_USAGE "USAGE"

/*
 * ctl_error - report one failure on stderr: "fiberctl: <message>", or with --json
 * {"error": {"code": @code, "message": ..., "exit": @exit_code}} on one line (@code NULL
 * = INTERNAL). Returns @exit_code. Every message fiberctl prints about a failure goes
 * through here, once. Context: main thread.
 */
__attribute__((format(printf, 3, 4))) int ctl_error(const char *code, int exit_code,
                                                    const char *fmt, ...);

/* ctl_fail - ctl_error() for @cs: its code, its message alone, ctl_exit_status(). */
int ctl_fail(const CtlStatus *cs);

/*
 * ctl_fail_on - report @cs once: fiberd's answer as "<what>: <message>" (@fmt, printf
 * style, says what was asked: a method, "job 7"); a failure before fiberd answered
 * (connect, encode) as its message alone. Returns ctl_exit_status(@cs).
 */
__attribute__((format(printf, 2, 3))) int ctl_fail_on(const CtlStatus *cs, const char *fmt, ...);

/* ctl_mentions_job - whether @message already names "job <id>", so a caller does not
 * add "job <id>: " in front of it again. */
bool ctl_mentions_job(const char *message, uint64_t id);

/* ctl_usage - print "fiberctl: <printf>" and the help hint to stderr; returns 64. */
__attribute__((format(printf, 1, 2))) int ctl_usage(const char *fmt, ...);

/* ctl_connect - connect once (idempotent). Return: 0; a negative errno with the reason
 * in @cs (CTL_STEP_CONNECT; not printed). */
int ctl_connect(Ctl *ctl, CtlStatus *cs);

/*
 * ctl_send - connect if needed, queue @method with @params (a JSON array; reference
 * stolen) and return its msgid in @ret_msgid. Return: 0; a negative errno with the
 * reason in @cs (CTL_STEP_CONNECT or CTL_STEP_ENCODE; not printed).
 */
int ctl_send(Ctl *ctl, const char *method, json_t *params, uint32_t *ret_msgid, CtlStatus *cs);

/*
 * ctl_response - turn a reply into its JSON result (@ret_result, new reference) or an
 * error status (@st). Return 0, or the negative errno of the error (@st filled).
 */
int ctl_response(const FiberdClientReply *resp, json_t **ret_result, IpcStatus *st);

/* ctl_status - @st for a library error @err: the wire code's constant, errno, message. */
int ctl_status(IpcStatus *st, const FiberdClientError *err);

/*
 * ctl_call - connect if needed, send @method(@params), wait for its response.
 * Return: 0 and *@ret_result (new reference); or a negative errno with the reason in
 * @cs (not printed: the caller decides, e.g. to add the job id).
 */
int ctl_call(Ctl *ctl, const char *method, json_t *params, json_t **ret_result, CtlStatus *cs);

/*
 * ctl_fail_method - report @cs of @verb's call to @method once: as ctl_fail_on() does,
 * but a daemon that answers METHOD_NOT_FOUND is said to be older than fiberctl (for the
 * verbs whose methods came after the first release). Returns the exit status.
 */
int ctl_fail_method(const CtlStatus *cs, const char *verb, const char *method);

/*
 * ctl_method_unknown - true when @st is the daemon's METHOD_NOT_FOUND: a fiberd older than
 * the method asked for (e.g. job.run), so the caller falls back to the older methods.
 */
static inline bool ctl_method_unknown(const IpcStatus *st)
{
        return st->code && strcmp(st->code, IPC_METHOD_NOT_FOUND) == 0;
}

/* ctl_print_json - print @j on one line to stdout (compact), then a newline. */
void ctl_print_json(const json_t *j);

/* ctl_parse_id - a job id from a command-line word; false if not a positive integer. */
bool ctl_parse_id(const char *s, uint64_t *ret);

/* ctl_job_is_final / ctl_job_exit - on a job record: final state (done, failed,
 * cancelled, dead)?; 0 for done, 1 for failed, cancelled or dead, 75 for not final
 * (queued, running, scheduled, waiting, retrying). */
bool ctl_job_is_final(const json_t *record);
int ctl_job_exit(const json_t *record);
/* ctl_job_state_exit - ctl_job_exit() for the state name @state (NUL-terminated). */
int ctl_job_state_exit(const char *state);

/* ctl_print_job_line - one line about a finished (or waited-for) job record: human
 * "17 sha256 done 65ms {result}" or, with --json, the record itself. */
void ctl_print_job_line(const Ctl *ctl, const json_t *record);

/*
 * The job options `submit` and `schedule add` share (fiberctl-opts.c): their getopt_long
 * entries (ctl_job_longopts()) and short letters (CTL_JOB_SHORTOPTS); the long-only
 * ones return these values.
 */
enum {
        CTL_OPT_IN = 0x100, /* --in DUR: delay_ms */
        CTL_OPT_AT,         /* --at TIME: run_at */
        CTL_OPT_RETRIES,    /* --retries N: max_attempts N + 1 */
        CTL_OPT_BACKOFF,    /* --backoff DUR: backoff_ms */
        CTL_OPT_BACKOFF_MAX,
        CTL_OPT_AFTER,              /* --after ID[,ID...]: after, repeatable */
        CTL_OPT_KEY,                /* --key K: the idempotency key */
        CTL_OPT_VERB_FIRST = 0x200, /* a verb's own long-only options start here */
};
#define CTL_JOB_SHORTOPTS "p:t:c:"

/* ctl_job_longopts - the job options' getopt_long entries, then @own (a verb's own, @n of
 * them), then the {0} that ends them: a new array (caller frees), NULL when out of
 * memory. */
struct option *ctl_job_longopts(const struct option *own, size_t n);

/* The same options as Verb.value_opts words (they take the next word as their value). */
#define CTL_JOB_VALUE_OPTS                                                                         \
        " --priority -p --timeout -t --class -c --in --at --retries --backoff --backoff-max "      \
        "--after --key "
/* Their lines in a verb's --help. */
#define CTL_JOB_OPTIONS_HELP                                                                       \
        "  -p, --priority N    lower runs first, -20..20 (default 0)\n"                            \
        "  -t, --timeout DUR   cancel the job when it has not finished in time\n"                  \
        "  -c, --class NAME    the job class ([class.NAME] in fiberd's config; default\n"          \
        "                      \"default\"): its share of the job workers\n"                       \
        "  --in DUR            run no sooner than DUR from now (30s, 5m, 2h, 1d, 1h30m)\n"         \
        "  --at TIME           run no sooner than TIME: 2026-12-01T03:00:00Z, with an\n"           \
        "                      offset (+02:00), or @EPOCH_SECONDS; a zone is needed\n"             \
        "  --retries N         run again up to N times when it fails (max_attempts N+1)\n"         \
        "  --backoff DUR       the wait before the first retry, doubled for each next\n"           \
        "                      one (default 1s)\n"                                                 \
        "  --backoff-max DUR   the longest wait between retries (default 1h)\n"                    \
        "  --after ID[,ID...]  run once these jobs are done (repeatable)\n"                        \
        "  --key K             idempotency key: a repeat with the same K gets the first\n"         \
        "                      job's id\n"

/*
 * ctl_job_option - one job option (@c: getopt_long's value for it, @arg its argument)
 * into @opts, job.submit's options map.
 * Return: 0 when it was one and is in @opts; 1 when @c is not a job option (the verb's
 * own, or getopt's ':' / '?'); else the usage exit status (reported, naming the option).
 */
int ctl_job_option(int c, const char *arg, json_t *opts);

/* ctl_job_options_check - what no single option can judge (--in with --at): 0 or the
 * usage exit status (reported). */
int ctl_job_options_check(const json_t *opts);

/* Files named KEY=@FILE, opened by fiberctl with the user's own rights and passed to
 * fiberd (SCM_RIGHTS) with the request that refers to them (PROTOCOL.md). */
typedef struct PassedFiles {
        int fds[IPC_FDS_PER_REQUEST_MAX];
        size_t n;
} PassedFiles;

/* ctl_passed_files_close - close @pf's fds (once their request was sent). */
void ctl_passed_files_close(PassedFiles *pf);

/*
 * ctl_job_args - the plugin's KEY=VALUE words (@argv, @argc of them) into @args, typed by
 * convert_kv_value(); KEY=@FILE opens FILE into @pf and stands for it as an fd argument
 * (@pf NULL: refused, for a schedule, which outlives open files). @verb names the verb in
 * messages. Return: 0, or the exit status (reported).
 */
int ctl_job_args(const char *verb, int argc, char **argv, json_t *args, PassedFiles *pf);

/*
 * ctl_list_jobs - every job.list record matching @filter (a map; borrowed), newest first,
 * page by page, at most @limit (UINT64_MAX: all): `list`'s table, or with --json one
 * array. @verb names the verb in messages. Returns the exit code (failures reported).
 */
int ctl_list_jobs(Ctl *ctl, const char *verb, const json_t *filter, uint64_t limit);

/* Verbs: each gets the argv that starts with the verb's name; returns the exit code. */
int verb_submit(Ctl *ctl, int argc, char **argv);
int verb_status(Ctl *ctl, int argc, char **argv);
int verb_wait(Ctl *ctl, int argc, char **argv);
int verb_result(Ctl *ctl, int argc, char **argv);
int verb_cancel(Ctl *ctl, int argc, char **argv);
int verb_list(Ctl *ctl, int argc, char **argv);
int verb_batch(Ctl *ctl, int argc, char **argv);
int verb_logs(Ctl *ctl, int argc, char **argv); /* fiberctl-logs.c */
int verb_top(Ctl *ctl, int argc, char **argv);
int verb_dead(Ctl *ctl, int argc, char **argv); /* fiberctl-retry.c */
int verb_retry(Ctl *ctl, int argc, char **argv);
int verb_discard(Ctl *ctl, int argc, char **argv);
int verb_schedule(Ctl *ctl, int argc, char **argv); /* fiberctl-schedule.c */
int verb_pause(Ctl *ctl, int argc, char **argv);
int verb_resume(Ctl *ctl, int argc, char **argv);
int verb_web(Ctl *ctl, int argc, char **argv); /* web.c */
int verb_reload(Ctl *ctl, int argc, char **argv);

#endif /* FIBERD_CLIENT_FIBERCTL_H */
