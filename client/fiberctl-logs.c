/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-logs.c — `fiberctl logs ID`: the lines a job wrote with host->log, which
 * fiberd keeps with the job (the newest 64 lines, at most 8 KiB; PROTOCOL.md,
 * "job.logs"). One line each, "HH:MM:SS.mmm LEVEL text" in local time, oldest first,
 * after a "-- N earlier lines dropped --" line when fiberd had to drop some; with
 * --json, fiberd's answer as is. Only the job's owner and admins may read them.
 *
 * `logs -f ID` follows the job until it is final, as `tail -f` would: job.logs prints
 * what is there, then job.wait [id, FOLLOW_POLL_MS] waits for the job to end (or the
 * poll to pass), and job.logs again prints only the lines it did not print yet. fiberd
 * numbers no line, but it counts those it let go (`dropped`), so the lines ever kept are
 * dropped + the ones in the answer, and the new ones are the tail past what was printed;
 * lines logged and let go between two polls (more than 64) are said to be missed. Once
 * job.wait says final, one last job.logs prints the last lines, then a closing
 * "-- job N STATE --" line. With --json, each new line is one JSON object a line.
 */
#include "client/fiberctl.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* How long one job.wait of `logs -f` waits before job.logs is asked again: a line shows
 * at most this late. */
#define FOLLOW_POLL_MS 250

/* The job.logs of @id into *@ret; on an error, reported, and the exit code returned. */
static int logs_call(Ctl *ctl, uint64_t id, json_t **ret)
{
        CtlStatus cs;
        int r = ctl_call(ctl, IPC_METHOD_JOB_LOGS, json_pack("[I]", (json_int_t)id), ret, &cs);

        if (r >= 0)
                return 0;
        if (cs.step == CTL_STEP_ANSWER && ctl_method_unknown(&cs.st))
                return ctl_error(cs.st.code, ctl_exit_status(&cs),
                                 "this fiberd keeps no job logs (it is older than "
                                 "fiberctl): see journalctl FIBERD_JOB=%" PRIu64,
                                 id);
        if (cs.step != CTL_STEP_ANSWER || ctl_mentions_job(cs.st.message, id))
                return ctl_fail(&cs);
        return ctl_fail_on(&cs, "job %" PRIu64, id);
}

/*
 * Prints the lines of @res (a job.logs answer) past the *@printed lines ever kept that
 * were printed already, and counts them in; @first: the first answer (its dropped lines
 * were never printed: said as fiberd's limit). Returns nothing: output only.
 */
static void print_new_lines(const Ctl *ctl, const json_t *res, json_int_t *printed, bool first)
{
        json_int_t dropped = json_integer_value(json_object_get(res, IPC_KEY_DROPPED));
        const json_t *lines = json_object_get(res, IPC_KEY_LINES), *line;
        json_int_t total = dropped + (json_int_t)json_array_size(lines);
        size_t from = 0;

        if (first && dropped > 0 && !ctl->json)
                printf("-- %" JSON_INTEGER_FORMAT " earlier line%s dropped: fiberd keeps the "
                       "last %d lines, %d KiB, of a job --\n",
                       dropped, dropped == 1 ? "" : "s", IPC_JOB_LOGS_MAX_LINES,
                       IPC_JOB_LOGS_MAX_BYTES / 1024);
        else if (!first && dropped > *printed && !ctl->json)
                printf("-- %" JSON_INTEGER_FORMAT " line%s logged and dropped between two "
                       "looks: fiberd keeps the last %d --\n",
                       dropped - *printed, dropped - *printed == 1 ? "" : "s",
                       IPC_JOB_LOGS_MAX_LINES);
        if (!first && *printed > dropped)
                from = (size_t)(*printed - dropped);
        for (size_t i = from; i < json_array_size(lines); i++) {
                line = json_array_get(lines, i);
                if (ctl->json) {
                        char *text = json_dumps(line, JSON_COMPACT);
                        if (text)
                                printf("%s\n", text);
                        free(text);
                } else {
                        print_line(line);
                }
        }
        if (total > *printed)
                *printed = total;
        fflush(stdout);
}

/* `logs -f ID`: follows until the job is final. Returns the exit code. */
static int follow(Ctl *ctl, uint64_t id)
{
        json_t *res = NULL, *rec = NULL;
        json_int_t printed = 0;
        bool first = true, final = false;
        CtlStatus cs;
        int r;

        for (;;) {
                r = logs_call(ctl, id, &res);
                if (r)
                        return r;
                print_new_lines(ctl, res, &printed, first);
                json_decref(res);
                first = false;
                if (final)
                        break;
                json_decref(rec);
                r = ctl_call(ctl, IPC_METHOD_JOB_WAIT,
                             json_pack("[I, I]", (json_int_t)id, (json_int_t)FOLLOW_POLL_MS), &rec,
                             &cs);
                if (r < 0)
                        return ctl_fail_on(&cs, "job %" PRIu64, id);
                /* the lines it logged before it ended: one more job.logs */
                final = ctl_job_is_final(rec);
        }
        if (!ctl->json)
                printf("-- job %" PRIu64 " %s --\n", id,
                       json_string_value(json_object_get(rec, IPC_KEY_STATE))
                               ? json_string_value(json_object_get(rec, IPC_KEY_STATE))
                               : "ended");
        json_decref(rec);
        return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
}

int verb_logs(Ctl *ctl, int argc, char **argv)
{
        static const struct option opts[] = {{"follow", no_argument, NULL, 'f'}, {0}};
        bool follow_job = false;
        json_t *res;
        json_int_t printed = 0;
        uint64_t id;
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, "f", opts, NULL)) != -1) {
                if (c != 'f')
                        return ctl_usage("%s: unknown option '%s'", argv[0], argv[optind - 1]);
                follow_job = true;
        }
        if (optind + 1 != argc)
                return ctl_usage("%s takes one job id", argv[0]);
        if (!ctl_parse_id(argv[optind], &id))
                return ctl_usage("'%s' is not a job id (a positive integer)", argv[optind]);
        if (follow_job)
                return follow(ctl, id);
        r = logs_call(ctl, id, &res);
        if (r)
                return r;
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        print_new_lines(ctl, res, &printed, true);
        json_decref(res);
        return 0;
}
