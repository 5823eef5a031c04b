/* SPDX-License-Identifier: MIT */
/*
 * stats.c — the `stats` method's result and the sd_notify STATUS= line.
 *
 * Job counts come from the job table (one short lock), runtime numbers from
 * sched_group_stats() for each scheduling group — the server group, then the job
 * scheduler's groups in sched_group_at() order, named "jobs-<i>" — (read without
 * stopping the workers: each field is consistent on its own, not across fields), the
 * job scheduler's layout from sched_get_plan(), the job classes from sched_class_stats()
 * (summed over the job groups), server counters from server_stats(), queue wait and run
 * time per plugin and class from the job table's JobLatencies (joblatency.h), and the
 * process' CPU, RSS and fds from procstats_read(), and from the dispatcher (dispatch.h)
 * what is paused and how many queued jobs a pause or a cap holds, under the same hold of
 * the table's lock as the job counts, the number of periodic schedules from their
 * table (schedule.h), and whether the job store can write (store_health()). See
 * PROTOCOL.md, "stats", for the shape.
 */
#include "daemon/daemon.h"
#include "daemon/obs/procstats.h"
#include "daemon/plugin/opener.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The counts map; with @stalls (a plugin's), one key more; with @held (the total's),
 * one more. */
static int pack_counts(msgpack_packer *pk, const JobCounts *c, const uint64_t *stalls,
                       const uint64_t *held)
{
        return IPC_PACK_MAP(
                pk, IPC_KV_UINT_IF(stalls, IPC_KEY_STALLS, stalls ? *stalls : 0),
                IPC_KV_UINT_IF(held, IPC_KEY_HELD, held ? *held : 0),
                IPC_KV_UINT(IPC_KEY_SUBMITTED, c->submitted),
                IPC_KV_UINT(IPC_KEY_QUEUED, c->queued), IPC_KV_UINT(IPC_KEY_RUNNING, c->running),
                IPC_KV_UINT(IPC_KEY_DONE, c->done), IPC_KV_UINT(IPC_KEY_FAILED, c->failed),
                IPC_KV_UINT(IPC_KEY_CANCELLED, c->cancelled),
                IPC_KV_UINT(IPC_KEY_DETACHED, c->detached),
                IPC_KV_UINT(IPC_STATE_SCHEDULED, c->scheduled),
                IPC_KV_UINT(IPC_STATE_WAITING, c->waiting),
                IPC_KV_UINT(IPC_STATE_RETRYING, c->retrying), IPC_KV_UINT(IPC_STATE_DEAD, c->dead));
}

static int pack_group(msgpack_packer *pk, const char *name, const SchedulingGroup *g)
{
        SchedGroupStats s;
        int r = 0;

        sched_group_stats(g, &s);
        r |= IPC_PACK_MAP(
                pk, IPC_KV_CSTR(IPC_KEY_NAME, name), IPC_KV_UINT(IPC_KEY_WORKERS, s.workers),
                IPC_KV_UINT(IPC_KEY_SPINNING, s.spinning),
                IPC_KV_UINT(IPC_KEY_SLEEPING, s.sleeping),
                IPC_KV_UINT(IPC_KEY_RUNQ_DEPTH, s.runq_depth),
                IPC_KV_UINT(IPC_KEY_RUNQ_FULL, s.runq_full),
                IPC_KV_UINT(IPC_KEY_FIBERS_CREATED, s.fibers_created),
                IPC_KV_UINT(IPC_KEY_FIBERS_FINISHED, s.fibers_finished),
                IPC_KV_UINT(IPC_KEY_FIBERS_ALIVE, s.fibers_alive),
                IPC_KV_UINT(IPC_KEY_CONTEXT_SWITCHES, s.context_switches),
                IPC_KV_UINT(IPC_KEY_SPINNER_HANDOFFS, s.spinner_handoffs),
                IPC_KV_UINT(IPC_KEY_FUTEX_WAKEUPS, s.futex_wakeups),
                IPC_KV_UINT(IPC_KEY_READY_TO_RUN_SAMPLES, s.ready_to_run.count),
                IPC_KV_UINT(IPC_KEY_READY_TO_RUN_P50_NS, s.ready_to_run.p50_ns),
                IPC_KV_UINT(IPC_KEY_READY_TO_RUN_P99_NS, s.ready_to_run.p99_ns),
                IPC_KV_UINT(IPC_KEY_READY_TO_RUN_MAX_NS, s.ready_to_run.max_ns),
                IPC_KV_INT(IPC_KEY_NODE, s.node), IPC_KV_CSTR(IPC_KEY_CPUS, s.cpus),
                IPC_KV_UINT(IPC_KEY_STEALS_IN, s.steals_in),
                IPC_KV_UINT(IPC_KEY_STEALS_OUT, s.steals_out),
                IPC_KV_UINT(IPC_KEY_LOCAL_DEQUEUES, s.local_dequeues),
                IPC_KV_UINT(IPC_KEY_SHARED_DEQUEUES, s.shared_dequeues),
                IPC_KV_UINT(IPC_KEY_STALLS, s.stalls), IPC_KV_UINT(IPC_KEY_RESCUES, s.rescues),
                IPC_KV_UINT(IPC_KEY_SPARES_RUNNING, s.spares_running),
                IPC_KV_UINT(IPC_KEY_THREADS, s.threads));
        return r;
}

/* classes: one map per job class, in class order (sched_class_stats(), summed over the
 * job groups). */
static int pack_classes(msgpack_packer *pk, const void *arg)
{
        const Scheduler *s = arg;
        unsigned n = sched_classes(s);
        int r = 0;

        r |= msgpack_pack_array(pk, n);
        for (unsigned i = 0; i < n; i++) {
                SchedClassStats cs = {0};

                if (sched_class_stats(s, i, &cs) < 0)
                        snprintf(cs.name, sizeof(cs.name), "%s",
                                 sched_class_name(s, i) ? sched_class_name(s, i) : "?");
                r |= IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_NAME, cs.name),
                                  IPC_KV_UINT(IPC_KEY_SHARES, cs.shares),
                                  IPC_KV_UINT(IPC_KEY_RUNTIME_NS, cs.runtime_ns),
                                  IPC_KV_UINT(IPC_KEY_VRUNTIME, cs.vruntime),
                                  IPC_KV_UINT(IPC_KEY_QUEUED, cs.queued),
                                  IPC_KV_UINT(IPC_KEY_READY_TO_RUN_P50_NS, cs.ready_to_run.p50_ns),
                                  IPC_KV_UINT(IPC_KEY_READY_TO_RUN_P99_NS, cs.ready_to_run.p99_ns));
        }
        return r;
}

static const char *queue_policy_name(SchedQueuePolicy p)
{
        switch (p) {
        case SCHED_QUEUE_SHARED:
                return IPC_QUEUE_POLICY_SHARED;
        case SCHED_QUEUE_LOCAL:
                return IPC_QUEUE_POLICY_LOCAL;
        default:
                return "default";
        }
}

static int pack_layout(msgpack_packer *pk, const void *arg)
{
        const Scheduler *s = arg;
        SchedPlan plan;
        int r = 0;

        sched_get_plan(s, &plan);
        r |= IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_GROUPS, plan.groups),
                          IPC_KV_UINT(IPC_KEY_GROUP_SIZE, plan.group_size),
                          IPC_KV_BOOL(IPC_KEY_NUMA, plan.numa),
                          IPC_KV_CSTR(IPC_KEY_QUEUE_POLICY, queue_policy_name(plan.queue_policy)));
        return r;
}

/* {p50_ns, p90_ns, p99_ns, max_ns} of @h */
static int pack_quantiles(msgpack_packer *pk, const void *arg)
{
        const DurationHistogram *h = arg;
        int r = 0;

        r |= IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_P50_NS, duration_histogram_quantile(h, 0.50)),
                          IPC_KV_UINT(IPC_KEY_P90_NS, duration_histogram_quantile(h, 0.90)),
                          IPC_KV_UINT(IPC_KEY_P99_NS, duration_histogram_quantile(h, 0.99)),
                          IPC_KV_UINT(IPC_KEY_MAX_NS, h->max_ns));
        return r;
}

/* latency: one map per plugin and class that finished a started job. Context: the
 * table lock held. */
static int pack_latency(msgpack_packer *pk, const JobLatencies *l)
{
        int r = 0;

        r |= msgpack_pack_array(pk, (uint32_t)l->n);
        for (size_t i = 0; i < l->n; i++) {
                const JobLatency *e = l->v[i];

                r |= IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_PLUGIN, e->plugin),
                                  IPC_KV_CSTR(IPC_KEY_CLASS, e->class_name),
                                  IPC_KV_UINT(IPC_KEY_SAMPLES, e->run_time.count),
                                  IPC_KV_PACK(IPC_KEY_QUEUE_WAIT, pack_quantiles, &e->queue_wait),
                                  IPC_KV_PACK(IPC_KEY_RUN_TIME, pack_quantiles, &e->run_time));
        }
        return r;
}

static int pack_process(msgpack_packer *pk, const void *unused)
{
        ProcStats ps;
        int r = 0;

        procstats_read(&ps);
        r |= IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_USER_CPU_NS, ps.user_cpu_ns),
                          IPC_KV_UINT(IPC_KEY_SYSTEM_CPU_NS, ps.system_cpu_ns),
                          IPC_KV_UINT(IPC_KEY_RSS_BYTES, ps.rss_bytes),
                          IPC_KV_UINT(IPC_KEY_OPEN_FDS, ps.open_fds),
                          IPC_KV_UINT(IPC_KEY_MAX_FDS, ps.max_fds));
        return r;
}

unsigned stats_job_workers(const Daemon *d)
{
        unsigned n = 0;

        for (unsigned i = 0; i < sched_groups(d->job_sched); i++)
                n += sched_group_workers(sched_group_at(d->job_sched, i));
        return n;
}

typedef struct PluginPack {
        msgpack_packer *pk;
        int r;
} PluginPack;

static void pack_plugin(const PluginCounts *pc, void *arg)
{
        PluginPack *pp = arg;

        pp->r |= ipc_pack_cstr(pp->pk, pc->name);
        pp->r |= pack_counts(pp->pk, &pc->counts, &pc->stalls, NULL);
}

/* Bytes packed ahead of the map that holds them, copied in as they are. */
typedef struct Packed {
        const char *data;
        size_t len;
} Packed;

static int pack_packed(msgpack_packer *pk, const void *arg)
{
        const Packed *p = arg;

        return pk->callback(pk->data, p->data, p->len);
}

/* paused: {classes: [names], plugins: [names]}, the dispatcher's pauses (dispatch.h).
 * Context: the table lock held. */
static int pack_paused(msgpack_packer *pk, const Dispatcher *d)
{
        uint32_t nclasses = 0, nplugins = 0;
        int r = 0;

        for (unsigned c = 1; c <= SCHED_MAX_CLASSES; c++)
                nclasses += d->classes[c].paused;
        for (size_t i = 0; i < d->n_plugins; i++)
                nplugins += d->plugins[i].key.paused;
        r |= msgpack_pack_map(pk, 2);
        r |= ipc_pack_cstr(pk, IPC_KEY_CLASSES);
        r |= msgpack_pack_array(pk, nclasses);
        for (unsigned c = 1; c <= SCHED_MAX_CLASSES; c++) {
                const char *name = d->sched ? sched_class_name(d->sched, c - 1) : NULL;
                if (d->classes[c].paused)
                        r |= ipc_pack_cstr(pk, name ? name : "?");
        }
        r |= ipc_pack_cstr(pk, IPC_KEY_PLUGINS);
        r |= msgpack_pack_array(pk, nplugins);
        for (size_t i = 0; i < d->n_plugins; i++)
                if (d->plugins[i].key.paused)
                        r |= ipc_pack_cstr(pk, d->plugins[i].name);
        return r;
}

/*
 * The values of jobs, plugins, latency and paused, one after the other into @sb, read
 * under one hold of the table's lock so that they agree (the plugin map's size must be
 * known before its entries); @ret_end: where each ends in @sb. Return: 0; -ENOMEM.
 */
static int pack_job_values(JobTable *t, msgpack_sbuffer *sb, size_t ret_end[4])
{
        PluginPack pp;
        msgpack_packer pk;
        JobCounts total;
        uint64_t held;
        size_t nplugins;
        int r = 0;

        msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
        pp = (PluginPack){.pk = &pk};
        jobtable_lock(t);
        nplugins = t->nplugins;
        total = t->counts;
        held = dispatch_count_locked(&t->dispatch, 0, NULL, true);
        r |= pack_counts(&pk, &total, NULL, &held);
        ret_end[0] = sb->size;
        r |= msgpack_pack_map(&pk, (uint32_t)nplugins);
        for (size_t i = 0; i < nplugins; i++)
                pack_plugin(&t->plugins[i], &pp);
        ret_end[1] = sb->size;
        r |= pack_latency(&pk, &t->latency);
        ret_end[2] = sb->size;
        r |= pack_paused(&pk, &t->dispatch);
        ret_end[3] = sb->size;
        jobtable_unlock(t);
        return r | pp.r ? -ENOMEM : 0;
}

static int pack_groups(msgpack_packer *pk, const void *arg)
{
        const Daemon *d = arg;
        unsigned ngroups = sched_groups(d->job_sched);
        int r = 0;

        r |= msgpack_pack_array(pk, 1 + ngroups);
        r |= pack_group(pk, IPC_GROUP_SERVER, d->server_group);
        for (unsigned i = 0; i < ngroups; i++) {
                char name[24];
                snprintf(name, sizeof(name), IPC_GROUP_JOBS_FMT, i);
                r |= pack_group(pk, name, sched_group_at(d->job_sched, i));
        }
        return r;
}

static int pack_server(msgpack_packer *pk, const void *arg)
{
        ServerStats ss;

        server_stats(arg, &ss);
        return IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_CONNECTIONS, ss.connections),
                            IPC_KV_UINT(IPC_KEY_ACCEPTED, ss.accepted),
                            IPC_KV_UINT(IPC_KEY_REQUESTS, ss.requests),
                            IPC_KV_UINT(IPC_KEY_REQUESTS_INLINE, ss.requests_inline),
                            IPC_KV_UINT(IPC_KEY_IN_FLIGHT, ss.in_flight),
                            IPC_KV_UINT(IPC_KEY_PROTOCOL_ERRORS, ss.protocol_errors),
                            IPC_KV_UINT(IPC_KEY_REFUSED, ss.refused),
                            IPC_KV_UINT(IPC_KEY_PARTIAL_BYTES, ss.partial_bytes),
                            IPC_KV_UINT(IPC_KEY_ANSWER_WRITES, ss.answer_writes),
                            IPC_KV_UINT(IPC_KEY_USER_THROTTLED, ss.user_throttled));
}

/* opens: where host->open() and the plugins' hooked open() ran (opener.h). */
static int pack_opens(msgpack_packer *pk, const void *arg)
{
        OpenerStats os;

        (void)arg;
        opener_stats(&os);
        return IPC_PACK_MAP(pk, IPC_KV_BOOL(IPC_KEY_INLINE_ENABLED, os.inline_enabled),
                            IPC_KV_UINT(IPC_KEY_INLINE, os.inline_opens),
                            IPC_KV_UINT(IPC_KEY_OPENER, os.thread_opens));
}

/* store: {failing, pending_writes, since_ms, error} of the job store (store_health()). */
static int pack_store(msgpack_packer *pk, const void *arg)
{
        Store *s = (Store *)arg;
        StoreHealth h = {0};

        if (s)
                store_health(s, &h);
        return IPC_PACK_MAP(pk, IPC_KV_BOOL(IPC_KEY_FAILING, h.failing),
                            IPC_KV_UINT(IPC_KEY_PENDING_WRITES, h.pending_writes),
                            h.failing ? (IpcKv)IPC_KV_UINT(IPC_KEY_SINCE_MS, h.since_ms)
                                      : (IpcKv)IPC_KV_NIL(IPC_KEY_SINCE_MS),
                            h.failing ? (IpcKv)IPC_KV_CSTR(IPC_KEY_ERROR, strerror(-h.error))
                                      : (IpcKv)IPC_KV_NIL(IPC_KEY_ERROR));
}

int stats_pack(Daemon *d, msgpack_packer *pk)
{
        uint64_t uptime_ms = (sched_now_ns() - d->start_ns) / NSEC_PER_MSEC;
        msgpack_sbuffer sb;
        size_t end[4];
        int r;

        msgpack_sbuffer_init(&sb);
        r = pack_job_values(&d->jobs, &sb, end);
        if (r == 0) {
                Packed jobs = {sb.data, end[0]};
                Packed plugins = {sb.data + end[0], end[1] - end[0]};
                Packed latency = {sb.data + end[1], end[2] - end[1]};
                Packed paused = {sb.data + end[2], end[3] - end[2]};

                r = IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_UPTIME_MS, uptime_ms),
                                 IPC_KV_PACK(IPC_KEY_JOBS, pack_packed, &jobs),
                                 IPC_KV_PACK(IPC_KEY_PLUGINS, pack_packed, &plugins),
                                 IPC_KV_PACK(IPC_KEY_LATENCY, pack_packed, &latency),
                                 IPC_KV_PACK(IPC_KEY_GROUPS, pack_groups, d),
                                 IPC_KV_PACK(IPC_KEY_LAYOUT, pack_layout, d->job_sched),
                                 IPC_KV_PACK(IPC_KEY_CLASSES, pack_classes, d->job_sched),
                                 IPC_KV_PACK(IPC_KEY_PAUSED, pack_packed, &paused),
                                 IPC_KV_PACK(IPC_KEY_SERVER, pack_server, d->server),
                                 IPC_KV_PACK(IPC_KEY_PROCESS, pack_process, NULL),
                                 IPC_KV_UINT(IPC_KEY_SCHEDULES, schedule_count(&d->schedules)),
                                 IPC_KV_PACK(IPC_KEY_OPENS, pack_opens, NULL),
                                 IPC_KV_PACK(IPC_KEY_STORE, pack_store, d->store));
        }
        msgpack_sbuffer_destroy(&sb);
        return r ? -ENOMEM : 0;
}

void stats_status_line(Daemon *d, char *buf, size_t size)
{
        unsigned ngroups = sched_groups(d->job_sched);
        char detached[48] = "";
        JobCounts c;
        int n = 0;

        jobtable_counts(&d->jobs, &c, NULL, NULL);
        if (c.detached) /* only when there are: each holds a worker thread */
                snprintf(detached, sizeof(detached), ", %llu detached",
                         (unsigned long long)c.detached);
        /* first, so `systemctl status` shows it however the line is cut */
        if (d->reload_error[0])
                n = snprintf(buf, size,
                             "reload failed (running on the previous configuration): %s; ",
                             d->reload_error);
        if (n < 0 || (size_t)n >= size)
                return;
        snprintf(buf + n, size - (size_t)n,
                 "%llu running, %llu queued, %llu done, %llu failed, %llu cancelled%s; "
                 "%u job workers in %u group%s",
                 (unsigned long long)c.running, (unsigned long long)c.queued,
                 (unsigned long long)c.done, (unsigned long long)c.failed,
                 (unsigned long long)c.cancelled, detached, stats_job_workers(d), ngroups,
                 ngroups == 1 ? "" : "s");
}
