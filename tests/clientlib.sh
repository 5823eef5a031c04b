#!/usr/bin/env bash
# tests/clientlib.sh — `make check-clientlib`: libfiberd-client as a user gets it.
#
#   1. `make install DESTDIR=<scratch>` and nothing else: the program
#      tests/clientlib/client_example.c is compiled with only
#      `pkg-config --cflags --libs fiberd-client`, PKG_CONFIG_SYSROOT_DIR and
#      PKG_CONFIG_PATH pointing into the staging tree (no -I or -L of the source tree);
#   2. the installed library exports only fiberd_client_* and has its soname;
#   3. the program runs against a real fiberd (a temp socket, the built plugins) with the
#      staged library (LD_LIBRARY_PATH) and must print "ok": submit and result, out-of-
#      order answers, errors as codes, job.list pages (see the program's header);
#   4. the ABI stays versioned: the functions whose FiberdClientJobOptions grew have their
#      FIBERD_CLIENT_0 version beside the default FIBERD_CLIENT_0.2 one, job logs and
#      metrics are FIBERD_CLIENT_0.3, job.run's and job.wait's fields FIBERD_CLIENT_0.4,
#      and tests/clientlib/client_abi0.c, a program bound
#      to FIBERD_CLIENT_0 with the old struct followed by poison, must print "ok" against
#      the same fiberd;
#   5. tests/clientlib/client_observe.c (job.logs, following a job's log, metrics, a job
#      class) prints "ok" against the same fiberd, whose plugin directory also holds the
#      test plugin log_lines.so;
#   6. fiberd-client.pc is relocatable: with PKG_CONFIG_SYSROOT_DIR unset its
#      includedir and libdir are the staged tree's, and those of a copy of the tree
#      moved elsewhere once it is moved.
# Usage: tests/clientlib.sh SCRATCH_DIR FIBERD PLUGIN_DIR LOG_LINES_SO
set -euo pipefail
cd "$(dirname "$0")/.."
me=check-clientlib
scratch=${1:?usage: tests/clientlib.sh SCRATCH_DIR FIBERD PLUGIN_DIR LOG_LINES_SO}
fiberd=$(realpath "${2:?}")
bundled_dir=$(realpath "${3:?}")
log_lines_so=$(realpath "${4:?}")
prefix=/usr/local
fail() { echo "$me: FAIL: $*" >&2; exit 1; }

# shellcheck source=tests/stage.sh
. tests/stage.sh
stage_install "$scratch"

# the .pc's prefix follows the file: no PKG_CONFIG_SYSROOT_DIR
unset PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_PATH=$root$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs fiberd-client) || fail "pkg-config does not know fiberd-client"
for v in includedir libdir; do
	d=$(pkg-config --variable=$v fiberd-client)
	want=$root$prefix/${v%dir}
	[ "$v" = libdir ] && want=$root$prefix/lib
	[ "$(realpath "$d")" = "$want" ] || fail "fiberd-client.pc's $v is $d, not the staged $want"
done
[ -f "$(pkg-config --variable=includedir fiberd-client)/fiberd/client.h" ] ||
	fail "no fiberd/client.h under pkg-config's includedir"
moved=$scratch/moved
rm -rf "$moved" && cp -a "$root" "$moved"
d=$(PKG_CONFIG_PATH=$moved$prefix/lib/pkgconfig pkg-config --variable=includedir fiberd-client)
[ "$(realpath "$d")" = "$moved$prefix/include" ] ||
	fail "a moved tree's fiberd-client.pc names $d, not $moved$prefix/include: it is not relocatable"
rm -rf "$moved"
echo "$me: fiberd-client.pc follows its tree (staged, and moved)"
# shellcheck disable=SC2086 # the flags are words
cc -std=gnu11 -Wall -Wextra -Werror -o "$scratch/client_example" tests/clientlib/client_example.c $flags ||
	fail "tests/clientlib/client_example.c does not build with: $flags"
echo "$me: built with only: $flags"
# shellcheck disable=SC2086
cc -std=gnu11 -Wall -Wextra -Werror -o "$scratch/client_abi0" tests/clientlib/client_abi0.c $flags ||
	fail "tests/clientlib/client_abi0.c does not build with: $flags"
# shellcheck disable=SC2086
cc -std=gnu11 -Wall -Wextra -Werror -o "$scratch/client_observe" tests/clientlib/client_observe.c $flags ||
	fail "tests/clientlib/client_observe.c does not build with: $flags"

lib=$root$prefix/lib/libfiberd-client.so.0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = libfiberd-client.so.0 ] || fail "the soname is '$soname'"
others=$(nm -D --defined-only "$lib" | awk '$2 != "A" { print $3 }' | grep -v '^fiberd_client_[a-z]' || true)
[ -z "$others" ] || fail "libfiberd-client exports more than fiberd_client_*: $(echo $others)"
echo "$me: $soname exports $(nm -D --defined-only "$lib" | grep -c ' T fiberd_client_') fiberd_client_* functions and nothing else"
syms=$(nm -D --defined-only "$lib")
for f in fiberd_client_send_submit fiberd_client_send_run fiberd_client_job_run fiberd_client_submit; do
	grep -q " T $f@FIBERD_CLIENT_0\$" <<<"$syms" || fail "$f@FIBERD_CLIENT_0 (the old options) is gone"
	grep -q " T $f@@FIBERD_CLIENT_0.2\$" <<<"$syms" || fail "$f@@FIBERD_CLIENT_0.2 is not the default"
done
grep -q " T fiberd_client_schedule_add@@FIBERD_CLIENT_0.2\$" <<<"$syms" ||
	fail "fiberd_client_schedule_add is not in FIBERD_CLIENT_0.2"
for f in fiberd_client_job_logs fiberd_client_job_logs_follow fiberd_client_metrics fiberd_client_metrics_text; do
	grep -q " T $f@@FIBERD_CLIENT_0.3\$" <<<"$syms" || fail "$f is not in FIBERD_CLIENT_0.3"
done
for f in fiberd_client_send_run_fields fiberd_client_send_wait_fields; do
	grep -q " T $f@@FIBERD_CLIENT_0.4\$" <<<"$syms" || fail "$f is not in FIBERD_CLIENT_0.4"
done
echo "$me: FIBERD_CLIENT_0 kept beside FIBERD_CLIENT_0.2 for the functions whose options grew; logs and metrics in FIBERD_CLIENT_0.3; fields in FIBERD_CLIENT_0.4"

tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
# the bundled plugins and log_lines.so, which logs lines for client_observe
plugin_dir=$tmp/plugins
mkdir "$plugin_dir"
cp "$bundled_dir"/*.so "$log_lines_so" "$plugin_dir"/ # copies: fiberd loads no symlink
# its job store in $tmp, not /var/lib/fiberd
STATE_DIRECTORY="$tmp" "$fiberd" --config /dev/null --socket "$tmp/fiberd.sock" --plugin-dir "$plugin_dir" \
	--workers 1 --log-level warning 2>"$tmp/log" &
pid=$!
for ((i = 0; i < 500; i++)); do
	[ -S "$tmp/fiberd.sock" ] && break
	kill -0 "$pid" 2>/dev/null || fail "fiberd exited: $(cat "$tmp/log")"
	sleep 0.02
done
[ -S "$tmp/fiberd.sock" ] || fail "fiberd did not listen on $tmp/fiberd.sock"
out=$(LD_LIBRARY_PATH=$root$prefix/lib "$scratch/client_example" "$tmp/fiberd.sock" 2>&1) ||
	fail "client_example against a real fiberd:
$out"
sed 's/^/    /' <<<"$out"
[ "$(tail -1 <<<"$out")" = ok ] || fail "client_example did not say ok"
out=$(LD_LIBRARY_PATH=$root$prefix/lib "$scratch/client_abi0" "$tmp/fiberd.sock" 2>&1) ||
	fail "client_abi0 (a FIBERD_CLIENT_0 program) against a real fiberd:
$out"
sed 's/^/    /' <<<"$out"
[ "$(tail -1 <<<"$out")" = ok ] || fail "client_abi0 did not say ok"
out=$(LD_LIBRARY_PATH=$root$prefix/lib "$scratch/client_observe" "$tmp/fiberd.sock" 2>&1) ||
	fail "client_observe (job logs, metrics) against a real fiberd:
$out"
sed 's/^/    /' <<<"$out"
[ "$(tail -1 <<<"$out")" = ok ] || fail "client_observe did not say ok"
ldd_out=$(LD_LIBRARY_PATH=$root$prefix/lib ldd "$scratch/client_example")
grep -q "libfiberd-client.so.0 => $root" <<<"$ldd_out" || fail "client_example did not load the staged library: $ldd_out"
echo "$me: ok"
