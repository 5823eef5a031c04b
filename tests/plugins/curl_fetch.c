/* SPDX-License-Identifier: MIT */
/*
 * curl_fetch.c — a test plugin that links libcurl and uses its easy interface exactly
 * as a threaded program would (curl_easy_perform blocks in poll(), connect(), recv()).
 * fiberd's hooks reach into libcurl, so each fetch parks its job's fiber, not a worker.
 * {"url"} → {"status": HTTP status, "body": the body (at most 64 KiB)}.
 */
#include "plugins/fiberd/plugin.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

typedef struct Body {
        char buf[65536];
        size_t len;
} Body;

static size_t on_data(char *data, size_t size, size_t n, void *arg)
{
        Body *b = arg;
        size_t len = size * n, room = sizeof(b->buf) - 1 - b->len;
        memcpy(b->buf + b->len, data, len < room ? len : room);
        b->len += len < room ? len : room;
        b->buf[b->len] = 0;
        return len;
}

static int curl_fetch_init(const FiberdHost *host, char *why, size_t why_size)
{
        (void)host;
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                snprintf(why, why_size, "curl_global_init failed");
                return -EIO;
        }
        return 0;
}

static void curl_fetch_fini(const FiberdHost *host)
{
        (void)host;
        curl_global_cleanup();
}

static int curl_fetch_run(FiberdJob *job, const FiberdHost *host)
{
        char url[512];
        long status = 0;
        Body *body;
        int r = host->arg_str(job, "url", url, sizeof(url));

        if (r < 0)
                return r;
        body = calloc(1, sizeof(*body));
        CURL *h = curl_easy_init();
        if (!body || !h) {
                free(body);
                return -ENOMEM;
        }
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 20000L);
        CURLcode rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        if (rc != CURLE_OK) {
                r = host->fail(job, host->cancelled(job) ? -ECANCELED : -EIO, "curl: %s",
                               curl_easy_strerror(rc));
                free(body);
                return r;
        }
        host->result_int(job, "status", status);
        r = host->result_str(job, "body", body->buf);
        free(body);
        return r;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "curl_fetch",
        .version = "1.0",
        .description = "test: fetches {\"url\"} with libcurl's easy interface",
        .init = curl_fetch_init,
        .fini = curl_fetch_fini,
        .run = curl_fetch_run,
};
