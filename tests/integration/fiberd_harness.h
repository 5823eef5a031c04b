/* SPDX-License-Identifier: MIT */
/*
 * fiberd_harness.h — start a real fiberd for an integration test and talk to it.
 *
 * Every test gets its own temporary directory holding the socket, a private plugin
 * directory (the bundled plugins copied in, so a test may drop more files into it),
 * the daemon's log (stderr) and, when asked, a NOTIFY_SOCKET the test reads. fiberd is
 * the binary just built (FIBERD_BIN, an absolute path given by daemon/build.mk); it is
 * started with FIBERD_SOCKET set, and the harness waits until the socket accepts
 * (bounded by a deadline, never a fixed sleep).
 *
 * RPC goes through the client library (client/client.h). Helpers fail the test with
 * criterion's cr_assert on transport errors; protocol errors are returned to the test
 * as an IpcStatus so it can check the code.
 *
 * Used by tests/integration/daemon_*.c only; each criterion test runs in its own
 * process, so one Fiberd per test.
 */
#ifndef FIBERD_TESTS_HARNESS_H
#define FIBERD_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "client/client.h"
#include "ipc/ipc.h"

typedef struct Fiberd {
        char dir[64];         /* the test's temporary directory */
        char sock[96];        /* dir/fiberd.sock */
        char plugin_dir[192]; /* dir/plugins */
        char log[192];        /* dir/fiberd.log: the daemon's stderr */
        char notify[96];      /* dir/notify.sock when FiberdOpts.notify */
        int notify_fd;        /* the test's end of NOTIFY_SOCKET, or -1 */
        pid_t pid;
        unsigned workers;  /* FiberdOpts.workers, kept for fiberd_restart() */
        unsigned restarts; /* fiberd_restart() calls: earlier logs are fiberd.log.N */
} Fiberd;

typedef struct FiberdOpts {
        const char *config;  /* INI text written to dir/fiberd.conf, or NULL */
        const char *plugins; /* space-separated bundled plugin names; NULL = all */
        const char *extra;   /* space-separated paths of more .so files to copy in */
        unsigned workers;    /* 0 = fiberd's default */
        bool notify;         /* set up NOTIFY_SOCKET */
} FiberdOpts;

/* fiberd_start - start fiberd and wait until its socket accepts (asserts). */
void fiberd_start(Fiberd *d, const FiberdOpts *o);

/*
 * fiberd_restart - start fiberd again in the same directory, with the same config,
 * plugins and job store ($STATE_DIRECTORY is the directory), after it exited or was
 * killed (fiberd_signal_and_wait()); the old log moves to fiberd.log.N. Asserts.
 */
void fiberd_restart(Fiberd *d);

/*
 * fiberd_restart_begin - fiberd_restart() without the wait: fiberd is started, and the
 * test looks at it while it starts (a start that waits for something); then
 * fiberd_wait_started() waits for it as fiberd_restart() does. Asserts.
 */
void fiberd_restart_begin(Fiberd *d);
void fiberd_wait_started(Fiberd *d);

/* fiberd_running - true while fiberd's process has not exited (reaps it, and prints its
 * log, when it has). */
bool fiberd_running(Fiberd *d);

/*
 * fiberd_restart_fails - the same, for a start that must fail: wait (at most
 * @timeout_ms) for fiberd to exit; its wait status, or -1 when it was still running
 * (then killed).
 */
int fiberd_restart_fails(Fiberd *d, int timeout_ms);

/* fiberd_signal_and_wait - send @sig, wait (bounded) for exit; returns the wait status. */
int fiberd_signal_and_wait(Fiberd *d, int sig, int timeout_ms);

/* fiberd_stop - SIGTERM, wait, remove the directory. Safe to call twice. */
void fiberd_stop(Fiberd *d);

/* fiberd_log_contains - true when the daemon's log has a line containing @needle. */
bool fiberd_log_contains(const Fiberd *d, const char *needle);

/*
 * fiberd_notify_wait - read NOTIFY_SOCKET datagrams until one contains @needle or
 * @timeout_ms passes. Returns true when seen.
 */
bool fiberd_notify_wait(Fiberd *d, const char *needle, int timeout_ms);

/* fiberd_connect - a client on the daemon's socket (asserts). */
Client *fiberd_connect(const Fiberd *d);

/*
 * fiberd_sh - run @cmd through sh (add "2>&1" to it for stderr too): what it writes, up to
 * @size - 1 bytes, NUL-terminated into @out. Returns its exit status; asserts it exited.
 */
int fiberd_sh(const char *cmd, char *out, size_t size);

/* fiberd_now_ms - CLOCK_MONOTONIC now, milliseconds: the clock of every bounded wait in
 * the tests. */
uint64_t fiberd_now_ms(void);

/* fiberd_thread_count - the threads of @d's fiberd process now (/proc/PID/task;
 * asserts it can read it). */
unsigned fiberd_thread_count(const Fiberd *d);

/*
 * CHECK - for code in a child process the test forked (running as another user, say):
 * print the failed check and exit 1, which the parent asserts on through the child's
 * exit status (criterion's asserts belong to the test's own process).
 */
#define CHECK(cond, ...)                                                                           \
        do {                                                                                       \
                if (!(cond)) {                                                                     \
                        fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);   \
                        fprintf(stderr, __VA_ARGS__);                                              \
                        fputc('\n', stderr);                                                       \
                        _exit(1);                                                                  \
                }                                                                                  \
        } while (0)

/*
 * fiberd_run_as - run @fn(@arg) in a child that is @uid/@gid with no supplementary group
 * (root drops to it and checks it cannot come back); asserts the child exited 0 (a failed
 * CHECK exits 1). Returns true, for a test to assert on. Needs root.
 */
bool fiberd_run_as(uid_t uid, gid_t gid, void (*fn)(const void *arg), const void *arg);

/* fiberd_copy_plugin - copy @src to plugin_dir/@name the way an installer does (a
 * temporary file, then rename(2)), so the daemon sees one IN_MOVED_TO. */
void fiberd_copy_plugin(const Fiberd *d, const char *src, const char *name);

/* ---------------------------------------------------------------- RPC ------------ */

/* One job argument for rpc_submit(). */
typedef struct Arg {
        const char *key;
        const char *s; /* string value, or NULL: then i */
        int64_t i;
} Arg;
#define ARG_S(k, v) ((Arg){(k), (v), 0})
#define ARG_I(k, v) ((Arg){(k), NULL, (v)})

/* A response kept with the object it holds (result or NULL). */
typedef struct Reply {
        IpcMessage msg;
        const msgpack_object *result; /* NULL on error */
        IpcStatus st;                 /* the error, if any */
        int r;                        /* 0 or the error as -errno */
} Reply;

/* reply_clear - free a Reply's message. */
void reply_clear(Reply *rp);

/* fiberd_first_log_line - the first line of @d's current log into @buf (asserts it
 * opens; "" when empty). */
void fiberd_first_log_line(const Fiberd *d, char *buf, size_t size);

/*
 * rpc_plugin_listed - plugins.list (asserting it answers): *@loaded when a plugin named
 * @name is loaded; *@refused when some refused file's reason contains @needle.
 */
void rpc_plugin_listed(Client *c, const char *name, bool *loaded, const char *needle,
                       bool *refused);

/* rpc_plugin_hold - pause or resume (@method) the plugin @name (admin tier); asserted to
 * succeed. */
void rpc_plugin_hold(Client *c, const char *method, const char *name);

/* rpc_wait_reply - wait (asserting, 30 s max) for the response to @msgid. */
void rpc_wait_reply(Client *c, uint32_t msgid, Reply *rp);

/* rpc_simple - a call whose params are all unsigned integers (ping, job.status, ...). */
void rpc_simple(Client *c, const char *method, size_t n, const uint64_t *params, Reply *rp);

/* rpc_running_becomes - polls stats on @c (every 10 ms, 10 s at most) until exactly
 * @want jobs are running; false when they never were. */
bool rpc_running_becomes(Client *c, uint64_t want);

/*
 * rpc_submit_send - queue job.submit [plugin, {args}, {priority?, timeout_ms?}] and
 * return its msgid (not flushed). rpc_submit - send and wait: the id, or 0 with @st set.
 */
uint32_t rpc_submit_send(Client *c, const char *plugin, const Arg *args, size_t nargs, int priority,
                         uint64_t timeout_ms);
/* rpc_submit_long - submit @plugin ("sleep" or "spin") with {"ms": 600000}, a job that
 * does not end by itself within any test; assert it was accepted; its id. */
uint64_t rpc_submit_long(Client *c, const char *plugin);
uint64_t rpc_submit(Client *c, const char *plugin, const Arg *args, size_t nargs, int priority,
                    uint64_t timeout_ms, IpcStatus *st);

/* rpc_wait_progress - wait (asserting, at most @timeout_ms) until job @id has reported
 * progress: its plugin code runs (the test plugins report {0, N} before their call). */
void rpc_wait_progress(Client *c, uint64_t id, int64_t timeout_ms);

/* rpc_job_wait - job.wait [id, timeout_ms] (timeout_ms < 0: nil = forever). */
void rpc_job_wait(Client *c, uint64_t id, int64_t timeout_ms, Reply *rp);

/* ---------------------------------------------------------------- objects -------- */

/* map_str - a string value under @key copied to a static buffer ("" when absent). */
const char *map_str(const msgpack_object *map, const char *key);
/* map_uint - an unsigned value under @key (UINT64_MAX when absent or not unsigned). */
uint64_t map_uint(const msgpack_object *map, const char *key);
/* map_get - the object under @key, or NULL. */
const msgpack_object *map_get(const msgpack_object *map, const char *key);

/* rpc_stats_jobs - the `stats` jobs counter @key (done, running, ...) through @c: a
 * host's own counts in a fleet. Asserts stats answers. */
uint64_t rpc_stats_jobs(Client *c, const char *key);

/* Paths set by daemon/build.mk. */
#ifndef FIBERD_BIN
#define FIBERD_BIN "build/fiberd"
#endif
#ifndef FIBERD_PLUGIN_BUILD_DIR
#define FIBERD_PLUGIN_BUILD_DIR "build/plugins"
#endif
#ifndef FIBERD_TEST_PLUGIN_DIR
#define FIBERD_TEST_PLUGIN_DIR "build/tests/plugins"
#endif

#endif
