/* SPDX-License-Identifier: MIT */
/*
 * redis_fleet.h — a private redis-server for the fleet tests (daemon_redis.c,
 * daemon_redis_sched.c, daemon_redis_schedules.c, daemon_redis_outage.c): one per test,
 * on a Unix socket in a temporary directory (no TCP port, no persistence unless asked,
 * killed with the test process: PR_SET_PDEATHSIG), stopped in the suite's fini; and a
 * proxy in front of it that a test can cut, to partition one host from it. A machine without redis-server skips the test, saying why on stderr
 * too (criterion shows skips only when verbose); every other failure fails it.
 */
#ifndef FIBERD_TESTS_REDIS_FLEET_H
#define FIBERD_TESTS_REDIS_FLEET_H

#include <stdbool.h>

/* redis_fleet_start - start the server, or skip the test (@suite names it in the
 * message) when redis-server is missing or cannot run here. */
void redis_fleet_start(const char *suite);

/* redis_fleet_start_persistent - as redis_fleet_start(), with appendonly and an fsync
 * at every write: what the server answered survives redis_fleet_kill(). */
void redis_fleet_start_persistent(const char *suite);

/* redis_fleet_signal - send @sig to the server (SIGSTOP / SIGCONT: a server that hangs). */
void redis_fleet_signal(int sig);

/* redis_fleet_kill - SIGKILL the server and reap it. */
void redis_fleet_kill(void);

/* redis_fleet_restart - start it again on the same socket and directory (its data from
 * there when persistent); returns once it answers. */
void redis_fleet_restart(void);

/* redis_fleet_proxy_start - a proxy to the server (a thread of the test process);
 * returns the socket path a host is given instead of the server's. */
const char *redis_fleet_proxy_start(void);

/* redis_fleet_proxy_cut - @cut: close every connection through the proxy and refuse new
 * ones (a host partitioned from the server); !@cut: accept again. Takes effect within
 * 20 ms. */
void redis_fleet_proxy_cut(bool cut);

/* redis_fleet_proxy_stop - stop the proxy; safe when none runs. */
void redis_fleet_proxy_stop(void);

/* redis_fleet_stop - stop the server and remove its directory; safe to call twice. */
void redis_fleet_stop(void);

/* redis_fleet_sock - the server's socket path (valid once started). */
const char *redis_fleet_sock(void);

/* redis_fleet_cli_int - `redis-cli -s SOCK @args`: the integer it printed, -1 when none. */
long long redis_fleet_cli_int(const char *args);

#endif
