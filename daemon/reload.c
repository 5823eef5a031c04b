/* SPDX-License-Identifier: MIT */
/*
 * reload.c — a configuration reload while fiberd runs: SIGHUP (main.c's signal fiber)
 * and the `reload` method (methods.c; `fiberctl reload`, which fiberd.service's
 * ExecReload= runs) both call daemon_reload().
 *
 * Why a method as well as the signal: systemd 252 (Debian 12) has no Type=notify-reload,
 * and an ExecReload= that only sends SIGHUP returns before fiberd has read its file, so
 * `systemctl reload` said "ok" for a file fiberd refused. `fiberctl reload` waits for
 * the outcome and exits non-zero on a failure, so the reload job fails; the STATUS=
 * line names the failure until a reload succeeds (stats_status_line()), and one log
 * line says it: config_load_quiet() keeps its errors to itself, and this file words
 * the first of them once.
 *
 * What a reload applies (docs/configuration.md, "Signals"): log_level, log_jobs,
 * [jobs] (max_running and the per-user limits and quotas), [ipc], the shares,
 * admin_only and max_running of the classes that already run, [plugin.NAME]
 * max_running; the rest waits for a restart, which the reloaded line names
 * (config_diff()).
 */
#include "daemon/daemon.h"
#include "daemon/job/joblines.h"
#include "daemon/obs/log.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* The per-user limits of @c for the job table. */
static void apply_quotas(Daemon *d, const Config *c)
{
        JobQuotas q = {
                .max_running_per_user = c->max_running_per_user,
                .max_queued_per_user = c->max_queued_per_user,
                .submit_rate_per_user = c->submit_rate_per_user,
                .submit_burst_per_user = c->submit_burst_per_user,
                .max_bytes_per_user = c->max_bytes_per_user,
                .max_bytes = c->max_bytes,
                .retention_max_per_user = c->retention_max_per_user,
                .exempt_uid = geteuid(),
        };

        jobtable_set_quotas(&d->jobs, &q);
        jobtable_set_scheduling(&d->jobs, c->dead_retention_ns, c->dead_retention_max,
                                c->key_window_ms);
}

/* The caps of @c on the running jobs of each class and plugin ([class.NAME] and
 * [plugin.NAME] max_running) for the dispatcher; a class the job scheduler does not run
 * (added since the start) waits for the restart that adds it. */
static void apply_caps(Daemon *d, const Config *c)
{
        unsigned class_max[SCHED_MAX_CLASSES + 1] = {0};
        DispatchPluginCap plugins[CONFIG_MAX_PLUGINS];
        int r;

        for (unsigned i = 0; i < c->nclasses; i++) {
                int cls = sched_class_find(d->job_sched, c->classes[i].name);
                if (cls >= 0 && cls < SCHED_MAX_CLASSES)
                        class_max[1 + cls] = c->classes[i].max_running;
        }
        for (unsigned i = 0; i < c->nplugins; i++)
                plugins[i] = (DispatchPluginCap){c->plugins[i].name, c->plugins[i].max_running};
        jobtable_lock(&d->jobs);
        r = dispatch_set_caps_locked(&d->jobs.dispatch, class_max, plugins, c->nplugins);
        jobtable_unlock(&d->jobs);
        if (r < 0)
                log_msg(LOG_ERR, "cannot set the plugins' max_running: %s", strerror(-r));
}

/* [jobs] run_inline from @c, as far as the running [scheduler] keys (d->cfg's: they need a
 * restart) make it safe: hooks, so an inline job's blocking calls park; the stall
 * detector, which takes the privilege from a plugin whose job holds a server worker; the
 * rescue, whose spare serves everyone else meanwhile. @announce: log it when they turn it
 * off (at start: a reload cannot change them). */
static void apply_inline(Daemon *d, const Config *c, bool announce)
{
        const SchedControl *ctl = &d->cfg.sched.control;
        const char *why = !ctl->hook_blocking_calls                  ? "[scheduler] hooks = false"
                          : ctl->stall_threshold_ns == SCHED_FOREVER ? "stall_threshold_ms = 0"
                          : ctl->rescue_after_ns == SCHED_FOREVER    ? "rescue_after_ms = 0"
                                                                     : NULL;

        if (announce && c->run_inline && why)
                log_msg(LOG_NOTICE,
                        "[jobs] run_inline: off, because %s: every job runs on the "
                        "job workers",
                        why);
        dispatch_set_inline(&d->jobs.dispatch, c->run_inline && !why);
}

void daemon_apply_limits(Daemon *d, const Config *c)
{
        apply_quotas(d, c);
        apply_caps(d, c);
        apply_inline(d, c, true);
}

void daemon_apply_server_limits(Daemon *d, const Config *c)
{
        server_set_limits(d->server,
                          &(ServerLimits){
                                  .max_connections = c->max_connections,
                                  .max_connections_per_user = c->max_connections_per_user,
                                  .max_in_flight = c->max_in_flight,
                                  .max_in_flight_per_user = c->max_in_flight_per_user,
                                  .max_partial_bytes = c->max_partial_bytes,
                                  .read_timeout_ns = c->read_timeout_ns,
                          });
}

/* Gives every class of @nc that the job scheduler already has its new shares at once
 * (sched_class_set_shares()), one log line per change; new classes wait for a restart
 * (config_diff() says so). */
static void reload_class_shares(Daemon *d, const Config *nc)
{
        for (unsigned i = 0; i < nc->nclasses; i++) {
                const ConfigClass *c = &nc->classes[i];
                int cls = sched_class_find(d->job_sched, c->name);
                SchedClassStats cs;
                int r;

                if (cls < 0 || sched_class_stats(d->job_sched, (unsigned)cls, &cs) < 0 ||
                    cs.shares == c->shares)
                        continue;
                r = sched_class_set_shares(d->job_sched, (unsigned)cls, c->shares);
                if (r < 0)
                        log_msg(LOG_ERR, "class %s: cannot set shares to %u: %s", c->name,
                                c->shares, strerror(-r));
                else
                        log_msg(LOG_INFO, "class %s: shares %u -> %u, applied now", c->name,
                                cs.shares, c->shares);
        }
}

/* The classes that run after a reload: @run's set (adding or removing one needs a
 * restart), with @nc's shares, admin_only and max_running for those that stay (applied
 * at once); written to @nc. */
static void keep_running_classes(const Config *run, Config *nc)
{
        ConfigClass kept[SCHED_MAX_CLASSES];

        for (unsigned i = 0; i < run->nclasses; i++) {
                kept[i] = run->classes[i];
                for (unsigned k = 0; k < nc->nclasses; k++)
                        if (strcmp(nc->classes[k].name, kept[i].name) == 0) {
                                kept[i].shares = nc->classes[k].shares;
                                kept[i].admin_only = nc->classes[k].admin_only;
                                kept[i].max_running = nc->classes[k].max_running;
                        }
        }
        memcpy(nc->classes, kept, run->nclasses * sizeof(kept[0]));
        nc->nclasses = run->nclasses;
}

int daemon_reload(Daemon *d, const char *by, char *msg, size_t size)
{
        char why[sizeof(d->reload_error)];
        Config nc;
        int r;

        r = fiber_mutex_lock(&d->reload_lock);
        if (r < 0) {
                snprintf(msg, size, "fiberd is stopping");
                return r;
        }
        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading configuration",
                   (unsigned long long)(sched_now_ns() / NSEC_PER_USEC));
        log_msg(LOG_INFO, "%s: reloading configuration%s%s", by,
                d->args.config_file ? " from " : "",
                d->args.config_file ? d->args.config_file : "");
        r = config_load_quiet(&nc, &d->args, why, sizeof(why));
        if (r < 0) {
                /* the one line that says it: config_load_quiet() logged nothing */
                log_msg(LOG_ERR, "reload failed: %s; keeping the running configuration", why);
                snprintf(d->reload_error, sizeof(d->reload_error), "%s", why);
                snprintf(msg, size, "%s", why);
                sd_notifyf(0, "READY=1\nSTATUS=reload failed: %s", why);
                fiber_mutex_unlock(&d->reload_lock);
                return r;
        } else {
                char live[512], restart[512];

                log_set_level(nc.log_level);
                joblines_set(nc.log_jobs);
                jobtable_configure(&d->jobs, nc.max_running, nc.max_queued, nc.retention_ns,
                                   nc.retention_max);
                apply_quotas(d, &nc);
                apply_caps(d, &nc);
                apply_inline(d, &nc, false);
                server_set_max_message(d->server, nc.max_message);
                daemon_apply_server_limits(d, &nc);
                plugin_host_set_max_result(nc.max_result_bytes, nc.max_message);
                /* systemd's socket is what we listen on, whatever the file says */
                if (d->socket_activated) {
                        char *path = strdup(d->cfg.socket_path);
                        if (path) {
                                free(nc.socket_path);
                                nc.socket_path = path;
                        }
                }
                /* ... and systemd's metrics socket whatever [metrics] listen says */
                if (d->metrics_activated) {
                        char *served = strdup(d->cfg.metrics_listen);
                        if (served) {
                                free(nc.metrics_listen);
                                nc.metrics_listen = served;
                        }
                }
                reload_class_shares(d, &nc);
                config_diff(&d->cfg, &nc, live, sizeof(live), restart, sizeof(restart));
                log_msg(restart[0] ? LOG_NOTICE : LOG_INFO, "configuration reloaded: %s%s%s%s",
                        live[0] ? "applied " : "", live[0] ? live : "no live setting changed",
                        restart[0] ? "; needs a restart (running on the old values until then): "
                                   : "",
                        restart);
                snprintf(msg, size, "%s%s%s%s", live[0] ? "applied " : "",
                         live[0] ? live : "no live setting changed",
                         restart[0] ? "; needs a restart: " : "", restart);
                /* d->cfg says what runs: the keys that need a restart ([store],
                 * [server], [scheduler], [metrics], socket — the path shutdown unlinks —
                 * and workers) keep their running values, so the next reload names them
                 * again */
                nc.sched = d->cfg.sched; /* first: with what the file does not set */
                config_keep_restart_keys(&d->cfg, &nc);
                keep_running_classes(&d->cfg, &nc);
                if (d->cfg_retired_set)
                        config_done(&d->cfg_retired);
                d->cfg_retired = d->cfg; /* not freed yet: see daemon.h */
                d->cfg_retired_set = true;
                d->cfg = nc;
        }
        r = plugin_host_rescan(d->cfg.plugin_dir);
        if (r < 0) {
                snprintf(why, sizeof(why), "rescanning %s failed: %s", d->cfg.plugin_dir,
                         strerror(-r));
                log_msg(LOG_ERR, "reload failed: %s", why);
                snprintf(d->reload_error, sizeof(d->reload_error), "%s", why);
                /* the settings were applied all the same (msg says which): say both */
                if (msg[0]) {
                        size_t n = strlen(msg);
                        snprintf(msg + n, size - n, "; but %s", why);
                } else {
                        snprintf(msg, size, "%s", why);
                }
                sd_notifyf(0, "READY=1\nSTATUS=reload failed: %s", why);
        } else {
                d->reload_error[0] = '\0';
                sd_notify(0, "READY=1\nSTATUS=configuration reloaded");
        }
        fiber_mutex_unlock(&d->reload_lock);
        return r;
}
