/* SPDX-License-Identifier: MIT */
/*
 * ipc_codec.c — criterion tests of ipc/: the decoder (round trips, split and batched
 * deliveries, size cap, garbage, truncation, wrong envelopes), the encoders, the typed
 * readers and the errno <-> code mapping. Pure byte buffers: no sockets, no daemon.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <string.h>

#include "ipc/ipc.h"

typedef struct Buf {
        msgpack_sbuffer sb;
        msgpack_packer pk;
} Buf;

static void buf_init(Buf *b)
{
        msgpack_sbuffer_init(&b->sb);
        msgpack_packer_init(&b->pk, &b->sb, msgpack_sbuffer_write);
}

static void buf_done(Buf *b)
{
        msgpack_sbuffer_destroy(&b->sb);
}

static IpcDecoder *decoder(size_t max)
{
        IpcDecoder *d = NULL;
        cr_assert_eq(ipc_decoder_new(&d, max), 0);
        cr_assert_not_null(d);
        return d;
}

/* A request [0, msgid, "job.status", [msgid]] appended to @b. */
static void pack_status_request(Buf *b, uint32_t msgid)
{
        cr_assert_eq(ipc_pack_request_begin(&b->pk, msgid, "job.status", 1), 0);
        cr_assert_eq(msgpack_pack_uint32(&b->pk, msgid), 0);
}

static void assert_status_request(const IpcMessage *m, uint32_t msgid)
{
        uint64_t id;
        cr_assert_eq(m->type, IPC_REQUEST);
        cr_assert_eq(m->msgid, msgid);
        cr_assert_str_eq(m->method, "job.status");
        cr_assert_eq(m->method_len, strlen("job.status"));
        cr_assert_eq(m->params.type, MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(m->params.via.array.size, 1);
        cr_assert_eq(ipc_read_uint(ipc_array_at(&m->params, 0), "id", &id, NULL), 0);
        cr_assert_eq(id, msgid);
}

Test(ipc_decoder, request_round_trip)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);

        buf_init(&b);
        pack_status_request(&b, 77);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        assert_status_request(&m, 77);
        cr_assert_eq(m.size, b.sb.size);
        cr_assert_eq(ipc_decoder_buffered(d), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 0, "no second message");
        ipc_message_clear(&m);
        cr_assert_null(m.zone);
        buf_done(&b);
        ipc_decoder_free(d);
}

/* A message's zone starts at its size plus a little for its objects: a request of
 * thousands of one-byte elements (24 bytes of msgpack_object each) needs many more
 * chunks, and every element still comes out. */
Test(ipc_decoder, a_message_of_many_small_objects_outgrows_its_first_chunk)
{
        enum { N = 5000 };
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        const msgpack_object *a;

        buf_init(&b);
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 9, "job.submit", 1), 0);
        cr_assert_eq(msgpack_pack_array(&b.pk, N), 0);
        for (int i = 0; i < N; i++)
                cr_assert_eq(msgpack_pack_uint8(&b.pk, (uint8_t)(i % 100)), 0);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        cr_assert_eq(m.msgid, 9);
        cr_assert_str_eq(m.method, "job.submit");
        a = ipc_array_at(&m.params, 0);
        cr_assert_not_null(a);
        cr_assert_eq(a->type, MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(a->via.array.size, N);
        for (int i = 0; i < N; i++)
                cr_assert_eq(a->via.array.ptr[i].via.u64, (uint64_t)(i % 100), "element %d", i);
        ipc_message_clear(&m);
        buf_done(&b);
        ipc_decoder_free(d);
}

/* The answer's header, packed by hand, is the bytes msgpack-c packs for [1, msgid, nil]
 * at every width of msgid, and decodes to that msgid. */
Test(ipc_encoder, response_header_is_msgpack_c_s_bytes_at_every_msgid_width)
{
        static const uint32_t ids[] = {
                0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 24, UINT32_MAX - 1, UINT32_MAX};

        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
                Buf a, b;
                IpcMessage m = {0};
                IpcDecoder *d = decoder(0);

                buf_init(&a);
                buf_init(&b);
                cr_assert_eq(ipc_pack_response_begin(&a.pk, ids[i]), 0);
                msgpack_pack_array(&b.pk, 4);
                msgpack_pack_uint8(&b.pk, IPC_RESPONSE);
                msgpack_pack_uint32(&b.pk, ids[i]);
                msgpack_pack_nil(&b.pk);
                cr_assert_eq(a.sb.size, b.sb.size, "msgid %u: %zu bytes, msgpack-c packs %zu",
                             ids[i], a.sb.size, b.sb.size);
                cr_assert_eq(memcmp(a.sb.data, b.sb.data, a.sb.size), 0, "msgid %u", ids[i]);
                cr_assert_eq(msgpack_pack_nil(&a.pk), 0); /* the result */
                cr_assert_eq(ipc_decoder_feed(d, a.sb.data, a.sb.size), 0);
                cr_assert_eq(ipc_decoder_next(d, &m), 1);
                cr_assert_eq(m.type, IPC_RESPONSE);
                cr_assert_eq(m.msgid, ids[i]);
                ipc_message_clear(&m);
                buf_done(&a);
                buf_done(&b);
                ipc_decoder_free(d);
        }
}

Test(ipc_decoder, response_error_and_notification_round_trip)
{
        Buf b;
        IpcMessage m = {0};
        IpcStatus st;
        IpcDecoder *d = decoder(0);

        buf_init(&b);
        cr_assert_eq(ipc_pack_response_begin(&b.pk, 5), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 1), 0);
        cr_assert_eq(ipc_pack_kv_uint(&b.pk, "id", 17), 0);
        cr_assert_eq(ipc_pack_error_response(&b.pk, 6, IPC_NOT_FOUND, "no job %d", 999), 0);
        cr_assert_eq(ipc_pack_notification_begin(&b.pk, "connection.error", 1), 0);
        cr_assert_eq(ipc_pack_error_map(&b.pk, IPC_MESSAGE_TOO_LARGE, "too big"), 0);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);

        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        cr_assert_eq(m.type, IPC_RESPONSE);
        cr_assert_eq(m.msgid, 5);
        cr_assert_eq(ipc_read_error(&m.error, &st), 0);
        uint64_t id = 0;
        cr_assert_eq(ipc_read_uint(ipc_map_find(&m.result, "id"), "id", &id, NULL), 0);
        cr_assert_eq(id, 17);
        ipc_message_clear(&m);

        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        cr_assert_eq(m.type, IPC_RESPONSE);
        cr_assert_eq(m.msgid, 6);
        cr_assert_eq(ipc_read_error(&m.error, &st), 1);
        cr_assert_str_eq(st.code, IPC_NOT_FOUND);
        cr_assert_eq(st.error, -ENOENT);
        cr_assert_str_eq(st.message, "no job 999");
        cr_assert(ipc_object_is_nil(&m.result));
        ipc_message_clear(&m);

        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        cr_assert_eq(m.type, IPC_NOTIFICATION);
        cr_assert_str_eq(m.method, "connection.error");
        cr_assert_eq(ipc_read_error(ipc_array_at(&m.params, 0), &st), 1);
        cr_assert_str_eq(st.code, IPC_MESSAGE_TOO_LARGE);
        ipc_message_clear(&m);
        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_decoder, byte_by_byte)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        int got = 0;

        buf_init(&b);
        for (uint32_t i = 0; i < 3; i++)
                pack_status_request(&b, 1000 + i * 100000);
        /* a string with a payload, so the scanner skips bytes that have not arrived */
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 9, "job.submit", 2), 0);
        cr_assert_eq(ipc_pack_cstr(&b.pk, "sha256"), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 1), 0);
        cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "path", "/usr/include/stdio.h"), 0);

        for (size_t i = 0; i < b.sb.size; i++) {
                cr_assert_eq(ipc_decoder_feed(d, b.sb.data + i, 1), 0);
                int r;
                while ((r = ipc_decoder_next(d, &m)) == 1) {
                        if (got < 3)
                                assert_status_request(&m, 1000 + got * 100000);
                        else
                                cr_assert_str_eq(m.method, "job.submit");
                        got++;
                        ipc_message_clear(&m);
                }
                cr_assert_eq(r, 0, "byte %zu: %d (%s)", i, r, ipc_decoder_error_text(d));
        }
        cr_assert_eq(got, 4);
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_decoder, several_messages_in_one_buffer_and_reserve)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        void *space;
        size_t len;

        buf_init(&b);
        for (uint32_t i = 1; i <= 50; i++)
                pack_status_request(&b, i);
        cr_assert_eq(ipc_decoder_reserve(d, b.sb.size, &space, &len), 0);
        cr_assert_geq(len, b.sb.size);
        memcpy(space, b.sb.data, b.sb.size);
        ipc_decoder_commit(d, b.sb.size);
        for (uint32_t i = 1; i <= 50; i++) {
                cr_assert_eq(ipc_decoder_next(d, &m), 1);
                assert_status_request(&m, i);
                ipc_message_clear(&m);
        }
        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_decoder, message_outlives_decoder)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);

        buf_init(&b);
        pack_status_request(&b, 3);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        ipc_decoder_free(d);
        memset(b.sb.data, 0xff, b.sb.size);
        assert_status_request(&m, 3);
        ipc_message_clear(&m);
        buf_done(&b);
}

Test(ipc_decoder, truncated_waits_for_more)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);

        buf_init(&b);
        pack_status_request(&b, 4);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size - 1), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        cr_assert_eq(ipc_decoder_buffered(d), b.sb.size - 1);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data + b.sb.size - 1, 1), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        assert_status_request(&m, 4);
        ipc_message_clear(&m);
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_decoder, oversize_by_bytes)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(1024);
        uint32_t msgid = 0;
        char blob[2000];

        memset(blob, 'x', sizeof(blob));
        buf_init(&b);
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 300, "job.submit", 1), 0);
        /* an array of small strings: no single header declares too much */
        cr_assert_eq(msgpack_pack_array(&b.pk, 100), 0);
        for (int i = 0; i < 100; i++)
                cr_assert_eq(ipc_pack_strn(&b.pk, blob, 20), 0);
        for (size_t i = 0; i < b.sb.size; i += 100) {
                size_t n = b.sb.size - i < 100 ? b.sb.size - i : 100;
                int r = ipc_decoder_feed(d, b.sb.data + i, n);
                if (r == 0)
                        r = ipc_decoder_next(d, &m);
                if (r < 0) {
                        cr_assert_eq(r, -EMSGSIZE);
                        break;
                }
                cr_assert_eq(r, 0);
        }
        cr_assert_eq(ipc_decoder_next(d, &m), -EMSGSIZE, "sticky");
        cr_assert_eq(ipc_decoder_feed(d, "x", 1), -EMSGSIZE, "sticky");
        cr_assert(ipc_decoder_error_msgid(d, &msgid));
        cr_assert_eq(msgid, 300);
        cr_assert_not_null(strstr(ipc_decoder_error_text(d), "limit of 1024 bytes"), "%s",
                           ipc_decoder_error_text(d));
        cr_assert_eq(ipc_decoder_buffered(d), 0, "the bytes are dropped");
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_decoder, oversize_declared_before_the_bytes_arrive)
{
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint32_t msgid = 0;
        /* [0, 70000, "x", [str32 of 4 GiB - 1 ... */
        const uint8_t head[] = {0x94, 0x00, 0xce, 0x00, 0x01, 0x11, 0x70, 0xa1,
                                'x',  0x91, 0xdb, 0xff, 0xff, 0xff, 0xff};

        cr_assert_eq(ipc_decoder_feed(d, head, sizeof(head)), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EMSGSIZE);
        cr_assert(ipc_decoder_error_msgid(d, &msgid));
        cr_assert_eq(msgid, 70000);
        ipc_decoder_free(d);
}

Test(ipc_decoder, huge_array_count_allocates_nothing)
{
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint32_t msgid = 1;
        /* an array header declaring 2^32-1 elements, the msgpack_unpacker trap */
        const uint8_t bytes[] = {0xdd, 0xff, 0xff, 0xff, 0xff};

        cr_assert_eq(ipc_decoder_feed(d, bytes, sizeof(bytes)), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EMSGSIZE);
        cr_assert_not(ipc_decoder_error_msgid(d, &msgid));
        ipc_decoder_free(d);
}

Test(ipc_decoder, garbage_text)
{
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint32_t msgid;
        const char *text = "GET / HTTP/1.1\r\n\r\n";

        cr_assert_eq(ipc_decoder_feed(d, text, strlen(text)), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EBADMSG);
        cr_assert_not(ipc_decoder_error_msgid(d, &msgid));
        cr_assert_not_null(strstr(ipc_decoder_error_text(d), "0x47"));
        cr_assert_eq(ipc_decoder_next(d, &m), -EBADMSG, "sticky");
        ipc_decoder_free(d);
}

Test(ipc_decoder, invalid_byte_after_msgid_keeps_msgid)
{
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint32_t msgid = 0;
        const uint8_t bytes[] = {0x94, 0x00, 0x2a, 0xc1, 0x90};

        cr_assert_eq(ipc_decoder_feed(d, bytes, sizeof(bytes)), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EBADMSG);
        cr_assert(ipc_decoder_error_msgid(d, &msgid));
        cr_assert_eq(msgid, 42);
        ipc_decoder_free(d);
}

Test(ipc_decoder, nesting_too_deep)
{
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint8_t bytes[64];
        size_t n = 0;

        bytes[n++] = 0x94;
        bytes[n++] = 0x00;
        bytes[n++] = 0x01;
        bytes[n++] = 0xa1;
        bytes[n++] = 'x';
        for (int i = 0; i < 40; i++)
                bytes[n++] = 0x91;
        bytes[n++] = 0xc0;
        cr_assert_eq(ipc_decoder_feed(d, bytes, n), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EBADMSG);
        cr_assert_not_null(strstr(ipc_decoder_error_text(d), "nested"));
        ipc_decoder_free(d);
}

/* ipc_msgpack_whole(): msgpack-c's unpack agrees on every prefix of a rich value (only the
 * whole is one value), a value with more behind it is not one, and the depth is counted
 * as the decoder counts it. */
Test(ipc_msgpack_whole, agrees_with_msgpack_c_and_counts_depth)
{
        Buf b;
        uint8_t deep[32];
        size_t n = 0;

        static char zeros[65536 + 3];
        static const size_t lens[] = {0, 5, 31, 32, 255, 256, 65535, 65536};
        size_t marks[64], n_marks = 0;

        /* every header kind msgpack has: each integer and float width, nil and bools,
         * fixext 1..16, then str, bin and ext at each length width and arrays and maps of
         * each count width (the large ones last; @marks: where each large one starts) */
        buf_init(&b);
        msgpack_pack_array(&b.pk, 21);
        msgpack_pack_map(&b.pk, 1);
        ipc_pack_kv_int(&b.pk, "neg", -123456789012LL);
        msgpack_pack_int8(&b.pk, -100);
        msgpack_pack_int16(&b.pk, -30000);
        msgpack_pack_int32(&b.pk, -2000000000);
        msgpack_pack_int64(&b.pk, INT64_MIN);
        msgpack_pack_fix_int8(&b.pk, -5);
        msgpack_pack_uint8(&b.pk, 200);
        msgpack_pack_uint16(&b.pk, 60000);
        msgpack_pack_uint32(&b.pk, 4000000000u);
        msgpack_pack_uint64(&b.pk, UINT64_MAX);
        msgpack_pack_float(&b.pk, 1.5f);
        msgpack_pack_double(&b.pk, 3.25);
        msgpack_pack_nil(&b.pk);
        msgpack_pack_true(&b.pk);
        msgpack_pack_false(&b.pk);
        msgpack_pack_array(&b.pk, 5);
        for (size_t k = 1; k <= 16; k *= 2) /* fixext 1, 2, 4, 8, 16 */
                msgpack_pack_ext_with_body(&b.pk, zeros, k, 7);
        msgpack_pack_array(&b.pk, 3 * ELEMENTSOF(lens));
        for (size_t i = 0; i < ELEMENTSOF(lens); i++) {
                marks[n_marks++] = b.sb.size;
                msgpack_pack_str_with_body(&b.pk, zeros, lens[i]);
                marks[n_marks++] = b.sb.size;
                msgpack_pack_bin_with_body(&b.pk, zeros, lens[i]);
                marks[n_marks++] = b.sb.size;
                msgpack_pack_ext_with_body(&b.pk, zeros, lens[i] + 3, 7); /* ext 8/16/32 */
        }
        marks[n_marks++] = b.sb.size;
        msgpack_pack_array(&b.pk, 16); /* array 16 */
        for (int i = 0; i < 16; i++)
                msgpack_pack_fix_uint8(&b.pk, (uint8_t)i);
        marks[n_marks++] = b.sb.size;
        msgpack_pack_map(&b.pk, 16); /* map 16 */
        for (int i = 0; i < 16; i++) {
                msgpack_pack_fix_uint8(&b.pk, (uint8_t)i);
                msgpack_pack_map(&b.pk, 0);
        }
        marks[n_marks++] = b.sb.size;
        msgpack_pack_array(&b.pk, 65536); /* array 32 */
        for (int i = 0; i < 65536; i++)
                msgpack_pack_nil(&b.pk);
        marks[n_marks++] = b.sb.size;
        msgpack_pack_map(&b.pk, 65536); /* map 32 */
        for (int i = 0; i < 65536; i++) {
                msgpack_pack_nil(&b.pk);
                msgpack_pack_array(&b.pk, 0);
        }
        marks[n_marks++] = b.sb.size;
        /* every prefix of the small values; around each large one's start; every 4099th
         * byte; and the last few */
        for (size_t cut = 0; cut <= b.sb.size; cut++) {
                bool near = cut < marks[0] || cut + 16 > b.sb.size || cut % 4099 == 0;
                for (size_t m = 0; !near && m < n_marks; m++)
                        near = cut >= marks[m] && cut < marks[m] + 8;
                if (!near)
                        continue;
                msgpack_zone z;
                msgpack_object o;
                size_t off = 0;
                bool whole;

                cr_assert(msgpack_zone_init(&z, 1 << 16));
                whole = msgpack_unpack(b.sb.data, cut, &off, &z, &o) == MSGPACK_UNPACK_SUCCESS &&
                        off == cut;
                msgpack_zone_destroy(&z);
                cr_assert_eq(ipc_msgpack_whole(b.sb.data, cut, IPC_MAX_DEPTH) == 0, whole,
                             "%zu of %zu bytes", cut, b.sb.size);
                cr_assert_eq(whole, cut == b.sb.size, "%zu of %zu bytes", cut, b.sb.size);
        }
        msgpack_pack_nil(&b.pk);
        cr_assert_eq(ipc_msgpack_whole(b.sb.data, b.sb.size, IPC_MAX_DEPTH), -EBADMSG,
                     "a value with a second one behind it");
        buf_done(&b);

        cr_assert_eq(ipc_msgpack_whole((const uint8_t[]){0xc1}, 1, IPC_MAX_DEPTH), -EBADMSG);
        cr_assert_eq(ipc_msgpack_whole(NULL, 0, IPC_MAX_DEPTH), -EBADMSG);
        cr_assert_eq(ipc_msgpack_whole((const uint8_t[]){0x07}, 1, 0), 0, "a scalar: depth 0");
        cr_assert_eq(ipc_msgpack_whole((const uint8_t[]){0x90}, 1, 0), 0, "[] opens nothing");
        /* a count that promises more elements than there are bytes */
        cr_assert_eq(ipc_msgpack_whole((const uint8_t[]){0xdd, 0xff, 0xff, 0xff, 0xff, 1}, 6,
                                       IPC_MAX_DEPTH),
                     -EBADMSG);
        for (int i = 0; i < 26; i++)
                deep[n++] = 0x91;
        deep[n++] = 0x01;
        for (unsigned levels = 1; levels <= 26; levels++) {
                const uint8_t *v = deep + 26 - levels; /* [[...[1]...]], @levels deep */
                for (unsigned max = 0; max <= 26; max++)
                        cr_assert_eq(ipc_msgpack_whole(v, levels + 1, max),
                                     levels <= max && levels <= IPC_MAX_DEPTH ? 0 : -ERANGE,
                                     "%u levels, at most %u", levels, max);
        }
}

/* Valid msgpack, invalid envelope: -EPROTO, the stream goes on. */
#define NO_MSGID (-1)

/* Feed @bytes, then a good request: the first must give -EPROTO with the reason, the
 * second must still decode. Return: the msgid the decoder read from the bad message, or
 * NO_MSGID when it could read none. */
static int64_t eproto_msgid(const uint8_t *bytes, size_t n)
{
        Buf b;
        IpcMessage m = {0};
        IpcDecoder *d = decoder(0);
        uint32_t got = 0;
        int64_t ret;

        buf_init(&b);
        pack_status_request(&b, 12);
        cr_assert_eq(ipc_decoder_feed(d, bytes, n), 0);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), -EPROTO);
        ret = ipc_decoder_error_msgid(d, &got) ? (int64_t)got : NO_MSGID;
        cr_assert_not_null(strstr(ipc_decoder_error_text(d), "not a MessagePack-RPC message"));
        cr_assert_eq(ipc_decoder_next(d, &m), 1, "the next message still decodes");
        assert_status_request(&m, 12);
        ipc_message_clear(&m);
        buf_done(&b);
        ipc_decoder_free(d);
        return ret;
}

Test(ipc_decoder, wrong_types)
{
        /* [0, "x", "ping", []]: msgid not an integer */
        const uint8_t a[] = {0x94, 0x00, 0xa1, 'x', 0xa4, 'p', 'i', 'n', 'g', 0x90};
        cr_assert_eq(eproto_msgid(a, sizeof(a)), NO_MSGID);
        /* [0, 5, 7, []]: method not a string */
        const uint8_t b[] = {0x94, 0x00, 0x05, 0x07, 0x90};
        cr_assert_eq(eproto_msgid(b, sizeof(b)), 5);
        /* [0, 6, "ping", {}]: params not an array */
        const uint8_t c[] = {0x94, 0x00, 0x06, 0xa4, 'p', 'i', 'n', 'g', 0x80};
        cr_assert_eq(eproto_msgid(c, sizeof(c)), 6);
        /* [0, 7, "ping"]: three elements */
        const uint8_t e[] = {0x93, 0x00, 0x07, 0xa4, 'p', 'i', 'n', 'g'};
        cr_assert_eq(eproto_msgid(e, sizeof(e)), 7);
        /* [3, 1, "ping", []]: unknown type */
        const uint8_t f[] = {0x94, 0x03, 0x01, 0xa4, 'p', 'i', 'n', 'g', 0x90};
        cr_assert_eq(eproto_msgid(f, sizeof(f)), NO_MSGID);
        /* [0, 2^32, "ping", []]: msgid too large */
        const uint8_t g[] = {0x94, 0x00, 0xcf, 0,   0,   0,   1,   0,   0,
                             0,    0,    0xa4, 'p', 'i', 'n', 'g', 0x90};
        cr_assert_eq(eproto_msgid(g, sizeof(g)), NO_MSGID);
        /* [0, 8, "pi\0g", []]: NUL in the method */
        const uint8_t h[] = {0x94, 0x00, 0x08, 0xa4, 'p', 'i', 0, 'g', 0x90};
        cr_assert_eq(eproto_msgid(h, sizeof(h)), 8);
        /* [] */
        const uint8_t i[] = {0x90};
        cr_assert_eq(eproto_msgid(i, sizeof(i)), NO_MSGID);
}

Test(ipc_decoder, every_prefix_of_a_rich_message)
{
        Buf b;
        IpcMessage m = {0};

        buf_init(&b);
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 65536, "job.submit", 3), 0);
        cr_assert_eq(ipc_pack_cstr(&b.pk, "mixed"), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 7), 0);
        cr_assert_eq(ipc_pack_kv_int(&b.pk, "neg", -123456789012LL), 0);
        cr_assert_eq(ipc_pack_kv_double(&b.pk, "pi", 3.25), 0);
        cr_assert_eq(ipc_pack_kv_bool(&b.pk, "yes", true), 0);
        cr_assert_eq(ipc_pack_kv_nil(&b.pk, "none"), 0);
        cr_assert_eq(ipc_pack_cstr(&b.pk, "bin"), 0);
        cr_assert_eq(msgpack_pack_bin(&b.pk, 300), 0);
        char zeros[300] = {0};
        cr_assert_eq(msgpack_pack_bin_body(&b.pk, zeros, sizeof(zeros)), 0);
        cr_assert_eq(ipc_pack_cstr(&b.pk, "ext"), 0);
        cr_assert_eq(msgpack_pack_ext(&b.pk, 3, 1), 0);
        cr_assert_eq(msgpack_pack_ext_body(&b.pk, "abc", 3), 0);
        cr_assert_eq(ipc_pack_kv_uint(&b.pk, "big", UINT64_MAX), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 0), 0);

        for (size_t cut = 0; cut < b.sb.size; cut++) {
                IpcDecoder *d = decoder(0);
                cr_assert_eq(ipc_decoder_feed(d, b.sb.data, cut), 0);
                cr_assert_eq(ipc_decoder_next(d, &m), 0, "prefix of %zu bytes", cut);
                cr_assert_eq(ipc_decoder_feed(d, b.sb.data + cut, b.sb.size - cut), 0);
                cr_assert_eq(ipc_decoder_next(d, &m), 1, "split at %zu", cut);
                const msgpack_object *args = ipc_array_at(&m.params, 1);
                int64_t neg;
                double pi;
                bool yes;
                uint64_t big;
                cr_assert_eq(ipc_read_int(ipc_map_find(args, "neg"), "neg", &neg, NULL), 0);
                cr_assert_eq(neg, -123456789012LL);
                cr_assert_eq(ipc_read_double(ipc_map_find(args, "pi"), "pi", &pi, NULL), 0);
                cr_assert_float_eq(pi, 3.25, 1e-9);
                cr_assert_eq(ipc_read_bool(ipc_map_find(args, "yes"), "yes", &yes, NULL), 0);
                cr_assert(yes);
                cr_assert(ipc_object_is_nil(ipc_map_find(args, "none")));
                cr_assert_eq(ipc_map_find(args, "bin")->via.bin.size, 300);
                cr_assert_eq(ipc_read_uint(ipc_map_find(args, "big"), "big", &big, NULL), 0);
                cr_assert_eq(big, UINT64_MAX);
                ipc_message_clear(&m);
                ipc_decoder_free(d);
        }
        buf_done(&b);
}

Test(ipc_value, readers_explain_errors)
{
        Buf b;
        IpcMessage m = {0};
        IpcStatus st = {0};
        IpcDecoder *d = decoder(0);
        char small[4];
        uint64_t u;
        int64_t i;
        const msgpack_object *o;

        buf_init(&b);
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 1, "x", 1), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 4), 0);
        cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "timeout_ms", "soon"), 0);
        cr_assert_eq(ipc_pack_kv_int(&b.pk, "neg", -5), 0);
        cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "long", "abcdef"), 0);
        cr_assert_eq(ipc_pack_kv_double(&b.pk, "f", 1.5), 0);
        cr_assert_eq(ipc_decoder_feed(d, b.sb.data, b.sb.size), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        const msgpack_object *map = ipc_array_at(&m.params, 0);

        cr_assert_eq(ipc_read_uint(ipc_map_find(map, "timeout_ms"), "timeout_ms", &u, &st),
                     -EINVAL);
        cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT);
        cr_assert_str_eq(st.message, "timeout_ms: expected an unsigned integer, got a string");
        cr_assert_eq(ipc_read_uint(ipc_map_find(map, "neg"), "neg", &u, &st), -ERANGE);
        cr_assert_eq(ipc_read_int(ipc_map_find(map, "f"), "f", &i, &st), -EINVAL,
                     "a float never becomes an integer");
        cr_assert_eq(ipc_read_int_range(ipc_map_find(map, "neg"), "neg", 0, 10, &i, &st), -ERANGE);
        cr_assert_eq(ipc_read_str(ipc_map_find(map, "long"), "long", small, sizeof(small), &st),
                     -ERANGE);
        cr_assert_eq(ipc_read_str(ipc_map_find(map, "path"), "path", small, sizeof(small), &st),
                     -ENOENT);
        cr_assert_str_eq(st.message, "missing path");
        cr_assert_eq(ipc_read_map(ipc_map_find(map, "neg"), "neg", &o, &st), -EINVAL);
        cr_assert_eq(ipc_read_array(&m.params, "params", &o, &st), 0);
        cr_assert_eq(o, &m.params);
        cr_assert_null(ipc_array_at(&m.params, 1));
        cr_assert_null(ipc_map_find(&m.params, "x"), "not a map");
        cr_assert(ipc_object_streq(ipc_map_find(map, "long"), "abcdef"));
        ipc_message_clear(&m);
        buf_done(&b);
        ipc_decoder_free(d);
}

Test(ipc_status, errno_codes_round_trip)
{
        IpcStatus st = {0};

        cr_assert_str_eq(ipc_status_code_from_errno(-EINVAL), IPC_INVALID_ARGUMENT);
        cr_assert_str_eq(ipc_status_code_from_errno(ENOENT), IPC_NOT_FOUND);
        cr_assert_str_eq(ipc_status_code_from_errno(-EACCES), IPC_PERMISSION_DENIED);
        cr_assert_str_eq(ipc_status_code_from_errno(-EAGAIN), IPC_OVERLOADED);
        cr_assert_str_eq(ipc_status_code_from_errno(-ESHUTDOWN), IPC_UNAVAILABLE);
        cr_assert_str_eq(ipc_status_code_from_errno(-ETIMEDOUT), IPC_DEADLINE_EXCEEDED);
        cr_assert_str_eq(ipc_status_code_from_errno(-EMSGSIZE), IPC_MESSAGE_TOO_LARGE);
        cr_assert_str_eq(ipc_status_code_from_errno(-EBADMSG), IPC_MALFORMED_MESSAGE);
        cr_assert_str_eq(ipc_status_code_from_errno(-EXDEV), IPC_INTERNAL);
        const char *codes[] = {IPC_INVALID_ARGUMENT,  IPC_NOT_FOUND,       IPC_PERMISSION_DENIED,
                               IPC_OVERLOADED,        IPC_UNAVAILABLE,     IPC_CANCELLED,
                               IPC_DEADLINE_EXCEEDED, IPC_METHOD_NOT_FOUND};
        for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); k++) {
                int e = ipc_status_errno_from_code(codes[k], strlen(codes[k]));
                cr_assert_str_eq(ipc_status_code_from_errno(e), codes[k]);
        }
        cr_assert_eq(ipc_status_errno_from_code("NOPE", 4), -EPROTO);
        cr_assert_eq(ipc_status_set(&st, IPC_NOT_FOUND, 0, "no job %d", 3), -ENOENT);
        cr_assert(ipc_status_failed(&st));
        cr_assert_str_eq(st.message, "no job 3");
        cr_assert_eq(ipc_status_errno(&st, -EPERM, NULL), -EPERM);
        cr_assert_str_eq(st.code, IPC_PERMISSION_DENIED);
        cr_assert_str_eq(st.message, strerror(EPERM));
        ipc_status_clear(&st);
        cr_assert_not(ipc_status_failed(&st));
}

/* xorshift64: a fixed sequence, so a failure reproduces. */
static uint64_t rng_next(uint64_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        return *s;
}

/* Mutated valid streams in random chunks: every return obeys decoder.h's contract.
 * (tests/fuzz/ipc_decoder.c is the open-ended version of this.) */
Test(ipc_decoder, random_mutations_keep_the_contract)
{
        Buf b;
        uint64_t seed = 0x9e3779b97f4a7c15ULL;
        char mutated[512];

        buf_init(&b);
        pack_status_request(&b, 70000);
        cr_assert_eq(ipc_pack_request_begin(&b.pk, 2, "job.submit", 3), 0);
        cr_assert_eq(ipc_pack_cstr(&b.pk, "sha256"), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 2), 0);
        cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "path", "/usr/include/stdio.h"), 0);
        cr_assert_eq(ipc_pack_kv_double(&b.pk, "x", -0.5), 0);
        cr_assert_eq(msgpack_pack_map(&b.pk, 1), 0);
        cr_assert_eq(ipc_pack_kv_int(&b.pk, "priority", -3), 0);
        cr_assert_eq(ipc_pack_error_response(&b.pk, 9, IPC_INTERNAL, "boom"), 0);
        cr_assert_leq(b.sb.size, sizeof(mutated));

        for (int iter = 0; iter < 4000; iter++) {
                size_t max = 32 + rng_next(&seed) % 256;
                IpcDecoder *d = decoder(max);
                int sticky = 0;

                memcpy(mutated, b.sb.data, b.sb.size);
                for (int k = 1 + (int)(rng_next(&seed) % 4); k > 0; k--)
                        mutated[rng_next(&seed) % b.sb.size] = (char)rng_next(&seed);
                for (size_t off = 0; off < b.sb.size && !sticky;) {
                        size_t n = 1 + rng_next(&seed) % 16;
                        if (n > b.sb.size - off)
                                n = b.sb.size - off;
                        cr_assert_eq(ipc_decoder_feed(d, mutated + off, n), 0);
                        off += n;
                        for (;;) {
                                IpcMessage m;
                                int r = ipc_decoder_next(d, &m);
                                if (r == 0)
                                        break;
                                if (r == 1) {
                                        cr_assert_leq(m.size, max);
                                        if (m.type != IPC_RESPONSE) {
                                                cr_assert_not_null(m.method);
                                                cr_assert_eq(m.params.type, MSGPACK_OBJECT_ARRAY);
                                        }
                                        ipc_message_clear(&m);
                                        continue;
                                }
                                if (r == -EPROTO)
                                        continue;
                                cr_assert(r == -EMSGSIZE || r == -EBADMSG,
                                          "iteration %d: unexpected %d", iter, r);
                                sticky = r;
                                break;
                        }
                }
                if (sticky)
                        cr_assert_eq(ipc_decoder_next(d, &(IpcMessage){0}), sticky);
                ipc_decoder_free(d);
        }
        buf_done(&b);
}

/*
 * [0, 1, "", []]: msgpack-c gives an empty string a NULL pointer, which the decoder once
 * passed to memchr() (undefined behaviour, found under UBSan). ipc/build.mk builds this
 * file with -fsanitize=undefined, so the old code fails here; now the empty name is a
 * well-formed request whose method no table has (METHOD_NOT_FOUND in the daemon).
 */
Test(ipc_decoder, empty_method_name)
{
        static const uint8_t bytes[] = {0x94, 0x00, 0x01, 0xa0, 0x90};
        IpcDecoder *d = decoder(64);
        IpcMessage m;

        cr_assert_eq(ipc_decoder_feed(d, bytes, sizeof(bytes)), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 1);
        cr_assert_eq(m.type, IPC_REQUEST);
        cr_assert_eq(m.msgid, 1);
        cr_assert_str_eq(m.method, "");
        cr_assert_eq(m.method_len, 0);
        cr_assert_eq(m.params.via.array.size, 0);
        ipc_message_clear(&m);
        ipc_decoder_free(d);
}

/* Asking a new decoder for a message before any byte arrived: no buffer yet, and
 * NULL + 0 was undefined behaviour. gcc's UBSan does not flag that one; clang's does, so
 * the input that found it is a seed of tests/fuzz/corpus/daemon_request, which
 * `make check-fuzz` replays. */
Test(ipc_decoder, next_before_any_byte)
{
        IpcDecoder *d = decoder(64);
        IpcMessage m;

        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        cr_assert_eq(ipc_decoder_feed(d, "", 0), 0);
        cr_assert_eq(ipc_decoder_next(d, &m), 0);
        ipc_decoder_free(d);
}

static int pack_pair(msgpack_packer *pk, const void *arg)
{
        const int *v = arg;
        return msgpack_pack_array(pk, 2) | msgpack_pack_int(pk, v[0]) | msgpack_pack_int(pk, v[1]);
}

/* IPC_PACK_MAP counts its entries (the *_IF ones only when their condition holds) and
 * packs the very bytes a hand-counted map of the same pairs would. */
Test(ipc_encoder, pack_map_counts_its_entries)
{
        static const int pair[2] = {4, 5};
        for (int with = 0; with <= 1; with++) {
                Buf a, b;
                buf_init(&a);
                buf_init(&b);
                cr_assert_eq(IPC_PACK_MAP(&a.pk, IPC_KV_UINT("u", UINT64_MAX),
                                          IPC_KV_UINT_IF(with, "maybe", 7), IPC_KV_INT("i", -3),
                                          IPC_KV_CSTR("s", "text"), IPC_KV_CSTR("none", NULL),
                                          IPC_KV_BOOL("b", true), IPC_KV_NIL("n"),
                                          IPC_KV_PACK("p", pack_pair, pair),
                                          IPC_KV_PACK_IF(!with, "q", pack_pair, pair)),
                             0);
                cr_assert_eq(msgpack_pack_map(&b.pk, 8), 0);
                cr_assert_eq(ipc_pack_kv_uint(&b.pk, "u", UINT64_MAX), 0);
                if (with)
                        cr_assert_eq(ipc_pack_kv_uint(&b.pk, "maybe", 7), 0);
                cr_assert_eq(ipc_pack_kv_int(&b.pk, "i", -3), 0);
                cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "s", "text"), 0);
                cr_assert_eq(ipc_pack_kv_cstr(&b.pk, "none", NULL), 0);
                cr_assert_eq(ipc_pack_kv_bool(&b.pk, "b", true), 0);
                cr_assert_eq(ipc_pack_kv_nil(&b.pk, "n"), 0);
                cr_assert_eq(ipc_pack_cstr(&b.pk, "p"), 0);
                cr_assert_eq(pack_pair(&b.pk, pair), 0);
                if (!with) {
                        cr_assert_eq(ipc_pack_cstr(&b.pk, "q"), 0);
                        cr_assert_eq(pack_pair(&b.pk, pair), 0);
                }
                cr_assert_eq(a.sb.size, b.sb.size);
                cr_assert_eq(memcmp(a.sb.data, b.sb.data, a.sb.size), 0);
                buf_done(&a);
                buf_done(&b);
        }
}

/* IpcPackBuf: packs in the caller's room, moves to the heap past it with every byte
 * kept, and is empty in its room again after ipc_packbuf_free(). */
Test(ipc_packbuf, stays_in_its_room_then_moves_to_the_heap_with_every_byte)
{
        char room[16], big[100];
        IpcPackBuf b;
        msgpack_packer pk;
        msgpack_unpacked u;
        size_t off = 0;

        memset(big, 'x', sizeof(big));
        ipc_packbuf_init(&b, room, sizeof(room));
        msgpack_packer_init(&pk, &b, ipc_packbuf_write);
        cr_assert_eq(msgpack_pack_array(&pk, 2), 0);
        cr_assert_eq(ipc_pack_cstr(&pk, "short"), 0);
        cr_assert_eq(b.data, room, "7 bytes left the room");
        cr_assert_eq(ipc_pack_strn(&pk, big, sizeof(big)), 0);
        cr_assert_neq(b.data, room, "109 bytes stayed in a 16-byte room");
        cr_assert_geq(b.alloc, b.size);

        msgpack_unpacked_init(&u);
        cr_assert_eq(msgpack_unpack_next(&u, b.data, b.size, &off), MSGPACK_UNPACK_SUCCESS);
        cr_assert_eq(off, b.size);
        cr_assert_eq(u.data.via.array.size, 2);
        cr_assert_eq(u.data.via.array.ptr[0].via.str.size, 5);
        cr_assert_eq(memcmp(u.data.via.array.ptr[0].via.str.ptr, "short", 5), 0);
        cr_assert_eq(u.data.via.array.ptr[1].via.str.size, sizeof(big));
        cr_assert_eq(memcmp(u.data.via.array.ptr[1].via.str.ptr, big, sizeof(big)), 0);
        msgpack_unpacked_destroy(&u);

        ipc_packbuf_free(&b);
        cr_assert_eq(b.data, room);
        cr_assert_eq(b.size, 0);
        cr_assert_eq(b.alloc, sizeof(room));
        cr_assert_eq(ipc_packbuf_write(&b, "abc", 3), 0);
        cr_assert_eq(b.data, room, "a freed buffer did not start in its room again");
        cr_assert_eq(memcmp(room, "abc", 3), 0);
}

static int write_fails(void *data, const char *buf, size_t len)
{
        (void)data;
        (void)buf;
        (void)len;
        return -1;
}

/* ipc_pack_strn() writes a short string in one call: the same bytes msgpack-c's two
 * calls write, at every length on both sides of the fixstr bound (31/32 bytes), and a
 * failing write target is -ENOMEM. */
Test(ipc_encoder, strings_pack_as_msgpack_c_packs_them_at_every_length)
{
        char text[70];
        msgpack_packer failing;

        for (size_t i = 0; i < sizeof(text); i++)
                text[i] = (char)('a' + i % 26);
        for (size_t len = 0; len <= sizeof(text); len++) {
                Buf a, b;
                buf_init(&a);
                buf_init(&b);
                cr_assert_eq(ipc_pack_strn(&a.pk, text, len), 0);
                cr_assert_eq(msgpack_pack_str(&b.pk, len), 0);
                cr_assert_eq(msgpack_pack_str_body(&b.pk, text, len), 0);
                cr_assert_eq(a.sb.size, b.sb.size, "length %zu: %zu bytes, msgpack-c %zu", len,
                             a.sb.size, b.sb.size);
                cr_assert_eq(memcmp(a.sb.data, b.sb.data, a.sb.size), 0, "length %zu differs", len);
                buf_done(&a);
                buf_done(&b);
        }
        msgpack_packer_init(&failing, NULL, write_fails);
        cr_assert_eq(ipc_pack_strn(&failing, text, 5), -ENOMEM);
        cr_assert_eq(ipc_pack_strn(&failing, text, 40), -ENOMEM);
        cr_assert_eq(ipc_pack_cstr(&failing, "key"), -ENOMEM);
}
