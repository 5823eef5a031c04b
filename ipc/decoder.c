/* SPDX-License-Identifier: MIT */
/*
 * decoder.c — the incremental MessagePack-RPC framer and decoder (see decoder.h).
 *
 * Buffer: bytes [start, end) of buf are fed and not yet handed out; the message being
 * framed begins at buf + start. The scanner keeps, for that message, the offset of the
 * next header to read (scan, relative to start; it may run past end when a string's
 * payload has not arrived yet) and a stack of how many elements each open array or map
 * still expects (a map of n pairs expects 2n). Reading one header takes one element from
 * the top of the stack and pushes the element's own children; the message is complete
 * when the stack is empty, and then it is exactly `scan` bytes long.
 *
 * The msgpack format (https://github.com/msgpack/msgpack/blob/master/spec.md) gives each
 * header's size from its first byte; header_size() below is a table of that spec.
 */
#include "ipc/decoder.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DECODER_MIN_BUFFER 4096

struct IpcDecoder {
        char *buf; /* malloc'ed, cap bytes */
        size_t cap;
        size_t start, end;  /* unprocessed bytes: buf[start..end) */
        size_t max_message; /* cap on one message, bytes */

        /* scanner state for the message at buf + start */
        size_t scan;    /* offset of the next header, from start */
        unsigned depth; /* open containers + 1 for the message itself; 0 = idle */
        uint64_t remaining[IPC_MAX_DEPTH + 1]; /* elements still expected per level */
        size_t msg_len;                        /* total length once the stack emptied; 0 before */

        int failed;     /* sticky -EMSGSIZE / -EBADMSG, 0 while healthy */
        bool has_msgid; /* error_msgid is valid for the last error */
        uint32_t error_msgid;
        char text[192]; /* the last error, "" when none */
};

void ipc_message_clear(IpcMessage *m)
{
        if (!m)
                return;
        if (m->zone)
                msgpack_zone_free(m->zone);
        memset(m, 0, sizeof(*m));
}

int ipc_decoder_new(IpcDecoder **ret, size_t max_message)
{
        IpcDecoder *d = calloc(1, sizeof(*d));
        if (!d)
                return -ENOMEM;
        d->max_message = max_message ? max_message : IPC_DEFAULT_MAX_MESSAGE;
        *ret = d;
        return 0;
}

IpcDecoder *ipc_decoder_free(IpcDecoder *d)
{
        if (d) {
                free(d->buf);
                free(d);
        }
        return NULL;
}

size_t ipc_decoder_buffered(const IpcDecoder *d)
{
        return d->end - d->start;
}

const char *ipc_decoder_error_text(const IpcDecoder *d)
{
        return d->text;
}

bool ipc_decoder_error_msgid(const IpcDecoder *d, uint32_t *ret_msgid)
{
        if (!d->has_msgid)
                return false;
        *ret_msgid = d->error_msgid;
        return true;
}

/* Make room for @min more bytes after end, moving the unprocessed bytes to the front. */
static int decoder_grow(IpcDecoder *d, size_t min)
{
        size_t used = d->end - d->start;

        if (d->start > 0 && d->cap - d->end < min) {
                memmove(d->buf, d->buf + d->start, used);
                d->start = 0;
                d->end = used;
        }
        if (d->cap - d->end >= min)
                return 0;
        size_t want = d->cap ? d->cap : DECODER_MIN_BUFFER;
        while (want - used < min) {
                if (want > SIZE_MAX / 2)
                        return -ENOMEM;
                want *= 2;
        }
        char *nbuf = realloc(d->buf, want);
        if (!nbuf)
                return -ENOMEM;
        d->buf = nbuf;
        d->cap = want;
        return 0;
}

int ipc_decoder_reserve(IpcDecoder *d, size_t min, void **ret_buf, size_t *ret_len)
{
        if (d->failed)
                return d->failed;
        int r = decoder_grow(d, min ? min : 1);
        if (r < 0)
                return r;
        *ret_buf = d->buf + d->end;
        *ret_len = d->cap - d->end;
        return 0;
}

void ipc_decoder_commit(IpcDecoder *d, size_t n)
{
        if (d->failed)
                return;
        if (n > d->cap - d->end) /* a caller bug; never walk past the buffer */
                n = d->cap - d->end;
        d->end += n;
}

int ipc_decoder_feed(IpcDecoder *d, const void *data, size_t len)
{
        if (d->failed)
                return d->failed;
        if (len == 0)
                return 0;
        int r = decoder_grow(d, len);
        if (r < 0)
                return r;
        memcpy(d->buf + d->end, data, len);
        d->end += len;
        return 0;
}

static uint64_t load_be(const uint8_t *p, unsigned n)
{
        uint64_t v = 0;
        for (unsigned i = 0; i < n; i++)
                v = (v << 8) | p[i];
        return v;
}

/*
 * Reads the request msgid from the first bytes of a message, without unpacking it: an
 * array header of 4 elements, the type 0, then an unsigned integer up to 32 bits.
 */
static bool peek_request_msgid(const uint8_t *p, size_t len, uint32_t *ret)
{
        size_t i;

        if (len >= 1 && p[0] == 0x94)
                i = 1;
        else if (len >= 3 && p[0] == 0xdc && load_be(p + 1, 2) == 4)
                i = 3;
        else if (len >= 5 && p[0] == 0xdd && load_be(p + 1, 4) == 4)
                i = 5;
        else
                return false;
        if (i >= len || p[i] != 0x00)
                return false;
        i++;
        if (i >= len)
                return false;
        uint8_t b = p[i];
        unsigned n;
        if (b < 0x80) {
                *ret = b;
                return true;
        }
        switch (b) {
        case 0xcc:
                n = 1;
                break;
        case 0xcd:
                n = 2;
                break;
        case 0xce:
                n = 4;
                break;
        case 0xcf:
                n = 8;
                break;
        default:
                return false;
        }
        if (len - i - 1 < n)
                return false;
        uint64_t v = load_be(p + i + 1, n);
        if (v > UINT32_MAX)
                return false;
        *ret = (uint32_t)v;
        return true;
}

/* Puts the decoder in its sticky error state; the buffered bytes are dropped. */
static int decoder_fail(IpcDecoder *d, int error)
{
        d->has_msgid = peek_request_msgid((const uint8_t *)d->buf + d->start, d->end - d->start,
                                          &d->error_msgid);
        d->failed = error;
        free(d->buf);
        d->buf = NULL;
        d->cap = d->start = d->end = 0;
        return error;
}

/*
 * header_size - from a header's first byte @b: the header's size in bytes, and in
 * @len_bytes how many of those bytes hold a length or count (big-endian, right after the
 * first byte), @fixed the payload size when it does not depend on a length field,
 * @kind what the length counts. Returns 0 for 0xc1, the one byte msgpack never uses.
 */
enum { KIND_SCALAR, KIND_BYTES, KIND_ARRAY, KIND_MAP };

static inline __attribute__((always_inline)) unsigned header_size(uint8_t b, unsigned *len_bytes,
                                                                  uint64_t *fixed, int *kind)
{
        *len_bytes = 0;
        *fixed = 0;
        *kind = KIND_SCALAR;
        if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
                return 1;
        if (b <= 0x8f) {
                *kind = KIND_MAP;
                *fixed = b & 0x0f;
                return 1;
        }
        if (b <= 0x9f) {
                *kind = KIND_ARRAY;
                *fixed = b & 0x0f;
                return 1;
        }
        if (b <= 0xbf) {
                *kind = KIND_BYTES;
                *fixed = b & 0x1f;
                return 1;
        }
        switch (b) {
        case 0xc4: /* bin 8/16/32 */
        case 0xd9: /* str 8/16/32 */
                *kind = KIND_BYTES;
                *len_bytes = 1;
                return 2;
        case 0xc5:
        case 0xda:
                *kind = KIND_BYTES;
                *len_bytes = 2;
                return 3;
        case 0xc6:
        case 0xdb:
                *kind = KIND_BYTES;
                *len_bytes = 4;
                return 5;
        case 0xc7: /* ext 8/16/32: length, then a type byte */
                *kind = KIND_BYTES;
                *len_bytes = 1;
                return 3;
        case 0xc8:
                *kind = KIND_BYTES;
                *len_bytes = 2;
                return 4;
        case 0xc9:
                *kind = KIND_BYTES;
                *len_bytes = 4;
                return 6;
        case 0xca: /* float 32/64 */
                *fixed = 4;
                return 1;
        case 0xcb:
                *fixed = 8;
                return 1;
        case 0xcc: /* uint / int 8..64 */
        case 0xd0:
                *fixed = 1;
                return 1;
        case 0xcd:
        case 0xd1:
                *fixed = 2;
                return 1;
        case 0xce:
        case 0xd2:
                *fixed = 4;
                return 1;
        case 0xcf:
        case 0xd3:
                *fixed = 8;
                return 1;
        case 0xd4: /* fixext 1..16: a type byte, then the data */
                *fixed = 1;
                return 2;
        case 0xd5:
                *fixed = 2;
                return 2;
        case 0xd6:
                *fixed = 4;
                return 2;
        case 0xd7:
                *fixed = 8;
                return 2;
        case 0xd8:
                *fixed = 16;
                return 2;
        case 0xdc: /* array / map 16/32 */
                *kind = KIND_ARRAY;
                *len_bytes = 2;
                return 3;
        case 0xdd:
                *kind = KIND_ARRAY;
                *len_bytes = 4;
                return 5;
        case 0xde:
                *kind = KIND_MAP;
                *len_bytes = 2;
                return 3;
        case 0xdf:
                *kind = KIND_MAP;
                *len_bytes = 4;
                return 5;
        default: /* 0xc1 */
                return 0;
        }
}

static bool is_array_header(uint8_t b)
{
        return (b & 0xf0) == 0x90 || b == 0xdc || b == 0xdd;
}

/*
 * The header at @p, of which @avail bytes are there. Return: its size in bytes, 0 for a
 * byte msgpack never uses, or more than @avail when the rest has not arrived; once it
 * is all there, *@ret_end is where its element's own bytes end (after a string's
 * payload; right after an array or map header), from @p, and *@ret_children how many
 * elements the element opens (an array's count, twice a map's). Inlined: it is the
 * framer's inner loop, which read the header in place before there were two callers.
 */
static inline __attribute__((always_inline)) unsigned
header_read(const uint8_t *p, size_t avail, uint64_t *ret_end, uint64_t *ret_children)
{
        unsigned len_bytes;
        uint64_t size;
        int kind;
        unsigned h = header_size(p[0], &len_bytes, &size, &kind);

        if (h == 0 || avail < h)
                return h;
        if (len_bytes)
                size = load_be(p + 1, len_bytes);
        *ret_children = kind == KIND_ARRAY ? size : kind == KIND_MAP ? 2 * size : 0;
        *ret_end = h + (kind == KIND_ARRAY || kind == KIND_MAP ? 0 : size);
        return h;
}

/*
 * Advances the scanner over the bytes that have arrived. Return: 1 when the message at
 * start is complete (d->msg_len bytes, all buffered), 0 when more bytes are needed, or a
 * sticky error (the decoder has failed).
 */
static int decoder_scan(IpcDecoder *d)
{
        const uint8_t *p;
        size_t avail = d->end - d->start;

        if (!d->buf)
                return 0; /* nothing has arrived yet (NULL + 0 is undefined) */
        p = (const uint8_t *)d->buf + d->start;
        if (d->msg_len)
                return avail >= d->msg_len;
        if (d->depth == 0) {
                if (avail == 0)
                        return 0;
                if (!is_array_header(p[0])) {
                        snprintf(d->text, sizeof(d->text),
                                 "expected a MessagePack-RPC array, got byte 0x%02x: the "
                                 "peer does not speak fiberd's protocol",
                                 p[0]);
                        return decoder_fail(d, -EBADMSG);
                }
                d->remaining[0] = 1;
                d->depth = 1;
                d->scan = 0;
        }
        while (d->scan < avail) {
                uint64_t end, children;
                unsigned h = header_read(p + d->scan, avail - d->scan, &end, &children);

                if (h == 0) {
                        snprintf(d->text, sizeof(d->text),
                                 "byte 0x%02x at offset %zu is not valid msgpack", p[d->scan],
                                 d->scan);
                        return decoder_fail(d, -EBADMSG);
                }
                if (avail - d->scan < h)
                        break; /* the rest of the header has not arrived */
                uint64_t after = (uint64_t)d->scan + end;
                /* every child takes at least one byte */
                if (after + children > d->max_message) {
                        snprintf(d->text, sizeof(d->text),
                                 "message of at least %" PRIu64
                                 " bytes exceeds the limit of %zu bytes",
                                 after + children, d->max_message);
                        return decoder_fail(d, -EMSGSIZE);
                }
                d->remaining[d->depth - 1]--;
                if (children) {
                        if (d->depth > IPC_MAX_DEPTH) {
                                snprintf(d->text, sizeof(d->text),
                                         "arrays and maps nested deeper than %d levels",
                                         IPC_MAX_DEPTH);
                                return decoder_fail(d, -EBADMSG);
                        }
                        d->remaining[d->depth++] = children;
                }
                while (d->depth > 0 && d->remaining[d->depth - 1] == 0)
                        d->depth--;
                d->scan = (size_t)after;
                if (d->depth == 0) {
                        d->msg_len = d->scan;
                        return avail >= d->msg_len;
                }
        }
        if (avail > d->max_message) {
                snprintf(d->text, sizeof(d->text),
                         "message of at least %zu bytes exceeds the limit of %zu bytes", avail,
                         d->max_message);
                return decoder_fail(d, -EMSGSIZE);
        }
        return 0;
}

int ipc_msgpack_whole(const void *buf, size_t len, unsigned max_depth)
{
        const uint8_t *p = buf;
        uint64_t remaining[IPC_MAX_DEPTH + 1];
        unsigned depth = 1;
        size_t scan = 0;

        if (!buf || len == 0)
                return -EBADMSG;
        if (max_depth > IPC_MAX_DEPTH)
                max_depth = IPC_MAX_DEPTH;
        remaining[0] = 1;
        while (depth > 0) {
                uint64_t end, children;
                unsigned h;

                if (scan >= len)
                        return -EBADMSG; /* truncated: an element is missing */
                h = header_read(p + scan, len - scan, &end, &children);
                if (h == 0 || len - scan < h)
                        return -EBADMSG;
                uint64_t after = (uint64_t)scan + end;
                if (after + children > len) /* every child takes at least one byte */
                        return -EBADMSG;
                remaining[depth - 1]--;
                if (children) {
                        if (depth > max_depth)
                                return -ERANGE;
                        remaining[depth++] = children;
                }
                while (depth > 0 && remaining[depth - 1] == 0)
                        depth--;
                scan = (size_t)after;
        }
        return scan == len ? 0 : -EBADMSG;
}

/* Drops the message at start from the buffer and resets the scanner. */
static void decoder_consume(IpcDecoder *d, size_t len)
{
        d->start += len;
        if (d->start == d->end)
                d->start = d->end = 0;
        d->depth = 0;
        d->scan = 0;
        d->msg_len = 0;
}

static int invalid(IpcDecoder *d, const char *what)
{
        snprintf(d->text, sizeof(d->text), "not a MessagePack-RPC message: %s", what);
        return -EPROTO;
}

static bool read_msgid(const msgpack_object *o, uint32_t *ret)
{
        if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > UINT32_MAX)
                return false;
        *ret = (uint32_t)o->via.u64;
        return true;
}

/* Checks the envelope of the unpacked @o and fills @m from it; -EPROTO when invalid. */
static int decoder_envelope(IpcDecoder *d, const msgpack_object *o, IpcMessage *m)
{
        const msgpack_object *e = o->via.array.ptr;
        uint32_t n = o->via.array.size;
        const msgpack_object *method = NULL, *params = NULL;

        if (n < 3 || e[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER || e[0].via.u64 > 2)
                return invalid(d, "expected [type, ...] with type 0, 1 or 2");
        m->type = (IpcMessageType)e[0].via.u64;
        switch (m->type) {
        case IPC_REQUEST:
                d->has_msgid = n >= 2 && read_msgid(&e[1], &d->error_msgid);
                if (n != 4)
                        return invalid(d, "a request is [0, msgid, method, params]");
                if (!d->has_msgid)
                        return invalid(d, "msgid must be an unsigned 32-bit integer");
                m->msgid = d->error_msgid;
                method = &e[2];
                params = &e[3];
                break;
        case IPC_RESPONSE:
                if (n != 4)
                        return invalid(d, "a response is [1, msgid, error, result]");
                if (!read_msgid(&e[1], &m->msgid))
                        return invalid(d, "msgid must be an unsigned 32-bit integer");
                m->error = e[2];
                m->result = e[3];
                return 0;
        case IPC_NOTIFICATION:
                if (n != 3)
                        return invalid(d, "a notification is [2, method, params]");
                method = &e[1];
                params = &e[2];
                break;
        }
        if (method->type != MSGPACK_OBJECT_STR)
                return invalid(d, "method must be a string");
        /* an empty string may come with a NULL ptr: memchr/memcpy must not see it */
        if (method->via.str.size && memchr(method->via.str.ptr, '\0', method->via.str.size))
                return invalid(d, "method contains a NUL byte");
        if (params->type != MSGPACK_OBJECT_ARRAY)
                return invalid(d, "params must be an array");
        char *name = msgpack_zone_malloc(m->zone, method->via.str.size + 1);
        if (!name)
                return -ENOMEM;
        if (method->via.str.size)
                memcpy(name, method->via.str.ptr, method->via.str.size);
        name[method->via.str.size] = '\0';
        m->method = name;
        m->method_len = method->via.str.size;
        m->params = *params;
        return 0;
}

int ipc_decoder_next(IpcDecoder *d, IpcMessage *ret)
{
        if (d->failed)
                return d->failed;
        d->has_msgid = false;
        d->text[0] = '\0';

        int r = decoder_scan(d);
        if (r <= 0)
                return r;

        size_t len = d->msg_len;
        IpcMessage m = {.size = len};
        msgpack_object o;
        size_t off = 0;

        /* the copy and the objects of a typical request in one chunk (IPC_ZONE_SLACK);
         * the zone adds chunks for a message with more objects */
        m.zone = msgpack_zone_new(len + IPC_ZONE_SLACK);
        if (!m.zone)
                return -ENOMEM;
        char *copy = msgpack_zone_malloc(m.zone, len);
        if (!copy) {
                r = -ENOMEM;
                goto out_free_zone;
        }
        memcpy(copy, d->buf + d->start, len);
        switch (msgpack_unpack(copy, len, &off, m.zone, &o)) {
        case MSGPACK_UNPACK_SUCCESS:
                break;
        case MSGPACK_UNPACK_NOMEM_ERROR:
                r = -ENOMEM;
                goto out_free_zone;
        default: /* the scanner framed it, so msgpack-c should agree; be safe anyway */
                snprintf(d->text, sizeof(d->text), "msgpack-c could not unpack a message");
                ipc_message_clear(&m);
                return decoder_fail(d, -EBADMSG);
        }
        decoder_consume(d, len);
        r = decoder_envelope(d, &o, &m);
        if (r < 0)
                goto out_free_zone;
        *ret = m;
        return 1;

out_free_zone:
        ipc_message_clear(&m);
        return r;
}
