/* SPDX-License-Identifier: MIT */
/*
 * daemon_security.c — what a local user can do to fiberd by what it sends:
 *  - forge log lines: a newline in a sha256 path must stay inside its one log line,
 *    escaped, and never start a line with a priority of its own (daemon/log.c);
 *  - exhaust the server (daemon/server.c's limits): pipelining without reading the
 *    answers, many never-finished ~1 MiB messages, one byte a second, more connections
 *    than allowed, and too few fds. During each attack a fresh client's ping must still
 *    be answered; its latency is printed, never asserted (shared machines).
 * Attacks are kept small (tens of connections) with the daemon's limits set low in its
 * config, so each test runs in a few seconds.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_security, .fini = teardown, .timeout = 90);

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------- log forging ------ */

/* Waits (bounded) for a log line containing @needle; copies the whole log to @buf. */
static bool log_wait(const char *needle, char *buf, size_t size)
{
        uint64_t deadline = now_ms() + 10000;

        while (now_ms() < deadline) {
                FILE *f = fopen(fd_.log, "r");
                size_t n = 0;

                if (f) {
                        n = fread(buf, 1, size - 1, f);
                        fclose(f);
                }
                buf[n] = '\0';
                if (strstr(buf, needle))
                        return true;
                usleep(10000);
        }
        return false;
}

Test(daemon_security, newline_in_a_path_is_escaped_in_the_log)
{
        static char log[1 << 16];
        IpcStatus st;
        Client *c;
        Reply rp;
        uint64_t id;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        id = rpc_submit(c, "sha256", (Arg[]){ARG_S("path", "/nonexistent/x\n<0>evil\ttab")}, 1, 0,
                        0, &st);
        cr_assert_neq(id, 0, "%s", st.message);
        rpc_job_wait(c, id, 10000, &rp);
        cr_assert_str_eq(map_str(rp.result, "state"), "failed");
        reply_clear(&rp);
        cr_assert(log_wait("evil", log, sizeof(log)), "the failure was not logged:\n%s", log);
        cr_assert(strstr(log, "/nonexistent/x\\n<0>evil\\ttab"),
                  "the path is not escaped in its line:\n%s", log);
        cr_assert_null(strstr(log, "\n<0>evil"), "a forged line:\n%s", log);
        cr_assert_neq(strncmp(log, "<0>evil", 7), 0);
        client_free(c);
}
