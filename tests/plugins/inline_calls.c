/* SPDX-License-Identifier: MIT */
/*
 * inline_calls.c — block_calls.c's plugin declared FIBERD_PLUGIN_INLINE: fiberd runs its
 * jobs on the server worker that dispatched them ([jobs] run_inline), where its blocking
 * calls must still park the fiber and its open() still act as the submitter, and a job
 * that takes over 1 ms sends the plugin's later jobs to the job workers.
 */
#define BLOCK_CALLS_NAME "inline_calls"
#define BLOCK_CALLS_FLAGS FIBERD_PLUGIN_INLINE
#include "block_calls.c"
