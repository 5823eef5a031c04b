/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-schedule.c — what runs later, again, or not yet (PROTOCOL.md, "Scheduling
 * jobs"): `fiberctl schedule add|list|remove|pause|resume` (the schedule.* methods:
 * periodic schedules that submit a job at each tick of a cron expression or an
 * interval), and `fiberctl pause|resume class|plugin NAME` (an admin's hold on a class's
 * or a plugin's queued jobs); beside them the other admin verb, `fiberctl reload`.
 *
 * `schedule add NAME (--cron EXPR [--tz ZONE] | --every DUR) [--missed skip|run-once]
 * PLUGIN [KEY=VALUE...] [job options]` takes the plugin's arguments and the job options
 * as `submit` does (fiberctl-opts.c), less what cannot repeat: KEY=@FILE (an open file
 * does not outlive the command), --at (one point in time) and --key (fiberd keys each
 * tick's job "schedule:NAME:TICK" itself).
 */
#include "client/fiberctl.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <time.h>

#include "client/convert.h"
#include "client/table.h"
#include "client/term.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

static const char *str_of(const json_t *o, const char *key, const char *dflt)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : dflt;
}

/* "2026-12-01 03:00:00" in local time for @ms (ms since the epoch); "-" for nil. */
static void format_when(char *buf, size_t size, const json_t *ms)
{
        if (!json_is_integer(ms)) {
                snprintf(buf, size, "-");
                return;
        }
        time_t t = (time_t)(json_integer_value(ms) / (json_int_t)MSEC_PER_SEC);
        struct tm tm;
        localtime_r(&t, &tm);
        strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm);
}

/* "cron 0 3 * * * (Europe/Berlin)" or "every 5m" for a schedule. */
static void format_spec(char *buf, size_t size, const json_t *s)
{
        json_t *every = json_object_get(s, IPC_KEY_EVERY_MS);

        if (json_is_string(json_object_get(s, IPC_KEY_CRON))) {
                snprintf(buf, size, "cron %s (%s)", str_of(s, IPC_KEY_CRON, ""),
                         str_of(s, IPC_KEY_TZ, "UTC"));
                return;
        }
        json_int_t ms = json_integer_value(every);
        const json_int_t sec = MSEC_PER_SEC;
        if (ms % (86400 * sec) == 0 && ms > 0)
                snprintf(buf, size, "every %" JSON_INTEGER_FORMAT "d", ms / (86400 * sec));
        else if (ms % (3600 * sec) == 0 && ms > 0)
                snprintf(buf, size, "every %" JSON_INTEGER_FORMAT "h", ms / (3600 * sec));
        else if (ms % (60 * sec) == 0 && ms > 0)
                snprintf(buf, size, "every %" JSON_INTEGER_FORMAT "m", ms / (60 * sec));
        else if (ms % sec == 0)
                snprintf(buf, size, "every %" JSON_INTEGER_FORMAT "s", ms / sec);
        else
                snprintf(buf, size, "every %" JSON_INTEGER_FORMAT "ms", ms);
}

/* One schedule, for a person: what it submits, when, and what it last did. */
static void print_schedule(const json_t *s)
{
        char spec[256], next[32], last[32];
        char *args = json_dumps(json_object_get(s, IPC_KEY_ARGS), JSON_COMPACT);

        format_spec(spec, sizeof(spec), s);
        format_when(next, sizeof(next), json_object_get(s, IPC_KEY_NEXT_MS));
        format_when(last, sizeof(last), json_object_get(s, IPC_KEY_LAST_MS));
        printf("schedule %s (uid %" JSON_INTEGER_FORMAT "): %s%s\n", str_of(s, IPC_KEY_NAME, "?"),
               json_integer_value(json_object_get(s, IPC_KEY_OWNER)), spec,
               json_is_true(json_object_get(s, IPC_KEY_PAUSED)) ? ", paused" : "");
        printf("  submits   %s %s\n", str_of(s, IPC_KEY_PLUGIN, "?"), args ? args : "{}");
        if (json_object_size(json_object_get(s, IPC_KEY_OPTIONS)) > 0) {
                char *opts = json_dumps(json_object_get(s, IPC_KEY_OPTIONS), JSON_COMPACT);
                printf("  options   %s\n", opts ? opts : "?");
                free(opts);
        }
        printf("  missed    %s\n", str_of(s, IPC_KEY_MISSED, IPC_MISSED_SKIP));
        printf("  next      %s\n", next);
        printf("  last      %s", last);
        if (json_is_integer(json_object_get(s, IPC_KEY_LAST_JOB)))
                printf(" (job %" JSON_INTEGER_FORMAT ")",
                       json_integer_value(json_object_get(s, IPC_KEY_LAST_JOB)));
        putchar('\n');
        free(args);
}

/* Whether @name is a schedule name: [A-Za-z0-9_.-]{1,64}. */
static bool valid_name(const char *name)
{
        size_t n = strlen(name);

        return n >= 1 && n <= IPC_SCHEDULE_NAME_MAX &&
               strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") ==
                       n;
}

static int name_usage(const char *name)
{
        return ctl_usage("'%s' is not a schedule name: 1 to %d of A-Z a-z 0-9 _ . -", name,
                         IPC_SCHEDULE_NAME_MAX);
}

enum {
        OPT_CRON = CTL_OPT_VERB_FIRST,
        OPT_TZ,
        OPT_EVERY,
        OPT_MISSED,
};

/* The schedule's own options into @spec; 1 when @c is not one of them. */
static int spec_option(int c, const char *arg, json_t *spec)
{
        uint64_t ms;

        switch (c) {
        case OPT_CRON:
                json_object_set_new(spec, IPC_KEY_CRON, json_string(arg));
                return 0;
        case OPT_TZ:
                json_object_set_new(spec, IPC_KEY_TZ, json_string(arg));
                return 0;
        case OPT_EVERY:
                if (convert_duration_ms_max(arg, IPC_RUN_AT_MAX_AHEAD_MS, &ms) < 0)
                        return ctl_usage("--every needs a duration like 30s, 5m, 2h, 1d or "
                                         "1h30m, got '%s'",
                                         arg);
                if (ms < IPC_SCHEDULE_EVERY_MS_MIN)
                        return ctl_usage("--every: '%s' is shorter than fiberd's least "
                                         "interval, %ds",
                                         arg, IPC_SCHEDULE_EVERY_MS_MIN / 1000);
                json_object_set_new(spec, IPC_KEY_EVERY_MS, json_integer((json_int_t)ms));
                return 0;
        case OPT_MISSED:
                if (strcmp(arg, IPC_MISSED_SKIP) == 0)
                        json_object_set_new(spec, IPC_KEY_MISSED, json_string(IPC_MISSED_SKIP));
                else if (strcmp(arg, "run-once") == 0 || strcmp(arg, IPC_MISSED_RUN_ONCE) == 0)
                        json_object_set_new(spec, IPC_KEY_MISSED, json_string(IPC_MISSED_RUN_ONCE));
                else
                        return ctl_usage("--missed must be skip or run-once, got '%s'", arg);
                return 0;
        }
        return 1;
}

/* What only the whole line can judge: one of --cron and --every; --tz with --cron; no
 * --at or --key. 0 or the usage exit status. */
static int schedule_add_check(const json_t *spec, const json_t *opts)
{
        bool cron = json_object_get(spec, IPC_KEY_CRON),
             every = json_object_get(spec, IPC_KEY_EVERY_MS);

        if (cron == every)
                return ctl_usage("schedule add needs one of --cron 'EXPR' and --every DUR");
        if (json_object_get(spec, IPC_KEY_TZ) && !cron)
                return ctl_usage("--tz goes with --cron (an interval has no time zone)");
        if (json_object_get(opts, IPC_OPT_RUN_AT))
                return ctl_usage("schedule add: --at names one point in time; a schedule's "
                                 "jobs run at its ticks (--in delays each)");
        if (json_object_get(opts, IPC_OPT_KEY))
                return ctl_usage("schedule add: --key is fiberd's for a schedule: each tick's "
                                 "job gets the key schedule:NAME:TICK");
        return 0;
}

static int schedule_add(Ctl *ctl, int argc, char **argv)
{
        static const struct option own[] = {
                {"cron", required_argument, NULL, OPT_CRON},
                {"tz", required_argument, NULL, OPT_TZ},
                {"every", required_argument, NULL, OPT_EVERY},
                {"missed", required_argument, NULL, OPT_MISSED},
        };
        struct option *options = ctl_job_longopts(own, ELEMENTSOF(own));
        json_t *spec = json_object(), *args = json_object(), *opts = json_object(), *res;
        CtlStatus cs;
        int c, r = options ? 0 : ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");

        opterr = 0;
        while (r == 0 &&
               (c = getopt_long(argc, argv, ":" CTL_JOB_SHORTOPTS, options, NULL)) != -1) {
                r = spec_option(c, optarg, spec);
                if (r == 1)
                        r = ctl_job_option(c, optarg, opts);
                if (r == 1 && c == ':')
                        r = ctl_usage("schedule add: option '%s' needs an argument",
                                      argv[optind - 1]);
                else if (r == 1)
                        r = ctl_usage("schedule add: unknown option '%s'", argv[optind - 1]);
        }
        free(options);
        if (r == 0 && argc - optind < 2)
                r = ctl_usage("schedule add needs a name and a plugin: schedule add NAME "
                              "(--cron 'EXPR' | --every DUR) PLUGIN [KEY=VALUE...]");
        if (r == 0 && !valid_name(argv[optind]))
                r = name_usage(argv[optind]);
        if (r == 0)
                r = schedule_add_check(spec, opts);
        if (r == 0)
                r = ctl_job_options_check(opts);
        if (r == 0)
                r = ctl_job_args("schedule add", argc - optind - 2, argv + optind + 2, args, NULL);
        if (r) {
                json_decref(spec);
                json_decref(args);
                json_decref(opts);
                return r;
        }
        const char *name = argv[optind], *plugin = argv[optind + 1];
        if (ctl_call(ctl, IPC_METHOD_SCHEDULE_ADD,
                     json_pack("[sosoo]", name, spec, plugin, args, opts), &res, &cs) < 0)
                return ctl_fail_method(&cs, "schedule add", IPC_METHOD_SCHEDULE_ADD);
        if (ctl->json)
                ctl_print_json(res);
        else
                print_schedule(res);
        json_decref(res);
        return 0;
}

static int schedule_list(Ctl *ctl, int argc, char **argv)
{
        static const char *const columns[] = {"NAME",  "OWNER", "WHEN",    "PLUGIN",
                                              "STATE", "NEXT",  "LAST JOB"};
        json_t *res, *s;
        CtlStatus cs;
        size_t i;
        int r;

        if (argc > 1)
                return ctl_usage("schedule list takes no arguments, got '%s'", argv[1]);
        if (ctl_call(ctl, IPC_METHOD_SCHEDULE_LIST, json_array(), &res, &cs) < 0)
                return ctl_fail_method(&cs, "schedule list", IPC_METHOD_SCHEDULE_LIST);
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        if (!json_is_array(res)) {
                json_decref(res);
                return ctl_error(IPC_MALFORMED_MESSAGE, EX_PROTOCOL,
                                 "schedule list: fiberd's answer is not an array of schedules");
        }
        Table *t = table_new(term_colour(stdout), 0);
        for (i = 0; t && i < ELEMENTSOF(columns); i++)
                table_column(t, columns[i],
                             i == 1 || i == 6             ? TABLE_RIGHT
                             : i == 0 || i == 2 || i == 3 ? TABLE_TRUNC
                                                          : 0,
                             0);
        json_array_foreach(res, i, s)
        {
                char spec[256], next[32];
                if (!t || table_row(t) < 0)
                        break;
                format_spec(spec, sizeof(spec), s);
                format_when(next, sizeof(next), json_object_get(s, IPC_KEY_NEXT_MS));
                table_cell(t, 0, "%s", str_of(s, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT,
                           json_integer_value(json_object_get(s, IPC_KEY_OWNER)));
                table_cell(t, 2, "%s", spec);
                table_cell(t, 3, "%s", str_of(s, IPC_KEY_PLUGIN, "?"));
                table_cell(t, 4, "%s",
                           json_is_true(json_object_get(s, IPC_KEY_PAUSED)) ? "paused" : "active");
                table_cell(t, 5, "%s", next);
                if (json_is_integer(json_object_get(s, IPC_KEY_LAST_JOB)))
                        table_cell(t, 6, "%" JSON_INTEGER_FORMAT,
                                   json_integer_value(json_object_get(s, IPC_KEY_LAST_JOB)));
                else
                        table_cell(t, 6, "-");
        }
        r = t ? table_print(t, stdout) : -ENOMEM;
        table_free(t);
        json_decref(res);
        if (r < 0)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR,
                                 "schedule list: cannot print the table: %s", strerror(-r));
        return 0;
}

/* schedule remove|pause|resume NAME [--owner UID]: @method with [name] or [name, uid]. */
static int schedule_named(Ctl *ctl, int argc, char **argv, const char *method, const char *done)
{
        static const struct option options[] = {
                {"owner", required_argument, NULL, 'o'},
                {0},
        };
        json_t *params, *res;
        json_int_t owner = -1;
        char verb[64];
        CtlStatus cs;
        int c;

        snprintf(verb, sizeof(verb), "schedule %s", argv[0]);
        opterr = 0;
        while ((c = getopt_long(argc, argv, ":o:", options, NULL)) != -1) {
                char *end;
                if (c == 'o' && optarg[0] >= '0' && optarg[0] <= '9') {
                        errno = 0;
                        unsigned long long v = strtoull(optarg, &end, 10);
                        if (!errno && !*end && v <= UINT32_MAX) {
                                owner = (json_int_t)v;
                                continue;
                        }
                }
                if (c == 'o')
                        return ctl_usage("--owner needs a uid (a number), got '%s'", optarg);
                return ctl_usage("%s: unknown option or missing argument '%s'", verb,
                                 argv[optind - 1]);
        }
        if (optind + 1 != argc)
                return ctl_usage("%s takes one schedule name", verb);
        if (!valid_name(argv[optind]))
                return name_usage(argv[optind]);
        params =
                owner < 0 ? json_pack("[s]", argv[optind]) : json_pack("[sI]", argv[optind], owner);
        if (ctl_call(ctl, method, params, &res, &cs) < 0)
                return ctl_fail_method(&cs, verb, method);
        if (ctl->json) {
                ctl_print_json(res);
        } else {
                printf("%s schedule %s\n", done, argv[optind]);
                if (strcmp(method, IPC_METHOD_SCHEDULE_REMOVE) != 0)
                        print_schedule(res);
        }
        json_decref(res);
        return 0;
}

int verb_schedule(Ctl *ctl, int argc, char **argv)
{
        if (argc < 2)
                return ctl_usage("schedule needs add, list, remove, pause or resume");
        const char *sub = argv[1];
        if (strcmp(sub, "add") == 0)
                return schedule_add(ctl, argc - 1, argv + 1);
        if (strcmp(sub, "list") == 0)
                return schedule_list(ctl, argc - 1, argv + 1);
        if (strcmp(sub, "remove") == 0)
                return schedule_named(ctl, argc - 1, argv + 1, IPC_METHOD_SCHEDULE_REMOVE,
                                      "removed");
        if (strcmp(sub, "pause") == 0)
                return schedule_named(ctl, argc - 1, argv + 1, IPC_METHOD_SCHEDULE_PAUSE, "paused");
        if (strcmp(sub, "resume") == 0)
                return schedule_named(ctl, argc - 1, argv + 1, IPC_METHOD_SCHEDULE_RESUME,
                                      "resumed");
        return ctl_usage("schedule: unknown '%s' (add, list, remove, pause or resume)", sub);
}

/* pause|resume class|plugin NAME (admin): @method with [kind, name]. */
static int pause_or_resume(Ctl *ctl, int argc, char **argv, const char *method)
{
        json_t *res;
        CtlStatus cs;

        if (argc != 3 || (strcmp(argv[1], IPC_PAUSE_KIND_CLASS) != 0 &&
                          strcmp(argv[1], IPC_PAUSE_KIND_PLUGIN) != 0))
                return ctl_usage("%s takes 'class NAME' or 'plugin NAME'", argv[0]);
        if (ctl_call(ctl, method, json_pack("[ss]", argv[1], argv[2]), &res, &cs) < 0)
                return ctl_fail_method(&cs, argv[0], method);
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        json_int_t queued = json_integer_value(json_object_get(res, IPC_KEY_QUEUED));
        if (json_is_true(json_object_get(res, IPC_KEY_PAUSED)))
                printf("paused %s %s: its %" JSON_INTEGER_FORMAT " queued job%s wait until "
                       "'fiberctl resume %s %s' (running ones finish)\n",
                       argv[1], argv[2], queued, queued == 1 ? "" : "s", argv[1], argv[2]);
        else
                printf("resumed %s %s: its %" JSON_INTEGER_FORMAT " queued job%s may run\n",
                       argv[1], argv[2], queued, queued == 1 ? "" : "s");
        json_decref(res);
        return 0;
}

int verb_pause(Ctl *ctl, int argc, char **argv)
{
        return pause_or_resume(ctl, argc, argv, IPC_METHOD_PAUSE);
}

int verb_resume(Ctl *ctl, int argc, char **argv)
{
        return pause_or_resume(ctl, argc, argv, IPC_METHOD_RESUME);
}

/* reload [--quiet] (admin): the `reload` method, which answers once fiberd has applied
 * the file or refused it; prints what was applied. --quiet leaves fiberd's refusal
 * unprinted (the exit status still says it): fiberd.service's ExecReload= uses it, as
 * fiberd's own log line already names the failure in the unit's journal. Beside pause
 * and resume: the other admin verbs. */
int verb_reload(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"quiet", no_argument, NULL, 'q'},
                {0},
        };
        bool quiet = false;
        json_t *res;
        CtlStatus cs;
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "q", options, NULL)) != -1) {
                if (c != 'q')
                        return ctl_usage("reload: unknown option '%s'", argv[optind - 1]);
                quiet = true;
        }
        if (optind != argc)
                return ctl_usage("reload takes no arguments");
        if (ctl_call(ctl, IPC_METHOD_RELOAD, json_array(), &res, &cs) < 0) {
                if (quiet && cs.step == CTL_STEP_ANSWER && cs.st.code &&
                    strcmp(cs.st.code, IPC_INVALID_ARGUMENT) == 0)
                        return ctl_exit_status(&cs);
                return ctl_fail_method(&cs, argv[0], IPC_METHOD_RELOAD);
        }
        if (ctl->json)
                ctl_print_json(res);
        else
                printf("configuration reloaded: %s\n",
                       json_string_value(json_object_get(res, IPC_KEY_RELOADED)) ?: "");
        json_decref(res);
        return 0;
}
