/* SPDX-License-Identifier: MIT */
/*
 * value.c — typed reads from decoded msgpack objects (see value.h).
 *
 * Each reader checks presence, then type, then range, and says which one failed in the
 * IpcStatus message using the caller's name for the value, so a client sees
 * "timeout_ms: expected an unsigned integer, got a string" rather than "bad request".
 */
#include "ipc/value.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const msgpack_object *ipc_map_find(const msgpack_object *map, const char *key)
{
        if (!map || map->type != MSGPACK_OBJECT_MAP || !key)
                return NULL;
        size_t klen = strlen(key);
        for (uint32_t i = 0; i < map->via.map.size; i++) {
                const msgpack_object_kv *kv = &map->via.map.ptr[i];
                if (kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == klen &&
                    memcmp(kv->key.via.str.ptr, key, klen) == 0)
                        return &kv->val;
        }
        return NULL;
}

const msgpack_object *ipc_array_at(const msgpack_object *array, size_t i)
{
        if (!array || array->type != MSGPACK_OBJECT_ARRAY || i >= array->via.array.size)
                return NULL;
        return &array->via.array.ptr[i];
}

bool ipc_object_is_nil(const msgpack_object *o)
{
        return !o || o->type == MSGPACK_OBJECT_NIL;
}

const char *ipc_object_type_name(const msgpack_object *o)
{
        if (!o)
                return "nothing";
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return "nil";
        case MSGPACK_OBJECT_BOOLEAN:
                return "a boolean";
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                return "an unsigned integer";
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return "a negative integer";
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                return "a float";
        case MSGPACK_OBJECT_STR:
                return "a string";
        case MSGPACK_OBJECT_BIN:
                return "binary data";
        case MSGPACK_OBJECT_ARRAY:
                return "an array";
        case MSGPACK_OBJECT_MAP:
                return "a map";
        case MSGPACK_OBJECT_EXT:
                return "an extension value";
        }
        return "an unknown type";
}

bool ipc_object_streq(const msgpack_object *o, const char *s)
{
        if (!o || o->type != MSGPACK_OBJECT_STR || !s)
                return false;
        size_t len = strlen(s);
        return o->via.str.size == len && memcmp(o->via.str.ptr, s, len) == 0;
}

static int missing(const char *what, IpcStatus *st)
{
        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ENOENT, "missing %s", what);
}

static int wrong_type(const msgpack_object *o, const char *what, const char *expected,
                      IpcStatus *st)
{
        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL, "%s: expected %s, got %s", what,
                              expected, ipc_object_type_name(o));
}

int ipc_read_strv(const msgpack_object *o, const char *what, const char **ret_ptr, size_t *ret_len,
                  IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type != MSGPACK_OBJECT_STR)
                return wrong_type(o, what, "a string", st);
        *ret_ptr = o->via.str.ptr;
        *ret_len = o->via.str.size;
        return 0;
}

int ipc_read_str(const msgpack_object *o, const char *what, char *buf, size_t size, IpcStatus *st)
{
        const char *p;
        size_t len;
        int r = ipc_read_strv(o, what, &p, &len, st);
        if (r < 0)
                return r;
        if (memchr(p, '\0', len))
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "%s: the string contains a NUL byte", what);
        if (len >= size)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "%s: %zu bytes is longer than the limit of %zu", what, len,
                                      size ? size - 1 : 0);
        memcpy(buf, p, len);
        buf[len] = '\0';
        return 0;
}

int ipc_read_int(const msgpack_object *o, const char *what, int64_t *ret, IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
                *ret = o->via.i64;
                return 0;
        }
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
                return wrong_type(o, what, "an integer", st);
        if (o->via.u64 > (uint64_t)INT64_MAX)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "%s: %" PRIu64 " is larger than %" PRId64, what, o->via.u64,
                                      INT64_MAX);
        *ret = (int64_t)o->via.u64;
        return 0;
}

int ipc_read_int_range(const msgpack_object *o, const char *what, int64_t min, int64_t max,
                       int64_t *ret, IpcStatus *st)
{
        int64_t v;
        int r = ipc_read_int(o, what, &v, st);
        if (r < 0)
                return r;
        if (v < min || v > max)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "%s: %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]", what,
                                      v, min, max);
        *ret = v;
        return 0;
}

int ipc_read_uint(const msgpack_object *o, const char *what, uint64_t *ret, IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
                *ret = o->via.u64;
                return 0;
        }
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
                if (o->via.i64 >= 0) {
                        *ret = (uint64_t)o->via.i64;
                        return 0;
                }
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -ERANGE,
                                      "%s: expected a non-negative integer, got %" PRId64, what,
                                      o->via.i64);
        }
        return wrong_type(o, what, "an unsigned integer", st);
}

int ipc_read_bool(const msgpack_object *o, const char *what, bool *ret, IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type != MSGPACK_OBJECT_BOOLEAN)
                return wrong_type(o, what, "a boolean", st);
        *ret = o->via.boolean;
        return 0;
}

int ipc_read_double(const msgpack_object *o, const char *what, double *ret, IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        switch (o->type) {
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                *ret = o->via.f64;
                return 0;
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                *ret = (double)o->via.u64;
                return 0;
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                *ret = (double)o->via.i64;
                return 0;
        default:
                return wrong_type(o, what, "a number", st);
        }
}

int ipc_read_map(const msgpack_object *o, const char *what, const msgpack_object **ret,
                 IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type != MSGPACK_OBJECT_MAP)
                return wrong_type(o, what, "a map", st);
        *ret = o;
        return 0;
}

int ipc_read_array(const msgpack_object *o, const char *what, const msgpack_object **ret,
                   IpcStatus *st)
{
        if (!o)
                return missing(what, st);
        if (o->type != MSGPACK_OBJECT_ARRAY)
                return wrong_type(o, what, "an array", st);
        *ret = o;
        return 0;
}

int ipc_read_error(const msgpack_object *err, IpcStatus *ret)
{
        const char *code, *msg = "";
        size_t code_len, msg_len = 0;

        ipc_status_clear(ret);
        if (ipc_object_is_nil(err))
                return 0;
        if (err->type != MSGPACK_OBJECT_MAP ||
            ipc_read_strv(ipc_map_find(err, IPC_KEY_CODE), IPC_KEY_CODE, &code, &code_len, NULL) <
                    0) {
                ipc_status_set(ret, IPC_MALFORMED_MESSAGE, -EPROTO,
                               "the server sent an error that is not a {code, message} map "
                               "(%s)",
                               ipc_object_type_name(err));
                return -EPROTO;
        }
        (void)ipc_read_strv(ipc_map_find(err, IPC_KEY_MESSAGE), IPC_KEY_MESSAGE, &msg, &msg_len,
                            NULL);
        ret->code = ipc_status_canonical_code(code, code_len);
        ret->error = ipc_status_errno_from_code(code, code_len);
        if (ret->error == -EPROTO) { /* unknown code: keep it for the person reading */
                ret->error = -EIO;
                snprintf(ret->message, sizeof(ret->message), "%.*s: %.*s", (int)code_len, code,
                         (int)msg_len, msg);
        } else {
                snprintf(ret->message, sizeof(ret->message), "%.*s", (int)msg_len, msg);
        }
        return 1;
}

bool ipc_object_fd_index(const msgpack_object *o, uint32_t *ret)
{
        const unsigned char *p;

        if (!o || o->type != MSGPACK_OBJECT_EXT || o->via.ext.type != IPC_EXT_FD ||
            o->via.ext.size != 4)
                return false;
        p = (const unsigned char *)o->via.ext.ptr;
        *ret = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        return true;
}

uint32_t ipc_object_fds_needed(const msgpack_object *o)
{
        uint32_t need = 0, idx, n;

        if (ipc_object_fd_index(o, &idx))
                return idx == UINT32_MAX ? UINT32_MAX : idx + 1;
        if (o->type == MSGPACK_OBJECT_ARRAY) {
                for (uint32_t i = 0; i < o->via.array.size; i++)
                        if ((n = ipc_object_fds_needed(&o->via.array.ptr[i])) > need)
                                need = n;
        } else if (o->type == MSGPACK_OBJECT_MAP) {
                for (uint32_t i = 0; i < o->via.map.size; i++)
                        if ((n = ipc_object_fds_needed(&o->via.map.ptr[i].val)) > need)
                                need = n;
        }
        return need;
}
