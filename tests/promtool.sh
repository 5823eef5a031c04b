#!/usr/bin/env bash
# tests/promtool.sh — `make check-promtool`: the metrics of a real fiberd in Prometheus's
# text format (`fiberctl stats --prometheus`, the `metrics` method's "prometheus"
# format, what node_exporter's textfile collector reads) pass Prometheus's own checker,
# `promtool check metrics`, after jobs of two plugins and two classes have run. (The
# OpenMetrics form, `--openmetrics`, is checked by the strict parser of
# tests/integration/daemon_metrics.c: promtool reads only the Prometheus format.)
#
# promtool comes from Debian's prometheus package. Installing that package would also
# start a Prometheus server on a machine with systemd, so the script does not install
# it: it uses a promtool on PATH, else downloads the package (`apt-get download`, no
# root needed) into build/prometheus-pkg/ and takes the binary out of it (`dpkg-deb
# -x`; tests/prometheus-pkg.sh). Where neither works (no package source), it says so and
# stops without failing: the strict checker of tests/integration/daemon_metrics.c still
# runs.
# Usage: tests/promtool.sh FIBERCTL FIBERD PLUGIN_DIR BUILD_DIR
set -uo pipefail
me=check-promtool
fiberctl=${1:?usage: tests/promtool.sh FIBERCTL FIBERD PLUGIN_DIR BUILD_DIR}
fiberd=${2:?}
plugin_dir=${3:?}
build=${4:?}
fail() {
	echo "$me: FAIL: $*" >&2
	exit 1
}

mkdir -p "$build"
# shellcheck source=tests/prometheus-pkg.sh
. "$(dirname "$0")/prometheus-pkg.sh"
promtool=$(prometheus_pkg_bin promtool "$build" 2>"$build/prometheus-pkg.err")
case $? in
0) ;;
1)
	echo "$me: skipped: $(cat "$build/prometheus-pkg.err")"
	exit 0
	;;
*) fail "$(cat "$build/prometheus-pkg.err")" ;;
esac
"$promtool" --version >/dev/null 2>&1 || fail "$promtool does not run"

tmp=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
printf '[class.batch]\nshares = 20\n' >"$tmp/fiberd.conf"
STATE_DIRECTORY="$tmp" "$fiberd" --config "$tmp/fiberd.conf" --socket "$tmp/fiberd.sock" \
	--plugin-dir "$plugin_dir" --workers 1 --log-level warning 2>"$tmp/log" &
pid=$!
for ((i = 0; i < 500; i++)); do
	"$fiberctl" -s "$tmp/fiberd.sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "fiberd exited: $(cat "$tmp/log")"
	sleep 0.01
done
ctl() { "$fiberctl" -s "$tmp/fiberd.sock" "$@"; }
ctl submit echo x=1 --wait >/dev/null || fail "echo job failed"
ctl submit sleep ms=1 --class batch --wait >/dev/null || fail "sleep job failed"
ctl submit sleep ms=abc >/dev/null 2>&1 && fail "a bad argument was accepted"
ctl stats --prometheus >"$tmp/metrics" || fail "fiberctl stats --prometheus exited $?"
ctl stats --openmetrics | grep -q '^# EOF$' || fail "no '# EOF' line in the OpenMetrics text"
out=$("$promtool" check metrics <"$tmp/metrics" 2>&1) ||
	fail "promtool check metrics: $out"
echo "$me: promtool check metrics: ok ($(grep -c '^# TYPE' "$tmp/metrics") metric families, $(wc -l <"$tmp/metrics") lines)"
