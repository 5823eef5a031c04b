/* SPDX-License-Identifier: MIT */
/*
 * fiberctl-batch.c — `fiberctl batch [--wait] [--window N]`: submit JSON Lines job specs
 * from stdin over one connection, many in flight, one output line per job as it ends.
 *
 * Each input line is {"plugin": NAME, "args": {...}, "options": {...}, "after": [...]}
 * (args, options and after optional; blank lines skipped); options are job.submit's as
 * they are (priority, timeout_ms, class, delay_ms, run_at, max_attempts, backoff_ms,
 * backoff_max_ms, key, ...); --class NAME sets options.class on lines that set none.
 * "after" (or options.after) lists job ids and references to the jobs of earlier lines,
 * "#3" for line 3 (batchref.h): a line whose references are answered is sent with their
 * ids; one whose references are still in flight is held back in its slot and sent as
 * soon as they are answered; one that names itself or a later line (a cycle), or a line
 * without a job, is refused as a bad line, and one whose reference was refused is
 * refused too (FAILED_PRECONDITION). A bounded window of slots (default 64) holds the
 * jobs in flight, held lines included: a slot is taken by a line's job.submit or, with
 * --wait, by its job.run (submit and wait in one round trip); it is freed when the job's
 * line is printed. With --wait, a line's id is known when its job.run answers, at the
 * job's end, so a line after it is sent then (fiberd would hold it until then anyway). With
 * --wait against a fiberd older than job.run (METHOD_NOT_FOUND), the slot's params are
 * sent again as job.submit, followed by job.wait, and every later line does the same.
 * While slots are free and stdin has lines, lines are read and their requests queued;
 * then the requests are flushed in one write, one answer is waited for, and every answer
 * that has arrived with it is handled (their output lines written at once) before the
 * window is refilled: a syscall or two per round, not per job. So at most
 * `window` requests are outstanding, the daemon's queue is never flooded by one client,
 * and output comes in completion order.
 *
 * Output, one line per input job: without --wait, when it is accepted ("line 3: job 17
 * sha256", or with --json {"line": 3, "id": 17, "plugin": "sha256"}); with --wait, when it
 * ends (the job line of `wait`, or the job record plus "line" with --json). A refused
 * line prints "line 3: CODE: message" ({"line": 3, "error": {...}}).
 * On a terminal (stdout and stderr), a progress line on stderr counts the jobs done of
 * those sent ("12/40+ jobs done" while stdin still has lines), with rate and ETA
 * (client/progress.c); it is erased before each output line and at the end.
 * Exit: 0; 65 when some input line was not a valid spec; else 1 when some job failed,
 * was cancelled or was refused by the daemon; connection and protocol errors stop the
 * batch at once with their own code.
 */
#include "client/fiberctl.h"
#include "client/batchref.h"
#include "client/convert.h"
#include "client/progress.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

#define BATCH_DEFAULT_WINDOW 64
#define BATCH_MAX_WINDOW 4096

typedef struct BatchSlot {
        bool busy;
        bool waiting;       /* the outstanding request is job.wait, not job.submit */
        json_t *held;       /* non-NULL: held back until the lines its "after" names are
                             * answered, nothing outstanding; its [plugin, args, options],
                             * owned */
        json_t *after;      /* while held: the line's "after", unresolved; owned */
        json_t *params;     /* non-NULL: the outstanding request is job.run, and these
                             * are its params, kept to resend as job.submit; owned */
        uint32_t msgid;     /* of the outstanding request */
        unsigned long line; /* input line number, from 1 */
        json_int_t id;      /* job id once submitted */
        char *plugin;       /* for the output line */
} BatchSlot;

typedef struct Batch {
        Ctl *ctl;
        bool wait;
        bool no_run;           /* the daemon answered job.run with METHOD_NOT_FOUND */
        const char *job_class; /* --class: options.class of lines without one; NULL = none */
        BatchSlot *slots;
        size_t window, busy;
        unsigned long line; /* lines read so far */
        json_int_t *lines;  /* what is known of each line read (batchref.h): lines[n - 1]
                             * is line n's job id or a BATCHREF_* value */
        size_t lines_cap;
        size_t held; /* slots held back (BatchSlot.held) */
        bool eof;
        unsigned long bad_input, failed, ok;
        unsigned long sent; /* jobs sent (lines that were specs) */
        Progress progress;  /* on a terminal: done / sent, "+" until stdin's end */
        /* The slot of an answer in O(1), not a scan of the window per answer: an open
         * addressing table (linear probing) of slot index + 1 by the outstanding
         * request's msgid, 0 = empty; its size a power of two at least twice the
         * window. And the free slots' indices, a stack. */
        uint32_t *by_msgid;
        size_t by_msgid_mask;
        size_t *free_slots;
        size_t n_free;
        msgpack_sbuffer text; /* --json: a record's output line (batch_print_record()) */
} Batch;

/* Fibonacci hashing (Knuth, TAOCP 6.4): the msgids' high product bits, so neighbours
 * spread over the table and a long-outstanding request's cell is not met by every
 * mask-th later one. */
static size_t msgid_home(const Batch *b, uint32_t msgid)
{
        return (size_t)((msgid * UINT64_C(0x9E3779B97F4A7C15)) >> 40) & b->by_msgid_mask;
}

/* Files @s under its outstanding request's msgid. */
static void slot_track(Batch *b, BatchSlot *s)
{
        size_t i = msgid_home(b, s->msgid);

        while (b->by_msgid[i])
                i = (i + 1) & b->by_msgid_mask;
        b->by_msgid[i] = (uint32_t)(s - b->slots) + 1;
}

/* Takes @s out of the table, if it is in it (backward-shift deletion: the entries after
 * it that probed past its cell move up, so no lookup meets a hole before its key). */
static void slot_untrack(Batch *b, BatchSlot *s)
{
        uint32_t want = (uint32_t)(s - b->slots) + 1;
        size_t i = msgid_home(b, s->msgid), j;

        if (!s->msgid)
                return;
        while (b->by_msgid[i] && b->by_msgid[i] != want)
                i = (i + 1) & b->by_msgid_mask;
        if (!b->by_msgid[i])
                return;
        for (j = i;;) {
                size_t home;

                b->by_msgid[i] = 0;
                for (;;) {
                        j = (j + 1) & b->by_msgid_mask;
                        if (!b->by_msgid[j])
                                return;
                        home = msgid_home(b, b->slots[b->by_msgid[j] - 1].msgid);
                        /* stays when its home lies cyclically in (i, j] */
                        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
                                continue;
                        break;
                }
                b->by_msgid[i] = b->by_msgid[j];
                i = j;
        }
}

/* The busy slot whose outstanding request is @msgid; NULL when none is. */
static BatchSlot *slot_of_msgid(const Batch *b, uint32_t msgid)
{
        for (size_t i = msgid_home(b, msgid); msgid && b->by_msgid[i];
             i = (i + 1) & b->by_msgid_mask) {
                BatchSlot *s = &b->slots[b->by_msgid[i] - 1];
                if (s->msgid == msgid)
                        return s->busy ? s : NULL;
        }
        return NULL;
}

static void batch_print_error(Batch *b, unsigned long line, const char *code, const char *msg)
{
        progress_clear(&b->progress);
        if (b->ctl->json) {
                json_t *o = json_pack("{s:I, s:{s:s, s:s}}", "line", (json_int_t)line, "error",
                                      "code", code, "message", msg);
                ctl_print_json(o);
                json_decref(o);
        } else {
                printf("line %lu: %s: %s\n", line, code, msg);
        }
}

static void slot_release(Batch *b, BatchSlot *s)
{
        slot_untrack(b, s);
        b->free_slots[b->n_free++] = (size_t)(s - b->slots);
        free(s->plugin);
        json_decref(s->params);
        if (s->held)
                b->held--;
        json_decref(s->held);
        json_decref(s->after);
        memset(s, 0, sizeof(*s));
        b->busy--;
}

/* Records what became of line @line (from 1): its job's id, or a BATCHREF_* value. */
static void batch_line_is(Batch *b, unsigned long line, json_int_t what)
{
        b->lines[line - 1] = what;
}

/* Makes room to record line b->line + 1. 0 or -ENOMEM. */
static int batch_lines_grow(Batch *b)
{
        if (b->line < b->lines_cap)
                return 0;
        size_t cap = b->lines_cap ? 2 * b->lines_cap : 1024;
        json_int_t *lines = realloc(b->lines, cap * sizeof(*lines));
        if (!lines)
                return -ENOMEM;
        b->lines = lines;
        b->lines_cap = cap;
        return 0;
}

/* ctl_send() for slot @s, whose outstanding request it becomes: 0, or the exit code of a
 * failure (reported), which stops the batch. */
static int batch_send(Batch *b, BatchSlot *s, const char *method, json_t *params)
{
        CtlStatus cs;

        slot_untrack(b, s);
        s->msgid = 0;
        if (ctl_send(b->ctl, method, params, &s->msgid, &cs) < 0)
                return ctl_fail(&cs);
        slot_track(b, s);
        return 0;
}

/* Sends the job of slot @s: job.run with --wait (unless fiberd is older), else
 * job.submit; @params ([plugin, args, options]) taken. 0, or an exit code. */
static int batch_send_job(Batch *b, BatchSlot *s, json_t *params)
{
        if (b->wait && !b->no_run) {
                s->params = json_incref(params);
                return batch_send(b, s, IPC_METHOD_JOB_RUN, params);
        }
        return batch_send(b, s, IPC_METHOD_JOB_SUBMIT, params);
}

/* Refuses line @line for a bad "after" (batchref_resolve()'s @r and @why): a bad line
 * (INVALID_ARGUMENT, exit 65), or FAILED_PRECONDITION when a line it names was refused. */
static void batch_refuse_after(Batch *b, unsigned long line, int r, const char *why)
{
        bool bad = r != -EALREADY;

        batch_print_error(b, line, bad ? IPC_INVALID_ARGUMENT : IPC_FAILED_PRECONDITION, why);
        batch_line_is(b, line, bad ? BATCHREF_NO_JOB : BATCHREF_REFUSED);
        if (bad)
                b->bad_input++;
        else
                b->failed++;
}

/* Puts the resolved @ids in @params' options (params[2]; made a map if it was none). */
static void params_set_after(json_t *params, json_t *ids)
{
        json_t *opts = json_array_get(params, IPC_SUBMIT_PARAM_OPTIONS);

        if (!json_is_object(opts)) {
                opts = json_object();
                json_array_set_new(params, IPC_SUBMIT_PARAM_OPTIONS, opts);
        }
        json_object_set_new(opts, IPC_OPT_AFTER, ids);
}

/*
 * Sends every held line whose references are now answered, and refuses those whose
 * references were refused; the others stay held. Called whenever a line's fate becomes
 * known. 0, or an exit code.
 */
static int batch_release_held(Batch *b)
{
        for (size_t i = 0; b->held > 0 && i < b->window; i++) {
                BatchSlot *s = &b->slots[i];
                json_t *ids = NULL;
                char why[256];

                if (!s->busy || !s->held)
                        continue;
                int r = batchref_resolve(s->after, s->line, b->lines, &ids, why, sizeof(why));
                if (r == 1)
                        continue;
                if (r < 0) {
                        batch_refuse_after(b, s->line, r, why);
                        slot_release(b, s);
                        i = (size_t)-1; /* its dependents may be refused now too: again */
                        continue;
                }
                json_t *params = s->held;
                params_set_after(params, ids);
                s->held = NULL;
                b->held--;
                json_decref(s->after);
                s->after = NULL;
                r = batch_send_job(b, s, params);
                if (r)
                        return r;
        }
        return 0;
}

/* Reads one line and queues its job.submit in a free slot (or holds it there). 0, or an
 * exit code. */
static int batch_read_line(Batch *b)
{
        char *text = NULL;
        size_t cap = 0;
        if (batch_lines_grow(b) < 0)
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "batch: out of memory");
        ssize_t n = getline(&text, &cap, stdin);
        if (n < 0) {
                free(text);
                b->eof = true;
                return 0;
        }
        b->line++;
        batch_line_is(b, b->line, BATCHREF_NO_JOB);
        if (strspn(text, " \t\r\n") == (size_t)n) {
                free(text);
                return 0;
        }
        json_error_t jerr;
        json_t *spec = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
        free(text);
        json_t *plugin = json_object_get(spec, "plugin");
        json_t *args = json_object_get(spec, "args");
        json_t *opts = json_object_get(spec, "options");
        json_t *after = json_object_get(spec, IPC_OPT_AFTER);
        const char *why = NULL;
        char buf[256];
        if (!spec) {
                snprintf(buf, sizeof(buf), "not JSON: %s (column %d)", jerr.text, jerr.column);
                why = buf;
        } else if (!json_is_object(spec)) {
                why = "expected a JSON object {\"plugin\": ..., \"args\": {...}, \"options\": "
                      "{...}}";
        } else if (!json_is_string(plugin)) {
                why = "\"plugin\" must be a string naming a plugin (see fiberctl plugins)";
        } else if (args && !json_is_object(args) && !json_is_null(args)) {
                why = "\"args\" must be an object";
        } else if (opts && !json_is_object(opts) && !json_is_null(opts)) {
                why = "\"options\" must be an object";
        } else if (after && json_object_get(opts, IPC_OPT_AFTER)) {
                why = "\"after\" is given twice, at the top and in \"options\": give it once";
        }
        if (why) {
                batch_print_error(b, b->line, "INVALID_ARGUMENT", why);
                b->bad_input++;
                json_decref(spec);
                return 0;
        }
        if (!after)
                after = json_object_get(opts, IPC_OPT_AFTER);
        json_t *ids = NULL;
        int r = after ? batchref_resolve(after, b->line, b->lines, &ids, buf, sizeof(buf)) : 0;
        if (r < 0) {
                b->sent += r == -EALREADY; /* counted as a job that failed */
                batch_refuse_after(b, b->line, r, buf);
                json_decref(spec);
                return 0;
        }

        BatchSlot *s = &b->slots[b->free_slots[--b->n_free]]; /* busy < window */
        s->busy = true;
        s->line = b->line;
        s->plugin = strdup(json_string_value(plugin));
        b->busy++;
        b->sent++;
        batch_line_is(b, b->line, BATCHREF_PENDING);
        if (b->job_class && !json_object_get(opts, IPC_OPT_CLASS)) {
                if (!json_is_object(opts)) {
                        opts = json_object();
                        json_object_set_new(spec, "options", opts); /* spec owns it */
                }
                json_object_set_new(opts, IPC_OPT_CLASS, json_string(b->job_class));
        }
        json_t *params = json_pack("[OOo]", plugin, args ? args : json_null(),
                                   opts ? json_deep_copy(opts) : json_null());
        if (r == 1) { /* held back until the lines it names are answered */
                s->held = params;
                s->after = json_incref(after);
                b->held++;
                json_decref(spec);
                return 0;
        }
        if (ids)
                params_set_after(params, ids);
        json_decref(spec);
        return batch_send_job(b, s, params);
}

static void batch_print_submitted(Batch *b, const BatchSlot *s)
{
        progress_clear(&b->progress);
        if (b->ctl->json) {
                json_t *o = json_pack("{s:I, s:I, s:s}", "line", (json_int_t)s->line, "id", s->id,
                                      "plugin", s->plugin ? s->plugin : "?");
                ctl_print_json(o);
                json_decref(o);
        } else {
                printf("line %lu: job %" JSON_INTEGER_FORMAT " %s\n", s->line, s->id,
                       s->plugin ? s->plugin : "?");
        }
}

/*
 * With --json, the answer of most jobs: slot @s's job ended and @m is its record. The
 * record is printed as it came, turned into JSON text with "line" added at its end
 * (convert_msgpack_to_json_text()), without the jansson tree the general path builds,
 * prints and frees for each job: that tree was half of fiberctl's CPU time in a batch.
 * The output is the same bytes either way.
 * Return: true when it handled @m, slot released; false, nothing done, for the general
 * path: not --json, an error, a job not final, or a record the writer leaves to the tree.
 */
static bool batch_print_record(Batch *b, BatchSlot *s, FiberdClientReply *m)
{
        const msgpack_object *rec = fiberd_client_reply_result(m);
        const msgpack_object *state = ipc_map_find(rec, IPC_KEY_STATE);
        const msgpack_object *id = ipc_map_find(rec, IPC_KEY_ID);
        char name[16];
        int exit;

        if (!b->ctl->json || !(s->params || s->waiting) || fiberd_client_reply_error(m, NULL) ||
            !state || state->type != MSGPACK_OBJECT_STR || state->via.str.size >= sizeof(name) ||
            ipc_map_find(rec, "line"))
                return false;
        if (state->via.str.size) /* the pointer may be NULL for "" */
                memcpy(name, state->via.str.ptr, state->via.str.size);
        name[state->via.str.size] = '\0';
        exit = ctl_job_state_exit(name);
        if (exit == EX_TEMPFAIL)
                return false;
        b->text.size = 0;
        if (convert_msgpack_to_json_text(&b->text, rec) < 0 || b->text.size < 2)
                return false;
        b->text.size--; /* the map's '}' */
        char tail[40];
        int n = snprintf(tail, sizeof(tail), "%s\"line\":%lu}\n", b->text.size > 1 ? "," : "",
                         s->line);
        if (msgpack_sbuffer_write(&b->text, tail, (size_t)n))
                return false;
        if (s->params) /* job.run: the line's id is known now */
                batch_line_is(b, s->line,
                              id && id->type == MSGPACK_OBJECT_POSITIVE_INTEGER &&
                                              id->via.u64 > 0 && id->via.u64 <= INT64_MAX
                                      ? (json_int_t)id->via.u64
                                      : BATCHREF_REFUSED);
        progress_clear(&b->progress);
        fwrite(b->text.data, 1, b->text.size, stdout);
        if (exit == 0)
                b->ok++;
        else
                b->failed++;
        slot_release(b, s);
        return true;
}

/* Handles one answer. 0, or an exit code that stops the batch. */
static int batch_handle(Batch *b, FiberdClientReply *m)
{
        BatchSlot *s = slot_of_msgid(b, fiberd_client_reply_msgid(m));
        IpcStatus st;
        json_t *res;

        if (!s)
                return 0; /* a notification, or a stray answer: not ours */
        if (batch_print_record(b, s, m))
                return 0;
        if (ctl_response(m, &res, &st) < 0) {
                if (st.error == -EPROTO) {
                        return ctl_error(st.code, EX_PROTOCOL, "batch: %s", st.message);
                }
                if (s->params && ctl_method_unknown(&st)) { /* older fiberd: submit + wait */
                        json_t *params = s->params;
                        b->no_run = true;
                        s->params = NULL;
                        return batch_send(b, s, IPC_METHOD_JOB_SUBMIT, params);
                }
                batch_print_error(b, s->line, st.code, st.message);
                b->failed++;
                if (b->lines[s->line - 1] == BATCHREF_PENDING) /* not a job.wait's error */
                        batch_line_is(b, s->line, BATCHREF_REFUSED);
                slot_release(b, s);
                return 0;
        }
        if (s->params) { /* job.run: the record */
                s->waiting = true;
                json_decref(s->params);
                s->params = NULL;
                s->id = json_integer_value(json_object_get(res, IPC_KEY_ID));
                batch_line_is(b, s->line, s->id > 0 ? s->id : BATCHREF_REFUSED);
        } else if (!s->waiting) {
                s->id = json_integer_value(json_object_get(res, IPC_KEY_ID));
                batch_line_is(b, s->line, s->id > 0 ? s->id : BATCHREF_REFUSED);
                json_decref(res);
                if (!b->wait) {
                        batch_print_submitted(b, s);
                        b->ok++;
                        slot_release(b, s);
                        return 0;
                }
                s->waiting = true;
                return batch_send(b, s, IPC_METHOD_JOB_WAIT, json_pack("[I]", s->id));
        }
        if (!ctl_job_is_final(res)) { /* the daemon gave up waiting: ask again */
                json_decref(res);
                return batch_send(b, s, IPC_METHOD_JOB_WAIT, json_pack("[I]", s->id));
        }
        if (b->ctl->json && json_is_object(res)) {
                json_object_set_new(res, "line", json_integer((json_int_t)s->line));
        }
        progress_clear(&b->progress);
        ctl_print_job_line(b->ctl, res);
        if (ctl_job_exit(res) == 0)
                b->ok++;
        else
                b->failed++;
        json_decref(res);
        slot_release(b, s);
        return 0;
}

/*
 * One answer, waited for at most @timeout_ms (-1: no limit), handled, and the lines held
 * behind it released. Return: 0; -ETIMEDOUT when none came in time; else the exit status
 * of a lost connection (reported here) or of batch_handle().
 */
static int batch_receive(Batch *b, int timeout_ms)
{
        CtlStatus cs = {.step = CTL_STEP_ANSWER};
        FiberdClientReply *m;
        FiberdClientError err;
        int r = fiberd_client_receive(b->ctl->client, timeout_ms, &m, &err);

        if (r == -ETIMEDOUT && timeout_ms >= 0)
                return r;
        if (r < 0) {
                progress_clear(&b->progress);
                ctl_status(&cs.st, &err);
                return ctl_fail(&cs);
        }
        r = batch_handle(b, m);
        if (r == 0)
                r = batch_release_held(b);
        fiberd_client_reply_free(m);
        return r;
}

int verb_batch(Ctl *ctl, int argc, char **argv)
{
        static const struct option options[] = {
                {"wait", no_argument, NULL, 'w'},
                {"window", required_argument, NULL, 'n'},
                {"class", required_argument, NULL, 'c'},
                {0},
        };
        Batch b = {.ctl = ctl, .window = BATCH_DEFAULT_WINDOW};
        uint64_t window;
        int c, r = 0;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":wn:c:", options, NULL)) != -1) {
                if (c == 'w') {
                        b.wait = true;
                } else if (c == 'c') {
                        b.job_class = optarg;
                } else if (c == 'n' && ctl_parse_id(optarg, &window) &&
                           window <= BATCH_MAX_WINDOW) {
                        b.window = (size_t)window;
                } else if (c == 'n') {
                        return ctl_usage("--window needs an integer from 1 to %d, got '%s'",
                                         BATCH_MAX_WINDOW, optarg);
                } else {
                        return ctl_usage("batch: unknown option or missing argument '%s'",
                                         argv[optind - 1]);
                }
        }
        if (optind < argc)
                return ctl_usage("batch reads job specs from stdin and takes no arguments, "
                                 "got '%s'",
                                 argv[optind]);
        CtlStatus cs;
        if (ctl_connect(ctl, &cs) < 0)
                return ctl_fail(&cs);
        b.slots = calloc(b.window, sizeof(*b.slots));
        b.free_slots = calloc(b.window, sizeof(*b.free_slots));
        b.by_msgid_mask = 15;
        while (b.by_msgid_mask + 1 < 2 * b.window)
                b.by_msgid_mask = 2 * b.by_msgid_mask + 1;
        b.by_msgid = calloc(b.by_msgid_mask + 1, sizeof(*b.by_msgid));
        if (!b.slots || !b.free_slots || !b.by_msgid) {
                free(b.slots);
                free(b.free_slots);
                free(b.by_msgid);
                return ctl_error(IPC_OUT_OF_MEMORY, EX_OSERR, "batch: out of memory");
        }
        for (size_t i = b.window; i > 0; i--) /* slot 0 on top */
                b.free_slots[b.n_free++] = i - 1;
        progress_init(&b.progress, ctl);

        while (r == 0 && (!b.eof || b.busy > 0)) {
                while (r == 0 && !b.eof && b.busy < b.window)
                        r = batch_read_line(&b);
                if (r || b.busy == 0)
                        continue;
                if (b.busy == b.held) {
                        /* a held line waits only on earlier lines, the first of which are
                         * in flight: nothing outstanding means none can be answered */
                        r = ctl_error(IPC_INTERNAL, EX_SOFTWARE,
                                      "batch: %zu lines held back with no request in flight",
                                      b.held);
                        break;
                }
                r = batch_receive(&b, b.progress.on ? PROGRESS_TICK_MS : -1);
                if (r == -ETIMEDOUT) { /* the progress line's tick */
                        progress_draw(&b.progress, b.ok + b.failed, b.sent, b.eof, NULL, false);
                        r = 0;
                        continue;
                }
                /* the answers already here, before the window is refilled: then the next
                 * requests go out in one write and the output in one, not one each a job */
                while (r == 0 && b.busy > b.held)
                        r = batch_receive(&b, 0);
                if (r == -ETIMEDOUT)
                        r = 0;
                fflush(stdout);
                progress_draw(&b.progress, b.ok + b.failed, b.sent, b.eof, NULL, false);
        }
        progress_clear(&b.progress);
        for (size_t i = 0; i < b.window; i++) {
                free(b.slots[i].plugin);
                json_decref(b.slots[i].params);
                json_decref(b.slots[i].held);
                json_decref(b.slots[i].after);
        }
        free(b.slots);
        free(b.free_slots);
        free(b.by_msgid);
        free(b.lines);
        msgpack_sbuffer_destroy(&b.text);
        if (r)
                return r;
        if (b.bad_input)
                return EX_DATAERR;
        return b.failed ? EXIT_JOB_FAILED : 0;
}
