/* SPDX-License-Identifier: MIT */
/* The job state machine (daemon/job/jobstate.c) without a daemon: every row of the table
 * goes where it says, everything else is refused and changes nothing, the listeners
 * hear each transition once and in order, the times and errors are stamped, and
 * docs/design.md lists the same rows as the table. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/job/job.h"
#include "daemon/job/jobstate.h"
#include "ipc/protocol.h"

enum { MAX_CALLS = 16 };

/* What the recording listeners heard. */
typedef struct Heard {
        int n;
        int who[MAX_CALLS];
        JobState from[MAX_CALLS], to[MAX_CALLS];
        JobEvent ev[MAX_CALLS];
} Heard;

static void heard(Heard *h, int who, Job *j, JobState from, JobEvent ev)
{
        cr_assert_lt(h->n, MAX_CALLS);
        h->who[h->n] = who;
        h->from[h->n] = from;
        h->to[h->n] = j->state;
        h->ev[h->n] = ev;
        h->n++;
}

static void listen_a(void *ctx, Job *j, JobState from, JobEvent ev)
{
        heard(ctx, 0, j, from, ev);
}

static void listen_b(void *ctx, Job *j, JobState from, JobEvent ev)
{
        heard(ctx, 1, j, from, ev);
}

static void listen_c(void *ctx, Job *j, JobState from, JobEvent ev)
{
        heard(ctx, 2, j, from, ev);
}

static const JobStateListener listeners[] = {{"a", listen_a}, {"b", listen_b}, {"c", listen_c}};

static JobMachine machine(Heard *h)
{
        memset(h, 0, sizeof(*h));
        return (JobMachine){.listeners = listeners, .n_listeners = 3, .ctx = h};
}

/* A job in @s, as job_new() leaves one (zeroed) but for its state, which only the
 * machine writes: reached by firing the table's own events from new. */
/* The JobLive of the job job_in() makes (one at a time: a test's Job is on its stack). */
static JobLive test_live;

static void job_in(Job *j, JobState s)
{
        JobMachine none = {0};

        memset(j, 0, sizeof(*j));
        memset(&test_live, 0, sizeof(test_live));
        j->live = &test_live;
        if (s == JOB_NEW)
                return;
        cr_assert_eq(job_transition(&none, j, JOB_EV_RESTORE, &(JobChange){.restored = s}), 0,
                     "restore into %s", job_state_name(s));
        free(j->error_message);
        j->error_message = NULL;
}

static bool in_table(JobState from, JobEvent ev, JobState restored)
{
        JobState to;
        return job_state_next(from, ev, restored, &to) == 0;
}

Test(jobstate, every_row_goes_where_the_table_says)
{
        size_t n;
        const JobTransition *rows = job_transitions(&n);

        cr_assert_gt(n, 0);
        for (size_t i = 0; i < n; i++) {
                Heard h;
                JobMachine m = machine(&h);
                Job j;

                job_in(&j, rows[i].from);
                cr_assert_eq(
                        job_transition(&m, &j, rows[i].event, &(JobChange){.restored = rows[i].to}),
                        0, "%s --%s--> %s", job_state_name(rows[i].from),
                        job_event_name(rows[i].event), job_state_name(rows[i].to));
                cr_assert_eq(j.state, rows[i].to);
                /* every listener once, in order, after the state was written */
                cr_assert_eq(h.n, 3);
                for (int k = 0; k < 3; k++) {
                        cr_assert_eq(h.who[k], k);
                        cr_assert_eq(h.from[k], rows[i].from);
                        cr_assert_eq(h.to[k], rows[i].to);
                        cr_assert_eq(h.ev[k], rows[i].event);
                }
                free(j.error_message);
        }
}

Test(jobstate, everything_else_is_refused_and_changes_nothing)
{
        int refused = 0;

        for (int s = 0; s < JOB_STATE_COUNT; s++) {
                for (int e = 0; e < JOB_EVENT_COUNT; e++) {
                        for (int r = 0; r < JOB_STATE_COUNT; r++) {
                                Heard h;
                                JobMachine m = machine(&h);
                                Job j, before;

                                if (e != JOB_EV_RESTORE && r > 0)
                                        break; /* the target counts for a restore only */
                                if (in_table((JobState)s, (JobEvent)e, (JobState)r))
                                        continue;
                                /* every state but new is reached by a restore (new is
                                 * the zeroed job's) */
                                memset(&j, 0, sizeof(j));
                                if (s != JOB_NEW)
                                        job_in(&j, (JobState)s);
                                j.started_ms = 7;
                                memcpy(&before, &j, sizeof(j));
                                cr_assert_eq(job_transition(&m, &j, (JobEvent)e,
                                                            &(JobChange){.restored = (JobState)r,
                                                                         .code = IPC_CANCELLED,
                                                                         .message = "x"}),
                                             -EINVAL, "%s --%s--> (%s) was allowed",
                                             job_state_name((JobState)s),
                                             job_event_name((JobEvent)e),
                                             job_state_name((JobState)r));
                                cr_assert_eq(memcmp(&before, &j, sizeof(j)), 0);
                                cr_assert_eq(h.n, 0);
                                refused++;
                        }
                }
        }
        cr_assert_gt(refused, 0);
}

Test(jobstate, final_states_are_left_only_by_revive)
{
        size_t n;
        const JobTransition *rows = job_transitions(&n);

        for (size_t i = 0; i < n; i++) {
                cr_assert(!job_state_final(rows[i].from) ||
                                  (rows[i].event == JOB_EV_REVIVE && rows[i].from != JOB_DONE &&
                                   rows[i].to == JOB_QUEUED),
                          "a row leaves a final state: %s --%s-->", job_state_name(rows[i].from),
                          job_event_name(rows[i].event));
                cr_assert_neq(rows[i].to, JOB_NEW);
                for (size_t k = 0; k < i; k++)
                        cr_assert(!(rows[k].from == rows[i].from &&
                                    rows[k].event == rows[i].event && rows[k].to == rows[i].to),
                                  "a row twice");
        }
}

Test(jobstate, times_and_errors_are_stamped)
{
        Heard h;
        JobMachine m = machine(&h);
        Job j;

        job_in(&j, JOB_NEW);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_SUBMIT, NULL), 0);
        cr_assert_gt(j.submitted_ms, 0);
        cr_assert_gt(j.live->submitted_mono_ns, 0);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_DISPATCH, NULL), 0);
        cr_assert_gt(j.started_ms, 0);
        cr_assert_geq(j.live->started_mono_ns, j.live->submitted_mono_ns);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_REQUEUE, NULL), 0);
        cr_assert_eq(j.started_ms, 0);
        cr_assert_eq(j.live->started_mono_ns, 0);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_DISPATCH, NULL), 0);
        cr_assert_eq(
                job_transition(&m, &j, JOB_EV_TIMEOUT,
                               &(JobChange){.code = IPC_DEADLINE_EXCEEDED, .message = "too late"}),
                0);
        cr_assert_eq(j.state, JOB_CANCELLED);
        cr_assert_gt(j.finished_ms, 0);
        cr_assert_geq(j.finished_mono_ns, j.live->started_mono_ns);
        cr_assert_str_eq(j.error_code, IPC_DEADLINE_EXCEEDED);
        cr_assert_str_eq(j.error_message, "too late");
        /* a final state is final: a late return is refused, the error stays */
        cr_assert_eq(job_transition(&m, &j, JOB_EV_RETURN_OK, NULL), -EINVAL);
        cr_assert_str_eq(j.error_message, "too late");
        cr_assert_eq(h.n, 5 * 3); /* five transitions, three listeners each */
        free(j.error_message);
}

Test(jobstate, restore_keeps_the_record_and_dates_retention_from_it)
{
        JobMachine none = {0};
        Job j;

        job_in(&j, JOB_NEW);
        j.finished_ms = job_now_ms() - 1000; /* ended a second ago, says the record */
        cr_assert_eq(job_transition(&none, &j, JOB_EV_RESTORE,
                                    &(JobChange){.restored = JOB_DONE, .code = IPC_CANCELLED}),
                     0);
        cr_assert_eq(j.state, JOB_DONE);
        cr_assert_null(j.error_code, "a restore keeps the record's own error");
        cr_assert_leq(j.finished_mono_ns + 900 * 1000000ull, j.live->submitted_mono_ns);
}

Test(jobstate, wire_names_parse_and_new_does_not)
{
        JobState s;

        for (int k = JOB_QUEUED; k < JOB_STATE_COUNT; k++) {
                const char *name = job_state_name((JobState)k);
                cr_assert_eq(job_state_parse(name, strlen(name), &s), 0);
                cr_assert_eq(s, k);
        }
        cr_assert_str_eq(job_state_name(JOB_DEAD), "dead");
        cr_assert_eq(job_state_parse("new", 3, &s), -EINVAL);
        cr_assert_eq(job_state_parse("paused", 6, &s), -EINVAL);
}

/* docs/design.md's table: "| from | event | to |" rows between the markers. */
Test(jobstate, design_doc_lists_the_same_rows)
{
        FILE *f = fopen(FIBERD_SOURCE_DIR "/docs/design.md", "r");
        size_t n, found = 0;
        const JobTransition *rows = job_transitions(&n);
        bool inside = false, *seen = calloc(n, sizeof(*seen));
        char line[512];

        cr_assert_not_null(f);
        while (fgets(line, sizeof(line), f)) {
                char from[32], ev[32], to[32];
                bool match = false;
                if (strstr(line, "<!-- job transitions: begin")) {
                        inside = true;
                        continue;
                }
                if (strstr(line, "<!-- job transitions: end"))
                        break;
                if (!inside || sscanf(line, "| %31s | %31s | %31s |", from, ev, to) != 3 ||
                    from[0] == '-' || strcmp(from, "from") == 0)
                        continue;
                for (size_t i = 0; i < n; i++) {
                        if (strcmp(from, job_state_name(rows[i].from)) == 0 &&
                            strcmp(ev, job_event_name(rows[i].event)) == 0 &&
                            strcmp(to, job_state_name(rows[i].to)) == 0) {
                                cr_assert(!seen[i], "docs/design.md lists %s %s %s twice", from, ev,
                                          to);
                                seen[i] = match = true;
                                found++;
                        }
                }
                cr_assert(match, "docs/design.md lists %s --%s--> %s, the table does not", from, ev,
                          to);
        }
        fclose(f);
        for (size_t i = 0; i < n; i++)
                cr_assert(seen[i], "docs/design.md lacks %s --%s--> %s",
                          job_state_name(rows[i].from), job_event_name(rows[i].event),
                          job_state_name(rows[i].to));
        cr_assert_eq(found, n);
        free(seen);
}

/* A failed run: retried while attempts are left and the code is retryable, dead once
 * none are, failed when no retry was asked or the failure cannot be mended. */
Test(jobstate, a_failed_run_retries_exhausts_or_fails)
{
        Job j;

        memset(&j, 0, sizeof(j));
        j.max_attempts = 3;
        cr_assert_eq(job_retry_event(&j, IPC_INTERNAL), JOB_EV_RETRY);
        j.attempt = 1;
        cr_assert_eq(job_retry_event(&j, IPC_OVERLOADED), JOB_EV_RETRY);
        j.attempt = 2;
        cr_assert_eq(job_retry_event(&j, IPC_INTERNAL), JOB_EV_EXHAUST);
        j.attempt = 0;
        cr_assert_eq(job_retry_event(&j, IPC_INVALID_ARGUMENT), JOB_EV_RETURN_ERR);
        cr_assert_eq(job_retry_event(&j, IPC_PERMISSION_DENIED), JOB_EV_RETURN_ERR);
        cr_assert_eq(job_retry_event(&j, IPC_NOT_FOUND), JOB_EV_RETURN_ERR);
        j.fail_permanent = true;
        cr_assert_eq(job_retry_event(&j, IPC_INTERNAL), JOB_EV_RETURN_ERR);
        j.fail_permanent = false;
        j.max_attempts = 1;
        cr_assert_eq(job_retry_event(&j, IPC_INTERNAL), JOB_EV_RETURN_ERR);
}

/* The backoff doubles from backoff_ms, stops at backoff_max_ms, and its jitter keeps it
 * within 50-100 % of that. */
Test(jobstate, backoff_is_exponential_capped_and_jittered)
{
        Job j;

        memset(&j, 0, sizeof(j));
        j.id = 7;
        cr_assert_eq(job_set_plan(&j, &(JobPlan){.backoff_ms = 1000, .backoff_max_ms = 60000}), 0);
        for (int round = 0; round < 200; round++) {
                uint64_t want[] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};
                for (uint32_t a = 1; a <= 8; a++) {
                        uint64_t w = job_backoff_ms(&j, a);
                        cr_assert(w >= want[a - 1] / 2 && w <= want[a - 1],
                                  "attempt %u: %llu ms, not within 50-100 %% of %llu", a,
                                  (unsigned long long)w, (unsigned long long)want[a - 1]);
                }
        }
        /* and it is jittered: not every wait is the same */
        uint64_t first = job_backoff_ms(&j, 3);
        bool differs = false;
        for (int i = 0; i < 50 && !differs; i++)
                differs = job_backoff_ms(&j, 3) != first;
        cr_assert(differs, "no jitter");
        free(j.sched);
}

/* A run's error joins the ring, each with its attempt; the ring keeps the last ones. */
Test(jobstate, failed_runs_are_listed_and_the_oldest_drop_out)
{
        Heard h;
        JobMachine m = machine(&h);
        Job j;

        job_in(&j, JOB_RUNNING);
        j.max_attempts = 3;
        cr_assert_eq(job_transition(&m, &j, JOB_EV_RETRY,
                                    &(JobChange){.code = IPC_INTERNAL, .message = "first"}),
                     0);
        cr_assert_eq(j.state, JOB_RETRYING);
        cr_assert_null(j.error_code, "a retrying job has no final error");
        cr_assert_eq(j.n_errors, 1);
        cr_assert_not_null(j.sched, "a failed run made no JobSched for its error");
        cr_assert_str_eq(j.sched->errors[0].message, "first");
        for (int i = 0; i < IPC_JOB_ERRORS_MAX + 3; i++)
                job_add_run_error(&j, IPC_INTERNAL, "more", 1);
        cr_assert_eq(j.n_errors, IPC_JOB_ERRORS_MAX + 4);
        for (int i = 0; i < IPC_JOB_ERRORS_MAX; i++)
                cr_assert_str_eq(j.sched->errors[i].message, "more", "the oldest error stayed");
        for (int i = 0; i < IPC_JOB_ERRORS_MAX; i++)
                free(j.sched->errors[i].message);
        free(j.sched->errors);
        free(j.sched);
}

/* The wall-clock stamps come from the monotonic reading with the wall clock's offset
 * (job_wall_ms_at()): they agree with CLOCK_REALTIME read around them, a reading older
 * than the last one still gives its own time, readings in order give stamps in order,
 * and a reading a second or more old that reads the offset again is stamped with its
 * own time, not the time of the read. */
Test(jobstate, wall_clock_stamps_follow_the_monotonic_reading)
{
        uint64_t before = job_now_ms(), mono = sched_now_ns(), ms = job_wall_ms_at(mono);
        uint64_t after = job_now_ms(), newer, old_ms;

        cr_assert_geq(ms + 1, before, "%llu ms, the clock read %llu before", (unsigned long long)ms,
                      (unsigned long long)before);
        cr_assert_leq(ms, after + 1, "%llu ms, the clock read %llu after", (unsigned long long)ms,
                      (unsigned long long)after);
        newer = sched_now_ns();
        cr_assert_geq(job_wall_ms_at(newer), ms);
        old_ms = job_wall_ms_at(mono); /* older than the last reading: read again */
        cr_assert_geq(old_ms + 1, ms);
        cr_assert_leq(old_ms, ms + 1);
        for (int i = 0; i < 1000; i++) {
                uint64_t a = sched_now_ns(), b = sched_now_ns();
                cr_assert_leq(job_wall_ms_at(a), job_wall_ms_at(b), "stamps went backwards");
        }
        /* a reading 1.5 s old (a batch's, late) that reads the offset again gets its own
         * time, not now's, and the stamps after it keep their distance */
        uint64_t late = sched_now_ns() - 1500 * NSEC_PER_MSEC;
        uint64_t late_ms = job_wall_ms_at(late), real = job_now_ms();
        cr_assert(late_ms + 1400 <= real && late_ms + 1600 >= real,
                  "a reading 1.5 s old stamped %llu ms, the clock reads %llu",
                  (unsigned long long)late_ms, (unsigned long long)real);
        cr_assert_geq(job_wall_ms_at(sched_now_ns()), late_ms + 1400);
}
