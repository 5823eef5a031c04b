/* SPDX-License-Identifier: MIT */
/*
 * daemon.h — the one Daemon a fiberd process runs: its configuration, its server
 * scheduling group and job scheduler, the job table and the server, shared by main.c
 * (start-up, signals, shutdown), methods.c (the RPC methods) and stats.c.
 *
 * Where fibers run:
 *  - the "server" scheduling group ([server] workers, 1 by default; local run queues
 *    when more than one: main.c; sched_group_new()): the accept, reader,
 *    request, signal, ticker, schedules and plugin-watch fibers, and the job supervisors (which
 *    enforce --timeout: dispatch.c), so the daemon answers, times out and cancels
 *    even when every job worker is busy or blocked; and the job fibers of plugins that
 *    declared their jobs short (FIBERD_PLUGIN_INLINE, [jobs] run_inline: dispatch.c);
 *  - the job Scheduler (sched_new()): job fibers and the child fibers plugins spawn,
 *    on one or more scheduling groups ("jobs-0", "jobs-1", ... in stats) laid out
 *    from workers and the [scheduler] keys (config.h): group count and size, NUMA
 *    binding, stealing between groups, run-queue policy.
 */
#ifndef FIBERD_DAEMON_DAEMON_H
#define FIBERD_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/config.h"
#include "daemon/cron/schedule.h"
#include "daemon/job/jobtable.h"
#include "daemon/obs/metrics_http.h"
#include "daemon/server/server.h"
#include "ipc/protocol.h"
#include "scheduler/sched.h"

typedef struct Daemon {
        ConfigArgs args; /* the command line, kept for SIGHUP */
        Config cfg;      /* current settings */
        /* the settings a reload replaced, freed at the next one: request fibers on other
         * server workers ([server] workers > 1) may still read its strings (access.c's
         * group names) in the moment of the swap */
        Config cfg_retired;
        bool cfg_retired_set;
        SchedulingGroup *server_group;
        Scheduler *job_sched; /* the job groups */
        JobTable jobs;
        Store *store;            /* the job store (store.h): the table writes every change to it */
        ScheduleTable schedules; /* periodic schedules (schedule.h), fired by schedrun.c */
        Server *server;
        bool socket_activated;  /* the socket came from systemd: do not unlink it */
        MetricsHttp *metrics;   /* the HTTP scrape endpoint (metrics_http.h), or NULL */
        bool metrics_activated; /* its socket came from systemd, not [metrics] listen */
        uint64_t start_ns;      /* CLOCK_MONOTONIC at start */
        bool stopping;          /* atomic: SIGTERM/SIGINT seen */
        FiberEvent stop;        /* set by the signal fiber; main() waits on it */
        FiberMutex reload_lock; /* one daemon_reload() at a time (SIGHUP, the method) */
        char reload_error[384]; /* why the last reload failed; "" = it did not. Server group */
        /* fleet jobs this host left in the stream because it does not load their plugin,
         * by id modulo the size: said once each, not at every takeover (fleet_take(), the
         * store's reader thread only) */
        uint64_t fleet_declined[256];
} Daemon;

/*
 * daemon_reload - re-read the config with the command line's flags and apply what can
 * change while running (docs/configuration.md, "Signals"), then rescan the plugin
 * directory; @by names the asker in the first log line ("SIGHUP", "fiberctl reload").
 * Sends RELOADING=1 ... READY=1 with a STATUS= that says the outcome. A failure logs
 * exactly one line, keeps the running configuration and stays in the STATUS= line
 * (stats_status_line()) until a reload succeeds.
 * @msg: out (@size bytes): what was applied, or why it failed.
 * Return: 0; -EINVAL (or the config file's open error) when the config does not load;
 * the rescan's error; -ECANCELED when fiberd is stopping.
 * Context: a fiber of the server group; yields (one reload at a time).
 */
int daemon_reload(Daemon *d, const char *by, char *msg, size_t size);

/*
 * daemon_apply_limits - hand @c's per-user limits, quotas and the class and plugin caps
 * (max_running) to the job table and its dispatcher: at start and on each reload.
 * Context: main thread before the groups serve, or a fiber of the server group.
 */
void daemon_apply_limits(Daemon *d, const Config *c);

/*
 * daemon_apply_server_limits - hand @c's [ipc] limits to the server (server_set_limits()):
 * at start and on each reload. Context: as daemon_apply_limits(); d->server exists.
 */
void daemon_apply_server_limits(Daemon *d, const Config *c);

/* methods_lookup - the method table for server_new(); NULL for an unknown name. */
MethodFn methods_lookup(const char *name, size_t len);

/*
 * methods_run_inline - server_set_inline()'s RequestInlineFn: a job.run without a wait
 * limit on a store that writes nothing (memory). Its submission does not park (no
 * durable write to wait for: the plugin is a lookup, a limit a refusal) and its answer
 * waits as a deferred watch (jobwait.c), so it runs on the connection's reader. It
 * parks in one case, out of memory for the watch: then it waits for the job's end as a
 * request fiber would, and that connection is not read meanwhile. A refusal, or a key
 * whose job is already final, is answered at once. @ctx: the Daemon.
 */
bool methods_run_inline(void *ctx, const Request *req);

/*
 * stats_pack - the `stats` result (PROTOCOL.md): uptime, job counts in total and per
 * plugin (with its stall reports), per scheduling group runtime stats (the server group,
 * then every job group), the job scheduler's layout and classes, server counters. Return 0; -ENOMEM.
 * Context: any fiber; does not yield.
 */
int stats_pack(Daemon *d, msgpack_packer *pk);

/*
 * stats_status_line - the one-line summary sent as sd_notify STATUS= about once a second,
 * e.g. "2 running, 3 queued, 110 done, 4 failed, 1 cancelled; 4 job workers in 2 groups"
 * (the job workers summed over the job scheduler's groups; ", N detached" follows
 * "cancelled" while N ended jobs' code still runs: dispatch.c).
 */
void stats_status_line(Daemon *d, char *buf, size_t size);

/* stats_job_workers - the worker pthreads of every job group, summed. Context: any. */
unsigned stats_job_workers(const Daemon *d);

#endif
