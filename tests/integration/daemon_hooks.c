/* SPDX-License-Identifier: MIT */
/*
 * daemon_hooks.c — plugin code written for threads runs on fibers (the runtime's hooks,
 * scheduler/hook.c) in a real fiberd: plain usleep/poll/select/nanosleep, a blocking
 * read that only a cancel or timeout ends, connect+read to a slow local server, and
 * libcurl fetching from a slow local HTTP server, all on a job group of 2 workers.
 * The hooks are proven by what could not happen without them: no spare worker is
 * started (rescues stay 0, the thread count stays within workers + 4 of its baseline),
 * a sleep lasts its whole time with the stall detector on, a cancelled or timed-out
 * job's blocked call returns (the job is never detached), and plugin code's own open()
 * acts as the submitter. Every wait is bounded; none is a sleep that decides an outcome.
 * The same holds for a plugin declared FIBERD_PLUGIN_INLINE, whose jobs run on the server
 * group: its sleeps park (the server group counts no stall and no rescue), its open()
 * acts as the submitter, and a job over 1 ms sends its later jobs to the job workers.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOBODY 65534
#define WAIT_MS 30000

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_hooks, .fini = teardown, .timeout = 120);

#define HOOK_PLUGINS                                                                               \
        FIBERD_TEST_PLUGIN_DIR "/block_calls.so " FIBERD_TEST_PLUGIN_DIR                           \
                               "/curl_fetch.so " FIBERD_TEST_PLUGIN_DIR "/inline_calls.so"

/* stall detector on and short, rescue on: a blocked worker would show */
#define HOOK_CONFIG                                                                                \
        "[scheduler]\ngroups = 1\ngroup_size = 2\nstall_threshold_ms = 50\nrescue_after_ms = "     \
        "20\n[jobs]\nmax_running = 1024\n"

/* A counter (@key: "rescues", "stalls") summed over the groups whose stats name holds
 * @name ("jobs": the job groups, "jobs-N"; "server": the server group). */
static uint64_t group_count(Client *c, const char *name, const char *key)
{
        Reply rp;
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        const msgpack_object *groups = map_get(rp.result, "groups");
        uint64_t r = 0;
        for (uint32_t i = 0; groups && i < groups->via.array.size; i++) {
                const msgpack_object *g = &groups->via.array.ptr[i];
                if (strstr(map_str(g, "name"), name))
                        r += map_uint(g, key);
        }
        reply_clear(&rp);
        return r;
}

/* The job groups' rescue count. */
static uint64_t job_rescues(Client *c)
{
        return group_count(c, "jobs", "rescues");
}

/* The final record of @id (asserted final within WAIT_MS); the caller clears it. */
static void job_final(Client *c, uint64_t id, Reply *rp)
{
        rpc_job_wait(c, id, WAIT_MS, rp);
        cr_assert_eq(rp->r, 0, "job.wait %lu: %s", (unsigned long)id, rp->st.message);
}

static const msgpack_object *job_result(const Reply *rp)
{
        return map_get(rp->result, "result");
}

static int64_t result_int(const Reply *rp, const char *key)
{
        const msgpack_object *o = map_get(job_result(rp), key);
        cr_assert(o, "no %s in the result", key);
        return o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ? o->via.i64 : (int64_t)o->via.u64;
}

/*
 * Wait for every job in @ids (n of them) to end, hand each final record to @check, and
 * sample fiberd's thread count before each wait. Return: the most threads seen.
 */
typedef void (*JobCheck)(const Reply *rp, int i);
static unsigned finish_all(Client *c, const uint64_t *ids, int n, JobCheck check)
{
        unsigned peak = 0;
        for (int i = 0; i < n; i++) {
                unsigned now = fiberd_thread_count(&fd_);
                Reply rp;
                peak = now > peak ? now : peak;
                job_final(c, ids[i], &rp);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %d: %s", i,
                                 map_str(map_get(rp.result, "error"), "message"));
                check(&rp, i);
                reply_clear(&rp);
        }
        return peak;
}

/* ------------------------------------------------------------------ sleeps -------- */

/* A sleep lasts its whole time although the stall detector (50 ms) watches the worker:
 * the hooked call parks the fiber, and no signal cuts it short. */
Test(daemon_hooks, sleeps_last_their_time_with_the_stall_detector_on)
{
        static const char *calls[] = {"usleep", "nanosleep", "poll", "select"};
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        uint64_t ids[4];
        IpcStatus st;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        for (int i = 0; i < 4; i++) {
                ids[i] = rpc_submit(c, "block_calls",
                                    (Arg[]){ARG_S("call", calls[i]), ARG_I("ms", 1000)}, 2, 0, 0,
                                    &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        for (int i = 0; i < 4; i++) {
                Reply rp;
                job_final(c, ids[i], &rp);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "%s", calls[i]);
                cr_assert_eq(result_int(&rp, "rc"), 0, "%s returned %ld (errno %ld)", calls[i],
                             (long)result_int(&rp, "rc"), (long)result_int(&rp, "errno"));
                cr_assert_geq(result_int(&rp, "elapsed_ms"), 1000, "%s(1 s) returned after %ld ms",
                              calls[i], (long)result_int(&rp, "elapsed_ms"));
                reply_clear(&rp);
        }
        cr_assert_eq(job_rescues(c), 0, "a worker was blocked long enough to be rescued");
        cr_assert(!fiberd_log_contains(&fd_, "stall"), "a sleeping job was reported as a stall");
        client_free(c);
}

static void slept_3s(const Reply *rp, int i)
{
        cr_assert_geq(result_int(rp, "elapsed_ms"), 3000, "job %d", i);
}

/* 200 jobs each sleeping 300 ms in usleep() on 2 workers: no spare thread, no rescue,
 * and a quick job submitted behind them finishes while they still sleep. */
Test(daemon_hooks, two_hundred_sleeping_jobs_need_no_thread)
{
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        uint64_t ids[200], quick;
        unsigned baseline, peak = 0;
        IpcStatus st;
        Reply rp;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        rpc_simple(c, "ping", 0, NULL, &rp);
        reply_clear(&rp);
        baseline = fiberd_thread_count(&fd_);
        for (int i = 0; i < 200; i++) {
                ids[i] = rpc_submit(c, "block_calls",
                                    (Arg[]){ARG_S("call", "usleep"), ARG_I("ms", 3000)}, 2, 0, 0,
                                    &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        rpc_wait_progress(c, ids[199], WAIT_MS);
        quick = rpc_submit(c, "block_calls", (Arg[]){ARG_S("call", "usleep"), ARG_I("ms", 1)}, 2, 0,
                           0, &st);
        cr_assert_neq(quick, 0, "%s", st.message);
        job_final(c, quick, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        /* the last sleeper to start (its progress was seen just before the quick job
         * was submitted) still sleeps: the first ones may be done by now under a
         * sanitizer, which slows the 200 submissions to seconds */
        rpc_simple(c, "job.status", 1, &ids[199], &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "running",
                         "the quick job waited for the sleepers");
        reply_clear(&rp);
        peak = finish_all(c, ids, 200, slept_3s);
        cr_log_info("threads: %u before, %u at most while 200 jobs slept", baseline, peak);
        cr_assert_leq(peak, baseline + 4, "%u threads while sleeping, %u before", peak, baseline);
        client_free(c);
}

/* ------------------------------------------------------------------ cancel -------- */

/* A cancel, or a timeout, wakes a job blocked in read() of a pipe nobody writes to: its
 * call fails, the job returns, and it is never detached. */
static bool check_blocked_read_ends(bool by_timeout)
{
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        IpcStatus st;
        Reply rp;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        uint64_t id = rpc_submit(c, "block_calls", (Arg[]){ARG_S("call", "read_forever")}, 1, 0,
                                 by_timeout ? 300 : 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_wait_progress(c, id, WAIT_MS);
        uint64_t t0 = fiberd_now_ms();
        if (!by_timeout) {
                rpc_simple(c, "job.cancel", 1, &id, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                reply_clear(&rp);
        }
        job_final(c, id, &rp);
        uint64_t took = fiberd_now_ms() - t0;
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"),
                         by_timeout ? "DEADLINE_EXCEEDED" : "CANCELLED");
        reply_clear(&rp);
        cr_log_info("a job blocked in read() ended %lu ms after its %s", (unsigned long)took,
                    by_timeout ? "start (timeout 300 ms)" : "cancel");
        cr_assert(!fiberd_log_contains(&fd_, "did not return"),
                  "the blocked read was not woken: the job had to be detached");
        client_free(c);
        return !fiberd_log_contains(&fd_, "did not return");
}

Test(daemon_hooks, cancel_reaches_a_job_blocked_in_read)
{
        cr_assert(check_blocked_read_ends(false));
}

Test(daemon_hooks, timeout_reaches_a_job_blocked_in_read)
{
        cr_assert(check_blocked_read_ends(true));
}

/* ------------------------------------------------------------------ slow servers -- */

typedef struct SlowServer {
        int lfd;
        unsigned delay_ms;
        unsigned conns; /* to serve, then stop */
        bool http;      /* answer an HTTP/1.1 request */
        pthread_t thread;
        unsigned open; /* connections accepted and not answered yet; atomic */
        unsigned peak; /* the most at once: the jobs that waited together */
} SlowServer;

typedef struct SlowConn {
        int fd;
        SlowServer *srv;
} SlowConn;

static void *slow_conn(void *arg)
{
        SlowConn *sc = arg;
        SlowServer *s = sc->srv;
        char buf[4096];
        unsigned now = __atomic_add_fetch(&s->open, 1, __ATOMIC_RELAXED);
        unsigned peak = __atomic_load_n(&s->peak, __ATOMIC_RELAXED);
        while (now > peak && !__atomic_compare_exchange_n(&s->peak, &peak, now, true,
                                                          __ATOMIC_RELAXED, __ATOMIC_RELAXED))
                ;
        if (s->http) {
                /* read the request head */
                size_t got = 0;
                while (got < sizeof(buf) - 1) {
                        ssize_t n = read(sc->fd, buf + got, sizeof(buf) - 1 - got);
                        if (n <= 0)
                                break;
                        got += (size_t)n;
                        buf[got] = 0;
                        if (strstr(buf, "\r\n\r\n"))
                                break;
                }
        }
        usleep(s->delay_ms * 1000); /* a plain thread: the real sleep */
        __atomic_sub_fetch(&s->open, 1, __ATOMIC_RELAXED);
        if (s->http) {
                static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n"
                                           "Content-Type: text/plain\r\nConnection: close\r\n\r\n"
                                           "hello fiber";
                if (write(sc->fd, resp, sizeof(resp) - 1) < 0) {
                        /* the client gave up */
                }
        } else if (write(sc->fd, "!", 1) < 0) {
                /* the client gave up */
        }
        close(sc->fd);
        free(sc);
        return NULL;
}

static void *slow_server(void *arg)
{
        SlowServer *s = arg;
        for (unsigned i = 0; i < s->conns; i++) {
                int c = accept(s->lfd, NULL, NULL);
                if (c < 0)
                        break;
                SlowConn *sc = malloc(sizeof(*sc));
                *sc = (SlowConn){.fd = c, .srv = s};
                pthread_t t;
                pthread_attr_t a;
                pthread_attr_init(&a);
                pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                pthread_create(&t, &a, slow_conn, sc);
                pthread_attr_destroy(&a);
        }
        return NULL;
}

static void read_one_byte(const Reply *rp, int i)
{
        cr_assert_eq(result_int(rp, "bytes"), 1, "job %d: rc %ld errno %ld", i,
                     (long)result_int(rp, "rc"), (long)result_int(rp, "errno"));
}

/* 50 jobs connect to a Unix socket whose server answers each after 1 s, and block in
 * read(): all answered, all waiting at once (a blocked worker would let at most workers +
 * spares wait together), no spare thread. */
Test(daemon_hooks, connect_and_read_from_a_slow_server)
{
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        SlowServer srv = {.delay_ms = 1000, .conns = 50};
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        uint64_t ids[50];
        IpcStatus st;

        fiberd_start(&fd_, &o);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/slow.sock", fd_.dir);
        srv.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(srv.lfd, 64), 0);
        cr_assert_eq(pthread_create(&srv.thread, NULL, slow_server, &srv), 0);

        Client *c = fiberd_connect(&fd_);
        unsigned baseline = fiberd_thread_count(&fd_), peak;
        for (int i = 0; i < 50; i++) {
                ids[i] = rpc_submit(
                        c, "block_calls",
                        (Arg[]){ARG_S("call", "connect_recv"), ARG_S("path", sa.sun_path)}, 2, 0, 0,
                        &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        peak = finish_all(c, ids, 50, read_one_byte);
        pthread_join(srv.thread, NULL);
        close(srv.lfd);
        cr_log_info("%u of 50 jobs waited on the server at once; %u threads, %u before", srv.peak,
                    peak, baseline);
        cr_assert_geq(srv.peak, 40, "only %u jobs waited at once", srv.peak);
        cr_assert_leq(peak, baseline + 4, "%u threads, %u before", peak, baseline);
        client_free(c);
}

static void fetched_body(const Reply *rp, int i)
{
        cr_assert_str_eq(map_str(job_result(rp), "body"), "hello fiber", "fetch %d", i);
        cr_assert_eq(result_int(rp, "status"), 200, "fetch %d", i);
}

/* libcurl, linked by a plugin, fetches from a local HTTP server that answers after
 * 1 s: 40 fetches at once on 2 workers, each gets the body, no spare thread. */
Test(daemon_hooks, libcurl_plugin_fetches_on_fibers)
{
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        SlowServer srv = {.delay_ms = 1000, .conns = 40, .http = true};
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        char url[64];
        uint64_t ids[40];
        IpcStatus st;

        fiberd_start(&fd_, &o);
        srv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_eq(bind(srv.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(srv.lfd, 64), 0);
        cr_assert_eq(getsockname(srv.lfd, (struct sockaddr *)&sa, &len), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%u/x", (unsigned)ntohs(sa.sin_port));
        cr_assert_eq(pthread_create(&srv.thread, NULL, slow_server, &srv), 0);

        Client *c = fiberd_connect(&fd_);
        unsigned baseline = fiberd_thread_count(&fd_), peak;
        for (int i = 0; i < 40; i++) {
                ids[i] = rpc_submit(c, "curl_fetch", (Arg[]){ARG_S("url", url)}, 1, 0, 0, &st);
                cr_assert_neq(ids[i], 0, "%s", st.message);
        }
        peak = finish_all(c, ids, 40, fetched_body);
        pthread_join(srv.thread, NULL);
        close(srv.lfd);
        cr_log_info("%u of 40 fetches waited at once; threads: %u before, %u at most", srv.peak,
                    baseline, peak);
        cr_assert_geq(srv.peak, 30, "only %u fetches waited at once", srv.peak);
        cr_assert_leq(peak, baseline + 4, "%u threads, %u before", peak, baseline);
        client_free(c);
}

/* ------------------------------------------------------------------ rights -------- */

/* As the user nobody: plugin code's own open() and fopen() of /etc/shadow fail with
 * EACCES although fiberd runs as root, and the user's own 0600 file opens; for
 * @plugin block_calls on a job worker, for inline_calls on the server worker (its first
 * job at least: a later one may have gone to the job workers if one took over 1 ms). */
static void nobody_opens(const char *own, const char *plugin)
{
        static const char *calls[] = {"open", "fopen"};
        Client *c = fiberd_connect(&fd_);
        for (int i = 0; i < 2; i++) {
                IpcStatus st = {0};
                Reply rp;
                uint64_t id = rpc_submit(
                        c, plugin, (Arg[]){ARG_S("call", calls[i]), ARG_S("path", "/etc/shadow")},
                        2, 0, 0, &st);
                CHECK(id != 0, "%s", st.message);
                rpc_job_wait(c, id, WAIT_MS, &rp);
                CHECK(rp.r == 0, "%s", rp.st.message);
                CHECK(result_int(&rp, "errno") == EACCES,
                      "%s %s(/etc/shadow) as nobody: rc %ld errno %ld", plugin, calls[i],
                      (long)result_int(&rp, "rc"), (long)result_int(&rp, "errno"));
                const char *thread = map_str(job_result(&rp), "thread");
                CHECK(i > 0 || strcmp(plugin, "inline_calls") != 0 ||
                              strncmp(thread, "fiberd-sr", 9) == 0,
                      "the first inline job ran on %s", thread);
                reply_clear(&rp);

                id = rpc_submit(c, plugin, (Arg[]){ARG_S("call", calls[i]), ARG_S("path", own)}, 2,
                                0, 0, &st);
                CHECK(id != 0, "%s", st.message);
                rpc_job_wait(c, id, WAIT_MS, &rp);
                CHECK(rp.r == 0, "%s", rp.st.message);
                CHECK(result_int(&rp, "errno") == 0 && result_int(&rp, "bytes") == 18,
                      "%s(own file): errno %ld, %ld bytes", calls[i],
                      (long)result_int(&rp, "errno"), (long)result_int(&rp, "bytes"));
                reply_clear(&rp);
        }
        client_free(c);
}

Test(daemon_hooks, plugin_open_acts_as_the_submitter)
{
        FiberdOpts o = {.config = HOOK_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        char own[192];
        int status, fd;

        cr_assert_eq(geteuid(), 0, "this test runs fiberd as root");
        fiberd_start(&fd_, &o);
        cr_assert(chmod(fd_.dir, 0755) == 0);
        snprintf(own, sizeof(own), "%s/own", fd_.dir);
        fd = open(own, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        cr_assert(fd >= 0);
        cr_assert(write(fd, "nobody's own data\n", 18) == 18);
        close(fd);
        cr_assert(chown(own, NOBODY, NOBODY) == 0);

        pid_t pid = fork();
        cr_assert(pid >= 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
                        _exit(2);
                nobody_opens(own, "block_calls");
                nobody_opens(own, "inline_calls");
                _exit(0);
        }
        cr_assert(waitpid(pid, &status, 0) == pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the checks as nobody failed (status 0x%x); see stderr", status);
}

/* ------------------------------------------------------------------ inline -------- */

/* Asserts that job @id ended done and that the thread that started its call (the
 * plugin's "thread" result) is one of @group's workers: "fiberd-sr" (the server
 * group's, "fiberd-sr-wN") or "fiberd-jo" (a job group's); @what names the job. */
static void ran_on(Client *c, uint64_t id, const char *group, const char *what)
{
        const char *thread;
        Reply rp;

        job_final(c, id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %lu: %s", (unsigned long)id,
                         map_str(map_get(rp.result, "error"), "message"));
        thread = map_str(job_result(&rp), "thread");
        cr_assert(strncmp(thread, group, strlen(group)) == 0, "%s ran on %s, not on %s*", what,
                  thread, group);
        reply_clear(&rp);
}

/* plugins.list's "inline" of the loaded plugin @name (asserted listed, with the field). */
static bool listed_inline(Client *c, const char *name)
{
        const msgpack_object *v, *b = NULL;
        Reply rp;

        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "plugins.list: %s", rp.st.message);
        v = map_get(rp.result, "plugins");
        for (uint32_t i = 0; v && i < v->via.array.size; i++)
                if (strcmp(map_str(&v->via.array.ptr[i], "name"), name) == 0)
                        b = map_get(&v->via.array.ptr[i], "inline");
        cr_assert(b && b->type == MSGPACK_OBJECT_BOOLEAN, "plugins.list: no inline for %s", name);
        bool r = b->via.boolean;
        reply_clear(&rp);
        return r;
}

static uint64_t submit_call(Client *c, const char *plugin, const char *call, int64_t ms)
{
        IpcStatus st = {0};
        uint64_t id =
                rpc_submit(c, plugin, (Arg[]){ARG_S("call", call), ARG_I("ms", ms)}, 2, 0, 0, &st);
        cr_assert(id != 0, "submit %s %s: %s", plugin, call, st.message);
        return id;
}

/* The inline test's thresholds: a 200 ms sleep that blocked the server worker would pass
 * both, and a sanitizer build's slow moment (which would hold inline jobs back) does
 * not. One server worker, whatever the machine's CPU count. */
#define INLINE_CONFIG                                                                              \
        "[scheduler]\ngroups = 1\ngroup_size = 2\nstall_threshold_ms = 150\nrescue_after_ms = "    \
        "100\n[server]\nworkers = 1\n[jobs]\nmax_running = 1024\n"

/* An inline plugin's job runs on the server worker, another plugin's on a job worker;
 * three inline sleeps of 200 ms (held by a pause until all three are queued, so one
 * round places them all) park their fibers there (a blocked server worker would add a
 * stall and a rescue meanwhile); three runs in a row over 1 ms send the plugin's next
 * job to a job worker, with a warning. */
Test(daemon_hooks, inline_jobs_run_on_the_server_worker_and_park)
{
        FiberdOpts o = {.config = INLINE_CONFIG, .workers = 2, .extra = HOOK_PLUGINS};
        uint64_t ids[3], stalls, rescues;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        ran_on(c, submit_call(c, "inline_calls", "none", 0), "fiberd-sr", "an inline job");
        ran_on(c, submit_call(c, "block_calls", "none", 0), "fiberd-jo",
               "a job of a plugin not inline");

        cr_assert(listed_inline(c, "inline_calls"), "plugins.list: inline_calls not inline");
        cr_assert(!listed_inline(c, "block_calls"), "plugins.list: block_calls inline");
        stalls = group_count(c, "server", "stalls");
        rescues = group_count(c, "server", "rescues");
        rpc_plugin_hold(c, "pause", "inline_calls");
        for (int i = 0; i < 3; i++)
                ids[i] = submit_call(c, "inline_calls", "usleep", 200);
        rpc_plugin_hold(c, "resume", "inline_calls");
        for (int i = 0; i < 3; i++)
                ran_on(c, ids[i], "fiberd-sr", "an inline sleeper");
        cr_assert_eq(group_count(c, "server", "stalls"), stalls,
                     "an inline sleep stalled the server");
        cr_assert_eq(group_count(c, "server", "rescues"), rescues,
                     "an inline sleep blocked the server");

        ran_on(c, submit_call(c, "inline_calls", "none", 0), "fiberd-jo",
               "after three 200 ms jobs inline, the plugin's next job");
        cr_assert(fiberd_log_contains(&fd_, "ms inline, the last of 3 in a row over 1 ms: its "
                                            "jobs run on the job workers from now on"));
        cr_assert(!listed_inline(c, "inline_calls"), "plugins.list: still inline after that");
        client_free(c);
}

/* [jobs] run_inline = false: an inline plugin's jobs go to the job workers; the file
 * changed back and reloaded, they run inline again. */
Test(daemon_hooks, run_inline_false_sends_every_job_to_the_job_workers_until_a_reload)
{
        FiberdOpts o = {.config = INLINE_CONFIG "run_inline = false\n",
                        .workers = 2,
                        .extra = HOOK_PLUGINS};
        char conf[256];
        Reply rp;
        FILE *f;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        ran_on(c, submit_call(c, "inline_calls", "none", 0), "fiberd-jo",
               "with run_inline = false, an inline job");

        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f, "cannot write %s", conf);
        fputs(INLINE_CONFIG "run_inline = true\n", f);
        cr_assert_eq(fclose(f), 0);
        rpc_simple(c, "reload", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "reload: %s", rp.st.message);
        cr_assert(strstr(map_str(rp.result, "reloaded"), "[jobs] run_inline"), "the reload says %s",
                  map_str(rp.result, "reloaded"));
        reply_clear(&rp);
        ran_on(c, submit_call(c, "inline_calls", "none", 0), "fiberd-sr",
               "after the reload, an inline job");
        client_free(c);
}
