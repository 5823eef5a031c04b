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
 *      fiber, the HTTP scrape endpoint when there is one (metrics_http.h: systemd's
 *      socket named "metrics", or [metrics] listen) — then sd_notify("READY=1")
 *   5. housekeeping fibers on the server group: the signal fiber (signalfd waited on
 *      with fiber_wait_fd()), the ticker (once a second: retention sweep, blocked
 *      dispatch retry, sd_notify STATUS=), the due set's timer, the schedules' fiber
 *      (schedrun.c), the plugin directory watcher (inotify), and
 *      under a systemd watchdog (WatchdogSec=, sd_watchdog_enabled()) the watchdog
 *      fiber, which sends WATCHDOG=1 every half interval: from the server group, so a
 *      server group that stops running fibers stops the pings and systemd restarts
 *      fiberd, while jobs that hold every job worker never do.
 * Before any group starts, the runtime's stall reports are routed to stall_hook(): one
 * warning per stall naming the job, plugin, class, group/worker, how long the fiber has
 * run and its backtrace (one line per frame), at most STALL_REPORTS_PER_SEC a second,
 * and counted per plugin for stats.
 * The main thread then parks on d.stop (a FiberEvent: a plain pthread may wait on it).
 *
 * Shutdown (SIGTERM / SIGINT): STOPPING=1; stop accepting (and unlink the socket we
 * bound) and stop the scrape endpoint; refuse new jobs and cancel queued and running
 * ones; wait up to stop_timeout_ms for running jobs to return (cancellation is
 * cooperative; a job whose code does not return ends anyway, detached: dispatch.c);
 * wait for in-flight requests — waiting job.wait calls are answered with the final
 * states — then exit 0. Jobs, or detached code, still running when stop_timeout_ms has
 * passed are reported by id and plugin and abandoned with the process (_exit, without
 * the plugins' fini()).
 *
 * SIGHUP, or the `reload` method (`fiberctl reload`, fiberd.service's ExecReload=):
 * daemon_reload(): RELOADING=1, re-read the config with the same flags, apply what can
 * change while running, log in one line what changed and what of it needs a restart
 * (config_diff()), rescan the plugin directory, READY=1. A config that does not load
 * changes nothing and is said once: one log line, the STATUS= line (kept by the ticker
 * until a reload succeeds) and, for the method, its error, which makes ExecReload=, and
 * so `systemctl reload`, fail (systemd 252 has no Type=notify-reload).
 *
 * --check-config stops after step 1: the settings printed, exit 0 or 1.
 *
 * Nothing is freed at exit: the groups' workers may still run abandoned plugin code,
 * and the process's end releases everything at once.
 */
#include "daemon/daemon.h"
#include "daemon/job/joblines.h"
#include "daemon/obs/log.h"
#include "daemon/plugin/opener.h"
#include "daemon/plugin/crash.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "daemon/server/listenfds.h"
#include "daemon/server/pause.h"
#include "daemon/server/schedrun.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sysexits.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#define TICK_NS NSEC_PER_SEC

/* Stall reports logged per second at most; the rest are counted, and the next logged
 * one says how many were left out. */
#define STALL_REPORTS_PER_SEC 10

static Daemon daemon_state;

/* ------------------------------------------------------------------ stalls ------ */

static pthread_mutex_t stall_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t stall_window_ns;     /* start of the current one-second window */
static unsigned stall_window_logged; /* reports logged in it */
static uint64_t stall_dropped;       /* reports not logged since the last logged one */

/* Whether this report may be logged; *@ret_dropped: how many were left out before it. */
static bool stall_rate_ok(uint64_t *ret_dropped)
{
        uint64_t now = sched_now_ns();
        bool ok;

        pthread_mutex_lock(&stall_lock);
        if (now - stall_window_ns >= NSEC_PER_SEC) {
                stall_window_ns = now;
                stall_window_logged = 0;
        }
        ok = stall_window_logged < STALL_REPORTS_PER_SEC;
        if (ok) {
                stall_window_logged++;
                *ret_dropped = stall_dropped;
                stall_dropped = 0;
        } else {
                stall_dropped++;
        }
        pthread_mutex_unlock(&stall_lock);
        return ok;
}

/* The server scheduling group's name (its workers' threads: "fiberd-sr-wN"). */
#define SERVER_GROUP_NAME "fiberd-srv"

/* Job @id of @plugin stalled @ran_ns on the server group, where only a job run inline
 * runs plugin code: the plugin instance it runs (its JobLive's, under the table lock)
 * loses the privilege; the current one by name when the job has ended. */
static void inline_stalled(Daemon *d, uint64_t id, const char *plugin, uint64_t ran_ns)
{
        Job *j = jobtable_get(&d->jobs, id);
        const Plugin *p = NULL;

        if (j) {
                jobtable_lock(&d->jobs);
                if (j->live)
                        p = __atomic_load_n(&j->live->plugin, __ATOMIC_ACQUIRE);
                jobtable_unlock(&d->jobs);
                job_unref(j);
        }
        plugin_host_inline_stalled(p, plugin, id, ran_ns);
}

/*
 * The runtime's stall hook (sched_set_stall_hook()): counts the stall for the job's
 * plugin and logs it. A job fiber and its children carry the tag "job N plugin P"
 * (dispatch.c, plugin_job.c); other fibers (the server group's) are named by their tag.
 * Context: a group's monitor pthread, not a fiber: only pthread-safe locks (the job
 * table's mutex, stall_lock), held briefly; log lines are one write(2) each.
 */
static void stall_hook(const SchedStall *st, void *arg)
{
        Daemon *d = arg;
        char plugin[65] = "";
        unsigned long long id = 0;
        bool is_job = st->tag && sscanf(st->tag, "job %llu plugin %64s", &id, plugin) == 2;
        const char *frame, *end;
        uint64_t dropped;
        unsigned n = 0;

        if (is_job)
                jobtable_count_stall(&d->jobs, plugin);
        /* only an inline job runs plugin code there: it holds a server worker */
        if (is_job && st->group && strcmp(st->group, SERVER_GROUP_NAME) == 0)
                inline_stalled(d, id, plugin, st->ran_ns);
        if (!stall_rate_ok(&dropped))
                return;
        /* "has run 120 ms without switching; backtrace:", or "has been blocked in
         * syscall 35 (nanosleep) for 120 ms" (no backtrace: no signal goes into a
         * syscall, see monitor.c) */
        char what[128];
        if (st->syscall >= 0)
                snprintf(what, sizeof(what), "has been blocked in syscall %ld (%s) for %llu ms",
                         st->syscall, st->syscall_name ? st->syscall_name : "?",
                         (unsigned long long)(st->ran_ns / NSEC_PER_MSEC));
        else
                snprintf(what, sizeof(what), "has run %llu ms without switching%s",
                         (unsigned long long)(st->ran_ns / NSEC_PER_MSEC),
                         st->interrupted ? " (the backtrace signal cut a syscall short)" : "");
        if (is_job)
                log_job(LOG_WARNING, id, plugin,
                        "stall: class %s, group %s worker %u, fiber %llu %s%s%s",
                        st->class_name ? st->class_name : "?", st->group ? st->group : "?",
                        st->worker, (unsigned long long)st->fiber_id, what,
                        dropped ? " (more stalls were not logged: rate limit)" : "",
                        st->syscall >= 0 ? "" : "; backtrace:");
        else
                log_msg(LOG_WARNING, "stall: fiber %llu (%s), class %s, group %s worker %u, %s%s%s",
                        (unsigned long long)st->fiber_id, st->tag ? st->tag : "no tag",
                        st->class_name ? st->class_name : "?", st->group ? st->group : "?",
                        st->worker, what,
                        dropped ? " (more stalls were not logged: rate limit)" : "",
                        st->syscall >= 0 ? "" : "; backtrace:");
        if (st->syscall >= 0)
                return;
        for (frame = st->backtrace ? st->backtrace : ""; *frame; frame = *end ? end + 1 : end) {
                end = strchrnul(frame, '\n');
                if (end == frame)
                        continue;
                /* the runtime numbers the frames ("#0 file(function+off) [addr]") */
                if (is_job)
                        log_job(LOG_WARNING, id, plugin, "stall:   %.*s", (int)(end - frame),
                                frame);
                else
                        log_msg(LOG_WARNING, "stall:   %.*s", (int)(end - frame), frame);
                n++;
        }
        if (n == 0)
                log_msg(LOG_WARNING, "stall:   (no backtrace: the worker did not answer in time)");
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
                        if (!__atomic_load_n(&d->stopping, __ATOMIC_ACQUIRE)) {
                                char msg[512];
                                daemon_reload(d, "SIGHUP", msg, sizeof(msg));
                        }
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

/* The due set's timer: queues scheduled and retrying jobs as they come due (jobhold.h). */
static void due_fiber(void *arg)
{
        Daemon *d = arg;

        jobtable_run_timer(&d->jobs);
}

static void ticker_fiber(void *arg)
{
        Daemon *d = arg;
        char line[768];

        for (;;) {
                if (fiber_sleep_for(TICK_NS) == -ECANCELED)
                        return;
                jobtable_sweep(&d->jobs);
                stats_status_line(d, line, sizeof(line));
                sd_notifyf(0, "STATUS=%s", line);
        }
}

/*
 * Sends WATCHDOG=1 every half of systemd's WatchdogSec= (@arg: the interval in
 * microseconds, from sd_watchdog_enabled()). It runs on the server group on purpose: a
 * server group that no longer runs its fibers stops the pings, a job that holds every
 * job worker does not.
 */
static void watchdog_fiber(void *arg)
{
        uint64_t period_ns = (uint64_t)(uintptr_t)arg * NSEC_PER_USEC / 2;

        for (;;) {
                sd_notify(0, "WATCHDOG=1");
                if (fiber_sleep_for(period_ns) == -ECANCELED)
                        return;
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

/* Names a job whose code still runs after the job ended (detached: dispatch.c). Under the
 * table lock (jobtable_foreach()). */
static int report_detached(Job *j, void *arg)
{
        if (j->detached)
                log_job(LOG_WARNING, j->id, j->plugin_name,
                        "its detached code still runs, %llu ms after the job ended: left "
                        "running at exit",
                        (unsigned long long)((sched_now_ns() - j->finished_mono_ns) /
                                             NSEC_PER_MSEC));
        return 0;
}

/* Fibers alive on every group of the job scheduler, as one snapshot: a job fiber that
 * spawns a child in another group and ends cannot hide the child; and the job fibers
 * run inline on the server group (their children are the job groups'). */
static uint64_t job_fibers_alive(const Daemon *d)
{
        return dispatch_inline_alive(&d->jobs.dispatch) + sched_fibers_alive(d->job_sched);
}

static int daemon_shutdown(Daemon *d)
{
        uint64_t deadline = sched_deadline_after(d->cfg.stop_timeout_ns);
        uint64_t alive = 0;
        JobCounts c;
        bool idle;

        sd_notify(0, "STOPPING=1\nSTATUS=stopping: cancelling jobs");
        server_stop_accepting(d->server);
        d->metrics = metrics_http_stop(d->metrics);
        store_fleet_stop(d->store); /* a fleet: take no more jobs off the shared queue */
        if (!d->socket_activated)
                unlink(d->cfg.socket_path);
        jobtable_counts(&d->jobs, &c, NULL, NULL);
        if (store_durable(d->store))
                log_msg(LOG_INFO,
                        "stopped accepting; cancelling %llu running jobs (retry-safe ones stay "
                        "queued); %llu queued jobs stay queued in the job store",
                        (unsigned long long)c.running, (unsigned long long)c.queued);
        else
                log_msg(LOG_INFO, "stopped accepting; cancelling %llu running and %llu queued jobs",
                        (unsigned long long)c.running, (unsigned long long)c.queued);
        jobtable_stop(&d->jobs);
        schedrun_stop(d); /* no tick after this, and none writes to the store */
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
         * Every job may be final while detached fibers still run its code (dispatch.c):
         * they get what is left of stop_timeout_ms to return, and no more.
         */
        for (int i = 0;; i++) {
                /* job fibers and children finish a moment after the final states are set */
                alive = job_fibers_alive(d);
                if (!idle || alive == 0 || (i >= 200 && sched_now_ns() >= deadline))
                        break;
                fiber_sleep_for(5 * NSEC_PER_MSEC);
        }
        if (!idle || alive > 0) {
                jobtable_foreach(&d->jobs, report_detached, NULL);
                log_msg(LOG_WARNING,
                        "%llu fibers still run plugin code; exiting without "
                        "calling the plugins' fini()",
                        (unsigned long long)alive);
                crash_mark_clean(); /* jobs that ignore cancellation are not crashes */
                /* what ended is on disk (a full disk gets as long as at a close);
                 * the rest is "running" */
                store_drain(d->store, STORE_CLOSE_RETRY_NS);
                _exit(0);
        }
        /* every job ended: its last state is the last write */
        crash_mark_clean();
        jobtable_set_store(&d->jobs, NULL);
        store_close(d->store);
        d->store = NULL;
        plugin_host_free();
        opener_stop();
        return 0;
}

/* ------------------------------------------------------------------ main -------- */

/* The job scheduler's SchedConfig from @c, as start_job_scheduler() starts it and
 * check_layout() checks it; @classes (SCHED_MAX_CLASSES entries) is pointed to. */
static SchedConfig job_sched_config(const Config *c, SchedClassConfig *classes)
{
        SchedConfig scfg = c->sched;

        scfg.concurrency = c->workers;
        scfg.max_fibers = 0; /* the runtime's default, 16384 per group: jobs and children;
                              * max_running keeps them well below it */
        scfg.name = "fiberd-job";
        scfg.nclasses = config_sched_classes(c, classes);
        scfg.classes = classes;
        return scfg;
}

/* fiberd's own threads besides the groups' (main, the store's, the opener threads, the
 * blocking-I/O helpers, the metrics endpoint's) and the descriptors it cannot start
 * without besides theirs (stdio, the sockets, signalfd, inotify, the store and its
 * journal, the loader's): a lower bound, like the rest of the check. Descriptors for
 * connections and jobs' files are not counted: fiberd runs with a few (the server backs
 * off at EMFILE and says so), so a small RLIMIT_NOFILE is no reason to refuse a start. */
#define DAEMON_OWN_THREADS (6 + OPENER_THREADS_DEFAULT)
#define DAEMON_OWN_FDS 16

/*
 * The server group's worker count for @c on this machine ([server] workers; 0: from the
 * CPUs this process may use, config_server_workers()). Context: main thread.
 */
static unsigned server_workers(const Config *c)
{
        SchedTopology *t;
        unsigned ncpus = 1;

        if (c->server_workers > 0)
                return c->server_workers;
        t = malloc(sizeof(*t)); /* 8 KiB: not on the stack */
        if (t && sched_topology_detect(t) == 0)
                ncpus = t->ncpus;
        free(t);
        return config_server_workers(c, ncpus);
}

/*
 * Whether the job scheduler of @c can start here (sched_check(): the layout, then its
 * threads, descriptors and memory against this process's limits, with the server group
 * and fiberd's own on top), without starting a thread. --check-config runs it, and so
 * does the start before any group is made: a layout that cannot start is refused by
 * both, at once and with the same line, instead of after seconds and gigabytes of
 * groups started in vain. @ret_plan, @ret_budget: out, may be NULL.
 * Return: 0; the error of sched_check(), logged.
 */
static int check_layout(const Config *c, SchedPlan *ret_plan, SchedBudget *ret_budget)
{
        SchedClassConfig classes[SCHED_MAX_CLASSES];
        SchedConfig scfg = job_sched_config(c, classes);
        SchedConfig srv = {.control = c->sched.control};
        SchedBudget extra = {0};
        char why[768];
        int r;

        /* the server group: [server] workers (main() below) */
        if (sched_budget(&srv, &(SchedPlan){.groups = 1, .group_size = server_workers(c)}, &extra) <
            0)
                extra = (SchedBudget){0};
        extra.threads += DAEMON_OWN_THREADS;
        extra.fds += DAEMON_OWN_FDS;
        r = sched_check(&scfg, NULL, &extra, ret_plan, ret_budget, why, sizeof(why));
        if (r < 0)
                log_msg(LOG_ERR,
                        "the job scheduler cannot start (workers = %u, [scheduler] groups = %u, "
                        "group_size = %u): %s",
                        c->workers, scfg.groups, scfg.group_size, why);
        return r;
}

/*
 * Starts the job scheduler from the config and logs its layout, one line per group.
 * Return: 0, or the exit status: EX_CONFIG when no layout fits the [scheduler] keys.
 */
static int start_job_scheduler(Daemon *d)
{
        SchedClassConfig classes[SCHED_MAX_CLASSES];
        SchedConfig scfg = job_sched_config(&d->cfg, classes);
        SchedPlan plan;
        char *layout, *line, *save = NULL;
        size_t len;
        int r;

        r = sched_new(&d->job_sched, &scfg);
        if (r == -EINVAL) {
                log_msg(LOG_ERR,
                        "no scheduling group layout fits workers = %u, groups = %u, "
                        "group_size = %u (at most 64 workers per group)",
                        d->cfg.workers, scfg.groups, scfg.group_size);
                return EX_CONFIG;
        }
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the job scheduler (%u workers): %s", d->cfg.workers,
                        strerror(-r));
                return EX_OSERR;
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
        if (scfg.control.hook_blocking_calls)
                log_msg(LOG_INFO, "hooks: plugin code's blocking calls park job fibers; %s",
                        sched_hook_blockio());
        else
                log_msg(LOG_INFO, "hooks: off ([scheduler] hooks = false): plugin code's "
                                  "blocking calls block job workers");
        return 0;
}

/*
 * Starts the HTTP scrape endpoint (metrics_http.h) when systemd passed its socket or
 * [metrics] listen names one; under systemd, d->cfg.metrics_listen then names the socket
 * served, as d->cfg.socket_path does. Return: 0, or the exit status: EX_CONFIG when the
 * address is refused (not loopback) or bad, EX_OSERR otherwise (logged).
 */
static int start_metrics(Daemon *d)
{
        int r = metrics_http_start(d, d->cfg.metrics_listen, d->cfg.metrics_allow_remote,
                                   &d->metrics, &d->metrics_activated);

        if (r < 0)
                return r == -EADDRNOTAVAIL || r == -EINVAL ? EX_CONFIG : EX_OSERR;
        listenfds_close_rest(); /* the RPC socket and this one are taken */
        if (d->metrics_activated) {
                char *where = metrics_http_address(d->metrics);
                if (where) {
                        free(d->cfg.metrics_listen);
                        d->cfg.metrics_listen = where;
                }
        }
        return 0;
}

/*
 * fiberd --check-config: load the configuration as a start would, reporting every error
 * of the file (config_load_report()), then check the job scheduler's layout as the
 * start does (check_layout()); when all is well, print the effective settings to stdout
 * (config_print(): a file that gives the same settings), with the paths fiberd would use
 * resolved ([store] path included) and the layout as comments.
 * Return: the exit status, 0 when valid, 1 when not (each reason logged to stderr).
 */
static int check_config(const ConfigArgs *args)
{
        ConfigErrors e;
        SchedBudget b;
        SchedPlan plan;
        unsigned errors;
        char *path = NULL;
        Config c;
        int r;

        /* stderr is for what is wrong: the runtime's info lines stay out */
        log_set_level(LOG_NOTICE);
        sched_set_log(log_sched_hook);
        if (config_load_report(&c, args, &e) < 0) {
                log_msg(LOG_ERR, "out of memory");
                return 1;
        }
        errors = e.n;
        if (check_layout(&c, &plan, &b) < 0)
                errors++;
        /* the job store's path when the file leaves it to the default */
        if (c.store_backend == STORE_SQLITE && (!c.store_path || !*c.store_path)) {
                r = store_default_path(&path);
                if (r == -ENOENT) {
                        log_msg(LOG_ERR, "[store] path: no default place for the job store: "
                                         "set it, or HOME, XDG_STATE_HOME or STATE_DIRECTORY");
                        errors++;
                } else if (r < 0) {
                        errors++;
                } else {
                        free(c.store_path);
                        c.store_path = path;
                }
        }
        if (errors > 0) {
                const char *file = c.config_file ? c.config_file : args->config_file;
                log_msg(LOG_ERR, "%u error%s in the configuration%s%s: not valid", errors,
                        errors == 1 ? "" : "s", file ? " of " : "", file ? file : "");
                config_done(&c);
                return 1;
        }
        /* a warning, not an error: the server may just be down now. Run under the unit's
         * sandbox (docs/operations.md), it says whether fiberd could reach it there */
        if (c.store_backend == STORE_REDIS) {
                char why[512];

                if (store_redis_probe(c.store_redis, why, sizeof(why)) < 0)
                        log_msg(LOG_WARNING, "warning: [store] redis: %s", why);
        }
        r = config_print(&c, stdout) < 0 ? 1 : 0;
        if (r == 0) {
                printf("# socket: %s (unless systemd passes one: fiberd.socket)\n"
                       "# plugins from: %s\n"
                       "# job store: %s%s%s\n",
                       c.socket_path, c.plugin_dir, store_kind_name((StoreKind)c.store_backend),
                       c.store_backend == STORE_MEMORY ? "" : " ",
                       c.store_backend == STORE_REDIS    ? c.store_redis
                       : c.store_backend == STORE_SQLITE ? c.store_path
                                                         : "");
                printf("# job scheduler on this machine: %u scheduling group(s) of %u "
                       "worker(s), NUMA %s; %u threads and about %llu MiB at start\n"
                       "# server group on this machine: %u worker(s)\n",
                       plan.groups, plan.group_size, plan.numa ? "on" : "off", b.threads,
                       (unsigned long long)((b.memory_bytes + (1 << 20) - 1) >> 20),
                       server_workers(&c));
                r = fflush(stdout) == 0 ? 0 : 1;
        }
        config_done(&c);
        return r;
}

/* The first wait for redis-server, and the longest between two tries (doubling). */
#define REDIS_WAIT_FIRST_MS 100
#define REDIS_WAIT_MAX_MS 5000
/* How often a host still waiting for redis-server says so again. */
#define REDIS_WAIT_LOG_S 60

/*
 * A fleet host ([store] backend = redis) started while redis-server is away (restarting,
 * its disk full, the network not up yet) waits for it, as a running host rides out an
 * outage, instead of exiting: under fiberd.service a start that fails five times in
 * ten seconds hits systemd's start limit, and the host would stay down after Redis came
 * back. A sandbox that allows no TCP socket is not waited for (store_open() fails,
 * naming the drop-in). One warning when the wait starts (the reason: refused, no such
 * socket, a private network's hint), one line a minute while it lasts, one when
 * Redis answers; STATUS= says it meanwhile. The wait has no bound of its own: systemd's
 * TimeoutStartSec= ends a start that waits too long (and Restart= tries again), SIGTERM
 * or ^C ends it at once (not blocked yet: the default action). Tries back off from
 * REDIS_WAIT_FIRST_MS to REDIS_WAIT_MAX_MS. Context: the main thread, before any other.
 */
static void wait_for_redis(const char *addr)
{
        uint64_t start = sched_now_ns(), said = start, delay_ms = REDIS_WAIT_FIRST_MS;
        char why[512];
        bool waited = false;
        int r;

        while ((r = store_redis_probe(addr, why, sizeof(why))) < 0) {
                uint64_t now = sched_now_ns();

                if (r == -EAFNOSUPPORT)
                        return; /* the sandbox's: store_open() says so, naming the drop-in */
                if (!waited) {
                        log_msg(LOG_WARNING,
                                "%s; the fleet's jobs are there: waiting for it before "
                                "starting (retrying every %u s at most)",
                                why, REDIS_WAIT_MAX_MS / 1000);
                } else if (now - said >= REDIS_WAIT_LOG_S * NSEC_PER_SEC) {
                        log_msg(LOG_WARNING, "%s; still waiting for it after %.0f s", why,
                                (double)(now - start) / NSEC_PER_SEC);
                        said = now;
                }
                if (!waited)
                        sd_notifyf(0, "STATUS=waiting for redis at %s", addr);
                waited = true;
                usleep(delay_ms * 1000);
                delay_ms = MIN(delay_ms * 2, (uint64_t)REDIS_WAIT_MAX_MS);
        }
        if (waited)
                log_msg(LOG_NOTICE, "redis at %s answers after %.1f s: starting", addr,
                        (double)(sched_now_ns() - start) / NSEC_PER_SEC);
}

/*
 * A start-up step that read the job store failed (the reason was logged). A fleet host
 * whose redis-server went away between wait_for_redis() and here exits EX_TEMPFAIL, and
 * says so: Restart=on-failure starts it again, and that start waits for Redis. Anything
 * else is the store's content or configuration: EX_CONFIG.
 */
static int start_failed(const Daemon *d)
{
        char why[512];

        if (d->cfg.store_backend != STORE_REDIS ||
            store_redis_probe(d->cfg.store_redis, why, sizeof(why)) != -EHOSTUNREACH)
                return EX_CONFIG;
        log_msg(LOG_ERR,
                "%s: redis-server went away while fiberd was starting; exiting "
                "with EX_TEMPFAIL so that the service manager starts it again "
                "(a start waits for Redis)",
                why);
        return EX_TEMPFAIL;
}

/* store_load()'s callback: one stored job back into the table. */
static int restore_one(const StoreRecord *rec, void *arg)
{
        Daemon *d = arg;

        return jobtable_restore(&d->jobs, rec, plugin_host_find(rec->plugin, strlen(rec->plugin)),
                                crash_job_message(rec->id));
}

/*
 * The fleet's reader thread took @rec off the shared queue (store-redis.c): it queues
 * here like a job restored at start-up, and a record that says "running" (its host
 * stopped) ends INTERRUPTED or runs again, as after a crash; the job this host crashed
 * in (crash_job_message()) ends INTERRUPTED. Context: the store's
 * reader thread; does not yield.
 */
static int fleet_take(const StoreRecord *rec, void *arg)
{
        Daemon *d = arg;
        const char *crashed = crash_job_message(rec->id);
        const Plugin *p;
        Job *j;
        int r;

        if (jobtable_stopping(&d->jobs))
                return -ESHUTDOWN; /* left to another host */
        j = jobtable_get(&d->jobs, rec->id);
        if (j) {
                job_unref(j);
                return 0;
        }
        p = plugin_host_find(rec->plugin, strlen(rec->plugin));
        if (!p && !crashed) {
                /* another host may have it (a fleet need not load the same plugins): the
                 * entry stays pending, and is taken over after claim_idle_ms, by any host,
                 * this one again included; when no host loads it (a quarantine on every
                 * host) the job waits queued until one does. Said once per job. */
                uint64_t *seen = &d->fleet_declined[rec->id % ELEMENTSOF(d->fleet_declined)];
                if (*seen != rec->id)
                        log_job(LOG_WARNING, rec->id, rec->plugin,
                                "no plugin by that name is loaded on this host: the job stays "
                                "queued in the fleet's stream for a host that loads it "
                                "(`fiberctl plugins` on each host)");
                *seen = rec->id;
                return -ENOENT;
        }
        /* the job this host crashed in last time (its plugin may be quarantined now):
         * failed, INTERRUPTED, never run again */
        r = jobtable_restore(&d->jobs, rec, p, crashed);
        if (r < 0)
                return r;
        jobtable_restore_done(&d->jobs, 0); /* starts it when a job worker is free */
        return 0;
}

/* How many more fleet jobs this host takes off the stream now
 * (jobtable_fleet_room_locked()). Context: the store's reader thread. */
static size_t fleet_room(void *arg)
{
        Daemon *d = arg;
        size_t room;

        /* the dispatcher's bound, not d->cfg: SIGHUP replaces the config on the main
         * thread while this runs on the reader */
        jobtable_lock(&d->jobs);
        room = jobtable_fleet_room_locked(&d->jobs);
        jobtable_unlock(&d->jobs);
        return room;
}

/*
 * Does this host hold job @id as its own (not a fleet copy)? Queued, running, or ended
 * with its final write still to make: its stream entry stays this host's (store-redis.c
 * claims again only those). Context: the store's reader thread.
 */
static bool fleet_runs(uint64_t id, void *arg)
{
        Daemon *d = arg;
        Job *j = jobtable_get(&d->jobs, id);
        bool runs = j && !j->fleet_copy;

        if (j)
                job_unref(j);
        return runs;
}

/*
 * Job @id was cancelled through another host of the fleet (store_cancel_remote()): end
 * it here as job.cancel would, if this host runs it. Context: the store's reader thread;
 * does not yield.
 */
static void fleet_cancel_here(uint64_t id, void *arg)
{
        Daemon *d = arg;
        Job *j = jobtable_get(&d->jobs, id);

        if (!j)
                return;
        if (!j->fleet_copy && !job_state_final(j->state) && !j->cancel_requested) {
                log_job(LOG_INFO, id, j->plugin_name, "cancelled through another host");
                (void)jobtable_cancel(&d->jobs, j, false);
        }
        job_unref(j);
}

/*
 * Opens the job store ([store]) and takes back what it holds: the pauses (pause.c), then
 * the jobs: queued jobs queue again, interrupted ones end or requeue (jobtable_restore()). A store that cannot be opened
 * or read stops the start (the reason was logged, naming the file): fiberd never starts
 * empty in its place. Return: 0 or the exit status.
 */
static int daemon_restore(Daemon *d)
{
        JobCounts c;
        int r;

        jobtable_set_store(&d->jobs, d->store);
        /* the pauses first: no restored job of a paused class or plugin starts */
        if (pause_restore(d) < 0)
                return start_failed(d);
        /* the schedules: read on this thread, before the store thread takes over */
        if (schedrun_restore(d) < 0)
                return start_failed(d);
        r = store_load(d->store, restore_one, d);
        if (r < 0) {
                log_msg(LOG_ERR,
                        "cannot take back the jobs of the store: %s; fiberd stops "
                        "rather than start without them",
                        strerror(-r));
                return start_failed(d);
        }
        jobtable_restore_done(&d->jobs, store_next_id(d->store));
        r = store_fleet_start(d->store, /* redis: the shared queue */
                              &(StoreFleetHooks){.take = fleet_take,
                                                 .room = fleet_room,
                                                 .runs = fleet_runs,
                                                 .cancel = fleet_cancel_here,
                                                 .arg = d});
        if (r < 0)
                return EX_OSERR;
        jobtable_counts(&d->jobs, &c, NULL, NULL);
        if (c.queued || c.running || c.failed)
                log_msg(LOG_NOTICE,
                        "job store: %llu jobs queued again, %llu interrupted or not restorable",
                        (unsigned long long)(c.queued + c.running), (unsigned long long)c.failed);
        return 0;
}

int main(int argc, char **argv)
{
        Daemon *d = &daemon_state;
        SchedGroupConfig gcfg = {0};
        uint64_t watchdog_usec = 0;
        sigset_t mask;
        int listen_fd, sfd, r;

        signal(SIGPIPE, SIG_IGN);
        r = config_parse_args(&d->args, argc, argv);
        if (r != 0)
                return r > 0 ? 0 : EX_USAGE;
        if (d->args.check_config)
                return check_config(&d->args);
        r = config_load(&d->cfg, &d->args);
        if (r < 0)
                return EX_CONFIG;
        log_set_level(d->cfg.log_level);
        joblines_set(d->cfg.log_jobs);
        sched_set_log(log_sched_hook);
        /* the job store first: after a crash, the first log line names the plugin; a
         * fleet host waits for redis-server rather than exit */
        if (d->cfg.store_backend == STORE_REDIS)
                wait_for_redis(d->cfg.store_redis);
        r = store_open(&d->store, (StoreKind)d->cfg.store_backend,
                       d->cfg.store_backend == STORE_REDIS ? d->cfg.store_redis : d->cfg.store_path,
                       &(StoreFleetOptions){.stream = d->cfg.store_stream,
                                            .group = d->cfg.store_group,
                                            .node = d->cfg.store_node,
                                            .claim_idle_ns = d->cfg.store_claim_idle_ns,
                                            .retention_ns = d->cfg.retention_ns,
                                            .retention_max = d->cfg.retention_max,
                                            .key_window_ms = d->cfg.key_window_ms});
        if (r < 0)
                return start_failed(d);
        store_set_commit_delay(d->store, d->cfg.store_commit_delay_ns);
        r = crash_init(d->store);
        if (r < 0)
                return start_failed(d);
        /* before any group is made, as --check-config does (after the crash report: the
         * first line after a crash names the plugin) */
        if (check_layout(&d->cfg, NULL, NULL) < 0)
                return EX_CONFIG;
        log_msg(LOG_INFO, "job store: %s%s%s", store_kind_name((StoreKind)d->cfg.store_backend),
                d->store->path ? " at " : "", d->store->path ? d->store->path : "");
        d->start_ns = sched_now_ns();
        fiber_event_init(&d->stop);
        fiber_mutex_init(&d->reload_lock);

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
        if (sfd < 0) {
                log_msg(LOG_ERR, "signalfd: %m");
                return EX_OSERR;
        }

        sched_set_stall_hook(stall_hook, d);
        sched_set_symbolizer(plugin_host_symbolize, NULL); /* plugin frames by file */
        /* [server] workers. One worker: the one shared run queue it always had. More:
         * local queues as well (runnext + a deque per worker, stealing when idle), so the
         * fibers a worker creates or wakes (a connection's requests, a job's supervisor)
         * run next on that worker and do not wake a sleeping sibling for each of them:
         * with one shared queue every push woke the other worker, and two workers lost
         * a third of one's throughput on 2 cores (docs/scaling.md) */
        gcfg.workers = server_workers(&d->cfg);
        gcfg.queue_policy = gcfg.workers > 1 ? SCHED_QUEUE_LOCAL : SCHED_QUEUE_SHARED;
        gcfg.max_fibers = 0; /* 16384: connections and requests in flight */
        gcfg.name = SERVER_GROUP_NAME;
        gcfg.control = d->cfg.sched.control; /* its stalls are reported too */
        /* fiberd's own code runs there, and plugin code only in an inline job's fiber,
         * which is hooked on its own (FiberAttr.hook_blocking_calls): the group's blocking
         * calls are the real ones (a hooked call that parked a request fiber while it held
         * one of the store's pthread mutexes would stall every other request behind it) */
        gcfg.control.hook_blocking_calls = false;
        r = sched_group_new(&d->server_group, &gcfg);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the server scheduling group (%u workers): %s",
                        gcfg.workers, strerror(-r));
                return EX_OSERR;
        }
        log_msg(LOG_INFO, "server group: %u worker(s), %s", gcfg.workers,
                gcfg.workers > 1 ? "local run queues" : "one shared run queue");
        r = start_job_scheduler(d);
        if (r != 0)
                return r;
        r = jobtable_init(&d->jobs, d->job_sched, d->server_group, d->cfg.max_running,
                          d->cfg.max_queued, d->cfg.retention_ns, d->cfg.retention_max);
        if (r < 0)
                return EX_OSERR;
        daemon_apply_limits(d, &d->cfg);
        /* main.c owns both the table and the plugin host: it wires one to the other */
        jobtable_set_hooks(&d->jobs, &(JobTableHooks){.run = plugin_host_run,
                                                      .cancel = plugin_host_cancel,
                                                      .retry_safe = plugin_host_retry_safe,
                                                      .run_inline = plugin_host_run_inline});
        r = opener_start(0);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot start the opener threads: %s", strerror(-r));
                return EX_OSERR;
        }
        plugin_host_set_guard(crash_loader_guard()); /* crash-only plugins (crash.h) */
        r = plugin_job_init(d->cfg.max_result_bytes, d->cfg.max_message);
        if (r >= 0)
                r = plugin_host_init(d->cfg.plugin_dir, &plugin_host_functions);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot load plugins from %s: %s", d->cfg.plugin_dir,
                        strerror(-r));
                return EX_CONFIG;
        }

        r = daemon_restore(d);
        if (r != 0)
                return r;

        r = server_listen(d->cfg.socket_path, &listen_fd, &d->socket_activated);
        if (r < 0) {
                log_msg(LOG_ERR, "cannot listen on %s: %s", d->cfg.socket_path, strerror(-r));
                return EX_OSERR;
        }
        /* a reload's config_load() no longer sees LISTEN_PID: without this a fiberd that
         * is not root (the unit's dynamic user) refused every reload for want of
         * XDG_RUNTIME_DIR */
        d->args.socket_passed = d->socket_activated;
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
        if (r == 0) {
                daemon_apply_server_limits(d, &d->cfg);
                server_set_inline(d->server, methods_run_inline);
        }
        if (r < 0 || (r = server_start(d->server)) < 0) {
                log_msg(LOG_ERR, "cannot start the server: %s", strerror(-r));
                return EX_SOFTWARE;
        }
        r = start_metrics(d);
        if (r != 0)
                return r;
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
            start_fiber(d, due_fiber, d, "due") < 0 || schedrun_start(d) < 0)
                return EX_SOFTWARE;
        /* under WatchdogSec=: pings from the server group (watchdog_fiber()) */
        if (sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
                if (start_fiber(d, watchdog_fiber, (void *)(uintptr_t)watchdog_usec, "watchdog") <
                    0)
                        return EX_SOFTWARE;
                log_msg(LOG_INFO,
                        "systemd watchdog: WATCHDOG=1 every %llu ms from the server group",
                        (unsigned long long)(watchdog_usec / 2 / USEC_PER_MSEC));
        }

        while (fiber_event_wait(&d->stop, SCHED_FOREVER) < 0)
                ;
        r = daemon_shutdown(d);
        exit(r);
}
