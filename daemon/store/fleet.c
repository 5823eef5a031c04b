/* SPDX-License-Identifier: MIT */
/*
 * fleet.c — fleet reads (see fleet.h): what job.status, job.wait and job.list answer
 * for a job another fiberd host holds.
 *
 * A fleet (store-redis.c) runs a job on whichever host read it off the shared queue, so
 * an id this host's job table does not hold may still be the fleet's: a fleet read looks
 * it up in the shared store and builds the answer from a copy of its record
 * (jobtable_fleet_copy(): a Job that is never listed in the table and never run here,
 * Job.fleet_copy). The copy is as old as the read; the host that runs the job writes
 * its record at each change of state (its store thread's group commit).
 *
 * Where it runs and what it costs: every read is made by the request fiber itself, on
 * a worker of the server group (one by default), through the store's query connection (one connection
 * shared under a mutex by every query of the process, store_new_id() included: not the
 * store thread's, not the reader thread's). A read blocks that worker for one round
 * trip to Redis (tens of microseconds on a local socket), so with one server worker the
 * server answers nothing else meanwhile:
 *   job.status   one round trip (HGETALL of the job's hash), none when this host
 *                holds the job;
 *   job.wait     polls: this host's table at each poll, from FLEET_POLL_MIN_NS
 *                doubling to FLEET_POLL_MAX_NS (it waits on the job's own events as
 *                soon as this host takes it), and the shared record, one round trip,
 *                once the pause reached FLEET_POLL_REMOTE_NS (after 0.2 + 0.4 + 0.8 ms):
 *                most jobs are taken within a few ms, by this host as often as not;
 *   job.cancel   of a job another host holds: one round trip to end it when the
 *                fleet's schedule set holds it or it waits for its dependencies (a
 *                script that takes it out of the set and writes its final record,
 *                store-redis-sched.c), one to read its record back; a queued or
 *                running one costs one more, the request put in fiberd:cancels,
 *                which the host that runs it looks at every 200 ms (store-redis.c);
 *   any read     while the shared store cannot be reached answers UNAVAILABLE, never
 *                NOT_FOUND (fleet_lookup()); job.wait keeps looking until its own
 *                deadline (fleet_lookup_until()).
 *   job.list     per 256 ids of the shared index: one round trip for the ids
 *                (store_list()) and one for the records this host does not hold
 *                (store_fetch_many(), one pipeline), at most FLEET_LIST_SCAN ids per
 *                answer. This host's job.runs in progress (run here, their records
 *                written when they end: jobtable_submit()) are in no shared index yet:
 *                they are listed from its table among the others, by id (up to
 *                FLEET_LIST_UNWRITTEN of them); another host's are not listed until
 *                they end.
 */
#include "daemon/store/fleet.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>

#define FLEET_POLL_MIN_NS (200 * NSEC_PER_USEC)
#define FLEET_POLL_MAX_NS (100 * NSEC_PER_MSEC)
#define FLEET_POLL_REMOTE_NS (1600 * NSEC_PER_USEC) /* polls before: local only */
#define FLEET_LIST_SCAN 4096
#define FLEET_LIST_UNWRITTEN 1024 /* this host's job.runs in progress listed at most */
#define FLEET_RETRY_MIN_NS (100 * NSEC_PER_MSEC) /* a lookup the store could not answer */
#define FLEET_RETRY_MAX_NS (1000 * NSEC_PER_MSEC)

/* FleetFetch - store_fetch()'s callback state for fleet_get(). */
typedef struct FleetFetch {
        JobTable *table;
        Job *job; /* the copy made, referenced; NULL until then */
} FleetFetch;

static int fleet_copy_one(const StoreRecord *rec, void *arg)
{
        FleetFetch *f = arg;
        return jobtable_fleet_copy(f->table, rec, &f->job);
}

int fleet_lookup(JobTable *t, Store *s, uint64_t id, Job **ret)
{
        FleetFetch f = {.table = t};
        int r;

        *ret = jobtable_get(t, id);
        if (*ret)
                return 0;
        if (!s || !store_fleet(s))
                return -ENOENT;
        r = store_fetch(s, id, fleet_copy_one, &f);
        if (r == 0 && !f.job)
                r = -ENOENT;
        *ret = r == 0 ? f.job : NULL;
        if (r < 0 && f.job)
                job_unref(f.job);
        return r == -EIO || r == -ENOTCONN ? -ENOTCONN : r;
}

/* FleetState - store_fetch()'s callback state for fleet_job_state(). */
typedef struct FleetState {
        bool found;
        uid_t owner;
        JobState state;
} FleetState;

static int fleet_state_one(const StoreRecord *rec, void *arg)
{
        FleetState *f = arg;

        *f = (FleetState){.found = true, .owner = rec->owner, .state = rec->state};
        return 0;
}

int fleet_job_state(JobTable *t, Store *s, uint64_t id, uid_t *ret_owner, JobState *ret_state)
{
        FleetState f = {0};
        int r = jobtable_job_state(t, id, ret_owner, ret_state);

        if (r != -ENOENT || !s || !store_fleet(s))
                return r;
        r = store_fetch(s, id, fleet_state_one, &f);
        if (r == 0 && !f.found)
                r = -ENOENT;
        if (r == 0) {
                *ret_owner = f.owner;
                *ret_state = f.state;
        }
        return r == -EIO || r == -ENOTCONN ? -ENOTCONN : r;
}

int fleet_lookup_until(JobTable *t, Store *s, Request *req, uint64_t id, uint64_t deadline_ns,
                       Job **ret)
{
        uint64_t pause = FLEET_RETRY_MIN_NS;
        int r;

        while ((r = fleet_lookup(t, s, id, ret)) == -ENOTCONN) {
                uint64_t now = sched_now_ns();
                if (now >= deadline_ns || request_conn_closed(req))
                        break;
                fiber_sleep_until(deadline_ns - now > pause ? now + pause : deadline_ns);
                pause = MIN(pause * 2, FLEET_RETRY_MAX_NS);
        }
        return r;
}

Job *fleet_get(JobTable *t, Store *s, uint64_t id)
{
        Job *j;

        return fleet_lookup(t, s, id, &j) == 0 ? j : NULL;
}

Job *fleet_wait(JobTable *t, Store *s, Request *req, Job *j, uint64_t deadline_ns)
{
        uint64_t pause = FLEET_POLL_MIN_NS;

        while (j->fleet_copy && !job_state_final(j->state)) {
                uint64_t now = sched_now_ns();
                Job *n = jobtable_get(t, j->id);

                if (n) { /* this host took it: its own events from here on */
                        job_unref(j);
                        return n;
                }
                if (now >= deadline_ns || request_conn_closed(req))
                        break;
                fiber_sleep_until(deadline_ns - now > pause ? now + pause : deadline_ns);
                pause = pause * 2 < FLEET_POLL_MAX_NS ? pause * 2 : FLEET_POLL_MAX_NS;
                /* the first polls look here only: most jobs are taken within a few ms,
                 * by this host as often as not, and a read of the shared record costs
                 * the server worker a round trip */
                if (pause < FLEET_POLL_REMOTE_NS)
                        continue;
                n = fleet_get(t, s, j->id);
                if (n) {
                        job_unref(j);
                        j = n;
                }
        }
        return j;
}

int fleet_cancel(JobTable *t, Store *s, Job *j, Job **ret)
{
        bool retrying = j->state == JOB_RETRYING;
        bool held = retrying || j->state == JOB_SCHEDULED || j->state == JOB_WAITING;
        StoreRecord rec = {
                .id = j->id,
                .state = JOB_CANCELLED,
                .owner = j->owner,
                .error_code = IPC_CANCELLED,
                .error_message = retrying ? "cancelled while it waited for its next attempt"
                                          : "cancelled before it ran",
                .finished_ms = job_now_ms(),
                .key = job_plan_key(j),
        };
        int r = -EALREADY;
        Job *n;

        if (held)
                r = store_cancel_held(s, &rec);
        if (r < 0 && r != -EALREADY) {
                *ret = j;
                return r;
        }
        /* cancelled, or it left the set first: either way, its record as it is now */
        if (fleet_lookup(t, s, j->id, &n) == -ENOTCONN) {
                *ret = j;
                return -EIO;
        }
        if (!n) { /* its record is gone (retention): nothing left to cancel */
                *ret = j;
                return 0;
        }
        job_unref(j);
        *ret = n;
        /* cancelled; final otherwise; or this host took it off the queue meanwhile (the
         * caller cancels it here) */
        if (r == 0 || job_state_final(n->state) || !n->fleet_copy)
                return 0;
        /* queued or running on another host: that host ends it (store_cancel_remote()) */
        r = store_cancel_remote(s, n->id);
        if (r == -ENOTSUP)
                return -EREMOTE;
        return r == -EALREADY || r == -ENOENT ? 0 : r;
}

/* FleetPage - one page of ids of fleet_list(): the job of each, this host's or a copy. */
typedef struct FleetPage {
        JobTable *table;
        const uint64_t *ids; /* the page's ids */
        Job **jobs;          /* referenced; NULL: neither here nor in the shared store */
        size_t n, next;      /* ids; where the next fetched record's id is looked for */
} FleetPage;

/* store_fetch_many()'s callback: the copy of @rec goes to its id's slot. */
static int fleet_page_one(const StoreRecord *rec, void *arg)
{
        FleetPage *p = arg;

        while (p->next < p->n && (p->ids[p->next] != rec->id || p->jobs[p->next]))
                p->next++;
        /* a record that cannot be copied is skipped, as fleet_get() skips it */
        if (p->next < p->n && jobtable_fleet_copy(p->table, rec, &p->jobs[p->next]) < 0)
                p->jobs[p->next] = NULL;
        return 0;
}

/*
 * The jobs of @p's ids: this host's where it has them, the others' shared records read
 * in one round trip (store_fetch_many()); a job in neither (or a store that cannot be
 * read: logged) stays NULL. Return 0; -ENOMEM.
 */
static int fleet_page_fill(Store *s, FleetPage *p)
{
        uint64_t *missing = malloc(p->n * sizeof(*missing));
        size_t k = 0;

        if (!missing)
                return -ENOMEM;
        for (size_t i = 0; i < p->n; i++) {
                p->jobs[i] = jobtable_get(p->table, p->ids[i]);
                if (!p->jobs[i])
                        missing[k++] = p->ids[i];
        }
        p->next = 0;
        if (k)
                (void)store_fetch_many(s, missing, k, fleet_page_one, p);
        free(missing);
        return 0;
}

int fleet_list(JobTable *t, Store *s, const JobListFilter *f, uint64_t cursor, uint64_t limit,
               bool paged, size_t budget, msgpack_packer *pk, IpcStatus *st)
{
        size_t cap = 64, n = 0, bytes = 0, scanned = 0, n_mine, m = 0;
        uint64_t shared[256], next = 0, below = cursor;
        /* this host's job.runs in progress, whose records are written when they end
         * (jobtable_submit()): listed here among the shared index's ids */
        uint64_t *mine = malloc(FLEET_LIST_UNWRITTEN * sizeof(*mine));
        uint64_t *ids = malloc((ELEMENTSOF(shared) + FLEET_LIST_UNWRITTEN) * sizeof(*ids));
        Job **jobs = malloc(cap * sizeof(*jobs));
        Job **page = malloc((ELEMENTSOF(shared) + FLEET_LIST_UNWRITTEN) * sizeof(*page));
        FleetPage fp = {.table = t, .ids = ids, .jobs = page};
        msgpack_sbuffer body;
        msgpack_packer bp;
        bool more = true, full = false;
        int r = 0;

        if (!mine || !ids || !jobs || !page) {
                free(mine);
                free(ids);
                free(jobs);
                free(page);
                return -ENOMEM;
        }
        n_mine = jobtable_unwritten(t, cursor, mine, FLEET_LIST_UNWRITTEN);
        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        while (more && !full && r == 0) {
                size_t got = 0;
                r = store_list(s, below, ELEMENTSOF(shared), shared, &got);
                if (r < 0) {
                        r = ipc_status_set(st, IPC_UNAVAILABLE, r,
                                           "the fleet's job store cannot be read: see "
                                           "fiberd's log");
                        break;
                }
                more = got == ELEMENTSOF(shared);
                got = fleet_ids_merge(shared, got, more, mine, n_mine, &m, ids);
                fp.n = got;
                if ((r = fleet_page_fill(s, &fp)) < 0)
                        break;
                for (size_t i = 0; i < got && !full; i++) {
                        Job *j = page[i];
                        page[i] = NULL; /* ours now */
                        below = ids[i];
                        scanned++;
                        if (j && joblist_match(f, j) && n == limit) {
                                next = n ? jobs[n - 1]->id : 0;
                                full = true;
                        } else if (j && joblist_match(f, j)) {
                                size_t before = body.size, size;
                                Job **grown;
                                if ((r = joblist_pack_record(t, j, &bp)) < 0) {
                                        job_unref(j);
                                        break;
                                }
                                size = body.size - before;
                                body.size = before; /* packed again below, in order */
                                if (bytes + size > budget && n > 0) {
                                        next = jobs[n - 1]->id;
                                        full = true;
                                        bytes += size; /* unpaged: too large an answer */
                                } else if (n == cap &&
                                           !(grown = reallocarray(jobs, cap * 2, sizeof(*jobs)))) {
                                        r = -ENOMEM;
                                } else {
                                        if (n == cap) {
                                                jobs = grown;
                                                cap *= 2;
                                        }
                                        jobs[n++] = job_ref(j);
                                        bytes += size;
                                }
                        }
                        if (j)
                                job_unref(j);
                        if (scanned == FLEET_LIST_SCAN && paged && !full) {
                                next = below; /* go on below the last id looked at */
                                full = true;
                        }
                }
                for (size_t i = 0; i < got; i++) /* the ones not looked at */
                        if (page[i])
                                page[i] = job_unref(page[i]);
        }
        free(page);
        free(ids);
        free(mine);
        body.size = 0;
        for (size_t i = 0; i < n && r == 0; i++) {
                /* a page: newest first; one array: oldest first */
                r = joblist_pack_record(t, jobs[paged ? i : n - 1 - i], &bp);
        }
        for (size_t i = 0; i < n; i++)
                job_unref(jobs[i]);
        free(jobs);
        if (r == 0 && !paged && (bytes > budget || body.size > budget))
                r = ipc_status_set(st, IPC_MESSAGE_TOO_LARGE, -EMSGSIZE,
                                   "%zu jobs match, more than one answer holds: ask for pages "
                                   "with the filter key \"cursor\" (fiberctl list does), or "
                                   "set a limit",
                                   n);
        else if (r == 0 && paged)
                r = msgpack_pack_map(pk, 2) | ipc_pack_cstr(pk, IPC_KEY_JOBS) |
                                    msgpack_pack_array(pk, (uint32_t)n) |
                                    joblist_pack_raw(pk, body.data, body.size) |
                                    (next ? ipc_pack_kv_uint(pk, IPC_KEY_NEXT_CURSOR, next)
                                          : ipc_pack_kv_nil(pk, IPC_KEY_NEXT_CURSOR))
                            ? -ENOMEM
                            : 0;
        else if (r == 0)
                r = msgpack_pack_array(pk, (uint32_t)n) | joblist_pack_raw(pk, body.data, body.size)
                            ? -ENOMEM
                            : 0;
        msgpack_sbuffer_destroy(&body);
        return r;
}
