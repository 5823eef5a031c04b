/* SPDX-License-Identifier: MIT */
/*
 * fiberd-client-compat.c — the FIBERD_CLIENT_0 versions of the functions whose
 * FiberdClientJobOptions grew (fiberd/client.h, "ABI"): a program built against the
 * first release passes a struct of three fields, and must not have the fields after
 * them read from whatever follows it in its memory.
 *
 * Each function here is bound to the old version of its name with .symver (glibc's
 * way, and libfiberd-client.map's FIBERD_CLIENT_0 node); fiberd-client-method.c's
 * function of the same name is the default, FIBERD_CLIENT_0.2, that programs built
 * now link to. The compat0_* names themselves stay local (the map's "local: *"). A
 * static link (fiberctl, the tests) has no versions and gets the default ones.
 */
#include "client/fiberd/client.h"

#include <string.h>

/* FiberdClientJobOptions as FIBERD_CLIENT_0 had it. */
typedef struct FiberdClientJobOptions0 {
        bool has_priority;
        int32_t priority;
        uint64_t timeout_ms;
} FiberdClientJobOptions0;

/* @old in today's struct, in @buf; NULL for NULL. */
static const FiberdClientJobOptions *options_from_0(const FiberdClientJobOptions0 *old,
                                                    FiberdClientJobOptions *buf)
{
        if (!old)
                return NULL;
        memset(buf, 0, sizeof(*buf));
        buf->has_priority = old->has_priority;
        buf->priority = old->priority;
        buf->timeout_ms = old->timeout_ms;
        return buf;
}

/* Binds @impl to @name@FIBERD_CLIENT_0. */
#define COMPAT0(impl, name) __asm__(".symver " #impl ", " #name "@FIBERD_CLIENT_0")

/* Exported (default visibility) so the versioned alias is; local by the version script. */
FIBERD_CLIENT_EXPORT int compat0_send_submit(FiberdClient *c, const char *plugin, const void *args,
                                             size_t args_len, const FiberdClientJobOptions0 *opts,
                                             uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int compat0_send_run(FiberdClient *c, const char *plugin, const void *args,
                                          size_t args_len, const FiberdClientJobOptions0 *opts,
                                          int64_t wait_timeout_ms, uint32_t *ret_msgid);
FIBERD_CLIENT_EXPORT int compat0_job_run(FiberdClient *c, const char *plugin, const void *args,
                                         size_t args_len, const FiberdClientJobOptions0 *opts,
                                         int64_t wait_timeout_ms, int timeout_ms,
                                         FiberdClientReply **ret, FiberdClientError *err);
FIBERD_CLIENT_EXPORT int compat0_submit(FiberdClient *c, const char *plugin, const void *args,
                                        size_t args_len, const FiberdClientJobOptions0 *opts,
                                        int timeout_ms, uint64_t *ret_id, FiberdClientError *err);

COMPAT0(compat0_send_submit, fiberd_client_send_submit);
COMPAT0(compat0_send_run, fiberd_client_send_run);
COMPAT0(compat0_job_run, fiberd_client_job_run);
COMPAT0(compat0_submit, fiberd_client_submit);

int compat0_send_submit(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                        const FiberdClientJobOptions0 *opts, uint32_t *ret_msgid)
{
        FiberdClientJobOptions buf;
        return fiberd_client_send_submit(c, plugin, args, args_len, options_from_0(opts, &buf),
                                         ret_msgid);
}

int compat0_send_run(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                     const FiberdClientJobOptions0 *opts, int64_t wait_timeout_ms,
                     uint32_t *ret_msgid)
{
        FiberdClientJobOptions buf;
        return fiberd_client_send_run(c, plugin, args, args_len, options_from_0(opts, &buf),
                                      wait_timeout_ms, ret_msgid);
}

int compat0_job_run(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                    const FiberdClientJobOptions0 *opts, int64_t wait_timeout_ms, int timeout_ms,
                    FiberdClientReply **ret, FiberdClientError *err)
{
        FiberdClientJobOptions buf;
        return fiberd_client_job_run(c, plugin, args, args_len, options_from_0(opts, &buf),
                                     wait_timeout_ms, timeout_ms, ret, err);
}

int compat0_submit(FiberdClient *c, const char *plugin, const void *args, size_t args_len,
                   const FiberdClientJobOptions0 *opts, int timeout_ms, uint64_t *ret_id,
                   FiberdClientError *err)
{
        FiberdClientJobOptions buf;
        return fiberd_client_submit(c, plugin, args, args_len, options_from_0(opts, &buf),
                                    timeout_ms, ret_id, err);
}
