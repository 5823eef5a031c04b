/* SPDX-License-Identifier: MIT */
/*
 * daemon_servers.c — the server group's worker count ([server] workers, --server-workers):
 * fiberd with 1, 2 and 4 server workers (4 oversubscribes a 2-core machine) serves 16
 * connections that each pipeline 64 job.submit and then 64 job.wait, every answer the
 * right one (each job echoes a message naming its connection and index); the stats
 * method, `fiberctl stats` and `fiberctl top` show the server group's workers, and its worker threads
 * exist (fiberd-sr-wN: the group "fiberd-srv" cut to 9 characters, worker.c). --check-config prints the key and the count it resolves
 * to; a reload that changes it says it needs a restart. Client threads report failures
 * as text; the test thread asserts (criterion's asserts belong to the test's thread).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

#define CONNS 16
#define JOBS 64

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_servers, .fini = teardown, .timeout = 120);

typedef struct ConnThread {
        pthread_t thread;
        int index;
        char error[320]; /* "" = every answer right */
} ConnThread;

static void *conn_main(void *arg)
{
        ConnThread *t = arg;
        uint32_t msgids[JOBS];
        uint64_t ids[JOBS];
        IpcStatus st = {0};
        char msg[32];
        Client *c;

        if (client_connect(&c, fd_.sock, &st) < 0) {
                snprintf(t->error, sizeof(t->error), "connect: %s", st.message);
                return NULL;
        }
        /* every submission on the wire before the first answer is read: pipelined */
        for (int i = 0; i < JOBS; i++) {
                msgpack_packer *pk = client_request(c, "job.submit", 2, &msgids[i]);

                snprintf(msg, sizeof(msg), "c%d-j%d", t->index, i);
                ipc_pack_cstr(pk, "echo");
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_cstr(pk, "msg", msg);
        }
        for (int i = 0; i < JOBS && !t->error[0]; i++) {
                const msgpack_object *res;
                IpcMessage m;

                if (client_call_wait(c, msgids[i], &m, 30000, &st) != 1) {
                        snprintf(t->error, sizeof(t->error), "submit %d: %s", i, st.message);
                        break;
                }
                if (client_result(&m, &res, &st) < 0)
                        snprintf(t->error, sizeof(t->error), "submit %d: %s", i, st.message);
                else
                        ids[i] = map_uint(res, "id");
                ipc_message_clear(&m);
        }
        for (int i = 0; i < JOBS && !t->error[0]; i++) {
                msgpack_packer *pk = client_request(c, "job.wait", 2, &msgids[i]);
                msgpack_pack_uint64(pk, ids[i]);
                msgpack_pack_uint64(pk, 60000);
        }
        for (int i = 0; i < JOBS && !t->error[0]; i++) {
                const msgpack_object *rec;
                IpcMessage m;

                if (client_call_wait(c, msgids[i], &m, 60000, &st) != 1) {
                        snprintf(t->error, sizeof(t->error), "wait %d: %s", i, st.message);
                        break;
                }
                snprintf(msg, sizeof(msg), "c%d-j%d", t->index, i);
                if (client_result(&m, &rec, &st) < 0)
                        snprintf(t->error, sizeof(t->error), "wait %d: %s", i, st.message);
                else if (strcmp(map_str(rec, "state"), "done") != 0)
                        snprintf(t->error, sizeof(t->error), "job %lu is %s", (unsigned long)ids[i],
                                 map_str(rec, "state"));
                else if (strcmp(map_str(map_get(rec, "result"), "msg"), msg) != 0)
                        snprintf(t->error, sizeof(t->error), "job %lu answered '%s', not '%s'",
                                 (unsigned long)ids[i], map_str(map_get(rec, "result"), "msg"),
                                 msg);
                ipc_message_clear(&m);
        }
        client_free(c);
        return NULL;
}

/* Threads of fiberd named @prefix* (/proc/PID/task/TID/comm). */
static unsigned threads_named(pid_t pid, const char *prefix)
{
        char path[320], comm[32];
        unsigned n = 0;
        struct dirent *e;
        DIR *dir;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        dir = opendir(path);
        cr_assert(dir, "cannot read %s", path);
        while ((e = readdir(dir))) {
                FILE *f;
                if (e->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, e->d_name);
                f = fopen(path, "r");
                if (!f)
                        continue; /* the thread ended meanwhile */
                if (fgets(comm, sizeof(comm), f) && strncmp(comm, prefix, strlen(prefix)) == 0)
                        n++;
                fclose(f);
        }
        closedir(dir);
        return n;
}

/* The stats method's "server" group: its workers (asserts it is there). */
static uint64_t stats_server_workers(Client *c)
{
        const msgpack_object *groups;
        uint64_t workers = 0;
        bool found = false;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "stats: %s", rp.st.message);
        groups = map_get(rp.result, "groups");
        cr_assert(groups && groups->type == MSGPACK_OBJECT_ARRAY, "stats has no groups");
        for (uint32_t i = 0; i < groups->via.array.size; i++)
                if (strcmp(map_str(&groups->via.array.ptr[i], "name"), "server") == 0) {
                        workers = map_uint(&groups->via.array.ptr[i], "workers");
                        found = true;
                }
        reply_clear(&rp);
        cr_assert(found, "stats lists no server group");
        return workers;
}

/* `fiberctl @verb` (stats; top, which draws one plain frame into a pipe) names the
 * server group with @n workers on its row. */
static bool fiberctl_shows_server_workers(const char *verb, unsigned n)
{
        char cmd[512], line[512];
        bool seen = false;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "%s -s %s %s 2>&1 | cat", FIBERCTL_BIN, fd_.sock, verb);
        p = popen(cmd, "r");
        cr_assert(p, "popen %s", cmd);
        while (fgets(line, sizeof(line), p)) {
                unsigned w;
                if (sscanf(line, "server %u", &w) == 1 && w == n)
                        seen = true;
        }
        pclose(p);
        return seen;
}

/* Returns the server workers fiberd's stats report once every connection was answered. */
static unsigned serve_many_connections(unsigned server_workers)
{
        static ConnThread conns[CONNS];
        char conf[64], logline[64];
        FiberdOpts o = {.config = conf, .plugins = "echo", .workers = 2};
        Client *c;
        unsigned reported;

        snprintf(conf, sizeof(conf), "[server]\nworkers = %u\n", server_workers);
        fiberd_start(&fd_, &o);
        snprintf(logline, sizeof(logline), "server group: %u worker(s)", server_workers);
        cr_assert(fiberd_log_contains(&fd_, logline), "the start does not log '%s'", logline);
        /* Each worker names its thread as it starts, which may be after the log line:
         * wait for the names (a condition, not a time), then require the exact count. */
        unsigned named;
        uint64_t until = fiberd_now_ms() + 10000;
        while ((named = threads_named(fd_.pid, "fiberd-sr-w")) < server_workers &&
               fiberd_now_ms() < until)
                usleep(10000); /* polling a condition */
        cr_assert_eq(named, server_workers, "fiberd runs %u server worker threads, not %u", named,
                     server_workers);

        memset(conns, 0, sizeof(conns));
        for (int i = 0; i < CONNS; i++) {
                conns[i].index = i;
                cr_assert(pthread_create(&conns[i].thread, NULL, conn_main, &conns[i]) == 0);
        }
        for (int i = 0; i < CONNS; i++)
                pthread_join(conns[i].thread, NULL);
        for (int i = 0; i < CONNS; i++)
                cr_assert_str_eq(conns[i].error, "", "connection %d: %s", i, conns[i].error);

        c = fiberd_connect(&fd_);
        reported = stats_server_workers(c);
        client_free(c);
        cr_assert(fiberctl_shows_server_workers("stats", server_workers),
                  "fiberctl stats does not show the server group with %u workers", server_workers);
        cr_assert(fiberctl_shows_server_workers("top", server_workers),
                  "fiberctl top does not show the server group with %u workers", server_workers);
        return reported;
}

Test(daemon_servers, one_server_worker_answers_sixteen_pipelined_connections)
{
        cr_assert_eq(serve_many_connections(1), 1u, "stats report another server worker count");
}

Test(daemon_servers, two_server_workers_answer_sixteen_pipelined_connections)
{
        cr_assert_eq(serve_many_connections(2), 2u, "stats report another server worker count");
}

Test(daemon_servers, four_server_workers_on_two_cores_answer_every_request)
{
        cr_assert_eq(serve_many_connections(4), 4u, "stats report another server worker count");
}

/* Runs `fiberd @args` through sh, stdout and stderr into @out. Returns the exit status. */
static int run_fiberd(const char *args, char *out, size_t size)
{
        char cmd[1024];

        snprintf(cmd, sizeof(cmd), "%s %s 2>&1", FIBERD_BIN, args);
        return fiberd_sh(cmd, out, size);
}

Test(daemon_servers, check_config_shows_the_key_and_the_count_it_resolves_to)
{
        static char out[16384];
        char dir[] = "/tmp/fiberd-servers-XXXXXX", path[128], args[256], want[96];
        cpu_set_t set;
        unsigned ncpus, autos;
        FILE *f;

        cr_assert(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fiberd.conf", dir);

        /* the default: one, as fiberd always ran */
        cr_assert_eq(run_fiberd("--check-config --socket /tmp/x.sock --config /dev/null", out,
                                sizeof(out)),
                     0, "%s", out);
        cr_assert(strstr(out, "[server]\nworkers = 1\n"), "%s", out);
        cr_assert(strstr(out, "# server group on this machine: 1 worker(s)"), "%s", out);

        /* the flag wins over the file */
        f = fopen(path, "w");
        cr_assert(f);
        fputs("[server]\nworkers = 3\n", f);
        fclose(f);
        snprintf(args, sizeof(args), "--check-config --socket /tmp/x.sock --config %s", path);
        cr_assert_eq(run_fiberd(args, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "[server]\nworkers = 3\n"), "%s", out);
        snprintf(args, sizeof(args),
                 "--check-config --socket /tmp/x.sock --config %s --server-workers 2", path);
        cr_assert_eq(run_fiberd(args, out, sizeof(out)), 0, "%s", out);
        cr_assert(strstr(out, "[server]\nworkers = 2\n"), "%s", out);
        cr_assert(strstr(out, "# server group on this machine: 2 worker(s)"), "%s", out);

        /* 0: one per 8 CPUs this process may use, 1..8 */
        cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
        ncpus = (unsigned)CPU_COUNT(&set);
        autos = (ncpus + 7) / 8;
        autos = autos < 1 ? 1 : autos > 8 ? 8 : autos;
        snprintf(args, sizeof(args),
                 "--check-config --socket /tmp/x.sock --config /dev/null --server-workers 0");
        cr_assert_eq(run_fiberd(args, out, sizeof(out)), 0, "%s", out);
        snprintf(want, sizeof(want), "# server group on this machine: %u worker(s)", autos);
        cr_assert(strstr(out, "[server]\nworkers = 0\n") && strstr(out, want), "want '%s': %s",
                  want, out);

        /* out of range: the file's line named; the flag's usage error */
        f = fopen(path, "w");
        cr_assert(f);
        fputs("[server]\nworkers = 65\n", f);
        fclose(f);
        snprintf(args, sizeof(args), "--check-config --socket /tmp/x.sock --config %s", path);
        cr_assert_eq(run_fiberd(args, out, sizeof(out)), 1, "%s", out);
        cr_assert(strstr(out, ":2: [server] workers: bad value '65'"), "%s", out);
        cr_assert_eq(run_fiberd("--server-workers 65", out, sizeof(out)), 64, "%s", out);
        cr_assert(strstr(out, "--server-workers wants 0..64"), "%s", out);
        unlink(path);
        rmdir(dir);
}

Test(daemon_servers, a_reload_says_the_server_workers_need_a_restart)
{
        FiberdOpts o = {.config = "[server]\nworkers = 2\n", .plugins = "echo", .notify = true};
        char conf[256];
        bool said = false;
        Client *c;
        FILE *f;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[server]\nworkers = 1\n", f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000), "the reload did not end");
        for (int i = 0; i < 1000 && !said; i++) {
                said = fiberd_log_contains(&fd_, "needs a restart (running on the old values "
                                                 "until then): [server] workers");
                if (!said)
                        usleep(10000);
        }
        cr_assert(said, "the reload does not name [server] workers as needing a restart");
        /* and it still runs on two */
        c = fiberd_connect(&fd_);
        cr_assert_eq(stats_server_workers(c), 2);
        client_free(c);
}
