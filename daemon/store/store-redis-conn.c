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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

redisContext *redis_connect(const char *addr, char *why, size_t why_size)
{
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
