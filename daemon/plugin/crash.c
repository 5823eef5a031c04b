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
 * The files the store knows (StorePluginFile rows) are mirrored in a small array under
 * crash_lock; every change is committed before it matters (before a dlopen, at start).
 */
#include "daemon/plugin/crash.h"
#include "daemon/obs/log.h"
#include "scheduler/sched.h"
#include "scheduler/base/macro.h"
#include "scheduler/base/sigsafe.h"
#include "scheduler/base/time-util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CRASH_STRIKES_MAX 2 /* crashes in a row that quarantine a file */

typedef struct CrashFile {
        StorePluginFile pf; /* path, name, reason owned (malloc) */
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
                        "; fiberd dies with it. Its next start names this plugin; two crashes in a "
                        "row quarantine it\n");
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
        snprintf(reason, sizeof(reason), "%.400s (fiberd restarted %s); %u crash%s in a row", what,
                 when, f->pf.strikes, f->pf.strikes == 1 ? "" : "es");
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

        if (clean && !note) {
                for (size_t i = 0; i < crash_nfiles; i++) {
                        crash_files[i].pf.strikes = 0;
                        crash_files[i].pf.loading = false;
                }
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
                        if (!hit[i]) {
                                f->pf.strikes = 0;
                                continue;
                        }
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
                if (f->pf.strikes >= CRASH_STRIKES_MAX)
                        log_msg(LOG_ERR,
                                "plugin %s (%s) is quarantined: %s. Replace the file or run "
                                "`fiberctl plugins --clear %s`",
                                f->pf.name ? f->pf.name : "?", f->pf.path,
                                f->pf.reason ? f->pf.reason : "", f->pf.name ? f->pf.name : "?");
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

static int guard_before(void *arg, const char *path, int fd, const struct stat *st, char *why,
                        size_t why_size)
{
        StorePluginFile pf;
        CrashFile *f;
        int r;

        (void)arg;
        (void)fd;
        if (!crash_store || !store_durable(crash_store))
                return 0;
        pthread_mutex_lock(&crash_lock);
        f = file_find_locked(path);
        if (!f) {
                pf = (StorePluginFile){.path = path};
                r = file_add_locked(&pf, &f);
                if (r < 0)
                        goto out_unlock;
        }
        if (!same_file(&f->pf, st)) {
                /* a new file: a new chance */
                f->pf.size = (uint64_t)st->st_size;
                f->pf.ino = (uint64_t)st->st_ino;
                f->pf.dev = (uint64_t)st->st_dev;
                f->pf.mtime_ns = (int64_t)timespec_load_ns(&st->st_mtim);
                f->pf.strikes = 0;
        } else if (f->pf.strikes >= CRASH_STRIKES_MAX) {
                snprintf(why, why_size,
                         "quarantined: %s. Replace the file or run `fiberctl plugins --clear %s`",
                         f->pf.reason ? f->pf.reason : "it crashed fiberd",
                         f->pf.name ? f->pf.name : "NAME");
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

int crash_clear(const char *name, size_t len)
{
        int n = 0, r = 0;

        if (!crash_store || !store_durable(crash_store))
                return 0;
        pthread_mutex_lock(&crash_lock);
        for (size_t i = 0; i < crash_nfiles && r == 0; i++) {
                CrashFile *f = &crash_files[i];
                const char *base = strrchr(f->pf.path, '/');
                bool match = (f->pf.name && strlen(f->pf.name) == len &&
                              memcmp(f->pf.name, name, len) == 0);
                base = base ? base + 1 : f->pf.path;
                match = match || (strncmp(base, name, len) == 0 && strcmp(base + len, ".so") == 0);
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
