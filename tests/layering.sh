#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# layering.sh — `make check-layering`: no folder includes a folder above it.
#
#   scheduler/base/   header-only, libc only: includes nothing of the tree but itself
#   scheduler/        may include scheduler/ (base included)
#   ipc/              may include ipc/, scheduler/
#   plugins/          may include plugins/, ipc/, scheduler/
#   daemon/           may include daemon/, plugins/, ipc/, scheduler/
#   client/           may include client/, ipc/, scheduler/base/ only
# Every folder may include scheduler/base/. tests/ is exempt.
#
# Of scheduler/ itself only sched.h (and base/) is public: its private headers
# (PRIVATE_SCHED below: runtime.h, localq.h, runq.h, waitslot.h, context.h, blockio.h)
# may be included from scheduler/ only, so a folder above uses the runtime through
# sched.h and nothing else.
#
# Reads every `#include "..."` (and `#include <...>` naming a tree folder, or
# <fiberd/...>, which is plugins/fiberd/) in the .c, .h and .S files git tracks under
# those folders, resolves it as the compiler does (next to the including file first,
# then from the top of the tree: the build passes -I.), and prints one line per
# violation naming file:line, the include and the rule. Also fails when scheduler/base/
# holds anything but headers.
#
# Usage: tests/layering.sh [DIR]      check the tree at DIR (default: this script's tree)
#        tests/layering.sh --self-test build throw-away trees with and without a
#                                      violation and check that only the clean one passes
#                                      (LAYERING_VERBOSE=1: one line per case)
# Exit status: 0 clean, 1 violations (or a failed self-test), 2 usage.
set -euo pipefail

FOLDERS=(scheduler ipc plugins daemon client)

# The scheduler's private headers: scheduler/ only (every other folder goes through
# scheduler/sched.h and scheduler/base/*.h).
PRIVATE_SCHED=(runtime.h localq.h runq.h waitslot.h context.h blockio.h)

# is_private_sched PATH: is PATH one of the scheduler's private headers?
is_private_sched() {
	local h
	for h in "${PRIVATE_SCHED[@]}"; do
		[ "$1" = "scheduler/$h" ] && return 0
	done
	return 1
}

# The layer a tree path belongs to: base, scheduler, ipc, plugins, daemon, client, or
# nothing (a path outside the checked folders, e.g. a system or test header).
layer_of() {
	case $1 in
	scheduler/base/*) echo base ;;
	scheduler/* | ipc/* | plugins/* | daemon/* | client/*) echo "${1%%/*}" ;;
	*) echo "" ;;
	esac
}

# allowed FROM TO: may a file of layer FROM include one of layer TO?
allowed() {
	local from=$1 to=$2
	[ "$from" = "$to" ] && return 0
	[ "$to" = base ] && return 0
	case $from in
	base) return 1 ;;
	scheduler) return 1 ;;
	ipc) [ "$to" = scheduler ] ;;
	plugins) [ "$to" = scheduler ] || [ "$to" = ipc ] ;;
	daemon) [ "$to" = scheduler ] || [ "$to" = ipc ] || [ "$to" = plugins ] ;;
	client) [ "$to" = ipc ] ;;
	*) return 1 ;;
	esac
}

rule_of() {
	case $1 in
	base) echo "scheduler/base/ may include only scheduler/base/ and libc (the bottom layer)" ;;
	scheduler) echo "scheduler/ may include only scheduler/ (the lowest layer)" ;;
	ipc) echo "ipc/ may include only ipc/ and scheduler/" ;;
	plugins) echo "plugins/ may include only plugins/, ipc/ and scheduler/" ;;
	daemon) echo "daemon/ may include only daemon/, plugins/, ipc/ and scheduler/" ;;
	client) echo "client/ may include only client/, ipc/ and scheduler/base/" ;;
	esac
}

# normalize PATH: drop "./" and fold "dir/.." so a relative include maps to a tree path.
normalize() {
	local IFS=/ part out=()
	for part in $1; do
		case $part in
		'' | .) ;;
		..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	echo "${out[*]}"
}

# The files to check, relative to $1: what git tracks, or (outside a git work tree)
# what is on disk.
list_files() {
	local root=$1
	if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git -C "$root" ls-files -- "${FOLDERS[@]/%//}"
	else
		(cd "$root" && find "${FOLDERS[@]}" -type f 2>/dev/null | sort)
	fi
}

# check DIR: print violations, return 1 if there are any.
check() {
	local root=$1 bad=0 file line num text inc target from to
	local -a files=()
	mapfile -t files < <(list_files "$root")

	for file in "${files[@]}"; do
		case $file in
		scheduler/base/*.h) ;;
		scheduler/base/*)
			echo "layering: $file: scheduler/base/ is header-only (libc only, no sources)"
			bad=1
			;;
		esac
	done

	for file in "${files[@]}"; do
		case $file in *.c | *.h | *.S) ;; *) continue ;; esac
		[ -f "$root/$file" ] || continue
		from=$(layer_of "$file")
		while IFS= read -r line; do
			num=${line%%:*}
			text=${line#*:}
			if [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
				inc=${BASH_REMATCH[1]}
				# As the compiler does: next to the including file, then -I. (the top).
				target=$(normalize "$(dirname "$file")/$inc")
				[ -e "$root/$target" ] || target=$(normalize "$inc")
				text="\"$inc\""
			elif [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
				inc=${BASH_REMATCH[1]}
				case $inc in
				fiberd/*) target=plugins/$inc ;; # the plugin ABI, -Iplugins / pkg-config
				scheduler/* | ipc/* | plugins/* | daemon/* | client/*) target=$(normalize "$inc") ;;
				*) continue ;; # a system header
				esac
				text="<$inc>"
			else
				continue
			fi
			to=$(layer_of "$target")
			[ -n "$to" ] || continue
			if ! allowed "$from" "$to"; then
				echo "layering: $file:$num: includes $text ($target): $(rule_of "$from")"
				bad=1
			elif [ "$from" != scheduler ] && is_private_sched "$target"; then
				echo "layering: $file:$num: includes $text ($target): $from/ may include only scheduler/sched.h and scheduler/base/ of the scheduler (its other headers are private)"
				bad=1
			fi
		done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$root/$file" || true)
	done
	return $bad
}

# A throw-away tree with one file per layer, each including what it may.
make_tree() {
	local t=$1
	mkdir -p "$t"/{scheduler/base,ipc,plugins/fiberd,daemon/job,client}
	printf '#include <stddef.h>\n' >"$t/scheduler/base/macro.h"
	printf '#include "scheduler/base/macro.h"\n' >"$t/scheduler/base/list.h"
	printf '#include "scheduler/base/list.h"\n#include "runq.h"\n' >"$t/scheduler/sched.h"
	printf '#include "scheduler/base/macro.h"\n' >"$t/scheduler/runq.h"
	printf '#include "scheduler/sched.h"\n\t.text\n' >"$t/scheduler/context-x86_64.S"
	printf '#include "scheduler/sched.h"\n#include "scheduler/base/macro.h"\n' >"$t/ipc/ipc.h"
	printf '#include "ipc/ipc.h"\n#include "scheduler/sched.h"\n' >"$t/plugins/loader.c"
	printf '#include <stdint.h>\n' >"$t/plugins/fiberd/plugin.h"
	printf '#include <fiberd/plugin.h>\n' >"$t/plugins/hello.c"
	printf '#include "plugins/fiberd/plugin.h"\n#include "ipc/ipc.h"\n#include "scheduler/sched.h"\n' >"$t/daemon/main.c"
	printf '#include "daemon/../daemon/main.c"\n#include "plugins/loader.c"\n' >"$t/daemon/job/job.c"
	printf '#include "ipc/ipc.h"\n#include "scheduler/base/list.h"\n#include "client.h"\n' >"$t/client/fiberctl.c"
	printf '/* #include "daemon/daemon.h" only in a comment */\n' >"$t/client/client.h"
	git -C "$t" init -q
	git -C "$t" add -A
}

# expect NAME STATUS SETUP: a fresh clean tree, SETUP run in it, check gives STATUS.
# (check reads tracked files from disk, so SETUP need `git add` only a new file.)
expect() {
	local name=$1 want=$2 setup=$3 t out got=0
	t=$(mktemp -d "${TMPDIR:-/tmp}/layering-self-test.XXXXXX")
	make_tree "$t"
	(cd "$t" && eval "$setup")
	out=$(check "$t") || got=$?
	rm -rf "$t"
	if [ "$got" -ne "$want" ]; then
		echo "layering self-test: FAIL: $name: exit $got, expected $want${out:+; output:}"
		[ -z "$out" ] || printf '  %s\n' "$out"
		return 1
	fi
	if [ "$want" -ne 0 ] && ! grep -q '^layering: [^ ]*:[0-9]*: includes .*: .* may include only \|^layering: scheduler/base/[^:]*: .*header-only' <<<"$out"; then
		echo "layering self-test: FAIL: $name: no file:line and rule in: $out"
		return 1
	fi
	[ -z "${LAYERING_VERBOSE:-}" ] || echo "layering self-test: ok: $name${out:+ -> ${out%%$'\n'*}}"
	cases=$((cases + 1))
}

self_test() {
	local fails=0 cases=0
	expect "clean tree passes" 0 ':' || fails=1
	expect "scheduler/ including daemon/" 1 \
		'printf "#include \"daemon/main.c\"\n" >>scheduler/runq.h' || fails=1
	expect "scheduler/ including ipc/ from assembly" 1 \
		'printf "#include \"ipc/ipc.h\"\n" >>scheduler/context-x86_64.S' || fails=1
	expect "ipc/ including plugins/ by a relative path" 1 \
		'printf "#  include \"../plugins/fiberd/plugin.h\"\n" >>ipc/ipc.h' || fails=1
	expect "plugins/ including daemon/" 1 \
		'printf "#include \"daemon/main.c\"\n" >>plugins/loader.c' || fails=1
	expect "daemon/ including a private scheduler header" 1 \
		'printf "#include \"scheduler/runtime.h\"\n" >>daemon/main.c' || fails=1
	expect "ipc/ including a private scheduler header by a relative path" 1 \
		'printf "#include \"../scheduler/runq.h\"\n" >>ipc/ipc.h' || fails=1
	expect "plugins/ including a private scheduler header through <...>" 1 \
		'printf "#include <scheduler/waitslot.h>\n" >>plugins/loader.c' || fails=1
	expect "client/ including the scheduler above base" 1 \
		'printf "#include \"scheduler/sched.h\"\n" >>client/fiberctl.c' || fails=1
	expect "client/ including plugins/ through <fiberd/...>" 1 \
		'printf "#include <fiberd/plugin.h>\n" >>client/fiberctl.c' || fails=1
	expect "scheduler/base/ including the scheduler" 1 \
		'printf "#include \"scheduler/sched.h\"\n" >>scheduler/base/list.h' || fails=1
	expect "scheduler/base/ holding a source file" 1 \
		'printf "int x;\n" >scheduler/base/list.c && git add scheduler/base/list.c' || fails=1
	expect "a violation in an untracked file is not read" 0 \
		'printf "#include \"daemon/main.c\"\n" >scheduler/stray.h' || fails=1
	if [ $fails -ne 0 ]; then
		echo "layering self-test: FAILED"
		return 1
	fi
	echo "layering self-test: ok: $cases cases, each violation caught, the clean trees passed"
}

case ${1:-} in
--self-test) self_test ;;
-h | --help) sed -n '3,25p' "$0" | sed 's/^# \{0,1\}//' ;;
-*)
	echo "usage: $0 [--self-test | DIR]" >&2
	exit 2
	;;
*)
	root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
	if check "$root"; then
		echo "check-layering: ok"
	else
		echo "check-layering: FAILED (see the rules at the top of tests/layering.sh)"
		exit 1
	fi
	;;
esac
