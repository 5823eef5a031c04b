/* SPDX-License-Identifier: MIT */
/*
 * log.c — stderr lines with sd-daemon "<N>" prefixes (see log.h).
 *
 * The threshold is one relaxed atomic int; a line is built in a stack buffer and
 * written with a single write(2) (a pipe or the journal's stream socket keeps a write
 * of up to PIPE_BUF bytes whole), so no lock is needed between worker threads.
 */
#include "daemon/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

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

/* Appends the formatted text after @off bytes already in @buf and writes the line. */
static void log_emit(char *buf, size_t off, const char *fmt, va_list ap)
{
        int n = vsnprintf(buf + off, LOG_LINE_MAX - off - 1, fmt, ap);
        size_t len;

        if (n < 0)
                n = 0;
        len = off + (size_t)n;
        if (len > LOG_LINE_MAX - 2) {
                len = LOG_LINE_MAX - 2;
                memcpy(buf + len - 3, "...", 3);
        }
        /* A message's own trailing newline is not doubled. */
        while (len > off && buf[len - 1] == '\n')
                len--;
        buf[len++] = '\n';
        for (size_t done = 0; done < len;) {
                ssize_t w = write(STDERR_FILENO, buf + done, len - done);
                if (w <= 0)
                        break;
                done += (size_t)w;
        }
}

void log_msgv(int level, const char *fmt, va_list ap)
{
        char buf[LOG_LINE_MAX];
        int off;
        int saved = errno;

        if (level > log_get_level())
                return;
        off = snprintf(buf, sizeof(buf), "<%d>", level & 7);
        log_emit(buf, (size_t)off, fmt, ap);
        errno = saved;
}

void log_msg(int level, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        log_msgv(level, fmt, ap);
        va_end(ap);
}

void log_jobv(int level, uint64_t id, const char *plugin, const char *fmt, va_list ap)
{
        char buf[LOG_LINE_MAX];
        int off;
        int saved = errno;

        if (level > log_get_level())
                return;
        off = snprintf(buf, 256, "<%d>job %llu plugin %s: ", level & 7, (unsigned long long)id,
                       plugin ? plugin : "?");
        if (off < 0 || off >= 256)
                off = 255;
        log_emit(buf, (size_t)off, fmt, ap);
        errno = saved;
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
