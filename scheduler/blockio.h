/* SPDX-License-Identifier: MIT */
/*
 * blockio.h — calls that have no readiness to wait for, made off the workers: regular
 * file reads and writes, and name lookups. Private to scheduler/ (hook.c uses it);
 * blockio.c has the design.
 */
#ifndef FIBERD_BLOCKIO_H
#define FIBERD_BLOCKIO_H

#include <stdbool.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "scheduler/base/list.h"
#include "scheduler/sched.h"

/*
 * BlockioCall - one call for a blocking-I/O thread, embedded in the caller's heap
 * object. @run makes the call on the thread; @free releases the object once both the
 * caller and the thread are done with it (reference counted: the caller may leave
 * early when cancelled, and the thread still writes into the object).
 */
typedef struct BlockioCall BlockioCall;
struct BlockioCall {
        void (*run)(BlockioCall *c);  /* on a blocking-I/O thread */
        void (*free)(BlockioCall *c); /* on whichever side lets go last */
        int refs;                     /* atomic; set by blockio_call() */
        FiberEvent done;
        ListHead link; /* in the queue */
};

/*
 * blockio_call - run @c->run on a blocking-I/O thread and park until it is done. From a
 * plain thread (or before any fiber runs) @c->run runs inline. The threads start at the
 * first call.
 * Return: 0 once it ran: read the answer from the object, then blockio_call_put();
 * -ECANCELED when the caller was cancelled first: the object is no longer the caller's
 * (the thread frees it). When no thread can be started, @c->run runs inline (blocking
 * the worker, as without hooks) and 0 is returned.
 * Context: any.
 */
int blockio_call(BlockioCall *c);

/*
 * blockio_wait - the second half of blockio_call(), for a call another executor took
 * (io_uring) with @c->done initialised and @c->refs at 2: park until it is done.
 * Return: 0; -ECANCELED (the executor frees @c). Context: fiber.
 */
int blockio_wait(BlockioCall *c);

/* blockio_call_put - the caller's side is done with @c (after blockio_call() returned 0). */
void blockio_call_put(BlockioCall *c);

/*
 * blockio_readv / blockio_writev - readv(2)/writev(2) (@off -1: at the file position)
 * or preadv(2)/pwritev(2) (@off >= 0) on the regular file @fd, from a hooked fiber: a
 * read the page cache holds is made inline (preadv2 RWF_NOWAIT), the rest on io_uring
 * or a blocking-I/O thread through a bounce buffer of at most 1 MiB a call (a read may
 * be short, as read(2)'s may; a write is repeated until all is written, as a blocking
 * write to a file is). Return: bytes (>= 0); -1 with errno: the call's, or ECANCELED
 * (a write cancelled half way says how far it got instead). Context: fiber.
 */
ssize_t blockio_readv(int fd, const struct iovec *iov, int iovcnt, off_t off);
ssize_t blockio_writev(int fd, const struct iovec *iov, int iovcnt, off_t off);

/*
 * blockio_quiesce - wait until no executor (blocking-I/O thread, io_uring completion
 * thread) is inside the wake-up of a fiber: the woken fiber may already have finished
 * while its waker still touches the fiber's group. Called before a group is freed.
 * Context: a thread outside the groups.
 */
void blockio_quiesce(void);

/* blockio_describe - one phrase for the start-up log: how file I/O leaves the workers. */
const char *blockio_describe(void);

#endif /* FIBERD_BLOCKIO_H */
