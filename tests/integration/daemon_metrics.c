/* SPDX-License-Identifier: MIT */
/*
 * daemon_metrics.c — observability end to end: the `metrics` method's
 * OpenMetrics text passes a strict checker (openmetrics_check.c; and promtool when it
 * is installed), and the checker itself rejects broken texts; `stats` carries queue
 * wait and run time per plugin and class and the process figures; job.logs keeps a
 * job's host->log lines, bounded and escaped, for its owner and admins only; `fiberctl
 * logs` and `fiberctl stats --openmetrics` print them.
 */
#include "tests/integration/fiberd_harness.h"
#include "tests/integration/openmetrics_check.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOG_LINES_SO FIBERD_TEST_PLUGIN_DIR "/log_lines.so"

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_metrics, .fini = teardown, .timeout = 60);

/* Submits @plugin with @args and waits until it is final; asserts it ended done. */
static uint64_t run_done(Client *c, const char *plugin, const Arg *args, size_t nargs)
{
        IpcStatus st = {0};
        uint64_t id = rpc_submit(c, plugin, args, nargs, 0, 0, &st);
        Reply rp;

        cr_assert_neq(id, 0, "submit %s: %s", plugin, st.message);
        rpc_job_wait(c, id, -1, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, IPC_KEY_STATE), IPC_STATE_DONE);
        reply_clear(&rp);
        return id;
}

/* The `metrics` text, malloc'd. */
static char *metrics_text(Client *c)
{
        Reply rp;
        char *text;

        rpc_simple(c, IPC_METHOD_METRICS, 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "metrics: %s", rp.st.message);
        cr_assert_eq(rp.result->type, MSGPACK_OBJECT_STR);
        text = strndup(rp.result->via.str.ptr, rp.result->via.str.size);
        cr_assert(text);
        reply_clear(&rp);
        return text;
}

/* promtool check metrics, when installed: 0 ok, 1 complaint, -1 not installed. */
static int promtool(const char *text, char *out, size_t size)
{
        char path[128], cmd[256];
        FILE *f, *p;
        size_t n;
        int status;

        if (system("command -v promtool >/dev/null 2>&1") != 0)
                return -1;
        snprintf(path, sizeof(path), "%s/metrics.txt", fd_.dir);
        f = fopen(path, "w");
        cr_assert(f);
        fputs(text, f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "promtool check metrics < %s 2>&1", path);
        p = popen(cmd, "r");
        cr_assert(p);
        n = fread(out, 1, size - 1, p);
        out[n] = '\0';
        status = pclose(p);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

Test(daemon_metrics, the_checker_rejects_broken_texts)
{
        static const struct {
                const char *text, *why;
        } bad[] = {
                {"# TYPE a counter\na_total 1\n", "no # EOF"},
                {"# TYPE a counter\na 1\n# EOF\n", "counter sampled without _total"},
                {"# TYPE a_total counter\na_total_total 1\n# EOF\n", "counter family with _total"},
                {"# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\n# TYPE a gauge\na{x=\"1\"} 2\n# EOF\n",
                 "a family not contiguous"},
                {"# TYPE a_seconds gauge\n# UNIT a_seconds bytes\na_seconds 1\n# EOF\n",
                 "unit not the name's suffix"},
                {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"2\"} 1\n"
                 "h_bucket{le=\"+Inf\"} 2\nh_count 2\nh_sum 1\n# EOF\n",
                 "buckets not cumulative"},
                {"# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_count 2\nh_sum 1\n# EOF\n",
                 "no +Inf bucket"},
                {"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\nh_sum 1\n# EOF\n",
                 "_count differs from +Inf"},
                {"# TYPE g gauge\ng{a=\"x\\q\"} 1\n# EOF\n", "bad escape"},
                {"# TYPE g gauge\ng 1\ng 2\n# EOF\n", "a sample twice"},
                {"# TYPE g gauge\ng one\n# EOF\n", "a value that is no number"},
                {"# TYPE g gauge\ng 1\n# EOF\nx 1\n", "text after # EOF"},
        };
        char err[256];

        cr_assert(om_check("# TYPE a counter\n# HELP a A.\na_total{x=\"\\\"\"} 1\n"
                           "# TYPE h_seconds histogram\n# UNIT h_seconds seconds\n"
                           "h_seconds_bucket{le=\"0.5\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n"
                           "h_seconds_count 2\nh_seconds_sum 3.5\n# EOF\n",
                           err, sizeof(err)),
                  "a valid text refused: %s", err);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                cr_expect_not(om_check(bad[i].text, err, sizeof(err)), "accepted: %s", bad[i].why);
}

Test(daemon_metrics, metrics_is_valid_openmetrics_with_every_family)
{
        static const char *const families[] = {
                "# TYPE fiberd_jobs_submitted counter",
                "# TYPE fiberd_jobs gauge",
                "# TYPE fiberd_jobs_finished counter",
                "# TYPE fiberd_job_queue_wait_seconds histogram",
                "# TYPE fiberd_job_run_seconds histogram",
                "# TYPE fiberd_group_workers gauge",
                "# TYPE fiberd_group_run_queue_depth gauge",
                "# TYPE fiberd_group_ready_to_run_p99_seconds gauge",
                "# TYPE fiberd_group_stalls counter",
                "# TYPE fiberd_group_rescues counter",
                "# TYPE process_cpu_seconds counter",
                "# TYPE process_resident_memory_bytes gauge",
                "# TYPE process_open_fds gauge",
                "# TYPE process_max_fds gauge",
                "# TYPE process_start_time_seconds gauge",
                "# TYPE fiberd_build_info gauge",
                "# TYPE fiberd_connections gauge",
                "# TYPE fiberd_opens counter",
        };
        FiberdOpts o = {.config = "[class.batch]\nshares = 50\n"};
        const Arg sleep_args[] = {ARG_I("ms", 20)};
        const Arg odd_args[] = {ARG_S("text", "x")};
        char err[512], *text, out[4096];
        time_t t0 = time(NULL);
        const char *start;
        double started;
        Client *c;
        int r;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        /* before any job: families with no samples are still valid */
        text = metrics_text(c);
        cr_assert(om_check(text, err, sizeof(err)), "%s\n--- text:\n%s", err, text);
        free(text);
        for (int i = 0; i < 3; i++)
                run_done(c, "sleep", sleep_args, ELEMENTSOF(sleep_args));
        run_done(c, "echo", odd_args, ELEMENTSOF(odd_args));
        text = metrics_text(c);
        cr_assert(om_check(text, err, sizeof(err)), "%s\n--- text:\n%s", err, text);
        for (size_t i = 0; i < ELEMENTSOF(families); i++)
                cr_expect(strstr(text, families[i]), "missing: %s", families[i]);
        cr_expect(strstr(text, "fiberd_jobs_finished_total{plugin=\"sleep\",state=\"done\"} 3\n"));
        /* three sleeps of 20 ms: none took 10 ms or less, all are under +Inf */
        cr_expect(strstr(text, "fiberd_job_run_seconds_bucket{plugin=\"sleep\",class=\"default\","
                               "le=\"0.010000000\"} 0\n"),
                  "%s", text);
        cr_expect(strstr(text, "fiberd_job_run_seconds_count{plugin=\"sleep\",class=\"default\"} "
                               "3\n"));
        cr_expect(strstr(text, "fiberd_connections 1\n"));
        cr_expect(strstr(text, "fiberd_group_workers{group=\"server\"} 1\n"));
        cr_expect(strstr(text, "fiberd_build_info{version=\"" FIBERD_VERSION "\"} 1\n"), "%s",
                  text);
        cr_expect(!strstr(text, "fiberd_process_"), "the old process family names: %s", text);
        /* the wall clock of fiberd's start: since the test began, give or take a tick */
        start = strstr(text, "\nprocess_start_time_seconds ");
        cr_assert(start, "%s", text);
        started = strtod(start + strlen("\nprocess_start_time_seconds "), NULL);
        cr_expect(started >= (double)t0 - 1 && started <= (double)time(NULL) + 1,
                  "process_start_time_seconds %f, the test began at %lld", started, (long long)t0);
        r = promtool(text, out, sizeof(out));
        if (r < 0)
                cr_log_info("promtool is not installed: checked by openmetrics_check.c only");
        else
                cr_expect_eq(r, 0, "promtool check metrics: %s", out);
        free(text);
        client_free(c);
}

Test(daemon_metrics, stats_has_latency_per_plugin_and_class_and_the_process)
{
        FiberdOpts o = {.config = "[class.batch]\nshares = 50\n"};
        const Arg sleep_args[] = {ARG_I("ms", 20)};
        const msgpack_object *lat, *e = NULL, *run, *proc;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 2; i++)
                run_done(c, "sleep", sleep_args, ELEMENTSOF(sleep_args));
        rpc_simple(c, IPC_METHOD_STATS, 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        lat = map_get(rp.result, IPC_KEY_LATENCY);
        cr_assert(lat && lat->type == MSGPACK_OBJECT_ARRAY);
        for (uint32_t i = 0; i < lat->via.array.size; i++)
                if (strcmp(map_str(&lat->via.array.ptr[i], IPC_KEY_PLUGIN), "sleep") == 0)
                        e = &lat->via.array.ptr[i];
        cr_assert(e, "no latency entry for sleep");
        cr_expect_str_eq(map_str(e, IPC_KEY_CLASS), "default");
        cr_expect_eq(map_uint(e, IPC_KEY_SAMPLES), 2);
        run = map_get(e, IPC_KEY_RUN_TIME);
        cr_assert(run);
        /* a 20 ms sleep runs at least 20 ms; quantiles never pass the max */
        cr_expect_geq(map_uint(run, IPC_KEY_P50_NS), 20 * NSEC_PER_MSEC);
        cr_expect_leq(map_uint(run, IPC_KEY_P50_NS), map_uint(run, IPC_KEY_P99_NS));
        cr_expect_leq(map_uint(run, IPC_KEY_P99_NS), map_uint(run, IPC_KEY_MAX_NS));
        cr_expect_neq(map_uint(map_get(e, IPC_KEY_QUEUE_WAIT), IPC_KEY_MAX_NS), UINT64_MAX);
        proc = map_get(rp.result, IPC_KEY_PROCESS);
        cr_assert(proc);
        cr_expect_gt(map_uint(proc, IPC_KEY_RSS_BYTES), 0);
        cr_expect_gt(map_uint(proc, IPC_KEY_OPEN_FDS), 2);
        cr_expect_gt(map_uint(proc, IPC_KEY_USER_CPU_NS) + map_uint(proc, IPC_KEY_SYSTEM_CPU_NS),
                     0);
        cr_expect_eq(map_uint(map_get(rp.result, IPC_KEY_SERVER), IPC_KEY_CONNECTIONS), 1);
        reply_clear(&rp);
        client_free(c);
}

/* job.logs [id] */
static void job_logs(Client *c, uint64_t id, Reply *rp)
{
        rpc_simple(c, IPC_METHOD_JOB_LOGS, 1, &id, rp);
}

Test(daemon_metrics, job_logs_keeps_the_last_lines_escaped_and_says_how_many_dropped)
{
        FiberdOpts o = {.extra = LOG_LINES_SO};
        const Arg few[] = {ARG_I("n", 3), ARG_S("raw", "a\nb<0>\x1b[31m\\")};
        const Arg many[] = {ARG_I("n", 70)};
        const msgpack_object *lines;
        uint64_t id;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = run_done(c, "log_lines", few, ELEMENTSOF(few));
        job_logs(c, id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        lines = map_get(rp.result, IPC_KEY_LINES);
        cr_assert(lines && lines->type == MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(lines->via.array.size, 4);
        cr_expect_str_eq(map_str(&lines->via.array.ptr[0], IPC_KEY_TEXT), "line 1");
        cr_expect_eq(map_uint(&lines->via.array.ptr[0], IPC_KEY_LEVEL), 6);
        cr_expect_str_eq(map_str(&lines->via.array.ptr[3], IPC_KEY_TEXT), "a\\nb<0>\\x1b[31m\\\\");
        cr_expect_eq(map_uint(rp.result, IPC_KEY_DROPPED), 0);
        reply_clear(&rp);
        /* the journal-less stderr got the same escaped line, never a forged "<0>" line */
        cr_expect(fiberd_log_contains(&fd_, "job 1 plugin log_lines: a\\nb<0>"));
        cr_expect_not(fiberd_log_contains(&fd_, "\nb<0>"));

        id = run_done(c, "log_lines", many, ELEMENTSOF(many));
        job_logs(c, id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        lines = map_get(rp.result, IPC_KEY_LINES);
        cr_assert_eq(lines->via.array.size, IPC_JOB_LOGS_MAX_LINES);
        cr_expect_eq(map_uint(rp.result, IPC_KEY_DROPPED), 70 - IPC_JOB_LOGS_MAX_LINES);
        cr_expect_str_eq(map_str(&lines->via.array.ptr[0], IPC_KEY_TEXT), "line 7");
        cr_expect_str_eq(map_str(&lines->via.array.ptr[IPC_JOB_LOGS_MAX_LINES - 1], IPC_KEY_TEXT),
                         "line 70");
        cr_expect_leq(map_uint(rp.result, IPC_KEY_BYTES), IPC_JOB_LOGS_MAX_BYTES);
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_metrics, job_logs_stay_within_8_kib)
{
        FiberdOpts o = {.extra = LOG_LINES_SO};
        char text[201], last[16];
        const Arg args[] = {ARG_I("n", 60), ARG_S("text", text)};
        const msgpack_object *lines;
        uint64_t id, n;
        Client *c;
        Reply rp;

        memset(text, 'x', 200);
        text[200] = '\0';
        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        /* 60 lines of about 203 bytes: the byte bound, not the line bound, drops lines */
        id = run_done(c, "log_lines", args, ELEMENTSOF(args));
        job_logs(c, id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        lines = map_get(rp.result, IPC_KEY_LINES);
        n = lines->via.array.size;
        cr_expect_lt(n, 60);
        cr_expect_gt(n, 30);
        cr_expect_eq(map_uint(rp.result, IPC_KEY_DROPPED), 60 - n);
        cr_expect_leq(map_uint(rp.result, IPC_KEY_BYTES), IPC_JOB_LOGS_MAX_BYTES);
        cr_expect_gt(map_uint(rp.result, IPC_KEY_BYTES), IPC_JOB_LOGS_MAX_BYTES - 210);
        snprintf(last, sizeof(last), " 60");
        cr_expect(strstr(map_str(&lines->via.array.ptr[n - 1], IPC_KEY_TEXT), last),
                  "the newest line is kept");
        reply_clear(&rp);
        client_free(c);
}

Test(daemon_metrics, job_logs_are_the_owners_and_admins_only)
{
        FiberdOpts o = {.extra = LOG_LINES_SO};
        const Arg args[] = {ARG_I("n", 1)};
        uint64_t id;
        Client *c;
        pid_t pid;
        int status;

        if (geteuid() != 0)
                cr_skip_test("needs root to act as another uid");
        fiberd_start(&fd_, &o);
        cr_assert(chmod(fd_.dir, 0755) == 0);
        c = fiberd_connect(&fd_);
        id = run_done(c, "log_lines", args, ELEMENTSOF(args)); /* root's job */
        pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                IpcStatus cst = {0};
                msgpack_packer *pk;
                uint32_t msgid;
                Client *o2;
                Reply rp;

                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(10);
                if (client_connect(&o2, fd_.sock, &cst) < 0)
                        _exit(11);
                pk = client_request(o2, IPC_METHOD_JOB_LOGS, 1, &msgid);
                msgpack_pack_uint64(pk, id);
                if (client_call_wait(o2, msgid, &rp.msg, 10000, &cst) != 1)
                        _exit(12);
                if (client_result(&rp.msg, &rp.result, &rp.st) == 0 ||
                    strcmp(rp.st.code, IPC_NOT_FOUND) != 0)
                        _exit(1);
                _exit(0);
        }
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "uid 65534 read root's job logs (status 0x%x)", status);
        client_free(c);
}

/* Runs fiberctl with @args against the test's daemon; its stdout in @out. Exit status. */
static int fiberctl(const char *args, char *out, size_t size)
{
        char cmd[512];
        FILE *p;
        size_t n;
        int status;

        snprintf(cmd, sizeof(cmd), "%s -s %s %s", FIBERCTL_BIN, fd_.sock, args);
        p = popen(cmd, "r");
        cr_assert(p);
        n = fread(out, 1, size - 1, p);
        out[n] = '\0';
        status = pclose(p);
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(daemon_metrics, fiberctl_logs_and_stats_openmetrics)
{
        FiberdOpts o = {.extra = LOG_LINES_SO};
        const Arg args[] = {ARG_I("n", 66)};
        static char out[1 << 16];
        char err[512];
        uint64_t id;
        Client *c;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = run_done(c, "log_lines", args, ELEMENTSOF(args));
        cr_assert_eq(id, 1);
        cr_assert_eq(fiberctl("logs 1", out, sizeof(out)), 0);
        cr_expect(strncmp(out, "-- 2 earlier lines dropped", 26) == 0, "%s", out);
        cr_expect(strstr(out, " info    line 3\n"), "%s", out);
        cr_expect(strstr(out, " info    line 66\n"), "%s", out);
        cr_expect_not(strstr(out, " line 2\n"), "%s", out);
        cr_assert_eq(fiberctl("--json logs 1", out, sizeof(out)), 0);
        cr_expect(strstr(out, "\"dropped\":2"), "%s", out);
        cr_expect_eq(fiberctl("logs 99", out, sizeof(out)), 66); /* NOT_FOUND */
        cr_assert_eq(fiberctl("stats --openmetrics", out, sizeof(out)), 0);
        cr_expect(om_check(out, err, sizeof(err)), "%s", err);
        cr_assert_eq(fiberctl("stats", out, sizeof(out)), 0);
        cr_expect(strstr(out, "LATENCY(ms)"), "%s", out);
        cr_expect(strstr(out, "process: cpu "), "%s", out);
        client_free(c);
}
