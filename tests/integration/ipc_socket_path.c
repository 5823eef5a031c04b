/* SPDX-License-Identifier: MIT */
/*
 * ipc_socket_path.c — the default socket rule fiberd and fiberctl share
 * (ipc/socket_path.h): the system socket unless a per-user one is asked for; the
 * per-user one only under an absolute XDG_RUNTIME_DIR, never a /tmp fallback.
 */
#include "ipc/socket_path.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

Test(socket_path, the_system_socket_whatever_the_environment)
{
        char buf[108];

        setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
        cr_assert_eq(socket_path_default(false, buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/run/fiberd.sock");
        cr_assert_str_eq(buf, SOCKET_PATH_SYSTEM);
}

Test(socket_path, the_user_socket_under_xdg_runtime_dir)
{
        char buf[108];

        setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
        cr_assert_eq(socket_path_default(true, buf, sizeof(buf)), 0);
        cr_assert_str_eq(buf, "/run/user/4242/fiberd.sock");
        cr_assert_eq(socket_path_default(true, buf, 10), -ENAMETOOLONG);
}

Test(socket_path, no_user_socket_without_an_absolute_xdg_runtime_dir)
{
        char buf[108] = "untouched";

        unsetenv("XDG_RUNTIME_DIR");
        cr_assert_eq(socket_path_default(true, buf, sizeof(buf)), -ENOENT);
        setenv("XDG_RUNTIME_DIR", "", 1);
        cr_assert_eq(socket_path_default(true, buf, sizeof(buf)), -ENOENT);
        setenv("XDG_RUNTIME_DIR", "run/user/1", 1);
        cr_assert_eq(socket_path_default(true, buf, sizeof(buf)), -ENOENT);
        cr_assert_str_eq(buf, "untouched");
}
