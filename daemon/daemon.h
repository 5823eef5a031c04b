/* SPDX-License-Identifier: MIT */
/*
 * daemon.h — the one Daemon a fiberd process runs: its configuration, its two
 * scheduling groups, the job table and the server, shared by main.c (start-up, signals,
 * shutdown), methods.c (the RPC methods) and stats.c.
 *
 * Two scheduling groups:
 *  - "server": the accept, reader, request, signal, ticker and plugin-watch fibers; a
 *    small group (1-2 workers) so the daemon answers even when every job worker is busy;
 *  - "jobs": job fibers, their supervisors and the child fibers plugins spawn;
 *    --workers sets its worker count.
 */
#ifndef FIBERD_DAEMON_DAEMON_H
#define FIBERD_DAEMON_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/config.h"
#include "daemon/jobtable.h"
#include "daemon/server.h"
#include "scheduler/sched.h"

#ifndef FIBERD_VERSION
#define FIBERD_VERSION "0.1.0"
#endif

typedef struct Daemon {
        ConfigArgs args; /* the command line, kept for SIGHUP */
        Config cfg;      /* current settings */
        SchedulingGroup *server_group;
        SchedulingGroup *job_group;
        JobTable jobs;
        Server *server;
        bool socket_activated; /* the socket came from systemd: do not unlink it */
        uint64_t start_ns;     /* CLOCK_MONOTONIC at start */
        bool stopping;         /* atomic: SIGTERM/SIGINT seen */
        FiberEvent stop;       /* set by the signal fiber; main() waits on it */
} Daemon;

/* methods_lookup - the method table for server_new(); NULL for an unknown name. */
MethodFn methods_lookup(const char *name, size_t len);

/*
 * stats_pack - the `stats` result (PROTOCOL.md): uptime, job counts in total and per
 * plugin, per scheduling group runtime stats, server counters. Return 0; -ENOMEM.
 * Context: any fiber; does not yield.
 */
int stats_pack(Daemon *d, msgpack_packer *pk);

/*
 * stats_status_line - the one-line summary sent as sd_notify STATUS= about once a second,
 * e.g. "2 running, 3 queued, 110 done, 4 failed, 1 cancelled; 4+1 workers".
 */
void stats_status_line(Daemon *d, char *buf, size_t size);

#endif
