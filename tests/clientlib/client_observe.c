/* SPDX-License-Identifier: MIT */
/*
 * client_observe.c — libfiberd-client's FIBERD_CLIENT_0.3 calls as a user writes them
 * (only <fiberd/client.h>, built with `pkg-config --cflags --libs fiberd-client` against a
 * `make install DESTDIR=` tree by tests/clientlib.sh), against a real fiberd whose plugin
 * directory holds the test plugin log_lines.so (socket path in argv[1]):
 *
 *   - job.logs of a job that logged 3 lines gives them, oldest first;
 *   - following a job that logs 5 lines 30 ms apart hands over each once, in order, while
 *     it runs, and ends with its final record;
 *   - following a job that logged 100 lines (fiberd keeps 64) counts the 36 let go as
 *     missed, so handed + missed = 100, and the last line is "line 100";
 *   - a callback that returns 7 stops the follow, which returns 7;
 *   - job.logs of a job that does not exist is NOT_FOUND;
 *   - metrics: the OpenMetrics text ends in "# EOF" and counts jobs submitted, the
 *     Prometheus text has no "# EOF", a format fiberd does not know is INVALID_ARGUMENT;
 *   - a job submitted with a job class ("default") says that class in its record.
 * Prints "ok" and exits 0, or names the first check that failed and exits 1.
 */
#include <fiberd/client.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed(const char *what, const FiberdClientError *err)
{
        fprintf(stderr, "client_observe: FAIL: %s", what);
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

/* Submits log_lines with {"n": n, "delay_ms": delay_ms}; returns its id. */
static uint64_t submit_logger(FiberdClient *c, uint64_t n, uint64_t delay_ms)
{
        FiberdClientError err;
        msgpack_sbuffer args;
        msgpack_packer pk;
        uint64_t id;

        msgpack_sbuffer_init(&args);
        msgpack_packer_init(&pk, &args, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        msgpack_pack_str_with_body(&pk, "n", 1);
        msgpack_pack_uint64(&pk, n);
        msgpack_pack_str_with_body(&pk, "delay_ms", 8);
        msgpack_pack_uint64(&pk, delay_ms);
        if (fiberd_client_submit(c, "log_lines", args.data, args.size, NULL, 10000, &id, &err) < 0)
                failed("submit log_lines (is log_lines.so in the plugin directory?)", &err);
        msgpack_sbuffer_destroy(&args);
        return id;
}

/* What a follow saw. */
typedef struct Seen {
        unsigned lines;  /* lines handed over */
        uint64_t missed; /* the lines reported missed */
        char last[64];   /* the last line's text */
        bool in_order;   /* every line was "line <lines>" when missed is 0 */
        int stop_after;  /* return 7 after this many lines; 0: never */
} Seen;

static int on_line(const FiberdClientLogLine *line, void *userdata)
{
        Seen *s = userdata;
        char want[64];

        s->missed += line->missed;
        s->lines++;
        snprintf(s->last, sizeof(s->last), "%.*s", (int)line->text_len, line->text);
        snprintf(want, sizeof(want), "line %llu", (unsigned long long)(s->lines + s->missed));
        if (strcmp(s->last, want) != 0 || line->level != 6 || line->time_ms == 0)
                s->in_order = false;
        return s->stop_after && (int)s->lines == s->stop_after ? 7 : 0;
}

int main(int argc, char **argv)
{
        FiberdClient *c;
        FiberdClientError err;
        FiberdClientReply *reply;
        char *text;
        uint64_t id;

        if (argc != 2)
                return fprintf(stderr, "usage: client_observe SOCKET\n"), 64;
        if (fiberd_client_connect(&c, argv[1], &err) < 0)
                failed("connect", &err);

        /* job.logs */
        id = submit_logger(c, 3, 0);
        if (fiberd_client_job_wait(c, id, -1, 10000, &reply, &err) < 0)
                failed("job.wait", &err);
        fiberd_client_reply_free(reply);
        if (fiberd_client_job_logs(c, id, 10000, &reply, &err) < 0)
                failed("job.logs", &err);
        const msgpack_object *lines =
                fiberd_client_object_get(fiberd_client_reply_result(reply), "lines");
        if (!lines || lines->type != MSGPACK_OBJECT_ARRAY || lines->via.array.size != 3 ||
            !str_is(fiberd_client_object_get(&lines->via.array.ptr[0], "text"), "line 1") ||
            !str_is(fiberd_client_object_get(&lines->via.array.ptr[2], "text"), "line 3"))
                failed("job.logs of a job that logged 3 lines did not give them in order", NULL);
        fiberd_client_reply_free(reply);
        printf("job.logs: 3 lines, in order\n");

        /* following a running job */
        Seen s = {.in_order = true};
        id = submit_logger(c, 5, 30);
        if (fiberd_client_job_logs_follow(c, id, 20, on_line, &s, 30000, &reply, &err) != 0)
                failed("following job.logs", &err);
        if (s.lines != 5 || s.missed != 0 || !s.in_order)
                failed("the follow did not hand over line 1 .. line 5 once each", NULL);
        if (!str_is(fiberd_client_object_get(fiberd_client_reply_result(reply), "state"), "done"))
                failed("the follow did not end with the final record", NULL);
        fiberd_client_reply_free(reply);
        printf("follow: 5 lines while the job ran, then its final record\n");

        /* more lines than fiberd keeps */
        s = (Seen){.in_order = true};
        id = submit_logger(c, 100, 0);
        /* a job that logged them all (its ring wrapped) before the follow starts */
        if (fiberd_client_job_wait(c, id, -1, 10000, &reply, &err) < 0)
                failed("job.wait", &err);
        fiberd_client_reply_free(reply);
        if (fiberd_client_job_logs_follow(c, id, 0, on_line, &s, 30000, NULL, &err) != 0)
                failed("following a job of 100 lines", &err);
        if (s.lines + s.missed != 100 || s.missed < 36 || strcmp(s.last, "line 100") != 0 ||
            !s.in_order)
                failed("100 lines: handed + missed is not 100, or the last is not line 100", NULL);
        printf("follow: %u lines handed over, %llu missed (fiberd keeps 64)\n", s.lines,
               (unsigned long long)s.missed);

        /* the callback stops it */
        s = (Seen){.in_order = true, .stop_after = 2};
        id = submit_logger(c, 5, 0);
        if (fiberd_client_job_logs_follow(c, id, 0, on_line, &s, 30000, NULL, &err) != 7 ||
            s.lines != 2)
                failed("a callback returning 7 did not stop the follow with 7", NULL);

        if (fiberd_client_job_logs(c, 999999, 10000, &reply, &err) != -ENOENT ||
            err.code != FIBERD_CLIENT_NOT_FOUND)
                failed("job.logs of a job that does not exist is not NOT_FOUND", &err);

        /* metrics */
        if (fiberd_client_metrics_text(c, NULL, 10000, &text, &err) < 0)
                failed("metrics", &err);
        if (!strstr(text, "fiberd_jobs_submitted_total{") || !strstr(text, "# EOF\n"))
                failed("the OpenMetrics text lacks fiberd_jobs_submitted_total or # EOF", NULL);
        free(text);
        if (fiberd_client_metrics_text(c, "prometheus", 10000, &text, &err) < 0)
                failed("metrics prometheus", &err);
        if (strstr(text, "# EOF") || !strstr(text, "# TYPE fiberd_jobs_submitted_total counter"))
                failed("the Prometheus text is not Prometheus's format", NULL);
        free(text);
        if (fiberd_client_metrics(c, "xml", 10000, &reply, &err) != -EINVAL ||
            err.code != FIBERD_CLIENT_INVALID_ARGUMENT)
                failed("metrics in a format fiberd does not know is not INVALID_ARGUMENT", &err);
        printf("metrics: OpenMetrics and Prometheus text; an unknown format refused\n");

        /* a job class */
        FiberdClientJobOptions opts = {.job_class = "default"};
        if (fiberd_client_job_run(c, "echo", NULL, 0, &opts, -1, 10000, &reply, &err) < 0)
                failed("job.run with a job class", &err);
        if (!str_is(fiberd_client_object_get(fiberd_client_reply_result(reply), "class"),
                    "default"))
                failed("the record of a job run in class default does not say so", NULL);
        fiberd_client_reply_free(reply);

        fiberd_client_free(c);
        printf("ok\n");
        return 0;
}
