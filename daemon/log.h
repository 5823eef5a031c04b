/* SPDX-License-Identifier: MIT */
/*
 * log.h — fiberd's log lines: one line per call on stderr, prefixed with the sd-daemon
 * "<N>" syslog priority (sd-daemon.h's SD_ERR, SD_INFO, ...) so that journald, which
 * reads the service's stderr, keeps the level of every line.
 *
 * Every line about a job goes through log_job(), which starts the text with
 * "job <id> plugin <name>: " so that `journalctl -u fiberd | grep 'job 42 '` finds all
 * of a job's lines.
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
#include <stdint.h>
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

/* The sched_set_log() hook: routes the runtime's lines through log_msg(), one log
 * line per line of the message. Context: any. */
void log_sched_hook(int level, const char *msg);

#endif
