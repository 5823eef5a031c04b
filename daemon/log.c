/* SPDX-License-Identifier: MIT */
/*
 * log.c — stderr lines with sd-daemon "<N>" prefixes (see log.h), their text escaped.
 *
 * The threshold is one relaxed atomic int; a line is built in a stack buffer and
 * written with a single write(2) (a pipe or the journal's stream socket keeps a write
 * of up to PIPE_BUF bytes whole), so no lock is needed between worker threads.
 */
#include "daemon/log.h"

#include <errno.h>
#include <stdbool.h>
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

/*
 * Copies @src (@n bytes) to @dst (room for @size bytes) with every control character,
 * DEL and backslash escaped: \n \r \t \\ and \xNN. Stops before an escape that
 * would not fit, and then sets *@cut. Returns the bytes written.
 */
static size_t log_escape(char *dst, size_t size, const char *src, size_t n, bool *cut)
{
        static const char hex[] = "0123456789abcdef";
        size_t o = 0;

        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)src[i];
                char esc[4];
                size_t len = 2;

                esc[0] = '\\';
                if (ch == '\n')
                        esc[1] = 'n';
                else if (ch == '\r')
                        esc[1] = 'r';
                else if (ch == '\t')
                        esc[1] = 't';
                else if (ch == '\\')
                        esc[1] = '\\';
                else if (ch < 0x20 || ch == 0x7f) {
                        esc[1] = 'x';
                        esc[2] = hex[ch >> 4];
                        esc[3] = hex[ch & 15];
                        len = 4;
                } else {
                        esc[0] = (char)ch;
                        len = 1;
                }
                if (o + len > size) {
                        *cut = true;
                        break;
                }
                memcpy(dst + o, esc, len);
                o += len;
        }
        return o;
}

/*
 * Appends the formatted text after @off bytes already in @buf and writes the line. The
 * text is escaped (log_escape()): whatever a client or a plugin put in it, it stays on
 * this one line, after the priority fiberd chose — a newline cannot start a forged
 * "<0>" line of its own. This is the one place every log line passes.
 */
static void log_emit(char *buf, size_t off, const char *fmt, va_list ap)
{
        char text[LOG_LINE_MAX];
        int n = vsnprintf(text, sizeof(text), fmt, ap);
        size_t len, tlen, room = LOG_LINE_MAX - 1 - off;
        bool cut;

        if (n < 0)
                n = 0;
        cut = (size_t)n >= sizeof(text);
        tlen = (size_t)n < sizeof(text) ? (size_t)n : sizeof(text) - 1;
        /* A message's own trailing newline is not doubled, nor escaped. */
        while (tlen > 0 && text[tlen - 1] == '\n')
                tlen--;
        len = off + log_escape(buf + off, room, text, tlen, &cut);
        if (cut) {
                len = len > LOG_LINE_MAX - 4 ? LOG_LINE_MAX - 4 : len;
                memcpy(buf + len, "...", 3);
                len += 3;
        }
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
        bool cut = false;
        size_t len;

        if (level > log_get_level())
                return;
        /* the plugin's name comes from a file: escaped like the text */
        off = snprintf(buf, 64, "<%d>job %llu plugin ", level & 7, (unsigned long long)id);
        len = (size_t)off + log_escape(buf + off, 192, plugin ? plugin : "?",
                                       strlen(plugin ? plugin : "?"), &cut);
        memcpy(buf + len, ": ", 2);
        log_emit(buf, len + 2, fmt, ap);
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
