/* SPDX-License-Identifier: MIT */
/*
 * jobkeys.h — idempotency keys: which job a (owner, key) pair named, and until when a
 * repeat of it answers that job instead of making a new one.
 *
 * Stripe's rule (and Faktory's unique jobs): a submission whose key matches a job of the
 * same owner that is not final, or that ended less than the window ago, answers that
 * job's id; the options and args of the repeat are not compared. An entry outlives its
 * job's record when retention drops the job before the window ends (the id is still
 * answered); entries past the window are dropped by jobkeys_sweep_locked().
 *
 * A chained hash table of small entries, each with its own copy of the key. Every
 * function runs under the job table's lock; none yields.
 */
#ifndef FIBERD_DAEMON_JOBKEYS_H
#define FIBERD_DAEMON_JOBKEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct JobKey JobKey;

typedef struct JobKeys {
        JobKey **buckets; /* owned; power-of-two count */
        size_t nbuckets, count;
} JobKeys;

/* jobkeys_free - drop every entry. Accepts an empty set. */
void jobkeys_free(JobKeys *k);

/*
 * jobkeys_find_locked - the id of @owner's job keyed @key, when that job is not final
 * (finished_ms 0) or ended after @now_ms - @window_ms. Return: true and *@ret_id; false.
 */
bool jobkeys_find_locked(const JobKeys *k, uid_t owner, const char *key, uint64_t now_ms,
                         uint64_t window_ms, uint64_t *ret_id);

/*
 * jobkeys_put_locked - @owner's @key (copied) names job @id, final at @finished_ms (0 =
 * not final); replaces an entry of the same pair. Return: 0; -ENOMEM.
 */
int jobkeys_put_locked(JobKeys *k, uid_t owner, const char *key, uint64_t id, uint64_t finished_ms);

/* jobkeys_sweep_locked - drop the entries of jobs that ended before @now_ms - @window_ms.
 * Return: how many. */
size_t jobkeys_sweep_locked(JobKeys *k, uint64_t now_ms, uint64_t window_ms);

#endif
