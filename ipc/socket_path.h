/* SPDX-License-Identifier: MIT */
/*
 * socket_path.h — where fiberd listens and fiberctl connects by default: the one rule
 * both sides follow (ipc/PROTOCOL.md, "Transport"), so they cannot disagree again.
 *
 *   system (the default):            /run/fiberd.sock
 *   per user (fiberd --user, or any  $XDG_RUNTIME_DIR/fiberd.sock (the user's private
 *   non-root fiberd; fiberctl        runtime directory, mode 0700, made by
 *   --user):                         systemd-logind or pam_systemd)
 *
 * $FIBERD_SOCKET and -s name another path and win over both; each program applies them
 * itself (fiberd in config_load(), between its file and its flags). There is no fallback
 * to a shared directory such as /tmp: without XDG_RUNTIME_DIR a per-user default does
 * not exist, and the caller says so.
 *
 * It reads the environment and nothing else: no sockets, like the rest of ipc/.
 */
#ifndef FIBERD_IPC_SOCKET_PATH_H
#define FIBERD_IPC_SOCKET_PATH_H

#include <stdbool.h>
#include <stddef.h>

/* The system socket; also fiberd.socket's ListenStream=. */
#define SOCKET_PATH_SYSTEM "/run/fiberd.sock"
/* The per-user socket's name inside $XDG_RUNTIME_DIR. */
#define SOCKET_PATH_USER_NAME "fiberd.sock"

/*
 * socket_path_default - the default socket into @buf (@size bytes): SOCKET_PATH_SYSTEM,
 * or with @user, $XDG_RUNTIME_DIR/fiberd.sock.
 * Return: 0; -ENOENT when @user and XDG_RUNTIME_DIR is unset, empty or not an absolute
 * path (nothing written); -ENAMETOOLONG when the path does not fit in @size.
 * Context: any thread (getenv: do not call it while another thread sets variables).
 */
int socket_path_default(bool user, char *buf, size_t size);

#endif /* FIBERD_IPC_SOCKET_PATH_H */
