/* SPDX-License-Identifier: MIT */
/*
 * web.c — `fiberctl web`: a dashboard in the browser, served by fiberctl itself as the
 * user who starts it, as Jupyter serves its notebooks.
 *
 * The server listens on 127.0.0.1 only, on a port the kernel picks (bind to port 0),
 * and prints its URL with a token: http://127.0.0.1:PORT/?token=HEX. The token (128 bits
 * of getrandom(2)) is required on every request: in the URL the first time, which
 * answers with a cookie (HttpOnly, SameSite=Strict, named after the port, so two
 * dashboards do not overwrite each other's) and a redirect to the bare URL, so the
 * token does not stay in the address bar; then from the cookie, or from the
 * X-Fiberd-Token header. A request without it answers 403. Host must be
 * 127.0.0.1:PORT or localhost:PORT (a DNS-rebinding page names its own host), and a
 * POST (cancel, retry: the only requests that change anything) carried by the cookie
 * must come from the page's own origin (Origin header; Sec-Fetch-Site when sent). Other
 * methods than GET, HEAD and POST answer 405.
 *
 * What the page may do is what the user may do: every API request becomes a call to
 * fiberd over the user's own socket connection (web-api.c), so fiberd's access tiers
 * (ipc/PROTOCOL.md, "Access tiers") judge it by the user's credentials; the server has
 * no rights of its own.
 *
 * The static files (index.html, app.js, style.css) are looked up in --assets DIR; else
 * the source tree's client/web when fiberctl runs from its build folder (build/ or
 * build/VARIANT/); else FIBERCTL_WEB_DIR, where `make install` puts them
 * ($(PREFIX)/share/fiberd/web). Chart.js is Debian's libjs-chart.js
 * (/usr/share/javascript/chart.js/chart.min.js; --chartjs FILE names another copy);
 * nothing is loaded from the internet. Without it the page works, without charts.
 * Only these four names are served: no path from a URL reaches the file system.
 *
 * Threads: libmicrohttpd's one polling thread answers every request (web.h); the main
 * thread blocks SIGINT and SIGTERM before starting it, waits for one (sigwait), then
 * stops the server and returns.
 */
#include "client/web.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sysexits.h>
#include <unistd.h>

#ifndef FIBERCTL_WEB_DIR
#define FIBERCTL_WEB_DIR "/usr/local/share/fiberd/web"
#endif
#define WEB_CHARTJS_DEBIAN "/usr/share/javascript/chart.js/chart.min.js"

/* the cookie's name: WEB_COOKIE "_" PORT */
static char cookie_name[sizeof(WEB_COOKIE) + 8];

static enum MHD_Result answer_file(struct MHD_Connection *c, const char *path, const char *type)
{
        struct MHD_Response *resp;
        struct stat stbuf;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0 || fstat(fd, &stbuf) < 0 || !S_ISREG(stbuf.st_mode)) {
                if (fd >= 0)
                        close(fd);
                return web_answer_text(c, MHD_HTTP_NOT_FOUND, NULL,
                                       "fiberctl web: this file of the page is missing; "
                                       "see fiberctl web --help (--assets, --chartjs)\n");
        }
        resp = MHD_create_response_from_fd((uint64_t)stbuf.st_size, fd); /* takes fd */
        if (!resp) {
                close(fd);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        return web_answer(c, MHD_HTTP_OK, resp);
}

/* ------------------------------------------------------------------ the token ---- */

/* Whether @s is the token, compared in time independent of where it differs. */
static bool token_is(const Web *w, const char *s)
{
        unsigned char diff = 0;

        if (!s || strlen(s) != WEB_TOKEN_HEX)
                return false;
        for (size_t i = 0; i < WEB_TOKEN_HEX; i++)
                diff |= (unsigned char)(s[i] ^ w->token[i]);
        return diff == 0;
}

static int token_new(char ret[static WEB_TOKEN_HEX + 1])
{
        unsigned char raw[WEB_TOKEN_BYTES];
        size_t got = 0;

        while (got < sizeof(raw)) {
                ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n > 0)
                        got += (size_t)n;
        }
        for (size_t i = 0; i < sizeof(raw); i++)
                snprintf(ret + 2 * i, 3, "%02x", raw[i]);
        return 0;
}

/* How a request proved it holds the token. */
typedef enum Proof {
        PROOF_NONE,
        PROOF_QUERY,  /* ?token= in the URL */
        PROOF_HEADER, /* X-Fiberd-Token: a script of the page's own origin */
        PROOF_COOKIE, /* the cookie, which a browser sends from any page: check the origin */
} Proof;

static Proof proof_of(const Web *w, struct MHD_Connection *c)
{
        if (token_is(w, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token")))
                return PROOF_QUERY;
        if (token_is(w, MHD_lookup_connection_value(c, MHD_HEADER_KIND, WEB_TOKEN_HEADER)))
                return PROOF_HEADER;
        if (token_is(w, MHD_lookup_connection_value(c, MHD_COOKIE_KIND, cookie_name)))
                return PROOF_COOKIE;
        return PROOF_NONE;
}

/* Whether a state-changing request carried by the cookie comes from the page itself. */
static bool same_origin(const Web *w, struct MHD_Connection *c)
{
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        const char *site = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site");

        if (site && strcmp(site, "same-origin") != 0)
                return false;
        /* the page's origin is the host it was opened by: 127.0.0.1 or localhost */
        return origin && strncmp(origin, "http://", 7) == 0 &&
               (strcmp(origin + 7, w->host[0]) == 0 || strcmp(origin + 7, w->host[1]) == 0);
}

static bool host_ok(const Web *w, struct MHD_Connection *c)
{
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);

        return host && (strcmp(host, w->host[0]) == 0 || strcmp(host, w->host[1]) == 0);
}

/* The answer to the URL with ?token=: the cookie, and the same path without the token. */
static enum MHD_Result answer_login(const Web *w, struct MHD_Connection *c, const char *url)
{
        char cookie[sizeof(cookie_name) + WEB_TOKEN_HEX + 64];
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);

        if (!resp)
                return MHD_NO;
        snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Strict", cookie_name,
                 w->token);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SET_COOKIE, cookie);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, url);
        return web_answer(c, MHD_HTTP_SEE_OTHER, resp);
}

/* ------------------------------------------------------------------ requests ---- */

static const struct {
        const char *url, *file, *type;
} statics[] = {
        {"/", "index.html", "text/html; charset=utf-8"},
        {"/app.js", "app.js", "text/javascript; charset=utf-8"},
        {"/style.css", "style.css", "text/css; charset=utf-8"},
};

/* libmicrohttpd's access handler (MHD_AccessHandlerCallback). It runs at least twice per
 * request: the first call marks it, a body (none is needed) is read and dropped, the
 * last call answers. Context: libmicrohttpd's thread. */
static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
        static int marker;
        Web *w = cls;
        bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
        bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
                   strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
        Proof proof;

        if (!*con_cls) {
                *con_cls = &marker;
                return MHD_YES;
        }
        if (*upload_data_size) {
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (!get && !post) {
                struct MHD_Response *resp =
                        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                if (resp)
                        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, POST");
                return web_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
        }
        if (!host_ok(w, c))
                return web_answer_text(c, MHD_HTTP_FORBIDDEN, NULL,
                                       "fiberctl web: use the address fiberctl printed "
                                       "(127.0.0.1 or localhost, and its port)\n");
        proof = proof_of(w, c);
        if (proof == PROOF_NONE)
                return web_answer_text(c, MHD_HTTP_FORBIDDEN, NULL,
                                       "fiberctl web: this needs the token: open the URL "
                                       "fiberctl web printed, ?token= and all\n");
        if (post && proof == PROOF_COOKIE && !same_origin(w, c))
                return web_answer_text(c, MHD_HTTP_FORBIDDEN, NULL,
                                       "fiberctl web: a change must come from the dashboard's "
                                       "own page\n");
        if (get && proof == PROOF_QUERY && strncmp(url, "/api/", 5) != 0)
                return answer_login(w, c, url);

        if (strncmp(url, "/api/", 5) == 0)
                return web_api(w, c, post ? MHD_HTTP_METHOD_POST : MHD_HTTP_METHOD_GET, url + 5);
        if (post)
                return web_answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, NULL,
                                       "fiberctl web: only /api/ takes POST\n");
        if (strcmp(url, "/chart.js") == 0) {
                if (!w->chartjs)
                        return web_answer_text(c, MHD_HTTP_NOT_FOUND, NULL,
                                               "// Chart.js not found: install libjs-chart.js\n");
                return answer_file(c, w->chartjs, "text/javascript; charset=utf-8");
        }
        for (size_t i = 0; i < sizeof(statics) / sizeof(statics[0]); i++) {
                if (strcmp(url, statics[i].url) == 0) {
                        char path[sizeof(w->assets) + 32];
                        snprintf(path, sizeof(path), "%s/%s", w->assets, statics[i].file);
                        return answer_file(c, path, statics[i].type);
                }
        }
        return web_answer_text(c, MHD_HTTP_NOT_FOUND, NULL, "fiberctl web: no such page\n");
}

/* ------------------------------------------------------------------ start-up ---- */

static bool has_index(const char *dir)
{
        char path[2 * PATH_MAX];

        snprintf(path, sizeof(path), "%s/index.html", dir);
        return access(path, R_OK) == 0;
}

/* The folder of the static files (see the top of this file) into @w->assets.
 * Return: 0; -ENOENT when none holds index.html. */
static int assets_find(Web *w, const char *given)
{
        static const char *const from_build[] = {"/../client/web", "/../../client/web"};
        char exe[PATH_MAX];
        ssize_t n;

        if (given) {
                snprintf(w->assets, sizeof(w->assets), "%s", given);
                return has_index(given) ? 0 : -ENOENT;
        }
        n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                char *slash = strrchr(exe, '/');
                if (slash)
                        *slash = '\0';
                for (size_t i = 0; i < 2; i++) {
                        char dir[PATH_MAX + 32], real[PATH_MAX];
                        snprintf(dir, sizeof(dir), "%s%s", exe, from_build[i]);
                        if (has_index(dir) && realpath(dir, real)) {
                                snprintf(w->assets, sizeof(w->assets), "%s", real);
                                return 0;
                        }
                }
        }
        snprintf(w->assets, sizeof(w->assets), "%s", FIBERCTL_WEB_DIR);
        return has_index(FIBERCTL_WEB_DIR) ? 0 : -ENOENT;
}

/* A listening TCP socket on 127.0.0.1 and a port the kernel picks; its port in
 * @ret_port. Return: the fd, or -errno. */
static int listen_loopback(unsigned *ret_port)
{
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
        socklen_t len = sizeof(sin);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
                return -errno;
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 32) < 0 ||
            getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        *ret_port = ntohs(sin.sin_port);
        return fd;
}

int verb_web(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"assets", required_argument, NULL, 'a'},
                {"chartjs", required_argument, NULL, 'C'},
                {0},
        };
        const char *assets = NULL, *chartjs = NULL;
        Web w = {.ctl = ctl};
        CtlStatus cs;
        sigset_t stop;
        unsigned port = 0;
        char url[128];
        json_t *pong;
        int c, fd, sig, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
                if (c == 'a')
                        assets = optarg;
                else if (c == 'C')
                        chartjs = optarg;
                else
                        return ctl_usage("%s: unknown option or missing argument '%s'", argv[0],
                                         argv[optind - 1]);
        }
        if (optind < argc)
                return ctl_usage("%s takes no arguments, got '%s'", argv[0], argv[optind]);
        if (assets_find(&w, assets) < 0)
                return ctl_error(CTL_USAGE, EX_CONFIG,
                                 "web: no index.html in %s; name the page's folder with "
                                 "--assets DIR (client/web in the source tree)",
                                 w.assets);
        w.chartjs = chartjs ? chartjs : WEB_CHARTJS_DEBIAN;
        if (access(w.chartjs, R_OK) < 0) {
                if (chartjs)
                        return ctl_error(CTL_USAGE, EX_NOINPUT, "web: cannot read %s: %s", chartjs,
                                         strerror(errno));
                fprintf(stderr,
                        "fiberctl: web: %s is missing, so the page has no charts; "
                        "install Debian's libjs-chart.js, or name a copy with "
                        "--chartjs FILE\n",
                        w.chartjs);
                w.chartjs = NULL;
        }
        /* fail now, not on the first page, when fiberd cannot be reached */
        if (ctl_call(ctl, IPC_METHOD_PING, json_array(), &pong, &cs) < 0)
                return ctl_fail_on(&cs, "web");
        json_decref(pong);
        r = token_new(w.token);
        if (r < 0)
                return ctl_error(IPC_INTERNAL, EX_OSERR, "web: getrandom: %s", strerror(-r));
        fd = listen_loopback(&port);
        if (fd < 0)
                return ctl_error(IPC_INTERNAL, EX_OSERR, "web: cannot listen on 127.0.0.1: %s",
                                 strerror(-fd));
        snprintf(cookie_name, sizeof(cookie_name), "%s_%u", WEB_COOKIE, port);
        snprintf(w.origin, sizeof(w.origin), "http://127.0.0.1:%u", port);
        snprintf(w.host[0], sizeof(w.host[0]), "127.0.0.1:%u", port);
        snprintf(w.host[1], sizeof(w.host[1]), "localhost:%u", port);

        /* the server's thread inherits the mask: only this thread takes the signals */
        sigemptyset(&stop);
        sigaddset(&stop, SIGINT);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        w.mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL,
                                 answer, &w, MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_CONNECTION_LIMIT, 32u, MHD_OPTION_CONNECTION_TIMEOUT,
                                 60u, MHD_OPTION_END);
        if (!w.mhd) {
                close(fd);
                return ctl_error(IPC_INTERNAL, EX_OSERR, "web: libmicrohttpd did not start");
        }
        snprintf(url, sizeof(url), "%s/?token=%s", w.origin, w.token);
        if (ctl->json) {
                json_t *j = json_pack("{s:s, s:i, s:s}", "url", url, "port", (int)port, "token",
                                      w.token);
                if (j)
                        ctl_print_json(j);
                json_decref(j);
        } else {
                printf("fiberd's dashboard, as uid %u, on %s\n"
                       "Open this URL in a browser on this machine (Ctrl-C stops):\n\n"
                       "    %s\n\n",
                       (unsigned)getuid(), fiberd_client_path(ctl->client), url);
        }
        fflush(stdout);
        while (sigwait(&stop, &sig) != 0)
                ;
        MHD_stop_daemon(w.mhd);
        if (!ctl->json)
                printf("fiberctl web: stopped (%s)\n", strsignal(sig));
        return 0;
}
