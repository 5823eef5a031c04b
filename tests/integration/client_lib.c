/* SPDX-License-Identifier: MIT */
/*
 * client_lib.c — criterion tests of libfiberd-client's public API (client/fiberd/client.h)
 * that need no daemon: the error codes against the protocol's table, connect failures,
 * refused arguments, and a timeout against a socket that never answers (a listening
 * socket nobody accepts on: connect succeeds, no answer ever comes). The API against a real
 * fiberd is tests/clientlib.sh; against a fake server, client_fake.c.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/fiberd/client.h"
#include "ipc/protocol.h"

Test(client_lib, every_protocol_code_is_in_the_enum_and_back)
{
        for (size_t i = 0; i < ipc_protocol_nerrors; i++) {
                const char *name = ipc_protocol_errors[i].code;
                FiberdClientCode code = fiberd_client_code_from_name(name);
                cr_assert(code != FIBERD_CLIENT_OK, "%s", name);
                cr_assert(code != FIBERD_CLIENT_INTERNAL || strcmp(name, IPC_INTERNAL) == 0,
                          "%s has no enum value of its own", name);
                cr_assert_str_eq(fiberd_client_code_name(code), name);
        }
        cr_assert_eq(fiberd_client_code_from_name(NULL), FIBERD_CLIENT_OK);
        cr_assert_eq(fiberd_client_code_from_name("NEWER_THAN_US"), FIBERD_CLIENT_INTERNAL);
        cr_assert_str_eq(fiberd_client_code_name((FiberdClientCode)999), "INTERNAL");
        cr_assert_eq((size_t)FIBERD_CLIENT_INTERRUPTED, ipc_protocol_nerrors, /* the last */
                     "the enum and protocol.h's table differ in length");
}

Test(client_lib, connect_to_nothing_is_unavailable_with_the_path)
{
        FiberdClient *c = NULL;
        FiberdClientError err = {.code = FIBERD_CLIENT_OK};

        cr_assert_eq(fiberd_client_connect(&c, "/nonexistent/dir/fiberd.sock", &err), -ENOENT);
        cr_assert_null(c, "ret written on failure");
        cr_assert_eq(err.code, FIBERD_CLIENT_UNAVAILABLE, "%s", fiberd_client_code_name(err.code));
        cr_assert_eq(err.error, -ENOENT);
        cr_assert(strstr(err.message, "/nonexistent/dir/fiberd.sock"), "%s", err.message);
        cr_assert_null(fiberd_client_free(NULL));
}

/* A listening socket that never accepts: a client connects, and nothing answers. */
static int listen_silent(char *path, size_t size)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);

        cr_assert_geq(fd, 0);
        snprintf(path, size, "/tmp/client_lib-%d.sock", (int)getpid());
        unlink(path);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(listen(fd, 4), 0);
        return fd;
}

Test(client_lib, args_that_are_not_one_map_are_refused_and_nothing_is_queued)
{
        char path[108];
        int lfd = listen_silent(path, sizeof(path));
        FiberdClient *c;
        FiberdClientError err;
        uint32_t msgid = 0;
        uint64_t id = 0;
        /* a fixarray [1], a fixmap {} twice, a truncated map */
        static const unsigned char array[] = {0x91, 0x01}, two_maps[] = {0x80, 0x80},
                                   short_map[] = {0x81, 0xa1};

        cr_assert_eq(fiberd_client_connect(&c, path, &err), 0, "%s", err.message);
        cr_assert_eq(fiberd_client_send_submit(c, "echo", array, sizeof(array), NULL, &msgid),
                     -EINVAL);
        cr_assert_eq(fiberd_client_send_submit(c, "echo", two_maps, sizeof(two_maps), NULL, &msgid),
                     -EINVAL);
        cr_assert_eq(
                fiberd_client_send_run(c, "echo", short_map, sizeof(short_map), NULL, -1, &msgid),
                -EINVAL);
        cr_assert_eq(fiberd_client_send_submit(c, "", NULL, 0, NULL, &msgid), -EINVAL);
        cr_assert_eq(msgid, 0u, "ret_msgid written on failure");
        cr_assert_eq(fiberd_client_pending_output(c), 0u, "a refused request was queued");
        cr_assert_eq(fiberd_client_submit(c, "echo", array, sizeof(array), NULL, 1000, &id, &err),
                     -EINVAL);
        cr_assert_eq(err.code, FIBERD_CLIENT_INVALID_ARGUMENT);
        cr_assert_eq(id, 0u);

        cr_assert_eq(fiberd_client_send_submit(c, "echo", two_maps, 1, NULL, &msgid), 0);
        cr_assert_eq(msgid, 1u);
        cr_assert_gt(fiberd_client_pending_output(c), 0u);
        fiberd_client_free(c);
        close(lfd);
        unlink(path);
}

Test(client_lib, a_call_nobody_answers_times_out_as_deadline_exceeded)
{
        char path[108];
        int lfd = listen_silent(path, sizeof(path));
        FiberdClient *c;
        FiberdClientReply *reply = NULL;
        FiberdClientError err;

        cr_assert_eq(fiberd_client_connect(&c, path, &err), 0, "%s", err.message);
        cr_assert_eq(fiberd_client_ping(c, 50, &reply, &err), -ETIMEDOUT);
        cr_assert_null(reply);
        cr_assert_eq(err.code, FIBERD_CLIENT_DEADLINE_EXCEEDED, "%s",
                     fiberd_client_code_name(err.code));
        cr_assert_eq(fiberd_client_receive(c, 0, &reply, &err), -ETIMEDOUT, "nothing arrived");
        fiberd_client_free(c);
        close(lfd);
        unlink(path);
}
