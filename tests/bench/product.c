/* SPDX-License-Identifier: MIT */
/*
 * product.c — the product rows' shared parts: the load shape, starting and stopping a
 * job server for one measurement, reading its CPU time and resident memory, and the
 * result line (see product.h).
 *
 * Linked into fiberd-bench (fiberd and beanstalkd generators) and into
 * fiberd-bench-gearman (the gearmand generator, which needs libgearman); so it uses
 * only bench-util.c and libc, not the runtime.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/bench/product.h"
#include "scheduler/base/macro.h"

void product_parse(ProductLoad *ret, int argc, char **argv, bool allow_rss)
{
        ProductLoad l = {.conns = 1, .window = 1};
        const char *mode = argc > 1 ? argv[1] : "";

        if (!strcmp(mode, "tput") || (allow_rss && !strcmp(mode, "rss"))) {
                l.mode = mode[0] == 't' ? PRODUCT_TPUT : PRODUCT_RSS;
                l.jobs = bench_parse_count(argc > 2 ? argv[2] : NULL, 200000);
                l.conns = (unsigned)bench_parse_count(argc > 3 ? argv[3] : NULL, 1);
                l.window = (unsigned)bench_parse_count(argc > 4 ? argv[4] : NULL, 64);
                if (l.conns > 64 || l.window > 4096 || l.jobs < l.conns)
                        bench_die("%s: C at most 64, W at most 4096, N at least C", argv[0]);
        } else if (!strcmp(mode, "rate")) {
                l.mode = PRODUCT_RATE;
                l.jobs = bench_parse_count(argc > 2 ? argv[2] : NULL, 5000);
                l.rate = (unsigned)bench_parse_count(argc > 3 ? argv[3] : NULL, 1000);
        } else {
                bench_die("usage: %s tput N C W | rate N RATE%s", argv[0],
                          allow_rss ? " | rss N C W" : "");
        }
        l.workers = PRODUCT_PEER_WORKERS_PER_CONN * l.conns;
        if (l.workers < PRODUCT_PEER_WORKERS_MIN)
                l.workers = PRODUCT_PEER_WORKERS_MIN;
        l.workers = (unsigned)bench_parse_count(getenv("FIBERD_BENCH_PEER_WORKERS"), l.workers);
        *ret = l;
}

bool product_find_server(const char *name, char *buf, size_t size)
{
        const char *path = getenv("PATH");
        char dirs[4096];
        char *save = NULL;

        snprintf(dirs, sizeof(dirs), "%s:/usr/sbin:/sbin", path && *path ? path : "/usr/bin:/bin");
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
                if (!*d)
                        continue;
                snprintf(buf, size, "%s/%s", d, name);
                if (access(buf, X_OK) == 0)
                        return true;
        }
        return false;
}

unsigned product_free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
            getsockname(fd, (struct sockaddr *)&a, &len) < 0)
                bench_die("free port: %s", strerror(errno));
        close(fd);
        return ntohs(a.sin_port);
}

void product_tmpdir(ProductServer *s)
{
        snprintf(s->dir, sizeof(s->dir), "/tmp/fiberd-bench-XXXXXX");
        if (!mkdtemp(s->dir))
                bench_die("mkdtemp: %s", strerror(errno));
        snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
}

static bool server_accepts(const ProductServer *s)
{
        int fd;
        bool ok;

        if (s->socket[0]) {
                struct sockaddr_un a = {.sun_family = AF_UNIX};
                snprintf(a.sun_path, sizeof(a.sun_path), "%s", s->socket);
                fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        } else {
                struct sockaddr_in a = {.sin_family = AF_INET,
                                        .sin_port = htons((uint16_t)s->port),
                                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        }
        if (fd >= 0)
                close(fd);
        return ok;
}

static void log_tail(const ProductServer *s)
{
        char line[512], last[512] = "";
        FILE *f = fopen(s->log, "re");

        while (f && fgets(line, sizeof(line), f))
                snprintf(last, sizeof(last), "%s", line);
        if (f)
                fclose(f);
        fprintf(stderr, "fiberd-bench: server %s: %s", s->log, last[0] ? last : "(no output)\n");
}

int product_start(ProductServer *s, char *const argv[], const char *env_name, const char *env)
{
        uint64_t deadline = bench_now_ns() + 15 * NSEC_PER_SEC;
        pid_t parent = getpid();
        int status;

        fflush(stdout);
        fflush(stderr);
        s->pid = fork();
        if (s->pid < 0)
                bench_die("fork: %s", strerror(errno));
        if (s->pid == 0) {
                int fd = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (getppid() != parent)
                        _exit(1);
                if (fd >= 0) {
                        dup2(fd, STDOUT_FILENO);
                        dup2(fd, STDERR_FILENO);
                }
                if (env_name)
                        setenv(env_name, env, 1);
                execv(argv[0], argv);
                fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
                _exit(127);
        }
        while (!server_accepts(s)) {
                if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
                        s->pid = 0;
                        log_tail(s);
                        return -ECHILD;
                }
                if (bench_now_ns() > deadline) {
                        log_tail(s);
                        /* not ours to leave running: the caller may retry on a new port */
                        kill(s->pid, SIGKILL);
                        waitpid(s->pid, NULL, 0);
                        s->pid = 0;
                        return -ETIMEDOUT;
                }
                usleep(2000);
        }
        return 0;
}

void product_start_tcp(ProductServer *s, char *const argv[], char *port, const char *name)
{
        for (int attempt = 0; attempt < 3; attempt++) {
                s->port = product_free_port();
                snprintf(port, PRODUCT_PORT_LEN, "%u", s->port);
                if (product_start(s, argv, NULL, NULL) == 0)
                        return;
        }
        product_stop(s);
        bench_die("%s did not start", name);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        remove(path);
        return 0;
}

void product_stop(ProductServer *s)
{
        if (s->pid > 0) {
                uint64_t deadline = bench_now_ns() + 5 * NSEC_PER_SEC;
                kill(s->pid, SIGTERM);
                while (waitpid(s->pid, NULL, WNOHANG) != s->pid) {
                        if (bench_now_ns() > deadline) {
                                kill(s->pid, SIGKILL);
                                waitpid(s->pid, NULL, 0);
                                break;
                        }
                        usleep(2000);
                }
                s->pid = 0;
        }
        if (s->dir[0])
                nftw(s->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
        s->dir[0] = '\0';
}

void product_start_gearmand(ProductServer *s)
{
        char path[512], port[PRODUCT_PORT_LEN], pid[128];
        char *argv[] = {path, "-t", "1",          "-L",     "127.0.0.1", "-p",    port,
                        "-P", pid,  "--log-file", "stderr", "--verbose", "ERROR", NULL};

        if (!product_find_server("gearmand", path, sizeof(path)))
                bench_die("gearmand not installed (apt-get install gearman-job-server, or make "
                          "deps-bench)");
        product_tmpdir(s);
        snprintf(pid, sizeof(pid), "%s/gearmand.pid", s->dir);
        product_start_tcp(s, argv, port, "gearmand");
}

uint64_t product_cpu_ns(pid_t pid)
{
        char path[64], buf[2048], *p;
        unsigned long long utime, stime;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "re");
        if (!f)
                bench_die("cannot open %s: %s", path, strerror(errno));
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        /* after "pid (comm) ": state is field 3; utime and stime are fields 14 and 15 */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                         &stime) != 2)
                bench_die("cannot parse %s", path);
        return (utime + stime) * (NSEC_PER_SEC / (uint64_t)sysconf(_SC_CLK_TCK));
}

uint64_t product_rss_bytes(pid_t pid)
{
        char path[64], line[256];
        unsigned long long kib = 0;
        bool found = false;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        if (!f)
                bench_die("cannot open %s: %s", path, strerror(errno));
        while (!found && fgets(line, sizeof(line), f))
                found = sscanf(line, "VmRSS: %llu kB", &kib) == 1;
        fclose(f);
        if (!found)
                bench_die("no VmRSS in %s", path);
        return kib * 1024;
}

void product_wait_until(uint64_t deadline_ns)
{
        struct timespec ts = timespec_store_ns(deadline_ns);

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
}

void product_report(const ProductLoad *l, uint64_t elapsed_ns, uint64_t cpu_ns, uint64_t *lat_ns)
{
        double secs = (double)elapsed_ns / (double)NSEC_PER_SEC;
        double cpu_ms = (double)cpu_ns / (double)NSEC_PER_MSEC;

        if (l->mode != PRODUCT_RATE) {
                printf("%.0f %.3f\n", (double)l->jobs / secs, cpu_ms * 1000.0 / (double)l->jobs);
                return;
        }
        qsort(lat_ns, l->jobs, sizeof(uint64_t), u64_compare);
        printf("%.1f %.1f %.2f\n", (double)lat_ns[(l->jobs - 1) / 2] / 1000.0,
               (double)lat_ns[(l->jobs * 99 - 1) / 100] / 1000.0, cpu_ms / secs);
}
