/* SPDX-License-Identifier: MIT */
/*
 * blockio.c — what a fiber cannot wait for with epoll, made off the workers.
 *
 * A regular file is always "ready" to epoll and poll, so a read that misses the page
 * cache blocks its thread in the kernel; a name lookup blocks in glibc. On a hooked
 * fiber (hook.c) these go elsewhere, so the worker runs other fibers meanwhile:
 *
 *  - File reads first try preadv2(RWF_NOWAIT): data the page cache holds is copied
 *    inline, at the cost of the plain read (seastar and QEMU use the same flag for the
 *    same reason). Writes try pwritev2(RWF_NOWAIT) the same way where the file system
 *    takes it for buffered writes. Memory-backed file systems (/proc, /sys, tmpfs)
 *    refuse the flag but never block: their files are read and written inline.
 *  - What would block goes to io_uring (Debian's liburing): one ring for the process,
 *    submissions under a mutex, and one completion thread that waits on the ring and
 *    wakes each fiber; or, where the kernel or a seccomp filter refuses io_uring_setup
 *    (systemd's @system-service set does not include io_uring), to a pool of
 *    BLOCKIO_THREADS blocking-I/O threads (libuv's threadpool, Go's blocking syscalls on
 *    a spare M). Name lookups always take a thread. Which one runs is decided at the
 *    first call and said by blockio_describe().
 *  - The data moves through a bounce buffer the call owns, not the caller's buffer: a
 *    fiber cancelled while its read is in flight leaves at once (ECANCELED), and the
 *    kernel or the thread finishes into memory that is still there.
 *
 * Reference counting: a call starts with two references, the caller's and the
 * executor's; each side drops its own, and the last frees.
 */
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/prctl.h>
#include <sys/vfs.h>
#include <sys/uio.h>

#include "scheduler/blockio.h"
#include "scheduler/runtime.h"

#define BLOCKIO_THREADS 4
#define BLOCKIO_BOUNCE_MAX (1u << 20) /* bytes a call moves at most */
#define BLOCKIO_RING_ENTRIES 256
#define BLOCKIO_IOV_MAX 64 /* iovecs a write chunk takes; the rest goes in the next */

static pthread_once_t blockio_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queue_cond = PTHREAD_COND_INITIALIZER;
static ListHead queue = LIST_HEAD_INIT(queue);
static unsigned threads_started;

static struct io_uring ring;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static bool ring_ok; /* set once in blockio_setup() */
static int ring_err; /* why not, -errno */

void blockio_call_put(BlockioCall *c)
{
        if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
                c->free(c);
}

static unsigned waking; /* atomic: executors inside call_done()'s wake-up */

/* The executor's side: wake the caller, drop its reference. */
static void call_done(BlockioCall *c)
{
        __atomic_add_fetch(&waking, 1, __ATOMIC_ACQ_REL);
        fiber_event_set(&c->done);
        __atomic_sub_fetch(&waking, 1, __ATOMIC_ACQ_REL);
        blockio_call_put(c);
}

void blockio_quiesce(void)
{
        while (__atomic_load_n(&waking, __ATOMIC_ACQUIRE))
                sched_yield();
}

static void *blockio_thread(void *arg)
{
        (void)arg;
        prctl(PR_SET_NAME, "fiberd-blockio");
        for (;;) {
                pthread_mutex_lock(&queue_lock);
                while (list_empty(&queue))
                        pthread_cond_wait(&queue_cond, &queue_lock);
                BlockioCall *c = container_of(queue.next, BlockioCall, link);
                list_del(&c->link);
                pthread_mutex_unlock(&queue_lock);
                c->run(c);
                call_done(c);
        }
        return NULL;
}

/* A thread for every queued call up to BLOCKIO_THREADS; under queue_lock. */
static void threads_grow_locked(void)
{
        if (threads_started >= BLOCKIO_THREADS)
                return;
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        if (pthread_create(&t, &attr, blockio_thread, NULL) == 0)
                threads_started++;
        pthread_attr_destroy(&attr);
}

/* ------------------------------------------------------------------ io_uring ------ */

typedef struct FileCall {
        BlockioCall call;
        int fd;
        off_t off; /* -1: the file position */
        bool write;
        char *buf; /* bounce buffer, owned */
        size_t len;
        ssize_t res; /* bytes, or -errno */
        int queued;  /* atomic: set (release) before the ring has it and read (acquire)
                      * by the completion thread, so ThreadSanitizer sees the hand-over
                      * the kernel makes */
} FileCall;

static void *ring_thread(void *arg)
{
        (void)arg;
        prctl(PR_SET_NAME, "fiberd-uring");
        for (;;) {
                struct io_uring_cqe *cqe;
                int r = io_uring_wait_cqe(&ring, &cqe);
                if (r == -EINTR)
                        continue;
                if (r < 0)
                        return NULL;
                FileCall *fc = io_uring_cqe_get_data(cqe);
                (void)__atomic_load_n(&fc->queued, __ATOMIC_ACQUIRE);
                fc->res = cqe->res;
                io_uring_cqe_seen(&ring, cqe);
                call_done(&fc->call);
        }
        return NULL;
}

static void blockio_setup(void)
{
        const char *env = getenv("FIBERD_BLOCKIO");
        if (env && !strcmp(env, "threads")) {
                ring_err = 0; /* chosen by the environment */
                return;
        }
        int r = io_uring_queue_init(BLOCKIO_RING_ENTRIES, &ring, 0);
        if (r < 0) {
                ring_err = r;
                return;
        }
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        r = pthread_create(&t, &attr, ring_thread, NULL);
        pthread_attr_destroy(&attr);
        if (r) {
                io_uring_queue_exit(&ring);
                ring_err = -r;
                return;
        }
        ring_ok = true;
}

const char *blockio_describe(void)
{
        static char buf[160];
        pthread_once(&blockio_once, blockio_setup);
        if (ring_ok)
                return "file reads that miss the page cache and file writes go to io_uring";
        snprintf(buf, sizeof(buf),
                 "file reads that miss the page cache and file writes go to %d blocking-I/O "
                 "threads (io_uring: %s)",
                 BLOCKIO_THREADS,
                 ring_err ? strerror(-ring_err) : "not used, FIBERD_BLOCKIO=threads");
        return buf;
}

/* Queue @fc on the ring. Return: 0; -EAGAIN when the ring is full or refuses. */
static int ring_submit(FileCall *fc)
{
        int r = -EAGAIN;
        pthread_mutex_lock(&ring_lock);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        if (sqe) {
                if (fc->write)
                        io_uring_prep_write(sqe, fc->fd, fc->buf, (unsigned)fc->len,
                                            (__u64)fc->off);
                else
                        io_uring_prep_read(sqe, fc->fd, fc->buf, (unsigned)fc->len, (__u64)fc->off);
                io_uring_sqe_set_data(sqe, fc);
                __atomic_store_n(&fc->queued, 1, __ATOMIC_RELEASE);
                r = io_uring_submit(&ring);
                r = r < 0 ? r : 0;
        }
        pthread_mutex_unlock(&ring_lock);
        return r;
}

/* ------------------------------------------------------------------ calls --------- */

int blockio_call(BlockioCall *c)
{
        if (!fiber_self()) {
                c->refs = 1;
                c->run(c);
                return 0;
        }
        fiber_event_init(&c->done);
        c->refs = 2;
        pthread_mutex_lock(&queue_lock);
        threads_grow_locked();
        if (!threads_started) {
                /* no thread could be started: the call blocks this worker, as without
                 * hooks, rather than failing */
                pthread_mutex_unlock(&queue_lock);
                c->refs = 1;
                c->run(c);
                return 0;
        }
        list_add_tail(&queue, &c->link);
        pthread_cond_signal(&queue_cond);
        pthread_mutex_unlock(&queue_lock);
        return blockio_wait(c);
}

int blockio_wait(BlockioCall *c)
{
        int r = fiber_event_wait(&c->done, SCHED_FOREVER);
        if (r < 0) {
                blockio_call_put(c); /* the executor frees it */
                return r;
        }
        return 0;
}

static void file_run(BlockioCall *c)
{
        FileCall *fc = container_of(c, FileCall, call);
        struct iovec iov = {.iov_base = fc->buf, .iov_len = fc->len};
        ssize_t n;
        do /* offset -1: at the file position */
                n = fc->write ? pwritev2(fc->fd, &iov, 1, fc->off, 0)
                              : preadv2(fc->fd, &iov, 1, fc->off, 0);
        while (n < 0 && io_errno() == EINTR);
        fc->res = n < 0 ? -io_errno() : n;
}

static void file_free(BlockioCall *c)
{
        FileCall *fc = container_of(c, FileCall, call);
        free(fc->buf);
        free(fc);
}

/* Copy @len bytes between the bounce buffer @buf and @iov: into @buf when @in, else out
 * of it. */
static void bounce_copy(char *buf, size_t len, const struct iovec *iov, int iovcnt, bool in)
{
        size_t at = 0;
        for (int i = 0; i < iovcnt && at < len; i++) {
                size_t n = MIN(iov[i].iov_len, len - at);
                if (in)
                        memcpy(buf + at, iov[i].iov_base, n);
                else
                        memcpy(iov[i].iov_base, buf + at, n);
                at += n;
        }
}

/* One read or write of at most BLOCKIO_BOUNCE_MAX bytes off the worker. For a write,
 * @iov holds the data to copy in; for a read, it receives what was read.
 * Return: bytes; -errno; -ECANCELED. */
static ssize_t file_call(int fd, const struct iovec *iov, int iovcnt, off_t off, bool write)
{
        size_t total = 0;
        for (int i = 0; i < iovcnt; i++)
                total += iov[i].iov_len;
        total = MIN(total, (size_t)BLOCKIO_BOUNCE_MAX);

        FileCall *fc = calloc(1, sizeof(*fc));
        if (!fc)
                return -ENOMEM;
        fc->buf = malloc(total ? total : 1);
        if (!fc->buf) {
                free(fc);
                return -ENOMEM;
        }
        fc->fd = fd;
        fc->off = off;
        fc->write = write;
        fc->len = total;
        fc->call.run = file_run;
        fc->call.free = file_free;
        if (write)
                bounce_copy(fc->buf, total, iov, iovcnt, true);

        int r;
        pthread_once(&blockio_once, blockio_setup);
        if (ring_ok) {
                fiber_event_init(&fc->call.done);
                fc->call.refs = 2;
                r = ring_submit(fc);
                if (r == 0)
                        r = blockio_wait(&fc->call);
                else
                        r = blockio_call(&fc->call); /* the ring is full: a thread */
        } else {
                r = blockio_call(&fc->call);
        }
        if (r < 0)
                return r;
        ssize_t n = fc->res;
        if (!write && n > 0)
                bounce_copy(fc->buf, (size_t)n, iov, iovcnt, false);
        blockio_call_put(&fc->call);
        return n;
}

/* Memory-backed file systems read and write without blocking, but refuse RWF_NOWAIT
 * (EOPNOTSUPP): /proc, /sys, cgroupfs, tmpfs. Their files are read inline. */
static bool fd_in_memory(int fd)
{
        struct statfs sf;
        if (fstatfs(fd, &sf) < 0)
                return false;
        switch ((unsigned long)sf.f_type) {
        case PROC_SUPER_MAGIC:
        case SYSFS_MAGIC:
        case CGROUP_SUPER_MAGIC:
        case CGROUP2_SUPER_MAGIC:
        case TMPFS_MAGIC:
        case RAMFS_MAGIC:
        case DEVPTS_SUPER_MAGIC:
                return true;
        default:
                return false;
        }
}

ssize_t blockio_readv(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
        ssize_t n;
        do
                n = preadv2(fd, iov, iovcnt, off, RWF_NOWAIT);
        while (n < 0 && io_errno() == EINTR);
        if (n >= 0)
                return n;
        int e = io_errno();
        if (e != EAGAIN && e != EOPNOTSUPP) {
                errno = e;
                return -1;
        }
        if (e == EOPNOTSUPP && fd_in_memory(fd)) {
                do
                        n = preadv2(fd, iov, iovcnt, off, 0);
                while (n < 0 && io_errno() == EINTR);
                return n;
        }
        n = file_call(fd, iov, iovcnt, off, false);
        if (n < 0) {
                errno = (int)-n;
                return -1;
        }
        return n;
}

ssize_t blockio_writev(int fd, const struct iovec *iov, int iovcnt, off_t off)
{
        size_t total = 0, done = 0;
        for (int i = 0; i < iovcnt; i++)
                total += iov[i].iov_len;

        ssize_t first;
        do
                first = pwritev2(fd, iov, iovcnt, off, RWF_NOWAIT);
        while (first < 0 && io_errno() == EINTR);
        if (first >= 0 && (size_t)first == total)
                return first;
        if (first < 0) {
                int e = io_errno();
                if (e == EOPNOTSUPP && fd_in_memory(fd)) {
                        do
                                first = pwritev2(fd, iov, iovcnt, off, 0);
                        while (first < 0 && io_errno() == EINTR);
                        return first;
                }
                if (e != EAGAIN && e != EOPNOTSUPP) {
                        errno = e;
                        return -1;
                }
        } else {
                done = (size_t)first;
        }
        /* the rest, chunk by chunk, off the worker */
        while (done < total) {
                /* the iovecs from @done on */
                struct iovec rest[BLOCKIO_IOV_MAX];
                int nrest = 0;
                size_t skip = done;
                for (int i = 0; i < iovcnt && nrest < BLOCKIO_IOV_MAX; i++) {
                        if (skip >= iov[i].iov_len) {
                                skip -= iov[i].iov_len;
                                continue;
                        }
                        rest[nrest].iov_base = (char *)iov[i].iov_base + skip;
                        rest[nrest].iov_len = iov[i].iov_len - skip;
                        skip = 0;
                        nrest++;
                }
                ssize_t n = file_call(fd, rest, nrest, off < 0 ? -1 : off + (off_t)done, true);
                if (n < 0) {
                        if (done)
                                return (ssize_t)done;
                        errno = (int)-n;
                        return -1;
                }
                if (n == 0)
                        break;
                done += (size_t)n;
        }
        return (ssize_t)done;
}
