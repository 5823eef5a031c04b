/* SPDX-License-Identifier: MIT */
/*
 * store-memory.c — the memory backend of the job store (store.h): nothing is kept, so
 * fiberd behaves as before the store existed: every job is lost at exit or crash, and
 * ids start at 1 again. For tests and for users who want no state on disk. Without a
 * commit function, store.c sets a submission's durable event at once and runs no
 * store thread.
 */
#include "daemon/store/store.h"

static int memory_open(Store *s, const char *path, char *why, size_t why_size)
{
        (void)s, (void)path, (void)why, (void)why_size;
        return 0;
}

static void memory_close(Store *s)
{
        (void)s;
}

const StoreBackend store_memory_backend = {
        .name = "memory",
        .open = memory_open,
        .close = memory_close,
};
