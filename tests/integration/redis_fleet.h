/* SPDX-License-Identifier: MIT */
/*
 * redis_fleet.h — a private redis-server for the fleet tests (daemon_redis.c,
 * daemon_redis_sched.c, daemon_redis_schedules.c): one per test, on a Unix socket in a
 * temporary directory (no TCP port, no persistence, killed with the test process:
 * PR_SET_PDEATHSIG), stopped in the suite's fini. A machine without redis-server skips the test, saying why on stderr
 * too (criterion shows skips only when verbose); every other failure fails it.
 */
#ifndef FIBERD_TESTS_REDIS_FLEET_H
#define FIBERD_TESTS_REDIS_FLEET_H

/* redis_fleet_start - start the server, or skip the test (@suite names it in the
 * message) when redis-server is missing or cannot run here. */
void redis_fleet_start(const char *suite);

/* redis_fleet_stop - stop the server and remove its directory; safe to call twice. */
void redis_fleet_stop(void);

/* redis_fleet_sock - the server's socket path (valid once started). */
const char *redis_fleet_sock(void);

/* redis_fleet_cli_int - `redis-cli -s SOCK @args`: the integer it printed, -1 when none. */
long long redis_fleet_cli_int(const char *args);

#endif
