/* SPDX-License-Identifier: MIT */
/*
 * plugin_host.c — the daemon's adapter over the plugin loader (plugins/loader.h): one
 * PluginLoader for the process, its log lines routed through log.c, plugins.list packed
 * from a loader_list() snapshot, and the plugin loader thread.
 *
 * The plugin loader thread: a plain pthread, not a fiber, because dlopen() and a
 * plugin's init() block for as long as they like, and the server group has few workers
 * (one by default).
 * It polls three fds: the directory's inotify fd (a file dropped in, replaced or
 * removed), the loader's reap eventfd (a replaced version's last job ended: fini() and
 * dlclose() it here) and its own request eventfd (a rescan asked by SIGHUP or
 * plugins.clear, or stop). A rescan request is reference counted between the asking
 * fiber, which waits on its FiberEvent (fiber_event_set() is safe from any pthread), and
 * the thread, so a cancelled asker can leave. Requests go in a list under host_lock.
 */
#include "daemon/plugin/plugin_host.h"
#include "daemon/obs/log.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "plugins/loader.h"

#include "scheduler/base/list.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static PluginLoader *host_loader;
/* host_loader's creation and end against the stall symbolizer, which runs on the
 * runtime's monitor threads at any time (plugin_host_symbolize()) */
static pthread_rwlock_t symbolize_lock = PTHREAD_RWLOCK_INITIALIZER;
static LoaderGuard host_guard; /* crash-only plugins (crash.h) */

/* A rescan for the loader thread. */
typedef struct RescanRequest {
        int refs;        /* atomic: the asking fiber + the loader thread */
        char *dir;       /* owned */
        int result;      /* loader_set_dir()'s */
        FiberEvent done; /* set by the thread once result is */
        ListHead link;   /* in host_requests while queued; host_lock */
} RescanRequest;

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static ListHead host_requests = {&host_requests, &host_requests}; /* host_lock */
static bool host_stopping;                                        /* host_lock */
static bool host_thread_running;
static pthread_t host_thread;
static int host_wake_fd = -1; /* eventfd: a request is queued, or stop */

static RescanRequest *request_unref(RescanRequest *rq)
{
        if (rq && __atomic_sub_fetch(&rq->refs, 1, __ATOMIC_ACQ_REL) == 0) {
                free(rq->dir);
                free(rq);
        }
        return NULL;
}

void plugin_host_set_guard(const LoaderGuard *g)
{
        host_guard = *g;
}

static int plugin_host_thread_start(void);

static void loader_log(int level, const char *msg)
{
        log_msg(level, "plugins: %s", msg);
}

int plugin_host_init(const char *dir, const FiberdHost *host)
{
        int r;

        pthread_rwlock_wrlock(&symbolize_lock);
        r = loader_new(&host_loader, host, loader_log);
        pthread_rwlock_unlock(&symbolize_lock);
        if (r < 0)
                return r;
        loader_set_guard(host_loader, &host_guard);
        r = loader_set_dir(host_loader, dir);
        if (r < 0 && r != -ENOMEM) {
                log_msg(LOG_WARNING,
                        "plugin directory %s: %s; running without its plugins "
                        "(fix it and send SIGHUP)",
                        dir, strerror(-r));
                return 0;
        }
        if (r >= 0)
                log_msg(LOG_INFO, "%zu plugins loaded from %s", loader_count(host_loader), dir);
        if (r < 0)
                return r;
        return plugin_host_thread_start();
}

/* One rescan on the loader thread; logs its outcome. */
static int rescan(const char *dir)
{
        int r = loader_set_dir(host_loader, dir);

        if (r >= 0)
                log_msg(LOG_INFO, "rescanned %s: %d new plugins, %zu loaded", dir, r,
                        loader_count(host_loader));
        return r;
}

/* Runs the queued rescans; false once asked to stop. */
static bool run_requests(void)
{
        for (;;) {
                RescanRequest *rq = NULL;
                ListHead *pos;
                bool stop;

                pthread_mutex_lock(&host_lock);
                stop = host_stopping;
                pos = stop ? NULL : list_pop_head(&host_requests);
                pthread_mutex_unlock(&host_lock);
                if (!pos)
                        return !stop;
                rq = list_entry(pos, RescanRequest, link);
                rq->result = rescan(rq->dir);
                fiber_event_set(&rq->done);
                request_unref(rq);
        }
}

static void *loader_thread_main(void *arg)
{
        (void)arg;
        for (;;) {
                struct pollfd fds[3] = {
                        {.fd = loader_fd(host_loader), .events = POLLIN},
                        {.fd = loader_reap_fd(host_loader), .events = POLLIN},
                        {.fd = host_wake_fd, .events = POLLIN},
                };
                uint64_t n;
                int r;

                if (poll(fds, 3, -1) < 0)
                        continue; /* EINTR */
                if (fds[2].revents) {
                        while (read(host_wake_fd, &n, sizeof(n)) < 0 && errno == EINTR)
                                ;
                        if (!run_requests())
                                return NULL;
                }
                if (fds[0].revents) {
                        r = loader_process_events(host_loader);
                        if (r < 0)
                                log_msg(LOG_ERR, "reading plugin directory events: %s",
                                        strerror(-r));
                }
                if (fds[1].revents)
                        loader_reap(host_loader);
        }
}

/* Starts the plugin loader thread. Return: 0; -errno. */
static int plugin_host_thread_start(void)
{
        int r;

        host_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (host_wake_fd < 0)
                return -errno;
        r = pthread_create(&host_thread, NULL, loader_thread_main, NULL);
        if (r) {
                close(host_wake_fd);
                host_wake_fd = -1;
                return -r;
        }
        pthread_setname_np(host_thread, "plugin-loader");
        host_thread_running = true;
        return 0;
}

static void wake_thread(void)
{
        uint64_t one = 1;

        while (write(host_wake_fd, &one, sizeof(one)) < 0 && errno == EINTR)
                ;
}

int plugin_host_rescan(const char *dir)
{
        RescanRequest *rq;
        int r;

        if (!host_thread_running) {
                r = rescan(dir);
                return r < 0 ? r : 0;
        }
        rq = calloc(1, sizeof(*rq));
        if (!rq)
                return -ENOMEM;
        rq->dir = strdup(dir);
        if (!rq->dir) {
                free(rq);
                return -ENOMEM;
        }
        rq->refs = 2;
        fiber_event_init(&rq->done);
        pthread_mutex_lock(&host_lock);
        list_add_tail(&host_requests, &rq->link);
        pthread_mutex_unlock(&host_lock);
        wake_thread();
        r = fiber_event_wait(&rq->done, SCHED_FOREVER);
        if (r == 0)
                r = rq->result;
        request_unref(rq);
        return r < 0 ? r : 0;
}

const Plugin *plugin_host_find(const char *name, size_t len)
{
        return loader_findn(host_loader, name, len);
}

const Plugin *plugin_host_acquire(const char *name, size_t len)
{
        return host_loader ? loader_acquire(host_loader, name, len) : NULL;
}

void plugin_host_release(const Plugin *p)
{
        if (p)
                loader_release(host_loader, p);
}

const char *plugin_host_name(const Plugin *p)
{
        return p->name;
}

unsigned plugin_host_max_attempts(const Plugin *p)
{
        return p && p->max_attempts ? p->max_attempts : 1;
}

bool plugin_host_retry_safe(const Job *j)
{
        /* the loader's copy of the flags: the instance may be unloaded by now */
        /* asked of a job that is not final: its JobLive holds the plugin (job.h) */
        const Plugin *p = j->live ? __atomic_load_n(&j->live->plugin, __ATOMIC_ACQUIRE) : NULL;

        return p && (p->flags & FIBERD_PLUGIN_RETRY_SAFE) != 0;
}

/* Whether @p's jobs run inline now: it declared FIBERD_PLUGIN_INLINE, kept it, and is
 * current ([jobs] run_inline aside). */
static bool instance_inline(const Plugin *p)
{
        return (p->flags & FIBERD_PLUGIN_INLINE) &&
               !__atomic_load_n(&p->inline_demoted, __ATOMIC_RELAXED) &&
               !__atomic_load_n(&p->retired, __ATOMIC_ACQUIRE);
}

bool plugin_host_run_inline(const Job *j)
{
        /* the job is not final: its JobLive holds the plugin (job.h) */
        const Plugin *p = j->live ? __atomic_load_n(&j->live->plugin, __ATOMIC_ACQUIRE) : NULL;

        /* a replaced instance's queued jobs run the current one, which may not say so */
        return p && instance_inline(p);
}

bool plugin_host_inline_demote(const Plugin *p)
{
        /* the loader's struct, which the daemon otherwise only reads: cast */
        return p && (p->flags & FIBERD_PLUGIN_INLINE) &&
               !__atomic_exchange_n((bool *)&p->inline_demoted, true, __ATOMIC_RELAXED);
}

void plugin_host_inline_stalled(const Plugin *ran, const char *name, uint64_t job_id,
                                uint64_t ran_ns)
{
        const Plugin *p = ran ? ran : plugin_host_acquire(name, strlen(name));

        if (plugin_host_inline_demote(p))
                log_job(LOG_WARNING, job_id, name,
                        "plugin %s %s: job %llu held a server worker %llu ms inline: its jobs "
                        "run on the job workers from now on",
                        p->name, p->version, (unsigned long long)job_id,
                        (unsigned long long)(ran_ns / 1000000));
        if (!ran)
                plugin_host_release(p);
}

/* @n instances as maps; @own: the loader's own reference on each, not a job's. */
static int pack_instances(msgpack_packer *pk, const LoadedPlugin **v, size_t n, int own)
{
        int r = msgpack_pack_array(pk, (uint32_t)n);

        for (size_t i = 0; i < n; i++) {
                const LoadedPlugin *p = v[i];
                int refs = __atomic_load_n(&p->refs, __ATOMIC_RELAXED) - own;
                r |= IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_NAME, p->name),
                                  IPC_KV_CSTR(IPC_KEY_VERSION, p->version),
                                  IPC_KV_CSTR(IPC_KEY_DESCRIPTION, p->description),
                                  IPC_KV_CSTR(IPC_KEY_PATH, p->path),
                                  IPC_KV_UINT(IPC_KEY_RUNNING, refs > 0 ? (uint64_t)refs : 0),
                                  IPC_KV_BOOL(IPC_KEY_INLINE, instance_inline(p)));
        }
        return r;
}

static int pack_loaded(msgpack_packer *pk, const void *arg)
{
        const PluginList *l = arg;
        return pack_instances(pk, l->loaded, l->n_loaded, 1);
}

static int pack_draining(msgpack_packer *pk, const void *arg)
{
        const PluginList *l = arg;
        return pack_instances(pk, l->draining, l->n_draining, 0);
}

/* the files the loader refused, {path, reason} each */
static int pack_refused(msgpack_packer *pk, const void *arg)
{
        const PluginList *l = arg;
        int r = msgpack_pack_array(pk, (uint32_t)l->n_refused);

        for (size_t i = 0; i < l->n_refused; i++)
                r |= IPC_PACK_MAP(pk, IPC_KV_CSTR(IPC_KEY_PATH, l->refused[i].path),
                                  IPC_KV_CSTR(IPC_KEY_REASON, l->refused[i].reason));
        return r;
}

int plugin_host_pack_list(msgpack_packer *pk)
{
        PluginList *l;
        int r = loader_list(host_loader, &l);

        if (r < 0)
                return r;
        r |= IPC_PACK_MAP(pk, IPC_KV_PACK(IPC_KEY_PLUGINS, pack_loaded, l),
                          IPC_KV_PACK(IPC_KEY_DRAINING, pack_draining, l),
                          IPC_KV_PACK(IPC_KEY_REFUSED, pack_refused, l));
        loader_list_free(l);
        return r ? -ENOMEM : 0;
}

void plugin_host_names(char *buf, size_t size)
{
        PluginList *l;
        size_t off = 0;

        buf[0] = '\0';
        if (loader_list(host_loader, &l) < 0)
                return;
        for (size_t i = 0; i < l->n_loaded && off < size; i++) {
                int n = snprintf(buf + off, size - off, "%s%s", i ? ", " : "", l->loaded[i]->name);
                if (n < 0)
                        break;
                off += (size_t)n;
        }
        loader_list_free(l);
}

bool plugin_host_symbolize(const void *addr, char *buf, size_t len, void *arg)
{
        bool named;

        (void)arg;
        pthread_rwlock_rdlock(&symbolize_lock);
        named = host_loader && loader_symbolize(host_loader, addr, buf, len);
        pthread_rwlock_unlock(&symbolize_lock);
        return named;
}

size_t plugin_host_count(void)
{
        return host_loader ? loader_count(host_loader) : 0;
}

void plugin_host_free(void)
{
        if (host_thread_running) {
                pthread_mutex_lock(&host_lock);
                host_stopping = true;
                pthread_mutex_unlock(&host_lock);
                wake_thread();
                pthread_join(host_thread, NULL);
                host_thread_running = false;
                close(host_wake_fd);
                host_wake_fd = -1;
        }
        pthread_rwlock_wrlock(&symbolize_lock);
        host_loader = loader_free(host_loader);
        pthread_rwlock_unlock(&symbolize_lock);
}
