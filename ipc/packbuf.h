/* SPDX-License-Identifier: MIT */
/*
 * packbuf.h — a msgpack-c write target that starts in caller-given room (usually on the
 * stack) and moves to the heap only when a message outgrows it (ipc/).
 *
 * For the messages packed once per request or per job, where a msgpack_sbuffer would
 * malloc 8 KiB for a few hundred bytes:
 *
 *     char room[1024];
 *     IpcPackBuf b;
 *     msgpack_packer pk;
 *
 *     ipc_packbuf_init(&b, room, sizeof(room));
 *     msgpack_packer_init(&pk, &b, ipc_packbuf_write);
 *     ... pack; use b.data, b.size ...
 *     ipc_packbuf_free(&b);
 *
 * Header-only, so the bundled plugins, which link msgpack-c but not libipc, use it too.
 * Context: any thread or fiber; one user at a time.
 */
#ifndef FIBERD_IPC_PACKBUF_H
#define FIBERD_IPC_PACKBUF_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* IpcPackBuf - the bytes packed so far: @data is the caller's room or, past it, owned. */
typedef struct IpcPackBuf {
        char *data;   /* @room, or a malloc'd copy once the bytes outgrew it */
        size_t size;  /* bytes packed */
        size_t alloc; /* bytes @data can hold */
        char *room;   /* the caller's; never freed here */
        size_t room_size;
} IpcPackBuf;

/* ipc_packbuf_init - an empty buffer in @room (@room_size bytes, > 0), which must
 * outlive it. */
static inline void ipc_packbuf_init(IpcPackBuf *b, char *room, size_t room_size)
{
        b->data = b->room = room;
        b->size = 0;
        b->alloc = b->room_size = room_size;
}

/* ipc_packbuf_write - msgpack_packer_write: appends @len bytes of @buf, growing to twice
 * the size (or what is needed) on the heap. Return: 0; -1 without memory, with the
 * bytes as they were (msgpack-c's convention). */
static inline int ipc_packbuf_write(void *data, const char *buf, size_t len)
{
        IpcPackBuf *b = data;

        if (len > b->alloc - b->size) {
                size_t want = b->alloc * 2 > b->size + len ? b->alloc * 2 : b->size + len;
                char *p = b->data == b->room ? malloc(want) : realloc(b->data, want);

                if (!p)
                        return -1;
                if (b->data == b->room)
                        memcpy(p, b->room, b->size);
                b->data = p;
                b->alloc = want;
        }
        memcpy(b->data + b->size, buf, len);
        b->size += len;
        return 0;
}

/* ipc_packbuf_free - frees what the buffer allocated; it is empty in its room again. */
static inline void ipc_packbuf_free(IpcPackBuf *b)
{
        if (b->data != b->room)
                free(b->data);
        b->data = b->room;
        b->size = 0;
        b->alloc = b->room_size;
}

#endif
