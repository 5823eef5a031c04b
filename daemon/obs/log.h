/* SPDX-License-Identifier: MIT */
/*
 * log.h — fiberd's log lines: one line per call on stderr, prefixed with the sd-daemon
 * "<N>" syslog priority (sd-daemon.h's SD_ERR, SD_INFO, ...) so that journald, which
 * reads the service's stderr, keeps the level of every line. When stderr is a terminal
 * (fiberd started by hand, --check-config) a human reads it: no "<N>", but "error: " or
 * "warning: " before the lines of those levels.
 *
 * Every line about a job goes through log_job() (or log_job_owner()), which starts the
 * text with "job <id> plugin <name>: " so that `journalctl -u fiberd | grep 'job 42 '`
 * finds all of a job's lines, and escapes its text (log_escape()). When stderr is the
 * journal ($JOURNAL_STREAM names it, systemd.exec(5)), job lines are sent with
 * sd_journal_send() instead, with the fields FIBERD_JOB=<id>, FIBERD_PLUGIN=<name> and,
 * when known, FIBERD_OWNER=<uid> and FIBERD_CLASS=<class>, so `journalctl FIBERD_JOB=42`
 * finds them.
 *
 * The text of every line is escaped (control characters, DEL and backslash become \n,
 * \t, \xNN, \\): whatever a client or a plugin put in it cannot start a line of its
 * own or carry a priority; the "<N>" prefix is always fiberd's.
 * A line is formatted into a stack buffer and written with one write(2), so lines from
 * different worker threads never interleave; no allocation, no lock, safe from any
 * fiber or thread (errno is not read across a switch).
 */
#ifndef FIBERD_DAEMON_LOG_H
#define FIBERD_DAEMON_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <syslog.h>

/* The longest line written; longer text is cut and ends in "...". */
#define LOG_LINE_MAX 1024

/*
 * log_set_level - drop lines less important than @level (a syslog priority, LOG_ERR ..
 * LOG_DEBUG; the default is LOG_INFO). Context: any; takes effect for later lines.
 */
void log_set_level(int level);

/* log_get_level - the current threshold. Context: any. */
int log_get_level(void);

/*
 * log_level_parse - "err", "warning", "notice", "info", "debug" (or a digit 0..7) to a
 * syslog priority. Return: the priority, or -EINVAL. Context: any.
 */
int log_level_parse(const char *s);

/*
 * log_msg - write "<@level>text\n" to stderr when @level passes the threshold.
 * Context: any thread or fiber; never yields, never allocates.
 */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_msgv(int level, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/*
 * log_job - like log_msg(), prefixed with "job @id plugin @plugin: ". @plugin may be NULL
 * (printed as "?"). Context: any; never yields.
 */
void log_job(int level, uint64_t id, const char *plugin, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
void log_jobv(int level, uint64_t id, const char *plugin, const char *fmt, va_list ap)
        __attribute__((format(printf, 4, 0)));

/* The owner of a job line that has none to name (the stall hook knows only id and
 * plugin): no FIBERD_OWNER field. */
#define LOG_OWNER_NONE ((uid_t)-1)

/*
 * log_job_owner - like log_job(), also naming the job's owner @owner (a uid, or
 * LOG_OWNER_NONE) in the journal's FIBERD_OWNER field. Context: any; never yields.
 */
void log_job_owner(int level, uint64_t id, const char *plugin, uid_t owner, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));
void log_job_ownerv(int level, uint64_t id, const char *plugin, uid_t owner, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));

/*
 * log_job_class - like log_job_owner(), also naming the job's class @class_name (NULL
 * or "": none) in the journal's FIBERD_CLASS field: a job's life lines (joblines.h).
 * Context: any; never yields.
 */
void log_job_class(int level, uint64_t id, const char *plugin, uid_t owner, const char *class_name,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * log_job_text - a job line whose @text is already escaped (log_escape()): the one
 * writer behind log_job*(), for a caller that keeps the same text too (host->log keeps
 * it with the job, joblog.h). Context: any; never yields.
 */
void log_job_text(int level, uint64_t id, const char *plugin, uid_t owner, const char *text);

/*
 * log_escape - copy @src into @dst (@size bytes, NUL-terminated) with newline, carriage
 * return, tab and backslash written as \n \r \t \\, and every other control character
 * (below 0x20, and 0x7f) as \xNN, cut with "..." when it does not fit. Every log line's
 * text passes through it (log_msg() and log_job*() alike), so no client or plugin string
 * can start a line of its own. Return: the length written. Context: any; pure.
 */
size_t log_escape(char *dst, size_t size, const char *src);

/* log_to_journal - whether stderr is the journal (job lines go to it with fields).
 * Decided once, at the first call. Context: any. */
bool log_to_journal(void);

/* The sched_set_log() hook: routes the runtime's lines through log_msg(), one log
 * line per line of the message. Context: any. */
void log_sched_hook(int level, const char *msg);

#endif
