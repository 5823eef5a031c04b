/* SPDX-License-Identifier: MIT */
/*
 * daemon_config.c — the configuration an operator finds: the shipped, commented-out
 * daemon/fiberd.conf lists every key with its default (uncommented, it is exactly what
 * `fiberd --check-config` prints for the defaults); --check-config validates and prints
 * the effective settings, exit 0 / 1; --config overrides the default file; a missing
 * default file is not an error; SIGHUP applies the live keys and names in one log line
 * the changed keys that need a restart.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FIBERD_SHIPPED_CONFIG
#define FIBERD_SHIPPED_CONFIG "daemon/fiberd.conf"
#endif
#ifndef FIBERD_DEFAULT_CONFIG
#define FIBERD_DEFAULT_CONFIG "/etc/fiberd/fiberd.conf"
#endif

static Fiberd fd_;

static void setup(void)
{
        unsetenv("FIBERD_SOCKET");
}

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_config, .init = setup, .fini = teardown, .timeout = 60);

/* Runs `fiberd @args` through sh; its stdout (and stderr too with @with_stderr) into
 * @out. Returns the exit status. */
static int run_fiberd(const char *args, bool with_stderr, char *out, size_t size)
{
        char cmd[1024];
        size_t n = 0;
        FILE *p;
        int status;

        snprintf(cmd, sizeof(cmd), "%s %s %s", FIBERD_BIN, args,
                 with_stderr ? "2>&1" : "2>/dev/null");
        p = popen(cmd, "r");
        cr_assert(p, "popen %s", cmd);
        while (n + 1 < size && !feof(p)) {
                size_t got = fread(out + n, 1, size - 1 - n, p);
                if (got == 0)
                        break;
                n += got;
        }
        out[n] = '\0';
        status = pclose(p);
        cr_assert(WIFEXITED(status), "%s: not exited", cmd);
        return WEXITSTATUS(status);
}

/* The lines of @text that are neither comments nor blank, each as "x = y", into @out. */
static void settings_only(const char *text, char *out, size_t size)
{
        size_t n = 0;

        out[0] = '\0';
        while (*text) {
                const char *eol = strchrnul(text, '\n');
                size_t len = (size_t)(eol - text);
                if (len > 0 && text[0] != '#' && text[0] != ';' && n + len + 2 < size) {
                        memcpy(out + n, text, len);
                        n += len;
                        out[n++] = '\n';
                        out[n] = '\0';
                }
                text = *eol ? eol + 1 : eol;
        }
}

static void write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");
        cr_assert(f, "cannot write %s", path);
        fputs(text, f);
        fclose(f);
}

/* The socket is the one key whose default depends on who runs fiberd: a non-root test
 * names it on the command line for both runs. */
static const char *socket_flag(void)
{
        return geteuid() == 0 ? "" : "--socket /run/fiberd.sock";
}

Test(daemon_config, shipped_file_lists_every_key_with_its_default)
{
        static char shipped[16384], uncommented[16384], defaults[16384], want[16384], got[16384],
                args[512];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128];
        FILE *f = fopen(FIBERD_SHIPPED_CONFIG, "r");
        size_t n;

        cr_assert(f, "cannot read %s", FIBERD_SHIPPED_CONFIG);
        n = fread(shipped, 1, sizeof(shipped) - 1, f);
        fclose(f);
        shipped[n] = '\0';
        /* As shipped, every key is commented out: fiberd reads the file as the defaults. */
        snprintf(args, sizeof(args), "--check-config %s --config /dev/null", socket_flag());
        cr_assert_eq(run_fiberd(args, false, defaults, sizeof(defaults)), 0);
        snprintf(args, sizeof(args), "--check-config %s --config %s", socket_flag(),
                 FIBERD_SHIPPED_CONFIG);
        cr_assert_eq(run_fiberd(args, false, got, sizeof(got)), 0);
        settings_only(defaults, want, sizeof(want));
        settings_only(got, uncommented, sizeof(uncommented));
        cr_assert_str_eq(uncommented, want, "the shipped file, as is, is not the defaults");

        /* Uncommented ("#key = value" -> "key = value"), it names every key fiberd knows,
         * in the order --check-config prints them, each with its default. */
        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/uncommented.conf", dir);
        f = fopen(path, "w");
        cr_assert(f);
        for (const char *line = shipped; *line;) {
                const char *eol = strchrnul(line, '\n');
                if (line[0] == '#' && line[1] >= 'a' && line[1] <= 'z')
                        line++;
                fprintf(f, "%.*s\n", (int)(eol - line), line);
                line = *eol ? eol + 1 : eol;
        }
        fclose(f);
        f = fopen(path, "r");
        n = fread(shipped, 1, sizeof(shipped) - 1, f);
        fclose(f);
        shipped[n] = '\0';
        settings_only(shipped, uncommented, sizeof(uncommented));
        cr_assert_str_eq(uncommented, want,
                         "the shipped file's keys and defaults differ from fiberd's:\n%s",
                         uncommented);
        snprintf(args, sizeof(args), "--check-config %s --config %s", socket_flag(), path);
        cr_assert_eq(run_fiberd(args, true, got, sizeof(got)), 0, "%s", got);
        unlink(path);
        rmdir(dir);
}

Test(daemon_config, check_config_prints_what_the_file_sets)
{
        static char out[16384];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128], args[256];

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);
        write_file(path, "[jobs]\nmax_running = 7\n[scheduler]\nsteal_every_n = 0\n");
        snprintf(args, sizeof(args), "--check-config --config %s --log-level debug", path);
        cr_assert_eq(run_fiberd(args, false, out, sizeof(out)), 0);
        cr_assert(strstr(out, "max_running = 7\n"), "%s", out);
        cr_assert(strstr(out, "steal_every_n = 0\n"), "%s", out);
        cr_assert(strstr(out, "log_level = debug\n"), "the flag does not win: %s", out);
        cr_assert(strstr(out, "# read from "), "%s", out);
        cr_assert(strstr(out, path), "the file read is not named: %s", out);
        /* what it prints is a configuration file that gives the same settings */
        write_file(path, out);
        {
                static char again[16384];
                snprintf(args, sizeof(args), "--check-config --config %s", path);
                cr_assert_eq(run_fiberd(args, false, again, sizeof(again)), 0);
                cr_assert_str_eq(strchr(strstr(again, "[fiberd]"), '['),
                                 strchr(strstr(out, "[fiberd]"), '['));
        }
        unlink(path);
        rmdir(dir);
}

Test(daemon_config, check_config_fails_on_a_bad_file)
{
        static char out[4096];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128], args[256];

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);
        write_file(path, "[jobs]\nmax_running = 7\nmax_runing = 8\n");
        snprintf(args, sizeof(args), "--check-config --config %s", path);
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 1);
        cr_assert(strstr(out, ":3: unknown key 'max_runing'"), "%s", out);
        write_file(path, "[scheduler]\ngroup_size = 65\n");
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 1);
        cr_assert(strstr(out, ":2: [scheduler] group_size: bad value '65'"), "%s", out);
        unlink(path);
        /* --config names a file: it must exist */
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 1);
        cr_assert(strstr(out, "cannot open config file"), "%s", out);
        rmdir(dir);
}

Test(daemon_config, the_default_file_may_be_absent)
{
        static char out[16384];
        struct stat sb;

        if (stat(FIBERD_DEFAULT_CONFIG, &sb) == 0)
                cr_skip_test("%s exists on this machine", FIBERD_DEFAULT_CONFIG);
        cr_assert_eq(run_fiberd("--check-config", false, out, sizeof(out)), 0);
        cr_assert(strstr(out, "no file read (" FIBERD_DEFAULT_CONFIG " is absent)"), "%s", out);
        cr_assert(strstr(out, "max_running = 256\n"), "%s", out);
}

/* Polls the daemon's log (bounded) for a line containing @needle. */
static bool log_becomes(const char *needle)
{
        for (int i = 0; i < 1000; i++) {
                if (fiberd_log_contains(&fd_, needle))
                        return true;
                usleep(10000);
        }
        return false;
}

static int log_lines_with(const char *needle)
{
        char line[1024];
        int n = 0;
        FILE *f = fopen(fd_.log, "r");

        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f))
                n += strstr(line, needle) != NULL;
        fclose(f);
        return n;
}

Test(daemon_config, sighup_names_what_needs_a_restart_in_one_line)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 8\n", .notify = true};
        char conf[256];

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        write_file(conf, "[fiberd]\nworkers = 3\n[jobs]\nmax_running = 9\nretention_s = 60\n"
                         "[scheduler]\nnuma = off\n");
        kill(fd_.pid, SIGHUP);
        cr_assert(log_becomes("configuration reloaded: "), "no reload line");
        cr_assert(fiberd_log_contains(&fd_, "configuration reloaded: applied [jobs] max_running, "
                                            "[jobs] retention_s; needs a restart (running on "
                                            "the old values until then): workers, [scheduler] "
                                            "numa"),
                  "the reload line does not name the keys");
        cr_assert_eq(log_lines_with("restart"), 1, "more than one line about the restart");

        /* nothing changed: said so, and no restart named */
        kill(fd_.pid, SIGHUP);
        for (int i = 0; i < 1000 && log_lines_with("configuration reloaded: ") < 2; i++)
                usleep(10000);
        cr_assert(fiberd_log_contains(&fd_, "configuration reloaded: no live setting changed; "
                                            "needs a restart"),
                  "a second reload forgot that workers still waits for a restart");
}
