/* SPDX-License-Identifier: MIT */
/*
 * store.h — the job store: where fiberd keeps every job it accepted, so that a crash,
 * a kill -9 or a restart loses none of them.
 *
 * The store is a write-behind log of job records with one promise: a record handed to
 * store_put() with a Job to notify is on disk (committed and fsync'ed) before that
 * job's `durable` event is set, and job.submit / job.run answer only after it is. The
 * job table (jobtable.c) keeps the live copy of every job and calls in here under its
 * lock at each change: the submission (with the arguments), the start, the final state
 * (result or error), a retention drop (store_delete()). Those calls only mark the job
 * for a write (queued once, however often it changes before the store thread takes it);
 * nothing here copies a record or waits for a disk under the table lock. The store
 * thread reads each job's record when it takes the batch, so a trivial job that is
 * submitted, run and finished during one commit costs one row write, not three: under
 * load (a commit of 16+ writes in progress, store_busy()) a job is dispatched before its record is
 * committed, and a crash before the commit loses only a submission never answered.
 *
 * Group commit (store.c): one plain pthread, the store thread (never a job or server
 * worker: a commit blocks in fsync), takes every write queued while it committed the
 * previous batch and commits them as one transaction with one fsync, then sets the
 * events of the submissions in that batch. Under load a batch holds many jobs, so
 * durability costs latency (one fsync), not throughput. The submitting request fiber
 * parks on the job's FiberEvent, never its worker.
 *
 * The backends, one file each, behind StoreBackend:
 *   store-memory.c  no state: today's behaviour, for tests and users who want none;
 *                   writes are dropped at once and the event is set at once.
 *   store-sqlite.c  the default: one SQLite database in WAL mode, synchronous=FULL.
 *   store-redis.c   a fleet: many fiberd hosts share one Redis stream and its job
 *                   hashes; the store's own thread reads the stream (store_fleet_start())
 *                   and hands each job it takes to the job table.
 * The record format (StoreRecord) is the job record of PROTOCOL.md plus what recovery
 * needs: the packed arguments, the submitter's gid, the attempt count, the fd count.
 *
 * Recovery (jobtable_restore(), at start-up): store_load() hands every stored record
 * to a callback in id order; store_next_id() says where new ids start, so ids never
 * repeat across restarts, also after retention deleted every row.
 *
 * When the disk cannot take a write (full, over quota, failing: store_error_transient()),
 * nothing accepted is dropped. A submission's first write (store_submit()) is refused:
 * the owner hears it (StoreSubmittedFn: the job table cancels the job), then its
 * waiter, and nothing of it is ever written, since nobody was told its id. Every other write of a job stays
 * queued and the store thread tries the whole queue again, 100 ms after the failure,
 * then twice as long each time up to 5 s (a probe write when nothing is held), and
 * writes each job's record as it is by then, so a job that ended meanwhile has its
 * final state written once, when space returns. store_health() says it is failing
 * (job.submit refuses up front then, submit.c), and store_wait_until() lets a waiter
 * give up at its own deadline meanwhile. A write that is not a job's (a schedule, a
 * meta value, a plugin file) is not kept: its caller hears the error, as before. One
 * line is logged when writes stop, one when they resume, one a minute in between. At
 * store_close() the queue is tried for STORE_CLOSE_RETRY_NS more; then what is held
 * is dropped (logged): after a restart, those jobs are as last written, as after a
 * kill -9 during the outage.
 */
#ifndef FIBERD_DAEMON_STORE_H
#define FIBERD_DAEMON_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/job/job.h"
#include "scheduler/base/list.h"
#include "scheduler/base/time-util.h"

/* [store] backend (config.h). */
typedef enum StoreKind {
        STORE_SQLITE,
        STORE_MEMORY,
        STORE_REDIS,
        STORE_KIND_COUNT,
} StoreKind;

/*
 * StoreRecord - one job as the store keeps it. Strings and blobs point into whoever
 * built it (a StoreWrite's own copy, or a backend's row while store_load()'s callback
 * runs).
 */
typedef struct StoreRecord {
        uint64_t id;
        JobState state;
        const char *plugin; /* the plugin's name */
        uid_t owner;
        gid_t gid; /* the submitter's primary group (its supplementary ones are not kept) */
        int priority;
        uint64_t timeout_ms;                          /* 0 = none */
        uint64_t created_ms, started_ms, finished_ms; /* CLOCK_REALTIME ms; 0 = not yet */
        uint32_t attempt;                             /* runs begun before this one; 0 first */
        uint32_t n_fds;                               /* fds passed with the submission */
        const char *args; /* packed msgpack map; NULL in an update: keep the stored one */
        size_t args_len;
        const char *result; /* packed msgpack object; NULL = nil */
        size_t result_len;
        const char *error_code;    /* IPC_* code; NULL = none */
        const char *error_message; /* NULL = none */
        uint64_t progress_done, progress_total;
        const char *class_name; /* its job class; NULL = "default" */
        const char *sched;      /* its schedule (job_pack_schedule(): run_at, due time, attempts,
                            * backoff, after, key, errors), packed msgpack; NULL = none */
        size_t sched_len;
        bool enqueue;  /* a fleet submission: put it on the shared queue for any host to run
                       * (store-redis.c); false for every other write */
        bool handover; /* with @enqueue: not a submission but a job.run this host ran
                        * itself (Job.run_here) that shutdown leaves queued: nobody was
                        * refused it, so a commit without an answer is only tried again */
        /* the fleet's schedule (store-redis-sched.c) */
        bool fleet_held;       /* a fleet job held (scheduled, retrying) for any host to run
                                * when due: it joins the fleet's schedule set, not the queue */
        uint64_t due_ms;       /* held: when it is due (CLOCK_REALTIME ms); waiting: its
                                * run_at_ms (due once released); else 0 */
        const uint64_t *after; /* a fleet submission that waits: the jobs it runs after */
        size_t n_after;
        const char *key; /* its idempotency key (also in @sched); NULL = none */
        bool shared;     /* read: taken off the fleet's shared queue by this host */
        bool first;      /* no write of this job went to a commit before, in this process:
                          * a backend may take its record as new (store-redis.c leaves a
                          * job.run's defaults out). A commit that failed, maybe applied,
                          * and a revive's writes are never first */
} StoreRecord;

/* StoreFleetOptions - [store] keys of the redis backend (config.h); strings not owned. */
typedef struct StoreFleetOptions {
        const char *stream;     /* the stream every host reads ("fiberd:jobs") */
        const char *group;      /* its consumer group ("fiberd") */
        const char *node;       /* this host's consumer name; NULL or "" = hostname.pid */
        uint64_t claim_idle_ns; /* a pending entry idle this long is taken over */
        uint64_t retention_ns;  /* a final job's hash expires this long after it ended */
        size_t retention_max;   /* ... and at most this many final jobs are kept, fleet-wide */
        uint64_t key_window_ms; /* an idempotency key answers this long after its job ended */
} StoreFleetOptions;

/*
 * StorePluginFile - what the store knows about one plugin file, for crash-only plugins
 * (crash.h): its identity when last seen (its contents' SHA-256, and its stat), whether
 * it was being loaded, and how many crashes of fiberd were blamed on those contents.
 */
typedef struct StorePluginFile {
        const char *path;
        const char *name; /* the plugin's name once loaded; NULL = not known */
        uint64_t size, ino, dev;
        int64_t mtime_ns;
        bool loading;       /* dlopen()/init() in progress (a crash there blames it) */
        uint32_t strikes;   /* crashes blamed on these contents (sha256) */
        const char *reason; /* the last crash blamed on it; NULL = none */
        const char *sha256; /* its contents' SHA-256, 64 lower-case hex digits; NULL = not
                             * known (a row written before fiberd kept it) */
} StorePluginFile;

/*
 * StoreScheduleWrite - what a schedule's write is (store_put_schedule()). The single-host
 * stores replace the whole row for each; a fleet (store-redis-periodic.c), where every
 * host writes, tells them apart: a tick does not undo a pause another host wrote.
 */
typedef enum StoreScheduleWrite {
        STORE_SCHEDULE_CHANGE, /* a method changed it (pause, resume): the whole row; a fleet
                                * refuses it (-ENOENT) when the schedule is gone there */
        STORE_SCHEDULE_ADD,    /* schedule.add: the whole row; a fleet refuses it (-EEXIST)
                                * when any host has a schedule of that owner and name */
        STORE_SCHEDULE_TICK,   /* a tick's outcome: a fleet writes only next_ms, last_ms and
                                * last_job, each only when later than the stored one */
} StoreScheduleWrite;

/*
 * StoreSchedule - one periodic schedule (daemon/cron/schedule.h says what each field
 * means), keyed by (owner, name). Strings and blobs point into whoever built it.
 */
typedef struct StoreSchedule {
        uid_t owner;
        const char *name;
        gid_t gid;           /* the owner's primary group when it added the schedule */
        const gid_t *groups; /* ... and its supplementary groups */
        size_t n_groups;
        const char *cron;   /* NULL: an interval */
        const char *tz;     /* the cron's zone; NULL for an interval */
        uint64_t every_ms;  /* 0 for a cron expression */
        const char *missed; /* IPC_MISSED_SKIP or IPC_MISSED_RUN_ONCE */
        const char *plugin;
        const char *args; /* packed msgpack map */
        size_t args_len;
        const char *options; /* packed msgpack map */
        size_t options_len;
        bool paused;
        uint64_t next_ms, last_ms, last_job, created_ms; /* 0 = none */
        StoreScheduleWrite write; /* store_put_schedule(): what the write is */
} StoreSchedule;

/*
 * StoreWaiter - how a fiber waits for one write that is not a job's (store_put_schedule(),
 * store_delete_schedule()): set by the store thread once the write is committed or
 * failed. Lives on the waiting fiber's stack.
 */
typedef struct StoreWaiter {
        FiberEvent done;
        int error; /* 0, or the commit's error (negative errno) */
} StoreWaiter;

typedef enum StoreOp {
        STORE_OP_PUT,             /* insert the record, or update every mutable column */
        STORE_OP_DELETE,          /* drop the records of StoreWrite.ids (retention) */
        STORE_OP_PLUGIN,          /* insert or replace a plugin file's row (StoreWrite.pf) */
        STORE_OP_META,            /* set meta_key to meta_value */
        STORE_OP_SCHEDULE,        /* insert or replace a schedule's row (StoreWrite.schedule) */
        STORE_OP_SCHEDULE_DELETE, /* drop the row of (schedule.owner, .name) */
} StoreOp;

/* StoreWrite - one change in a batch (store.c allocates it with its strings inline). */
typedef struct StoreWrite {
        StoreEntry entry; /* in Store.queue (a delete, plugin file or meta write) */
        ListHead link;    /* in the batch handed to StoreBackend.commit */
        StoreOp op;
        StoreRecord rec;     /* STORE_OP_PUT */
        const uint64_t *ids; /* STORE_OP_DELETE: the ids to drop, ascending (store.c's) */
        size_t n_ids;
        StorePluginFile pf;   /* STORE_OP_PLUGIN */
        const char *meta_key; /* STORE_OP_META */
        int64_t meta_value;
        StoreSchedule schedule; /* STORE_OP_SCHEDULE, STORE_OP_SCHEDULE_DELETE */
        StoreWaiter *waiter;    /* set once committed (or failed); NULL = nobody waits */
        bool borrowed; /* not malloc'ed (the store thread's batch memory or stack): not freed */
        uint16_t life; /* STORE_OP_PUT: the job's JobStorePart.life when it was read */
        /* set by the backend: this write alone was refused, a negative errno (a fleet's
         * schedule writes, StoreScheduleWrite); its waiter hears it */
        int refused;
} StoreWrite;

/* StorePluginFn - one stored plugin file; return 0 or a negative errno to stop. */
typedef int (*StorePluginFn)(const StorePluginFile *pf, void *arg);

/* StoreScheduleFn - one stored schedule; return 0 or a negative errno to stop. */
typedef int (*StoreScheduleFn)(const StoreSchedule *sc, void *arg);

typedef struct Store Store;

/* StoreRoomFn - how many more fleet jobs this host wants now (0: none for now). */
typedef size_t (*StoreRoomFn)(void *arg);

/*
 * StoreFleetHooks - what a fleet's reader thread asks of the job table
 * (store_fleet_start()); every hook runs on that thread and must not yield.
 */
typedef struct StoreFleetHooks {
        /* take - queue @rec here (0), or leave it to another host (a negative errno) */
        int (*take)(const StoreRecord *rec, void *arg);
        /* room - how many more fleet jobs this host wants now (0: none for now) */
        size_t (*room)(void *arg);
        /* runs - this host's table holds job @id as its own (queued, running, or ended
         * with its final write still to make): its stream entry is this host's to keep */
        bool (*runs)(uint64_t id, void *arg);
        /* cancel - job @id was asked to end through another host: cancel it here */
        void (*cancel)(uint64_t id, void *arg);
        void *arg;
} StoreFleetHooks;

/* StoreMetaFn - one meta integer, @key (valid during the call) = @value
 * (store_meta_list()); return 0 or a negative errno to stop. */
typedef int (*StoreMetaFn)(const char *key, int64_t value, void *arg);

/* StoreLoadFn - one stored record, in id order; return 0 or a negative errno to stop. */
typedef int (*StoreLoadFn)(const StoreRecord *rec, void *arg);

/* StoreReadFn - the store's copy of @j's record into the batch being written (store.c);
 * @ctx is the store's. Called only inside a StoreSnapshotFn. */
typedef void (*StoreReadFn)(const Job *j, void *ctx);

/*
 * StoreSnapshotFn - the owner's (store_set_source()): call @read(@j, @ctx) exactly once,
 * while nothing changes @j's mutable fields (the job table holds its lock around it),
 * and return. A record of pointers into the job would not do: its error message and
 * result are freed and replaced under that lock, so the copy is made inside it.
 * @arg: the owner's, from store_set_source(). Context: the store thread; must not
 * yield or block for long (@read allocates at most).
 */
typedef void (*StoreSnapshotFn)(Job *j, StoreReadFn read, void *ctx, void *arg);

/*
 * StoreSubmittedFn - the owner's (store_set_source()): what @j's submission
 * (store_submit()) came to, @error: 0, committed; a negative errno, refused (nothing of
 * @j is ever written). Called once per submission, with nothing of the store's held. A
 * refusal is told before store_wait(@j, false) answers, so the owner has cancelled the
 * job by the time its submitter hears; a commit after the submitter is woken, so a job
 * that waited for the disk starts behind its answer (a plugin that crashes fiberd at
 * once leaves an answered submission and a record naming it).
 * @arg: the owner's. Context: the store thread (the closing thread when store_close()
 * drops what it cannot write); must not yield.
 */
typedef void (*StoreSubmittedFn)(Job *j, int error, void *arg);

/*
 * StoreRecordedFn - the owner's (store_set_recorded()): @w, given to
 * store_watch_final() for @j, is due: @j's final state is committed, or its write failed
 * for good (JobStorePart.error says which). Called once per watch, with nothing of the
 * store's held. @arg: store_set_source()'s. Context: the store thread (the closing
 * thread when store_close() drops what it cannot write); must not yield.
 */
typedef void (*StoreRecordedFn)(Job *j, JobWatch *w, void *arg);

/* StoreBackend - what a backend implements; every function runs on one thread at a time. */
typedef struct StoreBackend {
        const char *name;
        /* open - open or create the store at @path; log nothing (store_open() does).
         * Return 0; negative errno with a reason in @why (at most @why_size bytes). */
        int (*open)(Store *s, const char *path, char *why, size_t why_size);
        /* load - every record in id order. Return 0, @fn's error, or -EIO with @why. */
        int (*load)(Store *s, StoreLoadFn fn, void *arg, char *why, size_t why_size);
        /* next_id - the smallest id never handed out (1 on an empty store). */
        uint64_t (*next_id)(Store *s);
        /* commit - apply @batch (StoreWrite.link, in order) in one transaction.
         * NULL: nothing is kept (the memory backend). Context: the store thread. */
        int (*commit)(Store *s, ListHead *batch, char *why, size_t why_size);
        /* plugin_files - every stored plugin file. NULL: none are kept. */
        int (*plugin_files)(Store *s, StorePluginFn fn, void *arg);
        /* meta_get - an integer of the meta table; -ENOENT when absent. NULL: none. */
        int (*meta_get)(Store *s, const char *key, int64_t *ret);
        /* meta_list - @fn for every meta integer whose key begins with @prefix. Return 0,
         * @fn's error, -EIO. NULL: none kept. */
        int (*meta_list)(Store *s, const char *prefix, StoreMetaFn fn, void *arg);
        /* schedules - every stored schedule. NULL: none are kept. */
        int (*schedules)(Store *s, StoreScheduleFn fn, void *arg);
        /* schedules_changed - a fleet's: when its schedules' version is not *@version,
         * @fn for every schedule and *@version the version read (both read at once).
         * Return 1; 0 unchanged; @fn's error; -EIO. NULL: one host writes them all.
         * Context: any thread. */
        int (*schedules_changed)(Store *s, uint64_t *version, StoreScheduleFn fn, void *arg);
        /* close - release everything; NULL-safe on a store that failed to open. */
        void (*close)(Store *s);

        /* The fleet (store-redis.c); NULL in the single-host backends. */
        /* new_id - a job id no host of the fleet ever had. Context: any thread. */
        int (*new_id)(Store *s, uint64_t *ret);
        /* fetch - @fn with job @id's shared record; -ENOENT; -EIO. Context: any thread. */
        int (*fetch)(Store *s, uint64_t id, StoreLoadFn fn, void *arg);
        /* list - up to @max ids below @below (0 = from the newest), newest first, into
         * @ids; *@ret_n how many. Context: any thread. */
        int (*list)(Store *s, uint64_t below, size_t max, uint64_t *ids, size_t *ret_n);
        /* fleet_start / fleet_stop - start / stop taking jobs off the shared queue. */
        int (*fleet_start)(Store *s, const StoreFleetHooks *hooks);
        void (*fleet_stop)(Store *s);
        /* fetch_many - @fn with the shared record of each of @ids (@n of them) that exists,
         * in the order of @ids, all read in one round trip; a missing or unreadable one
         * is skipped (the latter logged).
         * Return 0; @fn's error; -ENOMEM; -EIO. Context: any thread. */
        int (*fetch_many)(Store *s, const uint64_t *ids, size_t n, StoreLoadFn fn, void *arg);
        /* cancel_remote - ask the host that runs fleet job @id (queued or running) to
         * cancel it (StoreFleetHooks.cancel). Return 0; -EALREADY: it is final; -ENOENT:
         * no such job; -EIO. Context: any thread. */
        int (*cancel_remote)(Store *s, uint64_t id);
        /* cancel_held - end job @rec->id, held in the fleet's schedule set or waiting
         * for its dependencies, as @rec says (state, error, finished_ms, owner, key), if
         * it still is. Return 0; -EALREADY: not held or waiting any more (moved to the
         * queue, or ended); -EIO. Context: any thread. */
        int (*cancel_held)(Store *s, const StoreRecord *rec);
        /* key_claim - idempotency key @key of @owner names job @id, unless it names
         * another job already: then *@ret_existing is that one's id (else 0).
         * Return 0; -EIO. Context: any thread. */
        int (*key_claim)(Store *s, uid_t owner, const char *key, uint64_t id,
                         uint64_t *ret_existing);
        /* key_release - forget @owner's @key if it still names job @id. Context: any. */
        void (*key_release)(Store *s, uid_t owner, const char *key, uint64_t id);
        /* server_away - the backend's server is known to be away now, and the backend
         * logged it (one line when it goes, one when it is back): the store's own lines
         * about failing writes would repeat them. A backend that has it, and whose
         * server answers while refusing writes, is retried at the shortest pause, not
         * after a growing backoff. NULL: never away. Context: any thread. */
        bool (*server_away)(Store *s);
        /* retry_hint_ms - when a refused client should try again (an UNAVAILABLE's
         * hint), in ms; NULL: the store's own retry pause. Context: any thread. */
        uint64_t (*retry_hint_ms)(Store *s);
} StoreBackend;

extern const StoreBackend store_memory_backend;
extern const StoreBackend store_sqlite_backend;
extern const StoreBackend store_redis_backend;

struct Store {
        const StoreBackend *backend;
        char *path;              /* owned; NULL for the memory backend; the server for redis */
        StoreFleetOptions fleet; /* redis only; strings point into the Config */
        void *backend_data;      /* the backend's state */

        pthread_mutex_t lock;
        pthread_cond_t wake; /* signalled when writes are queued or at close */
        pthread_cond_t idle; /* broadcast after each batch (store_flush()) */
        bool busy;           /* the store thread commits a batch of 16 writes or more
                              * (store_busy(); atomic) */
        bool sleeping;       /* the store thread waits on wake (signal only then) */
        uint64_t batches_taken, batches_done; /* store_flush() waits for a batch number */
        ListHead queue; /* StoreEntry.link: written after the batch being committed */
        size_t queued;
        struct StoreTaken *taken; /* the store thread's: the batch being snapshotted */
        size_t taken_cap;
        uint64_t commit_delay_ns;   /* store_set_commit_delay() */
        StoreSnapshotFn snapshot;   /* store_set_source(): how a job's record is read */
        StoreSubmittedFn submitted; /* ... and whom a submission's outcome is told */
        StoreRecordedFn recorded;   /* ... and a final write's watches (store_set_recorded()) */
        void *snapshot_arg;         /* their argument */
        /* store_delete()'s ids, counted in `queued`: one sorted delete ends each batch
         * (after the batch's puts, so a job's last write never lands after its drop) */
        uint64_t *deletes, *deletes_taken;
        size_t n_deletes, deletes_cap, deletes_taken_cap;
        /* the store thread's: memory for a batch's writes, kept across batches */
        struct StoreChunk *chunks, *chunk; /* all of them; the one being filled */
        size_t chunk_used;
        msgpack_sbuffer pack;       /* a job's packed arguments */
        msgpack_sbuffer pack_sched; /* ... and its packed schedule */
        bool closing;
        bool thread_started; /* under lock once the store thread may run */
        uint64_t next_id;    /* the backend's next id, read by store_load() */
        pthread_t thread;

        /* when the disk cannot take a write (store.h's essay); written by the store
         * thread under lock (@failing also atomically, for store_failing()) */
        bool failing;               /* the last commit failed with a transient error */
        bool urgent;                /* a write its caller blocks on is queued: try now */
        int fail_error;             /* that commit's error (negative errno); 0 = none */
        int last_error;             /* the last failed commit's error (store_write_sync()) */
        uint64_t fail_since_ns;     /* CLOCK_MONOTONIC when writes stopped */
        uint64_t fail_since_ms;     /* ... and CLOCK_REALTIME ms, for store_health() */
        uint64_t retry_ns;          /* the backoff now: 100 ms, doubling up to 5 s */
        uint64_t retry_at_ns;       /* CLOCK_MONOTONIC of the next attempt */
        uint64_t fail_logged_ns;    /* the last line logged about it (one a minute) */
        bool fail_quiet;            /* it began while the backend's server was away
                                     * (StoreBackend.server_away): the backend's lines
                                     * say so, the store's go to LOG_DEBUG */
        uint64_t close_deadline_ns; /* closing while failing: the last attempt's time */
        uint64_t close_retry_ns;    /* how long that is after the close: STORE_CLOSE_RETRY_NS
                                     * (tests shorten it) */

        /* counters, under lock: what `stats` could show, and what tests read */
        uint64_t commits; /* transactions committed */
        uint64_t writes;  /* records written */
        uint64_t commit_errors;
        uint64_t refused; /* submissions refused for a failed commit */
};

/* The store thread's backoff while the disk cannot take a write, and how long
 * store_close() goes on trying before it drops what is held. */
#define STORE_RETRY_MIN_NS (100 * NSEC_PER_MSEC)
#define STORE_RETRY_MAX_NS (5 * NSEC_PER_SEC)
#define STORE_CLOSE_RETRY_NS (10 * NSEC_PER_SEC)

/* StoreHealth - whether the store can write now (store_health()). */
typedef struct StoreHealth {
        bool failing;          /* the last commit failed for want of space, quota or disk */
        int error;             /* its error (negative errno); 0 when not failing */
        size_t pending_writes; /* writes held for the next attempt; 0 when not failing */
        uint64_t since_ms;     /* CLOCK_REALTIME ms when writes stopped; 0 when not failing */
} StoreHealth;

/*
 * store_redis_probe - connect to the Redis server at @addr ([store] redis: HOST:PORT,
 * unix:PATH or /PATH), PING it (a server still loading its data answers LOADING: not
 * ready) and hang up, as `fiberd --check-config` does to tell whether the
 * fleet's store can be reached from where it runs. On failure @why (@why_size bytes)
 * says why, and for a TCP address under a sandbox that keeps fiberd off the network
 * (the shipped fiberd.service) names the drop-in that opens it.
 * Return: 0; -EAFNOSUPPORT when @addr is TCP and this process may not make a TCP socket
 * at all (RestrictAddressFamilies=: waiting does not help); -EHOSTUNREACH otherwise
 * (refused, no such socket, timed out, not ready: the server may come). Context: any thread;
 * blocks up to 5 s.
 */
int store_redis_probe(const char *addr, char *why, size_t why_size);

/* store_kind_name - "sqlite", "memory", "redis". Context: any. */
const char *store_kind_name(StoreKind k);

/*
 * store_default_path - where the sqlite database lives when [store] path is not set:
 * $STATE_DIRECTORY/jobs.db under systemd's StateDirectory= (the first entry), else
 * /var/lib/fiberd/jobs.db for root, else $XDG_STATE_HOME/fiberd/jobs.db, else
 * ~/.local/state/fiberd/jobs.db. @ret: out, malloc'ed, written only on success.
 * Return: 0; -ENOENT (no HOME to fall back on); -ENOMEM. Context: any.
 */
int store_default_path(char **ret);

/*
 * store_open - open the store of @kind at @path (NULL or "": store_default_path()),
 * creating the database and its parent directory (0700) when absent (store_load()
 * starts the store thread). For redis, @path is the server (unix:/path or host:port)
 * and @fleet its options (copied; the strings must outlive the store); NULL otherwise. A database that exists but cannot be read is an error, never an empty
 * store: the message names the file and what an operator can do.
 * @ret: out, written only on success; free with store_close().
 * Return: 0; -EIO / -EACCES / ... with the reason logged (LOG_ERR). Context: main
 * thread at start-up.
 */
int store_open(Store **ret, StoreKind kind, const char *path, const StoreFleetOptions *fleet);

/*
 * store_load - call @fn for every stored record in id order, then start the store
 * thread: writes queued before (by @fn too) are committed once it runs. Call it once,
 * before the first submission. Return: 0; @fn's error; -EIO (logged); the error of
 * pthread_create(). Context: main thread at start-up.
 */
int store_load(Store *s, StoreLoadFn fn, void *arg);

/* store_next_id - the first id that was never handed out, as store_load() found it.
 * Context: main thread at start, after store_load(). */
uint64_t store_next_id(Store *s);

/* store_durable - true when the backend keeps anything (not memory). Context: any. */
bool store_durable(const Store *s);

/*
 * store_put - queue @j for a write of its record (the arguments too when @with_args:
 * the first write of a job); when @notify, publish the outcome to store_wait(@j, false)
 * once it is committed (or failed for good: a transient failure keeps it queued). With
 * the memory backend, that is at once. Nothing is copied here: @j is queued
 * (referenced) at most once, and the store thread snapshots its record
 * (store_set_source()) when it takes the batch, so the submission, start and end of a
 * job that all happen during one commit cost one row write. It allocates nothing, so
 * it cannot fail.
 * Context: the job table's lock held, or any thread for a job in no table; does not
 * yield.
 */
void store_put(Store *s, Job *j, bool with_args, bool notify);

/*
 * store_submit - store_put(@s, @j, true, true) for a submission whose answer waits for
 * this write (job.submit): if its commit fails, the submission is refused instead of
 * kept for the next attempt. The owner hears the outcome first (StoreSubmittedFn), then
 * store_wait(@j, false) and store_wait(@j, true) answer the error, and nothing of @j is
 * written afterwards (its store_put()s are ignored): the owner cancels it and nobody was
 * told its id. Context: as store_put().
 */
void store_submit(Store *s, Job *j);

/*
 * store_settle - @j has nothing to write and nothing to wait for (the memory store, a
 * record read back from the store, a fleet copy): store_wait(@j, false) answers 0 at
 * once, and so does store_wait(@j, true) when @final (its final state is the stored
 * one). Context: any; does not yield.
 */
void store_settle(Job *j, bool final);

/*
 * store_wait - wait until @j's submission (@final false) or a write carrying its final
 * state (@final true) is committed, and say how it went.
 * Return: 0; the store's error (a negative errno: the write failed for good or the
 * submission was refused, nothing of it is on disk); -ECANCELED when @cancellable and
 * the calling fiber was cancelled meanwhile (otherwise a cancellation is ignored: the
 * store thread always answers, though while the disk cannot take the write, only once
 * it can: store_wait_until() gives up earlier).
 * Context: a fiber (request or job fiber); yields; no lock held.
 */
int store_wait(Job *j, bool final, bool cancellable);

/*
 * store_wait_until - store_wait(@j, @final, false) with a deadline that holds only while
 * @s cannot write (store_failing()): past @deadline_ns (absolute CLOCK_MONOTONIC ns;
 * SCHED_FOREVER = none) it gives up then, and waits on for a store that writes (a commit
 * takes milliseconds). @life: @j's JobStorePart.life, read with the owner's lock held
 * when @final was decided; a revive since (store_revive()) means the end waited for is
 * on disk, and answers 0 (looked at every STORE_WAIT_POLL_NS while the wait lasts).
 * Return: as store_wait(); -ETIMEDOUT (the write is still held: ask again later).
 * Context: a fiber; yields; no lock held.
 */
int store_wait_until(Store *s, Job *j, bool final, uint16_t life, uint64_t deadline_ns);

/* store_failing - the last commit failed with a transient error and writes are held
 * for the next attempt (store.h's essay). Context: any; does not block. */
bool store_failing(Store *s);

/*
 * store_retry_now - the backend's server is reachable again (a fleet's Redis is back):
 * while writes are held (store_failing()), the store thread tries them now instead of
 * at the end of its backoff, which reaches STORE_RETRY_MAX_NS in a long outage. Jobs
 * that ended meanwhile get their final write in at once, not seconds later (a host
 * killed in those seconds would leave them to run again). Nothing when not failing.
 * Context: any thread but the store thread's commit callback with s->lock held (it
 * takes the lock); does not block beyond it.
 */
void store_retry_now(Store *s);

/* store_health - whether @s can write now, into *@ret. Context: any; takes the store's
 * lock briefly. */
void store_health(Store *s, StoreHealth *ret);

/*
 * store_retry_hint_ms - when a client refused because the store cannot write or be
 * reached (UNAVAILABLE) should try again, in ms: the backend's hint (a fleet: when it
 * tries its server again), else the time until the store thread's next attempt; at least
 * 100. Context: any; takes the store's lock briefly.
 */
uint64_t store_retry_hint_ms(Store *s);

/*
 * store_error_transient - @error (negative errno) is one a later commit may not have:
 * the disk full (-ENOSPC), over quota (-EDQUOT), failing (-EIO), read-only or not
 * writable for now (-EROFS, -EACCES), a lock held (-EBUSY), no memory (-ENOMEM). Writes
 * that failed with it are kept and tried again; others are not. Context: any.
 */
bool store_error_transient(int error);

/*
 * store_set_source - how the store thread reads a queued job's record: @snapshot(@arg)
 * (see StoreSnapshotFn), and whom it tells what each submission came to: @submitted(@arg)
 * (StoreSubmittedFn). The job table passes its own, so the store never names the table.
 * NULL @snapshot: the record is read with nothing held (jobs in no table; unit tests);
 * NULL @submitted: nobody is told but the submission's waiters.
 * Context: main thread at start-up, before store_load().
 */
void store_set_source(Store *s, StoreSnapshotFn snapshot, StoreSubmittedFn submitted, void *arg);

/*
 * store_set_recorded - whom a final write's watches are handed to (StoreRecordedFn),
 * with store_set_source()'s argument. Context: main thread at start-up, before the first
 * store_watch_final().
 */
void store_set_recorded(Store *s, StoreRecordedFn recorded);

/*
 * store_watch_final - hand @w to the StoreRecordedFn once a write carrying @j's final
 * state is committed, or failed for good (what store_wait(@j, true) waits for), without
 * a parked fiber. The caller has queued that write (its final state is set, and a
 * job.run's deferred first write was recorded: jobtable_record_locked()).
 * Return: true when @w was taken; false when that write is over already (@w is not
 * taken: JobStorePart.error says how it went). Context: any fiber or thread; does not
 * park; may be called under the owner's lock (the order is the owner's, then
 * Store.lock: the StoreRecordedFn is called with neither held).
 */
bool store_watch_final(Store *s, Job *j, JobWatch *w);

/*
 * store_revive - @j, final, lives again (job.retry): once the last life's end is on disk,
 * a new life starts (JobStorePart.life), whose end is not on disk until a write carrying
 * it is committed: JobStorePart.final_committed is reset, so that store_wait_until() and
 * store_watch_final() wait for that write, and a write read in the last life publishes
 * nothing. While the last end is still being written, or its write failed for good, or
 * the submission was refused, nothing changes: the waiters of that end hear its write,
 * as before. Context: the owner's lock held (the order above); does not park. No-op for
 * a store that does not write (the memory store).
 */
void store_revive(Store *s, Job *j);

/*
 * store_set_commit_delay - after a batch of 16 writes or more (a busy store), the store
 * thread waits @delay_ns (nanoseconds, below one second; 0 = never) before it takes
 * the next batch: fewer, larger commits, as PostgreSQL's commit_delay. It adds at most
 * @delay_ns to the latency of a submission under load, none at low load.
 * Context: main thread, before store_load().
 */
void store_set_commit_delay(Store *s, uint64_t delay_ns);

/*
 * store_busy - true while the store thread commits a batch of 16 writes or more (the
 * size commit_delay waits after): a write queued now waits for that commit and the
 * next, so jobtable_submit() dispatches without waiting. A few writes (a quiet store,
 * a plugin file marked at start-up) do not count: a job then runs once it is on disk.
 * A hint, read without the lock. Context: any; does not block.
 */
bool store_busy(Store *s);

/* store_delete - queue the removal of job @id (retention). Return 0; -ENOMEM.
 * Context: any; does not yield. */
int store_delete(Store *s, uint64_t id);

/*
 * store_put_plugin_file - write @pf (copied) and wait until it is committed: a marker
 * that must be on disk before the risky step it announces (dlopen, init). Before the
 * store thread runs, the calling thread commits it itself.
 * Return: 0; -ENOMEM; the backend's error. Context: a thread that may block on a
 * commit (the main thread, the loader): not a job fiber.
 */
int store_put_plugin_file(Store *s, const StorePluginFile *pf);

/*
 * store_set_meta - write meta @key = @value and wait for the commit (as above).
 * Return: 0; -ENOMEM; the backend's error.
 */
int store_set_meta(Store *s, const char *key, int64_t value);

/* store_get_meta - meta @key; -ENOENT when absent (or the backend keeps none). */
int store_get_meta(Store *s, const char *key, int64_t *ret);

/*
 * store_meta_list - @fn for every meta integer whose key begins with @prefix (sqlite: in
 * key order; redis: this host's, in no order); none when the backend keeps none.
 * Return: 0; @fn's error; -EIO. Context: main thread at start-up, before store_load().
 */
int store_meta_list(Store *s, const char *prefix, StoreMetaFn fn, void *arg);

/* store_plugin_files - @fn for every stored plugin file (see StoreBackend).
 * Context: main thread at start-up, before store_load(). */
int store_plugin_files(Store *s, StorePluginFn fn, void *arg);

/*
 * store_schedules - @fn for every stored schedule (none with the memory backend).
 * Return: 0; @fn's error; -EIO (logged).
 * Context: main thread at start-up, before store_load() (redis: any thread).
 */
int store_schedules(Store *s, StoreScheduleFn fn, void *arg);

/*
 * store_schedules_changed - a fleet's schedules, which every host writes: when their
 * version in the store (a counter each add, change and removal moves) is not *@version
 * (UINT64_MAX: never read), @fn for every schedule and *@version the version they are,
 * read in one atomic step. A tick's outcome does not move the version (StoreScheduleWrite).
 * Return: 1 (read); 0 (unchanged, or not a fleet store: nothing else writes them);
 * @fn's error; -EIO (logged). Context: any thread or fiber; blocks its thread for one
 * round trip to the server.
 */
int store_schedules_changed(Store *s, uint64_t *version, StoreScheduleFn fn, void *arg);

/*
 * store_put_schedule - queue the write of schedule @sc (copied: the caller's copy may
 * change at once), a whole row replacing the one of its (owner, name); writes are
 * committed in the order they were queued, so the last one queued is the row that
 * stays. In a fleet @sc->write says what the write is (StoreScheduleWrite), and a
 * write the fleet refuses answers its waiter -EEXIST or -ENOENT. With @waiter
 * (store_waiter_init()), store_waiter_wait() answers once it is committed. Before the
 * store thread runs, the calling thread commits it itself.
 * Return: 0; -ENOMEM (nothing queued; @waiter untouched).
 * Context: any thread or fiber, other locks allowed (it takes only the store's, and
 * never yields).
 */
int store_put_schedule(Store *s, const StoreSchedule *sc, StoreWaiter *waiter);

/* store_delete_schedule - queue the removal of @owner's schedule @name, as above. */
int store_delete_schedule(Store *s, uid_t owner, const char *name, StoreWaiter *waiter);

/* store_waiter_init - a waiter for one write. Context: any. */
void store_waiter_init(StoreWaiter *w);

/*
 * store_waiter_wait - wait until @w's write is committed or failed (not cancellable: the
 * store thread always answers, and @w is on the caller's stack).
 * Return: 0; the commit's error (negative errno: nothing of the write is on disk); the
 * backend's refusal of this write alone (StoreWrite.refused).
 * Context: a fiber (parks it) or a plain thread (blocks it); no lock held.
 */
int store_waiter_wait(StoreWaiter *w);

/* store_fleet - true when many hosts share this store (redis): ids come from
 * store_new_id(), jobs from the shared queue. Context: any. */
bool store_fleet(const Store *s);

/*
 * store_new_id - a job id never handed out by any host sharing the store.
 * Return: 0; -ENOTSUP (not a fleet store); -EIO (the server failed; logged).
 * Context: any thread or fiber; blocks its thread for one round trip to the server.
 */
int store_new_id(Store *s, uint64_t *ret);

/*
 * store_fetch - call @fn with the shared record of job @id (its strings valid during
 * the call only). Return: 0; @fn's error; -ENOENT (no such job, or its retention
 * ended); -ENOTSUP (not a fleet store); -EIO. Context: any thread or fiber; blocks its
 * thread for one round trip.
 */
int store_fetch(Store *s, uint64_t id, StoreLoadFn fn, void *arg);

/*
 * store_list - the ids of the fleet's jobs below @below (0 = from the newest), newest
 * first, at most @max into @ids. Return: 0 (*@ret_n set); -ENOTSUP; -EIO.
 * Context: any thread or fiber; blocks its thread for one round trip.
 */
int store_list(Store *s, uint64_t below, size_t max, uint64_t *ids, size_t *ret_n);

/*
 * store_fetch_many - call @fn with the shared record of each job of @ids (@n of them),
 * in the order of @ids (its strings valid during the call only); a job with no record
 * (no such job, or its retention ended) is skipped, so is an unreadable one (logged).
 * Every record is read in one round trip, not one per job (job.list).
 * Return: 0; @fn's error (the rest are not called); -ENOTSUP (not a fleet store);
 * -ENOMEM; -EIO. Context: any thread or fiber; blocks its thread for one round trip;
 * @fn runs on the calling thread, no store lock held.
 */
int store_fetch_many(Store *s, const uint64_t *ids, size_t n, StoreLoadFn fn, void *arg);

/*
 * store_fleet_start - start taking jobs off the shared queue: @hooks->take is called
 * with each record taken, on the store's reader thread; it returns 0 once the job is in
 * the job table (or ended there), or a negative errno to leave it to another host.
 * @hooks->room says how many more jobs this host wants: the reader reads no more than
 * that (a host does not take jobs it could not start soon while another host is idle).
 * @hooks->runs says which held entries this host still runs (the others are let go, for
 * any host to take over); @hooks->cancel ends a job that was cancelled through another
 * host. @hooks is copied.
 * Return: 0 (also for a store that is not a fleet); the error of pthread_create().
 * Context: main thread at start-up, after store_load().
 */
int store_fleet_start(Store *s, const StoreFleetHooks *hooks);

/* store_fleet_stop - take no more jobs (joins the reader). Context: main thread. */
void store_fleet_stop(Store *s);

/*
 * store_cancel_remote - ask whichever host runs fleet job @id (queued or running there)
 * to cancel it: the request stays in the fleet's cancel set until the job's final state
 * is written, and the host that holds the job ends it at its reader's next look (every
 * 200 ms; StoreFleetHooks.cancel), also a host that takes it over later. Return: 0;
 * -EALREADY (it is final); -ENOENT (no such job); -ENOTSUP (not a fleet store); -EIO.
 * Context: any thread or fiber; blocks its thread for one round trip.
 */
int store_cancel_remote(Store *s, uint64_t id);

/*
 * store_cancel_held - end job @rec->id as @rec says (its state, error, finished_ms; its
 * owner and key, whose expiry starts then) if the fleet's schedule set still holds it,
 * taking it out of that set atomically (a host moving it to the queue at the same time
 * wins or loses as a whole), or if it still waits for its dependencies; the jobs
 * waiting on it fail. Return: 0; -EALREADY (neither: it was moved to the queue, or it
 * ended); -ENOTSUP (not a fleet store); -EIO. Context: any thread or fiber; blocks its
 * thread for one round trip.
 */
int store_cancel_held(Store *s, const StoreRecord *rec);

/*
 * store_key_claim - the fleet's idempotency keys: @owner's @key names job @id from now
 * on, unless it names another job already, whose id is then *@ret_existing (0 when
 * claimed). The claim expires in a minute unless the job's first write makes it last
 * (until the job is final, then for the key window).
 * Return: 0; -ENOTSUP (not a fleet store); -EIO. Context: any thread or fiber; blocks
 * its thread for one round trip.
 */
int store_key_claim(Store *s, uid_t owner, const char *key, uint64_t id, uint64_t *ret_existing);

/* store_key_release - undo store_key_claim() for a submission that was refused after
 * it: @owner's @key is forgotten if it still names job @id. Context: as above. */
void store_key_release(Store *s, uid_t owner, const char *key, uint64_t id);

/*
 * store_flush - wait until every write queued so far is committed (or failed, or held
 * for the next attempt).
 * Context: a plain thread or the main thread (blocks the thread, not a fiber).
 */
void store_flush(Store *s);

/*
 * store_drain - store_flush(), then, while the disk cannot take what is held, wait up to
 * @timeout_ns (nanoseconds) for it to: an exit that cannot close the store (plugin code
 * still runs) gives held writes the chance store_close() gives them.
 * Context: as store_flush().
 */
void store_drain(Store *s, uint64_t timeout_ns);

/*
 * store_close - commit what is queued, stop the store thread and close the backend.
 * While the disk cannot take it, the queue is tried for STORE_CLOSE_RETRY_NS more, then
 * dropped (logged). Accepts NULL. Context: main thread, at exit, once nothing calls
 * store_put().
 */
void store_close(Store *s);

#endif
