/* SPDX-License-Identifier: MIT */
/*
 * encoder.h — write MessagePack-RPC messages (ipc/).
 *
 * Each ipc_pack_*_begin() writes a message's envelope with msgpack-c's msgpack_packer and
 * leaves the packer positioned where the caller packs the rest with the ordinary
 * msgpack_pack_*() calls:
 *
 *     ipc_pack_request_begin(pk, msgid, "job.status", 1);   then pack 1 param
 *     ipc_pack_response_begin(pk, msgid);                    then pack exactly 1 result
 *     ipc_pack_notification_begin(pk, "job.done", 2);        then pack 2 params
 *     ipc_pack_error_response(pk, msgid, code, "...")        complete, nothing to add
 *
 * The packer is usually bound to a msgpack_sbuffer (msgpack_packer_init(&pk, &sbuf,
 * msgpack_sbuffer_write)), whose bytes the caller then writes to the socket. Nothing
 * here does I/O, so the encoder is as pure as the decoder (decoder.h).
 *
 * Every function returns 0 or -ENOMEM (the packer's write callback failed: for an
 * sbuffer, realloc failed). On failure the buffer holds a partial message: the caller
 * drops the whole buffer (msgpack_sbuffer_clear()) rather than sending it.
 * Context: any thread or fiber; nothing yields; a packer is used by one caller at a time.
 */
#ifndef FIBERD_IPC_ENCODER_H
#define FIBERD_IPC_ENCODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "ipc/status.h"
#include "scheduler/base/macro.h"

/* [0, msgid, method, params...]: writes the array header of @nparams params. */
int ipc_pack_request_begin(msgpack_packer *pk, uint32_t msgid, const char *method,
                           uint32_t nparams);

/* [1, msgid, nil, result]: the caller packs the one result object next. */
int ipc_pack_response_begin(msgpack_packer *pk, uint32_t msgid);

/*
 * [1, msgid, {"code": code, "message": message}, nil]: a whole error response. @code is
 * one of the IPC_* constants; @message is printf-style text a person can act on.
 */
__attribute__((format(printf, 4, 5))) int
ipc_pack_error_response(msgpack_packer *pk, uint32_t msgid, const char *code, const char *fmt, ...);

/* ipc_pack_status_response - the error response for @st (which must hold an error). */
int ipc_pack_status_response(msgpack_packer *pk, uint32_t msgid, const IpcStatus *st);

/* [2, method, params...]: writes the array header of @nparams params. */
int ipc_pack_notification_begin(msgpack_packer *pk, const char *method, uint32_t nparams);

/*
 * ipc_pack_error_map - the map {"code": code, "message": message} alone, as it appears in
 * an error response and in a job record's "error" field (PROTOCOL.md, "Job record").
 */
int ipc_pack_error_map(msgpack_packer *pk, const char *code, const char *message);

/* ipc_pack_cstr - a NUL-terminated string as a msgpack str; NULL packs nil. */
int ipc_pack_cstr(msgpack_packer *pk, const char *s);

/* ipc_pack_strn - @len bytes of @s as a msgpack str. */
int ipc_pack_strn(msgpack_packer *pk, const char *s, size_t len);

/* ipc_pack_kv_* - one key/value pair inside a map the caller opened (key: C string). */
int ipc_pack_kv_cstr(msgpack_packer *pk, const char *key, const char *value);
int ipc_pack_kv_uint(msgpack_packer *pk, const char *key, uint64_t value);
int ipc_pack_kv_int(msgpack_packer *pk, const char *key, int64_t value);
int ipc_pack_kv_bool(msgpack_packer *pk, const char *key, bool value);
int ipc_pack_kv_double(msgpack_packer *pk, const char *key, double value);
int ipc_pack_kv_nil(msgpack_packer *pk, const char *key);

/*
 * A map packed from a table, so its size is counted, never written by hand: adding a
 * key cannot leave the header and the pairs out of step.
 *
 *     r |= IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ID, j->id),
 *                       IPC_KV_CSTR(IPC_KEY_STATE, name),
 *                       IPC_KV_UINT_IF(stalls != NULL, IPC_KEY_STALLS, stalls ? *stalls : 0),
 *                       IPC_KV_PACK(IPC_KEY_PROGRESS, pack_progress, j));
 *
 * Each entry packs as the ipc_pack_kv_*() of its type would, in table order; an *_IF
 * entry whose condition is false is left out (and not counted). An IPC_KV_PACK entry
 * packs its key, then calls @fn(pk, @arg) for the value, which must pack exactly one
 * object and return 0 or nonzero on failure.
 */
typedef int IpcPackFn(msgpack_packer *pk, const void *arg);

typedef enum IpcKvType {
        IPC_KV_TYPE_SKIP, /* left out: an *_IF entry whose condition was false */
        IPC_KV_TYPE_UINT,
        IPC_KV_TYPE_INT,
        IPC_KV_TYPE_CSTR, /* NULL packs nil */
        IPC_KV_TYPE_BOOL,
        IPC_KV_TYPE_NIL,
        IPC_KV_TYPE_PACK, /* the value is packed by a callback */
} IpcKvType;

typedef struct IpcKv {
        const char *key;
        IpcKvType type;
        union {
                uint64_t u;
                int64_t i;
                const char *s;
                bool b;
                struct {
                        IpcPackFn *fn;
                        const void *arg;
                } pack;
        };
} IpcKv;

#define IPC_KV_UINT(k, v)                                                                          \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_UINT, .u = (v)                                     \
        }
#define IPC_KV_INT(k, v)                                                                           \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_INT, .i = (v)                                      \
        }
#define IPC_KV_CSTR(k, v)                                                                          \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_CSTR, .s = (v)                                     \
        }
#define IPC_KV_BOOL(k, v)                                                                          \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_BOOL, .b = (v)                                     \
        }
#define IPC_KV_NIL(k)                                                                              \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_NIL                                                \
        }
#define IPC_KV_PACK(k, f, a)                                                                       \
        {                                                                                          \
                .key = (k), .type = IPC_KV_TYPE_PACK, .pack = {(f), (a) }                          \
        }
#define IPC_KV_UINT_IF(c, k, v)                                                                    \
        {                                                                                          \
                .key = (k), .type = (c) ? IPC_KV_TYPE_UINT : IPC_KV_TYPE_SKIP, .u = (v)            \
        }
#define IPC_KV_PACK_IF(c, k, f, a)                                                                 \
        {                                                                                          \
                .key = (k), .type = (c) ? IPC_KV_TYPE_PACK : IPC_KV_TYPE_SKIP, .pack = {(f), (a) } \
        }

/* ipc_pack_map_kv - the map of the @n entries of @kv (SKIP entries left out). */
int ipc_pack_map_kv(msgpack_packer *pk, const IpcKv *kv, size_t n);

/* IPC_PACK_MAP - ipc_pack_map_kv() over the entries given, counted by the compiler. */
#define IPC_PACK_MAP(pk, ...)                                                                      \
        ipc_pack_map_kv((pk), (const IpcKv[]){__VA_ARGS__},                                        \
                        ELEMENTSOF(((const IpcKv[]){__VA_ARGS__})))

#endif /* FIBERD_IPC_ENCODER_H */
