/* SPDX-License-Identifier: MIT */
/*
 * store-redis-conn.c — what both halves of the redis backend share: connecting (and
 * connecting again after an error), the query connection request fibers use, and the
 * stop flag the backend's threads look at (store-redis-conn.h). store-redis.c (the
 * commits, the stream reader, the fleet reads) and store-redis-sched.c (the schedule set
 * and its mover) both stand on it, and neither calls the other's internals through it.
 */
#include "daemon/store/store-redis-conn.h"
#include "daemon/obs/log.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The drop-in that gives fiberd.service the network (systemd/fiberd.service.d/). */
#define NETWORK_DROPIN FIBERD_DOC_DIR "/fiberd.service.d/network.conf"

/* Whether this process sees a network interface other than the loopback: not under
 * PrivateNetwork=yes, where the loopback is the namespace's own. */
static bool has_network(void)
{
        struct if_nameindex *ifs = if_nameindex(), *i;
        bool any = false;

        if (!ifs)
                return true; /* cannot tell: say nothing */
        for (i = ifs; i->if_index != 0; i++)
                if (strcmp(i->if_name, "lo") != 0)
                        any = true;
        if_freenameindex(ifs);
        return any;
}

/* Appends to @why (@why_size bytes) why a TCP address may be out of this process's
 * reach: a sandbox that allows no TCP socket (RestrictAddressFamilies=AF_UNIX) or gives
 * it a network namespace of its own (PrivateNetwork=yes), as the shipped fiberd.service
 * does; and the drop-in that opens it. Nothing when neither holds. */
static void sandbox_hint(char *why, size_t why_size)
{
        size_t n = strlen(why);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const char *what = NULL;

        if (fd >= 0) {
                close(fd);
                if (!has_network())
                        what = "fiberd has a network namespace of its own (PrivateNetwork=yes in "
                               "fiberd.service), whose loopback is not the host's";
        } else if (errno == EAFNOSUPPORT || errno == EPERM || errno == EACCES) {
                what = "fiberd may not make TCP sockets here (RestrictAddressFamilies=AF_UNIX "
                       "in fiberd.service)";
        }
        if (what && n < why_size)
                snprintf(why + n, why_size - n,
                         "; %s: copy " NETWORK_DROPIN " to /etc/systemd/system/fiberd.service.d/ "
                         "and restart fiberd (docs/operations.md, \"The fleet under systemd\")",
                         what);
}

int store_redis_probe(const char *addr, char *why, size_t why_size)
{
        redisContext *c = redis_connect(addr, why, why_size);

        if (!c)
                return -EHOSTUNREACH;
        redisFree(c);
        return 0;
}

redisContext *redis_connect(const char *addr, char *why, size_t why_size)
{
        bool tcp = !(strncmp(addr, "unix:", 5) == 0 || addr[0] == '/');

        struct timeval tv = {.tv_sec = REDIS_IO_TIMEOUT_S};
        redisContext *c;

        if (strncmp(addr, "unix:", 5) == 0 || addr[0] == '/') {
                c = redisConnectUnixWithTimeout(addr[0] == '/' ? addr : addr + 5, tv);
        } else {
                char host[256];
                const char *colon = strrchr(addr, ':');
                int port = colon ? atoi(colon + 1) : 6379;
                size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
                snprintf(host, sizeof(host), "%.*s", (int)MIN(n, sizeof(host) - 1), addr);
                c = redisConnectWithTimeout(host, port > 0 ? port : 6379, tv);
        }
        if (!c) {
                snprintf(why, why_size, "cannot connect to redis at %s: out of memory", addr);
                return NULL;
        }
        if (c->err) {
                snprintf(why, why_size, "cannot connect to redis at %s: %s", addr, c->errstr);
                if (tcp)
                        sandbox_hint(why, why_size);
                redisFree(c);
                return NULL;
        }
        redisSetTimeout(c, tv);
        return c;
}

redisContext *redis_ensure(Store *s, redisContext **c, char *why, size_t why_size)
{
        if (*c && (*c)->err) {
                redisFree(*c);
                *c = NULL;
        }
        if (!*c)
                *c = redis_connect(s->path, why, why_size);
        return *c;
}

redisReply *redis_query(Store *s, int argc, const char **argv, const size_t *len)
{
        RedisStore *q = redis_of(s);
        char why[256] = "";
        redisReply *rep = NULL;

        pthread_mutex_lock(&q->q_lock);
        for (int tries = 0; tries < 2 && !rep; tries++)
                if (redis_ensure(s, &q->q, why, sizeof(why)))
                        rep = redisCommandArgv(q->q, argc, argv, len);
        pthread_mutex_unlock(&q->q_lock);
        if (!rep)
                log_msg(LOG_ERR, "job store: redis %s: %s", s->path,
                        why[0] ? why : "connection lost");
        return rep;
}

bool redis_stopping(RedisStore *q)
{
        return __atomic_load_n(&q->stop, __ATOMIC_ACQUIRE);
}

void redis_pause(RedisStore *q, uint64_t ms)
{
        while (ms && !redis_stopping(q)) {
                uint64_t step = MIN(ms, (uint64_t)50);
                struct timespec ts = {.tv_nsec = (long)(step * NSEC_PER_MSEC)};
                nanosleep(&ts, NULL);
                ms -= step;
        }
}
