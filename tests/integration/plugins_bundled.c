/* SPDX-License-Identifier: MIT */
/*
 * plugins_bundled.c — the bundled plugins (echo, sha256, sleep, spin, skynet) run through the
 * loader and a small test host, on a real scheduling group, without the daemon.
 *
 * The test host implements FiberdHost as fiberd/plugin.h specifies it, in the fewest
 * lines: arguments from a msgpack map read with ipc/value.h, results kept as a short
 * list of typed entries, progress in atomics, cancellation as fiber_cancel() of the job
 * fiber plus every live child, and spawn/join with the arg block copied in and out and
 * a child record shared by parent and child (two references), so a join interrupted by
 * cancellation leaves the child to free itself. It checks the ABI from the plugin side:
 * each plugin's contract (results, errors, progress, cancellation, -EAGAIN fallback).
 *
 * Every test forks (criterion), makes its own group, runs one job fiber per plugin call
 * and waits on conditions with bounded deadlines.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>
#include <openssl/evp.h>

#include "ipc/status.h"
#include "ipc/value.h"
#include "plugins/loader.h"
#include "scheduler/sched.h"

/* ------------------------------------------------------------------ test host ------ */

#define RESULTS_MAX 8

typedef struct ResultEntry {
        char key[32];
        char type; /* 's' string, 'i' int, 'u' uint, 'd' double, 'b' bool */
        char str[256];
        int64_t i;
        uint64_t u;
        double d;
        bool b;
} ResultEntry;

struct FiberdJob {
        uint64_t id;
        const LoadedPlugin *plugin;
        msgpack_zone zone;
        msgpack_object args;
        char args_buf[1024];

        pthread_mutex_t lock; /* results, error, children */
        ResultEntry results[RESULTS_MAX];
        int n_results;
        char raw[2048]; /* result_msgpack()'s value */
        size_t raw_len;
        char error[IPC_STATUS_MESSAGE_MAX];
        const char *error_code;

        _Atomic uint64_t done, total;
        atomic_bool cancelled;
        atomic_int live_children; /* children whose body has not returned */
        atomic_int spawned;
        FiberdChild *children; /* live children, for cancellation */

        Fiber *fiber;
        atomic_bool started;
        int ret; /* run()'s return */
};

struct FiberdChild {
        FiberdJob *job;
        const FiberdHost *host;
        FiberdChildFn fn;
        Fiber *fiber;
        FiberdChild *prev, *next; /* job->children while the body runs */
        atomic_int refs;          /* the parent's and the child's */
        int ret;
        size_t size;
        max_align_t data[]; /* the copied arg block */
};

static const FiberdHost host;

static uint64_t h_job_id(FiberdJob *job)
{
        return job->id;
}

static void record_status(FiberdJob *job, const IpcStatus *st)
{
        pthread_mutex_lock(&job->lock);
        snprintf(job->error, sizeof(job->error), "%s", st->message);
        job->error_code = st->code;
        pthread_mutex_unlock(&job->lock);
}

static const msgpack_object *arg_find(FiberdJob *job, const char *key)
{
        const msgpack_object *o = ipc_map_find(&job->args, key);
        return ipc_object_is_nil(o) ? NULL : o;
}

static int h_arg_str(FiberdJob *job, const char *key, char *buf, size_t size)
{
        IpcStatus st = {0};
        int r = ipc_read_str(arg_find(job, key), key, buf, size, &st);
        if (r < 0)
                record_status(job, &st);
        return r;
}

static int h_arg_int(FiberdJob *job, const char *key, int64_t *ret)
{
        IpcStatus st = {0};
        int r = ipc_read_int(arg_find(job, key), key, ret, &st);
        if (r < 0)
                record_status(job, &st);
        return r;
}

static int h_arg_uint(FiberdJob *job, const char *key, uint64_t *ret)
{
        IpcStatus st = {0};
        int r = ipc_read_uint(arg_find(job, key), key, ret, &st);
        if (r < 0)
                record_status(job, &st);
        return r;
}

static int h_arg_double(FiberdJob *job, const char *key, double *ret)
{
        IpcStatus st = {0};
        int r = ipc_read_double(arg_find(job, key), key, ret, &st);
        if (r < 0)
                record_status(job, &st);
        return r;
}

static int h_arg_bool(FiberdJob *job, const char *key, bool *ret)
{
        IpcStatus st = {0};
        int r = ipc_read_bool(arg_find(job, key), key, ret, &st);
        if (r < 0)
                record_status(job, &st);
        return r;
}

static const struct msgpack_object *h_args_object(FiberdJob *job)
{
        return &job->args;
}

static ResultEntry *result_add(FiberdJob *job, const char *key, char type)
{
        ResultEntry *e = NULL;

        pthread_mutex_lock(&job->lock);
        if (job->n_results < RESULTS_MAX) {
                e = &job->results[job->n_results++];
                snprintf(e->key, sizeof(e->key), "%s", key);
                e->type = type;
        }
        pthread_mutex_unlock(&job->lock);
        return e;
}

static int h_result_str(FiberdJob *job, const char *key, const char *value)
{
        ResultEntry *e = result_add(job, key, 's');
        if (!e)
                return -E2BIG;
        snprintf(e->str, sizeof(e->str), "%s", value);
        return 0;
}

static int h_result_int(FiberdJob *job, const char *key, int64_t value)
{
        ResultEntry *e = result_add(job, key, 'i');
        if (!e)
                return -E2BIG;
        e->i = value;
        return 0;
}

static int h_result_uint(FiberdJob *job, const char *key, uint64_t value)
{
        ResultEntry *e = result_add(job, key, 'u');
        if (!e)
                return -E2BIG;
        e->u = value;
        return 0;
}

static int h_result_double(FiberdJob *job, const char *key, double value)
{
        ResultEntry *e = result_add(job, key, 'd');
        if (!e)
                return -E2BIG;
        e->d = value;
        return 0;
}

static int h_result_bool(FiberdJob *job, const char *key, bool value)
{
        ResultEntry *e = result_add(job, key, 'b');
        if (!e)
                return -E2BIG;
        e->b = value;
        return 0;
}

static int h_result_msgpack(FiberdJob *job, const void *buf, size_t len)
{
        if (len > sizeof(job->raw))
                return -E2BIG;
        pthread_mutex_lock(&job->lock);
        memcpy(job->raw, buf, len);
        job->raw_len = len;
        job->n_results = 0;
        pthread_mutex_unlock(&job->lock);
        return 0;
}

static int h_fail(FiberdJob *job, int err, const char *fmt, ...)
{
        va_list ap;

        pthread_mutex_lock(&job->lock);
        va_start(ap, fmt);
        vsnprintf(job->error, sizeof(job->error), fmt, ap);
        va_end(ap);
        job->error_code = ipc_status_code_from_errno(err);
        pthread_mutex_unlock(&job->lock);
        return err;
}

static void h_progress(FiberdJob *job, uint64_t done, uint64_t total)
{
        atomic_store(&job->total, total);
        atomic_store(&job->done, done);
}

static uint64_t h_now_ns(void)
{
        return sched_now_ns();
}

static int h_yield(FiberdJob *job)
{
        if (atomic_load(&job->cancelled))
                return -ECANCELED;
        return fiber_yield();
}

static bool h_need_preempt(FiberdJob *job)
{
        return fiber_need_preempt();
}

static int h_maybe_yield(FiberdJob *job)
{
        if (atomic_load(&job->cancelled))
                return -ECANCELED;
        return fiber_maybe_yield();
}

static int h_sleep_until(FiberdJob *job, uint64_t deadline_ns)
{
        if (atomic_load(&job->cancelled))
                return -ECANCELED;
        return fiber_sleep_until(deadline_ns);
}

static int h_wait_fd(FiberdJob *job, int fd, uint32_t events, uint64_t deadline_ns)
{
        if (atomic_load(&job->cancelled))
                return -ECANCELED;
        return fiber_wait_fd(fd, events, deadline_ns);
}

static bool h_cancelled(FiberdJob *job)
{
        return atomic_load(&job->cancelled) || fiber_cancelled();
}

static void child_unref(FiberdChild *c)
{
        if (atomic_fetch_sub(&c->refs, 1) == 1)
                free(c);
}

static void child_main(void *arg)
{
        FiberdChild *c = arg;
        FiberdJob *job = c->job;

        c->ret = c->fn(job, c->host, c->data);
        pthread_mutex_lock(&job->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                job->children = c->next;
        if (c->next)
                c->next->prev = c->prev;
        pthread_mutex_unlock(&job->lock);
        atomic_fetch_sub(&job->live_children, 1);
        child_unref(c);
}

static int h_spawn(FiberdJob *job, FiberdChild **ret, FiberdChildFn fn, const void *arg,
                   size_t arg_size)
{
        FiberAttr attr = {.tag = "test child"};
        FiberdChild *c;
        int r;

        if (atomic_load(&job->cancelled))
                return -ECANCELED;
        c = calloc(1, sizeof(*c) + arg_size);
        if (!c)
                return -ENOMEM;
        c->job = job;
        c->host = &host;
        c->fn = fn;
        c->size = arg_size;
        atomic_init(&c->refs, 2);
        if (arg_size)
                memcpy(c->data, arg, arg_size);

        pthread_mutex_lock(&job->lock);
        c->next = job->children;
        if (c->next)
                c->next->prev = c;
        job->children = c;
        atomic_fetch_add(&job->live_children, 1);
        r = fiber_create(&c->fiber, &attr, child_main, c);
        if (r < 0) {
                job->children = c->next;
                if (c->next)
                        c->next->prev = NULL;
                atomic_fetch_sub(&job->live_children, 1);
                pthread_mutex_unlock(&job->lock);
                free(c);
                return r;
        }
        if (atomic_load(&job->cancelled))
                fiber_cancel(c->fiber);
        pthread_mutex_unlock(&job->lock);
        atomic_fetch_add(&job->spawned, 1);
        *ret = c;
        return 0;
}

static int h_join(FiberdJob *job, FiberdChild *c, void *ret_arg)
{
        int r = fiber_join(c->fiber);

        if (r < 0) {
                /* Cancelled: the child ends on its own and frees the record. */
                fiber_detach(c->fiber);
                child_unref(c);
                return r;
        }
        r = c->ret;
        if (ret_arg && c->size)
                memcpy(ret_arg, c->data, c->size);
        child_unref(c);
        return r;
}

static void h_log(FiberdJob *job, int level, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "<%d>job %llu: ", level & 7, job ? (unsigned long long)job->id : 0ull);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
}

static uid_t h_job_uid(FiberdJob *job)
{
        return getuid();
}

static gid_t h_job_gid(FiberdJob *job)
{
        return getgid();
}

/* As the test's own user; the same checks as fiberd's opener (daemon/plugin/opener.h). */
static int h_open(FiberdJob *job, const char *path, int flags)
{
        struct stat st;
        int fd = open(path, flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);

        if (fd < 0)
                return -errno;
        if (!(flags & O_NONBLOCK) &&
            (fstat(fd, &st) < 0 || (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) ||
             fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0)) {
                close(fd);
                return -EINVAL;
        }
        return fd;
}

/* This host passes no fds: every argument is "not an fd". */
static int h_arg_fd(FiberdJob *job, const char *key)
{
        return arg_find(job, key) ? -EINVAL : -ENOENT;
}

static const FiberdHost host = {
        .abi_version = FIBERD_PLUGIN_ABI_VERSION,
        .size = sizeof(FiberdHost),
        .job_id = h_job_id,
        .arg_str = h_arg_str,
        .arg_int = h_arg_int,
        .arg_uint = h_arg_uint,
        .arg_double = h_arg_double,
        .arg_bool = h_arg_bool,
        .args_object = h_args_object,
        .result_str = h_result_str,
        .result_int = h_result_int,
        .result_uint = h_result_uint,
        .result_double = h_result_double,
        .result_bool = h_result_bool,
        .result_msgpack = h_result_msgpack,
        .fail = h_fail,
        .progress = h_progress,
        .now_ns = h_now_ns,
        .yield = h_yield,
        .sleep_until = h_sleep_until,
        .wait_fd = h_wait_fd,
        .cancelled = h_cancelled,
        .spawn = h_spawn,
        .join = h_join,
        .log = h_log,
        .job_uid = h_job_uid,
        .job_gid = h_job_gid,
        .open = h_open,
        .arg_fd = h_arg_fd,
        .need_preempt = h_need_preempt,
        .maybe_yield = h_maybe_yield,
};

/* ------------------------------------------------------------------ fixtures ------- */

static SchedulingGroup *group;

static void quiet_log(int level, const char *msg)
{
        if (level <= LOG_WARNING)
                fprintf(stderr, "<%d>plugins: %s\n", level, msg);
}

static PluginLoader *loader;
static char tmpdir[64];

static void start(unsigned workers, size_t max_fibers)
{
        SchedGroupConfig cfg = {.workers = workers, .name = "plugtest"};

        if (max_fibers) {
                cfg.max_fibers = max_fibers;
                cfg.runq_capacity = max_fibers;
        }
        cr_assert_eq(sched_group_new(&group, &cfg), 0);
        cr_assert_eq(loader_new(&loader, &host, quiet_log), 0);
        cr_assert_eq(loader_set_dir(loader, TEST_PLUGIN_BUILD_DIR), 5);
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/fiberd-plugtest-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir));
}

static void setup(void)
{
        start(2, 0);
}

static void teardown(void)
{
        char cmd[128];

        group = sched_group_free(group);
        loader = loader_free(loader);
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        if (tmpdir[0] && system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", tmpdir);
}

TestSuite(plugins_bundled, .init = setup, .fini = teardown, .timeout = 60);

/* Builds a job for @plugin with args from a printf-like list "k" type value ... */
static FiberdJob *job_new(const char *plugin)
{
        FiberdJob *job = calloc(1, sizeof(*job));
        static uint64_t next_id = 1;

        cr_assert_not_null(job);
        job->id = next_id++;
        job->plugin = loader_find(loader, plugin);
        cr_assert_not_null(job->plugin, "no plugin %s", plugin);
        pthread_mutex_init(&job->lock, NULL);
        msgpack_zone_init(&job->zone, 1024);
        return job;
}

/* Sets the job's args from a packed map. */
static void job_set_args(FiberdJob *job, msgpack_sbuffer *sb)
{
        size_t off = 0;

        cr_assert_lt(sb->size, sizeof(job->args_buf));
        memcpy(job->args_buf, sb->data, sb->size);
        cr_assert_eq(msgpack_unpack(job->args_buf, sb->size, &off, &job->zone, &job->args),
                     MSGPACK_UNPACK_SUCCESS);
        msgpack_sbuffer_destroy(sb);
}

static void pack_key(msgpack_packer *pk, const char *key)
{
        msgpack_pack_str(pk, strlen(key));
        msgpack_pack_str_body(pk, key, strlen(key));
}

/* args {} / {"k": uint} / {"k1": uint, "k2": uint} / {"k": "str"} */
static void args_uint(FiberdJob *job, int n, const char *k1, uint64_t v1, const char *k2,
                      uint64_t v2)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, n);
        if (n > 0) {
                pack_key(&pk, k1);
                msgpack_pack_uint64(&pk, v1);
        }
        if (n > 1) {
                pack_key(&pk, k2);
                msgpack_pack_uint64(&pk, v2);
        }
        job_set_args(job, &sb);
}

static void args_str(FiberdJob *job, const char *k, const char *v)
{
        msgpack_sbuffer sb;
        msgpack_packer pk;

        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        pack_key(&pk, k);
        pack_key(&pk, v);
        job_set_args(job, &sb);
}

static void job_main(void *arg)
{
        FiberdJob *job = arg;

        atomic_store(&job->started, true);
        job->ret = job->plugin->desc->run(job, &host);
}

static void job_start(FiberdJob *job)
{
        FiberAttr attr = {.tag = "test job", .group = group};
        cr_assert_eq(fiber_create(&job->fiber, &attr, job_main, job), 0);
}

/* Joins the job fiber, then waits (bounded) until no child of it runs any more. */
static int job_finish(FiberdJob *job)
{
        cr_assert_eq(fiber_join(job->fiber), 0);
        for (int i = 0; i < 5000 && atomic_load(&job->live_children) > 0; i++)
                usleep(1000);
        cr_assert_eq(atomic_load(&job->live_children), 0, "children still running");
        return job->ret;
}

static int job_run(FiberdJob *job)
{
        job_start(job);
        return job_finish(job);
}

static void job_cancel(FiberdJob *job)
{
        atomic_store(&job->cancelled, true);
        pthread_mutex_lock(&job->lock);
        fiber_cancel(job->fiber);
        for (FiberdChild *c = job->children; c; c = c->next)
                fiber_cancel(c->fiber);
        pthread_mutex_unlock(&job->lock);
}

static void job_free(FiberdJob *job)
{
        msgpack_zone_destroy(&job->zone);
        pthread_mutex_destroy(&job->lock);
        free(job);
}

static const ResultEntry *result(FiberdJob *job, const char *key, char type)
{
        for (int i = 0; i < job->n_results; i++)
                if (strcmp(job->results[i].key, key) == 0) {
                        cr_assert_eq(job->results[i].type, type, "%s: type", key);
                        return &job->results[i];
                }
        cr_assert_fail("no result %s", key);
        return NULL;
}

/* Waits (bounded) until @cond holds. */
#define WAIT_FOR(cond)                                                                             \
        do {                                                                                       \
                for (int w_ = 0; w_ < 10000 && !(cond); w_++)                                      \
                        usleep(1000);                                                              \
                cr_assert(cond, "timed out waiting for " #cond);                                   \
        } while (0)

static void write_file(const char *path, size_t size)
{
        FILE *f = fopen(path, "w");

        cr_assert_not_null(f);
        for (size_t i = 0; i < size; i++)
                fputc((int)((i * 131 + i / 977) & 0xff), f);
        cr_assert_eq(fclose(f), 0);
}

static void sha256_hex_of(const char *path, char hex[65])
{
        unsigned char md[32];
        unsigned len = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned char buf[4096];
        size_t n;
        FILE *f = fopen(path, "r");

        cr_assert_not_null(f);
        cr_assert(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL));
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
                cr_assert(EVP_DigestUpdate(ctx, buf, n));
        cr_assert(EVP_DigestFinal_ex(ctx, md, &len));
        cr_assert_eq(len, 32);
        EVP_MD_CTX_free(ctx);
        fclose(f);
        for (unsigned i = 0; i < 32; i++)
                sprintf(hex + 2 * i, "%02x", md[i]);
}

/* ------------------------------------------------------------------ echo ----------- */

/* Runs echo on @job (args set) and checks its result is its args, value for value. */
/* Runs echo on @job; returns whether its result equals its args (the other checks
 * fail the test here). */
static bool echo_returns_args(FiberdJob *job)
{
        msgpack_object res;
        msgpack_zone z;
        size_t off = 0;
        bool same;

        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_gt(job->raw_len, 0, "echo set no result");
        msgpack_zone_init(&z, 1024);
        cr_assert_eq(msgpack_unpack(job->raw, job->raw_len, &off, &z, &res),
                     MSGPACK_UNPACK_SUCCESS);
        cr_assert_eq(off, job->raw_len, "exactly one value");
        same = msgpack_object_equal(res, job->args);
        msgpack_zone_destroy(&z);
        cr_assert_eq(atomic_load(&job->total), 0, "echo reports no progress");
        return same;
}

Test(plugins_bundled, echo_returns_its_args)
{
        char big[900];
        FiberdJob *job = job_new("echo");

        args_uint(job, 2, "a", 1, "b", UINT64_MAX);
        cr_assert(echo_returns_args(job), "echo's result is not its args");
        job_free(job);

        job = job_new("echo");
        args_uint(job, 0, NULL, 0, NULL, 0);
        cr_assert(echo_returns_args(job), "echo of {} is not {}");
        job_free(job);

        /* larger than what echo packs on its stack */
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        job = job_new("echo");
        args_str(job, "big", big);
        cr_assert(echo_returns_args(job), "echo of a 900-byte string is not its args");
        job_free(job);
}

/* ------------------------------------------------------------------ sha256 --------- */

Test(plugins_bundled, sha256_matches_libcrypto_over_many_chunks)
{
        static const size_t sizes[] = {0, 1, 65535, 65536, 65537, 3 * 65536 + 17, 1 << 20};

        for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
                char path[128], want[65];
                FiberdJob *job = job_new("sha256");

                snprintf(path, sizeof(path), "%s/f%zu", tmpdir, i);
                write_file(path, sizes[i]);
                sha256_hex_of(path, want);
                args_str(job, "path", path);
                cr_assert_eq(job_run(job), 0, "size %zu: %s", sizes[i], job->error);
                cr_assert_str_eq(result(job, "sha256", 's')->str, want, "size %zu", sizes[i]);
                cr_assert_str_eq(result(job, "path", 's')->str, path);
                cr_assert_eq(result(job, "bytes", 'u')->u, sizes[i]);
                cr_assert_eq(atomic_load(&job->done), sizes[i]);
                cr_assert_eq(atomic_load(&job->total), sizes[i]);
                job_free(job);
        }
}

Test(plugins_bundled, sha256_of_nothing_is_the_known_digest)
{
        char path[128];
        FiberdJob *job = job_new("sha256");

        snprintf(path, sizeof(path), "%s/empty", tmpdir);
        write_file(path, 0);
        args_str(job, "path", path);
        cr_assert_eq(job_run(job), 0);
        cr_assert_str_eq(result(job, "sha256", 's')->str,
                         "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        job_free(job);
}

Test(plugins_bundled, sha256_errors_name_the_cause)
{
        char path[128];
        FiberdJob *job;

        job = job_new("sha256");
        snprintf(path, sizeof(path), "%s/missing", tmpdir);
        args_str(job, "path", path);
        cr_assert_eq(job_run(job), -ENOENT);
        cr_assert_str_eq(job->error_code, IPC_NOT_FOUND);
        cr_assert_not_null(strstr(job->error, "cannot open"), "%s", job->error);
        cr_assert_not_null(strstr(job->error, path));
        cr_assert_eq(job->n_results, 0);
        job_free(job);

        job = job_new("sha256");
        args_str(job, "path", tmpdir);
        cr_assert_eq(job_run(job), -EINVAL);
        cr_assert_not_null(strstr(job->error, "not a regular file"), "%s", job->error);
        job_free(job);

        job = job_new("sha256");
        args_uint(job, 0, NULL, 0, NULL, 0);
        cr_assert_eq(job_run(job), -ENOENT);
        cr_assert_str_eq(job->error_code, IPC_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(job->error, "path"), "%s", job->error);
        job_free(job);

        job = job_new("sha256");
        args_uint(job, 1, "path", 42, NULL, 0);
        cr_assert_eq(job_run(job), -EINVAL);
        cr_assert_str_eq(job->error_code, IPC_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(job->error, "path"), "%s", job->error);
        job_free(job);
}

/* ------------------------------------------------------------------ sleep ---------- */

Test(plugins_bundled, sleep_sleeps_at_least_that_long)
{
        FiberdJob *job = job_new("sleep");
        uint64_t t0 = sched_now_ns();

        args_uint(job, 1, "ms", 20, NULL, 0);
        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_geq(sched_now_ns() - t0, 20000000u);
        cr_assert_eq(result(job, "slept_ms", 'u')->u, 20);
        cr_assert_eq(atomic_load(&job->done), 20);
        job_free(job);
}

Test(plugins_bundled, sleep_ends_promptly_when_cancelled)
{
        FiberdJob *job = job_new("sleep");

        args_uint(job, 1, "ms", 600000, NULL, 0); /* ten minutes: the test timeout is 60 s */
        job_start(job);
        WAIT_FOR(atomic_load(&job->total) == 600000); /* it is sleeping now */
        job_cancel(job);
        cr_assert_eq(job_finish(job), -ECANCELED);
        cr_assert_eq(job->n_results, 0);
        job_free(job);
}

Test(plugins_bundled, sleep_refuses_bad_ms)
{
        FiberdJob *job = job_new("sleep");

        args_str(job, "ms", "soon");
        cr_assert_eq(job_run(job), -EINVAL);
        cr_assert_not_null(strstr(job->error, "ms"), "%s", job->error);
        job_free(job);

        job = job_new("sleep");
        args_uint(job, 1, "ms", UINT64_MAX / 2, NULL, 0);
        cr_assert_eq(job_run(job), -ERANGE);
        cr_assert_str_eq(job->error_code, IPC_INVALID_ARGUMENT);
        job_free(job);
}

/* ------------------------------------------------------------------ spin ----------- */

Test(plugins_bundled, spin_burns_and_yields)
{
        FiberdJob *job = job_new("spin");
        uint64_t t0 = sched_now_ns();

        args_uint(job, 1, "ms", 10, NULL, 0);
        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_geq(sched_now_ns() - t0, 10000000u);
        cr_assert_eq(result(job, "spun_ms", 'u')->u, 10);
        cr_assert_gt(result(job, "yields", 'u')->u, 0);
        job_free(job);
}

Test(plugins_bundled, spin_jobs_share_one_worker)
{
        /* One worker, two spinners: the short one finishes while the long one spins. */
        FiberdJob *longer, *shorter;

        sched_group_free(group);
        cr_assert_eq(sched_group_new(&group, &(SchedGroupConfig){.workers = 1}), 0);
        longer = job_new("spin");
        shorter = job_new("spin");
        args_uint(longer, 1, "ms", 600000, NULL, 0);
        args_uint(shorter, 1, "ms", 5, NULL, 0);
        job_start(longer);
        WAIT_FOR(atomic_load(&longer->started));
        job_start(shorter);
        cr_assert_eq(job_finish(shorter), 0, "%s", shorter->error);
        cr_assert(!atomic_load(&longer->cancelled));
        job_cancel(longer);
        cr_assert_eq(job_finish(longer), -ECANCELED);
        job_free(longer);
        job_free(shorter);
}

/* ------------------------------------------------------------------ skynet --------- */

Test(plugins_bundled, skynet_sums_in_child_fibers)
{
        static const struct {
                uint64_t size, div;
        } cases[] = {{1, 10}, {10000, 10}, {1000, 7}, {4096, 2}, {999, 64}};

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                FiberdJob *job = job_new("skynet");
                uint64_t n = cases[i].size;

                args_uint(job, 2, "size", n, "div", cases[i].div);
                cr_assert_eq(job_run(job), 0, "case %zu: %s", i, job->error);
                cr_assert_eq(result(job, "sum", 'u')->u, n * (n - 1) / 2, "case %zu", i);
                cr_assert_eq(result(job, "fibers", 'u')->u, (uint64_t)job->spawned);
                if (n > 1)
                        cr_assert_geq(job->spawned, n, "every leaf is a fiber");
                job_free(job);
        }
}

Test(plugins_bundled, skynet_defaults_are_the_classic_million)
{
        FiberdJob *job = job_new("skynet");

        args_uint(job, 0, NULL, 0, NULL, 0);
        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_eq(result(job, "sum", 'u')->u, 499999500000ull);
        cr_assert_eq(result(job, "size", 'u')->u, 1000000);
        cr_assert_eq(result(job, "div", 'u')->u, 10);
        job_free(job);
}

Test(plugins_bundled, skynet_does_the_work_inline_when_fibers_run_out)
{
        FiberdJob *job;

        teardown();
        start(2, 64); /* 64 live fibers at most: spawn says -EAGAIN early and often */
        job = job_new("skynet");
        args_uint(job, 2, "size", 100000, "div", 10);
        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_eq(result(job, "sum", 'u')->u, 100000ull * 99999 / 2);
        cr_assert_lt(job->spawned, 100000, "some parts ran inline");
        job_free(job);
}

Test(plugins_bundled, skynet_unwinds_when_cancelled)
{
        FiberdJob *job = job_new("skynet");

        args_uint(job, 2, "size", 10000000, "div", 2);
        job_start(job);
        WAIT_FOR(atomic_load(&job->spawned) > 1000);
        job_cancel(job);
        cr_assert_eq(job_finish(job), -ECANCELED); /* also: every child has ended */
        job_free(job);
}

Test(plugins_bundled, skynet_refuses_bad_args)
{
        FiberdJob *job = job_new("skynet");

        args_uint(job, 2, "size", 100, "div", 1);
        cr_assert_eq(job_run(job), -ERANGE);
        cr_assert_not_null(strstr(job->error, "div"), "%s", job->error);
        job_free(job);

        job = job_new("skynet");
        args_uint(job, 1, "size", 0, NULL, 0);
        cr_assert_eq(job_run(job), -ERANGE);
        cr_assert_not_null(strstr(job->error, "size"), "%s", job->error);
        job_free(job);
}

/* ------------------------------------------------------------------ the example ---- */

Test(plugins_bundled, the_readme_example_plugin_works)
{
        FiberdJob *job;

        cr_assert_eq(loader_load_file(loader, TEST_EXAMPLE_PLUGIN), 0);

        job = job_new("hello");
        args_str(job, "who", "fiberd");
        cr_assert_eq(job_run(job), 0, "%s", job->error);
        cr_assert_str_eq(result(job, "greeting", 's')->str, "hello, fiberd");
        job_free(job);

        job = job_new("hello");
        args_uint(job, 0, NULL, 0, NULL, 0);
        cr_assert_eq(job_run(job), 0, "an optional argument left out");
        cr_assert_str_eq(result(job, "greeting", 's')->str, "hello, world");
        job_free(job);

        job = job_new("hello");
        args_uint(job, 1, "who", 42, NULL, 0);
        cr_assert_eq(job_run(job), -EINVAL);
        cr_assert_str_eq(job->error_code, IPC_INVALID_ARGUMENT);
        cr_assert_not_null(strstr(job->error, "who"), "%s", job->error);
        job_free(job);
}
