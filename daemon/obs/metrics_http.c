/* SPDX-License-Identifier: MIT */
/*
 * metrics_http.c — the scrape endpoint of metrics_http.h on libmicrohttpd
 * (MHD_USE_AUTO_INTERNAL_THREAD: one thread of its own, epoll on Linux).
 *
 * libmicrohttpd always gets a socket that is already listening (MHD_OPTION_LISTEN_SOCKET):
 * systemd's, or the one bound here, so both ways share one path and the loopback rule
 * is checked on what is really served (getsockname()), not on what a file said.
 *
 * The access handler runs twice per request, as libmicrohttpd's examples do: the first
 * call only marks the request (nothing is answered before the headers are whole and a
 * body, if any, is read and dropped), the last one answers. The answer's buffer is the
 * one openmetrics_render() malloc'd, handed to libmicrohttpd to free
 * (MHD_RESPMEM_MUST_FREE): no copy.
 *
 * At the end the listening socket is taken back (MHD_quiesce_daemon()) and closed, never
 * shut down: systemd's socket outlives fiberd, and a shutdown(2) would end it for
 * systemd too.
 *
 * libmicrohttpd's own error messages go to log_msg() (MHD_OPTION_EXTERNAL_LOGGER), one
 * line each, prefixed "metrics: ".
 */
#include "daemon/obs/metrics_http.h"
#include "daemon/daemon.h"
#include "daemon/obs/log.h"
#include "daemon/obs/openmetrics.h"
#include "daemon/server/listenfds.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#define CONTENT_TYPE_OPENMETRICS "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define CONTENT_TYPE_PROMETHEUS "text/plain; version=0.0.4; charset=utf-8"

struct MetricsHttp {
        struct MHD_Daemon *mhd;              /* owns the listening socket */
        Daemon *d;                           /* whose figures it serves */
        char address[INET6_ADDRSTRLEN + 16]; /* where it listens, "host:port" */
};

/* ------------------------------------------------------------------ addresses ---- */

int metrics_http_parse_address(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len)
{
        struct sockaddr_storage ss = {0};
        char host[INET6_ADDRSTRLEN + 2];
        const char *colon, *port;
        unsigned long p;
        char *end;
        size_t n;

        if (!s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *close = strchr(s, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                n = (size_t)(close - s - 1);
                port = close + 2;
        } else {
                colon = strrchr(s, ':');
                if (!colon || memchr(s, ':', (size_t)(colon - s)))
                        return -EINVAL; /* an IPv6 address wants its brackets */
                n = (size_t)(colon - s);
                port = colon + 1;
        }
        if (n == 0 || n >= sizeof(host) || !*port || *port == '-' || *port == '+')
                return -EINVAL;
        memcpy(host, s + (s[0] == '['), n);
        host[n] = '\0';
        errno = 0;
        p = strtoul(port, &end, 10);
        if (errno || *end || p > 65535)
                return -EINVAL;
        if (s[0] == '[') {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
                a->sin6_family = AF_INET6;
                a->sin6_port = htons((uint16_t)p);
                if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
                        return -EINVAL;
                *ret_len = sizeof(*a);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *)&ss;
                a->sin_family = AF_INET;
                a->sin_port = htons((uint16_t)p);
                if (strcasecmp(host, "localhost") == 0)
                        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
                        return -EINVAL;
                *ret_len = sizeof(*a);
        }
        *ret = ss;
        return 0;
}

bool metrics_http_is_loopback(const struct sockaddr *sa)
{
        if (sa->sa_family == AF_INET)
                return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
        if (sa->sa_family == AF_INET6) {
                const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
                return IN6_IS_ADDR_LOOPBACK(a) ||
                       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
        }
        return false;
}

/* "127.0.0.1:9464" or "[::1]:9464" of @sa into @buf. */
static void format_address(const struct sockaddr *sa, char *buf, size_t size)
{
        char host[INET6_ADDRSTRLEN] = "?";

        if (sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
                inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
                snprintf(buf, size, "[%s]:%u", host, ntohs(a->sin6_port));
        } else if (sa->sa_family == AF_INET) {
                const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
                inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
                snprintf(buf, size, "%s:%u", host, ntohs(a->sin_port));
        } else {
                snprintf(buf, size, "(family %d)", sa->sa_family);
        }
}

/* A listening TCP socket bound to @address. Return: the fd, or -errno (logged). */
static int bind_address(const char *address)
{
        struct sockaddr_storage ss;
        socklen_t len;
        int fd, one = 1, r;

        if (metrics_http_parse_address(address, &ss, &len) < 0) {
                log_msg(LOG_ERR, "metrics: [metrics] listen = %s: not HOST:PORT or [IPV6]:PORT",
                        address);
                return -EINVAL;
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
                r = -errno;
                goto out_log;
        }
        /* a restart finds the port free although the last scrape is in TIME_WAIT */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0) {
                r = -errno;
                close(fd);
                goto out_log;
        }
        return fd;

out_log:
        log_msg(LOG_ERR, "metrics: cannot listen on %s: %s", address, strerror(-r));
        return r;
}

/* ------------------------------------------------------------------ HTTP --------- */

/* Whether @accept takes OpenMetrics 1.0.0: a media range application/openmetrics-text
 * with no version or version=1.0.0, and no q=0. */
static bool wants_openmetrics(const char *accept)
{
        static const char type[] = "application/openmetrics-text";

        for (const char *range = accept; range && *range;) {
                const char *end = strchrnul(range, ',');
                const char *p = range + strspn(range, " \t");
                bool match = strncasecmp(p, type, sizeof(type) - 1) == 0 &&
                             strchr(" \t;,", p[sizeof(type) - 1]);
                /* its parameters: ";version=..." and ";q=..." */
                for (p = memchr(p, ';', (size_t)(end - p)); match && p && p < end;
                     p = memchr(p + 1, ';', (size_t)(end - p - 1))) {
                        const char *v = p + 1 + strspn(p + 1, " \t");
                        if (strncasecmp(v, "version=", 8) == 0)
                                match = strncmp(v + 8, "1.0.0", 5) == 0 && strchr(" \t;,", v[13]);
                        else if (strncasecmp(v, "q=", 2) == 0)
                                match = strtod(v + 2, NULL) > 0;
                }
                if (match)
                        return true;
                range = *end ? end + 1 : end;
        }
        return false;
}

/* Queues a short text/plain answer with @status. */
static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text,
                                   const char *allow)
{
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
        enum MHD_Result r;

        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (allow)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

/* libmicrohttpd's access handler (MHD_AccessHandlerCallback). Context: its thread. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **req_cls)
{
        static int seen; /* the mark of a request's first call */
        MetricsHttp *m = cls;
        struct MHD_Response *resp;
        enum MHD_Result ret;
        char *text;
        size_t len;
        bool om;
        int r;

        if (*req_cls != &seen) {
                *req_cls = &seen;
                return MHD_YES;
        }
        if (*upload_data_size) {
                *upload_data_size = 0; /* a body: no method here takes one; dropped */
                return MHD_YES;
        }
        if (strcmp(url, "/metrics") != 0)
                return answer_text(c, MHD_HTTP_NOT_FOUND, "fiberd serves /metrics only\n", NULL);
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
                return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "/metrics answers GET only\n",
                                   MHD_HTTP_METHOD_GET);
        om = wants_openmetrics(
                MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
        r = openmetrics_render(m->d, !om, &text, &len);
        if (r < 0)
                return answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n", NULL);
        resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                om ? CONTENT_TYPE_OPENMETRICS : CONTENT_TYPE_PROMETHEUS);
        ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* libmicrohttpd's messages (MHD_LogCallback), one log line each. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        char buf[512];
        size_t n;

        vsnprintf(buf, sizeof(buf), fmt, ap);
        n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        log_msg(LOG_WARNING, "metrics: %s", buf);
}

/* ------------------------------------------------------------------ start, stop -- */

int metrics_http_start(Daemon *d, const char *listen, bool allow_remote, MetricsHttp **ret,
                       bool *ret_activated)
{
        struct sockaddr_storage ss = {0};
        socklen_t len = sizeof(ss);
        char where[INET6_ADDRSTRLEN + 16];
        bool activated = false;
        MetricsHttp *m;
        int fd, flags, r;

        fd = listenfds_take(LISTENFDS_NAME_METRICS);
        if (fd >= 0) {
                activated = true;
                if (listen && *listen)
                        log_msg(LOG_NOTICE,
                                "metrics: [metrics] listen = %s is not used: systemd passed "
                                "the socket",
                                listen);
                if (sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0) <= 0) {
                        log_msg(LOG_ERR,
                                "metrics: the socket systemd passed as \"%s\" is not a "
                                "listening TCP socket; check ListenStream= in "
                                "fiberd-metrics.socket",
                                LISTENFDS_NAME_METRICS);
                        r = -EINVAL;
                        goto out_close;
                }
        } else if (fd != -ENOENT) {
                log_msg(LOG_ERR, "metrics: the sockets systemd passed: %s", strerror(-fd));
                return fd;
        } else if (!listen || !*listen) {
                *ret = NULL;
                *ret_activated = false;
                return 0;
        } else {
                fd = bind_address(listen);
                if (fd < 0)
                        return fd;
        }
        if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
                r = -errno;
                log_msg(LOG_ERR, "metrics: getsockname: %s", strerror(-r));
                goto out_close;
        }
        format_address((struct sockaddr *)&ss, where, sizeof(where));
        if (!allow_remote && !metrics_http_is_loopback((struct sockaddr *)&ss)) {
                log_msg(LOG_ERR,
                        "metrics: %s%s is not a loopback address: fiberd serves its metrics "
                        "to this host only unless [metrics] allow_remote = true",
                        activated ? "systemd's socket " : "", where);
                r = -EADDRNOTAVAIL;
                goto out_close;
        }
        /* libmicrohttpd's thread polls it: accept() must not block that thread */
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
                r = -errno;
                goto out_close;
        }
        m = calloc(1, sizeof(*m));
        if (!m) {
                r = -ENOMEM;
                goto out_close;
        }
        m->d = d;
        snprintf(m->address, sizeof(m->address), "%s", where);
        m->mhd = MHD_start_daemon(
                MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                answer, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_MAX_CONNECTIONS,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_TIMEOUT_S, MHD_OPTION_END);
        if (!m->mhd) {
                log_msg(LOG_ERR, "metrics: libmicrohttpd would not start on %s", where);
                free(m);
                r = -EIO;
                goto out_close;
        }
        log_msg(LOG_INFO, "metrics: serving http://%s/metrics%s", where,
                activated ? " on systemd's socket" : "");
        *ret = m;
        *ret_activated = activated;
        return 0;

out_close:
        close(fd);
        return r;
}

char *metrics_http_address(const MetricsHttp *m)
{
        return strdup(m->address);
}

MetricsHttp *metrics_http_stop(MetricsHttp *m)
{
        MHD_socket fd;

        if (!m)
                return NULL;
        /* Take the socket back first: MHD_stop_daemon() would shutdown(2) it, and
         * systemd's socket is shared with systemd, which then sees it hang up and fails
         * fiberd-metrics.socket ("Got POLLHUP on a listening socket"). Closed after the
         * thread is joined, as libmicrohttpd asks. */
        fd = MHD_quiesce_daemon(m->mhd);
        MHD_stop_daemon(m->mhd); /* joins its thread, closes the connections */
        if (fd != MHD_INVALID_SOCKET)
                close(fd);
        free(m);
        return NULL;
}
