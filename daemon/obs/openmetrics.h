/* SPDX-License-Identifier: MIT */
/*
 * openmetrics.h — the `metrics` method's text: fiberd's figures in the OpenMetrics text
 * exposition format (https://openmetrics.io, version 1.0.0), which Prometheus, its
 * node_exporter textfile collector and most scrapers read.
 *
 * What it holds (PROTOCOL.md, "metrics", lists every family): jobs by plugin and state,
 * per plugin and class histograms of queue wait and run time, the scheduling groups'
 * workers, run-queue depth, ready-to-run latency, stalls and rescues, the job classes,
 * the server's connections and requests, fiberd_build_info{version}, and the process'
 * CPU, RSS, fds and start time under the standard process_* names. Every family has
 * # TYPE and # HELP (and # UNIT when it has one, its name ending in that unit), counters
 * are sampled as <name>_total, histograms as <name>_bucket{le=...}/_count/_sum with a
 * le="+Inf" bucket, and the text ends with "# EOF".
 *
 * The same figures also come in Prometheus's own text format (exposition format
 * 0.0.4), for node_exporter's textfile collector and promtool: a counter's # TYPE and
 * # HELP name its _total sample, there is no # UNIT and no # EOF.
 */
#ifndef FIBERD_DAEMON_OPENMETRICS_H
#define FIBERD_DAEMON_OPENMETRICS_H

#include <stdbool.h>
#include <stddef.h>

struct Daemon;

/*
 * openmetrics_render - the exposition of @d's figures now: OpenMetrics text, or with
 * @prometheus the Prometheus text format.
 * @ret: out, a NUL-terminated malloc'd string (the caller frees), @ret_len its length;
 * both written only on success. Return: 0; -ENOMEM.
 * Context: any fiber of the server group (the `metrics` method) or a plain thread (the
 * HTTP endpoint's, metrics_http.h); takes the job table's lock (a pthread mutex), held
 * only while the job families are written; does not yield.
 */
int openmetrics_render(struct Daemon *d, bool prometheus, char **ret, size_t *ret_len);

#endif
