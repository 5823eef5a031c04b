/* SPDX-License-Identifier: MIT */
/*
 * deadset.h — job.retry and job.discard: the verbs over failed, cancelled and dead jobs
 * (PROTOCOL.md, "job.retry", "job.discard"), as Sidekiq's dead set and beanstalkd's
 * kick and delete offer them.
 */
#ifndef FIBERD_DAEMON_DEADSET_H
#define FIBERD_DAEMON_DEADSET_H

#include <msgpack.h>

#include "daemon/daemon.h"
#include "daemon/server/server.h"
#include "ipc/status.h"

/*
 * deadset_retry - job.retry [ids] or [{all: true}]: queue each job again (jobtable_retry())
 * and answer {retried: [ids]}. The submit tier; a user acts on their own jobs, an admin
 * on anyone's. With ids, every one is checked first (NOT_FOUND, FAILED_PRECONDITION) and
 * nothing is retried unless all can be; with all, every dead job the caller may see.
 * Return: 0 (the answer packed into @pk); a negative errno with @st filled.
 * Context: a request fiber of the server group; does not yield.
 */
int deadset_retry(Daemon *d, Request *req, msgpack_packer *pk, IpcStatus *st);

/* deadset_discard - job.discard, the same way: drops the records of final jobs
 * (jobtable_discard()) and answers {discarded: [ids]}; with all, every dead one. */
int deadset_discard(Daemon *d, Request *req, msgpack_packer *pk, IpcStatus *st);

#endif
