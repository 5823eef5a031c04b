/* SPDX-License-Identifier: MIT */
/*
 * joblist.c — job.list answered from this host's job table (see joblist.h).
 *
 * A page walks the table's id list from the newest job down and stops at the limit or
 * the byte budget; the unpaged answer counts the matches first, skips the older ones
 * beyond the limit and packs the rest oldest first. Both pack into a scratch buffer
 * under the table lock, so the answer is one consistent view of the table, and copy it
 * into the reply after the lock is released.
 */
#include "daemon/job/joblist.h"
#include "ipc/decoder.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"

#include <errno.h>
#include <string.h>

bool joblist_match(const JobListFilter *f, const Job *j)
{
        if (!f->all && f->uid != j->owner)
                return false;
        if (f->by_state && j->state != f->state)
                return false;
        if (f->plugin && (strlen(j->plugin_name) != f->plugin_len ||
                          memcmp(j->plugin_name, f->plugin, f->plugin_len) != 0))
                return false;
        return true;
}

size_t joblist_budget(size_t max_message)
{
        size_t cap = max_message < IPC_DEFAULT_MAX_MESSAGE ? max_message : IPC_DEFAULT_MAX_MESSAGE;
        return cap - cap / 16;
}

int joblist_pack_raw(msgpack_packer *pk, const char *buf, size_t len)
{
        return len ? pk->callback(pk->data, buf, len) : 0;
}

int joblist_pack_record(JobTable *t, const Job *j, msgpack_packer *pk)
{
        return joblist_pack_fields(t, j, JOB_FIELDS_ALL, pk);
}

int joblist_pack_fields(JobTable *t, const Job *j, uint32_t fields, msgpack_packer *pk)
{
        int r;

        jobtable_lock(t);
        r = job_pack_record_fields(pk, j, true, false, fields);
        jobtable_unlock(t);
        return r;
}

int joblist_pack_status(JobTable *t, const Job *j, msgpack_packer *pk)
{
        int r;

        jobtable_lock(t);
        r = job_pack_record(pk, j, true, true);
        jobtable_unlock(t);
        return r;
}

int joblist_pack_page(JobTable *t, const JobListFilter *f, uint64_t cursor, uint64_t limit,
                      size_t budget, msgpack_packer *pk)
{
        msgpack_sbuffer body;
        msgpack_packer bp;
        uint64_t next = 0, last = 0;
        uint32_t n = 0;
        int r = 0;

        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        jobtable_lock(t);
        for (Job *j = jobtable_prev_locked(t, NULL); j; j = jobtable_prev_locked(t, j)) {
                size_t before = body.size;

                if ((cursor && j->id >= cursor) || !joblist_match(f, j))
                        continue;
                if (n == limit) {
                        next = last;
                        break;
                }
                if ((r = job_pack_record(&bp, j, true, false)) < 0)
                        break;
                if (body.size > budget && n > 0) {
                        body.size = before; /* this record starts the next page */
                        next = last;
                        break;
                }
                n++;
                last = j->id;
        }
        jobtable_unlock(t);
        if (r == 0)
                r = msgpack_pack_map(pk, 2) | ipc_pack_cstr(pk, IPC_KEY_JOBS) |
                    msgpack_pack_array(pk, n) | joblist_pack_raw(pk, body.data, body.size) |
                    (next ? ipc_pack_kv_uint(pk, IPC_KEY_NEXT_CURSOR, next)
                          : ipc_pack_kv_nil(pk, IPC_KEY_NEXT_CURSOR));
        msgpack_sbuffer_destroy(&body);
        return r ? -ENOMEM : 0;
}

int joblist_pack_all(JobTable *t, const JobListFilter *f, uint64_t limit, size_t budget,
                     msgpack_packer *pk, IpcStatus *st)
{
        msgpack_sbuffer body;
        msgpack_packer bp;
        uint64_t matches = 0, skip, count;
        int r = 0;

        msgpack_sbuffer_init(&body);
        msgpack_packer_init(&bp, &body, msgpack_sbuffer_write);
        jobtable_lock(t);
        for (Job *j = jobtable_next_locked(t, NULL); j; j = jobtable_next_locked(t, j))
                matches += joblist_match(f, j);
        skip = matches > limit ? matches - limit : 0;
        count = matches - skip;
        for (Job *j = jobtable_next_locked(t, NULL); j && r == 0 && body.size <= budget;
             j = jobtable_next_locked(t, j)) {
                if (!joblist_match(f, j))
                        continue;
                if (skip) {
                        skip--;
                        continue;
                }
                r |= job_pack_record(&bp, j, true, false);
        }
        jobtable_unlock(t);
        if (r != 0)
                r = -ENOMEM;
        else if (body.size > budget)
                r = ipc_status_set(st, IPC_MESSAGE_TOO_LARGE, -EMSGSIZE,
                                   "%llu jobs match, more than one answer holds: ask for pages "
                                   "with the filter key \"cursor\" (fiberctl list does), or "
                                   "set a limit",
                                   (unsigned long long)count);
        else if (msgpack_pack_array(pk, (uint32_t)count) |
                 joblist_pack_raw(pk, body.data, body.size))
                r = -ENOMEM;
        msgpack_sbuffer_destroy(&body);
        return r;
}
