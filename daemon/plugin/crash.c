/* SPDX-License-Identifier: MIT */
/*
 * crash.c — crash-only plugins (see crash.h): the fatal-signal and exit() reports, the
 * crash note, the strikes and the quarantine.
 *
 * The signal handler may only use async-signal-safe calls (POSIX signal-safety(7)):
 * it reads the current fiber's tag (a pointer the runtime keeps in thread-local
 * storage) and the file being loaded (a static buffer), formats with its own digits
 * (as scheduler/stack.c's overflow report does), write()s the report to fd 2 and the
 * note to a file whose path was computed at start-up, then re-raises the signal with
 * the default action. The note is three lines: "signal N", "tag TAG", "loading PATH".
 *
 * The files the store knows (StorePluginFile rows, one per path) are mirrored in a
 * small array under crash_lock; every change is committed before it matters (before a
 * dlopen, at start). A row's identity is its contents' SHA-256 (crash.h, "The quarantine
 * rule"), computed by the guard from the fd the loader will map, with libcrypto's EVP
 * interface, reading with pread() so the loader's fd keeps its offset.
 */
#include "daemon/plugin/crash.h"
#include "daemon/obs/log.h"
#include "scheduler/sched.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/sigsafe.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CRASH_STRIKES_MAX 2 /* crashes blamed on the same contents that quarantine them */
#define CRASH_HASH_CHUNK (64 * 1024)

typedef struct CrashFile {
        StorePluginFile pf; /* path, name, reason, sha256 owned (malloc) */
} CrashFile;

static pthread_mutex_t crash_lock = PTHREAD_MUTEX_INITIALIZER;
static Store *crash_store;
static CrashFile *crash_files;
static size_t crash_nfiles;
static uint64_t crash_job_id;         /* the job the last run crashed in; 0 = none */
static char crash_job_msg[256];       /* its message */
static char note_path[4096];          /* <store>-crash; "" = no note (memory store) */
static char loading_path[4096];       /* the file in dlopen()/init(), for the handler */
static volatile sig_atomic_t exiting; /* crash_mark_clean() ran: exit() is ours */

/* ------------------------------------------------------------------ the handler --- */

static const char *signal_name(int sig)
{
        switch (sig) {
        case SIGSEGV:
                return "SIGSEGV";
        case SIGBUS:
                return "SIGBUS";
        case SIGFPE:
                return "SIGFPE";
        case SIGILL:
                return "SIGILL";
        case SIGABRT:
                return "SIGABRT";
        default:
                return "exit()";
        }
}

/* The report on fd 2 and the note; @sig 0 = exit(). Async-signal-safe. */
static void crash_report(int sig, const char *tag)
{
        const char *loading = loading_path[0] ? loading_path : NULL;
        char msg[1024];
        size_t n = 0;
        int fd;

        sigsafe_put_str(msg, &n, sizeof(msg), "<2>fiberd: ");
        if (sig) {
                sigsafe_put_str(msg, &n, sizeof(msg), "fatal signal ");
                sigsafe_put_str(msg, &n, sizeof(msg), signal_name(sig));
        } else {
                sigsafe_put_str(msg, &n, sizeof(msg), "exit() called");
        }
        if (tag) {
                sigsafe_put_str(msg, &n, sizeof(msg), " in ");
                sigsafe_put_str(msg, &n, sizeof(msg), tag);
        } else if (loading) {
                sigsafe_put_str(msg, &n, sizeof(msg), " while loading plugin file ");
                sigsafe_put_str(msg, &n, sizeof(msg), loading);
        } else {
                sigsafe_put_str(msg, &n, sizeof(msg), " outside any job");
        }
        sigsafe_put_str(msg, &n, sizeof(msg),
                        "; fiberd dies with it. Its next start names this plugin; a plugin file "
                        "that crashed fiberd twice is quarantined until it changes\n");
        if (sigsafe_write(STDERR_FILENO, msg, n) < 0) {
                /* nothing more to do */
        }
        if (!note_path[0])
                return;
        fd = sigsafe_open(note_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0)
                return;
        n = 0;
        sigsafe_put_str(msg, &n, sizeof(msg), "signal ");
        sigsafe_put_u64(msg, &n, sizeof(msg), (uint64_t)sig);
        sigsafe_put_str(msg, &n, sizeof(msg), "\ntag ");
        sigsafe_put_str(msg, &n, sizeof(msg), tag ? tag : "-");
        sigsafe_put_str(msg, &n, sizeof(msg), "\nloading ");
        sigsafe_put_str(msg, &n, sizeof(msg), loading ? loading : "-");
        sigsafe_put_str(msg, &n, sizeof(msg), "\n");
        if (sigsafe_write(fd, msg, n) < 0 || fsync(fd) < 0) {
                /* the report on fd 2 still names it */
        }
        sigsafe_close(fd);
}

static const char *current_tag(void)
{
        Fiber *f = fiber_self();
        const char *tag = f ? fiber_tag(f) : NULL;

        return tag && strncmp(tag, "job ", 4) == 0 ? tag : NULL;
}

static void crash_signal_handler(int sig, siginfo_t *si, void *uctx)
{
        (void)si;
        (void)uctx;
        crash_report(sig, current_tag());
        signal(sig, SIG_DFL);
        raise(sig); /* pending until we return: then the default action, a core */
}

/* The runtime's stack-overflow report already went to fd 2: only the note. */
static void crash_overflow_hook(int sig, const char *tag)
{
        if (!note_path[0])
                return;
        {
                char msg[1024];
                size_t n = 0;
                int fd = sigsafe_open(note_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                if (fd < 0)
                        return;
                sigsafe_put_str(msg, &n, sizeof(msg), "signal ");
                sigsafe_put_u64(msg, &n, sizeof(msg), (uint64_t)sig);
                sigsafe_put_str(msg, &n, sizeof(msg), "\ntag ");
                sigsafe_put_str(msg, &n, sizeof(msg),
                                tag && strncmp(tag, "job ", 4) == 0 ? tag : "-");
                sigsafe_put_str(msg, &n, sizeof(msg), "\nloading -\n");
                if (sigsafe_write(fd, msg, n) < 0 || fsync(fd) < 0) {
                        /* nothing more to do */
                }
                sigsafe_close(fd);
        }
}

static void crash_atexit(void)
{
        const char *tag;

        if (exiting)
                return;
        tag = current_tag();
        if (tag || loading_path[0])
                crash_report(0, tag);
}

/* ------------------------------------------------------------------ files -------- */

static CrashFile *file_find_locked(const char *path)
{
        for (size_t i = 0; i < crash_nfiles; i++)
                if (strcmp(crash_files[i].pf.path, path) == 0)
                        return &crash_files[i];
        return NULL;
}

static char *strdup_or_null(const char *s)
{
        return s ? strdup(s) : NULL;
}

static int file_add_locked(const StorePluginFile *pf, CrashFile **ret)
{
        CrashFile *v = realloc(crash_files, (crash_nfiles + 1) * sizeof(*v));
        CrashFile *f;

        if (!v)
                return -ENOMEM;
        crash_files = v;
        f = &crash_files[crash_nfiles];
        f->pf = *pf;
        f->pf.path = strdup(pf->path);
        f->pf.name = strdup_or_null(pf->name);
        f->pf.reason = strdup_or_null(pf->reason);
        f->pf.sha256 = strdup_or_null(pf->sha256);
        if (!f->pf.path)
                return -ENOMEM;
        crash_nfiles++;
        *ret = f;
        return 0;
}

static void file_set_str(const char **field, const char *s)
{
        char *c = strdup_or_null(s);

        free((char *)*field);
        *field = c;
}

static int load_file_row(const StorePluginFile *pf, void *arg)
{
        CrashFile *f;

        (void)arg;
        return file_add_locked(pf, &f);
}

static bool same_file(const StorePluginFile *pf, const struct stat *st)
{
        return pf->size == (uint64_t)st->st_size && pf->ino == (uint64_t)st->st_ino &&
               pf->dev == (uint64_t)st->st_dev &&
               pf->mtime_ns == (int64_t)timespec_load_ns(&st->st_mtim);
}

/* Whether @pf still describes the contents @sha256 (NULL: not hashed) of the file @st:
 * by the hash when both have one, else (a row from before hashes) by the stat. */
static bool same_contents(const StorePluginFile *pf, const char *sha256, const struct stat *st)
{
        if (pf->sha256 && sha256)
                return strcmp(pf->sha256, sha256) == 0;
        return same_file(pf, st);
}

/* The name `fiberctl plugins --clear` takes for @f: the plugin's name once it loaded,
 * else its file's name without ".so" (crash_clear() accepts both). Into @buf. */
static const char *clear_name(const CrashFile *f, char *buf, size_t size)
{
        const char *base = strrchr(f->pf.path, '/');
        size_t n;

        if (f->pf.name)
                return f->pf.name;
        base = base ? base + 1 : f->pf.path;
        n = strlen(base);
        if (n > 3 && strcmp(base + n - 3, ".so") == 0)
                n -= 3;
        snprintf(buf, size, "%.*s", (int)n, base);
        return buf;
}

/*
 * The SHA-256 of the file open as @fd, as 64 hex digits into @hex (65 bytes), read
 * with pread() from offset 0 (the fd's offset does not move). Return: 0; -ENOMEM; -EIO
 * (OpenSSL failed); -errno of pread().
 */
static int file_sha256(int fd, char hex[65])
{
        static const char digits[] = "0123456789abcdef";
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned char *buf = malloc(CRASH_HASH_CHUNK);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned len = 0;
        off_t off = 0;
        int r = 0;

        if (!buf || !ctx) {
                r = -ENOMEM;
                goto out_free;
        }
        if (!EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
                r = -EIO;
                goto out_free;
        }
        for (;;) {
                ssize_t n = pread(fd, buf, CRASH_HASH_CHUNK, off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = -errno;
                        goto out_free;
                }
                if (n == 0)
                        break;
                if (!EVP_DigestUpdate(ctx, buf, (size_t)n)) {
                        r = -EIO;
                        goto out_free;
                }
                off += n;
        }
        if (!EVP_DigestFinal_ex(ctx, md, &len) || len != 32) {
                r = -EIO;
                goto out_free;
        }
        for (unsigned i = 0; i < len; i++) {
                hex[2 * i] = digits[md[i] >> 4];
                hex[2 * i + 1] = digits[md[i] & 15];
        }
        hex[2 * len] = '\0';
out_free:
        EVP_MD_CTX_free(ctx);
        free(buf);
        return r;
}

/* ------------------------------------------------------------------ start-up ----- */

/* Reads the note into @sig, @tag, @loading ("" when absent). true when there was one. */
static bool read_note(int *sig, char *tag, size_t tag_size, char *loading, size_t loading_size)
{
        char line[4200];
        FILE *f = note_path[0] ? fopen(note_path, "re") : NULL;

        if (!f)
                return false;
        *sig = -1;
        tag[0] = loading[0] = '\0';
        while (fgets(line, sizeof(line), f)) {
                line[strcspn(line, "\n")] = '\0';
                if (strncmp(line, "signal ", 7) == 0)
                        *sig = atoi(line + 7);
                else if (strncmp(line, "tag ", 4) == 0 && strcmp(line + 4, "-") != 0)
                        snprintf(tag, tag_size, "%.200s", line + 4);
                else if (strncmp(line, "loading ", 8) == 0 && strcmp(line + 8, "-") != 0)
                        snprintf(loading, loading_size, "%.4000s", line + 8);
        }
        fclose(f);
        return true;
}

/* One strike for @f: @what happened in it. */
static void strike_locked(CrashFile *f, const char *what, char *names, size_t names_size)
{
        char reason[600], when[64];
        time_t now = time(NULL);
        struct tm tm;
        size_t n = strlen(names);

        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime_r(&now, &tm));
        f->pf.strikes++;
        snprintf(reason, sizeof(reason), "%.400s (fiberd restarted %s); %u crash%s of this file",
                 what, when, f->pf.strikes, f->pf.strikes == 1 ? "" : "es");
        file_set_str(&f->pf.reason, reason);
        snprintf(names + n, names_size - n, "%s%s (%s)", n ? ", " : "",
                 f->pf.name ? f->pf.name : "?", f->pf.path);
}

int crash_init(Store *s)
{
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
        char tag[256], loading[4096], what[600], blamed[2048] = "";
        struct sigaction sa;
        int64_t clean = 1;
        bool note;
        int sig = -1, r = 0;

        crash_store = s;
        if (store_fleet(s)) {
                /* the path is the Redis server's: the note stays on this host, where the
                 * sqlite database would be (its state directory) */
                char *db = NULL;
                if (store_default_path(&db) == 0)
                        snprintf(note_path, sizeof(note_path), "%s-crash", db);
                free(db);
        } else if (s->path) {
                snprintf(note_path, sizeof(note_path), "%s-crash", s->path);
        }
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = crash_signal_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(sigs); i++)
                sigaction(sigs[i], &sa, NULL);
        sched_set_fatal_hook(crash_overflow_hook);
        atexit(crash_atexit);
        if (!store_durable(s))
                return 0;

        pthread_mutex_lock(&crash_lock);
        r = store_plugin_files(s, load_file_row, NULL);
        if (r < 0)
                goto out_unlock;
        if (store_get_meta(s, "clean", &clean) < 0)
                clean = 1; /* a new store */
        note = read_note(&sig, tag, sizeof(tag), loading, sizeof(loading));

        /* Strikes are kept (crash.h, "The quarantine rule"): a clean stop, or a crash
         * blamed on another file, clears none. */
        if (clean && !note) {
                for (size_t i = 0; i < crash_nfiles; i++)
                        crash_files[i].pf.loading = false;
        } else {
                /* an unclean end: blame the file named by the note, or being loaded */
                bool *hit = calloc(crash_nfiles + 1, sizeof(*hit));
                const char *plugin = NULL;
                if (!hit) {
                        r = -ENOMEM;
                        goto out_unlock;
                }
                if (tag[0]) {
                        unsigned long long id = 0;
                        const char *p = strstr(tag, " plugin ");
                        plugin = p ? p + 8 : NULL;
                        if (sscanf(tag, "job %llu", &id) == 1) {
                                crash_job_id = id;
                                snprintf(crash_job_msg, sizeof(crash_job_msg),
                                         "fiberd crashed in this job (%s in plugin %s); it was "
                                         "not retried",
                                         signal_name(sig), plugin ? plugin : "?");
                        }
                }
                for (size_t i = 0; i < crash_nfiles; i++) {
                        CrashFile *f = &crash_files[i];
                        if ((plugin && f->pf.name && strcmp(f->pf.name, plugin) == 0 &&
                             !loading[0]) ||
                            (loading[0] && strcmp(f->pf.path, loading) == 0) ||
                            (!note && f->pf.loading))
                                hit[i] = true;
                }
                for (size_t i = 0; i < crash_nfiles; i++) {
                        CrashFile *f = &crash_files[i];
                        f->pf.loading = false;
                        if (!hit[i])
                                continue;
                        if (tag[0])
                                snprintf(what, sizeof(what), "%s in %s", signal_name(sig), tag);
                        else
                                snprintf(what, sizeof(what), "%s while it was being loaded",
                                         note ? signal_name(sig) : "fiberd died");
                        strike_locked(f, what, blamed, sizeof(blamed));
                }
                free(hit);
                if (blamed[0])
                        log_msg(LOG_CRIT, "fiberd crashed last time: %s%s%s; blamed on %s",
                                note ? signal_name(sig) : "it died", tag[0] ? " in " : "",
                                tag[0]       ? tag
                                : loading[0] ? " while loading a plugin file"
                                             : "",
                                blamed);
                else if (note)
                        log_msg(LOG_CRIT, "fiberd crashed last time: %s %s%s", signal_name(sig),
                                tag[0] ? "in " : "outside any job",
                                tag[0] ? tag : "; no plugin is blamed");
                else
                        log_msg(LOG_WARNING,
                                "fiberd did not stop cleanly last time and left no crash "
                                "report (SIGKILL, the OOM killer or a power loss?); no plugin "
                                "is blamed");
        }
        for (size_t i = 0; i < crash_nfiles && r == 0; i++) {
                CrashFile *f = &crash_files[i];
                char name[256];
                if (f->pf.strikes >= CRASH_STRIKES_MAX) {
                        const char *n = clear_name(f, name, sizeof(name));
                        log_msg(LOG_ERR,
                                "plugin %s (%s) is quarantined: %s. Replace the file or run "
                                "`fiberctl plugins --clear %s`",
                                n, f->pf.path, f->pf.reason ? f->pf.reason : "", n);
                }
                r = store_put_plugin_file(s, &f->pf);
        }
        if (r == 0)
                r = store_set_meta(s, "clean", 0);
        if (r == 0 && note)
                unlink(note_path);
out_unlock:
        pthread_mutex_unlock(&crash_lock);
        return r;
}

const char *crash_job_message(uint64_t id)
{
        return id && id == crash_job_id ? crash_job_msg : NULL;
}

void crash_mark_clean(void)
{
        exiting = 1;
        if (crash_store && store_durable(crash_store))
                store_set_meta(crash_store, "clean", 1);
}

/* ------------------------------------------------------------------ the guard ---- */

/* A quarantined row other than @self with the contents @sha256, or NULL. */
static CrashFile *quarantined_copy_locked(const CrashFile *self, const char *sha256)
{
        for (size_t i = 0; sha256 && i < crash_nfiles; i++) {
                CrashFile *g = &crash_files[i];
                if (g != self && g->pf.strikes >= CRASH_STRIKES_MAX && g->pf.sha256 &&
                    strcmp(g->pf.sha256, sha256) == 0)
                        return g;
        }
        return NULL;
}

/* The loader is about to map @path (open as @fd): refuse it when its contents are
 * quarantined (crash.h, "The quarantine rule"); else note on disk that it is loading. */
static int guard_before(void *arg, const char *path, int fd, const struct stat *st, char *why,
                        size_t why_size)
{
        char sha256[65], name[256];
        const char *hash = sha256;
        StorePluginFile pf;
        CrashFile *f, *g;
        bool learned;
        int r;

        (void)arg;
        if (!crash_store || !store_durable(crash_store))
                return 0;
        r = file_sha256(fd, sha256);
        if (r < 0) {
                /* known by its stat alone, as a row from before hashes */
                log_msg(LOG_WARNING,
                        "cannot hash plugin file %s (%s): its crashes are kept by "
                        "its inode, size and mtime",
                        path, strerror(-r));
                hash = NULL;
        }
        pthread_mutex_lock(&crash_lock);
        f = file_find_locked(path);
        if (!f) {
                pf = (StorePluginFile){.path = path};
                r = file_add_locked(&pf, &f);
                if (r < 0)
                        goto out_unlock;
        }
        if (!same_contents(&f->pf, hash, st)) {
                /* other contents: a new file, a new chance */
                f->pf.strikes = 0;
                file_set_str(&f->pf.reason, NULL);
        }
        f->pf.size = (uint64_t)st->st_size;
        f->pf.ino = (uint64_t)st->st_ino;
        f->pf.dev = (uint64_t)st->st_dev;
        f->pf.mtime_ns = (int64_t)timespec_load_ns(&st->st_mtim);
        learned = hash && !f->pf.sha256; /* a row from before hashes */
        if (hash)
                file_set_str(&f->pf.sha256, hash);
        if (f->pf.strikes >= CRASH_STRIKES_MAX) {
                snprintf(why, why_size,
                         "quarantined: %.330s. Replace the file or run `fiberctl plugins --clear "
                         "%s`",
                         f->pf.reason ? f->pf.reason : "it crashed fiberd",
                         clear_name(f, name, sizeof(name)));
                /* from now on known by its contents, also when reinstalled (a failed
                 * write is logged by the store; the file stays refused either way) */
                if (learned)
                        store_put_plugin_file(crash_store, &f->pf);
                r = -EPERM;
                goto out_unlock;
        }
        g = quarantined_copy_locked(f, hash);
        if (g) {
                /* a copy or a rename of quarantined contents: this file takes on their
                 * strikes, so it stays refused when the other file changes or goes */
                char reason[600];
                snprintf(reason, sizeof(reason),
                         "the same contents (SHA-256 %.12s...) as %.150s: %.250s", hash, g->pf.path,
                         g->pf.reason ? g->pf.reason : "it crashed fiberd");
                f->pf.strikes = g->pf.strikes;
                file_set_str(&f->pf.reason, reason);
                store_put_plugin_file(crash_store, &f->pf); /* refused either way */
                snprintf(why, why_size,
                         "quarantined: %.330s. Replace the file or run `fiberctl plugins --clear "
                         "%s`",
                         reason, clear_name(f, name, sizeof(name)));
                r = -EPERM;
                goto out_unlock;
        }
        f->pf.loading = true;
        r = store_put_plugin_file(crash_store, &f->pf); /* on disk before dlopen() */
        if (r == 0)
                snprintf(loading_path, sizeof(loading_path), "%s", path);
out_unlock:
        pthread_mutex_unlock(&crash_lock);
        if (r < 0 && r != -EPERM)
                log_msg(LOG_WARNING,
                        "job store: cannot note the load of %s (%s); loading it "
                        "anyway",
                        path, strerror(-r));
        return r == -EPERM ? r : 0;
}

static void guard_after(void *arg, const char *path, const char *name)
{
        CrashFile *f;

        (void)arg;
        if (!crash_store || !store_durable(crash_store))
                return;
        loading_path[0] = '\0';
        pthread_mutex_lock(&crash_lock);
        f = file_find_locked(path);
        if (f) {
                f->pf.loading = false;
                if (name)
                        file_set_str(&f->pf.name, name);
                store_put_plugin_file(crash_store, &f->pf);
        }
        pthread_mutex_unlock(&crash_lock);
}

static const LoaderGuard crash_guard = {
        .before = guard_before,
        .after = guard_after,
};

const LoaderGuard *crash_loader_guard(void)
{
        return &crash_guard;
}

/* Whether @f is the plugin @name (@len bytes) for crash_clear(): its plugin name, or its
 * file's name without ".so". */
static bool clear_matches(const CrashFile *f, const char *name, size_t len)
{
        const char *base = strrchr(f->pf.path, '/');

        if (f->pf.name && strlen(f->pf.name) == len && memcmp(f->pf.name, name, len) == 0)
                return true;
        base = base ? base + 1 : f->pf.path;
        return strncmp(base, name, len) == 0 && strcmp(base + len, ".so") == 0;
}

int crash_clear(const char *name, size_t len)
{
        int n = 0, r = 0;

        if (!crash_store || !store_durable(crash_store))
                return 0;
        pthread_mutex_lock(&crash_lock);
        /* the files of that name, and every file with the same contents as one of them
         * (copies and renames took on its strikes) */
        for (size_t i = 0; i < crash_nfiles && r == 0; i++) {
                CrashFile *f = &crash_files[i];
                bool match = clear_matches(f, name, len);

                for (size_t k = 0; !match && f->pf.sha256 && k < crash_nfiles; k++)
                        match = crash_files[k].pf.sha256 &&
                                strcmp(crash_files[k].pf.sha256, f->pf.sha256) == 0 &&
                                clear_matches(&crash_files[k], name, len);
                if (!match || f->pf.strikes == 0)
                        continue;
                f->pf.strikes = 0;
                file_set_str(&f->pf.reason, NULL);
                r = store_put_plugin_file(crash_store, &f->pf);
                n++;
        }
        pthread_mutex_unlock(&crash_lock);
        return r < 0 ? r : n;
}
