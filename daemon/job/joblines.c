/* SPDX-License-Identifier: MIT */
/*
 * joblines.c — a job's queued, started and ended lines (joblines.h): what they say, at
 * which level, and whether log_jobs lets them out.
 */
#include "daemon/job/joblines.h"

#include "daemon/obs/log.h"
#include "scheduler/base/time-util.h"
#include "scheduler/sched.h"

static bool joblines_enabled = true;

void joblines_set(bool on)
{
        __atomic_store_n(&joblines_enabled, on, __ATOMIC_RELAXED);
}

bool joblines_on(void)
{
        return __atomic_load_n(&joblines_enabled, __ATOMIC_RELAXED) && log_get_level() >= LOG_INFO;
}

/* The time from @from_ns to @to_ns as "12 ms" (tenths below 10 ms: "0.3 ms") into @buf;
 * "0 ms" when either is unset or they run backwards. Returns @buf. */
static const char *span(char *buf, size_t size, uint64_t from_ns, uint64_t to_ns)
{
        uint64_t ns = from_ns && to_ns > from_ns ? to_ns - from_ns : 0;

        if (ns < 10 * NSEC_PER_MSEC)
                snprintf(buf, size, "%llu.%llu ms", (unsigned long long)(ns / NSEC_PER_MSEC),
                         (unsigned long long)(ns % NSEC_PER_MSEC / (NSEC_PER_MSEC / 10)));
        else
                snprintf(buf, size, "%llu ms", (unsigned long long)(ns / NSEC_PER_MSEC));
        return buf;
}

void joblines_queued(const Job *j, JobState state, bool fleet)
{
        char timeout[48] = "";

        if (!joblines_on())
                return;
        if (j->timeout_ns)
                snprintf(timeout, sizeof(timeout), ", timeout %llu ms",
                         (unsigned long long)(j->timeout_ns / NSEC_PER_MSEC));
        log_job_class(LOG_INFO, j->id, j->plugin_name, j->owner, j->class_name,
                      "%s%s (owner %u, class %s, priority %d%s)", job_state_name(state),
                      fleet ? " in the fleet" : "", (unsigned)j->owner, j->class_name, j->priority,
                      timeout);
}

void joblines_started(const Job *j)
{
        uint32_t attempts = j->max_attempts ? j->max_attempts : 1;
        char t[32];

        if (!joblines_on())
                return;
        if (attempts > 1)
                log_job_class(
                        LOG_INFO, j->id, j->plugin_name, j->owner, j->class_name,
                        "started (attempt %u of %u, queued %s)", (unsigned)j->attempt + 1,
                        (unsigned)attempts,
                        span(t, sizeof(t), j->live->submitted_mono_ns, j->live->started_mono_ns));
        else
                log_job_class(
                        LOG_INFO, j->id, j->plugin_name, j->owner, j->class_name,
                        "started (queued %s)",
                        span(t, sizeof(t), j->live->submitted_mono_ns, j->live->started_mono_ns));
}

void joblines_ended(const Job *j, uint64_t started_mono_ns, uint64_t due_ms)
{
        char ran[32];
        const char *msg = j->error_message ? j->error_message : "";

        if (j->state == JOB_DONE && !joblines_on())
                return; /* the common case: nothing to format */
        span(ran, sizeof(ran), started_mono_ns,
             job_state_final(j->state) ? j->finished_mono_ns : sched_now_ns());
        switch (j->state) {
        case JOB_DONE:
                log_job_class(LOG_INFO, j->id, j->plugin_name, j->owner, j->class_name,
                              "finished done in %s", ran);
                return;
        case JOB_FAILED:
                log_job_class(LOG_NOTICE, j->id, j->plugin_name, j->owner, j->class_name,
                              "failed in %s: %s", ran, msg);
                return;
        case JOB_DEAD:
                log_job_class(LOG_NOTICE, j->id, j->plugin_name, j->owner, j->class_name,
                              "dead in %s (out of attempts: %u): %s", ran,
                              (unsigned)j->max_attempts, msg);
                return;
        case JOB_RETRYING:
                log_job_class(LOG_NOTICE, j->id, j->plugin_name, j->owner, j->class_name,
                              "attempt %u of %u failed in %s: %s; the next one is due at "
                              "%llu ms",
                              (unsigned)j->attempt, (unsigned)j->max_attempts, ran, msg,
                              (unsigned long long)due_ms);
                return;
        case JOB_CANCELLED:
                log_job_class(LOG_INFO, j->id, j->plugin_name, j->owner, j->class_name,
                              "cancelled after %s: %s", ran, msg);
                return;
        default:
                log_job_class(LOG_DEBUG, j->id, j->plugin_name, j->owner, j->class_name, "%s",
                              job_state_name(j->state));
        }
}
