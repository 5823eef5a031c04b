/* SPDX-License-Identifier: MIT */
/*
 * joblog.c — the bounded per-job line buffer of joblog.h: allocated at the first line,
 * then one allocation per line (a header and the text), a list oldest first, the oldest
 * freed while over a bound.
 */
#include "daemon/job/joblog.h"
#include "ipc/encoder.h"
#include "ipc/protocol.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct JobLogBuf {
        pthread_mutex_t lock;
        ListHead lines;   /* JobLogLine.link, oldest first */
        size_t n_lines;   /* kept */
        size_t bytes;     /* text bytes kept */
        uint64_t dropped; /* lines dropped (oldest first) to stay in bounds */
};

typedef struct JobLogLine {
        ListHead link;    /* in JobLogBuf.lines */
        uint64_t time_ms; /* CLOCK_REALTIME ms */
        int level;        /* syslog priority */
        size_t len;       /* of text, without the NUL */
        char text[];
} JobLogLine;

void joblog_init(JobLog *log)
{
        log->buf = NULL;
}

static void drop_oldest_locked(JobLogBuf *l)
{
        ListHead *e = list_pop_head(&l->lines);
        JobLogLine *line = list_entry(e, JobLogLine, link);

        l->n_lines--;
        l->bytes -= line->len;
        l->dropped++;
        free(line);
}

static void joblog_buf_free(JobLogBuf *l)
{
        while (l->n_lines)
                drop_oldest_locked(l);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

void joblog_done(JobLog *log)
{
        if (log->buf)
                joblog_buf_free(log->buf);
        log->buf = NULL;
}

/* @log's buffer, allocated (and installed with a compare-and-swap) when it has none yet.
 * Return: it; NULL when out of memory. */
static JobLogBuf *joblog_buf(JobLog *log)
{
        JobLogBuf *l = __atomic_load_n(&log->buf, __ATOMIC_ACQUIRE), *expected = NULL;

        if (l)
                return l;
        l = calloc(1, sizeof(*l));
        if (!l)
                return NULL;
        pthread_mutex_init(&l->lock, NULL);
        list_init(&l->lines);
        if (__atomic_compare_exchange_n(&log->buf, &expected, l, false, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
                return l;
        joblog_buf_free(l); /* another line came first: @expected is its buffer */
        return expected;
}

int joblog_append(JobLog *log, int level, uint64_t time_ms, const char *text, size_t len)
{
        JobLogBuf *l = joblog_buf(log);
        JobLogLine *line;

        if (!l)
                return -ENOMEM;

        if (len > JOBLOG_MAX_BYTES)
                len = JOBLOG_MAX_BYTES;
        line = malloc(sizeof(*line) + len + 1);
        pthread_mutex_lock(&l->lock);
        if (!line) {
                l->dropped++;
                pthread_mutex_unlock(&l->lock);
                return -ENOMEM;
        }
        line->time_ms = time_ms;
        line->level = level;
        line->len = len;
        memcpy(line->text, text, len);
        line->text[len] = '\0';
        while (l->n_lines && (l->n_lines >= JOBLOG_MAX_LINES || l->bytes + len > JOBLOG_MAX_BYTES))
                drop_oldest_locked(l);
        list_add_tail(&l->lines, &line->link);
        l->n_lines++;
        l->bytes += len;
        pthread_mutex_unlock(&l->lock);
        return 0;
}

/* lines: [{time_ms, level, text}...], oldest first. Context: @l's lock held. */
static int pack_lines(msgpack_packer *pk, const void *arg)
{
        JobLogBuf *l = (JobLogBuf *)arg;
        ListHead *pos, *tmp;
        int r = msgpack_pack_array(pk, (uint32_t)l->n_lines);

        list_for_each_safe(pos, tmp, &l->lines)
        {
                const JobLogLine *line = list_entry(pos, JobLogLine, link);

                r |= IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_TIME_MS, line->time_ms),
                                  IPC_KV_UINT(IPC_KEY_LEVEL, (uint64_t)line->level),
                                  IPC_KV_CSTR(IPC_KEY_TEXT, line->text));
        }
        return r;
}

static int pack_no_lines(msgpack_packer *pk, const void *arg)
{
        return msgpack_pack_array(pk, 0);
}

int joblog_pack(JobLog *log, uint64_t id, msgpack_packer *pk)
{
        JobLogBuf *l = __atomic_load_n(&log->buf, __ATOMIC_ACQUIRE);
        int r;

        if (!l) /* it never logged */
                return IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ID, id),
                                    IPC_KV_PACK(IPC_KEY_LINES, pack_no_lines, NULL),
                                    IPC_KV_UINT(IPC_KEY_DROPPED, 0), IPC_KV_UINT(IPC_KEY_BYTES, 0))
                               ? -ENOMEM
                               : 0;

        pthread_mutex_lock(&l->lock);
        r = IPC_PACK_MAP(pk, IPC_KV_UINT(IPC_KEY_ID, id), IPC_KV_PACK(IPC_KEY_LINES, pack_lines, l),
                         IPC_KV_UINT(IPC_KEY_DROPPED, l->dropped),
                         IPC_KV_UINT(IPC_KEY_BYTES, l->bytes));
        pthread_mutex_unlock(&l->lock);
        return r ? -ENOMEM : 0;
}
