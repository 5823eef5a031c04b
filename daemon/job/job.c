/* SPDX-License-Identifier: MIT */
/*
 * job.c — the Job object: creation with a private copy of the arguments, reference
 * counting, the wire record and its states' names (see job.h); the transitions
 * between the states are jobstate.c's.
 *
 * The arguments arrive inside a request's msgpack zone, which dies with the request,
 * so job_new() deep-copies the object tree into one allocation of the job's own, sized
 * to what the tree points to (nothing for {}): a job's record is kept for its
 * retention, so what it costs is counted per record (docs/design.md, "A job's memory").
 * The plugin and class names are interned (jobnames.h), not copied.
 */
#include "daemon/job/job.h"
#include "daemon/job/jobnames.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/status.h"
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

/* CLOCK_REALTIME - CLOCK_MONOTONIC (mod 2^64) and the monotonic time it was read at.
 * Written together by whoever finds the reading old; a reader that sees the new time
 * sees the new offset (release / acquire), and one that mixes an old time with a new
 * offset gets a wall time off by the clocks' drift since, microseconds. */
static uint64_t wall_offset_ns, wall_synced_ns;

uint64_t job_wall_ms_at(uint64_t mono_ns)
{
        uint64_t synced = __atomic_load_n(&wall_synced_ns, __ATOMIC_ACQUIRE), offset, mono;
        int64_t age = (int64_t)(mono_ns - synced);

        /* within a second of the last reading either way: a batch's @mono_ns may be a
         * little older than a reading another thread took since */
        if (synced && age < (int64_t)JOB_WALL_RESYNC_NS && age > -(int64_t)JOB_WALL_RESYNC_NS)
                return (mono_ns + __atomic_load_n(&wall_offset_ns, __ATOMIC_RELAXED)) /
                       NSEC_PER_MSEC;
        /* the offset from both clocks read now, not from @mono_ns, which may be some
         * time old: a wall time from an offset off by that age would put a later stamp
         * before an earlier one */
        mono = sched_now_ns();
        offset = clock_now_ns(CLOCK_REALTIME) - mono;
        __atomic_store_n(&wall_offset_ns, offset, __ATOMIC_RELAXED);
        __atomic_store_n(&wall_synced_ns, mono ? mono : 1, __ATOMIC_RELEASE);
        return (mono_ns + offset) / NSEC_PER_MSEC;
}

/* The bytes a deep copy of @o needs beyond @o itself (job_copy_object()): first
 * @*objs for its arrays and maps, then @*bytes for its strings, binaries and extensions. */
static void object_copy_size(const msgpack_object *o, size_t *objs, size_t *bytes)
{
        switch (o->type) {
        case MSGPACK_OBJECT_ARRAY:
                *objs += o->via.array.size * sizeof(msgpack_object);
                for (uint32_t i = 0; i < o->via.array.size; i++)
                        object_copy_size(&o->via.array.ptr[i], objs, bytes);
                break;
        case MSGPACK_OBJECT_MAP:
                *objs += o->via.map.size * sizeof(msgpack_object_kv);
                for (uint32_t i = 0; i < o->via.map.size; i++) {
                        object_copy_size(&o->via.map.ptr[i].key, objs, bytes);
                        object_copy_size(&o->via.map.ptr[i].val, objs, bytes);
                }
                break;
        case MSGPACK_OBJECT_STR:
                *bytes += o->via.str.size;
                break;
        case MSGPACK_OBJECT_BIN:
                *bytes += o->via.bin.size;
                break;
        case MSGPACK_OBJECT_EXT:
                *bytes += o->via.ext.size;
                break;
        default:
                break;
        }
}

/* Copies what @o points to into the buffer at *@objs (arrays and maps, aligned: every
 * element is a msgpack_object or a pair of them) and *@bytes (the rest), advancing both;
 * @dst is @o with its pointers moved there. */
static void object_copy_into(const msgpack_object *o, msgpack_object *dst, char **objs,
                             char **bytes)
{
        *dst = *o;
        switch (o->type) {
        case MSGPACK_OBJECT_ARRAY:
                dst->via.array.ptr = o->via.array.size ? (msgpack_object *)*objs : NULL;
                *objs += o->via.array.size * sizeof(msgpack_object);
                for (uint32_t i = 0; i < o->via.array.size; i++)
                        object_copy_into(&o->via.array.ptr[i], &dst->via.array.ptr[i], objs, bytes);
                break;
        case MSGPACK_OBJECT_MAP:
                dst->via.map.ptr = o->via.map.size ? (msgpack_object_kv *)*objs : NULL;
                *objs += o->via.map.size * sizeof(msgpack_object_kv);
                for (uint32_t i = 0; i < o->via.map.size; i++) {
                        object_copy_into(&o->via.map.ptr[i].key, &dst->via.map.ptr[i].key, objs,
                                         bytes);
                        object_copy_into(&o->via.map.ptr[i].val, &dst->via.map.ptr[i].val, objs,
                                         bytes);
                }
                break;
        case MSGPACK_OBJECT_STR:
                dst->via.str.ptr = *bytes;
                if (o->via.str.size) /* an empty one may point nowhere */
                        memcpy(*bytes, o->via.str.ptr, o->via.str.size);
                *bytes += o->via.str.size;
                break;
        case MSGPACK_OBJECT_BIN:
                dst->via.bin.ptr = *bytes;
                if (o->via.bin.size) /* an empty one may point nowhere */
                        memcpy(*bytes, o->via.bin.ptr, o->via.bin.size);
                *bytes += o->via.bin.size;
                break;
        case MSGPACK_OBJECT_EXT:
                dst->via.ext.ptr = *bytes;
                if (o->via.ext.size) /* an empty one may point nowhere */
                        memcpy(*bytes, o->via.ext.ptr, o->via.ext.size);
                *bytes += o->via.ext.size;
                break;
        default:
                break;
        }
}

/* The one allocation job_copy_object() made for @o: the first thing it placed (its
 * root's array, map or bytes), at the start of the buffer; NULL when it made none. */
static void *object_copy_buf(const msgpack_object *o)
{
        switch (o->type) {
        case MSGPACK_OBJECT_ARRAY:
                return o->via.array.ptr;
        case MSGPACK_OBJECT_MAP:
                return o->via.map.ptr;
        case MSGPACK_OBJECT_STR:
                return (void *)o->via.str.ptr;
        case MSGPACK_OBJECT_BIN:
                return (void *)o->via.bin.ptr;
        case MSGPACK_OBJECT_EXT:
                return (void *)o->via.ext.ptr;
        default:
                return NULL;
        }
}

/*
 * Deep-copies @o into one allocation of exactly what it points to (its arrays and maps,
 * then its strings' bytes): no msgpack_zone (a zone struct and a chunk, two malloc
 * chunks with headers, for every job, kept as long as its record), and nothing at all
 * for arguments without a container or string in them, such as {}; no pointer to it
 * is kept either (object_copy_buf() finds it again). Return: 0 and *@ret, and in
 * *@ret_len the bytes of @o packed (what the job is charged for); -ENOMEM.
 */
static int job_copy_object(const msgpack_object *o, msgpack_object *ret, uint32_t *ret_len)
{
        size_t objs = 0, bytes = 0;
        char *buf = NULL, *op, *bp;

        object_copy_size(o, &objs, &bytes);
        if (!(objs + bytes)) {
                /* a scalar, {}, [] or an empty string: nothing to point to (and no
                 * arithmetic on a NULL buffer) */
                *ret = *o;
                switch (o->type) {
                case MSGPACK_OBJECT_ARRAY:
                        ret->via.array.ptr = NULL;
                        break;
                case MSGPACK_OBJECT_MAP:
                        ret->via.map.ptr = NULL;
                        break;
                case MSGPACK_OBJECT_STR:
                        ret->via.str.ptr = NULL;
                        break;
                case MSGPACK_OBJECT_BIN:
                        ret->via.bin.ptr = NULL;
                        break;
                case MSGPACK_OBJECT_EXT:
                        ret->via.ext.ptr = NULL;
                        break;
                default:
                        break;
                }
                *ret_len = (uint32_t)jobquota_packed_size(o);
                return 0;
        }
        buf = malloc(objs + bytes);
        if (!buf)
                return -ENOMEM;
        op = buf;
        bp = buf + objs;
        object_copy_into(o, ret, &op, &bp);
        *ret_len = (uint32_t)jobquota_packed_size(o); /* within one message */
        return 0;
}

int job_new(Job **ret, struct JobTable *table, uint64_t id, JobOrigin *origin, const Plugin *plugin,
            const char *plugin_name, const msgpack_object *args, int priority, uint64_t timeout_ns,
            unsigned cls, const char *class_name)
{
        Job *j = calloc(1, sizeof(*j));
        int r = -ENOMEM;

        if (!j)
                return -ENOMEM;
        j->plugin_name = jobnames_intern(plugin_name, 0);
        j->class_name = jobnames_intern(class_name, SCHED_CLASS_NAME_MAX);
        if (!j->plugin_name || !j->class_name)
                goto out_free_job;
        r = job_copy_object(args, &j->args, &j->args_bytes);
        if (r < 0)
                goto out_free_job;
        r = job_live_new(j);
        if (r < 0)
                goto out_free_args;
        j->id = id;
        j->table = table;
        j->owner = origin->creds->uid;
        j->creds = creds_ref(origin->creds);
        j->fds = origin->fds;
        j->n_fds = origin->n_fds;
        origin->fds = NULL;
        origin->n_fds = 0;
        j->live->plugin = plugin;
        j->priority = priority;
        j->timeout_ns = timeout_ns;
        j->live->deadline_ns = timeout_ns ? sched_deadline_after(timeout_ns) : SCHED_FOREVER;
        j->sched_class = 1 + cls;
        j->refs = 1;
        joblog_init(&j->log);
        j->max_attempts = 1;
        list_init(&j->all_link);
        list_init(&j->fin_link);
        list_init(&j->quota.link);
        fiber_event_init(&j->finished);
        fiber_event_init(&j->store.committed); /* the store part's (job.h) */
        fiber_event_init(&j->store.final_committed);
        j->store.entry.is_job = true;
        *ret = j;
        return 0;

out_free_args:
        free(object_copy_buf(&j->args));
out_free_job:
        free(j);
        return r;
}

int job_live_new(Job *j)
{
        JobLive *l;

        if (j->live)
                return 0;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->deadline_ns = j->timeout_ns ? sched_deadline_after(j->timeout_ns) : SCHED_FOREVER;
        l->due_index = SIZE_MAX;
        l->heap_index = SIZE_MAX;
        j->live = l;
        return 0;
}

void job_live_drop(Job *j)
{
        JobLive *l = j->live;

        if (!l)
                return;
        j->live = NULL;
        for (size_t i = 0; i < l->n_dependents; i++)
                job_unref(l->dependents[i]);
        free(l->dependents);
        free(l);
}

/* Appends @n bytes of @s to @buf at *@at, as far as @size leaves room (one kept for the
 * NUL). */
static void tag_put(char *buf, size_t size, size_t *at, const char *s, size_t n)
{
        if (*at + 1 >= size)
                return;
        if (n > size - 1 - *at)
                n = size - 1 - *at;
        memcpy(buf + *at, s, n);
        *at += n;
}

char *job_format_tag(const Job *j, char *buf, size_t size)
{
        /* by hand: this runs for every job, and snprintf() was 2 % of a trivial job's
         * server CPU */
        char digits[20];
        size_t at = 0, nd = 0;
        uint64_t id = j->id;

        if (!size)
                return buf;
        do
                digits[sizeof(digits) - ++nd] = (char)('0' + id % 10);
        while ((id /= 10)); /* a uint64_t has at most 20 digits */
        tag_put(buf, size, &at, "job ", 4);
        tag_put(buf, size, &at, digits + sizeof(digits) - nd, nd);
        tag_put(buf, size, &at, " plugin ", 8);
        tag_put(buf, size, &at, j->plugin_name, strlen(j->plugin_name));
        buf[at] = '\0';
        return buf;
}

Job *job_ref(Job *j)
{
        __atomic_add_fetch(&j->refs, 1, __ATOMIC_RELAXED);
        return j;
}

/* Frees @c and what it owns. Accepts NULL. */
static void job_sched_free(JobSched *c)
{
        if (!c)
                return;
        free(c->after);
        free(c->key);
        for (size_t i = 0; c->errors && i < IPC_JOB_ERRORS_MAX; i++)
                free(c->errors[i].message);
        free(c->errors);
        free(c);
}

Job *job_unref(Job *j)
{
        if (!j)
                return NULL;
        if (__atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return NULL;
        free(object_copy_buf(&j->args));
        for (size_t i = 0; i < j->n_fds; i++)
                close(j->fds[i]);
        free(j->fds);
        creds_unref(j->creds);
        free(j->result);
        free(j->error_message);
        job_sched_free(j->sched);
        job_live_drop(j);
        joblog_done(&j->log);
        free(j);
        return NULL;
}

/* @j's JobSched, made with the defaults when it has none. Return: it; NULL when out of
 * memory. */
static JobSched *job_sched(Job *j)
{
        if (!j->sched && (j->sched = calloc(1, sizeof(*j->sched)))) {
                j->sched->backoff_ms = IPC_BACKOFF_MS_DEFAULT;
                j->sched->backoff_max_ms = IPC_BACKOFF_MAX_MS_DEFAULT;
        }
        return j->sched;
}

int job_set_plan(Job *j, const JobPlan *plan)
{
        uint64_t backoff_ms = plan->backoff_ms ? plan->backoff_ms : IPC_BACKOFF_MS_DEFAULT;
        uint64_t backoff_max_ms =
                plan->backoff_max_ms ? plan->backoff_max_ms : IPC_BACKOFF_MAX_MS_DEFAULT;
        uint64_t *after = NULL;
        char *key = NULL;
        JobSched *c;

        j->max_attempts = plan->max_attempts ? plan->max_attempts : 1;
        if (!plan->run_at_ms && !plan->n_after && !plan->key &&
            backoff_ms == IPC_BACKOFF_MS_DEFAULT && backoff_max_ms == IPC_BACKOFF_MAX_MS_DEFAULT &&
            !j->sched)
                return 0; /* nothing past the defaults: no JobSched */
        if (plan->n_after) {
                after = malloc(plan->n_after * sizeof(*after));
                if (!after)
                        return -ENOMEM;
                memcpy(after, plan->after, plan->n_after * sizeof(*after));
        }
        if ((plan->key && !(key = strdup(plan->key))) || !(c = job_sched(j))) {
                free(after);
                free(key);
                return -ENOMEM;
        }
        free(c->after);
        free(c->key);
        c->after = after;
        j->n_after = plan->n_after;
        c->key = key;
        c->run_at_ms = plan->run_at_ms;
        c->backoff_ms = backoff_ms;
        c->backoff_max_ms = backoff_max_ms;
        return 0;
}

void job_add_run_error(Job *j, const char *code, const char *message, uint64_t finished_ms)
{
        JobSched *c = job_sched(j);
        JobRunError *e;

        if (!c || (!c->errors && !(c->errors = calloc(IPC_JOB_ERRORS_MAX, sizeof(*c->errors)))))
                return; /* the record lists one failed run fewer */
        e = &c->errors[j->n_errors % IPC_JOB_ERRORS_MAX];
        free(e->message);
        *e = (JobRunError){.attempt = j->attempt,
                           .code = code,
                           .message = strdup(message ? message : ""),
                           .finished_ms = finished_ms};
        j->n_errors++;
}

uint64_t job_backoff_ms(const Job *j, uint32_t attempt)
{
        uint64_t backoff_max_ms = j->sched ? j->sched->backoff_max_ms : IPC_BACKOFF_MAX_MS_DEFAULT;
        uint64_t wait = j->sched ? j->sched->backoff_ms : IPC_BACKOFF_MS_DEFAULT, r;

        for (uint32_t i = 1; i < attempt && wait < backoff_max_ms; i++)
                wait *= 2;
        if (wait > backoff_max_ms)
                wait = backoff_max_ms;
        /* 50-100 % */
        r = wait / 2 ? jitter_below(wait / 2 + 1) : 0;
        return wait - wait / 2 + r;
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
static int pack_args(msgpack_packer *pk, const void *arg)
{
        const Job *j = arg;

        return msgpack_pack_object(pk, j->args);
}

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

static int pack_after(msgpack_packer *pk, const void *arg)
{
        const Job *j = arg;
        int r = msgpack_pack_array(pk, j->n_after);

        for (size_t i = 0; r == 0 && i < j->n_after; i++)
                r = msgpack_pack_uint64(pk, j->sched->after[i]);
        return r;
}

static int pack_key(msgpack_packer *pk, const void *arg)
{
        const char *key = arg;

        return key ? ipc_pack_cstr(pk, key) : msgpack_pack_nil(pk);
}

int job_pack_run_errors(msgpack_packer *pk, const Job *j)
{
        const JobRunError *errors = j->sched ? j->sched->errors : NULL;
        uint32_t n = !errors                            ? 0
                     : j->n_errors < IPC_JOB_ERRORS_MAX ? j->n_errors
                                                        : IPC_JOB_ERRORS_MAX;
        int r = msgpack_pack_array(pk, n);

        for (uint32_t i = j->n_errors - n; r == 0 && i < j->n_errors; i++) {
                const JobRunError *e = &errors[i % IPC_JOB_ERRORS_MAX];
                r = IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ATTEMPT, e->attempt),
                                 IPC_KV_CSTR(IPC_KEY_CODE, e->code ? e->code : IPC_INTERNAL),
                                 IPC_KV_CSTR(IPC_KEY_MESSAGE, e->message ? e->message : ""),
                                 IPC_KV_UINT(IPC_KEY_FINISHED_MS, e->finished_ms));
        }
        return r;
}

static int pack_errors(msgpack_packer *pk, const void *arg)
{
        return job_pack_run_errors(pk, arg);
}

bool job_has_schedule(const Job *j)
{
        return job_run_at_ms(j) || job_due_ms(j) || j->max_attempts > 1 || j->n_after ||
               job_plan_key(j) || j->n_errors;
}

/* the schedule's own keys (the store's, not the wire's) */
#define SCHED_KEY_DUE_MS "due_ms"

int job_pack_schedule(msgpack_packer *pk, const Job *j)
{
        const JobSched *c = j->sched;

        return IPC_PACK_MAP(
                pk, IPC_KV_UINT(IPC_KEY_RUN_AT_MS, job_run_at_ms(j)),
                IPC_KV_UINT(SCHED_KEY_DUE_MS, job_due_ms(j)),
                IPC_KV_UINT(IPC_KEY_MAX_ATTEMPTS, j->max_attempts),
                IPC_KV_UINT(IPC_OPT_BACKOFF_MS, c ? c->backoff_ms : IPC_BACKOFF_MS_DEFAULT),
                IPC_KV_UINT(IPC_OPT_BACKOFF_MAX_MS,
                            c ? c->backoff_max_ms : IPC_BACKOFF_MAX_MS_DEFAULT),
                IPC_KV_PACK(IPC_KEY_AFTER, pack_after, j),
                IPC_KV_PACK(IPC_KEY_KEY, pack_key, job_plan_key(j)),
                IPC_KV_PACK(IPC_KEY_ERRORS, pack_errors, j));
}

static bool obj_key_is(const msgpack_object *k, const char *name)
{
        return k->type == MSGPACK_OBJECT_STR && k->via.str.size == strlen(name) &&
               memcmp(k->via.str.ptr, name, k->via.str.size) == 0;
}

static uint64_t obj_u64(const msgpack_object *o)
{
        return o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? o->via.u64 : 0;
}

static char *obj_strdup(const msgpack_object *o)
{
        return o->type == MSGPACK_OBJECT_STR ? strndup(o->via.str.ptr, o->via.str.size) : NULL;
}

/* errors: [{attempt, code, message, finished_ms}] back into the ring */
static void unpack_errors(Job *j, const msgpack_object *o)
{
        if (o->type != MSGPACK_OBJECT_ARRAY)
                return;
        for (uint32_t i = 0; i < o->via.array.size; i++) {
                const msgpack_object *e = &o->via.array.ptr[i];
                uint32_t attempt = j->attempt;
                const char *code = IPC_INTERNAL;
                char *msg = NULL;
                uint64_t finished_ms = 0;
                if (e->type != MSGPACK_OBJECT_MAP)
                        continue;
                for (uint32_t k = 0; k < e->via.map.size; k++) {
                        const msgpack_object_kv *kv = &e->via.map.ptr[k];
                        if (obj_key_is(&kv->key, IPC_KEY_ATTEMPT))
                                attempt = (uint32_t)obj_u64(&kv->val);
                        else if (obj_key_is(&kv->key, IPC_KEY_CODE) &&
                                 kv->val.type == MSGPACK_OBJECT_STR)
                                code = ipc_status_canonical_code(kv->val.via.str.ptr,
                                                                 kv->val.via.str.size);
                        else if (obj_key_is(&kv->key, IPC_KEY_MESSAGE))
                                msg = obj_strdup(&kv->val);
                        else if (obj_key_is(&kv->key, IPC_KEY_FINISHED_MS))
                                finished_ms = obj_u64(&kv->val);
                }
                uint32_t keep = j->attempt;
                j->attempt = attempt;
                job_add_run_error(j, code, msg, finished_ms);
                j->attempt = keep;
                free(msg);
        }
}

int job_unpack_schedule(Job *j, const char *buf, size_t len)
{
        msgpack_unpacked u;
        size_t off = 0;
        int r = -EINVAL;

        msgpack_unpacked_init(&u);
        if (msgpack_unpack_next(&u, buf, len, &off) != MSGPACK_UNPACK_SUCCESS ||
            u.data.type != MSGPACK_OBJECT_MAP)
                goto out;
        for (uint32_t i = 0; i < u.data.via.map.size; i++) {
                const msgpack_object_kv *kv = &u.data.via.map.ptr[i];
                uint64_t v = obj_u64(&kv->val);
                if (obj_key_is(&kv->key, IPC_KEY_RUN_AT_MS)) {
                        if (v && !job_sched(j))
                                goto out_nomem;
                        if (j->sched)
                                j->sched->run_at_ms = v;
                } else if (obj_key_is(&kv->key, SCHED_KEY_DUE_MS)) {
                        if (j->live) /* a finished record has no due time to keep */
                                j->live->due_ms = obj_u64(&kv->val);
                } else if (obj_key_is(&kv->key, IPC_KEY_MAX_ATTEMPTS))
                        j->max_attempts = (uint32_t)obj_u64(&kv->val);
                else if (obj_key_is(&kv->key, IPC_OPT_BACKOFF_MS)) {
                        if (v != IPC_BACKOFF_MS_DEFAULT && !job_sched(j))
                                goto out_nomem;
                        if (j->sched)
                                j->sched->backoff_ms = v;
                } else if (obj_key_is(&kv->key, IPC_OPT_BACKOFF_MAX_MS)) {
                        if (v != IPC_BACKOFF_MAX_MS_DEFAULT && !job_sched(j))
                                goto out_nomem;
                        if (j->sched)
                                j->sched->backoff_max_ms = v;
                } else if (obj_key_is(&kv->key, IPC_KEY_KEY)) {
                        char *key = obj_strdup(&kv->val);
                        if (key && !job_sched(j)) {
                                free(key);
                                goto out_nomem;
                        }
                        if (j->sched) {
                                free(j->sched->key);
                                j->sched->key = key;
                        }
                } else if (obj_key_is(&kv->key, IPC_KEY_AFTER) &&
                           kv->val.type == MSGPACK_OBJECT_ARRAY && kv->val.via.array.size) {
                        uint32_t n = kv->val.via.array.size;
                        uint64_t *a = calloc(n, sizeof(*a));
                        if (!a || !job_sched(j)) {
                                free(a);
                                goto out_nomem;
                        }
                        for (uint32_t k = 0; k < n; k++)
                                a[k] = obj_u64(&kv->val.via.array.ptr[k]);
                        free(j->sched->after);
                        j->sched->after = a;
                        j->n_after = n;
                } else if (obj_key_is(&kv->key, IPC_KEY_ERRORS)) {
                        unpack_errors(j, &kv->val);
                }
        }
        if (!j->max_attempts)
                j->max_attempts = 1;
        r = 0;
        goto out;
out_nomem:
        r = -ENOMEM;
out:
        msgpack_unpacked_destroy(&u);
        return r;
}

/* The record's keys in the order job_pack_record_fields() packs them: bit i of a fields
 * mask is record_keys[i]. Each with its length, so that a request's fields list is
 * matched without a strlen per key and per field. */
enum {
        FIELD_ID,
        FIELD_PLUGIN,
        FIELD_CLASS,
        FIELD_OWNER,
        FIELD_STATE,
        FIELD_PRIORITY,
        FIELD_TIMEOUT_MS,
        FIELD_CREATED_MS,
        FIELD_STARTED_MS,
        FIELD_FINISHED_MS,
        FIELD_PROGRESS,
        FIELD_ARGS,
        FIELD_RESULT,
        FIELD_ERROR,
        FIELD_ATTEMPT,
        FIELD_MAX_ATTEMPTS,
        FIELD_NEXT_ATTEMPT_MS,
        FIELD_RUN_AT_MS,
        FIELD_AFTER,
        FIELD_KEY,
        FIELD_ERRORS,
        FIELD_COUNT
};
#define RECORD_KEY(f, k) [f] = {k, sizeof(k) - 1}
static const struct {
        const char *name;
        size_t len;
} record_keys[FIELD_COUNT] = {
        RECORD_KEY(FIELD_ID, IPC_KEY_ID),
        RECORD_KEY(FIELD_PLUGIN, IPC_KEY_PLUGIN),
        RECORD_KEY(FIELD_CLASS, IPC_KEY_CLASS),
        RECORD_KEY(FIELD_OWNER, IPC_KEY_OWNER),
        RECORD_KEY(FIELD_STATE, IPC_KEY_STATE),
        RECORD_KEY(FIELD_PRIORITY, IPC_KEY_PRIORITY),
        RECORD_KEY(FIELD_TIMEOUT_MS, IPC_KEY_TIMEOUT_MS),
        RECORD_KEY(FIELD_CREATED_MS, IPC_KEY_CREATED_MS),
        RECORD_KEY(FIELD_STARTED_MS, IPC_KEY_STARTED_MS),
        RECORD_KEY(FIELD_FINISHED_MS, IPC_KEY_FINISHED_MS),
        RECORD_KEY(FIELD_PROGRESS, IPC_KEY_PROGRESS),
        RECORD_KEY(FIELD_ARGS, IPC_KEY_ARGS),
        RECORD_KEY(FIELD_RESULT, IPC_KEY_RESULT),
        RECORD_KEY(FIELD_ERROR, IPC_KEY_ERROR),
        RECORD_KEY(FIELD_ATTEMPT, IPC_KEY_ATTEMPT),
        RECORD_KEY(FIELD_MAX_ATTEMPTS, IPC_KEY_MAX_ATTEMPTS),
        RECORD_KEY(FIELD_NEXT_ATTEMPT_MS, IPC_KEY_NEXT_ATTEMPT_MS),
        RECORD_KEY(FIELD_RUN_AT_MS, IPC_KEY_RUN_AT_MS),
        RECORD_KEY(FIELD_AFTER, IPC_KEY_AFTER),
        RECORD_KEY(FIELD_KEY, IPC_KEY_KEY),
        RECORD_KEY(FIELD_ERRORS, IPC_KEY_ERRORS),
};
#define FIELD_BIT(i) (1u << (i))
#define FIELDS_ALWAYS (FIELD_BIT(FIELD_ID) | FIELD_BIT(FIELD_STATE))
_Static_assert(FIELD_COUNT <= 32, "a fields mask has a bit for each key");

int job_fields_parse(const msgpack_object *o, uint32_t *ret, IpcStatus *st)
{
        uint32_t mask = FIELDS_ALWAYS;

        if (!o || o->type == MSGPACK_OBJECT_NIL) {
                *ret = JOB_FIELDS_ALL;
                return 0;
        }
        if (o->type != MSGPACK_OBJECT_ARRAY)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "fields: expected an array of record keys or nil");
        for (uint32_t k = 0; k < o->via.array.size; k++) {
                const msgpack_object *e = &o->via.array.ptr[k];
                size_t i;

                if (e->type != MSGPACK_OBJECT_STR)
                        return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                              "fields[%u]: expected a record key (a string)", k);
                for (i = 0; i < ELEMENTSOF(record_keys); i++)
                        if (i != FIELD_ARGS && record_keys[i].len == e->via.str.size &&
                            record_keys[i].name[0] == e->via.str.ptr[0] &&
                            memcmp(record_keys[i].name, e->via.str.ptr, e->via.str.size) == 0)
                                break;
                if (i == ELEMENTSOF(record_keys)) {
                        /* the keys it may name, from the table the packer follows */
                        char keys[256] = "";
                        size_t at = 0;

                        for (i = 0; i < ELEMENTSOF(record_keys); i++)
                                if (i != FIELD_ARGS && at < sizeof(keys))
                                        at += (size_t)snprintf(keys + at, sizeof(keys) - at, "%s%s",
                                                               at ? ", " : "", record_keys[i].name);
                        return ipc_status_set(
                                st, IPC_INVALID_ARGUMENT, -EINVAL,
                                "fields[%u]: \"%.*s\" is not a key of the job record (%s)", k,
                                (int)(e->via.str.size > 64 ? 64 : e->via.str.size), e->via.str.ptr,
                                keys);
                }
                mask |= FIELD_BIT(i);
        }
        *ret = mask;
        return 0;
}

int job_pack_record(msgpack_packer *pk, const Job *j, bool with_result, bool with_args)
{
        return job_pack_record_fields(pk, j, with_result, with_args, JOB_FIELDS_ALL);
}

/* A time in ms, nil when 0 (not yet, none). */
static void kv_ms(IpcKv *kv, const char *k, uint64_t ms)
{
        if (ms)
                *kv = (IpcKv)IPC_KV_UINT(k, ms);
        else
                *kv = (IpcKv)IPC_KV_NIL(k);
}

/* The entry of record key @i (record_keys[i]) for @j into @kv: a switch, so that a
 * fields mask of four keys computes four entries, not the whole record's. Written in
 * place: an entry returned by value went through the stack in halves and was read back
 * whole, a stalled store forward per key (perf). */
static void record_kv(IpcKv *kv, const Job *j, unsigned i, bool with_result, bool with_args)
{
        const char *k = record_keys[i].name;

        switch (i) {
        case FIELD_ID:
                *kv = (IpcKv)IPC_KV_UINT(k, j->id);
                return;
        case FIELD_PLUGIN:
                *kv = (IpcKv)IPC_KV_CSTR(k, j->plugin_name);
                return;
        case FIELD_CLASS:
                *kv = (IpcKv)IPC_KV_CSTR(k, j->class_name);
                return;
        case FIELD_OWNER:
                *kv = (IpcKv)IPC_KV_UINT(k, j->owner);
                return;
        case FIELD_STATE:
                *kv = (IpcKv)IPC_KV_CSTR(k, job_state_name(j->state));
                return;
        case FIELD_PRIORITY:
                *kv = (IpcKv)IPC_KV_INT(k, j->priority);
                return;
        case FIELD_TIMEOUT_MS:
                *kv = (IpcKv)IPC_KV_UINT(k, j->timeout_ns / NSEC_PER_MSEC);
                return;
        case FIELD_CREATED_MS:
                kv_ms(kv, k, j->submitted_ms);
                return;
        case FIELD_STARTED_MS:
                kv_ms(kv, k, j->started_ms);
                return;
        case FIELD_FINISHED_MS:
                kv_ms(kv, k, j->finished_ms);
                return;
        case FIELD_PROGRESS:
                *kv = (IpcKv)IPC_KV_PACK(k, pack_progress, j);
                return;
        case FIELD_ARGS:
                *kv = (IpcKv)IPC_KV_PACK_IF(with_args, k, pack_args, j);
                return;
        case FIELD_RESULT:
                *kv = (IpcKv)IPC_KV_PACK_IF(with_result, k, pack_result, j);
                return;
        case FIELD_ERROR:
                *kv = (IpcKv)IPC_KV_PACK(k, pack_error, j);
                return;
        case FIELD_ATTEMPT:
                *kv = (IpcKv)IPC_KV_UINT(k, j->attempt);
                return;
        case FIELD_MAX_ATTEMPTS:
                *kv = (IpcKv)IPC_KV_UINT(k, j->max_attempts ? j->max_attempts : 1);
                return;
        case FIELD_NEXT_ATTEMPT_MS:
                kv_ms(kv, k, j->state == JOB_RETRYING ? job_due_ms(j) : 0);
                return;
        case FIELD_RUN_AT_MS:
                kv_ms(kv, k, job_run_at_ms(j));
                return;
        case FIELD_AFTER:
                *kv = (IpcKv)IPC_KV_PACK(k, pack_after, j);
                return;
        case FIELD_KEY:
                *kv = (IpcKv)IPC_KV_PACK(k, pack_key, job_plan_key(j));
                return;
        default: /* FIELD_ERRORS */
                *kv = (IpcKv)IPC_KV_PACK(k, pack_errors, j);
                return;
        }
}

int job_pack_record_fields(msgpack_packer *pk, const Job *j, bool with_result, bool with_args,
                           uint32_t fields)
{
        IpcKv kv[FIELD_COUNT];
        size_t n = 0;

        for (uint32_t m = fields & (FIELD_BIT(FIELD_COUNT) - 1); m; m &= m - 1)
                record_kv(&kv[n++], j, (unsigned)__builtin_ctz(m), with_result, with_args);
        return ipc_pack_map_kv(pk, kv, n) ? -ENOMEM : 0;
}

static const char *const job_state_names[JOB_STATE_COUNT] = {
        [JOB_NEW] = "new",
        [JOB_QUEUED] = IPC_STATE_QUEUED,
        [JOB_RUNNING] = IPC_STATE_RUNNING,
        [JOB_DONE] = IPC_STATE_DONE,
        [JOB_FAILED] = IPC_STATE_FAILED,
        [JOB_CANCELLED] = IPC_STATE_CANCELLED,
        [JOB_SCHEDULED] = IPC_STATE_SCHEDULED,
        [JOB_RETRYING] = IPC_STATE_RETRYING,
        [JOB_WAITING] = IPC_STATE_WAITING,
        [JOB_DEAD] = IPC_STATE_DEAD,
};

const char *job_state_name(JobState s)
{
        return (unsigned)s < JOB_STATE_COUNT ? job_state_names[s] : "unknown";
}

int job_state_parse(const char *name, size_t len, JobState *ret)
{
        /* only what the wire knows (PROTOCOL.md): queued .. dead, not new */
        for (int s = JOB_QUEUED; s < JOB_STATE_COUNT; s++) {
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
        return s == JOB_DONE || s == JOB_FAILED || s == JOB_CANCELLED || s == JOB_DEAD;
}

bool job_state_held(JobState s)
{
        return s == JOB_SCHEDULED || s == JOB_WAITING || s == JOB_RETRYING;
}

bool job_state_active(JobState s)
{
        return s == JOB_QUEUED || s == JOB_RUNNING;
}
