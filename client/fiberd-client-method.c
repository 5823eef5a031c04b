/* SPDX-License-Identifier: MIT */
/*
 * fiberd-client-method.c — libfiberd-client's per-method requests (fiberd/client.h): one
 * fiberd_client_send_<method>() that packs a method's params in PROTOCOL.md's order and
 * queues them, and the blocking form that sends and waits for that msgid. The spellings
 * of methods and keys come from ipc/protocol.h, as the daemon's do.
 *
 * Everything here goes through the public calls of fiberd-client.c; nothing reaches into a
 * FiberdClient, so a method added to the protocol is one send and one blocking function.
 */
#include "client/fiberd/client.h"
#include "client/fiberd-client-internal.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"

#include <errno.h>
#include <string.h>

/* Queues @method with no params. */
static int send_noparams(FiberdClient *c, const char *method, uint32_t *ret_msgid)
{
        return fiberd_client_request(c, method, 0, ret_msgid) ? 0 : -ENOMEM;
}

int fiberd_client_send_ping(FiberdClient *c, uint32_t *ret_msgid)
{
        return send_noparams(c, IPC_METHOD_PING, ret_msgid);
}

int fiberd_client_send_plugins(FiberdClient *c, uint32_t *ret_msgid)
{
        return send_noparams(c, IPC_METHOD_PLUGINS_LIST, ret_msgid);
}

int fiberd_client_send_stats(FiberdClient *c, uint32_t *ret_msgid)
{
        return send_noparams(c, IPC_METHOD_STATS, ret_msgid);
}

/* Whether @args (@len bytes) is exactly one packed msgpack map. */
static bool args_are_one_map(const void *args, size_t len)
{
        msgpack_unpacked u;
        size_t off = 0;
        bool ok;

        msgpack_unpacked_init(&u);
        ok = msgpack_unpack_next(&u, args, len, &off) == MSGPACK_UNPACK_SUCCESS &&
             u.data.type == MSGPACK_OBJECT_MAP && off == len;
        msgpack_unpacked_destroy(&u);
        return ok;
}

/* A wait's timeout_ms param: nil for none (negative). */
static int pack_wait_timeout(msgpack_packer *pk, int64_t timeout_ms)
{
        return timeout_ms < 0 ? msgpack_pack_nil(pk)
                              : msgpack_pack_uint64(pk, (uint64_t)timeout_ms);
}

/* Whether @plugin, @args and @opts may be packed as [plugin, args, options]. */
static bool job_params_valid(const char *plugin, const void *args, size_t args_len,
                             const FiberdClientJobOptions *opts)
{
        if (!plugin || !*plugin || (args_len > 0 && !args))
                return false;
        if (args_len > 0 && !args_are_one_map(args, args_len))
                return false;
        return !opts || ((opts->n_after == 0 || opts->after) && opts->n_after <= UINT32_MAX);
}

/* job.submit's options map: the fields of @opts that are set (NULL: none). */
static int pack_job_options(msgpack_packer *pk, const FiberdClientJobOptions *opts)
{
        static const FiberdClientJobOptions defaults = {.has_priority = false};
        const FiberdClientJobOptions *o = opts ? opts : &defaults;
        uint32_t n = !!o->has_priority + !!o->timeout_ms + !!o->job_class + !!o->delay_ms +
                     !!o->run_at_ms + !!o->max_attempts + !!o->backoff_ms + !!o->backoff_max_ms +
                     !!o->n_after + !!o->key;
        int r = msgpack_pack_map(pk, n);

        if (r == 0 && o->has_priority)
                r = ipc_pack_kv_int(pk, IPC_OPT_PRIORITY, o->priority);
        if (r == 0 && o->timeout_ms)
                r = ipc_pack_kv_uint(pk, IPC_OPT_TIMEOUT_MS, o->timeout_ms);
        if (r == 0 && o->job_class)
                r = ipc_pack_kv_cstr(pk, IPC_OPT_CLASS, o->job_class);
        if (r == 0 && o->delay_ms)
                r = ipc_pack_kv_uint(pk, IPC_OPT_DELAY_MS, o->delay_ms);
        if (r == 0 && o->run_at_ms)
                r = ipc_pack_kv_uint(pk, IPC_OPT_RUN_AT, o->run_at_ms);
        if (r == 0 && o->max_attempts)
                r = ipc_pack_kv_uint(pk, IPC_OPT_MAX_ATTEMPTS, o->max_attempts);
        if (r == 0 && o->backoff_ms)
                r = ipc_pack_kv_uint(pk, IPC_OPT_BACKOFF_MS, o->backoff_ms);
        if (r == 0 && o->backoff_max_ms)
                r = ipc_pack_kv_uint(pk, IPC_OPT_BACKOFF_MAX_MS, o->backoff_max_ms);
        if (r == 0 && o->n_after) {
                r = ipc_pack_cstr(pk, IPC_OPT_AFTER);
                if (r == 0)
                        r = msgpack_pack_array(pk, (uint32_t)o->n_after);
                for (size_t i = 0; r == 0 && i < o->n_after; i++)
                        r = msgpack_pack_uint64(pk, o->after[i]);
        }
        if (r == 0 && o->key)
                r = ipc_pack_kv_cstr(pk, IPC_OPT_KEY, o->key);
        return r == 0 ? 0 : -ENOMEM;
}

/* plugin, args, options: three params of job.submit, job.run and schedule.add. */
static int pack_job(msgpack_packer *pk, const char *plugin, const void *args, size_t args_len,
                    const FiberdClientJobOptions *opts)
{
        int r = ipc_pack_cstr(pk, plugin);

        if (r == 0)
                r = args_len > 0 ? pk->callback(pk->data, args, args_len) : msgpack_pack_map(pk, 0);
        if (r == 0)
                r = pack_job_options(pk, opts);
        return r == 0 ? 0 : -ENOMEM;
}

/* [plugin, args, options] of job.submit and job.run, then @extra more params. */
static int send_job(FiberdClient *c, const char *method, const char *plugin, const void *args,
                    size_t args_len, const FiberdClientJobOptions *opts, uint32_t extra,
                    msgpack_packer **ret_pk, uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;

        if (!job_params_valid(plugin, args, args_len, opts))
                return -EINVAL;
        pk = fiberd_client_request(c, method, IPC_SUBMIT_NPARAMS + extra, &msgid);
        if (!pk || pack_job(pk, plugin, args, args_len, opts) < 0)
                return -ENOMEM;
        *ret_pk = pk;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_submit(FiberdClient *c, const char *plugin, const void *args,
                              size_t args_len, const FiberdClientJobOptions *opts,
                              uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        return send_job(c, IPC_METHOD_JOB_SUBMIT, plugin, args, args_len, opts, 0, &pk, ret_msgid);
}

int fiberd_client_send_run(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                           const FiberdClientJobOptions *opts, int64_t wait_timeout_ms,
                           uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;
        int r = send_job(c, IPC_METHOD_JOB_RUN, plugin, args, args_len, opts, 1, &pk, &msgid);

        if (r < 0)
                return r;
        if (pack_wait_timeout(pk, wait_timeout_ms) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

/* job.run's and job.wait's `fields`: @n names, or nil for the whole record (@fields
 * NULL). */
static int pack_fields(msgpack_packer *pk, const char *const *fields, size_t n)
{
        if (!fields)
                return msgpack_pack_nil(pk);
        if (msgpack_pack_array(pk, (uint32_t)n) != 0)
                return -1;
        for (size_t i = 0; i < n; i++)
                if (ipc_pack_cstr(pk, fields[i]) != 0)
                        return -1;
        return 0;
}

static bool fields_valid(const char *const *fields, size_t n)
{
        if (!fields)
                return n == 0;
        if (n > UINT32_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!fields[i])
                        return false;
        return true;
}

int fiberd_client_send_run_fields(FiberdClient *c, const char *plugin, const void *args,
                                  size_t args_len, const FiberdClientJobOptions *opts,
                                  int64_t wait_timeout_ms, const char *const *fields,
                                  size_t n_fields, uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;
        int r;

        if (!fields_valid(fields, n_fields))
                return -EINVAL;
        r = send_job(c, IPC_METHOD_JOB_RUN, plugin, args, args_len, opts, 2, &pk, &msgid);
        if (r < 0)
                return r;
        if (pack_wait_timeout(pk, wait_timeout_ms) != 0 || pack_fields(pk, fields, n_fields) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

/* [id] of job.status, job.result and job.cancel. */
static int send_id(FiberdClient *c, const char *method, uint64_t id, uint32_t *ret_msgid)
{
        uint32_t msgid;
        msgpack_packer *pk = fiberd_client_request(c, method, IPC_JOB_NPARAMS, &msgid);

        if (!pk || msgpack_pack_uint64(pk, id) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_status(FiberdClient *c, uint64_t id, uint32_t *ret_msgid)
{
        return send_id(c, IPC_METHOD_JOB_STATUS, id, ret_msgid);
}

int fiberd_client_send_result(FiberdClient *c, uint64_t id, uint32_t *ret_msgid)
{
        return send_id(c, IPC_METHOD_JOB_RESULT, id, ret_msgid);
}

int fiberd_client_send_cancel(FiberdClient *c, uint64_t id, uint32_t *ret_msgid)
{
        return send_id(c, IPC_METHOD_JOB_CANCEL, id, ret_msgid);
}

int fiberd_client_send_wait(FiberdClient *c, uint64_t id, int64_t wait_timeout_ms,
                            uint32_t *ret_msgid)
{
        uint32_t msgid;
        msgpack_packer *pk =
                fiberd_client_request(c, IPC_METHOD_JOB_WAIT, IPC_WAIT_NPARAMS, &msgid);

        if (!pk || msgpack_pack_uint64(pk, id) != 0 || pack_wait_timeout(pk, wait_timeout_ms) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_wait_fields(FiberdClient *c, uint64_t id, int64_t wait_timeout_ms,
                                   const char *const *fields, size_t n_fields, uint32_t *ret_msgid)
{
        uint32_t msgid;
        msgpack_packer *pk;

        if (!fields_valid(fields, n_fields))
                return -EINVAL;
        pk = fiberd_client_request(c, IPC_METHOD_JOB_WAIT, IPC_WAIT_NPARAMS_FIELDS, &msgid);
        if (!pk || msgpack_pack_uint64(pk, id) != 0 ||
            pack_wait_timeout(pk, wait_timeout_ms) != 0 || pack_fields(pk, fields, n_fields) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_list(FiberdClient *c, const FiberdClientListFilter *filter, uint64_t cursor,
                            uint32_t *ret_msgid)
{
        static const FiberdClientListFilter all = {.state = NULL};
        const FiberdClientListFilter *f = filter ? filter : &all;
        uint32_t msgid, n = 1 + !!f->state + !!f->plugin + !!f->limit;
        msgpack_packer *pk =
                fiberd_client_request(c, IPC_METHOD_JOB_LIST, IPC_LIST_NPARAMS, &msgid);
        int r = pk ? msgpack_pack_map(pk, n) : -1;

        if (r == 0 && f->state)
                r = ipc_pack_kv_cstr(pk, IPC_FILTER_STATE, f->state);
        if (r == 0 && f->plugin)
                r = ipc_pack_kv_cstr(pk, IPC_FILTER_PLUGIN, f->plugin);
        if (r == 0 && f->limit)
                r = ipc_pack_kv_uint(pk, IPC_FILTER_LIMIT, f->limit);
        if (r == 0)
                r = cursor ? ipc_pack_kv_uint(pk, IPC_FILTER_CURSOR, cursor)
                           : ipc_pack_kv_nil(pk, IPC_FILTER_CURSOR);
        if (r != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client__call_sent(FiberdClient *c, int r, uint32_t msgid, const char *method,
                             int timeout_ms, FiberdClientReply **ret, FiberdClientError *err)
{
        if (r < 0)
                return fiberd_client__error_set(err, r, "cannot queue the %s request: %s", method,
                                                r == -EINVAL
                                                        ? "a parameter is not valid (the plugin "
                                                          "name, args that are not one packed "
                                                          "msgpack map, or another the header "
                                                          "fiberd/client.h rules out)"
                                                        : strerror(-r));
        return fiberd_client_call(c, msgid, timeout_ms, ret, err);
}

int fiberd_client_ping(FiberdClient *c, int timeout_ms, FiberdClientReply **ret,
                       FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_ping(c, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_PING, timeout_ms, ret, err);
}

int fiberd_client_plugins(FiberdClient *c, int timeout_ms, FiberdClientReply **ret,
                          FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_plugins(c, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_PLUGINS_LIST, timeout_ms, ret, err);
}

int fiberd_client_stats(FiberdClient *c, int timeout_ms, FiberdClientReply **ret,
                        FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_stats(c, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_STATS, timeout_ms, ret, err);
}

int fiberd_client_job_run(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                          const FiberdClientJobOptions *opts, int64_t wait_timeout_ms,
                          int timeout_ms, FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_run(c, plugin, args, args_len, opts, wait_timeout_ms, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_RUN, timeout_ms, ret, err);
}

int fiberd_client_job_status(FiberdClient *c, uint64_t id, int timeout_ms, FiberdClientReply **ret,
                             FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_status(c, id, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_STATUS, timeout_ms, ret, err);
}

int fiberd_client_job_wait(FiberdClient *c, uint64_t id, int64_t wait_timeout_ms, int timeout_ms,
                           FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_wait(c, id, wait_timeout_ms, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_WAIT, timeout_ms, ret, err);
}

int fiberd_client_job_result(FiberdClient *c, uint64_t id, int timeout_ms, FiberdClientReply **ret,
                             FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_result(c, id, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_RESULT, timeout_ms, ret, err);
}

int fiberd_client_job_cancel(FiberdClient *c, uint64_t id, int timeout_ms, FiberdClientReply **ret,
                             FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_cancel(c, id, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_CANCEL, timeout_ms, ret, err);
}

/* Reads a positive unsigned integer (a job id, a cursor) out of @o. */
static bool read_id(const msgpack_object *o, uint64_t *ret)
{
        if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 == 0)
                return false;
        *ret = o->via.u64;
        return true;
}

int fiberd_client_submit(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                         const FiberdClientJobOptions *opts, int timeout_ms, uint64_t *ret_id,
                         FiberdClientError *err)
{
        FiberdClientReply *reply;
        uint32_t msgid = 0;
        uint64_t id;
        int r = fiberd_client_send_submit(c, plugin, args, args_len, opts, &msgid);

        r = fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_SUBMIT, timeout_ms, &reply, err);
        if (r < 0)
                return r;
        if (!read_id(fiberd_client_object_get(fiberd_client_reply_result(reply), IPC_KEY_ID),
                     &id)) {
                fiberd_client_reply_free(reply);
                return fiberd_client__error_set(err, -EPROTO,
                                                "fiberd answered job.submit without a job id; are "
                                                "fiberd and libfiberd-client the same version?");
        }
        fiberd_client_reply_free(reply);
        *ret_id = id;
        return 0;
}

int fiberd_client_list_page(FiberdClient *c, const FiberdClientListFilter *filter, uint64_t cursor,
                            int timeout_ms, FiberdClientReply **ret, uint64_t *ret_next_cursor,
                            FiberdClientError *err)
{
        FiberdClientReply *reply;
        const msgpack_object *result, *next;
        uint32_t msgid = 0;
        uint64_t next_cursor = 0;
        int r = fiberd_client_send_list(c, filter, cursor, &msgid);

        r = fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_LIST, timeout_ms, &reply, err);
        if (r < 0)
                return r;
        result = fiberd_client_reply_result(reply);
        next = fiberd_client_object_get(result, IPC_KEY_NEXT_CURSOR);
        if (!fiberd_client_object_get(result, IPC_KEY_JOBS) ||
            (next && next->type != MSGPACK_OBJECT_NIL && !read_id(next, &next_cursor))) {
                fiberd_client_reply_free(reply);
                return fiberd_client__error_set(
                        err, -EPROTO,
                        "fiberd answered job.list without pages ({jobs, "
                        "next_cursor}); is it older than libfiberd-client?");
        }
        *ret = reply;
        *ret_next_cursor = next_cursor;
        return 0;
}

/* ---- job scheduling ---------------------------------------------------------------- */

/* job.retry, job.discard: [[ids]] or [{"all": true}]. */
static int send_ids_or_all(FiberdClient *c, const char *method, const uint64_t *ids, size_t n,
                           bool all, uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;
        int r;

        if (all == (n > 0) || (n > 0 && !ids) || n > UINT32_MAX)
                return -EINVAL;
        pk = fiberd_client_request(c, method, 1, &msgid);
        if (!pk)
                return -ENOMEM;
        if (all) {
                r = msgpack_pack_map(pk, 1);
                if (r == 0)
                        r = ipc_pack_kv_bool(pk, IPC_KEY_ALL, true);
        } else {
                r = msgpack_pack_array(pk, (uint32_t)n);
                for (size_t i = 0; r == 0 && i < n; i++)
                        r = msgpack_pack_uint64(pk, ids[i]);
        }
        if (r != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_retry(FiberdClient *c, const uint64_t *ids, size_t n_ids, bool all,
                             uint32_t *ret_msgid)
{
        return send_ids_or_all(c, IPC_METHOD_JOB_RETRY, ids, n_ids, all, ret_msgid);
}

int fiberd_client_send_discard(FiberdClient *c, const uint64_t *ids, size_t n_ids, bool all,
                               uint32_t *ret_msgid)
{
        return send_ids_or_all(c, IPC_METHOD_JOB_DISCARD, ids, n_ids, all, ret_msgid);
}

int fiberd_client_job_retry(FiberdClient *c, const uint64_t *ids, size_t n_ids, bool all,
                            int timeout_ms, FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_retry(c, ids, n_ids, all, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_RETRY, timeout_ms, ret, err);
}

int fiberd_client_job_discard(FiberdClient *c, const uint64_t *ids, size_t n_ids, bool all,
                              int timeout_ms, FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_discard(c, ids, n_ids, all, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_JOB_DISCARD, timeout_ms, ret, err);
}

/* pause, resume: [kind, name]. */
static int send_kind_name(FiberdClient *c, const char *method, const char *kind, const char *name,
                          uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;

        if (!kind || !name)
                return -EINVAL;
        pk = fiberd_client_request(c, method, 2, &msgid);
        if (!pk || ipc_pack_cstr(pk, kind) != 0 || ipc_pack_cstr(pk, name) != 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_pause(FiberdClient *c, const char *kind, const char *name,
                             uint32_t *ret_msgid)
{
        return send_kind_name(c, IPC_METHOD_PAUSE, kind, name, ret_msgid);
}

int fiberd_client_send_resume(FiberdClient *c, const char *kind, const char *name,
                              uint32_t *ret_msgid)
{
        return send_kind_name(c, IPC_METHOD_RESUME, kind, name, ret_msgid);
}

int fiberd_client_pause(FiberdClient *c, const char *kind, const char *name, int timeout_ms,
                        FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_pause(c, kind, name, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_PAUSE, timeout_ms, ret, err);
}

int fiberd_client_resume(FiberdClient *c, const char *kind, const char *name, int timeout_ms,
                         FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_resume(c, kind, name, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_RESUME, timeout_ms, ret, err);
}

/* schedule.add's spec map: {cron, tz} or {every_ms}, and missed when given. */
static int pack_schedule_spec(msgpack_packer *pk, const FiberdClientScheduleSpec *spec)
{
        uint32_t n = (spec->cron ? 1 + !!spec->tz : 1) + !!spec->missed;
        int r = msgpack_pack_map(pk, n);

        if (r == 0 && spec->cron) {
                r = ipc_pack_kv_cstr(pk, IPC_KEY_CRON, spec->cron);
                if (r == 0 && spec->tz)
                        r = ipc_pack_kv_cstr(pk, IPC_KEY_TZ, spec->tz);
        } else if (r == 0) {
                r = ipc_pack_kv_uint(pk, IPC_KEY_EVERY_MS, spec->every_ms);
        }
        if (r == 0 && spec->missed)
                r = ipc_pack_kv_cstr(pk, IPC_KEY_MISSED, spec->missed);
        return r == 0 ? 0 : -ENOMEM;
}

int fiberd_client_send_schedule_add(FiberdClient *c, const char *name,
                                    const FiberdClientScheduleSpec *spec, const char *plugin,
                                    const void *args, size_t args_len,
                                    const FiberdClientJobOptions *opts, uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;

        if (!name || !spec || (!spec->cron && !spec->every_ms) ||
            !job_params_valid(plugin, args, args_len, opts))
                return -EINVAL;
        pk = fiberd_client_request(c, IPC_METHOD_SCHEDULE_ADD, 5, &msgid);
        if (!pk || ipc_pack_cstr(pk, name) != 0 || pack_schedule_spec(pk, spec) < 0 ||
            pack_job(pk, plugin, args, args_len, opts) < 0)
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_schedule_add(FiberdClient *c, const char *name,
                               const FiberdClientScheduleSpec *spec, const char *plugin,
                               const void *args, size_t args_len,
                               const FiberdClientJobOptions *opts, int timeout_ms,
                               FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_schedule_add(c, name, spec, plugin, args, args_len, opts,
                                                &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_SCHEDULE_ADD, timeout_ms, ret, err);
}

int fiberd_client_send_schedule_list(FiberdClient *c, uint32_t *ret_msgid)
{
        return send_noparams(c, IPC_METHOD_SCHEDULE_LIST, ret_msgid);
}

int fiberd_client_schedule_list(FiberdClient *c, int timeout_ms, FiberdClientReply **ret,
                                FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_schedule_list(c, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_SCHEDULE_LIST, timeout_ms, ret,
                                        err);
}

/* schedule.remove, .pause, .resume: [name] or, for another user's, [name, owner]. */
static int send_schedule_named(FiberdClient *c, const char *method, const char *name, int64_t owner,
                               uint32_t *ret_msgid)
{
        msgpack_packer *pk;
        uint32_t msgid;

        if (!name || owner > (int64_t)UINT32_MAX)
                return -EINVAL;
        pk = fiberd_client_request(c, method, owner >= 0 ? 2 : 1, &msgid);
        if (!pk || ipc_pack_cstr(pk, name) != 0 ||
            (owner >= 0 && msgpack_pack_uint64(pk, (uint64_t)owner) != 0))
                return -ENOMEM;
        *ret_msgid = msgid;
        return 0;
}

int fiberd_client_send_schedule_remove(FiberdClient *c, const char *name, int64_t owner,
                                       uint32_t *ret_msgid)
{
        return send_schedule_named(c, IPC_METHOD_SCHEDULE_REMOVE, name, owner, ret_msgid);
}

int fiberd_client_send_schedule_pause(FiberdClient *c, const char *name, int64_t owner,
                                      uint32_t *ret_msgid)
{
        return send_schedule_named(c, IPC_METHOD_SCHEDULE_PAUSE, name, owner, ret_msgid);
}

int fiberd_client_send_schedule_resume(FiberdClient *c, const char *name, int64_t owner,
                                       uint32_t *ret_msgid)
{
        return send_schedule_named(c, IPC_METHOD_SCHEDULE_RESUME, name, owner, ret_msgid);
}

int fiberd_client_schedule_remove(FiberdClient *c, const char *name, int64_t owner, int timeout_ms,
                                  FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_schedule_remove(c, name, owner, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_SCHEDULE_REMOVE, timeout_ms, ret,
                                        err);
}

int fiberd_client_schedule_pause(FiberdClient *c, const char *name, int64_t owner, int timeout_ms,
                                 FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_schedule_pause(c, name, owner, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_SCHEDULE_PAUSE, timeout_ms, ret,
                                        err);
}

int fiberd_client_schedule_resume(FiberdClient *c, const char *name, int64_t owner, int timeout_ms,
                                  FiberdClientReply **ret, FiberdClientError *err)
{
        uint32_t msgid = 0;
        int r = fiberd_client_send_schedule_resume(c, name, owner, &msgid);
        return fiberd_client__call_sent(c, r, msgid, IPC_METHOD_SCHEDULE_RESUME, timeout_ms, ret,
                                        err);
}
