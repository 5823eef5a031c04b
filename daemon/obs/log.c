/* SPDX-License-Identifier: MIT */
/*
 * log.c — stderr lines with sd-daemon "<N>" prefixes (see log.h), and job lines as
 * journal entries with fields when stderr is the journal.
 *
 * The threshold is one relaxed atomic int; a line is built in a stack buffer and
 * written with a single write(2) (a pipe or the journal's stream socket keeps a write
 * of up to PIPE_BUF bytes whole), so no lock is needed between worker threads.
 *
 * Journal detection (systemd.exec(5), $JOURNAL_STREAM): systemd sets JOURNAL_STREAM to
 * the "device:inode" of the stream it connected stdout/stderr to; when it matches fd 2,
 * stderr is the journal and job lines are sent natively with sd_journal_send(3) instead,
 * carrying FIBERD_JOB, FIBERD_PLUGIN and FIBERD_OWNER. Checked once (pthread_once).
 * Other lines stay on stderr, where journald reads their "<N>" priority.
 *
 * Every line's text is escaped (log_escape(): \n \r \t \\ and \xNN for the other
 * control characters and DEL), and so is a plugin's name in a job line's prefix: text
 * that came from a client (a path, an argument) or a plugin (host->log, host->fail)
 * stays on its one line, after the priority fiberd chose — it can neither start a new
 * line with a forged "<0>" prefix nor put control characters in a terminal or the
 * journal. Priorities come only from fiberd.
 */
#include "daemon/obs/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-journal.h>

static int log_threshold = LOG_INFO;

void log_set_level(int level)
{
        if (level < LOG_EMERG)
                level = LOG_EMERG;
        if (level > LOG_DEBUG)
                level = LOG_DEBUG;
        __atomic_store_n(&log_threshold, level, __ATOMIC_RELAXED);
}

int log_get_level(void)
{
        return __atomic_load_n(&log_threshold, __ATOMIC_RELAXED);
}

int log_level_parse(const char *s)
{
        static const char *const names[] = {"emerg",   "alert",  "crit", "err",
                                            "warning", "notice", "info", "debug"};

        if (!s)
                return -EINVAL;
        if (s[0] >= '0' && s[0] <= '7' && s[1] == '\0')
                return s[0] - '0';
        for (int i = 0; i < 8; i++)
                if (strcasecmp(s, names[i]) == 0)
                        return i;
        if (strcasecmp(s, "error") == 0)
                return LOG_ERR;
        if (strcasecmp(s, "warn") == 0)
                return LOG_WARNING;
        return -EINVAL;
}

/* Writes the line of @len bytes in @buf (LOG_LINE_MAX long) after the prefix of @off
 * bytes, cut with "..." when it did not fit, with one newline. */
static void log_write_line(char *buf, size_t off, size_t len)
{
        if (len > LOG_LINE_MAX - 2) {
                len = LOG_LINE_MAX - 2;
                memcpy(buf + len - 3, "...", 3);
        }
        /* A message's own trailing newline is not doubled. */
        while (len > off && buf[len - 1] == '\n')
                len--;
        buf[len++] = '\n';
        /* the raw system call: a line logged from a job fiber is written as from any
         * thread, never parked by the runtime's hooks (a log file is a regular file) */
        for (size_t done = 0; done < len;) {
                ssize_t w = syscall(SYS_write, STDERR_FILENO, buf + done, len - done);
                if (w <= 0)
                        break;
                done += (size_t)w;
        }
}

/* Appends @text after @off bytes already in @buf and writes the line. */
static void log_emit_text(char *buf, size_t off, const char *text)
{
        size_t n = strlen(text);

        if (off + n > LOG_LINE_MAX - 1)
                n = LOG_LINE_MAX - 1 - off;
        memcpy(buf + off, text, n);
        log_write_line(buf, off, off + n);
}

/* @fmt and @ap into @text (@size bytes, cut to fit), without trailing newlines: a
 * message's own trailing newline is not a line of its own, nor escaped. */
static void log_format(char *text, size_t size, const char *fmt, va_list ap)
{
        int n = vsnprintf(text, size, fmt, ap);

        if (n < 0)
                n = 0;
        if ((size_t)n >= size)
                n = (int)size - 1;
        while (n > 0 && text[n - 1] == '\n')
                text[--n] = '\0';
}

static pthread_once_t tty_once = PTHREAD_ONCE_INIT;
static bool tty_stderr;

static void tty_detect(void)
{
        tty_stderr = isatty(STDERR_FILENO) == 1;
}

/* A line's priority prefix into @buf: "<N>" for journald and log files; on a terminal
 * (fiberd started by hand, --check-config) nothing, or "error: " / "warning: " so the
 * level still shows. Return: its length. */
static int log_prefix(char *buf, size_t size, int level)
{
        pthread_once(&tty_once, tty_detect);
        if (!tty_stderr)
                return snprintf(buf, size, "<%d>", level & 7);
        return snprintf(buf, size, "%s",
                        level <= LOG_ERR       ? "error: "
                        : level == LOG_WARNING ? "warning: "
                                               : "");
}

void log_msgv(int level, const char *fmt, va_list ap)
{
        char buf[LOG_LINE_MAX], text[LOG_LINE_MAX];
        int off;
        int saved = errno;

        if (level > log_get_level())
                return;
        log_format(text, sizeof(text), fmt, ap);
        off = log_prefix(buf, sizeof(buf), level);
        log_escape(buf + off, sizeof(buf) - (size_t)off, text);
        log_write_line(buf, (size_t)off, strlen(buf));
        errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        log_msgv(level, fmt, ap);
        va_end(ap);
}

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static bool journal_stderr;

static void journal_detect(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (e && sscanf(e, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
            (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
                journal_stderr = true;
}

bool log_to_journal(void)
{
        pthread_once(&journal_once, journal_detect);
        return journal_stderr;
}

size_t log_escape(char *dst, size_t size, const char *src)
{
        static const char hex[] = "0123456789abcdef";
        size_t n = 0;

        if (size == 0)
                return 0;
        for (; *src; src++) {
                unsigned char c = (unsigned char)*src;
                char short_esc = c == '\n'   ? 'n'
                                 : c == '\r' ? 'r'
                                 : c == '\t' ? 't'
                                 : c == '\\' ? '\\'
                                             : 0;
                size_t need = short_esc ? 2 : c < 0x20 || c == 0x7f ? 4 : 1;

                if (n + need + 1 > size) {
                        /* cut: "..." in place of what did not fit */
                        while (n > 0 && n + 4 > size)
                                n--;
                        if (n + 4 <= size) {
                                memcpy(dst + n, "...", 3);
                                n += 3;
                        }
                        break;
                }
                if (need == 4) {
                        dst[n++] = '\\';
                        dst[n++] = 'x';
                        dst[n++] = hex[c >> 4];
                        dst[n++] = hex[c & 15];
                } else if (need == 2) {
                        dst[n++] = '\\';
                        dst[n++] = short_esc;
                } else {
                        dst[n++] = (char)c;
                }
        }
        dst[n] = '\0';
        return n;
}

/* A journal field "NAME=value" into @buf as @iov; the value cut to fit. */
static void journal_field(struct iovec *iov, char *buf, size_t size, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void journal_field(struct iovec *iov, char *buf, size_t size, const char *fmt, ...)
{
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(buf, size, fmt, ap);
        va_end(ap);
        if (n < 0)
                n = 0;
        *iov = (struct iovec){buf, (size_t)n < size ? (size_t)n : size - 1};
}

/* The one writer of job lines: to the journal with fields when stderr is the journal,
 * else to stderr after "job <id> plugin <name>: ". @owner LOG_OWNER_NONE and @class_name
 * NULL leave their fields out. */
static void log_job_emit(int level, uint64_t id, const char *plugin, uid_t owner,
                         const char *class_name, const char *text)
{
        char buf[LOG_LINE_MAX], name[4 * 64 + 1];
        int saved = errno;
        int off;

        if (level > log_get_level())
                return;
        /* the plugin's name comes from a file: escaped like the text */
        log_escape(name, sizeof(name), plugin ? plugin : "?");
        plugin = name;
        if (log_to_journal()) {
                char msg[LOG_LINE_MAX + 320], prio[16], ident[64], job[48], plug[300], own[32],
                        cls[64];
                struct iovec iov[7];
                size_t n = 0;

                journal_field(&iov[n++], msg, sizeof(msg), "MESSAGE=job %llu plugin %s: %s",
                              (unsigned long long)id, plugin, text);
                journal_field(&iov[n++], prio, sizeof(prio), "PRIORITY=%d", level & 7);
                journal_field(&iov[n++], ident, sizeof(ident), "SYSLOG_IDENTIFIER=%s",
                              program_invocation_short_name);
                journal_field(&iov[n++], job, sizeof(job), "FIBERD_JOB=%llu",
                              (unsigned long long)id);
                journal_field(&iov[n++], plug, sizeof(plug), "FIBERD_PLUGIN=%s", plugin);
                if (owner != LOG_OWNER_NONE)
                        journal_field(&iov[n++], own, sizeof(own), "FIBERD_OWNER=%u",
                                      (unsigned)owner);
                if (class_name && *class_name)
                        journal_field(&iov[n++], cls, sizeof(cls), "FIBERD_CLASS=%s", class_name);
                if (sd_journal_sendv(iov, (int)n) >= 0) {
                        errno = saved;
                        return;
                }
                /* the journal socket refused it: the line still goes to stderr */
        }
        off = log_prefix(buf, 256, level);
        off += snprintf(buf + off, 256 - (size_t)off,
                        "job %llu plugin %s: ", (unsigned long long)id, plugin);
        if (off < 0 || off >= 256)
                off = 255;
        log_emit_text(buf, (size_t)off, text);
        errno = saved;
}

void log_job_text(int level, uint64_t id, const char *plugin, uid_t owner, const char *text)
{
        log_job_emit(level, id, plugin, owner, NULL, text);
}

void log_job_class(int level, uint64_t id, const char *plugin, uid_t owner, const char *class_name,
                   const char *fmt, ...)
{
        char text[LOG_LINE_MAX], escaped[LOG_LINE_MAX];
        int saved = errno;
        va_list ap;

        if (level > log_get_level())
                return;
        va_start(ap, fmt);
        log_format(text, sizeof(text), fmt, ap);
        va_end(ap);
        log_escape(escaped, sizeof(escaped), text);
        log_job_emit(level, id, plugin, owner, class_name, escaped);
        errno = saved;
}

void log_job_ownerv(int level, uint64_t id, const char *plugin, uid_t owner, const char *fmt,
                    va_list ap)
{
        char text[LOG_LINE_MAX], escaped[LOG_LINE_MAX];
        int saved = errno;

        if (level > log_get_level())
                return;
        log_format(text, sizeof(text), fmt, ap);
        log_escape(escaped, sizeof(escaped), text);
        log_job_text(level, id, plugin, owner, escaped);
        errno = saved;
}

void log_job_owner(int level, uint64_t id, const char *plugin, uid_t owner, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        log_job_ownerv(level, id, plugin, owner, fmt, ap);
        va_end(ap);
}

void log_jobv(int level, uint64_t id, const char *plugin, const char *fmt, va_list ap)
{
        log_job_ownerv(level, id, plugin, LOG_OWNER_NONE, fmt, ap);
}

void log_job(int level, uint64_t id, const char *plugin, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        log_jobv(level, id, plugin, fmt, ap);
        va_end(ap);
}

void log_sched_hook(int level, const char *msg)
{
        /* one log line per line of @msg (sched_new() reports its layout in several),
         * so each carries its own <N> prefix */
        for (;;) {
                const char *nl = strchr(msg, '\n');
                int len = nl ? (int)(nl - msg) : (int)strlen(msg);

                log_msg(level, "scheduler: %.*s", len, msg);
                if (!nl)
                        break;
                msg = nl + 1;
        }
}
