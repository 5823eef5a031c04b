/* SPDX-License-Identifier: MIT */
/*
 * test_jobtimer.c — the due set (daemon/job/jobtimer.c) and the idempotency keys
 * (daemon/job/jobkeys.c) without a daemon: jobs come out of the heap in due order, ties
 * by id, removal from any place keeps the order, the wake event says when the earliest
 * moved; a key answers its job while it runs and for the window after it ended.
 */
#include "daemon/job/jobkeys.h"
#include "daemon/job/jobtimer.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define N 2000

static Job jobs[N];
static JobLive lives[N]; /* each job's (job.h): the due set keeps its place there */

static void fill(JobTimer *tm, unsigned seed)
{
        jobtimer_init(tm);
        srand(seed);
        for (size_t i = 0; i < N; i++) {
                memset(&jobs[i], 0, sizeof(jobs[i]));
                lives[i] = (JobLive){.due_index = SIZE_MAX};
                jobs[i].id = i + 1;
                jobs[i].live = &lives[i];
                cr_assert_eq(jobtimer_add_locked(tm, &jobs[i], 1000 + (uint64_t)(rand() % 500)), 0);
        }
}

Test(jobtimer, jobs_come_out_in_due_order_ties_by_id)
{
        JobTimer tm;
        uint64_t last_due = 0, last_id = 0;
        size_t n = 0;
        Job *j;

        fill(&tm, 1);
        cr_assert_null(jobtimer_pop_due_locked(&tm, 999), "a job came out before its time");
        while ((j = jobtimer_pop_due_locked(&tm, UINT64_MAX))) {
                cr_assert(j->live->due_ms > last_due ||
                                  (j->live->due_ms == last_due && j->id > last_id),
                          "job %llu (due %llu) after job %llu (due %llu)",
                          (unsigned long long)j->id, (unsigned long long)j->live->due_ms,
                          (unsigned long long)last_id, (unsigned long long)last_due);
                cr_assert_eq(j->live->due_index, SIZE_MAX);
                last_due = j->live->due_ms;
                last_id = j->id;
                n++;
        }
        cr_assert_eq(n, N);
        cr_assert_eq(jobtimer_next_ms_locked(&tm), UINT64_MAX);
        jobtimer_free(&tm);
}

Test(jobtimer, removal_anywhere_keeps_the_order)
{
        JobTimer tm;
        uint64_t last = 0;
        size_t n = 0;
        Job *j;

        fill(&tm, 2);
        for (size_t i = 0; i < N; i += 3)
                jobtimer_remove_locked(&tm, &jobs[i]);
        jobtimer_remove_locked(&tm, &jobs[0]); /* twice: a no-op */
        cr_assert_eq(jobtimer_count_locked(&tm), N - (N + 2) / 3);
        while ((j = jobtimer_pop_due_locked(&tm, UINT64_MAX))) {
                cr_assert((j->id - 1) % 3 != 0, "a removed job came out");
                cr_assert_geq(j->live->due_ms, last);
                last = j->live->due_ms;
                n++;
        }
        cr_assert_eq(n, N - (N + 2) / 3);
        jobtimer_free(&tm);
}

Test(jobtimer, an_earlier_job_wakes_the_timer)
{
        JobTimer tm;
        JobLive la = {.due_index = SIZE_MAX}, lb = {.due_index = SIZE_MAX};
        Job a = {.id = 1, .live = &la}, b = {.id = 2, .live = &lb};

        jobtimer_init(&tm);
        cr_assert_eq(jobtimer_add_locked(&tm, &a, 500), 0);
        cr_assert(fiber_event_is_set(&tm.wake), "the first job did not wake the timer");
        fiber_event_reset(&tm.wake);
        cr_assert_eq(jobtimer_add_locked(&tm, &b, 900), 0);
        cr_assert(!fiber_event_is_set(&tm.wake), "a later job woke the timer");
        cr_assert_eq(jobtimer_add_locked(&tm, &b, 100), 0); /* moved: re-added earlier */
        cr_assert(fiber_event_is_set(&tm.wake), "an earlier job did not wake the timer");
        cr_assert_eq(jobtimer_count_locked(&tm), 2);
        cr_assert_eq(jobtimer_next_ms_locked(&tm), 100);
        jobtimer_free(&tm);
}

Test(jobkeys, a_key_answers_while_running_and_for_the_window_after)
{
        JobKeys k = {0};
        uint64_t id = 0;

        cr_assert_eq(jobkeys_put_locked(&k, 1000, "invoice-1", 41, 0), 0);
        cr_assert(jobkeys_find_locked(&k, 1000, "invoice-1", 5000, 100, &id));
        cr_assert_eq(id, 41);
        cr_assert(!jobkeys_find_locked(&k, 1001, "invoice-1", 5000, 100, &id),
                  "another user's key matched");
        cr_assert(!jobkeys_find_locked(&k, 1000, "invoice-2", 5000, 100, &id));
        /* ended at 5000: answers until 5100 */
        cr_assert_eq(jobkeys_put_locked(&k, 1000, "invoice-1", 41, 5000), 0);
        cr_assert(jobkeys_find_locked(&k, 1000, "invoice-1", 5099, 100, &id));
        cr_assert(!jobkeys_find_locked(&k, 1000, "invoice-1", 5100, 100, &id));
        for (int i = 0; i < 500; i++) { /* grows */
                char key[16];
                snprintf(key, sizeof(key), "k%d", i);
                cr_assert_eq(jobkeys_put_locked(&k, 1000, key, 100 + (uint64_t)i, 0), 0);
        }
        cr_assert(jobkeys_find_locked(&k, 1000, "k321", 0, 100, &id));
        cr_assert_eq(id, 421);
        cr_assert_eq(jobkeys_sweep_locked(&k, 6000, 100), 1, "the ended key was not swept");
        cr_assert_eq(k.count, 500);
        jobkeys_free(&k);
}
