/* SPDX-License-Identifier: MIT */
/*
 * raw_result.c — a test plugin that hands host->result_msgpack() what it must refuse and
 * what it must take. {"mode": "refused"} (the default) offers a truncated map, a map with
 * a second value behind it and a byte msgpack never uses, then reports each return
 * value: {"truncated": r, "trailing": r, "invalid": r} (each -EINVAL from fiberd).
 * {"mode": "many", "n": N} (default 3000) offers {"a": [0, 1, ... N-1 mod 100]}, N small
 * elements, which must come back whole as the job's result. {"mode": "deep", "n": N}
 * offers [[...[1]...]], N arrays deep, and returns what result_msgpack() returned (20
 * levels are taken, 21 refused). Tests of the result check
 * (tests/integration/daemon_errors.c) use it.
 */
#include "plugins/fiberd/plugin.h"

#include <stdlib.h>
#include <string.h>

static int raw_refused(FiberdJob *job, const FiberdHost *host)
{
        static const unsigned char truncated[] = {0x81, 0xa1, 'k'}; /* {"k": missing */
        static const unsigned char trailing[] = {0x80, 0x80};       /* {} {} */
        static const unsigned char invalid[] = {0xc1};              /* never used */
        int r1 = host->result_msgpack(job, truncated, sizeof(truncated));
        int r2 = host->result_msgpack(job, trailing, sizeof(trailing));
        int r3 = host->result_msgpack(job, invalid, sizeof(invalid));
        int r;

        if ((r = host->result_int(job, "truncated", r1)) < 0 ||
            (r = host->result_int(job, "trailing", r2)) < 0)
                return r;
        return host->result_int(job, "invalid", r3);
}

static int raw_many(FiberdJob *job, const FiberdHost *host, uint64_t n)
{
        size_t len = 0, cap = 16 + n;
        unsigned char *b = malloc(cap);
        int r;

        if (!b)
                return -ENOMEM;
        b[len++] = 0x81; /* a map of 1 */
        b[len++] = 0xa1; /* "a" */
        b[len++] = 'a';
        b[len++] = 0xdd; /* array 32 */
        b[len++] = (unsigned char)(n >> 24);
        b[len++] = (unsigned char)(n >> 16);
        b[len++] = (unsigned char)(n >> 8);
        b[len++] = (unsigned char)n;
        for (uint64_t i = 0; i < n; i++)
                b[len++] = (unsigned char)(i % 100); /* positive fixint */
        r = host->result_msgpack(job, b, len);
        free(b);
        return r;
}

static int raw_deep(FiberdJob *job, const FiberdHost *host, uint64_t n)
{
        unsigned char b[64];
        size_t len = 0;

        for (uint64_t i = 0; i < n && len < sizeof(b) - 1; i++)
                b[len++] = 0x91; /* an array of 1 */
        b[len++] = 0x01;
        return host->result_msgpack(job, b, len);
}

static int raw_result_run(FiberdJob *job, const FiberdHost *host)
{
        char mode[16] = "refused";
        uint64_t n = 3000;
        int r;

        if ((r = host->arg_str(job, "mode", mode, sizeof(mode))) < 0 && r != -ENOENT)
                return r;
        if ((r = host->arg_uint(job, "n", &n)) < 0 && r != -ENOENT)
                return r;
        if (strcmp(mode, "many") == 0)
                return raw_many(job, host, n > 100000 ? 100000 : n);
        if (strcmp(mode, "deep") == 0)
                return raw_deep(job, host, n);
        return raw_refused(job, host);
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "raw_result",
        .version = "1.0",
        .description = "test: offers host->result_msgpack() bad and large values",
        .run = raw_result_run,
};
