/* SPDX-License-Identifier: MIT */
/*
 * fiberd/plugin.h — the plugin ABI of fiberd: the one public header (installed as
 * <fiberd/plugin.h>, `pkg-config --cflags fiberd-plugin`).
 *
 * A plugin is a shared object that fiberd loads from its plugin directory. It exports one
 * symbol, the descriptor `fiberd_plugin` (a FiberdPlugin), and links against nothing of
 * fiberd: the daemon is built with -fvisibility=hidden and hands every plugin a table of
 * host functions (FiberdHost) instead. Everything a job does — read its arguments, write
 * its result, report progress, yield, sleep, wait on an fd, spawn and join child fibers,
 * notice cancellation, log — goes through that table.
 *
 * The handshake (the shape of redis's moduleLoad(): dlopen RTLD_NOW|RTLD_LOCAL, then a
 * versioned check before anything else is touched):
 *   1. the loader dlopen()s the file and looks up `fiberd_plugin`; no symbol → refused;
 *   2. it reads abi_version first: outside [FIBERD_PLUGIN_ABI_MIN,
 *      FIBERD_PLUGIN_ABI_VERSION] → refused;
 *   3. it checks size, name (1..FIBERD_PLUGIN_NAME_MAX of [a-z0-9_-]) and run; a name
 *      already loaded → refused;
 *   4. it calls init(host, why, why_size) if set; < 0 → refused with the reason;
 *   5. the plugin is loaded until its file is replaced or removed, or fiberd exits;
 *      fini(host) runs then (if set), once its last job has ended.
 * Loading and init() run on fiberd's plugin loader thread, never on the thread that
 * answers requests, so a slow init() delays nobody. Replacing the file (install(1) or mv
 * over it, or writing it again) loads the new version next to the old: new jobs run the
 * new one, running jobs finish on the old one, which is unloaded (fini(), dlclose())
 * when its last job ends. Removing the file unloads it the same way. Globals of the two
 * versions are separate (two mappings).
 * Refused files are reported by `fiberctl plugins` with their reason.
 *
 * Versioning. FIBERD_PLUGIN_ABI_VERSION grows with every release that adds members;
 * FIBERD_PLUGIN_ABI_MIN moves only when something here changes incompatibly. Compatible
 * growth appends members at the end of FiberdPlugin or FiberdHost; each struct carries its size, so a plugin built against a newer header
 * checks FIBERD_HOST_HAS(host, member) before calling a member the running daemon may not
 * have, and the daemon reads descriptor members past what the plugin's size says as unset.
 *
 * Where the code runs. run() is called in a fiber (a user-space thread with a small stack,
 * 128 KiB by default, guarded: an overflow is reported and kills the daemon) on one of the
 * daemon's worker threads; other jobs share those threads. So:
 *  - keep big buffers off the stack (malloc them);
 *  - blocking C library calls are fine: fiberd hooks them (libgo's hooks), so read,
 *    write, recv, send, connect, accept, poll, select, sleep, usleep, nanosleep,
 *    getaddrinfo, and file reads and writes — made by the plugin or by a library it
 *    links, such as libcurl — park the job's fiber, not the worker thread; they keep
 *    their meaning (a blocking socket stays blocking, SO_RCVTIMEO holds, a sleep lasts
 *    its time) and fail with errno ECANCELED once the job is cancelled. The plugin's
 *    open(), openat(), creat() and fopen() act as the job's submitter, like host->open
 *    (FIBERD_PLUGIN_DAEMON_RIGHTS asks for fiberd's own). Not hooked: raw syscall(2),
 *    pthread_cond_wait and pthread_mutex_lock, stdio's own buffer refills (fread on a
 *    FILE reads the file inline); fiberd-plugin(7), "BLOCKING CALLS", lists them all;
 *  - a long computation calls host->maybe_yield often (in its inner loop: it is a clock
 *    read and a compare, and yields only once the job has used its task quota, 0.5 ms
 *    by default), or host->yield now and then (every millisecond or so); that is also
 *    where cancellation is noticed. A fiber that runs past the daemon's stall threshold
 *    (100 ms by default) without switching is logged with a backtrace;
 *  - fiber-aware calls return -ECANCELED once the job is cancelled (the user cancelled
 *    it, or its timeout passed): return promptly then (returning any value is fine; the
 *    job ends "cancelled" either way). A fiber cannot be killed, so code that never
 *    comes back to a yield point (a loop without host calls, a blocking system call) is
 *    not stopped: 100 ms after the cancel its job ends "cancelled" without it, its slot
 *    goes to the next job, and the code runs on, "detached", holding its worker thread;
 *    when run() returns, its return value, result and progress are discarded (the
 *    plugin stays loaded until then).
 * Host functions may be called from run() and from the job's child fibers (concurrently),
 * always with the FiberdJob they were given; never from threads the plugin makes itself,
 * and never after run() has returned (except through children still being joined).
 *
 * Errors are negative errno values, as everywhere in fiberd.
 *
 * A complete plugin (build: cc -shared -fPIC $(pkg-config --cflags fiberd-plugin)
 * -o hello.so hello.c; install: drop hello.so into the plugin directory):
 *
 *     #include <fiberd/plugin.h>
 *
 *     static int hello_run(FiberdJob *job, const FiberdHost *host)
 *     {
 *             char who[64] = "world";
 *             int r = host->arg_str(job, "who", who, sizeof(who));
 *             if (r < 0 && r != -ENOENT)      // missing is fine: "who" is optional
 *                     return r;               // wrong type: the host set the error
 *             char msg[96];
 *             snprintf(msg, sizeof(msg), "hello, %s", who);
 *             host->log(job, LOG_INFO, "greeting %s", who);
 *             return host->result_str(job, "greeting", msg);
 *     }
 *
 *     FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
 *             FIBERD_PLUGIN_HEADER,
 *             .name = "hello",
 *             .version = "1.0",
 *             .description = "greets {\"who\"}",
 *             .run = hello_run,
 *     };
 */
#ifndef FIBERD_PLUGIN_H
#define FIBERD_PLUGIN_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h> /* uid_t, gid_t */
#include <syslog.h>    /* LOG_ERR ... LOG_DEBUG for host->log */

#ifdef __cplusplus
extern "C" {
#endif

/* The ABI this header describes, and the oldest one fiberd still loads. A plugin whose
 * descriptor says a version outside [MIN, VERSION] is refused.
 *   1  the first ABI: descriptor (name, version, description, init, run, fini), host
 *      functions up to log
 *   2  compatible growth, so version-1 plugins still load: the submitter's rights
 *      (job_uid, job_gid, open, arg_fd), preemption points (need_preempt,
 *      maybe_yield), the descriptor's flags (FIBERD_PLUGIN_RETRY_SAFE) and check_args.
 *      A plugin built against version 2 that must run on a version-1 fiberd checks
 *      FIBERD_HOST_HAS().
 *   3  compatible growth: channels (chan_new ... chan_free, FiberdChan, FiberdChanCase)
 *      and futures (async, future_get, when_all, future_free, FiberdFuture) between the
 *      fibers of one job. Version-1 and -2 plugins still load; a version-3 plugin on an
 *      older fiberd checks FIBERD_HOST_HAS(host, chan_new) / (host, async). */
#define FIBERD_PLUGIN_ABI_VERSION 4
#define FIBERD_PLUGIN_ABI_MIN 1

/* The name of the descriptor symbol, as the loader passes it to dlsym(). */
#define FIBERD_PLUGIN_SYMBOL "fiberd_plugin"

/* Longest plugin name, in bytes, without the NUL. Names are [a-z0-9_-]. */
#define FIBERD_PLUGIN_NAME_MAX 32

/* Deepest nesting of arrays and maps in a job's result (result_msgpack()): a scalar is 0,
 * [[1]] is 2, and an empty array or map opens nothing. Deeper, the paged job list, which
 * wraps each record in three more levels, would pass the protocol's 24. */
#define FIBERD_RESULT_MAX_DEPTH 20

/* Marks the descriptor exported even when the plugin is built with -fvisibility=hidden. */
#define FIBERD_PLUGIN_EXPORT __attribute__((visibility("default")))

/* An opaque job: valid from run()'s call until the job's last child has been joined. */
typedef struct FiberdJob FiberdJob;

/* An opaque child fiber of a job, from spawn() until join(). */
typedef struct FiberdChild FiberdChild;

typedef struct FiberdHost FiberdHost;

/* An opaque channel of one job (ABI 3), from chan_new() until chan_free() or the job's
 * end. */
typedef struct FiberdChan FiberdChan;

/* An opaque future of one job (ABI 3): a child fiber started by async(), from async()
 * until future_free() or the return of the fiber that called async(). */
typedef struct FiberdFuture FiberdFuture;

/* The operation of one FiberdChanCase. */
#define FIBERD_CHAN_RECV 0
#define FIBERD_CHAN_SEND 1

/* Most cases one chan_select() takes. */
#define FIBERD_CHAN_SELECT_MAX 64

/* One case of host->chan_select() (ABI 3): Go's `case v := <-ch:` or `case ch <- v:`. */
typedef struct FiberdChanCase {
        FiberdChan *chan; /* NULL: the case never fires (Go's nil channel) */
        int op;           /* FIBERD_CHAN_RECV or FIBERD_CHAN_SEND */
        void *elem;       /* SEND: the value (elem_size bytes, read); RECV: where the value
                           * goes (NULL: dropped), written only when this case fires with 0 */
        int result;       /* out, for the case that fired: 0, or -EPIPE (the channel is
                           * closed: RECV found it drained, SEND sent nothing) */
} FiberdChanCase;

/* msgpack-c's decoded object (<msgpack.h>); only needed by plugins using args_object(). */
struct msgpack_object;

/*
 * A child fiber's body, given the job and host of its parent. @arg points to the host's
 * copy of the block given to spawn() (aligned for any type, @arg_size bytes); the child
 * may write results into it, and join() copies the block back out. Return 0 or a
 * negative errno; join() returns it.
 */
typedef int (*FiberdChildFn)(FiberdJob *job, const FiberdHost *host, void *arg);

/*
 * FiberdPlugin - the descriptor a plugin exports as `fiberd_plugin`. Must stay valid
 * (static storage) while the plugin is loaded. Begin it with FIBERD_PLUGIN_HEADER.
 */
typedef struct FiberdPlugin {
        uint32_t abi_version;    /* FIBERD_PLUGIN_ABI_VERSION; checked before anything else */
        uint32_t size;           /* sizeof(FiberdPlugin) as the plugin was built */
        const char *name;        /* the job type clients submit, unique: [a-z0-9_-]{1,32} */
        const char *version;     /* free text, e.g. "1.2.0"; NULL = "" */
        const char *description; /* one line for `fiberctl plugins`: what it does, args */

        /*
         * run - the job. Called once per job, in the job's fiber (see the top of this
         * file). Read arguments with host->arg_*(), set the result with
         * host->result_*(), return:
         *   0            the job is "done", with the result set so far (none = empty map);
         *   -ECANCELED   (or anything, after cancellation) the job is "cancelled";
         *   other < 0    the job is "failed": with the message from host->fail() or from
         *                the arg_*() call that refused an argument, else strerror(-ret).
         *                The error code clients see comes from that errno, as in
         *                fiberd's protocol (ipc/PROTOCOL.md): -EINVAL, -ERANGE, -E2BIG →
         *                INVALID_ARGUMENT; -ENOENT → NOT_FOUND; -EACCES, -EPERM →
         *                PERMISSION_DENIED; -EAGAIN, -EBUSY → OVERLOADED; -ETIMEDOUT →
         *                DEADLINE_EXCEEDED; -ENOMEM → OUT_OF_MEMORY; others → INTERNAL.
         *                An arg_*() refusal is always INVALID_ARGUMENT.
         * Required.
         */
        int (*run)(FiberdJob *job, const FiberdHost *host);

        /*
         * init - optional; called once after the handshake, before any job, from the
         * daemon's main thread (at start) or its plugin loader thread (may not call the
         * job functions of @host: there is no job; log() with a NULL job is fine).
         * Return 0, or a negative errno to refuse loading; then write a one-line reason
         * (NUL-terminated, at most @why_size bytes) into @why, and undo whatever init
         * did: the file is unloaded.
         */
        int (*init)(const FiberdHost *host, char *why, size_t why_size);

        /*
         * fini - optional; called once when this instance is unloaded — fiberd exits, or
         * its file was replaced or removed — after every job of this instance has ended,
         * from the daemon's main thread or its plugin loader thread. No job functions.
         */
        void (*fini)(const FiberdHost *host);

        /* ---- job store ---- */
        /*
         * flags - optional; FIBERD_PLUGIN_* bits below. A plugin built before this member
         * existed has none (its size says so).
         */
        uint32_t flags;

        /* ---- plugins in place: refusing bad arguments at submission ---- */
        /*
         * check_args - optional; called at job.submit and job.run before a job is
         * created, on the server group (the request's fiber, or its connection's reader). @args is a FiberdJob handle over just
         * the submitted arguments (and passed fds): the same host->arg_*(),
         * host->args_object() and host->arg_fd() calls run() makes work on it, so a
         * plugin can share one "read my arguments" function between check_args and run.
         * host->fail() records a reason, host->log() logs without a job, job_id() is 0,
         * job_uid()/job_gid() are the submitter's; every other job function returns
         * -EINVAL (results, progress, spawn, open) or does nothing. Must be quick and
         * never block or yield: no sleeping, no I/O.
         * Return: 0 to accept; a negative errno to refuse: the client gets
         * INVALID_ARGUMENT with the reason written into @why (NUL-terminated, at most
         * @why_size bytes), else the one host->fail() or a refusing arg_*() recorded,
         * else strerror(); no job is created. A plugin built before this member has
         * none (its size says so): every map of arguments is accepted.
         */
        int (*check_args)(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size);

        /* ---- job scheduling (ABI 4) ---- */
        /*
         * max_attempts - optional; how many runs a job of this plugin gets by default
         * when its submission does not say (the max_attempts option, 1..100): a run
         * that fails with a retryable error is tried again after a backoff, and a job
         * out of attempts ends "dead" (ipc/PROTOCOL.md, "Scheduling jobs"). 0 or 1 = no
         * retry; values above 100 count as 100. A plugin built before this member has
         * none (its size says so).
         */
        uint32_t max_attempts;
} FiberdPlugin;

/*
 * FIBERD_PLUGIN_RETRY_SAFE - running a job of this plugin again from the start is
 * harmless (its effects are idempotent or it has none): a job that was running when
 * fiberd stopped or crashed is queued again at the next start, with its record's
 * `attempt` raised, instead of ending failed with INTERRUPTED.
 */
#define FIBERD_PLUGIN_RETRY_SAFE (1u << 0)

/*
 * FIBERD_PLUGIN_DAEMON_RIGHTS - the plugin's own open(), openat(), creat() and fopen()
 * calls act with fiberd's rights instead of the job submitter's. Meant for a plugin the
 * administrator installed that reads its own configuration or secrets; never for paths
 * a client names (use host->open for those). Without it, plugin code opens files as the
 * submitter, exactly as host->open does (fiberd-plugin(7), "Blocking calls").
 */
#define FIBERD_PLUGIN_DAEMON_RIGHTS (1u << 1)

/*
 * FIBERD_PLUGIN_INLINE - the plugin's jobs are short (microseconds) and never wait on
 * anything but the C library's hooked calls: fiberd may run each on the server worker
 * that dispatched it, in a fiber of the server group, instead of handing it to a job
 * worker (two thread wake-ups less per job, and the job's cache lines stay on one core:
 * an executor's "run inline"). Its blocking calls are hooked there as on a job worker
 * (they park the fiber, and open() acts as the submitter). The privilege ends for the
 * loaded instance, with a warning, after three jobs in a row took over 1 ms each from
 * their run() call to its return (running or parked), or at once when one holds its
 * worker past the stall threshold; its later jobs run on the job workers until its file
 * changes or fiberd restarts. While a job holds a server worker (the rescue's spare
 * serves the rest), no other job starts inline; nor beyond 4096 inline at once. Job
 * classes' CPU shares do not apply to jobs run inline (their max_running caps do).
 * Children it spawns run on the job
 * workers, as any job's. [jobs] run_inline = false turns it off for every plugin, and
 * so do [scheduler] hooks = false, stall_threshold_ms = 0 and rescue_after_ms = 0. A
 * daemon that predates the flag ignores it.
 */
#define FIBERD_PLUGIN_INLINE (1u << 2)

/* The first two members of every descriptor. */
#define FIBERD_PLUGIN_HEADER .abi_version = FIBERD_PLUGIN_ABI_VERSION, .size = sizeof(FiberdPlugin)

/* The descriptor every plugin defines (declared here so its type is checked). */
extern FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin;

/*
 * FiberdHost - the daemon's functions, handed to every plugin function. One table for the
 * life of the process; the daemon fills every member its abi_version/size covers (no NULL
 * members). Append-only across compatible versions: check FIBERD_HOST_HAS() for members
 * added after the version you need.
 *
 * Unless said otherwise each function takes the FiberdJob it is about, may be called from
 * the job's fiber or its children, and does not yield. Those marked "yields" park the
 * calling fiber (never the worker thread) and return -ECANCELED once the job is cancelled,
 * also when cancellation arrives while they wait.
 */
struct FiberdHost {
        uint32_t abi_version; /* FIBERD_PLUGIN_ABI_VERSION of the running daemon */
        uint32_t size;        /* sizeof(FiberdHost) in the running daemon */

        /* ---- the job ---- */

        /* job_id - the job's id, as clients see it (from 1). */
        uint64_t (*job_id)(FiberdJob *job);

        /* ---- arguments: the msgpack map the client submitted ---- */

        /*
         * arg_str / arg_int / arg_uint / arg_double / arg_bool - the value under @key,
         * converted: arg_str copies a string (NUL added) into @buf of @size bytes;
         * arg_int/arg_uint take any integer encoding that holds the value; arg_double
         * also takes integers; a float is never truncated into an integer.
         * @ret / @buf are written only on success.
         * Return: 0; -ENOENT when @key is absent (or nil); -EINVAL for a wrong type (or a
         * string holding a NUL byte); -ERANGE when the value does not fit (or the string
         * needs more than @size bytes). On every error the host also records an
         * INVALID_ARGUMENT message naming the key ("path: expected a string, got an
         * unsigned integer"), so run() can just return the error; the message is
         * dropped if run() goes on and returns 0 (an optional argument left out).
         */
        int (*arg_str)(FiberdJob *job, const char *key, char *buf, size_t size);
        int (*arg_int)(FiberdJob *job, const char *key, int64_t *ret);
        int (*arg_uint)(FiberdJob *job, const char *key, uint64_t *ret);
        int (*arg_double)(FiberdJob *job, const char *key, double *ret);
        int (*arg_bool)(FiberdJob *job, const char *key, bool *ret);

        /*
         * args_object - the whole argument map as msgpack-c's msgpack_object (include
         * <msgpack.h>; a type MSGPACK_OBJECT_MAP, possibly empty). Owned by the job,
         * read-only, valid until run() returns.
         */
        const struct msgpack_object *(*args_object)(FiberdJob *job);

        /* ---- the result: a msgpack map built key by key ---- */

        /*
         * result_str / result_int / result_uint / result_double / result_bool - append
         * @key → value to the result map (both copied). Set each key once.
         * Return: 0; -ENOMEM; -E2BIG when the result would exceed the daemon's result
         * cap ([jobs] max_result_bytes, within [ipc] max_message): the job then fails
         * INVALID_ARGUMENT with a message naming the sizes and the setting, whatever
         * run() returns (returning the -E2BIG is simplest).
         */
        int (*result_str)(FiberdJob *job, const char *key, const char *value);
        int (*result_int)(FiberdJob *job, const char *key, int64_t value);
        int (*result_uint)(FiberdJob *job, const char *key, uint64_t value);
        int (*result_double)(FiberdJob *job, const char *key, double value);
        int (*result_bool)(FiberdJob *job, const char *key, bool value);

        /*
         * result_msgpack - make the result exactly the one msgpack value encoded in @buf
         * (@len bytes; any type; copied), replacing any keys set with result_*().
         * Return: 0; -EINVAL when @buf is not exactly one complete msgpack value, or
         * nests arrays and maps deeper than FIBERD_RESULT_MAX_DEPTH (20; then a job that
         * returns the -EINVAL fails with a message saying so); -ENOMEM; -E2BIG past the
         * result cap (as result_str(): the job fails).
         */
        int (*result_msgpack)(FiberdJob *job, const void *buf, size_t len);

        /*
         * fail - record why the job fails: a message (printf format, one line) for
         * clients; the code is derived from @err as described at run(). Returns @err,
         * so `return host->fail(job, -ENOENT, "cannot open %s", path);` reads well.
         */
        int (*fail)(FiberdJob *job, int err, const char *fmt, ...)
                __attribute__((format(printf, 3, 4)));

        /*
         * progress - report @done of @total units (any unit: bytes, items; @total 0 =
         * unknown), shown by job.status. Cheap; call it as often as you like.
         */
        void (*progress)(FiberdJob *job, uint64_t done, uint64_t total);

        /* ---- scheduling ---- */

        /* now_ns - CLOCK_MONOTONIC now, nanoseconds; the clock of every deadline here. */
        uint64_t (*now_ns)(void);

        /* yield - let other fibers run. Yields. Return: 0; -ECANCELED. */
        int (*yield)(FiberdJob *job);

        /*
         * sleep_until - park until the absolute @deadline_ns (now_ns() clock). Yields.
         * Return: 0 once the time has come; -ECANCELED.
         */
        int (*sleep_until)(FiberdJob *job, uint64_t deadline_ns);

        /*
         * wait_fd - park until @fd (a pipe, socket, eventfd, ... not a regular file) is
         * ready for @events (EPOLLIN and/or EPOLLOUT from <sys/epoll.h>) or the absolute
         * @deadline_ns passes (UINT64_MAX = no deadline). Make @fd O_NONBLOCK and retry
         * the read/write on EAGAIN. Yields.
         * Return: the ready events (> 0, may include EPOLLERR/EPOLLHUP); -ETIMEDOUT;
         * -ECANCELED; -EBUSY when another fiber waits on @fd in that direction; -EPERM
         * for a regular file; -EBADF.
         */
        int (*wait_fd)(FiberdJob *job, int fd, uint32_t events, uint64_t deadline_ns);

        /*
         * cancelled - true once the job is cancelled. For loops that never block or
         * yield; yield() notices it too.
         */
        bool (*cancelled)(FiberdJob *job);

        /*
         * spawn - start a child fiber of the job running @fn(job, host, copy of @arg). The host
         * copies @arg_size bytes from @arg (@arg may be NULL when @arg_size is 0) into
         * memory it owns, so a child never points into its parent's stack; pointers
         * inside the block are the plugin's business. Children are cancelled with the
         * job. Every child must be joined.
         * @ret: out, the child's handle, written only on success.
         * Return: 0; -EAGAIN when the daemon has no room for another fiber now (join
         * some, or do the work inline); -ECANCELED when the job is cancelled (no child);
         * -ENOMEM. Does not yield.
         */
        int (*spawn)(FiberdJob *job, FiberdChild **ret, FiberdChildFn fn, const void *arg,
                     size_t arg_size);

        /*
         * join - wait for @child to return and release it. On success the child's
         * (possibly updated) arg block is copied into @ret_arg (arg_size bytes; NULL to
         * skip) and its return value is returned (0 or its negative errno).
         * When the job is cancelled before the child ends, join returns -ECANCELED at
         * once; the child (cancelled too) is released by the host when it ends, so
         * nothing it uses may be freed by the parent in the meantime except through the
         * copied block, which the host owns. Yields.
         */
        int (*join)(FiberdJob *job, FiberdChild *child, void *ret_arg);

        /* ---- logging ---- */

        /*
         * log - one line to fiberd's log (stderr with a "<N>" priority prefix, so the
         * journal keeps levels), prefixed with the job's id and plugin name. @level is a
         * syslog priority (LOG_ERR ... LOG_DEBUG). @job may be NULL (from init/fini):
         * the line then names no job. May be called from init()/fini() too.
         */
        void (*log)(FiberdJob *job, int level, const char *fmt, ...)
                __attribute__((format(printf, 3, 4)));

        /* ---- the submitter's rights: who submitted the job, and files opened
         * as that user. A plugin never opens a path a client named with open(2): fiberd
         * may run as root, and the client must not get fiberd's rights. ---- */

        /* job_uid / job_gid - the submitting client's uid and primary gid (SO_PEERCRED). */
        uid_t (*job_uid)(FiberdJob *job);
        gid_t (*job_gid)(FiberdJob *job);

        /*
         * open - open @path as the job's submitter (their uid, gid and supplementary
         * groups; magic links such as /proc/self/fd/N are not followed) with open(2)'s
         * @flags (O_CLOEXEC and O_NOCTTY added; O_CREAT creates with mode 0666 & ~umask).
         * Without O_NONBLOCK in @flags only a regular file or a directory is opened — a
         * FIFO, socket or device is refused with -EINVAL, so it can never block the
         * worker; with O_NONBLOCK any type is opened and stays non-blocking (wait on it
         * with wait_fd()). The fd is the plugin's: close it. Yields (the open runs on one
         * of fiberd's opener threads).
         * Return: the fd (>= 0); -errno of open(2): -ENOENT, -EACCES (the submitter may
         * not, or fiberd cannot act for them, or the file is fiberd's own under
         * /proc/self, /proc/thread-self or /proc/<fiberd's pid>, refused to everyone but
         * root), -ELOOP (a symlink loop, or a magic link), ...; -EINVAL (see
         * above); -ECANCELED; -ENOMEM. Records nothing: call fail() to say why.
         */
        int (*open)(FiberdJob *job, const char *path, int flags);

        /*
         * arg_fd - the file the client passed under @key (an fd argument: PROTOCOL.md,
         * "Passing files"), as a new fd the plugin owns (close it). The client opened it
         * with its own rights; it may be of any type, and blocking: check with fstat().
         * Return: the fd (>= 0); -ENOENT when @key is absent; -EINVAL when @key holds no
         * fd argument (e.g. a path string: then use arg_str() and open()); -EMFILE.
         * Records an INVALID_ARGUMENT message as arg_str() does.
         */
        int (*arg_fd)(FiberdJob *job, const char *key);
        /* ---- CPU control: preemption points ----
         * Appended after log: check FIBERD_HOST_HAS(host, maybe_yield) before calling
         * either (a daemon built before them does not have them), then call them from
         * run() or a child fiber like every other member. Time-based, seastar's
         * need_preempt(): the daemon's task quota ([scheduler] task_quota_us, 500 us by
         * default) is how long a fiber may run before it should let others run. */

        /*
         * need_preempt - true once the calling fiber has run its task quota since it
         * last switched. A clock read and a compare, no syscall: call it as often as
         * every inner-loop round. Does not yield; false outside the job's fibers.
         */
        bool (*need_preempt)(FiberdJob *job);

        /*
         * maybe_yield - yield() when need_preempt() says so, else return at once. Use it
         * instead of a fixed "yield every N items" in CPU-bound loops. Yields only when
         * the quota is used.
         * Return: 0; -ECANCELED once the job is cancelled (checked on every call, so a
         * loop that calls it stops promptly even when it never yields).
         */
        int (*maybe_yield)(FiberdJob *job);

        /* ---- channels (ABI 3): Go's channels between the fibers of one job ----
         * Appended after maybe_yield: check FIBERD_HOST_HAS(host, chan_new) first. A
         * channel carries elements of a fixed size, copied in and out (memcpy): buffered
         * (a ring of `capacity` elements allocated once, by chan_new) or unbuffered
         * (capacity 0: a send waits until a receiver has taken the value, as in Go).
         * Parked senders and receivers are served first come, first served. It belongs
         * to the job: any fiber of the job (run() or a child, or a future) may use it,
         * never another job; it is freed by chan_free() or, at the latest, once the
         * job has ended (after its last child). Deadlines are absolute now_ns()
         * nanoseconds: 0 = do not wait (-ETIMEDOUT at once when the call would wait),
         * UINT64_MAX = no deadline. Waiting calls yield, and return -ECANCELED once the
         * job is cancelled, also while they wait (job.cancel or the job's timeout
         * interrupts a fiber parked in chan_recv). After -ETIMEDOUT or -ECANCELED
         * nothing was sent or received. The runtime behind them: scheduler/chan.c. */

        /*
         * chan_new - a channel of @capacity elements (0 = unbuffered) of @elem_size bytes
         * (0 is fine: a channel of signals). @ret: out, written only on success.
         * Return: 0; -EINVAL (no job: check_args; @elem_size * @capacity overflows);
         * -ENOMEM. Does not yield.
         */
        int (*chan_new)(FiberdJob *job, FiberdChan **ret, size_t elem_size, size_t capacity);

        /*
         * chan_send - copy @elem (elem_size bytes) into @ch: to a waiting receiver, else
         * into the ring; waits while neither can take it. Yields when it waits.
         * Return: 0 sent; -EPIPE when @ch is closed (before or while waiting: not sent);
         * -ETIMEDOUT; -ECANCELED; -EINVAL (no job).
         */
        int (*chan_send)(FiberdJob *job, FiberdChan *ch, const void *elem, uint64_t deadline_ns);

        /*
         * chan_recv - take the oldest element into @ret_elem (elem_size bytes; NULL to
         * drop it); waits while there is none. Yields when it waits.
         * Return: 0 received; -EPIPE once @ch is closed and drained (Go's ok == false;
         * @ret_elem untouched); -ETIMEDOUT; -ECANCELED; -EINVAL (no job).
         */
        int (*chan_recv)(FiberdJob *job, FiberdChan *ch, void *ret_elem, uint64_t deadline_ns);

        /*
         * chan_close - close @ch: every waiting sender and receiver returns -EPIPE;
         * later receivers drain what the ring holds, then get -EPIPE; later sends fail
         * with -EPIPE (never a crash, unlike Go's panic). Does not yield.
         * Return: 0; -EPIPE when already closed; -EINVAL (no job).
         */
        int (*chan_close)(FiberdJob *job, FiberdChan *ch);

        /*
         * chan_select - Go's select: perform exactly one of the @n (at most
         * FIBERD_CHAN_SELECT_MAX) operations of @cases, the first that can proceed,
         * waiting until one can or @deadline_ns passes (0: Go's `default:`). Among cases
         * ready at once one is chosen at random, so none starves; a closed channel's
         * case is ready and fires with result -EPIPE. Yields when it waits.
         * Return: the index of the case that fired (>= 0; read its .result);
         * -ETIMEDOUT; -ECANCELED; -EINVAL (no job, @n too large, a bad op).
         */
        int (*chan_select)(FiberdJob *job, FiberdChanCase *cases, size_t n, uint64_t deadline_ns);

        /*
         * chan_free - free @ch now (NULL is fine). Nobody may wait on it or use it any
         * more: close it and let its users finish first. Channels not freed are freed
         * when the job ends. Does not yield.
         */
        void (*chan_free)(FiberdJob *job, FiberdChan *ch);

        /* ---- futures (ABI 3): a child fiber whose end can be awaited with a deadline ----
         * Appended after chan_free: check FIBERD_HOST_HAS(host, async) first. A future
         * is a child fiber of the job (spawn()'s mechanism): cancelled with the job, and
         * never outliving it; its value is what its function returns (0 or a negative
         * errno) plus its arg block, which it may write results into. */

        /*
         * async - start @fn(job, host, copy of @arg) in a new child fiber of the job, as
         * spawn() does (the host copies @arg_size bytes of @arg), and return its future.
         * @ret: out, written only on success. Release it with future_free(), from the
         * fiber that called async(); one not released when that fiber returns is
         * cancelled and let go then (as an un-joined child). Does not yield.
         * Return: 0; -EAGAIN (no room for another fiber now); -ECANCELED (the job is
         * cancelled); -EINVAL (no job, @fn NULL); -ENOMEM.
         */
        int (*async)(FiberdJob *job, FiberdFuture **ret, FiberdChildFn fn, const void *arg,
                     size_t arg_size);

        /*
         * future_get - wait until @fut's function has returned, then write its return
         * value into @ret_value and copy its arg block (arg_size bytes) into @ret_arg
         * (either may be NULL). May be called any number of times, from any fiber of the
         * job, while @fut is not freed. Yields when it waits.
         * Return: 0 (the value is in @ret_value); -ETIMEDOUT (0 = poll; @fut stays valid,
         * call again); -ECANCELED (the calling fiber's job is cancelled); -EINVAL.
         */
        int (*future_get)(FiberdJob *job, FiberdFuture *fut, uint64_t deadline_ns, int *ret_value,
                          void *ret_arg);

        /*
         * when_all - wait until every one of the @n futures of @futs has returned (read
         * each with future_get(..., 0, ...) afterwards). Yields when it waits.
         * Return: 0; -ETIMEDOUT; -ECANCELED; -EINVAL.
         */
        int (*when_all)(FiberdJob *job, FiberdFuture *const *futs, size_t n, uint64_t deadline_ns);

        /*
         * future_free - release @fut (NULL is fine), from the fiber that called async().
         * One whose function has not returned yet is cancelled and let go: it winds
         * down on its own, with its own copy of the arg block. Does not wait for it
         * (at most for a fiber that has already returned to finish leaving).
         */
        void (*future_free)(FiberdJob *job, FiberdFuture *fut);

        /* ---- job scheduling (ABI 4) ---- */

        /*
         * fail_permanent - as fail(), and the failure is permanent: the job is not
         * retried whatever attempts it has left (it ends "failed"). Use it for errors
         * a second run cannot mend (a missing file, a refused request). Errors with the
         * codes INVALID_ARGUMENT, PERMISSION_DENIED and NOT_FOUND are never retried
         * anyway. Returns @err.
         */
        int (*fail_permanent)(FiberdJob *job, int err, const char *fmt, ...)
                __attribute__((format(printf, 3, 4)));
};

/* True when the running daemon's @host has @member (appended in a later version). */
#define FIBERD_HOST_HAS(host, member)                                                              \
        ((host)->size >= offsetof(FiberdHost, member) + sizeof((host)->member))

#ifdef __cplusplus
}
#endif
#endif /* FIBERD_PLUGIN_H */
