/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-top.c — `fiberctl top`: a live view of fiberd, redrawn every second until `q`
 * or Ctrl-C, in the manner of top(1): jobs per state, the throughput (finished jobs a
 * second between two frames' counters), per plugin its counts and run time, per user
 * its running and queued jobs, the newest failed jobs and their errors, the job classes
 * (shares, queued, running, ready-to-run latency), the scheduling groups (workers,
 * run-queue depth, ready-to-run latency, stalls and rescues) and the running jobs that
 * have run longest. What fiberd has not measured (no sample) shows `-`, never 0.0.
 *
 * One frame = four calls, `stats` and a page each of `job.list` for the running, the
 * queued and the newest failed jobs; the running ones sorted here by start time (the
 * oldest start has run longest). The per-user rows count the two pages' owners: the
 * daemon lists only what the caller may see (an admin: everyone's), so the rows keep
 * to the access tiers with nothing added to `stats`. The frame is built as text
 * first (its tables from client/table.c, cut to the terminal's width) and then written
 * in one go over the previous one: cursor home, each line followed by "erase to end of
 * line", then "erase below" — no flicker, no ncurses.
 *
 * The terminal: the alternate screen (ESC [?1049h, as less(1) and top(1) use), the
 * cursor hidden, and stdin without ICANON and ECHO, so `q` is read at once and not
 * shown. All three are undone on every way out: `q`, Ctrl-C, SIGTERM, SIGHUP, an error
 * (the message is printed after the terminal is back), and an exit() on the way (atexit).
 * SIGWINCH redraws at once at the new size. The signal handlers only set flags; poll(2)
 * returns EINTR and the loop looks at them.
 *
 * Not a terminal (a pipe, a file): one frame, plain, then exit — `fiberctl top | cat` is
 * a snapshot; with --iterations N, N frames --delay apart (the throughput needs two).
 * --iterations N stops after N frames on a terminal too.
 */
#include "client/fiberctl.h"

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sysexits.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client/convert.h"
#include "client/table.h"
#include "client/term.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/time-util.h"

#define TOP_DEFAULT_DELAY_MS 1000
#define TOP_RUNNING_PAGE 1000 /* running jobs asked for per frame (one job.list page) */
#define TOP_MIN_HEIGHT 10     /* rows assumed when the terminal does not say */
#define TOP_FAILED_ROWS 5     /* the failed pane: the newest failed jobs */
#define TOP_MAX_USERS 64      /* per-user rows at most */

static volatile sig_atomic_t top_stop_signal; /* SIGINT/SIGTERM/SIGHUP seen: leave */
static volatile sig_atomic_t top_resized;     /* SIGWINCH seen: redraw now */

/* The terminal as found, to put back; valid when saved is true. */
static struct {
        bool saved;  /* tattr holds stdin's settings before top changed them */
        bool screen; /* the alternate screen is on, the cursor hidden */
        struct termios tattr;
} top_term;

static void top_on_signal(int sig)
{
        if (sig == SIGWINCH)
                top_resized = 1;
        else
                top_stop_signal = sig;
}

/* Puts the terminal back as it was; safe to call twice (and from atexit). */
static void top_restore_terminal(void)
{
        if (top_term.screen) {
                /* show the cursor, leave the alternate screen */
                fputs("\033[?25h\033[?1049l", stdout);
                fflush(stdout);
                top_term.screen = false;
        }
        if (top_term.saved) {
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &top_term.tattr);
                top_term.saved = false;
        }
}

/* Takes the terminal: keys without Enter and unechoed, the alternate screen, no cursor,
 * and the signal handlers. */
static void top_take_terminal(void)
{
        struct sigaction sa = {.sa_handler = top_on_signal}; /* no SA_RESTART: poll EINTRs */
        struct termios raw;

        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        sigaction(SIGWINCH, &sa, NULL);
        atexit(top_restore_terminal);
        if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &top_term.tattr) == 0) {
                raw = top_term.tattr;
                raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO); /* ISIG stays: Ctrl-C is SIGINT */
                raw.c_cc[VMIN] = 0;
                raw.c_cc[VTIME] = 0;
                if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0)
                        top_term.saved = true;
        }
        fputs("\033[?1049h\033[?25l", stdout);
        fflush(stdout);
        top_term.screen = true;
}

/* One frame's data: `stats` and three job.list pages (newest first), each a new
 * reference: the running jobs, the queued ones (both for the per-user rows: the daemon
 * lists only what the caller may see, every user's for an admin, its own for others),
 * and the last TOP_FAILED_ROWS failed ones. */
typedef struct TopData {
        json_t *stats, *running, *queued, *failed;
} TopData;

/* Finished jobs counted at the previous frame, for the throughput line: none measured
 * before the second frame. */
typedef struct TopRate {
        bool have;      /* a previous sample exists */
        uint64_t at_ns; /* CLOCK_MONOTONIC of it */
        json_int_t done, failed, cancelled;
} TopRate;

/* The text of one frame, a line at a time. */
typedef struct Frame {
        char *text;
        size_t len, cap;
} Frame;

__attribute__((format(printf, 2, 3))) static void frame_printf(Frame *f, const char *fmt, ...)
{
        va_list ap;
        char *s;

        va_start(ap, fmt);
        int n = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if (f->len + (size_t)n + 1 > f->cap) {
                size_t cap = MAX(f->cap * 2, f->len + (size_t)n + 1);
                char *t = realloc(f->text, cap);
                if (!t) {
                        free(s);
                        return;
                }
                f->text = t;
                f->cap = cap;
        }
        memcpy(f->text + f->len, s, (size_t)n + 1);
        f->len += (size_t)n;
        free(s);
}

/* Appends @t (then frees it) and a blank line. */
static void frame_table(Frame *f, Table *t)
{
        char *text = NULL;

        if (t && table_to_string(t, &text) == 0)
                frame_printf(f, "%s\n\n", text);
        free(text);
        table_free(t);
}

static const char *top_str(const json_t *o, const char *key, const char *dflt)
{
        const char *s = json_string_value(json_object_get(o, key));
        return s ? s : dflt;
}

static json_int_t top_int(const json_t *o, const char *key)
{
        return json_integer_value(json_object_get(o, key));
}

/* "850ms", "12.3s", "4m07s", "2h05m" */
static void top_duration(char *buf, size_t size, json_int_t ms)
{
        const json_int_t sec = MSEC_PER_SEC;

        if (ms < 0)
                ms = 0;
        if (ms < sec)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "ms", ms);
        else if (ms < 60 * sec)
                snprintf(buf, size, "%.1fs", (double)ms / sec);
        else if (ms < 3600 * sec)
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "m%02" JSON_INTEGER_FORMAT "s",
                         ms / (60 * sec), (ms / sec) % 60);
        else
                snprintf(buf, size, "%" JSON_INTEGER_FORMAT "h%02" JSON_INTEGER_FORMAT "m",
                         ms / (3600 * sec), (ms / (60 * sec)) % 60);
}

/* A duration in ns shown in @unit_ns units with one decimal; `-` for 0, which stats
 * gives when nothing was measured (no sample, never ran), so 0.0 is never made up. */
static void top_cell_ns(Table *t, size_t col, json_int_t ns, double unit_ns)
{
        if (ns > 0)
                table_cell(t, col, "%.1f", (double)ns / unit_ns);
        else
                table_cell(t, col, "-");
}

/* The job records of a job.list answer (a page's "jobs", or a plain array). */
static json_t *top_jobs(json_t *list)
{
        return json_is_array(list) ? list : json_object_get(list, IPC_KEY_JOBS);
}

/* "Throughput:": jobs finished a second since the previous frame, from the counters of
 * `stats` (done, failed, cancelled since start); `-` until there are two samples. */
static void top_throughput(Frame *f, const json_t *stats, TopRate *rate)
{
        const json_t *jobs = json_object_get(stats, IPC_KEY_JOBS);
        uint64_t now = clock_now_ns(CLOCK_MONOTONIC);
        json_int_t done = top_int(jobs, IPC_KEY_DONE), failed = top_int(jobs, IPC_KEY_FAILED);
        json_int_t cancelled = top_int(jobs, IPC_KEY_CANCELLED);

        if (rate->have && now > rate->at_ns) {
                double s = (double)(now - rate->at_ns) / NSEC_PER_SEC;
                frame_printf(f,
                             "Throughput: %.1f jobs/s finished (%.1f done, %.1f failed, %.1f "
                             "cancelled) over %.1fs\n",
                             (double)(done + failed + cancelled - rate->done - rate->failed -
                                      rate->cancelled) /
                                     s,
                             (double)(done - rate->done) / s, (double)(failed - rate->failed) / s,
                             (double)(cancelled - rate->cancelled) / s, s);
        } else {
                frame_printf(f, "Throughput: - jobs/s finished (measured from the second frame)\n");
        }
        *rate = (TopRate){true, now, done, failed, cancelled};
}

/* The per-plugin rows: the counts of `stats`' "plugins", and the run time p50 / p99 of
 * the plugin's latency entry with the most samples (`-` when none ran). */
static void top_plugins(Frame *f, const json_t *stats, unsigned width, bool colour)
{
        static const char *const cols[] = {"PLUGIN", "QUEUED",    "RUNNING",     "DONE",
                                           "FAILED", "CANCELLED", "RUN-P50(ms)", "RUN-P99(ms)"};
        const char *name;
        json_t *v, *e;
        size_t i;
        Table *t = table_new(colour, width);

        if (!t)
                return;
        for (i = 0; i < ELEMENTSOF(cols); i++)
                table_column(t, cols[i], i == 0 ? TABLE_TRUNC : TABLE_RIGHT, 0);
        json_object_foreach((json_t *)json_object_get(stats, IPC_KEY_PLUGINS), name, v)
        {
                const json_t *best = NULL;
                json_array_foreach(json_object_get(stats, IPC_KEY_LATENCY), i, e)
                {
                        if (strcmp(top_str(e, IPC_KEY_PLUGIN, ""), name) == 0 &&
                            (!best || top_int(e, IPC_KEY_SAMPLES) > top_int(best, IPC_KEY_SAMPLES)))
                                best = e;
                }
                if (table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", name);
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_QUEUED));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_RUNNING));
                table_cell(t, 3, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_DONE));
                table_cell(t, 4, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_FAILED));
                table_cell(t, 5, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_CANCELLED));
                const json_t *rt = json_object_get(best, IPC_KEY_RUN_TIME);
                if (best && top_int(best, IPC_KEY_SAMPLES) > 0) {
                        top_cell_ns(t, 6, top_int(rt, IPC_KEY_P50_NS), 1e6);
                        top_cell_ns(t, 7, top_int(rt, IPC_KEY_P99_NS), 1e6);
                } else {
                        table_cell(t, 6, "-");
                        table_cell(t, 7, "-");
                }
        }
        frame_table(f, t);
}

/* Adds @n jobs of @list's records per owner to @uids/@counts[col] (@nusers so far). */
static void top_count_owners(json_t *list, size_t col, json_int_t *uids, json_int_t (*counts)[2],
                             size_t *nusers)
{
        json_t *v;
        size_t i, k;

        json_array_foreach(top_jobs(list), i, v)
        {
                json_int_t uid = top_int(v, IPC_KEY_OWNER);
                for (k = 0; k < *nusers && uids[k] != uid; k++)
                        ;
                if (k == *nusers) {
                        if (k == TOP_MAX_USERS)
                                continue;
                        uids[k] = uid;
                        counts[k][0] = counts[k][1] = 0;
                        (*nusers)++;
                }
                counts[k][col]++;
        }
}

/* The per-user rows: running and queued jobs per owner, from the job.list pages, which
 * hold only the jobs the caller may see (an admin: everyone's). A page that came back
 * full is marked "+": there may be more. */
static void top_users(Frame *f, const TopData *d, unsigned width, bool colour)
{
        json_int_t uids[TOP_MAX_USERS], counts[TOP_MAX_USERS][2];
        size_t n = 0;
        bool more_running = json_array_size(top_jobs(d->running)) >= TOP_RUNNING_PAGE;
        bool more_queued = json_array_size(top_jobs(d->queued)) >= TOP_RUNNING_PAGE;
        Table *t;

        top_count_owners(d->running, 0, uids, counts, &n);
        top_count_owners(d->queued, 1, uids, counts, &n);
        if (n == 0)
                return;
        t = table_new(colour, width);
        if (!t)
                return;
        table_column(t, "USER", TABLE_RIGHT, 0);
        table_column(t, "RUNNING", TABLE_RIGHT, 0);
        table_column(t, "QUEUED", TABLE_RIGHT, 0);
        for (size_t k = 0; k < n; k++) {
                if (table_row(t) < 0)
                        break;
                table_cell(t, 0, "%" JSON_INTEGER_FORMAT, uids[k]);
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT "%s", counts[k][0],
                           more_running ? "+" : "");
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT "%s", counts[k][1],
                           more_queued ? "+" : "");
        }
        frame_table(f, t);
}

/* The failed pane: the newest failed jobs the caller may see, with their error. */
static void top_failed(Frame *f, json_t *failed, unsigned width, bool colour)
{
        json_t *jobs = top_jobs(failed), *v;
        size_t i;
        Table *t;

        frame_printf(f, "Failed, newest first (%zu shown):\n", json_array_size(jobs));
        t = table_new(colour, width);
        if (!t)
                return;
        table_column(t, "ID", TABLE_RIGHT, 0);
        table_column(t, "PLUGIN", TABLE_TRUNC, 0);
        table_column(t, "USER", TABLE_RIGHT, 0);
        table_column(t, "ERROR", TABLE_TRUNC, 0);
        json_array_foreach(jobs, i, v)
        {
                const json_t *err = json_object_get(v, IPC_KEY_ERROR);
                if (table_row(t) < 0)
                        break;
                table_cell(t, 0, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_ID));
                table_cell(t, 1, "%s", top_str(v, IPC_KEY_PLUGIN, "?"));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_OWNER));
                table_cell(t, 3, "%s: %s", top_str(err, IPC_KEY_CODE, "?"),
                           top_str(err, IPC_KEY_MESSAGE, ""));
        }
        frame_table(f, t);
}

/* qsort: the earliest start first (the job that has run longest). */
static int top_by_start(const void *a, const void *b)
{
        json_int_t x = top_int(*(json_t *const *)a, IPC_KEY_STARTED_MS);
        json_int_t y = top_int(*(json_t *const *)b, IPC_KEY_STARTED_MS);
        return x < y ? -1 : x > y;
}

/* The running jobs of one job.list page, sorted longest-running first; *ret_n records
 * (borrowed from @list, which must outlive the array). NULL when there are none. */
static json_t **top_running_sorted(json_t *list, size_t *ret_n)
{
        json_t *jobs = json_is_array(list) ? list : json_object_get(list, IPC_KEY_JOBS);
        size_t n = json_array_size(jobs);
        json_t **v = n ? calloc(n, sizeof(*v)) : NULL;

        *ret_n = 0;
        if (!v)
                return NULL;
        for (size_t i = 0; i < n; i++)
                v[i] = json_array_get(jobs, i);
        qsort(v, n, sizeof(*v), top_by_start);
        *ret_n = n;
        return v;
}

/* The second line: jobs scheduled, waiting and retrying now, dead since start-up, queued
 * ones a pause or a cap holds back, and what is paused (`stats`: PROTOCOL.md). */
static void top_held(Frame *f, const json_t *stats, bool colour)
{
        static const char *const held[] = {IPC_STATE_SCHEDULED, IPC_STATE_WAITING,
                                           IPC_STATE_RETRYING, IPC_STATE_DEAD};
        const json_t *jobs = json_object_get(stats, IPC_KEY_JOBS);
        const json_t *paused = json_object_get(stats, IPC_KEY_PAUSED);
        const char *kinds[] = {IPC_KEY_CLASSES, IPC_KEY_PLUGINS};
        bool first = true;
        json_t *v;
        size_t i;

        frame_printf(f, "\nHeld:");
        for (i = 0; i < ELEMENTSOF(held); i++) {
                const char *sgr = colour ? term_state_colour(held[i]) : "";
                frame_printf(f, "%s %s%" JSON_INTEGER_FORMAT " %s%s", i ? "," : "", sgr,
                             top_int(jobs, held[i]), held[i], sgr[0] ? TERM_SGR_RESET : "");
        }
        frame_printf(f, "; %" JSON_INTEGER_FORMAT " queued behind a pause or a cap",
                     top_int(jobs, IPC_KEY_HELD));
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++)
                json_array_foreach(json_object_get(paused, kinds[k]), i, v)
                {
                        frame_printf(f, "%s %s %s", first ? "; paused:" : ",",
                                     k ? "plugin" : "class", json_string_value(v) ?: "?");
                        first = false;
                }
}

/* Builds the frame for a screen @width × @height from `stats` (@stats) and the running
 * jobs (@list). */
static void top_frame(const Ctl *ctl, Frame *f, const TopData *data, TopRate *rate, unsigned width,
                      unsigned height, bool colour)
{
        const json_t *stats = data->stats;
        json_t *list = data->running;
        static const struct {
                const char *key, *label;
        } states[] = {
                {IPC_KEY_QUEUED, "queued"},       {IPC_KEY_RUNNING, "running"},
                {IPC_KEY_DONE, "done"},           {IPC_KEY_FAILED, "failed"},
                {IPC_KEY_CANCELLED, "cancelled"},
        };
        const json_t *jobs = json_object_get(stats, IPC_KEY_JOBS);
        json_t *v;
        size_t i, nrunning;
        char up[32], clock[16];
        time_t now = time(NULL);
        struct tm tm;
        json_int_t stalls = 0, rescues = 0;
        Table *t;

        localtime_r(&now, &tm);
        strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
        top_duration(up, sizeof(up), top_int(stats, IPC_KEY_UPTIME_MS));
        frame_printf(f, "fiberctl top - %s - fiberd up %s on %s\n", clock, up,
                     fiberd_client_path(ctl->client));
        frame_printf(f, "Jobs: %" JSON_INTEGER_FORMAT " submitted",
                     top_int(jobs, IPC_KEY_SUBMITTED));
        for (i = 0; i < ELEMENTSOF(states); i++) {
                const char *sgr = colour ? term_state_colour(states[i].label) : "";
                frame_printf(f, ", %s%" JSON_INTEGER_FORMAT " %s%s", sgr,
                             top_int(jobs, states[i].key), states[i].label,
                             sgr[0] ? TERM_SGR_RESET : "");
        }
        top_held(f, stats, colour);
        json_array_foreach(json_object_get(stats, IPC_KEY_GROUPS), i, v)
        {
                stalls += top_int(v, IPC_KEY_STALLS);
                rescues += top_int(v, IPC_KEY_RESCUES);
        }
        frame_printf(f, "\nStalls: %" JSON_INTEGER_FORMAT ", rescues: %" JSON_INTEGER_FORMAT "\n",
                     stalls, rescues);
        top_throughput(f, stats, rate);
        frame_printf(f, "\n");
        top_plugins(f, stats, width, colour);
        top_users(f, data, width, colour);
        top_failed(f, data->failed, width, colour);

        json_t **running = top_running_sorted(list, &nrunning);

        t = table_new(colour, width);
        if (t) {
                static const char *const cols[] = {"CLASS",   "SHARES",  "QUEUED", "RUNNING",
                                                   "CPU(ms)", "P50(us)", "P99(us)"};
                for (i = 0; i < ELEMENTSOF(cols); i++)
                        table_column(t, cols[i], i == 0 ? TABLE_TRUNC : TABLE_RIGHT, 0);
        }
        json_array_foreach(json_object_get(stats, IPC_KEY_CLASSES), i, v)
        {
                const char *name = top_str(v, IPC_KEY_NAME, "?");
                size_t here = 0;
                for (size_t k = 0; k < nrunning; k++)
                        if (strcmp(top_str(running[k], IPC_KEY_CLASS, "default"), name) == 0)
                                here++;
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", name);
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_SHARES));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_QUEUED));
                table_cell(t, 3, "%zu", here);
                top_cell_ns(t, 4, top_int(v, IPC_KEY_RUNTIME_NS), 1e6);
                top_cell_ns(t, 5, top_int(v, IPC_KEY_READY_TO_RUN_P50_NS), 1e3);
                top_cell_ns(t, 6, top_int(v, IPC_KEY_READY_TO_RUN_P99_NS), 1e3);
        }
        frame_table(f, t);

        t = table_new(colour, width);
        if (t) {
                static const char *const cols[] = {"GROUP",   "WORKERS", "RUNQ",   "P50(us)",
                                                   "P99(us)", "STALLS",  "RESCUES"};
                for (i = 0; i < ELEMENTSOF(cols); i++)
                        table_column(t, cols[i], i == 0 ? TABLE_TRUNC : TABLE_RIGHT, 0);
        }
        json_array_foreach(json_object_get(stats, IPC_KEY_GROUPS), i, v)
        {
                if (!t || table_row(t) < 0)
                        break;
                table_cell(t, 0, "%s", top_str(v, IPC_KEY_NAME, "?"));
                table_cell(t, 1, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_WORKERS));
                table_cell(t, 2, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_RUNQ_DEPTH));
                if (top_int(v, IPC_KEY_READY_TO_RUN_SAMPLES) > 0) {
                        table_cell(t, 3, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P50_NS) / 1e3);
                        table_cell(t, 4, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P99_NS) / 1e3);
                } else {
                        table_cell(t, 3, "-");
                        table_cell(t, 4, "-");
                }
                table_cell(t, 5, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_STALLS));
                table_cell(t, 6, "%" JSON_INTEGER_FORMAT, top_int(v, IPC_KEY_RESCUES));
        }
        frame_table(f, t);

        /* the longest-running jobs, as many as the rows left allow (3 at least) */
        size_t used = 0;
        for (const char *p = f->text; p && *p; p++)
                used += *p == '\n';
        size_t rows = height > used + 3 ? height - used - 3 : 3;
        frame_printf(f, "Running longest (%zu running):\n", nrunning);
        t = table_new(colour, width);
        if (t) {
                static const char *const cols[] = {"ID", "PLUGIN", "CLASS", "RUNNING", "PROGRESS"};
                for (i = 0; i < ELEMENTSOF(cols); i++)
                        table_column(t, cols[i],
                                     i == 0 || i == 3 ? TABLE_RIGHT
                                     : i == 4         ? 0
                                                      : TABLE_TRUNC,
                                     0);
        }
        json_int_t now_ms = (json_int_t)(clock_now_ns(CLOCK_REALTIME) / NSEC_PER_MSEC);
        for (size_t k = 0; t && k < nrunning && k < rows; k++) {
                const json_t *r = running[k];
                const json_t *pr = json_object_get(r, IPC_KEY_PROGRESS);
                char ran[32], prog[64] = "-";
                top_duration(ran, sizeof(ran), now_ms - top_int(r, IPC_KEY_STARTED_MS));
                if (json_is_integer(json_object_get(pr, IPC_KEY_DONE))) {
                        json_int_t d = top_int(pr, IPC_KEY_DONE), tot = top_int(pr, IPC_KEY_TOTAL);
                        if (tot > 0)
                                snprintf(prog, sizeof(prog),
                                         "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " (%d%%)",
                                         d, tot, (int)(100.0 * d / tot));
                        else
                                snprintf(prog, sizeof(prog), "%" JSON_INTEGER_FORMAT, d);
                }
                if (table_row(t) < 0)
                        break;
                table_cell(t, 0, "%" JSON_INTEGER_FORMAT, top_int(r, IPC_KEY_ID));
                table_cell(t, 1, "%s", top_str(r, IPC_KEY_PLUGIN, "?"));
                table_cell(t, 2, "%s", top_str(r, IPC_KEY_CLASS, "default"));
                table_cell(t, 3, "%s", ran);
                table_cell(t, 4, "%s", prog);
        }
        frame_table(f, t);
        free(running);
}

/* One job.list page of @state, newest first, at most @limit records. */
static int top_list(Ctl *ctl, const char *state, int limit, json_t **ret, CtlStatus *cs)
{
        return ctl_call(ctl, IPC_METHOD_JOB_LIST,
                        json_pack("[{s:s, s:n, s:i}]", IPC_FILTER_STATE, state, IPC_FILTER_CURSOR,
                                  IPC_FILTER_LIMIT, limit),
                        ret, cs);
}

static void top_data_done(TopData *d)
{
        json_decref(d->stats);
        json_decref(d->running);
        json_decref(d->queued);
        json_decref(d->failed);
        *d = (TopData){0};
}

/* One frame's data (TopData): four calls. 0 or a negative errno (the reason in @cs). */
static int top_fetch(Ctl *ctl, TopData *d, CtlStatus *cs)
{
        int r = ctl_call(ctl, IPC_METHOD_STATS, json_array(), &d->stats, cs);

        if (r >= 0)
                r = top_list(ctl, IPC_STATE_RUNNING, TOP_RUNNING_PAGE, &d->running, cs);
        if (r >= 0)
                r = top_list(ctl, IPC_STATE_QUEUED, TOP_RUNNING_PAGE, &d->queued, cs);
        if (r >= 0)
                r = top_list(ctl, IPC_STATE_FAILED, TOP_FAILED_ROWS, &d->failed, cs);
        if (r < 0)
                top_data_done(d);
        return r;
}

/* Writes the @n bytes at @p, cut to @width visible columns: SGR sequences (ESC [ ... m)
 * take no column and are always written, so a cut coloured line still resets. */
static void top_put_cut(const char *p, size_t n, unsigned width)
{
        unsigned col = 0;

        for (size_t i = 0; i < n; i++) {
                if (p[i] == '\033') {
                        size_t j = i + 1;
                        while (j < n && p[j] != 'm')
                                j++;
                        fwrite(p + i, 1, MIN(j + 1, n) - i, stdout);
                        i = j;
                        continue;
                }
                if (col < width)
                        fputc(p[i], stdout);
                col++;
        }
}

/* Draws @f over the screen: home, each line cut to @width and its rest erased, then
 * everything below erased, and the key help on the last row. */
static void top_draw(const Frame *f, unsigned width, unsigned height)
{
        const char *p = f->text ? f->text : "";
        unsigned row = 0;

        fputs("\033[H", stdout);
        while (*p && row + 1 < height) {
                size_t n = strcspn(p, "\n");
                top_put_cut(p, n, width);
                fputs("\033[K\n", stdout);
                row++;
                p += n + (p[n] == '\n');
        }
        fputs("\033[7m q: quit \033[0m\033[K\033[J", stdout);
        fflush(stdout);
}

/* Waits up to @ms for a key or a signal. Returns true when top should end ('q', 'Q' or
 * a stop signal); a resize returns false at once. */
static bool top_wait(int ms)
{
        struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
        uint64_t until = clock_now_ns(CLOCK_MONOTONIC) + (uint64_t)ms * NSEC_PER_MSEC;

        for (;;) {
                if (top_stop_signal)
                        return true;
                if (top_resized) {
                        top_resized = 0;
                        return false;
                }
                uint64_t now = clock_now_ns(CLOCK_MONOTONIC);
                if (now >= until)
                        return false;
                int left = (int)((until - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
                int n = poll(&pfd, top_term.saved ? 1 : 0, left);
                if (n <= 0)
                        continue; /* EINTR (a signal: looked at above) or time is up */
                if (pfd.revents & (POLLHUP | POLLERR | POLLNVAL)) {
                        top_term.saved = false; /* no more keys: Ctrl-C still works */
                        continue;
                }
                char keys[32];
                ssize_t got = read(STDIN_FILENO, keys, sizeof(keys));
                for (ssize_t i = 0; i < got; i++)
                        if (keys[i] == 'q' || keys[i] == 'Q')
                                return true;
        }
}

int verb_top(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"delay", required_argument, NULL, 'd'},
                {"iterations", required_argument, NULL, 'n'},
                {0},
        };
        uint64_t delay_ms = TOP_DEFAULT_DELAY_MS, frames = UINT64_MAX;
        int c, r;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":d:n:", options, NULL)) != -1) {
                if (c == 'd' && convert_duration_ms(optarg, &delay_ms) == 0 && delay_ms > 0)
                        continue;
                if (c == 'n' && ctl_parse_id(optarg, &frames))
                        continue;
                if (c == 'd')
                        return ctl_usage("--delay needs a duration like 500ms or 2s, got '%s'",
                                         optarg);
                if (c == 'n')
                        return ctl_usage("--iterations needs a positive integer, got '%s'", optarg);
                return ctl_usage("top: unknown option or missing argument '%s'", argv[optind - 1]);
        }
        if (optind < argc)
                return ctl_usage("top takes no arguments, got '%s'", argv[optind]);
        if (ctl->json)
                return ctl_usage("top is for a terminal; for JSON use 'fiberctl stats --json' "
                                 "and 'fiberctl list --state running --json'");
        CtlStatus cs;
        if (ctl_connect(ctl, &cs) < 0)
                return ctl_fail(&cs);

        bool live = term_is_tty(stdout);
        bool colour = term_colour(stdout);
        if (live)
                top_take_terminal();
        TopRate rate = {0};
        for (uint64_t frame = 0; frame < frames; frame++) {
                TopData d = {0};
                Frame f = {0};
                unsigned width = term_width(stdout);
                struct winsize ws;
                unsigned height = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0
                                          ? ws.ws_row
                                          : TOP_MIN_HEIGHT;

                r = top_fetch(ctl, &d, &cs);
                if (r < 0)
                        break;
                top_frame(ctl, &f, &d, &rate, live ? width : 0, live ? height : UINT32_MAX / 2,
                          colour);
                top_data_done(&d);
                if (!live) {
                        /* a snapshot; with --iterations, that many, --delay apart */
                        fputs(f.text ? f.text : "", stdout);
                        free(f.text);
                        if (frames == UINT64_MAX || frame + 1 >= frames)
                                return fflush(stdout) == 0 ? 0 : EX_IOERR;
                        fputs("\n", stdout);
                        fflush(stdout);
                        top_wait((int)delay_ms);
                        continue;
                }
                top_draw(&f, width, height);
                free(f.text);
                if (frame + 1 < frames && top_wait((int)delay_ms))
                        break;
        }
        top_restore_terminal();
        if (r < 0)
                return ctl_fail(&cs);
        return top_stop_signal && top_stop_signal != SIGINT ? 128 + top_stop_signal : 0;
}
