/* SPDX-License-Identifier: MIT */
/*
 * encoder.c — MessagePack-RPC envelopes with msgpack-c's packer (see encoder.h).
 *
 * msgpack_pack_*() return 0 or -1 (the write callback failed); the only write callback
 * fiberd uses is msgpack_sbuffer_write, which fails only when realloc does, so -1 becomes
 * -ENOMEM here. The PACK() macro keeps each function a straight list of fields.
 */
#include "ipc/encoder.h"
#include "ipc/decoder.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PACK(call)                                                                                 \
        do {                                                                                       \
                if ((call) < 0)                                                                    \
                        return -ENOMEM;                                                            \
        } while (0)

int ipc_pack_strn(msgpack_packer *pk, const char *s, size_t len)
{
        /* A short string (every key, most values) goes to the write target in one call:
         * msgpack's fixstr header (0xa0 | length, the spec's "fixstr" format) then its
         * bytes. msgpack-c calls the target twice, once for each; a job record's 21 keys
         * made that a third of its packing calls. */
        if (len < 32) {
                char b[32 + 1];
                b[0] = (char)(0xa0 | len);
                memcpy(b + 1, s, len);
                return pk->callback(pk->data, b, len + 1) ? -ENOMEM : 0;
        }
        PACK(msgpack_pack_str(pk, len));
        PACK(msgpack_pack_str_body(pk, s, len));
        return 0;
}

int ipc_pack_cstr(msgpack_packer *pk, const char *s)
{
        if (!s) {
                PACK(msgpack_pack_nil(pk));
                return 0;
        }
        return ipc_pack_strn(pk, s, strlen(s));
}

int ipc_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method, uint32_t nparams)
{
        PACK(msgpack_pack_array(pk, 4));
        PACK(msgpack_pack_uint8(pk, IPC_REQUEST));
        PACK(msgpack_pack_uint32(pk, msgid));
        PACK(ipc_pack_cstr(pk, method));
        PACK(msgpack_pack_array(pk, nparams));
        return 0;
}

int ipc_pack_response_begin(msgpack_packer *pk, uint32_t msgid)
{
        /* [1, msgid, nil, ...]: packed here and written at once, one write for what
         * msgpack_pack_array(), _uint8(), _uint32() and _nil() write in four (this runs for
         * every answer). msgid in its shortest form, as msgpack_pack_uint32() writes it. */
        char b[8] = {(char)0x94, IPC_RESPONSE};
        size_t n = 2;

        if (msgid < 0x80) {
                b[n++] = (char)msgid;
        } else if (msgid < 0x100) {
                b[n++] = (char)0xcc;
                b[n++] = (char)msgid;
        } else if (msgid < 0x10000) {
                b[n++] = (char)0xcd;
                b[n++] = (char)(msgid >> 8);
                b[n++] = (char)msgid;
        } else {
                b[n++] = (char)0xce;
                for (int shift = 24; shift >= 0; shift -= 8)
                        b[n++] = (char)(msgid >> shift);
        }
        b[n++] = (char)0xc0;
        PACK(pk->callback(pk->data, b, n));
        return 0;
}

int ipc_pack_error_map(msgpack_packer *pk, const char *code, const char *message)
{
        PACK(msgpack_pack_map(pk, 2));
        PACK(ipc_pack_kv_cstr(pk, IPC_KEY_CODE, code ? code : IPC_INTERNAL));
        PACK(ipc_pack_kv_cstr(pk, IPC_KEY_MESSAGE, message ? message : ""));
        return 0;
}

static int pack_error_response(msgpack_packer *pk, uint32_t msgid, const char *code,
                               const char *message)
{
        PACK(msgpack_pack_array(pk, 4));
        PACK(msgpack_pack_uint8(pk, IPC_RESPONSE));
        PACK(msgpack_pack_uint32(pk, msgid));
        PACK(ipc_pack_error_map(pk, code, message));
        PACK(msgpack_pack_nil(pk));
        return 0;
}

int ipc_pack_error_response(msgpack_packer *pk, uint32_t msgid, const char *code, const char *fmt,
                            ...)
{
        char message[IPC_STATUS_MESSAGE_MAX];
        va_list ap;

        va_start(ap, fmt);
        if (vsnprintf(message, sizeof(message), fmt, ap) < 0)
                message[0] = '\0';
        va_end(ap);
        return pack_error_response(pk, msgid, code, message);
}

int ipc_pack_status_response(msgpack_packer *pk, uint32_t msgid, const IpcStatus *st)
{
        if (!st || !st->code)
                return pack_error_response(pk, msgid, IPC_INTERNAL,
                                           "the server failed without saying why");
        return pack_error_response(pk, msgid, st->code, st->message);
}

int ipc_pack_notification_begin(msgpack_packer *pk, const char *method, uint32_t nparams)
{
        PACK(msgpack_pack_array(pk, 3));
        PACK(msgpack_pack_uint8(pk, IPC_NOTIFICATION));
        PACK(ipc_pack_cstr(pk, method));
        PACK(msgpack_pack_array(pk, nparams));
        return 0;
}

int ipc_pack_kv_cstr(msgpack_packer *pk, const char *key, const char *value)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(ipc_pack_cstr(pk, value));
        return 0;
}

int ipc_pack_kv_uint(msgpack_packer *pk, const char *key, uint64_t value)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(msgpack_pack_uint64(pk, value));
        return 0;
}

int ipc_pack_kv_int(msgpack_packer *pk, const char *key, int64_t value)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(msgpack_pack_int64(pk, value));
        return 0;
}

int ipc_pack_kv_bool(msgpack_packer *pk, const char *key, bool value)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(value ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
        return 0;
}

int ipc_pack_kv_double(msgpack_packer *pk, const char *key, double value)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(msgpack_pack_double(pk, value));
        return 0;
}

int ipc_pack_kv_nil(msgpack_packer *pk, const char *key)
{
        PACK(ipc_pack_cstr(pk, key));
        PACK(msgpack_pack_nil(pk));
        return 0;
}

int ipc_pack_map_kv(msgpack_packer *pk, const IpcKv *kv, size_t n)
{
        uint32_t count = 0;

        for (size_t i = 0; i < n; i++)
                count += kv[i].type != IPC_KV_TYPE_SKIP;
        PACK(msgpack_pack_map(pk, count));
        for (size_t i = 0; i < n; i++) {
                switch (kv[i].type) {
                case IPC_KV_TYPE_SKIP:
                        break;
                case IPC_KV_TYPE_UINT:
                        PACK(ipc_pack_kv_uint(pk, kv[i].key, kv[i].u));
                        break;
                case IPC_KV_TYPE_INT:
                        PACK(ipc_pack_kv_int(pk, kv[i].key, kv[i].i));
                        break;
                case IPC_KV_TYPE_CSTR:
                        PACK(ipc_pack_kv_cstr(pk, kv[i].key, kv[i].s));
                        break;
                case IPC_KV_TYPE_BOOL:
                        PACK(ipc_pack_kv_bool(pk, kv[i].key, kv[i].b));
                        break;
                case IPC_KV_TYPE_NIL:
                        PACK(ipc_pack_kv_nil(pk, kv[i].key));
                        break;
                case IPC_KV_TYPE_PACK:
                        PACK(ipc_pack_cstr(pk, kv[i].key));
                        if (kv[i].pack.fn(pk, kv[i].pack.arg) != 0)
                                return -ENOMEM;
                        break;
                }
        }
        return 0;
}
