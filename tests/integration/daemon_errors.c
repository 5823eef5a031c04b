/* SPDX-License-Identifier: MIT */
/*
 * daemon_errors.c — every kind of bad input gets its error, and the daemon keeps serving
 * another client meanwhile: unknown plugin (NOT_FOUND), unknown method
 * (METHOD_NOT_FOUND), bad options (INVALID_ARGUMENT at submit), bad args (the job fails
 * with INVALID_ARGUMENT), a file that does not exist (the job fails with NOT_FOUND), an
 * oversized message (MESSAGE_TOO_LARGE, then that connection closes), non-msgpack bytes
 * (MALFORMED_MESSAGE to a readable msgid, or a connection.error notification, then close),
 * a well-formed value that is not a request (MALFORMED_MESSAGE, connection stays open).
 * Raw-socket tests write bytes by hand and read with the ipc decoder.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static Fiberd fd_;
static Client *other_;

static void teardown(void)
{
        other_ = client_free(other_);
        fiberd_stop(&fd_);
}

TestSuite(daemon_errors, .fini = teardown, .timeout = 60);

/* The bystander: a second client that must be served throughout. */
static void start_with_bystander(void)
{
        fiberd_start(&fd_, NULL);
        other_ = fiberd_connect(&fd_);
}

static void bystander_ping(void)
{
        Reply rp;

        rpc_simple(other_, "ping", 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "the other client was not served: %s", rp.st.message);
        reply_clear(&rp);
}

Test(daemon_errors, unknown_plugin)
{
        IpcStatus st;
        Client *c;

        start_with_bystander();
        c = fiberd_connect(&fd_);
        cr_assert_eq(rpc_submit(c, "sha512", NULL, 0, 0, 0, &st), 0);
        cr_assert_str_eq(st.code, IPC_NOT_FOUND);
        cr_assert(strstr(st.message, "sha512") && strstr(st.message, "sha256"),
                  "the message names the plugin and what is loaded: %s", st.message);
        bystander_ping();
        client_free(c);
}

Test(daemon_errors, unknown_method)
{
        Client *c;
        Reply rp;

        start_with_bystander();
        c = fiberd_connect(&fd_);
        rpc_simple(c, "job.explode", 0, NULL, &rp);
        cr_assert_str_eq(rp.st.code, IPC_METHOD_NOT_FOUND);
        reply_clear(&rp);
        bystander_ping();
        client_free(c);
}

Test(daemon_errors, bad_options_and_params)
{
        msgpack_packer *pk;
        uint32_t id;
        Client *c;
        Reply rp;

        start_with_bystander();
        c = fiberd_connect(&fd_);
        pk = client_request(c, "job.submit", 3, &id);
        ipc_pack_cstr(pk, "sleep");
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_cstr(pk, "timeout_ms", "soon");
        rpc_wait_reply(c, id, &rp);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
        cr_assert(strstr(rp.st.message, "timeout_ms"), "%s", rp.st.message);
        reply_clear(&rp);

        pk = client_request(c, "job.submit", 3, &id);
        ipc_pack_cstr(pk, "sleep");
        msgpack_pack_map(pk, 0);
        msgpack_pack_map(pk, 1);
        ipc_pack_kv_int(pk, "colour", 3);
        rpc_wait_reply(c, id, &rp);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
        reply_clear(&rp);

        pk = client_request(c, "job.status", 1, &id);
        ipc_pack_cstr(pk, "seventeen");
        rpc_wait_reply(c, id, &rp);
        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
        reply_clear(&rp);
        bystander_ping();
        client_free(c);
}

static void check_job_failed(Client *c, uint64_t id, const char *code, const char *needle)
{
        const msgpack_object *err;
        Reply rp;

        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        err = map_get(rp.result, "error");
        cr_assert_str_eq(map_str(err, "code"), code, "%s", map_str(err, "message"));
        cr_assert(strstr(map_str(err, "message"), needle), "message: %s", map_str(err, "message"));
        reply_clear(&rp);
}

Test(daemon_errors, bad_args_fail_the_job)
{
        IpcStatus st;
        Client *c;
        uint64_t id;

        start_with_bystander();
        c = fiberd_connect(&fd_);
        /* The bundled plugins' check_args refuse these at submission */
        id = rpc_submit(c, "sha256", (Arg[]){ARG_I("path", 42)}, 1, 0, 0, &st);
        cr_assert_eq(id, 0, "no job for a bad argument");
        cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT);
        cr_assert(strstr(st.message, "path"), "%s", st.message);

        id = rpc_submit(c, "sha256", NULL, 0, 0, 0, &st);
        cr_assert_eq(id, 0);
        cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT);
        cr_assert(strstr(st.message, "path"), "%s", st.message);

        id = rpc_submit(c, "sleep", (Arg[]){ARG_S("ms", "ten")}, 1, 0, 0, &st);
        cr_assert_eq(id, 0);
        cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT);
        cr_assert(strstr(st.message, "ms"), "%s", st.message);

        /* what only running can tell still fails the job */

        id = rpc_submit(c, "sha256", (Arg[]){ARG_S("path", "/nonexistent/fiberd-test")}, 1, 0, 0,
                        &st);
        check_job_failed(c, id, IPC_NOT_FOUND, "/nonexistent/fiberd-test");
        bystander_ping();
        client_free(c);
}

/* ------------------------------------------------------------- raw sockets ------ */

static int raw_connect(void)
{
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        snprintf(a.sun_path, sizeof(a.sun_path), "%s", fd_.sock);
        cr_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
        return fd;
}

/* Writes @len bytes; the daemon may close early (a refused message): EPIPE is fine. */
static void raw_write(int fd, const void *buf, size_t len)
{
        const char *p = buf;

        while (len) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0)
                        return;
                p += n;
                len -= (size_t)n;
        }
}

/*
 * Reads what the daemon sends until it closes the connection (bounded: 10 s), decoding
 * the first message into @ret. Returns true when the connection was closed.
 */
static bool raw_read_until_close(int fd, IpcMessage *ret, bool *got)
{
        IpcDecoder *d;
        char buf[4096];
        bool closed = false;

        *got = false;
        cr_assert(ipc_decoder_new(&d, 0) == 0);
        for (int i = 0; i < 1000 && !closed; i++) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t n;

                if (poll(&p, 1, 10) <= 0)
                        continue;
                n = recv(fd, buf, sizeof(buf), 0);
                if (n <= 0) {
                        closed = true;
                        break;
                }
                ipc_decoder_feed(d, buf, (size_t)n);
                if (!*got && ipc_decoder_next(d, ret) == 1)
                        *got = true;
        }
        ipc_decoder_free(d);
        return closed;
}

static const char *error_code_of(const IpcMessage *m, char *buf, size_t size)
{
        const msgpack_object *err =
                m->type == IPC_RESPONSE ? &m->error : ipc_array_at(&m->params, 0);
        snprintf(buf, size, "%s", map_str(err, "code"));
        return buf;
}

Test(daemon_errors, oversized_message)
{
        /* [0, 7, "ping", [bin of 2 MiB]]: the bin header alone says it is too big */
        size_t big = 2 << 20;
        unsigned char *msg = calloc(1, big + 16);
        unsigned char head[] = {0x94,
                                0x00,
                                0x07,
                                0xa4,
                                'p',
                                'i',
                                'n',
                                'g',
                                0x91,
                                0xc6,
                                (unsigned char)(big >> 24),
                                (unsigned char)(big >> 16),
                                (unsigned char)(big >> 8),
                                (unsigned char)big};
        IpcMessage m = {0};
        char code[64];
        bool got;
        int fd;

        start_with_bystander();
        fd = raw_connect();
        memcpy(msg, head, sizeof(head));
        raw_write(fd, msg, sizeof(head) + big);
        cr_assert(raw_read_until_close(fd, &m, &got), "the connection was not closed");
        cr_assert(got, "no error response before the close");
        cr_assert_eq(m.type, IPC_RESPONSE);
        cr_assert_eq(m.msgid, 7);
        cr_assert_str_eq(error_code_of(&m, code, sizeof(code)), IPC_MESSAGE_TOO_LARGE);
        ipc_message_clear(&m);
        close(fd);
        free(msg);
        bystander_ping();
}

Test(daemon_errors, not_msgpack_with_msgid)
{
        /* [0, 9, then 0xc1 (never used in msgpack) */
        static const unsigned char bytes[] = {0x94, 0x00, 0x09, 0xc1, 0x00};
        IpcMessage m = {0};
        char code[64];
        bool got;
        int fd;

        start_with_bystander();
        fd = raw_connect();
        raw_write(fd, bytes, sizeof(bytes));
        cr_assert(raw_read_until_close(fd, &m, &got));
        cr_assert(got);
        cr_assert_eq(m.type, IPC_RESPONSE);
        cr_assert_eq(m.msgid, 9);
        cr_assert_str_eq(error_code_of(&m, code, sizeof(code)), IPC_MALFORMED_MESSAGE);
        ipc_message_clear(&m);
        close(fd);
        bystander_ping();
}

Test(daemon_errors, text_gets_notification_and_close)
{
        static const char text[] = "GET / HTTP/1.0\r\n\r\n";
        IpcMessage m = {0};
        char code[64];
        bool got;
        int fd;

        start_with_bystander();
        fd = raw_connect();
        raw_write(fd, text, strlen(text));
        cr_assert(raw_read_until_close(fd, &m, &got));
        cr_assert(got, "no connection.error notification");
        cr_assert_eq(m.type, IPC_NOTIFICATION);
        cr_assert_str_eq(m.method, "connection.error");
        cr_assert_str_eq(error_code_of(&m, code, sizeof(code)), IPC_MALFORMED_MESSAGE);
        ipc_message_clear(&m);
        close(fd);
        bystander_ping();
}

Test(daemon_errors, not_a_request_keeps_connection)
{
        /* [0, 5, 42, []]: msgpack, but the method is not a string; then a valid ping */
        static const unsigned char bad[] = {0x94, 0x00, 0x05, 0x2a, 0x90};
        static const unsigned char ping[] = {0x94, 0x00, 0x06, 0xa4, 'p', 'i', 'n', 'g', 0x90};
        IpcDecoder *d;
        IpcMessage m;
        char buf[4096], code[64];
        int fd, seen = 0;

        start_with_bystander();
        fd = raw_connect();
        raw_write(fd, bad, sizeof(bad));
        raw_write(fd, ping, sizeof(ping));
        cr_assert(ipc_decoder_new(&d, 0) == 0);
        while (seen < 2) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t n;

                cr_assert(poll(&p, 1, 10000) == 1, "no answer");
                n = recv(fd, buf, sizeof(buf), 0);
                cr_assert(n > 0, "the connection was closed");
                ipc_decoder_feed(d, buf, (size_t)n);
                while (ipc_decoder_next(d, &m) == 1) {
                        if (m.msgid == 5)
                                cr_assert_str_eq(error_code_of(&m, code, sizeof(code)),
                                                 IPC_MALFORMED_MESSAGE);
                        else
                                cr_assert(m.msgid == 6 && m.error.type == MSGPACK_OBJECT_NIL);
                        seen++;
                        ipc_message_clear(&m);
                }
        }
        ipc_decoder_free(d);
        close(fd);
        bystander_ping();
}

/*
 * [0, "x", "ping", []]: a request whose msgid cannot be read. Nothing can be answered to
 * it, so fiberd sends a connection.error notification (never silence, which left the
 * client waiting forever) and keeps the connection: the ping after it is answered.
 */
Test(daemon_errors, unreadable_msgid_gets_notification)
{
        static const unsigned char bad[] = {0x94, 0x00, 0xa1, 'x', 0xa4, 'p', 'i', 'n', 'g', 0x90};
        static const unsigned char ping[] = {0x94, 0x00, 0x06, 0xa4, 'p', 'i', 'n', 'g', 0x90};
        IpcDecoder *d;
        IpcMessage m;
        char buf[4096], code[64];
        bool notified = false, answered = false;
        int fd;

        start_with_bystander();
        fd = raw_connect();
        raw_write(fd, bad, sizeof(bad));
        raw_write(fd, ping, sizeof(ping));
        cr_assert(ipc_decoder_new(&d, 0) == 0);
        while (!notified || !answered) {
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t n;

                cr_assert(poll(&p, 1, 10000) == 1, "no answer (notified %d, answered %d)", notified,
                          answered);
                n = recv(fd, buf, sizeof(buf), 0);
                cr_assert(n > 0, "the connection was closed");
                ipc_decoder_feed(d, buf, (size_t)n);
                while (ipc_decoder_next(d, &m) == 1) {
                        if (m.type == IPC_NOTIFICATION) {
                                cr_assert_str_eq(m.method, "connection.error");
                                cr_assert_str_eq(error_code_of(&m, code, sizeof(code)),
                                                 IPC_MALFORMED_MESSAGE);
                                notified = true;
                        } else {
                                cr_assert(m.msgid == 6 && m.error.type == MSGPACK_OBJECT_NIL);
                                answered = true;
                        }
                        ipc_message_clear(&m);
                }
        }
        ipc_decoder_free(d);
        close(fd);
        bystander_ping();
}

/* echo's result is its args: args nested deeper than a result may be are refused at
 * submission, with the reason; 20 levels run and come back whole. */
Test(daemon_errors, echo_refuses_args_deeper_than_a_result_may_nest)
{
        Client *c;

        fiberd_start(&fd_, NULL);
        other_ = fiberd_connect(&fd_);
        c = fiberd_connect(&fd_);
        for (int depth = 20; depth <= 22; depth++) {
                const msgpack_object *v;
                uint32_t msgid;
                msgpack_packer *pk =
                        client_request(c, IPC_METHOD_JOB_SUBMIT, IPC_SUBMIT_NPARAMS, &msgid);
                int levels = 0;
                uint64_t id;
                Reply rp;

                cr_assert_not_null(pk);
                ipc_pack_cstr(pk, "echo");
                msgpack_pack_map(pk, 1); /* {"a": [[...[1]...]]}: @depth levels */
                ipc_pack_cstr(pk, "a");
                for (int i = 1; i < depth; i++)
                        msgpack_pack_array(pk, 1);
                msgpack_pack_uint8(pk, 1);
                msgpack_pack_map(pk, 0); /* no options */
                rpc_wait_reply(c, msgid, &rp);
                if (depth > 20) {
                        cr_assert_eq(rp.r, -EINVAL, "%d levels accepted", depth);
                        cr_assert_str_eq(rp.st.code, IPC_INVALID_ARGUMENT);
                        cr_assert(strstr(rp.st.message, "more than 20 levels deep"), "%s",
                                  rp.st.message);
                        reply_clear(&rp);
                        continue;
                }
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                id = map_uint(rp.result, "id");
                cr_assert_neq(id, 0);
                reply_clear(&rp);
                rpc_job_wait(c, id, 10000, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                for (v = map_get(map_get(rp.result, "result"), "a");
                     v && v->type == MSGPACK_OBJECT_ARRAY; v = v->via.array.ptr)
                        levels++;
                cr_assert_eq(levels, 19, "the map and 19 arrays came back as %d", levels);
                reply_clear(&rp);
        }
        bystander_ping();
}

/* A plugin's raw msgpack result is checked to be one whole value: a truncated one, one
 * with a second value behind it and a byte msgpack never uses are refused (-EINVAL) and
 * leave no result; a valid one of thousands of small elements comes back whole, and so
 * does one nested 20 levels, where 21 is refused. */
Test(daemon_errors, a_plugins_raw_result_is_checked_whole)
{
        static const FiberdOpts opts = {.extra = FIBERD_TEST_PLUGIN_DIR "/raw_result.so"};
        const msgpack_object *res, *a;
        IpcStatus st;
        Client *c;
        uint64_t id;
        Reply rp;

        fiberd_start(&fd_, &opts);
        other_ = fiberd_connect(&fd_);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "raw_result", NULL, 0, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        res = map_get(rp.result, "result");
        cr_assert_not_null(res);
        for (size_t i = 0; i < 3; i++) {
                const char *key = (const char *[]){"truncated", "trailing", "invalid"}[i];
                const msgpack_object *v = map_get(res, key);
                cr_assert_not_null(v, "no %s in the result", key);
                cr_assert_eq(v->type, MSGPACK_OBJECT_NEGATIVE_INTEGER, "%s", key);
                cr_assert_eq(v->via.i64, -EINVAL, "%s: %lld", key, (long long)v->via.i64);
        }
        reply_clear(&rp);

        id = rpc_submit(c, "raw_result", (Arg[]){ARG_S("mode", "many"), ARG_I("n", 5000)}, 2, 0, 0,
                        &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_eq(rp.r, 0, "%s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        a = map_get(map_get(rp.result, "result"), "a");
        cr_assert_not_null(a, "the result lost its array");
        cr_assert_eq(a->type, MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(a->via.array.size, 5000);
        for (uint32_t i = 0; i < 5000; i++)
                cr_assert_eq(a->via.array.ptr[i].via.u64, i % 100, "element %u", i);
        reply_clear(&rp);

        /* 20 levels come back whole in the job's record; 21 would not decode in a record
         * list (24 levels a message), so the plugin hears -EINVAL and the job fails */
        for (int depth = 20; depth <= 21; depth++) {
                const msgpack_object *v;
                int levels = 0;

                id = rpc_submit(c, "raw_result", (Arg[]){ARG_S("mode", "deep"), ARG_I("n", depth)},
                                2, 0, 0, &st);
                cr_assert_neq(id, 0, "%s", st.message);
                rpc_job_wait(c, id, 10000, &rp);
                cr_assert_eq(rp.r, 0, "%s", rp.st.message);
                if (depth == 21) {
                        reply_clear(&rp);
                        check_job_failed(c, id, IPC_INVALID_ARGUMENT,
                                         "more than 20 levels deep: a job list could not");
                        continue;
                }
                cr_assert_str_eq(map_str(rp.result, "state"), "done");
                for (v = map_get(rp.result, "result"); v && v->type == MSGPACK_OBJECT_ARRAY;
                     v = v->via.array.ptr)
                        levels++;
                cr_assert_eq(levels, 20);
                cr_assert(v && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER && v->via.u64 == 1);
                reply_clear(&rp);
        }
        bystander_ping();
}
