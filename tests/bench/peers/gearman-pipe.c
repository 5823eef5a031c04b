/* SPDX-License-Identifier: MIT */
/*
 * gearman-pipe.c — gearmand at its best: the trivial-job load of the product rows
 * (product.h, tput mode only) through gearmand 1.1 `-t 1`, with clients and workers that
 * pipeline, speaking gearmand's binary protocol directly over their sockets. Linked into
 * fiberd-bench (no libgearman), so `make bench-smoke` runs it wherever gearmand is
 * installed.
 *
 *  product-gearman-pipe tput N C W
 *
 * Why a second gearmand peer: peers/gearman.c uses libgearman's worker API, which holds
 * one GRAB_JOB outstanding per worker connection and so pays a round trip per job. The
 * protocol lets a worker keep many GRAB_JOBs outstanding; gearmand answers each in order.
 * This is the fastest way a user could drive gearmand, so the row it feeds (bench.c's
 * 12g/13g) is the honest upper bound of the peer.
 *
 * The protocol (gearman.org/protocol): a packet is a 12-byte header — the magic "\0REQ"
 * (to the server) or "\0RES" (from it), the type and the size of the data, both 32-bit
 * big-endian — then the data, its arguments separated by NUL bytes.
 *  - A client connection SUBMIT_JOBs "echo" (unique "CONN-SEQ", so gearmand coalesces
 *    nothing; workload "CONN SEQ"), keeping W outstanding, all written in one send();
 *    gearmand answers JOB_CREATED for each, then WORK_COMPLETE with the worker's result,
 *    which the client checks (it names this connection) before it counts the job and
 *    queues the next SUBMIT_JOB.
 *  - A worker connection sends CAN_DO "echo" and W GRAB_JOBs. For each JOB_ASSIGN it
 *    answers WORK_COMPLETE with the workload and sends one GRAB_JOB in its place; a
 *    NO_JOB uses up one grab, and when none is left the worker sends PRE_SLEEP and waits:
 *    gearmand sends NOOP when a job comes for it (at once, if one came in between), and
 *    the worker sends W GRAB_JOBs again.
 * Replies to everything parsed from one recv() go out in one send(). Each connection is
 * its own thread with blocking I/O; the workers are FIBERD_BENCH_PEER_WORKERS or half the
 * client connections (at least 2): with W grabs each, more gave nothing on 2 cores.
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

#define GP_FUNCTION "echo"
#define GP_HEADER 12

/* Packet types (the protocol's numbers). */
enum {
        GP_CAN_DO = 1,
        GP_PRE_SLEEP = 4,
        GP_NOOP = 6,
        GP_SUBMIT_JOB = 7,
        GP_JOB_CREATED = 8,
        GP_GRAB_JOB = 9,
        GP_NO_JOB = 10,
        GP_JOB_ASSIGN = 11,
        GP_WORK_COMPLETE = 13,
        GP_WORK_FAIL = 14,
        GP_ERROR = 19,
};

/* One connection to gearmand: a read buffer and a buffer of packets to send. */
typedef struct GpConn {
        int fd;
        char *in;
        size_t in_off, in_len, in_cap;
        char *out;
        size_t out_len, out_cap;
} GpConn;

typedef struct GpClient {
        pthread_t thread;
        GpConn conn;
        unsigned index;
        uint64_t jobs, sent, done;
} GpClient;

typedef struct GpWorker {
        pthread_t thread;
        GpConn conn;
        uint64_t jobs; /* jobs it completed */
} GpWorker;

static ProductLoad gp_load;
static volatile int gp_stopping;

static void gp_connect(GpConn *c, unsigned port)
{
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int one = 1;

        memset(c, 0, sizeof(*c));
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0)
                bench_die("gearmand: connect: %s", strerror(errno));
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        c->in_cap = c->out_cap = 1 << 16;
        c->in = malloc(c->in_cap);
        c->out = malloc(c->out_cap);
        if (!c->in || !c->out)
                bench_die("out of memory");
}

static void gp_close(GpConn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
        free(c->in);
        free(c->out);
        c->in = c->out = NULL;
}

/* Queue a packet of @type whose @n arguments are joined with NUL bytes. */
static void gp_put(GpConn *c, uint32_t type, unsigned n, const char *const arg[],
                   const size_t len[])
{
        size_t size = 0;
        uint32_t be;
        char *p;

        for (unsigned i = 0; i < n; i++)
                size += len[i] + (i + 1 < n);
        while (c->out_len + GP_HEADER + size > c->out_cap) {
                c->out_cap *= 2;
                if (!(c->out = realloc(c->out, c->out_cap)))
                        bench_die("out of memory");
        }
        p = c->out + c->out_len;
        memcpy(p, "\0REQ", 4);
        be = htonl(type);
        memcpy(p + 4, &be, 4);
        be = htonl((uint32_t)size);
        memcpy(p + 8, &be, 4);
        p += GP_HEADER;
        for (unsigned i = 0; i < n; i++) {
                memcpy(p, arg[i], len[i]);
                p += len[i];
                if (i + 1 < n)
                        *p++ = '\0';
        }
        c->out_len += GP_HEADER + size;
}

static void gp_put0(GpConn *c, uint32_t type)
{
        gp_put(c, type, 0, NULL, NULL);
}

/* Send what is queued, all of it. */
static void gp_flush(GpConn *c)
{
        size_t off = 0;

        while (off < c->out_len) {
                ssize_t w = send(c->fd, c->out + off, c->out_len - off, MSG_NOSIGNAL);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0) {
                        if (gp_stopping)
                                break;
                        bench_die("gearmand: send: %s", strerror(errno));
                }
                off += (size_t)w;
        }
        c->out_len = 0;
}

/* One recv() into the read buffer. Return: false at the end of the stream while
 * stopping (dies otherwise). */
static bool gp_fill(GpConn *c)
{
        ssize_t r;

        if (c->in_off == c->in_len) {
                c->in_off = c->in_len = 0;
        } else if (c->in_off) {
                memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
                c->in_len -= c->in_off;
                c->in_off = 0;
        }
        if (c->in_len == c->in_cap) {
                c->in_cap *= 2;
                if (!(c->in = realloc(c->in, c->in_cap)))
                        bench_die("out of memory");
        }
        do
                r = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
        while (r < 0 && errno == EINTR);
        if (r <= 0) {
                if (gp_stopping)
                        return false;
                bench_die("gearmand: connection closed (%s)", r < 0 ? strerror(errno) : "EOF");
        }
        c->in_len += (size_t)r;
        return true;
}

/* The next whole packet in the read buffer, if there is one: its type, data and size
 * (the data stays in the buffer until the next gp_fill). */
static bool gp_next(GpConn *c, uint32_t *type, char **data, size_t *size)
{
        uint32_t be;
        size_t n;

        if (c->in_len - c->in_off < GP_HEADER)
                return false;
        if (memcmp(c->in + c->in_off, "\0RES", 4))
                bench_die("gearmand: a packet without the \\0RES magic");
        memcpy(&be, c->in + c->in_off + 8, 4);
        n = ntohl(be);
        if (c->in_len - c->in_off < GP_HEADER + n)
                return false;
        memcpy(&be, c->in + c->in_off + 4, 4);
        *type = ntohl(be);
        *data = c->in + c->in_off + GP_HEADER;
        *size = n;
        c->in_off += GP_HEADER + n;
        return true;
}

static void gp_submit(GpClient *k)
{
        char unique[48], work[48];
        const char *arg[3] = {GP_FUNCTION, unique, work};
        size_t len[3] = {sizeof(GP_FUNCTION) - 1};

        len[1] = (size_t)snprintf(unique, sizeof(unique), "%u-%llu", k->index,
                                  (unsigned long long)k->sent);
        len[2] = (size_t)snprintf(work, sizeof(work), "%u %llu", k->index,
                                  (unsigned long long)k->sent);
        gp_put(&k->conn, GP_SUBMIT_JOB, 3, arg, len);
        k->sent++;
}

/* A client connection: W SUBMIT_JOBs outstanding until its share is complete. */
static void *gp_client_loop(void *arg)
{
        GpClient *k = arg;
        char want[16];
        size_t want_len = (size_t)snprintf(want, sizeof(want), "%u ", k->index);

        while (k->done < k->jobs) {
                uint32_t type;
                char *data;
                size_t size;

                while (k->sent < k->jobs && k->sent - k->done < gp_load.window)
                        gp_submit(k);
                gp_flush(&k->conn);
                gp_fill(&k->conn);
                while (gp_next(&k->conn, &type, &data, &size)) {
                        char *nul = memchr(data, '\0', size);
                        switch (type) {
                        case GP_JOB_CREATED:
                                break;
                        case GP_WORK_COMPLETE:
                                /* handle \0 result: the result names this connection */
                                if (!nul || (size_t)(data + size - (nul + 1)) < want_len ||
                                    memcmp(nul + 1, want, want_len))
                                        bench_die("gearmand: a WORK_COMPLETE without this "
                                                  "connection's echo");
                                k->done++;
                                break;
                        case GP_WORK_FAIL:
                                bench_die("gearmand: a job failed");
                        case GP_ERROR:
                                bench_die("gearmand: ERROR %.*s", (int)size, data);
                        default:
                                break; /* WORK_STATUS, WORK_DATA: none are sent */
                        }
                }
        }
        return NULL;
}

/* A worker connection: W GRAB_JOBs outstanding, PRE_SLEEP when all came back empty. */
static void *gp_worker_loop(void *arg)
{
        GpWorker *w = arg;
        GpConn *c = &w->conn;
        const char *fn[1] = {GP_FUNCTION};
        size_t fn_len[1] = {sizeof(GP_FUNCTION) - 1};
        unsigned grabs = gp_load.window;

        gp_put(c, GP_CAN_DO, 1, fn, fn_len);
        for (unsigned i = 0; i < grabs; i++)
                gp_put0(c, GP_GRAB_JOB);
        gp_flush(c);
        while (gp_fill(c)) {
                uint32_t type;
                char *data;
                size_t size;

                while (gp_next(c, &type, &data, &size)) {
                        switch (type) {
                        case GP_JOB_ASSIGN: {
                                /* handle \0 function \0 workload */
                                char *h_end = memchr(data, '\0', size), *f_end;
                                if (!h_end)
                                        bench_die("gearmand: JOB_ASSIGN without a handle");
                                f_end = memchr(h_end + 1, '\0', (size_t)(data + size - h_end - 1));
                                if (!f_end)
                                        bench_die("gearmand: JOB_ASSIGN without a function");
                                const char *res[2] = {data, f_end + 1};
                                size_t res_len[2] = {(size_t)(h_end - data),
                                                     (size_t)(data + size - f_end - 1)};
                                gp_put(c, GP_WORK_COMPLETE, 2, res, res_len);
                                gp_put0(c, GP_GRAB_JOB);
                                w->jobs++;
                                break;
                        }
                        case GP_NO_JOB:
                                if (--grabs == 0)
                                        gp_put0(c, GP_PRE_SLEEP);
                                break;
                        case GP_NOOP:
                                for (; grabs < gp_load.window; grabs++)
                                        gp_put0(c, GP_GRAB_JOB);
                                break;
                        case GP_ERROR:
                                bench_die("gearmand: ERROR %.*s", (int)size, data);
                        default:
                                break;
                        }
                }
                gp_flush(c);
        }
        return NULL;
}

int bench_product_gearman_pipe(int argc, char **argv)
{
        ProductServer srv = {0};
        GpClient *clients;
        GpWorker *workers;
        unsigned nworkers;
        uint64_t t0, t1, cpu0, cpu1, worked = 0;

        product_parse(&gp_load, argc, argv, false);
        if (gp_load.mode != PRODUCT_TPUT)
                bench_die("product-gearman-pipe: tput N C W only");
        nworkers = gp_load.conns / 2 < 2 ? 2 : gp_load.conns / 2;
        nworkers = (unsigned)bench_parse_count(getenv("FIBERD_BENCH_PEER_WORKERS"), nworkers);
        clients = calloc(gp_load.conns, sizeof(*clients));
        workers = calloc(nworkers, sizeof(*workers));
        if (!clients || !workers)
                bench_die("out of memory");
        product_start_gearmand(&srv);
        for (unsigned i = 0; i < nworkers; i++) {
                gp_connect(&workers[i].conn, srv.port);
                if (pthread_create(&workers[i].thread, NULL, gp_worker_loop, &workers[i]))
                        bench_die("pthread_create failed");
        }
        for (unsigned i = 0; i < gp_load.conns; i++) {
                gp_connect(&clients[i].conn, srv.port);
                clients[i].index = i;
                clients[i].jobs = gp_load.jobs / gp_load.conns + (i < gp_load.jobs % gp_load.conns);
        }

        cpu0 = product_cpu_ns(srv.pid);
        t0 = bench_now_ns();
        for (unsigned i = 0; i < gp_load.conns; i++)
                if (pthread_create(&clients[i].thread, NULL, gp_client_loop, &clients[i]))
                        bench_die("pthread_create failed");
        for (unsigned i = 0; i < gp_load.conns; i++)
                pthread_join(clients[i].thread, NULL);
        t1 = bench_now_ns();
        cpu1 = product_cpu_ns(srv.pid);

        gp_stopping = 1;
        for (unsigned i = 0; i < nworkers; i++) {
                shutdown(workers[i].conn.fd, SHUT_RDWR); /* its recv() returns 0 */
                pthread_join(workers[i].thread, NULL);
                worked += workers[i].jobs;
                gp_close(&workers[i].conn);
        }
        for (unsigned i = 0; i < gp_load.conns; i++)
                gp_close(&clients[i].conn);
        product_stop(&srv);
        if (worked != gp_load.jobs)
                bench_die("gearmand: the workers completed %llu jobs of %llu",
                          (unsigned long long)worked, (unsigned long long)gp_load.jobs);
        product_report(&gp_load, t1 - t0, cpu1 - cpu0, NULL);
        free(workers);
        free(clients);
        return 0;
}
