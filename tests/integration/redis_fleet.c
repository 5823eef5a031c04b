/* SPDX-License-Identifier: MIT */
/*
 * redis_fleet.c — the fleet tests' private redis-server (see redis_fleet.h).
 */
#include "tests/integration/redis_fleet.h"
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static char redis_dir[64];
static char redis_sock[96];
static pid_t redis_pid;

/* Is redis-server on PATH? */
static bool server_found(void)
{
        return system("command -v redis-server >/dev/null 2>&1") == 0;
}

/* true once the server at redis_sock answers PING. */
static bool server_answers(void)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        char buf[16] = "";
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool ok = false;

        if (fd < 0)
                return false;
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", redis_sock);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 && write(fd, "PING\r\n", 6) == 6 &&
            read(fd, buf, sizeof(buf) - 1) > 0)
                ok = strncmp(buf, "+PONG", 5) == 0;
        close(fd);
        return ok;
}

void redis_fleet_start(const char *suite)
{
        uint64_t deadline;

        if (!server_found()) {
                /* printed too: criterion shows skips only when verbose */
                fprintf(stderr,
                        "%s: skipped: redis-server is not installed "
                        "(apt-get install redis-server)\n",
                        suite);
                cr_skip_test("redis-server is not installed (apt-get install redis-server): "
                             "the fleet tests need a real one");
        }
        snprintf(redis_dir, sizeof(redis_dir), "/tmp/fiberd-redis-XXXXXX");
        cr_assert(mkdtemp(redis_dir), "mkdtemp: %s", strerror(errno));
        snprintf(redis_sock, sizeof(redis_sock), "%s/redis.sock", redis_dir);
        redis_pid = fork();
        cr_assert(redis_pid >= 0);
        if (redis_pid == 0) {
                char logfile[128];
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                snprintf(logfile, sizeof(logfile), "%s/redis.log", redis_dir);
                execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", redis_sock,
                       "--unixsocketperm", "700", "--save", "", "--appendonly", "no", "--dir",
                       redis_dir, "--logfile", logfile, (char *)NULL);
                _exit(127);
        }
        deadline = fiberd_now_ms() + 10000;
        while (!server_answers()) {
                int status;
                if (waitpid(redis_pid, &status, WNOHANG) == redis_pid) {
                        redis_pid = 0;
                        fprintf(stderr,
                                "%s: skipped: redis-server cannot run here "
                                "(exit status 0x%x)\n",
                                suite, status);
                        cr_skip_test("redis-server cannot run here (exit status 0x%x; see "
                                     "%s/redis.log)",
                                     status, redis_dir);
                }
                cr_assert(fiberd_now_ms() < deadline, "redis-server did not answer within 10 s");
                usleep(10000);
        }
}

void redis_fleet_stop(void)
{
        char cmd[160];

        if (redis_pid > 0) {
                kill(redis_pid, SIGTERM);
                waitpid(redis_pid, NULL, 0);
                redis_pid = 0;
        }
        if (redis_dir[0]) {
                snprintf(cmd, sizeof(cmd), "rm -rf '%s'", redis_dir);
                if (system(cmd) != 0)
                        fprintf(stderr, "cannot remove %s\n", redis_dir);
                redis_dir[0] = '\0';
        }
}

const char *redis_fleet_sock(void)
{
        return redis_sock;
}

long long redis_fleet_cli_int(const char *args)
{
        char cmd[512], out[64] = "";
        long long v = -1;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "redis-cli -s %s %s", redis_sock, args);
        p = popen(cmd, "r");
        cr_assert(p, "popen %s", cmd);
        if (fgets(out, sizeof(out), p))
                v = strtoll(out, NULL, 10);
        pclose(p);
        return v;
}
