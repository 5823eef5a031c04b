/* SPDX-License-Identifier: MIT */
/*
 * web-api.c — the dashboard's JSON API (`fiberctl web`, web.c): each request below
 * /api/ is one or two calls to fiberd over the user's own connection, and fiberd's
 * answer as JSON. The page's script (client/web/app.js) is its only intended client.
 *
 *   GET  /api/ping               ping, plus the socket and the uid the page speaks as
 *   GET  /api/stats              stats (counts, latency quantiles, groups, classes)
 *   GET  /api/metrics            metrics: the OpenMetrics text, whose histograms the
 *                                page draws (text/plain)
 *   GET  /api/jobs?state=S&plugin=P&limit=N
 *                                the first page of job.list, newest first (limit 100
 *                                by default, at most IPC_LIST_PAGE_MAX)
 *   GET  /api/job?id=N           {"job": job.status, "logs": job.logs}
 *   GET  /api/schedules          schedule.list
 *   POST /api/cancel?id=N        job.cancel
 *   POST /api/retry?id=N         job.retry of that one job
 *
 * fiberd's errors keep their code and message, {"error": {"code", "message"}}, under an
 * HTTP status that says the same (NOT_FOUND 404, PERMISSION_DENIED 403, ...); fiberd
 * unreachable is 503. Parameters come from the query string only, so a POST has no
 * body to parse.
 *
 * The connection: calls wait at most WEB_CALL_TIMEOUT_MS for their answer; a connection
 * that failed (fiberd restarted, a timeout) is dropped and the next request connects
 * again, so the dashboard outlives a restart of fiberd.
 */
#include "client/web.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/convert.h"

/* ------------------------------------------------------------------ answers ---- */

/* Every answer of the dashboard, its pages' (web.c) as the API's, goes out here, with
 * the security headers. */

enum MHD_Result web_answer(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp)
{
        enum MHD_Result r;

        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
        MHD_add_response_header(resp, "X-Frame-Options", "DENY");
        MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
        MHD_add_response_header(resp, "Content-Security-Policy",
                                "default-src 'self'; script-src 'self'; style-src 'self'; "
                                "img-src 'self' data:; connect-src 'self'; object-src 'none'; "
                                "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
        r = MHD_queue_response(c, status, resp);
        MHD_destroy_response(resp);
        return r;
}

enum MHD_Result web_answer_text(struct MHD_Connection *c, unsigned status, const char *type,
                                const char *text)
{
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);

        if (resp)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                        type ? type : "text/plain; charset=utf-8");
        return web_answer(c, status, resp);
}

/* One call to fiberd, as ctl_call() but bounded in time, and dropping a connection
 * that failed. Return: 0 and *@ret (new reference), or -errno with @cs filled. */
static int web_call(Web *w, const char *method, json_t *params, json_t **ret, CtlStatus *cs)
{
        FiberdClientReply *resp;
        FiberdClientError err;
        uint32_t msgid;
        int r = ctl_send(w->ctl, method, params, &msgid, cs);

        if (r < 0)
                return r;
        cs->step = CTL_STEP_ANSWER;
        r = fiberd_client_wait_reply(w->ctl->client, msgid, WEB_CALL_TIMEOUT_MS, &resp, &err);
        if (r < 0) {
                ctl_status(&cs->st, &err);
                w->ctl->client = fiberd_client_free(w->ctl->client);
                return r;
        }
        r = ctl_response(resp, ret, &cs->st);
        fiberd_client_reply_free(resp);
        return r;
}

static enum MHD_Result answer_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        struct MHD_Response *resp;

        json_decref(j);
        if (!text)
                return web_answer_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, NULL, "out of memory\n");
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json; charset=utf-8");
        return web_answer(c, status, resp);
}

/* The HTTP status that says what fiberd's error @code says. */
static unsigned http_status_of(const CtlStatus *cs)
{
        static const struct {
                const char *code;
                unsigned status;
        } map[] = {
                {IPC_NOT_FOUND, MHD_HTTP_NOT_FOUND},
                {IPC_PERMISSION_DENIED, MHD_HTTP_FORBIDDEN},
                {IPC_INVALID_ARGUMENT, MHD_HTTP_BAD_REQUEST},
                {IPC_FAILED_PRECONDITION, MHD_HTTP_CONFLICT},
                {IPC_ALREADY_EXISTS, MHD_HTTP_CONFLICT},
                {IPC_OVERLOADED, MHD_HTTP_TOO_MANY_REQUESTS},
                {IPC_UNAVAILABLE, MHD_HTTP_SERVICE_UNAVAILABLE},
                {IPC_DEADLINE_EXCEEDED, MHD_HTTP_GATEWAY_TIMEOUT},
        };

        if (cs->step == CTL_STEP_CONNECT)
                return MHD_HTTP_SERVICE_UNAVAILABLE;
        for (size_t i = 0; cs->st.code && i < sizeof(map) / sizeof(map[0]); i++)
                if (strcmp(cs->st.code, map[i].code) == 0)
                        return map[i].status;
        return MHD_HTTP_BAD_GATEWAY;
}

static enum MHD_Result answer_error(struct MHD_Connection *c, const CtlStatus *cs)
{
        return answer_json(c, http_status_of(cs),
                           json_pack("{s:{s:s, s:s}}", "error", "code",
                                     cs->st.code ? cs->st.code : IPC_INTERNAL, "message",
                                     cs->st.message));
}

static enum MHD_Result answer_bad(struct MHD_Connection *c, unsigned status, const char *message)
{
        return answer_json(c, status,
                           json_pack("{s:{s:s, s:s}}", "error", "code", IPC_INVALID_ARGUMENT,
                                     "message", message));
}

/* The call's result as the answer, or its error. */
static enum MHD_Result answer_call(Web *w, struct MHD_Connection *c, const char *method,
                                   json_t *params)
{
        json_t *res;
        CtlStatus cs;

        if (!params)
                return answer_bad(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        if (web_call(w, method, params, &res, &cs) < 0)
                return answer_error(c, &cs);
        return answer_json(c, MHD_HTTP_OK, res);
}

static const char *query(struct MHD_Connection *c, const char *key)
{
        const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
        return v && *v ? v : NULL;
}

static enum MHD_Result api_ping(Web *w, struct MHD_Connection *c)
{
        json_t *res;
        CtlStatus cs;

        if (web_call(w, IPC_METHOD_PING, json_array(), &res, &cs) < 0)
                return answer_error(c, &cs);
        json_object_set_new(res, "socket", json_string(fiberd_client_path(w->ctl->client)));
        json_object_set_new(res, "uid", json_integer((json_int_t)getuid()));
        json_object_set_new(res, "charts", json_boolean(w->chartjs != NULL));
        return answer_json(c, MHD_HTTP_OK, res);
}

static enum MHD_Result api_metrics(Web *w, struct MHD_Connection *c)
{
        struct MHD_Response *resp;
        json_t *res;
        CtlStatus cs;
        char *text;

        if (web_call(w, IPC_METHOD_METRICS, json_array(), &res, &cs) < 0)
                return answer_error(c, &cs);
        text = json_is_string(res) ? strdup(json_string_value(res)) : NULL;
        json_decref(res);
        if (!text)
                return answer_bad(c, MHD_HTTP_BAD_GATEWAY, "metrics did not answer text");
        resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
                free(text);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        return web_answer(c, MHD_HTTP_OK, resp);
}

static enum MHD_Result api_jobs(Web *w, struct MHD_Connection *c)
{
        const char *state = query(c, "state"), *plugin = query(c, "plugin"),
                   *limit_s = query(c, "limit");
        uint64_t limit = 100;
        json_t *filter;

        if (limit_s && (!ctl_parse_id(limit_s, &limit) || limit > IPC_LIST_PAGE_MAX))
                return answer_bad(c, MHD_HTTP_BAD_REQUEST, "limit: a number from 1 to 1000");
        filter = json_pack("{s:n, s:I}", IPC_FILTER_CURSOR, IPC_FILTER_LIMIT, (json_int_t)limit);
        if (filter && state)
                json_object_set_new(filter, IPC_FILTER_STATE, json_string(state));
        if (filter && plugin)
                json_object_set_new(filter, IPC_FILTER_PLUGIN, json_string(plugin));
        return answer_call(w, c, IPC_METHOD_JOB_LIST, filter ? json_pack("[o]", filter) : NULL);
}

/* The job id of ?id=, or 0 (answered: 400) when there is none. */
static uint64_t job_id(struct MHD_Connection *c)
{
        uint64_t id;

        if (!ctl_parse_id(query(c, "id") ? query(c, "id") : "", &id))
                return 0;
        return id;
}

static enum MHD_Result api_job(Web *w, struct MHD_Connection *c, uint64_t id)
{
        json_t *job, *logs;
        CtlStatus cs;

        if (web_call(w, IPC_METHOD_JOB_STATUS, json_pack("[I]", (json_int_t)id), &job, &cs) < 0)
                return answer_error(c, &cs);
        /* the logs are an extra: a fiberd without job.logs still shows the job */
        if (web_call(w, IPC_METHOD_JOB_LOGS, json_pack("[I]", (json_int_t)id), &logs, &cs) < 0)
                logs = json_null();
        return answer_json(c, MHD_HTTP_OK, json_pack("{s:o, s:o}", "job", job, "logs", logs));
}

enum MHD_Result web_api(Web *w, struct MHD_Connection *c, const char *method, const char *path)
{
        bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
        static const char *const gets[] = {"ping", "stats", "metrics", "jobs", "job", "schedules"};
        static const char *const posts[] = {"cancel", "retry"};
        bool is_get = false, is_post = false;
        uint64_t id = 0;

        for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++)
                is_get = is_get || strcmp(path, gets[i]) == 0;
        for (size_t i = 0; i < sizeof(posts) / sizeof(posts[0]); i++)
                is_post = is_post || strcmp(path, posts[i]) == 0;
        if (!is_get && !is_post)
                return answer_bad(c, MHD_HTTP_NOT_FOUND, "no such API request");
        if (is_post != post) {
                struct MHD_Response *resp =
                        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
                if (resp)
                        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW,
                                                is_post ? "POST" : "GET, HEAD");
                return web_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
        }
        if (strcmp(path, "job") == 0 || is_post) {
                id = job_id(c);
                if (!id)
                        return answer_bad(c, MHD_HTTP_BAD_REQUEST,
                                          "id: a job id (a positive integer) is needed");
        }
        if (strcmp(path, "ping") == 0)
                return api_ping(w, c);
        if (strcmp(path, "stats") == 0)
                return answer_call(w, c, IPC_METHOD_STATS, json_array());
        if (strcmp(path, "metrics") == 0)
                return api_metrics(w, c);
        if (strcmp(path, "jobs") == 0)
                return api_jobs(w, c);
        if (strcmp(path, "job") == 0)
                return api_job(w, c, id);
        if (strcmp(path, "schedules") == 0)
                return answer_call(w, c, IPC_METHOD_SCHEDULE_LIST, json_array());
        if (strcmp(path, "cancel") == 0)
                return answer_call(w, c, IPC_METHOD_JOB_CANCEL, json_pack("[I]", (json_int_t)id));
        return answer_call(w, c, IPC_METHOD_JOB_RETRY, json_pack("[[I]]", (json_int_t)id));
}
