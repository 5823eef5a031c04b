/* SPDX-License-Identifier: MIT */
/*
 * daemon_store.c — the job store (daemon/store/store.h) seen from outside: fiberd killed with
 * SIGKILL under load loses no job whose submission was answered and never hands out an
 * id twice; a job running at the kill ends INTERRUPTED, or runs again with its attempt
 * counted when its plugin is retry-safe (sleep); queued jobs run again in their order;
 * SIGTERM leaves queued jobs queued and answers job.wait with UNAVAILABLE; retention
 * deletes rows but ids still do not repeat; a damaged database stops the start with a
 * message naming the file. Crash-only plugins (daemon/plugin/crash.h): a plugin that
 * crashes fiberd twice is quarantined, and its strikes and quarantine outlive clean
 * restarts and other plugins' crashes, copies of its contents and reinstalls of the same
 * bytes, until its file gets other contents; a plugin cut short is refused before
 * dlopen() (plugins/elfcheck.h) instead of crashing fiberd. Every fiberd here uses the
 * default sqlite store in its test's directory (the harness sets STATE_DIRECTORY).
 */
#include "tests/integration/fiberd_harness.h"
#include "scheduler/base/macro.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_store, .fini = teardown, .timeout = 60);

/* job.status of @id: its state into @state (size 32) and attempt; the call's error. */
static int job_state(Client *c, uint64_t id, char *state, uint64_t *attempt, char *code)
{
        Reply rp;
        int r;

        rpc_simple(c, "job.status", 1, &id, &rp);
        r = rp.r;
        if (r == 0) {
                const msgpack_object *err = map_get(rp.result, "error");
                snprintf(state, 32, "%s", map_str(rp.result, "state"));
                if (attempt)
                        *attempt = map_uint(rp.result, "attempt");
                if (code)
                        snprintf(code, 32, "%s",
                                 err && err->type == MSGPACK_OBJECT_MAP ? map_str(err, "code")
                                                                        : "");
        }
        reply_clear(&rp);
        return r;
}

/* Polls job.status until @id is in @want (bounded: asserts after 15 s). */
static void wait_state(Client *c, uint64_t id, const char *want)
{
        uint64_t deadline = fiberd_now_ms() + 15000;
        char state[32] = "";

        while (job_state(c, id, state, NULL, NULL) != 0 || strcmp(state, want) != 0) {
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s, not %s, after 15 s",
                          (unsigned long long)id, state, want);
                usleep(5000);
        }
}

static void kill9(void)
{
        int status = fiberd_signal_and_wait(&fd_, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
}

/* ------------------------------------------------------------ kill -9 under load -- */

#define LOAD_CLIENTS 8
#define LOAD_ROUNDS 4
#define LOAD_PER_ROUND 150 /* answered submissions before each kill, all clients */
#define LOAD_MAX 4096      /* per client, all rounds */

typedef struct Submitter {
        pthread_t thread;
        const char *sock;
        uint64_t ids[LOAD_MAX];
        size_t n;        /* answered submissions, all rounds */
        unsigned *total; /* shared counter of this round's answered submissions (atomic) */
        bool *stop;      /* atomic */
} Submitter;

/* Submits sleep {ms: 20} in a loop until the daemon goes away or *stop; keeps each id
 * the daemon answered. No criterion asserts here: a thread. */
static void *submitter_main(void *arg)
{
        Submitter *s = arg;
        IpcStatus st = {0};
        Client *c;

        if (client_connect(&c, s->sock, &st) < 0)
                return NULL;
        while (!__atomic_load_n(s->stop, __ATOMIC_ACQUIRE) && s->n < LOAD_MAX) {
                const msgpack_object *res;
                IpcMessage m;
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "job.submit", 2, &msgid);
                if (!pk)
                        break;
                ipc_pack_cstr(pk, "sleep");
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, "ms", 20);
                if (client_call_wait(c, msgid, &m, 30000, &st) != 1)
                        break; /* killed: this one was not answered */
                if (client_result(&m, &res, &st) == 0) {
                        s->ids[s->n++] = map_uint(res, "id");
                        __atomic_add_fetch(s->total, 1, __ATOMIC_RELEASE);
                }
                ipc_message_clear(&m);
        }
        client_free(c);
        return NULL;
}

Test(daemon_store, kill9_under_load_loses_no_answered_job)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 16\nmax_running_per_user = 16\n",
                        .plugins = "sleep"};
        static Submitter subs[LOAD_CLIENTS];
        static uint64_t all[LOAD_CLIENTS * LOAD_MAX];
        size_t nall = 0, checked = 0;
        Client *c;

        fiberd_start(&fd_, &o);
        for (int round = 0; round < LOAD_ROUNDS; round++) {
                unsigned total = 0;
                bool stop = false;
                uint64_t deadline = fiberd_now_ms() + 20000;

                if (round > 0)
                        fiberd_restart(&fd_);
                for (int i = 0; i < LOAD_CLIENTS; i++) {
                        subs[i].sock = fd_.sock;
                        subs[i].total = &total;
                        subs[i].stop = &stop;
                        cr_assert(pthread_create(&subs[i].thread, NULL, submitter_main, &subs[i]) ==
                                  0);
                }
                while (__atomic_load_n(&total, __ATOMIC_ACQUIRE) < LOAD_PER_ROUND)
                        cr_assert(fiberd_now_ms() < deadline, "round %d: %u answered after 20 s",
                                  round, total);
                /* the kill lands while every client has a submission in flight */
                kill9();
                __atomic_store_n(&stop, true, __ATOMIC_RELEASE);
                for (int i = 0; i < LOAD_CLIENTS; i++)
                        pthread_join(subs[i].thread, NULL);
        }

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < LOAD_CLIENTS; i++) {
                for (size_t k = 0; k < subs[i].n; k++) {
                        char state[32];
                        int r = job_state(c, subs[i].ids[k], state, NULL, NULL);
                        cr_assert(r == 0, "job %llu was answered but is gone after kill -9",
                                  (unsigned long long)subs[i].ids[k]);
                        cr_assert(strcmp(state, "done") == 0 || strcmp(state, "queued") == 0 ||
                                          strcmp(state, "running") == 0,
                                  "job %llu is %s", (unsigned long long)subs[i].ids[k], state);
                        all[nall++] = subs[i].ids[k];
                        checked++;
                }
        }
        cr_assert(checked >= LOAD_ROUNDS * LOAD_PER_ROUND, "only %zu jobs checked", checked);
        qsort(all, nall, sizeof(all[0]), u64_compare);
        for (size_t k = 1; k < nall; k++)
                cr_assert(all[k] != all[k - 1], "id %llu was answered twice across restarts",
                          (unsigned long long)all[k]);
        client_free(c);
}

/*
 * job.run under pipelined load: the store is busy, so a job.run is dispatched before
 * its record exists and its first write waits for its end (jobtable_submit()). Killed
 * with -9 mid-stream, every job.run that was answered is on disk, done, after the
 * restart; nothing is answered twice.
 */
#define RUN_CLIENTS 4
#define RUN_WINDOW 64        /* job.run requests in flight per client */
#define RUN_BEFORE_KILL 3000 /* answered job.runs, all clients, before the kill */

typedef struct Runner {
        pthread_t thread;
        const char *sock;
        uint64_t ids[LOAD_MAX * 4];
        size_t n;
        unsigned *total; /* atomic */
} Runner;

static void run_request(Client *c)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.run", 2, &msgid);

        if (pk) {
                ipc_pack_cstr(pk, "echo");
                msgpack_pack_map(pk, 0);
        }
}

/* Whether the record @m says state "done" (map_str()'s buffer is not for threads). */
static bool record_done(const msgpack_object *m)
{
        if (!m || m->type != MSGPACK_OBJECT_MAP)
                return false;
        for (uint32_t i = 0; i < m->via.map.size; i++) {
                const msgpack_object *k = &m->via.map.ptr[i].key, *v = &m->via.map.ptr[i].val;
                if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 5 &&
                    !memcmp(k->via.str.ptr, "state", 5))
                        return v->type == MSGPACK_OBJECT_STR && v->via.str.size == 4 &&
                               !memcmp(v->via.str.ptr, "done", 4);
        }
        return false;
}

/* Keeps RUN_WINDOW job.run echo requests in flight until the daemon goes away; keeps
 * the id of every one answered "done". A thread: no criterion asserts here. */
static void *runner_main(void *arg)
{
        Runner *r = arg;
        IpcStatus st = {0};
        Client *c;

        if (client_connect(&c, r->sock, &st) < 0)
                return NULL;
        for (int i = 0; i < RUN_WINDOW; i++)
                run_request(c);
        while (r->n < sizeof(r->ids) / sizeof(r->ids[0])) {
                const msgpack_object *res;
                IpcMessage m;
                if (client_receive(c, &m, 30000, &st) != 1)
                        break; /* killed */
                if (client_result(&m, &res, &st) == 0 && record_done(res)) {
                        r->ids[r->n++] = map_uint(res, "id");
                        __atomic_add_fetch(r->total, 1, __ATOMIC_RELEASE);
                }
                ipc_message_clear(&m);
                run_request(c);
        }
        client_free(c);
        return NULL;
}

Test(daemon_store, kill9_under_pipelined_job_run_loses_no_answered_job)
{
        FiberdOpts o = {.config = "[jobs]\nretention_max = 100000\n", .plugins = "echo"};
        static Runner runs[RUN_CLIENTS];
        unsigned total = 0;
        uint64_t deadline;
        size_t checked = 0;
        Client *c;

        fiberd_start(&fd_, &o);
        for (int i = 0; i < RUN_CLIENTS; i++) {
                runs[i].sock = fd_.sock;
                runs[i].total = &total;
                cr_assert(pthread_create(&runs[i].thread, NULL, runner_main, &runs[i]) == 0);
        }
        deadline = fiberd_now_ms() + 30000;
        while (__atomic_load_n(&total, __ATOMIC_ACQUIRE) < RUN_BEFORE_KILL)
                cr_assert(fiberd_now_ms() < deadline, "%u job.runs answered after 30 s", total);
        kill9(); /* with RUN_CLIENTS * RUN_WINDOW job.runs in flight */
        for (int i = 0; i < RUN_CLIENTS; i++)
                pthread_join(runs[i].thread, NULL);

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < RUN_CLIENTS; i++) {
                for (size_t k = 0; k < runs[i].n; k++) {
                        char state[32];
                        int r = job_state(c, runs[i].ids[k], state, NULL, NULL);
                        cr_assert(r == 0, "job %llu was answered done but is gone after kill -9",
                                  (unsigned long long)runs[i].ids[k]);
                        cr_assert_str_eq(state, "done", "job %llu",
                                         (unsigned long long)runs[i].ids[k]);
                        checked++;
                }
        }
        cr_assert_geq(checked, RUN_BEFORE_KILL);
        client_free(c);
}

/* ------------------------------------------------------------ recovery ----------- */

Test(daemon_store, running_jobs_interrupted_or_retried)
{
        FiberdOpts o = {.plugins = "sleep spin echo"};
        uint64_t spin, slp, fresh, attempt = 0;
        char state[32], code[32];
        Client *c;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        spin = rpc_submit_long(c, "spin");
        slp = rpc_submit_long(c, "sleep");
        wait_state(c, spin, "running");
        wait_state(c, slp, "running");
        /* the store commits in order: once this submission is answered, both "running"
         * records before it are on disk too */
        cr_assert_gt(rpc_submit(c, "echo", NULL, 0, 0, 0, NULL), slp);
        client_free(c);
        kill9();

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        cr_assert(job_state(c, spin, state, NULL, code) == 0);
        cr_assert_str_eq(state, "failed");
        cr_assert_str_eq(code, "INTERRUPTED");
        cr_assert(fiberd_log_contains(&fd_, "was running when fiberd stopped"));
        /* sleep is retry-safe: queued again, then running, with its attempt counted */
        cr_assert(job_state(c, slp, state, &attempt, NULL) == 0);
        cr_assert(strcmp(state, "queued") == 0 || strcmp(state, "running") == 0, "%s", state);
        cr_assert_eq(attempt, 1);
        /* the log counts as the record does */
        cr_assert(fiberd_log_contains(&fd_, "attempt 1 was cut short; queued again"),
                  "the log does not say attempt 1");
        cr_assert_not(fiberd_log_contains(&fd_, "attempt 2"));
        fresh = rpc_submit(c, "echo", NULL, 0, 0, 0, NULL);
        cr_assert_gt(fresh, slp + 1, "id %llu handed out again", (unsigned long long)fresh);
        client_free(c);
}

Test(daemon_store, queued_jobs_run_again_in_order)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n", .plugins = "spin echo"};
        uint64_t spin, ids[4];
        Client *c;
        Reply rp;
        uint64_t last_start = 0;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        spin = rpc_submit_long(c, "spin");
        wait_state(c, spin, "running");
        for (int i = 0; i < 4; i++)
                ids[i] = rpc_submit(c, "echo", (Arg[]){ARG_I("n", i)}, 1, 0, 0, NULL);
        for (int i = 0; i < 4; i++)
                wait_state(c, ids[i], "queued");
        client_free(c);
        kill9();

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        for (int i = 0; i < 4; i++) {
                uint64_t started;
                rpc_job_wait(c, ids[i], 15000, &rp);
                cr_assert(rp.r == 0);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                started = map_uint(rp.result, "started_ms");
                cr_assert_geq(started, last_start, "job %d started before the one queued before it",
                              i);
                last_start = started;
                reply_clear(&rp);
        }
        client_free(c);
}

Test(daemon_store, sigterm_keeps_queued_jobs_and_answers_unavailable)
{
        FiberdOpts o = {.config = "[jobs]\nmax_running = 1\n", .plugins = "spin echo"};
        uint64_t spin, queued;
        char state[32], code[32];
        uint32_t msgid;
        Client *c, *w;
        IpcMessage m;
        IpcStatus st = {0};
        const msgpack_object *res;
        msgpack_packer *pk;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        spin = rpc_submit_long(c, "spin");
        wait_state(c, spin, "running");
        queued = rpc_submit(c, "echo", NULL, 0, 0, 0, NULL);
        wait_state(c, queued, "queued");
        /* a client waits for the queued job */
        w = fiberd_connect(&fd_);
        pk = client_request(w, "job.wait", 2, &msgid);
        cr_assert(pk);
        msgpack_pack_uint64(pk, queued);
        msgpack_pack_nil(pk);
        cr_assert(client_flush(w, 5000, &st) == 0);
        /* a request behind it on the same connection proves the wait has been read */
        wait_state(w, queued, "queued");

        kill(fd_.pid, SIGTERM);
        cr_assert(client_call_wait(w, msgid, &m, 15000, &st) == 1, "no answer: %s", st.message);
        cr_assert(client_result(&m, &res, &st) < 0, "job.wait answered a record");
        cr_assert_str_eq(st.code, "UNAVAILABLE");
        ipc_message_clear(&m);
        client_free(w);
        client_free(c);
        status = fiberd_signal_and_wait(&fd_, 0, 15000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        cr_assert(job_state(c, spin, state, NULL, code) == 0);
        cr_assert_str_eq(state, "cancelled"); /* spin is not retry-safe: cancelled */
        rpc_job_wait(c, queued, 15000, &(Reply){0});
        cr_assert(job_state(c, queued, state, NULL, NULL) == 0);
        cr_assert_str_eq(state, "done");
        client_free(c);
}

Test(daemon_store, ids_never_repeat_after_retention)
{
        FiberdOpts o = {.config = "[jobs]\nretention_max = 0\n", .plugins = "echo"};
        uint64_t first, again;
        char state[32];
        Client *c;
        uint64_t deadline;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        first = rpc_submit(c, "echo", NULL, 0, 0, 0, NULL);
        cr_assert_gt(first, 0);
        deadline = fiberd_now_ms() + 15000;
        while (job_state(c, first, state, NULL, NULL) == 0)
                cr_assert(fiberd_now_ms() < deadline, "job %llu not dropped by retention",
                          (unsigned long long)first);
        client_free(c);
        kill9(); /* retention's delete is on disk before the kill or not: ids must not care */

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        again = rpc_submit(c, "echo", NULL, 0, 0, 0, NULL);
        cr_assert_gt(again, first, "id %llu handed out again", (unsigned long long)again);
        client_free(c);
}

Test(daemon_store, retention_deletes_the_rows)
{
        FiberdOpts o = {.config = "[jobs]\nretention_max = 3\n", .plugins = "echo"};
        enum { N = 200 };
        static uint64_t ids[N];
        char db[256];
        sqlite3 *h;
        sqlite3_stmt *st;
        int64_t rows = -1, oldest = -1;
        Reply rp;
        Client *c;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        /* many at once: the store is busy, the drops of a batch are runs of ids */
        for (int i = 0; i < N; i++) {
                ids[i] = rpc_submit(c, "echo", NULL, 0, 0, 0, NULL);
                cr_assert_gt(ids[i], 0);
        }
        /* every job ended (the stats' done count): a job's own wait could find its
         * record already dropped, when three later ones ended first */
        for (int tries = 0;; tries++) {
                uint64_t done;
                rpc_simple(c, IPC_METHOD_STATS, 0, NULL, &rp);
                cr_assert(rp.r == 0, "stats: %s", rp.st.message);
                done = map_uint(map_get(rp.result, IPC_KEY_JOBS), IPC_KEY_DONE);
                reply_clear(&rp);
                if (done == N)
                        break;
                cr_assert(tries < 1500, "%llu of %d jobs done after 15 s", (unsigned long long)done,
                          N);
                usleep(10000);
        }
        client_free(c);
        status = fiberd_signal_and_wait(&fd_, SIGTERM, 15000); /* every write committed */
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);

        snprintf(db, sizeof(db), "%s/jobs.db", fd_.dir);
        cr_assert(sqlite3_open_v2(db, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        cr_assert(sqlite3_prepare_v2(h, "SELECT count(*), min(id) FROM jobs", -1, &st, NULL) ==
                  SQLITE_OK);
        cr_assert(sqlite3_step(st) == SQLITE_ROW);
        rows = sqlite3_column_int64(st, 0);
        oldest = sqlite3_column_int64(st, 1);
        sqlite3_finalize(st);
        sqlite3_close(h);
        /* the three newest to finish are kept: the last three submitted, or near them */
        cr_assert_eq(rows, 3, "%lld rows after %d jobs with retention_max = 3", (long long)rows, N);
        cr_assert_gt((uint64_t)oldest, ids[N / 2], "row %lld should have been dropped",
                     (long long)oldest);
}

/* ------------------------------------------------------------ damaged store ------ */

Test(daemon_store, damaged_database_refused)
{
        FiberdOpts o = {.plugins = "echo"};
        char db[256], wal[264];
        int status, f;

        fiberd_start(&fd_, &o);
        cr_assert(fiberd_log_contains(&fd_, "job store: sqlite at "));
        cr_assert(fiberd_signal_and_wait(&fd_, SIGTERM, 15000) >= 0);
        snprintf(db, sizeof(db), "%s/jobs.db", fd_.dir);
        snprintf(wal, sizeof(wal), "%s-wal", db);
        unlink(wal);
        f = open(db, O_WRONLY | O_TRUNC);
        cr_assert(f >= 0);
        cr_assert(write(f, "this is not an SQLite database, not at all...........", 53) == 53);
        close(f);

        status = fiberd_restart_fails(&fd_, 15000);
        cr_assert(status != -1, "fiberd started on a damaged store");
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) != 0, "status 0x%x", status);
        cr_assert(fiberd_log_contains(&fd_, db), "the message does not name %s", db);
        cr_assert(fiberd_log_contains(&fd_, "move the file"), "the message gives no way out");
}

/* ------------------------------------------------------------ crash-only plugins - */

static void wait_crash(void)
{
        int status = fiberd_signal_and_wait(&fd_, 0, 15000);

        cr_assert(status != -1, "fiberd did not crash");
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status 0x%x", status);
}

Test(daemon_store, plugin_crashing_in_run_is_quarantined_after_two_crashes)
{
        FiberdOpts o = {.plugins = "echo", .extra = FIBERD_TEST_PLUGIN_DIR "/crash_run.so"};
        char line[1024], state[32], code[32];
        bool loaded, refused;
        uint64_t first, second;
        IpcStatus st;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        first = rpc_submit(c, "crash_run", NULL, 0, 0, 0, NULL);
        cr_assert_gt(first, 0);
        wait_crash();
        client_free(c);
        cr_assert(fiberd_log_contains(&fd_, "fatal signal SIGSEGV in job"),
                  "no report naming the job");
        cr_assert(fiberd_log_contains(&fd_, "plugin crash_run"));

        fiberd_restart(&fd_);
        fiberd_first_log_line(&fd_, line, sizeof(line));
        cr_assert(strstr(line, "crashed last time") && strstr(line, "crash_run"),
                  "the first log line does not name the plugin: %s", line);
        c = fiberd_connect(&fd_);
        cr_assert(job_state(c, first, state, NULL, code) == 0);
        cr_assert_str_eq(state, "failed");
        cr_assert_str_eq(code, "INTERRUPTED");
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(loaded && !refused, "one crash quarantined it already");
        second = rpc_submit(c, "crash_run", NULL, 0, 0, 0, NULL);
        cr_assert_gt(second, first);
        wait_crash();
        client_free(c);

        /* the second crash: refused, and fiberd stays up */
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(!loaded && refused, "crash_run is not quarantined after two crashes");
        cr_assert_eq(rpc_submit(c, "crash_run", NULL, 0, 0, 0, &st), 0);
        cr_assert_str_eq(st.code, "NOT_FOUND");
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert(rp.r == 0);
        reply_clear(&rp);

        /* an admin clears it: loaded again */
        {
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "plugins.clear", 1, &msgid);
                cr_assert(pk);
                ipc_pack_cstr(pk, "crash_run");
                rpc_wait_reply(c, msgid, &rp);
                cr_assert(rp.r == 0, "plugins.clear: %s", rp.st.message);
                reply_clear(&rp);
        }
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(loaded && !refused, "plugins.clear did not load it again");
        client_free(c);
}

Test(daemon_store, plugin_crashing_in_init_is_quarantined_and_fiberd_stays_up)
{
        FiberdOpts o = {.plugins = "echo"};
        char line[1024];
        bool loaded, refused;
        int status;
        Client *c;

        fiberd_start(&fd_, &o);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/crash_init.so", "crash_init.so");
        wait_crash(); /* loaded by the directory watcher: init() crashes */
        cr_assert(fiberd_log_contains(&fd_, "while loading plugin file"));

        /* the start loads it again and crashes again: a crash loop without the store */
        status = fiberd_restart_fails(&fd_, 15000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status 0x%x", status);
        fiberd_first_log_line(&fd_, line, sizeof(line));
        cr_assert(strstr(line, "crashed last time") && strstr(line, "crash_init"),
                  "the first log line does not name the file: %s", line);

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        rpc_plugin_listed(c, "crash_init", &loaded, "quarantined", &refused);
        cr_assert(!loaded && refused, "crash_init is not quarantined after two crashes");
        cr_assert_gt(rpc_submit(c, "echo", NULL, 0, 0, 0, NULL), 0, "fiberd does not work");
        client_free(c);
}

/* The reason plugins.list gives for the refused file whose path ends in "/@file", into
 * @buf ("" when it is not refused). */
static void refusal_of(Client *c, const char *file, char *buf, size_t size)
{
        const msgpack_object *v;
        size_t n = strlen(file);
        Reply rp;

        buf[0] = '\0';
        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        cr_assert(rp.r == 0, "plugins.list: %s", rp.st.message);
        v = map_get(rp.result, "refused");
        for (uint32_t i = 0; v && i < v->via.array.size; i++) {
                const char *path = map_str(&v->via.array.ptr[i], "path");
                size_t len = strlen(path);
                if (len > n && path[len - n - 1] == '/' && strcmp(path + len - n, file) == 0)
                        snprintf(buf, size, "%s", map_str(&v->via.array.ptr[i], "reason"));
        }
        reply_clear(&rp);
}

/* Polls plugins.list (bounded: asserts after 15 s) until @file is refused with a reason
 * containing @needle; the reason into @buf. */
static void wait_refused(Client *c, const char *file, const char *needle, char *buf, size_t size)
{
        uint64_t deadline = fiberd_now_ms() + 15000;

        for (;;) {
                refusal_of(c, file, buf, size);
                if (strstr(buf, needle))
                        return;
                cr_assert(fiberd_now_ms() < deadline, "%s is not refused with \"%s\": \"%s\"", file,
                          needle, buf);
                usleep(5000);
        }
}

/* Polls plugins.list (bounded) until a plugin called @name is loaded. */
static void wait_loaded(Client *c, const char *name)
{
        uint64_t deadline = fiberd_now_ms() + 15000;
        bool loaded, refused;

        for (;;) {
                rpc_plugin_listed(c, name, &loaded, "-", &refused);
                if (loaded)
                        return;
                cr_assert(fiberd_now_ms() < deadline, "plugin %s is not loaded after 15 s", name);
                usleep(5000);
        }
}

/* Submits @plugin, whose job takes fiberd down: waits for the death (bounded), checks
 * the wait status (@sig, or exit status 3 when @sig is 0: exit_run). */
static void submit_and_crash(const char *plugin, int sig)
{
        Client *c = fiberd_connect(&fd_);
        int status;

        cr_assert_gt(rpc_submit(c, plugin, NULL, 0, 0, 0, NULL), 0, "submit %s", plugin);
        status = fiberd_signal_and_wait(&fd_, 0, 15000);
        client_free(c);
        if (sig)
                cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == sig, "status 0x%x", status);
        else
                cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3, "status 0x%x", status);
}

/* SIGTERM (a clean stop: exit 0), then a start. */
static void clean_restart(void)
{
        int status = fiberd_signal_and_wait(&fd_, SIGTERM, 15000);

        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        fiberd_restart(&fd_);
}

/*
 * Strikes belong to the file's contents and are kept: a clean stop between two crashes,
 * or a crash blamed on another plugin, clears none; and once quarantined, the file stays
 * refused across clean restarts and other plugins' crashes.
 */
Test(daemon_store, strikes_and_quarantine_survive_clean_restarts_and_other_crashes)
{
        FiberdOpts o = {.plugins = "echo",
                        .extra = FIBERD_TEST_PLUGIN_DIR "/crash_run.so " FIBERD_TEST_PLUGIN_DIR
                                                        "/exit_run.so"};
        char reason[1024];
        bool loaded, refused;
        IpcStatus st;
        Client *c;

        fiberd_start(&fd_, &o);
        submit_and_crash("crash_run", SIGSEGV); /* strike 1 */
        fiberd_restart(&fd_);
        clean_restart();                 /* a clean stop and start */
        submit_and_crash("exit_run", 0); /* a crash blamed on another plugin */
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(loaded && !refused, "one crash quarantined crash_run");
        client_free(c);
        submit_and_crash("crash_run", SIGSEGV); /* strike 2: the same contents */
        fiberd_restart(&fd_);

        for (int round = 0; round < 3; round++) {
                c = fiberd_connect(&fd_);
                rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
                cr_assert(!loaded, "round %d: crash_run loaded again", round);
                refusal_of(c, "crash_run.so", reason, sizeof(reason));
                cr_assert(strstr(reason, "quarantined: ") &&
                                  strstr(reason, "2 crashes of this file"),
                          "round %d: %s", round, reason);
                cr_assert(strstr(reason, "`fiberctl plugins --clear crash_run`"), "%s", reason);
                cr_assert_eq(rpc_submit(c, "crash_run", NULL, 0, 0, 0, &st), 0);
                cr_assert_str_eq(st.code, "NOT_FOUND");
                client_free(c);
                cr_assert(fiberd_log_contains(&fd_, "plugin crash_run (") &&
                                  fiberd_log_contains(&fd_, "is quarantined") &&
                                  fiberd_log_contains(&fd_, "`fiberctl plugins --clear crash_run`"),
                          "round %d: the start does not name the quarantine", round);
                if (round == 0) {
                        clean_restart();
                } else if (round == 1) {
                        submit_and_crash("exit_run", 0);
                        fiberd_restart(&fd_);
                }
        }

        /* a copy takes on the strikes; clearing the plugin clears its copies too */
        c = fiberd_connect(&fd_);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/crash_run.so", "crash_copy.so");
        wait_refused(c, "crash_copy.so", "quarantined: the same contents", reason, sizeof(reason));
        {
                uint32_t msgid;
                Reply rp;
                msgpack_packer *pk = client_request(c, "plugins.clear", 1, &msgid);

                cr_assert(pk);
                ipc_pack_cstr(pk, "crash_run");
                rpc_wait_reply(c, msgid, &rp);
                cr_assert(rp.r == 0, "plugins.clear: %s", rp.st.message);
                cr_assert_eq(map_uint(rp.result, "cleared"), 2, "the copy was not cleared");
                reply_clear(&rp);
        }
        wait_loaded(c, "crash_run");
        /* the scan goes in name order: crash_copy.so is crash_run now, crash_run.so its
         * duplicate */
        wait_refused(c, "crash_run.so", "duplicate name", reason, sizeof(reason));
        client_free(c);
}

/*
 * A file that crashed fiberd while loading (its name never known) is quarantined with a
 * hint naming its file; the same bytes installed again, or copied under another name,
 * stay refused (the contents are what is quarantined); other contents at its path load.
 */
Test(daemon_store, a_quarantined_file_stays_refused_until_its_contents_change)
{
        FiberdOpts o = {.plugins = "echo"};
        char reason[1024];
        int status;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/crash_init.so", "crash_init.so");
        wait_crash();
        status = fiberd_restart_fails(&fd_, 15000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status 0x%x", status);
        fiberd_restart(&fd_);
        cr_assert(fiberd_log_contains(&fd_, "`fiberctl plugins --clear crash_init`"),
                  "the start's hint does not name the file");
        cr_assert_not(fiberd_log_contains(&fd_, "--clear ?"));
        c = fiberd_connect(&fd_);
        refusal_of(c, "crash_init.so", reason, sizeof(reason));
        cr_assert(strstr(reason, "quarantined: ") &&
                          strstr(reason, "`fiberctl plugins --clear crash_init`"),
                  "%s", reason);

        /* the same bytes again (a new inode, a new mtime), and under another name */
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/crash_init.so", "crash_init.so");
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/crash_init.so", "crash_copy.so");
        wait_refused(c, "crash_copy.so", "quarantined: the same contents", reason, sizeof(reason));
        cr_assert(strstr(reason, "crash_init.so") && strstr(reason, "--clear crash_copy`"), "%s",
                  reason);
        refusal_of(c, "crash_init.so", reason, sizeof(reason));
        cr_assert(strstr(reason, "quarantined: "), "the same bytes were let in again: %s", reason);
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert(rp.r == 0, "fiberd is down");
        reply_clear(&rp);

        /* other contents at the quarantined path: a new file, loaded */
        fiberd_copy_plugin(&fd_, FIBERD_PLUGIN_BUILD_DIR "/sleep.so", "crash_init.so");
        wait_loaded(c, "sleep");
        refusal_of(c, "crash_init.so", reason, sizeof(reason));
        cr_assert_str_eq(reason, "", "still refused: %s", reason);
        client_free(c);

        /* and it is still loaded after a restart: its strikes went with the old contents */
        clean_restart();
        c = fiberd_connect(&fd_);
        wait_loaded(c, "sleep");
        refusal_of(c, "crash_copy.so", reason, sizeof(reason));
        cr_assert(strstr(reason, "quarantined: the same contents"), "%s", reason);
        client_free(c);
}

/*
 * A real plugin cut short: dlopen() would map a segment past the end of the file and
 * fiberd would die of SIGBUS in the loader. It is refused with the reason, at the
 * directory watch and at a start, and fiberd stays up.
 */
Test(daemon_store, a_truncated_plugin_is_refused_before_dlopen)
{
        FiberdOpts o = {.plugins = "echo"};
        char cut[256], reason[1024];
        Client *c;
        int in, out;

        fiberd_start(&fd_, &o);
        snprintf(cut, sizeof(cut), "%s/sleep-cut", fd_.dir);
        in = open(FIBERD_PLUGIN_BUILD_DIR "/sleep.so", O_RDONLY | O_CLOEXEC);
        out = open(cut, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert(in >= 0 && out >= 0);
        {
                char buf[8000];
                cr_assert_eq(read(in, buf, sizeof(buf)), (ssize_t)sizeof(buf));
                cr_assert_eq(write(out, buf, sizeof(buf)), (ssize_t)sizeof(buf));
        }
        close(in);
        close(out);
        fiberd_copy_plugin(&fd_, cut, "sleep.so");

        c = fiberd_connect(&fd_);
        wait_refused(c, "sleep.so", "ends past the end of the file", reason, sizeof(reason));
        cr_assert(strstr(reason, "not a loadable ELF shared object: segment ") &&
                          strstr(reason, " > 8000 bytes)"),
                  "%s", reason);
        cr_assert_gt(rpc_submit(c, "echo", NULL, 0, 0, 0, NULL), 0, "fiberd does not work");
        client_free(c);

        clean_restart();
        c = fiberd_connect(&fd_);
        refusal_of(c, "sleep.so", reason, sizeof(reason));
        cr_assert(strstr(reason, "ends past the end of the file"), "%s", reason);
        client_free(c);
        cr_assert_not(fiberd_log_contains(&fd_, "crashed last time"));
}

Test(daemon_store, plugin_calling_exit_is_reported_and_blamed)
{
        FiberdOpts o = {.plugins = "echo", .extra = FIBERD_TEST_PLUGIN_DIR "/exit_run.so"};
        char line[1024], state[32], code[32];
        uint64_t id;
        int status;
        Client *c;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "exit_run", NULL, 0, 0, 0, NULL);
        cr_assert_gt(id, 0);
        status = fiberd_signal_and_wait(&fd_, 0, 15000);
        client_free(c);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 3, "status 0x%x", status);
        cr_assert(fiberd_log_contains(&fd_, "exit() called in job"), "exit() not reported");

        fiberd_restart(&fd_);
        fiberd_first_log_line(&fd_, line, sizeof(line));
        cr_assert(strstr(line, "crashed last time") && strstr(line, "exit_run"),
                  "the first log line does not name the plugin: %s", line);
        c = fiberd_connect(&fd_);
        cr_assert(job_state(c, id, state, NULL, code) == 0);
        cr_assert_str_eq(state, "failed");
        cr_assert_str_eq(code, "INTERRUPTED");
        client_free(c);
}

Test(daemon_store, sigterm_requeues_a_retry_safe_running_job)
{
        FiberdOpts o = {.plugins = "sleep echo"};
        char state[32];
        uint64_t slp, attempt = 0;
        Client *c;
        int status;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        slp = rpc_submit_long(c, "sleep");
        wait_state(c, slp, "running");
        client_free(c);
        status = fiberd_signal_and_wait(&fd_, SIGTERM, 15000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);

        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        cr_assert(job_state(c, slp, state, &attempt, NULL) == 0);
        cr_assert(strcmp(state, "queued") == 0 || strcmp(state, "running") == 0, "%s", state);
        cr_assert_eq(attempt, 1);
        cr_assert_not(fiberd_log_contains(&fd_, "crashed last time"), "a clean stop blamed");
        client_free(c);
}
