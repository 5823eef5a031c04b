/* SPDX-License-Identifier: MIT */
/*
 * client.h — the connection engine of the client library (client/), in-tree API.
 *
 * libfiberd-client's public API is fiberd/client.h (installed, self-contained, enum error
 * codes, opaque replies; fiberctl is built on it); fiberd-client.c implements it over this
 * file's Client. In-tree tests and the bench use this API directly: it hands out the
 * ipc/ types (IpcMessage, IpcStatus) they already speak.
 *
 * One Client is one connection to fiberd's Unix socket, speaking MessagePack-RPC
 * (ipc/PROTOCOL.md) with many requests in flight:
 *
 *     Client *c;
 *     IpcStatus st;
 *     if (client_connect(&c, NULL, &st) < 0)           // NULL: the default socket
 *             die("%s", st.message);                   // "cannot connect to ... — is
 *                                                      //  fiberd running?"
 *     uint32_t id;
 *     msgpack_packer *pk = client_request(c, "job.status", 1, &id);
 *     msgpack_pack_uint64(pk, 17);                     // the params, packed by the caller
 *     IpcMessage resp;
 *     client_call_wait(c, id, &resp, -1, &st);         // flushes, waits for msgid id
 *     const msgpack_object *result;
 *     client_result(&resp, &result, &st);              // the server's error → st
 *     ...
 *     ipc_message_clear(&resp);
 *     client_free(c);
 *
 * Pipelining: client_request() only appends to an output buffer, so a caller queues as
 * many requests as it likes, then client_flush() sends them and client_receive() hands
 * back responses in the order they arrive — fiberd answers out of order, so callers match
 * them by msgid (IpcMessage.msgid). client_call_wait() waits for one msgid and keeps any
 * other response that arrives meanwhile for a later client_receive(), in arrival order.
 *
 * I/O: the socket is non-blocking and every wait is a poll(2) with a timeout, so calls
 * block the calling thread at most that long. While the output does not fit in the
 * socket, incoming responses are read into the decoder, so a client that pipelines more
 * than the socket buffers hold cannot deadlock with a server that is busy writing back.
 * SIGPIPE is never raised (MSG_NOSIGNAL).
 *
 * Threads: a Client is not thread-safe; use it from one thread (fiberctl is single-
 * threaded). This is a plain-thread library: it does not use the fiber runtime.
 * Errors: negative errno; functions that take an IpcStatus fill it with a sentence that
 * names the socket, the cause and the fix.
 */
#ifndef FIBERD_CLIENT_H
#define FIBERD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "ipc/ipc.h"

typedef struct Client Client;

/*
 * client_default_socket - the socket path a client uses when given none: $FIBERD_SOCKET
 * if set and not empty; else the system socket, /run/fiberd.sock, whoever the caller is
 * (a per-user fiberd's socket is asked for explicitly: socket_path_default(true, ...),
 * `fiberctl --user`). Written to @buf (@size bytes).
 * Return: 0; -ENAMETOOLONG when it does not fit. Context: any thread.
 */
int client_default_socket(char *buf, size_t size);

/*
 * client_connect - connect to the daemon at @path (NULL: client_default_socket()).
 * @ret: out, the connection, written only on success; free with client_free().
 * Return: 0; -errno of socket(2)/connect(2) (-ENOENT no socket file, -ECONNREFUSED
 * nobody listening, -EACCES no permission), -ENAMETOOLONG for a path longer than
 * sun_path, -ENOMEM. @st (may be NULL) gets e.g. "cannot connect to /run/fiberd.sock:
 * No such file or directory — is fiberd running? (set FIBERD_SOCKET or -s to use another
 * socket)". Blocks until connected (Unix sockets connect at once or fail).
 */
int client_connect(Client **ret, const char *path, IpcStatus *st);

/* client_free - close the connection, drop queued output and kept responses.
 * Accepts NULL; returns NULL. */
Client *client_free(Client *c);

/* client_path - the socket path this client connected to. */
const char *client_path(const Client *c);

/* client_fd - the socket, for callers that poll several sources (e.g. stdin + daemon). */
int client_fd(const Client *c);

/*
 * client_request - queue a request [0, msgid, @method, [params...]] with a fresh msgid
 * (@ret_msgid, from 1, increasing) and return the packer on which the caller packs
 * exactly @nparams params. Nothing is sent until client_flush() (or a call that waits).
 * Return: the packer, or NULL on -ENOMEM (nothing queued then). The packer's calls return
 * -1 when memory runs out; the caller then gives up on the connection.
 */
msgpack_packer *client_request(Client *c, const char *method, uint32_t nparams,
                               uint32_t *ret_msgid);

/*
 * client_request_fds - send @fds (@n, at most IPC_FDS_PER_REQUEST_MAX) with the next
 * request queued by client_request(), as SCM_RIGHTS on its first byte; its params refer
 * to them as fd arguments by index 0..@n-1 (ipc/PROTOCOL.md, "Passing files"). The fds
 * are not taken: keep them open until client_flush() has sent that request; the daemon
 * gets its own copies. Call it right before that client_request().
 * Return: 0; -EBUSY when fds wait to be sent already; -E2BIG for too many.
 */
int client_request_fds(Client *c, const int *fds, size_t n);

/* client_pending_output - bytes queued and not yet written to the socket. */
size_t client_pending_output(const Client *c);

/*
 * client_flush - write all queued requests, waiting at most @timeout_ms in total
 * (-1 = no limit). Responses arriving meanwhile are buffered for client_receive().
 * Return: 0; -ETIMEDOUT; other -errno from send(2)/poll(2). @st (may be NULL) is filled
 * on error. When the daemon has closed the connection the unsent output is dropped and 0
 * is returned: what the daemon said before closing (an error response, a
 * "connection.error" notice) comes out of the next client_receive() /
 * client_call_wait(), which then report the close.
 */
int client_flush(Client *c, int timeout_ms, IpcStatus *st);

/*
 * client_receive - the next message from the daemon, in arrival order (responses kept by
 * client_call_wait() first). Flushes queued output first.
 * @ret: out, written only when 1 is returned; the caller owns it (ipc_message_clear()).
 * Return: 1; -ETIMEDOUT after @timeout_ms (-1 = no limit; 0 = only what is buffered);
 * -ECONNRESET when the daemon closed the connection; -EBADMSG / -EMSGSIZE / -EPROTO
 * when it sent something that is not a valid message; the daemon's own error when it
 * sent the notification "connection.error" before closing (e.g. MESSAGE_TOO_LARGE:
 * -EMSGSIZE). @st filled on error.
 */
int client_receive(Client *c, IpcMessage *ret, int timeout_ms, IpcStatus *st);

/*
 * client_call_wait - flush, then wait for the response to @msgid. Other messages that
 * arrive first are kept, in order, for client_receive().
 * Return: 1 and @ret set; errors as client_receive().
 */
int client_call_wait(Client *c, uint32_t msgid, IpcMessage *ret, int timeout_ms, IpcStatus *st);

/*
 * client_result - split a response into its result or its error.
 * Return: 0 and *@ret_result = the result (points into @resp); or the server's error as a
 * negative errno (ipc_status_errno_from_code(); -EIO for unknown codes) with @st
 * holding its code and message; -EPROTO when @resp is not a response or its error is
 * malformed. Pure.
 */
int client_result(const IpcMessage *resp, const msgpack_object **ret_result, IpcStatus *st);

#endif /* FIBERD_CLIENT_H */
