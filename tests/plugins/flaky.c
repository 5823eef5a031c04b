/* SPDX-License-Identifier: MIT */
/*
 * flaky.c — a test plugin that fails its first {"fail"} runs (default 1) of a job and
 * then succeeds with {"runs": n}: the tests of retries, backoff and the dead set use it.
 * A failure is -EIO ({"errno"} sets another), permanent with {"permanent": true}
 * (host->fail_permanent()). {"ms": n} makes each run take n ms first (a plain usleep(),
 * which fiberd's hooks turn into a sleep of the job fiber). The runs of each job are counted here, by job id (a small
 * table: at most FLAKY_JOBS jobs at once).
 */
#include "plugins/fiberd/plugin.h"

#include <stdbool.h>
#include <errno.h>
#include <unistd.h>

#define FLAKY_JOBS 256

static struct {
        uint64_t id;
        uint64_t runs;
} flaky_runs[FLAKY_JOBS];
static int flaky_lock;

/* This run's number for job @id, from 1. */
static uint64_t flaky_count(uint64_t id)
{
        uint64_t n = 0;
        size_t i, slot = FLAKY_JOBS;

        while (__atomic_exchange_n(&flaky_lock, 1, __ATOMIC_ACQUIRE))
                ;
        for (i = 0; i < FLAKY_JOBS; i++) {
                if (flaky_runs[i].id == id) {
                        slot = i;
                        break;
                }
                if (!flaky_runs[i].id && slot == FLAKY_JOBS)
                        slot = i;
        }
        if (slot < FLAKY_JOBS) {
                flaky_runs[slot].id = id;
                n = ++flaky_runs[slot].runs;
        }
        __atomic_store_n(&flaky_lock, 0, __ATOMIC_RELEASE);
        return n;
}

static int flaky_run(FiberdJob *job, const FiberdHost *host)
{
        uint64_t fail = 1, ms = 0, run;
        int64_t err = EIO;
        bool permanent = false;
        int r;

        if ((r = host->arg_uint(job, "fail", &fail)) < 0 && r != -ENOENT)
                return r;
        if ((r = host->arg_int(job, "errno", &err)) < 0 && r != -ENOENT)
                return r;
        if ((r = host->arg_bool(job, "permanent", &permanent)) < 0 && r != -ENOENT)
                return r;
        if ((r = host->arg_uint(job, "ms", &ms)) < 0 && r != -ENOENT)
                return r;
        if (ms)
                usleep((useconds_t)(ms * 1000));
        run = flaky_count(host->job_id(job));
        if (run > fail)
                return host->result_uint(job, "runs", run);
        if (permanent)
                return host->fail_permanent(job, (int)-err, "run %llu failed for good",
                                            (unsigned long long)run);
        return host->fail(job, (int)-err, "run %llu of %llu planned failures",
                          (unsigned long long)run, (unsigned long long)fail);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "flaky",
        .version = "1.0",
        .description = "test: fails the first {\"fail\"} (1) runs of a job, then succeeds",
        .run = flaky_run,
        .max_attempts = 1,
};
