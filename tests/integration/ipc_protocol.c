/* SPDX-License-Identifier: MIT */
/*
 * ipc_protocol.c — criterion tests of ipc/protocol.h: the error table is complete (every
 * code PROTOCOL.md names is in it once, with an errno and an exit status), consistent
 * with status.c (errno -> code -> errno round-trips), and a code read off the wire by a
 * client comes back as the same row. Pure: no sockets, no daemon.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sysexits.h>

#include "ipc/ipc.h"

/* Every code of PROTOCOL.md's "Errors" table, spelled here on purpose. */
static const char *const documented_codes[] = {
        "INVALID_ARGUMENT",    "NOT_FOUND",        "ALREADY_EXISTS",    "PERMISSION_DENIED",
        "FAILED_PRECONDITION", "OVERLOADED",       "UNAVAILABLE",       "DEADLINE_EXCEEDED",
        "CANCELLED",           "METHOD_NOT_FOUND", "MALFORMED_MESSAGE", "MESSAGE_TOO_LARGE",
        "OUT_OF_MEMORY",       "INTERRUPTED",      "INTERNAL",
};

#define NDOCUMENTED (sizeof(documented_codes) / sizeof(documented_codes[0]))

Test(protocol, every_documented_code_has_one_row)
{
        cr_assert_eq(ipc_protocol_nerrors, NDOCUMENTED, "the table has %zu rows, PROTOCOL.md %zu",
                     ipc_protocol_nerrors, NDOCUMENTED);
        for (size_t i = 0; i < NDOCUMENTED; i++) {
                const char *c = documented_codes[i];
                const IpcErrorSpec *e = ipc_protocol_error(c, strlen(c));
                cr_assert_not_null(e, "%s is not in the table", c);
                cr_assert_str_eq(e->code, c);
        }
}

Test(protocol, rows_are_distinct_and_complete)
{
        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const IpcErrorSpec *a = &ipc_protocol_errors[i];

                cr_assert_not_null(a->code);
                cr_assert_gt(strlen(a->code), 0);
                cr_assert_lt(a->error, 0, "%s: errno %d is not negative", a->code, a->error);
                cr_assert_gt(a->exit_status, 0, "%s: exit status %d", a->code, a->exit_status);
                cr_assert_lt(a->exit_status, 126, "%s: exit status %d is a shell's", a->code,
                             a->exit_status);
                for (size_t k = i + 1; k < ipc_protocol_nerrors; k++) {
                        const IpcErrorSpec *b = &ipc_protocol_errors[k];
                        cr_assert_str_neq(a->code, b->code, "row %zu and %zu", i, k);
                        cr_assert_neq(a->error, b->error, "%s and %s share errno %d", a->code,
                                      b->code, a->error);
                }
        }
        cr_assert_str_eq(ipc_protocol_errors[ipc_protocol_nerrors - 1].code, IPC_INTERNAL,
                         "INTERNAL comes last");
}

Test(protocol, errno_code_errno_round_trips)
{
        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const IpcErrorSpec *e = &ipc_protocol_errors[i];
                size_t len = strlen(e->code);

                /* the daemon's direction: errno -> code (equal strings: the same literal
                 * in two files need not be one object, so compare with strcmp) */
                cr_assert_str_eq(ipc_status_code_from_errno(e->error), e->code);
                /* the client's direction: code -> errno, and the canonical constant */
                cr_assert_eq(ipc_status_errno_from_code(e->code, len), e->error, "%s", e->code);
                cr_assert_str_eq(ipc_status_canonical_code(e->code, len), e->code);
                cr_assert_eq(ipc_protocol_exit_status(e->code), e->exit_status, "%s", e->code);
        }
}

Test(protocol, a_code_read_off_the_wire_maps_to_its_row)
{
        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const IpcErrorSpec *e = &ipc_protocol_errors[i];
                msgpack_sbuffer sb;
                msgpack_packer pk;
                msgpack_unpacked u;
                IpcStatus st;
                size_t off = 0;

                msgpack_sbuffer_init(&sb);
                msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
                cr_assert_eq(ipc_pack_error_map(&pk, e->code, "why"), 0);
                msgpack_unpacked_init(&u);
                cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, &off),
                             MSGPACK_UNPACK_SUCCESS);
                cr_assert_eq(ipc_read_error(&u.data, &st), 1, "%s", e->code);
                cr_assert_str_eq(st.code, e->code);
                cr_assert_eq(st.error, e->error, "%s", e->code);
                cr_assert_str_eq(st.message, "why");
                msgpack_unpacked_destroy(&u);
                msgpack_sbuffer_destroy(&sb);
        }
}

Test(protocol, unknown_and_absent_codes)
{
        cr_assert_null(ipc_protocol_error("NO_SUCH_CODE", 12));
        cr_assert_null(ipc_protocol_error(NULL, 0));
        /* a prefix is not a match */
        cr_assert_null(ipc_protocol_error("NOT_FOUNDX", 10));
        cr_assert_null(ipc_protocol_error("NOT_FOUND", 3));
        cr_assert_eq(ipc_protocol_exit_status(NULL), 0, "no error, exit 0");
        cr_assert_eq(ipc_protocol_exit_status("NO_SUCH_CODE"),
                     ipc_protocol_exit_status(IPC_INTERNAL), "an unknown code exits as INTERNAL");
}

Test(protocol, exit_statuses_fiberctl_documents)
{
        /* fiberctl --help lists these; a change here is a change of its contract */
        cr_assert_eq(ipc_protocol_exit_status(IPC_INVALID_ARGUMENT), EX_DATAERR);
        cr_assert_eq(ipc_protocol_exit_status(IPC_NOT_FOUND), EX_NOINPUT);
        cr_assert_eq(ipc_protocol_exit_status(IPC_PERMISSION_DENIED), EX_NOPERM);
        cr_assert_eq(ipc_protocol_exit_status(IPC_UNAVAILABLE), EX_UNAVAILABLE);
        cr_assert_eq(ipc_protocol_exit_status(IPC_OVERLOADED), EX_TEMPFAIL);
        cr_assert_eq(ipc_protocol_exit_status(IPC_MALFORMED_MESSAGE), EX_PROTOCOL);
        cr_assert_eq(ipc_protocol_exit_status(IPC_CANCELLED), IPC_EXIT_JOB_FAILED);
        cr_assert_eq(ipc_protocol_exit_status(IPC_INTERNAL), EX_SOFTWARE);
}

Test(protocol, versions)
{
        int major = -1, minor = -1, patch = -1;

        cr_assert_eq(sscanf(FIBERD_VERSION, "%d.%d.%d", &major, &minor, &patch), 3,
                     "FIBERD_VERSION \"%s\" is not MAJOR.MINOR.PATCH", FIBERD_VERSION);
        cr_assert_gt(FIBERD_PROTOCOL_VERSION, 0);
}
