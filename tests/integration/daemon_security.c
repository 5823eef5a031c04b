/* SPDX-License-Identifier: MIT */
/*
 * daemon_security.c — what a local user can do to fiberd by what it sends:
 *  - forge log lines: a newline in a sha256 path must stay inside its one log line,
 *    escaped, and never start a line with a priority of its own (daemon/obs/log.c);
 *  - exhaust the server (daemon/server/server.c's limits): pipelining without reading the
 *    answers, many never-finished ~1 MiB messages, one byte a second, more connections
 *    than allowed, and too few fds. During each attack a fresh client's ping must still
 *    be answered; its latency is printed, never asserted (shared machines).
 * Attacks are kept small (tens of connections) with the daemon's limits set low in its
 * config, so each test runs in a few seconds.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_security, .fini = teardown, .timeout = 90);

/* ------------------------------------------------------------- log forging ------ */

/* Waits (bounded) for a log line containing @needle; copies the whole log to @buf. */
static bool log_wait(const char *needle, char *buf, size_t size)
{
        uint64_t deadline = fiberd_now_ms() + 10000;

        while (fiberd_now_ms() < deadline) {
                FILE *f = fopen(fd_.log, "r");
                size_t n = 0;

                if (f) {
                        n = fread(buf, 1, size - 1, f);
                        fclose(f);
                }
                buf[n] = '\0';
                if (strstr(buf, needle))
                        return true;
                usleep(10000);
        }
        return false;
}

Test(daemon_security, newline_in_a_path_is_escaped_in_the_log)
{
        static char log[1 << 16];
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sha256", (Arg[]){ARG_S("path", "/nonexistent/x\n<0>evil\ttab")}, 1, 0,
                        0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        reply_clear(&rp);
        cr_assert(log_wait("evil", log, sizeof(log)), "the failure was not logged:\n%s", log);
        cr_assert(strstr(log, "/nonexistent/x\\n<0>evil\\ttab"),
                  "the path is not escaped in its line:\n%s", log);
        cr_assert_null(strstr(log, "\n<0>evil"), "a forged line:\n%s", log);
        cr_assert_neq(strncmp(log, "<0>evil", 7), 0);
        client_free(c);
}

/* ------------------------------------------------------------- raw clients ------ */

static int raw_connect(void)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        cr_assert_geq(fd, 0);
        snprintf(a.sun_path, sizeof(a.sun_path), "%s", fd_.sock);
        if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                close(fd);
                return -errno;
        }
        return fd;
}

/* Writes what the socket takes of @len bytes without blocking; returns bytes written. */
static size_t write_some(int fd, const void *buf, size_t len)
{
        size_t done = 0;

        while (done < len) {
                ssize_t w =
                        send(fd, (const char *)buf + done, len - done, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (w <= 0)
                        break;
                done += (size_t)w;
        }
        return done;
}

typedef enum Answer { ANSWER_NONE, ANSWER_RESPONSE, ANSWER_NOTICE, ANSWER_CLOSED } Answer;

/*
 * Reads @fd until the first message, the close, or @timeout_ms. @code gets the error code
 * of a notification or error response ("" for a plain response).
 */
/*
 * Feeds @d what @fd has within 20 ms. Returns false once @fd is closed (or failed);
 * true otherwise, also when nothing came.
 */
static bool feed_some(int fd, IpcDecoder *d)
{
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char buf[4096];
        ssize_t n;

        if (poll(&p, 1, 20) <= 0)
                return true;
        n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
                return false;
        ipc_decoder_feed(d, buf, (size_t)n);
        return true;
}

static Answer read_answer(int fd, int timeout_ms, char *code, size_t size)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;
        Answer a = ANSWER_NONE;
        IpcDecoder *d;

        code[0] = '\0';
        cr_assert(ipc_decoder_new(&d, 0) == 0);
        while (a == ANSWER_NONE && fiberd_now_ms() < deadline) {
                IpcMessage m;

                if (!feed_some(fd, d)) {
                        a = ANSWER_CLOSED;
                        break;
                }
                if (ipc_decoder_next(d, &m) == 1) {
                        const msgpack_object *err =
                                m.type == IPC_RESPONSE ? &m.error : ipc_array_at(&m.params, 0);
                        a = m.type == IPC_RESPONSE ? ANSWER_RESPONSE : ANSWER_NOTICE;
                        if (err && err->type == MSGPACK_OBJECT_MAP)
                                snprintf(code, size, "%s", map_str(err, "code"));
                        ipc_message_clear(&m);
                }
        }
        ipc_decoder_free(d);
        return a;
}

static const unsigned char ping_bytes[] = {0x94, 0x00, 0x06, 0xa4, 'p', 'i', 'n', 'g', 0x90};

/*
 * A fresh client's ping on a new connection: what came back within 10 s (asserting it is
 * an answer, never silence), its latency printed.
 */
static Answer fresh_ping(const char *during, char *code, size_t size)
{
        uint64_t t0 = fiberd_now_ms();
        int fd = raw_connect();
        Answer a;

        cr_assert_geq(fd, 0, "%s: cannot connect: %s", during, strerror(-fd));
        cr_assert_eq(write_some(fd, ping_bytes, sizeof(ping_bytes)), sizeof(ping_bytes));
        a = read_answer(fd, 10000, code, size);
        close(fd);
        cr_log_info("%s: a fresh ping got %s%s%s after %llu ms", during,
                    a == ANSWER_RESPONSE ? "its answer"
                    : a == ANSWER_NOTICE ? "a notification"
                    : a == ANSWER_CLOSED ? "a close"
                                         : "nothing",
                    *code ? " " : "", code, (unsigned long long)(fiberd_now_ms() - t0));
        cr_assert_neq(a, ANSWER_NONE, "%s: a fresh ping got no answer within 10 s", during);
        cr_assert_neq(a, ANSWER_CLOSED, "%s: a fresh ping's connection closed silently", during);
        return a;
}

/* fresh_ping() that must be answered (not refused). */
static void fresh_ping_answered(const char *during)
{
        char code[64];

        cr_assert_eq(fresh_ping(during, code, sizeof(code)), ANSWER_RESPONSE,
                     "%s: the ping was refused: %s", during, code);
        cr_assert_str_eq(code, "", "%s: the ping failed: %s", during, code);
}

/* stats' @section.@key now, from a connection of its own. */
static uint64_t stats_get(const char *section, const char *key)
{
        Client *c = fiberd_connect(&fd_);
        uint64_t v;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        v = map_uint(map_get(rp.result, section), key);
        reply_clear(&rp);
        client_free(c);
        return v;
}

/* The server's counter @key from the stats method. */
static uint64_t server_stat(const char *key)
{
        return stats_get("server", key);
}

/* stats' jobs.@key now (the jobs that ended @key since start-up, for a final state). */
static uint64_t jobs_stat(const char *key)
{
        return stats_get("jobs", key);
}

/* The server group's fibers alive now (stats: groups[0], the server's). */
static uint64_t server_fibers_alive(void)
{
        Client *c = fiberd_connect(&fd_);
        const msgpack_object *groups;
        uint64_t v;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        groups = map_get(rp.result, "groups");
        cr_assert(groups && groups->type == MSGPACK_OBJECT_ARRAY && groups->via.array.size > 0);
        v = map_uint(&groups->via.array.ptr[0], "fibers_alive");
        reply_clear(&rp);
        client_free(c);
        return v;
}

/* The daemon's resident set (kB) and memory maps, for the log. */
static void print_memory(const char *when)
{
        char path[64], line[256];
        unsigned long rss = 0, maps = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)fd_.pid);
        if ((f = fopen(path, "r"))) {
                while (fgets(line, sizeof(line), f))
                        sscanf(line, "VmRSS: %lu", &rss);
                fclose(f);
        }
        snprintf(path, sizeof(path), "/proc/%d/maps", (int)fd_.pid);
        if ((f = fopen(path, "r"))) {
                while (fgets(line, sizeof(line), f))
                        maps += strchr(line, '\n') != NULL;
                fclose(f);
        }
        cr_log_info("%s: fiberd RSS %lu kB, %lu memory maps", when, rss, maps);
}

/* ------------------------------------------------------------- attacks ---------- */

/* Reads @fd until @want responses have come, the close, or @timeout_ms; returns how many
 * came without an error, and *@errors (when given) how many with one. */
static unsigned read_responses(int fd, unsigned want, int timeout_ms, unsigned *errors)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;
        unsigned ok = 0, failed = 0;
        IpcDecoder *d;

        cr_assert(ipc_decoder_new(&d, 0) == 0);
        while (ok + failed < want && fiberd_now_ms() < deadline) {
                IpcMessage m;

                if (!feed_some(fd, d))
                        break;
                while (ipc_decoder_next(d, &m) == 1) {
                        if (m.type == IPC_RESPONSE && m.error.type == MSGPACK_OBJECT_NIL)
                                ok++;
                        else if (m.type == IPC_RESPONSE)
                                failed++;
                        ipc_message_clear(&m);
                }
        }
        ipc_decoder_free(d);
        if (errors)
                *errors = failed;
        return ok;
}

/*
 * 64 pings that arrive in one read are answered in a few writes, not 64: the first
 * answer leaves at once, and its fiber then waits for the others that are ready and
 * writes them together (server.c: conn_answer()). Every ping still gets its answer.
 */
Test(daemon_security, pipelined_answers_leave_together)
{
        enum { PINGS = 64 };
        unsigned char burst[PINGS * sizeof(ping_bytes)];
        uint64_t writes_before, writes;
        int fd;

        for (size_t i = 0; i < PINGS; i++)
                memcpy(burst + i * sizeof(ping_bytes), ping_bytes, sizeof(ping_bytes));
        fiberd_start(&fd_, NULL);
        writes_before = server_stat("answer_writes");
        fd = raw_connect();
        cr_assert_geq(fd, 0);
        cr_assert_eq(write_some(fd, burst, sizeof(burst)), sizeof(burst));
        cr_assert_eq(read_responses(fd, PINGS, 10000, NULL), PINGS, "not every ping was answered");
        close(fd);
        /* less the stats call that reads the counter, whose answer comes after */
        writes = server_stat("answer_writes") - writes_before - 1;
        cr_log_info("%u answers in %llu writes", PINGS, (unsigned long long)writes);
        cr_assert_geq(writes, 1);
        cr_assert_leq(writes, PINGS / 8, "%llu writes for %u answers: each went on its own",
                      (unsigned long long)writes, PINGS);
}

/*
 * Five connections pipeline 5,000 pings each and never read an answer. Before, each
 * pinned 4,097 request fibers and together they filled the server group (every new
 * client refused for ~25 s). Now each is read only while it has max_in_flight (default
 * 512) requests in flight: the fresh ping is answered and in_flight stays bounded. (The
 * test's uid is root, which max_in_flight_per_user does not bound: see
 * in_flight_per_user.)
 */
Test(daemon_security, pipelining_without_reading)
{
        enum { CONNS = 5, PINGS = 5000 };
        static unsigned char burst[PINGS * sizeof(ping_bytes)];
        int fds[CONNS];
        uint64_t in_flight, baseline, alive, t0;

        for (size_t i = 0; i < PINGS; i++)
                memcpy(burst + i * sizeof(ping_bytes), ping_bytes, sizeof(ping_bytes));
        fiberd_start(&fd_, NULL);
        print_memory("before the attack");
        baseline = server_fibers_alive();
        for (int i = 0; i < CONNS; i++) {
                fds[i] = raw_connect();
                cr_assert_geq(fds[i], 0);
                write_some(fds[i], burst, sizeof(burst));
        }
        /* the daemon has read what it will read once in_flight stops growing */
        for (uint64_t prev = UINT64_MAX, deadline = fiberd_now_ms() + 5000;
             fiberd_now_ms() < deadline;) {
                in_flight = server_stat("in_flight");
                if (in_flight == prev && in_flight > 0)
                        break;
                prev = in_flight;
                usleep(100000);
        }
        fresh_ping_answered("5 connections pipelining without reading");
        in_flight = server_stat("in_flight");
        cr_log_info("requests in flight: %llu", (unsigned long long)in_flight);
        cr_assert_eq(server_stat("user_throttled"), 0, "root was held by a per-user limit");
        cr_assert_leq(in_flight, CONNS * 512 + 2, "in flight %llu: the excess was not held back",
                      (unsigned long long)in_flight);
        print_memory("during the attack");
        for (int i = 0; i < CONNS; i++)
                close(fds[i]);
        /*
         * The attack's fibers end once its connections are gone: at once as a rule, at
         * the latest when a write blocked on the closed peer reaches the server's 30 s
         * write deadline (server.c), so wait past that.
         */
        t0 = fiberd_now_ms();
        /* the count the loop saw: a second look may catch the fibers of the previous
         * look's own connection still ending */
        while ((alive = server_fibers_alive()) > baseline && fiberd_now_ms() < t0 + 40000)
                usleep(20000);
        cr_log_info("server fibers back to %llu (%llu before) %llu ms after the close",
                    (unsigned long long)alive, (unsigned long long)baseline,
                    (unsigned long long)(fiberd_now_ms() - t0));
        cr_assert_leq(alive, baseline, "the attack's fibers stay: %llu alive, %llu in flight",
                      (unsigned long long)alive, (unsigned long long)server_stat("in_flight"));
        print_memory("after the attack");
}

/*
 * Twenty connections each start a 1 MiB message and send 900 KiB of it, never the rest.
 * With max_partial_bytes = 4 MiB, the connections past the budget are closed with an
 * OVERLOADED notification; a fresh ping is answered meanwhile.
 */
Test(daemon_security, many_unfinished_big_messages)
{
        enum { CONNS = 20, BODY = 900 * 1024 };
        static const unsigned char head[] = {0x94, 0x00, 0x07, 0xa4, 'p',  'i', 'n', 'g',
                                             0x91, 0xc6, 0x00, 0x0f, 0x42, 0x40}; /* bin 1e6 */
        static unsigned char body[BODY];
        FiberdOpts o = {.config = "[ipc]\nmax_partial_bytes = 4194304\n"};
        int fds[CONNS], overloaded = 0;
        char code[64];

        fiberd_start(&fd_, &o);
        for (int i = 0; i < CONNS; i++) {
                size_t done = 0;
                uint64_t deadline = fiberd_now_ms() + 5000;

                fds[i] = raw_connect();
                cr_assert_geq(fds[i], 0);
                cr_assert_eq(write_some(fds[i], head, sizeof(head)), sizeof(head));
                /* the daemon reads as it comes, or closes: then stop */
                while (done < BODY && fiberd_now_ms() < deadline) {
                        ssize_t w =
                                send(fds[i], body + done, BODY - done, MSG_DONTWAIT | MSG_NOSIGNAL);
                        if (w > 0)
                                done += (size_t)w;
                        else if (w < 0 && errno != EAGAIN)
                                break;
                        else
                                usleep(1000);
                }
        }
        fresh_ping_answered("20 unfinished 1 MiB messages");
        for (int i = 0; i < CONNS; i++) {
                Answer a = read_answer(fds[i], 200, code, sizeof(code));
                if (a == ANSWER_NOTICE && strcmp(code, IPC_OVERLOADED) == 0)
                        overloaded++;
                close(fds[i]);
        }
        cr_log_info("%d of %d connections closed with OVERLOADED", overloaded, CONNS);
        cr_assert_gt(overloaded, 0, "no connection was held to max_partial_bytes");
        cr_assert_lt(overloaded, CONNS, "the budget refused even the first ones");
}

/*
 * Ten connections send a message one byte every 100 ms. With read_timeout_ms = 500 each
 * is closed with a DEADLINE_EXCEEDED notification instead of staying open for ever; a
 * fresh ping is answered meanwhile.
 */
Test(daemon_security, one_byte_at_a_time)
{
        enum { CONNS = 10 };
        static const unsigned char slow[] = {0x94, 0x00, 0x08, 0xb0, 'a', 'b', 'c', 'd',
                                             'e',  'f',  'g',  'h',  'i', 'j', 'k', 'l',
                                             'm',  'n',  'o',  'p',  'q', 'r', 's', 't'};
        FiberdOpts o = {.config = "[ipc]\nread_timeout_ms = 500\n"};
        int fds[CONNS], closed = 0;
        char code[64];

        fiberd_start(&fd_, &o);
        for (int i = 0; i < CONNS; i++) {
                fds[i] = raw_connect();
                cr_assert_geq(fds[i], 0);
        }
        for (size_t b = 0; b < sizeof(slow) && closed < CONNS; b++) {
                for (int i = 0; i < CONNS; i++)
                        if (fds[i] >= 0)
                                send(fds[i], &slow[b], 1, MSG_DONTWAIT | MSG_NOSIGNAL);
                if (b == 3)
                        fresh_ping_answered("10 connections sending a byte every 100 ms");
                for (int i = 0; i < CONNS; i++) {
                        if (fds[i] < 0)
                                continue;
                        Answer a = read_answer(fds[i], 10, code, sizeof(code));
                        if (a == ANSWER_NONE)
                                continue;
                        cr_assert_eq(a, ANSWER_NOTICE, "closed without a word");
                        cr_assert_str_eq(code, IPC_DEADLINE_EXCEEDED);
                        close(fds[i]);
                        fds[i] = -1;
                        closed++;
                }
                usleep(100000);
        }
        cr_log_info("%d of %d slow connections closed by read_timeout_ms", closed, CONNS);
        cr_assert_eq(closed, CONNS, "slow connections were kept open");
}

/* ------------------------------------------------------------- other users ------ */

/* A process of another user holding connections open until told to go. */
typedef struct Attacker {
        pid_t pid;
        int stop;   /* write end: closing it ends the attacker */
        int opened; /* connections it has open (not refused) */
        int refused;
} Attacker;

/*
 * Forks a process with uid and gid @uid that opens @conns connections and reports how
 * many fiberd kept and how many it refused with OVERLOADED (a connection.error notice
 * or a close) within a moment. It holds the rest open until attacker_stop().
 */
static void attacker_start(Attacker *a, uid_t uid, int conns)
{
        int report[2], stop[2];
        int counts[2];

        cr_assert_eq(pipe(report), 0);
        cr_assert_eq(pipe(stop), 0);
        a->pid = fork();
        cr_assert_geq(a->pid, 0);
        if (a->pid == 0) {
                static int fds[1024];
                int kept = 0, refused = 0;
                char c;

                close(report[0]);
                close(stop[1]);
                if (setgid(uid) < 0 || setuid(uid) < 0)
                        _exit(2);
                for (int i = 0; i < conns && i < 1024; i++)
                        fds[i] = raw_connect();
                for (int i = 0; i < conns && i < 1024; i++) {
                        struct pollfd p = {.fd = fds[i], .events = POLLIN};
                        if (fds[i] < 0 || poll(&p, 1, 20) == 1)
                                refused++; /* a notification, then the close */
                        else
                                kept++;
                }
                counts[0] = kept;
                counts[1] = refused;
                if (write(report[1], counts, sizeof(counts)) != sizeof(counts))
                        _exit(3);
                (void)!read(stop[0], &c, 1); /* until the parent closes its end */
                _exit(0);
        }
        close(report[1]);
        close(stop[0]);
        a->stop = stop[1];
        cr_assert_eq(read(report[0], counts, sizeof(counts)), (ssize_t)sizeof(counts),
                     "the attacker did not report");
        close(report[0]);
        a->opened = counts[0];
        a->refused = counts[1];
        cr_log_info("uid %u: %d connections kept, %d refused", (unsigned)uid, a->opened,
                    a->refused);
}

static void attacker_stop(Attacker *a)
{
        int status;

        close(a->stop);
        cr_assert_eq(waitpid(a->pid, &status, 0), a->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "attacker status 0x%x", status);
}

/* Other users connect too: the test's directory must be reachable (the socket is 0666). */
static void start_for_other_users(const FiberdOpts *o)
{
        if (geteuid() != 0)
                cr_skip_test("needs root to act as other users");
        fiberd_start(&fd_, o);
        cr_assert_eq(chmod(fd_.dir, 0755), 0);
}

static int log_count(const char *needle)
{
        static char log[1 << 20];
        FILE *f = fopen(fd_.log, "r");
        size_t n = f ? fread(log, 1, sizeof(log) - 1, f) : 0;
        int count = 0;

        if (f)
                fclose(f);
        log[n] = '\0';
        for (const char *p = log; (p = strstr(p, needle)); p++)
                count++;
        return count;
}

/*
 * Two users open 20 connections each against max_connections = 16 and
 * max_connections_per_user = 8: each keeps 8, the rest are refused with a clear error,
 * and root still gets in (its reserve) while the server is full.
 */
Test(daemon_security, connections_per_user_and_in_all)
{
        FiberdOpts o = {.config = "[ipc]\nmax_connections = 16\nmax_connections_per_user = 8\n"};
        Attacker a, b;

        start_for_other_users(&o);
        attacker_start(&a, 65534, 20);
        cr_assert_eq(a.opened, 8);
        cr_assert_eq(a.refused, 12);
        attacker_start(&b, 65533, 20);
        cr_assert_eq(b.opened, 8);
        cr_assert_eq(b.refused, 12);
        fresh_ping_answered("two users at their limits, the server full");
        cr_assert_leq(log_count("refused a connection"), 3, "a log line per refusal");
        /* b holds a copy of a's stop pipe (forked after it): b goes first */
        attacker_stop(&b);
        attacker_stop(&a);
}

/* The server's requests in flight, less the stats request that reads them: once they
 * reach @want (bounded wait), read again 300 ms later, so a count only passing through
 * @want on its way up is not taken for it; else the last count read. */
static uint64_t in_flight_settled(uint64_t want)
{
        uint64_t now = 0;

        for (uint64_t deadline = fiberd_now_ms() + 10000; fiberd_now_ms() < deadline;) {
                now = server_stat("in_flight") - 1;
                if (now == want) {
                        usleep(300000);
                        return server_stat("in_flight") - 1;
                }
                usleep(20000);
        }
        return now;
}

/* Another uid's connections that pipeline pings and read the answers on command. */
typedef struct Pipeliner {
        pid_t pid;
        int cmd;    /* write end: 'w' pipelines a burst on every connection, 'd' drains */
        int report; /* read end: one unsigned per command, pings sent or answers read */
} Pipeliner;

/* Enough pings that the answers fill each connection's socket buffer (the client reads
 * none), so every connection holds requests in flight; few enough that the requests fit
 * in it. */
enum { PIPE_CONNS = 5, PIPE_PINGS = 5000 };

/* Reads the answers of all @n connections @fds at once (a client that read one at a
 * time would hold the others' slots: max_in_flight_per_user counts them all) until
 * each has @want or 20 s pass; returns how many in all. */
static unsigned read_responses_all(const int *fds, int n, unsigned want)
{
        uint64_t deadline = fiberd_now_ms() + 20000;
        IpcDecoder *d[PIPE_CONNS];
        unsigned got[PIPE_CONNS] = {0}, sum = 0;

        for (int i = 0; i < n; i++)
                cr_assert(ipc_decoder_new(&d[i], 0) == 0);
        while (sum < (unsigned)n * want && fiberd_now_ms() < deadline) {
                for (int i = 0; i < n; i++) {
                        IpcMessage m;
                        char buf[4096];
                        ssize_t r =
                                got[i] < want ? recv(fds[i], buf, sizeof(buf), MSG_DONTWAIT) : 0;

                        if (r > 0)
                                ipc_decoder_feed(d[i], buf, (size_t)r);
                        while (ipc_decoder_next(d[i], &m) == 1) {
                                if (m.type == IPC_RESPONSE && m.error.type == MSGPACK_OBJECT_NIL) {
                                        got[i]++;
                                        sum++;
                                }
                                ipc_message_clear(&m);
                        }
                }
                poll(NULL, 0, 1);
        }
        for (int i = 0; i < n; i++)
                ipc_decoder_free(d[i]);
        return sum;
}

static void pipeliner_child(int cmd, int report)
{
        static unsigned char burst[PIPE_PINGS * sizeof(ping_bytes)];
        int fds[PIPE_CONNS];
        char c;

        for (size_t i = 0; i < PIPE_PINGS; i++)
                memcpy(burst + i * sizeof(ping_bytes), ping_bytes, sizeof(ping_bytes));
        for (int i = 0; i < PIPE_CONNS; i++)
                if ((fds[i] = raw_connect()) < 0)
                        _exit(4);
        while (read(cmd, &c, 1) == 1) {
                unsigned n = 0;

                /* 'w': the socket buffer holds what fiberd does not read */
                for (int i = 0; c == 'w' && i < PIPE_CONNS; i++)
                        n += write_some(fds[i], burst, sizeof(burst)) / sizeof(ping_bytes);
                if (c == 'd')
                        n = read_responses_all(fds, PIPE_CONNS, PIPE_PINGS);
                if (write(report, &n, sizeof(n)) != sizeof(n))
                        _exit(3);
        }
        _exit(0);
}

static void pipeliner_start(Pipeliner *p, uid_t uid)
{
        int cmd[2], report[2];

        cr_assert_eq(pipe(cmd), 0);
        cr_assert_eq(pipe(report), 0);
        p->pid = fork();
        cr_assert_geq(p->pid, 0);
        if (p->pid == 0) {
                close(cmd[1]);
                close(report[0]);
                if (setgid(uid) < 0 || setuid(uid) < 0)
                        _exit(2);
                pipeliner_child(cmd[0], report[1]);
        }
        close(cmd[0]);
        close(report[1]);
        p->cmd = cmd[1];
        p->report = report[0];
}

/* Sends @c to @p; returns its report. */
static unsigned pipeliner_do(Pipeliner *p, char c)
{
        unsigned n = 0;

        cr_assert_eq(write(p->cmd, &c, 1), 1);
        cr_assert_eq(read(p->report, &n, sizeof(n)), (ssize_t)sizeof(n),
                     "the pipelining child did not report");
        return n;
}

static void pipeliner_stop(Pipeliner *p)
{
        int status;

        close(p->cmd);
        close(p->report);
        cr_assert_eq(waitpid(p->pid, &status, 0), p->pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pipeliner status 0x%x", status);
}

/* Rewrites the config file with @text and reloads; waits until the reload is done. */
static void reload_with(const char *text)
{
        char conf[PATH_MAX];
        FILE *f;

        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs(text, f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "RELOADING=1", 10000));
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
}

/*
 * Another user's five connections pipeline 5,000 pings each and read no answer, against
 * max_in_flight = 64 and max_in_flight_per_user = 100: the user holds 100 requests in
 * flight over all of them, not 5 × 64 (stats count the requests held back), and root's
 * fresh ping is answered. A reload to 150 lets 50 more in at once. A reload to 40 takes
 * slots back as answers leave: the user then reads every answer (none lost), pipelines
 * again and holds 40.
 */
Test(daemon_security, in_flight_per_user)
{
        enum { SENT = PIPE_CONNS * PIPE_PINGS };
        FiberdOpts o = {.config = "[ipc]\nmax_in_flight = 64\nmax_in_flight_per_user = 100\n",
                        .notify = true};
        Pipeliner p;
        uint64_t n;

        start_for_other_users(&o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        pipeliner_start(&p, 65534);
        cr_assert_eq(pipeliner_do(&p, 'w'), SENT, "the burst did not fit the socket buffers");
        n = in_flight_settled(100);
        cr_log_info("in flight at max_in_flight_per_user = 100: %llu", (unsigned long long)n);
        cr_assert_eq(n, 100, "the user holds %llu requests in flight, not 100",
                     (unsigned long long)n);
        cr_assert_gt(server_stat("user_throttled"), 0, "stats do not count the held requests");
        fresh_ping_answered("another user at its in-flight limit");

        reload_with("[ipc]\nmax_in_flight = 64\nmax_in_flight_per_user = 150\n");
        n = in_flight_settled(150);
        cr_log_info("after the reload to 150: %llu", (unsigned long long)n);
        cr_assert_eq(n, 150, "a raised limit held %llu in flight, not 150", (unsigned long long)n);

        reload_with("[ipc]\nmax_in_flight = 64\nmax_in_flight_per_user = 40\n");
        cr_assert_eq(pipeliner_do(&p, 'd'), SENT, "not every ping was answered");
        cr_assert_eq(pipeliner_do(&p, 'w'), SENT, "the burst did not fit the socket buffers");
        n = in_flight_settled(40);
        cr_log_info("after the reload to 40: %llu", (unsigned long long)n);
        cr_assert_eq(n, 40, "a lowered limit held %llu in flight, not 40", (unsigned long long)n);
        cr_assert_eq(pipeliner_do(&p, 'd'), SENT, "not every ping was answered");
        pipeliner_stop(&p);
}

/* Packs [0, @msgid, "job.run", [@plugin, {"data": @data_len bytes} or nil, nil, nil]]. */
static void pack_run(msgpack_sbuffer *sb, uint32_t msgid, const char *plugin, size_t data_len)
{
        msgpack_packer pk;

        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_array(&pk, 4);
        msgpack_pack_uint32(&pk, 0);
        msgpack_pack_uint32(&pk, msgid);
        ipc_pack_cstr(&pk, "job.run");
        msgpack_pack_array(&pk, 4);
        ipc_pack_cstr(&pk, plugin);
        if (data_len) {
                static char data[32 * 1024];

                cr_assert_leq(data_len, sizeof(data));
                memset(data, 'x', data_len);
                msgpack_pack_map(&pk, 1);
                ipc_pack_cstr(&pk, "data");
                msgpack_pack_str(&pk, data_len);
                msgpack_pack_str_body(&pk, data, data_len);
        } else {
                msgpack_pack_nil(&pk);
        }
        msgpack_pack_nil(&pk);
        msgpack_pack_nil(&pk);
}

/*
 * Two connections of one user pipeline RUNS_PER_CONN job.runs of echo each and then
 * read every answer; the count of answers that came back without an error goes to
 * @report. Runs as that user (a forked child).
 */
enum { RUN_CONNS = 2, RUNS_PER_CONN = 64 };
_Static_assert((int)RUN_CONNS <= (int)PIPE_CONNS, "read_responses_all() reads PIPE_CONNS at most");

static void inline_runner_child(int report)
{
        msgpack_sbuffer burst;
        int fds[RUN_CONNS];
        unsigned n;

        /* job.runs on the memory store with no timeout_ms: the server runs them on the
         * connection's reader */
        msgpack_sbuffer_init(&burst);
        for (uint32_t i = 0; i < RUNS_PER_CONN; i++)
                pack_run(&burst, i, "echo", 0);
        for (int i = 0; i < RUN_CONNS; i++)
                if ((fds[i] = raw_connect()) < 0)
                        _exit(4);
        for (int i = 0; i < RUN_CONNS; i++)
                if (write_some(fds[i], burst.data, burst.size) != burst.size)
                        _exit(5);
        n = read_responses_all(fds, RUN_CONNS, RUNS_PER_CONN);
        if (write(report, &n, sizeof(n)) != sizeof(n))
                _exit(3);
        _exit(0);
}

/*
 * Another user's job.runs that run on their connections' readers (the memory store, no
 * timeout_ms), 64 pipelined on each of two connections against max_in_flight_per_user
 * = 4: a reader waits for a slot of its user while the other connection's reader and
 * answers hold them. Every run must be answered, done (the answers that give the slots
 * back must not wait behind a parked reader), each must have run inline, and the user
 * must have been held back.
 */
Test(daemon_security, inline_runs_of_one_user_share_its_slots)
{
        FiberdOpts o = {.plugins = "echo",
                        .config = "[ipc]\nmax_in_flight = 8\nmax_in_flight_per_user = 4\n"
                                  "[store]\nbackend = memory\n"};
        uint64_t inline_before, throttled_before, done_before;
        unsigned answered = 0;
        int report[2], status;
        pid_t pid;

        start_for_other_users(&o);
        inline_before = server_stat("requests_inline");
        throttled_before = server_stat("user_throttled");
        done_before = jobs_stat("done");
        cr_assert_eq(pipe(report), 0);
        pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                close(report[0]);
                if (setgid(65534) < 0 || setuid(65534) < 0)
                        _exit(2);
                inline_runner_child(report[1]);
        }
        close(report[1]);
        cr_assert_eq(read(report[0], &answered, sizeof(answered)), (ssize_t)sizeof(answered),
                     "the running child did not report");
        close(report[0]);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
        cr_assert_eq(answered, RUN_CONNS * RUNS_PER_CONN, "%u of %u runs answered without error",
                     answered, RUN_CONNS * RUNS_PER_CONN);
        cr_assert_eq(jobs_stat("done") - done_before, RUN_CONNS * RUNS_PER_CONN,
                     "not every run ended done");
        cr_assert_eq(server_stat("requests_inline") - inline_before, RUN_CONNS * RUNS_PER_CONN,
                     "not every run took the reader's path");
        cr_assert_gt(server_stat("user_throttled") - throttled_before, 0,
                     "the user was never held at its limit");
}

/* Sends all @len bytes of @buf, waiting for room up to @timeout_ms, and reads nothing
 * meanwhile; returns the bytes sent (fewer when the peer stopped reading). */
static size_t write_all_unread(int fd, const void *buf, size_t len, int timeout_ms)
{
        uint64_t deadline = fiberd_now_ms() + (uint64_t)timeout_ms;
        size_t done = 0;

        while (done < len && fiberd_now_ms() < deadline) {
                struct pollfd p = {.fd = fd, .events = POLLOUT};

                if (poll(&p, 1, 50) <= 0)
                        continue;
                if (p.revents & (POLLERR | POLLHUP))
                        break; /* closed by fiberd: nothing more will go */
                done += write_some(fd, (const char *)buf + done, len - done);
        }
        return done;
}

/*
 * A client that writes all its requests before it reads an answer: 8 blocks of one
 * job.run of echo with 32 KiB of args and 2,000 job.runs of an unknown plugin, each
 * refused at once (16,008 requests, 774 KB); all of them run on the connection's
 * reader. The answers fill the socket's buffer long before the requests are all sent,
 * and answers that cannot leave must not stop the reading: the reader hands every
 * answer, the refusals too, to the connection's flusher and goes on reading. A reader
 * that wrote its refusals itself would, once its own write found the socket full, wait
 * for the client to read while the client waits for it to read, until the 30 s write
 * deadline closes the connection (a fiberd that did so failed here). max_in_flight and
 * max_in_flight_per_user are raised above the requests sent, so that the requests in
 * flight do not stop the reading first, as by design they would. Every request must be
 * sent within 20 s, then every answer come.
 */
Test(daemon_security, a_client_that_reads_only_after_writing_is_served)
{
        enum { BLOCKS = 8, REFUSALS = 2000, DATA = 32 * 1024 };
        FiberdOpts o = {.plugins = "echo",
                        .config = "[ipc]\nmax_in_flight = 65536\nmax_in_flight_per_user = 65536\n"
                                  "[store]\nbackend = memory\n"};
        unsigned ok, refused;
        msgpack_sbuffer sb;
        size_t sent;
        int fd;

        msgpack_sbuffer_init(&sb);
        for (uint32_t b = 0, msgid = 0; b < BLOCKS; b++) {
                pack_run(&sb, msgid++, "echo", DATA);
                for (int i = 0; i < REFUSALS; i++)
                        pack_run(&sb, msgid++, "no-such-plugin", 0);
        }
        fiberd_start(&fd_, &o);
        fd = raw_connect();
        cr_assert_geq(fd, 0);
        sent = write_all_unread(fd, sb.data, sb.size, 20000);
        cr_assert_eq(sent, sb.size,
                     "fiberd stopped reading after %zu of %zu bytes while its answers waited", sent,
                     sb.size);
        ok = read_responses(fd, BLOCKS * (1 + REFUSALS), 20000, &refused);
        close(fd);
        msgpack_sbuffer_destroy(&sb);
        cr_assert_eq(ok, BLOCKS, "%u of %u echo runs answered", ok, BLOCKS);
        cr_assert_eq(refused, BLOCKS * REFUSALS, "%u of %u refusals answered", refused,
                     BLOCKS * REFUSALS);
}

/* Lowers the soft RLIMIT_NOFILE for the fiberd about to start; returns the old limit. */
static struct rlimit start_with_nofile(rlim_t n, const FiberdOpts *o)
{
        struct rlimit old, low;

        cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
        low = old;
        low.rlim_cur = n;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
        start_for_other_users(o);
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
        return old;
}

/*
 * fiberd with 64 fds and the default limits: max_connections comes from RLIMIT_NOFILE,
 * so another user's 200 connections are refused before fds run out, and root's ping is
 * answered.
 */
Test(daemon_security, few_fds_default_limits)
{
        Attacker a;

        start_with_nofile(64, NULL);
        attacker_start(&a, 65534, 200);
        cr_assert_gt(a.refused, 0);
        fresh_ping_answered("200 connections of another user, 64 fds");
        cr_assert_eq(log_count("Too many open files"), 0, "fds ran out anyway");
        attacker_stop(&a);
}

/*
 * fiberd with 64 fds and max_connections set far above them: accept() fails with
 * EMFILE. The waiting clients are told OVERLOADED instead of hanging, the log says so
 * once (not ten times a second), and once the connections go fiberd accepts again.
 */
Test(daemon_security, fd_exhaustion_backs_off_and_resumes)
{
        FiberdOpts o = {.config = "[ipc]\nmax_connections = 1000\n"
                                  "max_connections_per_user = 1000\n"};
        Attacker a;
        char code[64];
        Answer ans;

        start_with_nofile(64, &o);
        attacker_start(&a, 65534, 100);
        cr_assert_gt(a.refused, 0, "fds never ran out: the test proves nothing");
        ans = fresh_ping("fds exhausted", code, sizeof(code));
        if (ans == ANSWER_NOTICE)
                cr_assert_str_eq(code, IPC_OVERLOADED);
        usleep(1500000); /* let the back-off run several rounds: still one line */
        cr_assert_eq(log_count("Too many open files"), 1, "the EMFILE line repeats");
        attacker_stop(&a);
        for (uint64_t deadline = fiberd_now_ms() + 10000;
             !fiberd_log_contains(&fd_, "free again") && fiberd_now_ms() < deadline;) {
                int fd = raw_connect(); /* an accept after the back-off notices */
                if (fd >= 0)
                        close(fd);
                usleep(50000);
        }
        fresh_ping_answered("after the connections went");
        cr_assert(fiberd_log_contains(&fd_, "free again"));
}
