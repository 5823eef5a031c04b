/* SPDX-License-Identifier: MIT */
/*
 * metrics_http.h — the Prometheus scrape endpoint: `GET /metrics` over HTTP, answered
 * with the `metrics` method's text (openmetrics.h), served by libmicrohttpd on its own
 * thread so a scrape never waits for, or holds up, the server scheduling group.
 *
 * The listening socket, in this order:
 *  - systemd's: the fd named "metrics" (systemd/fiberd-metrics.socket,
 *    FileDescriptorName=metrics; listenfds.h), by default 127.0.0.1:9464;
 *  - else [metrics] listen = HOST:PORT from the configuration, bound here;
 *  - else none: no endpoint (the default).
 * Either way an address that is not loopback (127.0.0.0/8, ::1) is refused unless
 * [metrics] allow_remote = true: the figures name plugins, classes and load, which are
 * the host's business, and the endpoint has no authentication of its own.
 *
 * HTTP: GET /metrics only. Another path is 404, another method on /metrics 405 (with
 * Allow: GET). Content negotiation as Prometheus does it: an Accept header that takes
 * application/openmetrics-text (version 1.0.0 or unversioned, q > 0) gets OpenMetrics
 * 1.0.0 (Content-Type: application/openmetrics-text; version=1.0.0; charset=utf-8),
 * anything else Prometheus's text format 0.0.4 (text/plain; version=0.0.4;
 * charset=utf-8).
 *
 * Threads: one, libmicrohttpd's internal polling thread (epoll), created by
 * metrics_http_start() from the main thread after the signals are blocked, so it
 * inherits the mask and never takes SIGTERM or SIGHUP. It renders each answer itself
 * (openmetrics_render(), which takes the job table's lock as the `metrics` method
 * does); at most METRICS_HTTP_MAX_CONNECTIONS connections at once, each closed after
 * METRICS_HTTP_TIMEOUT_S seconds idle.
 */
#ifndef FIBERD_DAEMON_METRICS_HTTP_H
#define FIBERD_DAEMON_METRICS_HTTP_H

#include <stdbool.h>
#include <sys/socket.h>

struct Daemon;
typedef struct MetricsHttp MetricsHttp;

/* Scrapers connected at once at most; more wait in the listen backlog. */
#define METRICS_HTTP_MAX_CONNECTIONS 16
/* An idle (or stalled) connection is closed after this many seconds. */
#define METRICS_HTTP_TIMEOUT_S 10

/*
 * metrics_http_parse_address - @s as a listening address: "HOST:PORT" with HOST an
 * IPv4 address or "localhost" (127.0.0.1), or "[IPV6]:PORT"; PORT 0..65535 (0: any
 * free port, which the start-up log names). No name lookup.
 * @ret, @ret_len: out, written only on success. Return: 0; -EINVAL.
 * Context: any. Pure.
 */
int metrics_http_parse_address(const char *s, struct sockaddr_storage *ret, socklen_t *ret_len);

/*
 * metrics_http_is_loopback - @sa is 127.0.0.0/8, ::1 or ::ffff:127.0.0.0/104.
 * Context: any. Pure.
 */
bool metrics_http_is_loopback(const struct sockaddr *sa);

/*
 * metrics_http_start - start serving @d's metrics: on systemd's socket named "metrics"
 * when one was passed, else on @listen ("" or NULL: nowhere). A non-loopback address
 * is refused unless @allow_remote.
 * @ret: out, written only on success: the endpoint, or NULL when there is none.
 * @ret_activated: out, true when the socket came from systemd.
 * Return: 0; -EADDRNOTAVAIL (not loopback, and not @allow_remote: logged with the
 * fix); -EINVAL (a bad @listen, or systemd's fd is not a listening TCP socket); the
 * -errno of socket(2), bind(2) or listen(2); -ENOMEM; -EIO (libmicrohttpd would not
 * start). Each error is logged.
 * Context: main thread at start-up, after the signals are blocked and @d's server,
 * job table and schedulers exist.
 */
int metrics_http_start(struct Daemon *d, const char *listen, bool allow_remote, MetricsHttp **ret,
                       bool *ret_activated);

/*
 * metrics_http_address - where @m listens, as "127.0.0.1:9464" or "[::1]:9464":
 * malloc'd (the caller frees), or NULL (-ENOMEM). Context: any.
 */
char *metrics_http_address(const MetricsHttp *m);

/*
 * metrics_http_stop - stop answering: close the socket and join the thread (a scrape
 * being rendered finishes first). Accepts NULL. Return: NULL.
 * Context: main thread (or a fiber of the server group) at shutdown.
 */
MetricsHttp *metrics_http_stop(MetricsHttp *m);

#endif
