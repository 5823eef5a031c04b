/* SPDX-License-Identifier: MIT */
/*
 * joblog.h — the log lines a job wrote with host->log(), kept with its record so its
 * owner can read them back (`job.logs`, `fiberctl logs ID`) after journald rotated
 * them away or when fiberd does not run under systemd.
 *
 * Bounded: at most JOBLOG_MAX_LINES lines and JOBLOG_MAX_BYTES bytes of text per job;
 * beyond either, the oldest lines are dropped (a tail, as `journalctl -n` shows) and
 * counted, so the reader is told how many are missing. The text is stored as logged
 * (already escaped by log.c: no control characters), without the "job N plugin P: "
 * prefix. The memory is the job record's: freed with it when retention drops the job.
 *
 * A JobLog is one pointer in the Job: most jobs never log, and a job's record is kept
 * for its retention, so the buffer (its mutex, its list, its counts) is allocated at
 * the first line and never for a job that writes none. The pointer is set once, with a
 * compare-and-swap (two first lines at once: one buffer wins, the other is freed).
 * Each buffer has its own mutex, held only to append or copy a line (no yield), so a
 * plugin's fibers on several workers may log at once without the job table's lock.
 */
#ifndef FIBERD_DAEMON_JOBLOG_H
#define FIBERD_DAEMON_JOBLOG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "ipc/protocol.h"
#include "scheduler/base/list.h"

#define JOBLOG_MAX_LINES IPC_JOB_LOGS_MAX_LINES
#define JOBLOG_MAX_BYTES IPC_JOB_LOGS_MAX_BYTES

typedef struct JobLogBuf JobLogBuf;

typedef struct JobLog {
        JobLogBuf *buf; /* owned; NULL until the first line (atomic: set once) */
} JobLog;

/* joblog_init - an empty log (nothing allocated). Context: any (job_new()). */
void joblog_init(JobLog *l);

/* joblog_done - free every line. Context: whoever drops the last job reference. */
void joblog_done(JobLog *l);

/*
 * joblog_append - keep one line: @level (syslog priority), @time_ms (CLOCK_REALTIME ms),
 * @text of @len bytes (copied; cut to JOBLOG_MAX_BYTES). Drops the oldest lines to stay
 * in bounds. Return: 0; -ENOMEM (the line is counted as dropped; not counted when
 * not even the buffer could be allocated).
 * Context: any thread or fiber; does not yield.
 */
int joblog_append(JobLog *l, int level, uint64_t time_ms, const char *text, size_t len);

/*
 * joblog_pack - job.logs' result (PROTOCOL.md): {id, lines: [{time_ms, level, text}],
 * dropped, bytes}. Return: 0; -ENOMEM. Context: any; takes @l's lock; does not yield.
 */
int joblog_pack(JobLog *l, uint64_t id, msgpack_packer *pk);

#endif
