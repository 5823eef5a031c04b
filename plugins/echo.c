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
 * FIBERD_PLUGIN_INLINE: a job takes microseconds and waits on nothing, so fiberd runs it
 * on the server worker that dispatched it ([jobs] run_inline).
 */
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipc/packbuf.h"
#include "plugins/fiberd/plugin.h"

#define ECHO_INLINE 512 /* bytes of packed args kept on the stack */

static int echo_run(FiberdJob *job, const FiberdHost *host)
{
        char room[ECHO_INLINE];
        IpcPackBuf b;
        msgpack_packer pk;
        int r;

        ipc_packbuf_init(&b, room, sizeof(room));
        msgpack_packer_init(&pk, &b, ipc_packbuf_write);
        if (msgpack_pack_object(&pk, *host->args_object(job)) < 0)
                r = host->fail(job, -ENOMEM, "cannot copy the args: out of memory");
        else
                r = host->result_msgpack(job, b.data, b.size);
        ipc_packbuf_free(&b);
        return r < 0 ? r : 0;
}

/* How deep @o nests arrays and maps, as result_msgpack() counts (plugin.h: an empty one
 * opens nothing), up to @limit + 1: past that the count stops. */
static unsigned nesting(const msgpack_object *o, unsigned limit)
{
        uint32_t n = o->type == MSGPACK_OBJECT_ARRAY ? o->via.array.size
                     : o->type == MSGPACK_OBJECT_MAP ? o->via.map.size
                                                     : 0;
        unsigned deepest = 0, d;

        if (n == 0)
                return 0;
        for (uint32_t i = 0; i < n && deepest < limit; i++) {
                if (o->type == MSGPACK_OBJECT_ARRAY) {
                        d = nesting(&o->via.array.ptr[i], limit - 1);
                } else {
                        d = nesting(&o->via.map.ptr[i].key, limit - 1);
                        unsigned v = nesting(&o->via.map.ptr[i].val, limit - 1);
                        d = v > d ? v : d;
                }
                deepest = d > deepest ? d : deepest;
        }
        return deepest + 1;
}

/* Every map of arguments is an answer echo can give, as long as a job's result may nest
 * that deep (FIBERD_RESULT_MAX_DEPTH): refused at submission, not failed when it runs. */
static int echo_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        const msgpack_object *o = host->args_object(args);

        if (!o)
                return -EINVAL;
        if (nesting(o, FIBERD_RESULT_MAX_DEPTH) > FIBERD_RESULT_MAX_DEPTH) {
                snprintf(why, why_size,
                         "the args nest arrays and maps more than %d levels deep, deeper than "
                         "a job's result may",
                         FIBERD_RESULT_MAX_DEPTH);
                return -EINVAL;
        }
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,
        .name = "echo",
        .version = "1.0",
        .description = "returns its args as its result: {...} -> {...}",
        .run = echo_run,
        .check_args = echo_check,
        .flags = FIBERD_PLUGIN_INLINE, /* microseconds, never waits: the server worker runs it */
};
