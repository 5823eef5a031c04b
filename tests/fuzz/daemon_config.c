/* SPDX-License-Identifier: MIT */
/*
 * daemon_config.c — libFuzzer target for fiberd's config file parser (daemon/config.c:
 * inih plus the key table): the input is the file, handed to config_load() through a
 * memfd. Checks the contract on every return: 0 with every string set, or -EINVAL /
 * -ENOMEM; a loaded Config's values are inside the ranges config.h documents.
 *
 *   make fuzz-config && build/fuzz/daemon_config tests/fuzz/corpus/daemon_config
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "daemon/config.h"
#include "daemon/obs/log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_fd = -1;
static char fuzz_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        log_set_level(LOG_EMERG); /* a bad file logs one line each time */
        unsetenv("FIBERD_SOCKET");
        fuzz_fd = memfd_create("fiberd-config", MFD_CLOEXEC);
        if (fuzz_fd < 0)
                abort();
        snprintf(fuzz_path, sizeof(fuzz_path), "/proc/self/fd/%d", fuzz_fd);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        ConfigArgs args = {.config_file = fuzz_path, .workers = -1};
        Config c;
        int r;

        if (ftruncate(fuzz_fd, 0) < 0 || pwrite(fuzz_fd, data, size, 0) != (ssize_t)size)
                abort();
        r = config_load(&c, &args);
        if (r == -EINVAL || r == -ENOMEM)
                return 0;
        if (r != 0)
                abort();
        if (!c.socket_path || !c.plugin_dir || c.log_level < LOG_EMERG || c.log_level > LOG_DEBUG ||
            c.max_message == 0)
                abort();
        config_done(&c);
        return 0;
}
