/* SPDX-License-Identifier: MIT */
/*
 * duration.c — duration_parse_ms() (see duration.h): a left-to-right read of
 * number-unit groups, each unit smaller than the one before, the sum checked for
 * overflow at every multiplication and addition.
 */
#include "daemon/cron/duration.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

/* The units, largest first: a group's unit must come later in this table than the last. */
static const struct {
        const char *name;
        uint64_t ms;
} duration_units[] = {
        {"d", UINT64_C(86400000)}, {"h", UINT64_C(3600000)}, {"m", UINT64_C(60000)},
        {"s", UINT64_C(1000)},     {"ms", UINT64_C(1)},
};

enum { N_UNITS = sizeof(duration_units) / sizeof(duration_units[0]) };

/* The unit at @s (longest name first: "ms" before "m"); *@ret_len its length. -1: none. */
static int unit_at(const char *s, size_t *ret_len)
{
        int best = -1;
        size_t best_len = 0;

        for (int i = 0; i < N_UNITS; i++) {
                size_t n = strlen(duration_units[i].name);
                if (n > best_len && strncmp(s, duration_units[i].name, n) == 0) {
                        best = i;
                        best_len = n;
                }
        }
        *ret_len = best_len;
        return best;
}

int duration_parse_ms(const char *s, uint64_t *ret_ms)
{
        uint64_t total = 0;
        int last = -1; /* the unit of the previous group */
        const char *p = s;

        if (!s || !*s)
                return -EINVAL;
        while (*p) {
                uint64_t v = 0, part;
                const char *digits = p;
                size_t len;
                int u;

                for (; *p >= '0' && *p <= '9'; p++) {
                        if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
                                return -EINVAL;
                        v = v * 10 + (uint64_t)(*p - '0');
                }
                if (p == digits)
                        return -EINVAL;
                if (!*p) {
                        /* a bare number: seconds, and only when it is all there is */
                        if (digits != s)
                                return -EINVAL;
                        u = unit_at("s", &len);
                        len = 0;
                } else {
                        u = unit_at(p, &len);
                        if (u < 0 || u <= last)
                                return -EINVAL;
                }
                if (v > UINT64_MAX / duration_units[u].ms)
                        return -EINVAL;
                part = v * duration_units[u].ms;
                if (total > UINT64_MAX - part)
                        return -EINVAL;
                total += part;
                last = u;
                p += len;
        }
        if (total == 0)
                return -EINVAL;
        *ret_ms = total;
        return 0;
}
