/* SPDX-License-Identifier: MIT */
/*
 * daemon_redis.c — the fleet: [store] backend = redis (daemon/store/store-redis.c) with two
 * real fiberd processes sharing one stream of a private redis-server.
 *
 * Each test starts its own redis-server on a Unix socket in a temporary directory
 * (redis_fleet.c) and stops it in the fixture's fini. A machine without redis-server
 * skips these tests with the reason printed; every other failure fails them. Job
 * scheduling in a fleet (delays, retries, keys) is daemon_redis_sched.c's.
 *
 * What is checked:
 *  - jobs submitted through one host are run by both hosts, each exactly once: the
 *    hosts' `done` counters add up to the number of jobs, both are non-zero, and no
 *    job has a retry counted;
 *  - job.status and job.wait through either host answer for every job of the fleet,
 *    also the ones the other host ran; job.list through one host lists them all;
 *  - (job.cancel through a host that does not run the job: daemon_redis_outage.c);
 *  - kill -9 of the host running a long job: the other host takes it over once
 *    claim_idle_ms (500 ms here) passed and finishes it, as attempt 1 (its second run:
 *    sleep is retry-safe);
 *  - retention_max holds fleet-wide: with retention_max = 5, after 20 jobs finished the
 *    oldest is NOT_FOUND (also in Redis, not only in the host's table), the newest 5
 *    are found, and at most 5 fiberd:job:* hashes are left;
 *  - crash-only plugins in fleet mode: a host under a fixed node name whose crash_run
 *    plugin crashes it twice in a row finds, at its next start, the plugin quarantined
 *    (its strikes are kept in Redis under fiberd:host:<node>:plugins): `fiberctl
 *    plugins` shows it refused with the reason, and fiberd stays up;
 *  - a job submitted with an fd runs on its host only, off the stream: its id is in
 *    fiberd:host:<node>:local while it runs; kill -9 of that host and a restart under
 *    the same node end it failed INTERRUPTED (job.status through it and through another
 *    host), and the set no longer holds it;
 *  - job.list through a host that holds none of the fleet's 300 jobs (their records
 *    are read a page of ids at a time, store_fetch_many()): unpaged, and paged with a
 *    limit of 128, every id comes back exactly once, newest first in the pages;
 *  - a job.run through a host with room runs there, off the stream: no record in Redis
 *    while it runs (another host answers NOT_FOUND; a job.wait with a limit through its
 *    host answers `running` and writes nothing), its host's job.list shows it once
 *    among the fleet's jobs, newest first across pages; once it ended its record is
 *    there, `done`, through either host, expiring, in fiberd:finished and the index, and
 *    the stream got no entry for it;
 *  - job.runs beyond a host's room (max_running 1: two) go through the stream, and the
 *    other host runs some: all six answered `done`, each run once, not all through the
 *    stream;
 *  - a clean stop of that host with one job.run running (retry-safe) and one queued puts
 *    both on the stream, nothing in its local set, its callers answered UNAVAILABLE
 *    "goes back to the fleet's queue", and the other host runs them: the interrupted
 *    one as attempt 1;
 *  - a job.run's one commit (`redis-cli monitor`): its record's HSET, the trim by
 *    EVALSHA, and no script sent by its text: not the trim's, and no release of
 *    dependents, which a job whose id nobody knew before cannot have;
 *  - ten job.runs that end while the server is stopped are committed together, their
 *    records joining fiberd:finished in one ZADD of several members, each once;
 *  - after a SCRIPT FLUSH the next commit's trim is answered NOSCRIPT (INFO errorstats
 *    counts it), the scripts are loaded again: every job.run answered done, its record
 *    there, retention_max holding;
 *  - schedule.add is accepted in fleet mode and its row is kept in Redis
 *    (fiberd:schedules), the version of the fleet's schedules moved
 *    (daemon_redis_schedules.c checks them at work).
 */
#include "tests/integration/fiberd_harness.h"
#include "tests/integration/redis_fleet.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

static Fiberd host_a, host_b;

static void teardown(void)
{
        fiberd_stop(&host_a);
        fiberd_stop(&host_b);
        redis_fleet_stop();
}

TestSuite(daemon_redis, .fini = teardown, .timeout = 90);

/* Starts fiberd @d as fleet node @node, @max_running jobs at once. */
static void host_start(Fiberd *d, const char *node, unsigned max_running)
{
        char config[512];

        snprintf(config, sizeof(config),
                 "[jobs]\nmax_running = %u\n"
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = %s\n"
                 "claim_idle_ms = 500\n",
                 max_running, redis_fleet_sock(), node);
        fiberd_start(d, &(FiberdOpts){.config = config, .plugins = "echo sleep", .workers = 2});
}

/* Starts the fleet's redis-server and hosts a and b (@max_a, @max_b jobs at once), and
 * connects a client to each. */
static void fleet_of_two(unsigned max_a, unsigned max_b, Client **a, Client **b)
{
        redis_fleet_start("daemon_redis");
        host_start(&host_a, "a", max_a);
        host_start(&host_b, "b", max_b);
        *a = fiberd_connect(&host_a);
        *b = fiberd_connect(&host_b);
}

/* job.status of @id through @c: its state (size 32) and attempt; the call's error. */
static int job_state(Client *c, uint64_t id, char *state, uint64_t *attempt)
{
        Reply rp;
        int r;

        rpc_simple(c, "job.status", 1, &id, &rp);
        r = rp.r;
        if (r == 0) {
                snprintf(state, 32, "%s", map_str(rp.result, "state"));
                if (attempt)
                        *attempt = map_uint(rp.result, "attempt");
        }
        reply_clear(&rp);
        return r;
}

#define FLEET_JOBS 12

Test(daemon_redis, both_hosts_run_each_job_once_and_answer_for_all)
{
        uint64_t ids[FLEET_JOBS], done_a, done_b;
        Client *a, *b;
        Reply rp;

        /* one job at a time each: a host holds at most two, so both must run some */
        fleet_of_two(1, 1, &a, &b);
        for (int i = 0; i < FLEET_JOBS; i++) {
                IpcStatus st = {0};
                Arg arg = ARG_I("ms", 100);
                ids[i] = rpc_submit(a, "sleep", &arg, 1, 0, 0, &st);
                cr_assert(ids[i] > 0, "submit %d: %s", i, st.message);
                if (i > 0)
                        cr_assert_gt(ids[i], ids[i - 1], "ids from the shared counter rise");
        }
        /* job.wait through A for every job, also those B runs */
        for (int i = 0; i < FLEET_JOBS; i++) {
                rpc_job_wait(a, ids[i], 30000, &rp);
                cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)ids[i], rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %llu",
                                 (unsigned long long)ids[i]);
                cr_assert_eq(map_uint(rp.result, "attempt"), 0, "job %llu ran twice",
                             (unsigned long long)ids[i]);
                reply_clear(&rp);
        }
        /* job.status through B for every job, also those A ran */
        for (int i = 0; i < FLEET_JOBS; i++) {
                char state[32];
                cr_assert_eq(job_state(b, ids[i], state, NULL), 0, "status %llu through b",
                             (unsigned long long)ids[i]);
                cr_assert_str_eq(state, "done", "job %llu through b", (unsigned long long)ids[i]);
        }
        /* each job ran exactly once, and both hosts ran some */
        done_a = rpc_stats_jobs(a, "done");
        done_b = rpc_stats_jobs(b, "done");
        cr_assert_eq(done_a + done_b, FLEET_JOBS, "a ran %llu, b ran %llu of %d jobs",
                     (unsigned long long)done_a, (unsigned long long)done_b, FLEET_JOBS);
        cr_assert(done_a > 0 && done_b > 0, "a ran %llu, b ran %llu: not both hosts",
                  (unsigned long long)done_a, (unsigned long long)done_b);
        /* job.list through B lists the whole fleet's jobs */
        {
                rpc_simple(b, "job.list", 0, NULL, &rp);
                cr_assert_eq(rp.r, 0, "job.list: %s", rp.st.message);
                cr_assert_eq(rp.result->type, MSGPACK_OBJECT_ARRAY);
                cr_assert_eq(rp.result->via.array.size, FLEET_JOBS, "job.list through b: %u",
                             rp.result->via.array.size);
                reply_clear(&rp);
        }
        client_free(a);
        client_free(b);
}

Test(daemon_redis, a_killed_hosts_job_is_taken_over_and_finishes)
{
        Client *a, *b, *runner_c, *other_c;
        Fiberd *runner, *other;
        uint64_t id, deadline, attempt = 0;
        IpcStatus st = {0};
        Arg arg = ARG_I("ms", 3000);
        char state[32] = "";
        Reply rp;
        int status;

        fleet_of_two(4, 4, &a, &b);
        id = rpc_submit(a, "sleep", &arg, 1, 0, 0, &st);
        cr_assert(id > 0, "submit: %s", st.message);
        /* which host runs it: the one whose running counter says so */
        deadline = fiberd_now_ms() + 10000;
        for (;;) {
                if (rpc_stats_jobs(a, "running") == 1) {
                        runner = &host_a;
                        other = &host_b;
                        runner_c = a;
                        other_c = b;
                        break;
                }
                if (rpc_stats_jobs(b, "running") == 1) {
                        runner = &host_b;
                        other = &host_a;
                        runner_c = b;
                        other_c = a;
                        break;
                }
                cr_assert(fiberd_now_ms() < deadline, "no host started job %llu",
                          (unsigned long long)id);
                usleep(5000);
        }
        /* the shared record says running (the store writes behind: until it does, a
         * takeover would see a queued job, whose run is not counted) */
        deadline = fiberd_now_ms() + 10000;
        while (job_state(other_c, id, state, &attempt) != 0 || strcmp(state, "running") != 0) {
                cr_assert(fiberd_now_ms() < deadline, "job %llu's shared record is %s",
                          (unsigned long long)id, state);
                usleep(2000);
        }
        client_free(runner_c);
        status = fiberd_signal_and_wait(runner, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);
        /* the other host takes it over after claim_idle_ms and runs it to the end */
        rpc_job_wait(other_c, id, 30000, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_uint(rp.result, "attempt"), 1, "its second run is attempt 1");
        reply_clear(&rp);
        cr_assert_eq(job_state(other_c, id, state, &attempt), 0);
        cr_assert_str_eq(state, "done");
        cr_assert(fiberd_log_contains(other, "taken over from a silent host"),
                  "the other host's log names the takeover");
        cr_assert_eq(rpc_stats_jobs(other_c, "done"), 1);
        client_free(other_c);
}

/* ------------------------------------------------------------ retention_max ------ */

#define RETENTION_JOBS 20
#define RETENTION_MAX 5

Test(daemon_redis, retention_max_trims_the_shared_records)
{
        char config[512], state[32];
        uint64_t ids[RETENTION_JOBS], deadline;
        long long keys;
        Client *a;
        Reply rp;

        redis_fleet_start("daemon_redis");
        snprintf(config, sizeof(config),
                 "[jobs]\nmax_running = 1\nretention_max = %d\n"
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = a\nclaim_idle_ms = 500\n",
                 RETENTION_MAX, redis_fleet_sock());
        fiberd_start(&host_a, &(FiberdOpts){.config = config, .plugins = "echo"});
        a = fiberd_connect(&host_a);
        /* one at a time: they finish in id order, so the oldest are the lowest ids */
        for (int i = 0; i < RETENTION_JOBS; i++) {
                IpcStatus st = {0};
                ids[i] = rpc_submit(a, "echo", (Arg[]){ARG_I("n", i)}, 1, 0, 0, &st);
                cr_assert(ids[i] > 0, "submit %d: %s", i, st.message);
                rpc_job_wait(a, ids[i], 15000, &rp);
                cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)ids[i], rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                reply_clear(&rp);
        }
        /* the last finish's trim is committed after its waiters were answered: wait for
         * the oldest to be gone from the fleet (the host's table dropped it long ago) */
        deadline = fiberd_now_ms() + 15000;
        while (job_state(a, ids[0], state, NULL) == 0)
                cr_assert(fiberd_now_ms() < deadline, "job %llu is still %s after 15 s",
                          (unsigned long long)ids[0], state);
        rpc_simple(a, "job.status", 1, &ids[0], &rp);
        cr_assert_str_eq(rp.st.code ? rp.st.code : "", "NOT_FOUND", "%s", rp.st.message);
        reply_clear(&rp);
        deadline = fiberd_now_ms() + 15000;
        while ((keys = redis_fleet_cli_int(
                        "EVAL \"return #redis.call('KEYS', 'fiberd:job:*')\" 0")) > RETENTION_MAX)
                cr_assert(fiberd_now_ms() < deadline, "%lld fiberd:job:* hashes after 15 s", keys);
        cr_assert_geq(keys, 0, "redis-cli gave no count");
        for (int i = 0; i < RETENTION_JOBS - RETENTION_MAX; i++) {
                char args[64];
                snprintf(args, sizeof(args), "EXISTS fiberd:job:%llu", (unsigned long long)ids[i]);
                cr_assert_eq(redis_fleet_cli_int(args), 0, "job %d (%llu) was kept", i,
                             (unsigned long long)ids[i]);
        }
        for (int i = RETENTION_JOBS - RETENTION_MAX; i < RETENTION_JOBS; i++) {
                char args[64];
                snprintf(args, sizeof(args), "EXISTS fiberd:job:%llu", (unsigned long long)ids[i]);
                cr_assert_eq(redis_fleet_cli_int(args), 1, "job %d (%llu) was dropped", i,
                             (unsigned long long)ids[i]);
                cr_assert_eq(job_state(a, ids[i], state, NULL), 0, "job.status %llu",
                             (unsigned long long)ids[i]);
                cr_assert_str_eq(state, "done");
        }
        client_free(a);
}

/* ------------------------------------------------------------ crash-only plugins - */

/* Waits for @d to die by itself; asserts it died of SIGSEGV. */
static void wait_crash(Fiberd *d)
{
        int status = fiberd_signal_and_wait(d, 0, 15000);

        cr_assert(status != -1, "fiberd did not crash");
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "status 0x%x", status);
}

/* `fiberctl -s SOCK plugins` against @d: its stdout into @out (@size bytes). */
static void fiberctl_plugins(const Fiberd *d, char *out, size_t size)
{
        char cmd[512], path[128];
        size_t n = 0;
        int status;
        FILE *f;

        snprintf(path, sizeof(path), "%s/ctl.out", d->dir);
        snprintf(cmd, sizeof(cmd), "%s -s %s plugins >%s 2>&1", FIBERCTL_BIN, d->sock, path);
        status = system(cmd);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fiberctl plugins: 0x%x", status);
        f = fopen(path, "r");
        cr_assert(f);
        n = fread(out, 1, size - 1, f);
        out[n] = '\0';
        fclose(f);
}

Test(daemon_redis, plugin_crashing_in_run_is_quarantined_in_fleet_mode)
{
        char config[512], line[1024], out[8192], key[128], cmd[512];
        bool loaded, refused;
        uint64_t first, second;
        IpcStatus st = {0};
        Client *c;
        Reply rp;

        redis_fleet_start("daemon_redis");
        snprintf(config, sizeof(config),
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = crashy\n"
                 "claim_idle_ms = 500\n",
                 redis_fleet_sock());
        fiberd_start(&host_a, &(FiberdOpts){.config = config,
                                            .plugins = "echo",
                                            .extra = FIBERD_TEST_PLUGIN_DIR "/crash_run.so"});
        c = fiberd_connect(&host_a);
        /* parked 200 ms first: in a fleet the job may be read from the stream and run
         * before its submission is answered, and a crash then would close the answer */
        first = rpc_submit(c, "crash_run", (Arg[]){ARG_I("ms", 200)}, 1, 0, 0, &st);
        cr_assert_gt(first, 0, "submit: %s", st.message);
        wait_crash(&host_a);
        client_free(c);
        cr_assert(fiberd_log_contains(&host_a, "plugin crash_run"), "no report naming it");

        /* one strike: the start names it, the job it crashed in failed, it still loads */
        fiberd_restart(&host_a);
        fiberd_first_log_line(&host_a, line, sizeof(line));
        cr_assert(strstr(line, "crashed last time") && strstr(line, "crash_run"),
                  "the first log line does not name the plugin: %s", line);
        c = fiberd_connect(&host_a);
        rpc_job_wait(c, first, 15000, &rp);
        cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)first, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        reply_clear(&rp);
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(loaded && !refused, "one crash quarantined it already");
        /* the strike is in Redis, under the host's stable name */
        snprintf(key, sizeof(key), "fiberd:host:crashy:plugins");
        snprintf(cmd, sizeof(cmd), "redis-cli -s %s HLEN %s | grep -qx '[1-9][0-9]*'",
                 redis_fleet_sock(), key);
        cr_assert_eq(system(cmd), 0, "%s holds no plugin file", key);
        second = rpc_submit(c, "crash_run", (Arg[]){ARG_I("ms", 200)}, 1, 0, 0, &st);
        cr_assert_gt(second, first, "submit: %s", st.message);
        wait_crash(&host_a);
        client_free(c);

        /* the second crash in a row: refused with the reason, and fiberd stays up */
        fiberd_restart(&host_a);
        c = fiberd_connect(&host_a);
        rpc_plugin_listed(c, "crash_run", &loaded, "quarantined", &refused);
        cr_assert(!loaded && refused, "crash_run is not quarantined after two crashes");
        fiberctl_plugins(&host_a, out, sizeof(out));
        cr_assert(strstr(out, "crash_run") && strstr(out, "quarantined") && strstr(out, "SIGSEGV"),
                  "fiberctl plugins does not show it refused with the reason:\n%s", out);
        cr_assert_eq(rpc_submit(c, "crash_run", NULL, 0, 0, 0, &st), 0);
        cr_assert_str_eq(st.code, "NOT_FOUND");
        rpc_job_wait(c, second, 15000, &rp);
        cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)second, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed", "the job it crashed in");
        reply_clear(&rp);
        cr_assert_gt(rpc_submit(c, "echo", NULL, 0, 0, 0, &st), 0, "fiberd does not work: %s",
                     st.message);
        rpc_simple(c, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        reply_clear(&rp);
        client_free(c);
}

/* ------------------------------------------------------------ jobs with fds ------ */

/* job.status of @id through @c: its state and error code (each 32 bytes). */
static int job_state_code(Client *c, uint64_t id, char *state, char *code)
{
        const msgpack_object *err;
        Reply rp;
        int r;

        rpc_simple(c, "job.status", 1, &id, &rp);
        r = rp.r;
        if (r == 0) {
                err = map_get(rp.result, "error");
                snprintf(state, 32, "%s", map_str(rp.result, "state"));
                snprintf(code, 32, "%s",
                         err && err->type == MSGPACK_OBJECT_MAP ? map_str(err, "code") : "");
        }
        reply_clear(&rp);
        return r;
}

/* job.submit of sleep {ms: @ms, file: <fd 0>} with @fd passed: the job's id. */
static uint64_t submit_sleep_with_fd(Client *c, int fd, uint64_t ms)
{
        static const char fd0[4] = {0, 0, 0, 0};
        msgpack_packer *pk;
        uint32_t msgid;
        uint64_t id;
        Reply rp;

        cr_assert_eq(client_request_fds(c, &fd, 1), 0, "client_request_fds");
        pk = client_request(c, "job.submit", 3, &msgid);
        ipc_pack_cstr(pk, "sleep");
        msgpack_pack_map(pk, 2);
        ipc_pack_cstr(pk, "ms");
        msgpack_pack_uint64(pk, ms);
        ipc_pack_cstr(pk, "file");
        msgpack_pack_ext(pk, 4, IPC_EXT_FD);
        msgpack_pack_ext_body(pk, fd0, 4);
        msgpack_pack_nil(pk);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "submit with an fd: %s", rp.st.message);
        id = map_uint(rp.result, "id");
        reply_clear(&rp);
        cr_assert_gt(id, 0);
        return id;
}

Test(daemon_redis, a_killed_hosts_job_with_fds_ends_interrupted_at_its_restart)
{
        char config[512], state[32] = "", code[32] = "", args[128];
        uint64_t id, deadline;
        Client *a, *b;
        int fd, status;

        redis_fleet_start("daemon_redis");
        snprintf(config, sizeof(config),
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = fdhost\n"
                 "claim_idle_ms = 500\n",
                 redis_fleet_sock());
        fiberd_start(&host_a, &(FiberdOpts){.config = config, .plugins = "echo sleep"});
        a = fiberd_connect(&host_a);
        fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        cr_assert(fd >= 0, "open /dev/null: %s", strerror(errno));
        id = submit_sleep_with_fd(a, fd, 600000);
        close(fd);
        /* answered once its first write is committed: it is this host's local job */
        snprintf(args, sizeof(args), "SISMEMBER fiberd:host:fdhost:local %llu",
                 (unsigned long long)id);
        cr_assert_eq(redis_fleet_cli_int(args), 1, "job %llu is not in the host's local set",
                     (unsigned long long)id);
        deadline = fiberd_now_ms() + 15000;
        while (job_state_code(a, id, state, code) == 0 && strcmp(state, "running") != 0)
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s after 15 s",
                          (unsigned long long)id, state);
        cr_assert_str_eq(state, "running");
        client_free(a);
        status = fiberd_signal_and_wait(&host_a, SIGKILL, 10000);
        cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status 0x%x", status);

        /* restarted under the same node: the job it held ends, INTERRUPTED */
        fiberd_restart(&host_a);
        a = fiberd_connect(&host_a);
        cr_assert_eq(job_state_code(a, id, state, code), 0, "job.status %llu",
                     (unsigned long long)id);
        cr_assert_str_eq(state, "failed");
        cr_assert_str_eq(code, "INTERRUPTED");
        /* the shared record says so too (its final write), for every host */
        host_start(&host_b, "b", 1);
        b = fiberd_connect(&host_b);
        deadline = fiberd_now_ms() + 15000;
        while (job_state_code(b, id, state, code) != 0 || strcmp(state, "failed") != 0)
                cr_assert(fiberd_now_ms() < deadline, "job %llu is %s through b after 15 s",
                          (unsigned long long)id, state);
        cr_assert_str_eq(code, "INTERRUPTED");
        cr_assert_eq(redis_fleet_cli_int(args), 0, "job %llu is still in the host's local set",
                     (unsigned long long)id);
        client_free(a);
        client_free(b);
}

/* ------------------------------------------------------------ job.list, many ---- */

#define LIST_JOBS 300

/* job.list through @c with {cursor, limit} (@paged) or {} (unpaged). */
static void list_call(Client *c, bool paged, uint64_t cursor, uint64_t limit, Reply *rp)
{
        msgpack_packer *pk;
        uint32_t msgid;

        pk = client_request(c, "job.list", 1, &msgid);
        cr_assert(pk);
        msgpack_pack_map(pk, paged ? 2 : 0);
        if (paged) {
                if (cursor)
                        ipc_pack_kv_uint(pk, "cursor", cursor);
                else
                        ipc_pack_kv_nil(pk, "cursor");
                ipc_pack_kv_uint(pk, "limit", limit);
        }
        rpc_wait_reply(c, msgid, rp);
        cr_assert_eq(rp->r, 0, "job.list: %s", rp->st.message);
}

/* Counts @id into @seen (@ids sorted ascending, LIST_JOBS of them). */
static void count_listed(const uint64_t *ids, uint64_t id, unsigned *seen)
{
        unsigned k = 0;

        while (k < LIST_JOBS && ids[k] != id)
                k++;
        cr_assert_lt(k, LIST_JOBS, "job.list gave job %llu, not one of the fleet's",
                     (unsigned long long)id);
        seen[k]++;
}

/* Counts @jobs' ids into @seen (count_listed()). */
static void list_count(const msgpack_object *jobs, const uint64_t *ids, unsigned *seen)
{
        cr_assert(jobs && jobs->type == MSGPACK_OBJECT_ARRAY);
        for (uint32_t i = 0; i < jobs->via.array.size; i++)
                count_listed(ids, map_uint(&jobs->via.array.ptr[i], "id"), seen);
}

/* Walks job.list through @c in pages of at most @limit, newest first (asserted), to its
 * end: the ids listed, in order, into @ids (at most @max); *@pages the pages. */
static size_t list_pages(Client *c, uint64_t limit, uint64_t *ids, size_t max, unsigned *pages)
{
        uint64_t cursor = 0, prev = UINT64_MAX;
        size_t n = 0;

        for (*pages = 0;; (*pages)++) {
                const msgpack_object *jobs, *next;
                Reply rp;
                list_call(c, true, cursor, limit, &rp);
                jobs = map_get(rp.result, "jobs");
                next = map_get(rp.result, "next_cursor");
                cr_assert(jobs && jobs->type == MSGPACK_OBJECT_ARRAY);
                cr_assert_leq(jobs->via.array.size, limit);
                for (uint32_t i = 0; i < jobs->via.array.size; i++) {
                        uint64_t id = map_uint(&jobs->via.array.ptr[i], "id");
                        cr_assert_lt(id, prev, "not newest first: %llu after %llu",
                                     (unsigned long long)id, (unsigned long long)prev);
                        cr_assert_lt(n, max, "more jobs listed than the fleet has");
                        ids[n++] = prev = id;
                }
                cr_assert(next, "no next_cursor key");
                if (next->type == MSGPACK_OBJECT_NIL) {
                        reply_clear(&rp);
                        (*pages)++;
                        return n;
                }
                cursor = next->via.u64;
                reply_clear(&rp);
        }
}

Test(daemon_redis, list_through_another_host_gives_every_job_once)
{
        uint64_t ids[LIST_JOBS], listed_ids[LIST_JOBS + 1];
        unsigned seen[LIST_JOBS] = {0}, pages;
        size_t listed;
        Client *a, *b;
        Reply rp;

        redis_fleet_start("daemon_redis");
        host_start(&host_a, "a", 8);
        a = fiberd_connect(&host_a);
        for (int i = 0; i < LIST_JOBS; i++) {
                IpcStatus st = {0};
                ids[i] = rpc_submit(a, "echo", (Arg[]){ARG_I("n", i)}, 1, 0, 0, &st);
                cr_assert(ids[i] > 0, "submit %d: %s", i, st.message);
        }
        for (int i = 0; i < LIST_JOBS; i++) {
                rpc_job_wait(a, ids[i], 30000, &rp);
                cr_assert_eq(rp.r, 0, "wait %llu: %s", (unsigned long long)ids[i], rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                reply_clear(&rp);
        }
        /* b starts once every job is done: its table holds none of them */
        host_start(&host_b, "b", 1);
        b = fiberd_connect(&host_b);

        list_call(b, false, 0, 0, &rp);
        list_count(rp.result, ids, seen);
        reply_clear(&rp);
        for (int i = 0; i < LIST_JOBS; i++) {
                cr_assert_eq(seen[i], 1, "unpaged: job %llu listed %u times",
                             (unsigned long long)ids[i], seen[i]);
                seen[i] = 0;
        }

        listed = list_pages(b, 128, listed_ids, sizeof(listed_ids) / sizeof(listed_ids[0]), &pages);
        for (size_t i = 0; i < listed; i++)
                count_listed(ids, listed_ids[i], seen);
        cr_assert_lt(pages, 10, "more pages than the jobs fill");
        cr_assert_geq(pages, 3, "%u pages of at most 128 for %d jobs", pages, LIST_JOBS);
        for (int i = 0; i < LIST_JOBS; i++)
                cr_assert_eq(seen[i], 1, "paged: job %llu listed %u times",
                             (unsigned long long)ids[i], seen[i]);
        client_free(a);
        client_free(b);
}

/* Queues job.run [sleep, {ms: @ms}, {}, nil] on @c (not flushed): its msgid. */
static uint32_t run_sleep_send(Client *c, uint64_t ms)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.run", 4, &msgid);

        cr_assert(pk);
        ipc_pack_cstr(pk, "sleep");
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_uint(pk, "ms", ms);
        msgpack_pack_map(pk, 0);
        msgpack_pack_nil(pk); /* no wait limit: the answer waits for the end */
        return msgid;
}

/* The id of the one running sleep job job.list through @c shows (polled, 10 s at most). */
static uint64_t listed_running_sleep(Client *c)
{
        for (int tries = 0; tries < 1000; tries++) {
                Reply rp;
                uint64_t id = 0;
                list_call(c, false, 0, 0, &rp);
                for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                        const msgpack_object *j = &rp.result->via.array.ptr[i];
                        if (!strcmp(map_str(j, "plugin"), "sleep") &&
                            !strcmp(map_str(j, "state"), "running"))
                                id = map_uint(j, "id");
                }
                reply_clear(&rp);
                if (id)
                        return id;
                usleep(10000);
        }
        cr_assert_fail("job.list never showed the job.run's job running");
        return 0;
}

/*
 * A job.run through a host with room runs there, off the stream, and its record is
 * written once, at its end: none in Redis while it runs, no stream entry. Its host
 * lists it among the fleet's jobs meanwhile, in id order, once; afterwards any host
 * answers for it.
 */
Test(daemon_redis, a_job_run_runs_on_its_host_and_is_written_at_its_end)
{
        uint64_t before[5], after[2], run_id, listed_ids[20], attempt = 1;
        long long entries;
        unsigned seen_run = 0, pages;
        size_t listed;
        char key[64], state[32];
        uint32_t msgid;
        Client *a, *b, *r;
        Reply rp;

        fleet_of_two(4, 4, &a, &b);
        r = fiberd_connect(&host_a);
        for (int i = 0; i < 5; i++) {
                IpcStatus st = {0};
                before[i] = rpc_submit(a, "echo", (Arg[]){ARG_I("n", i)}, 1, 0, 0, &st);
                cr_assert(before[i] > 0, "submit %d: %s", i, st.message);
        }
        for (int i = 0; i < 5; i++) {
                rpc_job_wait(a, before[i], 30000, &rp);
                cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
                reply_clear(&rp);
        }
        entries = redis_fleet_cli_int("XLEN fiberd:jobs");
        cr_assert_geq(entries, 5, "the submissions went through the stream");

        msgid = run_sleep_send(r, 4000); /* long enough for the checks below */
        cr_assert_eq(client_flush(r, 5000, NULL), 0);
        run_id = listed_running_sleep(a);
        for (int i = 0; i < 2; i++) {
                IpcStatus st = {0};
                after[i] = rpc_submit(a, "echo", (Arg[]){ARG_I("n", i)}, 1, 0, 0, &st);
                cr_assert(after[i] > run_id, "submit after the run: %s", st.message);
                rpc_job_wait(a, after[i], 30000, &rp);
                cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
                reply_clear(&rp);
        }

        /* while it runs: no record in Redis, and listed by its host only, once, in
         * order among the shared ones, also across pages of two */
        snprintf(key, sizeof(key), "EXISTS fiberd:job:%llu", (unsigned long long)run_id);
        cr_assert_eq(redis_fleet_cli_int(key), 0, "job %llu has a record while it runs",
                     (unsigned long long)run_id);
        listed = list_pages(a, 2, listed_ids, sizeof(listed_ids) / sizeof(listed_ids[0]), &pages);
        for (size_t i = 0; i < listed; i++)
                seen_run += listed_ids[i] == run_id;
        cr_assert_eq(seen_run, 1, "job %llu listed %u times by its host",
                     (unsigned long long)run_id, seen_run);
        cr_assert_eq(listed, 8, "%zu jobs listed, want the 7 submitted and the run", listed);
        /* another host finds no record of a job.run in progress */
        rpc_simple(b, "job.status", 1, &run_id, &rp);
        cr_assert_str_eq(rp.st.code ? rp.st.code : "", "NOT_FOUND", "%s", rp.st.message);
        reply_clear(&rp);
        /* a wait with a limit through its host shows it running, and writes nothing */
        rpc_job_wait(a, run_id, 50, &rp);
        cr_assert_eq(rp.r, 0, "wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "running");
        reply_clear(&rp);
        cr_assert_eq(redis_fleet_cli_int(key), 0, "a wait with a limit wrote job %llu",
                     (unsigned long long)run_id);
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), entries + 2,
                     "a wait with a limit put the job.run on the stream");

        rpc_wait_reply(r, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, "id"), run_id);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        cr_assert_eq(redis_fleet_cli_int(key), 1, "no record of job %llu once it ended",
                     (unsigned long long)run_id);
        /* written as any final record is: expiring, among the finished, in the index */
        snprintf(key, sizeof(key), "TTL fiberd:job:%llu", (unsigned long long)run_id);
        cr_assert_gt(redis_fleet_cli_int(key), 0, "its record does not expire");
        /* (a score: a missing member prints an empty line, read as 0) */
        snprintf(key, sizeof(key), "ZSCORE fiberd:finished %llu", (unsigned long long)run_id);
        cr_assert_gt(redis_fleet_cli_int(key), 0, "not in fiberd:finished");
        snprintf(key, sizeof(key), "ZSCORE fiberd:index %llu", (unsigned long long)run_id);
        cr_assert_eq(redis_fleet_cli_int(key), (long long)run_id, "not in fiberd:index");
        cr_assert_eq(job_state(b, run_id, state, &attempt), 0, "status through b");
        cr_assert_str_eq(state, "done");
        cr_assert_eq(attempt, 0);
        /* a new hash: the fields at their defaults are left out, and read back as such */
        snprintf(key, sizeof(key), "HEXISTS fiberd:job:%llu error_code",
                 (unsigned long long)run_id);
        cr_assert_eq(redis_fleet_cli_int(key), 0, "a default field was written");
        snprintf(key, sizeof(key), "HEXISTS fiberd:job:%llu finished_ms",
                 (unsigned long long)run_id);
        cr_assert_eq(redis_fleet_cli_int(key), 1, "no finished_ms in the record");
        rpc_simple(b, "job.status", 1, &run_id, &rp);
        cr_assert_eq(rp.r, 0, "job.status through b: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "plugin"), "sleep");
        cr_assert_eq(map_uint(rp.result, "priority"), 0);
        reply_clear(&rp);
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), entries + 2,
                     "the job.run put an entry on the stream");
        cr_assert_eq(rpc_stats_jobs(a, "done") + rpc_stats_jobs(b, "done"), 8,
                     "each of the 8 jobs ran once");
        client_free(a);
        client_free(b);
        client_free(r);
}

/* The file at @path, read whole (malloc'ed, NUL-terminated; "" when missing). */
static char *slurp(const char *path)
{
        FILE *f = fopen(path, "r");
        char *buf = NULL;
        size_t len = 0;

        if (f) {
                FILE *m = open_memstream(&buf, &len);
                char chunk[4096];
                size_t n;
                cr_assert(m);
                while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
                        fwrite(chunk, 1, n, m);
                fclose(m);
                fclose(f);
        }
        return buf ? buf : strdup("");
}

/* `redis-cli monitor` into @path, in the background: its pid, once it listens. */
static pid_t monitor_start(const char *path)
{
        uint64_t deadline = fiberd_now_ms() + 10000;
        pid_t pid = fork();

        cr_assert(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
                int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0)
                        _exit(127);
                execlp("redis-cli", "redis-cli", "-s", redis_fleet_sock(), "monitor", (char *)NULL);
                _exit(127);
        }
        for (;;) { /* it prints OK once the server streams to it */
                char *out = slurp(path);
                bool ok = strstr(out, "OK") != NULL;
                free(out);
                if (ok)
                        return pid;
                cr_assert(fiberd_now_ms() < deadline, "redis-cli monitor never said OK");
                usleep(10000);
        }
}

/* job.run [sleep, {ms: 1}] through @c, answered: its id. */
static uint64_t run_one(Client *c)
{
        uint32_t msgid = run_sleep_send(c, 1);
        uint64_t id;
        Reply rp;

        cr_assert_eq(client_flush(c, 5000, NULL), 0);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        id = map_uint(rp.result, "id");
        reply_clear(&rp);
        return id;
}

/*
 * A job.run's commit as Redis sees it: its record's HSET, the trim by its sha, and no
 * script by its text. The trim's body is not sent; nor is the release of dependents,
 * which a job.run's first write, final already, cannot have (nobody knew its id, and a
 * submission waits only on a job whose record exists).
 */
Test(daemon_redis, a_job_runs_commit_sends_no_script_text)
{
        char path[] = "/tmp/fiberd-monitor-XXXXXX", needle[64], *out = NULL;
        uint64_t ids[3], deadline;
        int fd = mkstemp(path);
        Client *c;
        pid_t mon;

        cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
        close(fd);
        redis_fleet_start("daemon_redis");
        host_start(&host_a, "a", 4);
        c = fiberd_connect(&host_a);
        (void)run_one(c); /* the scripts are loaded at the first commit */
        mon = monitor_start(path);
        for (int i = 0; i < 3; i++)
                ids[i] = run_one(c);
        /* the monitor's stream lags the commands: wait for the last record's write */
        snprintf(needle, sizeof(needle), "\"fiberd:job:%llu\"", (unsigned long long)ids[2]);
        deadline = fiberd_now_ms() + 10000;
        for (;;) {
                free(out);
                out = slurp(path);
                if (strstr(out, needle) && strstr(strstr(out, needle), "\"EXEC\""))
                        break;
                cr_assert(fiberd_now_ms() < deadline, "monitor never showed %s committed:\n%s",
                          needle, out);
                usleep(10000);
        }
        kill(mon, SIGTERM);
        waitpid(mon, NULL, 0);
        unlink(path);
        for (int i = 0; i < 3; i++) {
                snprintf(needle, sizeof(needle), "\"HSET\" \"fiberd:job:%llu\"",
                         (unsigned long long)ids[i]);
                cr_assert(strstr(out, needle), "no %s in the monitor's log", needle);
        }
        cr_assert(strstr(out, "\"EVALSHA\""), "the trim was not called by its sha:\n%s", out);
        cr_assert_null(strstr(out, "ZREMRANGEBYRANK"), "the trim's text was sent:\n%s", out);
        cr_assert_null(strstr(out, "{ARGV[i], ARGV[i + 1]}"), /* the release's loop */
                       "a job.run's commit released its (impossible) dependents:\n%s", out);
        free(out);
        client_free(c);
}

#define BATCH_RUNS 10

/*
 * A commit of many new records adds them to fiberd:finished and fiberd:index with one
 * ZADD each, not one a job: with the server stopped (SIGSTOP) while ten job.runs end,
 * their writes gather into one batch, and the monitor shows a ZADD of fiberd:finished
 * with several members; every record joins it once.
 */
Test(daemon_redis, a_batch_of_records_joins_the_sets_in_one_zadd_each)
{
        char path[] = "/tmp/fiberd-monitor-XXXXXX", *out, *line;
        uint32_t msgids[BATCH_RUNS];
        unsigned most = 0, total = 0, zadds = 0;
        uint64_t done0, deadline;
        int fd = mkstemp(path);
        Client *c, *s;
        pid_t mon;
        Reply rp;

        cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
        close(fd);
        redis_fleet_start("daemon_redis");
        host_start(&host_a, "a", BATCH_RUNS);
        c = fiberd_connect(&host_a);
        s = fiberd_connect(&host_a);
        (void)run_one(c);
        done0 = rpc_stats_jobs(s, "done");
        mon = monitor_start(path);
        redis_fleet_signal(SIGSTOP);
        for (int i = 0; i < BATCH_RUNS; i++)
                msgids[i] = run_sleep_send(c, 1);
        cr_assert_eq(client_flush(c, 5000, NULL), 0);
        /* all ended, their writes queued behind the one the stopped server holds */
        deadline = fiberd_now_ms() + 10000;
        while (rpc_stats_jobs(s, "done") < done0 + BATCH_RUNS) {
                cr_assert(fiberd_now_ms() < deadline, "the job.runs did not end in 10 s");
                usleep(5000);
        }
        redis_fleet_signal(SIGCONT);
        for (int i = 0; i < BATCH_RUNS; i++) {
                rpc_wait_reply(c, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "job.run %d: %s", i, rp.st.message);
                reply_clear(&rp);
        }
        /* the last answer came after its commit: wait for the monitor to show it */
        deadline = fiberd_now_ms() + 10000;
        for (;;) {
                out = slurp(path);
                total = most = zadds = 0;
                for (line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                        unsigned quotes = 0;
                        if (!strstr(line, "\"ZADD\" \"fiberd:finished\""))
                                continue;
                        for (const char *p = line; *p; p++)
                                quotes += *p == '"';
                        /* "ZADD" "key" then score-member pairs, two quotes a token */
                        zadds++;
                        total += (quotes / 2 - 2) / 2;
                        most = (quotes / 2 - 2) / 2 > most ? (quotes / 2 - 2) / 2 : most;
                }
                free(out);
                if (total >= BATCH_RUNS)
                        break;
                cr_assert(fiberd_now_ms() < deadline, "%u records joined fiberd:finished", total);
                usleep(10000);
        }
        kill(mon, SIGTERM);
        waitpid(mon, NULL, 0);
        unlink(path);
        cr_assert_eq(total, BATCH_RUNS, "%u members added for %d records", total, BATCH_RUNS);
        cr_assert_geq(most, 2, "no ZADD added more than one record (%u ZADDs)", zadds);
        cr_assert_lt(zadds, BATCH_RUNS, "one ZADD a record");
        client_free(c);
        client_free(s);
}

/*
 * SCRIPT FLUSH (an operator's, or a server that lost its scripts under a live
 * connection): the next commit's trim (EVALSHA) is answered NOSCRIPT, its batch stands,
 * and the commit after loads the scripts again; nothing is lost and retention holds.
 */
Test(daemon_redis, a_script_flush_costs_one_attempt_and_loses_nothing)
{
        char config[512], key[64];
        uint64_t ids[4], deadline;
        long long keys;
        Client *c;

        redis_fleet_start("daemon_redis");
        snprintf(config, sizeof(config),
                 "[jobs]\nretention_max = 2\n"
                 "[store]\nbackend = redis\nredis = unix:%s\nnode = a\n",
                 redis_fleet_sock());
        fiberd_start(&host_a, &(FiberdOpts){.config = config, .plugins = "echo sleep"});
        c = fiberd_connect(&host_a);
        ids[0] = run_one(c);
        (void)redis_fleet_cli_int("SCRIPT FLUSH"); /* prints OK: errorstats below shows it */
        for (int i = 1; i < 4; i++)
                ids[i] = run_one(c);
        cr_assert_geq(redis_fleet_cli_int("INFO errorstats | sed -n "
                                          "'s/^errorstat_NOSCRIPT:count=\\([0-9]*\\).*/\\1/p'"),
                      1, "no commit met the flushed scripts");
        snprintf(key, sizeof(key), "EXISTS fiberd:job:%llu", (unsigned long long)ids[3]);
        cr_assert_eq(redis_fleet_cli_int(key), 1, "the last job.run's record is missing");
        deadline = fiberd_now_ms() + 15000;
        while ((keys = redis_fleet_cli_int(
                        "EVAL \"return #redis.call('KEYS', 'fiberd:job:*')\" 0")) > 2)
                cr_assert(fiberd_now_ms() < deadline, "%lld fiberd:job:* hashes after 15 s", keys);
        cr_assert_geq(keys, 1, "redis-cli gave no count");
        cr_assert_eq(redis_fleet_cli_int(key), 1, "the trim took the newest record");
        /* the batch whose trim met NOSCRIPT was applied: not failed, nor tried again */
        cr_assert(!fiberd_log_contains(&host_a, "cannot write"),
                  "a flushed trim failed a batch Redis had applied");
        client_free(c);
}

/*
 * Beyond a host's room (twice max_running queued or running, as its reader takes stream
 * entries) a job.run goes through the shared queue, where a host with room takes it,
 * and is answered from there.
 */
Test(daemon_redis, job_runs_beyond_a_hosts_room_go_through_the_shared_queue)
{
        uint32_t msgids[6];
        uint64_t done_a, done_b;
        long long entries;
        Client *a, *b;
        Reply rp;

        fleet_of_two(1, 4, &a, &b); /* room for 2 */
        for (int i = 0; i < 6; i++)
                msgids[i] = run_sleep_send(a, 300);
        for (int i = 0; i < 6; i++) {
                rpc_wait_reply(a, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "job.run %d: %s", i, rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                cr_assert_eq(map_uint(rp.result, "attempt"), 0);
                reply_clear(&rp);
        }
        done_a = rpc_stats_jobs(a, "done");
        done_b = rpc_stats_jobs(b, "done");
        cr_assert_eq(done_a + done_b, 6, "a ran %llu, b %llu", (unsigned long long)done_a,
                     (unsigned long long)done_b);
        cr_assert_geq(done_b, 1, "none went to the host with room");
        /* each job went through the stream or ran on a without it: not all the first */
        entries = redis_fleet_cli_int("XLEN fiberd:jobs");
        cr_assert_geq(entries, done_b);
        cr_assert_lt(entries, 6, "every job.run went through the stream");
        client_free(a);
        client_free(b);
}

/*
 * A clean stop of the host running job.runs of its own puts the one still queued, and
 * the retry-safe one it interrupts, on the shared queue, where the other host runs
 * them: nothing is left in the stopped host's set for a start under its name that may
 * never come.
 */
Test(daemon_redis, a_stopped_hosts_job_runs_go_to_the_shared_queue)
{
        uint64_t prev = 0, attempts = 0;
        uint32_t msgids[2];
        unsigned sleeps = 0;
        Client *a, *b;
        Reply rp;

        fleet_of_two(1, 4, &a, &b);          /* room for 2: one runs, one waits */
        msgids[0] = run_sleep_send(a, 5000); /* the stop comes first */
        msgids[1] = run_sleep_send(a, 5000);
        cr_assert_eq(client_flush(a, 5000, NULL), 0);
        (void)listed_running_sleep(a);
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), 0, "a job.run went to the stream");
        fiberd_stop(&host_a);         /* SIGTERM: sleep is retry-safe */
        for (int i = 0; i < 2; i++) { /* answered before the stop ended */
                rpc_wait_reply(a, msgids[i], &rp);
                cr_assert_str_eq(rp.st.code ? rp.st.code : "", "UNAVAILABLE", "job.run %d: %s", i,
                                 rp.st.message);
                cr_assert(strstr(rp.st.message, "goes back to the fleet's queue"), "%s",
                          rp.st.message);
                reply_clear(&rp);
        }
        client_free(a);
        cr_assert_eq(redis_fleet_cli_int("SCARD fiberd:host:a:local"), 0,
                     "the stopped host kept job.runs for itself");
        cr_assert_eq(redis_fleet_cli_int("XLEN fiberd:jobs"), 2);
        for (int tries = 0; rpc_stats_jobs(b, "done") < 2; tries++) {
                cr_assert_lt(tries, 1500, "b ran %llu of the 2 jobs",
                             (unsigned long long)rpc_stats_jobs(b, "done"));
                usleep(10000);
        }
        list_call(b, false, 0, 0, &rp);
        for (uint32_t i = 0; i < rp.result->via.array.size; i++) {
                const msgpack_object *j = &rp.result->via.array.ptr[i];
                cr_assert_str_eq(map_str(j, "state"), "done");
                cr_assert_gt(map_uint(j, "id"), prev, "listed twice, or out of order");
                prev = map_uint(j, "id");
                attempts += map_uint(j, "attempt");
                sleeps++;
        }
        reply_clear(&rp);
        cr_assert_eq(sleeps, 2);
        cr_assert_eq(attempts, 1,
                     "the interrupted one runs again as attempt 1, the queued "
                     "one as attempt 0");
        client_free(b);
}

/* A fleet keeps its periodic schedules in Redis, for every host. */
Test(daemon_redis, schedule_add_is_kept_in_redis)
{
        char args[96];
        uint32_t msgid;
        msgpack_packer *pk;
        Client *a;
        Reply rp;

        redis_fleet_start("daemon_redis");
        host_start(&host_a, "a", 1);
        a = fiberd_connect(&host_a);
        pk = client_request(a, "schedule.add", 5, &msgid);
        cr_assert(pk);
        ipc_pack_cstr(pk, "nightly");
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_uint(pk, "every_ms", 60000);
        ipc_pack_cstr(pk, "echo");
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 0);
        rpc_wait_reply(a, msgid, &rp);
        cr_assert_eq(rp.r, 0, "schedule.add: %s %s", rp.st.code, rp.st.message);
        reply_clear(&rp);
        snprintf(args, sizeof(args), "HEXISTS fiberd:schedules %u:nightly", (unsigned)getuid());
        cr_assert_eq(redis_fleet_cli_int(args), 1);
        cr_assert_eq(redis_fleet_cli_int("GET fiberd:schedules:version"), 1);
        rpc_simple(a, "schedule.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(rp.result->via.array.size, 1);
        reply_clear(&rp);
        client_free(a);
}
