/* SPDX-License-Identifier: MIT */
/*
 * access.h — access tiers: what a client may do, from its peer credentials (creds.h)
 * and the [access] section of the config (config.h).
 *
 * Three tiers, each holding the one below:
 *  - read: ping, plugins.list, stats, and its own jobs (status, wait, result, cancel,
 *    list). Every local user has it.
 *  - submit: job.submit and job.run with priorities >= 0. Every local user by default;
 *    with `submit_group` set, only that group's members (and admins).
 *  - admin: other users' jobs (see, wait for, cancel), negative priorities, and whatever
 *    later verbs reserve to admins (reload, admin-only classes). Root and members of
 *    `admin_group` (default fiberd-admin).
 * Another user's job is simply absent for a non-admin: its id answers NOT_FOUND, worded
 * as for an id that never existed, so ids leak nothing.
 *
 * Context: any fiber of the server group; pure over the config and creds it is given.
 */
#ifndef FIBERD_DAEMON_ACCESS_H
#define FIBERD_DAEMON_ACCESS_H

#include <stddef.h>

#include "daemon/config.h"
#include "daemon/server/creds.h"
#include "ipc/status.h"

typedef enum AccessTier {
        ACCESS_READ,
        ACCESS_SUBMIT,
        ACCESS_ADMIN,
} AccessTier;

/* access_tier - the highest tier @c has under @cfg's [access] settings. */
AccessTier access_tier(const Config *cfg, const Creds *c);

/* access_tier_name - "read", "submit", "admin". */
const char *access_tier_name(AccessTier t);

/*
 * access_who_has - one phrase saying who has tier @t under @cfg, for PERMISSION_DENIED
 * messages: "root and members of group fiberd-admin". Written to @buf (@size bytes).
 */
void access_who_has(const Config *cfg, AccessTier t, char *buf, size_t size);

/*
 * access_denied - fill @st with PERMISSION_DENIED for @what ("submitting a job"),
 * naming the tier it needs (@needed) and who holds it under @cfg.
 * Return: -EACCES. Context: any; does not yield.
 */
int access_denied(const Config *cfg, AccessTier needed, const char *what, IpcStatus *st);

#endif
