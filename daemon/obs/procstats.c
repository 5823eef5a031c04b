/* SPDX-License-Identifier: MIT */
/*
 * procstats.c — the process figures of procstats.h. /proc/self/statm's second field is
 * the resident set in pages; /proc/self/fd lists one entry per open fd (the directory
 * stream's own fd included, so one is taken off).
 */
#include "daemon/obs/procstats.h"
#include "scheduler/base/time-util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static uint64_t timeval_ns(const struct timeval *tv)
{
        return (uint64_t)tv->tv_sec * NSEC_PER_SEC + (uint64_t)tv->tv_usec * NSEC_PER_USEC;
}

static uint64_t rss_bytes(void)
{
        char buf[128];
        unsigned long long size, resident;
        ssize_t n;
        int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);

        if (fd < 0)
                return 0;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
                return 0;
        return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t open_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        uint64_t n = 0;

        if (!d)
                return 0;
        while ((e = readdir(d)))
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n ? n - 1 : 0; /* not the directory stream's own */
}

void procstats_read(ProcStats *ret)
{
        struct rusage ru;
        struct rlimit rl;

        memset(ret, 0, sizeof(*ret));
        if (getrusage(RUSAGE_SELF, &ru) == 0) {
                ret->user_cpu_ns = timeval_ns(&ru.ru_utime);
                ret->system_cpu_ns = timeval_ns(&ru.ru_stime);
        }
        ret->rss_bytes = rss_bytes();
        ret->open_fds = open_fds();
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
                ret->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}
