/* SPDX-License-Identifier: MIT */
/*
 * macro.h — the bottom layer's small macros, shared by every folder (client/ included):
 * header-only, libc only, so it sits below the scheduler in the layering that
 * `make check-layering` enforces.
 *
 * container_of and ELEMENTSOF as in the Linux kernel and systemd's macro.h; LIKELY /
 * UNLIKELY as branch hints for the hot path.
 */
#ifndef FIBERD_BASE_MACRO_H
#define FIBERD_BASE_MACRO_H

#include <stddef.h>
#include <stdint.h>

/* container_of - the struct of type @type whose member @member is at @ptr. */
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ELEMENTSOF - the number of elements of the array @a (not a pointer). */
#define ELEMENTSOF(a)                                                                              \
        (__builtin_choose_expr(!__builtin_types_compatible_p(__typeof__(a), __typeof__(&*(a))),    \
                               sizeof(a) / sizeof((a)[0]), (void)0))

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* u64_compare - qsort(3)/bsearch(3) comparator of two uint64_t, ascending. */
static inline int u64_compare(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

#endif /* FIBERD_BASE_MACRO_H */
