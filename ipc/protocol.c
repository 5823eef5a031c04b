/* SPDX-License-Identifier: MIT */
/*
 * protocol.c — the error table of protocol.h: every wire code with the errno the client
 * reports for it and fiberctl's exit status. status.c maps errnos to codes and back
 * through it; fiberctl maps a code to its exit status with ipc_protocol_exit_status().
 *
 * The exit statuses are sysexits.h's: a bad request is the caller's data (EX_DATAERR),
 * a missing job or plugin an input that is not there (EX_NOINPUT), a state that may
 * change a temporary failure (EX_TEMPFAIL), a peer speaking a different protocol
 * EX_PROTOCOL; a cancelled job is a job that did not succeed (1).
 */
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"

#include <errno.h>
#include <string.h>
#include <sysexits.h>

const IpcErrorSpec ipc_protocol_errors[] = {
        {IPC_INVALID_ARGUMENT, -EINVAL, EX_DATAERR},
        {IPC_NOT_FOUND, -ENOENT, EX_NOINPUT},
        {IPC_ALREADY_EXISTS, -EEXIST, EX_SOFTWARE},
        {IPC_PERMISSION_DENIED, -EACCES, EX_NOPERM},
        {IPC_FAILED_PRECONDITION, -EALREADY, EX_TEMPFAIL},
        {IPC_OVERLOADED, -EAGAIN, EX_TEMPFAIL},
        {IPC_UNAVAILABLE, -ESHUTDOWN, EX_UNAVAILABLE},
        {IPC_DEADLINE_EXCEEDED, -ETIMEDOUT, EX_TEMPFAIL},
        {IPC_CANCELLED, -ECANCELED, IPC_EXIT_JOB_FAILED},
        {IPC_METHOD_NOT_FOUND, -ENOSYS, EX_PROTOCOL},
        {IPC_MALFORMED_MESSAGE, -EBADMSG, EX_PROTOCOL},
        {IPC_MESSAGE_TOO_LARGE, -EMSGSIZE, EX_PROTOCOL},
        {IPC_OUT_OF_MEMORY, -ENOMEM, EX_SOFTWARE},
        {IPC_INTERRUPTED, -EOWNERDEAD, IPC_EXIT_JOB_FAILED}, /* job store */
        {IPC_INTERNAL, -EIO, EX_SOFTWARE},
};

const size_t ipc_protocol_nerrors = ELEMENTSOF(ipc_protocol_errors);

const IpcErrorSpec *ipc_protocol_error(const char *code, size_t len)
{
        if (!code)
                return NULL;
        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const char *c = ipc_protocol_errors[i].code;
                if (strlen(c) == len && memcmp(c, code, len) == 0)
                        return &ipc_protocol_errors[i];
        }
        return NULL;
}

int ipc_protocol_exit_status(const char *code)
{
        const IpcErrorSpec *e;

        if (!code)
                return 0;
        e = ipc_protocol_error(code, strlen(code));
        if (!e)
                e = ipc_protocol_error(IPC_INTERNAL, strlen(IPC_INTERNAL));
        return e->exit_status;
}
