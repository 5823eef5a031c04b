/* SPDX-License-Identifier: MIT */
/*
 * runner.c — main() of the TSan stand-in for Criterion (see criterion/criterion.h):
 * runs every registered test in a forked child, checks how it ended, prints a line per
 * test and Criterion's synthesis line. Exit status 1 when any test failed.
 */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "criterion/criterion.h"

extern struct minicrit_test *__start_minicrit_tests[] __attribute__((visibility("hidden")));
extern struct minicrit_test *__stop_minicrit_tests[] __attribute__((visibility("hidden")));

void minicrit_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
        va_list ap;
        fprintf(stderr, "[----] %s:%d: Assertion Failed: %s\n[----]   ", file, line, expr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        fflush(stderr);
        _exit(1);
}

void minicrit_skip(const char *why)
{
        fprintf(stderr, "[----] skipped: %s\n", why);
        fflush(stderr);
        _exit(0); /* counted as passing: the stand-in has no skip channel */
}

static bool run_one(const struct minicrit_test *t)
{
        int status;
        pid_t pid = fork();

        if (pid < 0) {
                perror("fork");
                return false;
        }
        if (pid == 0) {
                alarm((unsigned)(t->timeout ? t->timeout : 120));
                t->fn();
                fflush(NULL);
                _exit(0);
        }
        if (waitpid(pid, &status, 0) < 0)
                return false;
        if (t->signal)
                return WIFSIGNALED(status) && WTERMSIG(status) == t->signal;
        if (WIFSIGNALED(status))
                fprintf(stderr, "[----] %s::%s: killed by signal %d%s\n", t->suite, t->name,
                        WTERMSIG(status), WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
        return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
        int tested = 0, passed = 0, failed = 0, skipped = 0;

        (void)argc;
        (void)argv; /* Criterion's --jobs / --timeout are accepted and ignored */
        for (struct minicrit_test **p = __start_minicrit_tests; p < __stop_minicrit_tests; p++) {
                const struct minicrit_test *t = *p;
                if (t->disabled) {
                        skipped++;
                        printf("[SKIP] %s::%s\n", t->suite, t->name);
                        continue;
                }
                tested++;
                if (run_one(t)) {
                        passed++;
                        printf("[PASS] %s::%s\n", t->suite, t->name);
                } else {
                        failed++;
                        printf("[FAIL] %s::%s\n", t->suite, t->name);
                }
                fflush(stdout);
        }
        printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: 0 "
               "| Skipped: %d\n",
               tested, passed, failed, skipped);
        return failed ? 1 : 0;
}
