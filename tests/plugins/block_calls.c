/* SPDX-License-Identifier: MIT */
/*
 * block_calls.c — a test plugin written the way a plugin author writes for threads:
 * plain blocking C library calls, no host->sleep_until, no host->wait_fd. fiberd's hooks
 * must park its fiber instead of its worker. {"call": ...} picks one:
 *   usleep, nanosleep, poll, select    sleep {"ms"} (default 100) that way
 *   read_forever                        a blocking read() of a pipe nobody writes to
 *                                       (ends only by cancel or timeout)
 *   connect_recv                        connect() to the Unix socket {"path"}, then a
 *                                       blocking read() of one byte (a slow server)
 *   open                                open({"path"}, O_RDONLY) and read it to the end
 *   fopen                               the same through fopen()/fread()
 *   none                                nothing: returns at once
 * Progress {0, 1} is reported before the call, so a test knows it has started. Result:
 * {"elapsed_ms", "rc", "errno", "bytes", "thread"}: what the call returned, errno after
 * it, for open/fopen/connect_recv the bytes read, and the name of the thread that
 * started it (a worker of the job groups or, inline, of the server group).
 * inline_calls.c builds the same code under another name, FIBERD_PLUGIN_INLINE.
 */
#include "plugins/fiberd/plugin.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static uint64_t mono_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int block_calls_run(FiberdJob *job, const FiberdHost *host)
{
        char call[32] = "", path[256] = "";
        uint64_t ms = 100, bytes = 0;
        long rc = 0;
        int err = 0, r;

        r = host->arg_str(job, "call", call, sizeof(call));
        if (r < 0)
                return r;
        r = host->arg_uint(job, "ms", &ms);
        if (r < 0 && r != -ENOENT)
                return r;
        r = host->arg_str(job, "path", path, sizeof(path));
        if (r < 0 && r != -ENOENT)
                return r;

        char thread[16] = "";
        pthread_getname_np(pthread_self(), thread, sizeof(thread));
        host->progress(job, 0, 1);
        uint64_t t0 = mono_ms();
        errno = 0;
        if (!strcmp(call, "usleep")) {
                rc = usleep((useconds_t)(ms * 1000));
        } else if (!strcmp(call, "nanosleep")) {
                struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
                                      .tv_nsec = (long)(ms % 1000) * 1000000L};
                rc = nanosleep(&ts, NULL);
        } else if (!strcmp(call, "poll")) {
                rc = poll(NULL, 0, (int)ms);
        } else if (!strcmp(call, "select")) {
                struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
                                     .tv_usec = (suseconds_t)(ms % 1000) * 1000};
                rc = select(0, NULL, NULL, NULL, &tv);
        } else if (!strcmp(call, "read_forever")) {
                int p[2];
                char c;
                if (pipe2(p, O_CLOEXEC) < 0)
                        return -errno;
                rc = read(p[0], &c, 1);
                err = rc < 0 ? errno : 0;
                close(p[0]);
                close(p[1]);
        } else if (!strcmp(call, "connect_recv")) {
                struct sockaddr_un sa = {.sun_family = AF_UNIX};
                char c;
                int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                if (s < 0)
                        return -errno;
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
                rc = connect(s, (struct sockaddr *)&sa, sizeof(sa));
                if (rc == 0) {
                        rc = read(s, &c, 1);
                        bytes = rc > 0 ? (uint64_t)rc : 0;
                }
                err = rc < 0 ? errno : 0;
                close(s);
        } else if (!strcmp(call, "open")) {
                char buf[4096];
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                rc = fd;
                err = fd < 0 ? errno : 0; /* errno is unspecified after a success */
                if (fd >= 0) {
                        ssize_t n;
                        while ((n = read(fd, buf, sizeof(buf))) > 0)
                                bytes += (uint64_t)n;
                        close(fd);
                }
        } else if (!strcmp(call, "fopen")) {
                char buf[4096];
                FILE *f = fopen(path, "r");
                rc = f ? 0 : -1;
                err = f ? 0 : errno; /* errno is unspecified after a success */
                if (f) {
                        size_t n;
                        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                                bytes += n;
                        fclose(f);
                }
        } else if (strcmp(call, "none") != 0) {
                return host->fail(job, -EINVAL, "unknown call %s", call);
        }
        if (!err)
                err = rc < 0 ? errno : 0;
        uint64_t elapsed = mono_ms() - t0;
        if (host->cancelled(job))
                return -ECANCELED;
        host->result_uint(job, "elapsed_ms", elapsed);
        host->result_int(job, "rc", rc);
        host->result_int(job, "errno", err);
        host->result_str(job, "thread", thread);
        return host->result_uint(job, "bytes", bytes);
}

#ifndef BLOCK_CALLS_NAME
#define BLOCK_CALLS_NAME "block_calls"
#define BLOCK_CALLS_FLAGS 0
#endif

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = BLOCK_CALLS_NAME,
        .version = "1.0",
        .description = "test: plain blocking calls {\"call\", \"ms\", \"path\"}",
        .run = block_calls_run,
        .flags = BLOCK_CALLS_FLAGS,
};
