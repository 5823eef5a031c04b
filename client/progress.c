/* SPDX-License-Identifier: MIT */
/*
 * progress.c — one progress line on stderr, the way apt and curl draw theirs: '\r', the
 * text, then "erase to the end of the line" (ESC [ K), so a shorter text leaves nothing
 * of a longer one behind. The text is cut to the terminal's width less one column, so it
 * never wraps (a wrapped line cannot be redrawn with '\r'). The rate is the average since
 * the start (done / elapsed): steadier than an instantaneous one, and the ETA is
 * (total - done) / rate.
 */
#include "client/progress.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "client/term.h"
#include "scheduler/base/time-util.h"

#define PROGRESS_ERASE "\033[K"

bool progress_enabled(const Ctl *ctl)
{
        return !ctl->json && term_is_tty(stdout) && term_is_tty(stderr);
}

void progress_init(Progress *p, const Ctl *ctl)
{
        memset(p, 0, sizeof(*p));
        p->on = progress_enabled(ctl);
        p->start_ns = clock_now_ns(CLOCK_MONOTONIC);
}

/* "4s", "2m05s", "1h02m" */
static void format_eta(char *buf, size_t size, double sec)
{
        unsigned long s = (unsigned long)(sec + 0.5);

        if (s < 60)
                snprintf(buf, size, "%lus", s);
        else if (s < 3600)
                snprintf(buf, size, "%lum%02lus", s / 60, s % 60);
        else
                snprintf(buf, size, "%luh%02lum", s / 3600, (s / 60) % 60);
}

/* ", 12.5/s, ETA 4s" for @done of @total after @elapsed seconds (no ETA when unknown). */
static void format_rate(char *buf, size_t size, double done, double total, bool total_known,
                        double elapsed)
{
        char eta[32];
        double rate = elapsed > 0 ? done / elapsed : 0;

        if (rate <= 0) {
                snprintf(buf, size, "%s", total_known && done < total ? ", ETA -" : "");
                return;
        }
        if (!total_known || done >= total) {
                snprintf(buf, size, ", %.1f/s", rate);
                return;
        }
        format_eta(eta, sizeof(eta), (total - done) / rate);
        snprintf(buf, size, ", %.1f/s, ETA %s", rate, eta);
}

void progress_draw(Progress *p, uint64_t done, uint64_t total, bool total_known,
                   const json_t *job_progress, bool force)
{
        char line[256], rate[96];

        if (!p->on)
                return;
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC);
        if (!force && p->drawn && now - p->drawn_ns < PROGRESS_TICK_MS * NSEC_PER_MSEC)
                return;
        double elapsed = (double)(now - p->start_ns) / NSEC_PER_SEC;
        json_t *jd = json_object_get(job_progress, IPC_KEY_DONE);
        json_t *jt = json_object_get(job_progress, IPC_KEY_TOTAL);
        if (json_is_integer(jd) && json_is_integer(jt) && json_integer_value(jt) > 0) {
                /* one job: its plugin's own {done, total} */
                double d = (double)json_integer_value(jd), t = (double)json_integer_value(jt);
                format_rate(rate, sizeof(rate), d, t, true, elapsed);
                snprintf(line, sizeof(line),
                         "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " (%d%%)%s",
                         json_integer_value(jd), json_integer_value(jt), (int)(100 * d / t), rate);
        } else {
                format_rate(rate, sizeof(rate), (double)done, (double)total, total_known, elapsed);
                snprintf(line, sizeof(line), "%llu/%llu%s jobs done%s", (unsigned long long)done,
                         (unsigned long long)total, total_known ? "" : "+", rate);
        }
        unsigned width = term_width(stderr);
        if (width > 1 && strlen(line) > width - 1)
                line[width - 1] = '\0';
        fprintf(stderr, "\r%s" PROGRESS_ERASE, line);
        fflush(stderr);
        p->drawn = true;
        p->drawn_ns = now;
}

void progress_clear(Progress *p)
{
        if (!p->on || !p->drawn)
                return;
        fputs("\r" PROGRESS_ERASE, stderr);
        fflush(stderr);
        p->drawn = false;
}
