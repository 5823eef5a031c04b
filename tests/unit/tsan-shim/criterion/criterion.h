/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for <criterion/criterion.h>, used only for the ThreadSanitizer build of
 * the scheduler's unit tests: Criterion cannot start under TSan ("Could not initialize
 * inheritable arena", Snaipe/Criterion issue #274, open upstream). The TSan build puts
 * this directory first on the include path, so the same test files compile unchanged.
 *
 * It covers the subset the unit tests use: Test(suite, name, .timeout/.signal/
 * .disabled), cr_assert and its comparison forms, cr_assert_fail. Each test runs in its
 * own forked process, like Criterion's; a failed assertion (from any thread) ends that
 * process with a message and exit status 1.
 */
#ifndef FIBERD_TSAN_SHIM_CRITERION_H
#define FIBERD_TSAN_SHIM_CRITERION_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct minicrit_test {
        const char *suite;
        const char *name;
        void (*fn)(void);
        int timeout; /* seconds; 0 = the runner's default */
        int signal;  /* expected terminating signal; 0 = must exit 0 */
        bool disabled;
};

void minicrit_fail(const char *file, int line, const char *expr, const char *fmt, ...)
        __attribute__((noreturn));
void minicrit_skip(const char *why) __attribute__((noreturn));

#define Test(s_, n_, ...)                                                                          \
        static void s_##_##n_##_impl(void);                                                        \
        static struct minicrit_test s_##_##n_##_desc = {                                           \
                .suite = #s_, .name = #n_, .fn = s_##_##n_##_impl, ##__VA_ARGS__};                 \
        static struct minicrit_test *s_##_##n_##_ptr                                               \
                __attribute__((section("minicrit_tests"), used)) = &s_##_##n_##_desc;              \
        static void s_##_##n_##_impl(void)

#define cr_assert(cond, ...)                                                                       \
        do {                                                                                       \
                if (!(cond))                                                                       \
                        minicrit_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__);                  \
        } while (0)
#define cr_assert_not(cond, ...) cr_assert(!(cond), __VA_ARGS__)
#define cr_assert_eq(a, b, ...) cr_assert((a) == (b), __VA_ARGS__)
#define cr_assert_neq(a, b, ...) cr_assert((a) != (b), __VA_ARGS__)
#define cr_assert_lt(a, b, ...) cr_assert((a) < (b), __VA_ARGS__)
#define cr_assert_leq(a, b, ...) cr_assert((a) <= (b), __VA_ARGS__)
#define cr_assert_gt(a, b, ...) cr_assert((a) > (b), __VA_ARGS__)
#define cr_assert_geq(a, b, ...) cr_assert((a) >= (b), __VA_ARGS__)
#define cr_assert_null(p, ...) cr_assert((p) == NULL, __VA_ARGS__)
#define cr_assert_not_null(p, ...) cr_assert((p) != NULL, __VA_ARGS__)
#define cr_assert_str_eq(a, b, ...) cr_assert(strcmp((a), (b)) == 0, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) cr_assert(strcmp((a), (b)) != 0, __VA_ARGS__)
#define cr_skip_test(...) minicrit_skip("" __VA_ARGS__)
#define cr_assert_fail(...) minicrit_fail(__FILE__, __LINE__, "cr_assert_fail", "" __VA_ARGS__)
#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))

#endif
