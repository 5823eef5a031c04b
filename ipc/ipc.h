/* SPDX-License-Identifier: MIT */
/*
 * ipc.h — fiberd's wire layer in one include (ipc/).
 *
 * The wire contract is PROTOCOL.md; this library is its C side, shared by the daemon
 * (daemon/) and the client (client/), and deliberately pure — no sockets, no threads, no
 * clock — so every piece can be tested and fuzzed on byte buffers:
 *
 *   protocol.h the contract's constants: version, methods, params, keys, error table
 *   status.h   errno <-> error code, IpcStatus
 *   decoder.h  bytes in, whole MessagePack-RPC messages out, with a size cap
 *   encoder.h  requests, responses, error responses and notifications out
 *   value.h    typed reads out of decoded maps and arrays, with clear errors
 *   socket_path.h  the default socket path both sides agree on (reads the environment)
 *
 * Built as $(BUILD)/libipc.a; link with $(IPC_LIBS) (ipc/build.mk).
 */
#ifndef FIBERD_IPC_H
#define FIBERD_IPC_H

#include "ipc/decoder.h"
#include "ipc/encoder.h"
#include "ipc/packbuf.h"
#include "ipc/protocol.h"
#include "ipc/socket_path.h"
#include "ipc/status.h"
#include "ipc/value.h"

#endif /* FIBERD_IPC_H */
