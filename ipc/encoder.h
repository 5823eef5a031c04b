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

#endif /* FIBERD_IPC_ENCODER_H */
