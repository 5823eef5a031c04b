/* SPDX-License-Identifier: MIT */
/*
 * store-redis-conn.c — what both halves of the redis backend share: connecting (and
 * connecting again after an error), the query connection request fibers use, the stop
 * flag the backend's threads look at, and the link (RedisLink, store-redis-conn.h):
 * whether the server answers.
 *
 * The link is how a fleet rides out its server going away: every connection of the
 * process reports its failures (redis_link_failed()) and its answers (redis_link_ok())
 * to it. The first failure logs one line and starts a pause, 100 ms doubling to 2 s,
 * during which no connection tries the server again: a call fails at once (the query
 * connection returns NULL, its callers -ENOTCONN or -EIO), so a request fiber never
 * blocks its worker on a server known to be gone, and a client is told when to try
 * again (redis_link_retry_ms(), the UNAVAILABLE's hint). The first answer logs one line;
 * in between, one line a minute. A server that hangs (SIGSTOP, a full network buffer)
 * costs one call its timeout (REDIS_QUERY_TIMEOUT_MS on the query connection), then
 * the pause.
 *
 * store-redis.c (the commits, the stream reader, the fleet reads) and store-redis-sched.c
 * (the schedule set and its mover) both stand on it, and neither calls the other's
 * internals through it.
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
        redisReply *rep;
        int fd, r = 0;

        if (c) {
                /* connected is not ready: a server loading its data answers LOADING */
                rep = redisCommand(c, "PING");
                if (!rep || rep->type == REDIS_REPLY_ERROR) {
                        snprintf(why, why_size, "redis at %s is not ready: %s", addr,
                                 rep            ? rep->str
                                 : c->errstr[0] ? c->errstr
                                                : "no answer to PING");
                        r = -EHOSTUNREACH;
                }
                if (rep)
                        freeReplyObject(rep);
                redisFree(c);
                return r;
        }
        if (strncmp(addr, "unix:", 5) == 0 || addr[0] == '/')
                return -EHOSTUNREACH;
        /* a sandbox that allows no TCP socket: no wait makes it reachable */
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
                close(fd);
                return -EHOSTUNREACH;
        }
        return errno == EAFNOSUPPORT || errno == EPERM || errno == EACCES ? -EAFNOSUPPORT
                                                                          : -EHOSTUNREACH;
}

redisContext *redis_connect(const char *addr, char *why, size_t why_size)
{
        return redis_connect_within(addr, REDIS_IO_TIMEOUT_S * 1000, why, why_size);
}

redisContext *redis_connect_within(const char *addr, uint64_t timeout_ms, char *why,
                                   size_t why_size)
{
        bool tcp = !(strncmp(addr, "unix:", 5) == 0 || addr[0] == '/');
        struct timeval tv = {.tv_sec = (time_t)(timeout_ms / 1000),
                             .tv_usec = (suseconds_t)(timeout_ms % 1000 * 1000)};
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

bool redis_link_away(RedisStore *q)
{
        return __atomic_load_n(&q->link.away, __ATOMIC_ACQUIRE);
}

void redis_link_failed(Store *s, const char *why)
{
        RedisStore *q = redis_of(s);
        RedisLink *l = &q->link;
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC);
        char line[512] = "";

        pthread_mutex_lock(&l->lock);
        if (!l->away) {
                l->since_ns = l->noted_ns = now;
                l->pause_ms = REDIS_LINK_RETRY_MIN_MS;
                l->refused = 0;
                l->outages++;
                __atomic_store_n(&l->away, true, __ATOMIC_RELEASE);
                snprintf(line, sizeof(line),
                         "job store: redis %s cannot be reached (%s): submissions answer "
                         "UNAVAILABLE and waiters wait until it is back; trying again every "
                         "%d ms at most",
                         s->path, why, REDIS_LINK_RETRY_MAX_MS);
        } else if (now >= l->next_try_ns) {
                /* a try that failed: the next one waits twice as long */
                l->pause_ms = MIN(l->pause_ms * 2, (uint64_t)REDIS_LINK_RETRY_MAX_MS);
                if (now - l->noted_ns >= REDIS_LINK_NOTE_S * NSEC_PER_SEC) {
                        l->noted_ns = now;
                        snprintf(line, sizeof(line),
                                 "job store: redis %s still cannot be reached after %.0f s "
                                 "(%s); %llu calls refused meanwhile",
                                 s->path, (double)(now - l->since_ns) / NSEC_PER_SEC, why,
                                 (unsigned long long)l->refused);
                }
        }
        if (now >= l->next_try_ns)
                l->next_try_ns = now + l->pause_ms * NSEC_PER_MSEC;
        pthread_mutex_unlock(&l->lock);
        if (line[0])
                log_msg(LOG_ERR, "%s", line);
}

void redis_link_ok(Store *s, uint64_t asked_ns)
{
        RedisStore *q = redis_of(s);
        RedisLink *l = &q->link;
        uint64_t away_ns = 0;
        bool back = false;

        if (!redis_link_away(q))
                return;
        pthread_mutex_lock(&l->lock);
        if (l->away && asked_ns >= l->since_ns) {
                __atomic_store_n(&l->away, false, __ATOMIC_RELEASE);
                l->next_try_ns = 0;
                away_ns = clock_now_ns(CLOCK_MONOTONIC) - l->since_ns;
                back = true;
        }
        pthread_mutex_unlock(&l->lock);
        if (back) {
                log_msg(LOG_NOTICE, "job store: redis %s is back after %.1f s", s->path,
                        (double)away_ns / NSEC_PER_SEC);
                /* the writes held meanwhile (final ones among them) go now, not at the
                 * end of the store's backoff */
                store_retry_now(s);
        }
}

uint64_t redis_link_retry_ms(RedisStore *q)
{
        RedisLink *l = &q->link;
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC), ms = REDIS_LINK_RETRY_MIN_MS;

        if (!redis_link_away(q))
                return ms;
        pthread_mutex_lock(&l->lock);
        if (l->next_try_ns > now)
                ms = MAX(ms, (l->next_try_ns - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
        pthread_mutex_unlock(&l->lock);
        return ms;
}

/* false while the link is away and its pause runs: no try now (counted). */
static bool link_may_try(RedisStore *q)
{
        RedisLink *l = &q->link;
        bool may;

        if (!redis_link_away(q))
                return true;
        pthread_mutex_lock(&l->lock);
        may = !l->away || clock_now_ns(CLOCK_MONOTONIC) >= l->next_try_ns;
        if (!may)
                l->refused++;
        pthread_mutex_unlock(&l->lock);
        return may;
}

redisContext *redis_ensure(Store *s, redisContext **c, char *why, size_t why_size)
{
        RedisStore *q = redis_of(s);

        if (*c && (*c)->err) {
                redisFree(*c);
                *c = NULL;
        }
        if (*c)
                return *c;
        if (!link_may_try(q)) {
                snprintf(why, why_size, "redis %s is away; next try in %llu ms", s->path,
                         (unsigned long long)redis_link_retry_ms(q));
                return NULL;
        }
        /* the query connection blocks a server worker: its connect and its calls get
         * REDIS_QUERY_TIMEOUT_MS, the others REDIS_IO_TIMEOUT_S */
        *c = redis_connect_within(s->path,
                                  c == &q->q ? REDIS_QUERY_TIMEOUT_MS : REDIS_IO_TIMEOUT_S * 1000,
                                  why, why_size);
        if (!*c)
                redis_link_failed(s, why);
        return *c;
}

/* Did the last call on @c fail because the server did not answer in time? */
static bool timed_out(const redisContext *c)
{
        return c->err == REDIS_ERR_IO &&
               (strstr(c->errstr, "temporarily unavailable") || strstr(c->errstr, "timed out"));
}

bool redis_call_failed(Store *s, redisContext **c)
{
        char why[256];

        snprintf(why, sizeof(why), "%s", *c && (*c)->errstr[0] ? (*c)->errstr : "no reply");
        if (!*c || timed_out(*c) || redis_link_away(redis_of(s))) {
                redis_link_failed(s, why);
                return false;
        }
        /* dropped: a server that is gone, or a connection left over from before it came
         * back (a restart): one connect tells them apart (and marks the link if it fails) */
        redisFree(*c);
        *c = NULL;
        return redis_ensure(s, c, why, sizeof(why)) != NULL;
}

redisReply *redis_query(Store *s, int argc, const char **argv, const size_t *len)
{
        RedisStore *q = redis_of(s);
        char why[256] = "";
        redisReply *rep = NULL;
        uint64_t asked = clock_now_ns(CLOCK_MONOTONIC);

        pthread_mutex_lock(&q->q_lock);
        /* a second try only on a new connection after a dropped one (a restart between
         * two calls): a timeout is a server that does not answer, tried again later */
        for (int tries = 0; tries < 2 && !rep; tries++) {
                if (!redis_ensure(s, &q->q, why, sizeof(why)))
                        break; /* the link is away (redis_ensure() marked it) */
                rep = redisCommandArgv(q->q, argc, argv, len);
                if (!rep && !redis_call_failed(s, &q->q))
                        break;
        }
        pthread_mutex_unlock(&q->q_lock);
        if (rep)
                redis_link_ok(s, asked);
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
