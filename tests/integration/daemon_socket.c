/* SPDX-License-Identifier: MIT */
/*
 * daemon_socket.c — one socket default that fiberd and fiberctl agree on
 * (ipc/socket_path.h): root's fiberd takes /run/fiberd.sock; `fiberd --user` and any
 * non-root fiberd take $XDG_RUNTIME_DIR/fiberd.sock, or refuse to start with the fix named
 * when XDG_RUNTIME_DIR is unset (never a shared /tmp path) unless a socket is named;
 * `fiberctl --user` finds a per-user fiberd, and plain fiberctl does not go looking for
 * it. The daemon's choice is read from `fiberd --check-config` (what a start would use).
 * The non-root cases run fiberd as uid 65534 through setpriv(1) (skipped when not root).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

static char dir_[64];
static pid_t daemon_pid_;

static void setup(void)
{
        snprintf(dir_, sizeof(dir_), "/tmp/fiberd-socket-XXXXXX");
        cr_assert(mkdtemp(dir_));
        chmod(dir_, 0777); /* the non-root fiberd of a test writes its socket here */
        unsetenv("FIBERD_SOCKET");
        unsetenv("LISTEN_FDS");
        unsetenv("NOTIFY_SOCKET");
}

static void teardown(void)
{
        char cmd[128];

        if (daemon_pid_ > 0) {
                kill(daemon_pid_, SIGKILL);
                waitpid(daemon_pid_, NULL, 0);
        }
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir_);
        cr_assert_eq(system(cmd), 0);
}

TestSuite(daemon_socket, .init = setup, .fini = teardown, .timeout = 60);

/* Runs @cmd through sh, stdout and stderr into @out; returns the exit status. */
static int run(const char *cmd, char *out, size_t size)
{
        char full[2048];

        snprintf(full, sizeof(full), "%s 2>&1", cmd);
        return fiberd_sh(full, out, size);
}

/* `fiberd --check-config` with @env (assignments for env(1), or "-u X") and @flags. */
static int check_config(const char *env, const char *flags, char *out, size_t size)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd),
                 "env -u FIBERD_SOCKET %s %s --check-config --config /dev/null %s", env, FIBERD_BIN,
                 flags);
        return run(cmd, out, size);
}

static void skip_unless_root(void)
{
        if (geteuid() != 0)
                cr_skip_test("needs root to run fiberd as another uid");
        if (access("/usr/bin/setpriv", X_OK) != 0)
                cr_skip_test("setpriv(1) is not installed");
}

#define AS_NOBODY "setpriv --reuid=65534 --regid=65534 --clear-groups"

Test(daemon_socket, root_takes_the_system_socket)
{
        char out[4096];

        if (geteuid() != 0)
                cr_skip_test("not root");
        cr_assert_eq(check_config("XDG_RUNTIME_DIR=/run/user/0", "", out, sizeof(out)), 0, "%s",
                     out);
        cr_assert(strstr(out, "\nsocket = /run/fiberd.sock\n"), "%s", out);
}

Test(daemon_socket, user_takes_xdg_runtime_dir)
{
        char out[4096], env[128], want[160];

        snprintf(env, sizeof(env), "XDG_RUNTIME_DIR=%s", dir_);
        snprintf(want, sizeof(want), "\nsocket = %s/fiberd.sock\n", dir_);
        cr_assert_eq(check_config(env, "--user", out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, want), "%s", out);
}

Test(daemon_socket, user_without_xdg_runtime_dir_refuses)
{
        char out[4096];

        cr_assert_eq(check_config("-u XDG_RUNTIME_DIR", "--user", out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, "XDG_RUNTIME_DIR is not set"), "%s", out);
        cr_assert(strstr(out, "--socket PATH"), "the fix is not named: %s", out);
        cr_assert_null(strstr(out, "/tmp/"), "a /tmp path appeared: %s", out);
        /* a named socket needs no default */
        cr_assert_eq(
                check_config("-u XDG_RUNTIME_DIR", "--user --socket /run/x.sock", out, sizeof(out)),
                0, "%s", out);
        cr_assert(strstr(out, "\nsocket = /run/x.sock\n"), "%s", out);
        cr_assert_eq(check_config("-u XDG_RUNTIME_DIR FIBERD_SOCKET=/run/y.sock", "--user", out,
                                  sizeof(out)),
                     0, "%s", out);
        cr_assert(strstr(out, "\nsocket = /run/y.sock\n"), "%s", out);
}

Test(daemon_socket, non_root_is_a_user_fiberd)
{
        char out[4096], env[160], want[160];

        skip_unless_root();
        snprintf(env, sizeof(env), "XDG_RUNTIME_DIR=%s " AS_NOBODY, dir_);
        snprintf(want, sizeof(want), "\nsocket = %s/fiberd.sock\n", dir_);
        cr_assert_eq(check_config(env, "", out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, want), "%s", out);
        cr_assert_eq(check_config("-u XDG_RUNTIME_DIR " AS_NOBODY, "", out, sizeof(out)), 1, "%s",
                     out);
        cr_assert(strstr(out, "a non-root fiberd listens on $XDG_RUNTIME_DIR/fiberd.sock"), "%s",
                  out);
        cr_assert_null(strstr(out, "/tmp/"), "a /tmp path appeared: %s", out);
}

static bool accepts(const char *path)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok;

        if (strlen(path) >= sizeof(a.sun_path))
                return false;
        memcpy(a.sun_path, path, strlen(path) + 1);
        ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        if (fd >= 0)
                close(fd);
        return ok;
}

Test(daemon_socket, fiberctl_user_finds_fiberd_user)
{
        char sock[128], out[4096], cmd[1024];

        snprintf(sock, sizeof(sock), "%s/fiberd.sock", dir_);
        daemon_pid_ = fork();
        cr_assert(daemon_pid_ >= 0);
        if (daemon_pid_ == 0) {
                setenv("XDG_RUNTIME_DIR", dir_, 1);
                setenv("STATE_DIRECTORY", dir_, 1); /* its job store */
                execl(FIBERD_BIN, FIBERD_BIN, "--user", "--config", "/dev/null", "--plugin-dir",
                      FIBERD_PLUGIN_BUILD_DIR, "--workers", "1", "--log-level", "warning",
                      (char *)NULL);
                _exit(127);
        }
        for (int i = 0; !accepts(sock); i++) {
                int status;
                cr_assert(waitpid(daemon_pid_, &status, WNOHANG) == 0, "fiberd --user exited");
                cr_assert(i < 2000, "fiberd --user never listened on %s", sock);
                usleep(10000);
        }
        snprintf(cmd, sizeof(cmd), "env -u FIBERD_SOCKET XDG_RUNTIME_DIR=%s %s --user ping", dir_,
                 FIBERCTL_BIN);
        cr_assert_eq(run(cmd, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, sock), "fiberctl --user did not name %s: %s", sock, out);
        /* without --user, fiberctl asks the system socket, never the user's */
        snprintf(cmd, sizeof(cmd), "env -u FIBERD_SOCKET XDG_RUNTIME_DIR=%s %s ping", dir_,
                 FIBERCTL_BIN);
        run(cmd, out, sizeof(out));
        cr_assert_null(strstr(out, sock), "plain fiberctl found the per-user fiberd: %s", out);
        cr_assert(strstr(out, "/run/fiberd.sock"), "%s", out);
        /* --user without XDG_RUNTIME_DIR: a usage error that names the fix */
        snprintf(cmd, sizeof(cmd), "env -u FIBERD_SOCKET -u XDG_RUNTIME_DIR %s --user ping",
                 FIBERCTL_BIN);
        cr_assert_eq(run(cmd, out, sizeof(out)), 64, "%s", out);
        cr_assert(strstr(out, "XDG_RUNTIME_DIR is not set"), "%s", out);
}
