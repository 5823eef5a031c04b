/* SPDX-License-Identifier: MIT */
/*
 * jobquota.c — bytes and finished jobs per user against the [jobs] bounds (jobquota.h
 * has the rule and who calls what).
 *
 * Accounting only: which job to drop is answered here, dropping it is the job table's
 * (retire_locked(), jobtable.c), so this file stays pure and is unit-tested on its own
 * (tests/daemon-unit/test_jobquota.c). Users live in an array of pointers searched
 * linearly, as the dispatcher's DispatchUser does: local users are few, and a job looks
 * its user up once, when it is listed; after that its entry points at it.
 */
#include "daemon/job/jobquota.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

void jobquota_init(JobQuota *q)
{
        *q = (JobQuota){.users = NULL};
}

void jobquota_free(JobQuota *q)
{
        for (size_t i = 0; i < q->n_users; i++)
                free(q->users[i]);
        free(q->users);
        jobquota_init(q);
}

void jobquota_set_limits(JobQuota *q, const JobQuotaLimits *limits)
{
        q->limits = *limits;
}

bool jobquota_exempt(const JobQuota *q, uid_t uid)
{
        return uid == 0 || uid == q->limits.exempt_uid;
}

JobQuotaUser *jobquota_user(JobQuota *q, uid_t uid)
{
        JobQuotaUser *u;

        for (size_t i = 0; i < q->n_users; i++)
                if (q->users[i]->uid == uid)
                        return q->users[i];
        if (q->n_users == q->cap_users) {
                size_t cap = q->cap_users ? q->cap_users * 2 : 8;
                JobQuotaUser **v = realloc(q->users, cap * sizeof(*v));
                if (!v)
                        return NULL;
                q->users = v;
                q->cap_users = cap;
        }
        u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        u->uid = uid;
        list_init(&u->finished);
        q->users[q->n_users++] = u;
        return u;
}

void jobquota_attach(JobQuotaEntry *e, JobQuotaUser *u)
{
        list_init(&e->link);
        e->user = u;
        e->bytes = 0;
}

void jobquota_charge(JobQuota *q, JobQuotaEntry *e, uint64_t bytes)
{
        JobQuotaUser *u = e->user;

        if (!u || e->bytes == bytes)
                return;
        /* unsigned arithmetic: the sums hold e->bytes, so they never go below zero */
        u->bytes = u->bytes - e->bytes + bytes;
        q->bytes = q->bytes - e->bytes + bytes;
        if (list_linked(&e->link))
                u->finished_bytes = u->finished_bytes - e->bytes + bytes;
        e->bytes = bytes;
}

void jobquota_finish(JobQuota *q, JobQuotaEntry *e, ListHead *pos)
{
        JobQuotaUser *u = e->user;

        if (!u || list_linked(&e->link))
                return;
        if (!pos)
                pos = u->finished.prev;
        list_add_head(pos, &e->link); /* after pos: pos taken as a head */
        u->n_finished++;
        u->finished_bytes += e->bytes;
        q->n_finished++;
}

void jobquota_unfinish(JobQuota *q, JobQuotaEntry *e)
{
        JobQuotaUser *u = e->user;

        if (!u || !list_linked(&e->link))
                return;
        list_del(&e->link);
        u->n_finished--;
        u->finished_bytes -= e->bytes;
        q->n_finished--;
}

void jobquota_detach(JobQuota *q, JobQuotaEntry *e)
{
        jobquota_unfinish(q, e);
        jobquota_charge(q, e, 0);
        e->user = NULL;
}

JobQuotaEntry *jobquota_oldest(const JobQuotaUser *u)
{
        ListHead *first = u ? list_first(&u->finished) : NULL;

        return first ? list_entry(first, JobQuotaEntry, link) : NULL;
}

JobQuotaEntry *jobquota_next_oldest(const JobQuotaUser *u, const JobQuotaEntry *e)
{
        return e->link.next == &u->finished ? NULL : list_entry(e->link.next, JobQuotaEntry, link);
}

int jobquota_admit(const JobQuota *q, const JobQuotaUser *u, uint64_t need)
{
        const JobQuotaLimits *l = &q->limits;
        bool drop = false;

        /* what stays once every finished job of @u is dropped: its queued, held and
         * running jobs, and its dead ones (the dead set has its own retention) */
        if (l->max_bytes_per_user && !jobquota_exempt(q, u->uid) &&
            u->bytes + need > l->max_bytes_per_user) {
                if (u->bytes - u->finished_bytes + need > l->max_bytes_per_user)
                        return -ENOBUFS;
                drop = true;
        }
        if (l->max_bytes && q->bytes + need > l->max_bytes) {
                if (q->bytes - u->finished_bytes + need > l->max_bytes)
                        return -ENOSPC;
                drop = true;
        }
        return drop ? JOBQUOTA_DROP : 0;
}

JobQuotaEntry *jobquota_room(const JobQuota *q, const JobQuotaUser *u)
{
        const JobQuotaLimits *l = &q->limits;

        if (!u || !u->n_finished)
                return NULL;
        if ((l->max_bytes_per_user && !jobquota_exempt(q, u->uid) &&
             u->bytes > l->max_bytes_per_user) ||
            (l->max_bytes && q->bytes > l->max_bytes))
                return jobquota_oldest(u);
        return NULL;
}

JobQuotaEntry *jobquota_user_excess(const JobQuota *q, const JobQuotaUser *u)
{
        const JobQuotaLimits *l = &q->limits;

        if (!u || !u->n_finished || jobquota_exempt(q, u->uid))
                return NULL;
        if ((l->retention_max_per_user && u->n_finished > l->retention_max_per_user) ||
            (l->max_bytes_per_user && u->bytes > l->max_bytes_per_user))
                return jobquota_oldest(u);
        return NULL;
}

JobQuotaEntry *jobquota_global_excess(const JobQuota *q)
{
        const JobQuotaLimits *l = &q->limits;
        const JobQuotaUser *most = NULL;

        if (q->n_finished > l->retention_max) {
                for (size_t i = 0; i < q->n_users; i++)
                        if (!most || q->users[i]->n_finished > most->n_finished)
                                most = q->users[i];
        } else if (l->max_bytes && q->bytes > l->max_bytes) {
                for (size_t i = 0; i < q->n_users; i++)
                        if (q->users[i]->n_finished &&
                            (!most || q->users[i]->finished_bytes > most->finished_bytes))
                                most = q->users[i];
        }
        return jobquota_oldest(most);
}

/* A msgpack write target that only counts. */
static int count_write(void *data, const char *buf, size_t len)
{
        (void)buf;
        *(uint64_t *)data += len;
        return 0;
}

uint64_t jobquota_packed_size(const msgpack_object *o)
{
        uint64_t n = 0;
        msgpack_packer pk;

        msgpack_packer_init(&pk, &n, count_write);
        msgpack_pack_object(&pk, *o);
        return n;
}

char *jobquota_format_bytes(char *buf, size_t size, uint64_t bytes)
{
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        double v = (double)bytes;
        unsigned i = 0;

        while (v >= 1024 && i + 1 < sizeof(units) / sizeof(units[0])) {
                v /= 1024;
                i++;
        }
        if (i == 0 || bytes % (1ull << (10 * i)) == 0)
                snprintf(buf, size, "%llu %s", (unsigned long long)(bytes >> (10 * i)), units[i]);
        else
                snprintf(buf, size, "%.1f %s", v, units[i]);
        return buf;
}
