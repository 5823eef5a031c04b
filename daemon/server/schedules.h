/* SPDX-License-Identifier: MIT */
/*
 * schedules.h — the methods of periodic schedules (PROTOCOL.md, "schedule.add",
 * "schedule.list, schedule.remove, schedule.pause, schedule.resume"): cron's and
 * systemd timers' job for fiberd's users, each acting as the user who added it.
 *
 * Each is a MethodFn (server.h; @ctx the Daemon) for methods.c's table. A user sees and
 * acts on their own schedules; an admin on everyone's (remove, pause and resume take the
 * owner as a second param). schedule.add needs the submit tier, and so does resume;
 * list, remove and pause the read tier (a user whose submit right was withdrawn can
 * still stop what they started). A change is answered once the job store has it.
 * Context: a request fiber of the server group; add, remove, pause and resume yield
 * while the store commits.
 */
#ifndef FIBERD_DAEMON_SCHEDULES_H
#define FIBERD_DAEMON_SCHEDULES_H

#include <msgpack.h>

#include "daemon/server/server.h"
#include "ipc/status.h"

/*
 * schedules_add - schedule.add [name, spec, plugin, args, options]: a new schedule of the
 * caller, its plugin, args and options checked as job.submit checks them (no job is
 * made), its first tick computed from now. Answers the schedule.
 * Errors: INVALID_ARGUMENT (naming the field; a cron's from cron_parse()),
 * ALREADY_EXISTS (the caller has one of that name), NOT_FOUND (no such plugin),
 * PERMISSION_DENIED, OVERLOADED (SCHEDULE_MAX_PER_OWNER), UNAVAILABLE (shutting down;
 * remove, pause and resume too), INTERNAL (the store failed: nothing was added). In a
 * fleet the name is the fleet's: one another host added is ALREADY_EXISTS too.
 */
int schedules_add(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st);

/* schedules_list - schedule.list []: the caller's schedules (an admin's: everyone's),
 * by name, then owner. MESSAGE_TOO_LARGE when they do not fit one answer. */
int schedules_list(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st);

/* schedules_remove - schedule.remove [name, owner?]: drop it; answers it as it was. */
int schedules_remove(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st);

/* schedules_pause - schedule.pause [name, owner?]: it submits nothing until resumed. */
int schedules_pause(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st);

/* schedules_resume - schedule.resume [name, owner?]: its next tick computed from now. */
int schedules_resume(void *ctx, Request *req, msgpack_packer *pk, IpcStatus *st);

#endif
