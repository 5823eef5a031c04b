/* SPDX-License-Identifier: MIT */
/*
 * loader.h — fiberd's plugin loader (plugins/loader.c): finds, checks and loads the
 * plugin .so files of one directory, keeps watching it, and answers "which plugin is
 * called X" and "what is loaded, what was refused and why".
 *
 * Daemon-internal (hidden symbols); plugins see only fiberd/plugin.h.
 *
 * How the daemon uses it:
 *
 *     PluginLoader *l;
 *     r = loader_new(&l, &host_table, log_fn);          // host_table: a filled FiberdHost
 *     r = loader_set_dir(l, "/usr/lib/fiberd/plugins"); // watch, then scan: N loaded
 *     // a fiber: for (;;) { fiber_wait_fd(loader_fd(l), EPOLLIN, SCHED_FOREVER);
 *     //                     loader_process_events(l); }
 *     const LoadedPlugin *p = loader_find(l, "sha256");  // per job.submit
 *     r = p->desc->run(job, &host_table);               // in the job's fiber
 *     // SIGHUP: loader_set_dir(l, new_dir) (or loader_scan(l) if the dir is unchanged)
 *     l = loader_free(l);                                // at exit, after every job ended
 *
 * Trust, before dlopen() runs any constructor (sshd StrictModes / sudo): the directory
 * and every one above it, and the file, must be owned by root or fiberd's euid and not
 * writable by group or others (a sticky directory above the plugin directory is fine);
 * a symlink must not lead out of the directory. The file is opened with O_NOFOLLOW,
 * checked with fstat() and loaded through /proc/self/fd/N, so the inode checked is the
 * one mapped. Then its ELF headers are checked against its size (plugins/elfcheck.h):
 * a file cut short, or built for another machine, is refused ("not a loadable ELF
 * shared object: segment 2 (PT_LOAD) ends past the end of the file (12288 > 8000
 * bytes)") where dlopen() would have faulted (SIGBUS) mapping it. A refusal's reason
 * says which check failed.
 * Loading a file (redis's moduleLoad() shape): dlopen(RTLD_NOW|RTLD_LOCAL), dlsym
 * FIBERD_PLUGIN_SYMBOL, check abi_version before anything else, then size, name, run,
 * duplicate name, then init(). Each refusal is one log line naming the file and the
 * reason, and is remembered (per path, latest reason) for plugins.list; the daemon goes
 * on. Only regular files named "*.so" not starting with "." are considered, so an editor
 * or installer writing ".x.so.tmp" then renaming is fine.
 *
 * Lifetime (plugins in place): each load makes a plugin *instance*. The
 * instance loaded from a path is that name's current one until the file is replaced (a
 * new inode: install(1), mv; or new contents written in place: IN_CLOSE_WRITE) or
 * removed; then it is *retired*: loader_find() answers the new instance (or nothing),
 * while whoever holds a reference (loader_acquire(): a running job, a check_args call)
 * goes on using the old code. The loader holds one reference on every current instance;
 * when a retired instance's last reference goes (loader_release()), it is queued for
 * unloading, loader_reap_fd() becomes readable, and loader_reap() runs its fini() and
 * dlclose()s it — on the loader's thread, never in the job that let go. A file whose
 * identity (device, inode, size, mtime) has not changed is not loaded again. Only a
 * replacement goes through a private copy (a memfd, kept open while it is mapped):
 * glibc would otherwise hand back the old mapping for the same path or inode.
 * LoadedPlugin structs (not their code) stay allocated until loader_free(), so a job
 * record may keep its plugin pointer; its `desc` may be used only under a reference.
 * Overwriting a loaded .so in place (cp onto it) still changes code under jobs running
 * the old version: prefer install(1) or mv, which replace the inode.

 * Watching: one inotify fd (non-blocking, close-on-exec) on the directory with
 * IN_CLOSE_WRITE | IN_MOVED_TO (load or replace) and IN_DELETE | IN_MOVED_FROM (retire
 * the instance loaded from that path), added before the scan so a file dropped in during the
 * scan is not missed (it may be seen twice; the second time is a no-op). The daemon
 * waits on loader_fd() (fiber_wait_fd, EPOLLIN) and calls loader_process_events().
 *
 * Threads: every function may be called from any thread or fiber, concurrently. The
 * loading operations (loader_set_dir, loader_scan, loader_process_events,
 * loader_load_file) are serialized by an internal mutex, so a SIGHUP fiber and the
 * watcher fiber may overlap; lookups and listings take only a short state lock, never
 * held across dlopen/init/log. None yields; loading calls dlopen() and the plugin's
 * init(), which block the calling worker for a moment.
 */
#ifndef FIBERD_PLUGINS_LOADER_H
#define FIBERD_PLUGINS_LOADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/fiberd/plugin.h"

typedef struct PluginLoader PluginLoader;

/* A loaded plugin instance. Read-only for users; the struct stays valid until
 * loader_free(), its code (desc) only while referenced or current. */
typedef struct LoadedPlugin {
        const FiberdPlugin *desc; /* the plugin's descriptor, inside the mapped .so */
        char *name;               /* copy of desc->name, checked: [a-z0-9_-]{1,32} */
        char *version;            /* copy of desc->version, "" when NULL */
        char *description;        /* copy of desc->description, "" when NULL */
        char *path;               /* the file it was loaded from (absolute or as given) */
        uint64_t loaded_ns;       /* CLOCK_MONOTONIC nanoseconds when it was loaded */
        void *handle;             /* dlopen() handle; loader-private */

        /* ---- plugins in place ---- */
        uint32_t flags;          /* desc->flags (0 when the descriptor predates them) */
        uint32_t max_attempts;   /* desc->max_attempts, 1..100 (1 when it predates it) */
        int refs;                /* atomic: 1 for the loader while current + loader_acquire()s */
        bool inline_demoted;     /* atomic: a job of this FIBERD_PLUGIN_INLINE instance held
                                * the server group too long; the rest go to the job
                                * workers (daemon/plugin/plugin_job.c) */
        unsigned inline_strikes; /* atomic: its inline runs in a row that took too long */
        bool retired;            /* replaced or removed (under the loader's lock; atomic
                                * store: the daemon's inline check reads it without) */
        bool unloaded;           /* fini() ran, dlclose()d: desc is gone (loader's lock) */
        uint64_t file_id[4];     /* st_dev, st_ino, st_size, st_mtim in ns of the file loaded */
        int copy_fd;             /* the memfd it was dlopen()ed from, or -1 */
        bool overwritten;        /* its file was written in place: its code is not what was
                              * loaded, so fini() and dlclose() are skipped (loader lock) */
        int fd;                  /* the checked file dlopen() mapped; loader-private */
        const void *base;        /* where the .so is mapped (dladdr()'s dli_fbase of desc):
                              * stall backtraces name frames by it, loader_symbolize() */
} LoadedPlugin;

/* A refused file: the path and the reason, as logged. */
typedef struct PluginRefusal {
        char *path;   /* owned by the PluginList */
        char *reason; /* e.g. "ABI version 42, fiberd speaks 1"; owned by the PluginList */
} PluginRefusal;

/* A snapshot for plugins.list (loader_list()); free with loader_list_free(). */
typedef struct PluginList {
        size_t n_loaded;
        const LoadedPlugin **loaded; /* sorted by name; the pointers stay the loader's */
        size_t n_refused;
        PluginRefusal *refused; /* sorted by path; copies owned by the list */
        size_t n_draining;
        const LoadedPlugin **draining; /* retired, not unloaded yet, by name */
} PluginList;

/*
 * Where the loader's log lines go: @level is a syslog priority, @msg one line without a
 * newline or prefix. NULL = stderr with an sd-daemon "<N>" prefix. Called without the
 * loader's lock, from whichever thread or fiber is loading.
 */
typedef void (*LoaderLogFn)(int level, const char *msg);

/*
 * loader_new - a loader with no directory yet, and its inotify fd.
 * @ret: out, written only on success; free with loader_free().
 * @host: the host table every plugin's init()/run()/fini() receives. Borrowed: it must
 *        outlive the loader and be fully filled (abi_version = FIBERD_PLUGIN_ABI_VERSION,
 *        size = sizeof(FiberdHost)) before loader_set_dir().
 * @log: see LoaderLogFn.
 * Return: 0; -EINVAL (NULL @ret or @host); -ENOMEM; -EMFILE/-ENFILE/-ENOMEM from
 * inotify_init1(). Context: any; does not yield.
 */
int loader_new(PluginLoader **ret, const FiberdHost *host, LoaderLogFn log);

/* ---- crash-only plugins (the daemon's job store) ---- */
/*
 * LoaderGuard - calls around every load attempt, so the daemon can note on disk which
 * file is being loaded (a crash in dlopen()/init() then names it) and refuse files it
 * quarantined. Both run on the loading thread without the loader's lock, may block.
 */
struct stat;
typedef struct LoaderGuard {
        /* before - about to dlopen @path, which passed the trust and ELF checks: @fd is
         * the very file that will be mapped (read it with pread(), never move its offset
         * or close it), @st its fstat(). Return 0 to go on, or a negative errno and a
         * one-line reason in @why: the file is refused with it. */
        int (*before)(void *arg, const char *path, int fd, const struct stat *st, char *why,
                      size_t why_size);
        /* after - the attempt ended: @name is the plugin loaded, NULL when refused. */
        void (*after)(void *arg, const char *path, const char *name);
        void *arg;
} LoaderGuard;

/* loader_set_guard - install @g (copied; NULL members do nothing). Context: before
 * loader_set_dir(). */
void loader_set_guard(PluginLoader *l, const LoaderGuard *g);

/*
 * loader_set_dir - watch @dir (replacing the directory watched before, if any) and scan
 * it: load every candidate file not loaded yet, retrying files refused before; a file
 * changed since it was loaded replaces its instance, and an instance of this directory
 * whose file is gone is retired. Plugins loaded from a previous directory
 * stay loaded. Refusals of files no longer
 * present are forgotten.
 * Return: the number of plugins newly loaded (>= 0; refusals are not errors);
 * -ENOENT / -ENOTDIR / -EACCES when @dir cannot be watched or read (logged; nothing
 * is watched then, what is loaded stays); -ENOMEM.
 * Context: any thread or fiber; does not yield, blocks on dlopen()/init() (and on
 * another loading operation in progress).
 */
int loader_set_dir(PluginLoader *l, const char *dir);

/*
 * loader_scan - scan the current directory again (SIGHUP), as loader_set_dir() does.
 * Return: as loader_set_dir(); -ENOENT when no directory was set.
 */
int loader_scan(PluginLoader *l);

/*
 * loader_fd - the inotify fd to wait on for EPOLLIN (fiber_wait_fd). Owned by the
 * loader, non-blocking, close-on-exec; the same fd for the loader's life, also across
 * loader_set_dir(). Context: any.
 */
int loader_fd(const PluginLoader *l);

/*
 * loader_process_events - read every pending inotify event (never waits) and load the
 * files they name. Call when loader_fd() is readable; calling it when nothing is
 * pending is harmless.
 * Return: the number of plugins newly loaded (>= 0); -errno from read(2) other than
 * EAGAIN. An overflowed event queue (IN_Q_OVERFLOW) triggers a full rescan; the
 * directory itself going away (IN_IGNORED) is logged and nothing is watched until
 * loader_set_dir().
 * Context: as loader_set_dir().
 */
int loader_process_events(PluginLoader *l);

/*
 * loader_load_file - load one file by path (inside the watched directory or not), with
 * the same checks, log line and refusal record as a scan. For tests and tools.
 * Return: 0 when loaded; -EEXIST when a plugin from this path is already loaded;
 * otherwise the refusal as a negative errno: -ENOEXEC (not a loadable ELF shared
 * object, dlopen failed or no descriptor), -EPROTO (wrong ABI version or descriptor too
 * small), -EINVAL (bad name, no run), -EEXIST (duplicate name), or init()'s error (e.g.
 * -ENODEV); -ENOMEM.
 * Context: as loader_set_dir().
 */
int loader_load_file(PluginLoader *l, const char *path);

/*
 * loader_find - the loaded plugin named @name (NUL-terminated), or NULL.
 * loader_findn - the same for @len bytes (a msgpack string).
 * Context: any, concurrently with loading; does not yield.
 */
const LoadedPlugin *loader_find(PluginLoader *l, const char *name);
const LoadedPlugin *loader_findn(PluginLoader *l, const char *name, size_t len);

/*
 * loader_symbolize - name the code at @addr if it lies in a plugin instance that is
 * loaded (current or retired, not unloaded): one line into @buf (@len bytes,
 * NUL-terminated, truncated to fit), "FILE VERSION (PATH)+0xOFFSET [SYMBOL+0xOFF]",
 * e.g. "hello.so 1.2 (/usr/lib/fiberd/plugins/hello.so)+0x13d3 hello_run+0x1c": FILE
 * is the base name of the path it was loaded from (not the /proc/self/fd/N it was
 * mapped through), OFFSET counts from where the .so is mapped (what addr2line -e PATH
 * takes), SYMBOL is the nearest exported one (absent when none is). An unversioned
 * plugin has no VERSION.
 * Return: true when @addr is a plugin's; false (and @buf untouched) otherwise.
 * Context: any thread, not a signal handler (dladdr, the state lock); does not yield.
 */
bool loader_symbolize(PluginLoader *l, const void *addr, char *buf, size_t len);

/*
 * loader_list - a consistent snapshot of loaded plugins and refused files.
 * @ret: out, written only on success; free with loader_list_free().
 * Return: 0; -ENOMEM. Context: any; does not yield.
 */
int loader_list(PluginLoader *l, PluginList **ret);

/* loader_list_free - free a snapshot. Accepts NULL, returns NULL. */
PluginList *loader_list_free(PluginList *list);

/*
 * loader_count - the number of loaded plugins now. Context: any.
 */
size_t loader_count(PluginLoader *l);

/* ---- plugins in place ---- */

/*
 * loader_acquire - the current instance named @name (@len bytes), with one reference
 * the caller drops with loader_release(); NULL when none. While referenced, the
 * instance's desc and code stay mapped even after it is replaced or removed.
 * Context: any; does not yield.
 */
const LoadedPlugin *loader_acquire(PluginLoader *l, const char *name, size_t len);

/*
 * loader_release - drop a reference from loader_acquire(). The last one of a retired
 * instance queues it for loader_reap() (and makes loader_reap_fd() readable); nothing
 * is unloaded here. Accepts NULL. Context: any (a job fiber, a child); does not yield.
 */
void loader_release(PluginLoader *l, const LoadedPlugin *p);

/*
 * loader_remove_path - retire the current instance loaded from @path (its file is
 * gone), as an IN_DELETE event does. Return: 0; -ENOENT when none was loaded from it.
 * Context: as loader_set_dir().
 */
int loader_remove_path(PluginLoader *l, const char *path);

/* loader_reap_fd - an eventfd, readable while retired instances wait for loader_reap().
 * Owned by the loader. Context: any. */
int loader_reap_fd(const PluginLoader *l);

/*
 * loader_reap - fini() and dlclose() every retired instance nobody references any more,
 * one log line each. Return: how many were unloaded. Context: the thread that loads
 * (takes the loading mutex); blocks as long as the fini()s do; does not yield.
 */
int loader_reap(PluginLoader *l);

/*
 * loader_free - call every loaded plugin's fini() (in reverse load order; retired
 * instances not unloaded yet too), dlclose them,
 * close the inotify fd, free the loader. Only when no job (and no child fiber) of any
 * plugin runs any more: after this every LoadedPlugin pointer is dangling.
 * Accepts NULL, returns NULL. Context: the daemon's main thread at exit.
 */
PluginLoader *loader_free(PluginLoader *l);

#endif /* FIBERD_PLUGINS_LOADER_H */
