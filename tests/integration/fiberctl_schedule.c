/* SPDX-License-Identifier: MIT */
/*
 * fiberctl_schedule.c — fiberctl's side of job scheduling (PROTOCOL.md, "Scheduling
 * jobs") against a real fiberd: submit --in / --at / --after / --key / --retries,
 * records that show them, retry and discard, the dead set, pause and resume of a class,
 * periodic schedules, and batch lines that name earlier lines' jobs.
 *
 * They run in `make check-integration` (and alone: `make check-fiberctl-schedule`).
 * The dead set's test uses the
 * test plugin tests/plugins/flaky.c. What fiberctl sends and prints
 * without a daemon is client_fake.c's; the conversions are client_convert.c's.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

static Fiberd fd_;
static char out_[16384], err_[8192];

static void setup(void)
{
        FiberdOpts o = {.plugins = "echo sleep sha256",
                        .extra = FIBERD_TEST_PLUGIN_DIR "/flaky.so",
                        .workers = 2};

        fiberd_start(&fd_, &o);
        unsetenv("FIBERD_SOCKET"); /* every call names the socket itself */
}

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(fiberctl_schedule, .init = setup, .fini = teardown, .timeout = 60);

static void slurp(const char *path, char *buf, size_t size)
{
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, size - 1, f) : 0;

        buf[n] = '\0';
        if (f)
                fclose(f);
}

/* Runs `fiberctl -s SOCK <printf of @fmt>` (shell words) with @input on stdin (NULL:
 * none); stdout in out_, stderr in err_. Returns the exit status. */
__attribute__((format(printf, 2, 3))) static int ctl(const char *input, const char *fmt, ...)
{
        char cmd[4096], words[2048], o[256], e[256], in[256];
        va_list ap;
        int status;

        va_start(ap, fmt);
        vsnprintf(words, sizeof(words), fmt, ap);
        va_end(ap);
        snprintf(o, sizeof(o), "%s/ctl.out", fd_.dir);
        snprintf(e, sizeof(e), "%s/ctl.err", fd_.dir);
        snprintf(in, sizeof(in), "%s/ctl.in", fd_.dir);
        FILE *f = fopen(in, "w");
        cr_assert_not_null(f);
        fputs(input ? input : "", f);
        fclose(f);
        snprintf(cmd, sizeof(cmd), "%s -s %s %s <%s >%s 2>%s", FIBERCTL_BIN, fd_.sock, words, in, o,
                 e);
        status = system(cmd);
        slurp(o, out_, sizeof(out_));
        slurp(e, err_, sizeof(err_));
        cr_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static void assert_has(const char *hay, const char *needle)
{
        cr_assert_not_null(strstr(hay, needle), "expected \"%s\" in:\n%s", needle, hay);
}

/* `fiberctl submit @args`, asserting it is accepted: the job's id. */
__attribute__((format(printf, 1, 2))) static uint64_t submit(const char *fmt, ...)
{
        char words[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(words, sizeof(words), fmt, ap);
        va_end(ap);
        cr_assert_eq(ctl(NULL, "submit %s", words), 0, "submit %s: %s", words, err_);
        return strtoull(out_, NULL, 10);
}

/* The record of job @id, as `--json status` prints it, in out_. */
static const char *status_json(uint64_t id)
{
        cr_assert_eq(ctl(NULL, "--json status %" PRIu64, id), 0, "%s", err_);
        return out_;
}

Test(fiberctl_schedule, in_holds_a_job_scheduled_then_it_runs)
{
        uint64_t id = submit("echo x=1 --in 2s");

        cr_assert_eq(ctl(NULL, "status %" PRIu64, id), 0, "%s", err_);
        assert_has(out_, "): scheduled\n");
        assert_has(out_, "  run at    ");
        assert_has(status_json(id), "\"run_at_ms\":");
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, id), 0, "%s", err_);
        assert_has(out_, " echo done ");
}

Test(fiberctl_schedule, at_in_the_past_runs_now_and_wait_waits_through_scheduled)
{
        cr_assert_eq(ctl(NULL, "submit echo --at 2020-01-01T00:00:00Z --wait"), 0, "%s", err_);
        assert_has(out_, "): done\n");
        cr_assert_eq(ctl(NULL, "submit echo --at @%ld --wait", (long)time(NULL) + 1), 0, "%s",
                     err_);
        assert_has(out_, "): done\n");
}

Test(fiberctl_schedule, after_waits_until_the_jobs_are_done)
{
        uint64_t a = submit("sleep ms=600000");
        uint64_t b = submit("echo --after %" PRIu64, a);
        char want[64];

        cr_assert_eq(ctl(NULL, "status %" PRIu64, b), 0, "%s", err_);
        assert_has(out_, "): waiting\n");
        snprintf(want, sizeof(want), "  after     %" PRIu64 "\n", a);
        assert_has(out_, want);
        /* a cancelled dependency fails the job that waits for it */
        cr_assert_eq(ctl(NULL, "cancel %" PRIu64, a), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, b), 1, "%s", out_);
        assert_has(out_, "FAILED_PRECONDITION");
        /* a dependency already failed: refused at once */
        cr_assert_eq(ctl(NULL, "submit echo --after %" PRIu64, b), 75, "%s", err_);
        cr_assert_eq(ctl(NULL, "submit echo --after 999999"), 66, "%s", err_);

        uint64_t c = submit("sleep ms=50");
        uint64_t d = submit("echo n=2 --after %" PRIu64, c);
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, d), 0, "%s", out_);
}

Test(fiberctl_schedule, a_key_answers_the_first_jobs_id)
{
        uint64_t a = submit("sleep ms=600000 --key k1");
        uint64_t b = submit("sleep ms=600000 --key k1");

        cr_assert_eq(a, b, "the repeat got a new job");
        cr_assert_eq(ctl(NULL, "--json submit sleep ms=600000 --key k1"), 0, "%s", err_);
        assert_has(out_, "\"existing\":true");
        assert_has(status_json(a), "\"key\":\"k1\"");
}

Test(fiberctl_schedule, retries_show_in_the_record)
{
        uint64_t id = submit("echo --retries 2 --backoff 10ms --backoff-max 1s");

        cr_assert_eq(ctl(NULL, "wait %" PRIu64, id), 0, "%s", err_);
        assert_has(status_json(id), "\"max_attempts\":3");
        cr_assert_eq(ctl(NULL, "status %" PRIu64, id), 0);
        assert_has(out_, "  attempt   1 of 3\n");
        cr_assert_eq(ctl(NULL, "submit echo --retries 99"), 0, "%s", err_);
}

/* tests/plugins/flaky.c fails a job's first {"fail"} runs with -EIO, then succeeds. */
Test(fiberctl_schedule, a_job_out_of_attempts_is_dead_until_retried)
{
        uint64_t ok = submit("flaky fail=1 --retries 2 --backoff 10ms");
        uint64_t dead = submit("flaky fail=5 --retries 1 --backoff 10ms --backoff-max 20ms");
        char want[64];

        cr_assert_eq(ctl(NULL, "wait %" PRIu64, ok), 0, "the second run succeeds: %s", out_);
        cr_assert_eq(ctl(NULL, "status %" PRIu64, ok), 0, "%s", err_);
        assert_has(out_, "  attempt   2 of 3\n");
        assert_has(out_, "  errors    attempt 1, ");
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, dead), 1, "%s", out_);
        snprintf(want, sizeof(want), "%" PRIu64 " flaky dead ", dead);
        assert_has(out_, want);
        assert_has(out_, " attempt=2/2 ");
        cr_assert_eq(ctl(NULL, "dead"), 0, "%s", err_);
        assert_has(out_, " ERROR");
        assert_has(out_, " dead ");
        cr_assert_eq(ctl(NULL, "--json dead --plugin flaky"), 0, "%s", err_);
        assert_has(out_, "\"state\":\"dead\"");
        cr_assert_eq(ctl(NULL, "retry %" PRIu64, dead), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, dead), 1, "runs 3 and 4 fail too: %s", out_);
        assert_has(status_json(dead), "\"attempt\":1");
        cr_assert_eq(ctl(NULL, "discard --all"), 0, "%s", err_);
        snprintf(want, sizeof(want), "discarded job %" PRIu64 "\n", dead);
        cr_assert_str_eq(out_, want);
        cr_assert_eq(ctl(NULL, "--json dead"), 0, "%s", err_);
        cr_assert_str_eq(out_, "[]\n");
}

Test(fiberctl_schedule, retry_and_discard_a_failed_job)
{
        uint64_t id = submit("sha256 path=/nonexistent/file");
        char want[64];

        cr_assert_eq(ctl(NULL, "wait %" PRIu64, id), 1, "%s", err_);
        cr_assert_eq(ctl(NULL, "retry %" PRIu64, id), 0, "%s", err_);
        snprintf(want, sizeof(want), "retried job %" PRIu64 "\n", id);
        cr_assert_str_eq(out_, want);
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, id), 1, "it fails again: %s", err_);
        assert_has(status_json(id), "\"errors\":[{");
        cr_assert_eq(ctl(NULL, "discard %" PRIu64, id), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "status %" PRIu64, id), 66, "discarded: %s", out_);
        cr_assert_eq(ctl(NULL, "retry 999999"), 66, "%s", err_);
        uint64_t running = submit("sleep ms=600000");
        cr_assert_eq(ctl(NULL, "retry %" PRIu64, running), 75, "not final: %s", err_);
        cr_assert_eq(ctl(NULL, "retry --all"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "dead"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "list --state dead"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "--json dead"), 0, "%s", err_);
        cr_assert_str_eq(out_, "[]\n");
}

Test(fiberctl_schedule, pause_holds_a_class_until_resume)
{
        cr_assert_eq(ctl(NULL, "pause class default"), 0, "%s", err_);
        assert_has(out_, "paused class default");
        uint64_t id = submit("echo n=1");
        cr_assert_eq(ctl(NULL, "wait --timeout 300ms %" PRIu64, id), 75, "held: %s", out_);
        assert_has(out_, " queued ");
        cr_assert_eq(ctl(NULL, "resume class default"), 0, "%s", err_);
        assert_has(out_, "resumed class default");
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, id), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "pause class no-such-class"), 65, "%s", err_);
        cr_assert_eq(ctl(NULL, "pause plugin not-loaded-yet"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "resume plugin not-loaded-yet"), 0, "%s", err_);
}

Test(fiberctl_schedule, a_schedule_submits_at_its_ticks)
{
        cr_assert_eq(ctl(NULL, "schedule add tick --every 1s echo n=1"), 0, "%s", err_);
        assert_has(out_, "schedule tick (uid ");
        assert_has(out_, "every 1s");
        cr_assert_eq(ctl(NULL, "schedule add tick --every 1s echo"), 70, "ALREADY_EXISTS");
        uint64_t deadline = fiberd_now_ms() + 10000, job = 0;
        while (!job && fiberd_now_ms() < deadline) {
                cr_assert_eq(ctl(NULL, "--json schedule list"), 0, "%s", err_);
                const char *p = strstr(out_, "\"last_job\":");
                if (p && p[11] >= '1' && p[11] <= '9')
                        job = strtoull(p + 11, NULL, 10);
                else
                        usleep(100 * 1000); /* the schedule's tick is a second */
        }
        cr_assert_neq(job, 0, "no job submitted in 10 s: %s", out_);
        cr_assert_eq(ctl(NULL, "wait %" PRIu64, job), 0, "%s", err_);
        assert_has(status_json(job), "\"key\":\"schedule:tick:");
        cr_assert_eq(ctl(NULL, "schedule pause tick"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "schedule list"), 0, "%s", err_);
        assert_has(out_, "paused");
        cr_assert_eq(ctl(NULL, "schedule resume tick"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "schedule remove tick"), 0, "%s", err_);
        cr_assert_eq(ctl(NULL, "schedule remove tick"), 66, "%s", err_);
}

Test(fiberctl_schedule, a_cron_schedule_keeps_its_zone)
{
        cr_assert_eq(ctl(NULL, "--json schedule add nightly --cron '0 3 * * *' --tz Europe/Berlin "
                               "--missed run-once sha256 path=/etc/hostname --retries 2"),
                     0, "%s", err_);
        assert_has(out_, "\"tz\":\"Europe/Berlin\"");
        assert_has(out_, "\"missed\":\"run_once\"");
        assert_has(out_, "\"max_attempts\":3");
        cr_assert_eq(ctl(NULL, "schedule add bad --cron 'not a cron' echo"), 65, "%s", err_);
        assert_has(err_, "cron");
        cr_assert_eq(ctl(NULL, "schedule add unknown --every 5m no-such-plugin"), 66, "%s", err_);
}

Test(fiberctl_schedule, batch_lines_run_after_earlier_lines)
{
        const char *input = "{\"plugin\": \"sleep\", \"args\": {\"ms\": 100}}\n"
                            "{\"plugin\": \"echo\", \"args\": {\"n\": 2}, \"after\": [\"#1\"]}\n"
                            "{\"plugin\": \"echo\", \"args\": {\"n\": 3}, "
                            "\"options\": {\"after\": [\"#2\", \"#1\"], \"max_attempts\": 2}}\n";

        cr_assert_eq(ctl(input, "--json batch --wait"), 0, "%s %s", out_, err_);
        assert_has(out_, "\"line\":2");
        assert_has(out_, "\"max_attempts\":2");
        cr_assert_eq(ctl(input, "batch"), 0, "%s", err_);
        assert_has(out_, "line 3: job ");
}
