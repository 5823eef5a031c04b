/* SPDX-License-Identifier: MIT */
/*
 * echo.c — the bundled "echo" plugin: the job's result is its args map, unchanged
 * (gearman's echo job).
 *
 * The trivial job for end-to-end measurements: it never arms a timer, sleeps or yields,
 * so what a client sees is the cost of fiberd's own path (request, queue, job fiber,
 * record, response). The args map is packed again with msgpack-c into a buffer on the
 * job's stack (the heap only for maps larger than ECHO_INLINE bytes) and handed to
 * host->result_msgpack(), which copies it. Result: the args, e.g. {"n": 1} -> {"n": 1}.
 */
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/fiberd/plugin.h"

#define ECHO_INLINE 512 /* bytes of packed args kept on the stack */

/* A msgpack write target: @inline_buf until it is full, then a malloc'ed copy. */
typedef struct EchoBuffer {
        char *data; /* inline_buf or owned */
        size_t len, cap;
        char inline_buf[ECHO_INLINE];
} EchoBuffer;

static int echo_buffer_write(void *data, const char *buf, size_t len)
{
        EchoBuffer *b = data;

        if (len > b->cap - b->len) {
                size_t cap = b->cap * 2 > b->len + len ? b->cap * 2 : b->len + len;
                char *p = b->data == b->inline_buf ? malloc(cap) : realloc(b->data, cap);

                if (!p)
                        return -1;
                if (b->data == b->inline_buf)
                        memcpy(p, b->inline_buf, b->len);
                b->data = p;
                b->cap = cap;
        }
        memcpy(b->data + b->len, buf, len);
        b->len += len;
        return 0;
}

static int echo_run(FiberdJob *job, const FiberdHost *host)
{
        EchoBuffer b = {.len = 0, .cap = ECHO_INLINE};
        msgpack_packer pk;
        int r;

        b.data = b.inline_buf;
        msgpack_packer_init(&pk, &b, echo_buffer_write);
        if (msgpack_pack_object(&pk, *host->args_object(job)) < 0)
                r = host->fail(job, -ENOMEM, "cannot copy the args: out of memory");
        else
                r = host->result_msgpack(job, b.data, b.len);
        if (b.data != b.inline_buf)
                free(b.data);
        return r < 0 ? r : 0;
}

/* Every map of arguments is an answer echo can give: it accepts them all, and says so
 * (a descriptor without check_args would mean the same). */
static int echo_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        return host->args_object(args) ? 0 : -EINVAL;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER, .name = "echo",
        .version = "1.0",     .description = "returns its args as its result: {...} -> {...}",
        .run = echo_run,      .check_args = echo_check,
};
