/* SPDX-License-Identifier: MIT */
/*
 * plugin_host.c — the daemon's adapter over the plugin loader (plugins/loader.h): one
 * PluginLoader for the process, its log lines routed through log.c, plugins.list packed
 * from a loader_list() snapshot.
 */
#include "daemon/plugin_host.h"
#include "daemon/log.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"
#include "plugins/loader.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

static PluginLoader *host_loader;
static LoaderGuard host_guard; /* crash-only plugins (crash.h) */

void plugin_host_set_guard(const LoaderGuard *g)
{
        host_guard = *g;
}

static void loader_log(int level, const char *msg)
{
        log_msg(level, "plugins: %s", msg);
}

int plugin_host_init(const char *dir, size_t max_result)
{
        int r;

        plugin_host_set_max_result(max_result);
        r = plugin_job_init();
        if (r < 0)
                return r;
        r = loader_new(&host_loader, &plugin_host_functions, loader_log);
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
        return r < 0 ? r : 0;
}

int plugin_host_rescan(const char *dir)
{
        int r = loader_set_dir(host_loader, dir);

        if (r >= 0)
                log_msg(LOG_INFO, "rescanned %s: %d new plugins, %zu loaded", dir, r,
                        loader_count(host_loader));
        return r < 0 ? r : 0;
}

int plugin_host_watch_fd(void)
{
        return host_loader ? loader_fd(host_loader) : -1;
}

void plugin_host_process_events(void)
{
        int r = loader_process_events(host_loader);

        if (r < 0)
                log_msg(LOG_ERR, "reading plugin directory events: %s", strerror(-r));
}

const Plugin *plugin_host_find(const char *name, size_t len)
{
        return loader_findn(host_loader, name, len);
}

const char *plugin_host_name(const Plugin *p)
{
        return p->name;
}

bool plugin_host_retry_safe(const Job *j)
{
        const FiberdPlugin *d = j->plugin ? j->plugin->desc : NULL;

        if (!d || d->size < offsetof(FiberdPlugin, flags) + sizeof(d->flags))
                return false;
        return (d->flags & FIBERD_PLUGIN_RETRY_SAFE) != 0;
}

int plugin_host_check_args(const Plugin *p, const msgpack_object *args, IpcStatus *st)
{
        if (args->type != MSGPACK_OBJECT_MAP)
                return ipc_status_set(st, IPC_INVALID_ARGUMENT, -EINVAL,
                                      "args: expected a map for plugin %s", p->name);
        return 0;
}

int plugin_host_pack_list(msgpack_packer *pk)
{
        PluginList *l;
        int r = loader_list(host_loader, &l);

        if (r < 0)
                return r;
        r |= msgpack_pack_map(pk, 2);
        r |= ipc_pack_cstr(pk, IPC_KEY_PLUGINS);
        r |= msgpack_pack_array(pk, (uint32_t)l->n_loaded);
        for (size_t i = 0; i < l->n_loaded; i++) {
                const LoadedPlugin *p = l->loaded[i];
                r |= msgpack_pack_map(pk, 4);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_NAME, p->name);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_VERSION, p->version);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_DESCRIPTION, p->description);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_PATH, p->path);
        }
        r |= ipc_pack_cstr(pk, IPC_KEY_REFUSED);
        r |= msgpack_pack_array(pk, (uint32_t)l->n_refused);
        for (size_t i = 0; i < l->n_refused; i++) {
                r |= msgpack_pack_map(pk, 2);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_PATH, l->refused[i].path);
                r |= ipc_pack_kv_cstr(pk, IPC_KEY_REASON, l->refused[i].reason);
        }
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

size_t plugin_host_count(void)
{
        return host_loader ? loader_count(host_loader) : 0;
}

void plugin_host_free(void)
{
        host_loader = loader_free(host_loader);
}
