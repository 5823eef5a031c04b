/* SPDX-License-Identifier: MIT */
/*
 * server.h — the MessagePack-RPC server on fiberd's Unix socket.
 *
 * Fibers, all on the server scheduling group:
 *  - one accept fiber: fiber_accept() on the listening socket, one Conn per client,
 *    the peer's uid from SO_PEERCRED;
 *  - one reader fiber per connection: reads into the connection's IpcDecoder
 *    (ipc/decoder.h) and, for every whole request, starts a request fiber;
 *  - one request fiber per request: runs the method (methods.c) and writes the response.
 *    A long job.wait parks only its own fiber, so other requests on the same connection
 *    and on other connections go on; responses may leave out of order, which
 *    MessagePack-RPC allows (the msgid pairs them). A request the server's
 *    RequestInlineFn says cannot park runs on the reader instead (server_set_inline()),
 *    which saves the fiber's create, switches and run-queue round trip; an answer it
 *    gives at once goes to a flusher fiber, so the reader never writes. A method may instead leave its
 *    answer for later (request_defer()): its fiber ends, and the answer is given from
 *    another fiber, written by a flusher fiber of the connection.
 * Responses are written whole under the connection's FiberMutex, so two request fibers
 * never interleave bytes. A message over the size cap, or bytes that are not msgpack,
 * get an error response when the msgid could be read, then that connection (only) is
 * closed; a msgpack value that is not an RPC request gets MALFORMED_MESSAGE and the
 * connection stays open (ipc/decoder.h explains which errors are recoverable).
 *
 * A Conn is reference counted: the reader holds one, every request one; the fd
 * is closed when the last goes.
 *
 * Credentials and fds: the peer's uid, gid and groups are read once at accept
 * (creds.h) and every request carries them. The reader receives with recvmsg(2), so
 * fds a client sends as SCM_RIGHTS are queued on the connection in arrival order; each
 * request takes as many from the front as its params refer to (ipc_object_fds_needed():
 * PROTOCOL.md, "Passing files"), and a request that refers to more than were sent gets
 * INVALID_ARGUMENT. Fds nobody claims are closed with the connection.
 */
#ifndef FIBERD_DAEMON_SERVER_H
#define FIBERD_DAEMON_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "daemon/server/creds.h"
#include "ipc/decoder.h"
#include "ipc/status.h"
#include "scheduler/sched.h"

typedef struct Server Server;
typedef struct Conn Conn;

/* One request, handed to a method (methods.h). */
typedef struct Request {
        Server *server;
        Conn *conn;
        uid_t uid; /* the client's uid (SO_PEERCRED) */
        pid_t pid;
        Creds *creds; /* the client's uid, gid and groups: the connection's, referenced */
        int *fds;     /* owned: the fds sent with this request (SCM_RIGHTS), in order; a
                         * method may take the array (set it NULL); closed with the request */
        size_t n_fds;
        IpcMessage msg; /* owned: params live in msg.zone, and so does the Request
                         * itself (freed with it) */
        bool deferred;  /* request_defer() was called: the answer is given later */
} Request;

/*
 * A method: packs exactly one result object into @result and returns 0, or fills @st
 * and returns a negative errno (then nothing it packed is sent). May yield (it runs
 * in its own fiber). @ctx is what server_new() was given.
 */
typedef int (*MethodFn)(void *ctx, Request *req, msgpack_packer *result, IpcStatus *st);

/* Looks up the method for @name (@len bytes); NULL = METHOD_NOT_FOUND. */
typedef MethodFn (*MethodLookupFn)(const char *name, size_t len);

/*
 * server_listen - the listening socket: the one systemd passed (sd_listen_fds(), named
 * "fiberd" or unnamed: listenfds.h; it must be a Unix stream socket), else a new one
 * bound at @path (a stale socket file left by a dead fiberd is replaced; a live one is
 * an error: -EADDRINUSE).
 * @ret_fd: out, non-blocking, written only on success. @ret_activated: true when it
 * came from systemd (then fiberd does not unlink it at exit).
 * Return: 0; -errno. Context: main thread at start-up.
 */
int server_listen(const char *path, int *ret_fd, bool *ret_activated);

/*
 * server_new - a server on @listen_fd (taken over), running its fibers on @group.
 * @max_message: request size cap, bytes. @lookup: the method table; @ctx its argument.
 * @ret: out, written only on success. Return: 0; -ENOMEM.
 * Context: main thread. The server lives until the process exits: its connection fibers
 * may still run then (daemon_shutdown() in main.c), so there is no server_free().
 */
int server_new(Server **ret, int listen_fd, SchedulingGroup *group, size_t max_message,
               MethodLookupFn lookup, void *ctx);

/* server_start - start the accept fiber. Return: 0; -errno from fiber_create. */
int server_start(Server *s);

/*
 * server_stop_accepting - cancel the accept fiber, join it and close the listening
 * socket (existing connections stay open). Context: any thread outside the server
 * group's fibers it joins (the main thread); may block.
 */
void server_stop_accepting(Server *s);

/*
 * server_drain - wait until no request is in flight or @deadline_ns passes.
 * Return: 0; -ETIMEDOUT. Context: main thread or any fiber; parks/blocks.
 */
int server_drain(Server *s, uint64_t deadline_ns);

/*
 * RequestInlineFn - whether @req may run on its connection's reader fiber instead of a
 * request fiber of its own: true only for a call that does not park in its normal course
 * (its answer is given at once, or left for later with request_defer()), because the
 * reader reads nothing more from that connection until it returns. @ctx is server_new()'s. Context: the
 * reader fiber; must not park.
 */
typedef bool (*RequestInlineFn)(void *ctx, const Request *req);

/*
 * server_set_inline - the requests that run inline (RequestInlineFn); NULL (the default):
 * none. A request run inline costs no fiber create, no switch to it and back, and no
 * run-queue round trip; an answer it gives at once is queued and handed to a flusher
 * fiber at once (never held back, since the reader may next park for the very request
 * slots that answer gives back, and never written by the reader, which goes on reading
 * while a slow client takes its answers). Context: main thread, before server_start().
 */
void server_set_inline(Server *s, RequestInlineFn run_inline);

/* server_set_max_message - new cap for connections accepted from now on (SIGHUP). */
void server_set_max_message(Server *s, size_t max_message);

/*
 * What one client may hold of the server, so that exhausting it is a clear error for
 * the one who tries and never a lock-out for the others (the [ipc] keys of config.h).
 * Over a connection limit, a new connection gets the notification
 * [2, "connection.error", [{code: OVERLOADED, message}]] and is closed; root may exceed
 * max_connections by SERVER_ROOT_RESERVE so an admin can still get in, and has no
 * per-user limit. server_set_limits() applies max_in_flight_per_user at once (a cut
 * takes back slots as answers leave); the other per-connection limits apply to
 * connections accepted afterwards.
 */
typedef struct ServerLimits {
        unsigned max_connections;          /* open at once; 0 = server_auto_max_connections() */
        unsigned max_connections_per_user; /* open at once by one uid */
        /* requests per connection being handled; at the limit the connection is not read
         * until one is answered (backpressure: no fiber is pinned by the excess) */
        unsigned max_in_flight;
        /* the same over all connections of one uid (root exempt): at the limit none of
         * them is read until one of its answers has left */
        unsigned max_in_flight_per_user;
        /* bytes of incomplete messages over all connections; a connection that would go
         * past it (holding more than one read's worth) is closed with OVERLOADED */
        size_t max_partial_bytes;
        /* a message begun must be whole within this, ns; else DEADLINE_EXCEEDED and the
         * connection is closed */
        uint64_t read_timeout_ns;
} ServerLimits;

#define SERVER_ROOT_RESERVE 4

/*
 * server_auto_max_connections - the default max_connections: half of what the soft
 * RLIMIT_NOFILE leaves after 64 fds kept for the daemon and its jobs, at least 8.
 * Context: any.
 */
unsigned server_auto_max_connections(void);

/*
 * server_set_limits - @limits for what happens from now on (new connections take the
 * per-connection ones; SIGHUP calls it again). A 0 max_connections means
 * server_auto_max_connections(). Context: any thread or fiber; does not yield.
 */
void server_set_limits(Server *s, const ServerLimits *limits);

/* Counters for the stats endpoint. Context: any. */
typedef struct ServerStats {
        uint64_t connections;     /* open now */
        uint64_t accepted;        /* since start */
        uint64_t requests;        /* since start */
        uint64_t requests_inline; /* since start: run on their connection's reader, without
                                   * a fiber of their own (server_set_inline()) */
        uint64_t in_flight;       /* requests being handled now */
        uint64_t protocol_errors; /* malformed, oversized or non-msgpack input */
        uint64_t refused;         /* connections refused by a ServerLimits limit or no fd */
        uint64_t partial_bytes;   /* bytes of incomplete messages held now */
        uint64_t answer_writes;   /* since start: writes that carried answers to requests
                                   * (requests / answer_writes = answers per write) */
        uint64_t user_throttled;  /* since start: requests a connection's reader held back
                                   * because its uid had max_in_flight_per_user in flight */
} ServerStats;
void server_stats(const Server *s, ServerStats *ret);

/* request_conn_closed - true once @req's connection is gone (a waiting method gives up). */
bool request_conn_closed(const Request *req);

/*
 * An answer a method leaves for later, so that a request that waits holds no fiber
 * (brpc's asynchronous service and its `done` closure). The method calls
 * request_defer(), packs nothing and returns 0; its request fiber ends at once. Whoever
 * holds the RequestDeferred answers it exactly once with request_deferred_answer().
 * Until then the request keeps its slot (max_in_flight, per connection and per uid) and
 * counts in ServerStats.in_flight, so backpressure and server_drain() see it as before.
 */
typedef struct RequestDeferred {
        Conn *conn;     /* referenced (server.c's) */
        uint32_t msgid; /* the request's */
} RequestDeferred;

/*
 * request_defer - leave @req's answer for later (above), in @d (the caller's memory, kept
 * until request_deferred_answer()): a reference to the connection and the msgid; nothing
 * else of @req outlives its fiber. Context: the request's own fiber, inside its method;
 * at most once per request. Cannot fail.
 */
void request_defer(Request *req, RequestDeferred *d);

/* A deferred answer's result: packs one object into @result and returns 0, or fills
 * @st and returns a negative errno (MethodFn's rules). Must not yield. */
typedef int (*AnswerPackFn)(void *ctx, msgpack_packer *result, IpcStatus *st);

/*
 * request_deferred_answer - answer the request behind @d with what @pack packs (called
 * at once, with @ctx); @d is the caller's again (free to reuse) on return. The answer joins the connection's write queue: when
 * no write is under way a flusher fiber is started for it (or, when no fiber can be
 * created, the server's own flusher fiber takes the connection), so the caller never
 * waits on a client that does not read (a flusher whose write times out shuts that
 * connection down, as any answer's write). A connection shut down meanwhile drops the
 * answer and gives the slot back. Context: any fiber of the server group; does not park.
 */
void request_deferred_answer(RequestDeferred *d, AnswerPackFn pack, void *ctx);

#endif
