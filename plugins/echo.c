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

/* Every map of arguments is an answer echo can give: it accepts them all, and says so
 * (a descriptor without check_args would mean the same). */
static int echo_check(FiberdJob *args, const FiberdHost *host, char *why, size_t why_size)
{
        return host->args_object(args) ? 0 : -EINVAL;
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
