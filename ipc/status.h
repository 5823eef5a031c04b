/* SPDX-License-Identifier: MIT */
/*
 * status.h — the error half of fiberd's wire contract (ipc/).
 *
 * A MessagePack-RPC response carries either a result or an error; fiberd's errors are a
 * map {"code": <UPPER_CASE string>, "message": <text a person can act on>} (PROTOCOL.md,
 * "Errors"). The code is for programs (stable, a closed list below), the message is for
 * people (names the cause and, when there is one, the fix).
 *
 * Inside fiberd everything fails with a negative errno (shared/STYLE.md rule 1); this file
 * is the one place that turns an errno into a wire code (ipc_status_code_from_errno()) and
 * back (ipc_status_errno_from_code(), for the client). IpcStatus carries a code plus a
 * formatted message from the place that knows what went wrong (a method handler, a
 * ipc_read_*() helper) to the place that writes the response (the daemon's server loop).
 *
 * The mapping follows the spirit of gRPC's canonical codes (google.rpc.Code), which is
 * where most of the names come from; the errno side follows what the syscalls mean.
 *
 * Pure: no I/O, no allocation, usable from any thread or fiber.
 */
#ifndef FIBERD_IPC_STATUS_H
#define FIBERD_IPC_STATUS_H

#include <stdbool.h>
#include <stddef.h>

#include "ipc/protocol.h"

/* The wire codes (IPC_INVALID_ARGUMENT ... IPC_INTERNAL) and their table live in
 * protocol.h, with the rest of the contract. */

/* Longest message text kept in an IpcStatus, bytes including the NUL. */
#define IPC_STATUS_MESSAGE_MAX 256

/*
 * IpcStatus - an error on its way to (or from) the wire. A zeroed IpcStatus means "no
 * error" (code == NULL). Plain value, no destructor; the code always points to one of the
 * IPC_* code constants of protocol.h (static storage).
 */
typedef struct IpcStatus {
        const char *code;                     /* IPC_* constant; NULL = ok */
        int error;                            /* the negative errno behind it, 0 = none */
        char message[IPC_STATUS_MESSAGE_MAX]; /* NUL-terminated, truncated to fit */
} IpcStatus;

/*
 * ipc_status_code_from_errno - the wire code for @error (negative errno; a positive
 * value is taken as its negation). Never NULL: unknown errors give IPC_INTERNAL.
 * Context: any. Pure.
 */
const char *ipc_status_code_from_errno(int error);

/*
 * ipc_status_errno_from_code - the negative errno the client reports for a wire @code of
 * @len bytes (not NUL-terminated). Unknown codes give -EPROTO. Context: any. Pure.
 */
int ipc_status_errno_from_code(const char *code, size_t len);

/*
 * ipc_status_canonical_code - the IPC_* constant equal to @code (@len bytes), so a code
 * read from the wire can be stored in IpcStatus.code; IPC_INTERNAL for unknown codes.
 */
const char *ipc_status_canonical_code(const char *code, size_t len);

/*
 * ipc_status_set - fill @st (may be NULL: then nothing happens) with @code and a
 * printf-style message. @error is the negative errno it stands for (0 when none; the
 * code's usual errno is stored then). Returns @error if non-zero, else the code's errno,
 * so a caller can write `return ipc_status_set(st, IPC_NOT_FOUND, 0, "no job %lu", id);`.
 * Context: any.
 */
__attribute__((format(printf, 4, 5))) int ipc_status_set(IpcStatus *st, const char *code, int error,
                                                         const char *fmt, ...);

/*
 * ipc_status_errno - like ipc_status_set() with the code derived from @error (negative
 * errno). If @fmt is NULL the message is strerror(-error). Returns @error.
 */
__attribute__((format(printf, 3, 4))) int ipc_status_errno(IpcStatus *st, int error,
                                                           const char *fmt, ...);

/* ipc_status_clear - back to "no error". Accepts NULL. */
void ipc_status_clear(IpcStatus *st);

/* ipc_status_failed - true when @st holds an error. */
bool ipc_status_failed(const IpcStatus *st);

#endif /* FIBERD_IPC_STATUS_H */
