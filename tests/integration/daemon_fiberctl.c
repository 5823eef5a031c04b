/* SPDX-License-Identifier: MIT */
/*
 * daemon_fiberctl.c — fiberctl's habits against a real fiberd: global options anywhere
 * on the line (`fiberctl list --json -s PATH`), a verb option's value that looks like an
 * option (`--priority -1`) left to the verb, `fiberctl VERB --help` without a daemon,
 * `--version` anywhere, errors as one JSON object on stderr under --json (usage errors
 * too), and every failure said once ("no job 99", not "job 99: no job 99").
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

static Fiberd fd_;
static char out_[8192], err_[8192];

static void setup(void)
{
        FiberdOpts o = {.plugins = "echo sleep sha256"};

        fiberd_start(&fd_, &o);
        unsetenv("FIBERD_SOCKET"); /* every call names the socket itself */
}

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_fiberctl, .init = setup, .fini = teardown, .timeout = 60);

static void slurp(const char *path, char *buf, size_t size)
{
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(buf, 1, size - 1, f) : 0;

        buf[n] = '\0';
        if (f)
                fclose(f);
}

/* Runs `fiberctl @args` (a shell word list; @SOCK@ is replaced by the socket), stdout
 * into out_, stderr into err_. Returns the exit status. */
static int ctl(const char *args)
{
        char cmd[2048], words[1024], o[256], e[256];
        const char *at = strstr(args, "@SOCK@");
        int status;

        if (at)
                snprintf(words, sizeof(words), "%.*s%s%s", (int)(at - args), args, fd_.sock,
                         at + 6);
        else
                snprintf(words, sizeof(words), "%s", args);
        snprintf(o, sizeof(o), "%s/ctl.out", fd_.dir);
        snprintf(e, sizeof(e), "%s/ctl.err", fd_.dir);
        snprintf(cmd, sizeof(cmd), "%s %s >%s 2>%s", FIBERCTL_BIN, words, o, e);
        status = system(cmd);
        slurp(o, out_, sizeof(out_));
        slurp(e, err_, sizeof(err_));
        cr_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static int count(const char *hay, const char *needle)
{
        int n = 0;

        for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
                n++;
        return n;
}

Test(daemon_fiberctl, global_options_anywhere)
{
        cr_assert_eq(ctl("ping --json -s @SOCK@"), 0, "%s", err_);
        cr_assert(strncmp(out_, "{\"version\":", 11) == 0, "not JSON: %s", out_);
        cr_assert_eq(ctl("--socket=@SOCK@ submit echo x=1 --json --wait"), 0, "%s", err_);
        cr_assert(strstr(out_, "\"state\":\"done\""), "%s", out_);
        /* -1 is --priority's value, not an option */
        cr_assert_eq(ctl("submit sleep ms=1 --priority -1 --wait -j -s @SOCK@"), 0, "%s", err_);
        cr_assert(strstr(out_, "\"priority\":-1"), "%s", out_);
        cr_assert_eq(ctl("list -s @SOCK@ --limit 1"), 0, "%s", err_);
        cr_assert(strstr(out_, "sleep"), "%s", out_);
        /* after "--" nothing is global */
        cr_assert_eq(ctl("-s @SOCK@ status -- --json"), 64);
        cr_assert_eq(out_[0], '\0');
}

Test(daemon_fiberctl, help_and_version_anywhere)
{
        cr_assert_eq(ctl("wait --help -s /nonexistent.sock"), 0, "%s", err_);
        cr_assert(strstr(out_, "Usage: fiberctl [OPTIONS] wait [--timeout DUR] ID..."), "%s", out_);
        cr_assert(strstr(out_, "--timeout DUR"), "%s", out_);
        cr_assert_eq(ctl("-h submit"), 0);
        cr_assert(strstr(out_, "submit PLUGIN"), "%s", out_);
        cr_assert_eq(ctl("ping --version"), 0);
        cr_assert(strncmp(out_, "fiberctl ", 9) == 0, "%s", out_);
        cr_assert(strstr(out_, "(protocol "), "%s", out_);
        cr_assert_eq(ctl("--help"), 0);
        cr_assert(strstr(out_, "'fiberctl VERB --help'"), "%s", out_);
}

Test(daemon_fiberctl, json_errors_on_stderr)
{
        cr_assert_eq(ctl("status 99 -s @SOCK@ --json"), 66);
        cr_assert_eq(out_[0], '\0', "stdout: %s", out_);
        cr_assert_str_eq(err_, "{\"error\":{\"code\":\"NOT_FOUND\",\"message\":\"no job 99\","
                               "\"exit\":66}}\n");
        /* --json given after the mistake still makes the usage error JSON */
        cr_assert_eq(ctl("status --bogus --json"), 64);
        cr_assert(strncmp(err_, "{\"error\":{\"code\":\"USAGE\",", 25) == 0, "%s", err_);
        cr_assert_eq(count(err_, "\n"), 1, "%s", err_);
        cr_assert_eq(ctl("--json -s /nonexistent/fiberd.sock ping"), 69);
        cr_assert(strncmp(err_, "{\"error\":{", 10) == 0, "%s", err_);
        cr_assert(strstr(err_, "\"exit\":69"), "%s", err_);
}

Test(daemon_fiberctl, each_failure_said_once)
{
        cr_assert_eq(ctl("-s @SOCK@ status 99"), 66);
        cr_assert_str_eq(err_, "fiberctl: no job 99\n");
        cr_assert_eq(ctl("-s @SOCK@ submit sha256 path=/nonexistent/file"), 0, "%s", err_);
        {
                char args[128], id[32];
                snprintf(id, sizeof(id), "%.20s", out_);
                id[strcspn(id, "\n")] = '\0';
                snprintf(args, sizeof(args), "-s @SOCK@ wait %s", id);
                cr_assert_eq(ctl(args), 1, "%s", err_);
                snprintf(args, sizeof(args), "-s @SOCK@ result %s", id);
                cr_assert_eq(ctl(args), 1);
                char job[48];
                snprintf(job, sizeof(job), "job %s", id);
                cr_assert_eq(count(err_, job), 1, "said twice: %s", err_);
                cr_assert_eq(count(err_, "cannot open /nonexistent/file"), 1, "%s", err_);
        }
}
