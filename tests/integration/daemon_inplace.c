/* SPDX-License-Identifier: MIT */
/*
 * daemon_inplace.c — plugins in place against a real fiberd:
 *
 *  - a plugin whose init() takes 3 s (tests/plugins/slow_init.c) is loaded off the
 *    server group: `ping` keeps answering while it loads;
 *  - installing version 2 of a plugin (tests/plugins/inplace_v2.c) over version 1 while
 *    a job of version 1 runs: that job finishes on version 1, the next runs version 2,
 *    and version 1 is unloaded (its fini() logs) once its job ended;
 *  - removing the file: job.submit answers NOT_FOUND, the running job finishes, then the
 *    plugin is unloaded;
 *  - check_args: `fiberctl submit sleep ms=abc` fails with INVALID_ARGUMENT and no job
 *    is created.
 *
 * The jobs that must stay running wait for a flag file the test creates (inplace.h), so
 * nothing here depends on timing except the one bound the issue asks for (ping within
 * 500 ms while a plugin loads).
 */
#include "tests/integration/fiberd_harness.h"
#include "ipc/protocol.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef FIBERCTL_BIN
#define FIBERCTL_BIN "build/fiberctl"
#endif

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_inplace, .fini = teardown, .timeout = 90);

/* ------------------------------------------------------------------ helpers ------ */

/* The version of the plugin @name in plugins.list's @key array ("plugins" or
 * "draining"), copied to @buf ("" when absent); its `running` count in *@running. */
static void listed(Client *c, const char *key, const char *name, char *buf, size_t size,
                   uint64_t *running)
{
        Reply rp;

        buf[0] = '\0';
        *running = 0;
        rpc_simple(c, "plugins.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        const msgpack_object *a = map_get(rp.result, key);
        for (uint32_t i = 0; a && i < a->via.array.size; i++) {
                const msgpack_object *p = &a->via.array.ptr[i];
                if (strcmp(map_str(p, "name"), name) != 0)
                        continue;
                snprintf(buf, size, "%s", map_str(p, "version"));
                *running = map_uint(p, "running");
        }
        reply_clear(&rp);
}

/* Polls (bounded, 30 s) until plugins.list's @key shows @name at @version ("" = not
 * there); asserts. */
static void wait_listed(Client *c, const char *key, const char *name, const char *version)
{
        char v[64];
        uint64_t running;

        for (int i = 0; i < 3000; i++) {
                listed(c, key, name, v, sizeof(v), &running);
                if (strcmp(v, version) == 0)
                        return;
                usleep(10000);
        }
        cr_assert_fail("plugins.list %s: %s is at \"%s\", not \"%s\"", key, name, v, version);
}

static void wait_log(const char *needle)
{
        for (int i = 0; i < 3000 && !fiberd_log_contains(&fd_, needle); i++)
                usleep(10000);
        cr_assert(fiberd_log_contains(&fd_, needle), "no log line with \"%s\"", needle);
}

/* Polls (bounded) until job @id is running and inside the code of plugin @name:
 * plugins.list counts it among the instance's running jobs. A job is `running` from its
 * dispatch, a moment before its fiber takes its reference on the plugin; a file replaced
 * or removed in that moment retires an instance the job never entered. */
static void wait_running(Client *c, uint64_t id, const char *name)
{
        char v[64];
        uint64_t running = 0;

        for (int i = 0; i < 3000; i++) {
                Reply rp;
                bool state_running;

                rpc_simple(c, "job.status", 1, &id, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                state_running = strcmp(map_str(rp.result, "state"), "running") == 0;
                reply_clear(&rp);
                if (state_running) {
                        listed(c, "plugins", name, v, sizeof(v), &running);
                        if (running >= 1)
                                return;
                }
                usleep(10000);
        }
        cr_assert_fail("job %llu never ran in plugin %s", (unsigned long long)id, name);
}

/* Waits for job @id; its result's "version". */
static const char *job_version(Client *c, uint64_t id, char *buf, size_t size)
{
        Reply rp;

        rpc_job_wait(c, id, 30000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %llu: %s",
                         (unsigned long long)id, map_str(map_get(rp.result, "error"), "message"));
        snprintf(buf, size, "%s", map_str(map_get(rp.result, "result"), "version"));
        reply_clear(&rp);
        return buf;
}

static void touch(const char *path)
{
        FILE *f = fopen(path, "w");

        cr_assert_not_null(f);
        fclose(f);
}

static int fiberctl(const char *args, char *err, size_t err_size);

/* ------------------------------------------------------------------ tests -------- */

Test(daemon_inplace, a_slow_init_never_delays_a_request)
{
        FiberdOpts o = {.plugins = "sleep", .workers = 1};
        uint64_t worst = 0, pings = 0, running;
        char v[64];

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/slow_init.so", "slow_init.so");
        wait_log("slow_init: init begins");
        uint64_t start = fiberd_now_ms();
        for (;;) {
                Reply rp;
                uint64_t t0 = fiberd_now_ms(), t1, t2;

                rpc_simple(c, "ping", 0, NULL, &rp);
                t1 = fiberd_now_ms();
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                reply_clear(&rp);
                listed(c, "plugins", "slow_init", v, sizeof(v), &running);
                t2 = fiberd_now_ms();
                /* both requests count: either could wait behind a blocked server worker */
                worst = t1 - t0 > worst ? t1 - t0 : worst;
                worst = t2 - t1 > worst ? t2 - t1 : worst;
                if (v[0])
                        break; /* loaded: the requests before overlapped init() */
                pings++;
                cr_assert_lt(fiberd_now_ms() - start, 30000, "slow_init did not load within 30 s");
                usleep(50000);
        }
        printf("daemon_inplace: %llu pings while slow_init's init() ran, the slowest request "
               "%llu ms\n",
               (unsigned long long)pings, (unsigned long long)worst);
        cr_assert_gt(pings, 0, "no ping happened while the plugin loaded");
        cr_assert_lt(worst, 500, "a request took %llu ms while a plugin loaded",
                     (unsigned long long)worst);
        /* the runtime hands a blocked worker's fibers over (so requests alone do not
         * tell), but it reports the worker that ran init() as stalled: none may be */
        cr_assert(!fiberd_log_contains(&fd_, "group fiberd-srv"),
                  "init() blocked a server worker (a stall was reported)");

        /* and it works once loaded */
        IpcStatus st;
        uint64_t id = rpc_submit(c, "slow_init", NULL, 0, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        client_free(c);
}

Test(daemon_inplace, an_upgrade_finishes_running_jobs_on_the_old_version)
{
        FiberdOpts o = {.plugins = "sleep"};
        char flag[256], v[64];
        uint64_t a, b, running;
        IpcStatus st;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/inplace_v1.so", "inplace.so");
        wait_listed(c, "plugins", "inplace", "1");

        snprintf(flag, sizeof(flag), "%s/go-a", fd_.dir);
        Arg until = ARG_S("until", flag);
        a = rpc_submit(c, "inplace", &until, 1, 0, 0, &st);
        cr_assert_neq(a, 0, "%s", st.message);
        wait_running(c, a, "inplace");

        /* install(1)/mv over it: a new inode at the same path */
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/inplace_v2.so", "inplace.so");
        wait_listed(c, "plugins", "inplace", "2");
        listed(c, "draining", "inplace", v, sizeof(v), &running);
        cr_assert_str_eq(v, "1", "version 1 drains while its job runs");
        cr_assert_eq(running, 1);
        cr_assert(!fiberd_log_contains(&fd_, "inplace 1 fini"));
        char out[4096];
        cr_assert_eq(fiberctl("plugins", out, sizeof(out)), 0);
        cr_assert(strstr(out, "inplace 1: 1 running job"), "fiberctl plugins: %s", out);

        b = rpc_submit(c, "inplace", NULL, 0, 0, 0, &st);
        cr_assert_neq(b, 0, "%s", st.message);
        cr_assert_str_eq(job_version(c, b, v, sizeof(v)), "2", "a new job runs the new version");

        touch(flag);
        cr_assert_str_eq(job_version(c, a, v, sizeof(v)), "1",
                         "the running job finishes on the old version");
        wait_log("inplace 1 fini");
        wait_log("unloaded: its last job ended");
        wait_listed(c, "draining", "inplace", "");
        cr_assert(!fiberd_log_contains(&fd_, "inplace 2 fini"));
        client_free(c);
}

Test(daemon_inplace, an_in_place_write_loads_the_new_version_too)
{
        FiberdOpts o = {.plugins = "sleep"};
        char dst[512], cmd[1024], v[64];
        IpcStatus st;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/inplace_v1.so", "inplace.so");
        wait_listed(c, "plugins", "inplace", "1");
        /* cp onto it: the same inode written again, seen as IN_CLOSE_WRITE */
        snprintf(dst, sizeof(dst), "%s/inplace.so", fd_.plugin_dir);
        snprintf(cmd, sizeof(cmd), "cp %s/inplace_v2.so %s", FIBERD_TEST_PLUGIN_DIR, dst);
        cr_assert_eq(system(cmd), 0);
        wait_listed(c, "plugins", "inplace", "2");
        uint64_t id = rpc_submit(c, "inplace", NULL, 0, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        cr_assert_str_eq(job_version(c, id, v, sizeof(v)), "2");
        /* version 1's pages now hold version 2's bytes: never run its fini() */
        wait_log("was overwritten in place");
        cr_assert(!fiberd_log_contains(&fd_, "inplace 1 fini"));
        client_free(c);
}

Test(daemon_inplace, a_removed_plugin_is_unloaded_after_its_last_job)
{
        FiberdOpts o = {.plugins = "sleep"};
        char flag[256], path[512], v[64];
        uint64_t a, running;
        IpcStatus st;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/inplace_v2.so", "inplace.so");
        wait_listed(c, "plugins", "inplace", "2");

        snprintf(flag, sizeof(flag), "%s/go-a", fd_.dir);
        Arg until = ARG_S("until", flag);
        a = rpc_submit(c, "inplace", &until, 1, 0, 0, &st);
        cr_assert_neq(a, 0, "%s", st.message);
        wait_running(c, a, "inplace");

        snprintf(path, sizeof(path), "%s/inplace.so", fd_.plugin_dir);
        cr_assert_eq(unlink(path), 0);
        wait_listed(c, "plugins", "inplace", "");
        listed(c, "draining", "inplace", v, sizeof(v), &running);
        cr_assert_str_eq(v, "2");
        cr_assert_eq(running, 1);
        cr_assert_eq(rpc_submit(c, "inplace", NULL, 0, 0, 0, &st), 0);
        cr_assert_str_eq(st.code, IPC_NOT_FOUND);
        cr_assert(!fiberd_log_contains(&fd_, "inplace 2 fini"), "unloaded under its job");

        touch(flag);
        cr_assert_str_eq(job_version(c, a, v, sizeof(v)), "2");
        wait_log("inplace 2 fini");
        wait_listed(c, "draining", "inplace", "");

        /* SIGHUP rescans: putting the file back loads it again */
        fiberd_copy_plugin(&fd_, FIBERD_TEST_PLUGIN_DIR "/inplace_v1.so", "inplace.so");
        kill(fd_.pid, SIGHUP);
        wait_listed(c, "plugins", "inplace", "1");
        client_free(c);
}

/* Runs `fiberctl -s SOCK @args`; what it printed (stdout and stderr) into @err.
 * Returns the exit status. */
static int fiberctl(const char *args, char *err, size_t err_size)
{
        char cmd[1024], path[256];
        int status;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "%s/ctl.err", fd_.dir);
        snprintf(cmd, sizeof(cmd), "%s -s %s %s >%s 2>&1", FIBERCTL_BIN, fd_.sock, args, path);
        status = system(cmd);
        f = fopen(path, "r");
        n = f ? fread(err, 1, err_size - 1, f) : 0;
        err[n] = '\0';
        if (f)
                fclose(f);
        cr_assert(WIFEXITED(status));
        return WEXITSTATUS(status);
}

static uint32_t jobs_listed(Client *c)
{
        Reply rp;
        uint32_t n;

        rpc_simple(c, "job.list", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        n = rp.result->via.array.size;
        reply_clear(&rp);
        return n;
}

Test(daemon_inplace, check_args_refuses_bad_arguments_before_a_job_exists)
{
        FiberdOpts o = {.plugins = "sleep spin sha256 skynet echo"};
        char err[4096];
        IpcStatus st;

        fiberd_start(&fd_, &o);
        Client *c = fiberd_connect(&fd_);
        uint64_t ok = rpc_submit(c, "sleep", &ARG_I("ms", 1), 1, 0, 0, &st);
        cr_assert_neq(ok, 0, "%s", st.message);
        cr_assert_eq(jobs_listed(c), 1);

        int rc = fiberctl("submit sleep ms=abc", err, sizeof(err));
        cr_assert_eq(rc, ipc_protocol_exit_status(IPC_INVALID_ARGUMENT),
                     "fiberctl exits with INVALID_ARGUMENT's status, not %d: %s", rc, err);
        cr_assert(strstr(err, "ms"), "the reason names the argument: %s", err);
        printf("daemon_inplace: fiberctl submit sleep ms=abc -> exit %d: %s", rc, err);

        /* the same through the protocol, for each bundled plugin with a bad argument */
        static const struct {
                const char *plugin;
                Arg arg;
                const char *why;
        } bad[] = {
                {"sleep", ARG_S("ms", "abc"), "ms"},  {"sleep", ARG_I("ms", -1), "ms"},
                {"spin", ARG_S("ms", "x"), "ms"},     {"skynet", ARG_I("div", 1), "div"},
                {"sha256", ARG_I("path", 3), "path"}, {"sha256", ARG_S("other", "x"), "path"},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                cr_assert_eq(rpc_submit(c, bad[i].plugin, &bad[i].arg, 1, 0, 0, &st), 0,
                             "%s accepted a bad %s", bad[i].plugin, bad[i].arg.key);
                cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT, "%s: %s", bad[i].plugin,
                                 st.message);
                cr_assert(strstr(st.message, bad[i].why), "%s: %s", bad[i].plugin, st.message);
        }
        cr_assert_eq(jobs_listed(c), 1, "no job was created for a refused submission");
        client_free(c);
}
