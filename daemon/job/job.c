/* SPDX-License-Identifier: MIT */
/*
 * job.c — the Job object: creation with a private copy of the arguments, reference
 * counting, the wire record and its states' names (see job.h); the transitions
 * between the states are jobstate.c's.
 *
 * The arguments arrive inside a request's msgpack zone, which dies with the request,
 * so job_new() re-packs them and unpacks the bytes again into a zone of the job's own
 * (msgpack-c's zone unpacker points strings into its input, so the input bytes are
 * placed in that same zone first), the way ipc/decoder.c gives each message its zone.
 */
#include "daemon/job/job.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

uint64_t job_now_ms(void)
{
        return clock_now_ns(CLOCK_REALTIME) / NSEC_PER_MSEC;
}

/* Bytes msgpack_unpack() takes from a zone for @o's arrays and maps (strings and
 * binaries point into the packed bytes), plus an alignment allowance per allocation. */
static size_t object_tree_bytes(const msgpack_object *o)
{
        size_t n = 0;

        if (o->type == MSGPACK_OBJECT_ARRAY) {
                n += o->via.array.size * sizeof(msgpack_object) + sizeof(void *);
                for (uint32_t i = 0; i < o->via.array.size; i++)
                        n += object_tree_bytes(&o->via.array.ptr[i]);
        } else if (o->type == MSGPACK_OBJECT_MAP) {
                n += o->via.map.size * sizeof(msgpack_object_kv) + sizeof(void *);
                for (uint32_t i = 0; i < o->via.map.size; i++)
                        n += object_tree_bytes(&o->via.map.ptr[i].key) +
                             object_tree_bytes(&o->via.map.ptr[i].val);
        }
        return n;
}

/* Deep-copies @o into a fresh zone sized to fit it in one chunk (not msgpack-c's 8 KiB
 * default: the copy lives as long as the job's record). Return: 0 and *@ret_zone /
 * *@ret; -ENOMEM. */
static int job_copy_object(const msgpack_object *o, msgpack_zone **ret_zone, msgpack_object *ret)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_zone *zone = NULL;
        msgpack_object obj;
        size_t off = 0;
        char *bytes;
        int r = -ENOMEM;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (msgpack_pack_object(&pk, *o) != 0)
                goto out_sbuffer;
        zone = msgpack_zone_new(sb.size + object_tree_bytes(o) + 2 * sizeof(void *));
        if (!zone)
                goto out_sbuffer;
        bytes = msgpack_zone_malloc(zone, sb.size ? sb.size : 1);
        if (!bytes)
                goto out_zone;
        memcpy(bytes, sb.data, sb.size);
        if (msgpack_unpack(bytes, sb.size, &off, zone, &obj) != MSGPACK_UNPACK_SUCCESS)
                goto out_zone;
        msgpack_sbuffer_destroy(&sb);
        *ret_zone = zone;
        *ret = obj;
        return 0;

out_zone:
        msgpack_zone_free(zone);
out_sbuffer:
        msgpack_sbuffer_destroy(&sb);
        return r;
}

int job_new(Job **ret, struct JobTable *table, uint64_t id, JobOrigin *origin, const Plugin *plugin,
            const char *plugin_name, const msgpack_object *args, int priority, uint64_t timeout_ns,
            unsigned cls, const char *class_name)
{
        Job *j = calloc(1, sizeof(*j));
        int r = -ENOMEM;

        if (!j)
                return -ENOMEM;
        j->plugin_name = strdup(plugin_name);
        if (!j->plugin_name)
                goto out_free_job;
        r = job_copy_object(args, &j->args_zone, &j->args);
        if (r < 0)
                goto out_free_name;
        j->id = id;
        j->table = table;
        j->owner = origin->creds->uid;
        j->creds = creds_ref(origin->creds);
        j->fds = origin->fds;
        j->n_fds = origin->n_fds;
        origin->fds = NULL;
        origin->n_fds = 0;
        j->plugin = plugin;
        j->priority = priority;
        j->timeout_ns = timeout_ns;
        j->sched_class = 1 + cls;
        snprintf(j->class_name, sizeof(j->class_name), "%s", class_name);
        j->deadline_ns = timeout_ns ? sched_deadline_after(timeout_ns) : SCHED_FOREVER;
        snprintf(j->tag, sizeof(j->tag), "job %llu plugin %s", (unsigned long long)id, plugin_name);
        j->refs = 1;
        joblog_init(&j->log);
        j->heap_index = SIZE_MAX;
        list_init(&j->all_link);
        list_init(&j->fin_link);
        fiber_event_init(&j->ran);
        fiber_event_init(&j->wake);
        fiber_event_init(&j->finished);
        fiber_event_init(&j->store.committed); /* the store part's (job.h) */
        fiber_event_init(&j->store.final_committed);
        j->store.entry.is_job = true;
        *ret = j;
        return 0;

out_free_name:
        free(j->plugin_name);
out_free_job:
        free(j);
        return r;
}

Job *job_ref(Job *j)
{
        __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
        return j;
}

Job *job_unref(Job *j)
{
        if (!j)
                return NULL;
        if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return NULL;
        msgpack_zone_free(j->args_zone);
        for (size_t i = 0; i < j->n_fds; i++)
                close(j->fds[i]);
        free(j->fds);
        creds_unref(j->creds);
        free(j->plugin_name);
        free(j->result);
        free(j->error_message);
        joblog_done(&j->log);
        free(j);
        return NULL;
}

/* progress: {done, total}, or nil before the plugin says any (written without the
 * lock: host_progress) */
static int pack_progress(msgpack_packer *pk, const void *arg)
{
        const Job *j = arg;
        uint64_t done = __atomic_load_n(&j->progress_done, __ATOMIC_RELAXED);
        uint64_t total = __atomic_load_n(&j->progress_total, __ATOMIC_RELAXED);

        if (!total && !done)
                return msgpack_pack_nil(pk);
        return IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_DONE, done), IPC_KV_UINT(IPC_KEY_TOTAL, total));
}

/* result: the plugin's bytes as they are, once done; else nil */
static int pack_result(msgpack_packer *pk, const void *arg)
{
        const Job *j = arg;

        if (j->result && j->state == JOB_DONE)
                return pk->callback(pk->data, j->result, j->result_len);
        return msgpack_pack_nil(pk);
}

static int pack_error(msgpack_packer *pk, const void *arg)
{
        const Job *j = arg;

        if (!j->error_code)
                return msgpack_pack_nil(pk);
        return ipc_pack_error_map(pk, j->error_code, j->error_message ? j->error_message : "");
}

static int pack_ms_or_nil(msgpack_packer *pk, const void *arg)
{
        uint64_t ms = *(const uint64_t *)arg;

        return ms ? msgpack_pack_uint64(pk, ms) : msgpack_pack_nil(pk);
}

int job_pack_record(msgpack_packer *pk, const Job *j, bool with_result)
{
        int r = IPC_PACK_MAP(
                pk, IPC_KV_UINT(IPC_KEY_ID, j->id), IPC_KV_CSTR(IPC_KEY_PLUGIN, j->plugin_name),
                IPC_KV_CSTR(IPC_KEY_CLASS, j->class_name), IPC_KV_UINT(IPC_KEY_OWNER, j->owner),
                IPC_KV_CSTR(IPC_KEY_STATE, job_state_name(j->state)),
                IPC_KV_INT(IPC_KEY_PRIORITY, j->priority),
                IPC_KV_UINT(IPC_KEY_TIMEOUT_MS, j->timeout_ns / NSEC_PER_MSEC),
                IPC_KV_PACK(IPC_KEY_CREATED_MS, pack_ms_or_nil, &j->submitted_ms),
                IPC_KV_PACK(IPC_KEY_STARTED_MS, pack_ms_or_nil, &j->started_ms),
                IPC_KV_PACK(IPC_KEY_FINISHED_MS, pack_ms_or_nil, &j->finished_ms),
                IPC_KV_PACK(IPC_KEY_PROGRESS, pack_progress, j),
                IPC_KV_PACK_IF(with_result, IPC_KEY_RESULT, pack_result, j),
                IPC_KV_PACK(IPC_KEY_ERROR, pack_error, j),
                IPC_KV_UINT(IPC_KEY_ATTEMPT, j->attempt));

        return r ? -ENOMEM : 0;
}

static const char *const job_state_names[JOB_STATE_COUNT] = {
        [JOB_NEW] = "new",
        [JOB_QUEUED] = IPC_STATE_QUEUED,
        [JOB_RUNNING] = IPC_STATE_RUNNING,
        [JOB_DONE] = IPC_STATE_DONE,
        [JOB_FAILED] = IPC_STATE_FAILED,
        [JOB_CANCELLED] = IPC_STATE_CANCELLED,
        [JOB_SCHEDULED] = "scheduled",
        [JOB_RETRYING] = "retrying",
        [JOB_WAITING] = "waiting",
        [JOB_PAUSED] = "paused",
        [JOB_DEAD] = "dead",
};

const char *job_state_name(JobState s)
{
        return (unsigned)s < JOB_STATE_COUNT ? job_state_names[s] : "unknown";
}

int job_state_parse(const char *name, size_t len, JobState *ret)
{
        /* only what the wire knows (PROTOCOL.md): queued .. cancelled */
        for (int s = JOB_QUEUED; s <= JOB_CANCELLED; s++) {
                if (strlen(job_state_names[s]) == len &&
                    memcmp(job_state_names[s], name, len) == 0) {
                        *ret = (JobState)s;
                        return 0;
                }
        }
        return -EINVAL;
}

bool job_state_final(JobState s)
{
        return s == JOB_DONE || s == JOB_FAILED || s == JOB_CANCELLED;
}

bool job_state_active(JobState s)
{
        return s == JOB_QUEUED || s == JOB_RUNNING;
}
