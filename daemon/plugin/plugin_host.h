/* SPDX-License-Identifier: MIT */
/*
 * plugin_host.h — the daemon's side of the plugin ABI: which plugins exist (an adapter
 * over plugins/loader.h) and the host function table a job's plugin calls
 * (plugins/fiberd/plugin.h's FiberdHost), implemented on the fiber runtime and the
 * job table (plugin_job.c).
 *
 * The job table does not call in here by name: main.c hands plugin_host_run() and
 * plugin_host_cancel() (plugin_job.h) to jobtable_set_hooks(), so daemon/'s includes
 * stay a DAG (job.h, dispatch.h, jobtable.h below; plugin_host.h, then plugin_job.h
 * above them). This file is the registry of plugins and knows nothing of a running
 * job: the host function table it hands the loader comes from its caller.
 *
 * Plugins in place: after the first scan at start, every load, init(),
 * fini() and dlclose() happens on one plain pthread, the plugin loader thread (it
 * waits in poll(2) on the directory's inotify fd, the loader's reap eventfd and its
 * own request eventfd), never on the server group, so a slow init() delays no request.
 * A job's `const Plugin *` stays valid memory until exit (the loader keeps retired
 * instances' structs); the code behind it is held by references: plugin_host_acquire()
 * when the job starts, plugin_host_release() after its last child fiber ended.
 *
 * Context: unless said otherwise, any fiber or thread; nothing here yields except
 * plugin_host_run() (which runs the plugin).
 */
#ifndef FIBERD_DAEMON_PLUGIN_HOST_H
#define FIBERD_DAEMON_PLUGIN_HOST_H

#include <stddef.h>

#include <msgpack.h>

#include "daemon/job/job.h"
#include "ipc/status.h"
#include "plugins/fiberd/plugin.h"
#include "plugins/loader.h"

/*
 * plugin_host_init - create the loader with the host function table @host (what
 * plugins call: plugin_job.h's plugin_host_functions; not owned, it must outlive the
 * loader), watch and scan @dir. A missing directory is logged and fiberd runs with no
 * plugins until SIGHUP. Return: 0; -errno (inotify, memory).
 * Context: main thread at start-up, after plugin_job_init().
 */
int plugin_host_init(const char *dir, const FiberdHost *host);

/*
 * plugin_host_symbolize - the runtime's symbolizer (sched_set_symbolizer()): names a
 * stall backtrace's frame in a plugin by its file, version and path instead of the
 * /proc/self/fd/N it was mapped through (loader_symbolize()). @arg is unused.
 * Return: true when @addr is in a loaded plugin. Context: a monitor pthread; takes the
 * loader's state lock briefly.
 */
bool plugin_host_symbolize(const void *addr, char *buf, size_t len, void *arg);

/*
 * plugin_host_rescan - SIGHUP: watch and scan @dir (it may have changed): new files load,
 * changed files replace their version, removed ones are retired, refused files are
 * retried. The scan runs on the plugin loader thread; the calling fiber waits for it
 * (yields; the worker goes on running other fibers). Context: a fiber (the signal
 * fiber, a request); the main thread before the loader thread runs.
 * Return: 0; -errno (-ECANCELED when the caller was cancelled: the scan still runs).
 */
int plugin_host_rescan(const char *dir);

/*
 * plugin_host_acquire - the current instance of the plugin called @name (@len bytes),
 * referenced, or NULL; plugin_host_release() drops the reference (NULL is fine). A
 * replaced or removed instance is unloaded once its last reference is gone.
 * Context: any; does not yield.
 */
const Plugin *plugin_host_acquire(const char *name, size_t len);
void plugin_host_release(const Plugin *p);

/* plugin_host_find - the loaded plugin called @name (@len bytes), or NULL. */
const Plugin *plugin_host_find(const char *name, size_t len);

/* plugin_host_max_attempts - the runs a job of @p gets when its submission does not say
 * (FiberdPlugin.max_attempts; 1 = no retry). Context: any. */
unsigned plugin_host_max_attempts(const Plugin *p);

/* plugin_host_name - the plugin's name. */
const char *plugin_host_name(const Plugin *p);

/* plugin_host_set_guard - the LoaderGuard the loader gets (crash.h); copied at
 * plugin_host_init(). Context: main thread, before plugin_host_init(). */
void plugin_host_set_guard(const LoaderGuard *g);

/*
 * plugin_host_retry_safe - the job table's retry_safe hook (JobTableHooks.retry_safe):
 * does @j's plugin declare FIBERD_PLUGIN_RETRY_SAFE (a descriptor too old for `flags`
 * does not)? Context: any; does not yield.
 */
bool plugin_host_retry_safe(const Job *j);

/*
 * plugin_host_run_inline - the job table's run_inline hook (JobTableHooks.run_inline):
 * whether @j's plugin, the instance it was submitted or restored with, is still the
 * current one, declared FIBERD_PLUGIN_INLINE, and has not lost it (plugin_host_run()
 * takes it away after PLUGIN_INLINE_STRIKES runs in a row past PLUGIN_INLINE_MAX_NS,
 * plugin_host_inline_stalled() at once). Context: any thread; @j not final (a run or
 * the dispatcher keeps its JobLive, read without the table lock); does not yield.
 */
bool plugin_host_run_inline(const Job *j);

/*
 * plugin_host_inline_demote - @p (NULL: nothing) loses FIBERD_PLUGIN_INLINE: its later
 * jobs run on the job workers (plugin_host_run_inline()). Return: true for the one call
 * that took it away (the caller says why, once); false when @p had none or lost it
 * already. Context: any thread; does not block.
 */
bool plugin_host_inline_demote(const Plugin *p);

/*
 * plugin_host_inline_stalled - job @job_id's fiber stalled (the stall detector: @ran_ns
 * without switching) on the server group, where only a job run inline runs plugin
 * code: @p, the instance it runs, loses FIBERD_PLUGIN_INLINE at once, with a warning;
 * with @p NULL (the job ended), the current instance of the plugin called @name.
 * Nothing when it had none or lost it already. Context: the stall hook (the group's
 * monitor thread); takes the loader's lock only for @p NULL.
 */
void plugin_host_inline_stalled(const Plugin *p, const char *name, uint64_t job_id,
                                uint64_t ran_ns);

/* plugin_host_pack_list - the plugins.list result: loaded plugins, then
 * replaced or removed versions still draining, with "state": "draining". Return: 0;
 * -ENOMEM. */
int plugin_host_pack_list(msgpack_packer *pk);

/* plugin_host_names - "sha256, skynet, sleep, spin" (cut to @size), for messages. */
void plugin_host_names(char *buf, size_t size);

/* plugin_host_count - loaded plugins. */
size_t plugin_host_count(void);

/* plugin_host_free - stop the plugin loader thread, fini() every plugin and free the
 * loader; only once no job runs. */
void plugin_host_free(void);

#endif
