/* SPDX-License-Identifier: MIT */
/*
 * web.h — what `fiberctl web`'s two files share (client/): the server's state (web.c:
 * the loopback HTTP server, its token, the static pages) and the JSON API that speaks
 * to fiberd for the page (web-api.c). Internal to the fiberctl binary.
 *
 * Threads: libmicrohttpd answers every request on one thread of its own
 * (MHD_USE_INTERNAL_POLLING_THREAD, no thread per connection), so the one fiberd
 * connection in Web.ctl is only ever used from that thread; the main thread waits for
 * a signal and then stops the server.
 */
#ifndef FIBERD_CLIENT_WEB_H
#define FIBERD_CLIENT_WEB_H

#include <stdbool.h>

#include <microhttpd.h>

#include "client/fiberctl.h"

/* 128 bits of getrandom(2), in hex */
#define WEB_TOKEN_BYTES 16
#define WEB_TOKEN_HEX (2 * WEB_TOKEN_BYTES)
/* the cookie that carries the token once the page is open */
#define WEB_COOKIE "fiberd_web_token"
/* the header a script may send it in instead (a cross-site page cannot set it) */
#define WEB_TOKEN_HEADER "X-Fiberd-Token"
/* how long the server waits for fiberd's answer to one call, in ms */
#define WEB_CALL_TIMEOUT_MS 10000

typedef struct Web {
        Ctl *ctl;                      /* the user's connection to fiberd (their own rights) */
        char token[WEB_TOKEN_HEX + 1]; /* required on every request */
        char origin[64];               /* "http://127.0.0.1:PORT": the URL printed */
        char host[2][40];              /* the Host headers (and Origins, after http://) accepted:
                              * 127.0.0.1:PORT, localhost:PORT */
        char assets[4096];             /* the folder of index.html, app.js, style.css */
        const char *chartjs;           /* Chart.js (Debian's libjs-chart.js), or NULL */
        struct MHD_Daemon *mhd;
} Web;

/*
 * web_api - answer the request for @path (below "/api/", e.g. "stats") with @method
 * (GET or POST: the caller checked the token and, for POST, the origin), by calling
 * fiberd over @w->ctl. JSON answers; fiberd's errors become HTTP statuses with
 * {"error": {"code", "message"}}. Context: libmicrohttpd's thread.
 */
enum MHD_Result web_api(Web *w, struct MHD_Connection *c, const char *method, const char *path);

/*
 * web_answer - queue @resp (taken: destroyed here) with @status, after adding the
 * headers every answer carries (no caching, no framing, no sniffing, the content
 * security policy). Return: libmicrohttpd's verdict; MHD_NO when @resp is NULL.
 */
enum MHD_Result web_answer(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp);

/* web_answer_text - a short answer of @type (NULL: text/plain) from a static string. */
enum MHD_Result web_answer_text(struct MHD_Connection *c, unsigned status, const char *type,
                                const char *text);

#endif /* FIBERD_CLIENT_WEB_H */
