/* SPDX-License-Identifier: MIT */
/*
 * creds.h — who a client is: the uid, gid and supplementary groups of the process at the
 * other end of a connection, read once when the connection is accepted and shared
 * (reference counted) by the connection, its requests and the jobs they submit.
 *
 * The groups are the peer's own at connect(2) time (SO_PEERGROUPS, Linux 4.13), not a
 * fresh look-up in the group database: a process that dropped a group does not get it
 * back through fiberd, and no NSS call runs on the server's worker. Kernels without
 * SO_PEERGROUPS fall back to getgrouplist(3) of the uid's passwd entry.
 *
 * Creds are immutable after creds_from_socket(); any thread may read them.
 */
#ifndef FIBERD_DAEMON_CREDS_H
#define FIBERD_DAEMON_CREDS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct Creds {
        int refs;        /* atomic */
        uid_t uid;       /* SO_PEERCRED */
        gid_t gid;       /* SO_PEERCRED: the primary group */
        pid_t pid;       /* SO_PEERCRED: for log lines only */
        size_t n_groups; /* supplementary groups in @groups */
        gid_t groups[];
} Creds;

/*
 * creds_from_socket - the credentials of the peer of the connected Unix socket @fd.
 * @ret: out, one reference, written only on success.
 * Return: 0; -errno of getsockopt(2); -ENOMEM. Context: any; does not yield (the
 * getgrouplist() fallback may read /etc/group).
 */
int creds_from_socket(int fd, Creds **ret);

/*
 * creds_new - credentials built by hand (tests, and fiberd acting for itself).
 * @groups: @n_groups supplementary groups, copied. @ret: out, one reference.
 * Return: 0; -ENOMEM.
 */
int creds_new(uid_t uid, gid_t gid, const gid_t *groups, size_t n_groups, Creds **ret);

/* creds_ref - one more reference; returns @c. Context: any. */
Creds *creds_ref(Creds *c);

/* creds_unref - drop a reference, freeing at zero. Accepts NULL; returns NULL. */
Creds *creds_unref(Creds *c);

/* creds_in_group - true when @gid is @c's primary group or one of its supplementary ones. */
bool creds_in_group(const Creds *c, gid_t gid);

#endif
