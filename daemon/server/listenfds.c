/* SPDX-License-Identifier: MIT */
/*
 * listenfds.c — the passed sockets of listenfds.h: one sd_listen_fds_with_names() call,
 * its fds and names kept in a small table (systemd passes a handful), each entry
 * cleared when its fd is taken. Only the main thread touches the table, at start-up.
 */
#include "daemon/server/listenfds.h"
#include "daemon/obs/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* More passed fds than this are closed unread (fiberd has two socket units). */
#define LISTENFDS_MAX 16

static struct {
        bool loaded;
        int error; /* sd_listen_fds_with_names()'s, or 0 */
        unsigned n;
        int fd[LISTENFDS_MAX];     /* -1 once taken */
        char *name[LISTENFDS_MAX]; /* owned; "unknown" when not named */
} passed;

static void load(void)
{
        char **names = NULL;
        int n;

        if (passed.loaded)
                return;
        passed.loaded = true;
        n = sd_listen_fds_with_names(1, &names);
        if (n < 0) {
                passed.error = n;
                return;
        }
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i;
                if (passed.n == LISTENFDS_MAX) {
                        log_msg(LOG_WARNING, "systemd passed more than %d sockets: closing fd %d",
                                LISTENFDS_MAX, fd);
                        close(fd);
                        free(names ? names[i] : NULL);
                        continue;
                }
                passed.fd[passed.n] = fd;
                passed.name[passed.n] = names ? names[i] : NULL; /* taken over */
                passed.n++;
        }
        free(names);
}

/* Hands out entry @i. */
static int take(unsigned i)
{
        int fd = passed.fd[i];

        passed.fd[i] = -1;
        return fd;
}

static bool named(unsigned i, const char *name)
{
        return passed.fd[i] >= 0 && passed.name[i] && strcmp(passed.name[i], name) == 0;
}

int listenfds_take(const char *name)
{
        load();
        if (passed.error < 0)
                return passed.error;
        for (unsigned i = 0; i < passed.n; i++)
                if (named(i, name))
                        return take(i);
        return -ENOENT;
}

int listenfds_take_rpc(void)
{
        int fd = listenfds_take(LISTENFDS_NAME_RPC);

        if (fd != -ENOENT)
                return fd;
        for (unsigned i = 0; i < passed.n; i++)
                if (passed.fd[i] >= 0 && !named(i, LISTENFDS_NAME_METRICS))
                        return take(i);
        return -ENOENT;
}

void listenfds_close_rest(void)
{
        load();
        for (unsigned i = 0; i < passed.n; i++) {
                if (passed.fd[i] < 0)
                        continue;
                log_msg(LOG_WARNING,
                        "systemd passed a socket named \"%s\" (fd %d) that fiberd does not "
                        "serve: closed (FileDescriptorName= is \"" LISTENFDS_NAME_RPC
                        "\" or \"" LISTENFDS_NAME_METRICS "\")",
                        passed.name[i] ? passed.name[i] : "", passed.fd[i]);
                close(take(i));
        }
}
