/* SPDX-License-Identifier: MIT */
/*
 * daemon_config.c — the configuration an operator finds: the shipped, commented-out
 * daemon/fiberd.conf lists every key with its default (uncommented, it is exactly what
 * `fiberd --check-config` prints for the defaults); --check-config validates and prints
 * the effective settings, exit 0 / 1; --config overrides the default file; a missing
 * default file is not an error; SIGHUP applies the live keys and names in one log line
 * the changed keys that need a restart.
 *
 * And what an operator meets when the file or the machine is wrong: every error of a file
 * in one run, each with its line; a key set twice refused naming both lines; a FIFO or a
 * directory refused at once (no hang); a scheduler layout that cannot start refused by
 * --check-config and by the start alike, at once; the effective store path printed; no
 * "<N>" priority prefixes on a terminal; a second fiberd on a locked store told whose
 * lock it is and what to do.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <pty.h>
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

        snprintf(cmd, sizeof(cmd), "%s %s %s", FIBERD_BIN, args,
                 with_stderr ? "2>&1" : "2>/dev/null");
        return fiberd_sh(cmd, out, size);
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
 * names it on the command line for both runs. So is [store] path, which --check-config
 * prints resolved: $STATE_DIRECTORY pins it to the shipped file's /var/lib/fiberd. */
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
        setenv("STATE_DIRECTORY", "/var/lib/fiberd", 1); /* [store] path as shipped */
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
                         "[server]\nworkers = 2\n[store]\nbackend = memory\n"
                         "[scheduler]\nnuma = off\n");
        kill(fd_.pid, SIGHUP);
        cr_assert(log_becomes("configuration reloaded: "), "no reload line");
        cr_assert(fiberd_log_contains(&fd_, "configuration reloaded: applied [jobs] max_running, "
                                            "[jobs] retention_s; needs a restart (running on "
                                            "the old values until then): workers, [server] "
                                            "workers, [store] backend, [scheduler] numa"),
                  "the reload line does not name the keys");
        cr_assert_eq(log_lines_with("restart"), 1, "more than one line about the restart");

        /* nothing changed: said so, and no restart named */
        kill(fd_.pid, SIGHUP);
        for (int i = 0; i < 1000 && log_lines_with("configuration reloaded: ") < 2; i++)
                usleep(10000);
        cr_assert(fiberd_log_contains(&fd_, "configuration reloaded: no live setting changed; "
                                            "needs a restart (running on the old values until "
                                            "then): workers, [server] workers, [store] backend, "
                                            "[scheduler] numa"),
                  "a second reload forgot a key that still waits for a restart");
}

/* ------------------------------------------------- config that tells the truth ---- */

/* Runs `sh -c @script` (stdout and stderr into @out) at most @timeout_s seconds: its exit
 * status (124: timed out). */
static int run_sh(const char *script, unsigned timeout_s, char *out, size_t size)
{
        char cmd[2048];

        snprintf(cmd, sizeof(cmd), "timeout -k 2 %u sh -c '%s' 2>&1", timeout_s, script);
        return fiberd_sh(cmd, out, size);
}

Test(daemon_config, check_config_reports_every_error_of_the_file_in_one_run)
{
        static char out[8192];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128], args[256];

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);
        write_file(path, "[jobs]\n"                  /* 1 */
                         "max_running = 7\n"         /* 2 */
                         "max_runing = 8\n"          /* 3: unknown key */
                         "retention_s = soon\n"      /* 4: bad value */
                         "this line has no equals\n" /* 5: syntax */
                         "[scheduler\n"              /* 6: no ']' */
                         "[scheduler]\n"             /* 7 */
                         "  group_size = 65\n"       /* 8: bad value, indented */
                         "numa = sideways\n");       /* 9: bad word */
        snprintf(args, sizeof(args), "--check-config --config %s", path);
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, ":3: unknown key 'max_runing' in section [jobs]"), "%s", out);
        cr_assert(strstr(out, ":4: [jobs] retention_s: bad value 'soon'"), "%s", out);
        cr_assert(strstr(out, ":5: syntax error"), "%s", out);
        cr_assert(strstr(out, ":6: expected ']'"), "%s", out);
        cr_assert(strstr(out, ":8: [scheduler] group_size: bad value '65'"), "%s", out);
        cr_assert(strstr(out, ":9: [scheduler] numa: bad value 'sideways' (want auto, on or off)"),
                  "%s", out);
        cr_assert(strstr(out, "6 errors in the configuration of "), "%s", out);
        /* nothing printed as settings: the file is not valid */
        cr_assert_null(strstr(out, "max_running = 7"), "%s", out);
        /* the daemon refuses the same file, naming the same lines */
        snprintf(args, sizeof(args), "--config %s --socket %s/s", path, dir);
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 78, "%s", out);
        cr_assert(strstr(out, ":3: ") && strstr(out, ":9: "), "%s", out);
        unlink(path);
        rmdir(dir);
}

Test(daemon_config, a_key_set_twice_is_refused_naming_both_lines)
{
        static char out[4096];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128], args[256];

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);
        write_file(path, "[jobs]\nmax_running = 7\n[ipc]\nmax_message = 4096\n[jobs]\n"
                         "max_running = 9\n[class.batch]\nshares = 10\nshares = 20\n");
        snprintf(args, sizeof(args), "--check-config --config %s", path);
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, ":6: [jobs] max_running is set again (first on line 2)"), "%s", out);
        cr_assert(strstr(out, ":9: [class.batch] shares is set again (first on line 8)"), "%s",
                  out);
        /* the same key in two different sections is two keys */
        write_file(path, "[jobs]\nmax_running = 7\n[class.batch]\nmax_running = 2\n");
        cr_assert_eq(run_fiberd(args, true, out, sizeof(out)), 0, "%s", out);
        unlink(path);
        rmdir(dir);
}

Test(daemon_config, a_fifo_or_a_directory_as_the_config_is_refused_at_once)
{
        static char out[4096];
        char dir[] = "/tmp/fiberd-config-XXXXXX", fifo[128], script[512];
        uint64_t t0;

        cr_assert(mkdtemp(dir));
        snprintf(fifo, sizeof(fifo), "%s/fifo.conf", dir);
        cr_assert_eq(mkfifo(fifo, 0600), 0);
        /* nobody writes the FIFO: a plain open(2) would wait forever */
        t0 = fiberd_now_ms();
        snprintf(script, sizeof(script), "exec %s --check-config --config %s", FIBERD_BIN, fifo);
        cr_assert_eq(run_sh(script, 10, out, sizeof(out)), 1, "(124: hung) %s", out);
        cr_assert(strstr(out, "not a regular file (a FIFO)"), "%s", out);
        /* and the start: refused, not hung */
        snprintf(script, sizeof(script), "exec %s --config %s --socket %s/s", FIBERD_BIN, fifo,
                 dir);
        cr_assert_eq(run_sh(script, 10, out, sizeof(out)), 78, "(124: hung) %s", out);
        cr_assert(strstr(out, "not a regular file (a FIFO)"), "%s", out);
        cr_assert_lt(fiberd_now_ms() - t0, 5000);
        snprintf(script, sizeof(script), "exec %s --check-config --config %s", FIBERD_BIN, dir);
        cr_assert_eq(run_sh(script, 10, out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, "not a regular file (a directory)"), "%s", out);
        unlink(fifo);
        rmdir(dir);
}

/*
 * A layout that cannot start: 64 groups of 64 workers start 4,200 threads whose stacks
 * take some 33 GiB of address space; under `ulimit -v` 4 GiB that cannot be mapped.
 * --check-config says so, and the start refuses with the same line at once (exit 78)
 * instead of starting groups until pthread_create() fails. The default layout passes
 * under the same limit (the check does not refuse what can start).
 */
Test(daemon_config, a_layout_that_cannot_start_is_refused_by_check_config_and_the_start)
{
        static char out[8192];
        char dir[] = "/tmp/fiberd-config-XXXXXX", path[128], script[1024];
        uint64_t t0;

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);
        write_file(path, "[scheduler]\ngroups = 64\ngroup_size = 64\n");
        snprintf(script, sizeof(script), "ulimit -v 4194304; exec %s --check-config --config %s",
                 FIBERD_BIN, path);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, "the job scheduler cannot start (workers = 0, [scheduler] groups "
                              "= 64, group_size = 64): 64 groups of 64 workers need "),
                  "%s", out);
        cr_assert(strstr(out, "RLIMIT_AS"), "%s", out);
        /* the start: the same line, at once, before a group is made */
        t0 = fiberd_now_ms();
        snprintf(script, sizeof(script),
                 "ulimit -v 4194304; STATE_DIRECTORY=%s exec %s --config %s --socket %s/s "
                 "--plugin-dir %s",
                 dir, FIBERD_BIN, path, dir, FIBERD_PLUGIN_BUILD_DIR);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 78, "%s", out);
        cr_assert(strstr(out, "the job scheduler cannot start"), "%s", out);
        cr_assert_null(strstr(out, "job group 0:"), "groups were started: %s", out);
        cr_assert_lt(fiberd_now_ms() - t0, 3000);
        /* what can start is not refused */
        snprintf(script, sizeof(script),
                 "ulimit -v 4194304; exec %s --check-config --config /dev/null", FIBERD_BIN);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "# job scheduler on this machine: "), "%s", out);
        unlink(path);
        rmdir(dir);
}

Test(daemon_config, check_config_prints_the_effective_paths)
{
        static char out[16384];
        char script[512];

        snprintf(script, sizeof(script),
                 "STATE_DIRECTORY=/srv/fiberd-state FIBERD_SOCKET=/tmp/x.sock exec %s "
                 "--check-config --config /dev/null --plugin-dir /opt/p",
                 FIBERD_BIN);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 0, "%s", out);
        /* [store] path resolved, not empty: what the start would open */
        cr_assert(strstr(out, "\n[store]\nbackend = sqlite\npath = /srv/fiberd-state/jobs.db\n"),
                  "%s", out);
        cr_assert(strstr(out, "\n# socket: /tmp/x.sock "), "%s", out);
        cr_assert(strstr(out, "\n# plugins from: /opt/p\n"), "%s", out);
        cr_assert(strstr(out, "\n# job store: sqlite /srv/fiberd-state/jobs.db\n"), "%s", out);
        /* no store path for the memory store */
        snprintf(script, sizeof(script),
                 "printf \"[store]\\nbackend = memory\\n\" >/tmp/fiberd-mem-$$.conf; "
                 "%s --check-config --config /tmp/fiberd-mem-$$.conf; r=$?; "
                 "rm -f /tmp/fiberd-mem-$$.conf; exit $r",
                 FIBERD_BIN);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "\nbackend = memory\npath = \n"), "%s", out);
        cr_assert(strstr(out, "\n# job store: memory\n"), "%s", out);
}

/* On a terminal a human reads the lines: no "<3>", an "error: " instead. */
Test(daemon_config, no_priority_prefixes_on_a_terminal)
{
        static char out[4096];
        size_t n = 0;
        int master, status;
        pid_t pid = forkpty(&master, NULL, NULL, NULL);

        cr_assert(pid >= 0, "forkpty: %s", strerror(errno));
        if (pid == 0) {
                execl(FIBERD_BIN, FIBERD_BIN, "--check-config", "--config",
                      "/nonexistent/fiberd.conf", (char *)NULL);
                _exit(127);
        }
        for (;;) {
                struct pollfd pfd = {.fd = master, .events = POLLIN};
                ssize_t got;
                if (poll(&pfd, 1, 10000) <= 0 || n + 1 >= sizeof(out))
                        break;
                got = read(master, out + n, sizeof(out) - 1 - n);
                if (got <= 0) /* EIO: the child closed the terminal */
                        break;
                n += (size_t)got;
        }
        out[n] = '\0';
        close(master);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s", out);
        cr_assert(strstr(out, "error: /nonexistent/fiberd.conf: cannot open config file"), "%s",
                  out);
        cr_assert_null(strchr(out, '<'), "a priority prefix on a terminal: %s", out);
}

/* A second fiberd on the same job store: refused, naming the first one's pid and what
 * to do about it. */
Test(daemon_config, a_second_fiberd_on_a_locked_store_names_the_first)
{
        static char out[8192];
        char script[1024], want[128];

        fiberd_start(&fd_, &(FiberdOpts){0});
        snprintf(script, sizeof(script),
                 "STATE_DIRECTORY=%s exec %s --config /dev/null --socket %s/second.sock "
                 "--plugin-dir %s",
                 fd_.dir, FIBERD_BIN, fd_.dir, fd_.plugin_dir);
        cr_assert_eq(run_sh(script, 30, out, sizeof(out)), 78, "%s", out);
        snprintf(want, sizeof(want),
                 "%s/jobs.db: it is locked by another fiberd (pid %d): ", fd_.dir, (int)fd_.pid);
        cr_assert(strstr(out, want), "want '%s' in: %s", want, out);
        cr_assert(strstr(out, "stop that one, or point this one elsewhere with [store] path or "
                              "STATE_DIRECTORY"),
                  "%s", out);
        /* the first one is untouched */
        cr_assert_eq(kill(fd_.pid, 0), 0);
}
