/* SPDX-License-Identifier: MIT */
/*
 * fiberd-client-internal.h — what fiberd-client.c, fiberd-client-method.c and
 * fiberd-client-observe.c share inside libfiberd-client (client/): filling a
 * FiberdClientError, the blocking form of a method. Not installed; hidden symbols (the double
 * underscore marks them internal, as libuv's uv__ does).
 */
#ifndef FIBERD_CLIENT_FIBERD_CLIENT_INTERNAL_H
#define FIBERD_CLIENT_FIBERD_CLIENT_INTERNAL_H

#include "client/fiberd/client.h"
#include "ipc/status.h"

/*
 * fiberd_client__error_from_status - when @r < 0 and @err is not NULL, fill @err from
 * @st (the code it holds, else the code of @r; its message, else strerror). Returns @r.
 * Context: any thread. Pure but for @err.
 */
int fiberd_client__error_from_status(FiberdClientError *err, const IpcStatus *st, int r);

/* fiberd_client__error_set - fiberd_client__error_from_status() for an error made here:
 * @r with a printf-style message. Returns @r. */
__attribute__((format(printf, 3, 4))) int fiberd_client__error_set(FiberdClientError *err, int r,
                                                                   const char *fmt, ...);

/*
 * fiberd_client__call_sent - the blocking form of a method: a send that gave @r and
 * @msgid (for @method, named in @err when the send failed), then fiberd_client_call().
 * Return: as fiberd_client_call(); @r when the send failed. Context: the thread using @c.
 */
int fiberd_client__call_sent(FiberdClient *c, int r, uint32_t msgid, const char *method,
                             int timeout_ms, FiberdClientReply **ret, FiberdClientError *err);

#endif /* FIBERD_CLIENT_FIBERD_CLIENT_INTERNAL_H */
