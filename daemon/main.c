/* SPDX-License-Identifier: MIT */
/*
 * main.c — fiberd: start-up, signals, sd_notify, shutdown.
 *
 * Start-up, in this order (each step can fail with one log line and exit status):
 *   1. flags (getopt_long) and config (inih), flags winning      — exit 64 / 78 on error
 *   2. SIGTERM, SIGINT, SIGHUP blocked in the main thread *before* any worker thread
 *      exists, so every thread inherits the mask and the signals are only ever read
 *      from a signalfd; SIGPIPE ignored (a vanished client is an -EPIPE, not a death)
 *   3. the server scheduling group and the job scheduler (daemon.h; its layout logged,
 *      one line per group), the job table, the plugins (plugin_host.c)
 *   4. the listening socket (systemd's via sd_listen_fds(), or bound here), the accept
 *      fiber — then sd_notify("READY=1")
 *   5. housekeeping fibers on the server group: the signal fiber (signalfd waited on
 *      with fiber_wait_fd()), the ticker (once a second: retention sweep, blocked
 *      dispatch retry, sd_notify STATUS=), the plugin directory watcher (inotify).
 * The main thread then parks on d.stop (a FiberEvent: a plain pthread may wait on it).
 *
 * Shutdown (SIGTERM / SIGINT): STOPPING=1; stop accepting (and unlink the socket we
 * bound); refuse new jobs and cancel queued and running ones; wait up to
 * stop_timeout_ms for running jobs to return (cancellation is cooperative); wait for
 * in-flight requests — waiting job.wait calls are answered with the final states —
 * then exit 0. Jobs still running after the grace period are reported by id and
 * plugin and abandoned with the process.
 *
 * SIGHUP: RELOADING=1, re-read the config with the same flags, apply what can change
 * while running, rescan the plugin directory, READY=1.
 *
 * Nothing is freed at exit: the groups' workers may still run abandoned plugin code,
 * and the process's end releases everything at once.
 */
#include "daemon/daemon.h"
#include "daemon/log.h"
#include "daemon/plugin_host.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

/* sysexits.h values used here */
#define EXIT_USAGE 64
#define EXIT_SOFTWARE 70
#define EXIT_OSERR 71
#define EXIT_CONFIG 78

#define TICK_NS NSEC_PER_SEC

static Daemon daemon_state;

/* ------------------------------------------------------------------ reload ------ */

static void daemon_reload(Daemon *d)
{
        Config nc;
        int r;

        sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading configuration",
                   (unsigned long long)(sched_now_ns() / NSEC_PER_USEC));
        log_msg(LOG_INFO, "SIGHUP: reloading configuration%s%s",
                d->args.config_file ? " from " : "",
                d->args.config_file ? d->args.config_file : "");
        r = config_load(&nc, &d->args);
        if (r < 0) {
                log_msg(LOG_ERR, "reload failed (%s); keeping the running configuration",
                        strerror(-r));
        } else {
                log_set_level(nc.log_level);
                jobtable_configure(&d->jobs, nc.max_running, nc.max_queued, nc.retention_ns,
                                   nc.retention_max);
                server_set_max_message(d->server, nc.max_message);
                server_set_limits(d->server,
                                  &(ServerLimits){nc.max_connections, nc.max_connections_per_user,
                                                  nc.max_in_flight, nc.max_partial_bytes,
                                                  nc.read_timeout_ns});
                plugin_host_set_max_result(nc.max_message);
                if (strcmp(nc.socket_path, d->cfg.socket_path) != 0)
                        log_msg(LOG_NOTICE, "socket changed to %s: takes effect at restart",
                                nc.socket_path);
                if (!config_sched_equal(&nc, &d->cfg))
                        log_msg(LOG_NOTICE, "workers or [scheduler] changed: takes effect at "
                                            "restart");
                /* keep the path we listen on, so shutdown unlinks the right file */
                free(nc.socket_path);
                nc.socket_path = d->cfg.socket_path;
                d->cfg.socket_path = NULL;
                config_done(&d->cfg);
                d->cfg = nc;
        }
        r = plugin_host_rescan(d->cfg.plugin_dir);
        if (r < 0)
                log_msg(LOG_ERR, "rescanning %s failed: %s", d->cfg.plugin_dir, strerror(-r));
        sd_notify(0, "READY=1\nSTATUS=configuration reloaded");
}

/* ------------------------------------------------------------------ fibers ------ */

static void signal_fiber(void *arg)
{
        Daemon *d = &daemon_state;
        int sfd = (int)(intptr_t)arg;

        for (;;) {
                struct signalfd_siginfo si;
                ssize_t n;
                int r = fiber_wait_fd(sfd, EPOLLIN, SCHED_FOREVER);

                if (r == -ECANCELED)
                        return;
                if (r < 0) {
                        log_msg(LOG_ERR, "waiting for signals: %s", strerror(-r));
                        fiber_sleep_for(TICK_NS);
                        continue;
                }
                n = read(sfd, &si, sizeof(si));
                if (n != (ssize_t)sizeof(si))
                        continue;
                switch (si.ssi_signo) {
                case SIGHUP:
                        if (!__atomic_load_n(&d->stopping, __ATOMIC_ACQUIRE))
                                daemon_reload(d);
                        break;
                case SIGTERM:
                case SIGINT:
                        if (__atomic_exchange_n(&d->stopping, true, __ATOMIC_ACQ_REL)) {
                                log_msg(LOG_WARNING, "%s again while stopping: exiting now",
                                        strsignal((int)si.ssi_signo));
                                _exit(1);
                        }
                        log_msg(LOG_INFO, "%s from pid %u: shutting down",
                                strsignal((int)si.ssi_signo), si.ssi_pid);
                        fiber_event_set(&d->stop);
                        break;
                }
        }
}

static void ticker_fiber(void *arg)
{
        Daemon *d = arg;
        char line[256];

        for (;;) {
                if (fiber_sleep_for(TICK_NS) == -ECANCELED)
                        return;
                jobtable_sweep(&d->jobs);
                stats_status_line(d, line, sizeof(line));
                sd_notifyf(0, "STATUS=%s", line);
        }
}

static void plugin_watch_fiber(void *arg)
{
        for (;;) {
                int fd = plugin_host_watch_fd();
                int r;

                if (fd < 0)
                        return;
                r = fiber_wait_fd(fd, EPOLLIN, SCHED_FOREVER);
                if (r == -ECANCELED)
                        return;
                if (r < 0) {
                        log_msg(LOG_ERR, "watching the plugin directory: %s", strerror(-r));
                        if (fiber_sleep_for(TICK_NS) == -ECANCELED)
                                return;
                        continue;
                }
                plugin_host_process_events();
        }
}

static int start_fiber(Daemon *d, FiberFn fn, void *arg, const char *tag)
{
        FiberAttr attr = {.group = d->server_group, .detached = true, .tag = tag};
        int r = fiber_create(NULL, &attr, fn, arg);

        if (r < 0)
                log_msg(LOG_ERR, "cannot start the %s fiber: %s", tag, strerror(-r));
        return r;
}

/* ------------------------------------------------------------------ shutdown ---- */

static int report_unfinished(Job *j, void *arg)
{
        if (j->state == JOB_RUNNING)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "still running after the stop timeout (it ignores cancellation)");
        return 0;
}

/* Fibers alive on every group of the job scheduler (each count read on its own). */
static uint64_t job_fibers_alive(const Daemon *d)
{
        uint64_t n = 0;

        for (unsigned i = 0; i < sched_groups(d->job_sched); i++) {
                SchedGroupStats gs;
                sched_group_stats(sched_group_at(d->job_sched, i), &gs);
                n += gs.fibers_alive;
        }
        return n;
}

static int daemon_shutdown(Daemon *d)
{
        uint64_t deadline = sched_deadline_after(d->cfg.stop_timeout_ns);
        uint64_t alive = 0;
        JobCounts c;
        bool idle;

        sd_notify(0, "STOPPING=1\nSTATUS=stopping: cancelling jobs");
        server_stop_accepting(d->server);
        if (!d->socket_activated)
                unlink(d->cfg.socket_path);
        jobtable_counts(&d->jobs, &c, NULL, NULL);
        log_msg(LOG_INFO, "stopped accepting; cancelling %llu running and %llu queued jobs",
                (unsigned long long)c.running, (unsigned long long)c.queued);
        jobtable_stop(&d->jobs);
        idle = fiber_event_wait(&d->jobs.idle, deadline) == 0;
        if (!idle)
                jobtable_foreach(&d->jobs, report_unfinished, NULL);
        /* waiting job.wait calls answer as their jobs end; give them a moment to leave */
        if (server_drain(d->server, sched_deadline_after(NSEC_PER_SEC)) < 0)
                log_msg(LOG_NOTICE, "some requests were still in flight at exit");
        jobtable_counts(&d->jobs, &c, NULL, NULL);
        log_msg(LOG_INFO,
                "fiberd stopped: %llu jobs submitted, %llu done, %llu failed, %llu cancelled",
                (unsigned long long)c.submitted, (unsigned long long)c.done,
                (unsigned long long)c.failed, (unsigned long long)c.cancelled);
        /*
         * Plugins' fini() and the libraries' exit handlers may only run once no plugin
         * code runs: no job fiber and no child fiber left on any job group. Otherwise
         * leave without them (_exit), the way a job that ignores cancellation is left.
         */
        for (int i = 0;; i++) {
                /* supervisors finish a moment after their job's final state is set */
                alive = job_fibers_alive(d);
                if (!idle || alive == 0 || i == 200)
                        break;
                fiber_sleep_for(5 * NSEC_PER_MSEC);
        }
        if (!idle || alive > 0) {
                log_msg(LOG_WARNING,
                        "%llu fibers still run plugin code; exiting without "
                        "calling the plugins' fini()",
                        (unsigned long long)alive);
                _exit(0);
        }
        plugin_host_free();
        return 0;
}

/* ------------------------------------------------------------------ main -------- */

/*
 * Starts the job scheduler from the config and logs its layout, one line per group.
 * Return: 0, or the exit status: EX_CONFIG when no layout fits the [scheduler] keys.
 */
static int start_job_scheduler(Daemon *d)
{
        SchedConfig scfg = d->cfg.sched;
        SchedPlan plan;
        char *layout, *line, *save = NULL;
        size_t len;
        int r;

        scfg.concurrency = d->cfg.workers;
        scfg.max_fibers = 0; /* the runtime's default, 16384 per group: jobs, supervisors,
                              * children; max_running keeps them well below it */
        scfg.name = "fiberd-job";
        r = sched_new(&d->job_sched, &scfg);
        if (r == -EINVAL) {
                log_msg(LOG_ERR,
                        "no scheduling group layout fits workers = %u, groups = %u, "
                        "group_size = %u (at most 64 workers per group)",
                        d->cfg.workers, scfg.groups, scfg.group_size);
                return EXIT_CONFIG;
        }
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the job scheduler (%u workers): %s", d->cfg.workers,
                        strerror(-r));
                return EXIT_OSERR;
        }
        sched_get_plan(d->job_sched, &plan);
        log_msg(LOG_INFO,
                "job scheduler: %u scheduling group(s) of %u worker(s), NUMA %s, %s "
                "run queues",
                plan.groups, plan.group_size, plan.numa ? "on" : "off",
                plan.queue_policy == SCHED_QUEUE_LOCAL ? "local" : "shared");
        len = sched_describe(d->job_sched, NULL, 0) + 1;
        layout = malloc(len);
        if (!layout)
                return 0; /* only the log line is lost */
        sched_describe(d->job_sched, layout, len);
        for (line = strtok_r(layout, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                log_msg(LOG_INFO, "job %s", line);
        free(layout);
        return 0;
}

int main(int argc, char **argv)
{
        Daemon *d = &daemon_state;
        SchedGroupConfig gcfg = {0};
        sigset_t mask;
        int listen_fd, sfd, r;

        signal(SIGPIPE, SIG_IGN);
        r = config_parse_args(&d->args, argc, argv);
        if (r != 0)
                return r > 0 ? 0 : EXIT_USAGE;
        r = config_load(&d->cfg, &d->args);
        if (r < 0)
                return EXIT_CONFIG;
        log_set_level(d->cfg.log_level);
        sched_set_log(log_sched_hook);
        d->start_ns = sched_now_ns();
        fiber_event_init(&d->stop);

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sfd < 0) {
                log_msg(LOG_ERR, "signalfd: %m");
                return EXIT_OSERR;
        }

        gcfg.workers = 1;
        gcfg.max_fibers = 0; /* 16384: connections and requests in flight */
        gcfg.name = "fiberd-srv";
        r = sched_group_new(&d->server_group, &gcfg);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the server scheduling group: %s", strerror(-r));
                return EXIT_OSERR;
        }
        r = start_job_scheduler(d);
        if (r != 0)
                return r;
        r = jobtable_init(&d->jobs, d->job_sched, d->cfg.max_running, d->cfg.max_queued,
                          d->cfg.retention_ns, d->cfg.retention_max);
        if (r < 0)
                return EXIT_OSERR;
        /* main.c owns both the table and the plugin host: it wires one to the other */
        jobtable_set_hooks(&d->jobs,
                           &(JobTableHooks){.run = plugin_host_run, .cancel = plugin_host_cancel});
        r = plugin_host_init(d->cfg.plugin_dir, d->cfg.max_message);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot load plugins from %s: %s", d->cfg.plugin_dir,
                        strerror(-r));
                return EXIT_CONFIG;
        }

        r = server_listen(d->cfg.socket_path, &listen_fd, &d->socket_activated);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot listen on %s: %s", d->cfg.socket_path, strerror(-r));
                return EXIT_OSERR;
        }
        if (d->socket_activated) {
                /* name the socket systemd gave us, not the configured path, in the logs */
                struct sockaddr_un a = {0};
                socklen_t len = sizeof(a);
                char *path;
                if (getsockname(listen_fd, (struct sockaddr *)&a, &len) == 0 && a.sun_path[0] &&
                    (path = strndup(a.sun_path, sizeof(a.sun_path)))) {
                        free(d->cfg.socket_path);
                        d->cfg.socket_path = path;
                }
        }
        r = server_new(&d->server, listen_fd, d->server_group, d->cfg.max_message, methods_lookup,
                       d);
        if (r == 0)
                server_set_limits(d->server,
                                  &(ServerLimits){d->cfg.max_connections,
                                                  d->cfg.max_connections_per_user,
                                                  d->cfg.max_in_flight, d->cfg.max_partial_bytes,
                                                  d->cfg.read_timeout_ns});
        if (r < 0 || (r = server_start(d->server)) < 0) {
                log_msg(LOG_ERR, "cannot start the server: %s", strerror(-r));
                return EXIT_SOFTWARE;
        }
        log_msg(LOG_INFO, "fiberd %s ready on %s%s: %u job workers in %u group%s, plugins from %s",
                FIBERD_VERSION, d->socket_activated ? "systemd's socket " : "", d->cfg.socket_path,
                stats_job_workers(d), sched_groups(d->job_sched),
                sched_groups(d->job_sched) == 1 ? "" : "s", d->cfg.plugin_dir);
        sd_notifyf(0, "READY=1\nSTATUS=ready: 0 running, 0 queued; %u job workers in %u group%s",
                   stats_job_workers(d), sched_groups(d->job_sched),
                   sched_groups(d->job_sched) == 1 ? "" : "s");

        /* after the ready line: a SIGHUP's reload then cannot race with it */
        if (start_fiber(d, signal_fiber, (void *)(intptr_t)sfd, "signals") < 0 ||
            start_fiber(d, ticker_fiber, d, "ticker") < 0 ||
            start_fiber(d, plugin_watch_fiber, NULL, "plugin-watch") < 0)
                return EXIT_SOFTWARE;

        while (fiber_event_wait(&d->stop, SCHED_FOREVER) < 0)
                ;
        r = daemon_shutdown(d);
        exit(r);
}
