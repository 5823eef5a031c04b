/* SPDX-License-Identifier: MIT */
/*
 * server.c — accept fiber, reader fiber per connection, request fiber per request
 * (see server.h for the shape and the error rules).
 *
 * The listening socket comes from systemd when fiberd is socket-activated
 * (sd_listen_fds(3), the first passed fd) or is bound here. A stale socket file, left
 * by a fiberd that died, is detected by connecting to it (ECONNREFUSED: nobody listens)
 * and replaced; a socket someone answers on is left alone (-EADDRINUSE).
 *
 * Writes use fiber_write_all() with a deadline, so a client that stops reading cannot
 * hold a request fiber forever: when the deadline passes the connection is shut down.
 * SIGPIPE is ignored by main(), so writing to a closed peer is an -EPIPE here.
 */
#include "daemon/server.h"
#include "daemon/log.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* How long one response may take to leave before the connection is dropped. */
#define SERVER_WRITE_TIMEOUT_NS (30 * NSEC_PER_SEC)
/* Requests in flight on one connection before new ones get OVERLOADED. */
#define CONN_MAX_IN_FLIGHT 4096
/* How long a reader waits for a free fiber before answering OVERLOADED. */
#define CONN_FIBER_RETRY_NS (5 * NSEC_PER_SEC)
/* Bytes asked of the decoder per read. */
#define CONN_READ_CHUNK 65536

struct Server {
        int listen_fd;
        SchedulingGroup *group;
        size_t max_message; /* atomic */
        MethodLookupFn lookup;
        void *ctx;
        Fiber *accept_fiber; /* joinable */
        ServerStats stats;   /* atomic fields */
};

struct Conn {
        Server *server;
        int fd;
        int refs; /* atomic */
        uid_t uid;
        pid_t pid;
        bool closed;           /* atomic: shut down after an error */
        unsigned in_flight;    /* atomic */
        FiberMutex write_lock; /* one response on the wire at a time */
        IpcDecoder *decoder;   /* the reader fiber's */
};

#define STAT_ADD(s, field, n) __atomic_add_fetch(&(s)->stats.field, (n), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ listening --- */

static int listen_activated(int *ret_fd)
{
        int n = sd_listen_fds(1);
        int fd = SD_LISTEN_FDS_START;
        int flags;

        if (n <= 0)
                return n; /* 0: not activated; < 0: -errno */
        if (n > 1)
                log_msg(LOG_WARNING, "systemd passed %d sockets; using the first", n);
        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
                log_msg(LOG_ERR, "the socket systemd passed is not a listening Unix stream "
                                 "socket; check ListenStream= in fiberd.socket");
                return -ENOTSOCK;
        }
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        *ret_fd = fd;
        return 1;
}

/* True when something accepts connections on @addr. */
static bool socket_alive(const struct sockaddr_un *addr)
{
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool alive;

        if (fd < 0)
                return true; /* cannot tell: do not delete it */
        alive = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0 ||
                errno != ECONNREFUSED;
        close(fd);
        return alive;
}

int server_listen(const char *path, int *ret_fd, bool *ret_activated)
{
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        int fd, r;

        r = listen_activated(&fd);
        if (r < 0)
                return r;
        if (r > 0) {
                *ret_fd = fd;
                *ret_activated = true;
                return 0;
        }
        if (strlen(path) >= sizeof(addr.sun_path)) {
                log_msg(LOG_ERR, "socket path %s is longer than %zu bytes", path,
                        sizeof(addr.sun_path) - 1);
                return -ENAMETOOLONG;
        }
        strcpy(addr.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                r = -errno;
                if (r != -EADDRINUSE)
                        goto out_close;
                if (socket_alive(&addr)) {
                        log_msg(LOG_ERR, "%s: another fiberd is already listening there", path);
                        goto out_close;
                }
                log_msg(LOG_NOTICE, "%s: replacing a stale socket", path);
                unlink(path);
                if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
                        r = -errno;
                        goto out_close;
                }
        }
        /* Any local user may connect; each job is bound to its owner's uid. */
        chmod(path, 0666);
        if (listen(fd, SOMAXCONN) < 0) {
                r = -errno;
                goto out_unlink;
        }
        *ret_fd = fd;
        *ret_activated = false;
        return 0;

out_unlink:
        unlink(path);
out_close:
        close(fd);
        return r;
}

/* ------------------------------------------------------------------ conns ------- */

static Conn *conn_ref(Conn *c)
{
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
        return c;
}

static Conn *conn_unref(Conn *c)
{
        if (!c || __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return NULL;
        close(c->fd);
        ipc_decoder_free(c->decoder);
        STAT_ADD(c->server, connections, -1);
        free(c);
        return NULL;
}

static void conn_shutdown(Conn *c)
{
        if (!__atomic_exchange_n(&c->closed, true, __ATOMIC_ACQ_REL))
                shutdown(c->fd, SHUT_RDWR);
}

bool request_conn_closed(const Request *req)
{
        return __atomic_load_n(&req->conn->closed, __ATOMIC_ACQUIRE);
}

/* Writes one whole message. Context: fiber of the server group; parks. */
static int conn_send(Conn *c, const void *data, size_t len)
{
        ssize_t w;
        int r;

        r = fiber_mutex_lock(&c->write_lock);
        if (r < 0)
                return r;
        if (__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE)) {
                fiber_mutex_unlock(&c->write_lock);
                return -EPIPE;
        }
        w = fiber_write_all(c->fd, data, len, sched_deadline_after(SERVER_WRITE_TIMEOUT_NS));
        fiber_mutex_unlock(&c->write_lock);
        if (w < 0) {
                if (w == -ETIMEDOUT)
                        log_msg(LOG_NOTICE,
                                "client uid %u pid %d does not read its responses; "
                                "closing its connection",
                                (unsigned)c->uid, (int)c->pid);
                conn_shutdown(c);
                return (int)w;
        }
        return 0;
}

/* Sends an error response with a printf-style message. */
static void conn_send_error(Conn *c, uint32_t msgid, const char *code, const char *text)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (ipc_pack_error_response(&pk, msgid, code, "%s", text) == 0)
                conn_send(c, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
}

/* Sends [2, "connection.error", [{code, message}]] (no msgid to answer to). */
static void conn_send_notice(Conn *c, const char *code, const char *text)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (ipc_pack_notification_begin(&pk, IPC_NOTIFY_CONNECTION_ERROR, 1) == 0 &&
            ipc_pack_error_map(&pk, code, text) == 0)
                conn_send(c, sb.data, sb.size);
        msgpack_sbuffer_destroy(&sb);
}

/* ------------------------------------------------------------------ requests ---- */

static void request_main(void *arg)
{
        Request *req = arg;
        Server *s = req->server;
        Conn *c = req->conn;
        MethodFn fn = s->lookup(req->msg.method, req->msg.method_len);
        IpcStatus st = {0};
        msgpack_sbuffer result, out;
        msgpack_packer pk;
        int r;

        msgpack_sbuffer_init(&result);
        msgpack_sbuffer_init(&out);
        msgpack_packer_init(&pk, &result, msgpack_sbuffer_write);
        if (!fn) {
                r = ipc_status_set(&st, IPC_METHOD_NOT_FOUND, -ENOSYS,
                                   "no method '%s'; see PROTOCOL.md for the method list",
                                   req->msg.method);
        } else {
                r = fn(s->ctx, req, &pk, &st);
                if (r < 0 && !ipc_status_failed(&st))
                        ipc_status_errno(&st, r, NULL);
                if (r >= 0 && result.size == 0)
                        r = msgpack_pack_nil(&pk) ? -ENOMEM : 0;
        }
        msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
        if (r < 0 || ipc_status_failed(&st)) {
                r = ipc_pack_status_response(&pk, req->msg.msgid, &st);
        } else {
                r = ipc_pack_response_begin(&pk, req->msg.msgid);
                if (r == 0 && msgpack_sbuffer_write(&out, result.data, result.size) != 0)
                        r = -ENOMEM;
        }
        if (r < 0) {
                msgpack_sbuffer_clear(&out);
                ipc_pack_error_response(&pk, req->msg.msgid, IPC_OUT_OF_MEMORY,
                                        "fiberd ran out of memory building the response");
        }
        conn_send(c, out.data, out.size);

        msgpack_sbuffer_destroy(&out);
        msgpack_sbuffer_destroy(&result);
        ipc_message_clear(&req->msg);
        free(req);
        __atomic_sub_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
        STAT_ADD(s, in_flight, -1);
        conn_unref(c);
}

/* Starts a request fiber for @msg (taken over). Context: the connection's reader. */
static void conn_dispatch(Conn *c, IpcMessage *msg)
{
        Server *s = c->server;
        FiberAttr attr = {.group = s->group, .detached = true};
        Request *req;
        int r;

        if (msg->type != IPC_REQUEST) {
                ipc_message_clear(msg); /* responses and notifications: nothing to answer */
                return;
        }
        STAT_ADD(s, requests, 1);
        if (__atomic_load_n(&c->in_flight, __ATOMIC_RELAXED) >= CONN_MAX_IN_FLIGHT) {
                conn_send_error(c, msg->msgid, IPC_OVERLOADED,
                                "too many requests in flight on this connection; wait for "
                                "some responses first");
                ipc_message_clear(msg);
                return;
        }
        req = calloc(1, sizeof(*req));
        if (!req) {
                conn_send_error(c, msg->msgid, IPC_OUT_OF_MEMORY, "fiberd is out of memory");
                ipc_message_clear(msg);
                return;
        }
        req->server = s;
        req->conn = conn_ref(c);
        req->uid = c->uid;
        req->pid = c->pid;
        req->msg = *msg;
        memset(msg, 0, sizeof(*msg));
        __atomic_add_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
        STAT_ADD(s, in_flight, 1);
        /*
         * No fiber left in the group: stop reading this connection (the client's writes
         * back up, which is the backpressure) and retry for a while before refusing.
         */
        for (uint64_t deadline = 0;;) {
                r = fiber_create(NULL, &attr, request_main, req);
                if (r != -EAGAIN)
                        break;
                if (!deadline)
                        deadline = sched_deadline_after(CONN_FIBER_RETRY_NS);
                if (sched_now_ns() >= deadline || fiber_sleep_for(NSEC_PER_MSEC) < 0)
                        break;
        }
        if (r < 0) {
                conn_send_error(c, req->msg.msgid, IPC_OVERLOADED,
                                "fiberd has no fiber left for this request; retry later");
                ipc_message_clear(&req->msg);
                free(req);
                __atomic_sub_fetch(&c->in_flight, 1, __ATOMIC_RELAXED);
                STAT_ADD(s, in_flight, -1);
                conn_unref(c);
        }
}

/* Answers a decoder error; returns true when the connection must close. */
static bool conn_protocol_error(Conn *c, int err)
{
        uint32_t msgid;
        bool fatal = err != -EPROTO;
        const char *code = err == -EMSGSIZE ? IPC_MESSAGE_TOO_LARGE
                           : err == -ENOMEM ? IPC_OUT_OF_MEMORY
                                            : IPC_MALFORMED_MESSAGE;
        const char *text = ipc_decoder_error_text(c->decoder);

        STAT_ADD(c->server, protocol_errors, 1);
        log_msg(LOG_NOTICE, "client uid %u pid %d: %s%s", (unsigned)c->uid, (int)c->pid,
                text && *text ? text : strerror(-err), fatal ? "; closing its connection" : "");
        /* never silence: without a msgid to answer, a connection.error notification */
        if (ipc_decoder_error_msgid(c->decoder, &msgid))
                conn_send_error(c, msgid, code, text && *text ? text : strerror(-err));
        else
                conn_send_notice(c, code, text && *text ? text : strerror(-err));
        return fatal;
}

static void conn_reader(void *arg)
{
        Conn *c = arg;
        bool fatal = false;

        while (!fatal) {
                IpcMessage msg;
                void *buf;
                size_t len;
                ssize_t n;
                int r = ipc_decoder_reserve(c->decoder, CONN_READ_CHUNK, &buf, &len);

                if (r < 0) {
                        fatal = conn_protocol_error(c, r);
                        break;
                }
                n = fiber_read(c->fd, buf, len, SCHED_FOREVER);
                if (n <= 0)
                        break; /* end of stream, reset, or cancelled */
                ipc_decoder_commit(c->decoder, (size_t)n);
                while ((r = ipc_decoder_next(c->decoder, &msg)) != 0) {
                        if (r == 1) {
                                conn_dispatch(c, &msg);
                                continue;
                        }
                        if (conn_protocol_error(c, r)) {
                                fatal = true;
                                break;
                        }
                }
        }
        if (fatal)
                conn_shutdown(c);
        conn_unref(c);
}

/* ------------------------------------------------------------------ accepting --- */

static void server_accept_loop(void *arg)
{
        Server *s = arg;

        for (;;) {
                FiberAttr attr = {.group = s->group, .detached = true};
                struct ucred cred = {0};
                socklen_t clen = sizeof(cred);
                Conn *c;
                int fd = fiber_accept(s->listen_fd, SCHED_FOREVER);

                if (fd == -ECANCELED)
                        return;
                if (fd < 0) {
                        log_msg(LOG_WARNING, "accept: %s", strerror(-fd));
                        /* EMFILE and friends: give the fds a moment to come back */
                        if (fiber_sleep_for(100 * NSEC_PER_MSEC) == -ECANCELED)
                                return;
                        continue;
                }
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) < 0) {
                        close(fd);
                        continue;
                }
                c = calloc(1, sizeof(*c));
                if (!c || ipc_decoder_new(&c->decoder,
                                          __atomic_load_n(&s->max_message, __ATOMIC_RELAXED)) < 0) {
                        free(c);
                        close(fd);
                        continue;
                }
                c->server = s;
                c->fd = fd;
                c->refs = 1;
                c->uid = cred.uid;
                c->pid = cred.pid;
                fiber_mutex_init(&c->write_lock);
                STAT_ADD(s, connections, 1);
                STAT_ADD(s, accepted, 1);
                if (fiber_create(NULL, &attr, conn_reader, c) < 0) {
                        log_msg(LOG_WARNING, "no fiber for a new connection; closing it");
                        conn_unref(c);
                }
        }
}

int server_new(Server **ret, int listen_fd, SchedulingGroup *group, size_t max_message,
               MethodLookupFn lookup, void *ctx)
{
        Server *s = calloc(1, sizeof(*s));

        if (!s)
                return -ENOMEM;
        s->listen_fd = listen_fd;
        s->group = group;
        s->max_message = max_message;
        s->lookup = lookup;
        s->ctx = ctx;
        *ret = s;
        return 0;
}

int server_start(Server *s)
{
        FiberAttr attr = {.group = s->group, .tag = "accept"};

        return fiber_create(&s->accept_fiber, &attr, server_accept_loop, s);
}

void server_stop_accepting(Server *s)
{
        if (s->accept_fiber) {
                fiber_cancel(s->accept_fiber);
                fiber_join(s->accept_fiber);
                s->accept_fiber = NULL;
        }
        if (s->listen_fd >= 0) {
                close(s->listen_fd);
                s->listen_fd = -1;
        }
}

int server_drain(Server *s, uint64_t deadline_ns)
{
        while (__atomic_load_n(&s->stats.in_flight, __ATOMIC_RELAXED) > 0) {
                if (sched_now_ns() >= deadline_ns)
                        return -ETIMEDOUT;
                fiber_sleep_for(5 * NSEC_PER_MSEC);
        }
        return 0;
}

void server_set_max_message(Server *s, size_t max_message)
{
        __atomic_store_n(&s->max_message, max_message, __ATOMIC_RELAXED);
}

void server_stats(const Server *s, ServerStats *ret)
{
        ret->connections = __atomic_load_n(&s->stats.connections, __ATOMIC_RELAXED);
        ret->accepted = __atomic_load_n(&s->stats.accepted, __ATOMIC_RELAXED);
        ret->requests = __atomic_load_n(&s->stats.requests, __ATOMIC_RELAXED);
        ret->in_flight = __atomic_load_n(&s->stats.in_flight, __ATOMIC_RELAXED);
        ret->protocol_errors = __atomic_load_n(&s->stats.protocol_errors, __ATOMIC_RELAXED);
}

Server *server_free(Server *s)
{
        if (!s)
                return NULL;
        if (s->listen_fd >= 0)
                close(s->listen_fd);
        free(s);
        return NULL;
}
