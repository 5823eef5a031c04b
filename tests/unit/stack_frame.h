/* SPDX-License-Identifier: MIT */
/* stack_frame.h — stack_frame.c's one function, for test_stack.c. */
#ifndef FIBERD_TEST_STACK_FRAME_H
#define FIBERD_TEST_STACK_FRAME_H

#define STACK_FRAME_BYTES (1024 * 1024)

/* stack_frame_1mib - a FiberFn with a 1 MiB frame built without stack-clash
 * protection; writes 3 to *(int *)@arg if it ever returns. Context: a fiber. */
__attribute__((noinline)) void stack_frame_1mib(void *arg);

#endif /* FIBERD_TEST_STACK_FRAME_H */
