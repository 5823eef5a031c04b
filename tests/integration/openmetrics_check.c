/* SPDX-License-Identifier: MIT */
/*
 * openmetrics_check.c — the strict OpenMetrics text checker of openmetrics_check.h: one
 * pass over the lines, keeping the current family and, for histograms, the running
 * bucket series of the current label set.
 */
#include "tests/integration/openmetrics_check.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_LEN 200
#define SEEN_MAX 4096

typedef struct Checker {
        char *err;
        size_t size;
        unsigned line;
        char family[NAME_MAX_LEN];
        char type[24];
        bool has_help, has_unit;
        char *families[SEEN_MAX]; /* declared so far */
        size_t nfamilies;
        char *samples[SEEN_MAX]; /* "name{labels}" seen */
        size_t nsamples;
        /* histogram: the bucket series being read */
        char series[512]; /* labels without le */
        double last_le, last_bucket, inf_bucket;
        bool in_series, series_closed;
} Checker;

__attribute__((format(printf, 2, 3))) static bool fail(Checker *c, const char *fmt, ...)
{
        va_list ap;
        int n = snprintf(c->err, c->size, "line %u: ", c->line);

        va_start(ap, fmt);
        if (n >= 0 && (size_t)n < c->size)
                vsnprintf(c->err + n, c->size - (size_t)n, fmt, ap);
        va_end(ap);
        return false;
}

static bool is_metric_name(const char *s, size_t len)
{
        if (len == 0 || len >= NAME_MAX_LEN ||
            !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
                return false;
        for (size_t i = 1; i < len; i++)
                if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
                        return false;
        return true;
}

static bool ends_with(const char *s, const char *suffix)
{
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && strcmp(s + a - b, suffix) == 0;
}

static bool parse_float(const char *s, size_t len, double *ret)
{
        char buf[64], *end;

        if (len == 0 || len >= sizeof(buf))
                return false;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (strcmp(buf, "+Inf") == 0) {
                *ret = INFINITY;
                return true;
        }
        if (strcmp(buf, "-Inf") == 0) {
                *ret = -INFINITY;
                return true;
        }
        if (strcmp(buf, "NaN") == 0) {
                *ret = NAN;
                return true;
        }
        if (!(isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '+' || buf[0] == '.'))
                return false;
        errno = 0;
        *ret = strtod(buf, &end);
        return errno == 0 && *end == '\0';
}

static bool seen(char **set, size_t *n, const char *s)
{
        for (size_t i = 0; i < *n; i++)
                if (strcmp(set[i], s) == 0)
                        return true;
        if (*n < SEEN_MAX)
                set[(*n)++] = strdup(s);
        return false;
}

/* Ends the histogram series being read: it must have closed at +Inf. */
static bool close_series(Checker *c)
{
        if (c->in_series && !c->series_closed)
                return fail(c, "histogram %s{%s}: buckets do not end at le=\"+Inf\"", c->family,
                            c->series);
        c->in_series = false;
        return true;
}

static bool metadata(Checker *c, const char *p)
{
        const char *kw = p + 2, *name, *rest;
        size_t kwlen, namelen;

        kwlen = strcspn(kw, " ");
        if (kw[kwlen] != ' ')
                return fail(c, "a comment line that is not TYPE, HELP, UNIT or EOF");
        name = kw + kwlen + 1;
        namelen = strcspn(name, " ");
        if (!is_metric_name(name, namelen) || name[namelen] != ' ')
                return fail(c, "bad metric family name in '%s'", p);
        rest = name + namelen + 1;
        if (kwlen == 4 && strncmp(kw, "TYPE", 4) == 0) {
                static const char *const types[] = {"counter",        "gauge",    "histogram",
                                                    "gaugehistogram", "stateset", "info",
                                                    "summary",        "unknown"};
                bool ok = false;

                if (!close_series(c))
                        return false;
                for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
                        ok |= strcmp(rest, types[i]) == 0;
                if (!ok)
                        return fail(c, "unknown type '%s'", rest);
                snprintf(c->family, sizeof(c->family), "%.*s", (int)namelen, name);
                if (seen(c->families, &c->nfamilies, c->family))
                        return fail(c, "family %s declared twice (not contiguous)", c->family);
                snprintf(c->type, sizeof(c->type), "%s", rest);
                if (strcmp(c->type, "counter") == 0 && ends_with(c->family, "_total"))
                        return fail(c, "counter family %s named with _total", c->family);
                c->has_help = c->has_unit = false;
                return true;
        }
        if (strlen(c->family) != namelen || strncmp(c->family, name, namelen) != 0)
                return fail(c, "%.*s names a family other than the current one (%s)", (int)kwlen,
                            kw, c->family[0] ? c->family : "none: TYPE first");
        if (kwlen == 4 && strncmp(kw, "HELP", 4) == 0) {
                if (c->has_help)
                        return fail(c, "second HELP for %s", c->family);
                c->has_help = true;
                return true;
        }
        if (kwlen == 4 && strncmp(kw, "UNIT", 4) == 0) {
                char suffix[NAME_MAX_LEN + 2];

                if (c->has_unit)
                        return fail(c, "second UNIT for %s", c->family);
                snprintf(suffix, sizeof(suffix), "_%s", rest);
                if (!rest[0] || !ends_with(c->family, suffix))
                        return fail(c, "family %s does not end in its unit _%s", c->family, rest);
                c->has_unit = true;
                return true;
        }
        return fail(c, "unknown metadata '%.*s'", (int)kwlen, kw);
}

/* The labels of @p ("{...}"): checked, le taken out (into @le, "" when none) and the rest
 * copied to @rest; the length of the label block in *@used. */
static bool labels(Checker *c, const char *p, size_t *used, char *le, size_t le_size, char *rest,
                   size_t rest_size)
{
        char names[32][64];
        size_t nnames = 0, off = 0;
        const char *q = p + 1;

        le[0] = rest[0] = '\0';
        if (*q == '}') {
                *used = 2;
                return true;
        }
        for (;;) {
                const char *n = q, *v;
                size_t nlen = 0;
                char val[256];
                size_t vlen = 0;

                while (isalnum((unsigned char)q[nlen]) || q[nlen] == '_')
                        nlen++;
                if (nlen == 0 || isdigit((unsigned char)n[0]) || nlen >= 64)
                        return fail(c, "bad label name");
                if (q[nlen] != '=' || q[nlen + 1] != '"')
                        return fail(c, "label %.*s: expected =\"", (int)nlen, n);
                for (size_t i = 0; i < nnames; i++)
                        if (strlen(names[i]) == nlen && strncmp(names[i], n, nlen) == 0)
                                return fail(c, "label %.*s twice", (int)nlen, n);
                if (nnames < 32)
                        snprintf(names[nnames++], 64, "%.*s", (int)nlen, n);
                v = q + nlen + 2;
                for (;;) {
                        if (*v == '\0' || *v == '\n')
                                return fail(c, "unterminated label value");
                        if (*v == '"')
                                break;
                        if (*v == '\\') {
                                if (v[1] != '\\' && v[1] != '"' && v[1] != 'n')
                                        return fail(c, "bad escape \\%c in a label value", v[1]);
                                v++;
                        }
                        if (vlen < sizeof(val) - 1)
                                val[vlen++] = *v;
                        v++;
                }
                val[vlen] = '\0';
                if (nlen == 2 && strncmp(n, "le", 2) == 0) {
                        if (vlen >= le_size)
                                return fail(c, "le value too long");
                        memcpy(le, val, vlen + 1);
                } else {
                        int w = snprintf(rest + off, rest_size - off, "%s%.*s=\"%s\"",
                                         off ? "," : "", (int)nlen, n, val);
                        if (w > 0 && (size_t)w < rest_size - off)
                                off += (size_t)w;
                }
                q = v + 1;
                if (*q == ',') {
                        q++;
                        continue;
                }
                if (*q != '}')
                        return fail(c, "expected , or } after a label");
                *used = (size_t)(q + 1 - p);
                return true;
        }
}

static bool bucket(Checker *c, const char *le, const char *rest, double value)
{
        double bound;

        if (!le[0])
                return fail(c, "%s_bucket without le", c->family);
        if (!parse_float(le, strlen(le), &bound) || isnan(bound))
                return fail(c, "le=\"%s\" is not a number", le);
        if (!c->in_series || strcmp(c->series, rest) != 0) {
                if (!close_series(c))
                        return false;
                c->in_series = true;
                c->series_closed = false;
                snprintf(c->series, sizeof(c->series), "%s", rest);
                c->last_le = -INFINITY;
                c->last_bucket = 0;
        } else if (c->series_closed) {
                return fail(c, "a bucket after le=\"+Inf\"");
        }
        if (!(bound > c->last_le))
                return fail(c, "le=\"%s\" not above the bucket before", le);
        if (value < c->last_bucket)
                return fail(c, "bucket le=\"%s\" is not cumulative (%g < %g)", le, value,
                            c->last_bucket);
        c->last_le = bound;
        c->last_bucket = value;
        if (isinf(bound)) {
                c->series_closed = true;
                c->inf_bucket = value;
        }
        return true;
}

static bool sample(Checker *c, const char *p)
{
        size_t namelen = 0, used = 0;
        char name[NAME_MAX_LEN], le[64], rest[512], key[NAME_MAX_LEN + 600];
        const char *v;
        double value;
        size_t vlen;

        while (p[namelen] && p[namelen] != '{' && p[namelen] != ' ')
                namelen++;
        if (!is_metric_name(p, namelen))
                return fail(c, "bad metric name");
        snprintf(name, sizeof(name), "%.*s", (int)namelen, p);
        if (!c->family[0])
                return fail(c, "sample %s before any # TYPE", name);
        le[0] = rest[0] = '\0';
        if (p[namelen] == '{' && !labels(c, p + namelen, &used, le, sizeof(le), rest, sizeof(rest)))
                return false;
        v = p + namelen + used;
        if (*v != ' ')
                return fail(c, "expected one space before the value");
        v++;
        vlen = strcspn(v, " ");
        if (!parse_float(v, vlen, &value))
                return fail(c, "value '%.*s' is not a number", (int)vlen, v);
        if (v[vlen] == ' ') {
                double ts;
                const char *t = v + vlen + 1;
                if (!parse_float(t, strlen(t), &ts))
                        return fail(c, "bad timestamp");
        }
        snprintf(key, sizeof(key), "%s{%s%s%s}", name, rest, le[0] ? ",le=" : "", le);
        if (seen(c->samples, &c->nsamples, key))
                return fail(c, "sample %s twice", key);
        if (le[0] && strcmp(name + strlen(c->family), "_bucket") != 0)
                return fail(c, "le label on %s, which is not a histogram bucket", name);

        if (strncmp(name, c->family, strlen(c->family)) != 0)
                return fail(c, "sample %s outside its family %s", name, c->family);
        const char *suffix = name + strlen(c->family);
        if (strcmp(c->type, "gauge") == 0 || strcmp(c->type, "unknown") == 0) {
                if (*suffix)
                        return fail(c, "gauge sample %s is not named %s", name, c->family);
        } else if (strcmp(c->type, "counter") == 0) {
                if (strcmp(suffix, "_total") != 0 && strcmp(suffix, "_created") != 0)
                        return fail(c, "counter sample %s: not %s_total", name, c->family);
                if (value < 0 || isnan(value))
                        return fail(c, "counter %s is negative or NaN", name);
        } else if (strcmp(c->type, "histogram") == 0) {
                if (strcmp(suffix, "_bucket") == 0) {
                        if (!bucket(c, le, rest, value))
                                return false;
                } else if (strcmp(suffix, "_count") == 0) {
                        if (!c->in_series || strcmp(c->series, rest) != 0 || !c->series_closed)
                                return fail(c, "%s without its buckets before it", name);
                        if (value != c->inf_bucket)
                                return fail(c, "%s %g differs from the +Inf bucket %g", name, value,
                                            c->inf_bucket);
                } else if (strcmp(suffix, "_sum") == 0) {
                        if (value < 0 || isnan(value))
                                return fail(c, "%s is negative", name);
                } else if (strcmp(suffix, "_created") != 0) {
                        return fail(c, "histogram sample %s: not _bucket, _count, _sum", name);
                }
        } else {
                return fail(c, "type %s not expected from fiberd", c->type);
        }
        return true;
}

bool om_check(const char *text, char *err, size_t size)
{
        Checker *c = calloc(1, sizeof(*c));
        const char *p = text;
        bool ok = true, eof = false;

        if (!c) {
                snprintf(err, size, "out of memory");
                return false;
        }
        c->err = err;
        c->size = size;
        err[0] = '\0';
        while (ok && *p) {
                const char *nl = strchr(p, '\n');
                char *line;
                size_t len;

                c->line++;
                if (eof) {
                        ok = fail(c, "text after # EOF");
                        break;
                }
                if (!nl) {
                        ok = fail(c, "the last line has no newline");
                        break;
                }
                len = (size_t)(nl - p);
                line = strndup(p, len);
                if (len == 0)
                        ok = fail(c, "empty line");
                else if (strcmp(line, "# EOF") == 0)
                        eof = true, ok = close_series(c);
                else if (line[0] == '#')
                        ok = line[1] == ' ' ? metadata(c, line) : fail(c, "bad comment");
                else
                        ok = sample(c, line);
                free(line);
                p = nl + 1;
        }
        if (ok && !eof)
                ok = fail(c, "no # EOF at the end");
        for (size_t i = 0; i < c->nfamilies; i++)
                free(c->families[i]);
        for (size_t i = 0; i < c->nsamples; i++)
                free(c->samples[i]);
        free(c);
        return ok;
}
