/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-job.c — the verbs about single jobs: submit, status, wait, result, cancel,
 * list; and the printers of job records (ipc/PROTOCOL.md, "Job record").
 *
 * `submit --wait` is one job.run (submit and wait in one round trip); a fiberd older than
 * job.run answers METHOD_NOT_FOUND, and submit falls back to job.submit + job.wait. Either
 * way the output is the final record.
 *
 * `wait ID...` sends one job.wait per id on the same connection before reading any
 * answer, and prints each job as its answer arrives: the daemon answers out of order, so
 * a short job is reported while a long one still runs.
 */
#include "client/fiberctl.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>
#include <unistd.h>

#include "client/convert.h"
#include "client/progress.h"
#include "client/table.h"
#include "client/term.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

static const char *str_of(const json_t *o, const char *key, const char *dflt)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : dflt;
}

/* Whether @s is a final state other than done: failed, cancelled, or dead (out of
 * attempts). */
static bool state_is_unsuccessful(const char *s)
{
        return strcmp(s, IPC_STATE_FAILED) == 0 || strcmp(s, IPC_STATE_CANCELLED) == 0 ||
               strcmp(s, IPC_STATE_DEAD) == 0;
}

int ctl_job_state_exit(const char *state)
{
        if (strcmp(state, IPC_STATE_DONE) == 0)
                return 0;
        if (state_is_unsuccessful(state))
                return EXIT_JOB_FAILED;
        return EX_TEMPFAIL;
}

bool ctl_job_is_final(const json_t *record)
{
        return ctl_job_exit(record) != EX_TEMPFAIL;
}

int ctl_job_exit(const json_t *record)
{
        return ctl_job_state_exit(str_of(record, IPC_KEY_STATE, ""));
}

/* "65ms", "1.25s", "3m05s" for a duration in milliseconds. */
static void format_duration(char *buf, size_t size, json_int_t ms)
{
        if (ms < 0)
                ms = 0;
        const json_int_t sec = MSEC_PER_SEC;

        if (ms < sec)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "ms", ms);
        else if (ms < 60 * sec)
                snprintf(buf, size, "%.2fs", (double)ms / sec);
        else
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "m%02" JSON_INTEGER_FORMAT "s",
                         ms / (60 * sec), (ms / sec) % 60);
}

static void format_time(char *buf, size_t size, const json_t *ms)
{
        if (!json_is_integer(ms)) {
                snprintf(buf, size, "-");
                return;
        }
        json_int_t v = json_integer_value(ms);
        time_t t = (time_t)(v / (json_int_t)MSEC_PER_SEC);
        struct tm tm;
        char date[32];
        localtime_r(&t, &tm);
        strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
        snprintf(buf, size, "%s.%03d", date, (int)(v % (json_int_t)MSEC_PER_SEC));
}

/* The job's run time so far (or in total), from its timestamps; -1 when it is not
 * running and not final (a retrying job's last run ended, a scheduled or waiting one has
 * not begun, a requeued one waits again). */
static json_int_t job_duration_ms(const json_t *r)
{
        json_t *start = json_object_get(r, IPC_KEY_STARTED_MS);
        json_t *end = json_object_get(r, IPC_KEY_FINISHED_MS);
        if (!json_is_integer(start))
                return -1;
        if (!json_is_integer(end) && strcmp(str_of(r, IPC_KEY_STATE, ""), IPC_STATE_RUNNING) != 0)
                return -1;
        json_int_t e;
        if (json_is_integer(end)) {
                e = json_integer_value(end);
        } else {
                e = (json_int_t)(clock_now_ns(CLOCK_REALTIME) / NSEC_PER_MSEC);
        }
        return e - json_integer_value(start);
}

static void format_progress(char *buf, size_t size, const json_t *p)
{
        json_t *done = json_object_get(p, IPC_KEY_DONE), *total = json_object_get(p, IPC_KEY_TOTAL);
        if (!json_is_integer(done)) {
                snprintf(buf, size, "-");
                return;
        }
        json_int_t d = json_integer_value(done), t = json_integer_value(total);
        if (t > 0)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " (%d%%)", d,
                         t, (int)(100.0 * d / t));
        else
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT, d);
}

static json_int_t now_ms(void)
{
        return (json_int_t)(clock_now_ns(CLOCK_REALTIME) / NSEC_PER_MSEC);
}

/* "3.2s", "4m05s", "2h05m", "3d04h": how long until @ms (wall clock, ms since the
 * epoch); "now" when it passed. */
static void format_in(char *buf, size_t size, json_int_t ms)
{
        const json_int_t sec = MSEC_PER_SEC, min = 60 * sec, hour = 60 * min, day = 24 * hour;
        json_int_t left = ms - now_ms();

        if (left <= 0)
                snprintf(buf, size, "now");
        else if (left < min)
                snprintf(buf, size, "%.1fs", (double)left / sec);
        else if (left < hour)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "m%02" JSON_INTEGER_FORMAT "s",
                         left / min, left % min / sec);
        else if (left < day)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "h%02" JSON_INTEGER_FORMAT "m",
                         left / hour, left % hour / min);
        else
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "d%02" JSON_INTEGER_FORMAT "h",
                         left / day, left % day / hour);
}

/* When a job that is not running yet is due (PROTOCOL.md, "Scheduling jobs"): the next
 * attempt of a retrying job, the due time of a scheduled one; NULL when neither. */
static const json_t *job_due(const json_t *r)
{
        const char *state = str_of(r, IPC_KEY_STATE, "");
        const json_t *due = NULL;

        if (strcmp(state, IPC_STATE_RETRYING) == 0)
                due = json_object_get(r, IPC_KEY_NEXT_ATTEMPT_MS);
        else if (strcmp(state, IPC_STATE_SCHEDULED) == 0)
                due = json_object_get(r, IPC_KEY_RUN_AT_MS);
        return json_is_integer(due) ? due : NULL;
}

/* Whether the record's job gets (or got) more than one run, so its attempt is worth
 * showing: "2/5" = the second of five. */
static bool job_retries(const json_t *r)
{
        return json_integer_value(json_object_get(r, IPC_KEY_MAX_ATTEMPTS)) > 1 ||
               json_integer_value(json_object_get(r, IPC_KEY_ATTEMPT)) > 0;
}

static void format_attempt(char *buf, size_t size, const json_t *r)
{
        json_int_t attempt = json_integer_value(json_object_get(r, IPC_KEY_ATTEMPT));
        json_int_t max = json_integer_value(json_object_get(r, IPC_KEY_MAX_ATTEMPTS));

        if (max > 0)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT, attempt + 1,
                         max);
        else
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT, attempt + 1);
}

/* The ids of @a (an array of integers), comma-separated, into @buf; "-" when empty. */
static void format_ids(char *buf, size_t size, const json_t *a, const char *sep)
{
        size_t i, used = 0;
        json_t *v;

        buf[0] = '\0';
        json_array_foreach(a, i, v)
        {
                int n = snprintf(buf + used, size - used, "%s%" JSON_INTEGER_FORMAT, i ? sep : "",
                                 json_integer_value(v));
                if (n < 0 || (size_t)n >= size - used)
                        break;
                used += (size_t)n;
        }
        if (!buf[0])
                snprintf(buf, size, "-");
}

void ctl_print_job_line(const Ctl *ctl, const json_t *r)
{
        if (ctl->json) {
                ctl_print_json(r);
                return;
        }
        char dur[32] = "-";
        json_int_t ms = job_duration_ms(r);
        if (ms >= 0)
                format_duration(dur, sizeof(dur), ms);
        const char *state = str_of(r, IPC_KEY_STATE, "?");
        const char *sgr = term_colour(stdout) ? term_state_colour(state) : "";
        printf("%" JSON_INTEGER_FORMAT " %s %s%s%s %s",
               json_integer_value(json_object_get(r, IPC_KEY_ID)), str_of(r, IPC_KEY_PLUGIN, "?"),
               sgr, state, sgr[0] ? TERM_SGR_RESET : "", dur);
        /* the class only when the job names one: lines of default jobs stay as they were */
        const char *cls = str_of(r, IPC_KEY_CLASS, "default");
        if (strcmp(cls, "default") != 0)
                printf(" class=%s", cls);
        /* scheduling (PROTOCOL.md, "Scheduling jobs"): only what the job has */
        char buf[512];
        if (job_retries(r)) {
                format_attempt(buf, sizeof(buf), r);
                printf(" attempt=%s", buf);
        }
        const json_t *due = job_due(r);
        if (due) {
                format_in(buf, sizeof(buf), json_integer_value(due));
                printf(" due_in=%s", buf);
        }
        if (json_array_size(json_object_get(r, IPC_KEY_AFTER)) > 0) {
                format_ids(buf, sizeof(buf), json_object_get(r, IPC_KEY_AFTER), ",");
                printf(" after=%s", buf);
        }
        if (json_is_string(json_object_get(r, IPC_KEY_KEY)))
                printf(" key=%s", str_of(r, IPC_KEY_KEY, ""));
        json_t *err = json_object_get(r, IPC_KEY_ERROR);
        json_t *res = json_object_get(r, IPC_KEY_RESULT);
        if (json_is_object(err)) {
                printf(" %s: %s", str_of(err, IPC_KEY_CODE, "?"), str_of(err, IPC_KEY_MESSAGE, ""));
        } else if (res && !json_is_null(res)) {
                char *s = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
                if (s)
                        printf(" %s", s);
                free(s);
        }
        putchar('\n');
}

/* The scheduling part of the long form (PROTOCOL.md, "Scheduling jobs"): only what the
 * job has, so a plain job's `status` reads as before. */
static void print_job_schedule(const json_t *r)
{
        char when[64], in[32], ids[512];
        size_t i;
        json_t *e;

        if (job_retries(r)) {
                json_int_t max = json_integer_value(json_object_get(r, IPC_KEY_MAX_ATTEMPTS));
                printf("  attempt   %" JSON_INTEGER_FORMAT,
                       json_integer_value(json_object_get(r, IPC_KEY_ATTEMPT)) + 1);
                if (max > 0)
                        printf(" of %" JSON_INTEGER_FORMAT, max);
                putchar('\n');
        }
        static const struct {
                const char *key, *label;
        } times[] = {
                {IPC_KEY_RUN_AT_MS, "  run at    "},
                {IPC_KEY_NEXT_ATTEMPT_MS, "  next try  "},
        };
        for (i = 0; i < ELEMENTSOF(times); i++) {
                json_t *ms = json_object_get(r, times[i].key);
                if (!json_is_integer(ms))
                        continue;
                format_time(when, sizeof(when), ms);
                if (ctl_job_is_final(r) || json_integer_value(ms) <= now_ms()) {
                        printf("%s%s\n", times[i].label, when);
                } else {
                        format_in(in, sizeof(in), json_integer_value(ms));
                        printf("%s%s (in %s)\n", times[i].label, when, in);
                }
        }
        if (json_array_size(json_object_get(r, IPC_KEY_AFTER)) > 0) {
                format_ids(ids, sizeof(ids), json_object_get(r, IPC_KEY_AFTER), ", ");
                printf("  after     %s\n", ids);
        }
        if (json_is_string(json_object_get(r, IPC_KEY_KEY)))
                printf("  key       %s\n", str_of(r, IPC_KEY_KEY, ""));
        json_array_foreach(json_object_get(r, IPC_KEY_ERRORS), i, e)
        {
                format_time(when, sizeof(when), json_object_get(e, IPC_KEY_FINISHED_MS));
                printf("  %s attempt %" JSON_INTEGER_FORMAT ", %s: %s: %s\n",
                       i == 0 ? "errors   " : "         ",
                       json_integer_value(json_object_get(e, IPC_KEY_ATTEMPT)) + 1, when,
                       str_of(e, IPC_KEY_CODE, "?"), str_of(e, IPC_KEY_MESSAGE, ""));
        }
}

/* The long form of `status`. */
static void ctl_print_job_record(const Ctl *ctl, const json_t *r)
{
        char buf[64];

        if (ctl->json) {
                ctl_print_json(r);
                return;
        }
        const char *state = str_of(r, IPC_KEY_STATE, "?");
        const char *sgr = term_colour(stdout) ? term_state_colour(state) : "";
        printf("job %" JSON_INTEGER_FORMAT " (%s): %s%s%s\n",
               json_integer_value(json_object_get(r, IPC_KEY_ID)), str_of(r, IPC_KEY_PLUGIN, "?"),
               sgr, state, sgr[0] ? TERM_SGR_RESET : "");
        printf("  class     %s\n", str_of(r, IPC_KEY_CLASS, "default"));
        printf("  owner     uid %" JSON_INTEGER_FORMAT "\n",
               json_integer_value(json_object_get(r, IPC_KEY_OWNER)));
        printf("  priority  %" JSON_INTEGER_FORMAT "\n",
               json_integer_value(json_object_get(r, IPC_KEY_PRIORITY)));
        json_int_t timeout = json_integer_value(json_object_get(r, IPC_KEY_TIMEOUT_MS));
        if (timeout > 0) {
                format_duration(buf, sizeof(buf), timeout);
                printf("  timeout   %s\n", buf);
        }
        format_time(buf, sizeof(buf), json_object_get(r, IPC_KEY_CREATED_MS));
        printf("  created   %s\n", buf);
        format_time(buf, sizeof(buf), json_object_get(r, IPC_KEY_STARTED_MS));
        printf("  started   %s\n", buf);
        format_time(buf, sizeof(buf), json_object_get(r, IPC_KEY_FINISHED_MS));
        printf("  finished  %s\n", buf);
        json_int_t ms = job_duration_ms(r);
        if (ms >= 0) {
                format_duration(buf, sizeof(buf), ms);
                printf("  ran       %s%s\n", buf, ctl_job_is_final(r) ? "" : " so far");
        }
        json_t *progress = json_object_get(r, IPC_KEY_PROGRESS);
        if (json_is_object(progress)) {
                format_progress(buf, sizeof(buf), progress);
                printf("  progress  %s\n", buf);
        }
        print_job_schedule(r);
        json_t *res = json_object_get(r, IPC_KEY_RESULT);
        if (res && !json_is_null(res)) {
                char *s = json_dumps(res, JSON_COMPACT | JSON_ENCODE_ANY);
                printf("  result    %s\n", s ? s : "?");
                free(s);
        }
        json_t *err = json_object_get(r, IPC_KEY_ERROR);
        if (json_is_object(err))
                printf("  error     %s: %s\n", str_of(err, IPC_KEY_CODE, "?"),
                       str_of(err, IPC_KEY_MESSAGE, ""));
}

/* Reports a failed call about job @id; returns the exit code. */
static int job_fail(const CtlStatus *cs, uint64_t id)
{
        /* fiberd's messages about a job name it already ("no job 99"): said once */
        if (cs->step != CTL_STEP_ANSWER || ctl_mentions_job(cs->st.message, id))
                return ctl_fail(cs);
        return ctl_fail_on(cs, "job %" PRIu64, id);
}

/* The one ID a verb takes; returns 0 or the usage exit code. */
static int one_id(int argc, char **argv, uint64_t *ret)
{
        if (optind >= argc)
                return ctl_usage("%s needs a job id", argv[0]);
        if (optind + 1 < argc)
                return ctl_usage("%s takes one job id, got '%s' too", argv[0], argv[optind + 1]);
        if (!ctl_parse_id(argv[optind], ret))
                return ctl_usage("'%s' is not a job id (a positive integer)", argv[optind]);
        return 0;
}

static int no_options(int argc, char **argv)
{
        static const struct option none[] = {{0}};
        int c;
        opterr = 0;
        while ((c = getopt_long(argc, argv, "", none, NULL)) != -1)
                return ctl_usage("%s: unknown option '%s'", argv[0], argv[optind - 1]);
        return 0;
}

/*
 * For the verbs that take exactly one job id and no options: parse them, then call
 * @method with [id]. Return: a usage exit code (nothing was called), or 0 with the
 * call's own result (0, or ctl_call's negative errno, the reason in @cs) in *ret_call.
 */
static int call_on_one_id(Ctl *ctl, int argc, char **argv, const char *method, uint64_t *id,
                          json_t **res, CtlStatus *cs, int *ret_call)
{
        int r = no_options(argc, argv);
        if (r == 0)
                r = one_id(argc, argv, id);
        if (r)
                return r;
        *ret_call = ctl_call(ctl, method, json_pack("[I]", (json_int_t)*id), res, cs);
        return 0;
}

typedef struct Waiting Waiting;
static int wait_jobs(Ctl *ctl, Waiting *w, size_t n, json_t *timeout, json_t **ret_record);

/* job.wait [id] with no limit (the progress line on a terminal); *ret the final record.
 * Returns 0 or an exit code (reported). */
static int wait_one(Ctl *ctl, uint64_t id, json_t **ret);

/* The job id in fiberd's answer @res to a submit or run; when there is none, says so,
 * drops @res and returns EX_PROTOCOL. */
static int answer_id(json_t *res, json_int_t *ret_id)
{
        json_int_t id = json_integer_value(json_object_get(res, IPC_KEY_ID));

        if (id <= 0) {
                ctl_error(IPC_MALFORMED_MESSAGE, EX_PROTOCOL,
                          "submit: fiberd's answer has no job id");
                json_decref(res);
                return EX_PROTOCOL;
        }
        *ret_id = id;
        return 0;
}

/*
 * The end of `submit`: @record, the job record from job.run or job.wait (reference
 * taken). A record that is not final yet (job.run's wait ended early) is waited for
 * with job.wait. Prints the final record; returns the exit code.
 */
static int submit_report(Ctl *ctl, json_t *record)
{
        int r;
        json_int_t id;
        r = answer_id(record, &id);
        if (r)
                return r;
        if (!ctl_job_is_final(record)) {
                json_decref(record);
                r = wait_one(ctl, (uint64_t)id, &record);
                if (r)
                        return r;
        }
        ctl_print_job_record(ctl, record);
        r = ctl_job_exit(record);
        json_decref(record);
        return r;
}

/* ctl_call() with @pf's fds going along: 0 or a negative errno (the reason in @cs). */
static int call_with_files(Ctl *ctl, const char *method, json_t *params, PassedFiles *pf,
                           json_t **ret, CtlStatus *cs)
{
        int r = pf->n ? ctl_connect(ctl, cs) : 0;

        if (r < 0) {
                json_decref(params);
                return r;
        }
        if (pf->n)
                fiberd_client_request_fds(ctl->client, pf->fds, pf->n);
        return ctl_call(ctl, method, params, ret, cs);
}

int verb_submit(Ctl *ctl, int argc, char **argv)
{
        PassedFiles files = {.n = 0};
        static const struct option own[] = {
                {"wait", no_argument, NULL, 'w'},
        };
        struct option *options = ctl_job_longopts(own, ELEMENTSOF(own));
        json_t *args = json_object(), *opts = json_object(), *res = NULL;
        bool wait = false;
        int c, r = options ? 0 : ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");

        opterr = 0;
        while (r == 0 &&
               (c = getopt_long(argc, argv, ":w" CTL_JOB_SHORTOPTS, options, NULL)) != -1) {
                if (c == 'w') {
                        wait = true;
                        continue;
                }
                r = ctl_job_option(c, optarg, opts);
                if (r == 1 && c == ':')
                        r = ctl_usage("submit: option '%s' needs an argument", argv[optind - 1]);
                else if (r == 1)
                        r = ctl_usage("submit: unknown option '%s'", argv[optind - 1]);
        }
        free(options);
        if (r == 0)
                r = ctl_job_options_check(opts);
        if (r == 0 && optind >= argc)
                r = ctl_usage("submit needs a plugin name (see fiberctl plugins)");
        const char *plugin = r == 0 ? argv[optind] : NULL;
        if (r == 0)
                r = ctl_job_args("submit", argc - optind - 1, argv + optind + 1, args, &files);
        if (r) {
                ctl_passed_files_close(&files);
                json_decref(args);
                json_decref(opts);
                return r;
        }

        CtlStatus cs;
        /* job.run answers only at the end; on a terminal, submit and then wait, so the
         * progress line can ask for the job's progress meanwhile */
        if (wait && !progress_enabled(ctl)) {
                r = call_with_files(ctl, IPC_METHOD_JOB_RUN, json_pack("[sOO]", plugin, args, opts),
                                    &files, &res, &cs);
                if (r == 0 || cs.step != CTL_STEP_ANSWER || !ctl_method_unknown(&cs.st)) {
                        ctl_passed_files_close(&files);
                        json_decref(args);
                        json_decref(opts);
                        if (r < 0)
                                return ctl_fail_on(&cs, "submit %s", plugin);
                        return submit_report(ctl, res);
                }
                /* a fiberd older than job.run: submit, then wait */
        }
        r = call_with_files(ctl, IPC_METHOD_JOB_SUBMIT, json_pack("[soo]", plugin, args, opts),
                            &files, &res, &cs);
        ctl_passed_files_close(&files);
        if (r < 0)
                return ctl_fail_on(&cs, "submit %s", plugin);
        json_int_t id;
        r = answer_id(res, &id);
        if (r)
                return r;
        if (!wait) {
                if (ctl->json)
                        ctl_print_json(res);
                else
                        printf("%" JSON_INTEGER_FORMAT "\n", id);
                json_decref(res);
                return 0;
        }
        json_decref(res);
        r = wait_one(ctl, (uint64_t)id, &res);
        if (r)
                return r;
        return submit_report(ctl, res);
}

int verb_status(Ctl *ctl, int argc, char **argv)
{
        uint64_t id;
        json_t *res;
        CtlStatus cs;
        int rc, r = call_on_one_id(ctl, argc, argv, IPC_METHOD_JOB_STATUS, &id, &res, &cs, &rc);
        if (r)
                return r;
        if (rc < 0)
                return job_fail(&cs, id);
        ctl_print_job_record(ctl, res);
        json_decref(res);
        return 0;
}

struct Waiting {
        uint64_t id;
        uint32_t msgid;
        bool answered;
};

/* The worse of two exit codes of `wait`: an error beats a failed job beats "not yet". */
static int worse_exit(int worst, int code)
{
        if (code == 0)
                return worst;
        if (code == EX_TEMPFAIL)
                return worst ? worst : code;
        if (code == EXIT_JOB_FAILED)
                return worst == 0 || worst == EX_TEMPFAIL ? code : worst;
        return worst == 0 || worst == EXIT_JOB_FAILED || worst == EX_TEMPFAIL ? code : worst;
}

/*
 * Sends one job.wait per entry of @w (@timeout: its limit, JSON null = none; borrowed)
 * on one connection, then reads the answers as they come. Each final record is printed
 * as a job line, or, when @ret_record is given (one job: `submit --wait`), handed back
 * there (new reference) instead. On a terminal the progress line counts the jobs done,
 * and for one job asks job.status every PROGRESS_TICK_MS for the plugin's own progress.
 * Return: 0; 1 when a job failed or was cancelled; 75 when one was not final yet; the
 * exit code of a failed call (reported).
 */
static int wait_jobs(Ctl *ctl, Waiting *w, size_t n, json_t *timeout, json_t **ret_record)
{
        json_t *job_progress = NULL;
        uint32_t status_msgid = 0; /* the job.status in flight, 0 = none */
        Progress pg;
        int worst = 0;

        for (size_t i = 0; i < n; i++) {
                CtlStatus cs;
                if (ctl_send(ctl, IPC_METHOD_JOB_WAIT,
                             json_pack("[IO]", (json_int_t)w[i].id, timeout), &w[i].msgid, &cs) < 0)
                        return ctl_fail(&cs);
        }
        progress_init(&pg, ctl);
        progress_draw(&pg, 0, n, true, NULL, true);
        for (size_t left = n; left > 0;) {
                FiberdClientReply *m;
                FiberdClientError err;
                CtlStatus cs = {.step = CTL_STEP_ANSWER};
                json_t *rec;
                int r = fiberd_client_receive(ctl->client, pg.on ? PROGRESS_TICK_MS : -1, &m, &err);
                if (r == -ETIMEDOUT && pg.on) {
                        if (n == 1 && status_msgid == 0 &&
                            ctl_send(ctl, IPC_METHOD_JOB_STATUS,
                                     json_pack("[I]", (json_int_t)w[0].id), &status_msgid,
                                     &cs) < 0) {
                                ctl_fail(&cs); /* said, and the wait goes on */
                                status_msgid = 0;
                        }
                        progress_draw(&pg, n - left, n, true, job_progress, false);
                        continue;
                }
                if (r < 0) {
                        progress_clear(&pg);
                        json_decref(job_progress);
                        ctl_status(&cs.st, &err);
                        return ctl_fail(&cs);
                }
                uint32_t msgid = fiberd_client_reply_msgid(m);
                if (status_msgid != 0 && msgid == status_msgid) { /* the plugin's progress */
                        status_msgid = 0;
                        if (ctl_response(m, &rec, &cs.st) == 0) {
                                json_decref(job_progress);
                                job_progress = json_incref(json_object_get(rec, IPC_KEY_PROGRESS));
                                json_decref(rec);
                        }
                        fiberd_client_reply_free(m);
                        progress_draw(&pg, n - left, n, true, job_progress, true);
                        continue;
                }
                size_t i;
                for (i = 0; i < n; i++)
                        if (!w[i].answered && msgid != 0 && w[i].msgid == msgid)
                                break;
                if (i == n) { /* a notification, or an answer to nothing we asked */
                        fiberd_client_reply_free(m);
                        continue;
                }
                w[i].answered = true;
                left--;
                r = ctl_response(m, &rec, &cs.st);
                fiberd_client_reply_free(m);
                progress_clear(&pg);
                if (r < 0) {
                        worst = worse_exit(worst, job_fail(&cs, w[i].id));
                        continue;
                }
                worst = worse_exit(worst, ctl_job_exit(rec));
                if (ret_record) {
                        *ret_record = rec;
                } else {
                        ctl_print_job_line(ctl, rec);
                        fflush(stdout);
                        json_decref(rec);
                }
                if (left > 0)
                        progress_draw(&pg, n - left, n, true, NULL, true);
        }
        progress_clear(&pg);
        json_decref(job_progress);
        return worst;
}

static int wait_one(Ctl *ctl, uint64_t id, json_t **ret)
{
        Waiting w = {.id = id};
        json_t *rec = NULL;
        int r = wait_jobs(ctl, &w, 1, json_null(), &rec);

        if (rec) {
                *ret = rec;
                return 0;
        }
        return r ? r : EX_SOFTWARE;
}

int verb_wait(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"timeout", required_argument, NULL, 't'},
                {0},
        };
        json_t *timeout = json_null();
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":t:", options, NULL)) != -1) {
                uint64_t ms;
                if (c == 't' && convert_duration_ms(optarg, &ms) == 0) {
                        timeout = json_integer((json_int_t)ms);
                        continue;
                }
                if (c == 't')
                        return ctl_usage("--timeout needs a duration like 500ms, 10s or 2m, "
                                         "got '%s'",
                                         optarg);
                return ctl_usage("wait: unknown option or missing argument '%s'", argv[optind - 1]);
        }
        size_t n = (size_t)(argc - optind);
        if (n == 0)
                return ctl_usage("wait needs at least one job id");
        Waiting *w = calloc(n, sizeof(*w));
        if (!w)
                return EX_OSERR;
        for (size_t i = 0; i < n; i++) {
                if (!ctl_parse_id(argv[optind + (int)i], &w[i].id)) {
                        free(w);
                        json_decref(timeout);
                        return ctl_usage("'%s' is not a job id (a positive integer)",
                                         argv[optind + (int)i]);
                }
        }
        int r = wait_jobs(ctl, w, n, timeout, NULL);
        json_decref(timeout);
        free(w);
        return r;
}

int verb_result(Ctl *ctl, int argc, char **argv)
{
        uint64_t id;
        json_t *res;
        CtlStatus cs;
        int rc, r = call_on_one_id(ctl, argc, argv, IPC_METHOD_JOB_RESULT, &id, &res, &cs, &rc);
        if (r)
                return r;
        if (rc < 0) {
                /* A failed or cancelled job answers with its own error: say so, exit 1. */
                json_t *rec = NULL;
                CtlStatus cs2;
                if (ctl->client &&
                    ctl_call(ctl, IPC_METHOD_JOB_STATUS, json_pack("[I]", (json_int_t)id), &rec,
                             &cs2) == 0 &&
                    ctl_job_exit(rec) == EXIT_JOB_FAILED) {
                        /* "job 3 failed: <why>" from fiberd is the whole story */
                        if (ctl_mentions_job(cs.st.message, id))
                                ctl_error(cs.st.code, EXIT_JOB_FAILED, "%s", cs.st.message);
                        else
                                ctl_error(cs.st.code, EXIT_JOB_FAILED, "job %" PRIu64 " %s: %s", id,
                                          str_of(rec, IPC_KEY_STATE, "?"), cs.st.message);
                        json_decref(rec);
                        return EXIT_JOB_FAILED;
                }
                json_decref(rec);
                return job_fail(&cs, id);
        }
        char *s = json_dumps(res, JSON_ENCODE_ANY | (ctl->json ? JSON_COMPACT : JSON_INDENT(2)));
        if (s)
                puts(s);
        free(s);
        json_decref(res);
        return 0;
}

int verb_cancel(Ctl *ctl, int argc, char **argv)
{
        uint64_t id;
        json_t *res;
        CtlStatus cs;
        int rc, r = call_on_one_id(ctl, argc, argv, IPC_METHOD_JOB_CANCEL, &id, &res, &cs, &rc);
        if (r)
                return r;
        if (rc < 0)
                return job_fail(&cs, id);
        if (ctl->json)
                ctl_print_json(res);
        else if (ctl_job_is_final(res))
                printf("job %" PRIu64 " had already finished: %s\n", id,
                       str_of(res, IPC_KEY_STATE, "?"));
        else
                printf("job %" PRIu64 ": cancellation requested (it is %s; fiberctl wait %" PRIu64
                       " shows when it stops)\n",
                       id, str_of(res, IPC_KEY_STATE, "?"), id);
        json_decref(res);
        return 0;
}

static bool valid_state(const char *s)
{
        static const char *const states[] = {
                IPC_STATE_QUEUED,  IPC_STATE_RUNNING,   IPC_STATE_DONE,
                IPC_STATE_FAILED,  IPC_STATE_CANCELLED, IPC_STATE_SCHEDULED,
                IPC_STATE_WAITING, IPC_STATE_RETRYING,  IPC_STATE_DEAD};
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (strcmp(s, states[i]) == 0)
                        return true;
        return false;
}

/* The columns of `list` and `dead`, in order; those after PROGRESS only when a row
 * has something for them (list_columns_for()), so a list of plain jobs reads as before. */
enum {
        LIST_ID,
        LIST_PLUGIN,
        LIST_CLASS,
        LIST_STATE,
        LIST_OWNER,
        LIST_CREATED,
        LIST_RAN,
        LIST_PROGRESS,
        LIST_ATTEMPT, /* "2/5": a job that may be retried */
        LIST_DUE,     /* a scheduled or retrying job: how long until it is queued */
        LIST_ERROR,   /* the error's code, when a dead job is listed */
        LIST_NCOLUMNS,
};
static const struct {
        const char *name;
        unsigned flags;
} list_columns[LIST_NCOLUMNS] = {
        [LIST_ID] = {"ID", TABLE_RIGHT},           [LIST_PLUGIN] = {"PLUGIN", TABLE_TRUNC},
        [LIST_CLASS] = {"CLASS", TABLE_TRUNC},     [LIST_STATE] = {"STATE", 0},
        [LIST_OWNER] = {"OWNER", TABLE_RIGHT},     [LIST_CREATED] = {"CREATED", 0},
        [LIST_RAN] = {"RAN", TABLE_RIGHT},         [LIST_PROGRESS] = {"PROGRESS", 0},
        [LIST_ATTEMPT] = {"ATTEMPT", TABLE_RIGHT}, [LIST_DUE] = {"DUE", TABLE_RIGHT},
        [LIST_ERROR] = {"ERROR", TABLE_TRUNC},
};

/* Which columns @records need: shown[c] for each; the first eight always. */
static void list_columns_for(const json_t *records, bool shown[LIST_NCOLUMNS])
{
        size_t i;
        json_t *rec;

        for (int c = 0; c < LIST_NCOLUMNS; c++)
                shown[c] = c <= LIST_PROGRESS;
        json_array_foreach(records, i, rec)
        {
                shown[LIST_ATTEMPT] = shown[LIST_ATTEMPT] || job_retries(rec);
                shown[LIST_DUE] = shown[LIST_DUE] || job_due(rec);
                shown[LIST_ERROR] = shown[LIST_ERROR] ||
                                    strcmp(str_of(rec, IPC_KEY_STATE, ""), IPC_STATE_DEAD) == 0;
        }
}

static void list_add_row(Table *t, const json_t *rec, const bool shown[LIST_NCOLUMNS])
{
        char created[64], ran[32] = "-", progress[64], attempt[32] = "-", due[32] = "-";
        size_t col = 0;

        if (table_row(t) < 0)
                return;
        format_time(created, sizeof(created), json_object_get(rec, IPC_KEY_CREATED_MS));
        json_int_t ms = job_duration_ms(rec);
        if (ms >= 0)
                format_duration(ran, sizeof(ran), ms);
        format_progress(progress, sizeof(progress), json_object_get(rec, IPC_KEY_PROGRESS));
        if (job_retries(rec))
                format_attempt(attempt, sizeof(attempt), rec);
        if (job_due(rec))
                format_in(due, sizeof(due), json_integer_value(job_due(rec)));
        json_t *err = json_object_get(rec, IPC_KEY_ERROR);
        for (int c = 0; c < LIST_NCOLUMNS; c++) {
                if (!shown[c])
                        continue;
                switch (c) {
                case LIST_ID:
                        table_cell(t, col, "%" JSON_INTEGER_FORMAT,
                                   json_integer_value(json_object_get(rec, IPC_KEY_ID)));
                        break;
                case LIST_PLUGIN:
                        table_cell(t, col, "%s", str_of(rec, IPC_KEY_PLUGIN, "?"));
                        break;
                case LIST_CLASS:
                        table_cell(t, col, "%s", str_of(rec, IPC_KEY_CLASS, "default"));
                        break;
                case LIST_STATE:
                        table_cell_state(t, col, str_of(rec, IPC_KEY_STATE, "?"));
                        break;
                case LIST_OWNER:
                        table_cell(t, col, "%" JSON_INTEGER_FORMAT,
                                   json_integer_value(json_object_get(rec, IPC_KEY_OWNER)));
                        break;
                case LIST_CREATED:
                        table_cell(t, col, "%s", created);
                        break;
                case LIST_RAN:
                        table_cell(t, col, "%s", ran);
                        break;
                case LIST_PROGRESS:
                        table_cell(t, col, "%s", progress);
                        break;
                case LIST_ATTEMPT:
                        table_cell(t, col, "%s", attempt);
                        break;
                case LIST_DUE:
                        table_cell(t, col, "%s", due);
                        break;
                case LIST_ERROR:
                        table_cell(t, col, "%s",
                                   json_is_object(err) ? str_of(err, IPC_KEY_CODE, "?") : "-");
                        break;
                }
                col++;
        }
}

/* Prints @records (an array) as `list`'s table. Returns 0 or the exit code (reported). */
static int list_print_table(const json_t *records)
{
        bool shown[LIST_NCOLUMNS];
        Table *table = table_new(term_colour(stdout), 0);
        size_t i;
        json_t *rec;
        int r;

        if (!table)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");
        list_columns_for(records, shown);
        for (int c = 0; c < LIST_NCOLUMNS; c++)
                if (shown[c])
                        table_column(table, list_columns[c].name, list_columns[c].flags, 0);
        json_array_foreach(records, i, rec)
        {
                list_add_row(table, rec, shown);
        }
        r = table_print(table, stdout) < 0
                    ? ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "list: cannot print the table")
                    : 0;
        table_free(table);
        return r;
}

int ctl_list_jobs(Ctl *ctl, const char *verb, const json_t *filter, uint64_t limit)
{
        json_t *all = json_array(), *res = NULL, *cursor = json_null();
        uint64_t listed = 0;
        bool paged = true;
        CtlStatus cs;
        int r = all ? 0 : ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");

        while (r == 0 && listed < limit) {
                json_t *f = json_copy((json_t *)filter), *jobs, *rec;
                uint64_t left = limit - listed;
                size_t i;

                if (paged)
                        json_object_set(f, IPC_FILTER_CURSOR, cursor);
                if (limit != UINT64_MAX)
                        json_object_set_new(f, IPC_FILTER_LIMIT, json_integer((json_int_t)left));
                r = ctl_call(ctl, IPC_METHOD_JOB_LIST, json_pack("[o]", f), &res, &cs);
                if (r < 0 && paged && listed == 0 && json_is_null(cursor) &&
                    cs.step == CTL_STEP_ANSWER && cs.st.code &&
                    strcmp(cs.st.code, IPC_INVALID_ARGUMENT) == 0) {
                        paged = false; /* a fiberd from before pages */
                        r = 0;
                        continue;
                }
                if (r < 0) {
                        r = ctl_fail_on(&cs, "%s", verb);
                        break;
                }
                if (json_is_array(res))
                        paged = false; /* an unpaged answer: all there is */
                jobs = paged ? json_object_get(res, IPC_KEY_JOBS) : res;
                if (!json_is_array(jobs)) {
                        r = ctl_error(IPC_MALFORMED_MESSAGE, EX_PROTOCOL,
                                      "%s: fiberd's answer has no job array", verb);
                        break;
                }
                json_array_foreach(jobs, i, rec)
                {
                        if (listed == limit)
                                break;
                        json_array_append(all, rec);
                        listed++;
                }
                json_decref(cursor);
                cursor = json_incref(json_object_get(res, IPC_KEY_NEXT_CURSOR));
                json_decref(res);
                res = NULL;
                if (!paged || !json_is_integer(cursor))
                        break;
        }
        json_decref(res);
        if (r == 0 && ctl->json)
                ctl_print_json(all);
        else if (r == 0)
                r = list_print_table(all);
        json_decref(all);
        json_decref(cursor);
        return r;
}

/*
 * list: job.list page by page (PROTOCOL.md: the filter's "cursor"), newest first, so no
 * answer passes the message cap however many jobs there are; --limit N stops after N.
 * The table is printed once every page is in: its columns are sized to all the rows
 * (a 10,000-job table is a few MiB), and the scheduling columns (attempt, due, error)
 * appear when some row has them. With --json, one array of every record. A fiberd
 * from before pages refuses the cursor key: then one unpaged call, as it answers it.
 */
int verb_list(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"state", required_argument, NULL, 'S'},
                {"plugin", required_argument, NULL, 'p'},
                {"limit", required_argument, NULL, 'n'},
                {0},
        };
        json_t *filter = json_object();
        uint64_t limit = UINT64_MAX;
        int c, r = 0;

        opterr = 0;
        while (r == 0 && (c = getopt_long(argc, argv, ":S:p:n:", options, NULL)) != -1) {
                switch (c) {
                case 'S':
                        if (!valid_state(optarg))
                                r = ctl_usage("--state must be queued, running, done, failed, "
                                              "cancelled, scheduled, waiting, retrying or "
                                              "dead, got '%s'",
                                              optarg);
                        else
                                json_object_set_new(filter, IPC_FILTER_STATE, json_string(optarg));
                        break;
                case 'p':
                        json_object_set_new(filter, IPC_FILTER_PLUGIN, json_string(optarg));
                        break;
                case 'n':
                        if (!ctl_parse_id(optarg, &limit))
                                r = ctl_usage("--limit needs a positive integer, got '%s'", optarg);
                        break;
                default:
                        r = ctl_usage("%s: unknown option or missing argument '%s'", argv[0],
                                      argv[optind - 1]);
                }
        }
        if (r == 0 && optind < argc)
                r = ctl_usage("%s takes no arguments, got '%s'", argv[0], argv[optind]);
        if (r == 0)
                r = ctl_list_jobs(ctl, "list", filter, limit);
        json_decref(filter);
        return r;
}
