/* SPDX-License-Identifier: MIT */
/*
 * joblatency.c — the per plugin and class histograms of joblatency.h. A linear search
 * over the entries: there are as many as plugins × classes in use, a handful.
 */
#include "daemon/job/joblatency.h"
#include "daemon/job/jobnames.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static JobLatency *find_or_add(JobLatencies *l, const char *plugin, const char *class_name)
{
        JobLatency **v, *e;

        for (size_t i = 0; i < l->n; i++)
                if (jobnames_match(l->v[i]->plugin_interned, l->v[i]->plugin, plugin) &&
                    jobnames_match(l->v[i]->class_interned, l->v[i]->class_name, class_name))
                        return l->v[i];
        e = calloc(1, sizeof(*e));
        if (!e)
                return NULL;
        e->plugin = strdup(plugin);
        if (!e->plugin)
                goto out_free_entry;
        snprintf(e->class_name, sizeof(e->class_name), "%s", class_name);
        e->plugin_interned = jobnames_intern(e->plugin, 0);
        e->class_interned = jobnames_intern(e->class_name, 0);
        v = realloc(l->v, (l->n + 1) * sizeof(*v));
        if (!v)
                goto out_free_plugin;
        l->v = v;
        l->v[l->n++] = e;
        return e;

out_free_plugin:
        free(e->plugin);
out_free_entry:
        free(e);
        return NULL;
}

int joblatency_record(JobLatencies *l, const char *plugin, const char *class_name, uint64_t wait_ns,
                      uint64_t run_ns)
{
        JobLatency *e = find_or_add(l, plugin, class_name);

        if (!e)
                return -ENOMEM;
        duration_histogram_add(&e->queue_wait, wait_ns);
        duration_histogram_add(&e->run_time, run_ns);
        return 0;
}
