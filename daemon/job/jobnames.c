/* SPDX-License-Identifier: MIT */
/*
 * jobnames.c — interned plugin and class names (jobnames.h): a fixed array of chains
 * of entries that are never removed, read without a lock, added under one.
 */
#include "daemon/job/jobnames.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The distinct names are few (plugins and classes): 256 chains keep them one or two deep. */
#define JOBNAMES_BUCKETS 256

typedef struct JobName {
        struct JobName *next; /* in its chain; written before the entry is published */
        size_t len;
        char name[];
} JobName;

static JobName *jobnames_buckets[JOBNAMES_BUCKETS];
static pthread_mutex_t jobnames_lock = PTHREAD_MUTEX_INITIALIZER;

/* FNV-1a over @len bytes of @s */
static size_t jobnames_hash(const char *s, size_t len)
{
        uint32_t h = 2166136261u;

        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)s[i]) * 16777619u;
        return h & (JOBNAMES_BUCKETS - 1);
}

static const char *jobnames_find(JobName *const *head, const char *name, size_t len)
{
        for (const JobName *e = __atomic_load_n(head, __ATOMIC_ACQUIRE); e; e = e->next)
                if (e->len == len && memcmp(e->name, name, len) == 0)
                        return e->name;
        return NULL;
}

const char *jobnames_intern(const char *name, size_t max)
{
        size_t len = max ? strnlen(name, max) : strlen(name);
        JobName **head = &jobnames_buckets[jobnames_hash(name, len)];
        const char *found = jobnames_find(head, name, len);
        JobName *e;

        if (found)
                return found;
        pthread_mutex_lock(&jobnames_lock);
        found = jobnames_find(head, name, len); /* another thread may have added it */
        if (!found && (e = malloc(sizeof(*e) + len + 1))) {
                e->len = len;
                memcpy(e->name, name, len);
                e->name[len] = '\0';
                e->next = *head;
                __atomic_store_n(head, e, __ATOMIC_RELEASE);
                found = e->name;
        }
        pthread_mutex_unlock(&jobnames_lock);
        return found;
}
