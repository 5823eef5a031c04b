/* SPDX-License-Identifier: MIT */
/*
 * opener.c — the opener threads behind host->open() (opener.h has the design).
 *
 * A request (OpenRequest) is queued under a pthread mutex and taken by the first idle
 * opener thread. Caller and opener each hold a reference. The request's state word
 * decides who owns the fd: the opener moves it from PENDING to DONE and sets the event,
 * or finds it ABANDONED (the caller was cancelled) and closes the fd itself; a caller
 * woken by cancellation moves it from PENDING to ABANDONED, or finds it DONE and closes
 * the fd the opener handed over.
 *
 * Per call, an opener thread switches to the client (setgroups, setfsgid, setfsuid, in
 * that order: setgroups needs CAP_SETGID, which setfsuid to a non-zero uid does not take
 * away, but the fs capabilities it does drop are wanted gone before the open) and back
 * (setfsuid(0) first, which gives those capabilities back, then the rest). A switch that
 * does not take (setfsuid() answers the previous fsuid, so it is checked by asking
 * again) fails the open with -EPERM rather than opening as root.
 * A client whose identity is fiberd's own (uid, gid and groups) needs no switch at all.
 *
 * /proc/self is fiberd. The opener thread is a thread of fiberd, so /proc/self,
 * /proc/thread-self and /proc/<fiberd's pid> (or a thread's id) name fiberd's own
 * process, and the kernel lets a process read its own maps, environ or status whoever
 * its fsuid is. For a submitter other than root such a file is refused with -EACCES
 * after the open: the fd is on procfs (fstatfs) and its path (readlink of
 * /proc/self/fd/N, where the symlinks and the submitter's own links are resolved
 * already) names, right under the procfs mount, fiberd's pid or one of its threads.
 * The check is on the file opened, not the name asked for, so a symlink to
 * /proc/self/environ is refused too.
 */
#include "daemon/plugin/opener.h"
#include "daemon/obs/log.h"
#include "scheduler/base/list.h"
#include "scheduler/sched.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define OPENER_THREADS_MAX 64

enum { OPEN_PENDING, OPEN_DONE, OPEN_ABANDONED };

typedef struct OpenRequest {
        int refs;        /* atomic: caller + opener */
        int state;       /* atomic: OPEN_* */
        Creds *creds;    /* referenced */
        int dirfd;       /* what a relative @path is relative to; AT_FDCWD = / */
        char *path;      /* owned copy */
        int flags;       /* as the caller gave them */
        mode_t mode;     /* for O_CREAT / O_TMPFILE */
        bool any_type;   /* keep a FIFO, socket or device opened without O_NONBLOCK */
        int fd;          /* the result when >= 0 */
        int err;         /* the result when < 0 */
        FiberEvent done; /* set by the opener once state is DONE */
        ListHead link;   /* in opener_queue while queued */
} OpenRequest;

static pthread_mutex_t opener_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t opener_cond = PTHREAD_COND_INITIALIZER;
static ListHead opener_queue = {&opener_queue, &opener_queue}; /* under opener_lock */
static bool opener_stopping;                                   /* under opener_lock */
static pthread_t opener_threads[OPENER_THREADS_MAX];
static unsigned opener_nthreads;
static bool opener_can_switch;
static uid_t opener_uid;     /* fiberd's own fsuid */
static gid_t opener_gid;     /* fiberd's own fsgid */
static gid_t *opener_groups; /* fiberd's own supplementary groups */
static size_t opener_n_groups;
static bool opener_no_openat2; /* atomic: the kernel said ENOSYS once */
static bool opener_inline;     /* atomic: open_inline() may try (opener_start()) */
static uint64_t opener_inline_opens, opener_thread_opens; /* atomic, since start */

static OpenRequest *request_unref(OpenRequest *rq)
{
        if (rq && __atomic_sub_fetch(&rq->refs, 1, __ATOMIC_ACQ_REL) == 0) {
                creds_unref(rq->creds);
                free(rq->path);
                free(rq);
        }
        return NULL;
}

/* True when the effective set holds both CAP_SETUID and CAP_SETGID. */
static bool have_setid_caps(void)
{
        struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct data[2] = {{0}};

        if (syscall(SYS_capget, &hdr, data) < 0)
                return false;
        return (data[0].effective & (1u << CAP_SETUID)) && (data[0].effective & (1u << CAP_SETGID));
}

/* Takes on @c's file-system identity in the calling thread. Return: 0; -EPERM. */
static int switch_to(const Creds *c)
{
        if (syscall(SYS_setgroups, c->n_groups, c->groups) < 0)
                return -errno;
        setfsgid(c->gid);
        if ((gid_t)setfsgid((gid_t)-1) != c->gid)
                return -EPERM;
        setfsuid(c->uid);
        if ((uid_t)setfsuid((uid_t)-1) != c->uid)
                return -EPERM;
        return 0;
}

/* Back to fiberd's own identity; a thread that cannot come back must not serve again. */
static void switch_back(void)
{
        setfsuid(opener_uid);
        setfsgid(opener_gid);
        if (syscall(SYS_setgroups, opener_n_groups, opener_groups) < 0 ||
            (uid_t)setfsuid((uid_t)-1) != opener_uid || (gid_t)setfsgid((gid_t)-1) != opener_gid) {
                log_msg(LOG_CRIT, "an opener thread cannot return to fiberd's own identity");
                abort();
        }
}

static int open_resolved(int dirfd, const char *path, int flags, mode_t mode)
{
        struct open_how how = {
                .flags = (uint64_t)flags,
                .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
                .resolve = RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        if (!__atomic_load_n(&opener_no_openat2, __ATOMIC_RELAXED)) {
                fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
                if (fd >= 0 || errno != ENOSYS)
                        return fd < 0 ? -errno : fd;
                __atomic_store_n(&opener_no_openat2, true, __ATOMIC_RELAXED);
        }
        fd = openat(dirfd, path, flags, (mode_t)how.mode);
        return fd < 0 ? -errno : fd;
}

/*
 * Whether @fd is a file (or directory) of fiberd's own process under procfs: its path's
 * first component below the procfs mount is fiberd's pid or one of its threads' ids.
 * When the path cannot be read, a procfs fd counts as fiberd's (refused, never lent).
 */
static bool opener_fd_is_own_proc(int fd)
{
        char link[64], path[PATH_MAX], *p, *end, *e;
        struct statfs sfs;
        struct stat st, root;
        unsigned long id;
        ssize_t n;

        if (fstatfs(fd, &sfs) < 0 || sfs.f_type != PROC_SUPER_MAGIC)
                return false;
        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, path, sizeof(path) - 1);
        if (n <= 0 || fstat(fd, &st) < 0)
                return true;
        path[n] = '\0';
        if (path[0] != '/')
                return true;
        /* the procfs mount: the shortest leading directory on @fd's device */
        for (p = path + 1;; p = end + 1) {
                bool on_proc;

                end = strchr(p, '/');
                if (!end)
                        return false; /* the mount itself, or a file right in it */
                *end = '\0';
                on_proc = stat(path, &root) == 0 && root.st_dev == st.st_dev;
                *end = '/';
                if (on_proc)
                        break;
        }
        p = end + 1;
        id = strtoul(p, &e, 10);
        if (e == p || (*e != '/' && *e != '\0'))
                return false; /* /proc/cpuinfo, /proc/sys/...: not a process's */
        if (id == (unsigned long)getpid())
                return true;
        snprintf(link, sizeof(link), "/proc/self/task/%lu", id);
        return access(link, F_OK) == 0; /* one of fiberd's threads (/proc/<tid>) */
}

/* Whether every gid of @a (@na of them) is in @b (@nb). */
static bool groups_within(const gid_t *a, size_t na, const gid_t *b, size_t nb)
{
        for (size_t i = 0; i < na; i++) {
                size_t j = 0;
                while (j < nb && b[j] != a[i])
                        j++;
                if (j == nb)
                        return false;
        }
        return true;
}

/* Whether @c is fiberd's own file-system identity (uid, gid and the same set of
 * supplementary groups): switching to it and back would change nothing, so the open
 * skips both, six credential changes a call (root's jobs on a root fiberd: make demo). */
static bool creds_are_own(const Creds *c)
{
        return c->uid == opener_uid && c->gid == opener_gid &&
               groups_within(c->groups, c->n_groups, opener_groups, opener_n_groups) &&
               groups_within(opener_groups, opener_n_groups, c->groups, c->n_groups);
}

/* The checks on @fd, just opened O_NONBLOCK for a client of @uid with the caller's
 * @flags (see opener.h): @fd, or -errno with @fd closed. */
static int open_checked(int fd, uid_t uid, int flags, bool any_type)
{
        struct stat st;
        int r;

        if (fd < 0)
                return fd;
        if (uid != 0 && opener_fd_is_own_proc(fd)) {
                r = -EACCES; /* /proc/self is fiberd, not the submitter */
                goto out_close;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                goto out_close;
        }
        if (!(flags & O_NONBLOCK)) {
                if (!any_type && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
                        r = -EINVAL;
                        goto out_close;
                }
                if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
                        r = -errno;
                        goto out_close;
                }
        }
        return fd;

out_close:
        close(fd);
        return r;
}

/* One open as @rq's client, checked (see opener.h). Return: an fd; -errno. */
static int open_as(const OpenRequest *rq)
{
        bool switching = opener_can_switch && !creds_are_own(rq->creds);
        int fd, r;

        if (switching) {
                r = switch_to(rq->creds);
                if (r < 0) {
                        switch_back();
                        return r;
                }
        } else if (rq->creds->uid != opener_uid) {
                return -EACCES;
        }
        fd = open_resolved(rq->dirfd, rq->path, rq->flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY,
                           rq->mode);
        if (switching)
                switch_back();
        return open_checked(fd, rq->creds->uid, rq->flags, rq->any_type);
}

/* Whether open(2) of a file of this file system, once its path is looked up, returns
 * without waiting: local disk file systems and tmpfs. Not NFS, FUSE or any other that
 * asks a server or a daemon, and not procfs (fiberd's own /proc entries are checked by
 * the opener). Not overlayfs: its layers may lie on NFS or FUSE (a netboot root), and its
 * open is the open of the layer's file. */
static bool fs_opens_without_waiting(long type)
{
        switch (type) {
        case EXT4_SUPER_MAGIC: /* ext2 and ext3 too */
        case XFS_SUPER_MAGIC:
        case BTRFS_SUPER_MAGIC:
        case F2FS_SUPER_MAGIC:
        case TMPFS_MAGIC:
                return true;
        default:
                return false;
        }
}

/*
 * The open in the calling fiber's own worker, without the hand-off to an opener thread
 * (two thread wake-ups an open), when nothing in it can wait: a read-only open of a path
 * on the root mount (whose file system fs_opens_without_waiting()), by a client whose
 * identity is fiberd's own, so no credentials change. openat2(2) with RESOLVE_CACHED
 * looks the path up in the dentry cache only and answers EAGAIN where it would read a
 * directory from disk; RESOLVE_NO_XDEV answers EXDEV where the path leaves the root mount
 * (/proc, a FUSE or NFS mount, a bind mount); O_NONBLOCK keeps a FIFO from waiting for
 * a writer. This is io_uring's own inline attempt at IORING_OP_OPENAT (LOOKUP_CACHED,
 * O_NONBLOCK, no O_CREAT or O_TRUNC), limited to file systems whose open does not ask
 * a server. Return: an fd or -errno as open_as(); -EAGAIN: not done here, ask an opener.
 */
static int open_inline(const Creds *creds, int dirfd, const char *path, int flags, bool any_type)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_NONBLOCK | O_CLOEXEC | O_NOCTTY),
                .resolve = RESOLVE_NO_MAGICLINKS | RESOLVE_CACHED | RESOLVE_NO_XDEV,
        };
        int fd;

        /* An absolute path only: RESOLVE_NO_XDEV keeps a lookup on the mount it starts
         * from, and a relative one starts at the working directory, which may be on NFS */
        if (!__atomic_load_n(&opener_inline, __ATOMIC_RELAXED) || dirfd != AT_FDCWD ||
            path[0] != '/' || (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC)) ||
            creds->uid != opener_uid || (opener_can_switch && !creds_are_own(creds)))
                return -EAGAIN;
        fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
        if (fd < 0 && (errno == EAGAIN || errno == EXDEV || errno == EINTR))
                return -EAGAIN;
        __atomic_add_fetch(&opener_inline_opens, 1, __ATOMIC_RELAXED);
        return open_checked(fd < 0 ? -errno : fd, creds->uid, flags, any_type);
}

/* Hands @rq's result to its caller, or closes the fd when the caller has gone. */
static void request_finish(OpenRequest *rq, int fd_or_err)
{
        int expected = OPEN_PENDING;

        if (fd_or_err >= 0)
                rq->fd = fd_or_err;
        else
                rq->err = fd_or_err;
        if (__atomic_compare_exchange_n(&rq->state, &expected, OPEN_DONE, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
                fiber_event_set(&rq->done);
        else if (fd_or_err >= 0)
                close(fd_or_err);
        request_unref(rq);
}

static void *opener_main(void *arg)
{
        (void)arg;
        for (;;) {
                OpenRequest *rq;
                ListHead *e;

                pthread_mutex_lock(&opener_lock);
                while (!opener_stopping && list_empty(&opener_queue))
                        pthread_cond_wait(&opener_cond, &opener_lock);
                if (opener_stopping) {
                        pthread_mutex_unlock(&opener_lock);
                        return NULL;
                }
                e = list_pop_head(&opener_queue);
                pthread_mutex_unlock(&opener_lock);
                rq = list_entry(e, OpenRequest, link);
                __atomic_add_fetch(&opener_thread_opens, 1, __ATOMIC_RELAXED);
                request_finish(rq, open_as(rq));
        }
}

/* Whether open_inline() can work here: the root mount's file system opens without
 * waiting, and the kernel knows openat2(2)'s RESOLVE_CACHED (5.12). */
static bool opener_probe_inline(void)
{
        struct open_how how = {.flags = O_PATH | O_CLOEXEC,
                               .resolve = RESOLVE_CACHED | RESOLVE_NO_XDEV};
        struct statfs sfs;
        int fd;

        if (statfs("/", &sfs) < 0 || !fs_opens_without_waiting((long)sfs.f_type))
                return false;
        fd = (int)syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));
        if (fd < 0)
                return errno == EAGAIN; /* known but not cached; ENOSYS, EINVAL: unknown */
        close(fd);
        return true;
}

int opener_start(unsigned threads)
{
        int n, r;

        if (threads == 0)
                threads = OPENER_THREADS_DEFAULT;
        if (threads > OPENER_THREADS_MAX)
                threads = OPENER_THREADS_MAX;
        opener_uid = geteuid();
        opener_gid = getegid();
        n = getgroups(0, NULL);
        if (n < 0)
                return -errno;
        opener_groups = calloc((size_t)n + 1, sizeof(gid_t));
        if (!opener_groups)
                return -ENOMEM;
        n = getgroups(n, opener_groups);
        if (n < 0)
                return -errno;
        opener_n_groups = (size_t)n;
        opener_can_switch = opener_uid == 0 || have_setid_caps();
        opener_inline = opener_probe_inline();
        if (!opener_can_switch)
                log_msg(LOG_NOTICE,
                        "fiberd cannot switch file-system credentials (not root, no "
                        "CAP_SETUID/CAP_SETGID): host->open serves uid %u only",
                        (unsigned)opener_uid);
        for (opener_nthreads = 0; opener_nthreads < threads; opener_nthreads++) {
                r = -pthread_create(&opener_threads[opener_nthreads], NULL, opener_main, NULL);
                if (r < 0) {
                        opener_stop();
                        return r;
                }
                pthread_setname_np(opener_threads[opener_nthreads], "fiberd-opener");
        }
        return 0;
}

void opener_stop(void)
{
        pthread_mutex_lock(&opener_lock);
        opener_stopping = true;
        __atomic_store_n(&opener_inline, false, __ATOMIC_RELAXED);
        pthread_cond_broadcast(&opener_cond);
        pthread_mutex_unlock(&opener_lock);
        for (unsigned i = 0; i < opener_nthreads; i++)
                pthread_join(opener_threads[i], NULL);
        opener_nthreads = 0;
        for (;;) {
                ListHead *e;

                pthread_mutex_lock(&opener_lock);
                e = list_pop_head(&opener_queue);
                pthread_mutex_unlock(&opener_lock);
                if (!e)
                        break;
                request_finish(list_entry(e, OpenRequest, link), -ESHUTDOWN);
        }
        free(opener_groups);
        opener_groups = NULL;
}

int opener_open(const Creds *creds, const char *path, int flags, int *ret_fd)
{
        return opener_openat(creds, AT_FDCWD, path, flags, 0666, false, ret_fd);
}

int opener_openat(const Creds *creds, int dirfd, const char *path, int flags, mode_t mode,
                  bool any_type, int *ret_fd)
{
        OpenRequest *rq;
        int expected = OPEN_PENDING, r;

        r = open_inline(creds, dirfd, path, flags, any_type);
        if (r != -EAGAIN) {
                if (r >= 0)
                        *ret_fd = r;
                return r < 0 ? r : 0;
        }
        rq = calloc(1, sizeof(*rq));
        if (!rq)
                return -ENOMEM;
        rq->path = strdup(path);
        if (!rq->path) {
                free(rq);
                return -ENOMEM;
        }
        rq->refs = 2;
        rq->state = OPEN_PENDING;
        rq->creds = creds_ref((Creds *)creds);
        rq->dirfd = dirfd;
        rq->flags = flags;
        rq->mode = mode;
        rq->any_type = any_type;
        rq->fd = -1;
        fiber_event_init(&rq->done);
        pthread_mutex_lock(&opener_lock);
        if (opener_stopping || opener_nthreads == 0) {
                pthread_mutex_unlock(&opener_lock);
                rq->refs = 1;
                request_unref(rq);
                return -ESHUTDOWN;
        }
        list_add_tail(&opener_queue, &rq->link);
        pthread_cond_signal(&opener_cond);
        pthread_mutex_unlock(&opener_lock);

        r = fiber_event_wait(&rq->done, SCHED_FOREVER);
        if (r < 0 && __atomic_compare_exchange_n(&rq->state, &expected, OPEN_ABANDONED, false,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                request_unref(rq); /* the opener closes what it opens */
                return r;
        }
        /* DONE (maybe just as the wait was cancelled): the result is ours */
        if (r < 0) {
                if (rq->fd >= 0)
                        close(rq->fd);
        } else if (rq->fd >= 0) {
                *ret_fd = rq->fd;
        } else {
                r = rq->err;
        }
        request_unref(rq);
        return r;
}

void opener_stats(OpenerStats *ret)
{
        ret->inline_enabled = __atomic_load_n(&opener_inline, __ATOMIC_RELAXED);
        ret->inline_opens = __atomic_load_n(&opener_inline_opens, __ATOMIC_RELAXED);
        ret->thread_opens = __atomic_load_n(&opener_thread_opens, __ATOMIC_RELAXED);
}
