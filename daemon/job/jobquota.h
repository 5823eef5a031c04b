/* SPDX-License-Identifier: MIT */
/*
 * jobquota.h — what each user holds of fiberd's memory (and so of its job store): the
 * bytes of the arguments and results of its jobs, and its finished jobs in the order
 * they finished, held against per-user and global bounds ([jobs] max_bytes_per_user,
 * max_bytes, retention_max_per_user, retention_max).
 *
 * The rule: one user's jobs never push out another user's results. So
 *  - a submission that would pass its user's byte budget, or the global one, is
 *    accepted when dropping that user's own oldest finished jobs makes room, and refused
 *    otherwise (jobquota_admit()); once it is charged, those jobs go
 *    (jobquota_room());
 *  - a user whose finished jobs pass retention_max_per_user, or whose bytes pass its
 *    budget once a result is in, loses its own oldest finished job
 *    (jobquota_user_excess());
 *  - the global bounds (retention_max finished jobs in all, max_bytes) take from the
 *    user who holds the most (jobquota_global_excess()): a flood makes its sender that
 *    user, so a user with a few results keeps them.
 * Root and fiberd's own uid (JobQuotaLimits.exempt_uid) are not bound by the per-user
 * limits, as for dispatch.h's JobQuotas; the global ones bind them too.
 *
 * A job carries a JobQuotaEntry (Job.quota): its owner's JobQuotaUser, the bytes charged
 * to it, and its link in that user's list of finished jobs. The module knows nothing of
 * Job: the job table (jobtable.c) charges an entry at every transition
 * (args + result bytes), links it when the job becomes final and detaches it when the job
 * is dropped, and drops the jobs whose entries the excess functions name. Users are kept
 * until exit (a few dozen bytes per uid that ever submitted), each allocated on its own
 * so that the list heads inside them never move.
 *
 * Every function runs under the job table's lock (or on a JobQuota nobody else sees: the
 * unit tests); none yields or allocates but jobquota_user().
 */
#ifndef FIBERD_DAEMON_JOBQUOTA_H
#define FIBERD_DAEMON_JOBQUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "scheduler/base/list.h"

/* JobQuotaLimits - the bounds ([jobs] in the config). */
typedef struct JobQuotaLimits {
        uint64_t max_bytes_per_user;   /* args + results of one uid's jobs; 0 = no bound */
        uint64_t max_bytes;            /* of every uid's; 0 = no bound */
        size_t retention_max_per_user; /* finished jobs of one uid kept; 0 = no bound */
        size_t retention_max;          /* finished jobs kept in all (0 = none but the one
                                        * that just finished, for its waiters) */
        uid_t exempt_uid;              /* fiberd's own uid: with root, no per-user bound */
} JobQuotaLimits;

/* JobQuotaUser - one uid that has submitted (or whose jobs were restored). */
typedef struct JobQuotaUser {
        uid_t uid;
        uint64_t bytes;          /* charged to its entries */
        uint64_t finished_bytes; /* the part charged to its entries in @finished */
        size_t n_finished;       /* entries in @finished */
        ListHead finished;       /* JobQuotaEntry.link, oldest first */
} JobQuotaUser;

/* JobQuotaEntry - one job's part (Job.quota): zero it, then jobquota_attach(). */
typedef struct JobQuotaEntry {
        ListHead link;      /* in user->finished while the job is finished (not dead) */
        JobQuotaUser *user; /* NULL: not attached, nothing charged */
        uint64_t bytes;     /* charged to user (and the total) */
} JobQuotaEntry;

typedef struct JobQuota {
        JobQuotaLimits limits;
        JobQuotaUser **users; /* owned array of owned users */
        size_t n_users, cap_users;
        uint64_t bytes;    /* charged to every entry */
        size_t n_finished; /* entries in every user's finished list */
} JobQuota;

/* jobquota_admit()'s answer: drop the user's oldest finished job, then ask again. */
#define JOBQUOTA_DROP 1

/* jobquota_init - no users, no bounds. Context: any; cannot fail. */
void jobquota_init(JobQuota *q);

/* jobquota_free - free the users (every entry must be detached or forgotten). Accepts a
 * zeroed JobQuota. */
void jobquota_free(JobQuota *q);

/* jobquota_set_limits - new bounds (copied); what is held already stays, and the job
 * table trims it with the excess functions. */
void jobquota_set_limits(JobQuota *q, const JobQuotaLimits *limits);

/* jobquota_exempt - @uid is not bound by the per-user limits (root, limits.exempt_uid). */
bool jobquota_exempt(const JobQuota *q, uid_t uid);

/* jobquota_user - the JobQuotaUser of @uid, made (with nothing held) when absent.
 * Return: it; NULL when out of memory. */
JobQuotaUser *jobquota_user(JobQuota *q, uid_t uid);

/* jobquota_attach - @e (zeroed, or detached) belongs to @u from now; nothing charged. */
void jobquota_attach(JobQuotaEntry *e, JobQuotaUser *u);

/* jobquota_charge - @e holds @bytes now (the difference goes to its user, the total, and
 * its user's finished bytes when it is finished). No-op for an entry not attached. */
void jobquota_charge(JobQuota *q, JobQuotaEntry *e, uint64_t bytes);

/*
 * jobquota_finish - @e's job is finished: link it after @pos in its user's finished
 * list (NULL: last, the usual case; a restore passes the place its finish time gives).
 * No-op when not attached or already linked.
 */
void jobquota_finish(JobQuota *q, JobQuotaEntry *e, ListHead *pos);

/* jobquota_unfinish - @e's job is no longer finished (revived, or dropped). No-op when
 * not linked. */
void jobquota_unfinish(JobQuota *q, JobQuotaEntry *e);

/* jobquota_detach - @e's job is dropped: unlinked, nothing charged, no user. */
void jobquota_detach(JobQuota *q, JobQuotaEntry *e);

/* jobquota_oldest - @u's oldest finished entry, or NULL. */
JobQuotaEntry *jobquota_oldest(const JobQuotaUser *u);

/* jobquota_next_oldest - the finished entry of @u after @e (one of @u's), or NULL. */
JobQuotaEntry *jobquota_next_oldest(const JobQuotaUser *u, const JobQuotaEntry *e);

/*
 * jobquota_admit - may @u add a job of @need bytes of arguments? Within its budget
 * (unless exempt) and the global one: 0. Over one of them, but dropping its own finished
 * jobs would make room: JOBQUOTA_DROP (the caller drops jobquota_oldest(@u) and asks
 * again, or charges the job and then drops what jobquota_room() names). Otherwise:
 * -ENOBUFS over max_bytes_per_user, -ENOSPC over max_bytes (the errnos of
 * jobtable_submit()). Nothing changes here.
 */
int jobquota_admit(const JobQuota *q, const JobQuotaUser *u, uint64_t need);

/*
 * jobquota_room - once a new job of @u is charged: @u's oldest finished entry while @u
 * holds more than max_bytes_per_user (unless exempt) or all users more than max_bytes,
 * the room jobquota_admit() found in @u's own finished jobs; else (or @u has none left)
 * NULL. Dropping each entry it names, until NULL, ends where jobquota_admit()'s loop did.
 */
JobQuotaEntry *jobquota_room(const JobQuota *q, const JobQuotaUser *u);

/*
 * jobquota_user_excess - @u's oldest finished entry when @u is over one of its own
 * bounds (more than retention_max_per_user finished jobs, or more than
 * max_bytes_per_user held, unless exempt); NULL when within them (or it has no finished
 * job left to drop).
 */
JobQuotaEntry *jobquota_user_excess(const JobQuota *q, const JobQuotaUser *u);

/*
 * jobquota_global_excess - when more than retention_max jobs are finished in all, the
 * oldest finished entry of the user with the most finished jobs; else when more than
 * max_bytes are held in all, the oldest finished entry of the user whose finished jobs
 * hold the most bytes; else (or nobody has a finished job) NULL. O(users).
 */
JobQuotaEntry *jobquota_global_excess(const JobQuota *q);

/* jobquota_packed_size - the bytes of @o packed as msgpack (what the store writes of
 * it), counted without packing. */
uint64_t jobquota_packed_size(const msgpack_object *o);

/* jobquota_format_bytes - @bytes for a message: "512 B", "1 MiB", "5.2 MiB" (binary
 * units, one decimal unless whole). Return: @buf. */
char *jobquota_format_bytes(char *buf, size_t size, uint64_t bytes);

#endif
