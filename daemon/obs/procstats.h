/* SPDX-License-Identifier: MIT */
/*
 * procstats.h — what the fiberd process itself uses: CPU time (getrusage(2)), resident
 * memory (/proc/self/statm), open file descriptors (/proc/self/fd), and when it started
 * (/proc/self/stat), for `stats` ("process") and `metrics` (Prometheus's standard
 * process_* families). beanstalkd's `stats` and redis `INFO` report the same.
 */
#ifndef FIBERD_DAEMON_PROCSTATS_H
#define FIBERD_DAEMON_PROCSTATS_H

#include <stdint.h>

typedef struct ProcStats {
        uint64_t user_cpu_ns;   /* user CPU time of every thread, ns */
        uint64_t system_cpu_ns; /* system CPU time, ns */
        uint64_t rss_bytes;     /* resident set size; 0 when /proc is not readable */
        uint64_t open_fds;      /* entries of /proc/self/fd; 0 when not readable */
        uint64_t max_fds;       /* RLIMIT_NOFILE's soft limit */
        uint64_t start_time_ns; /* the process's start, ns since the Unix epoch (boot time
                                 * + its start in clock ticks, so 1/CLK_TCK s exact);
                                 * 0 when /proc is not readable */
} ProcStats;

/*
 * procstats_read - fill @ret (always: a figure that cannot be read is 0).
 * Context: any thread or fiber; does not yield; reads /proc (a few syscalls, no
 * allocation but opendir's; the first call also reads the start time, with stdio).
 */
void procstats_read(ProcStats *ret);

#endif
