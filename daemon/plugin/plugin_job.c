/* SPDX-License-Identifier: MIT */
/*
 * plugin_job.c — the FiberdHost table (plugins/fiberd/plugin.h) and the per-job state
 * behind a plugin's FiberdJob pointer.
 *
 * A FiberdJob lives from run()'s call until run() has returned *and* its last child
 * fiber has ended (reference counted: the job fiber holds one reference, each of its
 * children's nodes one, and a child's node holds one on its spawner's node, so every
 * node up to the FiberdJob outlives the fibers below it), because a child the parent
 * gave up joining (the job was cancelled) may still be winding down and calling host
 * functions.
 *
 * Results are built key by key into a private msgpack buffer (result_*()), or replaced
 * whole (result_msgpack()); when run() returns 0 the bytes become the job's result,
 * unless they pass the result cap ([jobs] max_result_bytes, within what [ipc]
 * max_message leaves a result): a result_*() that would pass it answers -E2BIG and
 * records why, and the job then fails INVALID_ARGUMENT ("the result is 5.2 MiB, more
 * than max_result_bytes (1 MiB)") whatever run() returns, so no plugin keeps a bigger
 * result in fiberd's memory and store, or a cut one unnoticed;
 * when it fails the message recorded by fail() or by a refusing arg_*() becomes the
 * job's error — provided run() returned that same errno, otherwise strerror() of what
 * it returned. A per-FiberdJob pthread mutex guards the builder and the recorded error
 * (children may call host functions concurrently); it is never held across a yield.
 *
 * Children: spawn() creates a joinable fiber on the spawner's job group and lists it
 * on its spawner's own list of children not yet joined (KidList: the job fiber's in the
 * FiberdJob, a child's in its FiberdChild, found through a fiber-local key). Each list
 * has its own lock, held for list operations only, so the children form a tree whose
 * every node is locked by the fiber that owns it: a spawn and its join take a lock
 * nobody else wants, where one lock for the whole job put every spawn and join of
 * every worker on one cache line (a job spawning a million fibers on 2 workers spent
 * 40 % of its time in that lock). The lock is glibc's adaptive mutex, which spins a
 * moment before it sleeps, so a spawn behind a cancel walk does not burn a CPU.
 * Cancelling the job (jobtable_cancel(), under the table lock) walks the tree through
 * the table's cancel hook, plugin_host_cancel(): it sets `cancelled`, so that a spawn
 * under any list's lock from then on refuses, then, one list at a time under its lock,
 * cancels each listed child and takes a reference on it to walk its list next. A child
 * its spawner let go (below) before it returned moves to the spawner's list of those,
 * which it leaves as it ends, so the walk still reaches it and what it spawned. The job
 * table runs the walk before it cancels the job fiber, whose return lets go of its
 * children and then of the FiberdJob. join() waits on the child's `done` event; a
 * cancelled parent stops waiting, cancels and detaches the child (the child's memory
 * goes with the last reference). A fiber of the job (run() or a child) that returns
 * without joining its own children has them cancelled and detached, in O(their
 * number); it never touches children other fibers spawned. Lock order: table lock,
 * then the run's host_lock (JobRun, job.h), then one KidList lock or the FiberdJob
 * mutex; never the other way round, and never two KidList locks at once.
 *
 * The job fiber itself never takes the table lock: it publishes the FiberdJob in its
 * JobRun and clears it under the run's host_lock, and leaves the run's outcome (result,
 * the plugin's error, its code) in the JobRun for the dispatcher fiber, which takes the
 * table lock anyway to conclude the run (dispatch.c). The server worker holds the table lock for most of
 * a job's bookkeeping, so job workers that took it too made it the daemon's most
 * contended lock (futex waits and wake-ups on every thread under load).
 *
 * Channels and futures (ABI 3): a FiberdChan wraps a runtime FiberChan and is listed
 * on its FiberdJob, so channels a plugin never freed go with the job's last reference;
 * a FiberdFuture is a FiberdChild (async() is spawn()), so it is cancelled with the job
 * and never outlives it, and future_get()/when_all() wait on the child's `done` event
 * with a deadline without giving the handle up.
 *
 * A job whose run() does not return after its cancel ends without it (detached:
 * dispatch.c). plugin_host_run() then keeps the job's record as it ended: the result and
 * the recorded error are dropped when run() returns, and progress is no longer written.
 *
 * Plugins in place: a FiberdJob holds a reference on the plugin instance it
 * runs (plugin_host_acquire() of the current one when the job starts), dropped with its
 * last reference, after the last child fiber ended, so a replaced or removed version
 * stays mapped exactly as long as code of it may run. check_args gets a FiberdJob too,
 * a handle with no job (job NULL) over the submitted arguments, fds and creds, on the
 * request fiber's stack: the arg_*() readers work on it unchanged.
 */
#include "daemon/job/jobtable.h"
#include "daemon/obs/log.h"
#include "daemon/plugin/opener.h"
#include "daemon/plugin/plugin_host.h"
#include "daemon/plugin/plugin_job.h"
#include "ipc/decoder.h"
#include "ipc/value.h"
#include "plugins/loader.h"
#include "scheduler/base/list.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define FAIL_MESSAGE_MAX 512
/* The longest a job run inline (FIBERD_PLUGIN_INLINE: on the server group) may take from
 * its run() call to its return, and how many runs in a row past it take the privilege
 * from its plugin instance: far above a trivial job (microseconds), below [scheduler]
 * rescue_after_ms (20 ms); wall time, so a run the kernel preempted can pass it, and
 * takes one strike of three, which a run in time clears (counted without a lock:
 * concurrent runs may blur "in a row"). A run that holds the worker is the stall
 * detector's (plugin_host_inline_stalled()). */
#define PLUGIN_INLINE_MAX_NS (1000 * 1000)
#define PLUGIN_INLINE_STRIKES 3

/* A spawner's children not yet joined (FiberdChild.sib), under its own lock: an
 * adaptive mutex (see the top of the file), held for list operations and, by the cancel
 * walk, over one list's fiber_cancel() calls. */
typedef struct KidList {
        pthread_mutex_t lock;
        ListHead kids;     /* not joined yet (FiberdChild.sib) */
        ListHead released; /* let go before they returned: each leaves it as it ends,
                            * so a cancel walk still reaches it and what it spawned */
} KidList;

static void kidlist_init(KidList *l)
{
        l->lock = (pthread_mutex_t)PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
        list_init(&l->kids);
        list_init(&l->released);
}

struct FiberdJob {
        int refs;                   /* atomic: the job fiber + its children's nodes */
        Job *job;                   /* referenced; NULL in a check_args handle */
        const Plugin *plugin;       /* the instance it runs, referenced (plugin_host_acquire) */
        const msgpack_object *args; /* the argument map: the job's, or the request's */
        const int *fds;             /* the passed fds args refer to, n_fds of them */
        size_t n_fds;
        const Creds *creds;    /* the submitter */
        char tag[JOB_TAG_MAX]; /* the children's FiberAttr.tag: lives as long as they may */
        pthread_mutex_t lock;  /* everything below */
        msgpack_sbuffer kv;    /* result map entries, packed back to back */
        uint32_t nkeys;
        char *raw; /* result_msgpack()'s value, owned; NULL = none */
        size_t raw_len;
        size_t refused_bytes;  /* a result_*() that passed the cap would have made the
                                * result this big: the job fails; 0 = none */
        int fail_err;          /* the errno the recorded message is about; 0 = none */
        const char *fail_code; /* IPC_* */
        bool fail_permanent;   /* host->fail_permanent(): no retry (job.h) */
        bool cancelled;        /* atomic (seq_cst): the children were cancelled; spawn() refuses */
        KidList top;           /* the job fiber's children not yet joined */
        ListHead chans;        /* FiberdChan.link: channels not freed yet; under lock */
        /* last, so hj_init() clears what comes before it and not its 512 bytes */
        char fail_msg[FAIL_MESSAGE_MAX];
};

/* hj_init - a FiberdJob of zeroes, its lock, lists and result buffer ready, but for
 * fail_msg, which is read only once fail_err is set (hj_record() writes both): it is not
 * touched. A trivial
 * job makes two FiberdJobs on its way (check_args on the server worker, the run on a
 * job worker), and clearing the message as well was most of each one's cost. */
static void hj_init(FiberdJob *hj)
{
        memset(hj, 0, offsetof(FiberdJob, fail_msg));
        hj->lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
        kidlist_init(&hj->top);
        msgpack_sbuffer_init(&hj->kv);
        list_init(&hj->chans);
}

/* A job's channel (ABI 3): the runtime's FiberChan, listed on its job so the ones a
 * plugin never freed go with the job. */
struct FiberdChan {
        ListHead link; /* in hj->chans until chan_free(); hj->lock */
        FiberChan *ch;
};

struct FiberdChild {
        int refs; /* atomic: the parent's handle + the child fiber + each of its children's
                   * nodes (+ a cancel walk's) */
        FiberdJob *hj;
        Fiber *fiber; /* joinable until join() or detach; atomic (plugin_host_cancel) */
        FiberdChildFn fn;
        void *arg; /* the host's copy, in the same allocation (max alignment) */
        size_t arg_size;
        int ret;
        FiberEvent done;
        Fiber *spawner; /* the fiber that spawned it: only it joins it */
        /* Its spawner's node, NULL for the job fiber's children: it holds a reference
         * on that node (on the FiberdJob), so the nodes up to the FiberdJob outlive its
         * fiber, and no spawn or end of a child writes a line every worker shares. */
        FiberdChild *up;
        KidList *parent; /* its spawner's list: valid while it is listed there */
        ListHead sib;    /* in parent->kids until joined or let go; parent->lock */
        KidList own;     /* its own children not yet joined */
        /* plugin_host_cancel()'s walk (under the run's host_lock: one walk at a time) */
        FiberdChild *cancel_next;
        /* it spawned a child (only its own fiber reads or writes it): otherwise own
         * stays empty and its end takes no lock of its own */
        bool spawned;
        bool released; /* let go by its spawner: on parent->released; parent->lock */
        bool ended;    /* its function returned; parent->lock */
};

/* How deep a result_msgpack() value may nest (plugin.h): what a client's decoder takes
 * (IPC_MAX_DEPTH), less the levels around a result in the deepest answer that carries
 * one (a page of job.list: the envelope, its map, the list of records, the record). */
_Static_assert(FIBERD_RESULT_MAX_DEPTH + 4 <= IPC_MAX_DEPTH,
               "a paged job list must carry the deepest result");

/* The result cap, bytes: [jobs] max_result_bytes, or what [ipc] max_message leaves a
 * result when that is less (@host_max_result_by_message: the failure names that one). */
static size_t host_max_result = 1 << 20;
static bool host_max_result_by_message;

void plugin_host_set_max_result(size_t max_result_bytes, size_t max_message)
{
        /* a job.run answer or a job.wait record carries the result and up to 4 KiB more */
        size_t by_message = max_message > 8192 ? max_message - 4096 : max_message;
        bool by_msg = by_message < max_result_bytes;

        __atomic_store_n(&host_max_result, by_msg ? by_message : max_result_bytes,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&host_max_result_by_message, by_msg, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ lifetime ---- */

static FiberdJob *hj_unref(FiberdJob *hj)
{
        if (!hj || __atomic_sub_fetch(&hj->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return NULL;
        msgpack_sbuffer_destroy(&hj->kv);
        free(hj->raw);
        /* channels the plugin never freed: no fiber of the job is left to use them */
        for (ListHead *e; hj->chans.next && (e = list_pop_head(&hj->chans));) {
                FiberdChan *ch = list_entry(e, FiberdChan, link);
                fiber_chan_free(ch->ch);
                free(ch);
        }
        pthread_mutex_destroy(&hj->lock);
        pthread_mutex_destroy(&hj->top.lock);
        job_unref(hj->job);
        plugin_host_release(hj->plugin); /* may let a replaced version go */
        free(hj);
        return NULL;
}

/* Drops a reference on @c; the last one frees it and drops the reference it held on
 * its spawner's node (FiberdChild.up, or the FiberdJob for the job fiber's children),
 * and so on up the tree. Context: any; never the FiberdJob's last reference while the
 * job fiber holds its own (plugin_host_cancel() relies on it). */
static void child_unref(FiberdChild *c)
{
        while (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) {
                FiberdChild *up = c->up;
                FiberdJob *hj = c->hj;

                pthread_mutex_destroy(&c->own.lock);
                free(c);
                if (!up) {
                        hj_unref(hj);
                        break;
                }
                c = up;
        }
}

/* Unlinks @c from its spawner's list (a no-op once it is off it). Context: the fiber
 * that holds @c's handle, while its spawner's list exists (the spawner lets go of what
 * it did not join before that list goes). */
static void child_unlist(FiberdChild *c)
{
        pthread_mutex_lock(&c->parent->lock);
        if (list_linked(&c->sib))
                list_del(&c->sib);
        pthread_mutex_unlock(&c->parent->lock);
}

/* Each child fiber finds its FiberdChild here (fiber-local storage), so that what it
 * spawns goes on its own list and a returning fiber lets go of its own un-joined
 * children in O(their number), not by walking every child of the job. Made once by
 * plugin_job_init(). */
static int child_key = -1;

/* The FiberdJob whose plugin code runs on the calling fiber (run() or a child), for the
 * hooked open() of plugin code. */
static int job_key = -1;

/*
 * Plugin code's own open(), openat(), creat() and fopen() (the runtime's hooks,
 * sched_hook_set_open()): on a job's fibers they open as the job's submitter, like
 * host->open, unless the plugin's descriptor asks for fiberd's own rights
 * (FIBERD_PLUGIN_DAEMON_RIGHTS). Anywhere else, the real call.
 */
static int hook_open(int dirfd, const char *path, int flags, unsigned mode)
{
        FiberdJob *hj = job_key >= 0 ? fiber_local_get(job_key) : NULL;
        int fd, r;

        if (!hj || !hj->job || (hj->plugin->flags & FIBERD_PLUGIN_DAEMON_RIGHTS))
                return -ENOSYS;
        if (!path)
                return -EFAULT;
        r = opener_openat(hj->creds, dirfd, path, flags, (mode_t)mode, true, &fd);
        return r < 0 ? r : fd;
}

int plugin_job_init(size_t max_result_bytes, size_t max_message)
{
        plugin_host_set_max_result(max_result_bytes, max_message);
        if (child_key < 0)
                child_key = fiber_key_create();
        if (job_key < 0)
                job_key = fiber_key_create();
        if (child_key < 0 || job_key < 0)
                return -ENOSPC;
        sched_hook_set_open(hook_open);
        return 0;
}

/* Moves @c off its spawner's list of children not joined: gone when it has ended, else
 * onto the list of those let go, which it leaves itself as it ends (child_main()). Under
 * c->parent->lock. */
static void child_let_go_locked(FiberdChild *c)
{
        if (list_linked(&c->sib))
                list_del(&c->sib);
        if (!c->ended) {
                c->released = true;
                list_add_head(&c->parent->released, &c->sib);
        }
}

/* The spawner gives up @c's handle: @c is cancelled and detached, and stays where a
 * cancel walk finds it until it ends. Context: the fiber holding the handle. */
static void child_let_go(FiberdChild *c)
{
        pthread_mutex_lock(&c->parent->lock);
        child_let_go_locked(c);
        pthread_mutex_unlock(&c->parent->lock);
        /* joinable until the detach, so its control block is there even if it just
         * ended */
        fiber_cancel(c->fiber);
        fiber_detach(c->fiber);
        child_unref(c);
}

/*
 * Cancels and lets go every child in @kids (the calling fiber's children it never
 * joined: the plugin returned without joining). Children spawned by other fibers of the
 * job are on their own lists, left to those fibers. Context: the spawner's fiber.
 */
static void children_release(FiberdJob *hj, KidList *kids)
{
        for (;;) {
                ListHead *pos;

                pthread_mutex_lock(&kids->lock);
                pos = list_first(&kids->kids);
                pthread_mutex_unlock(&kids->lock);
                if (!pos)
                        break;
                /* only this fiber takes entries off kids: @pos stays its first */
                child_let_go(list_entry(pos, FiberdChild, sib));
                log_job(LOG_WARNING, hj->job->id, hj->job->plugin_name,
                        "a fiber of the job returned with a child fiber not joined; "
                        "cancelled it");
        }
}

/* The cancel walk's step over one list: cancels each listed child (one whose fiber
 * spawn() has not stored yet cancels itself: it re-reads `cancelled`) and pushes it on
 * *@todo with a reference, so its own list is walked next. Under @l's lock: a listed
 * child holds its handle's reference, and its fiber is not joined before it leaves the
 * list. */
static void cancel_kids(KidList *l, FiberdChild **todo)
{
        ListHead *heads[] = {&l->kids, &l->released};

        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < ELEMENTSOF(heads); i++) {
                for (ListHead *pos = heads[i]->next; pos != heads[i]; pos = pos->next) {
                        FiberdChild *c = list_entry(pos, FiberdChild, sib);
                        Fiber *f = __atomic_load_n(&c->fiber, __ATOMIC_SEQ_CST);

                        if (f)
                                fiber_cancel(f);
                        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
                        c->cancel_next = *todo;
                        *todo = c;
                }
        }
        pthread_mutex_unlock(&l->lock);
}

void plugin_host_cancel(Job *j)
{
        JobRun *run = j->live ? j->live->run : NULL;
        FiberdChild *todo = NULL, *c;
        FiberdJob *hj;

        if (!run)
                return;
        /* host_lock held throughout: the job fiber clears host_job under it before it
         * lets the FiberdJob go */
        pthread_mutex_lock(&run->host_lock);
        hj = run->host_job;
        if (!hj) {
                pthread_mutex_unlock(&run->host_lock);
                return; /* not running the plugin yet, or no longer */
        }
        /* Before any list is locked: a spawn that takes a list's lock after the walk
         * passed it sees the flag and refuses, so no child is left unwalked. */
        __atomic_store_n(&hj->cancelled, true, __ATOMIC_SEQ_CST);
        cancel_kids(&hj->top, &todo);
        while ((c = todo)) {
                todo = c->cancel_next;
                cancel_kids(&c->own, &todo);
                child_unref(c);
        }
        pthread_mutex_unlock(&run->host_lock);
}

/* ------------------------------------------------------------------ errors ------ */

static void hj_record(FiberdJob *hj, int err, const char *code, const char *fmt, va_list ap)
{
        pthread_mutex_lock(&hj->lock);
        hj->fail_err = err;
        hj->fail_code = code;
        vsnprintf(hj->fail_msg, sizeof(hj->fail_msg), fmt, ap);
        pthread_mutex_unlock(&hj->lock);
}

static void hj_recordf(FiberdJob *hj, int err, const char *code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        hj_record(hj, err, code, fmt, ap);
        va_end(ap);
}

/* host->fail() and host->fail_permanent(): the message, its code from @err, and whether a
 * retry may mend it. Returns @err as a negative errno. */
static int hj_fail(FiberdJob *hj, int err, bool permanent, const char *fmt, va_list ap)
{
        if (err > 0)
                err = -err;
        hj_record(hj, err, ipc_status_code_from_errno(err), fmt, ap);
        pthread_mutex_lock(&hj->lock);
        hj->fail_permanent = permanent;
        pthread_mutex_unlock(&hj->lock);
        return err;
}

static int host_fail(FiberdJob *hj, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err = hj_fail(hj, err, false, fmt, ap);
        va_end(ap);
        return err;
}

static int host_fail_permanent(FiberdJob *hj, int err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        err = hj_fail(hj, err, true, fmt, ap);
        va_end(ap);
        return err;
}

/* ------------------------------------------------------------------ args -------- */

/* The value under @key, or NULL (absent or nil: recorded as "missing"). */
static const msgpack_object *arg_find(FiberdJob *hj, const char *key)
{
        const msgpack_object *o = ipc_map_find(hj->args, key);

        if (ipc_object_is_nil(o)) {
                hj_recordf(hj, -ENOENT, IPC_INVALID_ARGUMENT, "missing argument %s", key);
                return NULL;
        }
        return o;
}

/* Turns an ipc_read_*() failure into the recorded INVALID_ARGUMENT message. */
static int arg_refused(FiberdJob *hj, int r, const IpcStatus *st)
{
        hj_recordf(hj, r, IPC_INVALID_ARGUMENT, "%s", st->message);
        return r;
}

typedef enum { ARG_STR, ARG_INT, ARG_UINT, ARG_DOUBLE, ARG_BOOL } ArgKind;

/*
 * The one argument reader behind the five arg_*() host functions: finds @key, reads it
 * as @kind into @ret (@size bytes: only ARG_STR uses it) with the matching ipc_read_*(),
 * and records the refusal as the job's INVALID_ARGUMENT message.
 */
static int arg_read(FiberdJob *hj, const char *key, ArgKind kind, void *ret, size_t size)
{
        const msgpack_object *o = arg_find(hj, key);
        IpcStatus st = {0};
        int r = -EINVAL;

        if (!o)
                return -ENOENT;
        switch (kind) {
        case ARG_STR:
                r = ipc_read_str(o, key, ret, size, &st);
                break;
        case ARG_INT:
                r = ipc_read_int(o, key, ret, &st);
                break;
        case ARG_UINT:
                r = ipc_read_uint(o, key, ret, &st);
                break;
        case ARG_DOUBLE:
                r = ipc_read_double(o, key, ret, &st);
                break;
        case ARG_BOOL:
                r = ipc_read_bool(o, key, ret, &st);
                break;
        }
        return r < 0 ? arg_refused(hj, r, &st) : 0;
}

static int host_arg_str(FiberdJob *hj, const char *key, char *buf, size_t size)
{
        return arg_read(hj, key, ARG_STR, buf, size);
}

static int host_arg_int(FiberdJob *hj, const char *key, int64_t *ret)
{
        return arg_read(hj, key, ARG_INT, ret, sizeof(*ret));
}

static int host_arg_uint(FiberdJob *hj, const char *key, uint64_t *ret)
{
        return arg_read(hj, key, ARG_UINT, ret, sizeof(*ret));
}

static int host_arg_double(FiberdJob *hj, const char *key, double *ret)
{
        return arg_read(hj, key, ARG_DOUBLE, ret, sizeof(*ret));
}

static int host_arg_bool(FiberdJob *hj, const char *key, bool *ret)
{
        return arg_read(hj, key, ARG_BOOL, ret, sizeof(*ret));
}

static const struct msgpack_object *host_args_object(FiberdJob *hj)
{
        return hj->args;
}

/* ------------------------------------------------------------------ result ------ */

typedef enum { RV_STR, RV_INT, RV_UINT, RV_DOUBLE, RV_BOOL } ResultKind;

/* A result of @bytes passes the cap @max: recorded (the message, and that the job must
 * fail: plugin_host_run()). Return: -E2BIG. Called without hj->lock. */
static int result_refused(FiberdJob *hj, size_t bytes, size_t max)
{
        char have[32], cap[32];

        jobquota_format_bytes(have, sizeof(have), bytes);
        jobquota_format_bytes(cap, sizeof(cap), max);
        if (__atomic_load_n(&host_max_result_by_message, __ATOMIC_RELAXED))
                hj_recordf(hj, -E2BIG, ipc_status_code_from_errno(-E2BIG),
                           "the result is %s, more than a record within [ipc] max_message "
                           "may carry (%s)",
                           have, cap);
        else
                hj_recordf(hj, -E2BIG, ipc_status_code_from_errno(-E2BIG),
                           "the result is %s, more than max_result_bytes (%s)", have, cap);
        pthread_mutex_lock(&hj->lock);
        hj->refused_bytes = bytes;
        pthread_mutex_unlock(&hj->lock);
        return -E2BIG;
}

static int result_put(FiberdJob *hj, const char *key, ResultKind kind, const char *s, int64_t i,
                      uint64_t u, double d, bool b)
{
        size_t max = __atomic_load_n(&host_max_result, __ATOMIC_RELAXED);
        size_t need = strlen(key) + (kind == RV_STR ? strlen(s) : 0) + 16;
        msgpack_packer pk;
        size_t before;
        int r = 0;

        if (!hj->job)
                return -EINVAL; /* check_args: no job, no result */
        pthread_mutex_lock(&hj->lock);
        if (hj->kv.size + need > max) {
                size_t bytes = hj->kv.size + need;
                pthread_mutex_unlock(&hj->lock);
                return result_refused(hj, bytes, max);
        }
        before = hj->kv.size;
        msgpack_packer_init(&pk, &hj->kv, msgpack_sbuffer_write);
        r |= msgpack_pack_str_with_body(&pk, key, strlen(key));
        switch (kind) {
        case RV_STR:
                r |= msgpack_pack_str_with_body(&pk, s, strlen(s));
                break;
        case RV_INT:
                r |= msgpack_pack_int64(&pk, i);
                break;
        case RV_UINT:
                r |= msgpack_pack_uint64(&pk, u);
                break;
        case RV_DOUBLE:
                r |= msgpack_pack_double(&pk, d);
                break;
        case RV_BOOL:
                r |= b ? msgpack_pack_true(&pk) : msgpack_pack_false(&pk);
                break;
        }
        if (r)
                hj->kv.size = before; /* drop the half-written pair */
        else
                hj->nkeys++;
        pthread_mutex_unlock(&hj->lock);
        return r ? -ENOMEM : 0;
}

static int host_result_str(FiberdJob *hj, const char *key, const char *value)
{
        return result_put(hj, key, RV_STR, value ? value : "", 0, 0, 0, false);
}

static int host_result_int(FiberdJob *hj, const char *key, int64_t value)
{
        return result_put(hj, key, RV_INT, NULL, value, 0, 0, false);
}

static int host_result_uint(FiberdJob *hj, const char *key, uint64_t value)
{
        return result_put(hj, key, RV_UINT, NULL, 0, value, 0, false);
}

static int host_result_double(FiberdJob *hj, const char *key, double value)
{
        return result_put(hj, key, RV_DOUBLE, NULL, 0, 0, value, false);
}

static int host_result_bool(FiberdJob *hj, const char *key, bool value)
{
        return result_put(hj, key, RV_BOOL, NULL, 0, 0, 0, value);
}

static int host_result_msgpack(FiberdJob *hj, const void *buf, size_t len)
{
        char *copy;
        size_t max = __atomic_load_n(&host_max_result, __ATOMIC_RELAXED);
        int r;

        if (!buf || len == 0 || !hj->job)
                return -EINVAL;
        if (len > max)
                return result_refused(hj, len, max);
        /* one whole value, nested no deeper than a client's decoder takes: the framer's
         * scan, with nothing unpacked or allocated */
        r = ipc_msgpack_whole(buf, len, FIBERD_RESULT_MAX_DEPTH);
        if (r == -ERANGE) {
                hj_recordf(hj, -EINVAL, IPC_INVALID_ARGUMENT,
                           "the result nests arrays and maps more than %d levels deep: a "
                           "job list could not carry it",
                           FIBERD_RESULT_MAX_DEPTH);
                return -EINVAL;
        }
        if (r < 0)
                return -EINVAL;
        copy = malloc(len);
        if (!copy)
                return -ENOMEM;
        memcpy(copy, buf, len);
        pthread_mutex_lock(&hj->lock);
        free(hj->raw);
        hj->raw = copy;
        hj->raw_len = len;
        pthread_mutex_unlock(&hj->lock);
        return 0;
}

static void host_progress(FiberdJob *hj, uint64_t done, uint64_t total)
{
        if (!hj->job || job_detached(hj->job))
                return; /* a detached job's record stays as it ended (a call racing
                         * the detach may still land) */
        /* read by job records under the table lock; a torn pair is harmless */
        __atomic_store_n(&hj->job->progress_total, total, __ATOMIC_RELAXED);
        __atomic_store_n(&hj->job->progress_done, done, __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------ scheduling -- */

static uint64_t host_job_id(FiberdJob *hj)
{
        return hj->job ? hj->job->id : 0;
}

static bool host_cancelled(FiberdJob *hj)
{
        return fiber_cancelled() ||
               (hj->job && __atomic_load_n(&hj->job->cancel_requested, __ATOMIC_ACQUIRE));
}

static int host_yield(FiberdJob *hj)
{
        if (!hj->job)
                return -EINVAL; /* check_args may not yield */
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_yield();
}

static bool host_need_preempt(FiberdJob *hj)
{
        return fiber_need_preempt();
}

static int host_maybe_yield(FiberdJob *hj)
{
        if (!hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_maybe_yield();
}

static int host_sleep_until(FiberdJob *hj, uint64_t deadline_ns)
{
        if (!hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_sleep_until(deadline_ns);
}

static int host_wait_fd(FiberdJob *hj, int fd, uint32_t events, uint64_t deadline_ns)
{
        if (!hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_wait_fd(fd, events, deadline_ns);
}

static void child_main(void *arg)
{
        FiberdChild *c = arg;
        FiberdJob *hj = c->hj;

        fiber_local_set(child_key, c);
        fiber_local_set(job_key, hj);
        c->ret = c->fn(hj, &plugin_host_functions, c->arg);
        fiber_local_set(job_key, NULL);
        /* only this fiber adds to its own list (spawn() lists a child on its spawner's) */
        if (c->spawned)
                children_release(hj, &c->own);
        /* a cancel walk no longer needs it: off the released list if it was let go
         * (joinable until then, or detached and still running, so the walk's
         * fiber_cancel() always met a live fiber) */
        pthread_mutex_lock(&c->parent->lock);
        c->ended = true;
        if (c->released && list_linked(&c->sib))
                list_del(&c->sib);
        pthread_mutex_unlock(&c->parent->lock);
        fiber_event_set(&c->done);
        child_unref(c); /* the last one lets go of the nodes above, up to @hj */
}

static int host_spawn(FiberdJob *hj, FiberdChild **ret, FiberdChildFn fn, const void *arg,
                      size_t arg_size)
{
        FiberAttr attr;
        /* the copy of arg follows the struct, at max alignment */
        size_t head =
                (sizeof(FiberdChild) + _Alignof(max_align_t) - 1) & ~(_Alignof(max_align_t) - 1);
        /* the spawner's node: a child's (fiber-local), NULL for the job fiber */
        FiberdChild *self = fiber_local_get(child_key), *c;
        int *up_refs = self ? &self->refs : &hj->refs;
        Fiber *f;
        int r;

        if (!ret || !fn || (arg_size && !arg) || !hj->job)
                return -EINVAL;
        /* from a job fiber: its own group (the runtime keeps it in the scheduler's) and,
         * with sched_class 0, its class */
        /* the job's class: a child of a job run inline (on the server group) inherits
         * none from its spawner */
        attr = (FiberAttr){.scheduler = hj->job->table->dispatch.sched,
                           .tag = hj->tag,
                           .sched_class = hj->job->sched_class};
        if (host_cancelled(hj))
                return -ECANCELED;
        c = calloc(1, head + arg_size);
        if (!c)
                return -ENOMEM;
        c->arg = (char *)c + head;
        if (arg_size)
                memcpy(c->arg, arg, arg_size);
        c->arg_size = arg_size;
        c->fn = fn;
        c->hj = hj;
        c->spawner = fiber_self();
        c->up = self;
        c->refs = 2;
        list_init(&c->sib);
        kidlist_init(&c->own);
        fiber_event_init(&c->done);

        /* Held for list operations only (see the top of the file); `cancelled` read
         * under it, so a cancel walk that passed this list already is seen. */
        c->parent = self ? &self->own : &hj->top;
        pthread_mutex_lock(&c->parent->lock);
        if (__atomic_load_n(&hj->cancelled, __ATOMIC_SEQ_CST)) {
                pthread_mutex_unlock(&c->parent->lock);
                pthread_mutex_destroy(&c->own.lock);
                free(c);
                return -ECANCELED;
        }
        list_add_head(&c->parent->kids, &c->sib);
        pthread_mutex_unlock(&c->parent->lock);
        if (self)
                self->spawned = true; /* its own field, on its own fiber */
        /* the spawner's node stays as long as this one: the spawner runs, so it holds
         * a reference already and this one is never the first */
        __atomic_add_fetch(up_refs, 1, __ATOMIC_RELAXED);
        r = fiber_create(&f, &attr, child_main, c);
        if (r < 0) {
                __atomic_sub_fetch(up_refs, 1, __ATOMIC_RELAXED);
                child_unlist(c);
                pthread_mutex_destroy(&c->own.lock);
                free(c);
                return r;
        }
        /* Published, then cancelled re-read: plugin_host_cancel() sets cancelled, then
         * reads each fiber, so one of the two sees the other's write (both seq_cst). */
        __atomic_store_n(&c->fiber, f, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&hj->cancelled, __ATOMIC_SEQ_CST))
                fiber_cancel(f);
        *ret = c;
        return 0;
}

static int host_join(FiberdJob *hj, FiberdChild *c, void *ret_arg)
{
        int r = fiber_event_wait(&c->done, SCHED_FOREVER);

        if (r < 0) {
                /* the parent was cancelled first: let the child end on its own */
                child_let_go(c);
                return r;
        }
        child_unlist(c);
        if (fiber_join(c->fiber) < 0)
                fiber_detach(c->fiber); /* cancelled just now; the child has returned */
        if (ret_arg && c->arg_size)
                memcpy(ret_arg, c->arg, c->arg_size);
        r = c->ret;
        child_unref(c);
        return r;
}

/* ------------------------------------------------------------------ channels ---- */
/*
 * ABI 3: the runtime's channels (scheduler/chan.c) behind an opaque FiberdChan listed
 * on its job. A fiber of the job parked in one is parked in the runtime, so the job's
 * cancellation (fiber_cancel() of the job fiber and of every child) ends the wait with
 * -ECANCELED like any other blocking host call; host_cancelled() is checked first so a
 * cancel request that has not reached the fiber yet is seen too.
 */

static int host_chan_new(FiberdJob *hj, FiberdChan **ret, size_t elem_size, size_t capacity)
{
        FiberdChan *ch;
        int r;

        if (!ret || !hj->job)
                return -EINVAL;
        ch = calloc(1, sizeof(*ch));
        if (!ch)
                return -ENOMEM;
        r = fiber_chan_new(&ch->ch, elem_size, capacity);
        if (r < 0) {
                free(ch);
                return r;
        }
        pthread_mutex_lock(&hj->lock);
        list_add_tail(&hj->chans, &ch->link);
        pthread_mutex_unlock(&hj->lock);
        *ret = ch;
        return 0;
}

static int host_chan_send(FiberdJob *hj, FiberdChan *ch, const void *elem, uint64_t deadline_ns)
{
        if (!ch || !hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_chan_send(ch->ch, elem, deadline_ns);
}

static int host_chan_recv(FiberdJob *hj, FiberdChan *ch, void *ret_elem, uint64_t deadline_ns)
{
        if (!ch || !hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        return fiber_chan_recv(ch->ch, ret_elem, deadline_ns);
}

static int host_chan_close(FiberdJob *hj, FiberdChan *ch)
{
        if (!ch || !hj->job)
                return -EINVAL;
        return fiber_chan_close(ch->ch);
}

static int host_chan_select(FiberdJob *hj, FiberdChanCase *cases, size_t n, uint64_t deadline_ns)
{
        FiberChanCase k[FIBERD_CHAN_SELECT_MAX];
        int r;

        if (!hj->job || n > FIBERD_CHAN_SELECT_MAX || (n && !cases))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (cases[i].op != FIBERD_CHAN_RECV && cases[i].op != FIBERD_CHAN_SEND)
                        return -EINVAL;
                k[i] = (FiberChanCase){
                        .chan = cases[i].chan ? cases[i].chan->ch : NULL,
                        .op = cases[i].op == FIBERD_CHAN_SEND ? FIBER_CHAN_SEND : FIBER_CHAN_RECV,
                        .elem = cases[i].elem,
                };
        }
        if (host_cancelled(hj))
                return -ECANCELED;
        r = fiber_chan_select(k, n, deadline_ns);
        if (r >= 0)
                cases[r].result = k[r].result;
        return r;
}

static void host_chan_free(FiberdJob *hj, FiberdChan *ch)
{
        if (!ch)
                return;
        pthread_mutex_lock(&hj->lock);
        if (list_linked(&ch->link))
                list_del(&ch->link);
        pthread_mutex_unlock(&hj->lock);
        fiber_chan_free(ch->ch);
        free(ch);
}

/* ------------------------------------------------------------------ futures ----- */
/*
 * ABI 3: a FiberdFuture is a FiberdChild under another name (async() is spawn()), so a
 * future is cancelled with the job, listed on its spawner, and let go when its spawner
 * returns without freeing it, exactly as a child. What it adds is waiting with a
 * deadline on the child's `done` event without giving the handle up, any number of
 * times (future_get), and over many (when_all); future_free() is join() when the child
 * has returned and join()'s "parent gave up" path when it has not.
 */

static FiberdChild *future_child(FiberdFuture *fut)
{
        return (FiberdChild *)fut;
}

static int host_async(FiberdJob *hj, FiberdFuture **ret, FiberdChildFn fn, const void *arg,
                      size_t arg_size)
{
        FiberdChild *c;
        int r;

        if (!ret)
                return -EINVAL;
        r = host_spawn(hj, &c, fn, arg, arg_size);
        if (r < 0)
                return r;
        *ret = (FiberdFuture *)c;
        return 0;
}

static int host_future_get(FiberdJob *hj, FiberdFuture *fut, uint64_t deadline_ns, int *ret_value,
                           void *ret_arg)
{
        FiberdChild *c = future_child(fut);
        int r;

        if (!c || !hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        r = fiber_event_wait(&c->done, deadline_ns);
        if (r < 0)
                return r;
        /* set before `done` (child_main), read after waiting on it */
        if (ret_value)
                *ret_value = c->ret;
        if (ret_arg && c->arg_size)
                memcpy(ret_arg, c->arg, c->arg_size);
        return 0;
}

static int host_when_all(FiberdJob *hj, FiberdFuture *const *futs, size_t n, uint64_t deadline_ns)
{
        if (!hj->job || (n && !futs))
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                int r = host_future_get(hj, futs[i], deadline_ns, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

static void host_future_free(FiberdJob *hj, FiberdFuture *fut)
{
        FiberdChild *c = future_child(fut);

        if (!c)
                return;
        if (fiber_event_wait(&c->done, 0) == 0) {
                host_join(hj, c, NULL); /* returned: join it, release it */
                return;
        }
        child_let_go(c);
}

/* ------------------------------------------------------------------ the submitter */

static uid_t host_job_uid(FiberdJob *hj)
{
        return hj->creds->uid;
}

static gid_t host_job_gid(FiberdJob *hj)
{
        return hj->creds->gid;
}

static int host_open(FiberdJob *hj, const char *path, int flags)
{
        int fd, r;

        if (!path || !hj->job)
                return -EINVAL;
        if (host_cancelled(hj))
                return -ECANCELED;
        r = opener_open(hj->job->creds, path, flags, &fd);
        return r < 0 ? r : fd;
}

static int host_arg_fd(FiberdJob *hj, const char *key)
{
        const msgpack_object *o = arg_find(hj, key);
        uint32_t idx;
        int fd;

        if (!o)
                return -ENOENT;
        if (!ipc_object_fd_index(o, &idx)) {
                hj_recordf(hj, -EINVAL, IPC_INVALID_ARGUMENT,
                           "%s: expected a file passed with the request, got %s", key,
                           ipc_object_type_name(o));
                return -EINVAL;
        }
        if (idx >= hj->n_fds) { /* the server checked; a safety net */
                hj_recordf(hj, -EINVAL, IPC_INVALID_ARGUMENT, "%s: no fd %u was passed", key,
                           (unsigned)idx);
                return -EINVAL;
        }
        fd = fcntl(hj->fds[idx], F_DUPFD_CLOEXEC, 3);
        return fd < 0 ? -errno : fd;
}

/* ------------------------------------------------------------------ logging ----- */

/*
 * host->log: a job's line goes to the log (the journal with its FIBERD_* fields, or
 * stderr; log.h) and is kept with the job for job.logs (joblog.h), escaped the same way.
 * Kept whatever the log level: the owner reads what the plugin wrote. Never yields.
 */
static void host_log(FiberdJob *hj, int level, const char *fmt, ...)
{
        char text[LOG_LINE_MAX], escaped[LOG_LINE_MAX];
        va_list ap;
        size_t len;
        int n;

        va_start(ap, fmt);
        if (!hj || !hj->job) {
                log_msgv(level, fmt, ap);
                va_end(ap);
                return;
        }
        n = vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        if ((size_t)n >= sizeof(text))
                n = sizeof(text) - 1;
        while (n > 0 && text[n - 1] == '\n')
                text[--n] = '\0';
        len = log_escape(escaped, sizeof(escaped), text);
        level = level < LOG_EMERG ? LOG_EMERG : level > LOG_DEBUG ? LOG_DEBUG : level;
        log_job_text(level, hj->job->id, hj->job->plugin_name, hj->job->owner, escaped);
        joblog_append(&hj->job->log, level, job_now_ms(), escaped, len);
}

const FiberdHost plugin_host_functions = {
        .abi_version = FIBERD_PLUGIN_ABI_VERSION,
        .size = sizeof(FiberdHost),
        .job_id = host_job_id,
        .arg_str = host_arg_str,
        .arg_int = host_arg_int,
        .arg_uint = host_arg_uint,
        .arg_double = host_arg_double,
        .arg_bool = host_arg_bool,
        .args_object = host_args_object,
        .result_str = host_result_str,
        .result_int = host_result_int,
        .result_uint = host_result_uint,
        .result_double = host_result_double,
        .result_bool = host_result_bool,
        .result_msgpack = host_result_msgpack,
        .fail = host_fail,
        .progress = host_progress,
        .now_ns = sched_now_ns,
        .yield = host_yield,
        .sleep_until = host_sleep_until,
        .wait_fd = host_wait_fd,
        .cancelled = host_cancelled,
        .spawn = host_spawn,
        .join = host_join,
        .log = host_log,
        .job_uid = host_job_uid,
        .job_gid = host_job_gid,
        .open = host_open,
        .arg_fd = host_arg_fd,
        .need_preempt = host_need_preempt,
        .maybe_yield = host_maybe_yield,
        .chan_new = host_chan_new,
        .chan_send = host_chan_send,
        .chan_recv = host_chan_recv,
        .chan_close = host_chan_close,
        .chan_select = host_chan_select,
        .chan_free = host_chan_free,
        .async = host_async,
        .future_get = host_future_get,
        .when_all = host_when_all,
        .future_free = host_future_free,
        .fail_permanent = host_fail_permanent,
};

/* ------------------------------------------------------------------ running ----- */

/* A msgpack-c write callback into a fixed buffer (a map header: at most 5 bytes). */
typedef struct FixedBuf {
        char data[8];
        size_t size;
} FixedBuf;

static int fixed_write(void *data, const char *buf, size_t len)
{
        FixedBuf *b = data;
        if (len > sizeof(b->data) - b->size)
                return -1;
        memcpy(b->data + b->size, buf, len);
        b->size += len;
        return 0;
}

/* The finished result bytes: raw, or the map of the keys set (empty map when none), in
 * an allocation of exactly their size: it is kept with the job's record. */
static int hj_take_result(FiberdJob *hj, char **ret, size_t *ret_len)
{
        FixedBuf hdr = {.size = 0};
        msgpack_packer pk;
        char *out;

        if (hj->raw) {
                *ret = hj->raw;
                *ret_len = hj->raw_len;
                hj->raw = NULL;
                return 0;
        }
        msgpack_packer_init(&pk, &hdr, fixed_write);
        if (msgpack_pack_map(&pk, hj->nkeys) != 0)
                return -ENOMEM;
        out = malloc(hdr.size + hj->kv.size);
        if (!out)
                return -ENOMEM;
        memcpy(out, hdr.data, hdr.size);
        if (hj->kv.size)
                memcpy(out + hdr.size, hj->kv.data, hj->kv.size);
        *ret_len = hdr.size + hj->kv.size;
        *ret = out;
        return 0;
}

/* A job of @p ran inline on the server group for @ticks (sched_ticks()): the
 * PLUGIN_INLINE_STRIKES-th run in a row past PLUGIN_INLINE_MAX_NS sends @p's later jobs
 * to the job workers (plugin_host_run_inline()), said once per instance. (@p is the
 * instance that ran: one loaded since the dispatcher placed the job is judged by its own
 * runs.) The strikes live in the loader's struct, which the daemon only reads otherwise:
 * cast. */
static void inline_check(const Job *j, const Plugin *p, uint64_t ticks)
{
        unsigned *strikes = (unsigned *)&p->inline_strikes;

        if (ticks <= sched_ns_to_ticks(PLUGIN_INLINE_MAX_NS)) {
                if (__atomic_load_n(strikes, __ATOMIC_RELAXED))
                        __atomic_store_n(strikes, 0, __ATOMIC_RELAXED);
                return;
        }
        if (__atomic_add_fetch(strikes, 1, __ATOMIC_RELAXED) < PLUGIN_INLINE_STRIKES ||
            !plugin_host_inline_demote(p))
                return;
        log_job_owner(LOG_WARNING, j->id, j->plugin_name, j->owner,
                      "plugin %s %s: job %llu took %.1f ms inline, the last of %d in a row "
                      "over %d ms: its jobs run on the job workers from now on",
                      p->name, p->version, (unsigned long long)j->id,
                      (double)sched_ticks_to_ns(ticks) / 1e6, PLUGIN_INLINE_STRIKES,
                      PLUGIN_INLINE_MAX_NS / 1000000);
}

int plugin_host_run(Job *j)
{
        JobRun *run = j->live->run; /* the dispatcher's: outlives this call */
        FiberdJob *hj = malloc(sizeof(*hj));
        char *result = NULL;
        size_t result_len = 0, refused, max;
        int r;

        if (!hj) {
                run->fail_code = NULL;
                return -ENOMEM;
        }
        hj_init(hj);
        /* the instance current now runs the job (plugins in place: a queued job of a replaced
         * plugin runs the new version; of a removed one, fails) */
        hj->plugin = plugin_host_acquire(j->plugin_name, strlen(j->plugin_name));
        if (!hj->plugin) {
                free(hj);
                run->error_message = strdup("its plugin was removed before the job started");
                run->fail_code = IPC_NOT_FOUND;
                return -ENOENT;
        }
        hj->refs = 1;
        hj->job = job_ref(j);
        hj->args = &j->args;
        hj->fds = j->fds;
        hj->n_fds = j->n_fds;
        hj->creds = j->creds;
        /* the job fiber's tag, formatted by the dispatcher (dispatch.c): the children's */
        memcpy(hj->tag, j->live->run->tag, sizeof(hj->tag));

        /* Published under the run's host_lock alone (JobRun, job.h): a cancel sets
         * cancel_requested before it takes host_lock to look for the FiberdJob, so
         * either it finds it or this reads the flag set. */
        pthread_mutex_lock(&run->host_lock);
        hj->cancelled = __atomic_load_n(&j->cancel_requested, __ATOMIC_ACQUIRE);
        run->host_job = hj;
        pthread_mutex_unlock(&run->host_lock);
        __atomic_store_n(&j->live->plugin, hj->plugin, __ATOMIC_RELEASE);
        log_job_owner(LOG_DEBUG, j->id, j->plugin_name, j->owner, "running %s %s", hj->plugin->name,
                      hj->plugin->version);

        fiber_local_set(job_key, hj);
        uint64_t t0 = run->run_inline ? sched_ticks() : 0; /* the TSC: the vDSO clock
                                                            * costs twice as much */
        r = hj->plugin->desc->run(hj, &plugin_host_functions);
        if (run->run_inline)
                inline_check(j, hj->plugin, sched_ticks() - t0);
        fiber_local_set(job_key, NULL);

        /* children run() never joined: cancel and let them go */
        children_release(hj, &hj->top);

        pthread_mutex_lock(&hj->lock);
        refused = hj->refused_bytes;
        pthread_mutex_unlock(&hj->lock);
        max = __atomic_load_n(&host_max_result, __ATOMIC_RELAXED);
        if (r == 0 && refused) /* a result_*() passed the cap: the job may not pass it */
                r = result_refused(hj, refused, max);
        if (r == 0 && hj_take_result(hj, &result, &result_len) < 0)
                r = -ENOMEM;
        if (r == 0 && result_len > max) {
                /* the map's header on top of keys that fit, or a cap lowered meanwhile */
                free(result);
                result = NULL;
                r = result_refused(hj, result_len, max);
        }
        pthread_mutex_lock(&run->host_lock);
        run->host_job = NULL;
        pthread_mutex_unlock(&run->host_lock);
        /* the run's outcome, for the dispatcher fiber to conclude (it drops it when the
         * job ended without this fiber: detached, dispatch.c) */
        if (r == 0) {
                run->result = result;
                run->result_len = result_len;
        } else if (hj->fail_err && hj->fail_err == r) { /* no result: it failed */
                run->error_message = strdup(hj->fail_msg);
                run->fail_code = hj->fail_code;
                run->fail_permanent = hj->fail_permanent;
        }
        hj_unref(hj);
        return r;
}

/* ------------------------------------------------------------------ check_args -- */

/* The descriptor member @m is inside what the plugin's size says it has. */
#define DESC_HAS(d, m) ((d)->size >= offsetof(FiberdPlugin, m) + sizeof((d)->m))

int plugin_host_check_args(const Plugin *p, const msgpack_object *args, const JobOrigin *origin,
                           IpcStatus *st)
{
        FiberdJob hj;
        char why[FAIL_MESSAGE_MAX]; /* not cleared: a plugin writes a string or nothing */
        int r = 0;

        if (args->type != MSGPACK_OBJECT_MAP)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "args: expected a map for plugin %s", p->name);
        /* the caller's reference keeps @p's code mapped */
        if (!DESC_HAS(p->desc, check_args) || !p->desc->check_args)
                return 0;
        hj_init(&hj);
        hj.refs = 1;
        hj.args = args;
        hj.fds = origin->fds;
        hj.n_fds = origin->n_fds;
        hj.creds = origin->creds;
        why[0] = '\0';
        r = p->desc->check_args(&hj, &plugin_host_functions, why, sizeof(why));
        if (r < 0) {
                if (r == -ECANCELED || r > 0)
                        r = -EINVAL;
                why[sizeof(why) - 1] = '\0';
                r = ipc_status_set(st, IPC_INVALID_ARGUMENT, r, "%s: %s", p->name,
                                   why[0]        ? why
                                   : hj.fail_err ? hj.fail_msg
                                                 : strerror(-r));
        } else {
                r = 0;
        }
        msgpack_sbuffer_destroy(&hj.kv);
        pthread_mutex_destroy(&hj.lock);
        pthread_mutex_destroy(&hj.top.lock);
        return r;
}
