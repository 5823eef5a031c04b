/* SPDX-License-Identifier: MIT */
/*
 * ipc_decoder.c — libFuzzer target for ipc/decoder.c: the first input byte picks a size
 * cap and a chunk size, the rest is fed to one decoder in chunks of that size, draining
 * messages after each chunk as the daemon does. Checks the decoder's contract on every
 * return: a message is within the cap and has the fields its type promises; an error is
 * one of the documented ones, and the sticky ones stay.
 *
 *   make fuzz-ipc && build/fuzz/ipc_decoder -max_total_time=60
 *
 * Built with clang -fsanitize=fuzzer,address,undefined by ipc/build.mk (not part of `all`).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "ipc/ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        IpcDecoder *d;
        int sticky = 0;

        if (size < 1)
                return 0;
        size_t max = 16 + (size_t)(data[0] & 0x0f) * 64; /* small caps reach the limit */
        size_t chunk = 1 + (data[0] >> 4);
        data++;
        size--;
        if (ipc_decoder_new(&d, max) < 0)
                abort();
        for (size_t off = 0; off < size; off += chunk) {
                size_t n = size - off < chunk ? size - off : chunk;
                int r = ipc_decoder_feed(d, data + off, n);
                if (sticky && r != sticky)
                        abort();
                for (;;) {
                        IpcMessage m;
                        r = ipc_decoder_next(d, &m);
                        if (r == 0)
                                break;
                        if (r == 1) {
                                if (m.size > max || !m.zone)
                                        abort();
                                if (m.type != IPC_RESPONSE &&
                                    (!m.method || m.params.type != MSGPACK_OBJECT_ARRAY))
                                        abort();
                                ipc_message_clear(&m);
                                continue;
                        }
                        if (r == -EPROTO)
                                continue;
                        if (r != -EMSGSIZE && r != -EBADMSG && r != -ENOMEM)
                                abort();
                        if (r != -ENOMEM)
                                sticky = r;
                        break;
                }
                if (sticky)
                        break;
        }
        ipc_decoder_free(d);
        return 0;
}
