/* SPDX-License-Identifier: MIT */
/*
 * client_abi0.c — a program built before job scheduling, against libfiberd-client's
 * FIBERD_CLIENT_0: its FiberdClientJobOptions had three fields. tests/clientlib.sh
 * builds it against the installed header and runs it on the installed library with a
 * real fiberd (socket path in argv[1]).
 *
 * The old calls are bound to their FIBERD_CLIENT_0 versions with .symver, as the linker
 * bound them in a program built then; the old struct is followed by bytes that would be
 * a wild class string pointer, an after array and a key if the library read the fields
 * FIBERD_CLIENT_0.2 added. Then the same through today's calls with a job class, which
 * every fiberd takes. Prints "ok" and exits 0, or names the first check that failed.
 */
#include <fiberd/client.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FiberdClientJobOptions as FIBERD_CLIENT_0 had it. */
typedef struct Options0 {
        bool has_priority;
        int32_t priority;
        uint64_t timeout_ms;
} Options0;

int submit_0(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
             const Options0 *opts, int timeout_ms, uint64_t *ret_id, FiberdClientError *err);
int job_run_0(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
              const Options0 *opts, int64_t wait_timeout_ms, int timeout_ms,
              FiberdClientReply **ret, FiberdClientError *err);
__asm__(".symver submit_0, fiberd_client_submit@FIBERD_CLIENT_0");
__asm__(".symver job_run_0, fiberd_client_job_run@FIBERD_CLIENT_0");

static void failed(const char *what, const FiberdClientError *err)
{
        fprintf(stderr, "client_abi0: FAIL: %s", what);
        if (err)
                fprintf(stderr, ": %s (%s)", fiberd_client_code_name(err->code), err->message);
        fputc('\n', stderr);
        exit(1);
}

static bool state_is(const FiberdClientReply *r, const char *s)
{
        const msgpack_object *o = fiberd_client_object_get(fiberd_client_reply_result(r), "state");
        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
               memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

int main(int argc, char **argv)
{
        /* the old struct, then what the new fields would be read from: poison */
        struct {
                Options0 opts;
                unsigned char poison[256];
        } old;
        FiberdClientJobOptions now = {.job_class = "default", .timeout_ms = 60000};
        FiberdClient *c;
        FiberdClientError err;
        FiberdClientReply *rec;
        uint64_t id;

        if (argc != 2)
                return fprintf(stderr, "usage: client_abi0 SOCKET\n"), 64;
        memset(&old, 0xa5, sizeof(old));
        old.opts.has_priority = true;
        old.opts.priority = 0;
        old.opts.timeout_ms = 60000;
        if (fiberd_client_connect(&c, argv[1], &err) < 0)
                failed("connect", &err);

        if (submit_0(c, "echo", NULL, 0, &old.opts, 10000, &id, &err) < 0)
                failed("fiberd_client_submit@FIBERD_CLIENT_0 with the old options", &err);
        if (fiberd_client_job_wait(c, id, -1, 10000, &rec, &err) < 0 || !state_is(rec, "done"))
                failed("the job submitted through FIBERD_CLIENT_0 did not end done", &err);
        fiberd_client_reply_free(rec);
        if (job_run_0(c, "echo", NULL, 0, &old.opts, -1, 10000, &rec, &err) < 0 ||
            !state_is(rec, "done"))
                failed("fiberd_client_job_run@FIBERD_CLIENT_0 with the old options", &err);
        fiberd_client_reply_free(rec);
        printf("FIBERD_CLIENT_0: submit and job_run read only the old options\n");

        if (fiberd_client_submit(c, "echo", NULL, 0, &now, 10000, &id, &err) < 0)
                failed("fiberd_client_submit with a job class", &err);
        if (fiberd_client_job_run(c, "echo", NULL, 0, &now, -1, 10000, &rec, &err) < 0 ||
            !state_is(rec, "done"))
                failed("fiberd_client_job_run with a job class", &err);
        fiberd_client_reply_free(rec);
        printf("FIBERD_CLIENT_0.2: submit and job_run with a job class\n");
        fiberd_client_free(c);
        puts("ok");
        return 0;
}
