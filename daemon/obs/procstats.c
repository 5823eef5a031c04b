/* SPDX-License-Identifier: MIT */
/*
 * procstats.c — the process figures of procstats.h. /proc/self/statm's second field is
 * the resident set in pages; /proc/self/fd lists one entry per open fd (the directory
 * stream's own fd included, so one is taken off). The start time is how Prometheus's
 * client libraries compute process_start_time_seconds: /proc/stat's btime (the boot,
 * seconds since the epoch) plus field 22 of /proc/self/stat (the start after boot, in
 * clock ticks); field 2, the command, may hold spaces and parentheses, so the fields
 * are counted from its last ')'.
 */
#include "daemon/obs/procstats.h"
#include "scheduler/base/time-util.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Reads @path into @buf (NUL-terminated). Return: the length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n, len = 0;

        if (fd < 0)
                return -1;
        while ((size_t)len < size - 1 && (n = read(fd, buf + len, size - 1 - (size_t)len)) > 0)
                len += n;
        close(fd);
        buf[len] = '\0';
        return len;
}

/* /proc/stat's btime: the boot, seconds since the epoch; 0 when unreadable. The file
 * is read line by line: its "intr" line alone may be longer than any fixed buffer. */
static uint64_t boot_time_s(void)
{
        FILE *f = fopen("/proc/stat", "re");
        unsigned long long btime = 0;
        char *line = NULL;
        size_t size = 0;

        if (!f)
                return 0;
        while (getline(&line, &size, f) > 0)
                if (sscanf(line, "btime %llu", &btime) == 1)
                        break;
        free(line);
        fclose(f);
        return btime;
}

static uint64_t start_time; /* ns since the epoch, or 0 */
static pthread_once_t start_time_once = PTHREAD_ONCE_INIT;

/* The start time never changes: read once (pthread_once). */
static void start_time_read(void)
{
        char buf[1024], *p;
        unsigned long long ticks;
        long hz = sysconf(_SC_CLK_TCK);
        uint64_t btime = boot_time_s();

        if (hz <= 0 || btime == 0 || read_small("/proc/self/stat", buf, sizeof(buf)) <= 0 ||
            !(p = strrchr(buf, ')')))
                return;
        /* after ')': field 3 (state) ... field 22 (starttime) */
        if (sscanf(p + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                   "%*d %*d %llu",
                   &ticks) != 1)
                return;
        start_time = btime * NSEC_PER_SEC + (uint64_t)ticks * NSEC_PER_SEC / (uint64_t)hz;
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
        pthread_once(&start_time_once, start_time_read);
        ret->start_time_ns = start_time;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
                ret->max_fds = rl.rlim_cur == RLIM_INFINITY ? UINT64_MAX : rl.rlim_cur;
}
