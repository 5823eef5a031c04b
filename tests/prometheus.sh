#!/usr/bin/env bash
# tests/prometheus.sh — `make check-prometheus`: a real Prometheus server scrapes a real
# fiberd's HTTP endpoint (GET /metrics, daemon/obs/metrics_http.c) every second and
# sees what fiberd counts. fiberd listens on [metrics] listen = 127.0.0.1:0 (the port it
# logs); Prometheus on another free loopback port, with its TSDB in a temporary
# directory. The script waits, each wait a bounded poll of Prometheus's HTTP API, until
#   - up{job="fiberd"} is 1 and the target's last scrape has no error;
#   - fiberd_jobs_submitted_total{plugin="echo"} is 3 after three echo jobs, then 5
#     after two more (the scrapes go on, the counter follows);
#   - fiberd_build_info{version=FIBERD_VERSION} is 1, process_start_time_seconds is
#     there, and the metadata of fiberd_job_run_seconds says histogram in seconds (the
#     unit comes only in OpenMetrics: Prometheus negotiated that format);
# then stops Prometheus and fiberd. Everything stays on 127.0.0.1; Prometheus needs no
# network of its own.
#
# Prometheus is Debian's prometheus package's, taken out of it rather than installed
# (tests/prometheus-pkg.sh says why); where it cannot be had (no package source), the
# script says so and stops without failing. curl (the deps step) asks the API; python3
# reads its JSON.
# Usage: tests/prometheus.sh FIBERCTL FIBERD PLUGIN_DIR BUILD_DIR
set -uo pipefail
me=check-prometheus
fiberctl=${1:?usage: tests/prometheus.sh FIBERCTL FIBERD PLUGIN_DIR BUILD_DIR}
fiberd=${2:?}
plugin_dir=${3:?}
build=${4:?}
# every wait gives up after this many seconds (Prometheus needs 1-3 s to start, then a
# scrape a second)
wait_s=${FIBERD_PROMETHEUS_WAIT:-60}
fail() {
	echo "$me: FAIL: $*" >&2
	[ -z "${tmp:-}" ] || {
		echo "--- fiberd's log:" >&2
		tail -n 20 "$tmp/fiberd.log" >&2
		echo "--- prometheus' log:" >&2
		tail -n 20 "$tmp/prometheus.log" >&2 2>/dev/null
	}
	exit 1
}

mkdir -p "$build"
# shellcheck source=tests/prometheus-pkg.sh
. "$(dirname "$0")/prometheus-pkg.sh"
prometheus=$(prometheus_pkg_bin prometheus "$build" 2>"$build/prometheus-pkg.err")
case $? in
0) ;;
1)
	echo "$me: skipped: $(cat "$build/prometheus-pkg.err")"
	exit 0
	;;
*) fail "$(cat "$build/prometheus-pkg.err")" ;;
esac
"$prometheus" --version >/dev/null 2>&1 || fail "$prometheus does not run"
command -v curl >/dev/null || fail "curl is not installed (make deps installs it)"

tmp=$(mktemp -d)
fiberd_pid=
prom_pid=
# stop: SIGTERM, then SIGKILL after 10 s; each process is this script's own child
stop() {
	local pid=$1 i
	[ -n "$pid" ] || return 0
	kill "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 100; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
}
cleanup() {
	stop "$prom_pid"
	stop "$fiberd_pid"
	rm -rf "$tmp"
}
trap cleanup EXIT

# ---- fiberd, its endpoint on a free loopback port
printf '[metrics]\nlisten = 127.0.0.1:0\n' >"$tmp/fiberd.conf"
STATE_DIRECTORY="$tmp" "$fiberd" --config "$tmp/fiberd.conf" --socket "$tmp/fiberd.sock" \
	--plugin-dir "$plugin_dir" --workers 1 2>"$tmp/fiberd.log" &
fiberd_pid=$!
ctl() { "$fiberctl" -s "$tmp/fiberd.sock" "$@"; }
port=
for ((i = 0; i < 1000; i++)); do
	port=$(sed -n 's#.*metrics: serving http://127\.0\.0\.1:\([0-9]*\)/metrics.*#\1#p' "$tmp/fiberd.log")
	[ -n "$port" ] && ctl ping >/dev/null 2>&1 && break
	kill -0 "$fiberd_pid" 2>/dev/null || fail "fiberd exited"
	sleep 0.01
done
[ -n "$port" ] || fail "fiberd did not log 'metrics: serving http://127.0.0.1:PORT/metrics'"
for i in 1 2 3; do
	ctl submit echo "n=$i" --wait >/dev/null || fail "echo job $i failed"
done

# ---- Prometheus, scraping it every second
# A free port: bind port 0 and let it go; if another process takes it first, Prometheus
# exits at once and the next try takes another.
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: fiberd
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
api=
for try in 1 2 3; do
	pport=$(free_port) || fail "no free port"
	"$prometheus" --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/data" \
		--web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
	prom_pid=$!
	for ((i = 0; i < wait_s * 10; i++)); do
		if curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$pport/-/ready"; then
			api="http://127.0.0.1:$pport/api/v1"
			break 2
		fi
		kill -0 "$prom_pid" 2>/dev/null || break
		sleep 0.1
	done
	stop "$prom_pid"
	prom_pid=
	echo "$me: Prometheus did not come up on 127.0.0.1:$pport (try $try)"
done
[ -n "$api" ] || fail "Prometheus did not start"
echo "$me: $("$prometheus" --version 2>&1 | head -n 1) ready on 127.0.0.1:$pport, scraping 127.0.0.1:$port"

# value QUERY: the value of the query's one sample now, or nothing (no sample, or more
# than one)
value() {
	curl -sf --max-time 5 "$api/query" --data-urlencode "query=$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)["data"]["result"]
if len(r) == 1:
    print(r[0]["value"][1])'
}
# wait_for QUERY WANT: poll until the query's value is WANT (at most wait_s seconds).
wait_for() {
	local got='' i
	for ((i = 0; i < wait_s * 5; i++)); do
		got=$(value "$1")
		[ "$got" = "$2" ] && return 0
		sleep 0.2
	done
	fail "$1 is '${got:-no sample}' after ${wait_s} s, want $2"
}

wait_for 'up{job="fiberd"}' 1
echo "$me: PASS: up{job=\"fiberd\"} is 1"
err=$(curl -sf --max-time 5 "$api/targets" | python3 -c '
import json, sys
t = [t for t in json.load(sys.stdin)["data"]["activeTargets"] if t["labels"]["job"] == "fiberd"]
print(t[0]["health"] + " " + t[0]["lastError"] if t else "no target")')
[ "$err" = "up " ] || fail "the fiberd target: $err"
echo "$me: PASS: the last scrape had no error"

wait_for 'fiberd_jobs_submitted_total{job="fiberd",plugin="echo"}' 3
for i in 4 5; do
	ctl submit echo "n=$i" --wait >/dev/null || fail "echo job $i failed"
done
wait_for 'fiberd_jobs_submitted_total{job="fiberd",plugin="echo"}' 5
echo "$me: PASS: fiberd_jobs_submitted_total{plugin=\"echo\"} went 3 -> 5 with the jobs"

version=$("$fiberd" --version | awk '{ print $2 }')
wait_for "fiberd_build_info{job=\"fiberd\",version=\"$version\"}" 1
[ -n "$(value 'process_start_time_seconds{job="fiberd"}')" ] ||
	fail "no process_start_time_seconds"
meta=$(curl -sf --max-time 5 "$api/metadata?metric=fiberd_job_run_seconds" | python3 -c '
import json, sys
m = json.load(sys.stdin)["data"].get("fiberd_job_run_seconds", [])
print(m[0]["type"] + " " + m[0]["unit"] if m else "none")')
[ "$meta" = "histogram seconds" ] ||
	fail "metadata of fiberd_job_run_seconds: '$meta', want 'histogram seconds' (OpenMetrics)"
echo "$me: PASS: fiberd_build_info{version=\"$version\"} 1, process_start_time_seconds, and OpenMetrics metadata (histogram, seconds)"

stop "$prom_pid"
prom_pid=
stop "$fiberd_pid"
fiberd_pid=
echo "$me: ok"
