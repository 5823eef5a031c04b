#!/usr/bin/env bash
# tests/man.sh — `make check-man`: each built man page renders with man(1) without a
# warning (`man --warnings -l`, stderr only, at MANWIDTH=80), and shows its NAME line.
# First a self-test: a page with an undefined macro must be caught, so a checker that
# went blind (man missing its --warnings, groff quiet) fails instead of passing.
# Usage: tests/man.sh PAGE...
set -uo pipefail
me=check-man
fail=0

# Warnings only: the rendered text goes to /dev/null, stderr is what we keep.
warnings() { MANWIDTH=80 MAN_KEEP_FORMATTING= man --warnings -l "$1" 2>&1 >/dev/null; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '.TH BROKEN 1\n.SH NAME\nbroken \\- a page with an undefined macro\n.notamacro x\n' \
	>"$tmp/broken.1"
if [ -z "$(warnings "$tmp/broken.1")" ]; then
	echo "$me: self-test FAILED: a page with an undefined macro rendered without a warning" >&2
	exit 1
fi

for page in "$@"; do
	w=$(warnings "$page")
	if [ -n "$w" ]; then
		echo "$me: $page: warnings:" >&2
		sed 's/^/    /' <<<"$w" >&2
		fail=1
		continue
	fi
	name=$(basename "$page")
	name=${name%.*}
	if ! MANWIDTH=80 man -l "$page" 2>/dev/null | grep -q "^ *$name - "; then
		echo "$me: $page: no NAME line '$name - ...' in the rendered page" >&2
		fail=1
		continue
	fi
	echo "$me: $page: ok"
done
exit $fail
