/* SPDX-License-Identifier: MIT */
/*
 * skynet.c — the bundled "skynet" plugin: the skynet benchmark as one job.
 *
 * Args {"size": N (default 1000000), "div": D (default 10)} → {"sum", "size", "div",
 * "fibers"}. A node responsible for the numbers [num, num + size) spawns D child fibers
 * (host->spawn), each for a D-th of its range (the last takes the remainder; empty parts
 * are skipped), joins them and adds their sums; a node of size 1 returns its number. The
 * sum is N(N-1)/2 whatever the split, so callers can check it. Every node but the root
 * is its own fiber: N leaves plus the inner nodes, all through the host's spawn/join.
 *
 * The arg block (SkynetNode) is copied by spawn() and back by join(), so children never
 * touch their parent's stack. When the daemon has no room for another fiber (-EAGAIN),
 * the node runs that part inline in its own fiber instead: slower, never wrong. Once the
 * job is cancelled, spawn and join return -ECANCELED and the tree unwinds.
 */
#include "plugins/fiberd/plugin.h"

#define SKYNET_SIZE_MAX 10000000u
#define SKYNET_DIV_MAX 64u

typedef struct SkynetNode {
        uint64_t num;    /* first number of the range */
        uint64_t size;   /* numbers in the range, >= 1 */
        uint64_t div;    /* children per node */
        uint64_t sum;    /* out: the sum of the range */
        uint64_t fibers; /* out: fibers spawned in this subtree */
} SkynetNode;

static int skynet_node(FiberdJob *job, const FiberdHost *host, void *arg)
{
        FiberdChild *kids[SKYNET_DIV_MAX];
        SkynetNode *n = arg;
        uint64_t part, off = 0, sum = 0, fibers = 0;
        unsigned spawned = 0;
        int err = 0;

        if (n->size == 1) {
                n->sum = n->num;
                n->fibers = 0;
                return 0;
        }
        part = n->size / n->div;
        if (part == 0)
                part = 1;
        for (uint64_t i = 0; i < n->div && off < n->size; i++) {
                SkynetNode c = {.num = n->num + off, .div = n->div};
                c.size = i + 1 == n->div ? n->size - off : part;
                if (c.size > n->size - off)
                        c.size = n->size - off;
                off += c.size;

                int r = host->spawn(job, &kids[spawned], skynet_node, &c, sizeof(c));
                if (r == 0) {
                        spawned++;
                        fibers++;
                        continue;
                }
                if (r != -EAGAIN) {
                        err = r;
                        break;
                }
                r = skynet_node(job, host, &c); /* no room for a fiber: do it here */
                if (r < 0) {
                        err = r;
                        break;
                }
                sum += c.sum;
                fibers += c.fibers;
        }
        /* Join every child spawned, even after an error: each must be joined once. */
        for (unsigned i = 0; i < spawned; i++) {
                SkynetNode c;
                int r = host->join(job, kids[i], &c);
                if (r < 0) {
                        if (!err)
                                err = r;
                        continue;
                }
                sum += c.sum;
                fibers += c.fibers;
        }
        if (err)
                return err;
        n->sum = sum;
        n->fibers = fibers;
        return 0;
}

/* The arguments (both optional), read the same way by check_args and run. */
static int skynet_args(FiberdJob *job, const FiberdHost *host, SkynetNode *root)
{
        int r;

        r = host->arg_uint(job, "size", &root->size);
        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_uint(job, "div", &root->div);
        if (r < 0 && r != -ENOENT)
                return r;
        if (root->size < 1 || root->size > SKYNET_SIZE_MAX)
                return host->fail(job, -ERANGE, "size: %llu is not in 1..%u",
                                  (unsigned long long)root->size, SKYNET_SIZE_MAX);
        if (root->div < 2 || root->div > SKYNET_DIV_MAX)
                return host->fail(job, -ERANGE, "div: %llu is not in 2..%u",
                                  (unsigned long long)root->div, SKYNET_DIV_MAX);
        return 0;
}

/* Bad "size" or "div" are refused at job.submit: INVALID_ARGUMENT, no job. */
static int skynet_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        SkynetNode root = {.num = 0, .size = 1000000, .div = 10};

        return skynet_args(args, host, &root);
}

static int skynet_run(FiberdJob *job, const FiberdHost *host)
{
        SkynetNode root = {.num = 0, .size = 1000000, .div = 10};
        int r;

        r = skynet_args(job, host, &root);
        if (r < 0)
                return r;
        r = skynet_node(job, host, &root);
        if (r < 0)
                return r;
        r = host->result_uint(job, "sum", root.sum);
        if (r >= 0)
                r = host->result_uint(job, "size", root.size);
        if (r >= 0)
                r = host->result_uint(job, "div", root.div);
        if (r >= 0)
                r = host->result_uint(job, "fibers", root.fibers);
        return r < 0 ? r : 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "skynet",
        .version = "1.0",
        .description = "the skynet tree in child fibers: {\"size\", \"div\"} -> {\"sum\", ...}",
        .run = skynet_run,
        .check_args = skynet_check,
};
