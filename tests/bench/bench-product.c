/* SPDX-License-Identifier: MIT */
/*
 * bench-product.c — the product rows' fiberd side: trivial jobs through fiberd's socket
 * with the C client library (client/client.h), as a user's program would send them, and
 * skynet through `fiberctl submit --wait`.
 *
 *  product-fiberd tput N C W | rate N RATE | rss N C W    (loads: product.h)
 *  product-skynet [LEAVES]    ms of `fiberctl submit skynet size=LEAVES div=10 --wait`
 *
 * Each run starts its own fiberd (the one this tree built, with the bundled plugins of
 * this tree, default settings but for the job store, log level warning) on a socket in
 * a temporary directory, and stops it at the end. The job store is memory, like the
 * in-memory peers it is compared with, unless FIBERD_BENCH_STORE says otherwise
 * (product-fiberd-sqlite: the durable default, daemon/store/store.h). product-fiberd-redis and
 * product-fiberd-redis2 start a private redis-server on a Unix socket in their own
 * temporary directory and one or two fiberd hosts with [store] backend = redis sharing
 * its stream (fleet mode, daemon/store/store-redis.c); the connections are spread over the
 * hosts, a job runs on whichever host reads it, and the server CPU counts every fiberd
 * and the redis-server.
 *
 * The trivial job: the bundled `echo` plugin (args {}) when plugins.list shows it, else
 * `sleep` with {"ms": 0}; FIBERD_BENCH_PLUGIN=NAME picks another (its args are then
 * {"ms": 0}, which spin and sleep take). A job is submitted and waited for in one round
 * trip with `job.run` when the daemon has it; a daemon that answers METHOD_NOT_FOUND gets
 * `job.submit` and then `job.wait` on the id. Either way a job counts once the client holds
 * its final record, and that record must say "done".
 *
 * One thread per connection (a Client is single-threaded); in tput mode each keeps W jobs
 * outstanding, pipelined, answers matched by msgid: it takes every answer that has
 * arrived before it refills the window, so the refills go out in one write, as `fiberctl
 * batch` does and as the pipelined gearmand peer's clients do (gearman-pipe.c). In rate
 * mode one connection sends the
 * jobs on a fixed schedule (ppoll with ns timeouts between sends) and the latency of a
 * job runs from its scheduled send time, so a late send counts against the server too.
 *
 * Layering: this file uses client/ and ipc/ only, as any program talking to fiberd would.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "tests/bench/bench.h"
#include "tests/bench/product.h"
#include "scheduler/base/macro.h"

#ifndef BENCH_FIBERD_BIN
#define BENCH_FIBERD_BIN "build/fiberd"
#endif
#ifndef BENCH_FIBERCTL_BIN
#define BENCH_FIBERCTL_BIN "build/fiberctl"
#endif
#ifndef BENCH_PLUGIN_DIR
#define BENCH_PLUGIN_DIR "build/plugins"
#endif

#define SLOTS 65536 /* requests outstanding per connection at most; a power of two */
#define RECEIVE_TIMEOUT_MS 60000

typedef enum ReqKind {
        REQ_FREE = 0,
        REQ_SUBMIT, /* job.submit: answer {id}, then job.wait */
        REQ_FINAL,  /* job.run or job.wait: answer the final record */
} ReqKind;

/* One request in flight, found by its msgid. */
typedef struct Slot {
        uint32_t msgid;
        ReqKind kind;
        uint64_t seq;   /* the job's number on its connection */
        uint64_t t0_ns; /* when it was (to be) sent */
} Slot;

/* One connection and the thread that drives it. */
typedef struct Conn {
        pthread_t thread;
        Client *client;
        const ProductLoad *load;
        uint64_t jobs;   /* this connection's share of N */
        uint64_t *lat;   /* rate mode: latency per job, ns */
        Slot *slots;     /* SLOTS entries */
        uint64_t done;   /* jobs seen complete */
        uint64_t period; /* rate mode: ns between sends */
} Conn;

/* The trivial job, chosen once per run. */
static char trivial_plugin[64];
static bool trivial_run; /* the daemon has job.run */
/* job.run and job.wait ask for the record keys the client reads (fields: id, state,
 * result, error), as a client of many small jobs does; FIBERD_BENCH_WHOLE_RECORD=1
 * (product-fiberd-whole) takes the whole record, the answer before fields existed. A
 * daemon older than fields answers the whole record anyway. */
static bool trivial_fields;
static const char *const trivial_keys[] = {IPC_KEY_RESULT, IPC_KEY_ERROR};

static void pack_trivial_fields(msgpack_packer *pk)
{
        msgpack_pack_array(pk, ELEMENTSOF(trivial_keys));
        for (size_t i = 0; i < ELEMENTSOF(trivial_keys); i++)
                msgpack_pack_str_with_body(pk, trivial_keys[i], strlen(trivial_keys[i]));
}
/* FIBERD_BENCH_JOB_OPTS: "max_attempts" (3 attempts, never needed) or "after" (after one
 * job done before the run): what a retry plan or a dependency costs a trivial job */
static bool trivial_attempts;
static uint64_t trivial_after; /* 0: none; atomic: renewed by after_renew() */
/* A done job is dropped by retention (retention_max finished jobs kept): the "after" job
 * is renewed every AFTER_RENEW jobs, on a connection of its own, so the one the jobs in
 * flight name is always still kept. */
#define AFTER_RENEW 2000
static Client *after_client;
static pthread_mutex_t after_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t after_sent; /* atomic */

static void die_status(const char *what, const IpcStatus *st)
{
        bench_die("%s: %s%s%s", what, st->code ? st->code : "", st->code ? ": " : "", st->message);
}

/* The private redis-server of the redis rows: its socket, "" when none runs. */
static char bench_redis_socket[100];

/* Starts redis-server on a Unix socket in @s's new temporary directory; dies when it
 * does not start. */
static void redis_start(ProductServer *s)
{
        char path[512];
        char *argv[] = {path, "--port",       "0",  "--unixsocket", s->socket, "--save",
                        "",   "--appendonly", "no", "--dir",        s->dir,    NULL};

        if (!product_find_server("redis-server", path, sizeof(path)))
                bench_die("redis-server not installed (apt-get install redis-server)");
        product_tmpdir(s);
        snprintf(s->socket, sizeof(s->socket), "%s/redis.sock", s->dir);
        if (product_start(s, argv, NULL, NULL) < 0) {
                product_stop(s);
                bench_die("redis-server did not start");
        }
        snprintf(bench_redis_socket, sizeof(bench_redis_socket), "%s", s->socket);
}

static void fiberd_start_workers(ProductServer *s, const char *workers)
{
        static unsigned host;
        char conf[160];
        char *argv[] = {BENCH_FIBERD_BIN,
                        "--plugin-dir",
                        BENCH_PLUGIN_DIR,
                        "--log-level",
                        "warning",
                        "--config",
                        "/dev/null",
                        NULL,
                        NULL,
                        NULL};
        const char *store = getenv("FIBERD_BENCH_STORE");

        if (workers) {
                argv[7] = "--workers";
                argv[8] = (char *)workers;
        }

        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        unsetenv("NOTIFY_SOCKET");
        product_tmpdir(s);
        setenv("STATE_DIRECTORY", s->dir, 1); /* its job store: this run's, not /var/lib */
        if (store && *store) {
                /* the job store backend (daemon/store/store.h): sqlite (the default) or memory */
                FILE *f;
                snprintf(conf, sizeof(conf), "%s/fiberd.conf", s->dir);
                f = fopen(conf, "w");
                if (!f || fprintf(f, "[store]\nbackend = %s\n", store) < 0 ||
                    (!strcmp(store, "redis") && fprintf(f, "redis = unix:%s\nnode = host%u\n",
                                                        bench_redis_socket, host++) < 0) ||
                    /* more [store] keys, one "key = value" per line, to try a setting */
                    (getenv("FIBERD_BENCH_STORE_CONF") &&
                     fprintf(f, "%s\n", getenv("FIBERD_BENCH_STORE_CONF")) < 0) ||
                    /* other sections: the text as given, its section headers included */
                    (getenv("FIBERD_BENCH_CONF") &&
                     fprintf(f, "%s\n", getenv("FIBERD_BENCH_CONF")) < 0) ||
                    fclose(f) != 0)
                        bench_die("cannot write %s", conf);
                argv[6] = conf;
        }
        snprintf(s->socket, sizeof(s->socket), "%s/fiberd.sock", s->dir);
        if (product_start(s, argv, "FIBERD_SOCKET", s->socket) < 0) {
                product_stop(s);
                bench_die("fiberd (%s) did not start", BENCH_FIBERD_BIN);
        }
}

static void fiberd_start(ProductServer *s)
{
        fiberd_start_workers(s, NULL);
}

void product_start_fiberd(ProductServer *s)
{
        fiberd_start_workers(s, NULL);
}

const char *product_fiberctl_path(void)
{
        return BENCH_FIBERCTL_BIN;
}

static Client *connect_or_die(const ProductServer *s)
{
        Client *c;
        IpcStatus st = {0};

        if (client_connect(&c, s->socket, &st) < 0)
                die_status("connect", &st);
        return c;
}

/* A request with params []: wait for its answer; its result (or the server's error)
 * as client_result() gives it. Dies when no answer comes. */
static int call(Client *c, const char *method, IpcMessage *resp, const msgpack_object **ret,
                IpcStatus *st)
{
        uint32_t id;
        int r;

        if (!client_request(c, method, 0, &id))
                bench_die("%s: out of memory", method);
        r = client_call_wait(c, id, resp, RECEIVE_TIMEOUT_MS, st);
        if (r < 0)
                die_status(method, st);
        return client_result(resp, ret, st);
}

static void pack_job(Client *c, const char *method, uint32_t *ret_id)
{
        bool fields = trivial_fields && !strcmp(method, IPC_METHOD_JOB_RUN);
        msgpack_packer *pk = client_request(
                c, method, fields ? IPC_RUN_NPARAMS_FIELDS : IPC_SUBMIT_NPARAMS, ret_id);
        size_t len = strlen(trivial_plugin);

        if (!pk)
                bench_die("%s: out of memory", method);
        msgpack_pack_str_with_body(pk, trivial_plugin, len);
        if (!strcmp(trivial_plugin, "echo")) {
                msgpack_pack_map(pk, 0);
        } else {
                msgpack_pack_map(pk, 1);
                msgpack_pack_str_with_body(pk, "ms", 2);
                msgpack_pack_uint32(pk, 0);
        }
        msgpack_pack_map(pk, trivial_attempts + !!trivial_after);
        if (trivial_attempts) {
                msgpack_pack_str_with_body(pk, IPC_OPT_MAX_ATTEMPTS, strlen(IPC_OPT_MAX_ATTEMPTS));
                msgpack_pack_uint32(pk, 3);
        }
        if (trivial_after) {
                msgpack_pack_str_with_body(pk, IPC_OPT_AFTER, strlen(IPC_OPT_AFTER));
                msgpack_pack_array(pk, 1);
                msgpack_pack_uint64(pk, __atomic_load_n(&trivial_after, __ATOMIC_RELAXED));
        }
        if (fields) {
                msgpack_pack_nil(pk); /* no wait limit */
                pack_trivial_fields(pk);
        }
}

/* Pick the trivial job's plugin and whether job.run exists, on @c. */
static void trivial_choose(Client *c)
{
        const char *forced = getenv("FIBERD_BENCH_PLUGIN");
        const msgpack_object *res, *list;
        IpcMessage resp;
        IpcStatus st = {0};
        uint32_t id;
        int r;

        snprintf(trivial_plugin, sizeof(trivial_plugin), "%s", "sleep");
        if (call(c, IPC_METHOD_PLUGINS_LIST, &resp, &res, &st) < 0)
                die_status(IPC_METHOD_PLUGINS_LIST, &st);
        list = ipc_map_find(res, IPC_KEY_PLUGINS);
        for (uint32_t i = 0; list && list->type == MSGPACK_OBJECT_ARRAY && i < list->via.array.size;
             i++)
                if (ipc_object_streq(ipc_map_find(&list->via.array.ptr[i], IPC_KEY_NAME), "echo"))
                        snprintf(trivial_plugin, sizeof(trivial_plugin), "%s", "echo");
        ipc_message_clear(&resp);
        if (forced && *forced)
                snprintf(trivial_plugin, sizeof(trivial_plugin), "%s", forced);
        trivial_fields = !getenv("FIBERD_BENCH_WHOLE_RECORD");

        pack_job(c, IPC_METHOD_JOB_RUN, &id);
        if (client_call_wait(c, id, &resp, RECEIVE_TIMEOUT_MS, &st) < 0)
                die_status(IPC_METHOD_JOB_RUN, &st);
        r = client_result(&resp, &res, &st);
        if (r == 0)
                trivial_run = true;
        else if (st.code && !strcmp(st.code, IPC_METHOD_NOT_FOUND))
                trivial_run = false;
        else
                die_status(IPC_METHOD_JOB_RUN, &st);
        /* the job the "after" option names: this one, done */
        if (r == 0 && getenv("FIBERD_BENCH_JOB_OPTS") &&
            !strcmp(getenv("FIBERD_BENCH_JOB_OPTS"), "after") &&
            ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &trivial_after, &st) < 0)
                die_status(IPC_METHOD_JOB_RUN, &st);
        trivial_attempts = getenv("FIBERD_BENCH_JOB_OPTS") &&
                           !strcmp(getenv("FIBERD_BENCH_JOB_OPTS"), "max_attempts");
        ipc_message_clear(&resp);
}

static Slot *slot_take(Conn *k, uint32_t msgid, ReqKind kind, uint64_t seq, uint64_t t0_ns)
{
        Slot *s = &k->slots[msgid & (SLOTS - 1)];

        if (s->kind != REQ_FREE)
                bench_die("more than %d requests outstanding on one connection", SLOTS);
        *s = (Slot){.msgid = msgid, .kind = kind, .seq = seq, .t0_ns = t0_ns};
        return s;
}

/* A new "after" job: one job.run echo on after_client, its id. */
static void after_renew(void)
{
        const msgpack_object *res;
        IpcMessage resp;
        IpcStatus st = {0};
        uint64_t id;
        uint32_t msgid;
        msgpack_packer *pk;

        pthread_mutex_lock(&after_lock);
        pk = client_request(after_client, IPC_METHOD_JOB_RUN, IPC_SUBMIT_NPARAMS, &msgid);
        if (!pk)
                bench_die("job.run: out of memory");
        msgpack_pack_str_with_body(pk, "echo", 4);
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 0);
        if (client_call_wait(after_client, msgid, &resp, RECEIVE_TIMEOUT_MS, &st) < 0 ||
            client_result(&resp, &res, &st) < 0 ||
            ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &id, &st) < 0)
                die_status("the after job", &st);
        __atomic_store_n(&trivial_after, id, __ATOMIC_RELAXED);
        ipc_message_clear(&resp);
        pthread_mutex_unlock(&after_lock);
}

static void job_send(Conn *k, uint64_t seq, uint64_t t0_ns)
{
        if (after_client && __atomic_add_fetch(&after_sent, 1, __ATOMIC_RELAXED) % AFTER_RENEW == 0)
                after_renew();
        uint32_t id;

        pack_job(k->client, trivial_run ? IPC_METHOD_JOB_RUN : IPC_METHOD_JOB_SUBMIT, &id);
        slot_take(k, id, trivial_run ? REQ_FINAL : REQ_SUBMIT, seq, t0_ns);
}

/* One answer. Return: true when it completed a job. */
static bool conn_answer(Conn *k, const IpcMessage *m)
{
        Slot *s = &k->slots[m->msgid & (SLOTS - 1)];
        const msgpack_object *res;
        IpcStatus st = {0};
        Slot was;

        if (m->type != IPC_RESPONSE || s->kind == REQ_FREE || s->msgid != m->msgid)
                bench_die("unexpected message (type %d, msgid %u)", (int)m->type, m->msgid);
        was = *s;
        s->kind = REQ_FREE;
        if (client_result(m, &res, &st) < 0)
                die_status(was.kind == REQ_SUBMIT ? IPC_METHOD_JOB_SUBMIT : "job", &st);
        if (was.kind == REQ_SUBMIT) {
                msgpack_packer *pk;
                uint64_t job_id;
                uint32_t id;
                if (ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &job_id, &st) < 0)
                        die_status(IPC_METHOD_JOB_SUBMIT, &st);
                pk = client_request(k->client, IPC_METHOD_JOB_WAIT,
                                    trivial_fields ? IPC_WAIT_NPARAMS_FIELDS : IPC_WAIT_NPARAMS,
                                    &id);
                if (!pk)
                        bench_die("job.wait: out of memory");
                msgpack_pack_uint64(pk, job_id);
                msgpack_pack_nil(pk);
                if (trivial_fields)
                        pack_trivial_fields(pk);
                slot_take(k, id, REQ_FINAL, was.seq, was.t0_ns);
                return false;
        }
        if (!ipc_object_streq(ipc_map_find(res, IPC_KEY_STATE), IPC_STATE_DONE)) {
                IpcStatus why = {0};
                if (ipc_read_error(ipc_map_find(res, IPC_KEY_ERROR), &why) > 0)
                        die_status("a trivial job did not end done", &why);
                bench_die("a trivial job did not end done");
        }
        if (k->lat)
                k->lat[was.seq] = bench_now_ns() - was.t0_ns;
        k->done++;
        return true;
}

/* tput and rss: W jobs outstanding until this connection's share is done. */
static void *conn_closed_loop(void *arg)
{
        Conn *k = arg;
        uint64_t sent = 0, outstanding = 0;
        IpcStatus st = {0};
        IpcMessage m;

        while (k->done < k->jobs) {
                while (outstanding < k->load->window && sent < k->jobs) {
                        job_send(k, sent++, 0);
                        outstanding++;
                }
                if (client_receive(k->client, &m, RECEIVE_TIMEOUT_MS, &st) < 0)
                        die_status("receive", &st);
                do {
                        if (conn_answer(k, &m))
                                outstanding--;
                        ipc_message_clear(&m);
                        /* the answers already here (timeout 0: what is buffered or
                         * readable now; nothing is queued to flush yet) */
                } while (k->done < k->jobs && client_receive(k->client, &m, 0, &st) == 1);
        }
        return NULL;
}

/* rate: send job i at start + i * period; read answers in between. */
static void conn_open_loop(Conn *k)
{
        uint64_t start = bench_now_ns() + NSEC_PER_MSEC, sent = 0;
        IpcStatus st = {0};
        IpcMessage m;

        while (k->done < k->jobs) {
                uint64_t now = bench_now_ns(), next = start + sent * k->period;
                struct pollfd p = {.fd = client_fd(k->client), .events = POLLIN};
                struct timespec ts, *tsp = NULL;
                int r;
                if (sent < k->jobs && now >= next) {
                        job_send(k, sent++, next);
                        if (client_flush(k->client, RECEIVE_TIMEOUT_MS, &st) < 0)
                                die_status("send", &st);
                        continue;
                }
                if (sent < k->jobs) {
                        ts = timespec_store_ns(next - now);
                        tsp = &ts;
                }
                r = ppoll(&p, 1, tsp, NULL);
                if (r < 0 && errno != EINTR)
                        bench_die("ppoll: %s", strerror(errno));
                if (r <= 0)
                        continue;
                while ((r = client_receive(k->client, &m, 0, &st)) == 1) {
                        conn_answer(k, &m);
                        ipc_message_clear(&m);
                }
                if (r != -ETIMEDOUT)
                        die_status("receive", &st);
        }
}

/* product-fiberd-sqlite: the same loads with the sqlite job store, fiberd's default
 * (daemon/store/store.h): what durability costs (bench.c's "job store" rows). */
int bench_product_fiberd_sqlite(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "sqlite", 1);
        return bench_product_fiberd(argc, argv);
}

/* product-fiberd-redis / -redis2: the same loads in fleet mode, 1 or 2 fiberd hosts on
 * one private redis-server (bench.c's "redis store" rows). */
/* product-fiberd-attempts / -after: every trivial job with max_attempts 3 (never used: it
 * succeeds) or after one job done before the run: what the plan costs a job. The store
 * is memory unless FIBERD_BENCH_STORE says otherwise (the sqlite rows set it). */
/* product-fiberd-whole: the trivial jobs answered with the whole job record (21 keys),
 * not the four the client reads: what fields saves. */
int bench_product_fiberd_whole(int argc, char **argv)
{
        setenv("FIBERD_BENCH_WHOLE_RECORD", "1", 1);
        return bench_product_fiberd(argc, argv);
}

int bench_product_fiberd_attempts(int argc, char **argv)
{
        setenv("FIBERD_BENCH_JOB_OPTS", "max_attempts", 1);
        return bench_product_fiberd(argc, argv);
}

int bench_product_fiberd_after(int argc, char **argv)
{
        setenv("FIBERD_BENCH_JOB_OPTS", "after", 1);
        return bench_product_fiberd(argc, argv);
}

int bench_product_fiberd_sqlite_attempts(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "sqlite", 1);
        return bench_product_fiberd_attempts(argc, argv);
}

int bench_product_fiberd_sqlite_after(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "sqlite", 1);
        return bench_product_fiberd_after(argc, argv);
}

/* product-due-redis / -redis2: product-due in fleet mode, 1 or 2 hosts (the due jobs
 * are submitted through the first; they run on whichever host the stream gives them) */
int bench_product_due_redis(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        setenv("FIBERD_BENCH_HOSTS", "1", 1);
        return bench_product_due(argc, argv);
}

int bench_product_due_redis2(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        setenv("FIBERD_BENCH_HOSTS", "2", 1);
        return bench_product_due(argc, argv);
}

int bench_product_fiberd_redis_attempts(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        return bench_product_fiberd_attempts(argc, argv);
}

int bench_product_fiberd_redis_after(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        return bench_product_fiberd_after(argc, argv);
}

int bench_product_fiberd_redis(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        setenv("FIBERD_BENCH_HOSTS", "1", 1);
        return bench_product_fiberd(argc, argv);
}

int bench_product_fiberd_redis2(int argc, char **argv)
{
        setenv("FIBERD_BENCH_STORE", "redis", 1);
        setenv("FIBERD_BENCH_HOSTS", "2", 1);
        return bench_product_fiberd(argc, argv);
}

/* utime + stime so far of every server of the run: the fiberd hosts and redis-server. */
static uint64_t servers_cpu_ns(const ProductServer *srv, unsigned hosts, const ProductServer *rs)
{
        uint64_t ns = rs->pid ? product_cpu_ns(rs->pid) : 0;

        for (unsigned h = 0; h < hosts; h++)
                ns += product_cpu_ns(srv[h].pid);
        return ns;
}

int bench_product_fiberd(int argc, char **argv)
{
        /* the memory store unless told: the peers of rows 12-16 keep nothing either */
        setenv("FIBERD_BENCH_STORE", "memory", 0);
        const char *store = getenv("FIBERD_BENCH_STORE"), *nh = getenv("FIBERD_BENCH_HOSTS");
        bool redis = store && !strcmp(store, "redis");
        unsigned hosts = redis && nh && !strcmp(nh, "2") ? 2 : 1;
        ProductServer srv[2] = {{0}}, rsrv = {0};
        ProductLoad l;
        Conn *conns;
        uint64_t *lat = NULL, t0, t1, cpu0, cpu1, rss = 0;

        product_parse(&l, argc, argv, true);
        conns = calloc(l.conns, sizeof(*conns));
        if (!conns)
                bench_die("out of memory");
        if (l.mode == PRODUCT_RATE && !(lat = calloc(l.jobs, sizeof(*lat))))
                bench_die("out of memory");
        if (redis)
                redis_start(&rsrv);
        for (unsigned h = 0; h < hosts; h++)
                fiberd_start(&srv[h]);
        for (unsigned i = 0; i < l.conns; i++) {
                conns[i].client = connect_or_die(&srv[i % hosts]);
                conns[i].load = &l;
                conns[i].jobs = l.jobs / l.conns + (i < l.jobs % l.conns);
                conns[i].lat = lat;
                conns[i].period = l.rate ? NSEC_PER_SEC / l.rate : 0;
                conns[i].slots = calloc(SLOTS, sizeof(Slot));
                if (!conns[i].slots)
                        bench_die("out of memory");
        }
        trivial_choose(conns[0].client);
        if (trivial_after)
                after_client = connect_or_die(&srv[0]);
        fprintf(stderr, "fiberd-bench: fiberd trivial job: %s through %s\n", trivial_plugin,
                trivial_run ? "job.run" : "job.submit + job.wait");

        cpu0 = servers_cpu_ns(srv, hosts, &rsrv);
        t0 = bench_now_ns();
        if (l.mode == PRODUCT_RATE) {
                conn_open_loop(&conns[0]);
        } else {
                for (unsigned i = 0; i < l.conns; i++)
                        if (pthread_create(&conns[i].thread, NULL, conn_closed_loop, &conns[i]))
                                bench_die("pthread_create failed");
                for (unsigned i = 0; i < l.conns; i++)
                        pthread_join(conns[i].thread, NULL);
        }
        t1 = bench_now_ns();
        cpu1 = servers_cpu_ns(srv, hosts, &rsrv);
        if (l.mode == PRODUCT_RSS)
                rss = product_rss_bytes(srv[0].pid);

        for (unsigned i = 0; i < l.conns; i++) {
                client_free(conns[i].client);
                free(conns[i].slots);
        }
        after_client = client_free(after_client);
        for (unsigned h = 0; h < hosts; h++)
                product_stop(&srv[h]);
        product_stop(&rsrv);
        if (l.mode == PRODUCT_RSS)
                printf("%.1f\n", (double)rss / (1024.0 * 1024.0));
        else
                product_report(&l, t1 - t0, cpu1 - cpu0, lat);
        free(lat);
        free(conns);
        return 0;
}

bool bench_product_fiberd_built(char *why, size_t size)
{
        static const char *const need[] = {BENCH_FIBERD_BIN, BENCH_FIBERCTL_BIN, BENCH_PLUGIN_DIR};

        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
                if (access(need[i], i < 2 ? X_OK : R_OK) < 0) {
                        snprintf(why, size, "%s not built (make all)", need[i]);
                        return false;
                }
        return true;
}

int bench_product_skynet(int argc, char **argv)
{
        uint64_t leaves = bench_parse_count(argc > 1 ? argv[1] : NULL, 1000000), t0, t1;
        char size[40], want[40], out[4096] = "";
        ProductServer srv = {0};
        int pipefd[2], status;
        size_t got = 0;
        ssize_t n;
        pid_t pid;

        snprintf(size, sizeof(size), "size=%llu", (unsigned long long)leaves);
        snprintf(want, sizeof(want), "%llu", (unsigned long long)(leaves * (leaves - 1) / 2));
        fiberd_start(&srv);
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                bench_die("pipe: %s", strerror(errno));
        t0 = bench_now_ns();
        pid = fork();
        if (pid < 0)
                bench_die("fork: %s", strerror(errno));
        if (pid == 0) {
                char *args[] = {BENCH_FIBERCTL_BIN, "submit", "skynet", size,
                                "div=10",           "--wait", NULL};
                dup2(pipefd[1], STDOUT_FILENO);
                setenv("FIBERD_SOCKET", srv.socket, 1);
                execv(args[0], args);
                _exit(127);
        }
        close(pipefd[1]);
        while (got < sizeof(out) - 1 && (n = read(pipefd[0], out + got, sizeof(out) - 1 - got)) > 0)
                got += (size_t)n;
        out[got] = '\0';
        close(pipefd[0]);
        waitpid(pid, &status, 0);
        t1 = bench_now_ns();
        product_stop(&srv);
        if (!WIFEXITED(status) || WEXITSTATUS(status))
                bench_die("fiberctl submit skynet --wait failed (status 0x%x): %.200s", status,
                          out);
        if (!strstr(out, want))
                bench_die("skynet: no sum %s in fiberctl's output: %.200s", want, out);
        printf("%.1f\n", (double)(t1 - t0) / (double)NSEC_PER_MSEC);
        return 0;
}

/* One job @plugin {"ms": @ms} through @method; its answer's result map in @resp. */
static void job_ms(Client *c, const char *method, const char *plugin, uint32_t ms, IpcMessage *resp)
{
        const msgpack_object *res;
        IpcStatus st = {0};
        uint32_t id;
        msgpack_packer *pk = client_request(c, method, IPC_SUBMIT_NPARAMS, &id);

        if (!pk)
                bench_die("%s: out of memory", method);
        msgpack_pack_str_with_body(pk, plugin, strlen(plugin));
        msgpack_pack_map(pk, 1);
        msgpack_pack_str_with_body(pk, "ms", 2);
        msgpack_pack_uint32(pk, ms);
        msgpack_pack_map(pk, 0);
        if (client_call_wait(c, id, resp, RECEIVE_TIMEOUT_MS, &st) < 0 ||
            client_result(resp, &res, &st) < 0)
                die_status(method, &st);
}

int bench_product_preempt(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 200), *lat;
        ProductServer srv = {0};
        IpcMessage resp;
        Client *c;

        lat = calloc(n, sizeof(*lat));
        if (!lat)
                bench_die("out of memory");
        /* one job worker; two CPU-bound jobs (the dispatcher would start a queued one on
         * a worker a finished job freed), each far longer than the measurement */
        fiberd_start_workers(&srv, "1");
        c = connect_or_die(&srv);
        for (int i = 0; i < 2; i++) {
                job_ms(c, IPC_METHOD_JOB_SUBMIT, "spin", 600000, &resp);
                ipc_message_clear(&resp);
        }
        usleep(50000); /* both are running: the spin plugin started on the worker */
        for (uint64_t i = 0; i < n; i++) {
                uint64_t t0 = bench_now_ns();
                job_ms(c, IPC_METHOD_JOB_RUN, "sleep", 0, &resp);
                lat[i] = bench_now_ns() - t0;
                ipc_message_clear(&resp);
                usleep(1000 + (useconds_t)(i % 7) * 137); /* land anywhere in a quota */
        }
        client_free(c);
        product_stop(&srv);
        qsort(lat, n, sizeof(*lat), u64_compare);
        printf("%.1f %.1f\n", (double)lat[n / 2] / 1000, (double)lat[(n * 99) / 100] / 1000);
        free(lat);
        return 0;
}

/* ------------------------------------------------------------ due jobs -------------- */

/*
 * product-due FAR RATE SECONDS: what a due set costs. FAR echo jobs are scheduled at
 * random times over the next hour (from 2 minutes on: none comes due during the run), and
 * the RSS they add is divided among them; then RATE jobs a second for SECONDS seconds
 * are submitted with delay_ms 1000, so RATE a second come due beside the FAR ones, and
 * each one's lateness is its record's started_ms - run_at_ms (milliseconds: the record's
 * resolution). Prints "p50 p99 bytes": lateness p50 and p99 in ms, resident bytes per
 * scheduled job. The memory store unless FIBERD_BENCH_STORE says otherwise.
 */

/* Sends @n requests built by @pack(@i) on @c, at most @window outstanding, and hands
 * each answer's result to @take (may be NULL). Dies on an error answer. */
static void pipeline(Client *c, uint64_t n, unsigned window,
                     void (*pack)(Client *c, uint64_t i, uint32_t *msgid, void *arg),
                     void (*take)(const msgpack_object *res, void *arg), void *arg)
{
        uint64_t sent = 0, got = 0;
        IpcStatus st = {0};
        IpcMessage m;

        while (got < n) {
                const msgpack_object *res;
                uint32_t msgid;
                while (sent < n && sent - got < window)
                        pack(c, sent++, &msgid, arg);
                if (client_receive(c, &m, RECEIVE_TIMEOUT_MS, &st) < 0)
                        die_status("receive", &st);
                if (client_result(&m, &res, &st) < 0)
                        die_status("a pipelined request", &st);
                if (take)
                        take(res, arg);
                ipc_message_clear(&m);
                got++;
        }
}

typedef struct DueRun {
        uint64_t base_ms; /* CLOCK_REALTIME at the start */
        uint64_t *ids;    /* the near jobs' ids, in answer order */
        uint64_t n_ids;
        uint64_t *late_ms; /* their lateness */
        uint64_t n_late;
        uint64_t *again; /* ids whose record did not say started_ms yet (a fleet's shared
                          * record is written after the host counted the job done) */
        uint64_t n_again;
} DueRun;

static uint64_t due_wall_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* job.submit echo {} {@key: @value} */
static void pack_echo_at(Client *c, const char *key, uint64_t value, uint32_t *msgid)
{
        msgpack_packer *pk = client_request(c, IPC_METHOD_JOB_SUBMIT, IPC_SUBMIT_NPARAMS, msgid);

        if (!pk)
                bench_die("job.submit: out of memory");
        msgpack_pack_str_with_body(pk, "echo", 4);
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 1);
        msgpack_pack_str_with_body(pk, key, strlen(key));
        msgpack_pack_uint64(pk, value);
}

static void pack_far(Client *c, uint64_t i, uint32_t *msgid, void *arg)
{
        const DueRun *d = arg;
        /* spread over [2 min, 1 h) from the start, a multiplicative hash of i */
        uint64_t off = 120000 + (i * 0x9e3779b97f4a7c15ULL >> 11) % (3600000 - 120000);

        pack_echo_at(c, IPC_OPT_RUN_AT, d->base_ms + off, msgid);
}

static void take_id(const msgpack_object *res, void *arg)
{
        DueRun *d = arg;
        IpcStatus st = {0};

        if (ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &d->ids[d->n_ids++], &st) < 0)
                die_status(IPC_METHOD_JOB_SUBMIT, &st);
}

static void pack_status(Client *c, uint64_t i, uint32_t *msgid, void *arg)
{
        const DueRun *d = arg;
        msgpack_packer *pk = client_request(c, IPC_METHOD_JOB_STATUS, IPC_JOB_NPARAMS, msgid);

        if (!pk)
                bench_die("job.status: out of memory");
        msgpack_pack_uint64(pk, d->ids[i]);
}

static void take_lateness(const msgpack_object *res, void *arg)
{
        DueRun *d = arg;
        IpcStatus st = {0};
        uint64_t started, due, id;
        const msgpack_object *s = ipc_map_find(res, IPC_KEY_STARTED_MS);

        if ((!s || s->type == MSGPACK_OBJECT_NIL) &&
            ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &id, &st) == 0) {
                d->again[d->n_again++] = id; /* asked again (product_due()) */
                return;
        }
        if (ipc_read_uint(s, "started_ms", &started, &st) < 0 ||
            ipc_read_uint(ipc_map_find(res, IPC_KEY_RUN_AT_MS), "run_at_ms", &due, &st) < 0)
                die_status("a due job's record", &st);
        d->late_ms[d->n_late++] = started > due ? started - due : 0;
}

/* stats' jobs.done */
static uint64_t jobs_done(Client *c)
{
        const msgpack_object *res;
        IpcMessage resp;
        IpcStatus st = {0};
        uint64_t done = 0;

        if (call(c, IPC_METHOD_STATS, &resp, &res, &st) < 0 ||
            ipc_read_uint(ipc_map_find(ipc_map_find(res, IPC_KEY_JOBS), IPC_KEY_DONE), "done",
                          &done, &st) < 0)
                die_status(IPC_METHOD_STATS, &st);
        ipc_message_clear(&resp);
        return done;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

int bench_product_due(int argc, char **argv)
{
        const char *store, *nh = getenv("FIBERD_BENCH_HOSTS");
        char conf[160];
        ProductServer srv[2] = {{0}}, rsrv = {0};
        DueRun d = {0};
        Client *c, *c2 = NULL;
        uint64_t far, rate, secs, near, rss0, rss1, start, deadline;
        unsigned hosts;
        bool redis;

        if (argc != 4)
                bench_die("usage: product-due FAR RATE SECONDS");
        far = strtoull(argv[1], NULL, 10);
        rate = strtoull(argv[2], NULL, 10);
        secs = strtoull(argv[3], NULL, 10);
        near = rate * secs;
        if (!rate || !secs)
                bench_die("product-due: RATE and SECONDS must be positive");
        /* room for every job of the run, as an operator would configure it */
        snprintf(conf, sizeof(conf),
                 "[jobs]\nmax_queued = %llu\nmax_queued_per_user = 0\nretention_max = %llu",
                 (unsigned long long)(far + near + 1000), (unsigned long long)(near + 1000));
        setenv("FIBERD_BENCH_CONF", conf, 1);
        setenv("FIBERD_BENCH_STORE", "memory", 0);
        store = getenv("FIBERD_BENCH_STORE");
        redis = !strcmp(store, "redis");
        hosts = redis && nh && !strcmp(nh, "2") ? 2 : 1;
        d.ids = calloc(near, sizeof(*d.ids));
        d.late_ms = calloc(near, sizeof(*d.late_ms));
        d.again = calloc(near, sizeof(*d.again));
        if (!d.ids || !d.late_ms || !d.again)
                bench_die("out of memory");
        if (redis)
                redis_start(&rsrv);
        for (unsigned h = 0; h < hosts; h++)
                fiberd_start(&srv[h]);
        c = connect_or_die(&srv[0]);
        if (hosts > 1)
                c2 = connect_or_die(&srv[1]);

        /* the memory a scheduled job costs: fiberd's, or in a fleet the redis-server's
         * (the schedule set and the records live there) */
        rss0 = product_rss_bytes(redis ? rsrv.pid : srv[0].pid);
        d.base_ms = due_wall_ms();
        pipeline(c, far, 512, pack_far, NULL, &d);
        rss1 = product_rss_bytes(redis ? rsrv.pid : srv[0].pid);

        /* RATE a second, each due a second after it is sent */
        start = bench_now_ns();
        for (uint64_t i = 0; i < near; i++) {
                IpcStatus st = {0};
                IpcMessage m;
                const msgpack_object *res;
                uint32_t msgid;
                product_wait_until(start + i * (NSEC_PER_SEC / rate));
                pack_echo_at(c, IPC_OPT_DELAY_MS, 1000, &msgid);
                if (client_flush(c, RECEIVE_TIMEOUT_MS, &st) < 0)
                        die_status("send", &st);
                while (client_receive(c, &m, 0, &st) == 1) {
                        if (client_result(&m, &res, &st) < 0)
                                die_status(IPC_METHOD_JOB_SUBMIT, &st);
                        take_id(res, &d);
                        ipc_message_clear(&m);
                }
        }
        while (d.n_ids < near) {
                IpcStatus st = {0};
                IpcMessage m;
                const msgpack_object *res;
                if (client_receive(c, &m, RECEIVE_TIMEOUT_MS, &st) < 0 ||
                    client_result(&m, &res, &st) < 0)
                        die_status(IPC_METHOD_JOB_SUBMIT, &st);
                take_id(res, &d);
                ipc_message_clear(&m);
        }
        deadline = bench_now_ns() + 60 * NSEC_PER_SEC;
        while (jobs_done(c) + (c2 ? jobs_done(c2) : 0) < near) {
                if (bench_now_ns() > deadline)
                        bench_die("product-due: the due jobs did not all run within a minute");
                product_wait_until(bench_now_ns() + 20 * NSEC_PER_MSEC);
        }
        pipeline(c, near, 512, pack_status, take_lateness, &d);
        while (d.n_again) {
                uint64_t n = d.n_again;
                if (bench_now_ns() > deadline)
                        bench_die("product-due: %llu due jobs counted done have no started_ms "
                                  "in their records after a minute",
                                  (unsigned long long)n);
                memcpy(d.ids, d.again, n * sizeof(*d.ids));
                d.n_again = 0;
                product_wait_until(bench_now_ns() + 20 * NSEC_PER_MSEC);
                pipeline(c, n, 512, pack_status, take_lateness, &d);
        }
        client_free(c);
        client_free(c2);
        for (unsigned h = 0; h < hosts; h++)
                product_stop(&srv[h]);
        product_stop(&rsrv);

        qsort(d.late_ms, d.n_late, sizeof(*d.late_ms), cmp_u64);
        printf("%llu %llu %.0f\n", (unsigned long long)d.late_ms[d.n_late / 2],
               (unsigned long long)d.late_ms[d.n_late * 99 / 100],
               (double)(rss1 > rss0 ? rss1 - rss0 : 0) / (double)(far ? far : 1));
        free(d.ids);
        free(d.late_ms);
        free(d.again);
        return 0;
}

/* ------------------------------------------------------------ finished records ------ */

/*
 * product-record N: resident bytes per finished trivial job record. A warm-up of 1,000
 * echo jobs (args {}) fills the allocator's arenas and the job table's hash, then N more
 * run to their end on one connection, 64 outstanding; every record stays (retention is
 * raised to keep them all: FIBERD_BENCH_CONF overrides). Prints "bytes": (RSS after the N
 * - RSS after the warm-up) / N. The memory store unless FIBERD_BENCH_STORE says
 * otherwise, so the figure is the daemon's own, not sqlite's page cache.
 */
int bench_product_record(int argc, char **argv)
{
        char conf[256];
        ProductServer srv = {0};
        ProductLoad l = {.mode = PRODUCT_TPUT, .conns = 1, .window = 64};
        Conn k = {.load = &l};
        uint64_t n, rss0, rss1;

        if (argc != 2 || !(n = strtoull(argv[1], NULL, 10)))
                bench_die("usage: product-record N");
        snprintf(conf, sizeof(conf),
                 "[jobs]\nretention_max = %llu\nretention_max_per_user = %llu\n"
                 "max_bytes_per_user = 0\nmax_bytes = 0",
                 (unsigned long long)(n + 2000), (unsigned long long)(n + 2000));
        setenv("FIBERD_BENCH_CONF", conf, 0);
        setenv("FIBERD_BENCH_STORE", "memory", 0);
        setenv("FIBERD_BENCH_PLUGIN", "echo", 0);
        fiberd_start(&srv);
        k.client = connect_or_die(&srv);
        k.slots = calloc(SLOTS, sizeof(Slot));
        if (!k.slots)
                bench_die("out of memory");
        trivial_choose(k.client);

        k.jobs = 1000;
        conn_closed_loop(&k);
        rss0 = product_rss_bytes(srv.pid);
        k.done = 0;
        k.jobs = n;
        conn_closed_loop(&k);
        rss1 = product_rss_bytes(srv.pid);

        client_free(k.client);
        free(k.slots);
        product_stop(&srv);
        printf("%.0f\n", (double)(rss1 > rss0 ? rss1 - rss0 : 0) / (double)n);
        return 0;
}
