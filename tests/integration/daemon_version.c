/* SPDX-License-Identifier: MIT */
/*
 * daemon_version.c — one version everywhere: `fiberd --version` prints FIBERD_VERSION,
 * and `ping` answers with FIBERD_VERSION and FIBERD_PROTOCOL_VERSION (ipc/protocol.h).
 */
#include "tests/integration/fiberd_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "ipc/protocol.h"

static Fiberd fd_;

static void teardown(void)
{
        fiberd_stop(&fd_);
}

TestSuite(daemon_version, .fini = teardown, .timeout = 60);

Test(daemon_version, ping_returns_the_release_and_protocol)
{
        Client *c;
        Reply rp;

        fiberd_start(&fd_, NULL);
        c = fiberd_connect(&fd_);
        rpc_simple(c, IPC_METHOD_PING, 0, NULL, &rp);
        cr_assert_eq(rp.r, 0, "ping: %s", rp.st.message);
        cr_assert_str_eq(map_str(rp.result, IPC_KEY_VERSION), FIBERD_VERSION);
        cr_assert_eq(map_uint(rp.result, IPC_KEY_PROTOCOL), (uint64_t)FIBERD_PROTOCOL_VERSION);
        cr_assert_eq(map_uint(rp.result, IPC_KEY_PID), (uint64_t)fd_.pid);
        reply_clear(&rp);
        client_free(c);
}

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
