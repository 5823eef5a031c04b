/* SPDX-License-Identifier: MIT */
/*
 * daemon_version.c — one version everywhere: `fiberd --version` prints FIBERD_VERSION
 * (ipc/protocol.h); ping's version and protocol are checked in daemon_basic.c.
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "ipc/protocol.h"

TestSuite(daemon_version, .timeout = 60);

Test(daemon_version, version_option_prints_the_release)
{
        char out[256] = "", want[64];
        FILE *p = popen(FIBERD_BIN " --version", "r");
        size_t n;
        int st;

        cr_assert_not_null(p, "cannot run %s", FIBERD_BIN);
        n = fread(out, 1, sizeof(out) - 1, p);
        out[n] = '\0';
        st = pclose(p);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fiberd --version: status %d", st);
        snprintf(want, sizeof(want), "fiberd %s\n", FIBERD_VERSION);
        cr_assert_str_eq(out, want);
}
