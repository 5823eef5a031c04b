/* SPDX-License-Identifier: MIT */
/*
 * fiberd/client.h — libfiberd-client, the C client library of fiberd (installed header;
 * build with `pkg-config --cflags --libs fiberd-client`).
 *
 * One FiberdClient is one connection to fiberd's Unix socket, speaking MessagePack-RPC
 * (fiberd-protocol(7), PROTOCOL.md) with many requests in flight. Values on the wire are
 * msgpack-c's: params are packed with a msgpack_packer, results are read as
 * msgpack_object trees, so msgpack-c (<msgpack.h>, -lmsgpackc) comes with this library.
 *
 *     FiberdClient *c;
 *     FiberdClientError err;
 *     uint64_t id;
 *     if (fiberd_client_connect(&c, NULL, &err) < 0)   // NULL: the default socket
 *             die("%s", err.message);
 *     if (fiberd_client_submit(c, "echo", NULL, 0, NULL, -1, &id, &err) < 0)
 *             die("%s: %s", fiberd_client_code_name(err.code), err.message);
 *     FiberdClientReply *rec;
 *     fiberd_client_job_wait(c, id, 10000, -1, &rec, &err);  // the job record
 *     const msgpack_object *state = fiberd_client_object_get(
 *             fiberd_client_reply_result(rec), "state");
 *     ...
 *     fiberd_client_reply_free(rec);
 *     fiberd_client_free(c);
 *
 * Pipelining: fiberd_client_send_*() and fiberd_client_request() only queue a request and
 * give back its msgid; fiberd_client_flush() sends what is queued and
 * fiberd_client_receive() hands back the replies in the order they arrive — fiberd answers
 * out of order, so callers match them by msgid (fiberd_client_reply_msgid()).
 * fiberd_client_wait_reply() waits for one msgid and keeps the other replies that arrive
 * meanwhile for a later fiberd_client_receive(), in arrival order. The blocking helpers
 * (fiberd_client_ping(), fiberd_client_submit(), ...) are a send and a wait for that msgid.
 *
 * Timeouts: every call that waits takes timeout_ms, milliseconds of CLOCK_MONOTONIC the call
 * may block the calling thread in total; -1 waits without limit, 0 only looks at what has
 * arrived. The socket is non-blocking and every wait is a poll(2); while queued output
 * does not fit in the socket the replies are read, so a deep pipeline cannot deadlock with
 * a daemon that is busy writing back. SIGPIPE is never raised (MSG_NOSIGNAL).
 *
 * Errors: every function that can fail returns a negative errno and, when it is given a
 * FiberdClientError, fills it with the protocol's error code and a sentence that names the
 * cause and the fix. The daemon's own errors keep the code it sent (FIBERD_CLIENT_NOT_FOUND
 * for an unknown job, ...); failures on this side get the code of their errno
 * (-ETIMEDOUT: FIBERD_CLIENT_DEADLINE_EXCEEDED, -ECONNRESET: FIBERD_CLIENT_UNAVAILABLE).
 * Out-parameters named ret* are written only on success.
 *
 * Threads: a FiberdClient is not thread-safe; use each from one thread at a time (one
 * connection per thread is the usual shape). Replies are independent objects and may be
 * handed to other threads. The library starts no thread and installs no signal handler.
 *
 * ABI: only fiberd_client_* symbols are exported (soname libfiberd-client.so.0), each
 * with a symbol version (libfiberd-client.map): FIBERD_CLIENT_0 for the first release,
 * FIBERD_CLIENT_0.2 for what job scheduling added, FIBERD_CLIENT_0.3 for job logs and
 * metrics. The structs below that are not opaque
 * only ever grow at their end, and a function that reads one keeps its older version: a
 * program built against FIBERD_CLIENT_0's FiberdClientJobOptions calls
 * fiberd_client_submit@FIBERD_CLIENT_0, which reads only the fields that struct had.
 */
#ifndef FIBERD_CLIENT_PUBLIC_H
#define FIBERD_CLIENT_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FIBERD_CLIENT_EXPORT __attribute__((visibility("default")))

/* The protocol version this library speaks (ping's "protocol"). */
#define FIBERD_CLIENT_PROTOCOL 1

/*
 * FiberdClientCode - the protocol's error codes (fiberd-protocol(7), "Errors"), as an enum.
 * fiberd_client_code_name() gives the wire spelling ("NOT_FOUND"). A code a newer daemon
 * sends that this library does not know reads as FIBERD_CLIENT_INTERNAL.
 */
typedef enum FiberdClientCode {
        FIBERD_CLIENT_OK = 0,
        FIBERD_CLIENT_INVALID_ARGUMENT,    /* a param or plugin argument is wrong */
        FIBERD_CLIENT_NOT_FOUND,           /* no such job or plugin (or not yours) */
        FIBERD_CLIENT_ALREADY_EXISTS,      /* -EEXIST */
        FIBERD_CLIENT_PERMISSION_DENIED,   /* your access tier does not allow it */
        FIBERD_CLIENT_FAILED_PRECONDITION, /* e.g. job.result of a job still running */
        FIBERD_CLIENT_OVERLOADED,          /* a queue or quota is full: try again later */
        FIBERD_CLIENT_UNAVAILABLE,         /* cannot connect, or fiberd closed the connection */
        FIBERD_CLIENT_DEADLINE_EXCEEDED,   /* a timeout passed */
        FIBERD_CLIENT_CANCELLED,           /* the job was cancelled */
        FIBERD_CLIENT_METHOD_NOT_FOUND,    /* an older fiberd that lacks the method */
        FIBERD_CLIENT_MALFORMED_MESSAGE,   /* a message one side could not read */
        FIBERD_CLIENT_MESSAGE_TOO_LARGE,   /* over the message cap */
        FIBERD_CLIENT_OUT_OF_MEMORY,       /* -ENOMEM on either side */
        FIBERD_CLIENT_INTERNAL,            /* anything else */
        FIBERD_CLIENT_INTERRUPTED,         /* fiberd stopped while the job ran; not retried */
} FiberdClientCode;

/* Longest message kept in a FiberdClientError, bytes including the NUL. */
#define FIBERD_CLIENT_MESSAGE_MAX 256

/* FiberdClientError - why a call failed. Plain value; zeroed means "no error". */
typedef struct FiberdClientError {
        FiberdClientCode code;                   /* FIBERD_CLIENT_OK when none */
        int error;                               /* the negative errno returned */
        char message[FIBERD_CLIENT_MESSAGE_MAX]; /* NUL-terminated, truncated to fit */
} FiberdClientError;

/* An open connection (opaque). */
typedef struct FiberdClient FiberdClient;
/* One message from the daemon: a response, or a notification (opaque). */
typedef struct FiberdClientReply FiberdClientReply;

/*
 * FiberdClientJobOptions - job.submit's options (fiberd-protocol(7), "job.submit" and
 * "Scheduling jobs"). Zeroed means the daemon's defaults: each field is sent only when it
 * is not zero (NULL), priority only with has_priority. Strings and @after are read while
 * the request is queued, not kept.
 */
typedef struct FiberdClientJobOptions {
        bool has_priority;   /* send priority */
        int32_t priority;    /* lower runs first; below 0 needs the admin tier */
        uint64_t timeout_ms; /* the job's own time limit, ms; 0 = the daemon's default */
        /* since FIBERD_CLIENT_0.2: */
        const char *job_class;   /* its job class ([class.NAME]); NULL = "default" */
        uint64_t delay_ms;       /* run no sooner than this long from now (state
                                  * "scheduled"); 0 = no delay */
        uint64_t run_at_ms;      /* run no sooner than this, ms since the epoch (UTC);
                                  * 0 = none. Not with delay_ms: INVALID_ARGUMENT */
        uint32_t max_attempts;   /* runs a failing job gets, 1..100, before it is "dead";
                                  * 0 = the plugin's default, else 1 */
        uint64_t backoff_ms;     /* the first retry's wait, doubled for each next one
                                  * (jitter 50-100 %); 0 = the daemon's default (1000) */
        uint64_t backoff_max_ms; /* the cap of that wait; 0 = the default (3600000) */
        const uint64_t *after;   /* run once these jobs are done (state "waiting"), at
                                  * most 64; NULL = none */
        size_t n_after;          /* entries of @after */
        const char *key;         /* idempotency key, 1..128 bytes: a repeat answers the
                                  * first job's id; NULL = none */
} FiberdClientJobOptions;

/*
 * FiberdClientScheduleSpec - when a schedule submits (schedule.add's spec): either a cron
 * expression with its time zone, or an interval.
 */
typedef struct FiberdClientScheduleSpec {
        const char *cron;   /* 5 fields, or @hourly, @daily, @weekly, @monthly, @yearly;
                             * NULL: use every_ms */
        const char *tz;     /* the cron's time zone ("Europe/Berlin"); NULL = UTC */
        uint64_t every_ms;  /* the interval when cron is NULL, at least 1000 */
        const char *missed; /* a tick missed while fiberd was down: "skip" or "run_once";
                             * NULL = the daemon's default, "skip" */
} FiberdClientScheduleSpec;

/*
 * FiberdClientListFilter - job.list's filter. Zeroed means every job you may see, in pages
 * of the daemon's default size.
 */
typedef struct FiberdClientListFilter {
        const char *state;  /* "queued", "running", "done", "failed", "cancelled",
                             * "scheduled", "waiting", "retrying", "dead"; NULL: all */
        const char *plugin; /* a plugin name; NULL: all */
        uint32_t limit;     /* most records in the page; 0: the daemon's page size */
} FiberdClientListFilter;

/* ---- errors ------------------------------------------------------------------------- */

/* fiberd_client_code_name - the wire spelling of @code ("NOT_FOUND"; "OK" for
 * FIBERD_CLIENT_OK; "INTERNAL" for a value outside the enum). Static storage. Pure. */
FIBERD_CLIENT_EXPORT const char *fiberd_client_code_name(FiberdClientCode code);

/* fiberd_client_code_from_name - the code spelled @name (NUL-terminated); INTERNAL for a
 * name this library does not know, FIBERD_CLIENT_OK for NULL. Pure. */
FIBERD_CLIENT_EXPORT FiberdClientCode fiberd_client_code_from_name(const char *name);

/* ---- connection --------------------------------------------------------------------- */

/*
 * fiberd_client_default_socket - the socket path used when none is given: $FIBERD_SOCKET if
 * set and not empty, else the system socket /run/fiberd.sock (a per-user fiberd's socket,
 * $XDG_RUNTIME_DIR/fiberd.sock, is asked for by path). Written to @buf (@size bytes).
 * Return: 0; -ENAMETOOLONG when it does not fit. Context: any thread.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_default_socket(char *buf, size_t size);

/*
 * fiberd_client_connect - connect to the daemon at @path (NULL: the default socket).
 * @ret: out, the connection, written only on success; the caller owns it
 * (fiberd_client_free()).
 * Return: 0; -errno of socket(2)/connect(2) (-ENOENT no socket file, -ECONNREFUSED nobody
 * listening, -EACCES no permission), -ENAMETOOLONG for a path longer than a Unix socket
 * address holds, -ENOMEM. @err's code is FIBERD_CLIENT_UNAVAILABLE (PERMISSION_DENIED for
 * -EACCES/-EPERM). Blocks only as long as connect(2) on a Unix socket does (not).
 */
FIBERD_CLIENT_EXPORT int fiberd_client_connect(FiberdClient **ret, const char *path,
                                               FiberdClientError *err);

/* fiberd_client_free - close the connection and drop queued output and kept replies
 * (replies already handed out stay valid). Accepts NULL; returns NULL. */
FIBERD_CLIENT_EXPORT FiberdClient *fiberd_client_free(FiberdClient *c);

/* fiberd_client_path - the socket path @c connected to (owned by @c). */
FIBERD_CLIENT_EXPORT const char *fiberd_client_path(const FiberdClient *c);

/* fiberd_client_fd - the socket, for callers that poll(2) several sources; wait for
 * POLLIN, then call fiberd_client_receive() with timeout 0. Do not read or close it. */
FIBERD_CLIENT_EXPORT int fiberd_client_fd(const FiberdClient *c);

/* ---- requests, raw ------------------------------------------------------------------- */

/*
 * fiberd_client_request - queue a request [0, msgid, @method, [params]] with a fresh msgid
 * (@ret_msgid; from 1, increasing) and return the packer on which the caller packs exactly
 * @nparams params. Nothing is sent until fiberd_client_flush() or a call that waits.
 * Return: the packer (owned by @c, valid until the next call on @c), or NULL when out of
 * memory (nothing queued then). When a msgpack_pack_*() on it fails (-1, out of memory)
 * the caller gives up on the connection.
 */
FIBERD_CLIENT_EXPORT msgpack_packer *fiberd_client_request(FiberdClient *c, const char *method,
                                                           uint32_t nparams, uint32_t *ret_msgid);

/*
 * fiberd_client_request_fds - send @fds (@n, at most 8) with the next request queued, as
 * SCM_RIGHTS on its first byte; its params refer to them as fd arguments (msgpack ext type
 * 1, fixext 4 holding the big-endian index 0..@n-1; fiberd-protocol(7), "Passing files").
 * The fds are not taken: keep them open until that request is flushed. Call it right
 * before fiberd_client_request().
 * Return: 0; -EBUSY when fds wait to be sent already; -E2BIG for more than 8.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_request_fds(FiberdClient *c, const int *fds, size_t n);

/* fiberd_client_pending_output - bytes queued and not yet written to the socket. */
FIBERD_CLIENT_EXPORT size_t fiberd_client_pending_output(const FiberdClient *c);

/*
 * fiberd_client_flush - write all queued requests, waiting at most @timeout_ms.
 * Replies arriving meanwhile are kept for fiberd_client_receive().
 * Return: 0; -ETIMEDOUT; other -errno of send(2)/poll(2). When the daemon has closed the
 * connection the unsent output is dropped and 0 returned: what it said before closing
 * comes out of the next fiberd_client_receive(), which then reports the close.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_flush(FiberdClient *c, int timeout_ms,
                                             FiberdClientError *err);

/*
 * fiberd_client_receive - the next reply, in arrival order (kept ones first); flushes
 * queued output first.
 * @ret: out, written only on success; the caller owns it (fiberd_client_reply_free()).
 * Return: 0; -ETIMEDOUT after @timeout_ms; -ECONNRESET when the daemon closed the
 * connection; -EBADMSG/-EMSGSIZE/-EPROTO when it sent what is not a valid message; the
 * daemon's own error when it sent "connection.error" before closing.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_receive(FiberdClient *c, int timeout_ms,
                                               FiberdClientReply **ret, FiberdClientError *err);

/*
 * fiberd_client_wait_reply - flush, then wait at most @timeout_ms for the response to
 * @msgid; other replies that arrive first are kept, in order, for fiberd_client_receive().
 * The response may carry an error: see fiberd_client_reply_error(), or use
 * fiberd_client_call(). Return and @ret: as fiberd_client_receive().
 */
FIBERD_CLIENT_EXPORT int fiberd_client_wait_reply(FiberdClient *c, uint32_t msgid, int timeout_ms,
                                                  FiberdClientReply **ret, FiberdClientError *err);

/*
 * fiberd_client_call - fiberd_client_wait_reply(), then the daemon's error (if it sent one)
 * as the return value: 0 and *@ret (a reply holding a result); or the daemon's error as a
 * negative errno (-ENOENT NOT_FOUND, -EINVAL INVALID_ARGUMENT, ... -EIO for codes this
 * library does not know) with @err holding its code and message; or a wait error.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_call(FiberdClient *c, uint32_t msgid, int timeout_ms,
                                            FiberdClientReply **ret, FiberdClientError *err);

/* ---- replies ------------------------------------------------------------------------- */

/* fiberd_client_reply_free - free @r and every msgpack_object read out of it. Accepts NULL;
 * returns NULL. Context: any thread. */
FIBERD_CLIENT_EXPORT FiberdClientReply *fiberd_client_reply_free(FiberdClientReply *r);

/* fiberd_client_reply_msgid - the msgid a response answers (0 for a notification). */
FIBERD_CLIENT_EXPORT uint32_t fiberd_client_reply_msgid(const FiberdClientReply *r);

/* fiberd_client_reply_method - a notification's method name; NULL for a response. */
FIBERD_CLIENT_EXPORT const char *fiberd_client_reply_method(const FiberdClientReply *r);

/* fiberd_client_reply_result - a response's result (a nil object when it carries an error
 * or @r is a notification, whose params it is then). Owned by @r. */
FIBERD_CLIENT_EXPORT const msgpack_object *fiberd_client_reply_result(const FiberdClientReply *r);

/*
 * fiberd_client_reply_error - the error a response carries.
 * Return: 0 when it carries none (or @r is a notification); else its negative errno (as
 * fiberd_client_call()) with @err (may be NULL) holding the daemon's code and message.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_reply_error(const FiberdClientReply *r,
                                                   FiberdClientError *err);

/* ---- values -------------------------------------------------------------------------- */

/* fiberd_client_object_get - the value under string key @key in map @map; NULL when @map
 * is NULL or not a map, or the key is absent. Pure. */
FIBERD_CLIENT_EXPORT const msgpack_object *fiberd_client_object_get(const msgpack_object *map,
                                                                    const char *key);

/* ---- methods: queue one request (pipelining) ------------------------------------------ */

/*
 * fiberd_client_send_<method> - queue one request and give back its msgid (@ret_msgid);
 * wait for it with fiberd_client_call() or collect it with fiberd_client_receive().
 * @args (job.submit, job.run): the plugin's arguments packed as one msgpack map,
 * @args_len bytes (NULL/0: an empty map); -EINVAL when it is not exactly one map.
 * @opts: NULL for the daemon's defaults. @id: a job id. @wait_timeout_ms: how long the
 * daemon waits for the job before answering with a record not yet final (-1 = until it
 * ends). @cursor: 0 for the first (newest) page of job.list, then the result's
 * "next_cursor". Return: 0; -ENOMEM; -EINVAL.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_ping(FiberdClient *c, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_plugins(FiberdClient *c, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_stats(FiberdClient *c, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_submit(FiberdClient *c, const char *plugin,
                                                   const void *args, size_t args_len,
                                                   const FiberdClientJobOptions *opts,
                                                   uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_run(FiberdClient *c, const char *plugin,
                                                const void *args, size_t args_len,
                                                const FiberdClientJobOptions *opts,
                                                int64_t wait_timeout_ms, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_status(FiberdClient *c, uint64_t id,
                                                   uint32_t *ret_msgid);

/*
 * fiberd_client_send_run_fields, fiberd_client_send_wait_fields - job.run and job.wait
 * answering only the record keys in @fields (@n_fields names, such as "result" and
 * "error"; id and state always come; NULL with 0 = the whole record, as
 * fiberd_client_send_run() and _wait()): a program that pipelines many small jobs and
 * reads two keys of each answer saves the daemon packing, and itself decoding, the
 * other nineteen. The daemon refuses a name the record does not have with
 * INVALID_ARGUMENT (and queues nothing for job.run). Other arguments as above.
 * Return: 0; -ENOMEM; -EINVAL (a NULL name, or @fields NULL with @n_fields > 0).
 * A daemon older than `fields` answers the whole record. Context: the thread using @c.
 * Symbol version FIBERD_CLIENT_0.4.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_run_fields(FiberdClient *c, const char *plugin,
                                                       const void *args, size_t args_len,
                                                       const FiberdClientJobOptions *opts,
                                                       int64_t wait_timeout_ms,
                                                       const char *const *fields, size_t n_fields,
                                                       uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_wait_fields(FiberdClient *c, uint64_t id,
                                                        int64_t wait_timeout_ms,
                                                        const char *const *fields, size_t n_fields,
                                                        uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_wait(FiberdClient *c, uint64_t id,
                                                 int64_t wait_timeout_ms, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_result(FiberdClient *c, uint64_t id,
                                                   uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_cancel(FiberdClient *c, uint64_t id,
                                                   uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_send_list(FiberdClient *c,
                                                 const FiberdClientListFilter *filter,
                                                 uint64_t cursor, uint32_t *ret_msgid);

/* ---- methods: blocking ----------------------------------------------------------------- */

/*
 * The blocking form of each method: send, then fiberd_client_call() with @timeout_ms.
 * @ret: the reply whose result is the method's (fiberd-protocol(7) "Methods": ping's
 * {version, protocol, pid, uptime_ms}, plugins.list's {plugins, refused}, stats' map, a
 * job record for job.run/status/wait/cancel, job.result's value); the caller frees it.
 * Return: 0; the daemon's error (-ENOENT for a job that does not exist or is not yours,
 * -EINVAL for refused arguments, -EPERM, -EAGAIN when overloaded, ...); -ETIMEDOUT;
 * -ECONNRESET. Context: the thread using @c; blocks at most @timeout_ms.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_ping(FiberdClient *c, int timeout_ms,
                                            FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_plugins(FiberdClient *c, int timeout_ms,
                                               FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_stats(FiberdClient *c, int timeout_ms,
                                             FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_job_run(FiberdClient *c, const char *plugin,
                                               const void *args, size_t args_len,
                                               const FiberdClientJobOptions *opts,
                                               int64_t wait_timeout_ms, int timeout_ms,
                                               FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_job_status(FiberdClient *c, uint64_t id, int timeout_ms,
                                                  FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_job_wait(FiberdClient *c, uint64_t id,
                                                int64_t wait_timeout_ms, int timeout_ms,
                                                FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_job_result(FiberdClient *c, uint64_t id, int timeout_ms,
                                                  FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_job_cancel(FiberdClient *c, uint64_t id, int timeout_ms,
                                                  FiberdClientReply **ret, FiberdClientError *err);

/*
 * fiberd_client_submit - job.submit, blocking: the new job's id in *@ret_id (> 0).
 * Other parameters and errors as fiberd_client_send_submit() and the blocking forms.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_submit(FiberdClient *c, const char *plugin, const void *args,
                                              size_t args_len, const FiberdClientJobOptions *opts,
                                              int timeout_ms, uint64_t *ret_id,
                                              FiberdClientError *err);

/*
 * fiberd_client_list_page - one page of job.list, newest first: *@ret's result is
 * {jobs: [records], next_cursor}; *@ret_next_cursor is the cursor of the next page, 0 on
 * the last. Start with @cursor 0; loop while the returned cursor is not 0.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_list_page(FiberdClient *c,
                                                 const FiberdClientListFilter *filter,
                                                 uint64_t cursor, int timeout_ms,
                                                 FiberdClientReply **ret, uint64_t *ret_next_cursor,
                                                 FiberdClientError *err);

/* ---- job scheduling (FIBERD_CLIENT_0.2) ------------------------------------------- */

/*
 * The methods of fiberd-protocol(7)'s "Scheduling jobs", each as a send (queue it, give
 * back its msgid; pipelining) and a blocking call (send, then fiberd_client_call() with
 * @timeout_ms), as the methods above. A daemon older than these methods answers
 * METHOD_NOT_FOUND (-ENOSYS).
 *
 * fiberd_client_job_retry - job.retry: queue again each dead, failed or cancelled job of
 * @ids (@n_ids of them), or with @all (then @ids NULL, @n_ids 0) every dead job you may
 * see. All or none: an unknown id answers NOT_FOUND, one not final (or done)
 * FAILED_PRECONDITION, and none is retried. Result {retried: [ids]}.
 * fiberd_client_job_discard - job.discard: drop those final jobs' records now; the
 * same params. Result {discarded: [ids]}.
 * Return (send): 0; -EINVAL for neither or both of @ids and @all, more than
 * 2^32 - 1 ids; -ENOMEM.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_retry(FiberdClient *c, const uint64_t *ids,
                                                  size_t n_ids, bool all, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_job_retry(FiberdClient *c, const uint64_t *ids, size_t n_ids,
                                                 bool all, int timeout_ms, FiberdClientReply **ret,
                                                 FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_discard(FiberdClient *c, const uint64_t *ids,
                                                    size_t n_ids, bool all, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_job_discard(FiberdClient *c, const uint64_t *ids,
                                                   size_t n_ids, bool all, int timeout_ms,
                                                   FiberdClientReply **ret, FiberdClientError *err);

/*
 * fiberd_client_pause / fiberd_client_resume - pause / resume (admin tier): hold the
 * queued jobs of a class or a plugin (running ones finish), or let them go. @kind is
 * "class" or "plugin", @name its name. Result {kind, name, paused, queued}. Errors:
 * PERMISSION_DENIED (not an admin), INVALID_ARGUMENT (an unknown class).
 * Return (send): 0; -EINVAL for a NULL @kind or @name; -ENOMEM.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_pause(FiberdClient *c, const char *kind,
                                                  const char *name, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_pause(FiberdClient *c, const char *kind, const char *name,
                                             int timeout_ms, FiberdClientReply **ret,
                                             FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_resume(FiberdClient *c, const char *kind,
                                                   const char *name, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_resume(FiberdClient *c, const char *kind, const char *name,
                                              int timeout_ms, FiberdClientReply **ret,
                                              FiberdClientError *err);

/*
 * fiberd_client_schedule_add - schedule.add: submit @plugin with @args (one packed
 * msgpack map, @args_len bytes; NULL/0: {}) and @opts (NULL: none) as the caller at each
 * tick of @spec, under @name ([A-Za-z0-9_.-]{1,64}, unique per owner). The daemon checks
 * the submission now, as job.submit does. Result: the schedule, {name, owner, cron, tz,
 * every_ms, missed, plugin, args, options, paused, next_ms, last_ms, last_job}. Errors:
 * INVALID_ARGUMENT (a bad spec, naming the field), ALREADY_EXISTS (the name is taken).
 * fiberd_client_schedule_list - schedule.list: [schedule], yours (an admin's: everyone's).
 * fiberd_client_schedule_remove / _pause / _resume - schedule.remove, .pause, .resume of
 * the schedule @name; @owner >= 0 names another user's (admin), -1 the caller's. Result:
 * the schedule (remove: as it was); NOT_FOUND when there is none of that name.
 * Return (send): 0; -EINVAL for a NULL @name or @spec, a @spec with neither cron nor
 * every_ms, args that are not one map, @owner above UINT32_MAX; -ENOMEM.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_schedule_add(
        FiberdClient *c, const char *name, const FiberdClientScheduleSpec *spec, const char *plugin,
        const void *args, size_t args_len, const FiberdClientJobOptions *opts, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int
fiberd_client_schedule_add(FiberdClient *c, const char *name, const FiberdClientScheduleSpec *spec,
                           const char *plugin, const void *args, size_t args_len,
                           const FiberdClientJobOptions *opts, int timeout_ms,
                           FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_schedule_list(FiberdClient *c, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_schedule_list(FiberdClient *c, int timeout_ms,
                                                     FiberdClientReply **ret,
                                                     FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_schedule_remove(FiberdClient *c, const char *name,
                                                            int64_t owner, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_schedule_remove(FiberdClient *c, const char *name,
                                                       int64_t owner, int timeout_ms,
                                                       FiberdClientReply **ret,
                                                       FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_schedule_pause(FiberdClient *c, const char *name,
                                                           int64_t owner, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_schedule_pause(FiberdClient *c, const char *name,
                                                      int64_t owner, int timeout_ms,
                                                      FiberdClientReply **ret,
                                                      FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_send_schedule_resume(FiberdClient *c, const char *name,
                                                            int64_t owner, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_schedule_resume(FiberdClient *c, const char *name,
                                                       int64_t owner, int timeout_ms,
                                                       FiberdClientReply **ret,
                                                       FiberdClientError *err);

/* ---- job logs and metrics (FIBERD_CLIENT_0.3) -------------------------------------- */

/*
 * fiberd_client_job_logs - job.logs [id]: the lines job @id wrote with host->log, oldest
 * first. Result {id, lines: [{time_ms, level, text}], dropped, bytes}: time_ms the wall
 * clock (ms since the epoch), level a syslog priority (0 emerg .. 7 debug), text the
 * line with control characters escaped (\xNN); fiberd keeps the newest 64 lines, 8 KiB,
 * and counts in "dropped" those it let go. Only the job's owner and admins may read them
 * (another's job: NOT_FOUND, -ENOENT). A daemon without job.logs: METHOD_NOT_FOUND
 * (-ENOSYS). Context, blocking and errors as the methods above.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_job_logs(FiberdClient *c, uint64_t id,
                                                     uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_job_logs(FiberdClient *c, uint64_t id, int timeout_ms,
                                                FiberdClientReply **ret, FiberdClientError *err);

/* FiberdClientLogLine - one line of a job's log, as fiberd_client_job_logs_follow() hands
 * it to its callback. @text is owned by the library and valid during the call only. */
typedef struct FiberdClientLogLine {
        uint64_t time_ms; /* wall clock, ms since the epoch */
        int level;        /* syslog priority, 0 (emerg) .. 7 (debug) */
        const char *text; /* the line, escaped as fiberd sent it; not NUL-terminated */
        size_t text_len;  /* bytes of @text */
        uint64_t missed;  /* lines logged and let go just before this one, never seen
                           * (fiberd keeps 64: more were logged between two looks) */
} FiberdClientLogLine;

/* FiberdClientLogFn - called once per new line, in order. Return 0 to go on; any other
 * value stops the follow, which returns it. */
typedef int (*FiberdClientLogFn)(const FiberdClientLogLine *line, void *userdata);

/*
 * fiberd_client_job_logs_follow - `tail -f` of job @id's log (as `fiberctl logs -f`):
 * each line kept now, then each new one as it comes, to @fn(line, @userdata), until the
 * job is final. It alternates job.logs with job.wait [id, @poll_ms] (0: 250 ms), so a
 * line is seen at most @poll_ms late and a job that ends is seen at once; new lines are
 * told apart by fiberd's count of dropped ones (it numbers no line).
 * @ret_record: out (may be NULL), the job's final record, the caller frees it; written
 * only on success. @timeout_ms bounds the whole follow (-1: none).
 * Return: 0 once the job is final and its last lines are handed over; the non-zero value
 * @fn returned; -ETIMEDOUT; the errors of fiberd_client_job_logs() (-ENOENT: no such job
 * of yours; -ENOSYS: fiberd keeps no job logs). Context: the thread using @c; blocks.
 */
FIBERD_CLIENT_EXPORT int fiberd_client_job_logs_follow(FiberdClient *c, uint64_t id, int poll_ms,
                                                       FiberdClientLogFn fn, void *userdata,
                                                       int timeout_ms,
                                                       FiberdClientReply **ret_record,
                                                       FiberdClientError *err);

/*
 * fiberd_client_metrics - metrics [format]: fiberd's counters as text, the result a
 * msgpack string. @format NULL or "openmetrics": the OpenMetrics exposition (ends in
 * "# EOF"); "prometheus": Prometheus's text format 0.0.4 (what node_exporter's textfile
 * collector reads). Another format: INVALID_ARGUMENT (-EINVAL). The same numbers as
 * fiberd_client_stats()'s map (fiberd-protocol(7), "metrics").
 * fiberd_client_metrics_text - the same, as a NUL-terminated copy in *@ret_text (written
 * only on success; the caller free()s it).
 */
FIBERD_CLIENT_EXPORT int fiberd_client_send_metrics(FiberdClient *c, const char *format,
                                                    uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int fiberd_client_metrics(FiberdClient *c, const char *format, int timeout_ms,
                                               FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int fiberd_client_metrics_text(FiberdClient *c, const char *format,
                                                    int timeout_ms, char **ret_text,
                                                    FiberdClientError *err);

#ifdef __cplusplus
}
#endif

#endif /* FIBERD_CLIENT_PUBLIC_H */
