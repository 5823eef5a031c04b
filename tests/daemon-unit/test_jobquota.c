/* SPDX-License-Identifier: MIT */
/*
 * test_jobquota.c — the per-user accounting of daemon/job/jobquota.c without a daemon:
 * charges add up per user and in all; a user past its own bounds names its own oldest
 * finished job, never another user's; the global bounds name the biggest holder's; a
 * submission past a budget is told to drop the sender's finished jobs only when that
 * makes room, and refused otherwise, and once charged is given that room from the
 * sender's oldest (jobquota_room()); root and the exempt uid pass the per-user bounds
 * but not the global ones.
 */
#include "daemon/job/jobquota.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#define A 1000
#define B 1001

static JobQuota q;

static void setup(void)
{
        jobquota_init(&q);
}

static void teardown(void)
{
        jobquota_free(&q);
}

TestSuite(jobquota, .init = setup, .fini = teardown);

/* An entry of @uid charged @bytes, finished when @finished. */
static void add(JobQuotaEntry *e, uid_t uid, uint64_t bytes, bool finished)
{
        JobQuotaUser *u = jobquota_user(&q, uid);

        cr_assert_not_null(u);
        memset(e, 0, sizeof(*e));
        jobquota_attach(e, u);
        jobquota_charge(&q, e, bytes);
        if (finished)
                jobquota_finish(&q, e, NULL);
}

static void limits(uint64_t per_user, uint64_t all, size_t keep_per_user, size_t keep_all)
{
        jobquota_set_limits(&q, &(JobQuotaLimits){.max_bytes_per_user = per_user,
                                                  .max_bytes = all,
                                                  .retention_max_per_user = keep_per_user,
                                                  .retention_max = keep_all,
                                                  .exempt_uid = 999});
}

Test(jobquota, charges_add_up_per_user_and_in_all)
{
        JobQuotaEntry a1, a2, b1;
        JobQuotaUser *a;

        add(&a1, A, 100, false);
        add(&a2, A, 50, true);
        add(&b1, B, 7, true);
        a = jobquota_user(&q, A);
        cr_assert_eq(a->bytes, 150);
        cr_assert_eq(a->finished_bytes, 50);
        cr_assert_eq(q.bytes, 157);
        cr_assert_eq(q.n_finished, 2);
        jobquota_charge(&q, &a1, 130); /* a result came */
        jobquota_finish(&q, &a1, NULL);
        cr_assert_eq(a->bytes, 180);
        cr_assert_eq(a->finished_bytes, 180);
        cr_assert_eq(jobquota_oldest(a), &a2, "a2 finished first");
        jobquota_unfinish(&q, &a2); /* revived */
        cr_assert_eq(a->finished_bytes, 130);
        cr_assert_eq(a->n_finished, 1);
        jobquota_detach(&q, &a2);
        jobquota_detach(&q, &a1);
        cr_assert_eq(a->bytes, 0);
        cr_assert_eq(q.bytes, 7);
        cr_assert_eq(q.n_finished, 1);
        cr_assert_null(a1.user);
}

Test(jobquota, a_user_past_its_retention_loses_its_own_oldest)
{
        JobQuotaEntry a[4], b1;

        limits(0, 0, 3, 1000);
        add(&b1, B, 10, true);
        for (int i = 0; i < 4; i++)
                add(&a[i], A, 10, true);
        cr_assert_eq(jobquota_user_excess(&q, jobquota_user(&q, A)), &a[0]);
        cr_assert_null(jobquota_user_excess(&q, jobquota_user(&q, B)));
        jobquota_detach(&q, &a[0]);
        cr_assert_null(jobquota_user_excess(&q, jobquota_user(&q, A)));
        cr_assert_null(jobquota_global_excess(&q));
}

Test(jobquota, the_global_retention_takes_from_the_biggest_holder)
{
        JobQuotaEntry a[5], b1, b2;

        limits(0, 0, 0, 6);
        add(&b1, B, 1, true); /* B's are older than all of A's */
        add(&b2, B, 1, true);
        for (int i = 0; i < 5; i++)
                add(&a[i], A, 1, true);
        cr_assert_eq(jobquota_global_excess(&q), &a[0], "not B's oldest: A holds the most");
}

Test(jobquota, bytes_past_a_users_budget_drop_its_own_finished_jobs_first)
{
        JobQuotaEntry a1, a2, running, b1;
        JobQuotaUser *a;

        limits(100, 0, 0, 1000);
        add(&b1, B, 90, true);
        add(&a1, A, 40, true);
        add(&a2, A, 30, true);
        a = jobquota_user(&q, A);
        cr_assert_eq(jobquota_admit(&q, a, 20), 0);
        cr_assert_eq(jobquota_admit(&q, a, 50), JOBQUOTA_DROP, "its finished jobs make room");
        jobquota_detach(&q, jobquota_oldest(a));
        cr_assert_eq(jobquota_admit(&q, a, 50), 0);
        add(&running, A, 60, false);
        cr_assert_eq(jobquota_admit(&q, a, 50), -ENOBUFS,
                     "dropping its one finished job (30) leaves 60 + 50 > 100");
        cr_assert_eq(jobquota_admit(&q, jobquota_user(&q, B), 10), 0, "B has its own budget");
        cr_assert_eq(jobquota_user_excess(&q, a), NULL, "90 held: within");
        jobquota_charge(&q, &running, 80); /* its result came: 110 */
        cr_assert_eq(jobquota_user_excess(&q, a), &a2);
}

/* Admission says DROP; the new job is charged; jobquota_room() names the sender's own
 * oldest finished jobs until the budgets hold again: as many as admission's loop would
 * have dropped, never another user's, and nothing for an exempt user's own budget. */
Test(jobquota, room_for_a_charged_job_comes_from_its_senders_oldest)
{
        JobQuotaEntry a1, a2, a3, b1, fresh, g1, mine;
        JobQuotaUser *a, *ex;
        int dropped = 0;

        limits(100, 200, 0, 1000);
        add(&b1, B, 50, true);
        add(&a1, A, 30, true);
        add(&a2, A, 30, true);
        add(&a3, A, 30, true);
        a = jobquota_user(&q, A);
        cr_assert_eq(jobquota_room(&q, a), NULL, "90 of 100: within");
        cr_assert_eq(jobquota_admit(&q, a, 55), JOBQUOTA_DROP);
        add(&fresh, A, 55, false); /* charged: 145 */
        cr_assert_eq(jobquota_room(&q, a), &a1, "its oldest first");
        jobquota_detach(&q, &a1);
        cr_assert_eq(jobquota_room(&q, a), &a2, "115 held: still over");
        jobquota_detach(&q, &a2);
        cr_assert_eq(jobquota_room(&q, a), NULL, "85 held: within");
        cr_assert_eq(jobquota_room(&q, jobquota_user(&q, B)), NULL, "B is within its own");
        cr_assert_eq(a->bytes, 85);

        /* the exempt uid: no budget of its own, the global one still binds it */
        ex = jobquota_user(&q, 999);
        add(&g1, 999, 40, true);
        add(&mine, 999, 40, false); /* 50 + 85 + 80 = 215 > 200 */
        while (jobquota_room(&q, ex) && dropped < 5) {
                jobquota_detach(&q, jobquota_room(&q, ex));
                dropped++;
        }
        cr_assert_eq(dropped, 1, "one of its own finished jobs brings the total to 175");
        cr_assert_eq(ex->n_finished, 0);
        cr_assert_eq(jobquota_room(&q, ex), NULL, "nothing of its own left to drop");
}

Test(jobquota, the_global_budget_binds_root_too)
{
        JobQuotaEntry r1, b1;
        JobQuotaUser *root;

        limits(70, 100, 0, 1000);
        add(&b1, B, 60, true);
        add(&r1, 0, 30, false);
        root = jobquota_user(&q, 0);
        cr_assert_eq(jobquota_admit(&q, root, 10), 0, "root: no per-user budget");
        cr_assert_eq(jobquota_admit(&q, root, 20), -ENOSPC,
                     "B's finished jobs are not root's to drop");
        cr_assert_eq(jobquota_admit(&q, jobquota_user(&q, 999), 5), 0, "the exempt uid");
        cr_assert_eq(jobquota_admit(&q, jobquota_user(&q, B), 20), JOBQUOTA_DROP,
                     "B drops its own");
        jobquota_charge(&q, &r1, 50); /* 110 in all */
        cr_assert_eq(jobquota_global_excess(&q), &b1, "the only finished bytes are B's");
}

Test(jobquota, restore_order_and_helpers)
{
        JobQuotaEntry e1, e2, e3;
        JobQuotaUser *a;
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked u;
        char buf[32];

        add(&e2, A, 1, true);
        add(&e1, A, 1, false);
        a = jobquota_user(&q, A);
        jobquota_finish(&q, &e1, &a->finished); /* before e2: it finished earlier */
        add(&e3, A, 1, true);
        cr_assert_eq(jobquota_oldest(a), &e1);
        jobquota_detach(&q, &e1);
        cr_assert_eq(jobquota_oldest(a), &e2);

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 2);
        msgpack_pack_str_with_body(&pk, "s", 1);
        msgpack_pack_str_with_body(&pk, "0123456789abcdef0123456789abcdef0123", 36);
        msgpack_pack_str_with_body(&pk, "n", 1);
        msgpack_pack_uint64(&pk, 1ull << 40);
        msgpack_unpacked_init(&u);
        cr_assert_eq(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
        cr_assert_eq(jobquota_packed_size(&u.data), sb.size);
        msgpack_unpacked_destroy(&u);
        msgpack_sbuffer_destroy(&sb);

        cr_assert_str_eq(jobquota_format_bytes(buf, sizeof(buf), 512), "512 B");
        cr_assert_str_eq(jobquota_format_bytes(buf, sizeof(buf), 1 << 20), "1 MiB");
        cr_assert_str_eq(jobquota_format_bytes(buf, sizeof(buf), 5452595), "5.2 MiB");
        cr_assert_str_eq(jobquota_format_bytes(buf, sizeof(buf), 256ull << 20), "256 MiB");
}
