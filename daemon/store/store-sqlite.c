/* SPDX-License-Identifier: MIT */
/*
 * store-sqlite.c — the SQLite backend of the job store (store.h), the default.
 *
 * One database file (default /var/lib/fiberd/jobs.db, store_default_path()) with two
 * tables: `jobs`, one row per job the daemon still knows (a retention drop deletes
 * it), and `meta`, holding `next_id` (the first id never handed out), so ids do not
 * repeat once retention has emptied `jobs`, and the other integers fiberd keeps
 * (crash.h's `clean`, the pauses of pause.c). Beside them `plugin_files` (crash.h) and
 * `schedules`, one row per periodic schedule (schedule.h), keyed by (owner, name),
 * replaced whole at each change and at each tick.
 *
 * Durability settings: journal_mode=WAL (a commit appends to the -wal file: one write
 * and one fsync, readers never block the writer) and synchronous=FULL (WAL's NORMAL
 * would skip the fsync at commit and could lose the last transactions at a power
 * loss, which is the promise job.submit makes). locking_mode=EXCLUSIVE: the first
 * write takes the lock for the life of the process, so a second fiberd pointed at the
 * same file refuses to start instead of running the same jobs twice; it also keeps the
 * WAL index in process memory.
 *
 * A file that exists but is not a readable database (truncated, overwritten, a failed
 * quick_check) is refused at open with a message naming the file and the way out:
 * fiberd never starts on an empty store in its place.
 *
 * A commit that fails rolls back, and says why as an errno (sqlite_write_errno()): a full
 * disk or quota, or a failing one, is an error the store thread holds its writes for and
 * tries again (store.h); the connection stays usable, and the next attempt writes the
 * same rows afresh.
 *
 * All calls come from one thread at a time: the main thread at start-up (open, load),
 * then only the store thread (commit), then the main thread at exit (close), so the
 * connection is opened with SQLITE_OPEN_NOMUTEX.
 */
#include "daemon/store/store.h"
#include "daemon/obs/log.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct SqliteStore {
        sqlite3 *db;
        sqlite3_stmt *put, *del, *del_range, *set_next_id, *begin, *commit, *rollback;
        sqlite3_stmt *put_plugin, *set_meta, *update;
        sqlite3_stmt *put_schedule, *del_schedule;
        uint64_t next_id; /* meta.next_id as last read or written */
} SqliteStore;

static const char sqlite_schema[] =
        "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
        "INSERT OR IGNORE INTO meta VALUES ('next_id', 1);"
        "CREATE TABLE IF NOT EXISTS jobs ("
        " id INTEGER PRIMARY KEY, state TEXT NOT NULL, plugin TEXT NOT NULL,"
        " owner INTEGER NOT NULL, gid INTEGER NOT NULL, priority INTEGER NOT NULL,"
        " timeout_ms INTEGER NOT NULL, created_ms INTEGER NOT NULL,"
        " started_ms INTEGER NOT NULL, finished_ms INTEGER NOT NULL,"
        " attempt INTEGER NOT NULL, n_fds INTEGER NOT NULL, args BLOB,"
        " result BLOB, error_code TEXT, error_message TEXT,"
        " progress_done INTEGER NOT NULL, progress_total INTEGER NOT NULL, class TEXT,"
        " sched BLOB);"
        "CREATE TABLE IF NOT EXISTS plugin_files ("
        " path TEXT PRIMARY KEY, name TEXT, size INTEGER NOT NULL, ino INTEGER NOT NULL,"
        " dev INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, loading INTEGER NOT NULL,"
        " strikes INTEGER NOT NULL, reason TEXT, sha256 TEXT);"
        "CREATE TABLE IF NOT EXISTS schedules ("
        " owner INTEGER NOT NULL, name TEXT NOT NULL, gid INTEGER NOT NULL, groups BLOB,"
        " cron TEXT, tz TEXT, every_ms INTEGER NOT NULL, missed TEXT NOT NULL,"
        " plugin TEXT NOT NULL, args BLOB NOT NULL, options BLOB NOT NULL,"
        " paused INTEGER NOT NULL, next_ms INTEGER NOT NULL, last_ms INTEGER NOT NULL,"
        " last_job INTEGER NOT NULL, created_ms INTEGER NOT NULL, PRIMARY KEY (owner, name));";

/* `groups` is the owner's supplementary gids as an array of native 32-bit integers:
 * the file is this host's, as the uids in it are. */
static const char sqlite_put_schedule[] =
        "INSERT OR REPLACE INTO schedules (owner, name, gid, groups, cron, tz, every_ms,"
        " missed, plugin, args, options, paused, next_ms, last_ms, last_job, created_ms)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)";

static const char sqlite_load_schedules[] =
        "SELECT owner, name, gid, groups, cron, tz, every_ms, missed, plugin, args, options,"
        " paused, next_ms, last_ms, last_job, created_ms FROM schedules ORDER BY name, owner";

/* The mutable columns are updated; the arguments only when given (the first write). */
static const char sqlite_put[] =
        "INSERT INTO jobs (id, state, plugin, owner, gid, priority, timeout_ms, created_ms,"
        " started_ms, finished_ms, attempt, n_fds, args, result, error_code, error_message,"
        " progress_done, progress_total, class, sched)"
        " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
        " ?18, ?19, ?20)"
        " ON CONFLICT (id) DO UPDATE SET state = excluded.state,"
        " started_ms = excluded.started_ms, finished_ms = excluded.finished_ms,"
        " attempt = excluded.attempt, args = coalesce(excluded.args, args),"
        " result = excluded.result, error_code = excluded.error_code,"
        " error_message = excluded.error_message, progress_done = excluded.progress_done,"
        " progress_total = excluded.progress_total, sched = excluded.sched";

/* A later write of a job (no arguments): only the mutable columns, no insert attempt. */
static const char sqlite_update[] =
        "UPDATE jobs SET state = ?2, started_ms = ?9, finished_ms = ?10, attempt = ?11,"
        " result = ?14, error_code = ?15, error_message = ?16, progress_done = ?17,"
        " progress_total = ?18, sched = ?20 WHERE id = ?1";

static const char sqlite_load[] =
        "SELECT id, state, plugin, owner, gid, priority, timeout_ms, created_ms, started_ms,"
        " finished_ms, attempt, n_fds, args, result, error_code, error_message,"
        " progress_done, progress_total, class, sched FROM jobs ORDER BY id";

/* What an operator can do about a database fiberd cannot read. */
#define SQLITE_ADVICE                                                                              \
        "fiberd will not start on an empty store in its place: stop here, move the file "          \
        "(and its -wal file) aside to start without those jobs, or restore it from a "             \
        "backup (`sqlite3 FILE .recover` may save rows of a damaged one)"

static SqliteStore *sqlite_of(Store *s)
{
        return s->backend_data;
}

static int sqlite_errno(int rc)
{
        switch (rc & 0xff) {
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_PERM:
        case SQLITE_READONLY:
        case SQLITE_AUTH:
                return -EACCES;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                return -EBUSY;
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_CANTOPEN:
                return -ENOENT;
        default:
                return -EIO;
        }
}

/*
 * The errno of a failed write, for the store thread's retries (store_error_transient()):
 * SQLITE_FULL is a full disk, and an I/O error says the system's errno when there was
 * one (EDQUOT over quota, ENOSPC, EIO, EROFS), so a write over quota is told from a
 * failing disk; a record the database refuses is -EINVAL, which no retry would cure.
 */
static int sqlite_write_errno(SqliteStore *q, int rc)
{
        int e = sqlite3_system_errno(q->db);

        switch (rc & 0xff) {
        case SQLITE_IOERR:
                return e > 0 ? -e : -EIO;
        case SQLITE_ERROR: /* a record or statement the database refuses: not the disk */
        case SQLITE_CONSTRAINT:
        case SQLITE_MISMATCH:
        case SQLITE_TOOBIG:
        case SQLITE_RANGE:
                return -EINVAL;
        default:
                return sqlite_errno(rc);
        }
}

static void sqlite_close(Store *s)
{
        SqliteStore *q = sqlite_of(s);

        if (!q)
                return;
        sqlite3_finalize(q->put);
        sqlite3_finalize(q->del);
        sqlite3_finalize(q->del_range);
        sqlite3_finalize(q->set_next_id);
        sqlite3_finalize(q->begin);
        sqlite3_finalize(q->commit);
        sqlite3_finalize(q->rollback);
        sqlite3_finalize(q->put_plugin);
        sqlite3_finalize(q->set_meta);
        sqlite3_finalize(q->update);
        sqlite3_finalize(q->put_schedule);
        sqlite3_finalize(q->del_schedule);
        sqlite3_close(q->db);
        free(q);
        s->backend_data = NULL;
}

/* One-row integer query; -1 on error. */
static int64_t sqlite_int(sqlite3 *db, const char *sql)
{
        sqlite3_stmt *st;
        int64_t v = -1;

        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                return -1;
        if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        return v;
}

/* Runs quick_check; true when it says "ok". */
static bool sqlite_quick_check(sqlite3 *db, char *why, size_t why_size)
{
        sqlite3_stmt *st;
        bool ok = false;

        if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &st, NULL) != SQLITE_OK) {
                snprintf(why, why_size, "%s", sqlite3_errmsg(db));
                return false;
        }
        if (sqlite3_step(st) == SQLITE_ROW) {
                const char *res = (const char *)sqlite3_column_text(st, 0);
                ok = res && strcmp(res, "ok") == 0;
                if (!ok)
                        snprintf(why, why_size, "integrity check: %s", res ? res : "?");
        } else {
                snprintf(why, why_size, "%s", sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
        return ok;
}

/*
 * Why the database at @path is busy, for an operator: another process holds sqlite's
 * lock on it (locking_mode = EXCLUSIVE: a running fiberd holds it as long as it runs).
 * fcntl(F_GETLK) on sqlite's lock bytes (the 512 bytes from its PENDING_BYTE at 1 GiB,
 * sqlite3's os_unix.c) names the holder's pid, when it is a process-owned POSIX lock.
 * Returns a static string. Context: the opening thread, after sqlite let go of @path.
 */
static const char *sqlite_locked_why(const char *path, const char *detail)
{
        static char buf[512];
        struct flock fl = {
                .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0x40000000, .l_len = 512};
        char who[64] = "another fiberd", comm[32] = "", file[64];
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        FILE *f;

        if (fd >= 0) {
                if (fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK && fl.l_pid > 0) {
                        /* its name, when /proc shows it: a sqlite3 shell is no fiberd */
                        snprintf(file, sizeof(file), "/proc/%d/comm", (int)fl.l_pid);
                        if ((f = fopen(file, "re"))) {
                                if (!fgets(comm, sizeof(comm), f))
                                        comm[0] = '\0';
                                comm[strcspn(comm, "\n")] = '\0';
                                fclose(f);
                        }
                        if (comm[0] && strncmp(comm, "fiberd", 6) != 0)
                                snprintf(who, sizeof(who), "another process (pid %d, %s)",
                                         (int)fl.l_pid, comm);
                        else
                                snprintf(who, sizeof(who), "another fiberd (pid %d)",
                                         (int)fl.l_pid);
                }
                close(fd);
        }
        snprintf(buf, sizeof(buf),
                 "it is locked by %s: stop that one, or point this one elsewhere with "
                 "[store] path or STATE_DIRECTORY (sqlite: %s)",
                 who, detail);
        return buf;
}

static int sqlite_open(Store *s, const char *path, char *why, size_t why_size)
{
        SqliteStore *q = calloc(1, sizeof(*q));
        char detail[256] = "";
        int rc;

        if (!q)
                return -ENOMEM;
        s->backend_data = q;
        rc = sqlite3_open_v2(path, &q->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc != SQLITE_OK) {
                snprintf(detail, sizeof(detail), "%s",
                         q->db ? sqlite3_errmsg(q->db) : sqlite3_errstr(rc));
                goto out_close;
        }
        sqlite3_busy_timeout(q->db, 1000);
        /* the first statements read the header: a file that is not a database fails here */
        rc = sqlite3_exec(q->db,
                          "PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL;"
                          "PRAGMA synchronous = FULL;",
                          NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                snprintf(detail, sizeof(detail), "%s", sqlite3_errmsg(q->db));
                goto out_close;
        }
        if (!sqlite_quick_check(q->db, detail, sizeof(detail))) {
                rc = SQLITE_CORRUPT;
                goto out_close;
        }
        /* a write: takes the exclusive lock now, so a second fiberd stops here */
        rc = sqlite3_exec(q->db, sqlite_schema, NULL, NULL, NULL);
        if (rc != SQLITE_OK) {
                snprintf(detail, sizeof(detail), "%s", sqlite3_errmsg(q->db));
                goto out_close;
        }
        /* A database from before job classes: the column is added (old rows: NULL, the
         * default class). "duplicate column" means it is there already. */
        rc = sqlite3_exec(q->db, "ALTER TABLE jobs ADD COLUMN class TEXT", NULL, NULL, NULL);
        if (rc != SQLITE_OK && !strstr(sqlite3_errmsg(q->db), "duplicate column")) {
                snprintf(detail, sizeof(detail), "cannot add the class column: %s",
                         sqlite3_errmsg(q->db));
                goto out_close;
        }
        /* ... and from before plugin files were known by their contents: sha256 (old
         * rows: NULL, matched by their stat once, crash.c) */
        rc = sqlite3_exec(q->db, "ALTER TABLE plugin_files ADD COLUMN sha256 TEXT", NULL, NULL,
                          NULL);
        if (rc != SQLITE_OK && !strstr(sqlite3_errmsg(q->db), "duplicate column")) {
                snprintf(detail, sizeof(detail), "cannot add the sha256 column: %s",
                         sqlite3_errmsg(q->db));
                goto out_close;
        }
        /* ... and from before job scheduling: the sched column */
        rc = sqlite3_exec(q->db, "ALTER TABLE jobs ADD COLUMN sched BLOB", NULL, NULL, NULL);
        if (rc != SQLITE_OK && !strstr(sqlite3_errmsg(q->db), "duplicate column")) {
                snprintf(detail, sizeof(detail), "cannot add the sched column: %s",
                         sqlite3_errmsg(q->db));
                goto out_close;
        }
        if (sqlite3_prepare_v2(q->db, sqlite_put, -1, &q->put, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "DELETE FROM jobs WHERE id = ?1", -1, &q->del, NULL) !=
                    SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "DELETE FROM jobs WHERE id BETWEEN ?1 AND ?2", -1,
                               &q->del_range, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db,
                               "UPDATE meta SET value = max(value, ?1) WHERE key = 'next_id'", -1,
                               &q->set_next_id, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "BEGIN IMMEDIATE", -1, &q->begin, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "COMMIT", -1, &q->commit, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "ROLLBACK", -1, &q->rollback, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db,
                               "INSERT OR REPLACE INTO plugin_files (path, name, size, ino, dev,"
                               " mtime_ns, loading, strikes, reason, sha256)"
                               " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                               -1, &q->put_plugin, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "INSERT OR REPLACE INTO meta VALUES (?1, ?2)", -1,
                               &q->set_meta, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, sqlite_update, -1, &q->update, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(q->db, sqlite_put_schedule, -1, &q->put_schedule, NULL) !=
                    SQLITE_OK ||
            sqlite3_prepare_v2(q->db, "DELETE FROM schedules WHERE owner = ?1 AND name = ?2", -1,
                               &q->del_schedule, NULL) != SQLITE_OK) {
                rc = sqlite3_errcode(q->db);
                snprintf(detail, sizeof(detail), "%s (a database of another version?)",
                         sqlite3_errmsg(q->db));
                goto out_close;
        }
        {
                int64_t v = sqlite_int(q->db, "SELECT value FROM meta WHERE key = 'next_id'");
                int64_t m = sqlite_int(q->db, "SELECT coalesce(max(id), 0) + 1 FROM jobs");
                q->next_id = (uint64_t)(v > m ? v : m);
        }
        return 0;

out_close:
        switch (rc & 0xff) {
        case SQLITE_NOTADB:
        case SQLITE_CORRUPT:
        case SQLITE_IOERR:
        case SQLITE_ERROR:
        case SQLITE_FORMAT:
                snprintf(why, why_size, "it cannot be read: %s. " SQLITE_ADVICE, detail);
                break;
        case SQLITE_BUSY:
        case SQLITE_LOCKED:
                sqlite_close(s); /* first: closing a probe fd would drop our own locks */
                snprintf(why, why_size, "%s", sqlite_locked_why(path, detail));
                return -EBUSY;
        default:
                snprintf(why, why_size, "%s", detail);
        }
        sqlite_close(s);
        return sqlite_errno(rc);
}

static uint64_t sqlite_next_id(Store *s)
{
        return sqlite_of(s)->next_id;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
        return (const char *)sqlite3_column_text(st, i);
}

static int sqlite_load_rows(Store *s, StoreLoadFn fn, void *arg, char *why, size_t why_size)
{
        SqliteStore *q = sqlite_of(s);
        sqlite3_stmt *st;
        int rc, r = 0;

        if (sqlite3_prepare_v2(q->db, sqlite_load, -1, &st, NULL) != SQLITE_OK) {
                snprintf(why, why_size, "%s", sqlite3_errmsg(q->db));
                return -EIO;
        }
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                StoreRecord rec = {
                        .id = (uint64_t)sqlite3_column_int64(st, 0),
                        .plugin = col_text(st, 2),
                        .owner = (uid_t)sqlite3_column_int64(st, 3),
                        .gid = (gid_t)sqlite3_column_int64(st, 4),
                        .priority = sqlite3_column_int(st, 5),
                        .timeout_ms = (uint64_t)sqlite3_column_int64(st, 6),
                        .created_ms = (uint64_t)sqlite3_column_int64(st, 7),
                        .started_ms = (uint64_t)sqlite3_column_int64(st, 8),
                        .finished_ms = (uint64_t)sqlite3_column_int64(st, 9),
                        .attempt = (uint32_t)sqlite3_column_int64(st, 10),
                        .n_fds = (uint32_t)sqlite3_column_int64(st, 11),
                        .args = sqlite3_column_blob(st, 12),
                        .args_len = (size_t)sqlite3_column_bytes(st, 12),
                        .result = sqlite3_column_blob(st, 13),
                        .result_len = (size_t)sqlite3_column_bytes(st, 13),
                        .error_code = col_text(st, 14),
                        .error_message = col_text(st, 15),
                        .progress_done = (uint64_t)sqlite3_column_int64(st, 16),
                        .progress_total = (uint64_t)sqlite3_column_int64(st, 17),
                        .class_name = col_text(st, 18),
                        .sched = sqlite3_column_blob(st, 19),
                        .sched_len = (size_t)sqlite3_column_bytes(st, 19),
                };
                const char *state = col_text(st, 1);
                if (!state || !rec.plugin ||
                    job_state_parse(state, strlen(state), &rec.state) < 0) {
                        snprintf(why, why_size, "job %llu: bad row (state %s); " SQLITE_ADVICE,
                                 (unsigned long long)rec.id, state ? state : "NULL");
                        r = -EIO;
                        break;
                }
                r = fn(&rec, arg);
                if (r < 0)
                        break;
        }
        if (r == 0 && rc != SQLITE_DONE) {
                snprintf(why, why_size, "reading jobs: %s. " SQLITE_ADVICE, sqlite3_errmsg(q->db));
                r = -EIO;
        }
        sqlite3_finalize(st);
        return r;
}

static int bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
        return s ? sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

static int bind_blob_or_null(sqlite3_stmt *st, int i, const void *p, size_t len)
{
        return p ? sqlite3_bind_blob64(st, i, p, len, SQLITE_STATIC) : sqlite3_bind_null(st, i);
}

/* Steps and resets @st. Return the sqlite result code. */
static int step_once(sqlite3_stmt *st)
{
        int rc = sqlite3_step(st);

        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Binds @r to @st (put's or update's numbering) and steps it once. */
static int sqlite_bind_step(sqlite3_stmt *st, const StoreRecord *r)
{
        sqlite3_bind_int64(st, 1, (sqlite3_int64)r->id);
        sqlite3_bind_text(st, 2, job_state_name(r->state), -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, r->plugin, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, r->owner);
        sqlite3_bind_int64(st, 5, r->gid);
        sqlite3_bind_int(st, 6, r->priority);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)r->timeout_ms);
        sqlite3_bind_int64(st, 8, (sqlite3_int64)r->created_ms);
        sqlite3_bind_int64(st, 9, (sqlite3_int64)r->started_ms);
        sqlite3_bind_int64(st, 10, (sqlite3_int64)r->finished_ms);
        sqlite3_bind_int64(st, 11, r->attempt);
        sqlite3_bind_int64(st, 12, r->n_fds);
        bind_blob_or_null(st, 13, r->args, r->args_len);
        bind_blob_or_null(st, 14, r->result, r->result_len);
        bind_text_or_null(st, 15, r->error_code);
        bind_text_or_null(st, 16, r->error_message);
        sqlite3_bind_int64(st, 17, (sqlite3_int64)r->progress_done);
        sqlite3_bind_int64(st, 18, (sqlite3_int64)r->progress_total);
        bind_text_or_null(st, 19, r->class_name);
        bind_blob_or_null(st, 20, r->sched, r->sched_len);
        return step_once(st);
}

static int sqlite_put_row(SqliteStore *q, const StoreRecord *r)
{
        int rc;

        /* the first write of a job carries its arguments: insert (an upsert, over a row
         * a crash left); a later one updates the mutable columns, cheaper than an upsert,
         * and inserts only when the row is missing */
        if (r->args)
                return sqlite_bind_step(q->put, r);
        rc = sqlite_bind_step(q->update, r);
        if (rc == SQLITE_OK && sqlite3_changes(q->db) == 0)
                rc = sqlite_bind_step(q->put, r);
        return rc;
}

static int sqlite_put_plugin(SqliteStore *q, const StorePluginFile *pf)
{
        sqlite3_stmt *st = q->put_plugin;

        sqlite3_bind_text(st, 1, pf->path, -1, SQLITE_STATIC);
        bind_text_or_null(st, 2, pf->name);
        sqlite3_bind_int64(st, 3, (sqlite3_int64)pf->size);
        sqlite3_bind_int64(st, 4, (sqlite3_int64)pf->ino);
        sqlite3_bind_int64(st, 5, (sqlite3_int64)pf->dev);
        sqlite3_bind_int64(st, 6, pf->mtime_ns);
        sqlite3_bind_int(st, 7, pf->loading);
        sqlite3_bind_int64(st, 8, pf->strikes);
        bind_text_or_null(st, 9, pf->reason);
        bind_text_or_null(st, 10, pf->sha256);
        return step_once(st);
}

static int sqlite_plugin_files(Store *s, StorePluginFn fn, void *arg)
{
        SqliteStore *q = sqlite_of(s);
        sqlite3_stmt *st;
        int r = 0;

        if (sqlite3_prepare_v2(q->db,
                               "SELECT path, name, size, ino, dev, mtime_ns, loading, strikes,"
                               " reason, sha256 FROM plugin_files ORDER BY path",
                               -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        while (r == 0 && sqlite3_step(st) == SQLITE_ROW) {
                StorePluginFile pf = {
                        .path = col_text(st, 0),
                        .name = col_text(st, 1),
                        .size = (uint64_t)sqlite3_column_int64(st, 2),
                        .ino = (uint64_t)sqlite3_column_int64(st, 3),
                        .dev = (uint64_t)sqlite3_column_int64(st, 4),
                        .mtime_ns = sqlite3_column_int64(st, 5),
                        .loading = sqlite3_column_int(st, 6) != 0,
                        .strikes = (uint32_t)sqlite3_column_int64(st, 7),
                        .reason = col_text(st, 8),
                        .sha256 = col_text(st, 9),
                };
                if (pf.path)
                        r = fn(&pf, arg);
        }
        sqlite3_finalize(st);
        return r;
}

static int sqlite_put_schedule_row(SqliteStore *q, const StoreSchedule *sc)
{
        sqlite3_stmt *st = q->put_schedule;

        sqlite3_bind_int64(st, 1, sc->owner);
        sqlite3_bind_text(st, 2, sc->name, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, sc->gid);
        bind_blob_or_null(st, 4, sc->n_groups ? sc->groups : NULL, sc->n_groups * sizeof(gid_t));
        bind_text_or_null(st, 5, sc->cron);
        bind_text_or_null(st, 6, sc->tz);
        sqlite3_bind_int64(st, 7, (sqlite3_int64)sc->every_ms);
        sqlite3_bind_text(st, 8, sc->missed, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 9, sc->plugin, -1, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 10, sc->args, sc->args_len, SQLITE_STATIC);
        sqlite3_bind_blob64(st, 11, sc->options, sc->options_len, SQLITE_STATIC);
        sqlite3_bind_int(st, 12, sc->paused);
        sqlite3_bind_int64(st, 13, (sqlite3_int64)sc->next_ms);
        sqlite3_bind_int64(st, 14, (sqlite3_int64)sc->last_ms);
        sqlite3_bind_int64(st, 15, (sqlite3_int64)sc->last_job);
        sqlite3_bind_int64(st, 16, (sqlite3_int64)sc->created_ms);
        return step_once(st);
}

static int sqlite_schedules(Store *s, StoreScheduleFn fn, void *arg)
{
        SqliteStore *q = sqlite_of(s);
        sqlite3_stmt *st;
        int rc, r = 0;

        if (sqlite3_prepare_v2(q->db, sqlite_load_schedules, -1, &st, NULL) != SQLITE_OK) {
                log_msg(LOG_ERR, "job store %s: reading schedules: %s", s->path,
                        sqlite3_errmsg(q->db));
                return -EIO;
        }
        while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                size_t groups_len = (size_t)sqlite3_column_bytes(st, 3);
                StoreSchedule sc = {
                        .owner = (uid_t)sqlite3_column_int64(st, 0),
                        .name = col_text(st, 1),
                        .gid = (gid_t)sqlite3_column_int64(st, 2),
                        .groups = sqlite3_column_blob(st, 3),
                        .n_groups = groups_len / sizeof(gid_t),
                        .cron = col_text(st, 4),
                        .tz = col_text(st, 5),
                        .every_ms = (uint64_t)sqlite3_column_int64(st, 6),
                        .missed = col_text(st, 7),
                        .plugin = col_text(st, 8),
                        .args = sqlite3_column_blob(st, 9),
                        .args_len = (size_t)sqlite3_column_bytes(st, 9),
                        .options = sqlite3_column_blob(st, 10),
                        .options_len = (size_t)sqlite3_column_bytes(st, 10),
                        .paused = sqlite3_column_int(st, 11) != 0,
                        .next_ms = (uint64_t)sqlite3_column_int64(st, 12),
                        .last_ms = (uint64_t)sqlite3_column_int64(st, 13),
                        .last_job = (uint64_t)sqlite3_column_int64(st, 14),
                        .created_ms = (uint64_t)sqlite3_column_int64(st, 15),
                };
                if (!sc.name || !sc.missed || !sc.plugin) {
                        log_msg(LOG_ERR,
                                "job store %s: a schedules row without a name, "
                                "missed policy or plugin is left out",
                                s->path);
                        continue;
                }
                r = fn(&sc, arg);
        }
        if (r == 0 && rc != SQLITE_DONE) {
                log_msg(LOG_ERR, "job store %s: reading schedules: %s. " SQLITE_ADVICE, s->path,
                        sqlite3_errmsg(q->db));
                r = -EIO;
        }
        sqlite3_finalize(st);
        return r;
}

static int sqlite_meta_get(Store *s, const char *key, int64_t *ret)
{
        SqliteStore *q = sqlite_of(s);
        sqlite3_stmt *st;
        int r = -ENOENT;

        if (sqlite3_prepare_v2(q->db, "SELECT value FROM meta WHERE key = ?1", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
                *ret = sqlite3_column_int64(st, 0);
                r = 0;
        }
        sqlite3_finalize(st);
        return r;
}

static int sqlite_meta_list(Store *s, const char *prefix, StoreMetaFn fn, void *arg)
{
        SqliteStore *q = sqlite_of(s);
        sqlite3_stmt *st;
        int r = 0;

        if (sqlite3_prepare_v2(q->db,
                               "SELECT key, value FROM meta WHERE substr(key, 1, length(?1)) = ?1"
                               " ORDER BY key",
                               -1, &st, NULL) != SQLITE_OK)
                return -EIO;
        sqlite3_bind_text(st, 1, prefix, -1, SQLITE_STATIC);
        while (r == 0 && sqlite3_step(st) == SQLITE_ROW) {
                const char *key = col_text(st, 0);
                if (key)
                        r = fn(key, sqlite3_column_int64(st, 1), arg);
        }
        sqlite3_finalize(st);
        return r;
}

/* Deletes the rows of @ids (ascending): a run of consecutive ids is one range delete,
 * one walk along the table instead of a search from its root for every row. */
static int sqlite_delete(SqliteStore *q, const uint64_t *ids, size_t n)
{
        int rc = SQLITE_OK;

        for (size_t i = 0, j; i < n && rc == SQLITE_OK; i = j) {
                for (j = i + 1; j < n && ids[j] <= ids[j - 1] + 1; j++)
                        ;
                if (j - i == 1) {
                        sqlite3_bind_int64(q->del, 1, (sqlite3_int64)ids[i]);
                        rc = step_once(q->del);
                } else {
                        sqlite3_bind_int64(q->del_range, 1, (sqlite3_int64)ids[i]);
                        sqlite3_bind_int64(q->del_range, 2, (sqlite3_int64)ids[j - 1]);
                        rc = step_once(q->del_range);
                }
        }
        return rc;
}

static int sqlite_commit(Store *s, ListHead *batch, char *why, size_t why_size)
{
        SqliteStore *q = sqlite_of(s);
        uint64_t next_id = q->next_id;
        ListHead *pos, *tmp;
        int rc, r;

        rc = step_once(q->begin);
        if (rc != SQLITE_OK)
                goto out_error;
        list_for_each_safe(pos, tmp, batch)
        {
                StoreWrite *w = list_entry(pos, StoreWrite, link);
                if (w->op == STORE_OP_DELETE) {
                        rc = sqlite_delete(q, w->ids, w->n_ids);
                } else if (w->op == STORE_OP_PLUGIN) {
                        rc = sqlite_put_plugin(q, &w->pf);
                } else if (w->op == STORE_OP_META) {
                        sqlite3_bind_text(q->set_meta, 1, w->meta_key, -1, SQLITE_STATIC);
                        sqlite3_bind_int64(q->set_meta, 2, w->meta_value);
                        rc = step_once(q->set_meta);
                } else if (w->op == STORE_OP_SCHEDULE) {
                        rc = sqlite_put_schedule_row(q, &w->schedule);
                } else if (w->op == STORE_OP_SCHEDULE_DELETE) {
                        sqlite3_bind_int64(q->del_schedule, 1, w->schedule.owner);
                        sqlite3_bind_text(q->del_schedule, 2, w->schedule.name, -1, SQLITE_STATIC);
                        rc = step_once(q->del_schedule);
                } else {
                        rc = sqlite_put_row(q, &w->rec);
                        if (w->rec.id >= next_id)
                                next_id = w->rec.id + 1;
                }
                if (rc != SQLITE_OK)
                        goto out_rollback;
        }
        if (next_id != q->next_id) {
                sqlite3_bind_int64(q->set_next_id, 1, (sqlite3_int64)next_id);
                rc = step_once(q->set_next_id);
                if (rc != SQLITE_OK)
                        goto out_rollback;
        }
        rc = step_once(q->commit); /* the fsync of the WAL, synchronous = FULL */
        if (rc != SQLITE_OK)
                goto out_rollback;
        q->next_id = next_id;
        return 0;

out_rollback:
        snprintf(why, why_size, "%s", sqlite3_errmsg(q->db));
        r = sqlite_write_errno(q, rc); /* before the rollback's own errno */
        step_once(q->rollback);
        return r;
out_error:
        snprintf(why, why_size, "%s", sqlite3_errmsg(q->db));
        return sqlite_write_errno(q, rc);
}

const StoreBackend store_sqlite_backend = {
        .name = "sqlite",
        .open = sqlite_open,
        .load = sqlite_load_rows,
        .next_id = sqlite_next_id,
        .commit = sqlite_commit,
        .plugin_files = sqlite_plugin_files,
        .meta_get = sqlite_meta_get,
        .meta_list = sqlite_meta_list,
        .schedules = sqlite_schedules,
        .close = sqlite_close,
};
