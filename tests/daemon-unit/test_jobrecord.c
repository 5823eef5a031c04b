/* SPDX-License-Identifier: MIT */
/*
 * test_jobrecord.c — what a finished job's record costs and still answers, without a
 * daemon (docs/design.md, "A job's memory"): the Job stays within its byte budget; its
 * arguments are one allocation of exactly what they point to and pack back to the bytes
 * submitted; plugin and class names are interned; the log buffer, the JobSched and the
 * JobLive exist only while needed, and a record without them packs the same defaults
 * the protocol promises; each record key can be asked alone (job.run's `fields`);
 * job.retry's revive gets a fresh JobLive.
 */
#include "daemon/job/job.h"
#include "daemon/job/jobnames.h"
#include "daemon/job/jobstate.h"
#include "daemon/server/creds.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "ipc/value.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/*
 * The Job's budget: with glibc's 16-byte chunks and 8-byte header, 440 bytes is a
 * 448-byte chunk, so a finished trivial job costs under 512 bytes with its result and its
 * hash bucket (tests/bench product-record). A field added to Job that a finished record
 * does not need belongs in JobLive or JobSched (job.h).
 */
#define JOB_BYTES_MAX 440

/* Unpacks @sb's bytes into @u (the caller destroys it). */
static const msgpack_object *unpack(msgpack_sbuffer *sb, msgpack_unpacked *u)
{
        size_t off = 0;

        msgpack_unpacked_init(u);
        cr_assert_eq(msgpack_unpack_next(u, sb->data, sb->size, &off), MSGPACK_UNPACK_SUCCESS);
        return &u->data;
}

/* @o is the string @s. */
static bool str_is(const msgpack_object *o, const char *s)
{
        return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
               memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

/* A job of uid 1000 for @plugin in class @cls with @args (a map). */
static Job *new_job(const char *plugin, const char *cls, const msgpack_object *args)
{
        JobOrigin origin = {0};
        Creds *c = NULL;
        Job *j = NULL;

        cr_assert_eq(creds_new(1000, 1000, NULL, 0, &c), 0);
        origin.creds = c;
        cr_assert_eq(job_new(&j, NULL, 7, &origin, NULL, plugin, args, 0, 0, 0, cls), 0);
        creds_unref(c);
        return j;
}

/* {} */
static Job *new_trivial_job(void)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};

        return new_job("echo", "default", &args);
}

/* Moves @j to @s as a restore does, with a machine of no listeners. */
static void restore_into(Job *j, JobState s)
{
        JobMachine none = {0};

        cr_assert_eq(job_transition(&none, j, JOB_EV_RESTORE, &(JobChange){.restored = s}), 0);
}

Test(jobrecord, the_job_stays_within_its_budget)
{
        cr_assert_leq(sizeof(Job), JOB_BYTES_MAX,
                      "Job is %zu bytes: a finished record carries every one of them for its "
                      "retention (docs/design.md, \"A job's memory\")",
                      sizeof(Job));
}

Test(jobrecord, args_are_one_allocation_that_packs_back_to_the_submitted_bytes)
{
        static const char ext[3] = {1, 2, 3};
        msgpack_sbuffer in, out;
        msgpack_packer pk;
        msgpack_unpacked u;
        Job *j;

        msgpack_sbuffer_init(&in);
        msgpack_packer_init(&pk, &in, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 5);
        ipc_pack_cstr(&pk, "path");
        ipc_pack_cstr(&pk, "/etc/hostname");
        ipc_pack_cstr(&pk, "list");
        msgpack_pack_array(&pk, 3);
        msgpack_pack_int64(&pk, -5);
        msgpack_pack_map(&pk, 1);
        ipc_pack_cstr(&pk, "");
        msgpack_pack_str(&pk, 0); /* an empty string */
        msgpack_pack_str_body(&pk, "", 0);
        msgpack_pack_double(&pk, 2.5);
        ipc_pack_cstr(&pk, "bin");
        msgpack_pack_bin(&pk, 4);
        msgpack_pack_bin_body(&pk, "\0\1\2\3", 4);
        ipc_pack_cstr(&pk, "ext");
        msgpack_pack_ext(&pk, sizeof(ext), 9);
        msgpack_pack_ext_body(&pk, ext, sizeof(ext));
        ipc_pack_cstr(&pk, "none");
        msgpack_pack_nil(&pk);

        j = new_job("echo", "default", unpack(&in, &u));
        msgpack_unpacked_destroy(&u); /* the job holds its own copy */
        cr_assert_eq(j->args_bytes, in.size);
        msgpack_sbuffer_init(&out);
        msgpack_packer_init(&pk, &out, msgpack_sbuffer_write);
        cr_assert_eq(msgpack_pack_object(&pk, j->args), 0);
        cr_assert_eq(out.size, in.size);
        cr_assert_eq(memcmp(out.data, in.data, in.size), 0, "the copy packs other bytes");
        msgpack_sbuffer_destroy(&out);
        msgpack_sbuffer_destroy(&in);
        job_unref(j);
}

Test(jobrecord, empty_args_take_no_allocation)
{
        Job *j = new_trivial_job();

        cr_assert_eq(j->args.type, MSGPACK_OBJECT_MAP);
        cr_assert_eq(j->args.via.map.size, 0);
        cr_assert_null(j->args.via.map.ptr);
        cr_assert_eq(j->args_bytes, 1); /* 0x80 */
        job_unref(j);
}

Test(jobrecord, plugin_and_class_names_are_interned)
{
        char plugin[] = "sha256", cls[] = "batch";
        char longname[64];
        Job *a = new_trivial_job(), *b = new_trivial_job(), *c;
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};

        cr_assert_eq(a->plugin_name, b->plugin_name, "two copies of \"echo\"");
        cr_assert_eq(a->class_name, b->class_name, "two copies of \"default\"");
        c = new_job(plugin, cls, &args);
        plugin[0] = cls[0] = 'X'; /* the caller's buffers are not kept */
        cr_assert_str_eq(c->plugin_name, "sha256");
        cr_assert_str_eq(c->class_name, "batch");
        cr_assert_eq(jobnames_intern("sha256", 0), c->plugin_name);
        memset(longname, 'k', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
        cr_assert_eq(strlen(jobnames_intern(longname, SCHED_CLASS_NAME_MAX)), SCHED_CLASS_NAME_MAX,
                     "a class name is cut as the job's buffer once cut it");
        job_unref(a);
        job_unref(b);
        job_unref(c);
}

Test(jobrecord, the_log_buffer_comes_with_the_first_line)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        const msgpack_object *o;
        Job *j = new_trivial_job();

        cr_assert_null(j->log.buf, "a job that never logged has a log buffer");
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        cr_assert_eq(joblog_pack(&j->log, j->id, &pk), 0);
        o = unpack(&sb, &u);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_LINES)->via.array.size, 0);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_DROPPED)->via.u64, 0);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_BYTES)->via.u64, 0);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_clear(&sb);

        cr_assert_eq(joblog_append(&j->log, 6, 1234, "hello", 5), 0);
        cr_assert_not_null(j->log.buf);
        cr_assert_eq(joblog_pack(&j->log, j->id, &pk), 0);
        o = unpack(&sb, &u);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_LINES)->via.array.size, 1);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_BYTES)->via.u64, 5);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
        job_unref(j);
}

Test(jobrecord, a_plain_plan_makes_no_jobsched_and_a_key_does)
{
        Job *j = new_trivial_job();

        cr_assert_eq(job_set_plan(j, &(JobPlan){.max_attempts = 3}), 0);
        cr_assert_null(j->sched, "retries with the default backoff need no JobSched");
        cr_assert_eq(j->max_attempts, 3);
        cr_assert_null(job_plan_key(j));
        cr_assert_eq(job_run_at_ms(j), 0);
        cr_assert_eq(job_set_plan(j, &(JobPlan){.key = "nightly", .run_at_ms = 99}), 0);
        cr_assert_not_null(j->sched);
        cr_assert_str_eq(job_plan_key(j), "nightly");
        cr_assert_eq(job_run_at_ms(j), 99);
        job_unref(j);

        j = new_trivial_job(); /* a failed run's error makes one too */
        job_add_run_error(j, IPC_INTERNAL, "boom", 5);
        cr_assert_not_null(j->sched);
        cr_assert_eq(j->n_errors, 1);
        cr_assert_str_eq(j->sched->errors[0].message, "boom");
        job_unref(j);
}

Test(jobrecord, a_finished_record_without_its_parts_packs_the_defaults)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        const msgpack_object *o;
        Job *j = new_trivial_job();

        restore_into(j, JOB_DONE);
        job_live_drop(j); /* what the table's last listener does at a final state */
        cr_assert_null(j->live);
        cr_assert_null(job_fiber(j));
        cr_assert_eq(job_due_ms(j), 0);
        cr_assert(!job_has_schedule(j));

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        cr_assert_eq(job_pack_record(&pk, j, true, true), 0);
        o = unpack(&sb, &u);
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_STATE), IPC_STATE_DONE));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_MAX_ATTEMPTS)->via.u64, 1);
        cr_assert(ipc_object_is_nil(ipc_map_find(o, IPC_KEY_NEXT_ATTEMPT_MS)));
        cr_assert(ipc_object_is_nil(ipc_map_find(o, IPC_KEY_RUN_AT_MS)));
        cr_assert(ipc_object_is_nil(ipc_map_find(o, IPC_KEY_KEY)));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_AFTER)->via.array.size, 0);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ERRORS)->via.array.size, 0);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ARGS)->via.map.size, 0);
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_PLUGIN), "echo"));
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_clear(&sb);

        /* the store's schedule of it: the defaults, backoffs included */
        cr_assert_eq(job_pack_schedule(&pk, j), 0);
        o = unpack(&sb, &u);
        cr_assert_eq(ipc_map_find(o, IPC_OPT_BACKOFF_MS)->via.u64, IPC_BACKOFF_MS_DEFAULT);
        cr_assert_eq(ipc_map_find(o, IPC_OPT_BACKOFF_MAX_MS)->via.u64, IPC_BACKOFF_MAX_MS_DEFAULT);
        cr_assert_eq(ipc_map_find(o, "due_ms")->via.u64, 0);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
        job_unref(j);
}

/* job.run's and job.wait's `fields`: each key of the record, asked alone, is the key
 * packed beside id and state (so the parser's names and the packer's order agree), and
 * what the record does not answer is refused. */
Test(jobrecord, each_field_asked_alone_packs_that_key_with_id_and_state)
{
        static const char *const keys[] = {
                IPC_KEY_ID,           IPC_KEY_PLUGIN,
                IPC_KEY_CLASS,        IPC_KEY_OWNER,
                IPC_KEY_STATE,        IPC_KEY_PRIORITY,
                IPC_KEY_TIMEOUT_MS,   IPC_KEY_CREATED_MS,
                IPC_KEY_STARTED_MS,   IPC_KEY_FINISHED_MS,
                IPC_KEY_PROGRESS,     IPC_KEY_RESULT,
                IPC_KEY_ERROR,        IPC_KEY_ATTEMPT,
                IPC_KEY_MAX_ATTEMPTS, IPC_KEY_NEXT_ATTEMPT_MS,
                IPC_KEY_RUN_AT_MS,    IPC_KEY_AFTER,
                IPC_KEY_KEY,          IPC_KEY_ERRORS,
        };
        static const char *const refused[] = {IPC_KEY_ARGS, "bogus", "", "ID"};
        msgpack_sbuffer sb, req;
        msgpack_packer pk, rq;
        msgpack_unpacked u, ur;
        const msgpack_object *o;
        Job *j = new_trivial_job();
        IpcStatus st = {0};
        uint32_t mask;

        restore_into(j, JOB_DONE);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_sbuffer_init(&req);
        msgpack_packer_init(&rq, &req, msgpack_sbuffer_write);
        cr_assert_eq(job_fields_parse(NULL, &mask, &st), 0);
        cr_assert_eq(mask, JOB_FIELDS_ALL);
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                bool always = !strcmp(keys[i], IPC_KEY_ID) || !strcmp(keys[i], IPC_KEY_STATE);

                msgpack_sbuffer_clear(&req);
                msgpack_pack_array(&rq, 1);
                ipc_pack_cstr(&rq, keys[i]);
                o = unpack(&req, &ur);
                cr_assert_eq(job_fields_parse(o, &mask, &st), 0, "%s: %s", keys[i], st.message);
                msgpack_unpacked_destroy(&ur);

                msgpack_sbuffer_clear(&sb);
                cr_assert_eq(job_pack_record_fields(&pk, j, true, false, mask), 0);
                o = unpack(&sb, &u);
                cr_assert_not_null(ipc_map_find(o, keys[i]), "%s asked, not packed", keys[i]);
                cr_assert_not_null(ipc_map_find(o, IPC_KEY_ID));
                cr_assert_not_null(ipc_map_find(o, IPC_KEY_STATE));
                cr_assert_eq(o->via.map.size, always ? 2 : 3, "%s: %u keys", keys[i],
                             o->via.map.size);
                msgpack_unpacked_destroy(&u);
        }
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                msgpack_sbuffer_clear(&req);
                msgpack_pack_array(&rq, 1);
                ipc_pack_cstr(&rq, refused[i]);
                o = unpack(&req, &ur);
                cr_assert_eq(job_fields_parse(o, &mask, &st), -EINVAL, "\"%s\" accepted",
                             refused[i]);
                cr_assert_str_eq(st.code, IPC_INVALID_ARGUMENT);
                msgpack_unpacked_destroy(&ur);
        }
        msgpack_sbuffer_clear(&req);
        ipc_pack_cstr(&rq, "state"); /* not an array */
        o = unpack(&req, &ur);
        cr_assert_eq(job_fields_parse(o, &mask, &st), -EINVAL);
        msgpack_unpacked_destroy(&ur);
        msgpack_sbuffer_destroy(&req);
        msgpack_sbuffer_destroy(&sb);
        job_unref(j);
}

/* Each key of the whole record packs its own field: every field set to a value of its
 * own, so a key packed from a neighbour's field reads wrong. */
Test(jobrecord, every_key_of_the_record_packs_its_own_field)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        const msgpack_object *o;
        Job *j = new_trivial_job();

        cr_assert_eq(job_set_plan(j, &(JobPlan){.max_attempts = 6, .key = "k7", .run_at_ms = 41}),
                     0);
        restore_into(j, JOB_DONE);
        j->priority = -3;
        j->timeout_ns = 11 * NSEC_PER_MSEC;
        j->submitted_ms = 13;
        j->started_ms = 17;
        j->finished_ms = 19;
        j->attempt = 5;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        cr_assert_eq(job_pack_record(&pk, j, true, true), 0);
        o = unpack(&sb, &u);
        cr_assert_eq(o->via.map.size, 21);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ID)->via.u64, 7);
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_PLUGIN), "echo"));
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_CLASS), "default"));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_OWNER)->via.u64, 1000);
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_STATE), IPC_STATE_DONE));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_PRIORITY)->via.i64, -3);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_TIMEOUT_MS)->via.u64, 11);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_CREATED_MS)->via.u64, 13);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_STARTED_MS)->via.u64, 17);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_FINISHED_MS)->via.u64, 19);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ATTEMPT)->via.u64, 5);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_MAX_ATTEMPTS)->via.u64, 6);
        cr_assert(ipc_object_is_nil(ipc_map_find(o, IPC_KEY_NEXT_ATTEMPT_MS)));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_RUN_AT_MS)->via.u64, 41);
        cr_assert(str_is(ipc_map_find(o, IPC_KEY_KEY), "k7"));
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ARGS)->type, MSGPACK_OBJECT_MAP);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_AFTER)->via.array.size, 0);
        cr_assert_eq(ipc_map_find(o, IPC_KEY_ERRORS)->via.array.size, 0);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);
        job_unref(j);
}

Test(jobrecord, a_schedule_read_back_into_a_finished_record_keeps_what_it_shows)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;
        Job *j = new_trivial_job(), *k = new_trivial_job();

        cr_assert_eq(job_set_plan(j, &(JobPlan){.max_attempts = 4,
                                                .backoff_ms = 10,
                                                .key = "k1",
                                                .after = (const uint64_t[]){3, 4},
                                                .n_after = 2}),
                     0);
        job_add_run_error(j, IPC_INTERNAL, "first", 11);
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        cr_assert_eq(job_pack_schedule(&pk, j), 0);

        restore_into(k, JOB_FAILED); /* a restore unpacks into a job whose JobLive is gone */
        job_live_drop(k);
        cr_assert_eq(job_unpack_schedule(k, sb.data, sb.size), 0);
        cr_assert_eq(k->max_attempts, 4);
        cr_assert_str_eq(job_plan_key(k), "k1");
        cr_assert_eq(k->n_after, 2);
        cr_assert_eq(job_after(k)[1], 4);
        cr_assert_eq(k->n_errors, 1);
        cr_assert_eq(k->sched->backoff_ms, 10);
        cr_assert_eq(k->sched->backoff_max_ms, IPC_BACKOFF_MAX_MS_DEFAULT);
        msgpack_sbuffer_destroy(&sb);
        job_unref(j);
        job_unref(k);
}

Test(jobrecord, a_revive_gets_a_fresh_joblive)
{
        JobMachine none = {0};
        Job *j = new_trivial_job();

        restore_into(j, JOB_FAILED);
        job_live_drop(j);
        job_live_drop(j); /* twice: a no-op */
        cr_assert_null(j->live);
        cr_assert_eq(job_live_new(j), 0);
        cr_assert_not_null(j->live);
        cr_assert_eq(j->live->heap_index, SIZE_MAX);
        cr_assert_eq(j->live->due_index, SIZE_MAX);
        cr_assert_eq(job_transition(&none, j, JOB_EV_REVIVE, NULL), 0);
        cr_assert_eq(j->state, JOB_QUEUED);
        cr_assert_gt(j->live->submitted_mono_ns, 0, "the revive did not stamp its queue clock");
        cr_assert_eq(j->live->deadline_ns, SCHED_FOREVER);
        job_unref(j);
}

Test(jobrecord, the_fiber_tag_names_the_job_and_its_plugin_and_truncates_cleanly)
{
        msgpack_object args = {.type = MSGPACK_OBJECT_MAP};
        Job *j = new_job("sha256", "default", &args);
        char buf[JOB_TAG_MAX], small[12], one[1] = {'x'};

        j->id = 18446744073709551615ull; /* every digit of a uint64_t */
        cr_assert_str_eq(job_format_tag(j, buf, sizeof(buf)),
                         "job 18446744073709551615 plugin sha256");
        j->id = 0;
        cr_assert_str_eq(job_format_tag(j, buf, sizeof(buf)), "job 0 plugin sha256");
        j->id = 42;
        cr_assert_str_eq(job_format_tag(j, small, sizeof(small)), "job 42 plug");
        cr_assert_eq(job_format_tag(j, one, sizeof(one))[0], '\0');
        job_unref(j);
}
