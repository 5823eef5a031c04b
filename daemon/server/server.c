/* SPDX-License-Identifier: MIT */
/*
 * server.c — accept fiber, reader fiber per connection, request fiber per request (or
 * the reader itself, for a request that cannot park: server_set_inline()); see
 * server.h for the shape and the error rules.
 *
 * The listening socket comes from systemd when fiberd is socket-activated
 * (sd_listen_fds(3): the fd named "fiberd", or an unnamed one: listenfds.h) or is
 * bound here. A stale socket file, left
 * by a fiberd that died, is detected by connecting to it (ECONNREFUSED: nobody listens)
 * and replaced; a socket someone answers on is left alone (-EADDRINUSE).
 *
 * Writes use fiber_write_all() with a deadline, so a client that stops reading cannot
 * hold a request fiber forever: when the deadline passes the connection is shut down.
 * SIGPIPE is ignored by main(), so writing to a closed peer is an -EPIPE here.
 *
 * Resource limits (ServerLimits, server.h), each a clear error for the client that hits
 * it and never a lock-out for the others:
 *  - connections in all and per uid: counted at accept; over a limit the new connection
 *    gets a connection.error notification OVERLOADED (sent without blocking) and is
 *    closed. Root has SERVER_ROOT_RESERVE more in all and no per-uid limit (it is the
 *    admin; other users cannot exhaust what it needs).
 *  - requests in flight per connection: a FiberSemaphore of max_in_flight slots. The
 *    reader takes one per request before starting its fiber (or running it inline) and
 *    the request gives it back once its answer has left, so a client that pipelines
 *    without reading its answers is simply not read any more (its writes back up:
 *    backpressure) and holds at most max_in_flight fibers (or answers left for later:
 *    request_defer(), which keep their slot).
 *  - requests in flight per uid over all its connections: a second FiberSemaphore, of
 *    max_in_flight_per_user slots, in the uid's UserConns, taken after the
 *    connection's. At the limit every reader of that uid parks (the same backpressure),
 *    so one user's many connections hold at most that many server fibers, whatever
 *    max_in_flight is. Root is exempt. A reload resizes it at once: a raise posts the
 *    difference, a cut takes back the slots free now and the rest as answers leave
 *    (UserConns.owed).
 *  - incomplete messages: the bytes every connection's decoder holds of a message not
 *    yet whole are summed; a connection holding more than one read's worth when the sum
 *    is over max_partial_bytes is closed (OVERLOADED).
 *  - a message begun must be whole within read_timeout_ns (one byte a second does not
 *    keep a connection); an idle connection between messages waits as long as it likes.
 *  - accept() failing with EMFILE/ENFILE: one log line when it starts and one when it
 *    ends (at most one pair a minute), backing off from 10 ms to 1 s meanwhile; a spare fd kept open (nginx's and
 *    libev's trick) is closed for a moment to accept the waiting client and tell it
 *    OVERLOADED instead of leaving it hanging in the backlog.
 */
#include "daemon/server/server.h"
#include "daemon/obs/log.h"
#include "daemon/server/listenfds.h"
#include "ipc/encoder.h"
#include "ipc/packbuf.h"
#include "ipc/protocol.h"
#include "ipc/value.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/epoll.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* How long one response may take to leave before the connection is dropped. */
#define SERVER_WRITE_TIMEOUT_NS (30 * NSEC_PER_SEC)
/* fds RLIMIT_NOFILE keeps for the daemon and its jobs before connections get half. */
#define SERVER_FDS_KEPT 64
/* Accept back-off while fds are exhausted. */
#define ACCEPT_BACKOFF_MIN_NS (10 * NSEC_PER_MSEC)
#define ACCEPT_BACKOFF_MAX_NS NSEC_PER_SEC
/* How long a reader waits for a free fiber before answering OVERLOADED. */
#define CONN_FIBER_RETRY_NS (5 * NSEC_PER_SEC)
/* Yields a flushing request fiber makes at most while more answers keep joining. */
#define CONN_GATHER_ROUNDS 16
/* Bytes asked of the decoder per read. */
#define CONN_READ_CHUNK 65536

/* Connections open by one uid, and its request slots over all of them. Allocated
 * apart (Server.users holds pointers), so a Conn may keep a pointer while the array
 * grows; freed with the uid's last connection, after every slot came back. */
typedef struct UserConns {
        uid_t uid;
        unsigned n;           /* connections open; under Server.lock */
        unsigned limit;       /* max_in_flight_per_user the slots were sized for; lock */
        unsigned owed;        /* atomic: slots a lowered limit takes back as they return */
        FiberSemaphore slots; /* free request slots of the uid (not used for root) */
} UserConns;

struct Server {
        int listen_fd;
        int spare_fd; /* /dev/null, closed to accept one client when fds run out; -1 */
        SchedulingGroup *group;
        size_t max_message; /* atomic */
        MethodLookupFn lookup;
        void *ctx;
        RequestInlineFn run_inline; /* NULL: every request gets a fiber */
        Fiber *accept_fiber;        /* joinable */
        ServerStats stats;          /* atomic fields */

        pthread_mutex_t lock; /* guards limits, users[] and flush_pending; never held
                               * across a switch */
        ServerLimits limits;  /* max_connections resolved (never 0) */
        UserConns **users;    /* uids with a connection open; unordered */
        size_t n_users, cap_users;
        uint64_t refused_logged_ns; /* when a connection refusal was last logged */
        Conn *flush_pending;        /* under lock: connections server_flusher() flushes */
        FiberSemaphore flush_wake;  /* one post per connection put there */
};

struct Conn {
        Server *server;
        int fd;
        int refs; /* atomic */
        uid_t uid;
        pid_t pid;
        Creds *creds;                /* referenced; shared with every request */
        UserConns *user;             /* its request slots too; NULL for root (exempt) */
        int fds[IPC_FDS_QUEUED_MAX]; /* received, not yet claimed by a request: the
                                      * reader fiber's, oldest first */
        size_t n_fds;
        bool closed;               /* atomic: shut down after an error */
        FiberSemaphore slots;      /* free request slots (max_in_flight at accept) */
        FiberMutex write_lock;     /* one write on the wire at a time */
        pthread_mutex_t out_lock;  /* guards out, out_count, flushing; never held across
                                   * a switch */
        msgpack_sbuffer out;       /* answers queued for the next write */
        msgpack_sbuffer out_spare; /* the flusher's: the buffer it last wrote, emptied */
        unsigned out_count;        /* answers in out, each holding a request slot */
        bool flushing;             /* a fiber is writing out (a request's, a deferred
                                    * answer's flusher): append and leave */
        Conn *flush_next;          /* in Server.flush_pending (its reference) */
        IpcDecoder *decoder;       /* the reader fiber's */
        size_t partial;            /* reader's: bytes counted in stats.partial_bytes */
        uint64_t partial_since;    /* reader's: when the incomplete message began; 0 = none */
        size_t max_partial;        /* reader's copies of the limits at accept */
        uint64_t read_timeout_ns;
};

#define STAT_ADD(s, field, n) __atomic_add_fetch(&(s)->stats.field, (n), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------ listening --- */

static int listen_activated(int *ret_fd)
{
        int fd = listenfds_take_rpc();
        int flags;

        if (fd == -ENOENT)
                return 0; /* not activated */
        if (fd < 0)
                return fd;
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
        int fd = -1, r;

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

/* ------------------------------------------------------------------ limits ------ */

unsigned server_auto_max_connections(void)
{
        struct rlimit rl;
        rlim_t n;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return 4096;
        n = rl.rlim_cur > SERVER_FDS_KEPT ? (rl.rlim_cur - SERVER_FDS_KEPT) / 2 : 0;
        return n < 8 ? 8 : n > 1000000 ? 1000000 : (unsigned)n;
}

/* Gives back @n of @u's request slots, less what a lowered limit still takes back.
 * Context: any thread holding a reference to a connection of @u; or under s->lock. */
static void user_slots_put(UserConns *u, unsigned n)
{
        unsigned owed = __atomic_load_n(&u->owed, __ATOMIC_RELAXED);

        while (UNLIKELY(owed)) {
                unsigned take = MIN(owed, n);
                if (__atomic_compare_exchange_n(&u->owed, &owed, owed - take, false,
                                                __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                        n -= take;
                        break;
                }
        }
        if (n)
                fiber_sem_post(&u->slots, n);
}

/* Resizes @u's slots from u->limit to @limit: a raise posts the difference (first
 * cancelling what a cut still owed), a cut takes back the free slots and owes the rest.
 * free + held - owed is the limit throughout, whatever answers leave meanwhile. Under
 * s->lock. */
static void user_slots_resize(UserConns *u, unsigned limit)
{
        if (limit > u->limit) {
                user_slots_put(u, limit - u->limit); /* as answers leaving would */
        } else {
                unsigned cut = u->limit - limit;

                while (cut && fiber_sem_trywait(&u->slots))
                        cut--;
                if (cut)
                        __atomic_add_fetch(&u->owed, cut, __ATOMIC_RELAXED);
        }
        u->limit = limit;
}

void server_set_limits(Server *s, const ServerLimits *limits)
{
        pthread_mutex_lock(&s->lock);
        s->limits = *limits;
        if (!s->limits.max_connections)
                s->limits.max_connections = server_auto_max_connections();
        for (size_t i = 0; i < s->n_users; i++)
                if (s->users[i]->limit != s->limits.max_in_flight_per_user)
                        user_slots_resize(s->users[i], s->limits.max_in_flight_per_user);
        pthread_mutex_unlock(&s->lock);
}

/*
 * Counts a new connection of @uid against the connection limits. Returns NULL when it
 * may stay, else the sentence telling the client which limit it hit (static text).
 * @ret_limits: out, the limits in force (for the connection's own ones). @ret_user:
 * out, the uid's entry (its request slots), valid until server_user_put().
 */
static const char *server_user_get(Server *s, uid_t uid, ServerLimits *ret_limits,
                                   UserConns **ret_user)
{
        uint64_t open = __atomic_load_n(&s->stats.connections, __ATOMIC_RELAXED);
        const char *why = NULL;
        UserConns *u = NULL;

        pthread_mutex_lock(&s->lock);
        *ret_limits = s->limits;
        for (size_t i = 0; i < s->n_users; i++)
                if (s->users[i]->uid == uid)
                        u = s->users[i];
        if (open >= s->limits.max_connections + (uid == 0 ? SERVER_ROOT_RESERVE : 0)) {
                why = "fiberd has max_connections connections open; retry later";
        } else if (u && uid != 0 && u->n >= s->limits.max_connections_per_user) {
                why = "this user has max_connections_per_user connections open to fiberd; "
                      "close some first";
        } else if (!u) {
                if (s->n_users == s->cap_users) {
                        size_t cap = s->cap_users ? 2 * s->cap_users : 16;
                        UserConns **n = realloc(s->users, cap * sizeof(*n));
                        if (!n) {
                                why = "fiberd is out of memory";
                                goto out_unlock;
                        }
                        s->users = n;
                        s->cap_users = cap;
                }
                u = calloc(1, sizeof(*u));
                if (!u) {
                        why = "fiberd is out of memory";
                        goto out_unlock;
                }
                u->uid = uid;
                u->limit = s->limits.max_in_flight_per_user;
                fiber_sem_init(&u->slots, u->limit);
                s->users[s->n_users++] = u;
        }
        if (!why) {
                u->n++;
                *ret_user = u;
        }
out_unlock:
        pthread_mutex_unlock(&s->lock);
        return why;
}

/* Uncounts a connection of @uid. */
static void server_user_put(Server *s, uid_t uid)
{
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < s->n_users; i++) {
                UserConns *u = s->users[i];

                if (u->uid != uid)
                        continue;
                if (--u->n == 0) {
                        s->users[i] = s->users[--s->n_users];
                        free(u);
                }
                break;
        }
        pthread_mutex_unlock(&s->lock);
}

/*
 * Tells a client we will not serve ([2, "connection.error", [{code, message}]]) without
 * waiting: the socket is new, its buffer empty. Then closes @fd.
 */
static void refuse_fd(int fd, const char *code, const char *text)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (ipc_pack_notification_begin(&pk, IPC_NOTIFY_CONNECTION_ERROR, 1) == 0 &&
            ipc_pack_error_map(&pk, code, text) == 0)
                (void)!send(fd, sb.data, sb.size, MSG_DONTWAIT | MSG_NOSIGNAL);
        msgpack_sbuffer_destroy(&sb);
        close(fd);
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
        for (size_t i = 0; i < c->n_fds; i++)
                close(c->fds[i]);
        creds_unref(c->creds);
        ipc_decoder_free(c->decoder);
        msgpack_sbuffer_destroy(&c->out);
        msgpack_sbuffer_destroy(&c->out_spare);
        pthread_mutex_destroy(&c->out_lock);
        STAT_ADD(c->server, connections, -1);
        STAT_ADD(c->server, partial_bytes, -(uint64_t)c->partial);
        server_user_put(c->server, c->uid);
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

/* Gives back @n request slots, the connection's and its uid's. */
static void conn_slots_put(Conn *c, unsigned n)
{
        fiber_sem_post(&c->slots, n);
        if (c->user)
                user_slots_put(c->user, n);
}

/* Gives back @n request slots whose answers have left (or never will). */
static void conn_answers_done(Conn *c, unsigned n)
{
        conn_slots_put(c, n);
        STAT_ADD(c->server, in_flight, -(uint64_t)n);
}

/* After a write: yields while the request fibers made ready meanwhile keep adding their
 * answers (a yield runs up to 8 ready fibers: a worker reads its yield list first on
 * every 8th pop, ready.c), at most CONN_GATHER_ROUNDS times. */
static void conn_gather(Conn *c)
{
        for (unsigned round = 0, seen = 0; round < CONN_GATHER_ROUNDS; round++) {
                unsigned now;

                fiber_yield();
                pthread_mutex_lock(&c->out_lock);
                now = c->out_count;
                pthread_mutex_unlock(&c->out_lock);
                if (now == seen)
                        break;
                seen = now;
        }
}

static void conn_flush(Conn *c);

/* Appends one answer (@len bytes, copied) to @c's write queue. *@ret_flush: the caller
 * is the flusher now (none was under way) and must call conn_flush(). Return: 0;
 * -ENOMEM (nothing queued). Does not park. */
static int conn_queue_answer(Conn *c, const void *data, size_t len, bool *ret_flush)
{
        pthread_mutex_lock(&c->out_lock);
        if (msgpack_sbuffer_write(&c->out, data, len) != 0) {
                pthread_mutex_unlock(&c->out_lock);
                return -ENOMEM;
        }
        c->out_count++;
        *ret_flush = !c->flushing;
        c->flushing = true;
        pthread_mutex_unlock(&c->out_lock);
        return 0;
}

/*
 * Sends the answer to a request and gives its slot back once it has left, writing the
 * answers of many requests with one write() (brpc's write queue; the batching that
 * pipelined gearmand gets from its event loop): the answer is appended to the
 * connection's queue, and the first request fiber to find no flush under way flushes.
 * It writes its own answer at once (so an answer is never held back behind work that is
 * ready after it: a job whose plugin crashes fiberd at once starts after its submission
 * was answered, dispatch.c), then yields while answers keep joining (conn_gather()), so
 * the request fibers already ready on its worker append theirs and end without a
 * system call of their own; then it writes what is queued, in turns, until the queue
 * is empty. A request slot comes back only when its answer
 * has left, so a client that stops reading still holds at most max_in_flight answers
 * here (backpressure), and a flusher whose write times out shuts the connection down
 * like any write (conn_send()). Copies @data. Context: a request fiber (a request run
 * inline hands its answer off instead: conn_answer_handoff()); may park.
 */
static void conn_answer(Conn *c, const void *data, size_t len)
{
        bool flush;

        if (conn_queue_answer(c, data, len, &flush) < 0) {
                conn_send(c, data, len); /* no memory to queue it: on its own */
                STAT_ADD(c->server, answer_writes, 1);
                conn_answers_done(c, 1);
                return;
        }
        if (flush)
                conn_flush(c);
}

/* The flusher's turns (conn_answer()): writes what is queued, gathers, again, until the
 * queue is empty, then gives the flusher's role up. Context: the fiber that set
 * Conn.flushing; parks. */
static void conn_flush(Conn *c)
{
        msgpack_sbuffer batch;
        unsigned n;

        for (;;) {
                pthread_mutex_lock(&c->out_lock);
                n = c->out_count;
                if (!n) {
                        c->flushing = false;
                        pthread_mutex_unlock(&c->out_lock);
                        return;
                }
                batch = c->out;
                c->out = c->out_spare;
                c->out_count = 0;
                pthread_mutex_unlock(&c->out_lock);
                conn_send(c, batch.data, batch.size); /* -EPIPE when closed: dropped */
                STAT_ADD(c->server, answer_writes, 1);
                msgpack_sbuffer_clear(&batch);
                c->out_spare = batch; /* only the flusher touches the spare */
                conn_answers_done(c, n);
                conn_gather(c);
        }
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

static void request_free(Request *req)
{
        IpcMessage m = req->msg; /* its zone holds @req itself (conn_dispatch()) */

        for (size_t i = 0; i < req->n_fds; i++)
                close(req->fds[i]);
        free(req->fds);
        creds_unref(req->creds);
        ipc_message_clear(&m);
}

/* One method call as an AnswerPackFn: request_main()'s, on a request fiber or inline. */
typedef struct MethodCall {
        MethodFn fn; /* NULL: no such method */
        void *ctx;
        Request *req;
} MethodCall;

static int method_call_pack(void *arg, msgpack_packer *pk, IpcStatus *st)
{
        MethodCall *m = arg;

        if (!m->fn)
                return ipc_status_set(st, IPC_METHOD_NOT_FOUND, -ENOSYS,
                                      "no method '%s'; see PROTOCOL.md for the method list",
                                      m->req->msg.method);
        return m->fn(m->ctx, m->req, pk, st);
}

/*
 * Packs the response to @msgid into @out: [1, msgid, nil, result] with the result @pack
 * packs (nil when it packs nothing), or the error it set in its IpcStatus, or
 * OUT_OF_MEMORY. Return: true when @pack left the answer for later (@req's
 * request_defer(); @out is then empty). Context: a fiber of the server group.
 */
static bool pack_response(IpcPackBuf *out, uint32_t msgid, AnswerPackFn pack, void *arg,
                          const Request *req)
{
        IpcStatus st = {0};
        msgpack_packer pk;
        size_t head;
        int r;

        msgpack_packer_init(&pk, out, ipc_packbuf_write);
        /* [1, msgid, nil, result]: the method packs its result behind the header */
        r = ipc_pack_response_begin(&pk, msgid); /* < 0: the error answer below */
        head = out->size;
        if (r == 0) {
                r = pack(arg, &pk, &st);
                if (req && req->deferred) {
                        out->size = 0; /* the answer is the RequestDeferred's now */
                        return true;
                }
                if (r < 0 && !ipc_status_failed(&st))
                        ipc_status_errno(&st, r, NULL);
                if (r >= 0 && out->size == head)
                        r = msgpack_pack_nil(&pk) ? -ENOMEM : 0;
        }
        if (ipc_status_failed(&st)) {
                out->size = 0; /* what the method packed is not the answer */
                r = ipc_pack_status_response(&pk, msgid, &st);
        }
        if (r < 0) {
                out->size = 0;
                ipc_pack_error_response(&pk, msgid, IPC_OUT_OF_MEMORY,
                                        "fiberd ran out of memory building the response");
        }
        return false;
}

static void conn_answer_handoff(Conn *c, const void *data, size_t len);

/* Runs @req's method and answers it. On the request's own fiber (@on_reader false) the
 * fiber writes the answer (conn_answer()). Run inline on the connection's reader, an
 * answer given at once is handed to a flusher fiber (conn_answer_handoff()): the reader
 * never writes, so it goes on reading while a client that is slow to read takes its
 * answers, as with request fibers. Takes over @req and its reference to the connection. */
static void request_run(Request *req, bool on_reader)
{
        Server *s = req->server;
        Conn *c = req->conn;
        MethodCall call = {s->lookup(req->msg.method, req->msg.method_len), s->ctx, req};
        /* the usual answer packs on this fiber's stack: a msgpack_sbuffer each for the
         * result and the answer cost two 8 KiB allocations and a copy per request */
        char room[1024];
        IpcPackBuf out;
        bool deferred;

        ipc_packbuf_init(&out, room, sizeof(room));
        deferred = pack_response(&out, req->msg.msgid, method_call_pack, &call, req);
        request_free(req);
        if (deferred) {
                conn_unref(c);
        } else if (on_reader) {
                conn_answer_handoff(c, out.data, out.size); /* takes the reference */
        } else {
                conn_answer(c, out.data, out.size);
                conn_unref(c);
        }
        ipc_packbuf_free(&out);
}

static void request_main(void *arg)
{
        request_run(arg, false);
}

void request_defer(Request *req, RequestDeferred *d)
{
        d->conn = conn_ref(req->conn);
        d->msgid = req->msg.msgid;
        req->deferred = true;
}

/* A flusher fiber of a deferred answer (request_deferred_answer()): the connection's
 * flush, then its reference goes. */
static void conn_flush_main(void *arg)
{
        Conn *c = arg;

        conn_flush(c);
        conn_unref(c);
}

void request_deferred_answer(RequestDeferred *d, AnswerPackFn pack, void *ctx)
{
        Conn *c = d->conn;
        uint32_t msgid = d->msgid;
        char room[1024];
        IpcPackBuf out;

        ipc_packbuf_init(&out, room, sizeof(room));
        pack_response(&out, msgid, pack, ctx, NULL);
        conn_answer_handoff(c, out.data, out.size);
        ipc_packbuf_free(&out);
}

/* Queues an answer (@len bytes, copied) on @c and, when no flush is under way, starts a
 * flusher fiber for it, or leaves it to the server's own flusher when no fiber can be
 * had: the caller never writes nor parks. Takes over a reference to @c. */
static void conn_answer_handoff(Conn *c, const void *data, size_t len)
{
        FiberAttr attr = {.group = c->server->group, .detached = true, .tag = "answers"};
        bool flush;
        int r;

        r = conn_queue_answer(c, data, len, &flush);
        if (r < 0) {
                /* the answer cannot be kept: the client must not wait for it forever */
                log_msg(LOG_WARNING,
                        "client uid %u pid %d: out of memory for an answer; closing its "
                        "connection",
                        (unsigned)c->uid, (int)c->pid);
                conn_shutdown(c);
                conn_answers_done(c, 1);
                conn_unref(c);
                return;
        }
        if (!flush) {
                conn_unref(c);
                return;
        }
        /* the flusher takes over the reference; without a fiber, the server's own */
        if (fiber_create(NULL, &attr, conn_flush_main, c) == 0)
                return;
        pthread_mutex_lock(&c->server->lock);
        c->flush_next = c->server->flush_pending;
        c->server->flush_pending = c;
        pthread_mutex_unlock(&c->server->lock);
        fiber_sem_post(&c->server->flush_wake, 1);
}

/*
 * The server's own flusher fiber, for the connections whose answers found no fiber for
 * their flush (request_deferred_answer()): created with the server, so it exists when
 * no fiber can be created; it flushes them one after another (a client that does not
 * read holds it up to its write timeout, but nobody else's fiber). Runs as long as the
 * process.
 */
static void server_flusher(void *arg)
{
        Server *s = arg;
        Conn *c;

        while (fiber_sem_wait(&s->flush_wake, SCHED_FOREVER) == 0) {
                pthread_mutex_lock(&s->lock);
                c = s->flush_pending;
                if (c)
                        s->flush_pending = c->flush_next;
                pthread_mutex_unlock(&s->lock);
                if (c)
                        conn_flush_main(c);
        }
}

/* Moves the fds @req's params refer to from the front of @c's queue into @req.
 * Return: 0; -EBADF when fewer were sent; -ENOMEM. Context: the reader fiber. */
static int conn_claim_fds(Conn *c, Request *req)
{
        uint32_t need = ipc_object_fds_needed(&req->msg.params);

        if (need == 0)
                return 0;
        if (need > c->n_fds)
                return -EBADF;
        req->fds = malloc(need * sizeof(int));
        if (!req->fds)
                return -ENOMEM;
        memcpy(req->fds, c->fds, need * sizeof(int));
        req->n_fds = need;
        c->n_fds -= need;
        memmove(c->fds, c->fds + need, c->n_fds * sizeof(int));
        return 0;
}

/* Closes the fds @msg refers to, for a message that is not handled (refused, or not a
 * request), so the ones behind them stay paired with their own requests. */
static void conn_drop_fds(Conn *c, const IpcMessage *msg)
{
        uint32_t need = ipc_object_fds_needed(&msg->params);

        if (need > c->n_fds)
                need = (uint32_t)c->n_fds;
        for (uint32_t i = 0; i < need; i++)
                close(c->fds[i]);
        c->n_fds -= need;
        memmove(c->fds, c->fds + need, c->n_fds * sizeof(int));
}

/* Starts a request fiber for @msg (taken over), or runs it on the reader when the server's
 * run_inline says it cannot park. An answer such a request gives at once (a refusal, or a
 * job already final) goes to a flusher fiber at once (conn_answer_handoff()): never held
 * while the reader goes on, since the reader may park below for the very slots those
 * answers give back, and never written by the reader, which keeps reading meanwhile.
 * Context: the connection's reader. */
static void conn_dispatch(Conn *c, IpcMessage *msg)
{
        Server *s = c->server;
        FiberAttr attr = {.group = s->group, .detached = true};
        Request *req;
        int r;

        if (msg->type != IPC_REQUEST) {
                conn_drop_fds(c, msg);
                ipc_message_clear(msg); /* responses and notifications: nothing to answer */
                return;
        }
        STAT_ADD(s, requests, 1);
        /*
         * A slot first, the connection's and then its uid's: at max_in_flight, or at
         * max_in_flight_per_user over the uid's connections, the reader parks here and
         * reads no more from this connection until a response has left (backpressure).
         * It wakes when a request fiber ends, also when the connection was shut down
         * meanwhile.
         */
        r = fiber_sem_wait(&c->slots, SCHED_FOREVER);
        if (r == 0 && c->user && !fiber_sem_trywait(&c->user->slots)) {
                STAT_ADD(s, user_throttled, 1);
                if ((r = fiber_sem_wait(&c->user->slots, SCHED_FOREVER)) < 0)
                        fiber_sem_post(&c->slots, 1);
        }
        if (r < 0 || __atomic_load_n(&c->closed, __ATOMIC_ACQUIRE)) {
                if (r == 0)
                        conn_slots_put(c, 1);
                conn_drop_fds(c, msg);
                ipc_message_clear(msg);
                return;
        }
        /* in the message's zone, whose first chunk has room for it (IPC_ZONE_SLACK): one
         * allocation a request fewer, freed with the message */
        req = msg->zone ? msgpack_zone_malloc(msg->zone, sizeof(*req)) : NULL;
        if (req)
                memset(req, 0, sizeof(*req));
        if (!req) {
                conn_slots_put(c, 1);
                conn_send_error(c, msg->msgid, IPC_OUT_OF_MEMORY, "fiberd is out of memory");
                conn_drop_fds(c, msg);
                ipc_message_clear(msg);
                return;
        }
        req->server = s;
        req->conn = conn_ref(c);
        req->uid = c->uid;
        req->pid = c->pid;
        req->creds = creds_ref(c->creds);
        req->msg = *msg;
        memset(msg, 0, sizeof(*msg));
        r = conn_claim_fds(c, req);
        if (r < 0) {
                conn_send_error(c, req->msg.msgid,
                                r == -ENOMEM ? IPC_OUT_OF_MEMORY : IPC_INVALID_ARGUMENT,
                                r == -ENOMEM ? "fiberd is out of memory"
                                             : "the request refers to more fds than were sent "
                                               "with it (SCM_RIGHTS); see PROTOCOL.md, "
                                               "\"Passing files\"");
                request_free(req);
                conn_slots_put(c, 1);
                conn_unref(c);
                return;
        }
        STAT_ADD(s, in_flight, 1);
        if (s->run_inline && s->run_inline(s->ctx, req)) {
                STAT_ADD(s, requests_inline, 1);
                request_run(req, true);
                return;
        }
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
                request_free(req);
                conn_slots_put(c, 1);
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

/*
 * Reads into @buf like fiber_read() (-ETIMEDOUT after @deadline), and queues the fds that come along (SCM_RIGHTS).
 * Return: bytes (0 at end of stream); -errno; -EMFILE when more fds arrive than the
 * queue holds (they are closed). Context: the reader fiber; parks.
 */
static ssize_t conn_recv(Conn *c, void *buf, size_t len, uint64_t deadline)
{
        union {
                char buf[CMSG_SPACE(IPC_FDS_PER_REQUEST_MAX * sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov = {.iov_base = buf, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        bool overflow = false;
        ssize_t n;
        int r;

        for (;;) {
                mh.msg_control = control.buf;
                mh.msg_controllen = sizeof(control.buf);
                n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
                if (n >= 0)
                        break;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return -errno;
                r = fiber_wait_fd(c->fd, EPOLLIN, deadline);
                if (r < 0)
                        return r;
        }
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
                        continue;
                size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                for (size_t i = 0; i < nfd; i++) {
                        int fd;
                        memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
                        if (c->n_fds < IPC_FDS_QUEUED_MAX) {
                                c->fds[c->n_fds++] = fd;
                        } else {
                                close(fd);
                                overflow = true;
                        }
                }
        }
        if (overflow || (mh.msg_flags & MSG_CTRUNC))
                return -EMFILE;
        return n;
}

/*
 * After a read: counts what the decoder holds of an incomplete message in the server's
 * partial_bytes and dates the message's start (@progress: a message was completed, so
 * what is left began now). Returns false when the connection must go because the sum is
 * over max_partial_bytes (the notification is sent).
 */
static bool conn_account_partial(Conn *c, bool progress)
{
        Server *s = c->server;
        size_t held = ipc_decoder_buffered(c->decoder);
        uint64_t total;

        if (held != c->partial) {
                STAT_ADD(s, partial_bytes, (uint64_t)held - (uint64_t)c->partial);
                c->partial = held;
        }
        if (!held)
                c->partial_since = 0;
        else if (progress || !c->partial_since)
                c->partial_since = sched_now_ns();
        total = __atomic_load_n(&s->stats.partial_bytes, __ATOMIC_RELAXED);
        if (held > CONN_READ_CHUNK && total > c->max_partial) {
                log_msg(LOG_NOTICE,
                        "client uid %u pid %d: incomplete messages of all clients exceed "
                        "max_partial_bytes (%zu); closing its connection",
                        (unsigned)c->uid, (int)c->pid, c->max_partial);
                STAT_ADD(s, refused, 1);
                conn_send_notice(c, IPC_OVERLOADED,
                                 "fiberd holds too many incomplete messages "
                                 "(max_partial_bytes); send whole messages, retry later");
                return false;
        }
        return true;
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
                bool progress = false;
                uint64_t deadline =
                        c->partial_since ? c->partial_since + c->read_timeout_ns : SCHED_FOREVER;
                int r = ipc_decoder_reserve(c->decoder, CONN_READ_CHUNK, &buf, &len);

                if (r < 0) {
                        fatal = conn_protocol_error(c, r);
                        break;
                }
                n = conn_recv(c, buf, len, deadline);
                if (n == -EMFILE) {
                        log_msg(LOG_NOTICE,
                                "client uid %u pid %d sent more fds than fiberd keeps "
                                "(%d a message, %d unclaimed); closing its connection",
                                (unsigned)c->uid, (int)c->pid, IPC_FDS_PER_REQUEST_MAX,
                                IPC_FDS_QUEUED_MAX);
                        conn_send_notice(c, IPC_INVALID_ARGUMENT,
                                         "too many fds sent (SCM_RIGHTS); see PROTOCOL.md");
                        fatal = true;
                        break;
                }
                if (n == -ETIMEDOUT) {
                        log_msg(LOG_NOTICE,
                                "client uid %u pid %d: a message begun %llu ms ago is still "
                                "incomplete (read_timeout_ms); closing its connection",
                                (unsigned)c->uid, (int)c->pid,
                                (unsigned long long)(c->read_timeout_ns / NSEC_PER_MSEC));
                        conn_send_notice(c, IPC_DEADLINE_EXCEEDED,
                                         "a message was not complete within read_timeout_ms");
                        fatal = true;
                        break;
                }
                if (n <= 0)
                        break; /* end of stream, reset, or cancelled */
                ipc_decoder_commit(c->decoder, (size_t)n);
                while ((r = ipc_decoder_next(c->decoder, &msg)) != 0) {
                        if (r == 1) {
                                progress = true;
                                conn_dispatch(c, &msg);
                                if (__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE))
                                        break;
                                continue;
                        }
                        if (conn_protocol_error(c, r)) {
                                fatal = true;
                                break;
                        }
                }
                if (!fatal && !conn_account_partial(c, progress))
                        fatal = true;
                if (__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE))
                        break;
        }
        if (fatal)
                conn_shutdown(c);
        conn_unref(c);
}

/* ------------------------------------------------------------------ accepting --- */

/* Opens the spare fd (a no-op when it is open). */
static void spare_open(Server *s)
{
        if (s->spare_fd < 0)
                s->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* The accept fiber's view of an fd shortage. */
typedef struct AcceptState {
        bool exhausted;      /* accept() is failing for want of fds or memory */
        bool said;           /* ... and this episode was logged */
        uint64_t backoff_ns; /* the next sleep */
        uint64_t said_ns;    /* when an episode was last logged */
} AcceptState;

/*
 * accept() failed with @err (EMFILE, ENFILE, ENOBUFS, ENOMEM): logs the episode's start
 * (one line, and at most one a minute however the shortage flaps), gives the clients
 * waiting in the backlog a clear OVERLOADED through the spare fd, and sleeps the back-off
 * (doubling up to a second). Returns -ECANCELED when the fiber was cancelled.
 */
static int accept_exhausted(Server *s, int err, AcceptState *as)
{
        uint64_t now = sched_now_ns();

        if (!as->exhausted) {
                as->exhausted = true;
                as->said = !as->said_ns || now - as->said_ns >= 60 * NSEC_PER_SEC;
                if (as->said) {
                        as->said_ns = now;
                        log_msg(LOG_WARNING,
                                "accept: %s; new clients are told OVERLOADED until fds are "
                                "free (%llu connections open)",
                                strerror(-err),
                                (unsigned long long)__atomic_load_n(&s->stats.connections,
                                                                    __ATOMIC_RELAXED));
                }
        }
        /* the whole backlog, one client at a time through the spare fd */
        for (int i = 0; i < SOMAXCONN && (err == -EMFILE || err == -ENFILE) && s->spare_fd >= 0;
             i++) {
                int fd;

                close(s->spare_fd);
                s->spare_fd = -1;
                fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd >= 0) {
                        STAT_ADD(s, refused, 1);
                        refuse_fd(fd, IPC_OVERLOADED,
                                  "fiberd has no file descriptor left for a connection; "
                                  "retry later");
                }
                spare_open(s);
                if (fd < 0)
                        break;
        }
        if (fiber_sleep_for(as->backoff_ns) == -ECANCELED)
                return -ECANCELED;
        as->backoff_ns = MIN(as->backoff_ns * 2, ACCEPT_BACKOFF_MAX_NS);
        return 0;
}

static void server_accept_loop(void *arg)
{
        Server *s = arg;
        AcceptState as = {.backoff_ns = ACCEPT_BACKOFF_MIN_NS};

        spare_open(s);
        for (;;) {
                FiberAttr attr = {.group = s->group, .detached = true};
                Creds *creds;
                ServerLimits lim;
                UserConns *user = NULL;
                const char *why;
                Conn *c;
                int fd = fiber_accept(s->listen_fd, SCHED_FOREVER);

                if (fd == -ECANCELED)
                        return;
                if (fd == -EMFILE || fd == -ENFILE || fd == -ENOBUFS || fd == -ENOMEM) {
                        if (accept_exhausted(s, fd, &as) < 0)
                                return;
                        continue;
                }
                if (fd < 0) {
                        log_msg(LOG_WARNING, "accept: %s", strerror(-fd));
                        if (fiber_sleep_for(ACCEPT_BACKOFF_MIN_NS) == -ECANCELED)
                                return;
                        continue;
                }
                spare_open(s);
                if (as.exhausted) {
                        if (as.said)
                                log_msg(LOG_NOTICE, "accept: file descriptors are free again");
                        as.exhausted = false;
                        as.backoff_ns = ACCEPT_BACKOFF_MIN_NS;
                }
                if (creds_from_socket(fd, &creds) < 0) {
                        close(fd);
                        continue;
                }
                why = server_user_get(s, creds->uid, &lim, &user);
                if (why) {
                        uint64_t now = sched_now_ns();
                        STAT_ADD(s, refused, 1);
                        /* one line a second at most: the log is no amplifier */
                        if (now - s->refused_logged_ns >= NSEC_PER_SEC) {
                                s->refused_logged_ns = now;
                                log_msg(LOG_NOTICE, "refused a connection of uid %u pid %d: %s",
                                        (unsigned)creds->uid, (int)creds->pid, why);
                        }
                        creds_unref(creds);
                        refuse_fd(fd, IPC_OVERLOADED, why);
                        continue;
                }
                c = calloc(1, sizeof(*c));
                if (!c || ipc_decoder_new(&c->decoder,
                                          __atomic_load_n(&s->max_message, __ATOMIC_RELAXED)) < 0) {
                        free(c);
                        server_user_put(s, creds->uid);
                        creds_unref(creds);
                        refuse_fd(fd, IPC_OUT_OF_MEMORY, "fiberd is out of memory");
                        continue;
                }
                c->server = s;
                c->fd = fd;
                c->refs = 1;
                c->uid = creds->uid;
                c->pid = creds->pid;
                c->creds = creds;
                c->max_partial = lim.max_partial_bytes;
                c->read_timeout_ns = lim.read_timeout_ns;
                fiber_sem_init(&c->slots, lim.max_in_flight);
                c->user = c->uid == 0 ? NULL : user; /* root: no per-user limit */
                fiber_mutex_init(&c->write_lock);
                pthread_mutex_init(&c->out_lock, NULL);
                msgpack_sbuffer_init(&c->out);
                msgpack_sbuffer_init(&c->out_spare);
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
        s->spare_fd = -1;
        s->group = group;
        s->max_message = max_message;
        s->lookup = lookup;
        s->ctx = ctx;
        pthread_mutex_init(&s->lock, NULL);
        fiber_sem_init(&s->flush_wake, 0);
        s->limits = (ServerLimits){
                .max_connections = server_auto_max_connections(),
                .max_connections_per_user = 64,
                .max_in_flight = 512,
                .max_in_flight_per_user = 2048,
                .max_partial_bytes = 64 << 20,
                .read_timeout_ns = 10 * NSEC_PER_SEC,
        };
        *ret = s;
        return 0;
}

int server_start(Server *s)
{
        FiberAttr attr = {.group = s->group, .tag = "accept"};
        FiberAttr fattr = {.group = s->group, .detached = true, .tag = "flusher"};
        int r = fiber_create(NULL, &fattr, server_flusher, s);

        return r < 0 ? r : fiber_create(&s->accept_fiber, &attr, server_accept_loop, s);
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

void server_set_inline(Server *s, RequestInlineFn run_inline)
{
        s->run_inline = run_inline;
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
        ret->refused = __atomic_load_n(&s->stats.refused, __ATOMIC_RELAXED);
        ret->partial_bytes = __atomic_load_n(&s->stats.partial_bytes, __ATOMIC_RELAXED);
        ret->requests_inline = __atomic_load_n(&s->stats.requests_inline, __ATOMIC_RELAXED);
        ret->answer_writes = __atomic_load_n(&s->stats.answer_writes, __ATOMIC_RELAXED);
        ret->user_throttled = __atomic_load_n(&s->stats.user_throttled, __ATOMIC_RELAXED);
}
