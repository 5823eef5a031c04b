/* SPDX-License-Identifier: MIT */
/*
 * stats.c — the `stats` method's result and the sd_notify STATUS= line.
 *
 * Job counts come from the job table (one short lock), runtime numbers from
 * sched_group_stats() for each scheduling group — the server group, then the job
 * scheduler's groups in sched_group_at() order, named "jobs-<i>" — (read without
 * stopping the workers: each field is consistent on its own, not across fields), the
 * job scheduler's layout from sched_get_plan(), server counters from server_stats().
 * See PROTOCOL.md, "stats", for the shape.
 */
#include "daemon/daemon.h"
#include "ipc/encoder.h"

#include <errno.h>
#include <stdio.h>

static int pack_counts(msgpack_packer *pk, const JobCounts *c)
{
        int r = 0;

        r |= msgpack_pack_map(pk, 6);
        r |= ipc_pack_kv_uint(pk, "submitted", c->submitted);
        r |= ipc_pack_kv_uint(pk, "queued", c->queued);
        r |= ipc_pack_kv_uint(pk, "running", c->running);
        r |= ipc_pack_kv_uint(pk, "done", c->done);
        r |= ipc_pack_kv_uint(pk, "failed", c->failed);
        r |= ipc_pack_kv_uint(pk, "cancelled", c->cancelled);
        return r;
}

static int pack_group(msgpack_packer *pk, const char *name, const SchedulingGroup *g)
{
        SchedGroupStats s;
        int r = 0;

        sched_group_stats(g, &s);
        r |= msgpack_pack_map(pk, 22);
        r |= ipc_pack_kv_cstr(pk, "name", name);
        r |= ipc_pack_kv_uint(pk, "workers", s.workers);
        r |= ipc_pack_kv_uint(pk, "spinning", s.spinning);
        r |= ipc_pack_kv_uint(pk, "sleeping", s.sleeping);
        r |= ipc_pack_kv_uint(pk, "runq_depth", s.runq_depth);
        r |= ipc_pack_kv_uint(pk, "runq_full", s.runq_full);
        r |= ipc_pack_kv_uint(pk, "fibers_created", s.fibers_created);
        r |= ipc_pack_kv_uint(pk, "fibers_finished", s.fibers_finished);
        r |= ipc_pack_kv_uint(pk, "fibers_alive", s.fibers_alive);
        r |= ipc_pack_kv_uint(pk, "context_switches", s.context_switches);
        r |= ipc_pack_kv_uint(pk, "spinner_handoffs", s.spinner_handoffs);
        r |= ipc_pack_kv_uint(pk, "futex_wakeups", s.futex_wakeups);
        r |= ipc_pack_kv_uint(pk, "ready_to_run_samples", s.ready_to_run.count);
        r |= ipc_pack_kv_uint(pk, "ready_to_run_p50_ns", s.ready_to_run.p50_ns);
        r |= ipc_pack_kv_uint(pk, "ready_to_run_p99_ns", s.ready_to_run.p99_ns);
        r |= ipc_pack_kv_uint(pk, "ready_to_run_max_ns", s.ready_to_run.max_ns);
        r |= ipc_pack_kv_int(pk, "node", s.node);
        r |= ipc_pack_kv_cstr(pk, "cpus", s.cpus);
        r |= ipc_pack_kv_uint(pk, "steals_in", s.steals_in);
        r |= ipc_pack_kv_uint(pk, "steals_out", s.steals_out);
        r |= ipc_pack_kv_uint(pk, "local_dequeues", s.local_dequeues);
        r |= ipc_pack_kv_uint(pk, "shared_dequeues", s.shared_dequeues);
        return r;
}

static const char *queue_policy_name(SchedQueuePolicy p)
{
        switch (p) {
        case SCHED_QUEUE_SHARED:
                return "shared";
        case SCHED_QUEUE_LOCAL:
                return "local";
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
        r |= ipc_pack_kv_uint(pk, "groups", plan.groups);
        r |= ipc_pack_kv_uint(pk, "group_size", plan.group_size);
        r |= ipc_pack_kv_bool(pk, "numa", plan.numa);
        r |= ipc_pack_kv_cstr(pk, "queue_policy", queue_policy_name(plan.queue_policy));
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
        pp->r |= pack_counts(pp->pk, &pc->counts);
}

int stats_pack(Daemon *d, msgpack_packer *pk)
{
        PluginPack pp = {.pk = pk};
        unsigned ngroups = sched_groups(d->job_sched);
        ServerStats ss;
        JobCounts total;
        size_t nplugins;
        int r = 0;

        r |= msgpack_pack_map(pk, 6);
        r |= ipc_pack_kv_uint(pk, "uptime_ms", (sched_now_ns() - d->start_ns) / 1000000);
        /* the plugin map's size must be known before its entries: both under one lock */
        jobtable_lock(&d->jobs);
        nplugins = d->jobs.nplugins;
        total = d->jobs.counts;
        r |= ipc_pack_cstr(pk, "jobs");
        r |= pack_counts(pk, &total);
        r |= ipc_pack_cstr(pk, "plugins");
        r |= msgpack_pack_map(pk, (uint32_t)nplugins);
        for (size_t i = 0; i < nplugins; i++)
                pack_plugin(&d->jobs.plugins[i], &pp);
        jobtable_unlock(&d->jobs);
        r |= pp.r;
        r |= ipc_pack_cstr(pk, "groups");
        r |= msgpack_pack_array(pk, 1 + ngroups);
        r |= pack_group(pk, "server", d->server_group);
        for (unsigned i = 0; i < ngroups; i++) {
                char name[24];
                snprintf(name, sizeof(name), "jobs-%u", i);
                r |= pack_group(pk, name, sched_group_at(d->job_sched, i));
        }
        r |= ipc_pack_cstr(pk, "layout");
        r |= pack_layout(pk, d->job_sched);
        server_stats(d->server, &ss);
        r |= ipc_pack_cstr(pk, "server");
        r |= msgpack_pack_map(pk, 5);
        r |= ipc_pack_kv_uint(pk, "connections", ss.connections);
        r |= ipc_pack_kv_uint(pk, "accepted", ss.accepted);
        r |= ipc_pack_kv_uint(pk, "requests", ss.requests);
        r |= ipc_pack_kv_uint(pk, "in_flight", ss.in_flight);
        r |= ipc_pack_kv_uint(pk, "protocol_errors", ss.protocol_errors);
        return r ? -ENOMEM : 0;
}

void stats_status_line(Daemon *d, char *buf, size_t size)
{
        unsigned ngroups = sched_groups(d->job_sched);
        JobCounts c;

        jobtable_counts(&d->jobs, &c, NULL, NULL);
        snprintf(buf, size,
                 "%llu running, %llu queued, %llu done, %llu failed, %llu cancelled; "
                 "%u job workers in %u group%s",
                 (unsigned long long)c.running, (unsigned long long)c.queued,
                 (unsigned long long)c.done, (unsigned long long)c.failed,
                 (unsigned long long)c.cancelled, stats_job_workers(d), ngroups,
                 ngroups == 1 ? "" : "s");
}
