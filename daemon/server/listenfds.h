/* SPDX-License-Identifier: MIT */
/*
 * listenfds.h — the listening sockets systemd passed (sd_listen_fds_with_names(3)),
 * handed out by name, so that fiberd.socket and fiberd-metrics.socket reach the one
 * fiberd.service side by side.
 *
 * The names are FileDescriptorName= of the socket units: "fiberd" for the RPC socket
 * (server.c), "metrics" for the HTTP scrape endpoint (metrics_http.c). For the units of
 * older installs and for systemd-socket-activate, which name nothing (sd-daemon then
 * says "unknown", or systemd the unit's name), the RPC socket is the first fd not named
 * "metrics" when none is named "fiberd".
 *
 * The passed fds are read once, on the first call, and the LISTEN_* variables are then
 * unset (child processes of plugins must not think them theirs). Each fd is handed out
 * once; listenfds_close_rest() closes, with a warning, those nobody took.
 */
#ifndef FIBERD_DAEMON_LISTENFDS_H
#define FIBERD_DAEMON_LISTENFDS_H

/* FileDescriptorName= of systemd/fiberd.socket and systemd/fiberd-metrics.socket */
#define LISTENFDS_NAME_RPC "fiberd"
#define LISTENFDS_NAME_METRICS "metrics"

/*
 * listenfds_take - the passed fd named @name, now the caller's.
 * Return: the fd (>= 3); -ENOENT when none is named so (or none was passed); the
 * -errno of sd_listen_fds_with_names().
 * Context: main thread at start-up.
 */
int listenfds_take(const char *name);

/*
 * listenfds_take_rpc - the RPC socket: the fd named LISTENFDS_NAME_RPC, else the first
 * one not named LISTENFDS_NAME_METRICS (an unnamed fd from an older unit).
 * Return: as listenfds_take(). Context: main thread at start-up.
 */
int listenfds_take_rpc(void);

/*
 * listenfds_close_rest - close the passed fds nobody took, one warning line each
 * naming it. Context: main thread, once start-up took what it serves.
 */
void listenfds_close_rest(void);

#endif
