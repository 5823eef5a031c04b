/* SPDX-License-Identifier: MIT */
/*
 * convert.c — JSON <-> msgpack, KEY=VALUE typing, durations (see convert.h).
 *
 * The JSON side is jansson (json_t), the msgpack side msgpack-c's packer and objects.
 * Both are trees, so both directions are a plain recursion over the value; the wire
 * decoder caps nesting (IPC_MAX_DEPTH), and jansson caps its parser's depth, so the
 * recursion is bounded.
 */
#include "client/convert.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/encoder.h"

/* {"ext": type, "hex": data}, as convert_msgpack_to_json() renders ext values. */
static int pack_ext(msgpack_packer *pk, const json_t *type, const json_t *hex)
{
        const char *s = json_string_value(hex);
        size_t len = json_string_length(hex);
        json_int_t t = json_integer_value(type);
        char buf[256];

        if (t < -128 || t > 127 || len % 2 || len / 2 > sizeof(buf))
                return -EINVAL;
        for (size_t i = 0; i < len / 2; i++) {
                unsigned v;
                if (sscanf(s + 2 * i, "%2x", &v) != 1)
                        return -EINVAL;
                buf[i] = (char)v;
        }
        if (msgpack_pack_ext(pk, len / 2, (int8_t)t) < 0 ||
            msgpack_pack_ext_body(pk, buf, len / 2) < 0)
                return -ENOMEM;
        return 0;
}

int convert_json_to_msgpack(msgpack_packer *pk, const json_t *j)
{
        int r = 0;

        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                const char *key;
                json_t *val;
                if (json_object_size(j) == 2 && json_is_integer(json_object_get(j, "ext")) &&
                    json_is_string(json_object_get(j, "hex")))
                        return pack_ext(pk, json_object_get(j, "ext"), json_object_get(j, "hex"));
                if (msgpack_pack_map(pk, json_object_size(j)) < 0)
                        return -ENOMEM;
                json_object_foreach((json_t *)j, key, val)
                {
                        r = ipc_pack_cstr(pk, key);
                        if (r == 0)
                                r = convert_json_to_msgpack(pk, val);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *val;
                if (msgpack_pack_array(pk, json_array_size(j)) < 0)
                        return -ENOMEM;
                json_array_foreach(j, i, val)
                {
                        r = convert_json_to_msgpack(pk, val);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case JSON_STRING:
                return ipc_pack_strn(pk, json_string_value(j), json_string_length(j));
        case JSON_INTEGER: {
                json_int_t v = json_integer_value(j);
                r = v >= 0 ? msgpack_pack_uint64(pk, (uint64_t)v) : msgpack_pack_int64(pk, v);
                break;
        }
        case JSON_REAL:
                r = msgpack_pack_double(pk, json_real_value(j));
                break;
        case JSON_TRUE:
                r = msgpack_pack_true(pk);
                break;
        case JSON_FALSE:
                r = msgpack_pack_false(pk);
                break;
        case JSON_NULL:
                r = msgpack_pack_nil(pk);
                break;
        default:
                return -EINVAL;
        }
        return r < 0 ? -ENOMEM : 0;
}

static json_t *hex_string(const char *p, size_t len)
{
        static const char digits[] = "0123456789abcdef";
        char *s = malloc(2 * len + 1);
        if (!s)
                return NULL;
        for (size_t i = 0; i < len; i++) {
                s[2 * i] = digits[(unsigned char)p[i] >> 4];
                s[2 * i + 1] = digits[(unsigned char)p[i] & 15];
        }
        json_t *j = json_stringn(s, 2 * len);
        free(s);
        return j;
}

json_t *convert_msgpack_to_json(const msgpack_object *o)
{
        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return json_null();
        case MSGPACK_OBJECT_BOOLEAN:
                return json_boolean(o->via.boolean);
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                if (o->via.u64 > (uint64_t)INT64_MAX)
                        return json_real((double)o->via.u64);
                return json_integer((json_int_t)o->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return json_integer((json_int_t)o->via.i64);
        case MSGPACK_OBJECT_FLOAT32:
        case MSGPACK_OBJECT_FLOAT64:
                if (!isfinite(o->via.f64))
                        return json_null(); /* JSON has no NaN or infinity */
                return json_real(o->via.f64);
        case MSGPACK_OBJECT_STR:
                return json_stringn_nocheck(o->via.str.ptr, o->via.str.size);
        case MSGPACK_OBJECT_BIN:
                return hex_string(o->via.bin.ptr, o->via.bin.size);
        case MSGPACK_OBJECT_EXT: {
                json_t *hex = hex_string(o->via.ext.ptr, o->via.ext.size);
                if (!hex)
                        return NULL;
                return json_pack("{s:i, s:o}", "ext", (int)o->via.ext.type, "hex", hex);
        }
        case MSGPACK_OBJECT_ARRAY: {
                json_t *a = json_array();
                for (uint32_t i = 0; a && i < o->via.array.size; i++) {
                        json_t *v = convert_msgpack_to_json(&o->via.array.ptr[i]);
                        if (!v || json_array_append_new(a, v) < 0) {
                                json_decref(a);
                                return NULL;
                        }
                }
                return a;
        }
        case MSGPACK_OBJECT_MAP: {
                json_t *m = json_object();
                for (uint32_t i = 0; m && i < o->via.map.size; i++) {
                        const msgpack_object_kv *kv = &o->via.map.ptr[i];
                        json_t *v = convert_msgpack_to_json(&kv->val);
                        char *key;
                        if (kv->key.type == MSGPACK_OBJECT_STR) {
                                key = strndup(kv->key.via.str.ptr, kv->key.via.str.size);
                        } else {
                                json_t *k = convert_msgpack_to_json(&kv->key);
                                key = k ? json_dumps(k, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
                                json_decref(k);
                        }
                        if (!v || !key || json_object_set_new_nocheck(m, key, v) < 0) {
                                if (!key)
                                        json_decref(v);
                                free(key);
                                json_decref(m);
                                return NULL;
                        }
                        free(key);
                }
                return m;
        }
        }
        return json_null();
}

json_t *convert_kv_value(const char *value)
{
        size_t len = strlen(value);
        char *end;

        if (len >= 2 && (value[0] == '"' || value[0] == '\'') && value[len - 1] == value[0])
                return json_stringn(value + 1, len - 2);
        if (strcmp(value, "true") == 0)
                return json_true();
        if (strcmp(value, "false") == 0)
                return json_false();
        if (strcmp(value, "null") == 0)
                return json_null();
        if (len > 0 && strspn(value, "+-0123456789") == len) {
                errno = 0;
                long long v = strtoll(value, &end, 10);
                if (errno == 0 && *end == '\0')
                        return json_integer(v);
        }
        if (len > 0 && strspn(value, "+-0123456789.eE") == len && strpbrk(value, "0123456789")) {
                errno = 0;
                double d = strtod(value, &end);
                if (errno == 0 && *end == '\0' && isfinite(d))
                        return json_real(d);
        }
        return json_string(value);
}

int convert_duration_ms(const char *s, uint64_t *ret)
{
        char *end;
        double scale;

        if (!s || !*s || strchr("0123456789.", s[0]) == NULL)
                return -EINVAL;
        errno = 0;
        double v = strtod(s, &end);
        if (errno != 0 || end == s || !isfinite(v) || v < 0)
                return -EINVAL;
        if (strcmp(end, "ms") == 0)
                scale = 1;
        else if (strcmp(end, "s") == 0 || *end == '\0')
                scale = MSEC_PER_SEC;
        else if (strcmp(end, "m") == 0 || strcmp(end, "min") == 0)
                scale = 60 * MSEC_PER_SEC;
        else if (strcmp(end, "h") == 0)
                scale = 3600 * MSEC_PER_SEC;
        else
                return -EINVAL;
        double ms = v * scale;
        if (ms > (double)UINT32_MAX)
                return -ERANGE;
        *ret = (uint64_t)ms;
        return 0;
}
