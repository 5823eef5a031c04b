/* SPDX-License-Identifier: MIT */
/*
 * crash.h — crash-only plugins: plugins run inside fiberd, so a plugin that segfaults,
 * aborts or calls exit() takes the daemon down with it. This module makes such a crash
 * visible and stops it from repeating forever:
 *
 *  - a fatal signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, and the runtime's
 *    stack-overflow report) writes a report to fd 2 naming the job and plugin (the
 *    crashing fiber's tag) or the plugin file being loaded, and leaves a crash note
 *    beside the job store (<store>-crash), with async-signal-safe calls only, before
 *    the process dies; a plugin that calls exit() from a job is reported the same way
 *    (an atexit handler);
 *  - the loader announces every file it is about to dlopen()/init() (LoaderGuard):
 *    the store records it, on disk, before the risky step;
 *  - at the next start, before anything else is logged, the note and the store's
 *    "clean" flag say whether the last run crashed and which plugin file it was in:
 *    the first log line names it, and that file gets a strike; a crash with no report
 *    (SIGKILL, OOM, power loss) blames nobody;
 *  - the job the crash happened in is not run again: it ends failed with INTERRUPTED.
 *
 * The quarantine rule. A strike belongs to a file's *contents*: the loader hands the
 * guard the very file it is about to map (after the trust and ELF checks), and the
 * guard hashes it (SHA-256). Strikes are kept across clean stops, restarts and crashes
 * blamed on other files. Contents with two strikes are quarantined: the loader refuses
 * the file — and any other plugin file with the same contents, a copy or a rename —
 * with a reason in `fiberctl plugins` that names the command to clear it. The strikes
 * go back to 0 only when the file at that path gets other contents (a new build: a
 * new chance; touching it, or reinstalling the same bytes, is not a change) or when an
 * admin clears them (plugins.clear, `fiberctl plugins --clear NAME`, NAME the plugin's
 * name or its file's name without ".so"). A row stored before fiberd hashed files has
 * no hash: it is matched once by its stat identity (device, inode, size, mtime), then
 * carries the hash.
 *
 * The memory store keeps nothing, so with it crashes are reported but not remembered.
 * The redis store (a fleet) keeps each host's plugin files and flag in Redis under the
 * host's stable name (store-redis.c); its note stays on the host, beside where the
 * sqlite database would be (store_default_path(), then -crash).
 */
#ifndef FIBERD_DAEMON_CRASH_H
#define FIBERD_DAEMON_CRASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "daemon/store/store.h"
#include "plugins/loader.h"

/*
 * crash_init - install the fatal-signal handlers and the exit() check, read what the
 * last run left (the note, the clean flag, the plugin files) and log the first line
 * about it, give strikes, and mark this run as not (yet) stopped cleanly.
 * Call before the scheduler starts (its stack-overflow handler chains to ours) and
 * before plugins load. @s: the opened store (not owned; must live until exit).
 * Return: 0; -ENOMEM; a store error (logged). Context: main thread at start-up.
 */
int crash_init(Store *s);

/* crash_loader_guard - the LoaderGuard that records loads and refuses quarantined
 * files (plugin_host_set_guard()). Context: after crash_init(). */
const LoaderGuard *crash_loader_guard(void);

/*
 * crash_job_message - when the last run crashed inside job @id, the message its record
 * gets (failed, INTERRUPTED: not retried, even for a retry-safe plugin); else NULL.
 * Context: main thread at start-up (jobtable_restore()).
 */
const char *crash_job_message(uint64_t id);

/*
 * crash_clear - forget the strikes of the plugin called @name (or whose file is
 * @name.so), and of every file with the same contents (its copies: crash.h, "The
 * quarantine rule"), so the next scan loads it again. Return: the number of files cleared (0
 * when none was quarantined); -ENOMEM or a store error. Context: a request fiber (blocks
 * its worker on a commit, as the loader does); not a job fiber.
 */
int crash_clear(const char *name, size_t len);

/* crash_mark_clean - this run stops cleanly: no strike at the next start. Context: main
 * thread at exit, once no plugin code runs (or when leaving jobs that ignore cancel). */
void crash_mark_clean(void);

#endif
