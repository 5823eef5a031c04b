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
 * process' CPU, RSS and fds from procstats_read().
 * See PROTOCOL.md, "stats", for the shape.
 */
#include "daemon/daemon.h"
#include "daemon/procstats.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdio.h>

/* The counts map; with @stalls (a plugin's), one key more. */
static int pack_counts(msgpack_packer *pk, const JobCounts *c, const uint64_t *stalls)
{
        int r = 0;

        r |= msgpack_pack_map(pk, stalls ? 8 : 7);
        if (stalls)
                r |= ipc_pack_kv_uint(pk, IPC_KEY_STALLS, *stalls);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SUBMITTED, c->submitted);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_QUEUED, c->queued);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_RUNNING, c->running);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_DONE, c->done);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_FAILED, c->failed);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_CANCELLED, c->cancelled);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_DETACHED, c->detached);
        return r;
}

static int pack_group(msgpack_packer *pk, const char *name, const SchedulingGroup *g)
{
        SchedGroupStats s;
        int r = 0;

        sched_group_stats(g, &s);
        r |= msgpack_pack_map(pk, 26);
        r |= ipc_pack_kv_cstr(pk, IPC_KEY_NAME, name);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_WORKERS, s.workers);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SPINNING, s.spinning);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SLEEPING, s.sleeping);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_RUNQ_DEPTH, s.runq_depth);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_RUNQ_FULL, s.runq_full);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_FIBERS_CREATED, s.fibers_created);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_FIBERS_FINISHED, s.fibers_finished);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_FIBERS_ALIVE, s.fibers_alive);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_CONTEXT_SWITCHES, s.context_switches);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SPINNER_HANDOFFS, s.spinner_handoffs);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_FUTEX_WAKEUPS, s.futex_wakeups);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_SAMPLES, s.ready_to_run.count);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_P50_NS, s.ready_to_run.p50_ns);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_P99_NS, s.ready_to_run.p99_ns);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_MAX_NS, s.ready_to_run.max_ns);
        r |= ipc_pack_kv_int(pk, IPC_KEY_NODE, s.node);
        r |= ipc_pack_kv_cstr(pk, IPC_KEY_CPUS, s.cpus);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_STEALS_IN, s.steals_in);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_STEALS_OUT, s.steals_out);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_LOCAL_DEQUEUES, s.local_dequeues);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SHARED_DEQUEUES, s.shared_dequeues);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_STALLS, s.stalls);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_RESCUES, s.rescues);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SPARES_RUNNING, s.spares_running);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_THREADS, s.threads);
        return r;
}

/* classes: one map per job class, in class order (sched_class_stats(), summed over the
 * job groups). */
static int pack_classes(msgpack_packer *pk, const Scheduler *s)
{
        unsigned n = sched_classes(s);
        int r = 0;

        r |= msgpack_pack_array(pk, n);
        for (unsigned i = 0; i < n; i++) {
                SchedClassStats cs = {0};

                if (sched_class_stats(s, i, &cs) < 0)
                        snprintf(cs.name, sizeof(cs.name), "%s",
                                 sched_class_name(s, i) ? sched_class_name(s, i) : "?");
                r |= msgpack_pack_map(pk, 7);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_NAME, cs.name);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_SHARES, cs.shares);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_RUNTIME_NS, cs.runtime_ns);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_VRUNTIME, cs.vruntime);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_QUEUED, cs.queued);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_P50_NS, cs.ready_to_run.p50_ns);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_READY_TO_RUN_P99_NS, cs.ready_to_run.p99_ns);
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

static int pack_layout(msgpack_packer *pk, const Scheduler *s)
{
        SchedPlan plan;
        int r = 0;

        sched_get_plan(s, &plan);
        r |= msgpack_pack_map(pk, 4);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_GROUPS, plan.groups);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_GROUP_SIZE, plan.group_size);
        r |= ipc_pack_kv_bool(pk, IPC_KEY_NUMA, plan.numa);
        r |= ipc_pack_kv_cstr(pk, IPC_KEY_QUEUE_POLICY, queue_policy_name(plan.queue_policy));
        return r;
}

/* {p50_ns, p90_ns, p99_ns, max_ns} of @h */
static int pack_quantiles(msgpack_packer *pk, const DurationHistogram *h)
{
        int r = 0;

        r |= msgpack_pack_map(pk, 4);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_P50_NS, duration_histogram_quantile(h, 0.50));
        r |= ipc_pack_kv_uint(pk, IPC_KEY_P90_NS, duration_histogram_quantile(h, 0.90));
        r |= ipc_pack_kv_uint(pk, IPC_KEY_P99_NS, duration_histogram_quantile(h, 0.99));
        r |= ipc_pack_kv_uint(pk, IPC_KEY_MAX_NS, h->max_ns);
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

                r |= msgpack_pack_map(pk, 5);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_PLUGIN, e->plugin);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_CLASS, e->class_name);
                r |= ipc_pack_kv_uint(pk, IPC_KEY_SAMPLES, e->run_time.count);
                r |= ipc_pack_cstr(pk, IPC_KEY_QUEUE_WAIT);
                r |= pack_quantiles(pk, &e->queue_wait);
                r |= ipc_pack_cstr(pk, IPC_KEY_RUN_TIME);
                r |= pack_quantiles(pk, &e->run_time);
        }
        return r;
}

static int pack_process(msgpack_packer *pk)
{
        ProcStats ps;
        int r = 0;

        procstats_read(&ps);
        r |= msgpack_pack_map(pk, 5);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_USER_CPU_NS, ps.user_cpu_ns);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_SYSTEM_CPU_NS, ps.system_cpu_ns);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_RSS_BYTES, ps.rss_bytes);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_OPEN_FDS, ps.open_fds);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_MAX_FDS, ps.max_fds);
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
        pp->r |= pack_counts(pp->pk, &pc->counts, &pc->stalls);
}

int stats_pack(Daemon *d, msgpack_packer *pk)
{
        PluginPack pp = {.pk = pk};
        unsigned ngroups = sched_groups(d->job_sched);
        ServerStats ss;
        JobCounts total;
        size_t nplugins;
        int r = 0;

        r |= msgpack_pack_map(pk, 9);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_UPTIME_MS,
                              (sched_now_ns() - d->start_ns) / NSEC_PER_MSEC);
        /* the plugin map's size must be known before its entries: both under one lock */
        jobtable_lock(&d->jobs);
        nplugins = d->jobs.nplugins;
        total = d->jobs.counts;
        r |= ipc_pack_cstr(pk, IPC_KEY_JOBS);
        r |= pack_counts(pk, &total, NULL);
        r |= ipc_pack_cstr(pk, IPC_KEY_PLUGINS);
        r |= msgpack_pack_map(pk, (uint32_t)nplugins);
        for (size_t i = 0; i < nplugins; i++)
                pack_plugin(&d->jobs.plugins[i], &pp);
        r |= ipc_pack_cstr(pk, IPC_KEY_LATENCY);
        r |= pack_latency(pk, &d->jobs.latency);
        jobtable_unlock(&d->jobs);
        r |= pp.r;
        r |= ipc_pack_cstr(pk, IPC_KEY_GROUPS);
        r |= msgpack_pack_array(pk, 1 + ngroups);
        r |= pack_group(pk, IPC_GROUP_SERVER, d->server_group);
        for (unsigned i = 0; i < ngroups; i++) {
                char name[24];
                snprintf(name, sizeof(name), IPC_GROUP_JOBS_FMT, i);
                r |= pack_group(pk, name, sched_group_at(d->job_sched, i));
        }
        r |= ipc_pack_cstr(pk, IPC_KEY_LAYOUT);
        r |= pack_layout(pk, d->job_sched);
        r |= ipc_pack_cstr(pk, IPC_KEY_CLASSES);
        r |= pack_classes(pk, d->job_sched);
        server_stats(d->server, &ss);
        r |= ipc_pack_cstr(pk, IPC_KEY_SERVER);
        r |= msgpack_pack_map(pk, 7);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_CONNECTIONS, ss.connections);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_ACCEPTED, ss.accepted);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_REQUESTS, ss.requests);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_IN_FLIGHT, ss.in_flight);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_PROTOCOL_ERRORS, ss.protocol_errors);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_REFUSED, ss.refused);
        r |= ipc_pack_kv_uint(pk, IPC_KEY_PARTIAL_BYTES, ss.partial_bytes);
        r |= ipc_pack_cstr(pk, IPC_KEY_PROCESS);
        r |= pack_process(pk);
        return r ? -ENOMEM : 0;
}

void stats_status_line(Daemon *d, char *buf, size_t size)
{
        unsigned ngroups = sched_groups(d->job_sched);
        char detached[48] = "";
        JobCounts c;

        jobtable_counts(&d->jobs, &c, NULL, NULL);
        if (c.detached) /* only when there are: each holds a worker thread */
                snprintf(detached, sizeof(detached), ", %llu detached",
                         (unsigned long long)c.detached);
        snprintf(buf, size,
                 "%llu running, %llu queued, %llu done, %llu failed, %llu cancelled%s; "
                 "%u job workers in %u group%s",
                 (unsigned long long)c.running, (unsigned long long)c.queued,
                 (unsigned long long)c.done, (unsigned long long)c.failed,
                 (unsigned long long)c.cancelled, detached, stats_job_workers(d), ngroups,
                 ngroups == 1 ? "" : "s");
}
