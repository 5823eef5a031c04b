/* SPDX-License-Identifier: MIT */
/*
 * daemon_metrics_http.c — the Prometheus scrape endpoint (daemon/obs/metrics_http.c)
 * from outside, with a small HTTP client of its own: GET /metrics answers the
 * `metrics` text, OpenMetrics or Prometheus's format by the Accept header, and shows a
 * job counter moving; other paths are 404, other methods 405; [metrics] listen refuses
 * an address that is not loopback unless allow_remote; under socket activation the RPC
 * socket and the metrics socket are told apart by name (LISTEN_FDNAMES), in either
 * order, and an unnamed single fd is still the RPC socket, and fiberd's exit leaves
 * systemd's socket listening; a scraper's open connection does not hold up SIGTERM.
 */
#include "tests/integration/fiberd_harness.h"
#include "tests/integration/openmetrics_check.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* sd_listen_fds(3)'s first fd */
#define LISTEN_FDS_START 3

/* What Prometheus 2.x sends (scrape.acceptHeader). */
#define PROMETHEUS_ACCEPT                                                                          \
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"                 \
        "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"

static Fiberd fd_;
/* a fiberd this file started itself (socket activation, a start that must fail) */
static pid_t own_pid;
static char own_dir[64];

static void teardown(void)
{
        fiberd_stop(&fd_);
        if (own_pid > 0) {
                kill(own_pid, SIGKILL);
                waitpid(own_pid, NULL, 0);
                own_pid = 0;
        }
        if (own_dir[0]) {
                char cmd[96];
                snprintf(cmd, sizeof(cmd), "rm -rf %s", own_dir);
                cr_assert_eq(system(cmd), 0);
                own_dir[0] = '\0';
        }
}

TestSuite(daemon_metrics_http, .fini = teardown, .timeout = 60);

/* ------------------------------------------------------------------ HTTP client --- */

typedef struct HttpReply {
        int status;       /* 200, 404, ...; 0 when no status line came */
        char *head;       /* the status line and headers (into buf) */
        char *body;       /* after the blank line (into buf) */
        char buf[262144]; /* the whole answer, NUL-terminated */
} HttpReply;

/* A TCP connection to 127.0.0.1:@port (asserts). */
static int http_connect(unsigned port)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert(fd >= 0);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cr_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect 127.0.0.1:%u: %s",
                  port, strerror(errno));
        return fd;
}

/* @method @path HTTP/1.1 to 127.0.0.1:@port, with Accept: @accept unless NULL; the
 * whole answer into @rp (the connection closes after it). Asserts on transport
 * errors and a 10 s bound. */
static void http_request(unsigned port, const char *method, const char *path, const char *accept,
                         HttpReply *rp)
{
        char req[1024];
        int fd = http_connect(port), n;
        size_t len = 0;
        uint64_t deadline = fiberd_now_ms() + 10000;
        char *sep;

        n = snprintf(req, sizeof(req),
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n%s%s%sConnection: close\r\n\r\n",
                     method, path, port, accept ? "Accept: " : "", accept ? accept : "",
                     accept ? "\r\n" : "");
        cr_assert(write(fd, req, (size_t)n) == n);
        for (;;) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t got;

                cr_assert(fiberd_now_ms() < deadline, "no whole answer within 10 s");
                if (poll(&p, 1, 100) <= 0)
                        continue;
                got = read(fd, rp->buf + len, sizeof(rp->buf) - 1 - len);
                cr_assert(got >= 0, "read: %s", strerror(errno));
                if (got == 0)
                        break;
                len += (size_t)got;
                cr_assert(len < sizeof(rp->buf) - 1, "answer too long");
        }
        close(fd);
        rp->buf[len] = '\0';
        rp->status = 0;
        sscanf(rp->buf, "HTTP/1.%*d %d", &rp->status);
        rp->head = rp->buf;
        sep = strstr(rp->buf, "\r\n\r\n");
        cr_assert(sep, "no end of headers in: %s", rp->buf);
        *sep = '\0';
        rp->body = sep + 4;
}

/* The value of header @name in @rp (case-insensitive name), into a static buffer; ""
 * when absent. */
static const char *http_header(const HttpReply *rp, const char *name)
{
        static char value[256];
        size_t n = strlen(name);

        for (const char *line = strstr(rp->head, "\r\n"); line; line = strstr(line + 2, "\r\n")) {
                const char *l = line + 2, *end = strstr(l, "\r\n");
                if (strncasecmp(l, name, n) == 0 && l[n] == ':') {
                        l += n + 1 + strspn(l + n + 1, " ");
                        snprintf(value, sizeof(value), "%.*s",
                                 (int)(end ? (size_t)(end - l) : strlen(l)), l);
                        return value;
                }
        }
        return "";
}

/* The port of "metrics: serving http://127.0.0.1:PORT/metrics" in @log (a path). */
static unsigned served_port(const char *log)
{
        FILE *f = fopen(log, "r");
        char line[1024];
        unsigned port = 0;

        cr_assert(f, "cannot read %s", log);
        while (fgets(line, sizeof(line), f)) {
                const char *p = strstr(line, "metrics: serving http://127.0.0.1:");
                if (p)
                        port = (unsigned)atoi(p + strlen("metrics: serving http://127.0.0.1:"));
        }
        fclose(f);
        return port;
}

/* ------------------------------------------------------------------ own fiberd ---- */

/* A listening TCP socket on @addr:0 (an address in host order); its port in *@ret_port. */
static int tcp_listener(uint32_t addr, unsigned *ret_port)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert(fd >= 0);
        a.sin_addr.s_addr = htonl(addr);
        cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        cr_assert(listen(fd, 16) == 0);
        cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
        *ret_port = ntohs(a.sin_port);
        return fd;
}

/* A listening Unix socket at @path. */
static int unix_listener(const char *path)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert(fd >= 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
        cr_assert(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        cr_assert(listen(fd, 16) == 0);
        return fd;
}

/*
 * Starts fiberd in own_dir as systemd would: @fds[0..@n) become fds 3.. with
 * LISTEN_PID, LISTEN_FDS and, unless NULL, LISTEN_FDNAMES=@names. @config (may be
 * NULL) is written to own_dir/fiberd.conf. The --socket given is bogus: fiberd must
 * take systemd's (with @n 0, no LISTEN_*: own_dir/fiberd.sock). Its log:
 * own_dir/fiberd.log.
 */
static void spawn_activated(const int *fds, int n, const char *names, const char *config)
{
        char conf[96], log[96], sock[96];

        snprintf(sock, sizeof(sock), "%s/fiberd.sock", own_dir);
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", own_dir);
        snprintf(log, sizeof(log), "%s/fiberd.log", own_dir);
        if (config) {
                FILE *f = fopen(conf, "w");
                cr_assert(f);
                fputs(config, f);
                fclose(f);
        }
        own_pid = fork();
        cr_assert(own_pid >= 0);
        if (own_pid == 0) {
                const char *bin = FIBERD_BIN;
                char num[16];
                int logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                int moved[8];

                prctl(PR_SET_PDEATHSIG, SIGKILL);
                dup2(logfd, STDERR_FILENO);
                /* move them up first, so that placing one at 3 + i overwrites none */
                for (int i = 0; i < n && i < 8; i++)
                        moved[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 100);
                for (int i = 0; i < n && i < 8; i++)
                        dup2(moved[i], LISTEN_FDS_START + i); /* dup2: no FD_CLOEXEC */
                snprintf(num, sizeof(num), "%d", (int)getpid());
                setenv("LISTEN_PID", num, 1);
                snprintf(num, sizeof(num), "%d", n);
                setenv("LISTEN_FDS", num, 1);
                if (n == 0) {
                        unsetenv("LISTEN_PID");
                        unsetenv("LISTEN_FDS");
                }
                if (names)
                        setenv("LISTEN_FDNAMES", names, 1);
                else
                        unsetenv("LISTEN_FDNAMES");
                setenv("STATE_DIRECTORY", own_dir, 1);
                unsetenv("NOTIFY_SOCKET");
                unsetenv("FIBERD_SOCKET");
                /* as the harness: a sanitized build when make check-daemon-sanitizers says */
                if (getenv("FIBERD_TEST_BIN") && *getenv("FIBERD_TEST_BIN"))
                        bin = getenv("FIBERD_TEST_BIN");
                execl(bin, bin, "--socket", n ? "/nonexistent/dir/x.sock" : sock, "--plugin-dir",
                      FIBERD_PLUGIN_BUILD_DIR, "--config", config ? conf : "/dev/null", "--workers",
                      "1", (char *)NULL);
                _exit(127);
        }
}

/* Waits (bounded) until own_dir's log has a line containing @needle, or fiberd exits:
 * true when seen; *@ret_status is the exit status when it exited (else -1). */
static bool own_log_wait(const char *needle, int *ret_status)
{
        char log[96], line[1024];
        uint64_t deadline = fiberd_now_ms() + 15000;

        snprintf(log, sizeof(log), "%s/fiberd.log", own_dir);
        *ret_status = -1;
        while (fiberd_now_ms() < deadline) {
                FILE *f = fopen(log, "r");
                int status;

                while (f && fgets(line, sizeof(line), f))
                        if (strstr(line, needle)) {
                                fclose(f);
                                return true;
                        }
                if (f)
                        fclose(f);
                if (waitpid(own_pid, &status, WNOHANG) == own_pid) {
                        own_pid = 0;
                        *ret_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
                        return false;
                }
                usleep(5000);
        }
        return false;
}

/* own fiberd's log, for a failure message (a static buffer). */
static const char *own_log(void)
{
        static char text[65536];
        char log[96];
        FILE *f;
        size_t n = 0;

        snprintf(log, sizeof(log), "%s/fiberd.log", own_dir);
        f = fopen(log, "r");
        if (f) {
                n = fread(text, 1, sizeof(text) - 1, f);
                fclose(f);
        }
        text[n] = '\0';
        return text;
}

static void own_dir_make(void)
{
        snprintf(own_dir, sizeof(own_dir), "/tmp/fiberd-mhttp-XXXXXX");
        cr_assert(mkdtemp(own_dir));
}

/* SIGTERM own fiberd; asserts it exits 0 within 10 s. */
static void own_stop(void)
{
        uint64_t deadline = fiberd_now_ms() + 10000;
        int status;

        kill(own_pid, SIGTERM);
        while (waitpid(own_pid, &status, WNOHANG) != own_pid) {
                cr_assert(fiberd_now_ms() < deadline, "fiberd still runs 10 s after SIGTERM");
                usleep(5000);
        }
        own_pid = 0;
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x: %s", status,
                  own_log());
}

/* ------------------------------------------------------------------ tests --------- */

Test(daemon_metrics_http, get_metrics_negotiates_the_format_and_counts_jobs)
{
        FiberdOpts o = {.config = "[metrics]\nlisten = 127.0.0.1:0\n"};
        const Arg args[] = {ARG_I("x", 1)};
        static HttpReply rp;
        char err[512];
        IpcStatus st = {0};
        Client *c;
        unsigned port;
        uint64_t id;
        Reply r;

        fiberd_start(&fd_, &o);
        port = served_port(fd_.log);
        cr_assert(port > 0, "no 'metrics: serving http://127.0.0.1:PORT/metrics' line");

        /* no Accept: Prometheus's text format 0.0.4 */
        http_request(port, "GET", "/metrics", NULL, &rp);
        cr_assert_eq(rp.status, 200, "%s", rp.head);
        cr_expect_str_eq(http_header(&rp, "Content-Type"),
                         "text/plain; version=0.0.4; charset=utf-8");
        cr_expect(strstr(rp.body, "# TYPE fiberd_jobs_submitted_total counter\n"), "%s", rp.body);
        cr_expect(strstr(rp.body, "fiberd_build_info{version=\"" FIBERD_VERSION "\"} 1\n"));
        cr_expect(!strstr(rp.body, "# EOF"));

        /* what Prometheus asks for: OpenMetrics, valid to the strict checker */
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "echo", args, ELEMENTSOF(args), 0, 0, &st);
        cr_assert_neq(id, 0, "submit: %s", st.message);
        rpc_job_wait(c, id, -1, &r);
        reply_clear(&r);
        http_request(port, "GET", "/metrics", PROMETHEUS_ACCEPT, &rp);
        cr_assert_eq(rp.status, 200, "%s", rp.head);
        cr_expect_str_eq(http_header(&rp, "Content-Type"),
                         "application/openmetrics-text; version=1.0.0; charset=utf-8");
        cr_assert(om_check(rp.body, err, sizeof(err)), "%s\n--- text:\n%s", err, rp.body);
        cr_expect(strstr(rp.body, "\nfiberd_jobs_submitted_total{plugin=\"echo\"} 1\n"), "%s",
                  rp.body);
        cr_expect(strstr(rp.body, "\nprocess_open_fds "), "%s", rp.body);

        /* the same text as the `metrics` method's, family by family */
        rpc_simple(c, IPC_METHOD_METRICS, 0, NULL, &r);
        cr_assert_eq(r.r, 0);
        cr_expect(strncmp(r.result->via.str.ptr, rp.body, 40) == 0);
        reply_clear(&r);

        /* OpenMetrics refused (q=0), or another version only: Prometheus's format */
        http_request(port, "GET", "/metrics", "application/openmetrics-text;q=0, text/plain", &rp);
        cr_expect_str_eq(http_header(&rp, "Content-Type"),
                         "text/plain; version=0.0.4; charset=utf-8");
        http_request(port, "GET", "/metrics", "application/openmetrics-text; version=2.0.0", &rp);
        cr_expect_str_eq(http_header(&rp, "Content-Type"),
                         "text/plain; version=0.0.4; charset=utf-8");
        http_request(port, "GET", "/metrics", "application/openmetrics-text", &rp);
        cr_expect_str_eq(http_header(&rp, "Content-Type"),
                         "application/openmetrics-text; version=1.0.0; charset=utf-8");
        client_free(c);
}

Test(daemon_metrics_http, only_get_metrics_is_served)
{
        static const char *const paths[] = {"/", "/metricsx", "/metrics/", "/api/v1/query",
                                            "/debug"};
        static const char *const methods[] = {"POST", "PUT", "DELETE", "HEAD", "OPTIONS"};
        FiberdOpts o = {.config = "[metrics]\nlisten = 127.0.0.1:0\n"};
        static HttpReply rp;
        unsigned port;

        fiberd_start(&fd_, &o);
        port = served_port(fd_.log);
        cr_assert(port > 0);
        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                http_request(port, "GET", paths[i], NULL, &rp);
                cr_expect_eq(rp.status, 404, "GET %s: %s", paths[i], rp.head);
        }
        for (size_t i = 0; i < ELEMENTSOF(methods); i++) {
                http_request(port, methods[i], "/metrics", NULL, &rp);
                cr_expect_eq(rp.status, 405, "%s /metrics: %s", methods[i], rp.head);
                cr_expect_str_eq(http_header(&rp, "Allow"), "GET");
        }
        /* a request with a body: the body is read and dropped, the answer is 405 */
        {
                int fd = http_connect(port);
                const char req[] = "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                   "Connection: close\r\n\r\nhello";
                char buf[512];
                ssize_t n;

                cr_assert(write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1);
                n = read(fd, buf, sizeof(buf) - 1);
                cr_assert(n > 0);
                buf[n] = '\0';
                cr_expect(strncmp(buf, "HTTP/1.1 405", 12) == 0, "%s", buf);
                close(fd);
        }
        /* and the endpoint still serves */
        http_request(port, "GET", "/metrics", NULL, &rp);
        cr_expect_eq(rp.status, 200);
}

Test(daemon_metrics_http, a_non_loopback_address_needs_allow_remote)
{
        static HttpReply rp;
        int status;
        unsigned port;

        own_dir_make();
        spawn_activated(NULL, 0, NULL, "[metrics]\nlisten = 0.0.0.0:0\n");
        cr_assert_not(own_log_wait(" ready on ", &status), "started: %s", own_log());
        cr_expect_eq(status, 78, "exit status %d (EX_CONFIG expected): %s", status, own_log());
        cr_expect(strstr(own_log(), "is not a loopback address"), "%s", own_log());

        /* allowed: it serves on every address, loopback included (the log goes on) */
        spawn_activated(NULL, 0, NULL, "[metrics]\nlisten = 0.0.0.0:0\nallow_remote = true\n");
        cr_assert(own_log_wait("metrics: serving http://0.0.0.0:", &status), "%s", own_log());
        port = (unsigned)atoi(strstr(own_log(), "serving http://0.0.0.0:") +
                              strlen("serving http://0.0.0.0:"));
        http_request(port, "GET", "/metrics", NULL, &rp);
        cr_expect_eq(rp.status, 200);
        own_stop();
}

/* An RPC and a metrics socket passed with their names, the metrics one first or not. */
/* Returns whether /metrics answered 200 on the metrics socket. */
static bool activated_by_name(bool metrics_first)
{
        char sock[96];
        static HttpReply rp;
        unsigned port;
        int fds[2], rpc, metrics, status;
        Client *c = NULL;
        IpcStatus st = {0};
        Reply r;

        own_dir_make();
        snprintf(sock, sizeof(sock), "%s/act.sock", own_dir);
        rpc = unix_listener(sock);
        metrics = tcp_listener(INADDR_LOOPBACK, &port);
        fds[0] = metrics_first ? metrics : rpc;
        fds[1] = metrics_first ? rpc : metrics;
        /* with metrics first, [metrics] listen names another address: systemd's wins */
        spawn_activated(fds, 2, metrics_first ? "metrics:fiberd" : "fiberd:metrics",
                        metrics_first ? "[metrics]\nlisten = 127.0.0.1:0\n" : NULL);
        close(rpc); /* the metrics socket stays open here, as systemd keeps its own */
        cr_assert(own_log_wait(" ready on ", &status), "status %d: %s", status, own_log());
        cr_expect(strstr(own_log(), "ready on systemd's socket "), "%s", own_log());
        cr_expect(strstr(own_log(), "/metrics on systemd's socket"), "%s", own_log());
        cr_expect_not(strstr(own_log(), "does not serve"), "%s", own_log());
        cr_expect(!metrics_first ||
                          strstr(own_log(), "listen = 127.0.0.1:0 is not used: systemd passed"),
                  "%s", own_log());
        cr_assert_eq(client_connect(&c, sock, &st), 0, "%s", st.message);
        rpc_simple(c, "ping", 0, NULL, &r);
        cr_expect_eq(r.r, 0, "ping on the RPC socket: %s", r.st.message);
        reply_clear(&r);
        client_free(c);
        http_request(port, "GET", "/metrics", NULL, &rp);
        cr_expect_eq(rp.status, 200, "%s", rp.head);
        cr_expect(strstr(rp.body, "fiberd_build_info{"));
        own_stop();
        /* fiberd closed its copy without shutdown(2): the socket still listens for
         * systemd, which would otherwise fail the socket unit and refuse connections */
        close(http_connect(port));
        close(metrics);
        return rp.status == 200;
}

Test(daemon_metrics_http, systemd_sockets_are_taken_by_name_rpc_first)
{
        cr_assert(activated_by_name(false), "/metrics did not answer on systemd's socket");
}

Test(daemon_metrics_http, systemd_sockets_are_taken_by_name_metrics_first)
{
        cr_assert(activated_by_name(true), "/metrics did not answer on systemd's socket");
}

Test(daemon_metrics_http, an_unnamed_single_socket_is_the_rpc_socket)
{
        char sock[96];
        int rpc, status;
        Client *c = NULL;
        IpcStatus st = {0};
        Reply r;

        own_dir_make();
        snprintf(sock, sizeof(sock), "%s/act.sock", own_dir);
        rpc = unix_listener(sock);
        spawn_activated(&rpc, 1, NULL, NULL); /* no LISTEN_FDNAMES: "unknown" */
        close(rpc);
        cr_assert(own_log_wait(" ready on systemd's socket ", &status), "%s", own_log());
        cr_expect_not(strstr(own_log(), "metrics: serving"), "%s", own_log());
        cr_assert_eq(client_connect(&c, sock, &st), 0, "%s", st.message);
        rpc_simple(c, "ping", 0, NULL, &r);
        cr_expect_eq(r.r, 0, "%s", r.st.message);
        reply_clear(&r);
        client_free(c);
        own_stop();
}

Test(daemon_metrics_http, a_non_loopback_systemd_socket_is_refused)
{
        char sock[96];
        unsigned port;
        int fds[2], status;

        own_dir_make();
        snprintf(sock, sizeof(sock), "%s/act.sock", own_dir);
        fds[0] = unix_listener(sock);
        fds[1] = tcp_listener(INADDR_ANY, &port);
        spawn_activated(fds, 2, "fiberd:metrics", NULL);
        close(fds[0]);
        close(fds[1]);
        cr_assert_not(own_log_wait(" ready on ", &status), "started: %s", own_log());
        cr_expect_eq(status, 78, "exit status %d: %s", status, own_log());
        cr_expect(strstr(own_log(), "systemd's socket 0.0.0.0:"), "%s", own_log());
}

Test(daemon_metrics_http, an_idle_scraper_does_not_hold_up_sigterm)
{
        FiberdOpts o = {.config = "[metrics]\nlisten = 127.0.0.1:0\n"};
        unsigned port;
        int idle, status;

        fiberd_start(&fd_, &o);
        port = served_port(fd_.log);
        cr_assert(port > 0);
        idle = http_connect(port);
        cr_assert(write(idle, "GET /metr", 9) == 9); /* a request begun, never ended */
        status = fiberd_signal_and_wait(&fd_, SIGTERM, 10000);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        close(idle);
}
