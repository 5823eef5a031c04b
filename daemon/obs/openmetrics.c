/* SPDX-License-Identifier: MIT */
/*
 * openmetrics.c — the OpenMetrics text of openmetrics.h, written with stdio into an
 * open_memstream(3) buffer.
 *
 * The format's rules this file keeps (OpenMetrics 1.0, "Text format"):
 *  - a family's lines are contiguous: # TYPE, # HELP, # UNIT, then its samples, so each
 *    family walks the plugins (or groups, or histograms) itself;
 *  - a family with a unit has a name ending in _<unit> (seconds, bytes);
 *  - counters are named without _total and sampled with it; histograms have cumulative
 *    _bucket samples ending at le="+Inf" (equal to _count), then _count and _sum;
 *  - label values escape backslash, double quote and newline;
 *  - the last line is "# EOF".
 * The job figures are read under one hold of the job table's lock, so the per plugin
 * counters and histograms are consistent with each other.
 *
 * Durations are exported in seconds, exactly: nanoseconds printed as S.NNNNNNNNN. The
 * histograms' le bounds are the 1-2-5 series from 1 µs to 1000 s, which are edges of
 * duration_histogram.h's buckets, so each _bucket count is exact.
 */
#include "daemon/obs/openmetrics.h"
#include "daemon/daemon.h"
#include "daemon/obs/procstats.h"
#include "daemon/plugin/opener.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* # TYPE, # HELP and, when @unit is not NULL, # UNIT of family @name. */
static void family(FILE *f, const char *name, const char *type, const char *unit, const char *help)
{
        fprintf(f, "# TYPE %s %s\n# HELP %s %s\n", name, type, name, help);
        if (unit)
                fprintf(f, "# UNIT %s %s\n", name, unit);
}

/* A label value, escaped (the text inside the quotes). */
static void label_value(FILE *f, const char *s)
{
        for (; *s; s++) {
                if (*s == '\\' || *s == '"')
                        fprintf(f, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
}

/* name{k1="v1"[,k2="v2"]} — @k2 NULL for one label, @k1 NULL for none */
static void sample_name(FILE *f, const char *name, const char *k1, const char *v1, const char *k2,
                        const char *v2)
{
        fputs(name, f);
        if (!k1)
                return;
        fprintf(f, "{%s=\"", k1);
        label_value(f, v1);
        if (k2) {
                fprintf(f, "\",%s=\"", k2);
                label_value(f, v2);
        }
        fputs("\"}", f);
}

static void sample_uint(FILE *f, const char *name, const char *k1, const char *v1, const char *k2,
                        const char *v2, uint64_t v)
{
        sample_name(f, name, k1, v1, k2, v2);
        fprintf(f, " %llu\n", (unsigned long long)v);
}

static void print_seconds(FILE *f, uint64_t ns)
{
        fprintf(f, "%llu.%09llu", (unsigned long long)(ns / NSEC_PER_SEC),
                (unsigned long long)(ns % NSEC_PER_SEC));
}

static void sample_seconds(FILE *f, const char *name, const char *k1, const char *v1,
                           const char *k2, const char *v2, uint64_t ns)
{
        sample_name(f, name, k1, v1, k2, v2);
        fputc(' ', f);
        print_seconds(f, ns);
        fputc('\n', f);
}

/* ---- jobs ---------------------------------------------------------------------------- */

static void jobs_by_plugin(FILE *f, const JobTable *t)
{
        static const struct {
                const char *state;
                size_t offset;
        } gauges[] = {{IPC_STATE_QUEUED, offsetof(JobCounts, queued)},
                      {IPC_STATE_RUNNING, offsetof(JobCounts, running)},
                      {IPC_STATE_SCHEDULED, offsetof(JobCounts, scheduled)},
                      {IPC_STATE_WAITING, offsetof(JobCounts, waiting)},
                      {IPC_STATE_RETRYING, offsetof(JobCounts, retrying)}},
          finals[] = {{IPC_STATE_DONE, offsetof(JobCounts, done)},
                      {IPC_STATE_FAILED, offsetof(JobCounts, failed)},
                      {IPC_STATE_CANCELLED, offsetof(JobCounts, cancelled)},
                      {IPC_STATE_DEAD, offsetof(JobCounts, dead)}};

        family(f, "fiberd_jobs_submitted", "counter", NULL, "Jobs accepted by job.submit.");
        for (size_t i = 0; i < t->nplugins; i++)
                sample_uint(f, "fiberd_jobs_submitted_total", "plugin", t->plugins[i].name, NULL,
                            NULL, t->plugins[i].counts.submitted);
        family(f, "fiberd_jobs", "gauge", NULL,
               "Jobs queued, running, scheduled, waiting or retrying now.");
        for (size_t i = 0; i < t->nplugins; i++)
                for (size_t s = 0; s < ELEMENTSOF(gauges); s++)
                        sample_uint(f, "fiberd_jobs", "plugin", t->plugins[i].name, "state",
                                    gauges[s].state,
                                    *(const uint64_t *)((const char *)&t->plugins[i].counts +
                                                        gauges[s].offset));
        family(f, "fiberd_jobs_finished", "counter", NULL,
               "Jobs that reached a final state (done, failed, cancelled, dead).");
        for (size_t i = 0; i < t->nplugins; i++)
                for (size_t s = 0; s < ELEMENTSOF(finals); s++)
                        sample_uint(f, "fiberd_jobs_finished_total", "plugin", t->plugins[i].name,
                                    "state", finals[s].state,
                                    *(const uint64_t *)((const char *)&t->plugins[i].counts +
                                                        finals[s].offset));
        family(f, "fiberd_jobs_detached", "gauge", NULL,
               "Ended jobs whose code still runs: it did not return to a yield point after "
               "a cancel or timeout; each holds a worker thread.");
        for (size_t i = 0; i < t->nplugins; i++)
                sample_uint(f, "fiberd_jobs_detached", "plugin", t->plugins[i].name, NULL, NULL,
                            t->plugins[i].counts.detached);
        family(f, "fiberd_jobs_held", "gauge", NULL,
               "Queued jobs held now by a pause of their class or plugin, or by a class's "
               "or plugin's max_running (also counted queued).");
        for (size_t i = 0; i < t->nplugins; i++)
                sample_uint(f, "fiberd_jobs_held", "plugin", t->plugins[i].name, NULL, NULL,
                            dispatch_count_locked(&t->dispatch, 0, t->plugins[i].name, true));
        family(f, "fiberd_job_stalls", "counter", NULL,
               "Stall reports about the plugin's job fibers (ran too long without switching).");
        for (size_t i = 0; i < t->nplugins; i++)
                sample_uint(f, "fiberd_job_stalls_total", "plugin", t->plugins[i].name, NULL, NULL,
                            t->plugins[i].stalls);
}

/* The le bounds: 1, 2, 5 × 10^k ns from 1 µs to 1000 s. */
static size_t le_bounds(uint64_t *v, size_t max)
{
        size_t n = 0;

        for (uint64_t p = NSEC_PER_USEC; p <= 1000 * NSEC_PER_SEC && n + 3 <= max; p *= 10) {
                v[n++] = p;
                if (p < 1000 * NSEC_PER_SEC) {
                        v[n++] = 2 * p;
                        v[n++] = 5 * p;
                }
        }
        return n;
}

static void histogram_samples(FILE *f, const char *name, const JobLatency *e,
                              const DurationHistogram *h)
{
        uint64_t le[32];
        size_t n = le_bounds(le, ELEMENTSOF(le));
        char sample[96];

        snprintf(sample, sizeof(sample), "%s_bucket", name);
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s{plugin=\"", sample);
                label_value(f, e->plugin);
                fputs("\",class=\"", f);
                label_value(f, e->class_name);
                fputs("\",le=\"", f);
                print_seconds(f, le[i]);
                fprintf(f, "\"} %llu\n", (unsigned long long)duration_histogram_le(h, le[i]));
        }
        fprintf(f, "%s{plugin=\"", sample);
        label_value(f, e->plugin);
        fputs("\",class=\"", f);
        label_value(f, e->class_name);
        fprintf(f, "\",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
        snprintf(sample, sizeof(sample), "%s_count", name);
        sample_uint(f, sample, "plugin", e->plugin, "class", e->class_name, h->count);
        snprintf(sample, sizeof(sample), "%s_sum", name);
        sample_seconds(f, sample, "plugin", e->plugin, "class", e->class_name, h->sum_ns);
}

static void job_latency(FILE *f, const JobLatencies *l)
{
        family(f, "fiberd_job_queue_wait_seconds", "histogram", "seconds",
               "Time from job.submit to the job's start, per plugin and job class.");
        for (size_t i = 0; i < l->n; i++)
                histogram_samples(f, "fiberd_job_queue_wait_seconds", l->v[i],
                                  &l->v[i]->queue_wait);
        family(f, "fiberd_job_run_seconds", "histogram", "seconds",
               "Time from the job's start to its final state, per plugin and job class.");
        for (size_t i = 0; i < l->n; i++)
                histogram_samples(f, "fiberd_job_run_seconds", l->v[i], &l->v[i]->run_time);
        family(f, "fiberd_job_queue_wait_max_seconds", "gauge", "seconds",
               "The longest queue wait since start, per plugin and job class.");
        for (size_t i = 0; i < l->n; i++)
                sample_seconds(f, "fiberd_job_queue_wait_max_seconds", "plugin", l->v[i]->plugin,
                               "class", l->v[i]->class_name, l->v[i]->queue_wait.max_ns);
        family(f, "fiberd_job_run_max_seconds", "gauge", "seconds",
               "The longest run time since start, per plugin and job class.");
        for (size_t i = 0; i < l->n; i++)
                sample_seconds(f, "fiberd_job_run_max_seconds", "plugin", l->v[i]->plugin, "class",
                               l->v[i]->class_name, l->v[i]->run_time.max_ns);
}

/* ---- scheduling groups and classes ------------------------------------------------ */

typedef struct GroupRow {
        char name[24];
        SchedGroupStats s;
} GroupRow;

/* The server group, then every job group, as in stats. */
static GroupRow *group_rows(Daemon *d, size_t *ret_n)
{
        unsigned ngroups = sched_groups(d->job_sched);
        GroupRow *rows = calloc(1 + ngroups, sizeof(*rows));

        if (!rows)
                return NULL;
        snprintf(rows[0].name, sizeof(rows[0].name), "%s", IPC_GROUP_SERVER);
        sched_group_stats(d->server_group, &rows[0].s);
        for (unsigned i = 0; i < ngroups; i++) {
                snprintf(rows[1 + i].name, sizeof(rows[1 + i].name), IPC_GROUP_JOBS_FMT, i);
                sched_group_stats(sched_group_at(d->job_sched, i), &rows[1 + i].s);
        }
        *ret_n = 1 + ngroups;
        return rows;
}

/* A gauge or counter family with one sample per group: @sample prints field @field. */
#define GROUP_FAMILY(f, rows, n, fam, type, unit, help, sample, field)                             \
        do {                                                                                       \
                family(f, fam, type, unit, help);                                                  \
                for (size_t i_ = 0; i_ < (n); i_++)                                                \
                        sample(f, fam, "group", (rows)[i_].name, NULL, NULL, (rows)[i_].s.field);  \
        } while (0)

static void groups(FILE *f, const GroupRow *rows, size_t n)
{
        GROUP_FAMILY(f, rows, n, "fiberd_group_workers", "gauge", NULL,
                     "Worker threads of the scheduling group.", sample_uint, workers);
        GROUP_FAMILY(f, rows, n, "fiberd_group_run_queue_depth", "gauge", NULL,
                     "Fibers ready to run now in the group's run queues.", sample_uint, runq_depth);
        GROUP_FAMILY(f, rows, n, "fiberd_group_fibers_alive", "gauge", NULL,
                     "Fibers that exist now in the group.", sample_uint, fibers_alive);
        GROUP_FAMILY(f, rows, n, "fiberd_group_ready_to_run_p50_seconds", "gauge", "seconds",
                     "Median time from made ready to running (recent samples).", sample_seconds,
                     ready_to_run.p50_ns);
        GROUP_FAMILY(f, rows, n, "fiberd_group_ready_to_run_p99_seconds", "gauge", "seconds",
                     "99th percentile of the time from made ready to running.", sample_seconds,
                     ready_to_run.p99_ns);
        GROUP_FAMILY(f, rows, n, "fiberd_group_ready_to_run_max_seconds", "gauge", "seconds",
                     "Longest time from made ready to running.", sample_seconds,
                     ready_to_run.max_ns);
        family(f, "fiberd_group_context_switches", "counter", NULL,
               "Fiber context switches in the group.");
        for (size_t i = 0; i < n; i++)
                sample_uint(f, "fiberd_group_context_switches_total", "group", rows[i].name, NULL,
                            NULL, rows[i].s.context_switches);
        family(f, "fiberd_group_stalls", "counter", NULL,
               "Stall reports: a fiber ran too long without switching.");
        for (size_t i = 0; i < n; i++)
                sample_uint(f, "fiberd_group_stalls_total", "group", rows[i].name, NULL, NULL,
                            rows[i].s.stalls);
        family(f, "fiberd_group_rescues", "counter", NULL,
               "Spare workers started for fibers stuck behind a blocked worker.");
        for (size_t i = 0; i < n; i++)
                sample_uint(f, "fiberd_group_rescues_total", "group", rows[i].name, NULL, NULL,
                            rows[i].s.rescues);
}

static void classes(FILE *f, const Scheduler *s)
{
        unsigned n = sched_classes(s);
        SchedClassStats *cs = calloc(n ? n : 1, sizeof(*cs));

        if (!cs)
                return; /* the families are optional; the caller checks the stream */
        for (unsigned i = 0; i < n; i++)
                if (sched_class_stats(s, i, &cs[i]) < 0)
                        snprintf(cs[i].name, sizeof(cs[i].name), "%s",
                                 sched_class_name(s, i) ? sched_class_name(s, i) : "?");
        family(f, "fiberd_class_runtime_seconds", "counter", "seconds",
               "CPU time the job class's fibers ran on job workers.");
        for (unsigned i = 0; i < n; i++) {
                sample_name(f, "fiberd_class_runtime_seconds_total", "class", cs[i].name, NULL,
                            NULL);
                fputc(' ', f);
                print_seconds(f, cs[i].runtime_ns);
                fputc('\n', f);
        }
        family(f, "fiberd_class_queued", "gauge", NULL, "The job class's fibers ready to run now.");
        for (unsigned i = 0; i < n; i++)
                sample_uint(f, "fiberd_class_queued", "class", cs[i].name, NULL, NULL,
                            cs[i].queued);
        free(cs);
}

/* ---- server, build and process ----------------------------------------------------- */

static void server(FILE *f, Daemon *d)
{
        ServerStats ss;

        server_stats(d->server, &ss);
        family(f, "fiberd_connections", "gauge", NULL, "Client connections open now.");
        sample_uint(f, "fiberd_connections", NULL, NULL, NULL, NULL, ss.connections);
        family(f, "fiberd_connections_accepted", "counter", NULL, "Client connections accepted.");
        sample_uint(f, "fiberd_connections_accepted_total", NULL, NULL, NULL, NULL, ss.accepted);
        family(f, "fiberd_requests", "counter", NULL, "Requests received.");
        sample_uint(f, "fiberd_requests_total", NULL, NULL, NULL, NULL, ss.requests);
        family(f, "fiberd_requests_inline", "counter", NULL,
               "Requests run on their connection's reader, without a fiber of their own.");
        sample_uint(f, "fiberd_requests_inline_total", NULL, NULL, NULL, NULL, ss.requests_inline);
        family(f, "fiberd_requests_in_flight", "gauge", NULL, "Requests being handled now.");
        sample_uint(f, "fiberd_requests_in_flight", NULL, NULL, NULL, NULL, ss.in_flight);
        family(f, "fiberd_answer_writes", "counter", NULL,
               "Writes that carried answers to clients (one carries every answer ready).");
        sample_uint(f, "fiberd_answer_writes_total", NULL, NULL, NULL, NULL, ss.answer_writes);
        family(f, "fiberd_user_throttled", "counter", NULL,
               "Requests held back because their user had max_in_flight_per_user in flight.");
        sample_uint(f, "fiberd_user_throttled_total", NULL, NULL, NULL, NULL, ss.user_throttled);
        family(f, "fiberd_protocol_errors", "counter", NULL,
               "Malformed, oversized or non-MessagePack input from clients.");
        sample_uint(f, "fiberd_protocol_errors_total", NULL, NULL, NULL, NULL, ss.protocol_errors);
        OpenerStats os;
        opener_stats(&os);
        family(f, "fiberd_opens", "counter", NULL,
               "Opens jobs asked for, whatever their outcome: inline in the job's worker, or by an "
               "opener thread.");
        sample_uint(f, "fiberd_opens_total", "where", "inline", NULL, NULL, os.inline_opens);
        sample_uint(f, "fiberd_opens_total", "where", "opener", NULL, NULL, os.thread_opens);
        if (d->store) {
                StoreHealth h;
                store_health(d->store, &h);
                family(f, "fiberd_store_failing", "gauge", NULL,
                       "1 while the job store cannot write (a full disk): writes are held and "
                       "retried, submissions refused.");
                sample_uint(f, "fiberd_store_failing", NULL, NULL, NULL, NULL, h.failing);
                family(f, "fiberd_store_pending_writes", "gauge", NULL,
                       "Writes the job store holds in memory until it can write again.");
                sample_uint(f, "fiberd_store_pending_writes", NULL, NULL, NULL, NULL,
                            h.pending_writes);
        }
        family(f, "fiberd_uptime_seconds", "gauge", "seconds", "Time since fiberd started.");
        sample_seconds(f, "fiberd_uptime_seconds", NULL, NULL, NULL, NULL,
                       sched_now_ns() - d->start_ns);
}

/* The release as a label, the *_build_info convention (prometheus_build_info,
 * node_exporter_build_info): a gauge whose value is always 1. */
static void build_info(FILE *f)
{
        family(f, "fiberd_build_info", "gauge", NULL,
               "fiberd's version (the label); the value is always 1.");
        sample_uint(f, "fiberd_build_info", "version", FIBERD_VERSION, NULL, NULL, 1);
}

/*
 * The process families every Prometheus client library exports under these names
 * (client_golang's process collector), so the usual dashboards and alerts read
 * fiberd's without a rename. CPU time is user plus system, as theirs.
 */
static void process(FILE *f)
{
        ProcStats ps;

        procstats_read(&ps);
        family(f, "process_cpu_seconds", "counter", "seconds",
               "Total user and system CPU time spent in seconds.");
        sample_seconds(f, "process_cpu_seconds_total", NULL, NULL, NULL, NULL,
                       ps.user_cpu_ns + ps.system_cpu_ns);
        family(f, "process_resident_memory_bytes", "gauge", "bytes",
               "Resident memory size in bytes.");
        sample_uint(f, "process_resident_memory_bytes", NULL, NULL, NULL, NULL, ps.rss_bytes);
        family(f, "process_open_fds", "gauge", NULL, "Number of open file descriptors.");
        sample_uint(f, "process_open_fds", NULL, NULL, NULL, NULL, ps.open_fds);
        family(f, "process_max_fds", "gauge", NULL,
               "Maximum number of open file descriptors (RLIMIT_NOFILE).");
        sample_uint(f, "process_max_fds", NULL, NULL, NULL, NULL, ps.max_fds);
        family(f, "process_start_time_seconds", "gauge", "seconds",
               "Start time of the process since unix epoch in seconds.");
        sample_seconds(f, "process_start_time_seconds", NULL, NULL, NULL, NULL, ps.start_time_ns);
}

/*
 * The same exposition in Prometheus's text format 0.0.4, derived line by line from the
 * OpenMetrics text: the samples are the same; a counter's # TYPE and # HELP name its
 * _total sample (family() writes TYPE before HELP, so the type is known by then); no
 * # UNIT, no # EOF. @om is NUL-terminated; @ret malloc'd.
 */
static int to_prometheus_text(const char *om, char **ret, size_t *ret_len)
{
        char *buf = NULL;
        size_t len = 0;
        bool counter = false;
        FILE *f = open_memstream(&buf, &len);

        if (!f)
                return -ENOMEM;
        for (const char *line = om; *line;) {
                const char *eol = strchrnul(line, '\n');
                int n = (int)(eol - line);
                bool type = !strncmp(line, "# TYPE ", 7), help = !strncmp(line, "# HELP ", 7);
                const char *name = type || help ? line + 7 : line;
                const char *sp = type || help ? memchr(name, ' ', (size_t)(eol - name)) : NULL;

                if (!strncmp(line, "# UNIT ", 7) || !strncmp(line, "# EOF", 5)) {
                        /* Prometheus's text format has neither */
                } else if (sp && type) {
                        counter = eol - sp == 8 && !strncmp(sp, " counter", 8);
                        fprintf(f, "# TYPE %.*s%s%.*s\n", (int)(sp - name), name,
                                counter ? "_total" : "", (int)(eol - sp), sp);
                } else if (sp && counter && help) {
                        fprintf(f, "# HELP %.*s_total%.*s\n", (int)(sp - name), name,
                                (int)(eol - sp), sp);
                } else {
                        fprintf(f, "%.*s\n", n, line);
                }
                line = *eol ? eol + 1 : eol;
        }
        if (ferror(f) | (fclose(f) != 0)) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}

int openmetrics_render(Daemon *d, bool prometheus, char **ret, size_t *ret_len)
{
        char *buf = NULL;
        size_t len = 0, ngroups = 0;
        GroupRow *rows = group_rows(d, &ngroups);
        FILE *f;
        int r = 0;

        if (!rows)
                return -ENOMEM;
        f = open_memstream(&buf, &len);
        if (!f) {
                free(rows);
                return -ENOMEM;
        }
        jobtable_lock(&d->jobs);
        jobs_by_plugin(f, &d->jobs);
        job_latency(f, &d->jobs.latency);
        jobtable_unlock(&d->jobs);
        groups(f, rows, ngroups);
        classes(f, d->job_sched);
        server(f, d);
        build_info(f);
        process(f);
        fputs("# EOF\n", f);
        if (ferror(f))
                r = -ENOMEM;
        if (fclose(f) != 0)
                r = -ENOMEM;
        free(rows);
        if (r < 0) {
                free(buf);
                return r;
        }
        if (prometheus) {
                r = to_prometheus_text(buf, ret, ret_len);
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_len = len;
        return 0;
}
