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
static void job_in(Job *j, JobState s)
{
        JobMachine none = {0};

        memset(j, 0, sizeof(*j));
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
                                /* a job in a state no row reaches is still a job: put it
                                 * there by hand, as a later version would have */
                                memset(&j, 0, sizeof(j));
                                if (s != JOB_NEW && s <= JOB_CANCELLED)
                                        job_in(&j, (JobState)s);
                                else
                                        memcpy(&j.state, &(JobState){(JobState)s}, sizeof(j.state));
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

Test(jobstate, final_states_and_reserved_states_are_dead_ends_for_now)
{
        size_t n;
        const JobTransition *rows = job_transitions(&n);

        for (size_t i = 0; i < n; i++) {
                cr_assert(!job_state_final(rows[i].from), "a row leaves a final state");
                cr_assert(rows[i].from <= JOB_CANCELLED && rows[i].to <= JOB_CANCELLED,
                          "a row touches a state not reachable yet");
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
        cr_assert_gt(j.submitted_mono_ns, 0);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_DISPATCH, NULL), 0);
        cr_assert_gt(j.started_ms, 0);
        cr_assert_geq(j.started_mono_ns, j.submitted_mono_ns);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_REQUEUE, NULL), 0);
        cr_assert_eq(j.started_ms, 0);
        cr_assert_eq(j.started_mono_ns, 0);
        cr_assert_eq(job_transition(&m, &j, JOB_EV_DISPATCH, NULL), 0);
        cr_assert_eq(
                job_transition(&m, &j, JOB_EV_TIMEOUT,
                               &(JobChange){.code = IPC_DEADLINE_EXCEEDED, .message = "too late"}),
                0);
        cr_assert_eq(j.state, JOB_CANCELLED);
        cr_assert_gt(j.finished_ms, 0);
        cr_assert_geq(j.finished_mono_ns, j.started_mono_ns);
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

        memset(&j, 0, sizeof(j));
        j.finished_ms = job_now_ms() - 1000; /* ended a second ago, says the record */
        cr_assert_eq(job_transition(&none, &j, JOB_EV_RESTORE,
                                    &(JobChange){.restored = JOB_DONE, .code = IPC_CANCELLED}),
                     0);
        cr_assert_eq(j.state, JOB_DONE);
        cr_assert_null(j.error_code, "a restore keeps the record's own error");
        cr_assert_leq(j.finished_mono_ns + 900 * 1000000ull, j.submitted_mono_ns);
}

Test(jobstate, wire_names_parse_and_reserved_ones_do_not)
{
        JobState s;

        for (int k = JOB_QUEUED; k <= JOB_CANCELLED; k++) {
                const char *name = job_state_name((JobState)k);
                cr_assert_eq(job_state_parse(name, strlen(name), &s), 0);
                cr_assert_eq(s, k);
        }
        cr_assert_eq(job_state_parse("new", 3, &s), -EINVAL);
        cr_assert_eq(job_state_parse("paused", 6, &s), -EINVAL);
        cr_assert_eq(job_state_parse("dead", 4, &s), -EINVAL);
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
