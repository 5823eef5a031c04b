/* SPDX-License-Identifier: MIT */
/*
 * jobkeys.c — the idempotency keys' hash table (see jobkeys.h). FNV-1a over the owner
 * and the key; the table doubles when it holds more entries than buckets.
 */
#include "daemon/job/jobkeys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct JobKey {
        JobKey *next;
        uid_t owner;
        uint64_t id;
        uint64_t finished_ms; /* 0 = not final */
        size_t hash;
        char key[]; /* NUL-terminated */
};

static size_t key_hash(uid_t owner, const char *key)
{
        uint64_t h = 0xcbf29ce484222325ULL;

        for (size_t i = 0; i < sizeof(owner); i++) {
                h ^= (owner >> (8 * i)) & 0xff;
                h *= 0x100000001b3ULL;
        }
        for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
                h ^= *p;
                h *= 0x100000001b3ULL;
        }
        return (size_t)h;
}

static JobKey *lookup(const JobKeys *k, uid_t owner, const char *key, size_t h)
{
        if (!k->nbuckets)
                return NULL;
        for (JobKey *e = k->buckets[h & (k->nbuckets - 1)]; e; e = e->next)
                if (e->hash == h && e->owner == owner && strcmp(e->key, key) == 0)
                        return e;
        return NULL;
}

static bool expired(const JobKey *e, uint64_t now_ms, uint64_t window_ms)
{
        return e->finished_ms && e->finished_ms + window_ms <= now_ms;
}

bool jobkeys_find_locked(const JobKeys *k, uid_t owner, const char *key, uint64_t now_ms,
                         uint64_t window_ms, uint64_t *ret_id)
{
        const JobKey *e = lookup(k, owner, key, key_hash(owner, key));

        if (!e || expired(e, now_ms, window_ms))
                return false;
        *ret_id = e->id;
        return true;
}

static void grow(JobKeys *k)
{
        size_t n = k->nbuckets ? k->nbuckets * 2 : 64;
        JobKey **b = calloc(n, sizeof(*b));

        if (!b)
                return; /* longer chains, still correct */
        for (size_t i = 0; i < k->nbuckets; i++)
                for (JobKey *e = k->buckets[i], *next; e; e = next) {
                        next = e->next;
                        e->next = b[e->hash & (n - 1)];
                        b[e->hash & (n - 1)] = e;
                }
        free(k->buckets);
        k->buckets = b;
        k->nbuckets = n;
}

int jobkeys_put_locked(JobKeys *k, uid_t owner, const char *key, uint64_t id, uint64_t finished_ms)
{
        size_t h = key_hash(owner, key), len = strlen(key);
        JobKey *e = lookup(k, owner, key, h);

        if (e) {
                e->id = id;
                e->finished_ms = finished_ms;
                return 0;
        }
        if (k->count >= k->nbuckets)
                grow(k);
        if (!k->nbuckets)
                return -ENOMEM;
        e = malloc(sizeof(*e) + len + 1);
        if (!e)
                return -ENOMEM;
        *e = (JobKey){.owner = owner, .id = id, .finished_ms = finished_ms, .hash = h};
        memcpy(e->key, key, len + 1);
        e->next = k->buckets[h & (k->nbuckets - 1)];
        k->buckets[h & (k->nbuckets - 1)] = e;
        k->count++;
        return 0;
}

size_t jobkeys_sweep_locked(JobKeys *k, uint64_t now_ms, uint64_t window_ms)
{
        size_t n = 0;

        for (size_t i = 0; i < k->nbuckets; i++)
                for (JobKey **p = &k->buckets[i]; *p;) {
                        JobKey *e = *p;
                        if (!expired(e, now_ms, window_ms)) {
                                p = &e->next;
                                continue;
                        }
                        *p = e->next;
                        free(e);
                        k->count--;
                        n++;
                }
        return n;
}

void jobkeys_free(JobKeys *k)
{
        for (size_t i = 0; i < k->nbuckets; i++)
                for (JobKey *e = k->buckets[i], *next; e; e = next) {
                        next = e->next;
                        free(e);
                }
        free(k->buckets);
        *k = (JobKeys){0};
}
