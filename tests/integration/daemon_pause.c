/* SPDX-License-Identifier: MIT */
/*
 * daemon_pause.c — `pause` and `resume` through the socket, and the per-plugin cap
 * (PROTOCOL.md, "pause, resume" and "Scheduling jobs"): a paused plugin's job stays
 * queued while another plugin's job runs and finishes, and finishes once resumed;
 * `stats` lists what is paused and counts the held jobs; a pause needs the admin tier
 * (a client forked as uid 65534, "nobody", gets PERMISSION_DENIED) and refuses an unknown
 * kind, an unknown class (naming the classes) and a bad plugin name, while a plugin not
 * loaded may be paused; pauses of a class and of a plugin survive a restart on the same
 * sqlite job store; [plugin.NAME] max_running holds the second job until a reload raises
 * the cap. Every wait is bounded (a job.wait with a timeout, or a poll with a deadline).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NOBODY 65534
#define WAIT_MS 20000

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_pause, .fini = teardown, .timeout = 60);

/* pause or resume (@method) [@kind, @name]. */
static void rpc_pause(Client *c, const char *method, const char *kind, const char *name, Reply *rp)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, method, 2, &msgid);

        CHECK(pk, "%s: cannot queue the request", method);
        ipc_pack_cstr(pk, kind);
        ipc_pack_cstr(pk, name);
        rpc_wait_reply(c, msgid, rp);
}

/* pause or resume that must succeed: asserts the result's fields; its `queued`. */
static uint64_t pause_ok(Client *c, const char *method, const char *kind, const char *name)
{
        const msgpack_object *paused;
        uint64_t queued;
        Reply rp;

        rpc_pause(c, method, kind, name, &rp);
        cr_assert_eq(rp.r, 0, "%s %s %s: %s %s", method, kind, name, rp.st.code, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "kind"), kind);
        cr_assert_str_eq(map_str(rp.result, "name"), name);
        paused = map_get(rp.result, "paused");
        cr_assert(paused && paused->type == MSGPACK_OBJECT_BOOLEAN &&
                          paused->via.boolean == (strcmp(method, "pause") == 0),
                  "%s %s: paused is not %s", method, name, method);
        queued = map_uint(rp.result, "queued");
        cr_assert_neq(queued, UINT64_MAX, "no queued count");
        reply_clear(&rp);
        return queued;
}

/* The state of job @id now, into @state (32 bytes). */
static void job_state(Client *c, uint64_t id, char *state)
{
        Reply rp;

        rpc_simple(c, "job.status", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "job.status %llu: %s", (unsigned long long)id, rp.st.message);
        snprintf(state, 32, "%s", map_str(rp.result, "state"));
        reply_clear(&rp);
}

static void assert_state(Client *c, uint64_t id, const char *want)
{
        char state[32];

        job_state(c, id, state);
        cr_assert_str_eq(state, want, "job %llu is %s, not %s", (unsigned long long)id, state,
                         want);
}

/* Polls until job @id is in @want (bounded). */
static void wait_state(Client *c, uint64_t id, const char *want)
{
        uint64_t deadline = fiberd_now_ms() + WAIT_MS;
        char state[32];

        for (job_state(c, id, state); strcmp(state, want) != 0; job_state(c, id, state)) {
                cr_assert_lt(fiberd_now_ms(), deadline, "job %llu is %s, not %s",
                             (unsigned long long)id, state, want);
                usleep(5000);
        }
}

/* job.wait (bounded) until @id ends; asserts it ended done. */
static void wait_done(Client *c, uint64_t id)
{
        Reply rp;

        rpc_job_wait(c, id, WAIT_MS, &rp);
        cr_assert_eq(rp.r, 0, "job.wait %llu: %s", (unsigned long long)id, rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "job %llu", (unsigned long long)id);
        reply_clear(&rp);
}

/* job.submit of @plugin with @args in class @cls; its id. */
static uint64_t submit_in_class(Client *c, const char *plugin, const Arg *arg, const char *cls)
{
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, "job.submit", 3, &msgid);
        uint64_t id;
        Reply rp;

        cr_assert(pk);
        ipc_pack_cstr(pk, plugin);
        msgpack_pack_map(pk, 1);
        ipc_pack_cstr(pk, arg->key);
        msgpack_pack_int64(pk, arg->i);
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_cstr(pk, "class", cls);
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "submit %s in %s: %s", plugin, cls, rp.st.message);
        id = map_uint(rp.result, "id");
        reply_clear(&rp);
        return id;
}

/* Whether the array @a holds the string @s. */
static bool array_has(const msgpack_object *a, const char *s)
{
        for (uint32_t i = 0; a && a->type == MSGPACK_OBJECT_ARRAY && i < a->via.array.size; i++)
                if (ipc_object_streq(&a->via.array.ptr[i], s))
                        return true;
        return false;
}

/* stats: the held count, and whether @cls / @plugin are listed as paused (NULL: the
 * lists must be empty). */
static void assert_stats(Client *c, uint64_t held, const char *cls, const char *plugin)
{
        const msgpack_object *paused, *classes, *plugins;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_eq(map_uint(map_get(rp.result, "jobs"), "held"), held, "held %llu, not %llu",
                     (unsigned long long)map_uint(map_get(rp.result, "jobs"), "held"),
                     (unsigned long long)held);
        paused = map_get(rp.result, "paused");
        cr_assert(paused && paused->type == MSGPACK_OBJECT_MAP, "stats has no paused map");
        classes = map_get(paused, "classes");
        plugins = map_get(paused, "plugins");
        cr_assert(classes && classes->type == MSGPACK_OBJECT_ARRAY);
        cr_assert(plugins && plugins->type == MSGPACK_OBJECT_ARRAY);
        if (cls)
                cr_assert(array_has(classes, cls), "class %s is not listed paused", cls);
        else
                cr_assert_eq(classes->via.array.size, 0, "a class is listed paused");
        if (plugin)
                cr_assert(array_has(plugins, plugin), "plugin %s is not listed paused", plugin);
        else
                cr_assert_eq(plugins->via.array.size, 0, "a plugin is listed paused");
        reply_clear(&rp);
}

Test(daemon_pause, a_paused_plugin_holds_its_jobs_while_others_run)
{
        uint64_t echo, sleep_id;
        IpcStatus st;
        Client *c;

        fiberd_start(&fd_, &(FiberdOpts){.plugins = "echo sleep", .workers = 2});
        c = fiberd_connect(&fd_);
        cr_assert_eq(pause_ok(c, "pause", "plugin", "echo"), 0);
        echo = rpc_submit(c, "echo", (Arg[]){ARG_S("x", "y")}, 1, 0, 0, &st);
        cr_assert_neq(echo, 0, "a paused plugin's job is still accepted: %s", st.message);
        sleep_id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 20)}, 1, 0, 0, &st);
        cr_assert_neq(sleep_id, 0, "%s", st.message);
        wait_done(c, sleep_id); /* another plugin's job ran and finished meanwhile */
        assert_state(c, echo, "queued");
        assert_stats(c, 1, NULL, "echo");
        cr_assert_eq(pause_ok(c, "pause", "plugin", "echo"), 1, "pausing twice is no error");

        cr_assert_leq(pause_ok(c, "resume", "plugin", "echo"), 1);
        wait_done(c, echo);
        assert_stats(c, 0, NULL, NULL);
        cr_assert(fiberd_log_contains(&fd_, "paused plugin echo"));
        client_free(c);
}

/* As nobody: neither pause nor resume is allowed, and the answer names the tier. */
static void nobody_pauses(const void *arg)
{
        Client *c = fiberd_connect(&fd_);
        Reply rp;

        for (int i = 0; i < 2; i++) {
                const char *method = i ? "resume" : "pause";
                rpc_pause(c, method, "plugin", "echo", &rp);
                CHECK(rp.r < 0 && strcmp(rp.st.code, "PERMISSION_DENIED") == 0 &&
                              strstr(rp.st.message, "admin tier"),
                      "%s as nobody: %d %s %s", method, rp.r, rp.st.code, rp.st.message);
                reply_clear(&rp);
        }
        client_free(c);
}

static void assert_refused(Client *c, const char *kind, const char *name, const char *needle)
{
        Reply rp;

        rpc_pause(c, "pause", kind, name, &rp);
        cr_assert(rp.r < 0, "pause %s %s was accepted", kind, name);
        cr_assert_str_eq(rp.st.code, "INVALID_ARGUMENT", "pause %s %s: %s", kind, name, rp.st.code);
        cr_assert(strstr(rp.st.message, needle), "pause %s %s: '%s' lacks '%s'", kind, name,
                  rp.st.message, needle);
        reply_clear(&rp);
}

Test(daemon_pause, pause_needs_the_admin_tier_and_checks_its_params)
{
        Client *c;

        cr_assert(geteuid() == 0, "this test needs root to act as another uid");
        fiberd_start(&fd_,
                     &(FiberdOpts){.config = "[class.batch]\nshares = 50\n", .plugins = "echo"});
        cr_assert(chmod(fd_.dir, 0755) == 0); /* nobody reaches the socket */
        fiberd_run_as(NOBODY, NOBODY, nobody_pauses, NULL);

        c = fiberd_connect(&fd_);
        assert_refused(c, "class", "nope", "default, batch");
        assert_refused(c, "queue", "echo", "\"class\" nor \"plugin\"");
        assert_refused(c, "plugin", "Bad Name", "not a plugin name");
        assert_refused(c, "plugin", "", "not a plugin name");
        cr_assert_eq(pause_ok(c, "pause", "plugin", "not-loaded-yet"), 0);
        cr_assert_eq(pause_ok(c, "pause", "class", "batch"), 0);
        assert_stats(c, 0, "batch", "not-loaded-yet");
        client_free(c);
}

Test(daemon_pause, pauses_survive_a_restart)
{
        uint64_t echo, batch, other;
        IpcStatus st;
        Client *c;
        int status;

        fiberd_start(&fd_, &(FiberdOpts){.config = "[class.batch]\nshares = 50\n",
                                         .plugins = "echo sleep",
                                         .workers = 2});
        c = fiberd_connect(&fd_);
        pause_ok(c, "pause", "class", "batch");
        pause_ok(c, "pause", "plugin", "echo");
        pause_ok(c, "pause", "plugin", "sleep");
        pause_ok(c, "resume", "plugin", "sleep"); /* resumed: not paused after the restart */
        echo = rpc_submit(c, "echo", (Arg[]){ARG_S("x", "y")}, 1, 0, 0, &st);
        cr_assert_neq(echo, 0, "%s", st.message);
        batch = submit_in_class(c, "sleep", &ARG_I("ms", 1), "batch");
        assert_stats(c, 2, "batch", "echo");
        client_free(c);

        status = fiberd_signal_and_wait(&fd_, SIGTERM, 10000);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
        fiberd_restart(&fd_);
        c = fiberd_connect(&fd_);
        cr_assert(fiberd_log_contains(&fd_, "plugin echo is paused"));
        cr_assert(fiberd_log_contains(&fd_, "class batch is paused"));
        cr_assert(!fiberd_log_contains(&fd_, "plugin sleep is paused"));
        other = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);
        cr_assert_neq(other, 0, "%s", st.message);
        wait_done(c, other); /* the default class and plugin sleep run */
        assert_state(c, echo, "queued");
        assert_state(c, batch, "queued");
        assert_stats(c, 2, "batch", "echo");

        pause_ok(c, "resume", "plugin", "echo");
        wait_done(c, echo);
        assert_state(c, batch, "queued");
        pause_ok(c, "resume", "class", "batch");
        wait_done(c, batch);
        assert_stats(c, 0, NULL, NULL);
        client_free(c);
}

Test(daemon_pause, plugin_max_running_holds_the_next_job_until_a_reload_raises_it)
{
        char conf[256];
        uint64_t a, b;
        Client *c;
        FILE *f;

        fiberd_start(&fd_, &(FiberdOpts){.config = "[plugin.sleep]\nmax_running = 1\n",
                                         .plugins = "echo sleep",
                                         .workers = 2,
                                         .notify = true});
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        c = fiberd_connect(&fd_);
        a = rpc_submit_long(c, "sleep");
        b = rpc_submit_long(c, "sleep");
        wait_state(c, a, "running");
        wait_done(c, rpc_submit(c, "echo", (Arg[]){ARG_S("x", "y")}, 1, 0, 0, NULL));
        assert_state(c, b, "queued"); /* held by the cap while another plugin ran */
        assert_stats(c, 1, NULL, NULL);

        snprintf(conf, sizeof(conf), "%s/fiberd.conf", fd_.dir);
        f = fopen(conf, "w");
        cr_assert(f);
        fputs("[plugin.sleep]\nmax_running = 2\n", f);
        fclose(f);
        kill(fd_.pid, SIGHUP);
        cr_assert(fiberd_notify_wait(&fd_, "RELOADING=1", 10000));
        cr_assert(fiberd_notify_wait(&fd_, "READY=1", 10000));
        wait_state(c, b, "running");
        assert_stats(c, 0, NULL, NULL);
        cr_assert(fiberd_log_contains(&fd_, "[plugin.sleep] max_running"));
        client_free(c);
}
