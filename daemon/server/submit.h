/* SPDX-License-Identifier: MIT */
/*
 * submit.h — a job.submit or job.run request made into an accepted, recorded job
 * (submit.c has the steps in order and which errors come from where).
 */
#ifndef FIBERD_DAEMON_SUBMIT_H
#define FIBERD_DAEMON_SUBMIT_H

#include <stdbool.h>

#include "daemon/daemon.h"
#include "daemon/job/job.h"
#include "daemon/server/server.h"
#include "ipc/status.h"

/*
 * submit_params - accept the job that @params [plugin, args, options] describe, from
 * @origin (its creds own the job; its fds are taken on success: origin->fds is then
 * NULL), and wait until the job store has its record: the checks, errors and limits of
 * job.submit, whoever asks (a request, a schedule's tick).
 * @ret, @ret_existing: as submit_request()'s.
 * Return: 0; a negative errno with @st filled (every refusal of job.submit).
 * Context: a fiber of the server group (yields while the store writes).
 */
int submit_params(Daemon *d, JobOrigin *origin, const msgpack_object *params, Job **ret,
                  uint64_t *ret_existing, IpcStatus *st);

/*
 * submit_check - would @params be accepted from @creds, without fds? The checks of
 * job.submit up to the plugin's check_args (access, params, options, class, plugin),
 * with their errors; no job is made and nothing changes (schedule.add).
 * Return: 0; a negative errno with @st filled. Context: a fiber of the server group;
 * does not yield.
 */
int submit_check(Daemon *d, Creds *creds, const msgpack_object *params, IpcStatus *st);

/*
 * submit_request - submit_params() for @req: the job that its params [plugin, args,
 * options] describe (job.submit's, also the first three of job.run's), owned by @req's
 * uid, once the job store has its record. @answer_at_end: job.run (the answer waits for
 * the job's end, and so may its first store write); @id_at_end: and without a wait
 * limit, so nobody learns the job's id before its end (a fleet may then run it on this
 * host: JobOrigin). The job takes @req's fds on success (req->fds is then NULL).
 * @ret: out, one reference (caller unrefs), written only on success; NULL when an
 * idempotency key matched a job this host does not hold (its record is gone, or in a
 * fleet another host's: fleet_lookup() finds it; jobtable_submit()).
 * @ret_existing: out: that earlier job's id when a key matched one; else 0.
 * Return: 0; a negative errno with @st filled (every refusal of job.submit).
 * Context: a request fiber of the server group (yields while the store writes).
 */
int submit_request(Daemon *d, Request *req, bool answer_at_end, bool id_at_end, Job **ret,
                   uint64_t *ret_existing, IpcStatus *st);

#endif
