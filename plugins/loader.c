/* SPDX-License-Identifier: MIT */
/*
 * loader.c — fiberd's plugin loader: scan a directory, load each "*.so" through a
 * versioned handshake, watch the directory with inotify, remember refusals.
 *
 * The handshake follows redis's moduleLoad(): dlopen(RTLD_NOW | RTLD_LOCAL) so that a
 * missing symbol fails now rather than in the middle of a job and two plugins' symbols
 * never collide; dlsym() of the one descriptor symbol; the ABI version read before any
 * other member; then the plugin's own init(). Every way of failing is one log line
 * "plugin file PATH refused: REASON" and one PluginRefusal (per path, latest wins,
 * capped), and the file is dlclose()d again; the daemon keeps running.
 *
 * Two locks. scan_lock serializes the operations that load (set_dir, scan, event
 * processing, load_file), so the daemon's SIGHUP fiber and its watcher fiber may call
 * them at the same time; it is held across dlopen() and init(), which never yield, and
 * nothing else ever waits for it. The state lock below is the one lookups take.
 *
 * State: loaded plugins in load order (an array of pointers, so LoadedPlugin addresses
 * stay put while the array grows) and the refusals, both under one pthread mutex. The
 * mutex is only held to look up or change those arrays — never across dlopen(), init()
 * or logging — so lookups from request fibers stay short, and a plain mutex (rather than
 * a FiberMutex) keeps the loader independent of the runtime: it blocks a worker for
 * microseconds at most and never while a fiber could switch.
 *
 * Watching: inotify with IN_CLOSE_WRITE (a file written in place: cp, install, a linker)
 * and IN_MOVED_TO (renamed into the directory: mv, editors, package managers). The watch
 * is added before a scan so nothing dropped in during the scan is missed; a file seen
 * twice loads once (the second time its path is already loaded). IN_Q_OVERFLOW means
 * events were lost: rescan.
 *
 * Plugins in place: an instance is current (found by name) until its file is
 * replaced or removed, then retired; jobs hold references (loader_acquire()), the
 * loader one on each current instance. The last release of a retired instance only
 * pokes an eventfd: loader_reap(), on the loading thread, runs fini() and dlclose(), so
 * a job fiber never runs another plugin's fini() or glibc's unmapping. A replacement is
 * dlopen()ed from a memfd copy (/proc/self/fd/N, the fd kept open while mapped):
 * glibc's dlopen() first matches an already loaded object by name, then by device and
 * inode, and would hand back the old code otherwise. LoadedPlugin structs are freed
 * only by loader_free(), so pointers kept in job records never dangle (a few hundred
 * bytes per replacement); the descriptor is read only under a reference.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "plugins/elfcheck.h"
#include "plugins/loader.h"
#include "scheduler/base/time-util.h"

#define LOADER_REFUSALS_MAX 256 /* refusals remembered; the oldest go first */
#define LOADER_REASON_MAX 512

struct PluginLoader {
        pthread_mutex_t scan_lock; /* one loading operation at a time; dir, wd */
        pthread_mutex_t lock;      /* guards loaded[] and refused[] */
        const FiberdHost *host;    /* borrowed */
        LoaderLogFn log;
        int inotify_fd;
        int wd;    /* watch descriptor of dir, -1 when nothing is watched */
        char *dir; /* the watched directory; NULL before loader_set_dir() */

        LoadedPlugin **loaded; /* load order */
        size_t n_loaded, cap_loaded;

        PluginRefusal *refused; /* insertion order */
        size_t n_refused, cap_refused;

        LoaderGuard guard; /* crash-only plugins (loader_set_guard()) */

        /* plugins in place, under lock */
        LoadedPlugin **retired; /* replaced or removed instances, unloaded or draining */
        size_t n_retired, cap_retired;
        int reap_fd; /* eventfd: a retired instance lost its last reference */
};

/* ------------------------------------------------------------------ logging ------- */

static void loader_logf(PluginLoader *l, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void loader_logf(PluginLoader *l, int level, const char *fmt, ...)
{
        char msg[LOADER_REASON_MAX + PATH_MAX];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (l->log)
                l->log(level, msg);
        else
                fprintf(stderr, "<%d>plugins: %s\n", level & 7, msg);
}

static uint64_t loader_now_ns(void)
{
        return clock_now_ns(CLOCK_MONOTONIC);
}

/* ------------------------------------------------------------------ lists (locked) - */

static LoadedPlugin *find_name_locked(PluginLoader *l, const char *name, size_t len)
{
        for (size_t i = 0; i < l->n_loaded; i++) {
                const char *n = l->loaded[i]->name;
                if (strlen(n) == len && memcmp(n, name, len) == 0)
                        return l->loaded[i];
        }
        return NULL;
}

static LoadedPlugin *find_path_locked(PluginLoader *l, const char *path)
{
        for (size_t i = 0; i < l->n_loaded; i++)
                if (strcmp(l->loaded[i]->path, path) == 0)
                        return l->loaded[i];
        return NULL;
}

static void forget_refusal_locked(PluginLoader *l, const char *path)
{
        for (size_t i = 0; i < l->n_refused; i++) {
                if (strcmp(l->refused[i].path, path) != 0)
                        continue;
                free(l->refused[i].path);
                free(l->refused[i].reason);
                memmove(&l->refused[i], &l->refused[i + 1],
                        (l->n_refused - i - 1) * sizeof(l->refused[0]));
                l->n_refused--;
                return;
        }
}

/* Records @path → @reason, replacing an older reason for the same path. */
static int remember_refusal(PluginLoader *l, const char *path, const char *reason)
{
        char *p = strdup(path), *r = strdup(reason);
        int ret = 0;

        if (!p || !r) {
                free(p);
                free(r);
                return -ENOMEM;
        }
        pthread_mutex_lock(&l->lock);
        forget_refusal_locked(l, path);
        if (l->n_refused == LOADER_REFUSALS_MAX) {
                free(l->refused[0].path);
                free(l->refused[0].reason);
                memmove(&l->refused[0], &l->refused[1], (l->n_refused - 1) * sizeof(l->refused[0]));
                l->n_refused--;
        }
        if (l->n_refused == l->cap_refused) {
                size_t cap = l->cap_refused ? 2 * l->cap_refused : 8;
                PluginRefusal *n = realloc(l->refused, cap * sizeof(*n));
                if (!n) {
                        ret = -ENOMEM;
                        goto out_unlock;
                }
                l->refused = n;
                l->cap_refused = cap;
        }
        l->refused[l->n_refused].path = p;
        l->refused[l->n_refused].reason = r;
        l->n_refused++;
        p = r = NULL;
out_unlock:
        pthread_mutex_unlock(&l->lock);
        free(p);
        free(r);
        return ret;
}

/* ------------------------------------------------------------------ one file ------- */

/* The descriptor member @m is inside what the plugin's size says it has. */
#define DESC_HAS(d, m) ((d)->size >= offsetof(FiberdPlugin, m) + sizeof((d)->m))

static bool name_valid(const char *name)
{
        size_t n = 0;

        if (!name)
                return false;
        for (; name[n]; n++) {
                char c = name[n];
                if (n >= FIBERD_PLUGIN_NAME_MAX)
                        return false;
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
                        return false;
        }
        return n > 0;
}

/* "*.so", not hidden: the files a scan or an event considers. */
static bool candidate_name(const char *name)
{
        size_t n = strlen(name);

        return name[0] != '.' && n > 3 && strcmp(name + n - 3, ".so") == 0;
}

/* Logs and records a refusal of @path; returns @err. */
static int refuse(PluginLoader *l, const char *path, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int refuse(PluginLoader *l, const char *path, int err, const char *fmt, ...)
{
        char reason[LOADER_REASON_MAX];
        va_list ap;
        int r;

        va_start(ap, fmt);
        vsnprintf(reason, sizeof(reason), fmt, ap);
        va_end(ap);
        loader_logf(l, LOG_WARNING, "plugin file %s refused: %s", path, reason);
        r = remember_refusal(l, path, reason);
        return r < 0 ? r : err;
}

/* ------------------------------------------------------------------ in place ------ */

static void file_id_of(const struct stat *st, uint64_t id[4])
{
        id[0] = (uint64_t)st->st_dev;
        id[1] = (uint64_t)st->st_ino;
        id[2] = (uint64_t)st->st_size;
        id[3] = timespec_load_ns(&st->st_mtim);
}

/* True when the current instance loaded from @path was loaded from this very file
 * (same device, inode, size and mtime): nothing to do for it. */
static bool path_unchanged(PluginLoader *l, const char *path)
{
        uint64_t id[4];
        struct stat st;
        bool same;

        if (stat(path, &st) < 0)
                return false;
        file_id_of(&st, id);
        pthread_mutex_lock(&l->lock);
        {
                const LoadedPlugin *p = find_path_locked(l, path);
                same = p && memcmp(p->file_id, id, sizeof(id)) == 0;
        }
        pthread_mutex_unlock(&l->lock);
        return same;
}

/* True when an instance still mapped (current, or retired and not unloaded) came from
 * @path or from the inode @st names: dlopen(@path) would hand back its mapping. */
static bool mapped_locked(PluginLoader *l, const char *path, const struct stat *st)
{
        for (size_t i = 0; i < l->n_loaded + l->n_retired; i++) {
                const LoadedPlugin *p =
                        i < l->n_loaded ? l->loaded[i] : l->retired[i - l->n_loaded];
                if (p->unloaded)
                        continue;
                if (strcmp(p->path, path) == 0 || (p->file_id[0] == (uint64_t)st->st_dev &&
                                                   p->file_id[1] == (uint64_t)st->st_ino))
                        return true;
        }
        return false;
}

/*
 * Marks the instances mapped straight from the inode @st names whose size or mtime
 * changed: the file was written in place (cp onto it), so the pages they run from now
 * hold other code. Their fini() and dlclose() would run that code: skipped.
 */
static void mark_overwritten_locked(PluginLoader *l, const struct stat *st)
{
        uint64_t id[4];

        file_id_of(st, id);
        for (size_t i = 0; i < l->n_loaded + l->n_retired; i++) {
                LoadedPlugin *p = i < l->n_loaded ? l->loaded[i] : l->retired[i - l->n_loaded];
                if (!p->unloaded && p->copy_fd < 0 && p->file_id[0] == id[0] &&
                    p->file_id[1] == id[1] && memcmp(p->file_id, id, sizeof(id)) != 0)
                        p->overwritten = true;
        }
}

/* A memfd holding a copy of the contents of @trusted_fd (the file open_trusted()
 * checked; its offset is not moved); its fd, or -errno. */
static int copy_to_memfd(int trusted_fd)
{
        struct stat st;
        int in, fd, e;

        in = dup(trusted_fd);
        if (in < 0)
                return -errno;
        fd = memfd_create("fiberd-plugin", MFD_CLOEXEC);
        if (fd < 0 || fstat(in, &st) < 0)
                goto out_fail;
        for (off_t off = 0; off < st.st_size;) {
                ssize_t n = sendfile(fd, in, &off, (size_t)(st.st_size - off));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (n == 0)
                                errno = EIO;
                        goto out_fail;
                }
        }
        close(in);
        return fd;

out_fail:
        e = errno;
        if (fd >= 0)
                close(fd);
        close(in);
        return -e;
}

/*
 * dlopen() the file open_trusted() checked and opened as @trusted_fd (through
 * /proc/self/fd/N: what was checked is what is mapped), or a private copy of it when a
 * mapped instance has its path or inode (a replacement: glibc would hand back the old
 * mapping). *@ret_copy_fd: the memfd to keep open while mapped, or -1.
 * NULL with *@err set (dlerror()'s text) when it fails.
 */
static void *open_instance(PluginLoader *l, const char *path, int trusted_fd, int *ret_copy_fd,
                           char *err, size_t err_size)
{
        char alias[64];
        struct stat st;
        bool mapped;
        void *handle;
        int fd;

        *ret_copy_fd = -1;
        if (fstat(trusted_fd, &st) < 0) {
                snprintf(err, err_size, "cannot stat: %s", strerror(errno));
                return NULL;
        }
        pthread_mutex_lock(&l->lock);
        mapped = mapped_locked(l, path, &st);
        mark_overwritten_locked(l, &st);
        pthread_mutex_unlock(&l->lock);
        dlerror();
        if (!mapped) {
                snprintf(alias, sizeof(alias), "/proc/self/fd/%d", trusted_fd);
                handle = dlopen(alias, RTLD_NOW | RTLD_LOCAL);
        } else {
                fd = copy_to_memfd(trusted_fd);
                if (fd < 0) {
                        snprintf(err, err_size, "cannot copy the new version: %s", strerror(-fd));
                        return NULL;
                }
                snprintf(alias, sizeof(alias), "/proc/self/fd/%d", fd);
                handle = dlopen(alias, RTLD_NOW | RTLD_LOCAL);
                if (handle)
                        *ret_copy_fd = fd;
                else
                        close(fd);
        }
        if (!handle) {
                const char *e = dlerror();
                snprintf(err, err_size, "dlopen failed: %s", e ? e : "unknown error");
        }
        return handle;
}

/* Takes @p out of loaded[] into retired[] (room reserved by the caller). */
static void retire_locked(PluginLoader *l, LoadedPlugin *p)
{
        for (size_t i = 0; i < l->n_loaded; i++) {
                if (l->loaded[i] != p)
                        continue;
                memmove(&l->loaded[i], &l->loaded[i + 1], (l->n_loaded - i - 1) * sizeof(p));
                l->n_loaded--;
                break;
        }
        __atomic_store_n(&p->retired, true, __ATOMIC_RELEASE); /* read without the lock too */
        l->retired[l->n_retired++] = p;
}

/* Room for one more retired instance. */
static int reserve_retired_locked(PluginLoader *l)
{
        if (l->n_retired == l->cap_retired) {
                size_t cap = l->cap_retired ? 2 * l->cap_retired : 8;
                LoadedPlugin **n = realloc(l->retired, cap * sizeof(*n));
                if (!n)
                        return -ENOMEM;
                l->retired = n;
                l->cap_retired = cap;
        }
        return 0;
}

static LoadedPlugin *instance_free(LoadedPlugin *p)
{
        if (!p)
                return NULL;
        free(p->name);
        free(p->version);
        free(p->description);
        free(p->path);
        free(p);
        return NULL;
}

/* fini() and dlclose() @p (the loader's thread, no lock held). */
static void instance_unload(PluginLoader *l, LoadedPlugin *p)
{
        if (__atomic_load_n(&p->overwritten, __ATOMIC_RELAXED)) {
                loader_logf(l, LOG_WARNING,
                            "plugin %s %s: %s was overwritten in place, so its code is gone; "
                            "left mapped without fini() (install new versions with install(1) "
                            "or mv, never cp onto the loaded file)",
                            p->name, p->version, p->path);
                return;
        }
        if (DESC_HAS(p->desc, fini) && p->desc->fini)
                p->desc->fini(l->host);
        dlclose(p->handle);
        if (p->copy_fd >= 0)
                close(p->copy_fd);
        p->copy_fd = -1;
        if (p->fd >= 0)
                close(p->fd); /* the checked file (open_trusted()) */
        p->fd = -1;
}

/* Unloads every retired instance without references; under scan_lock. */
static int reap_locked(PluginLoader *l)
{
        uint64_t n;
        int unloaded = 0;

        while (read(l->reap_fd, &n, sizeof(n)) < 0 && errno == EINTR)
                ;
        for (;;) {
                LoadedPlugin *p = NULL;

                pthread_mutex_lock(&l->lock);
                for (size_t i = 0; i < l->n_retired && !p; i++)
                        if (!l->retired[i]->unloaded &&
                            __atomic_load_n(&l->retired[i]->refs, __ATOMIC_ACQUIRE) == 0)
                                p = l->retired[i];
                if (p)
                        p->unloaded = true; /* claimed: no lookup returns it any more */
                pthread_mutex_unlock(&l->lock);
                if (!p)
                        return unloaded;
                instance_unload(l, p);
                loader_logf(l, LOG_INFO, "plugin %s %s (from %s) unloaded: its last job ended",
                            p->name, p->version, p->path);
                unloaded++;
        }
}

/* Retires the current instance from @path; under scan_lock. */
static int remove_path_locked(PluginLoader *l, const char *path)
{
        LoadedPlugin *p;
        int r;

        pthread_mutex_lock(&l->lock);
        p = find_path_locked(l, path);
        r = p ? reserve_retired_locked(l) : -ENOENT;
        if (r == 0)
                retire_locked(l, p);
        pthread_mutex_unlock(&l->lock);
        if (r < 0)
                return r;
        loader_logf(l, LOG_INFO,
                    "plugin %s %s removed (%s is gone): new jobs get NOT_FOUND; unloading once "
                    "its running jobs end",
                    p->name, p->version, path);
        loader_release(l, p);
        return 0;
}

/* Retires the instances loaded from l->dir whose file is gone (a scan). */
static void retire_vanished_locked(PluginLoader *l)
{
        size_t dlen = strlen(l->dir);

        for (;;) {
                char path[PATH_MAX] = "";
                struct stat st;

                pthread_mutex_lock(&l->lock);
                for (size_t i = 0; i < l->n_loaded && !path[0]; i++) {
                        const char *pp = l->loaded[i]->path;
                        if (strncmp(pp, l->dir, dlen) == 0 && pp[dlen] == '/' &&
                            !strchr(pp + dlen + 1, '/') && stat(pp, &st) < 0 && errno == ENOENT)
                                snprintf(path, sizeof(path), "%s", pp);
                }
                pthread_mutex_unlock(&l->lock);
                if (!path[0] || remove_path_locked(l, path) < 0)
                        return;
        }
}

/*
 * Appends @p to loaded[] unless its name is taken by an instance from another path;
 * then @dup_path gets the holder's path. The current instance from @p's path, if any,
 * is retired and returned in *@ret_old (the caller drops the loader's reference).
 */
static int insert_loaded(PluginLoader *l, LoadedPlugin *p, char *dup_path, size_t dup_size,
                         LoadedPlugin **ret_old)
{
        LoadedPlugin *other, *old;
        int r = 0;

        *ret_old = NULL;
        pthread_mutex_lock(&l->lock);
        old = find_path_locked(l, p->path);
        other = find_name_locked(l, p->name, strlen(p->name));
        if (other && other != old) {
                snprintf(dup_path, dup_size, "%s", other->path);
                r = -EEXIST;
                goto out_unlock;
        }
        if (l->n_loaded == l->cap_loaded) {
                size_t cap = l->cap_loaded ? 2 * l->cap_loaded : 8;
                LoadedPlugin **n = realloc(l->loaded, cap * sizeof(*n));
                if (!n) {
                        r = -ENOMEM;
                        goto out_unlock;
                }
                l->loaded = n;
                l->cap_loaded = cap;
        }
        if (old) {
                r = reserve_retired_locked(l);
                if (r < 0)
                        goto out_unlock;
                retire_locked(l, old);
                *ret_old = old;
        }
        l->loaded[l->n_loaded++] = p;
        forget_refusal_locked(l, p->path);
out_unlock:
        pthread_mutex_unlock(&l->lock);
        return r;
}

/* ------------------------------------------------------------------ trust -------- */

/*
 * Whether the files of a plugin directory can be trusted: plugins are code that runs
 * with fiberd's privileges, so nobody but root and fiberd's own user may be able to
 * change them — the checks sshd's StrictModes and sudo make. Each returns 0 or fills
 * @why (a refusal reason) and returns a negative errno.
 */
static bool owner_trusted(uid_t uid)
{
        return uid == 0 || uid == geteuid();
}

/* @st (of @what, named @name) is owned by root or fiberd's user and writable by no one
 * else; @sticky_ok: a sticky directory writable by others is fine (/tmp as a parent). */
static int trust_stat(const struct stat *st, const char *what, const char *name, bool sticky_ok,
                      char *why, size_t size)
{
        if (!owner_trusted(st->st_uid)) {
                snprintf(why, size,
                         "%s %.256s is owned by uid %u, not by root or fiberd's user (uid %u)",
                         what, name, (unsigned)st->st_uid, (unsigned)geteuid());
                return -EPERM;
        }
        if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(sticky_ok && (st->st_mode & S_ISVTX))) {
                snprintf(why, size,
                         "%s %.256s is writable by %s (mode %04o); only root or fiberd's user may "
                         "be able to change plugins",
                         what, name, (st->st_mode & S_IWOTH) ? "everyone" : "its group",
                         (unsigned)(st->st_mode & 07777));
                return -EPERM;
        }
        return 0;
}

/* @dir (resolved, absolute) and every directory above it. */
static int trust_dirs(const char *dir, char *why, size_t size)
{
        char p[PATH_MAX];
        struct stat st;
        int r;

        snprintf(p, sizeof(p), "%s", dir);
        for (bool first = true;; first = false) {
                char *slash;

                if (stat(p, &st) < 0) {
                        r = -errno;
                        snprintf(why, size, "cannot stat directory %.256s: %s", p, strerror(-r));
                        return r;
                }
                r = trust_stat(&st, first ? "plugin directory" : "directory", p, !first, why, size);
                if (r < 0)
                        return r;
                if (strcmp(p, "/") == 0)
                        return 0;
                slash = strrchr(p, '/');
                if (slash == p)
                        slash[1] = '\0';
                else
                        *slash = '\0';
        }
}

/*
 * Opens @path for dlopen() once it passed every check: its directory and the ones above
 * are trusted (trust_dirs()), a symlink stays inside that directory, and the file
 * opened — O_NOFOLLOW, then fstat() of that very inode — is a regular file owned by root
 * or fiberd's user and writable by no one else. dlopen() then maps that inode through
 * /proc/self/fd, so a file swapped in after the checks is never the one loaded.
 * @ret_fd: out, written only on success. Return: 0; a negative errno with @why filled.
 */
static int open_trusted(const char *path, int *ret_fd, char *why, size_t size)
{
        char dir[PATH_MAX], realdir[PATH_MAX], target[PATH_MAX];
        const char *base, *open_path = path;
        struct stat st;
        size_t n;
        int fd, r;

        if (strlen(path) >= sizeof(dir)) {
                snprintf(why, size, "its path is longer than %zu bytes", sizeof(dir) - 1);
                return -ENAMETOOLONG;
        }
        memcpy(dir, path, strlen(path) + 1);
        base = strrchr(path, '/') + 1; /* load_file() made sure there is a '/' */
        dir[base - path - 1 > 0 ? base - path - 1 : 1] = '\0';
        if (!realpath(dir, realdir)) {
                r = -errno;
                snprintf(why, size, "cannot resolve its directory %.256s: %s", dir, strerror(-r));
                return r;
        }
        r = trust_dirs(realdir, why, size);
        if (r < 0)
                return r;
        if (lstat(path, &st) < 0) {
                r = -errno;
                snprintf(why, size, "cannot stat: %s", strerror(-r));
                return r;
        }
        if (S_ISLNK(st.st_mode)) {
                if (!realpath(path, target)) {
                        snprintf(why, size, "a symlink that does not resolve: %s", strerror(errno));
                        return -errno;
                }
                n = strlen(realdir);
                if (strncmp(target, realdir, n) != 0 || (target[n] != '/' && n > 1)) {
                        snprintf(why, size,
                                 "a symlink to %.200s, outside the plugin directory %.200s", target,
                                 realdir);
                        return -EPERM;
                }
                open_path = target;
        }
        fd = open(open_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                snprintf(why, size, "cannot open: %s", strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                snprintf(why, size, "cannot stat: %s", strerror(-r));
                goto out_close;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(why, size, "not a regular file");
                r = -ENOEXEC;
                goto out_close;
        }
        r = trust_stat(&st, "file", open_path, false, why, size);
        if (r < 0)
                goto out_close;
        *ret_fd = fd;
        return 0;

out_close:
        close(fd);
        return r;
}

void loader_set_guard(PluginLoader *l, const LoaderGuard *g)
{
        l->guard = *g;
}

static int load_opened(PluginLoader *l, const char *path, int fd);

/*
 * Loads @path. A path already loaded from the same, unchanged file is skipped silently
 * (-EEXIST); a changed one replaces its instance. The steps before dlopen(), in order:
 * the file is a regular file; open_trusted() (ownership and modes; the fd is the inode
 * mapped); elfcheck_fd() (a file dlopen() would fault on: cut short, another machine's);
 * the guard's before() (quarantine; the store notes the load on disk). Then
 * load_opened(), and the guard's after() once before() let it through.
 */
static int load_file(PluginLoader *l, const char *path)
{
        char why[LOADER_REASON_MAX] = "";
        const LoadedPlugin *p;
        struct stat st;
        int fd = -1, r;

        /* plugins in place: only a changed file at a loaded path loads again */
        if (path_unchanged(l, path))
                return -EEXIST;

        if (stat(path, &st) < 0) {
                int e = errno;
                return refuse(l, path, -e, "cannot stat: %s", strerror(e));
        }
        if (!S_ISREG(st.st_mode))
                return refuse(l, path, -ENOEXEC, "not a regular file");

        /* Without a '/', dlopen() would search the library path instead. */
        if (!strchr(path, '/')) {
                char rel[PATH_MAX];
                snprintf(rel, sizeof(rel), "./%s", path);
                return load_file(l, rel);
        }

        /* every check before dlopen(), which already runs the plugin's constructors */
        r = open_trusted(path, &fd, why, sizeof(why));
        if (r < 0)
                return refuse(l, path, r, "%s", why);
        r = elfcheck_fd(fd, why, sizeof(why));
        if (r < 0) {
                close(fd);
                return refuse(l, path, r, "not a loadable ELF shared object: %s", why);
        }
        if (!l->guard.before)
                return load_opened(l, path, fd);
        if (fstat(fd, &st) < 0) {
                r = -errno;
                close(fd);
                return refuse(l, path, r, "cannot stat: %s", strerror(-r));
        }
        why[0] = '\0';
        r = l->guard.before(l->guard.arg, path, fd, &st, why, sizeof(why));
        if (r < 0) {
                close(fd);
                return refuse(l, path, r, "%s", why[0] ? why : strerror(-r));
        }
        r = load_opened(l, path, fd);
        pthread_mutex_lock(&l->lock);
        p = r == 0 ? find_path_locked(l, path) : NULL;
        pthread_mutex_unlock(&l->lock);
        if (l->guard.after) /* the name is the loader's copy: fine after unlocking */
                l->guard.after(l->guard.arg, path, p ? p->name : NULL);
        return r;
}

/* The loader's copies of @d's strings and flags, and @path's identity, into @p. */
static int instance_fill(LoadedPlugin *p, const FiberdPlugin *d, const char *path)
{
        struct stat st;

        Dl_info info;

        p->refs = 1; /* the loader's, while current */
        p->desc = d;
        if (dladdr(d, &info) && info.dli_fbase)
                p->base = info.dli_fbase;
        p->flags = DESC_HAS(d, flags) ? d->flags : 0;
        p->max_attempts = DESC_HAS(d, max_attempts) && d->max_attempts ? d->max_attempts : 1;
        if (p->max_attempts > 100)
                p->max_attempts = 100;
        if (stat(path, &st) == 0)
                file_id_of(&st, p->file_id);
        p->path = strdup(path);
        p->name = strdup(d->name);
        p->version = strdup(d->version ? d->version : "");
        p->description = strdup(d->description ? d->description : "");
        return p->path && p->name && p->version && p->description ? 0 : -ENOMEM;
}

/* dlopen() the checked file open as @fd (owned: kept while loaded, else closed) and
 * make the handshake: descriptor, ABI version, size, name, run, duplicate name, init(). */
static int load_opened(PluginLoader *l, const char *path, int fd)
{
        char dup_path[PATH_MAX];
        char why[LOADER_REASON_MAX];
        const FiberdPlugin *d;
        LoadedPlugin *p = NULL, *old = NULL;
        void *handle;
        bool loaded;
        int copy_fd, r;

        /* the fd stays open while the plugin is loaded: glibc knows a library by its
         * name, and /proc/self/fd/N must not name two at once */
        handle = open_instance(l, path, fd, &copy_fd, why, sizeof(why));
        if (!handle) {
                close(fd);
                return refuse(l, path, -ENOEXEC, "%s", why);
        }

        d = dlsym(handle, FIBERD_PLUGIN_SYMBOL);
        if (!d) {
                r = refuse(l, path, -ENOEXEC,
                           "no descriptor: the symbol " FIBERD_PLUGIN_SYMBOL
                           " is not exported (define it with FIBERD_PLUGIN_EXPORT)");
                goto out_close;
        }
        if (d->abi_version < FIBERD_PLUGIN_ABI_MIN || d->abi_version > FIBERD_PLUGIN_ABI_VERSION) {
                r = refuse(l, path, -EPROTO,
                           "ABI version %u, fiberd speaks %u to %u (rebuild it against this "
                           "fiberd's fiberd/plugin.h)",
                           d->abi_version, FIBERD_PLUGIN_ABI_MIN, FIBERD_PLUGIN_ABI_VERSION);
                goto out_close;
        }
        if (!DESC_HAS(d, run)) {
                r = refuse(l, path, -EPROTO, "descriptor too small (%u bytes)", d->size);
                goto out_close;
        }
        if (!name_valid(d->name)) {
                r = refuse(l, path, -EINVAL,
                           "invalid plugin name \"%.40s\" (want 1 to %d of [a-z0-9_-])",
                           d->name ? d->name : "(null)", FIBERD_PLUGIN_NAME_MAX);
                goto out_close;
        }
        if (!d->run) {
                r = refuse(l, path, -EINVAL, "plugin %s has no run function", d->name);
                goto out_close;
        }

        pthread_mutex_lock(&l->lock);
        {
                LoadedPlugin *other = find_name_locked(l, d->name, strlen(d->name));
                if (other && strcmp(other->path, path) == 0)
                        other = NULL; /* its replacement */
                if (other)
                        snprintf(dup_path, sizeof(dup_path), "%s", other->path);
                loaded = other != NULL;
        }
        pthread_mutex_unlock(&l->lock);
        if (loaded) {
                r = refuse(l, path, -EEXIST, "duplicate name \"%s\": already loaded from %s",
                           d->name, dup_path);
                goto out_close;
        }

        p = calloc(1, sizeof(*p));
        if (!p) {
                r = -ENOMEM;
                goto out_close;
        }
        r = instance_fill(p, d, path);
        if (r < 0)
                goto out_free;
        p->handle = handle;
        p->copy_fd = copy_fd;
        p->fd = fd;

        if (DESC_HAS(d, init) && d->init) {
                why[0] = '\0';
                r = d->init(l->host, why, sizeof(why));
                if (r < 0) {
                        why[sizeof(why) - 1] = '\0';
                        r = refuse(l, path, r, "init of plugin %s failed: %s", d->name,
                                   why[0] ? why : strerror(-r));
                        goto out_free;
                }
        }

        p->loaded_ns = loader_now_ns();
        r = insert_loaded(l, p, dup_path, sizeof(dup_path), &old);
        if (r < 0) {
                /* Lost a race with another loader of the same name, or out of memory. */
                if (DESC_HAS(d, fini) && d->fini)
                        d->fini(l->host);
                if (r == -EEXIST)
                        r = refuse(l, path, -EEXIST,
                                   "duplicate name \"%s\": already loaded from %s", d->name,
                                   dup_path);
                goto out_free;
        }
        if (old) {
                loader_logf(l, LOG_INFO,
                            "plugin %s %s loaded from %s, replacing %s %s: new jobs run the "
                            "new version, running ones finish on the old",
                            p->name, p->version, path, old->name, old->version);
                /* unloaded by the caller's reap_locked(), outside the guard's window,
                 * so a crash in its fini() is not blamed on the new file */
                loader_release(l, old);
        } else {
                loader_logf(l, LOG_INFO, "plugin %s %s loaded from %s", p->name, p->version, path);
        }
        return 0;

out_free:
        instance_free(p);
out_close:
        dlclose(handle);
        if (copy_fd >= 0)
                close(copy_fd);
        close(fd);
        return r;
}

/* ------------------------------------------------------------------ scanning ------- */

static int filter_candidate(const struct dirent *e)
{
        return candidate_name(e->d_name);
}

/* Drops refusals whose file is gone (a scan's view of the directory is authoritative). */
static void forget_vanished(PluginLoader *l)
{
        struct stat st;

        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < l->n_refused;) {
                if (stat(l->refused[i].path, &st) < 0 && errno == ENOENT) {
                        free(l->refused[i].path);
                        free(l->refused[i].reason);
                        memmove(&l->refused[i], &l->refused[i + 1],
                                (l->n_refused - i - 1) * sizeof(l->refused[0]));
                        l->n_refused--;
                } else {
                        i++;
                }
        }
        pthread_mutex_unlock(&l->lock);
}

/* Loads every candidate in l->dir, in name order (so which duplicate wins is stable). */
static int scan_dir(PluginLoader *l)
{
        struct dirent **entries;
        int n, loaded = 0;

        forget_vanished(l);
        retire_vanished_locked(l);
        n = scandir(l->dir, &entries, filter_candidate, alphasort);
        if (n < 0) {
                int e = errno;
                loader_logf(l, LOG_WARNING, "cannot read plugin directory %s: %s", l->dir,
                            strerror(e));
                return -e;
        }
        for (int i = 0; i < n; i++) {
                char path[PATH_MAX];
                int len = snprintf(path, sizeof(path), "%s/%s", l->dir, entries[i]->d_name);
                struct stat st;

                if (len < (int)sizeof(path) && stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
                    load_file(l, path) == 0)
                        loaded++;
                free(entries[i]);
        }
        free(entries);
        reap_locked(l);
        return loaded;
}

/* ------------------------------------------------------------------ public --------- */

int loader_new(PluginLoader **ret, const FiberdHost *host, LoaderLogFn log)
{
        PluginLoader *l;
        int r;

        if (!ret || !host)
                return -EINVAL;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (l->inotify_fd < 0) {
                r = -errno;
                goto out_free;
        }
        r = pthread_mutex_init(&l->lock, NULL);
        if (r) {
                r = -r;
                goto out_close;
        }
        r = pthread_mutex_init(&l->scan_lock, NULL);
        if (r) {
                r = -r;
                goto out_destroy_lock;
        }
        l->reap_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (l->reap_fd < 0) {
                r = -errno;
                goto out_destroy_scan_lock;
        }
        l->host = host;
        l->log = log;
        l->wd = -1;
        *ret = l;
        return 0;

out_destroy_scan_lock:
        pthread_mutex_destroy(&l->scan_lock);
out_destroy_lock:
        pthread_mutex_destroy(&l->lock);
out_close:
        close(l->inotify_fd);
out_free:
        free(l);
        return r;
}

static int set_dir_locked(PluginLoader *l, const char *dir)
{
        char *copy;
        int wd;

        copy = strdup(dir);
        if (!copy)
                return -ENOMEM;
        /* Strip trailing slashes so paths read "dir/name.so". */
        for (size_t n = strlen(copy); n > 1 && copy[n - 1] == '/'; n--)
                copy[n - 1] = '\0';

        if (l->wd >= 0) {
                inotify_rm_watch(l->inotify_fd, l->wd);
                l->wd = -1;
        }
        free(l->dir);
        l->dir = copy;

        wd = inotify_add_watch(l->inotify_fd, copy,
                               IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM |
                                       IN_ONLYDIR);
        if (wd < 0) {
                int e = errno;
                loader_logf(l, LOG_WARNING, "cannot watch plugin directory %s: %s", copy,
                            strerror(e));
                return -e;
        }
        l->wd = wd;
        return scan_dir(l);
}

int loader_set_dir(PluginLoader *l, const char *dir)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        r = set_dir_locked(l, dir);
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}

int loader_scan(PluginLoader *l)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        if (!l->dir) {
                r = -ENOENT;
        } else if (l->wd < 0) {
                /* The directory went away earlier (IN_IGNORED): try to watch it again. */
                char *dir = strdup(l->dir);
                r = dir ? set_dir_locked(l, dir) : -ENOMEM;
                free(dir);
        } else {
                r = scan_dir(l);
        }
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}

int loader_fd(const PluginLoader *l)
{
        return l->inotify_fd;
}

static int process_events_locked(PluginLoader *l)
{
        /* Aligned as inotify(7) asks; holds many events, reads until EAGAIN. */
        char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool rescan = false;
        int loaded = 0;

        for (;;) {
                ssize_t n = read(l->inotify_fd, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                if (n == 0)
                        break;
                for (char *p = buf; p < buf + n;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;
                        p += sizeof(*ev) + ev->len;

                        if (ev->mask & IN_Q_OVERFLOW) {
                                rescan = true;
                                continue;
                        }
                        if (ev->wd != l->wd || l->wd < 0)
                                continue; /* a directory watched before */
                        if (ev->mask & IN_IGNORED) {
                                loader_logf(l, LOG_WARNING,
                                            "plugin directory %s went away; not watching it "
                                            "any more (SIGHUP rescans)",
                                            l->dir);
                                l->wd = -1;
                                continue;
                        }
                        if (!(ev->mask &
                              (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)) ||
                            ev->len == 0 || (ev->mask & IN_ISDIR) || !candidate_name(ev->name))
                                continue;

                        char path[PATH_MAX];
                        if (snprintf(path, sizeof(path), "%s/%s", l->dir, ev->name) >=
                            (int)sizeof(path))
                                continue;
                        if (ev->mask & (IN_DELETE | IN_MOVED_FROM)) {
                                /* gone, unless a later event already put a file back */
                                struct stat st;
                                if (stat(path, &st) < 0 && errno == ENOENT)
                                        remove_path_locked(l, path);
                                continue;
                        }
                        if (load_file(l, path) == 0)
                                loaded++;
                }
        }
        if (rescan && l->wd >= 0) {
                int r;
                loader_logf(l, LOG_NOTICE, "inotify queue overflowed; rescanning %s", l->dir);
                r = scan_dir(l);
                if (r > 0)
                        loaded += r;
        }
        reap_locked(l);
        return loaded;
}

int loader_process_events(PluginLoader *l)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        r = process_events_locked(l);
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}

int loader_load_file(PluginLoader *l, const char *path)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        r = load_file(l, path);
        reap_locked(l); /* a version it replaced, if nothing holds it */
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}

const LoadedPlugin *loader_findn(PluginLoader *l, const char *name, size_t len)
{
        const LoadedPlugin *p;

        pthread_mutex_lock(&l->lock);
        p = find_name_locked(l, name, len);
        pthread_mutex_unlock(&l->lock);
        return p;
}

const LoadedPlugin *loader_find(PluginLoader *l, const char *name)
{
        return loader_findn(l, name, strlen(name));
}

/* The mapped instance loaded at @base, current or retired. Under l->lock. */
static const LoadedPlugin *find_base_locked(PluginLoader *l, const void *base)
{
        for (size_t i = 0; i < l->n_loaded; i++)
                if (l->loaded[i]->base == base)
                        return l->loaded[i];
        for (size_t i = 0; i < l->n_retired; i++)
                if (l->retired[i]->base == base && !l->retired[i]->unloaded)
                        return l->retired[i];
        return NULL;
}

bool loader_symbolize(PluginLoader *l, const void *addr, char *buf, size_t len)
{
        const LoadedPlugin *p;
        char sym[256] = "";
        Dl_info info;

        /* dladdr outside the state lock: it takes glibc's loader lock */
        if (!l || !len || !dladdr(addr, &info) || !info.dli_fbase)
                return false;
        if (info.dli_sname && info.dli_saddr)
                snprintf(sym, sizeof(sym), " %s+%#tx", info.dli_sname,
                         (const char *)addr - (const char *)info.dli_saddr);
        pthread_mutex_lock(&l->lock);
        p = find_base_locked(l, info.dli_fbase);
        if (p) {
                const char *file = strrchr(p->path, '/');
                snprintf(buf, len, "%s%s%s (%s)+%#tx%s", file ? file + 1 : p->path,
                         p->version[0] ? " " : "", p->version, p->path,
                         (const char *)addr - (const char *)info.dli_fbase, sym);
        }
        pthread_mutex_unlock(&l->lock);
        return p != NULL;
}

size_t loader_count(PluginLoader *l)
{
        size_t n;

        pthread_mutex_lock(&l->lock);
        n = l->n_loaded;
        pthread_mutex_unlock(&l->lock);
        return n;
}

static int cmp_loaded(const void *a, const void *b)
{
        const LoadedPlugin *const *x = a, *const *y = b;
        return strcmp((*x)->name, (*y)->name);
}

static int cmp_refusal(const void *a, const void *b)
{
        const PluginRefusal *x = a, *y = b;
        return strcmp(x->path, y->path);
}

PluginList *loader_list_free(PluginList *list)
{
        if (!list)
                return NULL;
        for (size_t i = 0; i < list->n_refused; i++) {
                free(list->refused[i].path);
                free(list->refused[i].reason);
        }
        free(list->refused);
        free(list->loaded);
        free(list->draining);
        free(list);
        return NULL;
}

int loader_list(PluginLoader *l, PluginList **ret)
{
        PluginList *list = calloc(1, sizeof(*list));
        int r = 0;

        if (!list)
                return -ENOMEM;
        pthread_mutex_lock(&l->lock);
        /* +1: calloc(0) may return NULL, which would read as a failure. */
        list->loaded = calloc(l->n_loaded + 1, sizeof(*list->loaded));
        list->refused = calloc(l->n_refused + 1, sizeof(*list->refused));
        list->draining = calloc(l->n_retired + 1, sizeof(*list->draining));
        if (!list->loaded || !list->refused || !list->draining) {
                r = -ENOMEM;
                goto out_unlock;
        }
        for (size_t i = 0; i < l->n_loaded; i++)
                list->loaded[list->n_loaded++] = l->loaded[i];
        for (size_t i = 0; i < l->n_retired; i++)
                if (!l->retired[i]->unloaded)
                        list->draining[list->n_draining++] = l->retired[i];
        for (size_t i = 0; i < l->n_refused; i++) {
                PluginRefusal *d = &list->refused[list->n_refused];
                d->path = strdup(l->refused[i].path);
                d->reason = strdup(l->refused[i].reason);
                list->n_refused++;
                if (!d->path || !d->reason) {
                        r = -ENOMEM;
                        goto out_unlock;
                }
        }
out_unlock:
        pthread_mutex_unlock(&l->lock);
        if (r < 0) {
                loader_list_free(list);
                return r;
        }
        qsort(list->loaded, list->n_loaded, sizeof(*list->loaded), cmp_loaded);
        qsort(list->draining, list->n_draining, sizeof(*list->draining), cmp_loaded);
        qsort(list->refused, list->n_refused, sizeof(*list->refused), cmp_refusal);
        *ret = list;
        return 0;
}

PluginLoader *loader_free(PluginLoader *l)
{
        if (!l)
                return NULL;
        for (size_t i = l->n_loaded; i-- > 0;) {
                instance_unload(l, l->loaded[i]);
                instance_free(l->loaded[i]);
        }
        free(l->loaded);
        for (size_t i = l->n_retired; i-- > 0;) {
                if (!l->retired[i]->unloaded)
                        instance_unload(l, l->retired[i]);
                instance_free(l->retired[i]);
        }
        free(l->retired);
        close(l->reap_fd);
        for (size_t i = 0; i < l->n_refused; i++) {
                free(l->refused[i].path);
                free(l->refused[i].reason);
        }
        free(l->refused);
        free(l->dir);
        close(l->inotify_fd);
        pthread_mutex_destroy(&l->scan_lock);
        pthread_mutex_destroy(&l->lock);
        free(l);
        return NULL;
}

/* ------------------------------------------------------------------ in place (public) */

const LoadedPlugin *loader_acquire(PluginLoader *l, const char *name, size_t len)
{
        LoadedPlugin *p;

        pthread_mutex_lock(&l->lock);
        p = find_name_locked(l, name, len);
        if (p)
                __atomic_add_fetch(&p->refs, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&l->lock);
        return p;
}

void loader_release(PluginLoader *l, const LoadedPlugin *cp)
{
        LoadedPlugin *p = (LoadedPlugin *)cp;
        uint64_t one = 1;

        if (!p || __atomic_sub_fetch(&p->refs, 1, __ATOMIC_ACQ_REL) != 0)
                return;
        /* only a retired instance reaches 0 (the loader holds one on current ones) */
        while (write(l->reap_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
}

int loader_remove_path(PluginLoader *l, const char *path)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        r = remove_path_locked(l, path);
        reap_locked(l);
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}

int loader_reap_fd(const PluginLoader *l)
{
        return l->reap_fd;
}

int loader_reap(PluginLoader *l)
{
        int r;

        pthread_mutex_lock(&l->scan_lock);
        r = reap_locked(l);
        pthread_mutex_unlock(&l->scan_lock);
        return r;
}
