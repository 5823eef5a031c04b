/* SPDX-License-Identifier: MIT */
/*
 * client_example.c — a program as a user of libfiberd-client writes it: only
 * <fiberd/client.h>, built with `pkg-config --cflags --libs fiberd-client` against an
 * installed tree (tests/clientlib.sh builds it against a `make install DESTDIR=` tree).
 *
 * Against a real fiberd (socket path in argv[1]) it checks each thing the README promises:
 * ping; a job submitted with args and waited for, whose result is those args (echo);
 * a job.run answering only the record keys asked (fields);
 * out-of-order answers (a job.wait that cannot end until the job is cancelled, queued
 * before a ping: the ping's answer comes first, and the wait's after the cancel); errors
 * as codes (a job that does not exist is FIBERD_CLIENT_NOT_FOUND, refused args
 * INVALID_ARGUMENT); job.list pages until next_cursor is 0. Prints "ok" and exits 0, or
 * names the first check that failed and exits 1.
 */
#include <fiberd/client.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(const char *what, const FiberdClientError *err)
{
        fprintf(stderr, "client_example: FAIL: %s", what);
        if (err)
                fprintf(stderr, ": %s (%s)", fiberd_client_code_name(err->code), err->message);
        fputc('\n', stderr);
        exit(1);
}

static bool str_is(const msgpack_object *o, const char *s)
{
        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
               memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static uint64_t uint_of(const msgpack_object *o)
{
        return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

int main(int argc, char **argv)
{
        FiberdClient *c;
        FiberdClientError err;
        FiberdClientReply *reply;
        msgpack_sbuffer args;
        msgpack_packer pk;
        uint64_t id, slow, cursor = 0, seen = 0, made = 2; /* jobs the daemon created */
        uint32_t wait_id, ping_id;

        if (argc != 2)
                return fprintf(stderr, "usage: client_example SOCKET\n"), 64;
        if (fiberd_client_connect(&c, argv[1], &err) < 0)
                failed("connect", &err);

        if (fiberd_client_ping(c, 10000, &reply, &err) < 0)
                failed("ping", &err);
        if (uint_of(fiberd_client_object_get(fiberd_client_reply_result(reply), "protocol")) !=
            FIBERD_CLIENT_PROTOCOL)
                failed("ping's protocol is not FIBERD_CLIENT_PROTOCOL", NULL);
        fiberd_client_reply_free(reply);

        /* a job with args, its result */
        msgpack_sbuffer_init(&args);
        msgpack_packer_init(&pk, &args, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "word", 4);
        msgpack_pack_str_with_body(&pk, "fiber", 5);
        if (fiberd_client_submit(c, "echo", args.data, args.size, NULL, 10000, &id, &err) < 0)
                failed("submit echo", &err);
        if (fiberd_client_job_wait(c, id, -1, 10000, &reply, &err) < 0)
                failed("job.wait", &err);
        const msgpack_object *rec = fiberd_client_reply_result(reply);
        if (!str_is(fiberd_client_object_get(rec, "state"), "done"))
                failed("the echo job did not end done", NULL);
        if (!str_is(fiberd_client_object_get(fiberd_client_object_get(rec, "result"), "word"),
                    "fiber"))
                failed("the echo job's result is not its args", NULL);
        printf("job %llu done: word=fiber\n", (unsigned long long)id);
        fiberd_client_reply_free(reply);

        /* job.run answering only the keys asked: id, state, result */
        static const char *const fields[] = {"result"};
        if (fiberd_client_send_run_fields(c, "echo", args.data, args.size, NULL, -1, fields, 1,
                                          &wait_id) < 0 ||
            fiberd_client_call(c, wait_id, 10000, &reply, &err) < 0)
                failed("job.run with fields", &err);
        rec = fiberd_client_reply_result(reply);
        if (!rec || rec->type != MSGPACK_OBJECT_MAP || rec->via.map.size != 3 ||
            !str_is(fiberd_client_object_get(rec, "state"), "done") ||
            !str_is(fiberd_client_object_get(fiberd_client_object_get(rec, "result"), "word"),
                    "fiber"))
                failed("job.run with fields [result] did not answer {id, state, result}", NULL);
        fiberd_client_reply_free(reply);
        made++;
        if (fiberd_client_send_wait_fields(c, id, -1, NULL, 1, &wait_id) != -EINVAL)
                failed("fields NULL with a count was not refused", NULL);
        msgpack_sbuffer_destroy(&args);

        /* out of order: the wait is asked first and answered last */
        msgpack_sbuffer_init(&args);
        msgpack_packer_init(&pk, &args, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "ms", 2);
        msgpack_pack_uint64(&pk, 3600000);
        if (fiberd_client_submit(c, "sleep", args.data, args.size, NULL, 10000, &slow, &err) < 0)
                failed("submit sleep", &err);
        msgpack_sbuffer_destroy(&args);
        if (fiberd_client_send_wait(c, slow, -1, &wait_id) < 0 ||
            fiberd_client_send_ping(c, &ping_id) < 0)
                failed("queue job.wait and ping", NULL);
        if (fiberd_client_receive(c, 10000, &reply, &err) < 0)
                failed("receive the first answer", &err);
        if (fiberd_client_reply_msgid(reply) != ping_id)
                failed("the ping was not answered before the job.wait queued ahead of it", NULL);
        fiberd_client_reply_free(reply);
        if (fiberd_client_job_cancel(c, slow, 10000, &reply, &err) < 0)
                failed("job.cancel", &err);
        fiberd_client_reply_free(reply);
        if (fiberd_client_call(c, wait_id, 10000, &reply, &err) < 0)
                failed("the job.wait's answer", &err);
        if (!str_is(fiberd_client_object_get(fiberd_client_reply_result(reply), "state"),
                    "cancelled"))
                failed("the waited job is not cancelled", NULL);
        fiberd_client_reply_free(reply);

        /* errors as codes */
        if (fiberd_client_job_status(c, 999999, 10000, &reply, &err) != -ENOENT ||
            err.code != FIBERD_CLIENT_NOT_FOUND)
                failed("job.status of a job that does not exist is not NOT_FOUND", &err);
        msgpack_sbuffer_init(&args);
        msgpack_packer_init(&pk, &args, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "ms", 2);
        msgpack_pack_str_with_body(&pk, "soon", 4);
        if (fiberd_client_job_run(c, "sleep", args.data, args.size, NULL, -1, 10000, &reply,
                                  &err) == 0) {
                /* a daemon without check_args fails the job instead of refusing it */
                const msgpack_object *e =
                        fiberd_client_object_get(fiberd_client_reply_result(reply), "error");
                if (!str_is(fiberd_client_object_get(e, "code"), "INVALID_ARGUMENT"))
                        failed("sleep with ms=\"soon\" did not fail with INVALID_ARGUMENT", NULL);
                fiberd_client_reply_free(reply);
                made++;
        } else if (err.code != FIBERD_CLIENT_INVALID_ARGUMENT) {
                failed("sleep with ms=\"soon\" was not refused as INVALID_ARGUMENT", &err);
        }
        msgpack_sbuffer_destroy(&args);

        /* every page of job.list */
        FiberdClientListFilter filter = {.limit = 1};
        do {
                if (fiberd_client_list_page(c, &filter, cursor, 10000, &reply, &cursor, &err) < 0)
                        failed("job.list page", &err);
                const msgpack_object *jobs =
                        fiberd_client_object_get(fiberd_client_reply_result(reply), "jobs");
                seen += jobs->type == MSGPACK_OBJECT_ARRAY ? jobs->via.array.size : 0;
                fiberd_client_reply_free(reply);
        } while (cursor != 0);
        if (seen < made)
                failed("job.list pages did not hold the jobs submitted", NULL);
        printf("job.list: %llu jobs in pages of 1\n", (unsigned long long)seen);

        fiberd_client_free(c);
        printf("ok\n");
        return 0;
}
