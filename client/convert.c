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
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
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

/* The length of the UTF-8 sequence at @p (at most @n bytes), 0 when it is not one:
 * jansson's rules (utf.c): no overlong forms, no surrogates, nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
        unsigned c = p[0];
        size_t len;
        uint32_t cp;

        if (c < 0x80)
                return 1;
        if (c < 0xC2 || c > 0xF4)
                return 0; /* a continuation byte, an overlong lead, or beyond U+10FFFF */
        len = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (n < len)
                return 0;
        cp = c & (0x7Fu >> len);
        for (size_t i = 1; i < len; i++) {
                if ((p[i] & 0xC0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
                return 0;
        return len;
}

/* Whether the @n bytes at @s are UTF-8 (utf8_seq()'s rules). */
static bool utf8_valid(const char *s, size_t n)
{
        if (!n)
                return true; /* @s may be NULL then */
        const unsigned char *p = (const unsigned char *)s, *end = p + n;

        while (p < end) {
                size_t k = utf8_seq(p, (size_t)(end - p));
                if (!k)
                        return false;
                p += k;
        }
        return true;
}

/* A NUL-terminated copy of the @n bytes at @s (NULL when @n is 0: msgpack-c's empty
 * string) with U+FFFD in place of each byte that does not begin a valid UTF-8 sequence,
 * its length in *@ret_len; NULL on out of memory. */
static char *utf8_repaired(const char *s, size_t n, size_t *ret_len)
{
        const unsigned char *p = (const unsigned char *)(n ? s : ""), *end = p + n;
        char *out = malloc(3 * n + 1), *q = out;

        if (!out)
                return NULL;
        while (p < end) {
                size_t k = utf8_seq(p, (size_t)(end - p));
                if (k) {
                        memcpy(q, p, k);
                        q += k;
                        p += k;
                } else {
                        memcpy(q, "\xEF\xBF\xBD", 3);
                        q += 3;
                        p++;
                }
        }
        *q = '\0';
        *ret_len = (size_t)(q - out);
        return out;
}

/* The JSON string for the @n bytes at @s (NULL when @n is 0: msgpack-c leaves an empty
 * string's pointer NULL when it ends the buffer, which jansson takes for a failure);
 * text that is not UTF-8, which JSON cannot carry and jansson would refuse to print, with
 * U+FFFD in place of each byte that does not begin a valid sequence. */
static json_t *string_json(const char *s, size_t n)
{
        size_t len;
        char *fixed;
        json_t *j;

        if (!n)
                return json_string("");
        if (utf8_valid(s, n))
                return json_stringn_nocheck(s, n);
        fixed = utf8_repaired(s, n, &len);
        j = fixed ? json_stringn_nocheck(fixed, len) : NULL;
        free(fixed);
        return j;
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
                return string_json(o->via.str.ptr, o->via.str.size);
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
                                size_t len;
                                key = utf8_repaired(kv->key.via.str.ptr, kv->key.via.str.size,
                                                    &len);
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

/* Appends the JSON string for the @n bytes at @s: 0, -EDOM when they are not UTF-8,
 * -ENOMEM. */
static int text_string(msgpack_sbuffer *out, const char *s, size_t n)
{
        static const char hex[] = "0123456789ABCDEF";
        /* @s may be NULL when @n is 0 (msgpack-c's empty string) */
        const unsigned char *p = (const unsigned char *)(n ? s : ""), *end = p + n, *run = p;
        int r = msgpack_sbuffer_write(out, "\"", 1);

        while (r == 0 && p < end) {
                char esc[6] = {'\\', 'u', '0', '0'};
                size_t len = 2;

                if (*p >= 0x80) {
                        size_t k = utf8_seq(p, (size_t)(end - p));
                        if (!k)
                                return -EDOM;
                        p += k;
                        continue;
                }
                if (*p >= 0x20 && *p != '"' && *p != '\\') {
                        p++;
                        continue;
                }
                switch (*p) {
                case '"':
                case '\\':
                        esc[1] = (char)*p;
                        break;
                case '\b':
                        esc[1] = 'b';
                        break;
                case '\f':
                        esc[1] = 'f';
                        break;
                case '\n':
                        esc[1] = 'n';
                        break;
                case '\r':
                        esc[1] = 'r';
                        break;
                case '\t':
                        esc[1] = 't';
                        break;
                default:
                        esc[4] = hex[*p >> 4];
                        esc[5] = hex[*p & 15];
                        len = 6;
                }
                r = msgpack_sbuffer_write(out, (const char *)run, (size_t)(p - run));
                if (r == 0)
                        r = msgpack_sbuffer_write(out, esc, len);
                run = ++p;
        }
        if (r == 0)
                r = msgpack_sbuffer_write(out, (const char *)run, (size_t)(p - run));
        if (r == 0)
                r = msgpack_sbuffer_write(out, "\"", 1);
        return r == 0 ? 0 : -ENOMEM;
}

static int text_int(msgpack_sbuffer *out, int64_t v)
{
        char buf[24], *p = buf + sizeof(buf);
        uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

        do
                *--p = (char)('0' + u % 10);
        while ((u /= 10) != 0);
        if (v < 0)
                *--p = '-';
        return msgpack_sbuffer_write(out, p, (size_t)(buf + sizeof(buf) - p)) == 0 ? 0 : -ENOMEM;
}

static int text_lit(msgpack_sbuffer *out, const char *s)
{
        return msgpack_sbuffer_write(out, s, strlen(s)) == 0 ? 0 : -ENOMEM;
}

/* A map that convert_msgpack_to_json() keeps as it is: at most 64 keys (so the check
 * for a repeated one stays cheap), strings without NUL, none twice. */
static bool text_map_plain(const msgpack_object_map *m)
{
        if (m->size > 64)
                return false;
        for (uint32_t i = 0; i < m->size; i++) {
                const msgpack_object *k = &m->ptr[i].key;
                if (k->type != MSGPACK_OBJECT_STR ||
                    (k->via.str.size && memchr(k->via.str.ptr, 0, k->via.str.size)))
                        return false;
                for (uint32_t j = 0; j < i; j++) {
                        const msgpack_object *e = &m->ptr[j].key;
                        if (e->via.str.size == k->via.str.size &&
                            (!k->via.str.size ||
                             !memcmp(e->via.str.ptr, k->via.str.ptr, k->via.str.size)))
                                return false;
                }
        }
        return true;
}

static int text_value(msgpack_sbuffer *out, const msgpack_object *o)
{
        int r = 0;

        switch (o->type) {
        case MSGPACK_OBJECT_NIL:
                return text_lit(out, "null");
        case MSGPACK_OBJECT_BOOLEAN:
                return text_lit(out, o->via.boolean ? "true" : "false");
        case MSGPACK_OBJECT_POSITIVE_INTEGER:
                if (o->via.u64 > (uint64_t)INT64_MAX)
                        return -EDOM; /* a real in the tree */
                return text_int(out, (int64_t)o->via.u64);
        case MSGPACK_OBJECT_NEGATIVE_INTEGER:
                return text_int(out, o->via.i64);
        case MSGPACK_OBJECT_STR:
                return text_string(out, o->via.str.ptr, o->via.str.size);
        case MSGPACK_OBJECT_ARRAY:
                r = text_lit(out, "[");
                for (uint32_t i = 0; r == 0 && i < o->via.array.size; i++) {
                        if (i)
                                r = text_lit(out, ",");
                        if (r == 0)
                                r = text_value(out, &o->via.array.ptr[i]);
                }
                return r ? r : text_lit(out, "]");
        case MSGPACK_OBJECT_MAP:
                if (!text_map_plain(&o->via.map))
                        return -EDOM;
                r = text_lit(out, "{");
                for (uint32_t i = 0; r == 0 && i < o->via.map.size; i++) {
                        const msgpack_object_kv *kv = &o->via.map.ptr[i];
                        if (i)
                                r = text_lit(out, ",");
                        if (r == 0)
                                r = text_string(out, kv->key.via.str.ptr, kv->key.via.str.size);
                        if (r == 0)
                                r = text_lit(out, ":");
                        if (r == 0)
                                r = text_value(out, &kv->val);
                }
                return r ? r : text_lit(out, "}");
        default:
                return -EDOM; /* floats, bin, ext: the tree renders them */
        }
}

int convert_msgpack_to_json_text(msgpack_sbuffer *out, const msgpack_object *o)
{
        size_t was = out->size;
        int r = text_value(out, o);

        if (r < 0)
                out->size = was;
        return r;
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

/* The unit at @p, its length in *@ret_len and its scale in ms; 0 when there is none. */
static double duration_unit(const char *p, size_t *ret_len)
{
        static const struct {
                const char *name;
                double ms;
        } units[] = {
                /* longest first: "ms" before "m", "min" before "m" */
                {"min", 60 * MSEC_PER_SEC}, {"ms", 1},
                {"s", MSEC_PER_SEC},        {"m", 60 * MSEC_PER_SEC},
                {"h", 3600 * MSEC_PER_SEC}, {"d", 86400 * MSEC_PER_SEC},
        };

        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
                size_t n = strlen(units[i].name);
                if (strncmp(p, units[i].name, n) == 0) {
                        *ret_len = n;
                        return units[i].ms;
                }
        }
        return 0;
}

int convert_duration_ms_max(const char *s, uint64_t max_ms, uint64_t *ret)
{
        double total = 0, last = 0; /* the scale of the previous part's unit */
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        while (*p) {
                /* digits, a '.' and digits: strtod() alone would take "1e3" and "0x10" */
                char num[32];
                size_t n = strspn(p, "0123456789"), len;

                if (p[n] == '.')
                        n += 1 + strspn(p + n + 1, "0123456789");
                if (n == 0 || n >= sizeof(num) || (n == 1 && *p == '.'))
                        return -EINVAL;
                memcpy(num, p, n);
                num[n] = '\0';
                double v = strtod(num, NULL);
                if (p == s && p[n] == '\0') { /* a lone number: seconds */
                        total = v * MSEC_PER_SEC;
                        break;
                }
                double scale = duration_unit(p + n, &len);
                /* units largest first, each once, as daemon/cron/duration.c reads them: a
                 * typo such as "30m1h" is refused, not summed */
                if (scale == 0 || (last != 0 && scale >= last))
                        return -EINVAL;
                last = scale;
                total += v * scale;
                p += n + len;
        }
        if (total > (double)max_ms)
                return -ERANGE;
        *ret = (uint64_t)total;
        return 0;
}

int convert_duration_ms(const char *s, uint64_t *ret)
{
        return convert_duration_ms_max(s, UINT32_MAX, ret);
}

/* Reads exactly @n decimal digits at *@p into *@ret and moves past them. */
static bool digits(const char **p, int n, int *ret)
{
        int v = 0;

        for (int i = 0; i < n; i++) {
                if ((*p)[i] < '0' || (*p)[i] > '9')
                        return false;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return true;
}

/* Days from 1970-01-01 to @y-@m-@d of the proleptic Gregorian calendar (Howard
 * Hinnant's days_from_civil), so no time zone of the process is involved. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
        y -= m <= 2;
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        int64_t yoe = y - era * 400;
        int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + doe - 719468;
}

static int days_in_month(int y, int m)
{
        static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

        return m == 2 && leap ? 29 : days[m - 1];
}

/* The fraction at *@p (after its '.': one digit at least) in ms, rounded down. */
static bool fraction_ms(const char **p, int *ret)
{
        int ms = 0, n = 0;

        while (**p >= '0' && **p <= '9') {
                if (n < 3)
                        ms = ms * 10 + (**p - '0');
                n++;
                (*p)++;
        }
        for (int i = n; i < 3; i++)
                ms *= 10;
        *ret = ms;
        return n > 0;
}

static int time_fail(const char **why, const char *what, int r)
{
        if (why)
                *why = what;
        return r;
}

/* "@EPOCH" (seconds, optionally with a fraction). */
static int epoch_ms(const char *s, uint64_t *ret, const char **why)
{
        const char *p = s;
        uint64_t sec = 0;
        int ms = 0;

        if (*p < '0' || *p > '9')
                return time_fail(why, "expected seconds since 1970 after '@'", -EINVAL);
        for (; *p >= '0' && *p <= '9'; p++) {
                if (sec > (UINT64_MAX / MSEC_PER_SEC - 9) / 10)
                        return time_fail(why, "too far in the future", -ERANGE);
                sec = sec * 10 + (uint64_t)(*p - '0');
        }
        if (*p == '.' && (p++, !fraction_ms(&p, &ms)))
                return time_fail(why, "expected digits after the '.'", -EINVAL);
        if (*p)
                return time_fail(why, "expected seconds since 1970 after '@'", -EINVAL);
        *ret = sec * MSEC_PER_SEC + (uint64_t)ms;
        return 0;
}

int convert_time_ms(const char *s, uint64_t *ret, const char **why)
{
        static const char *const shape = "expected a time like 2026-12-01T03:00:00Z, "
                                         "2026-12-01T03:00:00+02:00 or @1764558000";
        const char *p = s;
        int y, mo, d, h, mi, sec = 0, ms = 0, oh = 0, om = 0, sign = 0;

        if (!s || !*s)
                return time_fail(why, shape, -EINVAL);
        if (*s == '@')
                return epoch_ms(s + 1, ret, why);
        if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
            !digits(&p, 2, &d))
                return time_fail(why, shape, -EINVAL);
        if (*p != 'T' && *p != 't' && *p != ' ')
                return time_fail(why,
                                 *p ? shape
                                    : "a date alone: add the time and zone, "
                                      "e.g. T03:00:00Z",
                                 -EINVAL);
        p++;
        if (!digits(&p, 2, &h) || *p++ != ':' || !digits(&p, 2, &mi))
                return time_fail(why, shape, -EINVAL);
        if (*p == ':' && (p++, !digits(&p, 2, &sec)))
                return time_fail(why, shape, -EINVAL);
        if ((*p == '.' || *p == ',') && (p++, !fraction_ms(&p, &ms)))
                return time_fail(why, shape, -EINVAL);
        if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || sec > 60)
                return time_fail(why, "no such date or time of day", -EINVAL);
        if (*p == '\0')
                return time_fail(why, "no time zone: add Z for UTC or an offset such as +02:00",
                                 -EINVAL);
        if (*p == 'Z' || *p == 'z') {
                p++;
        } else if (*p == '+' || *p == '-') {
                sign = *p++ == '-' ? -1 : 1;
                if (!digits(&p, 2, &oh))
                        return time_fail(why, "expected the offset as +HH:MM", -EINVAL);
                if (*p == ':')
                        p++;
                if (*p && !digits(&p, 2, &om))
                        return time_fail(why, "expected the offset as +HH:MM", -EINVAL);
                if (oh > 23 || om > 59)
                        return time_fail(why, "no such offset from UTC", -EINVAL);
        }
        if (*p)
                return time_fail(why, shape, -EINVAL);
        int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec -
                    sign * (oh * 3600 + om * 60);
        if (t < 0)
                return time_fail(why, "before 1970", -ERANGE);
        *ret = (uint64_t)t * MSEC_PER_SEC + (uint64_t)ms;
        return 0;
}
