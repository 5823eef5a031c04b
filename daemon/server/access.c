/* SPDX-License-Identifier: MIT */
/*
 * access.c — a client's access tier (access.h has the rules). The group names of
 * [access] were resolved to gids when the config was loaded (config.c), so nothing here
 * reads the group database.
 */
#include "daemon/server/access.h"

#include <errno.h>
#include <stdio.h>

static bool access_is_admin(const Config *cfg, const Creds *c)
{
        return c->uid == 0 ||
               (cfg->admin_gid != CONFIG_NO_GROUP && creds_in_group(c, cfg->admin_gid));
}

AccessTier access_tier(const Config *cfg, const Creds *c)
{
        if (access_is_admin(cfg, c))
                return ACCESS_ADMIN;
        if (!cfg->submit_group || !*cfg->submit_group)
                return ACCESS_SUBMIT;
        if (cfg->submit_gid != CONFIG_NO_GROUP && creds_in_group(c, cfg->submit_gid))
                return ACCESS_SUBMIT;
        return ACCESS_READ;
}

const char *access_tier_name(AccessTier t)
{
        switch (t) {
        case ACCESS_READ:
                return "read";
        case ACCESS_SUBMIT:
                return "submit";
        case ACCESS_ADMIN:
                return "admin";
        }
        return "?";
}

void access_who_has(const Config *cfg, AccessTier t, char *buf, size_t size)
{
        const char *admin = cfg->admin_gid != CONFIG_NO_GROUP ? cfg->admin_group : NULL;

        if (t == ACCESS_READ)
                snprintf(buf, size, "every local user");
        else if (t == ACCESS_SUBMIT && (!cfg->submit_group || !*cfg->submit_group))
                snprintf(buf, size, "every local user");
        else if (t == ACCESS_SUBMIT)
                snprintf(buf, size, "members of group %s ([access] submit_group) and admins",
                         cfg->submit_group);
        else if (admin)
                snprintf(buf, size, "root and members of group %s ([access] admin_group)", admin);
        else if (cfg->admin_group && *cfg->admin_group)
                snprintf(buf, size, "root only: group %s ([access] admin_group) does not exist",
                         cfg->admin_group);
        else
                snprintf(buf, size, "root only: [access] admin_group is empty");
}

int access_denied(const Config *cfg, AccessTier needed, const char *what, IpcStatus *st)
{
        char who[160];

        access_who_has(cfg, needed, who, sizeof(who));
        return ipc_status_set(st, IPC_PERMISSION_DENIED, -EACCES,
                              "%s needs the %s tier (held by %s; see [access] in fiberd's "
                              "config)",
                              what, access_tier_name(needed), who);
}
