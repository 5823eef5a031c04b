/* SPDX-License-Identifier: MIT */
/*
 * no_yield_inline.c — no_yield.c's plugin declared FIBERD_PLUGIN_INLINE, which it is
 * not: its job holds the server worker that runs it. The daemon must keep serving
 * everyone else (the rescue's spare server worker), end the job at its timeout or
 * cancel without it, and at exit not call fini() under its code.
 */
#define NO_YIELD_NAME "no_yield_inline"
#define NO_YIELD_FLAGS FIBERD_PLUGIN_INLINE
#include "no_yield.c"
