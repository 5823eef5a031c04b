/* SPDX-License-Identifier: MIT */
/*
 * protocol.h — fiberd's wire contract as C constants (ipc/): the version, every method
 * name with its param positions, the keys of every record, and the error codes, each with
 * the errno it stands for and the exit status fiberctl gives it. PROTOCOL.md is the prose;
 * this header is the one place both sides (daemon/ and client/) take the spellings from,
 * so neither writes a method name, a key or a code as a raw string.
 *
 * Versions:
 *  - FIBERD_VERSION is the release, printed by `fiberd --version`, `fiberctl --version`
 *    and returned by `ping` ("version");
 *  - FIBERD_PROTOCOL_VERSION is an integer raised whenever this contract changes in a
 *    way an older peer would misread; `ping` returns it ("protocol") so a client can
 *    tell before it relies on a newer method or key.
 *
 * Pure: constants and a read-only table, usable from any thread or fiber.
 */
#ifndef FIBERD_IPC_PROTOCOL_H
#define FIBERD_IPC_PROTOCOL_H

#include <stddef.h>

#define FIBERD_VERSION "0.1.0"
#define FIBERD_PROTOCOL_VERSION 1

/* ---- methods (PROTOCOL.md, "Methods") and their params, by position ----------------- */

#define IPC_METHOD_PING "ping"                 /* [] */
#define IPC_METHOD_PLUGINS_LIST "plugins.list" /* [] */
/* job store: forget a quarantined plugin's crashes, load it again (admin) */
#define IPC_METHOD_PLUGINS_CLEAR "plugins.clear" /* [name] -> {cleared} */
#define IPC_KEY_CLEARED "cleared"
#define IPC_METHOD_JOB_SUBMIT "job.submit" /* [plugin, args, options] */
#define IPC_METHOD_JOB_RUN "job.run"       /* [plugin, args, options, timeout_ms] */
#define IPC_METHOD_JOB_STATUS "job.status" /* [id] */
#define IPC_METHOD_JOB_WAIT "job.wait"     /* [id, timeout_ms] */
#define IPC_METHOD_JOB_RESULT "job.result" /* [id] */
#define IPC_METHOD_JOB_CANCEL "job.cancel" /* [id] */
#define IPC_METHOD_JOB_LIST "job.list"     /* [filter] */
#define IPC_METHOD_STATS "stats"           /* [] */

/* The notification the server sends before it closes a broken stream. */
#define IPC_NOTIFY_CONNECTION_ERROR "connection.error" /* [{code, message}] */

/* ---- credentials (PROTOCOL.md, "Passing files") ------------------------------------ */

/* An fd argument: msgpack ext type 1 whose data is the fd's index (a 4-byte big-endian
 * unsigned integer, fixext 4) among the fds sent with the request as SCM_RIGHTS. */
#define IPC_EXT_FD 1
/* Most fds one request may carry; a connection holds at most IPC_FDS_QUEUED_MAX unclaimed. */
#define IPC_FDS_PER_REQUEST_MAX 8
#define IPC_FDS_QUEUED_MAX 32

/* job.submit [plugin, args, options]; job.run [plugin, args, options, timeout_ms,
 * fields]: the first three as job.submit's, then job.wait's timeout_ms (the wait, not
 * the job's) and fields (the record's keys to answer, PROTOCOL.md "job.wait"; left out
 * or nil = the whole record). */
enum {
        IPC_SUBMIT_PARAM_PLUGIN = 0,
        IPC_SUBMIT_PARAM_ARGS = 1,
        IPC_SUBMIT_PARAM_OPTIONS = 2,
        IPC_SUBMIT_NPARAMS = 3,
        IPC_RUN_PARAM_TIMEOUT_MS = 3,
        IPC_RUN_NPARAMS = 4,
        IPC_RUN_PARAM_FIELDS = 4,
        IPC_RUN_NPARAMS_FIELDS = 5,
};

/* job.status, job.wait, job.result, job.cancel: [id, ...]; job.wait [id, timeout_ms,
 * fields] */
enum {
        IPC_JOB_PARAM_ID = 0,
        IPC_JOB_NPARAMS = 1,
        IPC_WAIT_PARAM_TIMEOUT_MS = 1,
        IPC_WAIT_NPARAMS = 2,
        IPC_WAIT_PARAM_FIELDS = 2,
        IPC_WAIT_NPARAMS_FIELDS = 3,
};

/* job.list [filter] */
enum {
        IPC_LIST_PARAM_FILTER = 0,
        IPC_LIST_NPARAMS = 1,
};

/* ---- keys ---------------------------------------------------------------------------- */

/* job.submit options and job.list filter keys */
#define IPC_OPT_PRIORITY "priority"
#define IPC_OPT_TIMEOUT_MS "timeout_ms"
#define IPC_OPT_CLASS "class" /* CPU control: the job's class ([class.NAME]); absent = default */
/* job scheduling (PROTOCOL.md, "Scheduling jobs") */
#define IPC_OPT_DELAY_MS "delay_ms"             /* unsigned: run no sooner than now + this */
#define IPC_OPT_RUN_AT "run_at"                 /* unsigned ms since the epoch (UTC) */
#define IPC_OPT_MAX_ATTEMPTS "max_attempts"     /* 1..IPC_MAX_ATTEMPTS_MAX */
#define IPC_OPT_BACKOFF_MS "backoff_ms"         /* the first retry's wait (default 1000) */
#define IPC_OPT_BACKOFF_MAX_MS "backoff_max_ms" /* its cap (default 3600000) */
#define IPC_OPT_AFTER "after"                   /* [id, ...]: run once all are done */
#define IPC_OPT_KEY "key"                       /* idempotency key, 1..IPC_KEY_MAX bytes */
#define IPC_MAX_ATTEMPTS_MAX 100
#define IPC_BACKOFF_MS_DEFAULT 1000
#define IPC_BACKOFF_MAX_MS_DEFAULT 3600000
#define IPC_AFTER_MAX 64
#define IPC_IDEMPOTENCY_KEY_MAX 128
#define IPC_RUN_AT_MAX_AHEAD_MS (10ull * 366 * 24 * 3600 * 1000) /* 10 years */
#define IPC_FILTER_STATE "state"
#define IPC_FILTER_PLUGIN "plugin"
#define IPC_FILTER_LIMIT "limit"

/* The job record (PROTOCOL.md, "Job record"); job.submit's result is {IPC_KEY_ID}. */
#define IPC_KEY_ID "id"
#define IPC_KEY_PLUGIN "plugin"
#define IPC_KEY_OWNER "owner"
#define IPC_KEY_STATE "state"
#define IPC_KEY_PRIORITY "priority"
#define IPC_KEY_TIMEOUT_MS "timeout_ms"
#define IPC_KEY_CREATED_MS "created_ms"
#define IPC_KEY_STARTED_MS "started_ms"
#define IPC_KEY_FINISHED_MS "finished_ms"
#define IPC_KEY_PROGRESS "progress" /* {done, total} */
#define IPC_KEY_DONE "done"
#define IPC_KEY_TOTAL "total"
#define IPC_KEY_RESULT "result"
#define IPC_KEY_ERROR "error" /* {code, message} */
#define IPC_KEY_CLASS "class" /* CPU control: the job's class name */
/* job store: runs begun before this one (a retry-safe job requeued) */
#define IPC_KEY_ATTEMPT "attempt"
#define IPC_KEY_MAX_ATTEMPTS "max_attempts"
#define IPC_KEY_NEXT_ATTEMPT_MS "next_attempt_ms" /* while retrying; else nil */
#define IPC_KEY_RUN_AT_MS "run_at_ms"             /* the due time asked; nil = none */
#define IPC_KEY_AFTER "after"                     /* [ids] it waits for */
#define IPC_KEY_KEY "key"                         /* its idempotency key; nil = none */
#define IPC_KEY_ERRORS "errors"     /* [{attempt, code, message, finished_ms}], oldest first */
#define IPC_JOB_ERRORS_MAX 16       /* runs whose errors a record keeps (the last ones) */
#define IPC_KEY_EXISTING "existing" /* job.submit: a key matched an earlier job */

/* The error map, in responses, job records and IPC_NOTIFY_CONNECTION_ERROR. */
#define IPC_KEY_CODE "code"
#define IPC_KEY_MESSAGE "message"

/* Job states, the values of IPC_KEY_STATE. */
#define IPC_STATE_QUEUED "queued"
#define IPC_STATE_RUNNING "running"
#define IPC_STATE_DONE "done"
#define IPC_STATE_FAILED "failed"
#define IPC_STATE_CANCELLED "cancelled"
#define IPC_STATE_SCHEDULED "scheduled" /* waits for its due time */
#define IPC_STATE_WAITING "waiting"     /* waits for the jobs of its `after` */
#define IPC_STATE_RETRYING "retrying"   /* failed a run, waits for its next attempt */
#define IPC_STATE_DEAD "dead"           /* out of attempts: final */

/* job.retry [ids] or [{all: true}] -> {retried: [ids]};
 * job.discard [ids] or [{all: true}] -> {discarded: [ids]} */
#define IPC_METHOD_JOB_RETRY "job.retry"
#define IPC_METHOD_JOB_DISCARD "job.discard"
#define IPC_KEY_ALL "all"
#define IPC_KEY_RETRIED "retried"
#define IPC_KEY_DISCARDED "discarded"

/* pause / resume [kind, name] (admin) -> {kind, name, paused, queued} */
#define IPC_METHOD_PAUSE "pause"
/* reload [] (admin) -> {reloaded: what was applied}; a config that does not load is
 * INVALID_ARGUMENT naming its first error (fiberd keeps the running one) */
#define IPC_METHOD_RELOAD "reload"
#define IPC_KEY_RELOADED "reloaded"
#define IPC_METHOD_RESUME "resume"
#define IPC_PAUSE_KIND_CLASS "class"
#define IPC_PAUSE_KIND_PLUGIN "plugin"
#define IPC_KEY_KIND "kind"
#define IPC_KEY_PAUSED "paused" /* also stats: {classes: [names], plugins: [names]} */

/* schedule.add [name, spec, plugin, args, options] -> schedule;
 * schedule.list [] -> [schedule]; schedule.remove|pause|resume [name, owner?] -> schedule.
 * A schedule: {name, owner, cron, tz, every_ms, missed, plugin, args, options, paused,
 * next_ms, last_ms, last_job}; spec: {cron, tz} or {every_ms}, plus missed. */
#define IPC_METHOD_SCHEDULE_ADD "schedule.add"
#define IPC_METHOD_SCHEDULE_LIST "schedule.list"
#define IPC_METHOD_SCHEDULE_REMOVE "schedule.remove"
#define IPC_METHOD_SCHEDULE_PAUSE "schedule.pause"
#define IPC_METHOD_SCHEDULE_RESUME "schedule.resume"
#define IPC_KEY_CRON "cron"
#define IPC_KEY_TZ "tz"
#define IPC_KEY_EVERY_MS "every_ms"
#define IPC_KEY_MISSED "missed"
#define IPC_MISSED_SKIP "skip"
#define IPC_MISSED_RUN_ONCE "run_once"
#define IPC_KEY_ARGS "args"
#define IPC_KEY_OPTIONS "options"
#define IPC_KEY_NEXT_MS "next_ms"
#define IPC_KEY_LAST_MS "last_ms"
#define IPC_KEY_LAST_JOB "last_job"
#define IPC_SCHEDULE_NAME_MAX 64
#define IPC_SCHEDULE_EVERY_MS_MIN 1000
enum {
        IPC_SCHEDULE_PARAM_NAME = 0,
        IPC_SCHEDULE_PARAM_SPEC = 1, /* schedule.add */
        IPC_SCHEDULE_PARAM_PLUGIN = 2,
        IPC_SCHEDULE_PARAM_ARGS = 3,
        IPC_SCHEDULE_PARAM_OPTIONS = 4,
        IPC_SCHEDULE_PARAM_OWNER = 1, /* schedule.remove|pause|resume */
};
/* stats: how many schedules the daemon holds */
#define IPC_KEY_SCHEDULES "schedules"
/* stats: whether the job store can write: {failing, pending_writes, since_ms, error} */
#define IPC_KEY_STORE "store"
#define IPC_KEY_FAILING "failing"               /* bool: writes are held and retried */
#define IPC_KEY_PENDING_WRITES "pending_writes" /* writes held in memory meanwhile */
#define IPC_KEY_SINCE_MS "since_ms"             /* when writes stopped; nil = writing */

/* ping's result */
#define IPC_KEY_VERSION "version"   /* FIBERD_VERSION */
#define IPC_KEY_PROTOCOL "protocol" /* FIBERD_PROTOCOL_VERSION */
#define IPC_KEY_PID "pid"
#define IPC_KEY_UPTIME_MS "uptime_ms"

/* plugins.list's result: {plugins: [{name, version, description, path}],
 * refused: [{path, reason}]} */
#define IPC_KEY_PLUGINS "plugins"
#define IPC_KEY_REFUSED "refused"
#define IPC_KEY_NAME "name"
#define IPC_KEY_DESCRIPTION "description"
#define IPC_KEY_PATH "path"
#define IPC_KEY_REASON "reason"
/* plugins in place: plugins.list's versions replaced or removed but still
 * running jobs ({name, version, description, path, running}); `running` also on each
 * loaded plugin: the jobs (and argument checks) using that version now */
#define IPC_KEY_DRAINING "draining"

/* stats' result: {uptime_ms, jobs, plugins, groups, layout, server}; the counts maps
 * (jobs, and each plugin's) have submitted, queued, running, done, failed, cancelled,
 * detached. */
#define IPC_KEY_JOBS "jobs"
#define IPC_KEY_LAYOUT "layout"
#define IPC_KEY_SERVER "server"
#define IPC_KEY_SUBMITTED "submitted"
#define IPC_KEY_QUEUED IPC_STATE_QUEUED
#define IPC_KEY_RUNNING IPC_STATE_RUNNING
#define IPC_KEY_FAILED IPC_STATE_FAILED
#define IPC_KEY_CANCELLED IPC_STATE_CANCELLED
/* the counts maps' gauge of ended jobs whose fiber still runs plugin code (detached:
 * their code did not return after a cancel or timeout) */
#define IPC_KEY_DETACHED "detached"
/* the jobs map's gauge of queued jobs a pause or a class's or plugin's max_running holds */
#define IPC_KEY_HELD "held"

/* stats' groups[] entries (sched_group_stats()), layout and server maps */
#define IPC_KEY_WORKERS "workers"
#define IPC_KEY_SPINNING "spinning"
#define IPC_KEY_SLEEPING "sleeping"
#define IPC_KEY_RUNQ_DEPTH "runq_depth"
#define IPC_KEY_RUNQ_FULL "runq_full"
#define IPC_KEY_FIBERS_CREATED "fibers_created"
#define IPC_KEY_FIBERS_FINISHED "fibers_finished"
#define IPC_KEY_FIBERS_ALIVE "fibers_alive"
#define IPC_KEY_CONTEXT_SWITCHES "context_switches"
#define IPC_KEY_SPINNER_HANDOFFS "spinner_handoffs"
#define IPC_KEY_FUTEX_WAKEUPS "futex_wakeups"
#define IPC_KEY_READY_TO_RUN_SAMPLES "ready_to_run_samples"
#define IPC_KEY_READY_TO_RUN_P50_NS "ready_to_run_p50_ns"
#define IPC_KEY_READY_TO_RUN_P99_NS "ready_to_run_p99_ns"
#define IPC_KEY_READY_TO_RUN_MAX_NS "ready_to_run_max_ns"
#define IPC_KEY_NODE "node"
#define IPC_KEY_CPUS "cpus"
#define IPC_KEY_STEALS_IN "steals_in"
#define IPC_KEY_STEALS_OUT "steals_out"
#define IPC_KEY_LOCAL_DEQUEUES "local_dequeues"
#define IPC_KEY_SHARED_DEQUEUES "shared_dequeues"
#define IPC_KEY_GROUPS "groups"
#define IPC_KEY_GROUP_SIZE "group_size"
#define IPC_KEY_NUMA "numa"
#define IPC_KEY_QUEUE_POLICY "queue_policy"
#define IPC_KEY_CONNECTIONS "connections"
#define IPC_KEY_ACCEPTED "accepted"
#define IPC_KEY_REQUESTS "requests"
#define IPC_KEY_REQUESTS_INLINE "requests_inline"
#define IPC_KEY_IN_FLIGHT "in_flight"
#define IPC_KEY_PROTOCOL_ERRORS "protocol_errors"
/* server resource limits: connections refused by a limit or for want of fds
 * (IPC_KEY_REFUSED, the same word as plugins.list's), bytes of incomplete messages held */
#define IPC_KEY_PARTIAL_BYTES "partial_bytes"
#define IPC_KEY_ANSWER_WRITES "answer_writes"
#define IPC_KEY_USER_THROTTLED "user_throttled"
#define IPC_KEY_OPENS "opens"
#define IPC_KEY_INLINE_ENABLED "inline_enabled"
#define IPC_KEY_INLINE "inline"
#define IPC_KEY_OPENER "opener"

/* CPU control: stats' classes[] entries {name, shares, runtime_ns, vruntime, queued,
 * ready_to_run_p50_ns, ready_to_run_p99_ns}; groups[] entries' stalls, rescues,
 * spares_running, threads; each plugin's counts' stalls */
#define IPC_KEY_CLASSES "classes"
#define IPC_KEY_SHARES "shares"
#define IPC_KEY_RUNTIME_NS "runtime_ns"
#define IPC_KEY_VRUNTIME "vruntime"
#define IPC_KEY_STALLS "stalls"
#define IPC_KEY_RESCUES "rescues"
#define IPC_KEY_SPARES_RUNNING "spares_running"
#define IPC_KEY_THREADS "threads"

/* values in stats: the groups' names and layout.queue_policy */
#define IPC_GROUP_SERVER "server"    /* the daemon's own group, first */
#define IPC_GROUP_JOBS_FMT "jobs-%u" /* then the job scheduler's, from 0 */
#define IPC_QUEUE_POLICY_SHARED "shared"
#define IPC_QUEUE_POLICY_LOCAL "local"

/* job.list pages (PROTOCOL.md, "job.list"): the filter key "cursor" asks for a page,
 * newest first; the result is then {jobs: [records], next_cursor: id or nil}. A page
 * holds at most IPC_LIST_PAGE_MAX records (limit lowers it) and stops short of the
 * message cap, so no answer passes it however many jobs there are. */
#define IPC_FILTER_CURSOR "cursor"
#define IPC_KEY_NEXT_CURSOR "next_cursor"
#define IPC_LIST_PAGE_MAX 1000

/* metrics and job logs (PROTOCOL.md, "stats", "metrics", "job.logs"):
 * - `metrics` [] answers a string: the OpenMetrics text exposition (IPC_METRICS_CONTENT_TYPE);
 * - `job.logs` [id] answers {id, lines: [{time_ms, level, text}], dropped, bytes}: the
 *   lines the job wrote with host->log (the newest IPC_JOB_LOGS_MAX_LINES, at most
 *   IPC_JOB_LOGS_MAX_BYTES of text), owner or admin only;
 * - stats gains latency: [{plugin, class, samples, queue_wait: {p50_ns, p90_ns, p99_ns,
 *   max_ns}, run_time: {...}}] and process: {user_cpu_ns, system_cpu_ns, rss_bytes,
 *   open_fds, max_fds}. */
#define IPC_METHOD_METRICS "metrics"          /* [] or [format] */
#define IPC_METRICS_OPENMETRICS "openmetrics" /* metrics' default format */
#define IPC_METRICS_PROMETHEUS "prometheus"   /* Prometheus text format 0.0.4 */
#define IPC_METHOD_JOB_LOGS "job.logs"        /* [id] */
#define IPC_METRICS_CONTENT_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define IPC_JOB_LOGS_MAX_LINES 64
#define IPC_JOB_LOGS_MAX_BYTES 8192
#define IPC_KEY_LINES "lines"
#define IPC_KEY_TIME_MS "time_ms"
#define IPC_KEY_LEVEL "level"
#define IPC_KEY_TEXT "text"
#define IPC_KEY_DROPPED "dropped"
#define IPC_KEY_BYTES "bytes"
#define IPC_KEY_LATENCY "latency"
#define IPC_KEY_SAMPLES "samples"
#define IPC_KEY_QUEUE_WAIT "queue_wait"
#define IPC_KEY_RUN_TIME "run_time"
#define IPC_KEY_P50_NS "p50_ns"
#define IPC_KEY_P90_NS "p90_ns"
#define IPC_KEY_P99_NS "p99_ns"
#define IPC_KEY_MAX_NS "max_ns"
#define IPC_KEY_PROCESS "process"
#define IPC_KEY_USER_CPU_NS "user_cpu_ns"
#define IPC_KEY_SYSTEM_CPU_NS "system_cpu_ns"
#define IPC_KEY_RSS_BYTES "rss_bytes"
#define IPC_KEY_OPEN_FDS "open_fds"
#define IPC_KEY_MAX_FDS "max_fds"

/* ---- error codes (PROTOCOL.md, "Errors") -------------------------------------------- */

/*
 * The wire codes. Each is its own string constant; a code read from the wire is turned
 * into one of these with ipc_status_canonical_code() (status.h). The comment lists the
 * errnos ipc_status_code_from_errno() maps to it; ipc_protocol_errors[] below holds the
 * one errno the client reports for it and fiberctl's exit status.
 * (IPC_METHOD_NOT_FOUND is an error code, not a method name.)
 */
#define IPC_INVALID_ARGUMENT "INVALID_ARGUMENT"       /* -EINVAL -ERANGE -E2BIG -ENAMETOOLONG */
#define IPC_NOT_FOUND "NOT_FOUND"                     /* -ENOENT -ESRCH */
#define IPC_ALREADY_EXISTS "ALREADY_EXISTS"           /* -EEXIST */
#define IPC_PERMISSION_DENIED "PERMISSION_DENIED"     /* -EPERM -EACCES */
#define IPC_FAILED_PRECONDITION "FAILED_PRECONDITION" /* -EALREADY -EINPROGRESS -EISDIR... */
#define IPC_OVERLOADED "OVERLOADED"                   /* -EAGAIN -EBUSY -EMFILE -ENFILE */
#define IPC_UNAVAILABLE "UNAVAILABLE"                 /* -ESHUTDOWN -ECONNREFUSED -EPIPE */
#define IPC_DEADLINE_EXCEEDED "DEADLINE_EXCEEDED"     /* -ETIMEDOUT */
#define IPC_CANCELLED "CANCELLED"                     /* -ECANCELED */
#define IPC_METHOD_NOT_FOUND "METHOD_NOT_FOUND"       /* -ENOSYS */
#define IPC_MALFORMED_MESSAGE "MALFORMED_MESSAGE"     /* -EBADMSG -EPROTO */
#define IPC_MESSAGE_TOO_LARGE "MESSAGE_TOO_LARGE"     /* -EMSGSIZE */
#define IPC_OUT_OF_MEMORY "OUT_OF_MEMORY"             /* -ENOMEM */
/* job store: a job that was running when fiberd died, not retried */
#define IPC_INTERRUPTED "INTERRUPTED" /* -EOWNERDEAD (in a job record's error only) */
#define IPC_INTERNAL "INTERNAL"       /* anything else */

/* fiberctl's exit status when a job it reported on failed or was cancelled. */
#define IPC_EXIT_JOB_FAILED 1

/* One row of the error table. */
typedef struct IpcErrorSpec {
        const char *code; /* an IPC_* code constant above */
        int error;        /* the negative errno the client reports for it */
        int exit_status;  /* fiberctl's exit status (sysexits.h, or IPC_EXIT_JOB_FAILED) */
} IpcErrorSpec;

/* Every error code, once each, in the order of PROTOCOL.md's table; INTERNAL last. */
extern const IpcErrorSpec ipc_protocol_errors[];
extern const size_t ipc_protocol_nerrors;

/*
 * ipc_protocol_error - the row for @code (@len bytes, need not be NUL-terminated), or
 * NULL for a code this side does not know (a newer peer's; treat it as INTERNAL).
 * Context: any. Pure.
 */
const IpcErrorSpec *ipc_protocol_error(const char *code, size_t len);

/*
 * ipc_protocol_exit_status - fiberctl's exit status for @code (NUL-terminated): 0 for
 * NULL (no error), INTERNAL's for an unknown code. Context: any. Pure.
 */
int ipc_protocol_exit_status(const char *code);

#endif /* FIBERD_IPC_PROTOCOL_H */
