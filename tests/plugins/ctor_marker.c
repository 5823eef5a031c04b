/* SPDX-License-Identifier: MIT */
/*
 * ctor_marker.c — a valid test plugin with a constructor that creates the file named by
 * $FIBERD_TEST_CTOR_MARKER. The loader's trust checks must refuse an untrusted copy of
 * it before dlopen(), so the marker never appears (tests/integration/plugins_loader.c).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "plugins/fiberd/plugin.h"

__attribute__((constructor)) static void ctor_marker_constructor(void)
{
        const char *path = getenv("FIBERD_TEST_CTOR_MARKER");
        int fd;

        if (!path)
                return;
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
                close(fd);
}

static int ctor_marker_run(FiberdJob *job, const FiberdHost *host)
{
        return 0;
}

FIBERD_PLUGIN_EXPORT const FiberdPlugin fiberd_plugin = {
        FIBERD_PLUGIN_HEADER,   .name = "ctor_marker",
        .version = "1.0",       .description = "test: its constructor leaves a marker file",
        .run = ctor_marker_run,
};
