/* SPDX-License-Identifier: MIT */
/*
 * status.c — errno <-> wire error code, and IpcStatus (see status.h).
 *
 * The code -> errno direction is protocol.c's table (ipc_protocol_errors[]); the errno ->
 * code direction is a switch, since several errnos share a code. Unknown errnos are
 * INTERNAL: the message then carries strerror() so the person reading it still learns
 * something.
 */
#include "ipc/status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *ipc_status_code_from_errno(int error)
{
        if (error > 0)
                error = -error;
        switch (error) {
        case -EINVAL:
        case -ERANGE:
        case -E2BIG:
        case -ENAMETOOLONG:
        case -EDOM:
        case -EOVERFLOW:
        case -ELOOP: /* a path that loops, or a magic link a job may not follow */
                return IPC_INVALID_ARGUMENT;
        case -ENOENT:
        case -ESRCH:
        case -ENXIO:
        case -ENODEV:
                return IPC_NOT_FOUND;
        case -EEXIST:
                return IPC_ALREADY_EXISTS;
        case -EPERM:
        case -EACCES:
                return IPC_PERMISSION_DENIED;
        case -EALREADY:
        case -EINPROGRESS:
        case -EISDIR:
        case -ENOTDIR:
        case -ENOTEMPTY:
        case -ENOEXEC:
                return IPC_FAILED_PRECONDITION;
        case -EAGAIN:
        case -EBUSY:
        case -EMFILE:
        case -ENFILE:
        case -ENOSPC:
        case -ENOBUFS:
                return IPC_OVERLOADED;
        case -ESHUTDOWN:
        case -ECONNREFUSED:
        case -ECONNRESET:
        case -EPIPE:
        case -ENOTCONN:
                return IPC_UNAVAILABLE;
        case -ETIMEDOUT:
                return IPC_DEADLINE_EXCEEDED;
        case -ECANCELED:
                return IPC_CANCELLED;
        case -ENOSYS:
        case -EOPNOTSUPP:
                return IPC_METHOD_NOT_FOUND;
        case -EBADMSG:
        case -EPROTO:
                return IPC_MALFORMED_MESSAGE;
        case -EMSGSIZE:
                return IPC_MESSAGE_TOO_LARGE;
        case -ENOMEM:
                return IPC_OUT_OF_MEMORY;
        case -EOWNERDEAD: /* job store: the fiberd that ran the job died */
                return IPC_INTERRUPTED;
        default:
                return IPC_INTERNAL;
        }
}

int ipc_status_errno_from_code(const char *code, size_t len)
{
        const IpcErrorSpec *e = ipc_protocol_error(code, len);
        return e ? e->error : -EPROTO;
}

const char *ipc_status_canonical_code(const char *code, size_t len)
{
        const IpcErrorSpec *e = ipc_protocol_error(code, len);
        return e ? e->code : IPC_INTERNAL;
}

static int code_errno(const char *code)
{
        const IpcErrorSpec *e = code ? ipc_protocol_error(code, strlen(code)) : NULL;
        return e ? e->error : -EIO;
}

static void status_vformat(IpcStatus *st, const char *fmt, va_list ap)
{
        int n = vsnprintf(st->message, sizeof(st->message), fmt, ap);
        if (n < 0)
                st->message[0] = '\0';
}

int ipc_status_set(IpcStatus *st, const char *code, int error, const char *fmt, ...)
{
        if (error > 0)
                error = -error;
        if (error == 0)
                error = code_errno(code);
        if (!st)
                return error;
        va_list ap;
        st->code = code ? code : IPC_INTERNAL;
        st->error = error;
        va_start(ap, fmt);
        status_vformat(st, fmt, ap);
        va_end(ap);
        return error;
}

int ipc_status_errno(IpcStatus *st, int error, const char *fmt, ...)
{
        if (error > 0)
                error = -error;
        if (!st)
                return error;
        st->code = ipc_status_code_from_errno(error);
        st->error = error;
        if (!fmt) {
                snprintf(st->message, sizeof(st->message), "%s", strerror(-error));
                return error;
        }
        va_list ap;
        va_start(ap, fmt);
        status_vformat(st, fmt, ap);
        va_end(ap);
        return error;
}

void ipc_status_clear(IpcStatus *st)
{
        if (!st)
                return;
        st->code = NULL;
        st->error = 0;
        st->message[0] = '\0';
}

bool ipc_status_failed(const IpcStatus *st)
{
        return st && st->code;
}
