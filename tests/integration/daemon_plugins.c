/* SPDX-License-Identifier: MIT */
/*
 * daemon_plugins.c — the plugin directory end to end: a .so dropped in while fiberd runs
 * becomes usable without a restart; each kind of bad plugin (tests/plugins/, built as
 * real .so files: wrong ABI, no descriptor, duplicate name, failing init) is refused
 * with its reason in plugins.list and one log line naming the file, at start-up and when
 * dropped in later, while the daemon keeps serving.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_plugins, .fini = teardown, .timeout = 60);

/* Polls plugins.list (bounded) until @pred holds. */
static bool list_until(Client *c, bool (*pred)(const msgpack_object *list, const void *arg),
                       const void *arg)
{
        for (int i = 0; i < 1000; i++) {
                Reply rp;
                bool ok;

                rpc_simple(c, "plugins.list", 0, NULL, &rp);
                cr_assert_eq(rp.r, 0);
                ok = pred(rp.result, arg);
                reply_clear(&rp);
                if (ok)
                        return true;
                usleep(10000);
        }
        return false;
}

static bool has_plugin(const msgpack_object *list, const void *arg)
{
        const msgpack_object *a = map_get(list, "plugins");

        for (uint32_t i = 0; a && i < a->via.array.size; i++)
                if (strcmp(map_str(&a->via.array.ptr[i], "name"), arg) == 0)
                        return true;
        return false;
}

typedef struct Refusal {
        const char *file;   /* basename */
        const char *reason; /* substring of the reason */
} Refusal;

static const Refusal bad[] = {
        {"bad_abi.so", "ABI version"},
        {"no_descriptor.so", "no descriptor"},
        {"dup_name.so", "duplicate name \"sleep\""},
        {"init_fails.so", "the device it needs is missing"},
};

static bool has_refusal(const msgpack_object *list, const void *arg)
{
        const Refusal *want = arg;
        const msgpack_object *a = map_get(list, "refused");

        for (uint32_t i = 0; a && i < a->via.array.size; i++) {
                const msgpack_object *r = &a->via.array.ptr[i];
                char path[512];
                snprintf(path, sizeof(path), "%s", map_str(r, "path"));
                if (strstr(path, want->file) && strstr(map_str(r, "reason"), want->reason))
                        return true;
        }
        return false;
}

static void check_still_serving(Client *c)
{
        IpcStatus st;
        Reply rp;
        uint64_t id = rpc_submit(c, "sleep", (Arg[]){ARG_I("ms", 1)}, 1, 0, 0, &st);

        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        /* the real sleep plugin answered, not the impostor of dup_name.so */
        cr_assert(ipc_object_is_nil(map_get(map_get(rp.result, "result"), "impostor")));
        reply_clear(&rp);
}

Test(daemon_plugins, dropped_in_plugin_becomes_usable)
{
        FiberdOpts o = {.plugins = "sha256"};
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        cr_assert_eq(rpc_submit(c, "skynet", NULL, 0, 0, 0, &st), 0);
        cr_assert_str_eq(st.code, IPC_NOT_FOUND);

        fiberd_copy_plugin(&fd_, FIBERD_PLUGIN_BUILD_DIR "/skynet.so", "skynet.so");
        cr_assert(list_until(c, has_plugin, "skynet"), "skynet.so was not loaded");
        id = rpc_submit(c, "skynet", (Arg[]){ARG_I("size", 1000), ARG_I("div", 10)}, 2, 0, 0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "done");
        cr_assert_eq(map_uint(map_get(rp.result, "result"), "sum"), 499500);
        reply_clear(&rp);
        cr_assert(fiberd_log_contains(&fd_, "skynet"));
        client_free(c);
}

Test(daemon_plugins, bad_plugins_refused_when_dropped_in)
{
        Client *c;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char src[512];
                snprintf(src, sizeof(src), "%s/%s", FIBERD_TEST_PLUGIN_DIR, bad[i].file);
                fiberd_copy_plugin(&fd_, src, bad[i].file);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char line[256];
                cr_assert(list_until(c, has_refusal, &bad[i]), "%s not refused with \"%s\"",
                          bad[i].file, bad[i].reason);
                snprintf(line, sizeof(line), "%s refused", bad[i].file);
                cr_assert(fiberd_log_contains(&fd_, line), "no log line \"%s\"", line);
        }
        check_still_serving(c);
        client_free(c);
}

Test(daemon_plugins, bad_plugins_refused_at_start)
{
        char extra[2048] = "";
        Client *c;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                size_t n = strlen(extra);
                snprintf(extra + n, sizeof(extra) - n, "%s%s/%s", n ? " " : "",
                         FIBERD_TEST_PLUGIN_DIR, bad[i].file);
        }
        FiberdOpts o = {.extra = extra};
        fiberd_start(&fd_, &o);
        c = fiberd_connect(&fd_);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                /* at start-up the scan order decides which "sleep" comes first: the
                 * impostor is refused either as a duplicate or by its own init() */
                Refusal r = bad[i];
                if (strcmp(r.file, "dup_name.so") == 0)
                        r.reason = "sleep";
                cr_assert(list_until(c, has_refusal, &r), "%s not refused with \"%s\"", r.file,
                          r.reason);
        }
        cr_assert(list_until(c, has_plugin, "sha256"));
        check_still_serving(c);
        client_free(c);
}
