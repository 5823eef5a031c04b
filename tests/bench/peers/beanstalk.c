/* SPDX-License-Identifier: MIT */
/*
 * beanstalk.c — the beanstalkd peer of the product rows: the same loads as fiberd's
 * generator (product.h) through beanstalkd 1.12 (Debian `beanstalkd`), started on a free
 * 127.0.0.1 port, in memory (no -b binlog).
 *
 *  product-beanstalk tput N C W | rate N RATE
 *
 * The shape of a job, end to end, the way beanstalkd is used (it has no result channel):
 *  - a client connection `put`s the job (body "CONN SEQ") into the default tube;
 *  - a worker, in this process, `reserve`s it and `delete`s it; the job is complete when
 *    beanstalkd answers DELETED, and the worker hands the completion to the submitting
 *    connection in memory (a counter under a mutex, and the latency in rate mode);
 *  - the client holds at most W jobs that are put and not yet complete.
 * So every job crosses the server twice (put in, reserve out) and is acknowledged by it
 * (delete), as in the "put / reserve / delete" figures; what beanstalkd does not
 * carry is the way back to the submitter, which fiberd and gearmand carry over their
 * sockets.
 *
 * Protocol use: a client pipelines its puts (one write for all the window allows, then
 * the INSERTED lines); a worker pipelines "delete ID" with its next "reserve" (one write
 * and one round trip per job). Each worker its own thread and connection, as many as
 * product.h's PRODUCT_PEER_WORKERS_* say.
 * A minimal text-protocol client is written here: Debian has no C library for it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/bench/bench.h"
#include "tests/bench/product.h"

#define BS_BUF 65536

/* One connection to beanstalkd with a read buffer. */
typedef struct BsConn {
        int fd;
        size_t off, len;
        char buf[BS_BUF];
} BsConn;

/* A submitting connection's completions, written by the workers. */
typedef struct BsClient {
        pthread_t thread;
        BsConn conn;
        unsigned index;
        uint64_t jobs, sent;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        uint64_t completed; /* under lock */
} BsClient;

typedef struct BsWorker {
        pthread_t thread;
        BsConn conn;
} BsWorker;

static ProductLoad bs_load;
static BsClient *bs_clients;
static uint64_t *bs_lat;     /* rate mode: latency per job, ns */
static uint64_t bs_start_ns; /* rate mode: job i is due at bs_start_ns + i * bs_period_ns */
static uint64_t bs_period_ns;
static volatile int bs_stopping;

static void bs_connect(BsConn *c, unsigned port)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int one = 1;

        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                bench_die("beanstalkd: connect: %s", strerror(errno));
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->off = c->len = 0;
}

static void bs_write(BsConn *c, const char *p, size_t n)
{
        while (n) {
                ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        bench_die("beanstalkd: send: %s", strerror(errno));
                p += w;
                n -= (size_t)w;
        }
}

/* Fill the buffer. Return: false on end of stream while stopping (dies otherwise). */
static bool bs_fill(BsConn *c)
{
        ssize_t r;

        if (c->off == c->len)
                c->off = c->len = 0;
        if (c->len == sizeof(c->buf)) {
                memmove(c->buf, c->buf + c->off, c->len - c->off);
                c->len -= c->off;
                c->off = 0;
        }
        do
                r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
                if (bs_stopping)
                        return false;
                bench_die("beanstalkd: connection closed (%s)", r < 0 ? strerror(errno) : "EOF");
        }
        c->len += (size_t)r;
        return true;
}

/* The next "...\r\n" line, without the CRLF, into @line. Return: false when stopping. */
static bool bs_line(BsConn *c, char *line, size_t size)
{
        for (;;) {
                char *end = memmem(c->buf + c->off, c->len - c->off, "\r\n", 2);
                if (end) {
                        size_t n = (size_t)(end - (c->buf + c->off));
                        snprintf(line, size, "%.*s", (int)n, c->buf + c->off);
                        c->off += n + 2;
                        return true;
                }
                if (!bs_fill(c))
                        return false;
        }
}

/* The @n bytes of a job body and its CRLF, into @body (NUL-terminated, cut to @size). */
static bool bs_body(BsConn *c, size_t n, char *body, size_t size)
{
        while (c->len - c->off < n + 2)
                if (!bs_fill(c))
                        return false;
        snprintf(body, size, "%.*s", (int)n, c->buf + c->off);
        c->off += n + 2;
        return true;
}

static void bs_complete(unsigned client, uint64_t seq)
{
        BsClient *k = &bs_clients[client];

        if (bs_lat)
                bs_lat[seq] = bench_now_ns() - (bs_start_ns + seq * bs_period_ns);
        pthread_mutex_lock(&k->lock);
        k->completed++;
        pthread_cond_signal(&k->cond);
        pthread_mutex_unlock(&k->lock);
}

static void *bs_worker(void *arg)
{
        BsWorker *w = arg;
        char line[128], body[64], cmd[64];
        unsigned long long id, seq;
        unsigned client;
        size_t bytes;

        bs_write(&w->conn, "reserve\r\n", 9);
        for (;;) {
                if (!bs_line(&w->conn, line, sizeof(line)))
                        return NULL;
                if (sscanf(line, "RESERVED %llu %zu", &id, &bytes) != 2)
                        bench_die("beanstalkd: reserve answered '%s'", line);
                if (!bs_body(&w->conn, bytes, body, sizeof(body)))
                        return NULL;
                if (sscanf(body, "%u %llu", &client, &seq) != 2 || client >= bs_load.conns)
                        bench_die("beanstalkd: a job body '%s' that is not ours", body);
                bs_write(&w->conn, cmd,
                         (size_t)snprintf(cmd, sizeof(cmd), "delete %llu\r\nreserve\r\n", id));
                if (!bs_line(&w->conn, line, sizeof(line)))
                        return NULL;
                if (strcmp(line, "DELETED"))
                        bench_die("beanstalkd: delete answered '%s'", line);
                bs_complete(client, seq);
        }
}

/* Queue "put" of job @seq of client @k into @out at @n; return the new length. */
static size_t bs_put(char *out, size_t n, const BsClient *k, uint64_t seq)
{
        char body[48];
        int len = snprintf(body, sizeof(body), "%u %llu", k->index, (unsigned long long)seq);

        return n + (size_t)sprintf(out + n, "put 0 0 60 %d\r\n%s\r\n", len, body);
}

static void bs_inserted(BsClient *k, unsigned count)
{
        char line[128];

        for (unsigned i = 0; i < count; i++) {
                bs_line(&k->conn, line, sizeof(line));
                if (strncmp(line, "INSERTED ", 9))
                        bench_die("beanstalkd: put answered '%s'", line);
        }
}

/* tput: keep W jobs put and not complete. */
static void *bs_client_closed_loop(void *arg)
{
        BsClient *k = arg;
        char *out = malloc((size_t)bs_load.window * 64);

        if (!out)
                bench_die("out of memory");

        while (k->sent < k->jobs) {
                uint64_t room;
                size_t n = 0;
                unsigned count = 0;
                pthread_mutex_lock(&k->lock);
                while (k->sent - k->completed >= bs_load.window)
                        pthread_cond_wait(&k->cond, &k->lock);
                room = bs_load.window - (k->sent - k->completed);
                pthread_mutex_unlock(&k->lock);
                for (; room && k->sent < k->jobs; room--, count++)
                        n = bs_put(out, n, k, k->sent++);
                bs_write(&k->conn, out, n);
                bs_inserted(k, count);
        }
        free(out);
        pthread_mutex_lock(&k->lock);
        while (k->completed < k->jobs)
                pthread_cond_wait(&k->cond, &k->lock);
        pthread_mutex_unlock(&k->lock);
        return NULL;
}

/* rate: put job i at its time, one at a time; the workers time the completions. */
static void bs_client_open_loop(BsClient *k)
{
        char out[128];

        for (uint64_t i = 0; i < k->jobs; i++) {
                product_wait_until(bs_start_ns + i * bs_period_ns);
                bs_write(&k->conn, out, bs_put(out, 0, k, k->sent++));
                bs_inserted(k, 1);
        }
        pthread_mutex_lock(&k->lock);
        while (k->completed < k->jobs)
                pthread_cond_wait(&k->cond, &k->lock);
        pthread_mutex_unlock(&k->lock);
}

static void bs_server_start(ProductServer *s)
{
        char path[512], port[PRODUCT_PORT_LEN];
        char *argv[] = {path, "-l", "127.0.0.1", "-p", port, NULL, NULL, NULL, NULL};

        if (!product_find_server("beanstalkd", path, sizeof(path)))
                bench_die("beanstalkd not installed (apt-get install beanstalkd, or make "
                          "deps-bench)");
        product_tmpdir(s);
        if (getenv("FIBERD_BENCH_BEANSTALK_BINLOG")) {
                /* its write-ahead log with an fsync before each answer (-f0; by default
                 * it fsyncs at most every 50 ms): as durable as fiberd's sqlite store */
                argv[5] = "-b";
                argv[6] = s->dir;
                argv[7] = "-f0";
        }
        product_start_tcp(s, argv, port, "beanstalkd");
}

/* product-beanstalk-binlog: beanstalkd with its binlog (-b), the durable peer. */
int bench_product_beanstalk_binlog(int argc, char **argv)
{
        setenv("FIBERD_BENCH_BEANSTALK_BINLOG", "1", 1);
        return bench_product_beanstalk(argc, argv);
}

int bench_product_beanstalk(int argc, char **argv)
{
        ProductServer srv = {0};
        BsWorker *workers;
        uint64_t t0, t1, cpu0, cpu1;

        product_parse(&bs_load, argc, argv, false);
        bs_clients = calloc(bs_load.conns, sizeof(*bs_clients));
        workers = calloc(bs_load.workers, sizeof(*workers));
        if (!bs_clients || !workers)
                bench_die("out of memory");
        if (bs_load.mode == PRODUCT_RATE) {
                if (!(bs_lat = calloc(bs_load.jobs, sizeof(*bs_lat))))
                        bench_die("out of memory");
                bs_period_ns = NSEC_PER_SEC / bs_load.rate;
        }
        bs_server_start(&srv);
        for (unsigned i = 0; i < bs_load.conns; i++) {
                BsClient *k = &bs_clients[i];
                k->index = i;
                k->jobs = bs_load.jobs / bs_load.conns + (i < bs_load.jobs % bs_load.conns);
                pthread_mutex_init(&k->lock, NULL);
                pthread_cond_init(&k->cond, NULL);
                bs_connect(&k->conn, srv.port);
        }
        for (unsigned i = 0; i < bs_load.workers; i++) {
                bs_connect(&workers[i].conn, srv.port);
                if (pthread_create(&workers[i].thread, NULL, bs_worker, &workers[i]))
                        bench_die("pthread_create failed");
        }

        cpu0 = product_cpu_ns(srv.pid);
        t0 = bench_now_ns();
        bs_start_ns = t0 + NSEC_PER_MSEC;
        if (bs_load.mode == PRODUCT_RATE) {
                bs_client_open_loop(&bs_clients[0]);
        } else {
                for (unsigned i = 0; i < bs_load.conns; i++)
                        if (pthread_create(&bs_clients[i].thread, NULL, bs_client_closed_loop,
                                           &bs_clients[i]))
                                bench_die("pthread_create failed");
                for (unsigned i = 0; i < bs_load.conns; i++)
                        pthread_join(bs_clients[i].thread, NULL);
        }
        t1 = bench_now_ns();
        cpu1 = product_cpu_ns(srv.pid);

        bs_stopping = 1;
        for (unsigned i = 0; i < bs_load.workers; i++)
                shutdown(workers[i].conn.fd, SHUT_RDWR);
        for (unsigned i = 0; i < bs_load.workers; i++) {
                pthread_join(workers[i].thread, NULL);
                close(workers[i].conn.fd);
        }
        for (unsigned i = 0; i < bs_load.conns; i++)
                close(bs_clients[i].conn.fd);
        product_stop(&srv);
        product_report(&bs_load, t1 - t0, cpu1 - cpu0, bs_lat);
        free(bs_lat);
        free(workers);
        free(bs_clients);
        return 0;
}

/* ------------------------------------------------------------ due jobs -------------- */

/*
 * product-beanstalk-due FAR RATE SECONDS: beanstalkd's delayed jobs under the load of
 * bench-product.c's product-due: FAR jobs put with delays over the next hour (from 2
 * minutes), their RSS per job, then RATE puts a second for SECONDS seconds with delay 1
 * (beanstalkd's delays are whole seconds); two workers reserve them, and a job's lateness
 * is the time its reserve returned minus its put time plus 1 s. Prints "p50 p99 bytes"
 * (ms, ms, bytes per delayed job).
 */
static uint64_t *due_late_ns;
static uint64_t due_near, due_seen;
static pthread_mutex_t due_lock = PTHREAD_MUTEX_INITIALIZER;

static void *bs_due_worker(void *arg)
{
        BsWorker *w = arg;
        char line[128], body[64], cmd[64];
        unsigned long long id, seq, sent_ns;
        size_t bytes;

        bs_write(&w->conn, "reserve\r\n", 9);
        for (;;) {
                if (!bs_line(&w->conn, line, sizeof(line)))
                        return NULL;
                if (sscanf(line, "RESERVED %llu %zu", &id, &bytes) != 2)
                        bench_die("beanstalkd: reserve answered '%s'", line);
                if (!bs_body(&w->conn, bytes, body, sizeof(body)))
                        return NULL;
                uint64_t now = bench_now_ns();
                if (sscanf(body, "near %llu %llu", &seq, &sent_ns) != 2 || seq >= due_near)
                        bench_die("beanstalkd: a job body '%s' that is not due yet", body);
                bs_write(&w->conn, cmd,
                         (size_t)snprintf(cmd, sizeof(cmd), "delete %llu\r\nreserve\r\n", id));
                if (!bs_line(&w->conn, line, sizeof(line)))
                        return NULL;
                if (strcmp(line, "DELETED"))
                        bench_die("beanstalkd: delete answered '%s'", line);
                pthread_mutex_lock(&due_lock);
                due_late_ns[seq] = now > sent_ns + NSEC_PER_SEC ? now - sent_ns - NSEC_PER_SEC : 0;
                due_seen++;
                pthread_mutex_unlock(&due_lock);
        }
}

static int cmp_ns(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

int bench_product_beanstalk_due(int argc, char **argv)
{
        ProductServer srv = {0};
        BsWorker workers[2];
        BsConn *put = malloc(sizeof(*put));
        char *out = malloc(512 * 64);
        uint64_t far, rate, secs, rss0, rss1, start, deadline;

        if (argc != 4 || !put || !out)
                bench_die("usage: product-beanstalk-due FAR RATE SECONDS");
        far = strtoull(argv[1], NULL, 10);
        rate = strtoull(argv[2], NULL, 10);
        secs = strtoull(argv[3], NULL, 10);
        due_near = rate * secs;
        if (!rate || !secs || !(due_late_ns = calloc(due_near, sizeof(*due_late_ns))))
                bench_die("product-beanstalk-due: RATE and SECONDS must be positive");
        bs_server_start(&srv);
        bs_connect(put, srv.port);
        rss0 = product_rss_bytes(srv.pid);
        for (uint64_t i = 0; i < far;) {
                size_t n = 0;
                unsigned count = 0;
                for (; count < 512 && i < far; count++, i++) {
                        unsigned delay =
                                120 + (unsigned)((i * 0x9e3779b97f4a7c15ULL >> 11) % (3600 - 120));
                        n += (size_t)sprintf(out + n, "put 0 %u 60 7\r\nfar-job\r\n", delay);
                }
                bs_write(put, out, n);
                for (unsigned k = 0; k < count; k++) {
                        char line[128];
                        bs_line(put, line, sizeof(line));
                        if (strncmp(line, "INSERTED ", 9))
                                bench_die("beanstalkd: put answered '%s'", line);
                }
        }
        rss1 = product_rss_bytes(srv.pid);
        for (unsigned k = 0; k < 2; k++) {
                bs_connect(&workers[k].conn, srv.port);
                if (pthread_create(&workers[k].thread, NULL, bs_due_worker, &workers[k]))
                        bench_die("pthread_create failed");
        }
        start = bench_now_ns();
        for (uint64_t i = 0; i < due_near; i++) {
                char body[64], line[128];
                uint64_t at = start + i * (NSEC_PER_SEC / rate);
                int len;
                product_wait_until(at);
                len = snprintf(body, sizeof(body), "near %llu %llu", (unsigned long long)i,
                               (unsigned long long)bench_now_ns());
                bs_write(put, out, (size_t)sprintf(out, "put 0 1 60 %d\r\n%s\r\n", len, body));
                bs_line(put, line, sizeof(line));
                if (strncmp(line, "INSERTED ", 9))
                        bench_die("beanstalkd: put answered '%s'", line);
        }
        deadline = bench_now_ns() + 60 * NSEC_PER_SEC;
        for (;;) {
                pthread_mutex_lock(&due_lock);
                bool all = due_seen >= due_near;
                pthread_mutex_unlock(&due_lock);
                if (all)
                        break;
                if (bench_now_ns() > deadline)
                        bench_die("product-beanstalk-due: the due jobs did not all come");
                product_wait_until(bench_now_ns() + 20 * NSEC_PER_MSEC);
        }
        bs_stopping = 1;
        for (unsigned k = 0; k < 2; k++)
                shutdown(workers[k].conn.fd, SHUT_RDWR);
        for (unsigned k = 0; k < 2; k++) {
                pthread_join(workers[k].thread, NULL);
                close(workers[k].conn.fd);
        }
        close(put->fd);
        product_stop(&srv);
        qsort(due_late_ns, due_near, sizeof(*due_late_ns), cmp_ns);
        printf("%.1f %.1f %.0f\n", (double)due_late_ns[due_near / 2] / 1e6,
               (double)due_late_ns[due_near * 99 / 100] / 1e6,
               (double)(rss1 > rss0 ? rss1 - rss0 : 0) / (double)(far ? far : 1));
        free(due_late_ns);
        free(out);
        free(put);
        return 0;
}
