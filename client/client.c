/* SPDX-License-Identifier: MIT */
/*
 * client.c — one pipelined MessagePack-RPC connection to fiberd (see client.h).
 *
 * State: an output sbuffer of queued requests (out, sent from out_sent on), the ipc
 * decoder for the input, and a FIFO of messages that arrived while the caller waited for
 * another msgid. Every wait is one poll(2) loop, pump(), that writes what it can, reads
 * what has arrived, and returns when the caller's condition holds or the time is up;
 * reading while writing is what keeps a deep pipeline from deadlocking.
 */
#include "client/client.h"
#include "ipc/socket_path.h"
#include "scheduler/base/list.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define CLIENT_READ_CHUNK 65536

typedef struct KeptMessage {
        ListHead link; /* in Client.kept, oldest first */
        IpcMessage msg;
} KeptMessage;

struct Client {
        int fd;
        char *path;
        uint32_t next_msgid; /* from 1 */
        msgpack_sbuffer out; /* queued requests */
        size_t out_sent;     /* bytes of out already written */
        msgpack_packer pk;   /* appends to out */
        IpcDecoder *in;
        ListHead kept; /* KeptMessage.link: arrived while waiting for another msgid */
        bool eof;      /* the daemon closed its side */
        int fds[IPC_FDS_PER_REQUEST_MAX]; /* client_request_fds(): not owned, not yet sent */
        size_t n_fds;
        size_t fds_off; /* they go with the byte of out at this offset */
};

int client_default_socket(char *buf, size_t size)
{
        const char *env = getenv("FIBERD_SOCKET");
        int n;

        if (!env || !*env)
                return socket_path_default(false, buf, size); /* the system socket */
        n = snprintf(buf, size, "%s", env);
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return 0;
}

static const char *connect_hint(int error)
{
        switch (error) {
        case -ENOENT:
        case -ECONNREFUSED:
                return " — is fiberd running? (set FIBERD_SOCKET or use -s to pick another "
                       "socket)";
        case -EACCES:
        case -EPERM:
                return " — is your user allowed to use this socket? (check its permissions, "
                       "or run as root)";
        case -ENOTSOCK:
                return " — that file is not a socket; is the path right?";
        default:
                return "";
        }
}

int client_connect(Client **ret, const char *path, IpcStatus *st)
{
        char def[sizeof(((struct sockaddr_un *)0)->sun_path)];
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        Client *c;
        int r;

        if (!path) {
                r = client_default_socket(def, sizeof(def));
                if (r < 0)
                        return ipc_status_errno(st, r,
                                                "the socket path from FIBERD_SOCKET is "
                                                "longer than %zu bytes",
                                                sizeof(def) - 1);
                path = def;
        }
        if (strlen(path) >= sizeof(sa.sun_path))
                return ipc_status_errno(st, -ENAMETOOLONG,
                                        "cannot connect to %s: the path is longer than %zu "
                                        "bytes, the limit of a Unix socket address",
                                        path, sizeof(sa.sun_path) - 1);
        strcpy(sa.sun_path, path);

        c = calloc(1, sizeof(*c));
        if (!c)
                return ipc_status_errno(st, -ENOMEM, NULL);
        c->next_msgid = 1;
        list_init(&c->kept);
        msgpack_sbuffer_init(&c->out);
        msgpack_packer_init(&c->pk, &c->out, msgpack_sbuffer_write);
        c->path = strdup(path);
        if (!c->path) {
                r = ipc_status_errno(st, -ENOMEM, NULL);
                goto out_free_client;
        }
        r = ipc_decoder_new(&c->in, 0);
        if (r < 0) {
                ipc_status_errno(st, r, NULL);
                goto out_free_client;
        }
        c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0) {
                r = ipc_status_errno(st, -errno, "cannot create a Unix socket: %s",
                                     strerror(errno));
                goto out_free_client;
        }
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                r = -errno;
                ipc_status_errno(st, r, "cannot connect to %s: %s%s", path, strerror(-r),
                                 connect_hint(r));
                goto out_close_fd;
        }
        if (fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK) < 0) {
                r = ipc_status_errno(st, -errno, "cannot make the socket non-blocking: %s",
                                     strerror(errno));
                goto out_close_fd;
        }
        *ret = c;
        return 0;

out_close_fd:
        close(c->fd);
        c->fd = -1;
out_free_client:
        c->fd = -1;
        client_free(c);
        return r;
}

Client *client_free(Client *c)
{
        if (!c)
                return NULL;
        if (c->fd >= 0)
                close(c->fd);
        for (ListHead *e; (e = list_pop_head(&c->kept));) {
                KeptMessage *k = list_entry(e, KeptMessage, link);
                ipc_message_clear(&k->msg);
                free(k);
        }
        ipc_decoder_free(c->in);
        msgpack_sbuffer_destroy(&c->out);
        free(c->path);
        free(c);
        return NULL;
}

const char *client_path(const Client *c)
{
        return c->path;
}

int client_fd(const Client *c)
{
        return c->fd;
}

size_t client_pending_output(const Client *c)
{
        return c->out.size - c->out_sent;
}

msgpack_packer *client_request(Client *c, const char *method, uint32_t nparams, uint32_t *ret_msgid)
{
        size_t before = c->out.size;
        uint32_t msgid = c->next_msgid;

        if (ipc_pack_request_begin(&c->pk, msgid, method, nparams) < 0) {
                c->out.size = before; /* drop the partial envelope */
                return NULL;
        }
        c->next_msgid = msgid == UINT32_MAX ? 1 : msgid + 1;
        *ret_msgid = msgid;
        return &c->pk;
}

/* The longest single poll(2), ms: longer waits loop. */
#define POLL_MAX_MS ((int64_t)(1000 * MSEC_PER_SEC))

static int64_t now_ms(void)
{
        return (int64_t)(clock_now_ns(CLOCK_MONOTONIC) / NSEC_PER_MSEC);
}

/* Milliseconds left until @deadline (-1 = none), for poll(2). */
static int remaining_ms(int64_t deadline)
{
        if (deadline < 0)
                return -1;
        int64_t left = deadline - now_ms();
        return left <= 0 ? 0 : left > POLL_MAX_MS ? (int)POLL_MAX_MS : (int)left;
}

static int closed_error(Client *c, IpcStatus *st, int r)
{
        return ipc_status_set(st, IPC_UNAVAILABLE, r,
                              "fiberd closed the connection on %s (it does after a protocol "
                              "error, or when it stops; its log says which: journalctl -u "
                              "fiberd)",
                              c->path);
}

static int client_write_failed(Client *c, int error, IpcStatus *st);

int client_request_fds(Client *c, const int *fds, size_t n)
{
        if (n == 0)
                return 0;
        if (c->n_fds)
                return -EBUSY;
        if (n > IPC_FDS_PER_REQUEST_MAX)
                return -E2BIG;
        memcpy(c->fds, fds, n * sizeof(int));
        c->n_fds = n;
        c->fds_off = c->out.size;
        return 0;
}

/* send(2) of @len bytes of out from out_sent, with the pending fds when they belong to
 * the first of them (SCM_RIGHTS). */
static ssize_t client_send(Client *c, size_t len)
{
        union {
                char buf[CMSG_SPACE(IPC_FDS_PER_REQUEST_MAX * sizeof(int))];
                struct cmsghdr align;
        } control;
        struct iovec iov = {.iov_base = c->out.data + c->out_sent, .iov_len = len};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
        struct cmsghdr *cm;
        ssize_t n;

        if (!c->n_fds || c->out_sent != c->fds_off)
                return send(c->fd, iov.iov_base, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        memset(&control, 0, sizeof(control));
        mh.msg_control = control.buf;
        mh.msg_controllen = CMSG_SPACE(c->n_fds * sizeof(int));
        cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(c->n_fds * sizeof(int));
        memcpy(CMSG_DATA(cm), c->fds, c->n_fds * sizeof(int));
        n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0)
                c->n_fds = 0; /* they went with the first byte */
        return n;
}

/* Writes as much queued output as the socket takes now. */
static int client_write_some(Client *c, IpcStatus *st)
{
        while (c->out_sent < c->out.size) {
                size_t len = c->out.size - c->out_sent;
                /* stop in front of the request the fds belong to: they go with its first byte */
                if (c->n_fds && c->out_sent < c->fds_off && c->fds_off < c->out.size)
                        len = c->fds_off - c->out_sent;
                ssize_t n = client_send(c, len);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return 0;
                        if (errno == EINTR)
                                continue;
                        if (errno == EPIPE || errno == ECONNRESET)
                                return client_write_failed(c, -errno, st);
                        return ipc_status_errno(st, -errno, "cannot write to %s: %s", c->path,
                                                strerror(errno));
                }
                c->out_sent += (size_t)n;
        }
        msgpack_sbuffer_clear(&c->out);
        c->out_sent = 0;
        c->fds_off = 0; /* fds still waiting belong to the next request queued */
        return 0;
}

/* Reads what has arrived into the decoder; sets eof on end of stream. */
static int client_read_some(Client *c, IpcStatus *st)
{
        for (;;) {
                void *space;
                size_t len;
                int r = ipc_decoder_reserve(c->in, CLIENT_READ_CHUNK, &space, &len);
                if (r < 0)
                        return ipc_status_errno(st, r, "cannot buffer fiberd's reply: %s",
                                                ipc_decoder_error_text(c->in));
                ssize_t n = recv(c->fd, space, len, MSG_DONTWAIT);
                if (n < 0) {
                        if (errno == EAGAIN || errno == EWOULDBLOCK)
                                return 0;
                        if (errno == EINTR)
                                continue;
                        if (errno == ECONNRESET) {
                                c->eof = true;
                                return 0;
                        }
                        return ipc_status_errno(st, -errno, "cannot read from %s: %s", c->path,
                                                strerror(errno));
                }
                if (n == 0) {
                        c->eof = true;
                        return 0;
                }
                ipc_decoder_commit(c->in, (size_t)n);
                if ((size_t)n < len)
                        return 0;
        }
}

/* Takes one decoded message from the input, if a whole one has arrived. */
static int client_decode(Client *c, IpcMessage *ret, IpcStatus *st)
{
        int r = ipc_decoder_next(c->in, ret);
        if (r >= 0 || r == -ENOMEM)
                return r < 0 ? ipc_status_errno(st, r, NULL) : r;
        return ipc_status_set(st, IPC_MALFORMED_MESSAGE, r,
                              "fiberd sent a message this fiberctl cannot read (%s); are "
                              "fiberd and fiberctl the same version?",
                              ipc_decoder_error_text(c->in));
}

/*
 * One round of waiting: poll for input (and output when some is queued), then move bytes
 * both ways. Return 0 when progress may have been made, -ETIMEDOUT, or an error.
 */
static int client_pump(Client *c, int64_t deadline, IpcStatus *st)
{
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int r;

        if (c->eof)
                return closed_error(c, st, -ECONNRESET);
        if (client_pending_output(c) > 0)
                p.events |= POLLOUT;
        r = poll(&p, 1, remaining_ms(deadline));
        if (r < 0) {
                if (errno == EINTR)
                        return 0;
                return ipc_status_errno(st, -errno, "poll: %s", strerror(errno));
        }
        if (r == 0)
                return ipc_status_set(st, IPC_DEADLINE_EXCEEDED, -ETIMEDOUT,
                                      "no answer from fiberd on %s in time", c->path);
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
                r = client_read_some(c, st);
                if (r < 0)
                        return r;
        }
        if (p.revents & POLLOUT) {
                r = client_write_some(c, st);
                if (r < 0)
                        return r;
        }
        return 0;
}

int client_flush(Client *c, int timeout_ms, IpcStatus *st)
{
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
        int r = client_write_some(c, st);

        while (r == 0 && client_pending_output(c) > 0) {
                if (c->eof)
                        return client_write_failed(c, -EPIPE, st);
                r = client_pump(c, deadline, st);
        }
        return r;
}

/* Takes @k off the kept list into @ret. */
static void kept_remove(KeptMessage *k, IpcMessage *ret)
{
        list_del(&k->link);
        *ret = k->msg;
        free(k);
}

static bool kept_take(Client *c, IpcMessage *ret)
{
        ListHead *e = list_first(&c->kept);
        if (!e)
                return false;
        kept_remove(list_entry(e, KeptMessage, link), ret);
        return true;
}

static int kept_add(Client *c, IpcMessage *m)
{
        KeptMessage *k = malloc(sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->msg = *m;
        list_add_tail(&c->kept, &k->link);
        memset(m, 0, sizeof(*m));
        return 0;
}

/*
 * Takes a decoded message; the notification "connection.error" (the daemon's last word
 * before it closes the connection, PROTOCOL.md "Broken streams") becomes the error.
 */
static int client_decode_checked(Client *c, IpcMessage *ret, IpcStatus *st)
{
        IpcMessage m;
        IpcStatus why;
        int r = client_decode(c, &m, st);

        if (r <= 0)
                return r;
        if (m.type != IPC_NOTIFICATION || strcmp(m.method, IPC_NOTIFY_CONNECTION_ERROR) != 0) {
                *ret = m;
                return 1;
        }
        r = ipc_read_error(ipc_array_at(&m.params, 0), &why);
        ipc_message_clear(&m);
        if (r > 0)
                return ipc_status_set(st, why.code, why.error, "fiberd closed the connection: %s",
                                      why.message);
        return closed_error(c, st, -ECONNRESET);
}

/*
 * The daemon closed the connection while requests were being written. What it sent
 * before closing is still readable and explains why (an error response to the request
 * that was too big, or a "connection.error" notice): drop the unsent output, read all of
 * it into the decoder and return 0, so that the next client_receive() /
 * client_call_wait() hands out those messages in order and only then reports the close.
 */
static int client_write_failed(Client *c, int error, IpcStatus *st)
{
        msgpack_sbuffer_clear(&c->out);
        c->out_sent = 0;
        c->n_fds = 0;
        while (!c->eof) {
                struct pollfd p = {.fd = c->fd, .events = POLLIN};
                int r = client_read_some(c, st);
                if (r < 0)
                        return r;
                if (c->eof || poll(&p, 1, 1000) <= 0)
                        break;
        }
        c->eof = true;
        return 0;
}

/* Waits for the next message off the wire (the kept list is not consulted). */
static int client_next_wire(Client *c, IpcMessage *ret, int64_t deadline, IpcStatus *st)
{
        int r = client_write_some(c, st);
        if (r < 0)
                return r;
        for (;;) {
                r = client_decode_checked(c, ret, st);
                if (r != 0)
                        return r;
                if (deadline >= 0 && remaining_ms(deadline) == 0) {
                        /* one last non-blocking look before giving up */
                        r = client_read_some(c, st);
                        if (r < 0)
                                return r;
                        r = client_decode_checked(c, ret, st);
                        if (r != 0)
                                return r;
                        if (c->eof)
                                return closed_error(c, st, -ECONNRESET);
                        return ipc_status_set(st, IPC_DEADLINE_EXCEEDED, -ETIMEDOUT,
                                              "no answer from fiberd on %s in time", c->path);
                }
                r = client_pump(c, deadline, st);
                if (r < 0)
                        return r;
        }
}

int client_receive(Client *c, IpcMessage *ret, int timeout_ms, IpcStatus *st)
{
        if (kept_take(c, ret))
                return 1;
        return client_next_wire(c, ret, timeout_ms < 0 ? -1 : now_ms() + timeout_ms, st);
}

int client_call_wait(Client *c, uint32_t msgid, IpcMessage *ret, int timeout_ms, IpcStatus *st)
{
        int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;

        ListHead *e, *tmp;

        list_for_each_safe(e, tmp, &c->kept)
        {
                KeptMessage *k = list_entry(e, KeptMessage, link);
                if (k->msg.type == IPC_RESPONSE && k->msg.msgid == msgid) {
                        kept_remove(k, ret);
                        return 1;
                }
        }
        for (;;) {
                IpcMessage m;
                int r = client_next_wire(c, &m, deadline, st);
                if (r < 0)
                        return r;
                if (m.type == IPC_RESPONSE && m.msgid == msgid) {
                        *ret = m;
                        return 1;
                }
                r = kept_add(c, &m);
                if (r < 0) {
                        ipc_message_clear(&m);
                        return ipc_status_errno(st, r, NULL);
                }
        }
}

int client_result(const IpcMessage *resp, const msgpack_object **ret_result, IpcStatus *st)
{
        IpcStatus local;
        IpcStatus *s = st ? st : &local;

        if (resp->type != IPC_RESPONSE)
                return ipc_status_set(st, IPC_MALFORMED_MESSAGE, -EPROTO,
                                      "expected a response from fiberd, got a message of "
                                      "type %d",
                                      (int)resp->type);
        int r = ipc_read_error(&resp->error, s);
        if (r < 0)
                return s->error;
        if (r > 0)
                return s->error;
        *ret_result = &resp->result;
        return 0;
}
