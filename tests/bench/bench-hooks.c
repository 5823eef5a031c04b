/* SPDX-License-Identifier: MIT */
/*
 * bench-hooks.c — the hooks rows (scheduler/hook.c): plugin code that makes plain
 * blocking C library calls, run as fiberd jobs, against Go making the same raw blocking
 * system calls from goroutines; libcurl in a plugin against Go's net/http; and what a
 * hooked call costs when it does not need to park.
 *
 *  hooks-fiberd CALL N   a fresh fiberd (2 job workers, max_running 16384, the memory
 *                  store) runs N jobs, each one 100 ms blocking call, submitted all
 *                  (job.submit, pipelined) and then waited for all (job.wait, pipelined)
 *                  through its socket with the C client. CALL: sleep (the bundled plugin,
 *                  host->sleep_until: the floor), usleep or poll (block_calls: usleep(),
 *                  poll(NULL, 0, 100)), read (block_calls' connect_recv: connect() to
 *                  the slow Unix-socket server, then a blocking read() of the byte it
 *                  sends 100 ms after the accept). Prints "ms peak_threads added": submit
 *                  of the first to the final record of the last, the most threads the
 *                  fiberd process had meanwhile (/proc/PID/status, sampled every ms),
 *                  and how many of them the idle daemon (connected, before the first
 *                  submit) did not have.
 *  hooks-curl N    the same shape with N curl_fetch jobs (libcurl's easy interface in
 *                  the plugin) against the slow HTTP server, which answers 50 ms after
 *                  each request head. Prints "ms peak_threads added".
 *  hooks-go CALL N  the Go peer (its path in $FIBERD_BENCH_GO, set by the table) with the
 *                  same slow server where one is needed: CALL nanosleep, poll, read (N
 *                  goroutines, each one raw blocking syscall: syscall.Nanosleep, the
 *                  poll(2) syscall, read(2) of a blocking Unix socket) or http (N
 *                  goroutines, net/http GETs), GOMAXPROCS=2. Prints "ms peak_threads"
 *                  of the Go process, sampled the same way.
 *  hook-cost thread|fiber [N]   ns per poll(&pfd, 1, 1000) of a pipe that holds a byte
 *                  (ready: nothing waits, nothing parks), N calls in 60 batches that
 *                  alternate poll() — in this binary the hook (libsched.a's hook.o
 *                  defines it, so this file's calls bind to it) — and the C library's own
 *                  poll() (dlsym(RTLD_NEXT), as the hook finds it),
 *                  no hook at all. Prints "hooked_ns real_ns", each the best of its 30
 *                  batches: alternating in one process keeps a noisy neighbour's burst
 *                  from landing on one side only. thread: on this plain thread (the
 *                  hook's early exit); fiber: on a fiber of a 1-worker group with
 *                  SchedControl.hook_blocking_calls (the hook's path that polls with a
 *                  zero timeout first, finds the fd ready and does not park).
 *
 * fiberd gets a plugin directory of its own holding the bundled sleep.so and the test
 * plugins block_calls.so and curl_fetch.so (tests/plugins/, built by `make`), copies,
 * as the loader refuses symbolic links. The bench runs as root, so no per-user limit
 * applies; [ipc] max_in_flight is raised so the waits can all be outstanding.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/client.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/sched.h"
#include "tests/bench/bench.h"
#include "tests/bench/product.h"
#include "tests/bench/slow-server.h"

#ifndef BENCH_FIBERD_BIN
#define BENCH_FIBERD_BIN "build/fiberd"
#endif
#ifndef BENCH_PLUGIN_DIR
#define BENCH_PLUGIN_DIR "build/plugins"
#endif
#ifndef BENCH_TEST_PLUGIN_DIR
#define BENCH_TEST_PLUGIN_DIR "build/tests/plugins"
#endif

#define HOOKS_CALL_MS 100 /* each blocking call, rows 22 */
#define HOOKS_HTTP_MS 50  /* the HTTP server's delay, row 23 */
#define HOOKS_JOB_WORKERS "2"
#define SUBMIT_WINDOW 256
#define WAIT_WINDOW 2048 /* < max_in_flight below */
#define SLOTS 65536      /* msgid -> job index; > either window, a power of two */
#define RECEIVE_TIMEOUT_MS 60000

static const char hooks_config[] = "[fiberd]\nworkers = " HOOKS_JOB_WORKERS "\n"
                                   "[jobs]\nmax_running = 16384\nmax_queued = 1000000\n"
                                   "retention_max = 1000000\n"
                                   "[ipc]\nmax_in_flight = 4096\n"
                                   "[store]\nbackend = memory\n";

/* ------------------------------------------------------------------ threads ------- */

/* Threads: of process @pid now, 0 when it is gone. */
static unsigned threads_of(pid_t pid)
{
        char path[64], line[128];
        unsigned n = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "Threads: %u", &n) == 1)
                        break;
        if (f)
                fclose(f);
        return n;
}

/* Samples a process's thread count every millisecond on a thread of its own. */
typedef struct ThreadSampler {
        pid_t pid;
        pthread_t thread;
        unsigned peak;
        bool stop; /* atomic */
} ThreadSampler;

static void *sampler_thread(void *arg)
{
        ThreadSampler *ts = arg;

        while (!__atomic_load_n(&ts->stop, __ATOMIC_ACQUIRE)) {
                unsigned n = threads_of(ts->pid);
                if (n > ts->peak)
                        ts->peak = n;
                usleep(1000);
        }
        return NULL;
}

static void sampler_start(ThreadSampler *ts, pid_t pid)
{
        *ts = (ThreadSampler){.pid = pid};
        if (pthread_create(&ts->thread, NULL, sampler_thread, ts))
                bench_die("pthread_create failed");
}

static unsigned sampler_stop(ThreadSampler *ts)
{
        __atomic_store_n(&ts->stop, true, __ATOMIC_RELEASE);
        pthread_join(ts->thread, NULL);
        return ts->peak;
}

/* ------------------------------------------------------------------ fiberd -------- */

static void copy_file(const char *src, const char *dir, const char *name)
{
        char dst[512], buf[65536];
        int in, out;
        ssize_t n;

        snprintf(dst, sizeof(dst), "%s/%s", dir, name);
        in = open(src, O_RDONLY | O_CLOEXEC);
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (in < 0 || out < 0)
                bench_die("copy %s to %s: %s (make all builds the test plugins)", src, dst,
                          strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, (size_t)n) != n)
                        bench_die("write %s: %s", dst, strerror(errno));
        if (n < 0 || close(out) < 0)
                bench_die("copy %s: %s", src, strerror(errno));
        close(in);
}

/* A fiberd of this tree with hooks_config and its own plugin directory. */
static void hooks_fiberd_start(ProductServer *s)
{
        char conf[128], plugins[128];
        char *argv[] = {BENCH_FIBERD_BIN, "--plugin-dir", plugins, "--log-level",
                        "warning",        "--config",     conf,    NULL};
        FILE *f;

        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        unsetenv("NOTIFY_SOCKET");
        product_tmpdir(s);
        setenv("STATE_DIRECTORY", s->dir, 1);
        snprintf(plugins, sizeof(plugins), "%s/plugins", s->dir);
        if (mkdir(plugins, 0755) < 0)
                bench_die("mkdir %s: %s", plugins, strerror(errno));
        copy_file(BENCH_PLUGIN_DIR "/sleep.so", plugins, "sleep.so");
        copy_file(BENCH_TEST_PLUGIN_DIR "/block_calls.so", plugins, "block_calls.so");
        copy_file(BENCH_TEST_PLUGIN_DIR "/curl_fetch.so", plugins, "curl_fetch.so");
        snprintf(conf, sizeof(conf), "%s/fiberd.conf", s->dir);
        f = fopen(conf, "we");
        if (!f || fputs(hooks_config, f) < 0 || fclose(f) != 0)
                bench_die("cannot write %s", conf);
        snprintf(s->socket, sizeof(s->socket), "%s/fiberd.sock", s->dir);
        if (product_start(s, argv, "FIBERD_SOCKET", s->socket) < 0) {
                product_stop(s);
                bench_die("fiberd (%s) did not start", BENCH_FIBERD_BIN);
        }
}

/* The job every request of a run submits. */
typedef struct HookJob {
        const char *plugin;
        const char *call;  /* block_calls' "call", or NULL */
        const char *path;  /* block_calls' "path", or NULL */
        const char *url;   /* curl_fetch's "url", or NULL */
        const char *check; /* a result key that must hold @want, or NULL */
        uint64_t want;
        uint64_t ms; /* "ms", 0 = none */
} HookJob;

static void pack_str(msgpack_packer *pk, const char *s)
{
        msgpack_pack_str_with_body(pk, s, strlen(s));
}

static void hook_job_send(Client *c, const HookJob *j, uint32_t *ret_msgid)
{
        msgpack_packer *pk =
                client_request(c, IPC_METHOD_JOB_SUBMIT, IPC_SUBMIT_NPARAMS, ret_msgid);

        if (!pk)
                bench_die("job.submit: out of memory");
        pack_str(pk, j->plugin);
        msgpack_pack_map(pk,
                         (j->call != NULL) + (j->path != NULL) + (j->url != NULL) + (j->ms != 0));
        if (j->call) {
                pack_str(pk, "call");
                pack_str(pk, j->call);
        }
        if (j->path) {
                pack_str(pk, "path");
                pack_str(pk, j->path);
        }
        if (j->url) {
                pack_str(pk, "url");
                pack_str(pk, j->url);
        }
        if (j->ms) {
                pack_str(pk, "ms");
                msgpack_pack_uint64(pk, j->ms);
        }
        msgpack_pack_map(pk, 0);
}

static void die_status(const char *what, const IpcStatus *st)
{
        bench_die("%s: %s%s%s", what, st->code ? st->code : "", st->code ? ": " : "", st->message);
}

/* The job index of the answer @m, from @slots; its result in @ret. */
static uint64_t answer_of(const IpcMessage *m, const uint64_t *slots, const char *method,
                          const msgpack_object **ret)
{
        IpcStatus st = {0};

        if (m->type != IPC_RESPONSE)
                bench_die("%s: unexpected message type %d", method, (int)m->type);
        if (client_result(m, ret, &st) < 0)
                die_status(method, &st);
        return slots[m->msgid & (SLOTS - 1)];
}

/* A final record that is not what @j should end with: why, else NULL. */
static const char *final_wrong(const HookJob *j, const msgpack_object *rec, char *why, size_t size)
{
        const msgpack_object *res = ipc_map_find(rec, IPC_KEY_RESULT), *v;
        IpcStatus st = {0};

        if (!ipc_object_streq(ipc_map_find(rec, IPC_KEY_STATE), IPC_STATE_DONE)) {
                IpcStatus e = {0};
                if (ipc_read_error(ipc_map_find(rec, IPC_KEY_ERROR), &e) > 0)
                        snprintf(why, size, "a job did not end done: %s: %s", e.code ? e.code : "",
                                 e.message);
                else
                        snprintf(why, size, "a job did not end done");
                return why;
        }
        if (!j->check)
                return NULL;
        v = ipc_map_find(res, j->check);
        uint64_t got = 0;
        if (!v || ipc_read_uint(v, j->check, &got, &st) < 0 || got != j->want) {
                const msgpack_object *en = ipc_map_find(res, "errno");
                snprintf(why, size, "a job's %s is %llu, not %llu (errno %lld)", j->check,
                         (unsigned long long)got, (unsigned long long)j->want,
                         en ? (long long)en->via.i64 : 0LL);
                return why;
        }
        return NULL;
}

/*
 * N jobs @j through @c: all submitted (SUBMIT_WINDOW outstanding), then all waited for
 * (WAIT_WINDOW outstanding). Dies when a job ends wrong. Return: elapsed ns.
 */
static uint64_t hooks_run_jobs(Client *c, const HookJob *j, uint64_t n)
{
        uint64_t *ids = calloc(n, sizeof(*ids)), *slots = calloc(SLOTS, sizeof(*slots));
        uint64_t sent = 0, got = 0, t0, wrong = 0;
        const msgpack_object *res;
        char why[300] = "";
        IpcStatus st = {0};
        IpcMessage m;
        uint32_t id;

        if (!ids || !slots)
                bench_die("out of memory");
        t0 = bench_now_ns();
        while (got < n) {
                while (sent < n && sent - got < SUBMIT_WINDOW) {
                        hook_job_send(c, j, &id);
                        slots[id & (SLOTS - 1)] = sent++;
                }
                if (client_receive(c, &m, RECEIVE_TIMEOUT_MS, &st) < 0)
                        die_status("receive", &st);
                uint64_t i = answer_of(&m, slots, IPC_METHOD_JOB_SUBMIT, &res);
                if (ipc_read_uint(ipc_map_find(res, IPC_KEY_ID), IPC_KEY_ID, &ids[i], &st) < 0)
                        die_status(IPC_METHOD_JOB_SUBMIT, &st);
                ipc_message_clear(&m);
                got++;
        }
        for (sent = got = 0; got < n;) {
                while (sent < n && sent - got < WAIT_WINDOW) {
                        msgpack_packer *pk =
                                client_request(c, IPC_METHOD_JOB_WAIT, IPC_WAIT_NPARAMS, &id);
                        if (!pk)
                                bench_die("job.wait: out of memory");
                        msgpack_pack_uint64(pk, ids[sent]);
                        msgpack_pack_nil(pk);
                        slots[id & (SLOTS - 1)] = sent++;
                }
                if (client_receive(c, &m, RECEIVE_TIMEOUT_MS, &st) < 0)
                        die_status("receive", &st);
                answer_of(&m, slots, IPC_METHOD_JOB_WAIT, &res);
                if (final_wrong(j, res, why, sizeof(why)))
                        wrong++;
                ipc_message_clear(&m);
                got++;
        }
        uint64_t elapsed = bench_now_ns() - t0;
        free(ids);
        free(slots);
        if (wrong)
                bench_die("%llu of %llu jobs: %s", (unsigned long long)wrong, (unsigned long long)n,
                          why);
        return elapsed;
}

/* One fiberd run of @n jobs @j: prints "ms peak_threads added". */
static int hooks_fiberd_measure(const HookJob *j, uint64_t n)
{
        ProductServer srv = {0};
        IpcStatus st = {0};
        ThreadSampler ts;
        unsigned before;
        uint64_t elapsed;
        Client *c;

        hooks_fiberd_start(&srv);
        if (client_connect(&c, srv.socket, &st) < 0)
                die_status("connect", &st);
        before = threads_of(srv.pid);
        sampler_start(&ts, srv.pid);
        elapsed = hooks_run_jobs(c, j, n);
        unsigned peak = sampler_stop(&ts);
        fprintf(stderr, "fiberd-bench: %s %s: fiberd threads %u before, %u at most\n", j->plugin,
                j->call ? j->call : "", before, peak);
        client_free(c);
        product_stop(&srv);
        printf("%.1f %u %u\n", (double)elapsed / (double)NSEC_PER_MSEC, peak,
               peak > before ? peak - before : 0);
        return 0;
}

int bench_hooks_fiberd(int argc, char **argv)
{
        const char *call = argc > 1 ? argv[1] : "usleep";
        uint64_t n = bench_parse_count(argc > 2 ? argv[2] : NULL, 200);
        HookJob j = {.plugin = "block_calls", .call = call, .ms = HOOKS_CALL_MS};
        SlowServer *slow = NULL;
        char dir[] = "/tmp/fiberd-bench-slow-XXXXXX", path[64];
        int r;

        if (!strcmp(call, "sleep")) {
                j = (HookJob){.plugin = "sleep", .ms = HOOKS_CALL_MS};
        } else if (!strcmp(call, "read")) {
                if (!mkdtemp(dir))
                        bench_die("mkdtemp: %s", strerror(errno));
                snprintf(path, sizeof(path), "%s/slow.sock", dir);
                slow = slow_server_start(SLOW_UNIX_BYTE, path, HOOKS_CALL_MS * NSEC_PER_MSEC);
                j = (HookJob){.plugin = "block_calls",
                              .call = "connect_recv",
                              .path = slow_server_address(slow),
                              .check = "bytes",
                              .want = 1};
        } else if (strcmp(call, "usleep") && strcmp(call, "poll")) {
                bench_die("hooks-fiberd: CALL is sleep, usleep, poll or read, not %s", call);
        }
        r = hooks_fiberd_measure(&j, n);
        if (slow) {
                slow_server_stop(slow);
                rmdir(dir);
        }
        return r;
}

int bench_hooks_curl(int argc, char **argv)
{
        uint64_t n = bench_parse_count(argc > 1 ? argv[1] : NULL, 2000);
        SlowServer *slow = slow_server_start(SLOW_HTTP, NULL, HOOKS_HTTP_MS * NSEC_PER_MSEC);
        HookJob j = {.plugin = "curl_fetch",
                     .url = slow_server_address(slow),
                     .check = "status",
                     .want = 200};
        int r = hooks_fiberd_measure(&j, n);

        slow_server_stop(slow);
        return r;
}

/* ------------------------------------------------------------------ Go ------------ */

int bench_hooks_go(int argc, char **argv)
{
        const char *call = argc > 1 ? argv[1] : "nanosleep", *go = getenv("FIBERD_BENCH_GO");
        const char *count = argc > 2 ? argv[2] : "200";
        char dir[] = "/tmp/fiberd-bench-slow-XXXXXX", path[64], out[256] = "";
        SlowServer *slow = NULL;
        char *args[6] = {(char *)go, "block", (char *)call, (char *)count, NULL, NULL};
        int pipefd[2], status;
        ThreadSampler ts;
        size_t got = 0;
        ssize_t r;
        pid_t pid;

        if (!go || !*go)
                bench_die("hooks-go: FIBERD_BENCH_GO is not set (fiberd-bench table sets it)");
        bench_parse_count(count, 0);
        if (!strcmp(call, "read")) {
                if (!mkdtemp(dir))
                        bench_die("mkdtemp: %s", strerror(errno));
                snprintf(path, sizeof(path), "%s/slow.sock", dir);
                slow = slow_server_start(SLOW_UNIX_BYTE, path, HOOKS_CALL_MS * NSEC_PER_MSEC);
                args[4] = (char *)slow_server_address(slow);
        } else if (!strcmp(call, "http")) {
                slow = slow_server_start(SLOW_HTTP, NULL, HOOKS_HTTP_MS * NSEC_PER_MSEC);
                args[1] = "http";
                args[2] = (char *)count;
                args[3] = (char *)slow_server_address(slow);
        } else if (strcmp(call, "nanosleep") && strcmp(call, "poll")) {
                bench_die("hooks-go: CALL is nanosleep, poll, read or http, not %s", call);
        }
        if (pipe2(pipefd, O_CLOEXEC) < 0)
                bench_die("pipe: %s", strerror(errno));
        fflush(stdout);
        pid = fork();
        if (pid < 0)
                bench_die("fork: %s", strerror(errno));
        if (pid == 0) {
                dup2(pipefd[1], STDOUT_FILENO);
                setenv("GOMAXPROCS", "2", 1);
                execv(args[0], args);
                fprintf(stderr, "exec %s: %s\n", args[0], strerror(errno));
                _exit(127);
        }
        close(pipefd[1]);
        sampler_start(&ts, pid);
        while (got < sizeof(out) - 1 && (r = read(pipefd[0], out + got, sizeof(out) - 1 - got)) > 0)
                got += (size_t)r;
        out[got] = '\0';
        close(pipefd[0]);
        waitpid(pid, &status, 0);
        unsigned peak = sampler_stop(&ts);
        if (slow) {
                slow_server_stop(slow);
                if (!strcmp(call, "read"))
                        rmdir(dir);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status))
                bench_die("the Go peer failed (status 0x%x)", status);
        char *end;
        double ms = strtod(out, &end);
        if (end == out)
                bench_die("the Go peer printed '%.60s', not a number", out);
        printf("%.1f %u\n", ms, peak);
        return 0;
}

/* ------------------------------------------------------------------ cost ---------- */

typedef struct HookCost {
        uint64_t calls;
        double best_ns[2]; /* per call, the best batch: [0] poll(), the hook; [1] the C
                            * library's poll(), found with dlsym(RTLD_NEXT) as the hook
                            * finds it: the difference is the hook's own cost */
} HookCost;

#define COST_BATCHES 60      /* alternating: hooked, real, hooked, ... */
#define COST_TIMEOUT_MS 1000 /* never waited: the fd is ready, so nothing parks */

static void hook_cost_loop(void *arg)
{
        HookCost *hc = arg;
        uint64_t per = hc->calls / COST_BATCHES;
        int p[2];

        if (pipe2(p, O_CLOEXEC) < 0 || syscall(SYS_write, p[1], "x", 1) != 1)
                bench_die("hook-cost: pipe: %s", strerror(errno));
        struct pollfd pfd = {.fd = p[0], .events = POLLIN};
        int (*libc_poll)(struct pollfd *, nfds_t, int) =
                (int (*)(struct pollfd *, nfds_t, int))dlsym(RTLD_NEXT, "poll");
        if (!libc_poll)
                bench_die("hook-cost: dlsym(poll): %s", dlerror());
        hc->best_ns[0] = hc->best_ns[1] = 1e18;
        for (int b = 0; b < COST_BATCHES; b++) {
                bool real = b & 1;
                uint64_t t0 = bench_now_ns();
                if (!real) {
                        for (uint64_t i = 0; i < per; i++)
                                if (poll(&pfd, 1, COST_TIMEOUT_MS) != 1)
                                        bench_die("hook-cost: poll did not find the pipe ready");
                } else {
                        for (uint64_t i = 0; i < per; i++)
                                if (libc_poll(&pfd, 1, COST_TIMEOUT_MS) != 1)
                                        bench_die("hook-cost: poll did not find the pipe ready");
                }
                double ns = (double)(bench_now_ns() - t0) / (double)per;
                if (ns < hc->best_ns[real])
                        hc->best_ns[real] = ns;
        }
        syscall(SYS_close, p[0]);
        syscall(SYS_close, p[1]);
}

int bench_hook_cost(int argc, char **argv)
{
        const char *where = argc > 1 ? argv[1] : "thread";
        HookCost hc = {.calls = bench_parse_count(argc > 2 ? argv[2] : NULL, 2000000)};

        if (hc.calls < COST_BATCHES || (strcmp(where, "thread") && strcmp(where, "fiber")))
                bench_die("usage: hook-cost thread|fiber [N >= %d]", COST_BATCHES);
        if (!strcmp(where, "thread")) {
                hook_cost_loop(&hc);
        } else {
                SchedControl ctl = BENCH_NO_MONITOR;
                ctl.hook_blocking_calls = true;
                SchedGroupConfig cfg = {.workers = 1, .name = "bench", .control = ctl};
                SchedulingGroup *g = NULL;
                FiberAttr attr;
                Fiber *f = NULL;
                int r = sched_group_new(&g, &cfg);
                if (r < 0)
                        bench_die("sched_group_new: %s", strerror(-r));
                attr = (FiberAttr){.group = g};
                r = fiber_create(&f, &attr, hook_cost_loop, &hc);
                if (r < 0 || (r = fiber_join(f)) < 0)
                        bench_die("hook-cost: fiber: %s", strerror(-r));
                sched_group_free(g);
        }
        printf("%.2f %.2f\n", hc.best_ns[0], hc.best_ns[1]);
        return 0;
}
