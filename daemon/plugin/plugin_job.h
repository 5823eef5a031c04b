/* SPDX-License-Identifier: MIT */
/*
 * plugin_job.h — a job inside its plugin: the FiberdHost table plugins call
 * (plugins/fiberd/plugin.h), the job table's run and cancel hooks that call run() and
 * cancel its child fibers, and the check_args call before a job exists (plugin_job.c
 * has the design).
 *
 * It stands above plugin_host.h: a job takes the current instance of its plugin from
 * the registry (plugin_host_acquire()), and the registry knows nothing of jobs; main.c
 * hands plugin_host_functions to plugin_host_init() and the hooks to
 * jobtable_set_hooks().
 */
#ifndef FIBERD_DAEMON_PLUGIN_JOB_H
#define FIBERD_DAEMON_PLUGIN_JOB_H

#include <stddef.h>

#include <msgpack.h>

#include "daemon/job/job.h"
#include "ipc/status.h"
#include "plugins/fiberd/plugin.h"

/*
 * plugin_job_init - the fiber-local keys a plugin's fibers are found by, the open()
 * hook of plugin code, and the result cap (plugin_host_set_max_result()).
 * Return: 0; -ENOSPC when the runtime has no fiber-local key left.
 * Context: main thread at start-up, before plugin_host_init().
 */
int plugin_job_init(size_t max_result_bytes, size_t max_message);

/*
 * plugin_host_set_max_result - the result cap, bytes: the biggest result a plugin may
 * build, @max_result_bytes ([jobs] max_result_bytes) or, when less, what a record within
 * @max_message ([ipc]) leaves it (4 KiB less). A plugin's result_*() past it answers
 * -E2BIG and its job fails INVALID_ARGUMENT naming the setting. Context: any (start-up,
 * SIGHUP); applies to results built from then on.
 */
void plugin_host_set_max_result(size_t max_result_bytes, size_t max_message);

/*
 * plugin_host_check_args - refuse bad args before a job is created: @args must be a
 * map, and @p, when its descriptor has check_args (plugin.h), must accept them; it reads
 * them, and @origin's fds and creds (borrowed, nothing taken), through a job-less
 * FiberdJob handle (plugin_job.c). @p is an instance the caller holds a reference on
 * (plugin_host_acquire()), so its code stays mapped while check_args runs.
 * Return: 0; a negative errno with @st filled with INVALID_ARGUMENT and the plugin's
 * reason. Context: a fiber of the server group (a request's, or a connection's reader
 * running a job.run inline); does not yield (unless the plugin breaks the rule).
 */
int plugin_host_check_args(const Plugin *p, const msgpack_object *args, const JobOrigin *origin,
                           IpcStatus *st);

/*
 * plugin_host_run - the job table's run hook (JobTableHooks.run): call
 * the plugin's run() for @j with the host table, then store the result (or the
 * failure's code and message) in @j under the lock of @j's table (Job.table) — unless
 * @j has ended meanwhile (its code did not return after the cancel: detached,
 * dispatch.c), whose record stays as it ended: then both are dropped.
 * Return: what run() returned (0 or a negative errno).
 * Context: @j's job fiber; yields as the plugin does.
 */
int plugin_host_run(Job *j);

/*
 * plugin_host_cancel - the job table's cancel hook (JobTableHooks.cancel):
 * cancel every live child fiber of @j's FiberdJob; nothing when @j is not inside its
 * plugin's run(). Context: caller holds the table lock; does not yield.
 */
void plugin_host_cancel(Job *j);

/* plugin_host_functions - the FiberdHost table every plugin is handed (loader_new()),
 * constant from start to exit. */
extern const FiberdHost plugin_host_functions;

#endif
