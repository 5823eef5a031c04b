/* SPDX-License-Identifier: MIT */
/*
 * slow-server.h — the slow local server of the hooks rows (bench-hooks.c): it answers
 * each connection a fixed delay after it arrived (or after its HTTP request did), so a
 * client's blocking read lasts that long, and it holds tens of thousands of connections
 * at once on one thread (epoll, one timerfd, a FIFO of deadlines: every delay is the
 * same, so deadlines come due in the order they were set).
 *
 * Two kinds, one per server:
 *  - SLOW_UNIX_BYTE: a Unix socket; each connection gets one byte ("!") @delay after it
 *    was accepted, then the close (block_calls' connect_recv, the Go peer's raw read);
 *  - SLOW_HTTP: 127.0.0.1 on a free port; each connection's request head is read, and
 *    @delay later it gets "HTTP/1.1 200 OK" with an 11-byte body and Connection: close
 *    (curl_fetch, Go's net/http).
 *
 * The server runs on a thread of the generator's process, so its CPU is never fiberd's
 * or Go's. Context: the generator's main thread starts and stops it.
 */
#ifndef FIBERD_BENCH_SLOW_SERVER_H
#define FIBERD_BENCH_SLOW_SERVER_H

#include <stdint.h>

typedef enum SlowKind {
        SLOW_UNIX_BYTE,
        SLOW_HTTP,
} SlowKind;

typedef struct SlowServer SlowServer;

/*
 * slow_server_start - listen (@kind) and serve on a new thread, each answer @delay_ns
 * late. @path: the Unix socket's path (SLOW_UNIX_BYTE; unlinked first), ignored for HTTP.
 * Raises this process's soft RLIMIT_NOFILE to its hard limit. Dies on any error.
 * Return: the server; its address through slow_server_address().
 */
SlowServer *slow_server_start(SlowKind kind, const char *path, uint64_t delay_ns);

/* slow_server_address - the socket path, or the URL "http://127.0.0.1:PORT/x". */
const char *slow_server_address(const SlowServer *s);

/* slow_server_served - connections answered so far. Context: any thread. */
uint64_t slow_server_served(const SlowServer *s);

/* slow_server_stop - stop the thread, close every connection, free @s (NULL accepted). */
void slow_server_stop(SlowServer *s);

#endif /* FIBERD_BENCH_SLOW_SERVER_H */
