/* SPDX-License-Identifier: MIT */
/*
 * daemon_joblines.c — a job's life in the log, as an operator follows it (joblines.h):
 * queued, started and finished lines at info, the last with how long the job ran; a
 * user's job failing logged at notice, never as the daemon's warning; [fiberd] log_jobs
 * = false drops the routine lines and keeps the failures; `fiberctl logs -f` prints a
 * running job's lines as it logs them, each once, and ends with its final state.
 */
#include "tests/integration/fiberd_harness.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif
#define LOG_LINES_SO FIBERD_TEST_PLUGIN_DIR "/log_lines.so"

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_joblines, .fini = teardown, .timeout = 60);

/* Submits @plugin with @args, waits until it is final; its id and final state. */
static uint64_t run_job(Client *c, const char *plugin, const Arg *args, size_t nargs, char *state,
                        size_t state_size)
{
        IpcStatus st = {0};
        uint64_t id = rpc_submit(c, plugin, args, nargs, 0, 0, &st);
        Reply rp;

        cr_assert_neq(id, 0, "submit %s: %s", plugin, st.message);
        rpc_job_wait(c, id, -1, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        snprintf(state, state_size, "%s", map_str(rp.result, IPC_KEY_STATE));
        reply_clear(&rp);
        return id;
}

/* The first line of the daemon's log that contains @needle, into @line (asserting one
 * comes within 5 s: the finished line is written a moment after job.wait answers). */
static void log_line(const char *needle, char *line, size_t size)
{
        for (int i = 0; i < 500; i++) {
                FILE *f = fopen(fd_.log, "r");
                if (f) {
                        while (fgets(line, (int)size, f))
                                if (strstr(line, needle)) {
                                        fclose(f);
                                        return;
                                }
                        fclose(f);
                }
                usleep(10000);
        }
        cr_assert_fail("no log line contains '%s'", needle);
}

/* Lines of the log holding both @a and @b. */
static int log_count(const char *a, const char *b)
{
        char line[2048];
        int n = 0;
        FILE *f = fopen(fd_.log, "r");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                n += strstr(line, a) && (!b || strstr(line, b));
        fclose(f);
        return n;
}

Test(daemon_joblines, queued_started_finished_at_info_with_the_duration)
{
        const Arg args[] = {ARG_I("ms", 120)};
        char state[32], want[128], line[1024];
        unsigned long long ms;
        uint64_t id;
        Client *c;

        fiberd_start(&fd_, &(FiberdOpts){.config = "[class.batch]\nshares = 50\n"});
        c = fiberd_connect(&fd_);
        id = run_job(c, "sleep", args, ELEMENTSOF(args), state, sizeof(state));
        cr_assert_str_eq(state, "done");
        snprintf(want, sizeof(want),
                 "<6>job %llu plugin sleep: queued (owner %u, class default, "
                 "priority 0)",
                 (unsigned long long)id, (unsigned)geteuid());
        log_line(want, line, sizeof(line));
        snprintf(want, sizeof(want), "<6>job %llu plugin sleep: started (queued ",
                 (unsigned long long)id);
        log_line(want, line, sizeof(line));
        snprintf(want, sizeof(want), "<6>job %llu plugin sleep: finished done in ",
                 (unsigned long long)id);
        log_line(want, line, sizeof(line));
        cr_assert_eq(sscanf(strstr(line, " in ") + 4, "%llu ms", &ms), 1, "%s", line);
        cr_assert_geq(ms, 120, "a job of 120 ms finished in %llu ms: %s", ms, line);
        cr_assert_lt(ms, 30000, "%s", line);
        /* one line each */
        snprintf(want, sizeof(want), "job %llu plugin sleep: ", (unsigned long long)id);
        cr_assert_eq(log_count(want, ": queued ("), 1);
        cr_assert_eq(log_count(want, ": started ("), 1);
        cr_assert_eq(log_count(want, ": finished "), 1);
        client_free(c);
}

Test(daemon_joblines, a_failed_user_job_is_logged_below_warning)
{
        const Arg args[] = {ARG_S("path", "/nonexistent/fiberd-joblines")};
        char state[32], want[128], line[1024];
        uint64_t id;
        Client *c;

        fiberd_start(&fd_, &(FiberdOpts){0});
        c = fiberd_connect(&fd_);
        id = run_job(c, "sha256", args, ELEMENTSOF(args), state, sizeof(state));
        cr_assert_str_eq(state, "failed");
        snprintf(want, sizeof(want), "job %llu plugin sha256: failed in ", (unsigned long long)id);
        log_line(want, line, sizeof(line));
        cr_assert(strncmp(line, "<5>", 3) == 0, "a user's failed job at another level: %s", line);
        cr_assert(strstr(line, "/nonexistent/fiberd-joblines"), "the error is not named: %s", line);
        /* nothing about it at warning or worse */
        snprintf(want, sizeof(want), "job %llu plugin sha256: ", (unsigned long long)id);
        cr_assert_eq(log_count("<4>", want) + log_count("<3>", want) + log_count("<2>", want), 0,
                     "a user's job failing is not the daemon's warning");
        client_free(c);
}

Test(daemon_joblines, log_jobs_false_drops_the_routine_lines_and_keeps_failures)
{
        const Arg bad[] = {ARG_S("path", "/nonexistent/fiberd-joblines")};
        const Arg x[] = {ARG_I("x", 1)};
        char state[32], want[128], line[1024];
        uint64_t ok, failed;
        Client *c;

        fiberd_start(&fd_, &(FiberdOpts){.config = "[fiberd]\nlog_jobs = false\n"});
        c = fiberd_connect(&fd_);
        ok = run_job(c, "echo", x, ELEMENTSOF(x), state, sizeof(state));
        cr_assert_str_eq(state, "done");
        failed = run_job(c, "sha256", bad, ELEMENTSOF(bad), state, sizeof(state));
        cr_assert_str_eq(state, "failed");
        snprintf(want, sizeof(want), "job %llu plugin sha256: failed in ",
                 (unsigned long long)failed);
        log_line(want, line, sizeof(line));
        snprintf(want, sizeof(want), "job %llu plugin echo: ", (unsigned long long)ok);
        cr_assert_eq(log_count(want, ": queued (") + log_count(want, ": started (") +
                             log_count(want, ": finished "),
                     0, "log_jobs = false, and still the routine lines");
        snprintf(want, sizeof(want), "job %llu plugin sha256: ", (unsigned long long)failed);
        cr_assert_eq(log_count(want, ": queued (") + log_count(want, ": started ("), 0);
        client_free(c);
}

/* One line of `fiberctl logs -f` and when it came (ms since the follow began). */
typedef struct FollowLine {
        char text[512];
        uint64_t at_ms;
} FollowLine;

/*
 * A job that logs a line every 200 ms for 800 ms: `fiberctl logs -f` (which looks every
 * 250 ms) prints each line once, in order, the first ones while the job still runs, and
 * ends with "-- job N done --" (bounded: `timeout 30`).
 */
Test(daemon_joblines, fiberctl_logs_follow_prints_new_lines_until_the_job_ends)
{
        const Arg args[] = {ARG_I("n", 4), ARG_I("delay_ms", 200)};
        static FollowLine lines[64];
        char cmd[512], buf[512];
        size_t n = 0;
        uint64_t id, t0;
        IpcStatus st = {0};
        Client *c;
        FILE *p;

        fiberd_start(&fd_, &(FiberdOpts){.extra = LOG_LINES_SO});
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "log_lines", args, ELEMENTSOF(args), 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        snprintf(cmd, sizeof(cmd), "timeout 30 %s -s %s logs -f %llu 2>&1", FIBERCTL_BIN, fd_.sock,
                 (unsigned long long)id);
        t0 = fiberd_now_ms();
        p = popen(cmd, "r");
        cr_assert(p);
        while (n < ELEMENTSOF(lines) && fgets(buf, sizeof(buf), p)) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(lines[n].text, sizeof(lines[n].text), "%s", buf);
                lines[n++].at_ms = fiberd_now_ms() - t0;
        }
        cr_assert_eq(WEXITSTATUS(pclose(p)), 0, "fiberctl logs -f failed: %s",
                     n ? lines[n - 1].text : "");
        cr_assert_eq(n, 5, "want 4 lines and the end, got %zu (last: %s)", n,
                     n ? lines[n - 1].text : "");
        for (size_t i = 0; i < 4; i++) {
                snprintf(buf, sizeof(buf), " info    line %zu", i + 1);
                cr_assert(strstr(lines[i].text, buf), "line %zu: %s", i, lines[i].text);
        }
        snprintf(buf, sizeof(buf), "-- job %llu done --", (unsigned long long)id);
        cr_assert_str_eq(lines[4].text, buf);
        /* followed, not read at the end: the first line came well before the last */
        cr_assert_geq(lines[3].at_ms - lines[0].at_ms, 300,
                      "lines at %llu and %llu ms: not followed as they came",
                      (unsigned long long)lines[0].at_ms, (unsigned long long)lines[3].at_ms);
        /* a finished job: -f prints its lines and ends at once */
        p = popen(cmd, "r");
        cr_assert(p);
        n = 0;
        while (fgets(buf, sizeof(buf), p))
                n++;
        cr_assert_eq(WEXITSTATUS(pclose(p)), 0);
        cr_assert_eq(n, 5);
        client_free(c);
}
