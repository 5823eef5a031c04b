/* SPDX-License-Identifier: MIT */
/*
 * batchref.c — a batch line's "after", references to earlier lines resolved (see
 * batchref.h).
 *
 * Two passes over the items: the first judges each item by itself and against the line
 * it is on (its shape, self or forward references, lines without a job, refused lines),
 * so a malformed item or a cycle is reported whatever else is still in flight; the
 * second, once nothing is pending, builds the array of ids.
 */
#include "client/batchref.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/protocol.h"

/* The line number of a reference "#N" (N from 1, decimal digits only); 0 if @s is not
 * one. */
static unsigned long ref_line(const char *s)
{
        char *end;

        if (s[0] != '#' || s[1] < '1' || s[1] > '9' || strspn(s + 1, "0123456789") != strlen(s + 1))
                return 0;
        errno = 0;
        unsigned long n = strtoul(s + 1, &end, 10);
        return errno || *end ? 0 : n;
}

static int refuse(char *why, size_t size, int r, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

static int refuse(char *why, size_t size, int r, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        if (why && size)
                vsnprintf(why, size, fmt, ap);
        va_end(ap);
        return r;
}

int batchref_resolve(const json_t *after, unsigned long line, const json_int_t *lines,
                     json_t **ret_after, char *why, size_t why_size)
{
        bool pending = false;
        json_t *item, *ids;
        size_t i;

        if (!after || json_is_null(after)) {
                ids = json_array();
                if (!ids)
                        return -ENOMEM;
                *ret_after = ids;
                return 0;
        }
        if (!json_is_array(after))
                return refuse(why, why_size, -EINVAL,
                              "\"after\" must be an array of job ids and \"#N\" references "
                              "to earlier lines");
        if (json_array_size(after) > IPC_AFTER_MAX)
                return refuse(why, why_size, -EINVAL, "\"after\" names %zu jobs; at most %d",
                              json_array_size(after), IPC_AFTER_MAX);
        json_array_foreach(after, i, item)
        {
                if (json_is_integer(item) && json_integer_value(item) > 0)
                        continue;
                const char *s = json_string_value(item);
                unsigned long n = s ? ref_line(s) : 0;
                if (n == 0)
                        return refuse(why, why_size, -EINVAL,
                                      "\"after\" item %zu: expected a job id (a positive "
                                      "number) or \"#N\", the job of line N",
                                      i + 1);
                if (n >= line)
                        return refuse(why, why_size, -EINVAL,
                                      "\"after\": \"%s\" refers to %s, not an earlier line; a job "
                                      "runs only after jobs of the lines above it (a cycle "
                                      "otherwise)",
                                      s, n == line ? "this line itself" : "a later line");
                json_int_t known = lines[n - 1];
                if (known == BATCHREF_NO_JOB)
                        return refuse(why, why_size, -EINVAL,
                                      "\"after\": line %lu holds no job (blank, or not a valid "
                                      "job spec)",
                                      n);
                if (known == BATCHREF_REFUSED)
                        return refuse(why, why_size, -EALREADY,
                                      "\"after\": the job of line %lu was refused, so this one "
                                      "cannot run after it",
                                      n);
                pending = pending || known == BATCHREF_PENDING;
        }
        if (pending)
                return 1;
        ids = json_array();
        json_array_foreach(after, i, item)
        {
                json_int_t id = json_is_integer(item)
                                        ? json_integer_value(item)
                                        : lines[ref_line(json_string_value(item)) - 1];
                if (!ids || json_array_append_new(ids, json_integer(id)) < 0) {
                        json_decref(ids);
                        return -ENOMEM;
                }
        }
        *ret_after = ids;
        return 0;
}
