/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-opts.c — what a job is made of on fiberctl's command line, for `submit` and
 * `schedule add` alike: the job options (--priority, --timeout, --class and the
 * scheduling ones: --in, --at, --retries, --backoff, --backoff-max, --after, --key),
 * turned into job.submit's options map (PROTOCOL.md, "job.submit" and "Scheduling
 * jobs"), and the plugin's KEY=VALUE arguments, KEY=@FILE passed as an fd.
 *
 * Values are checked here, before anything is sent, and a bad one is a usage error that
 * names the option ("--in needs a duration like 30s, 5m, 2h, 1d or 1h30m, got 'soon'"):
 * what fiberd would refuse anyway (a --retries of 500, two due times) is said in the
 * terms of the command line rather than of the wire.
 */
#include "client/fiberctl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>
#include <unistd.h>

#include "client/convert.h"
#include "scheduler/base/time-util.h"

/* --after ID[,ID...]: appended to the options' "after" (repeatable). */
static int after_option(const char *arg, json_t *opts)
{
        json_t *after = json_object_get(opts, IPC_OPT_AFTER);
        char *copy = strdup(arg), *save = NULL;
        int r = 0;

        if (!copy)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");
        if (!after) {
                after = json_array();
                json_object_set_new(opts, IPC_OPT_AFTER, after);
        }
        if (!arg[0] || arg[strlen(arg) - 1] == ',' || arg[0] == ',' || strstr(arg, ",,"))
                r = -EINVAL;
        for (char *w = strtok_r(copy, ",", &save); r == 0 && w; w = strtok_r(NULL, ",", &save)) {
                uint64_t id;
                if (!ctl_parse_id(w, &id))
                        r = -EINVAL;
                else
                        json_array_append_new(after, json_integer((json_int_t)id));
        }
        free(copy);
        if (r < 0)
                return ctl_usage("--after needs job ids separated by commas (e.g. 12,13), got "
                                 "'%s'",
                                 arg);
        if (json_array_size(after) > IPC_AFTER_MAX)
                return ctl_usage("--after: at most %d jobs, got %zu", IPC_AFTER_MAX,
                                 json_array_size(after));
        return 0;
}

/* A duration option into @key of @opts, at most @max ms. */
static int duration_option(const char *name, const char *arg, uint64_t max, const char *key,
                           json_t *opts)
{
        uint64_t ms;
        int r = convert_duration_ms_max(arg, max, &ms);

        if (r == -ERANGE)
                return ctl_usage("%s: '%s' is too long (at most %llu days)", name, arg,
                                 (unsigned long long)(max / (86400 * MSEC_PER_SEC)));
        if (r < 0)
                return ctl_usage("%s needs a duration like 30s, 5m, 2h, 1d or 1h30m, got '%s'",
                                 name, arg);
        json_object_set_new(opts, key, json_integer((json_int_t)ms));
        return 0;
}

struct option *ctl_job_longopts(const struct option *own, size_t n)
{
        static const struct option job[] = {
                {"priority", required_argument, NULL, 'p'},
                {"timeout", required_argument, NULL, 't'},
                {"class", required_argument, NULL, 'c'},
                {"in", required_argument, NULL, CTL_OPT_IN},
                {"at", required_argument, NULL, CTL_OPT_AT},
                {"retries", required_argument, NULL, CTL_OPT_RETRIES},
                {"backoff", required_argument, NULL, CTL_OPT_BACKOFF},
                {"backoff-max", required_argument, NULL, CTL_OPT_BACKOFF_MAX},
                {"after", required_argument, NULL, CTL_OPT_AFTER},
                {"key", required_argument, NULL, CTL_OPT_KEY},
        };
        size_t njob = sizeof(job) / sizeof(job[0]);
        struct option *all = calloc(njob + n + 1, sizeof(*all));

        if (!all)
                return NULL;
        memcpy(all, job, sizeof(job));
        if (n)
                memcpy(all + njob, own, n * sizeof(*own));
        return all;
}

int ctl_job_option(int c, const char *arg, json_t *opts)
{
        switch (c) {
        case 'p': {
                char *end;
                errno = 0;
                long long v = strtoll(arg, &end, 10);
                if (errno || *end || end == arg)
                        return ctl_usage("--priority needs an integer, got '%s'", arg);
                json_object_set_new(opts, IPC_OPT_PRIORITY, json_integer(v));
                return 0;
        }
        case 't': {
                uint64_t ms;
                if (convert_duration_ms(arg, &ms) < 0)
                        return ctl_usage("--timeout needs a duration like 500ms, 10s or 2m, got "
                                         "'%s'",
                                         arg);
                json_object_set_new(opts, IPC_OPT_TIMEOUT_MS, json_integer((json_int_t)ms));
                return 0;
        }
        case 'c':
                json_object_set_new(opts, IPC_OPT_CLASS, json_string(arg));
                return 0;
        case CTL_OPT_IN:
                return duration_option("--in", arg, IPC_RUN_AT_MAX_AHEAD_MS, IPC_OPT_DELAY_MS,
                                       opts);
        case CTL_OPT_AT: {
                const char *why = "?";
                uint64_t ms;
                if (convert_time_ms(arg, &ms, &why) < 0)
                        return ctl_usage("--at '%s': %s", arg, why);
                json_object_set_new(opts, IPC_OPT_RUN_AT, json_integer((json_int_t)ms));
                return 0;
        }
        case CTL_OPT_RETRIES: {
                char *end;
                errno = 0;
                unsigned long long n = strtoull(arg, &end, 10);
                if (arg[0] < '0' || arg[0] > '9' || errno || *end || n > IPC_MAX_ATTEMPTS_MAX - 1)
                        return ctl_usage("--retries needs a whole number from 0 to %d (the runs "
                                         "after the first), got '%s'",
                                         IPC_MAX_ATTEMPTS_MAX - 1, arg);
                json_object_set_new(opts, IPC_OPT_MAX_ATTEMPTS, json_integer((json_int_t)n + 1));
                return 0;
        }
        case CTL_OPT_BACKOFF:
                return duration_option("--backoff", arg, UINT32_MAX, IPC_OPT_BACKOFF_MS, opts);
        case CTL_OPT_BACKOFF_MAX:
                return duration_option("--backoff-max", arg, UINT32_MAX, IPC_OPT_BACKOFF_MAX_MS,
                                       opts);
        case CTL_OPT_AFTER:
                return after_option(arg, opts);
        case CTL_OPT_KEY:
                if (!arg[0] || strlen(arg) > IPC_IDEMPOTENCY_KEY_MAX)
                        return ctl_usage("--key needs 1 to %d bytes, got %zu",
                                         IPC_IDEMPOTENCY_KEY_MAX, strlen(arg));
                json_object_set_new(opts, IPC_OPT_KEY, json_string(arg));
                return 0;
        }
        return 1;
}

int ctl_job_options_check(const json_t *opts)
{
        if (json_object_get(opts, IPC_OPT_DELAY_MS) && json_object_get(opts, IPC_OPT_RUN_AT))
                return ctl_usage("--in and --at both say when the job runs: give one of them");
        return 0;
}

/* Opens @path and returns the fd argument that stands for it, or NULL (reported). */
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
                ctl_error(IPC_NOT_FOUND, EX_NOINPUT, "%s=@%s: cannot open %s: %s", key, path, path,
                          strerror(errno));
                return NULL;
        }
        snprintf(hex, sizeof(hex), "%08zx", pf->n);
        pf->fds[pf->n++] = fd;
        return json_pack("{s:i, s:s}", "ext", IPC_EXT_FD, "hex", hex);
}

void ctl_passed_files_close(PassedFiles *pf)
{
        for (size_t i = 0; i < pf->n; i++)
                close(pf->fds[i]);
        pf->n = 0;
}

int ctl_job_args(const char *verb, int argc, char **argv, json_t *args, PassedFiles *pf)
{
        for (int i = 0; i < argc; i++) {
                const char *eq = strchr(argv[i], '=');
                if (!eq || eq == argv[i])
                        return ctl_usage("%s: '%s' is not KEY=VALUE", verb, argv[i]);
                if (eq[1] == '@' && !pf)
                        return ctl_usage("%s: %s: a schedule cannot hold an open file; give "
                                         "its path (%.*s=%s) for fiberd to open at each run",
                                         verb, argv[i], (int)(eq - argv[i]), argv[i], eq + 2);
                char *key = strndup(argv[i], (size_t)(eq - argv[i]));
                if (!key)
                        return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "out of memory");
                json_t *v = eq[1] == '@' ? passed_file(pf, key, eq + 2) : convert_kv_value(eq + 1);
                if (v)
                        json_object_set_new(args, key, v);
                free(key);
                if (!v)
                        return EX_NOINPUT;
        }
        return 0;
}
