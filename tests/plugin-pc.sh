#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# tests/plugin-pc.sh — `make check-plugin-pc`: writing a plugin as an author gets the
# plugin kit.
#
#   1. `make install DESTDIR=<scratch>` and nothing else; PKG_CONFIG_PATH points at the
#      staged lib/pkgconfig and PKG_CONFIG_SYSROOT_DIR is unset: fiberd-plugin.pc must
#      still name the staged include directory (its prefix follows the file) and declare
#      msgpack-c;
#   2. plugins/example/hello.c is compiled with only `pkg-config --cflags fiberd-plugin`
#      (no -I of the source tree);
#   3. the .so is loaded by a real fiberd (a temp socket and job store) and a job of it
#      answers "hello, pc".
# Usage: tests/plugin-pc.sh SCRATCH_DIR FIBERD FIBERCTL
set -euo pipefail
cd "$(dirname "$0")/.."
me=check-plugin-pc
scratch=${1:?usage: tests/plugin-pc.sh SCRATCH_DIR FIBERD FIBERCTL}
fiberd=$(realpath "${2:?}")
fiberctl=$(realpath "${3:?}")
prefix=/usr/local
fail() { echo "$me: FAIL: $*" >&2; exit 1; }

# shellcheck source=tests/stage.sh
. tests/stage.sh
stage_install "$scratch"

unset PKG_CONFIG_SYSROOT_DIR
export PKG_CONFIG_PATH=$root$prefix/lib/pkgconfig
cflags=$(pkg-config --cflags fiberd-plugin) || fail "pkg-config does not know fiberd-plugin"
inc=$(pkg-config --variable=includedir fiberd-plugin)
[ "$(realpath "$inc")" = "$root$prefix/include" ] ||
	fail "includedir is $inc, not the staged $root$prefix/include"
[ -f "$inc/fiberd/plugin.h" ] || fail "no fiberd/plugin.h under $inc"
pkg-config --print-requires fiberd-plugin | grep -qx 'msgpack' ||
	fail "fiberd-plugin.pc does not declare msgpack-c (Requires: msgpack)"
case " $(pkg-config --libs fiberd-plugin) " in *" -lmsgpackc "*) ;; *) fail "--libs lacks -lmsgpackc" ;; esac
echo "$me: pkg-config --cflags fiberd-plugin: $cflags"

tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
mkdir "$tmp/plugins"
# shellcheck disable=SC2086 # the flags are words
cc -std=gnu11 -Wall -Wextra -Werror -shared $cflags -o "$tmp/plugins/hello.so" \
	plugins/example/hello.c || fail "plugins/example/hello.c does not build with: $cflags"

STATE_DIRECTORY=$tmp "$fiberd" --config /dev/null --socket "$tmp/fiberd.sock" \
	--plugin-dir "$tmp/plugins" --workers 1 --log-level info 2>"$tmp/log" &
pid=$!
for ((i = 0; i < 500; i++)); do
	[ -S "$tmp/fiberd.sock" ] && break
	kill -0 "$pid" 2>/dev/null || fail "fiberd exited: $(cat "$tmp/log")"
	sleep 0.02
done
[ -S "$tmp/fiberd.sock" ] || fail "fiberd did not listen on $tmp/fiberd.sock"
grep -q "plugin hello 1.0 loaded" "$tmp/log" || fail "fiberd did not load hello.so: $(cat "$tmp/log")"
out=$("$fiberctl" -s "$tmp/fiberd.sock" --json submit hello who=pc --wait 2>&1) ||
	fail "fiberctl submit hello --wait: $out"
grep -q '"hello, pc"' <<<"$out" || fail "unexpected answer: $out"
echo "$me: hello.so built from the staged kit ran in fiberd: $(tr -d '\n' <<<"$out" | head -c 200)"
echo "$me: ok"
