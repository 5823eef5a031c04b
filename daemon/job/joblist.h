/* SPDX-License-Identifier: MIT */
/*
 * joblist.h — job.list (PROTOCOL.md) from this host's job table: the filter a request
 * names, a page of records below a cursor, or one array of them, and the byte budget
 * every answer keeps to. A fleet's listing (fleet.h) pages the shared index with the
 * same filter, budget and packing.
 *
 * Every function here packs records under the job table's lock (job_pack_record() reads
 * the fields that change) and none yields: a request fiber calls them.
 */
#ifndef FIBERD_DAEMON_JOBLIST_H
#define FIBERD_DAEMON_JOBLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "daemon/job/jobtable.h"
#include "ipc/status.h"

/* JobListFilter - which jobs a job.list answer holds (its filter map, and who asks). */
typedef struct JobListFilter {
        bool by_state;
        JobState state;
        const char *plugin; /* view into the request, NULL = any */
        size_t plugin_len;
        uid_t uid; /* the asking client's: its own jobs only unless @all */
        bool all;  /* every user's jobs (an admin asks) */
} JobListFilter;

/* joblist_match - @j passes @f. Context: the table lock held (reads Job.state). */
bool joblist_match(const JobListFilter *f, const Job *j);

/*
 * joblist_budget - the bytes a job.list answer's records may take: under the daemon's
 * message cap @max_message and the client decoder's default one, less room for the
 * envelope. Context: any; pure.
 */
size_t joblist_budget(size_t max_message);

/* joblist_pack_raw - append the @len bytes at @buf (already msgpack) to @pk's output as
 * they are. Return: 0; nonzero when @pk's writer failed. Context: any. */
int joblist_pack_raw(msgpack_packer *pk, const char *buf, size_t len);

/*
 * joblist_pack_record - @j's record (job_pack_record(), with its result) packed under
 * @t's lock. Return: 0; -ENOMEM. Context: any fiber; takes the table lock briefly.
 */
int joblist_pack_record(JobTable *t, const Job *j, msgpack_packer *pk);

/* joblist_pack_fields - as joblist_pack_record(), the keys in @fields only
 * (job_pack_record_fields()). */
int joblist_pack_fields(JobTable *t, const Job *j, uint32_t fields, msgpack_packer *pk);

/* joblist_pack_status - as joblist_pack_record(), with the job's args too: job.status's
 * answer. Return: 0; -ENOMEM. Context: any fiber; takes the table lock briefly. */
int joblist_pack_status(JobTable *t, const Job *j, msgpack_packer *pk);

/*
 * joblist_pack_page - one page of job.list: the jobs of @t matching @f with an id below
 * @cursor (0: from the newest), newest first, at most @limit of them and no more bytes
 * than @budget (one record at least, so every page moves on). Packs {jobs,
 * next_cursor}: the id of the page's last job when more match, else nil.
 * Return: 0; -ENOMEM. Context: a request fiber; holds the table lock while it packs.
 */
int joblist_pack_page(JobTable *t, const JobListFilter *f, uint64_t cursor, uint64_t limit,
                      size_t budget, msgpack_packer *pk);

/*
 * joblist_pack_all - job.list without a cursor: one array of the newest @limit jobs of
 * @t matching @f, oldest first, as before pages; refused (MESSAGE_TOO_LARGE in @st)
 * rather than sent when it would pass @budget (the client could not read it).
 * Return: 0; -ENOMEM; an error set in @st. Context: a request fiber; holds the table
 * lock while it packs.
 */
int joblist_pack_all(JobTable *t, const JobListFilter *f, uint64_t limit, size_t budget,
                     msgpack_packer *pk, IpcStatus *st);

#endif
