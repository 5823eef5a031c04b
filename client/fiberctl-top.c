/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-top.c — `fiberctl top`: a live view of fiberd, redrawn every second until `q`
 * or Ctrl-C, in the manner of top(1): jobs per state, the job classes (shares, queued,
 * running, ready-to-run latency), the scheduling groups (workers, run-queue depth,
 * ready-to-run latency, stalls and rescues) and the running jobs that have run longest.
 *
 * One frame = two calls, `stats` and one page of `job.list {"state": "running"}`, sorted
 * here by start time (the oldest start has run longest). The frame is built as text
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
 * a snapshot. --iterations N stops after N frames on a terminal too.
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
static void top_frame(const Ctl *ctl, Frame *f, const json_t *stats, json_t *list, unsigned width,
                      unsigned height, bool colour)
{
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
        frame_printf(f, "\nStalls: %" JSON_INTEGER_FORMAT ", rescues: %" JSON_INTEGER_FORMAT "\n\n",
                     stalls, rescues);

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
                table_cell(t, 4, "%.1f", top_int(v, IPC_KEY_RUNTIME_NS) / 1e6);
                table_cell(t, 5, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P50_NS) / 1e3);
                table_cell(t, 6, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P99_NS) / 1e3);
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
                table_cell(t, 3, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P50_NS) / 1e3);
                table_cell(t, 4, "%.1f", top_int(v, IPC_KEY_READY_TO_RUN_P99_NS) / 1e3);
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

/* One frame's data: `stats` and the running jobs. 0 or a negative errno (the reason in
 * @cs). */
static int top_fetch(Ctl *ctl, json_t **ret_stats, json_t **ret_list, CtlStatus *cs)
{
        json_t *stats, *list;
        int r = ctl_call(ctl, IPC_METHOD_STATS, json_array(), &stats, cs);

        if (r < 0)
                return r;
        r = ctl_call(ctl, IPC_METHOD_JOB_LIST,
                     json_pack("[{s:s, s:n, s:i}]", IPC_FILTER_STATE, IPC_STATE_RUNNING,
                               IPC_FILTER_CURSOR, IPC_FILTER_LIMIT, TOP_RUNNING_PAGE),
                     &list, cs);
        if (r < 0) {
                json_decref(stats);
                return r;
        }
        *ret_stats = stats;
        *ret_list = list;
        return 0;
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
        for (uint64_t frame = 0; frame < frames; frame++) {
                json_t *stats, *list;
                Frame f = {0};
                unsigned width = term_width(stdout);
                struct winsize ws;
                unsigned height = ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0
                                          ? ws.ws_row
                                          : TOP_MIN_HEIGHT;

                r = top_fetch(ctl, &stats, &list, &cs);
                if (r < 0)
                        break;
                top_frame(ctl, &f, stats, list, live ? width : 0, live ? height : UINT32_MAX / 2,
                          colour);
                json_decref(stats);
                json_decref(list);
                if (!live) {
                        fputs(f.text ? f.text : "", stdout);
                        free(f.text);
                        return 0;
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
