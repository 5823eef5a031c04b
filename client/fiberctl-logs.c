/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-logs.c — `fiberctl logs ID`: the lines a job wrote with host->log, which
 * fiberd keeps with the job (the newest 64 lines, at most 8 KiB; PROTOCOL.md,
 * "job.logs"). One line each, "HH:MM:SS.mmm LEVEL text" in local time, oldest first,
 * after a "-- N earlier lines dropped --" line when fiberd had to drop some; with
 * --json, fiberd's answer as is. Only the job's owner and admins may read them.
 */
#include "client/fiberctl.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

static const char *level_name(json_int_t level)
{
        static const char *const names[] = {"emerg",   "alert",  "crit", "err",
                                            "warning", "notice", "info", "debug"};

        return level >= 0 && level < 8 ? names[level] : "?";
}

static void print_line(const json_t *line)
{
        json_int_t ms = json_integer_value(json_object_get(line, IPC_KEY_TIME_MS));
        const char *text = json_string_value(json_object_get(line, IPC_KEY_TEXT));
        time_t sec = (time_t)(ms / 1000);
        struct tm tm;
        char when[16] = "?";

        if (localtime_r(&sec, &tm))
                strftime(when, sizeof(when), "%H:%M:%S", &tm);
        printf("%s.%03d %-7s %s\n", when, (int)(ms % 1000),
               level_name(json_integer_value(json_object_get(line, IPC_KEY_LEVEL))),
               text ? text : "");
}

int verb_logs(Ctl *ctl, int argc, char **argv)
{
        static const struct option none[] = {{0}};
        json_t *res, *line;
        json_int_t dropped;
        CtlStatus cs;
        uint64_t id;
        size_t i;
        int r;

        opterr = 0;
        if (getopt_long(argc, argv, "", none, NULL) != -1)
                return ctl_usage("%s: unknown option '%s'", argv[0], argv[optind - 1]);
        if (optind + 1 != argc)
                return ctl_usage("%s takes one job id", argv[0]);
        if (!ctl_parse_id(argv[optind], &id))
                return ctl_usage("'%s' is not a job id (a positive integer)", argv[optind]);
        r = ctl_call(ctl, IPC_METHOD_JOB_LOGS, json_pack("[I]", (json_int_t)id), &res, &cs);
        if (r < 0) {
                if (cs.step == CTL_STEP_ANSWER && ctl_method_unknown(&cs.st))
                        return ctl_error(cs.st.code, ctl_exit_status(&cs),
                                         "this fiberd keeps no job logs (it is older than "
                                         "fiberctl): see journalctl FIBERD_JOB=%" PRIu64,
                                         id);
                if (cs.step != CTL_STEP_ANSWER || ctl_mentions_job(cs.st.message, id))
                        return ctl_fail(&cs);
                return ctl_fail_on(&cs, "job %" PRIu64, id);
        }
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        dropped = json_integer_value(json_object_get(res, IPC_KEY_DROPPED));
        if (dropped > 0)
                printf("-- %" JSON_INTEGER_FORMAT " earlier line%s dropped: fiberd keeps the "
                       "last %d lines, %d KiB, of a job --\n",
                       dropped, dropped == 1 ? "" : "s", IPC_JOB_LOGS_MAX_LINES,
                       IPC_JOB_LOGS_MAX_BYTES / 1024);
        json_array_foreach(json_object_get(res, IPC_KEY_LINES), i, line)
        {
                print_line(line);
        }
        json_decref(res);
        return 0;
}
