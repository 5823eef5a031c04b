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
 *   0   success                       1   a job ended failed or cancelled
 *   64  usage error (EX_USAGE)        65  the daemon refused an argument (INVALID_ARGUMENT)
 *   66  no such job or plugin (NOT_FOUND)
 *   69  daemon unreachable or stopping (EX_UNAVAILABLE)
 *   70  internal error (EX_SOFTWARE)  75  try again: overloaded, timed out, job not finished
 *   76  protocol error (EX_PROTOCOL)  77  permission denied (EX_NOPERM)
 */
#ifndef FIBERD_CLIENT_FIBERCTL_H
#define FIBERD_CLIENT_FIBERCTL_H

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

/* ctl_job_is_final / ctl_job_exit - on a job record: final state?; 0 for done, 1 for
 * failed or cancelled, 75 for not final. */
bool ctl_job_is_final(const json_t *record);
int ctl_job_exit(const json_t *record);

/* ctl_print_job_line - one line about a finished (or waited-for) job record: human
 * "17 sha256 done 65ms {result}" or, with --json, the record itself. */
void ctl_print_job_line(const Ctl *ctl, const json_t *record);

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

#endif /* FIBERD_CLIENT_FIBERCTL_H */
