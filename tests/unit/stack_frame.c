/* SPDX-License-Identifier: MIT */
/*
 * stack_frame.c — one big stack frame, compiled as a careless plugin is: without
 * -fstack-clash-protection (tests/build.mk), so the compiler moves the stack pointer
 * past the whole frame at once and touches no page in between. test_stack.c runs it in
 * a fiber: the first write, 1 MiB below the frame's top, must land in the stack's guard
 * and be reported as an overflow, not in the slot below (another fiber's stack).
 */
#include <string.h>

#include "stack_frame.h"

void stack_frame_1mib(void *arg)
{
        volatile char frame[STACK_FRAME_BYTES];

        /* the lowest byte first: the one farthest below the stack pointer on entry */
        frame[0] = 1;
        frame[sizeof(frame) - 1] = 2;
        *(int *)arg = frame[0] + frame[sizeof(frame) - 1];
}
