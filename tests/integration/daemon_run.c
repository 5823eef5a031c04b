/* SPDX-License-Identifier: MIT */
/*
 * daemon_run.c — job.run end to end, and the echo plugin through it: job.run answers
 * with the final job record (echo: result equal to the args; a failing job: its error;
 * a job cancelled from a second connection while job.run waits: cancelled), refuses
 * bad params with exactly job.submit's error and queues nothing then, answers with
 * the record as it stands when its wait limit passes, and leaves the job running when
 * its client goes away (the job still finishes; another connection sees it); its
 * `fields` and job.wait's answer only the record keys asked. On the memory store a
 * job.run without a wait limit runs on its connection's reader (none on sqlite), and
 * pipelined with others that do not, each still finds its own answer, refusals far
 * beyond max_in_flight included.
 * Waits are on conditions (job.list, job.wait), never sleeps.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_run, .fini = teardown, .timeout = 60);

static const FiberdOpts run_opts = {.plugins = "echo sha256 sleep"};

/* Queues job.run [plugin, args, options, wait_ms] with @args and @options given as packed
 * msgpack maps (NULL: nil) and @wait_ms < 0 as nil; returns the msgid (not flushed). */
static uint32_t run_send(Client *c, const char *method, const char *plugin,
                         const msgpack_sbuffer *args, const msgpack_sbuffer *options,
                         int64_t wait_ms)
{
        bool run = strcmp(method, IPC_METHOD_JOB_RUN) == 0;
        uint32_t msgid;
        msgpack_packer *pk = client_request(c, method, run ? 4 : 3, &msgid);

        cr_assert(pk);
        if (plugin)
                ipc_pack_cstr(pk, plugin);
        else
                msgpack_pack_nil(pk);
        if (args)
                cr_assert_eq(pk->callback(pk->data, args->data, args->size), 0);
        else
                msgpack_pack_nil(pk);
        if (options)
                cr_assert_eq(pk->callback(pk->data, options->data, options->size), 0);
        else
                msgpack_pack_nil(pk);
        if (run && wait_ms < 0)
                msgpack_pack_nil(pk);
        else if (run)
                msgpack_pack_uint64(pk, (uint64_t)wait_ms);
        return msgid;
}

/* A packed map {"ms": @ms} into @sb (caller destroys it). */
static void pack_ms(msgpack_sbuffer *sb, uint64_t ms)
{
        msgpack_packer pk;

        msgpack_sbuffer_init(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        ipc_pack_kv_uint(&pk, "ms", ms);
}

/* A packed map {@key: @value} into @sb (caller destroys it). */
static void pack_str(msgpack_sbuffer *sb, const char *key, const char *value)
{
        msgpack_packer pk;

        msgpack_sbuffer_init(sb);
        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        ipc_pack_kv_cstr(&pk, key, value);
}

/* Waits (bounded, by polling job.list on @c) until a @plugin job is @state; its id. */
static uint64_t wait_listed(Client *c, const char *plugin, const char *state)
{
        for (int i = 0; i < 2000; i++) {
                uint32_t msgid;
                msgpack_packer *pk = client_request(c, "job.list", 1, &msgid);
                uint64_t id = 0;
                Reply rp;

                msgpack_pack_map(pk, 2);
                ipc_pack_kv_cstr(pk, "plugin", plugin);
                ipc_pack_kv_cstr(pk, "state", state);
                rpc_wait_reply(c, msgid, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                if (rp.result->via.array.size > 0)
                        id = map_uint(&rp.result->via.array.ptr[0], "id");
                reply_clear(&rp);
                if (id)
                        return id;
                rpc_simple(c, "ping", 0, NULL, &rp); /* a round trip between tries */
                reply_clear(&rp);
                usleep(2000);
        }
        cr_assert_fail("no %s job became %s", plugin, state);
        return 0;
}

/* Starts fiberd, sends a job.run of `sleep` for @ms on *@ret_c, and waits on a second
 * connection, *@ret_c2, until that job runs. Returns the job id; *@ret_msgid is the
 * job.run's. */
static uint64_t start_run_sleep(uint64_t ms, Client **ret_c, Client **ret_c2, uint32_t *ret_msgid)
{
        msgpack_sbuffer sb;
        IpcStatus st;
        uint64_t id;

        fiberd_start(&fd_, &run_opts);
        *ret_c = fiberd_connect(&fd_);
        *ret_c2 = fiberd_connect(&fd_);
        pack_ms(&sb, ms);
        *ret_msgid = run_send(*ret_c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, -1);
        cr_assert_eq(client_flush(*ret_c, 5000, &st), 0, "%s", st.message);
        msgpack_sbuffer_destroy(&sb);
        id = wait_listed(*ret_c2, "sleep", "running");
        return id;
}

Test(daemon_run, echo_returns_its_args_as_the_final_record)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_object args;
        msgpack_zone zone;
        size_t off = 0;
        Client *c, *c2;
        uint64_t id;
        Reply rp;

        /* args of every kind: nested map and array, negative, float, bool, nil, bin */
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 7);
        ipc_pack_kv_cstr(&pk, "s", "hello");
        ipc_pack_kv_int(&pk, "neg", -3);
        ipc_pack_cstr(&pk, "f");
        msgpack_pack_double(&pk, 1.5);
        ipc_pack_cstr(&pk, "b");
        msgpack_pack_true(&pk);
        ipc_pack_kv_nil(&pk, "nothing");
        ipc_pack_cstr(&pk, "list");
        msgpack_pack_array(&pk, 2);
        msgpack_pack_uint64(&pk, 1);
        msgpack_pack_map(&pk, 1);
        ipc_pack_kv_cstr(&pk, "deep", "yes");
        ipc_pack_cstr(&pk, "bin");
        msgpack_pack_bin(&pk, 3);
        msgpack_pack_bin_body(&pk, "\0\1\2", 3);
        msgpack_zone_init(&zone, 1024);
        cr_assert_eq(msgpack_unpack(sb.data, sb.size, &off, &zone, &args), MSGPACK_UNPACK_SUCCESS);

        fiberd_start(&fd_, &run_opts);
        c = fiberd_connect(&fd_);
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "echo", &sb, NULL, -1), &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_str_eq(map_str(rp.result, "plugin"), "echo");
        cr_assert_eq(map_uint(rp.result, "owner"), (uint64_t)getuid());
        cr_assert_neq(map_uint(rp.result, "finished_ms"), UINT64_MAX);
        cr_assert(ipc_object_is_nil(map_get(rp.result, "error")));
        cr_assert(map_get(rp.result, "result"));
        cr_assert(msgpack_object_equal(*map_get(rp.result, "result"), args),
                  "echo's result is not its args");
        id = map_uint(rp.result, "id");
        cr_assert(id > 0 && id != UINT64_MAX);
        reply_clear(&rp);

        /* the same record for everyone: job.status from another connection */
        c2 = fiberd_connect(&fd_);
        rpc_simple(c2, "job.status", 1, &id, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert(msgpack_object_equal(*map_get(rp.result, "result"), args));
        reply_clear(&rp);

        /* args left out: the result is the empty map */
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "echo", NULL, NULL, -1), &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_get(rp.result, "result")->type, MSGPACK_OBJECT_MAP);
        cr_assert_eq(map_get(rp.result, "result")->via.map.size, 0);
        reply_clear(&rp);

        msgpack_zone_destroy(&zone);
        msgpack_sbuffer_destroy(&sb);
        client_free(c2);
        client_free(c);
}

Test(daemon_run, failing_job_answers_with_its_error)
{
        msgpack_sbuffer sb;
        const msgpack_object *err;
        Client *c;
        Reply rp;

        pack_str(&sb, "path", "/nonexistent/fiberd-test");
        fiberd_start(&fd_, &run_opts);
        c = fiberd_connect(&fd_);
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "sha256", &sb, NULL, -1), &rp);
        cr_assert_eq(rp.r, 0, "a failed job is a record, not an error: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        err = map_get(rp.result, "error");
        cr_assert_str_eq(map_str(err, "code"), IPC_NOT_FOUND);
        cr_assert_str_neq(map_str(err, "message"), "");
        cr_assert(ipc_object_is_nil(map_get(rp.result, "result")));
        reply_clear(&rp);
        msgpack_sbuffer_destroy(&sb);
        client_free(c);
}

Test(daemon_run, cancelled_from_another_connection_while_waiting)
{
        Client *c, *c2;
        uint32_t msgid;
        uint64_t id = start_run_sleep(600000, &c, &c2, &msgid);
        Reply rp;

        rpc_simple(c2, "job.cancel", 1, &id, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);

        rpc_wait_reply(c, msgid, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_eq(map_uint(rp.result, "id"), id);
        cr_assert_str_eq(map_str(rp.result, "state"), "cancelled");
        cr_assert_str_eq(map_str(map_get(rp.result, "error"), "code"), IPC_CANCELLED);
        reply_clear(&rp);
        client_free(c2);
        client_free(c);
}

/* Bad [plugin, args, options]: job.run says exactly what job.submit says. */
Test(daemon_run, bad_params_get_the_same_error_as_submit)
{
        msgpack_sbuffer not_map, bad_timeout, bad_option, empty;
        msgpack_packer pk;
        struct {
                const char *plugin;
                const msgpack_sbuffer *args, *options;
                const char *code;
        } cases[] = {
                {NULL, NULL, NULL, IPC_INVALID_ARGUMENT},             /* no plugin */
                {"nope", NULL, NULL, IPC_NOT_FOUND},                  /* no such plugin */
                {"echo", &not_map, NULL, IPC_INVALID_ARGUMENT},       /* args not a map */
                {"echo", &empty, &bad_timeout, IPC_INVALID_ARGUMENT}, /* timeout_ms: "soon" */
                {"echo", &empty, &bad_option, IPC_INVALID_ARGUMENT},  /* unknown option */
        };
        Client *c;
        Reply rp;

        msgpack_sbuffer_init(&not_map);
        msgpack_packer_init(&pk, &not_map, msgpack_sbuffer_write);
        ipc_pack_cstr(&pk, "not a map");
        msgpack_sbuffer_init(&empty);
        msgpack_packer_init(&pk, &empty, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 0);
        pack_str(&bad_timeout, "timeout_ms", "soon");
        msgpack_sbuffer_init(&bad_option);
        msgpack_packer_init(&pk, &bad_option, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        ipc_pack_kv_uint(&pk, "bogus", 1);

        fiberd_start(&fd_, &run_opts);
        c = fiberd_connect(&fd_);
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char code[32], message[IPC_STATUS_MESSAGE_MAX];

                rpc_wait_reply(c,
                               run_send(c, IPC_METHOD_JOB_SUBMIT, cases[i].plugin, cases[i].args,
                                        cases[i].options, -1),
                               &rp);
                cr_assert_lt(rp.r, 0, "case %zu: job.submit accepted it", i);
                cr_assert_str_eq(rp.st.code, cases[i].code, "case %zu", i);
                snprintf(code, sizeof(code), "%s", rp.st.code);
                snprintf(message, sizeof(message), "%s", rp.st.message);
                reply_clear(&rp);

                rpc_wait_reply(c,
                               run_send(c, IPC_METHOD_JOB_RUN, cases[i].plugin, cases[i].args,
                                        cases[i].options, -1),
                               &rp);
                cr_assert_lt(rp.r, 0, "case %zu: job.run accepted it", i);
                cr_assert_str_eq(rp.st.code, code, "case %zu", i);
                cr_assert_str_eq(rp.st.message, message, "case %zu", i);
                reply_clear(&rp);
        }

        /* a bad wait limit (job.run's own fourth param) is refused before anything queues */
        uint32_t msgid;
        msgpack_packer *rq = client_request(c, IPC_METHOD_JOB_RUN, 4, &msgid);
        ipc_pack_cstr(rq, "echo");
        msgpack_pack_map(rq, 0);
        msgpack_pack_nil(rq);
        ipc_pack_cstr(rq, "soon");
        rpc_wait_reply(c, msgid, &rp);
        cr_assert_lt(rp.r, 0);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
        reply_clear(&rp);

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0);
        cr_assert_eq(map_uint(map_get(rp.result, "jobs"), "submitted"), 0, "nothing was queued");
        reply_clear(&rp);

        msgpack_sbuffer_destroy(&not_map);
        msgpack_sbuffer_destroy(&empty);
        msgpack_sbuffer_destroy(&bad_timeout);
        msgpack_sbuffer_destroy(&bad_option);
        client_free(c);
}

/* Sends job.run echo {"n": 1} with @fields (NULL: nil; else a NULL-terminated list of
 * key names) as its fifth param, or job.wait [@id, nil, fields] when @id != 0; waits for
 * the reply. */
static void run_fields(Client *c, uint64_t id, const char *const *fields, Reply *rp)
{
        uint32_t msgid;
        msgpack_packer *pk = id ? client_request(c, IPC_METHOD_JOB_WAIT, 3, &msgid)
                                : client_request(c, IPC_METHOD_JOB_RUN, 5, &msgid);
        size_t n = 0;

        cr_assert(pk);
        if (id) {
                msgpack_pack_uint64(pk, id);
        } else {
                ipc_pack_cstr(pk, "echo");
                msgpack_pack_map(pk, 1);
                ipc_pack_kv_uint(pk, "n", 1);
                msgpack_pack_nil(pk);
        }
        msgpack_pack_nil(pk); /* no wait limit */
        if (!fields) {
                msgpack_pack_nil(pk);
        } else {
                while (fields[n])
                        n++;
                msgpack_pack_array(pk, (uint32_t)n);
                for (size_t i = 0; i < n; i++)
                        ipc_pack_cstr(pk, fields[i]);
        }
        rpc_wait_reply(c, msgid, rp);
}

/* job.run's and job.wait's `fields`: the answer holds the keys asked, with id and state
 * always; nil asks for the whole record; a key the record does not have (or args,
 * job.status's own) is INVALID_ARGUMENT naming it, and job.run then queues nothing. */
Test(daemon_run, fields_answer_only_the_keys_asked)
{
        static const char *const result[] = {"result", NULL};
        static const char *const two[] = {"error", "finished_ms", "state", NULL};
        static const char *const none[] = {NULL};
        static const char *const unknown[] = {"result", "bogus", NULL};
        static const char *const args[] = {"args", NULL};
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &run_opts);
        c = fiberd_connect(&fd_);

        run_fields(c, 0, result, &rp);
        cr_assert_eq(rp.r, 0, "job.run: %s", rp.st.message);
        cr_assert_eq(rp.result->type, MSGPACK_OBJECT_MAP);
        cr_assert_eq(rp.result->via.map.size, 3, "id, state, result: got %u keys",
                     rp.result->via.map.size);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_uint(map_get(rp.result, "result"), "n"), 1);
        cr_assert_null(map_get(rp.result, "plugin"));
        id = map_uint(rp.result, "id");
        cr_assert(id > 0 && id != UINT64_MAX);
        reply_clear(&rp);

        run_fields(c, id, two, &rp);
        cr_assert_eq(rp.r, 0, "job.wait: %s", rp.st.message);
        cr_assert_eq(rp.result->via.map.size, 4, "id, state, error, finished_ms: got %u keys",
                     rp.result->via.map.size);
        cr_assert(ipc_object_is_nil(map_get(rp.result, "error")));
        cr_assert_neq(map_uint(rp.result, "finished_ms"), UINT64_MAX);
        cr_assert_eq(map_uint(rp.result, "id"), id);
        reply_clear(&rp);

        run_fields(c, id, none, &rp);
        cr_assert_eq(rp.r, 0, "job.wait: %s", rp.st.message);
        cr_assert_eq(rp.result->via.map.size, 2, "id and state: got %u keys",
                     rp.result->via.map.size);
        reply_clear(&rp);

        run_fields(c, id, NULL, &rp); /* nil: the whole record, as without the param */
        cr_assert_eq(rp.r, 0, "job.wait: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "plugin"), "echo");
        cr_assert_not_null(map_get(rp.result, "errors"));
        cr_assert_null(map_get(rp.result, "args"));
        reply_clear(&rp);

        rpc_simple(c, "stats", 0, NULL, &rp);
        uint64_t submitted = map_uint(map_get(rp.result, "jobs"), "submitted");
        reply_clear(&rp);
        run_fields(c, 0, unknown, &rp);
        cr_assert_lt(rp.r, 0, "job.run accepted an unknown field");
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
        cr_assert(strstr(rp.st.message, "fields[1]") && strstr(rp.st.message, "bogus"), "%s",
                  rp.st.message);
        reply_clear(&rp);
        run_fields(c, 0, args, &rp);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT, "args is job.status's only");
        reply_clear(&rp);
        run_fields(c, id, unknown, &rp);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT, "job.wait took an unknown field");
        reply_clear(&rp);
        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(map_uint(map_get(rp.result, "jobs"), "submitted"), submitted,
                     "a refused job.run queued a job");
        reply_clear(&rp);
        client_free(c);
}

/* The same limits as submit: a full queue is OVERLOADED for both. */
Test(daemon_run, full_queue_is_overloaded_as_for_submit)
{
        const FiberdOpts o = {.plugins = "echo sleep",
                              .config = "[jobs]\nmax_running = 1\nmax_queued = 1\n"};
        msgpack_sbuffer sb;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        rpc_submit_long(c, "sleep"); /* runs */
        wait_listed(c, "sleep", "running");
        rpc_submit_long(c, "sleep"); /* fills the queue */
        pack_ms(&sb, 1);
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, -1), &rp);
        cr_assert_lt(rp.r, 0);
        cr_assert_str_eq(rp.st.code, IPC_OVERLOADED, "%s", rp.st.message);
        reply_clear(&rp);
        msgpack_sbuffer_destroy(&sb);
        client_free(c);
}

/* Like job.wait's timeout_ms: when it passes, the record as it stands, not an error. */
Test(daemon_run, wait_limit_answers_with_the_current_record)
{
        msgpack_sbuffer sb;
        Client *c;
        Reply rp;

        fiberd_start(&fd_, &run_opts);
        c = fiberd_connect(&fd_);
        pack_ms(&sb, 600000);
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, 20), &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert(strcmp(map_str(rp.result, "state"), "queued") == 0 ||
                          strcmp(map_str(rp.result, "state"), "running") == 0,
                  "state %s", map_str(rp.result, "state"));
        cr_assert(ipc_object_is_nil(map_get(rp.result, "finished_ms")));
        reply_clear(&rp);

        /* 0 = do not wait: the record right after submission */
        rpc_wait_reply(c, run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, 0), &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_neq(map_uint(rp.result, "id"), UINT64_MAX);
        cr_assert(ipc_object_is_nil(map_get(rp.result, "finished_ms")));
        reply_clear(&rp);
        msgpack_sbuffer_destroy(&sb);
        client_free(c);
}

/* The client of a job.run goes away: the job was accepted, so it runs to its end. */
Test(daemon_run, job_finishes_after_its_client_went_away)
{
        Client *c, *c2;
        uint32_t msgid;
        uint64_t id = start_run_sleep(500, &c, &c2, &msgid);
        Reply rp;

        client_free(c);

        rpc_job_wait(c2, id, 30000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done", "%s",
                         map_str(map_get(rp.result, "error"), "message"));
        cr_assert_eq(map_uint(map_get(rp.result, "result"), "slept_ms"), 500);
        reply_clear(&rp);

        /* and the daemon still serves: job.status from the other connection */
        rpc_simple(c2, "job.status", 1, &id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        client_free(c2);
}

/* ---- a wait without a limit parks no fiber (jobwait.h) ---- */

TestSuite(daemon_run_deferred, .fini = teardown, .timeout = 60);

#define DEFERRED_RUNS 48
/* long enough that every job still runs while the test looks, on a loaded machine */
#define DEFERRED_MS 3000

static const FiberdOpts deferred_opts = {
        .plugins = "echo sleep", .config = "[jobs]\nmax_running = 64\n[store]\nbackend = memory\n"};

/* stats: the server group's fibers alive (groups[0]) and the requests in flight. */
static void server_load(Client *c, uint64_t *ret_fibers, uint64_t *ret_in_flight)
{
        const msgpack_object *groups;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        groups = map_get(rp.result, "groups");
        cr_assert(groups && groups->type == MSGPACK_OBJECT_ARRAY && groups->via.array.size >= 1);
        cr_assert_str_eq(map_str(&groups->via.array.ptr[0], "name"), "server");
        *ret_fibers = map_uint(&groups->via.array.ptr[0], "fibers_alive");
        *ret_in_flight = map_uint(map_get(rp.result, "server"), "in_flight");
        reply_clear(&rp);
}

/* stats: the requests run on their connection's reader (server.requests_inline). */
static uint64_t requests_inline(Client *c)
{
        uint64_t v;
        Reply rp;

        rpc_simple(c, "stats", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        v = map_uint(map_get(rp.result, "server"), "requests_inline");
        cr_assert_neq(v, UINT64_MAX, "stats has no server.requests_inline");
        reply_clear(&rp);
        return v;
}

/* Asserts that exactly @want jobs come to run at once (stats on @c, bounded). */
static void wait_running(Client *c, uint64_t want)
{
        cr_assert(rpc_running_becomes(c, want), "%lu jobs never ran at once", (unsigned long)want);
}

/* DEFERRED_RUNS job.runs pipelined on one connection of a fiberd started with @o, each
 * answer checked against its own msgid. Returns the server fibers alive while all of
 * them were in flight. */
static uint64_t many_waits(const FiberdOpts *o, uint64_t *ret_inline)
{
        uint32_t msgids[DEFERRED_RUNS];
        uint64_t fibers, in_flight, waiting, inline_before;
        IpcStatus st;
        Client *c, *c2;

        fiberd_start(&fd_, o);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        inline_before = requests_inline(c2);
        /* pipelined on one connection, ending in another order than they were sent */
        for (int i = 0; i < DEFERRED_RUNS; i++) {
                msgpack_sbuffer sb;

                pack_ms(&sb, DEFERRED_MS + (uint64_t)(DEFERRED_RUNS - i) * 10);
                msgids[i] = run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, -1);
                msgpack_sbuffer_destroy(&sb);
        }
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        wait_running(c2, DEFERRED_RUNS);
        /* every job.run waits, and none holds a fiber of the server group: a parked
         * request fiber each would be DEFERRED_RUNS at least */
        server_load(c2, &fibers, &in_flight);
        cr_assert_geq(in_flight, DEFERRED_RUNS, "in flight: %lu", (unsigned long)in_flight);
        waiting = fibers;
        for (int i = 0; i < DEFERRED_RUNS; i++) {
                Reply rp;

                rpc_wait_reply(c, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                cr_assert_eq(map_uint(map_get(rp.result, "result"), "slept_ms"),
                             DEFERRED_MS + (uint64_t)(DEFERRED_RUNS - i) * 10, "answer %d", i);
                reply_clear(&rp);
        }
        /* every answer gave its slot back */
        for (int tries = 0;; tries++) {
                server_load(c2, &fibers, &in_flight);
                if (in_flight == 1) /* the stats call itself */
                        break;
                cr_assert(tries < 1000, "in flight: %lu", (unsigned long)in_flight);
                usleep(2000);
        }
        *ret_inline = requests_inline(c2) - inline_before;
        client_free(c);
        client_free(c2);
        return waiting;
}

Test(daemon_run_deferred, many_waits_hold_no_fiber_and_each_answer_finds_its_request)
{
        uint64_t inlined, fibers = many_waits(&deferred_opts, &inlined);

        /* a parked request fiber each would be DEFERRED_RUNS at least */
        cr_assert_lt(fibers, DEFERRED_RUNS / 2, "server fibers alive: %lu", (unsigned long)fibers);
        /* the memory store: each job.run ran on the reader, without a fiber of its own */
        cr_assert_eq(inlined, DEFERRED_RUNS, "%lu of %d job.runs ran inline",
                     (unsigned long)inlined, DEFERRED_RUNS);
}

/* the sqlite store: the answer waits for the final write too, still without a fiber */
Test(daemon_run_deferred, many_waits_hold_no_fiber_on_the_durable_store)
{
        FiberdOpts o = {.plugins = "echo sleep", .config = "[jobs]\nmax_running = 64\n"};

        uint64_t inlined, fibers = many_waits(&o, &inlined);

        cr_assert_lt(fibers, DEFERRED_RUNS / 2, "server fibers alive: %lu", (unsigned long)fibers);
        /* a submission here waits for its write: a fiber each, never the reader */
        cr_assert_eq(inlined, 0, "%lu job.runs ran inline on the sqlite store",
                     (unsigned long)inlined);
}

/*
 * On the memory store a job.run without a wait limit runs on the connection's reader
 * (server.c, methods_run_inline()). Pipelined with one that has a limit (a fiber of its
 * own) and one refused at once (no such plugin: its answer is the reader's to write),
 * every request still gets its own answer, and only the unlimited ones ran inline.
 */
Test(daemon_run_deferred, unlimited_runs_run_on_the_reader_and_each_is_answered)
{
        enum { RUNS = 16 };
        uint32_t msgids[RUNS], limited = 0, refused = 0;
        uint64_t inline_before, inlined;
        IpcStatus st;
        Client *c, *c2;
        Reply rp;

        fiberd_start(&fd_, &deferred_opts);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        inline_before = requests_inline(c2);
        for (int i = 0; i < RUNS; i++) {
                msgpack_sbuffer sb;

                pack_ms(&sb, (uint64_t)i);
                msgids[i] = run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, -1);
                msgpack_sbuffer_destroy(&sb);
                if (i == RUNS / 2) {
                        refused = run_send(c, IPC_METHOD_JOB_RUN, "no-such-plugin", NULL, NULL, -1);
                        limited = run_send(c, IPC_METHOD_JOB_RUN, "echo", NULL, NULL, 60000);
                }
        }
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        rpc_wait_reply(c, refused, &rp);
        cr_assert_neq(rp.r, 0, "a job.run of a plugin that does not exist was accepted");
        cr_assert_str_eq(rp.st.code, IPC_NOT_FOUND, "%s: %s", rp.st.code, rp.st.message);
        reply_clear(&rp);
        rpc_wait_reply(c, limited, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        for (int i = 0; i < RUNS; i++) {
                rpc_wait_reply(c, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                cr_assert_eq(map_uint(map_get(rp.result, "result"), "slept_ms"), (uint64_t)i,
                             "answer %d is another request's", i);
                reply_clear(&rp);
        }
        inlined = requests_inline(c2) - inline_before;
        cr_assert_eq(inlined, RUNS + 1,
                     "%lu ran inline: the %d unlimited job.runs and the "
                     "refused one should have, the limited one not",
                     (unsigned long)inlined, RUNS);
        client_free(c);
        client_free(c2);
}

/*
 * Refusals that a job.run run on the reader answers at once, many more than
 * max_in_flight in one burst: the reader must write each before it waits for a request
 * slot, since those answers are what give the slots back. Held until the end of the
 * read instead, the reader parked on the slots for good and nothing was answered.
 */
Test(daemon_run_deferred, refusals_beyond_max_in_flight_are_each_answered)
{
        enum { RUNS = 64 };
        FiberdOpts o = {.plugins = "echo",
                        .config = "[ipc]\nmax_in_flight = 8\n[store]\nbackend = memory\n"};
        uint32_t msgids[RUNS];
        uint64_t inline_before;
        IpcStatus st;
        Client *c, *c2;
        Reply rp;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        inline_before = requests_inline(c2);
        for (int i = 0; i < RUNS; i++)
                msgids[i] = run_send(c, IPC_METHOD_JOB_RUN, i % 8 ? "no-such-plugin" : "echo", NULL,
                                     NULL, -1);
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        for (int i = 0; i < RUNS; i++) {
                rpc_wait_reply(c, msgids[i], &rp);
                if (i % 8) {
                        cr_assert_str_eq(rp.st.code, IPC_NOT_FOUND, "answer %d: %s", i,
                                         rp.st.message);
                } else {
                        cr_assert_eq(rp.r, 0, "answer %d: %s", i, rp.st.message);
                        cr_assert_str_eq(map_str(rp.result, "state"), "done");
                }
                reply_clear(&rp);
        }
        /* each of them ran on the reader: the path under test */
        cr_assert_eq(requests_inline(c2) - inline_before, RUNS);
        client_free(c2);
        client_free(c);
}

/*
 * The other answer a job.run on the reader gives at once: an idempotency key whose job
 * is final already. 64 of them in one burst against max_in_flight = 8, behind the run
 * that made the job: each is answered with that job, done, and each ran inline.
 */
Test(daemon_run_deferred, runs_of_a_finished_key_beyond_max_in_flight_are_each_answered)
{
        enum { RUNS = 64 };
        FiberdOpts o = {.plugins = "echo",
                        .config = "[ipc]\nmax_in_flight = 8\n[store]\nbackend = memory\n"};
        uint32_t first, msgids[RUNS];
        uint64_t inline_before, id;
        msgpack_sbuffer opts;
        IpcStatus st;
        Client *c, *c2;
        Reply rp;

        pack_str(&opts, "key", "once-only");
        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        first = run_send(c, IPC_METHOD_JOB_RUN, "echo", NULL, &opts, -1);
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        rpc_wait_reply(c, first, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        id = map_uint(rp.result, "id");
        reply_clear(&rp);
        inline_before = requests_inline(c2);
        for (int i = 0; i < RUNS; i++)
                msgids[i] = run_send(c, IPC_METHOD_JOB_RUN, "echo", NULL, &opts, -1);
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        for (int i = 0; i < RUNS; i++) {
                rpc_wait_reply(c, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "answer %d: %s", i, rp.st.message);
                cr_assert_eq(map_uint(rp.result, "id"), id, "answer %d is another job", i);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                reply_clear(&rp);
        }
        cr_assert_eq(requests_inline(c2) - inline_before, RUNS);
        msgpack_sbuffer_destroy(&opts);
        client_free(c2);
        client_free(c);
}

Test(daemon_run_deferred, job_waits_after_submit_are_answered_from_the_job_end)
{
        uint32_t msgids[DEFERRED_RUNS];
        uint64_t fibers, in_flight;
        IpcStatus st;
        Client *c, *c2;
        uint64_t id;
        Reply rp;

        fiberd_start(&fd_, &deferred_opts);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", DEFERRED_MS)}, 1, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        /* many waits on the one job: each a watch of its own */
        for (int i = 0; i < DEFERRED_RUNS; i++) {
                msgpack_packer *pk = client_request(c, "job.wait", 2, &msgids[i]);
                msgpack_pack_uint64(pk, id);
                msgpack_pack_nil(pk);
        }
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        /* every wait is in flight while the job runs, and none holds a fiber */
        for (int tries = 0;; tries++) {
                server_load(c2, &fibers, &in_flight);
                if (in_flight == DEFERRED_RUNS + 1) /* and the stats call itself */
                        break;
                cr_assert(tries < 1000, "in flight: %lu", (unsigned long)in_flight);
                usleep(1000);
        }
        cr_assert_lt(fibers, DEFERRED_RUNS / 2, "server fibers alive: %lu", (unsigned long)fibers);
        for (int i = 0; i < DEFERRED_RUNS; i++) {
                rpc_wait_reply(c, msgids[i], &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_eq(map_uint(rp.result, "id"), id);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                cr_assert_eq(map_uint(map_get(rp.result, "result"), "slept_ms"), DEFERRED_MS);
                reply_clear(&rp);
        }
        /* and on a job already done: answered at once */
        rpc_simple(c, "job.wait", 1, &id, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        reply_clear(&rp);
        client_free(c);
        client_free(c2);
}

Test(daemon_run_deferred, a_closed_connection_drops_its_answers_and_gives_its_slots_back)
{
        uint64_t fibers, in_flight;
        IpcStatus st;
        Client *c, *c2;
        Reply rp;

        fiberd_start(&fd_, &deferred_opts);
        c = fiberd_connect(&fd_);
        c2 = fiberd_connect(&fd_);
        for (int i = 0; i < 8; i++) {
                msgpack_sbuffer sb;

                pack_ms(&sb, 1000);
                run_send(c, IPC_METHOD_JOB_RUN, "sleep", &sb, NULL, -1);
                msgpack_sbuffer_destroy(&sb);
        }
        cr_assert_eq(client_flush(c, 5000, &st), 0, "%s", st.message);
        wait_running(c2, 8);
        client_free(c); /* gone before any answer */
        /* the jobs end, their answers have nowhere to go, and nothing stays in flight */
        for (int tries = 0;; tries++) {
                uint64_t done;

                rpc_simple(c2, "stats", 0, NULL, &rp);
                done = map_uint(map_get(rp.result, "jobs"), "done");
                reply_clear(&rp);
                server_load(c2, &fibers, &in_flight);
                if (done == 8 && in_flight == 1)
                        break;
                cr_assert(tries < 3000, "done %lu, in flight %lu", (unsigned long)done,
                          (unsigned long)in_flight);
                usleep(2000);
        }
        /* the daemon serves on: the other connection is answered */
        rpc_simple(c2, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        reply_clear(&rp);
        client_free(c2);
}
