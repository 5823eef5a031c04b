#!/bin/bash
# SPDX-License-Identifier: MIT
#
# daemon-sanitizers.sh — make check-daemon-sanitizers: the integration tests of fiberd's
# own threads (the job store and its store thread, shutdown, job runs and cancels) run
# against fiberd built with ThreadSanitizer, then with AddressSanitizer +
# UndefinedBehaviorSanitizer. The test binaries are the normal ones; the harness execs
# $FIBERD_TEST_BIN. A sanitizer writes its reports to files under the report directory
# (log_path), and fiberd's exit status stays its own (exitcode=0), so the tests judge
# fiberd's behaviour and this script judges the reports: any report fails the check.
#
# usage: daemon-sanitizers.sh BUILD_DIR TEST...   (TEST: a test binary's path)
# LeakSanitizer and TSan's thread-leak reports are off: fiberd ends with exit() while
# its job groups' workers (and spare workers) still exist, on purpose (a job may ignore
# cancellation: daemon/main.c), and leaves by _exit() in that case.
set -u
build=$1
shift
fail=0
for variant in thread address-undefined; do
        bin=$build/$variant/fiberd
        reports=$build/$variant/daemon-reports
        if [ ! -x "$bin" ]; then
                echo "daemon-sanitizers: $bin is missing (make SANITIZE=... $bin)" >&2
                exit 1
        fi
        rm -rf "$reports"
        mkdir -p "$reports"
        for t in "$@"; do
                # skynet's 10M fibers (daemon_cancel) take minutes under TSan
                if [ "$variant" = thread ] && [ "${t##*/}" = daemon_cancel ]; then
                        continue
                fi
                echo "== $variant: $t"
                FIBERD_TEST_BIN=$bin \
                        TSAN_OPTIONS="log_path=$reports/tsan exitcode=0 second_deadlock_stack=1 report_thread_leaks=0" \
                        ASAN_OPTIONS="log_path=$reports/asan exitcode=0 detect_leaks=0" \
                        UBSAN_OPTIONS="log_path=$reports/ubsan print_stacktrace=1" \
                        "$t" --jobs 1 || fail=1
        done
        if compgen -G "$reports/*" >/dev/null; then
                echo "daemon-sanitizers: $variant found problems in fiberd:" >&2
                for f in "$reports"/*; do
                        echo "---- $f" >&2
                        head -60 "$f" >&2
                done
                fail=1
        fi
done
exit $fail
