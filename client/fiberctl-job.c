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

bool ctl_job_is_final(const json_t *record)
{
        const char *s = str_of(record, IPC_KEY_STATE, "");
        return strcmp(s, IPC_STATE_DONE) == 0 || strcmp(s, IPC_STATE_FAILED) == 0 ||
               strcmp(s, IPC_STATE_CANCELLED) == 0;
}

int ctl_job_exit(const json_t *record)
{
        const char *s = str_of(record, IPC_KEY_STATE, "");
        if (strcmp(s, IPC_STATE_DONE) == 0)
                return 0;
        if (strcmp(s, IPC_STATE_FAILED) == 0 || strcmp(s, IPC_STATE_CANCELLED) == 0)
                return EXIT_JOB_FAILED;
        return EX_TEMPFAIL;
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

/* The job's run time so far (or in total), from its timestamps. */
static json_int_t job_duration_ms(const json_t *r)
{
        json_t *start = json_object_get(r, IPC_KEY_STARTED_MS);
        json_t *end = json_object_get(r, IPC_KEY_FINISHED_MS);
        if (!json_is_integer(start))
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

/* Files named KEY=@FILE, opened by fiberctl with the user's own rights and passed to
 * fiberd (SCM_RIGHTS) with the request that refers to them (PROTOCOL.md). */
typedef struct PassedFiles {
        int fds[IPC_FDS_PER_REQUEST_MAX];
        size_t n;
} PassedFiles;

/* Opens @path and returns the fd argument that stands for it, or NULL (message printed). */
static json_t *passed_file(PassedFiles *pf, const char *key, const char *path)
{
        char hex[9];
        int fd;

        if (pf->n == IPC_FDS_PER_REQUEST_MAX) {
                ctl_usage("submit: at most %d KEY=@FILE arguments", IPC_FDS_PER_REQUEST_MAX);
                return NULL;
        }
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                fprintf(stderr, "fiberctl: %s=@%s: cannot open %s: %s\n", key, path, path,
                        strerror(errno));
                return NULL;
        }
        snprintf(hex, sizeof(hex), "%08zx", pf->n);
        pf->fds[pf->n++] = fd;
        return json_pack("{s:i, s:s}", "ext", IPC_EXT_FD, "hex", hex);
}

static void passed_files_close(PassedFiles *pf)
{
        for (size_t i = 0; i < pf->n; i++)
                close(pf->fds[i]);
        pf->n = 0;
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
        static const struct option options[] = {
                {"priority", required_argument, NULL, 'p'},
                {"timeout", required_argument, NULL, 't'},
                {"wait", no_argument, NULL, 'w'},
                {"class", required_argument, NULL, 'c'},
                {0},
        };
        json_t *args = json_object(), *opts = json_object(), *res = NULL;
        bool wait = false;
        int c, r = 0;

        opterr = 0;
        while (r == 0 && (c = getopt_long(argc, argv, ":p:t:wc:", options, NULL)) != -1) {
                switch (c) {
                case 'p': {
                        char *end;
                        errno = 0;
                        long long v = strtoll(optarg, &end, 10);
                        if (errno || *end || end == optarg)
                                r = ctl_usage("--priority needs an integer, got '%s'", optarg);
                        else
                                json_object_set_new(opts, IPC_OPT_PRIORITY, json_integer(v));
                        break;
                }
                case 't': {
                        uint64_t ms;
                        if (convert_duration_ms(optarg, &ms) < 0)
                                r = ctl_usage("--timeout needs a duration like 500ms, 10s or "
                                              "2m, got '%s'",
                                              optarg);
                        else
                                json_object_set_new(opts, IPC_OPT_TIMEOUT_MS,
                                                    json_integer((json_int_t)ms));
                        break;
                }
                case 'w':
                        wait = true;
                        break;
                case 'c':
                        json_object_set_new(opts, IPC_OPT_CLASS, json_string(optarg));
                        break;
                case ':':
                        r = ctl_usage("submit: option '%s' needs an argument", argv[optind - 1]);
                        break;
                default:
                        r = ctl_usage("submit: unknown option '%s'", argv[optind - 1]);
                }
        }
        if (r == 0 && optind >= argc)
                r = ctl_usage("submit needs a plugin name (see fiberctl plugins)");
        const char *plugin = r == 0 ? argv[optind] : NULL;
        for (int i = optind + 1; r == 0 && i < argc; i++) {
                const char *eq = strchr(argv[i], '=');
                if (!eq || eq == argv[i]) {
                        r = ctl_usage("submit: '%s' is not KEY=VALUE", argv[i]);
                        break;
                }
                char *key = strndup(argv[i], (size_t)(eq - argv[i]));
                json_t *v =
                        eq[1] == '@' ? passed_file(&files, key, eq + 2) : convert_kv_value(eq + 1);
                if (!v)
                        r = EX_NOINPUT;
                else
                        json_object_set_new(args, key, v);
                free(key);
        }
        if (r) {
                passed_files_close(&files);
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
                        passed_files_close(&files);
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
        passed_files_close(&files);
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
        static const char *const states[] = {IPC_STATE_QUEUED, IPC_STATE_RUNNING, IPC_STATE_DONE,
                                             IPC_STATE_FAILED, IPC_STATE_CANCELLED};
        for (size_t i = 0; i < ELEMENTSOF(states); i++)
                if (strcmp(s, states[i]) == 0)
                        return true;
        return false;
}

/* The columns of `list`, in order. */
static const char *const list_columns[] = {"ID",    "PLUGIN",  "CLASS", "STATE",
                                           "OWNER", "CREATED", "RAN",   "PROGRESS"};

static void list_add_columns(Table *t)
{
        for (size_t i = 0; i < ELEMENTSOF(list_columns); i++) {
                const char *n = list_columns[i];
                bool number =
                        strcmp(n, "ID") == 0 || strcmp(n, "OWNER") == 0 || strcmp(n, "RAN") == 0;
                bool text = strcmp(n, "PLUGIN") == 0 || strcmp(n, "CLASS") == 0;
                table_column(t, n, number ? TABLE_RIGHT : text ? TABLE_TRUNC : 0, 0);
        }
}

static void list_add_row(Table *t, const json_t *rec)
{
        char created[64], ran[32] = "-", progress[64];

        if (table_row(t) < 0)
                return;
        format_time(created, sizeof(created), json_object_get(rec, IPC_KEY_CREATED_MS));
        json_int_t ms = job_duration_ms(rec);
        if (ms >= 0)
                format_duration(ran, sizeof(ran), ms);
        format_progress(progress, sizeof(progress), json_object_get(rec, IPC_KEY_PROGRESS));
        table_cell(t, 0, "%" JSON_INTEGER_FORMAT,
                   json_integer_value(json_object_get(rec, IPC_KEY_ID)));
        table_cell(t, 1, "%s", str_of(rec, IPC_KEY_PLUGIN, "?"));
        table_cell(t, 2, "%s", str_of(rec, IPC_KEY_CLASS, "default"));
        table_cell_state(t, 3, str_of(rec, IPC_KEY_STATE, "?"));
        table_cell(t, 4, "%" JSON_INTEGER_FORMAT,
                   json_integer_value(json_object_get(rec, IPC_KEY_OWNER)));
        table_cell(t, 5, "%s", created);
        table_cell(t, 6, "%s", ran);
        table_cell(t, 7, "%s", progress);
}

/*
 * list: job.list page by page (PROTOCOL.md: the filter's "cursor"), newest first, so no
 * answer passes the message cap however many jobs there are; --limit N stops after N.
 * The table is printed once every page is in: its columns are sized to all the rows
 * (a 10,000-job table is a few MiB). With --json, one array of every record. A fiberd
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
        json_t *filter = json_object(), *all = NULL, *res = NULL, *cursor = json_null();
        Table *table = NULL;
        uint64_t limit = UINT64_MAX, listed = 0;
        bool paged = true;
        CtlStatus cs;
        int c, r = 0;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":S:p:n:", options, NULL)) != -1) {
                switch (c) {
                case 'S':
                        if (!valid_state(optarg)) {
                                json_decref(filter);
                                return ctl_usage("--state must be queued, running, done, "
                                                 "failed or cancelled, got '%s'",
                                                 optarg);
                        }
                        json_object_set_new(filter, IPC_FILTER_STATE, json_string(optarg));
                        break;
                case 'p':
                        json_object_set_new(filter, IPC_FILTER_PLUGIN, json_string(optarg));
                        break;
                case 'n':
                        if (!ctl_parse_id(optarg, &limit)) {
                                json_decref(filter);
                                return ctl_usage("--limit needs a positive integer, got '%s'",
                                                 optarg);
                        }
                        break;
                default:
                        json_decref(filter);
                        return ctl_usage("list: unknown option or missing argument '%s'",
                                         argv[optind - 1]);
                }
        }
        if (optind < argc) {
                json_decref(filter);
                return ctl_usage("list takes no arguments, got '%s'", argv[optind]);
        }
        if (ctl->json) {
                all = json_array();
        } else {
                table = table_new(term_colour(stdout), 0);
                if (!table) {
                        json_decref(filter);
                        return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");
                }
                list_add_columns(table);
        }
        while (listed < limit) {
                json_t *f = json_copy(filter), *jobs, *rec;
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
                        continue;
                }
                if (r < 0) {
                        r = ctl_fail_on(&cs, "list");
                        break;
                }
                if (json_is_array(res))
                        paged = false; /* an unpaged answer: all there is */
                jobs = paged ? json_object_get(res, IPC_KEY_JOBS) : res;
                if (!json_is_array(jobs)) {
                        r = ctl_error(IPC_MALFORMED_MESSAGE, EX_PROTOCOL,
                                      "list: fiberd's answer has no job array");
                        break;
                }
                json_array_foreach(jobs, i, rec)
                {
                        if (listed == limit)
                                break;
                        if (all)
                                json_array_append(all, rec);
                        else
                                list_add_row(table, rec);
                        listed++;
                }
                json_decref(cursor);
                cursor = json_incref(json_object_get(res, IPC_KEY_NEXT_CURSOR));
                json_decref(res);
                res = NULL;
                if (!paged || !json_is_integer(cursor))
                        break;
        }
        if (r == 0 && all)
                ctl_print_json(all);
        if (r == 0 && table && table_print(table, stdout) < 0)
                r = ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "list: cannot print the table");
        table_free(table);
        json_decref(all);
        json_decref(cursor);
        json_decref(filter);
        return r;
}
