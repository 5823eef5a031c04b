/* SPDX-License-Identifier: MIT */
/*
 * fleet.h — fleet reads: job.status, job.wait and job.list for jobs this host does not
 * hold, answered from the fleet's shared records (store-redis.c); and job.cancel of a
 * job the fleet holds until it is due. See fleet.c for what
 * a read costs and where it runs.
 *
 * Every function runs in a request fiber of the server group and blocks its worker for
 * the store round trips it makes (store_fetch(), store_list(), store_fetch_many():
 * the store's query connection, under its mutex). None takes a lock across a round
 * trip; the job table's lock is taken briefly to look ids up and pack records.
 */
#ifndef FIBERD_DAEMON_FLEET_H
#define FIBERD_DAEMON_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "daemon/job/joblist.h"
#include "daemon/job/jobtable.h"
#include "daemon/server/server.h"
#include "daemon/store/store.h"
#include "ipc/status.h"

/*
 * fleet_get - job @id of the fleet: @t's own (referenced), else a copy of its shared
 * record in @s (jobtable_fleet_copy(), Job.fleet_copy; referenced). NULL when neither
 * exists, when @s is NULL or not a fleet store, or when the store cannot be read
 * (logged by the backend). Context: a request fiber; blocks its worker for one round
 * trip when @t does not hold the job.
 */
Job *fleet_get(JobTable *t, Store *s, uint64_t id);

/*
 * fleet_lookup - fleet_get() that says why it found nothing: 0 with *@ret referenced;
 * -ENOENT: no such job (here or in the shared store); -ENOTCONN: the shared store cannot
 * be read now (its server is away: the caller answers UNAVAILABLE, never NOT_FOUND, for
 * a job that may well exist). Context: as fleet_get().
 */
int fleet_lookup(JobTable *t, Store *s, uint64_t id, Job **ret);

/*
 * fleet_job_state - the owner and state of job @id of the fleet: @t's own, else its
 * shared record's in @s (no copy is made). Return: 0; -ENOENT and -ENOTCONN as
 * fleet_lookup(). Context: as fleet_get().
 */
int fleet_job_state(JobTable *t, Store *s, uint64_t id, uid_t *ret_owner, JobState *ret_state);

/*
 * fleet_lookup_until - fleet_lookup(), tried again while the shared store cannot be
 * reached, until @deadline_ns (absolute CLOCK_MONOTONIC; 0: once) passes or @req's
 * connection closed: job.wait through an outage. The pause between tries doubles from
 * 100 ms to 1 s (each try is at once while the store's link is away: store-redis-conn.c).
 * Return: as fleet_lookup(). Context: a request fiber; sleeps (yields) between tries.
 */
int fleet_lookup_until(JobTable *t, Store *s, Request *req, uint64_t id, uint64_t deadline_ns,
                       Job **ret);

/*
 * fleet_wait - job.wait on a fleet copy @j (the caller's reference, taken over): polls
 * until the job is final, @deadline_ns (absolute CLOCK_MONOTONIC; 0 = don't wait)
 * passes or @req's connection closed; once @t holds the job (this host took it off the
 * shared queue), returns @t's job instead and the caller waits on its events.
 * The pause between polls doubles from FLEET_POLL_MIN_NS to FLEET_POLL_MAX_NS; the
 * shared record is read only once the pause reached FLEET_POLL_REMOTE_NS.
 * Return: the newest copy or @t's job, referenced (never NULL). Context: a request
 * fiber; sleeps (yields) between polls; one round trip per remote poll.
 */
Job *fleet_wait(JobTable *t, Store *s, Request *req, Job *j, uint64_t deadline_ns);

/*
 * fleet_cancel - job.cancel of fleet copy @j (the caller's reference, taken over): a job
 * held in the fleet's schedule set (scheduled, retrying: store-redis-sched.c) or waiting
 * for its dependencies ends cancelled now, whichever host asks (store_cancel_held()); one
 * queued or running on another host is asked to end there (store_cancel_remote(): that
 * host cancels it within about 200 ms). *@ret is the job as it is then, referenced, also
 * on -EREMOTE: a copy read back, or this host's own when it took the job off the shared
 * queue meanwhile (the caller cancels that one: jobtable_cancel()).
 * Return: 0; -EREMOTE: a store that cannot pass a cancel on (not a fleet); -EIO: the
 * shared store cannot be read (*@ret is @j). Context: a request fiber; blocks its worker
 * for two or three round trips.
 */
int fleet_cancel(JobTable *t, Store *s, Job *j, Job **ret);

/*
 * fleet_list - job.list in a fleet: the jobs of @s's shared index matching @f, newest
 * first, @t's copy of each where it has one, else its shared record (one round trip
 * per page of ids for all of those, store_fetch_many()). Paged (@paged): one page below
 * @cursor, packed as joblist_pack_page() does. Unpaged: the newest @limit matches,
 * oldest first, as joblist_pack_all(). Records take at most @budget bytes
 * (joblist_budget()); at most FLEET_LIST_SCAN ids are looked at per answer, and a page
 * that stops there says where to go on.
 * Return: 0; -ENOMEM; an error set in @st (UNAVAILABLE: the index cannot be read;
 * MESSAGE_TOO_LARGE). Context: a request fiber; blocks its worker for two round trips
 * per 256 ids looked at.
 */
int fleet_list(JobTable *t, Store *s, const JobListFilter *f, uint64_t cursor, uint64_t limit,
               bool paged, size_t budget, msgpack_packer *pk, IpcStatus *st);

/*
 * fleet_ids_merge - one page of fleet_list()'s ids: the shared index's page @shared
 * (@n_shared ids, newest first; @more: the index goes on below it) merged with this
 * host's unwritten ids @mine (@n_mine, newest first; jobtable_unwritten()) from *@m on,
 * into @out (room for @n_shared + @n_mine - *@m): every id of @mine down to the page's
 * last id, or all that are left once the index ends; an id in both (written meanwhile)
 * once. *@m moves past the ids of @mine taken. Return: the ids in @out. Context: any.
 */
static inline size_t fleet_ids_merge(const uint64_t *shared, size_t n_shared, bool more,
                                     const uint64_t *mine, size_t n_mine, size_t *m, uint64_t *out)
{
        uint64_t floor = more && n_shared ? shared[n_shared - 1] : 0;
        size_t n = 0, i = 0;

        while (i < n_shared || (*m < n_mine && mine[*m] >= floor)) {
                if (*m < n_mine && mine[*m] >= floor && (i == n_shared || mine[*m] >= shared[i])) {
                        if (i < n_shared && mine[*m] == shared[i])
                                i++; /* written meanwhile: listed once */
                        out[n++] = mine[(*m)++];
                } else {
                        out[n++] = shared[i++];
                }
        }
        return n;
}

#endif
