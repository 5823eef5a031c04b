/* SPDX-License-Identifier: MIT */
/*
 * decoder.h — turn a byte stream into MessagePack-RPC messages (ipc/).
 *
 * fiberd speaks MessagePack-RPC over a stream socket (PROTOCOL.md): back-to-back msgpack
 * arrays, no length prefix. The decoder takes bytes as they arrive, in pieces of any size
 * (one byte at a time works), and hands out whole messages:
 *
 *     request       [0, msgid, method, params]
 *     response      [1, msgid, error, result]
 *     notification  [2, method, params]
 *
 * Design. The decoder keeps one growable buffer. A small incremental scanner walks the
 * msgpack *headers* of the message at the front of the buffer (type bytes and lengths,
 * never the payloads) to find where the message ends, resuming where it stopped when more
 * bytes arrive, so byte-by-byte delivery costs O(n) in total, not O(n^2). Only a complete
 * message is unpacked (msgpack-c's msgpack_unpack()), from a copy of its bytes placed in
 * the message's own msgpack_zone, so the message owns everything it points to and the
 * decoder's buffer can move.
 *
 * Why not msgpack_unpacker: it allocates an array's or map's element table as soon as it
 * reads the header, before the elements arrive, so five bytes (0xdd + a 32-bit count) make
 * it ask for up to 96 GiB. The scanner refuses, before anything is allocated, any message
 * that cannot fit in the size cap: a declared string/bin/ext length or element count
 * that would take it past the cap (every element is at least one byte) gives -EMSGSIZE.
 * Once a message is complete, every element it declares is really there, so unpacking
 * allocates at most ~24 bytes per message byte. Nesting is capped at IPC_MAX_DEPTH, which
 * is below msgpack-c's own stack limit.
 *
 * Errors are sorted by what the server can still do afterwards:
 *  - -EPROTO: valid msgpack but not a valid MessagePack-RPC message (wrong array length,
 *    type, msgid, method or params type). The message is consumed and the stream stays
 *    usable: answer MALFORMED_MESSAGE (when the msgid could be read) and go on.
 *  - -EMSGSIZE: the message is (or declares itself) larger than the cap;
 *  - -EBADMSG: the bytes are not msgpack (0xc1, nesting too deep) or a message does not
 *    start with an array header (e.g. someone typed text into the socket).
 *    After these two the stream cannot be re-synchronised: the decoder stays in the error
 *    state (every later call returns the same error); answer when the msgid is known
 *    (ipc_decoder_error_msgid()) and close the connection.
 *
 * The decoder is a pure library: no sockets, no threads, no clock. It is not thread-safe:
 * one decoder belongs to one connection, used by one fiber at a time. Nothing here yields.
 */
#ifndef FIBERD_IPC_DECODER_H
#define FIBERD_IPC_DECODER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

/* Default cap on one message, bytes (PROTOCOL.md, "Limits"). */
#define IPC_DEFAULT_MAX_MESSAGE (1024 * 1024)
/* Deepest nesting of arrays and maps in one message, the RPC envelope included. */
#define IPC_MAX_DEPTH 24

typedef enum IpcMessageType {
        IPC_REQUEST = 0,
        IPC_RESPONSE = 1,
        IPC_NOTIFICATION = 2,
} IpcMessageType;

/*
 * IpcMessage - one decoded message. Everything it points to lives in @zone, which the
 * holder owns: release with ipc_message_clear(). Fields not used by @type are nil objects
 * (type MSGPACK_OBJECT_NIL) or NULL/0.
 */
typedef struct IpcMessage {
        IpcMessageType type;
        uint32_t msgid;        /* request, response */
        const char *method;    /* request, notification: NUL-terminated, no NUL inside */
        size_t method_len;     /* bytes, without the NUL */
        msgpack_object params; /* request, notification: always an array */
        msgpack_object error;  /* response: nil, or (from fiberd) a map {code, message} */
        msgpack_object result; /* response: nil when error is not nil */
        size_t size;           /* bytes the message took on the wire */
        msgpack_zone *zone;    /* owns the bytes and objects above */
} IpcMessage;

/*
 * ipc_message_clear - free @m's zone and zero @m. Accepts NULL and an already zeroed
 * message. Context: any.
 */
void ipc_message_clear(IpcMessage *m);

typedef struct IpcDecoder IpcDecoder;

/*
 * ipc_decoder_new - a decoder for one stream.
 * @ret: out, written only on success; free with ipc_decoder_free().
 * @max_message: cap on one message in bytes; 0 = IPC_DEFAULT_MAX_MESSAGE.
 * Return: 0; -ENOMEM. Context: any.
 */
int ipc_decoder_new(IpcDecoder **ret, size_t max_message);

/*
 * IPC_ZONE_SLACK - bytes a msgpack zone gets beyond the message it unpacks, for the
 * message's objects (msgpack_object is 24 bytes: 21 of them) and what its reader keeps
 * beside it there (fiberd's server: its request, about 170 bytes) before the zone needs
 * a second chunk. A zone of the message's size plus this, not msgpack-c's 8 KiB default:
 * a malloc that large (past glibc's small sizes) consolidates the allocator's fast bins,
 * which on a server of small messages is a cost per message; a small request's chunk
 * stays in glibc's per-thread cache (up to 1,032 bytes).
 */
#define IPC_ZONE_SLACK 768

/* ipc_decoder_free - release @d and the bytes it holds. Accepts NULL; returns NULL. */
IpcDecoder *ipc_decoder_free(IpcDecoder *d);

/*
 * ipc_decoder_feed - append @len bytes read from the stream (copied).
 * Feed what one read returned, then call ipc_decoder_next() until it returns 0: the
 * decoder then holds at most one partial message (bounded by the cap) plus what is fed.
 * Return: 0; -ENOMEM; the sticky -EMSGSIZE / -EBADMSG once the stream has failed
 * (the bytes are dropped then). Context: any; does not yield.
 */
int ipc_decoder_feed(IpcDecoder *d, const void *data, size_t len);

/*
 * ipc_decoder_reserve / ipc_decoder_commit - the zero-copy form of feed: reserve gives a
 * writable region of at least @min bytes at the end of the buffer (@ret_buf, @ret_len,
 * written only on success); read(2) into it, then commit the @n bytes actually read
 * (n <= *ret_len). Return (reserve): 0; -ENOMEM; the sticky stream error.
 */
int ipc_decoder_reserve(IpcDecoder *d, size_t min, void **ret_buf, size_t *ret_len);
void ipc_decoder_commit(IpcDecoder *d, size_t n);

/*
 * ipc_decoder_next - take the next whole message out of the buffer.
 * @ret: out, written only when 1 is returned; the caller owns it (ipc_message_clear()).
 * Return:
 *    1          *ret holds a message;
 *    0          no whole message yet: feed more bytes;
 *   -EPROTO     a msgpack value that is not an RPC message was consumed; the stream is
 *               fine, call again;
 *   -EMSGSIZE   message larger than the cap (sticky);
 *   -EBADMSG    not msgpack / not an RPC array (sticky);
 *   -ENOMEM     out of memory (the message stays in the buffer; calling again retries).
 * After a negative return, ipc_decoder_error_msgid() and ipc_decoder_error_text() tell
 * what went wrong. Context: any; does not yield.
 */
int ipc_decoder_next(IpcDecoder *d, IpcMessage *ret);

/*
 * ipc_decoder_error_msgid - the msgid of the message the last error was about, when it
 * could be read: the message started [0, msgid, ...] (a request) with a valid msgid.
 * Return: true and *@ret_msgid set; false (nothing written) when unknown, or when the
 * message was not a request (responses and notifications are never answered).
 */
bool ipc_decoder_error_msgid(const IpcDecoder *d, uint32_t *ret_msgid);

/*
 * ipc_decoder_error_text - a sentence about the last error, for the MALFORMED_MESSAGE /
 * MESSAGE_TOO_LARGE response and the log, e.g. "message of at least 2097152 bytes exceeds
 * the limit of 1048576 bytes". The text is owned by @d and valid until the next call on
 * @d; "" when there was no error.
 */
const char *ipc_decoder_error_text(const IpcDecoder *d);

/*
 * ipc_msgpack_whole - whether @buf holds exactly one complete msgpack value: the
 * scanner's checks (header bytes, declared lengths inside @len, nesting), without
 * unpacking or allocating.
 * @buf: @len bytes, read only; NULL or @len 0 is not a value.
 * @max_depth: the most arrays and maps open at once, the value itself counted (a scalar
 * is depth 0, [[1]] depth 2); above IPC_MAX_DEPTH it is IPC_MAX_DEPTH.
 * Return: 0; -EBADMSG when the value is truncated, followed by more bytes or not msgpack
 * (0xc1); -ERANGE when it is whole so far but nests deeper than @max_depth.
 * Context: any thread; pure, does not yield.
 */
int ipc_msgpack_whole(const void *buf, size_t len, unsigned max_depth);

/* ipc_decoder_buffered - bytes fed and not yet handed out as messages. */
size_t ipc_decoder_buffered(const IpcDecoder *d);

#endif /* FIBERD_IPC_DECODER_H */
