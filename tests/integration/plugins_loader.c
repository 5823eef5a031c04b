/* SPDX-License-Identifier: MIT */
/*
 * plugins_loader.c — the plugin loader on its own, without the daemon or the runtime.
 *
 * Each test makes a temporary plugin directory, copies real .so files into it (the
 * bundled plugins from $(BUILD)/plugins, the bad ones from $(BUILD)/tests/plugins) and
 * drives the loader API: scans, refusals with their reasons and their one log line each,
 * pick-up of files dropped in later through the inotify fd (waited on with poll(2) and a
 * bounded deadline: a condition, not a sleep), lookups and listings.
 *
 * The host table handed to plugins only needs log() here (init() may log); the job
 * functions are never called because no job runs.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugins/loader.h"

#ifndef TEST_PLUGIN_BUILD_DIR
#error "TEST_PLUGIN_BUILD_DIR must name the directory of the bundled plugins"
#endif
#ifndef TEST_BAD_PLUGIN_DIR
#error "TEST_BAD_PLUGIN_DIR must name the directory of the test plugins"
#endif

/* ------------------------------------------------------------------ fixtures ------- */

#define MAX_LINES 64

static char tmpdir[64];
static char plugdir[128];
static char *log_lines[MAX_LINES];
static int log_levels[MAX_LINES];
static int n_log_lines;

static void capture_log(int level, const char *msg)
{
        if (n_log_lines < MAX_LINES) {
                log_levels[n_log_lines] = level;
                log_lines[n_log_lines++] = strdup(msg);
        }
}

static void host_log(FiberdJob *job, int level, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        capture_log(level, msg);
}

static const FiberdHost test_host = {
        .abi_version = FIBERD_PLUGIN_ABI_VERSION,
        .size = sizeof(FiberdHost),
        .log = host_log,
};

static void setup(void)
{
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/fiberd-loader-XXXXXX");
        cr_assert_not_null(mkdtemp(tmpdir));
        snprintf(plugdir, sizeof(plugdir), "%s/plugins", tmpdir);
        cr_assert_eq(mkdir(plugdir, 0755), 0);
        n_log_lines = 0;
}

static void rm_rf(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *e;

        if (!d)
                return;
        while ((e = readdir(d))) {
                char p[512];
                struct stat st;
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
                        rm_rf(p);
                else
                        unlink(p);
        }
        closedir(d);
        rmdir(dir);
}

static void teardown(void)
{
        rm_rf(tmpdir);
        for (int i = 0; i < n_log_lines; i++)
                free(log_lines[i]);
        n_log_lines = 0;
}

TestSuite(plugins_loader, .init = setup, .fini = teardown, .timeout = 30);

/* Copies @src to @dst (written in place: one IN_CLOSE_WRITE). */
static void copy_file(const char *src, const char *dst)
{
        char buf[65536];
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out;
        ssize_t n;

        cr_assert_geq(in, 0, "open %s: %s", src, strerror(errno));
        out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        cr_assert_geq(out, 0, "create %s: %s", dst, strerror(errno));
        while ((n = read(in, buf, sizeof(buf))) > 0)
                cr_assert_eq(write(out, buf, (size_t)n), n);
        cr_assert_eq(n, 0);
        close(in);
        cr_assert_eq(close(out), 0);
}

/* Copies a plugin into the plugin directory under @as. */
static void put_bundled(const char *name, const char *as)
{
        char src[512], dst[512];

        snprintf(src, sizeof(src), "%s/%s.so", TEST_PLUGIN_BUILD_DIR, name);
        snprintf(dst, sizeof(dst), "%s/%s", plugdir, as);
        copy_file(src, dst);
}

static void put_bad(const char *name, const char *as)
{
        char src[512], dst[512];

        snprintf(src, sizeof(src), "%s/%s.so", TEST_BAD_PLUGIN_DIR, name);
        snprintf(dst, sizeof(dst), "%s/%s", plugdir, as);
        copy_file(src, dst);
}

/* Writes @text to @dir/@as (a file that is no shared object). */
static void put_text(const char *dir, const char *as, const char *text)
{
        char dst[512];
        FILE *f;

        snprintf(dst, sizeof(dst), "%s/%s", dir, as);
        f = fopen(dst, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        cr_assert_eq(fclose(f), 0);
}

static PluginLoader *new_loader(void)
{
        PluginLoader *l = NULL;

        cr_assert_eq(loader_new(&l, &test_host, capture_log), 0);
        cr_assert_not_null(l);
        cr_assert_geq(loader_fd(l), 0);
        return l;
}

/* The reason recorded for the file @as in the plugin directory, or NULL. */
static char *refusal_of(PluginLoader *l, const char *as)
{
        char path[512];
        PluginList *list;
        char *reason = NULL;

        snprintf(path, sizeof(path), "%s/%s", plugdir, as);
        cr_assert_eq(loader_list(l, &list), 0);
        for (size_t i = 0; i < list->n_refused; i++)
                if (strcmp(list->refused[i].path, path) == 0)
                        reason = strdup(list->refused[i].reason);
        loader_list_free(list);
        return reason;
}

static bool has_refusal(PluginLoader *l, const char *as)
{
        char *reason = refusal_of(l, as);
        free(reason);
        return reason != NULL;
}

/* How many captured log lines contain both @a and @b. */
static int log_lines_with(const char *a, const char *b)
{
        int n = 0;

        for (int i = 0; i < n_log_lines; i++)
                if (strstr(log_lines[i], a) && (!b || strstr(log_lines[i], b)))
                        n++;
        return n;
}

/*
 * Waits (poll, bounded) until the inotify fd is readable, then processes events until
 * @want plugins have loaded or the deadline passes. Returns how many loaded.
 */
static int wait_and_process(PluginLoader *l, int want)
{
        int loaded = 0;

        for (int rounds = 0; rounds < 100 && loaded < want; rounds++) {
                struct pollfd p = {.fd = loader_fd(l), .events = POLLIN};
                int r = poll(&p, 1, 100);
                cr_assert_geq(r, 0);
                if (r == 0)
                        continue;
                r = loader_process_events(l);
                cr_assert_geq(r, 0, "loader_process_events: %s", strerror(-r));
                loaded += r;
        }
        return loaded;
}

/* ------------------------------------------------------------------ tests ---------- */

Test(plugins_loader, scan_loads_every_bundled_plugin)
{
        static const char *names[] = {"sha256", "sleep", "spin", "skynet"};
        PluginLoader *l = new_loader();
        PluginList *list;

        for (int i = 0; i < 4; i++) {
                char as[64];
                snprintf(as, sizeof(as), "%s.so", names[i]);
                put_bundled(names[i], as);
        }
        put_text(plugdir, "README", "not a plugin, not even named like one\n");
        char subdir[256];
        snprintf(subdir, sizeof(subdir), "%s/sub.so", plugdir);
        cr_assert_eq(mkdir(subdir, 0755), 0, "a directory named like a plugin: skipped");

        cr_assert_eq(loader_set_dir(l, plugdir), 4);
        cr_assert_eq(loader_count(l), 4);
        for (int i = 0; i < 4; i++) {
                const LoadedPlugin *p = loader_find(l, names[i]);
                cr_assert_not_null(p, "%s not loaded", names[i]);
                cr_assert_str_eq(p->name, names[i]);
                cr_assert_str_eq(p->desc->name, names[i]);
                cr_assert_eq(p->desc->abi_version, FIBERD_PLUGIN_ABI_VERSION);
                cr_assert_not_null(p->desc->run);
                cr_assert_str_eq(p->version, "1.0");
                cr_assert_gt(strlen(p->description), 0);
                cr_assert_not_null(strstr(p->path, plugdir));
                cr_assert_gt(p->loaded_ns, 0);
                cr_assert_eq(log_lines_with("loaded from", p->path), 1);
        }
        cr_assert_null(loader_find(l, "nope"));
        cr_assert_eq(loader_findn(l, "sleepy", 5), loader_find(l, "sleep"));

        cr_assert_eq(loader_list(l, &list), 0);
        cr_assert_eq(list->n_loaded, 4);
        cr_assert_eq(list->n_refused, 0, "refused: %s",
                     list->n_refused ? list->refused[0].reason : "");
        cr_assert_str_eq(list->loaded[0]->name, "sha256"); /* sorted by name */
        cr_assert_str_eq(list->loaded[1]->name, "skynet");
        cr_assert_str_eq(list->loaded[2]->name, "sleep");
        cr_assert_str_eq(list->loaded[3]->name, "spin");
        cr_assert_null(loader_list_free(list));

        /* A second scan loads nothing new and logs nothing new. */
        int lines = n_log_lines;
        cr_assert_eq(loader_scan(l), 0);
        cr_assert_eq(n_log_lines, lines);
        cr_assert_null(loader_free(l));
}

Test(plugins_loader, refuses_each_bad_plugin_with_its_reason)
{
        static char abi_reason[64];
        static const struct {
                const char *file;   /* as copied into the plugin directory */
                const char *reason; /* a part of the recorded reason */
        } bad[] = {
                {"bad_abi.so", abi_reason},
                {"no_descriptor.so", "no descriptor"},
                {"sleep_dup.so", "duplicate name \"sleep\": already loaded from "},
                {"init_fails.so", "the device it needs is missing"},
                {"garbage.so", "not a loadable ELF shared object: not an ELF file"},
        };
        PluginLoader *l = new_loader();
        PluginList *list;

        snprintf(abi_reason, sizeof(abi_reason), "ABI version %d, fiberd speaks %d to %d",
                 FIBERD_PLUGIN_ABI_VERSION + 41, FIBERD_PLUGIN_ABI_MIN, FIBERD_PLUGIN_ABI_VERSION);
        put_bundled("sleep", "sleep.so");
        put_bad("bad_abi", "bad_abi.so");
        put_bad("no_descriptor", "no_descriptor.so");
        put_bad("dup_name", "sleep_dup.so"); /* sorts after sleep.so: the bundled one wins */
        put_bad("init_fails", "init_fails.so");
        put_text(plugdir, "garbage.so", "this is not an ELF file\n");
        put_text(plugdir, ".hidden.so", "ignored: hidden files are never considered\n");

        cr_assert_eq(loader_set_dir(l, plugdir), 1, "only sleep.so is good");
        cr_assert_eq(loader_count(l), 1);
        cr_assert_not_null(loader_find(l, "sleep"));
        cr_assert_str_eq(loader_find(l, "sleep")->version, "1.0", "the bundled sleep won");
        cr_assert_null(loader_find(l, "bad_abi"));
        cr_assert_null(loader_find(l, "init_fails"));
        cr_assert_null(loader_find(l, "no_descriptor"));

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *reason = refusal_of(l, bad[i].file);
                char path[512];

                cr_assert_not_null(reason, "%s: not refused", bad[i].file);
                cr_assert_not_null(strstr(reason, bad[i].reason), "%s: reason \"%s\"", bad[i].file,
                                   reason);
                /* Exactly one log line naming the file, and it carries the reason. */
                snprintf(path, sizeof(path), "%s/%s", plugdir, bad[i].file);
                cr_assert_eq(log_lines_with(path, NULL), 1, "%s: log lines", bad[i].file);
                cr_assert_eq(log_lines_with(path, reason), 1);
                free(reason);
        }
        cr_assert(!has_refusal(l, ".hidden.so"));
        cr_assert_eq(log_lines_with(".hidden.so", NULL), 0);
        /* The duplicate's reason names the file holding the name. */
        char *dup = refusal_of(l, "sleep_dup.so");
        cr_assert_not_null(strstr(dup, "/sleep.so"), "%s", dup);
        free(dup);
        /* dup_name's init() must not have run: it would have logged nothing, but its
         * failure would have turned the reason into "init ... failed". */
        cr_assert_eq(log_lines_with("init of plugin sleep", NULL), 0);

        cr_assert_eq(loader_list(l, &list), 0);
        cr_assert_eq(list->n_loaded, 1);
        cr_assert_eq(list->n_refused, 5);
        for (size_t i = 1; i < list->n_refused; i++) /* sorted by path */
                cr_assert_lt(strcmp(list->refused[i - 1].path, list->refused[i].path), 0);
        loader_list_free(list);
        loader_free(l);
}

/* Copies the bundled plugin @name to @as, cut to @size bytes, or (@size 0) whole with
 * the @len bytes at @off replaced by @patch. */
static void put_damaged(const char *name, const char *as, off_t size, off_t off, const void *patch,
                        size_t len)
{
        char dst[512];
        int fd;

        put_bundled(name, as);
        snprintf(dst, sizeof(dst), "%s/%s", plugdir, as);
        fd = open(dst, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0);
        if (size)
                cr_assert_eq(ftruncate(fd, size), 0);
        else
                cr_assert_eq(pwrite(fd, patch, len, off), (ssize_t)len);
        close(fd);
}

/*
 * A plugin cut short maps without complaint from dlopen(), which then touches a page
 * past the end of the file: SIGBUS in the loader. The ELF check refuses it first, with
 * the segment, its end and the file's size; so it does a file of another class or
 * machine, and a file too short for an ELF header.
 */
Test(plugins_loader, a_truncated_or_foreign_elf_file_is_refused_before_dlopen)
{
        static const unsigned char class32 = 1 /* ELFCLASS32 */;
        static const unsigned char aarch64[2] = {183, 0}; /* EM_AARCH64, little-endian */
        PluginLoader *l = new_loader();
        char path[512], *reason;

        put_damaged("sleep", "cut.so", 8000, 0, NULL, 0);
        put_damaged("echo", "class32.so", 0, 4 /* EI_CLASS */, &class32, 1);
        put_damaged("spin", "arm.so", 0, 18 /* e_machine */, aarch64, 2);
        put_damaged("skynet", "short.so", 40, 0, NULL, 0);

        snprintf(path, sizeof(path), "%s/cut.so", plugdir);
        cr_assert_eq(loader_load_file(l, path), -ENOEXEC);
        reason = refusal_of(l, "cut.so");
        cr_assert_not_null(reason);
        cr_assert_not_null(strstr(reason, "not a loadable ELF shared object: segment "), "%s",
                           reason);
        cr_assert_not_null(strstr(reason, "ends past the end of the file ("), "%s", reason);
        cr_assert_not_null(strstr(reason, " > 8000 bytes)"), "%s", reason);
        free(reason);
        cr_assert_eq(log_lines_with(path, "ends past the end of the file"), 1);

        cr_assert_eq(loader_set_dir(l, plugdir), 0, "a damaged file was loaded");
        reason = refusal_of(l, "class32.so");
        cr_assert(reason && strstr(reason, "fiberd is 64-bit"), "%s", reason);
        free(reason);
#if defined(__x86_64__)
        reason = refusal_of(l, "arm.so");
        cr_assert(reason && strstr(reason, "built for AArch64, this host is x86-64"), "%s", reason);
        free(reason);
#endif
        reason = refusal_of(l, "short.so");
        cr_assert(reason && strstr(reason, "the file ends inside the ELF header (40 of 64 bytes)"),
                  "%s", reason);
        free(reason);
        cr_assert_eq(loader_count(l), 0);

        /* the whole file again: it loads */
        put_bundled("sleep", "cut.so");
        cr_assert_eq(loader_load_file(l, path), 0);
        cr_assert_not_null(loader_find(l, "sleep"));
        cr_assert(!has_refusal(l, "cut.so"));
        loader_free(l);
}

/* ABI version 2 grew by appending: a plugin built against version 1 still loads. */
Test(plugins_loader, a_plugin_of_the_previous_abi_version_still_loads)
{
        PluginLoader *l = new_loader();

        put_bad("abi_v1", "abi_v1.so");
        cr_assert_eq(loader_set_dir(l, plugdir), 1, "the version-1 plugin was refused");
        cr_assert_not_null(loader_find(l, "abi_v1"));
        cr_assert_null(loader_free(l));
}

Test(plugins_loader, load_file_returns_the_refusal_as_an_errno)
{
        PluginLoader *l = new_loader();
        char path[512];

        snprintf(path, sizeof(path), "%s/sleep.so", TEST_PLUGIN_BUILD_DIR);
        cr_assert_eq(loader_load_file(l, path), 0);
        cr_assert_eq(loader_load_file(l, path), -EEXIST, "same path twice");

        snprintf(path, sizeof(path), "%s/bad_abi.so", TEST_BAD_PLUGIN_DIR);
        cr_assert_eq(loader_load_file(l, path), -EPROTO);
        snprintf(path, sizeof(path), "%s/no_descriptor.so", TEST_BAD_PLUGIN_DIR);
        cr_assert_eq(loader_load_file(l, path), -ENOEXEC);
        snprintf(path, sizeof(path), "%s/dup_name.so", TEST_BAD_PLUGIN_DIR);
        cr_assert_eq(loader_load_file(l, path), -EEXIST);
        snprintf(path, sizeof(path), "%s/init_fails.so", TEST_BAD_PLUGIN_DIR);
        cr_assert_eq(loader_load_file(l, path), -ENODEV);
        snprintf(path, sizeof(path), "%s/missing.so", plugdir);
        cr_assert_eq(loader_load_file(l, path), -ENOENT);
        cr_assert_eq(loader_load_file(l, plugdir), -ENOEXEC, "a directory");

        cr_assert_eq(loader_count(l), 1);
        loader_free(l);
}

Test(plugins_loader, a_so_dropped_in_later_is_loaded_through_the_inotify_fd)
{
        PluginLoader *l = new_loader();
        char staged[512], dst[512];

        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        cr_assert_eq(loader_process_events(l), 0, "nothing pending is harmless");
        cr_assert_null(loader_find(l, "sleep"));

        /* Written in place (cp, install): IN_CLOSE_WRITE. */
        put_bundled("sleep", "sleep.so");
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "sleep"));

        /* Written elsewhere, renamed in (mv, package managers): IN_MOVED_TO. */
        snprintf(staged, sizeof(staged), "%s/skynet.so", tmpdir);
        snprintf(dst, sizeof(dst), "%s/skynet.so", plugdir);
        copy_file(TEST_PLUGIN_BUILD_DIR "/skynet.so", staged);
        cr_assert_eq(rename(staged, dst), 0);
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "skynet"));

        /* A hidden temporary written, then renamed to its final name: loaded once. */
        put_bundled("spin", ".spin.so.tmp");
        snprintf(staged, sizeof(staged), "%s/.spin.so.tmp", plugdir);
        snprintf(dst, sizeof(dst), "%s/spin.so", plugdir);
        cr_assert_eq(rename(staged, dst), 0);
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "spin"));
        cr_assert_eq(log_lines_with(".spin.so.tmp", NULL), 0);

        /* A bad plugin dropped in is refused with its reason; the loader goes on. */
        put_bad("init_fails", "init_fails.so");
        for (int i = 0; i < 100 && !has_refusal(l, "init_fails.so"); i++) {
                struct pollfd p = {.fd = loader_fd(l), .events = POLLIN};
                if (poll(&p, 1, 100) > 0)
                        cr_assert_eq(loader_process_events(l), 0);
        }
        char *reason = refusal_of(l, "init_fails.so");
        cr_assert_not_null(reason);
        cr_assert_not_null(strstr(reason, "the device it needs is missing"));
        free(reason);

        /* And a good one after it still loads. */
        put_bundled("sha256", "sha256.so");
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "sha256"));
        cr_assert_eq(loader_count(l), 4);
        loader_free(l);
}

/* Waits (bounded) until a log line holds both @a and @b, processing events meanwhile. */
static void wait_for_log(PluginLoader *l, const char *a, const char *b)
{
        for (int i = 0; i < 100 && !log_lines_with(a, b); i++) {
                struct pollfd p = {.fd = loader_fd(l), .events = POLLIN};
                if (poll(&p, 1, 100) > 0)
                        cr_assert_geq(loader_process_events(l), 0);
        }
        cr_assert_eq(log_lines_with(a, b), 1, "no log line with \"%s\" and \"%s\"", a, b);
}

static size_t n_draining(PluginLoader *l)
{
        PluginList *list;
        size_t n;

        cr_assert_eq(loader_list(l, &list), 0);
        n = list->n_draining;
        loader_list_free(list);
        return n;
}

/* Plugins in place: install(1)/mv over a loaded file loads the new version next to the old; the
 * old one is retired, stays mapped while referenced, and is unloaded by loader_reap(). */
Test(plugins_loader, a_new_file_at_a_loaded_path_replaces_it_and_the_old_one_drains)
{
        PluginLoader *l = new_loader();
        char staged[512], dst[512];
        const LoadedPlugin *before, *held, *after;

        put_bundled("sleep", "sleep.so");
        cr_assert_eq(loader_set_dir(l, plugdir), 1);
        before = loader_find(l, "sleep");
        held = loader_acquire(l, "sleep", 5); /* a running job */
        cr_assert_eq(held, before);

        /* Replace it the safe way (a new inode renamed over the old path). */
        snprintf(staged, sizeof(staged), "%s/sleep.so", tmpdir);
        snprintf(dst, sizeof(dst), "%s/sleep.so", plugdir);
        copy_file(TEST_PLUGIN_BUILD_DIR "/sleep.so", staged);
        cr_assert_eq(rename(staged, dst), 0);
        wait_for_log(l, dst, "replacing sleep");
        after = loader_find(l, "sleep");
        cr_assert_not_null(after);
        cr_assert_neq(after, before, "the new version is the current one");
        cr_assert(before->retired && !before->unloaded, "the old one drains");
        cr_assert_neq(after->handle, before->handle, "two mappings, not glibc's old one");
        cr_assert_eq(n_draining(l), 1);
        cr_assert(!has_refusal(l, "sleep.so"));

        /* The job ends: the release only pokes the reap fd; loader_reap() unloads. */
        loader_release(l, held);
        struct pollfd p = {.fd = loader_reap_fd(l), .events = POLLIN};
        cr_assert_eq(poll(&p, 1, 5000), 1, "the last release makes the reap fd readable");
        cr_assert_eq(loader_reap(l), 1);
        cr_assert(before->unloaded);
        cr_assert_eq(log_lines_with("sleep", "unloaded"), 1);
        cr_assert_eq(n_draining(l), 0);
        cr_assert_eq(loader_find(l, "sleep"), after);
        loader_free(l);
}

/* Plugins in place: the same file seen again (a rescan, a second event) is not loaded twice. */
Test(plugins_loader, an_unchanged_file_is_not_loaded_again)
{
        PluginLoader *l = new_loader();
        char path[512];

        put_bundled("sleep", "sleep.so");
        cr_assert_eq(loader_set_dir(l, plugdir), 1);
        const LoadedPlugin *before = loader_find(l, "sleep");
        cr_assert_eq(loader_scan(l), 0);
        snprintf(path, sizeof(path), "%s/sleep.so", plugdir);
        cr_assert_eq(loader_load_file(l, path), -EEXIST);
        cr_assert_eq(loader_find(l, "sleep"), before);
        cr_assert_eq(n_draining(l), 0);
        loader_free(l);
}

/* Plugins in place: removing the file retires the plugin: not found by name any more, unloaded
 * at once when nothing holds it, after the last release otherwise. */
Test(plugins_loader, a_removed_file_unloads_its_plugin_after_its_last_job)
{
        PluginLoader *l = new_loader();
        char path[512];

        put_bundled("sleep", "sleep.so");
        put_bundled("spin", "spin.so");
        cr_assert_eq(loader_set_dir(l, plugdir), 2);
        const LoadedPlugin *sleep_p = loader_find(l, "sleep");
        const LoadedPlugin *held = loader_acquire(l, "spin", 4);

        snprintf(path, sizeof(path), "%s/sleep.so", plugdir);
        cr_assert_eq(unlink(path), 0);
        wait_for_log(l, "sleep", "unloaded");
        cr_assert_null(loader_find(l, "sleep"));
        cr_assert(sleep_p->unloaded, "nothing held it: unloaded at once");

        snprintf(path, sizeof(path), "%s/spin.so", plugdir);
        cr_assert_eq(unlink(path), 0);
        wait_for_log(l, path, "removed");
        cr_assert_null(loader_find(l, "spin"));
        cr_assert(held->retired && !held->unloaded, "held by a job: it drains");
        cr_assert_eq(n_draining(l), 1);
        loader_release(l, held);
        cr_assert_eq(loader_reap(l), 1);
        cr_assert(held->unloaded);
        cr_assert_eq(loader_count(l), 0);
        loader_free(l);
}

Test(plugins_loader, a_refused_file_fixed_later_loads_and_its_refusal_goes)
{
        PluginLoader *l = new_loader();
        char staged[512], dst[512];

        put_text(plugdir, "thing.so", "half-written\n");
        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        char *reason = refusal_of(l, "thing.so");
        cr_assert_not_null(reason);
        free(reason);

        snprintf(staged, sizeof(staged), "%s/thing.so", tmpdir);
        snprintf(dst, sizeof(dst), "%s/thing.so", plugdir);
        copy_file(TEST_PLUGIN_BUILD_DIR "/skynet.so", staged);
        cr_assert_eq(rename(staged, dst), 0);
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "skynet"));
        cr_assert(!has_refusal(l, "thing.so"));

        /* A refused file that is deleted is forgotten at the next scan. */
        put_text(plugdir, "gone.so", "junk\n");
        cr_assert_eq(loader_scan(l), 0);
        reason = refusal_of(l, "gone.so");
        cr_assert_not_null(reason);
        free(reason);
        snprintf(dst, sizeof(dst), "%s/gone.so", plugdir);
        cr_assert_eq(unlink(dst), 0);
        cr_assert_eq(loader_scan(l), 0);
        cr_assert(!has_refusal(l, "gone.so"));
        loader_free(l);
}

Test(plugins_loader, a_missing_directory_is_an_error_and_the_loader_goes_on)
{
        PluginLoader *l = new_loader();
        char missing[256], other[256];

        cr_assert_eq(loader_scan(l), -ENOENT, "no directory set yet");
        snprintf(missing, sizeof(missing), "%s/nope", tmpdir);
        cr_assert_eq(loader_set_dir(l, missing), -ENOENT);
        cr_assert_eq(log_lines_with(missing, NULL), 1);
        cr_assert_eq(loader_process_events(l), 0);

        /* Switch to a real directory (SIGHUP with a new plugin_dir): that works. */
        put_bundled("sleep", "sleep.so");
        cr_assert_eq(loader_set_dir(l, plugdir), 1);

        /* Switching away keeps what was loaded and watches only the new directory. */
        snprintf(other, sizeof(other), "%s/other", tmpdir);
        cr_assert_eq(mkdir(other, 0755), 0);
        cr_assert_eq(loader_set_dir(l, other), 0);
        cr_assert_not_null(loader_find(l, "sleep"));
        put_bundled("spin", "spin.so"); /* into the old directory: not watched */
        char src[512], dst[512];
        snprintf(src, sizeof(src), "%s/skynet.so", TEST_PLUGIN_BUILD_DIR);
        snprintf(dst, sizeof(dst), "%s/skynet.so", other);
        copy_file(src, dst);
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "skynet"));
        cr_assert_null(loader_find(l, "spin"));
        loader_free(l);
}

Test(plugins_loader, a_removed_directory_stops_the_watch_and_a_rescan_restores_it)
{
        PluginLoader *l = new_loader();

        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        cr_assert_eq(rmdir(plugdir), 0);
        for (int i = 0; i < 100 && !log_lines_with(plugdir, "went away"); i++) {
                struct pollfd p = {.fd = loader_fd(l), .events = POLLIN};
                if (poll(&p, 1, 100) > 0)
                        cr_assert_eq(loader_process_events(l), 0);
        }
        cr_assert_eq(log_lines_with(plugdir, "went away"), 1);

        cr_assert_eq(mkdir(plugdir, 0755), 0);
        put_bundled("sleep", "sleep.so");
        cr_assert_eq(loader_scan(l), 1, "the rescan watches it again and loads");
        put_bundled("spin", "spin.so");
        cr_assert_eq(wait_and_process(l, 1), 1);
        cr_assert_not_null(loader_find(l, "spin"));
        loader_free(l);
}

Test(plugins_loader, bad_arguments)
{
        PluginLoader *l = NULL;

        cr_assert_eq(loader_new(NULL, &test_host, NULL), -EINVAL);
        cr_assert_eq(loader_new(&l, NULL, NULL), -EINVAL);
        cr_assert_null(l, "ret_ untouched on failure");
        cr_assert_null(loader_free(NULL));
        cr_assert_null(loader_list_free(NULL));
}

static void *rescanner(void *arg)
{
        PluginLoader *l = arg;
        intptr_t failures = 0;

        for (int i = 0; i < 200; i++)
                if (loader_set_dir(l, plugdir) < 0)
                        failures++; /* criterion's asserts belong to the test's thread */
        return (void *)failures;
}

Test(plugins_loader, rescans_and_event_processing_may_overlap)
{
        /* The daemon's SIGHUP fiber rescans while its watcher fiber processes events. */
        static const char *names[] = {"sha256", "sleep", "spin", "skynet"};
        PluginLoader *l = new_loader();
        pthread_t t;

        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        cr_assert_eq(pthread_create(&t, NULL, rescanner, l), 0);
        for (int i = 0; i < 4; i++) {
                char as[64];
                snprintf(as, sizeof(as), "%s.so", names[i]);
                put_bundled(names[i], as);
                cr_assert_geq(loader_process_events(l), 0);
        }
        void *failures;
        cr_assert_eq(pthread_join(t, &failures), 0);
        cr_assert_null(failures, "loader_set_dir failed while events were processed");
        cr_assert_eq(loader_scan(l), 0, "everything is loaded by now");
        cr_assert_eq(loader_count(l), 4);
        for (int i = 0; i < 4; i++)
                cr_assert_not_null(loader_find(l, names[i]));
        loader_free(l);
}

/* ------------------------------------------------------------------ trust ---------- */

/* The refusal of @as, asserted to exist and to contain @needle. */
static void assert_refused_for(PluginLoader *l, const char *as, const char *needle)
{
        char *reason = refusal_of(l, as);

        cr_assert_not_null(reason, "%s was not refused", as);
        cr_assert_not_null(strstr(reason, needle), "%s refused for: %s (want \"%s\")", as, reason,
                           needle);
        free(reason);
}

Test(plugins_loader, a_world_writable_directory_is_refused_before_any_constructor_runs)
{
        char marker[512];
        PluginLoader *l = new_loader();

        snprintf(marker, sizeof(marker), "%s/constructor-ran", tmpdir);
        setenv("FIBERD_TEST_CTOR_MARKER", marker, 1);
        put_bad("ctor_marker", "ctor_marker.so");
        put_bundled("sleep", "sleep.so");
        cr_assert_eq(chmod(plugdir, 0777), 0);

        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        cr_assert_eq(loader_count(l), 0);
        assert_refused_for(l, "ctor_marker.so", "writable by everyone");
        assert_refused_for(l, "sleep.so", "plugin directory");
        cr_assert_neq(access(marker, F_OK), 0, "the constructor ran before the check");

        /* fixed: the next scan loads both (and the constructor runs, as it should) */
        cr_assert_eq(chmod(plugdir, 0755), 0);
        cr_assert_eq(loader_scan(l), 2);
        cr_assert_eq(access(marker, F_OK), 0);
        cr_assert_null(loader_free(l));
}

Test(plugins_loader, a_group_writable_file_is_refused)
{
        char path[512];
        PluginLoader *l = new_loader();

        put_bundled("sleep", "sleep.so");
        put_bundled("spin", "spin.so");
        snprintf(path, sizeof(path), "%s/sleep.so", plugdir);
        cr_assert_eq(chmod(path, 0664), 0);
        cr_assert_eq(loader_set_dir(l, plugdir), 1);
        cr_assert_null(loader_find(l, "sleep"));
        cr_assert_not_null(loader_find(l, "spin"));
        assert_refused_for(l, "sleep.so", "writable by its group");
        cr_assert_eq(log_lines_with("refused", "writable by its group"), 1);
        cr_assert_null(loader_free(l));
}

Test(plugins_loader, a_file_owned_by_another_user_is_refused)
{
        char path[512];
        PluginLoader *l;

        if (geteuid() != 0)
                cr_skip_test("needs root to give a file away");
        l = new_loader();
        put_bundled("sleep", "sleep.so");
        snprintf(path, sizeof(path), "%s/sleep.so", plugdir);
        cr_assert_eq(chown(path, 65534, 65534), 0);
        cr_assert_eq(loader_set_dir(l, plugdir), 0);
        assert_refused_for(l, "sleep.so", "owned by uid 65534");
        cr_assert_null(loader_free(l));
}

Test(plugins_loader, a_symlink_may_not_leave_the_directory)
{
        char outside[256], src[512], link[512];
        PluginLoader *l = new_loader();

        /* a trusted file, but outside the plugin directory */
        snprintf(outside, sizeof(outside), "%s/elsewhere", tmpdir);
        cr_assert_eq(mkdir(outside, 0755), 0);
        snprintf(src, sizeof(src), "%s/%s.so", TEST_PLUGIN_BUILD_DIR, "sleep");
        snprintf(link, sizeof(link), "%s/sleep.so", outside);
        copy_file(src, link);
        snprintf(link, sizeof(link), "%s/sleep.so", plugdir);
        cr_assert_eq(symlink("../elsewhere/sleep.so", link), 0);
        /* a symlink inside the directory is fine: spin.so -> .spin-1.0.so */
        put_bundled("spin", ".spin-1.0.so");
        snprintf(link, sizeof(link), "%s/spin.so", plugdir);
        cr_assert_eq(symlink(".spin-1.0.so", link), 0);

        cr_assert_eq(loader_set_dir(l, plugdir), 1);
        cr_assert_not_null(loader_find(l, "spin"));
        cr_assert_null(loader_find(l, "sleep"));
        assert_refused_for(l, "sleep.so", "outside the plugin directory");
        cr_assert_null(loader_free(l));
}
