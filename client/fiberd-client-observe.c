/* SPDX-License-Identifier: MIT */
/*
 * fiberd-client-observe.c — libfiberd-client's calls that watch rather than act
 * (fiberd/client.h, FIBERD_CLIENT_0.3): job.logs, following a job's log until it ends,
 * and metrics (the OpenMetrics or Prometheus text).
 *
 * Following is fiberctl-logs.c's loop in the library, so a C program gets `logs -f`
 * without writing it: job.logs hands over what is kept, then job.wait [id, poll_ms]
 * waits for the job to end or the poll to pass, and job.logs again hands over the lines
 * not seen yet. fiberd numbers no line but counts those it let go ("dropped"), so the
 * lines ever kept are dropped + the ones in the answer and the new ones are the tail past
 * what was handed over; lines logged and let go between two looks (more than 64) are
 * reported as missed on the next line handed over. Once job.wait says the job is final,
 * one last job.logs takes the lines it wrote before it ended.
 *
 * Everything goes through the public calls of fiberd-client.c, as in
 * fiberd-client-method.c.
 */
#include "client/fiberd/client.h"
#include "client/fiberd-client-internal.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How long one job.wait of a follow waits when the caller gives 0, ms. */
#define FOLLOW_POLL_DEFAULT_MS 250

int fiberd_client_send_job_logs(FiberdClient *c, uint64_t id, uint32_t *ret_msgid)
{
        uint32_t msgid;
        msgpack_packer *pk = fiberd_client_request(c, IPC_METHOD_JOB_LOGS, IPC_JOB_NPARAMS, &msgid);

        if (!pk || msgpack_pack_uint64(pk, id) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_job_logs(FiberdClient *c, uint64_t id, int timeout_ms, FiberdClientReply **ret,
                           FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_job_logs(c, id, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_LOGS, timeout_ms, ret, err);
}

int fiberd_client_send_metrics(FiberdClient *c, const char *format, uint32_t *ret_msgid)
{
        uint32_t msgid;
        msgpack_packer *pk = fiberd_client_request(c, IPC_METHOD_METRICS, format ? 1 : 0, &msgid);

        if (!pk || (format && ipc_pack_cstr(pk, format) != 0))
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_metrics(FiberdClient *c, const char *format, int timeout_ms,
                          FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_metrics(c, format, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_METRICS, timeout_ms, ret, err);
}

int fiberd_client_metrics_text(FiberdClient *c, const char *format, int timeout_ms, char **ret_text,
                               FiberdClientError *err)
{
        FiberdClientReply *reply;
        const msgpack_object *o;
        char *text;
        int r = fiberd_client_metrics(c, format, timeout_ms, &reply, err);

        if (r < 0)
                return r;
        o = fiberd_client_reply_result(reply);
        if (o->type != MSGPACK_OBJECT_STR) {
                fiberd_client_reply_free(reply);
                return fiberd_client__error_set(err, -EPROTO,
                                                "fiberd answered metrics with a value that is "
                                                "not a string");
        }
        text = strndup(o->via.str.ptr, o->via.str.size);
        fiberd_client_reply_free(reply);
        if (!text)
                return fiberd_client__error_set(err, -ENOMEM, "out of memory");
        *ret_text = text;
        return 0;
}

/* The unsigned integer under @key of @map; 0 when absent or of another type. */
static uint64_t uint_at(const msgpack_object *map, const char *key)
{
        const msgpack_object *o = fiberd_client_object_get(map, key);
        return o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

/* Whether the job record @rec is in a final state: done, failed, cancelled or dead. */
static bool record_is_final(const msgpack_object *rec)
{
        static const char *const finals[] = {IPC_STATE_DONE, IPC_STATE_FAILED, IPC_STATE_CANCELLED,
                                             IPC_STATE_DEAD};
        const msgpack_object *s = fiberd_client_object_get(rec, IPC_KEY_STATE);

        if (!s || s->type != MSGPACK_OBJECT_STR)
                return false;
        for (size_t i = 0; i < sizeof(finals) / sizeof(finals[0]); i++)
                if (s->via.str.size == strlen(finals[i]) &&
                    memcmp(s->via.str.ptr, finals[i], s->via.str.size) == 0)
                        return true;
        return false;
}

/* Where a follow stands: lines ever kept that were handed over, and those let go before
 * being seen that the next line handed over reports. */
typedef struct FollowState {
        uint64_t handed; /* dropped + lines, as of the last answer, that were handed over */
        uint64_t missed; /* let go unseen, not yet reported */
} FollowState;

/* Hands the lines of the job.logs answer @res past @fs->handed to @fn. Returns 0, or
 * what @fn returned when it was not 0, or -EPROTO for an answer without its lines. */
static int hand_over(const msgpack_object *res, FollowState *fs, FiberdClientLogFn fn,
                     void *userdata)
{
        const msgpack_object *lines = fiberd_client_object_get(res, IPC_KEY_LINES);
        uint64_t dropped = uint_at(res, IPC_KEY_DROPPED), from = 0;

        if (!lines || lines->type != MSGPACK_OBJECT_ARRAY)
                return -EPROTO;
        if (fs->handed > dropped)
                from = fs->handed - dropped;
        else
                fs->missed += dropped - fs->handed;
        for (uint64_t i = from; i < lines->via.array.size; i++) {
                const msgpack_object *line = &lines->via.array.ptr[i];
                const msgpack_object *text = fiberd_client_object_get(line, IPC_KEY_TEXT);
                FiberdClientLogLine l = {
                        .time_ms = uint_at(line, IPC_KEY_TIME_MS),
                        .level = (int)uint_at(line, IPC_KEY_LEVEL),
                        .text = text && text->type == MSGPACK_OBJECT_STR ? text->via.str.ptr : "",
                        .text_len =
                                text && text->type == MSGPACK_OBJECT_STR ? text->via.str.size : 0,
                        .missed = fs->missed,
                };
                int r;

                fs->missed = 0;
                fs->handed = dropped + i + 1;
                r = fn(&l, userdata);
                if (r != 0)
                        return r;
        }
        if (dropped + lines->via.array.size > fs->handed)
                fs->handed = dropped + lines->via.array.size;
        return 0;
}

/* Milliseconds left until @deadline_ns of CLOCK_MONOTONIC (UINT64_MAX: -1, no limit). */
static int ms_left(uint64_t deadline_ns)
{
        struct timespec ts;
        uint64_t now;

        if (deadline_ns == UINT64_MAX)
                return -1;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        return now >= deadline_ns ? 0 : (int)((deadline_ns - now + 999999) / 1000000);
}

int fiberd_client_job_logs_follow(FiberdClient *c, uint64_t id, int poll_ms, FiberdClientLogFn fn,
                                  void *userdata, int timeout_ms, FiberdClientReply **ret_record,
                                  FiberdClientError *err)
{
        FollowState fs = {0};
        FiberdClientReply *logs = NULL, *rec = NULL;
        uint64_t deadline_ns = UINT64_MAX;
        bool final = false;
        int r;

        if (!fn || poll_ms < 0)
                return fiberd_client__error_set(err, -EINVAL,
                                                "following a job's log needs a callback and a "
                                                "poll interval >= 0 ms");
        if (poll_ms == 0)
                poll_ms = FOLLOW_POLL_DEFAULT_MS;
        if (timeout_ms >= 0) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                deadline_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
                              (uint64_t)timeout_ms * 1000000u;
        }
        for (;;) {
                r = fiberd_client_job_logs(c, id, ms_left(deadline_ns), &logs, err);
                if (r < 0)
                        goto out;
                r = hand_over(fiberd_client_reply_result(logs), &fs, fn, userdata);
                logs = fiberd_client_reply_free(logs);
                if (r == -EPROTO) {
                        r = fiberd_client__error_set(err, r,
                                                     "fiberd answered job.logs without lines");
                        goto out;
                }
                if (r != 0 || final)
                        break;
                if (ms_left(deadline_ns) == 0) {
                        r = fiberd_client__error_set(err, -ETIMEDOUT,
                                                     "job %llu did not end in time",
                                                     (unsigned long long)id);
                        goto out;
                }
                rec = fiberd_client_reply_free(rec);
                r = fiberd_client_job_wait(c, id, poll_ms, ms_left(deadline_ns), &rec, err);
                if (r < 0)
                        goto out;
                final = record_is_final(fiberd_client_reply_result(rec));
        }
        if (r == 0 && ret_record) {
                *ret_record = rec;
                rec = NULL;
        }
out:
        fiberd_client_reply_free(rec);
        return r;
}
