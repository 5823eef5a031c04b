/* SPDX-License-Identifier: MIT */
/*
 * fiberd-client.c — libfiberd-client's public side (fiberd/client.h) over the connection
 * of client.c: the FiberdClient handle, replies, and the error codes as an enum.
 *
 * client.c is the engine (pipelined writes, the decoder, the kept replies, every wait a
 * poll(2)); in-tree tests and tools use its Client directly. This file only translates:
 * an IpcMessage becomes an owned FiberdClientReply, an IpcStatus (whose code is a string
 * constant of ipc/protocol.h) a FiberdClientError with an enum code, so the installed
 * header needs no internal header and the library exports only fiberd_client_*.
 */
#include "client/fiberd/client.h"
#include "client/client.h"
#include "client/fiberd-client-internal.h"
#include "scheduler/base/macro.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct FiberdClient {
        Client *conn; /* the connection, client.c */
};

/* A reply handed out to the caller. */
struct FiberdClientReply {
        IpcMessage msg; /* owns its zone */
};

/* The wire spelling of each FiberdClientCode; the codes are ipc/protocol.h's. */
static const char *const client_code_names[] = {
        [FIBERD_CLIENT_OK] = "OK",
        [FIBERD_CLIENT_INVALID_ARGUMENT] = IPC_INVALID_ARGUMENT,
        [FIBERD_CLIENT_NOT_FOUND] = IPC_NOT_FOUND,
        [FIBERD_CLIENT_ALREADY_EXISTS] = IPC_ALREADY_EXISTS,
        [FIBERD_CLIENT_PERMISSION_DENIED] = IPC_PERMISSION_DENIED,
        [FIBERD_CLIENT_FAILED_PRECONDITION] = IPC_FAILED_PRECONDITION,
        [FIBERD_CLIENT_OVERLOADED] = IPC_OVERLOADED,
        [FIBERD_CLIENT_UNAVAILABLE] = IPC_UNAVAILABLE,
        [FIBERD_CLIENT_DEADLINE_EXCEEDED] = IPC_DEADLINE_EXCEEDED,
        [FIBERD_CLIENT_CANCELLED] = IPC_CANCELLED,
        [FIBERD_CLIENT_METHOD_NOT_FOUND] = IPC_METHOD_NOT_FOUND,
        [FIBERD_CLIENT_MALFORMED_MESSAGE] = IPC_MALFORMED_MESSAGE,
        [FIBERD_CLIENT_MESSAGE_TOO_LARGE] = IPC_MESSAGE_TOO_LARGE,
        [FIBERD_CLIENT_OUT_OF_MEMORY] = IPC_OUT_OF_MEMORY,
        [FIBERD_CLIENT_INTERNAL] = IPC_INTERNAL,
        [FIBERD_CLIENT_INTERRUPTED] = IPC_INTERRUPTED,
};

const char *fiberd_client_code_name(FiberdClientCode code)
{
        if ((unsigned)code >= ELEMENTSOF(client_code_names))
                return IPC_INTERNAL;
        return client_code_names[code];
}

FiberdClientCode fiberd_client_code_from_name(const char *name)
{
        if (!name)
                return FIBERD_CLIENT_OK;
        for (size_t i = 0; i < ELEMENTSOF(client_code_names); i++)
                if (strcmp(client_code_names[i], name) == 0)
                        return (FiberdClientCode)i;
        return FIBERD_CLIENT_INTERNAL;
}

int fiberd_client__error_from_status(FiberdClientError *err, const IpcStatus *st, int r)
{
        if (r >= 0 || !err)
                return r;
        err->code = fiberd_client_code_from_name(st && st->code ? st->code
                                                                : ipc_status_code_from_errno(r));
        err->error = r;
        if (st && st->message[0])
                snprintf(err->message, sizeof(err->message), "%s", st->message);
        else
                snprintf(err->message, sizeof(err->message), "%s", strerror(-r));
        return r;
}

int fiberd_client__error_set(FiberdClientError *err, int r, const char *fmt, ...)
{
        IpcStatus st = {.code = NULL};
        va_list ap;

        if (!err)
                return r;
        va_start(ap, fmt);
        vsnprintf(st.message, sizeof(st.message), fmt, ap);
        va_end(ap);
        return fiberd_client__error_from_status(err, &st, r);
}

/* Wraps @msg (moved) into a reply for the caller. */
static int client_reply_new(IpcMessage *msg, FiberdClientReply **ret, IpcStatus *st)
{
        FiberdClientReply *r = calloc(1, sizeof(*r));
        if (!r) {
                ipc_message_clear(msg);
                return ipc_status_errno(st, -ENOMEM, NULL);
        }
        r->msg = *msg;
        *ret = r;
        return 0;
}

int fiberd_client_default_socket(char *buf, size_t size)
{
        return client_default_socket(buf, size);
}

int fiberd_client_connect(FiberdClient **ret, const char *path, FiberdClientError *err)
{
        IpcStatus st = {.code = NULL};
        FiberdClient *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return fiberd_client__error_set(err, -ENOMEM, "out of memory");
        r = client_connect(&c->conn, path, &st);
        if (r < 0) {
                free(c);
                /* the daemon is not there to be asked: UNAVAILABLE, not the errno's code
                 * (NOT_FOUND for -ENOENT would read as "no such job") */
                st.code = r == -EACCES || r == -EPERM ? IPC_PERMISSION_DENIED
                          : r == -ENOMEM              ? IPC_OUT_OF_MEMORY
                          : r == -ENAMETOOLONG        ? IPC_INVALID_ARGUMENT
                                                      : IPC_UNAVAILABLE;
                return fiberd_client__error_from_status(err, &st, r);
        }
        *ret = c;
        return 0;
}

FiberdClient *fiberd_client_free(FiberdClient *c)
{
        if (!c)
                return NULL;
        client_free(c->conn);
        free(c);
        return NULL;
}

const char *fiberd_client_path(const FiberdClient *c)
{
        return client_path(c->conn);
}

int fiberd_client_fd(const FiberdClient *c)
{
        return client_fd(c->conn);
}

msgpack_packer *fiberd_client_request(FiberdClient *c, const char *method, uint32_t nparams,
                                      uint32_t *ret_msgid)
{
        return client_request(c->conn, method, nparams, ret_msgid);
}

int fiberd_client_request_fds(FiberdClient *c, const int *fds, size_t n)
{
        return client_request_fds(c->conn, fds, n);
}

size_t fiberd_client_pending_output(const FiberdClient *c)
{
        return client_pending_output(c->conn);
}

int fiberd_client_flush(FiberdClient *c, int timeout_ms, FiberdClientError *err)
{
        IpcStatus st = {.code = NULL};
        return fiberd_client__error_from_status(err, &st, client_flush(c->conn, timeout_ms, &st));
}

int fiberd_client_receive(FiberdClient *c, int timeout_ms, FiberdClientReply **ret,
                          FiberdClientError *err)
{
        IpcStatus st = {.code = NULL};
        IpcMessage m;
        int r = client_receive(c->conn, &m, timeout_ms, &st);

        if (r >= 0)
                r = client_reply_new(&m, ret, &st);
        return fiberd_client__error_from_status(err, &st, r);
}

int fiberd_client_wait_reply(FiberdClient *c, uint32_t msgid, int timeout_ms,
                             FiberdClientReply **ret, FiberdClientError *err)
{
        IpcStatus st = {.code = NULL};
        IpcMessage m;
        int r = client_call_wait(c->conn, msgid, &m, timeout_ms, &st);

        if (r >= 0)
                r = client_reply_new(&m, ret, &st);
        return fiberd_client__error_from_status(err, &st, r);
}

int fiberd_client_call(FiberdClient *c, uint32_t msgid, int timeout_ms, FiberdClientReply **ret,
                       FiberdClientError *err)
{
        FiberdClientReply *reply;
        int r = fiberd_client_wait_reply(c, msgid, timeout_ms, &reply, err);

        if (r < 0)
                return r;
        r = fiberd_client_reply_error(reply, err);
        if (r < 0) {
                fiberd_client_reply_free(reply);
                return r;
        }
        *ret = reply;
        return 0;
}

FiberdClientReply *fiberd_client_reply_free(FiberdClientReply *r)
{
        if (!r)
                return NULL;
        ipc_message_clear(&r->msg);
        free(r);
        return NULL;
}

uint32_t fiberd_client_reply_msgid(const FiberdClientReply *r)
{
        return r->msg.type == IPC_RESPONSE ? r->msg.msgid : 0;
}

const char *fiberd_client_reply_method(const FiberdClientReply *r)
{
        return r->msg.type == IPC_NOTIFICATION ? r->msg.method : NULL;
}

const msgpack_object *fiberd_client_reply_result(const FiberdClientReply *r)
{
        return r->msg.type == IPC_NOTIFICATION ? &r->msg.params : &r->msg.result;
}

int fiberd_client_reply_error(const FiberdClientReply *r, FiberdClientError *err)
{
        IpcStatus st = {.code = NULL};
        const msgpack_object *result;

        if (r->msg.type == IPC_NOTIFICATION)
                return 0;
        return fiberd_client__error_from_status(err, &st, client_result(&r->msg, &result, &st));
}

const msgpack_object *fiberd_client_object_get(const msgpack_object *map, const char *key)
{
        return ipc_map_find(map, key);
}
