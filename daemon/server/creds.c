/* SPDX-License-Identifier: MIT */
/*
 * creds.c — a connection's peer credentials (creds.h): SO_PEERCRED for uid, gid and pid,
 * SO_PEERGROUPS for the supplementary groups, getgrouplist(3) where the kernel lacks it.
 */
#include "daemon/server/creds.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

/* Most groups read at once; NGROUPS_MAX is 65536, but nobody is in that many. */
#define CREDS_GROUPS_MAX 1024

int creds_new(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, Creds **ret)
{
        Creds *c = malloc(sizeof(*c) + n_groups * sizeof(gid_t));

        if (!c)
                return -ENOMEM;
        c->refs = 1;
        c->uid = uid;
        c->gid = gid;
        c->pid = 0;
        c->n_groups = n_groups;
        if (n_groups)
                memcpy(c->groups, groups, n_groups * sizeof(gid_t));
        *ret = c;
        return 0;
}

/* The supplementary groups of @uid from the group database; @gid counts as one. */
static int groups_from_database(uid_t uid, gid_t gid, gid_t *groups, int *n)
{
        struct passwd pw, *res = NULL;
        char buf[4096];

        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) != 0 || !res) {
                *n = 0; /* no passwd entry: no supplementary groups */
                return 0;
        }
        if (getgrouplist(pw.pw_name, gid, groups, n) < 0)
                return -E2BIG;
        return 0;
}

int creds_from_socket(int fd, Creds **ret)
{
        struct ucred uc;
        socklen_t len = sizeof(uc);
        gid_t *groups;
        int n = CREDS_GROUPS_MAX, r;
        Creds *c;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
                return -errno;
        groups = malloc(CREDS_GROUPS_MAX * sizeof(gid_t));
        if (!groups)
                return -ENOMEM;
        len = CREDS_GROUPS_MAX * sizeof(gid_t);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0) {
                n = (int)(len / sizeof(gid_t));
        } else if (errno == ENOPROTOOPT) {
                r = groups_from_database(uc.uid, uc.gid, groups, &n);
                if (r < 0)
                        goto out_free_groups;
        } else {
                r = -errno; /* ERANGE: more than CREDS_GROUPS_MAX groups */
                goto out_free_groups;
        }
        r = creds_new(uc.uid, uc.gid, groups, (size_t)n, &c);
        if (r < 0)
                goto out_free_groups;
        c->pid = uc.pid;
        free(groups);
        *ret = c;
        return 0;

out_free_groups:
        free(groups);
        return r;
}

Creds *creds_ref(Creds *c)
{
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
        return c;
}

Creds *creds_unref(Creds *c)
{
        if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
                free(c);
        return NULL;
}

bool creds_in_group(const Creds *c, gid_t gid)
{
        if (c->gid == gid)
                return true;
        for (size_t i = 0; i < c->n_groups; i++)
                if (c->groups[i] == gid)
                        return true;
        return false;
}
