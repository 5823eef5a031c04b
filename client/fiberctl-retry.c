/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-retry.c — the dead set (PROTOCOL.md, "Scheduling jobs"): `fiberctl dead` lists
 * the jobs that ran out of attempts (job.list with state dead, printed as `list` prints),
 * `retry ID... | --all` queues dead, failed or cancelled jobs again (job.retry),
 * `discard ID... | --all` drops final jobs' records at once (job.discard).
 *
 * `retry` and `discard` send every id in one request: fiberd takes all or, when one
 * cannot be (an unknown id: NOT_FOUND, one not final: FAILED_PRECONDITION), none, and
 * its message names that job; --all is fiberd's own {"all": true}, every dead job the
 * caller may see.
 */
#include "client/fiberctl.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

int ctl_fail_method(const CtlStatus *cs, const char *verb, const char *method)
{
        if (cs->step == CTL_STEP_ANSWER && ctl_method_unknown(&cs->st))
                return ctl_error(cs->st.code, ctl_exit_status(cs),
                                 "%s: this fiberd does not know %s (it is older than "
                                 "fiberctl); upgrade fiberd to use it",
                                 verb, method);
        return ctl_fail_on(cs, "%s", verb);
}

int verb_dead(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"plugin", required_argument, NULL, 'p'},
                {"limit", required_argument, NULL, 'n'},
                {0},
        };
        json_t *filter = json_pack("{s:s}", IPC_FILTER_STATE, IPC_STATE_DEAD);
        uint64_t limit = UINT64_MAX;
        int c, r = filter ? 0 : ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");

        opterr = 0;
        while (r == 0 && (c = getopt_long(argc, argv, ":p:n:", options, NULL)) != -1) {
                if (c == 'p')
                        json_object_set_new(filter, IPC_FILTER_PLUGIN, json_string(optarg));
                else if (c == 'n' && !ctl_parse_id(optarg, &limit))
                        r = ctl_usage("--limit needs a positive integer, got '%s'", optarg);
                else if (c != 'n')
                        r = ctl_usage("%s: unknown option or missing argument '%s'", argv[0],
                                      argv[optind - 1]);
        }
        if (r == 0 && optind < argc)
                r = ctl_usage("%s takes no arguments, got '%s'", argv[0], argv[optind]);
        if (r == 0)
                r = ctl_list_jobs(ctl, "dead", filter, limit);
        json_decref(filter);
        return r;
}

/*
 * retry and discard: ID... or --all, one request to @method; the answer's @key lists
 * the jobs it acted on. @done is the past tense for the human line ("retried").
 */
static int ids_or_all(Ctl *ctl, int argc, char **argv, const char *method, const char *key,
                      const char *done)
{
        static const struct option options[] = {
                {"all", no_argument, NULL, 'a'},
                {0},
        };
        json_t *ids = json_array(), *res, *v;
        bool all = false;
        CtlStatus cs;
        size_t i;
        int c, r = ids ? 0 : ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");

        opterr = 0;
        while (r == 0 && (c = getopt_long(argc, argv, "a", options, NULL)) != -1) {
                if (c == 'a')
                        all = true;
                else
                        r = ctl_usage("%s: unknown option '%s'", argv[0], argv[optind - 1]);
        }
        for (int k = optind; r == 0 && k < argc; k++) {
                uint64_t id;
                if (!ctl_parse_id(argv[k], &id))
                        r = ctl_usage("'%s' is not a job id (a positive integer)", argv[k]);
                else
                        json_array_append_new(ids, json_integer((json_int_t)id));
        }
        if (r == 0 && all && json_array_size(ids) > 0)
                r = ctl_usage("%s: give job ids or --all, not both", argv[0]);
        if (r == 0 && !all && json_array_size(ids) == 0)
                r = ctl_usage("%s needs job ids, or --all for every dead job", argv[0]);
        if (r) {
                json_decref(ids);
                return r;
        }
        json_t *params = all ? json_pack("[{s:b}]", IPC_KEY_ALL, 1) : json_pack("[o]", ids);
        if (all)
                json_decref(ids);
        if (ctl_call(ctl, method, params, &res, &cs) < 0)
                return ctl_fail_method(&cs, argv[0], method);
        if (ctl->json) {
                ctl_print_json(res);
                json_decref(res);
                return 0;
        }
        json_t *acted = json_object_get(res, key);
        if (json_array_size(acted) == 0) {
                printf("%s no job%s\n", done, all ? " (there are no dead jobs you may see)" : "");
        } else {
                printf("%s job%s", done, json_array_size(acted) == 1 ? "" : "s");
                json_array_foreach(acted, i, v)
                {
                        printf("%s%" JSON_INTEGER_FORMAT, i ? ", " : " ", json_integer_value(v));
                }
                putchar('\n');
        }
        json_decref(res);
        return 0;
}

int verb_retry(Ctl *ctl, int argc, char **argv)
{
        return ids_or_all(ctl, argc, argv, IPC_METHOD_JOB_RETRY, IPC_KEY_RETRIED, "retried");
}

int verb_discard(Ctl *ctl, int argc, char **argv)
{
        return ids_or_all(ctl, argc, argv, IPC_METHOD_JOB_DISCARD, IPC_KEY_DISCARDED, "discarded");
}
