/* SPDX-License-Identifier: MIT */
/*
 * pause.h — the `pause` and `resume` methods' work and the pauses kept in the job store
 * (pause.c has the design; the holding itself is the dispatcher's, dispatch.h).
 */
#ifndef FIBERD_DAEMON_PAUSE_H
#define FIBERD_DAEMON_PAUSE_H

#include <stdbool.h>

#include "daemon/daemon.h"
#include "daemon/server/server.h"
#include "ipc/status.h"

/*
 * pause_request - pause (@paused) or resume what @req's params [kind, name] name: a class
 * of the job scheduler or a plugin name (loaded or not), written to the job store
 * first, then held or released in the dispatcher (a resume starts what may start), and
 * packs the result {kind, name, paused, queued} into @pk. The caller checked the tier.
 * Return: 0; a negative errno with @st filled: -EINVAL (bad kind, an unknown class
 * naming the known ones, a bad plugin name), the store's error (nothing changed),
 * -ENOMEM.
 * Context: a request fiber of the server group; blocks its worker for one store commit.
 */
int pause_request(Daemon *d, Request *req, bool paused, msgpack_packer *pk, IpcStatus *st);

/*
 * pause_restore - hold again what the job store says is paused, each logged; a pause of
 * a class no longer configured is logged and ignored (kept in the store).
 * Return: 0; the store's error (logged). Context: main thread at start-up, after the job
 * table and the job scheduler exist and before store_load() restores queued jobs.
 */
int pause_restore(Daemon *d);

#endif
