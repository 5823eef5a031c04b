/* SPDX-License-Identifier: MIT */
/*
 * socket_path.c — the default socket path of fiberd and its clients (see socket_path.h
 * for the rule and why there is no /tmp fallback).
 */
#include "ipc/socket_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int socket_path_default(bool user, char *buf, size_t size)
{
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        int n;

        if (!user)
                n = snprintf(buf, size, "%s", SOCKET_PATH_SYSTEM);
        else if (xdg && xdg[0] == '/')
                n = snprintf(buf, size, "%s/%s", xdg, SOCKET_PATH_USER_NAME);
        else
                return -ENOENT;
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return 0;
}
