/* SPDX-License-Identifier: MIT */
/*
 * opener.h — opening files as a client: the host->open() of the plugin ABI.
 *
 * A job must never use fiberd's own rights on its submitter's behalf, so a path a
 * client names is opened by a small pool of opener threads that take on the
 * submitter's file-system identity for that one call: setfsuid(2), setfsgid(2) and the
 * raw setgroups system call change only the calling thread's credentials on Linux
 * (glibc's setgroups() wrapper changes every thread, so it is not used) — the way
 * knfsd and Samba act for many users in one process. The path is resolved with
 * openat2(RESOLVE_NO_MAGICLINKS), so /proc/self/fd/N and friends cannot reach fiberd's
 * own open files; kernels without openat2 (before 5.6) fall back to openat(2).
 * /proc/self, /proc/thread-self and /proc/<fiberd's pid> are fiberd's own process, not
 * the submitter's: for a submitter other than root a file under them is refused with
 * -EACCES (checked on the file opened, so a symlink to one is refused too).
 *
 * The file is opened O_NONBLOCK and fstat()ed: unless the caller asked for O_NONBLOCK
 * itself (it then promises to wait with host->wait_fd), anything but a regular file or a
 * directory — a FIFO, a socket, a device — is refused with -EINVAL, and O_NONBLOCK is
 * cleared again on what is kept. So a FIFO can neither block an opener thread in open(2)
 * nor a job worker in read(2).
 *
 * Identity: when fiberd runs as root, or holds CAP_SETUID and CAP_SETGID, every open
 * takes the client's uid, gid and supplementary groups. Otherwise it cannot switch: it
 * opens as itself for a client of its own uid and refuses every other uid with -EACCES
 * (a per-user fiberd serves its user; it never lends that user's files to others).
 *
 * The calling fiber parks on a FiberEvent the opener thread sets, so a slow open (NFS,
 * FUSE) holds an opener thread, never a job worker. A job cancelled while it waits gets
 * -ECANCELED at once; the opener closes the fd it opens later.
 *
 * Inline opens: the hand-off costs two thread wake-ups, more than the open of a cached
 * path itself. So an open that cannot wait is done in the calling fiber's worker: a
 * read-only open (no O_CREAT, O_TRUNC) of an absolute path by a client whose identity is
 * fiberd's own (no credentials to change: root's jobs on a root fiberd, a per-user
 * fiberd's own user), with openat2(RESOLVE_CACHED | RESOLVE_NO_XDEV), when the root
 * mount is ext2/3/4, xfs, btrfs, f2fs or tmpfs (checked at start; not overlayfs, whose
 * layers may be remote). The path is
 * then looked up in the dentry cache only, and must stay on the root mount, whose open
 * does not ask a server; a lookup that would read from disk (EAGAIN) or leave the mount
 * (EXDEV: /proc, NFS, FUSE, a bind mount) goes to an opener thread as above. The same
 * checks follow either way. As with io_uring's inline IORING_OP_OPENAT, what the open
 * itself does after the lookup can still take time: a fanotify permission listener
 * (root's), IMA appraisal or fs-verity reading the disk, the driver of a device node
 * that lies on the root mount outside /dev.
 */
#ifndef FIBERD_DAEMON_OPENER_H
#define FIBERD_DAEMON_OPENER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/server/creds.h"

/* Opener threads started by opener_start(0). */
#define OPENER_THREADS_DEFAULT 4

/*
 * opener_start - start @threads opener threads (0: OPENER_THREADS_DEFAULT) and find out
 * whether they may switch credentials. Return: 0; -errno of pthread_create.
 * Context: main thread at start-up, before any job runs.
 */
int opener_start(unsigned threads);

/*
 * opener_stop - stop and join the opener threads. Requests still queued are answered
 * -ESHUTDOWN. Context: main thread at exit, once no job runs.
 */
void opener_stop(void);

/*
 * opener_open - open @path (absolute, or relative to fiberd's working directory, which
 * is /) with @flags (open(2)'s; O_CLOEXEC and O_NOCTTY are added, O_CREAT makes mode
 * 0666 & ~umask files) as @creds.
 * @ret_fd: out, an fd the caller owns, written only on success.
 * Return: 0; -errno of openat2(2)/openat(2) (-ENOENT, -EACCES, -ELOOP for a symlink
 * loop or a magic link, ...); -EACCES for a file of fiberd's own process under /proc
 * (a submitter other than root); -EINVAL for a FIFO,
 * socket or device when @flags lacks O_NONBLOCK; -EACCES when fiberd cannot switch to
 * @creds; -ECANCELED when the calling fiber is cancelled while it waits; -ESHUTDOWN
 * when the openers are stopped; -ENOMEM.
 * Context: a fiber (parks it, never its worker; an inline open, above, runs in the
 * worker without parking); or a plain thread (blocks it).
 */
int opener_open(const Creds *creds, const char *path, int flags, int *ret_fd);

/*
 * opener_openat - opener_open() for plugin code's own open(), openat(), creat() and
 * fopen() (the runtime's hooks, sched_hook_set_open()): @path relative to @dirfd
 * (AT_FDCWD: fiberd's working directory, /), created with @mode & ~umask, and with
 * @any_type a FIFO, socket or device opened without O_NONBLOCK is kept (opened
 * non-blocking, then made blocking again: the hooks park the fiber on it instead of
 * its worker; a FIFO opened for writing with no reader fails with ENXIO instead of
 * waiting for one). Return and context: as opener_open().
 */
int opener_openat(const Creds *creds, int dirfd, const char *path, int flags, mode_t mode,
                  bool any_type, int *ret_fd);

/* What opener_stats() reports. */
typedef struct OpenerStats {
        bool inline_enabled;   /* inline opens are possible here (see above) */
        uint64_t inline_opens; /* since start: opens done in the caller's worker */
        uint64_t thread_opens; /* since start: opens done by an opener thread */
} OpenerStats;

/* opener_stats - the counters above. Context: any thread. */
void opener_stats(OpenerStats *ret);

#endif
