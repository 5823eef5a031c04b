/* SPDX-License-Identifier: MIT */
/*
 * redis_fleet.c — the fleet tests' private redis-server (see redis_fleet.h).
 */
#include "tests/integration/redis_fleet.h"
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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
static bool redis_persist; /* appendonly, fsync'ed at every write: data outlives a kill */

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

/* Starts redis-server on redis_sock in redis_dir (its data there too); 0, or the exit
 * status of one that could not start (redis_pid is 0 then). */
static int server_spawn(void)
{
        uint64_t deadline;

        redis_pid = fork();
        cr_assert(redis_pid >= 0);
        if (redis_pid == 0) {
                char logfile[128];
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                snprintf(logfile, sizeof(logfile), "%s/redis.log", redis_dir);
                execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", redis_sock,
                       "--unixsocketperm", "700", "--save", "", "--appendonly",
                       redis_persist ? "yes" : "no", "--appendfsync", "always", "--dir", redis_dir,
                       "--logfile", logfile, (char *)NULL);
                _exit(127);
        }
        deadline = fiberd_now_ms() + 10000;
        while (!server_answers()) {
                int status;
                if (waitpid(redis_pid, &status, WNOHANG) == redis_pid) {
                        redis_pid = 0;
                        return status ? status : -1;
                }
                cr_assert(fiberd_now_ms() < deadline, "redis-server did not answer within 10 s");
                usleep(10000);
        }
        return 0;
}

static void server_start(const char *suite, bool persist)
{
        int status;

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
        redis_persist = persist;
        status = server_spawn();
        if (status) {
                fprintf(stderr, "%s: skipped: redis-server cannot run here (exit status 0x%x)\n",
                        suite, status);
                cr_skip_test("redis-server cannot run here (exit status 0x%x; see %s/redis.log)",
                             status, redis_dir);
        }
}

void redis_fleet_start(const char *suite)
{
        server_start(suite, false);
}

void redis_fleet_start_persistent(const char *suite)
{
        server_start(suite, true);
}

void redis_fleet_signal(int sig)
{
        cr_assert(redis_pid > 0, "no redis-server to signal");
        cr_assert_eq(kill(redis_pid, sig), 0, "kill: %s", strerror(errno));
}

void redis_fleet_kill(void)
{
        cr_assert(redis_pid > 0, "no redis-server to kill");
        kill(redis_pid, SIGKILL);
        waitpid(redis_pid, NULL, 0);
        redis_pid = 0;
}

void redis_fleet_restart(void)
{
        cr_assert_eq(redis_pid, 0, "redis-server runs already");
        unlink(redis_sock);
        cr_assert_eq(server_spawn(), 0, "redis-server did not start again (see %s/redis.log)",
                     redis_dir);
}

void redis_fleet_stop(void)
{
        char cmd[160];

        if (redis_pid > 0) {
                kill(redis_pid, SIGCONT); /* a test stopped it */
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

/* ------------------------------------------------------------ the proxy ---------- */

/*
 * A Unix-socket proxy at dir/proxy.sock in front of redis_sock, run by a thread of the
 * test process: each connection accepted is paired with one to the server and bytes are
 * copied both ways (poll). Cut: every pair is closed and the listening socket too, so a
 * host behind it sees its connections drop and new ones refused; restored: it listens
 * again. The other hosts, connected to redis_sock directly, see nothing of it.
 */
#define PROXY_PAIRS 64

static struct {
        pthread_t thread;
        bool running;
        int stop_pipe[2];
        char path[100]; /* fits sun_path */
        int listen_fd;
        int pair[PROXY_PAIRS][2]; /* [client, server]; -1 = free */
        pthread_mutex_t lock;
        bool cut; /* asked for (under lock) */
        bool is_cut;
} proxy = {.listen_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int proxy_listen(void)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
                return -1;
        unlink(proxy.path);
        memcpy(a.sun_path, proxy.path, sizeof(proxy.path));
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int proxy_upstream(void)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -1;
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", redis_sock);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static void proxy_close_pair(int i)
{
        close(proxy.pair[i][0]);
        close(proxy.pair[i][1]);
        proxy.pair[i][0] = proxy.pair[i][1] = -1;
}

static void *proxy_main(void *arg)
{
        for (;;) {
                struct pollfd p[2 + 2 * PROXY_PAIRS];
                int map[2 + 2 * PROXY_PAIRS];
                size_t n = 0;
                bool cut;

                pthread_mutex_lock(&proxy.lock);
                cut = proxy.cut;
                pthread_mutex_unlock(&proxy.lock);
                if (cut && !proxy.is_cut) {
                        for (int i = 0; i < PROXY_PAIRS; i++)
                                if (proxy.pair[i][0] >= 0)
                                        proxy_close_pair(i);
                        close(proxy.listen_fd);
                        proxy.listen_fd = -1;
                        proxy.is_cut = true;
                } else if (!cut && proxy.is_cut) {
                        proxy.listen_fd = proxy_listen();
                        proxy.is_cut = false;
                }
                p[n] = (struct pollfd){.fd = proxy.stop_pipe[0], .events = POLLIN};
                map[n++] = -1;
                if (proxy.listen_fd >= 0) {
                        p[n] = (struct pollfd){.fd = proxy.listen_fd, .events = POLLIN};
                        map[n++] = -2;
                }
                for (int i = 0; i < PROXY_PAIRS; i++)
                        for (int k = 0; k < 2 && proxy.pair[i][0] >= 0; k++) {
                                p[n] = (struct pollfd){.fd = proxy.pair[i][k], .events = POLLIN};
                                map[n++] = i * 2 + k;
                        }
                if (poll(p, n, 20) < 0 && errno != EINTR)
                        break;
                if (p[0].revents)
                        break;
                for (size_t j = 1; j < n; j++) {
                        if (!p[j].revents)
                                continue;
                        if (map[j] == -2) {
                                int c = accept4(proxy.listen_fd, NULL, NULL, SOCK_CLOEXEC);
                                int up = c >= 0 ? proxy_upstream() : -1;
                                int i = 0;
                                while (i < PROXY_PAIRS && proxy.pair[i][0] >= 0)
                                        i++;
                                if (c < 0 || up < 0 || i == PROXY_PAIRS) {
                                        if (c >= 0)
                                                close(c);
                                        if (up >= 0)
                                                close(up);
                                        continue;
                                }
                                proxy.pair[i][0] = c;
                                proxy.pair[i][1] = up;
                        } else {
                                int i = map[j] / 2, k = map[j] % 2;
                                char buf[65536];
                                ssize_t got;
                                if (proxy.pair[i][0] < 0)
                                        continue; /* closed in this round */
                                got = read(proxy.pair[i][k], buf, sizeof(buf));
                                if (got <= 0) {
                                        proxy_close_pair(i);
                                        continue;
                                }
                                for (ssize_t off = 0; off < got;) {
                                        ssize_t w = write(proxy.pair[i][!k], buf + off,
                                                          (size_t)(got - off));
                                        if (w <= 0)
                                                break;
                                        off += w;
                                }
                        }
                }
        }
        return NULL;
}

const char *redis_fleet_proxy_start(void)
{
        cr_assert(redis_dir[0], "start the server first");
        snprintf(proxy.path, sizeof(proxy.path), "%s/proxy.sock", redis_dir);
        for (int i = 0; i < PROXY_PAIRS; i++)
                proxy.pair[i][0] = proxy.pair[i][1] = -1;
        cr_assert_eq(pipe2(proxy.stop_pipe, O_CLOEXEC), 0);
        proxy.listen_fd = proxy_listen();
        cr_assert(proxy.listen_fd >= 0, "proxy: %s", strerror(errno));
        cr_assert_eq(pthread_create(&proxy.thread, NULL, proxy_main, NULL), 0);
        proxy.running = true;
        return proxy.path;
}

void redis_fleet_proxy_cut(bool cut)
{
        pthread_mutex_lock(&proxy.lock);
        proxy.cut = cut;
        pthread_mutex_unlock(&proxy.lock);
}

void redis_fleet_proxy_stop(void)
{
        if (!proxy.running)
                return;
        (void)!write(proxy.stop_pipe[1], "x", 1);
        pthread_join(proxy.thread, NULL);
        proxy.running = false;
        for (int i = 0; i < PROXY_PAIRS; i++)
                if (proxy.pair[i][0] >= 0)
                        proxy_close_pair(i);
        if (proxy.listen_fd >= 0)
                close(proxy.listen_fd);
        proxy.listen_fd = -1;
        close(proxy.stop_pipe[0]);
        close(proxy.stop_pipe[1]);
}
