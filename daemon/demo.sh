#!/bin/sh
# SPDX-License-Identifier: MIT
#
# demo.sh — `make demo`: fiberd's main job on real input.
#
# Starts the freshly built fiberd on a private socket with the bundled plugins, submits a
# sha256 job for every regular file under $DEMO_DIR (default /usr/include) through
# `fiberctl batch --wait --json` (one connection, many jobs in flight), checks every
# digest against sha256sum(1), prints files/s, MB/s and the daemon's stats, and stops the
# daemon with SIGTERM (it must exit 0). Any mismatch, missing or failed job fails loudly.
#
# The daemon gets a private config: the installed /etc/fiberd/fiberd.conf is not the demo's
# business, and log_jobs = false, since three log lines a job cost more CPU than hashing
# the job's file. The window is twice fiberd's max_in_flight (512 a connection), so
# requests wait in the socket and fiberd reads them in bulk.
#
# Environment (set by daemon/build.mk): FIBERD, FIBERCTL, PLUGIN_DIR; optional DEMO_DIR,
# DEMO_WINDOW (jobs in flight, default 1024), DEMO_WORKERS (fiberd --workers).
set -eu

FIBERD=${FIBERD:?path of fiberd}
FIBERCTL=${FIBERCTL:?path of fiberctl}
PLUGIN_DIR=${PLUGIN_DIR:?bundled plugin directory}
DEMO_DIR=${DEMO_DIR:-/usr/include}
DEMO_WINDOW=${DEMO_WINDOW:-1024}

die() {
	echo "demo: FAILED: $*" >&2
	exit 1
}

now_ns() { date +%s%N; }

tmp=$(mktemp -d /tmp/fiberd-demo.XXXXXX)
pid=
cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

sock=$tmp/fiberd.sock
export FIBERD_SOCKET="$sock"
unset NOTIFY_SOCKET LISTEN_FDS LISTEN_PID 2>/dev/null || true

workers=
[ -n "${DEMO_WORKERS:-}" ] && workers="--workers $DEMO_WORKERS"
printf '[fiberd]\nlog_jobs = false\n' >"$tmp/fiberd.conf"
# shellcheck disable=SC2086
STATE_DIRECTORY="$tmp" "$FIBERD" --socket "$sock" --plugin-dir "$PLUGIN_DIR" \
	--config "$tmp/fiberd.conf" $workers 2>"$tmp/fiberd.log" &
pid=$!

i=0
until "$FIBERCTL" ping >/dev/null 2>&1; do
	i=$((i + 1))
	if [ $i -gt 500 ] || ! kill -0 "$pid" 2>/dev/null; then
		cat "$tmp/fiberd.log" >&2
		die "fiberd did not start"
	fi
	sleep 0.02
done
echo "demo: fiberd (pid $pid) on $sock; $("$FIBERCTL" plugins | tail -n +2 | awk '{print $1}' | tr '\n' ' ')"

# One JSON Lines spec per regular file (symlinks are skipped: find -type f).
find "$DEMO_DIR" -type f | LC_ALL=C sort >"$tmp/files"
nfiles=$(wc -l <"$tmp/files")
[ "$nfiles" -gt 0 ] || die "no files under $DEMO_DIR"
sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' \
	-e 's/.*/{"plugin": "sha256", "args": {"path": "&"}}/' "$tmp/files" >"$tmp/jobs.jsonl"
echo "demo: hashing $nfiles files under $DEMO_DIR through fiberctl batch (window $DEMO_WINDOW)"

t0=$(now_ns)
rc=0
"$FIBERCTL" --json batch --wait --window "$DEMO_WINDOW" <"$tmp/jobs.jsonl" >"$tmp/results.jsonl" || rc=$?
t1=$(now_ns)
[ $rc -eq 0 ] || echo "demo: fiberctl batch exited with $rc" >&2

# "digest  path" from each job record; anything not done is a failure.
awk -v bad="$tmp/bad" '
	{
		if ($0 !~ /"state": *"done"/) { print > bad; next }
		if (!match($0, /"sha256": *"[0-9a-f]+"/)) { print > bad; next }
		d = substr($0, RSTART, RLENGTH); sub(/^"sha256": *"/, "", d); sub(/"$/, "", d)
		if (!match($0, /"path": *"([^"\\]|\\.)*"/)) { print > bad; next }
		p = substr($0, RSTART, RLENGTH); sub(/^"path": *"/, "", p); sub(/"$/, "", p)
		gsub(/\\"/, "\"", p); gsub(/\\\\/, "\\", p)
		if (match($0, /"bytes": *[0-9]+/)) {
			b = substr($0, RSTART, RLENGTH); sub(/^"bytes": */, "", b); bytes += b
		}
		print d "  " p
	}
	END { printf "%d\n", bytes > "/dev/stderr" }' "$tmp/results.jsonl" 2>"$tmp/bytes" |
	LC_ALL=C sort >"$tmp/fiberd.sums"
bytes=$(cat "$tmp/bytes")

echo "demo: checking against sha256sum"
tr '\n' '\0' <"$tmp/files" | xargs -0 sha256sum | LC_ALL=C sort >"$tmp/expected.sums"

failed=0
if [ -s "$tmp/bad" ]; then
	failed=$(wc -l <"$tmp/bad")
	echo "demo: $failed jobs did not end done, e.g.:" >&2
	head -5 "$tmp/bad" >&2
fi
if ! cmp -s "$tmp/expected.sums" "$tmp/fiberd.sums"; then
	echo "demo: digests differ from sha256sum (< sha256sum, > fiberd):" >&2
	diff "$tmp/expected.sums" "$tmp/fiberd.sums" | head -20 >&2 || true
	failed=$((failed + 1))
fi
got=$(wc -l <"$tmp/fiberd.sums")

awk -v n="$got" -v b="$bytes" -v t0="$t0" -v t1="$t1" 'BEGIN {
	s = (t1 - t0) / 1e9; if (s <= 0) s = 1e-9
	printf "demo: %d files, %.1f MB in %.2f s: %.0f files/s, %.1f MB/s\n", n, b / 1e6, s, n / s, b / 1e6 / s
}'
echo "demo: daemon stats:"
"$FIBERCTL" stats | sed 's/^/    /'

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=
[ $status -eq 0 ] || die "fiberd exited with status $status on SIGTERM"

[ "$got" -eq "$nfiles" ] || die "$got digests for $nfiles files"
[ $failed -eq 0 ] || die "$failed problems (see above)"
[ $rc -eq 0 ] || die "fiberctl batch exited with $rc"
echo "demo: OK — all $nfiles digests match sha256sum; fiberd stopped cleanly"
