#!/bin/bash
# tests/systemd/boot.sh — `systemctl start fiberd` for real: boot systemd as PID 1 in a
# systemd-nspawn container, install the tree into it with `make install DESTDIR=`, and
# check what an administrator meets: the units load, start returns once fiberd sent
# READY=1, a job runs through fiberctl, the unit's `systemd-analyze security` exposure is
# 2.0 or less with every bundled plugin still working, jobs act with their submitter's
# rights, a non-root client gets in, `journalctl FIBERD_JOB=ID` finds a job's lines,
# reload applies each live key and a refused file fails `systemctl reload` (Status
# line, one journal line), the memory, sqlite and redis job stores (redis with the
# network drop-in; without it, the start and --check-config name it; started while
# Redis is down, it waits for it), stop is clean, the socket activates the service, the watchdog restarts
# a frozen fiberd, fiberd-metrics.socket serves /metrics to curl (and a scrape
# starts fiberd), and the per-user units run `fiberd --user` under a lingering user's
# manager (skipped, with the reason, when the container cannot start one). Recipe:
# shared/recipes/systemd-in-container.md.
#
# Needs root. The container's root file system is built once with debootstrap and cached
# in $FIBERD_BOOT_ROOT (default /var/tmp/fiberd-root); each later run boots it in seconds.
# The whole run stays under $FIBERD_BOOT_TIMEOUT seconds (default 1200, the first build
# included): every command gets at most the time left, each check at most 60 s. The
# container this script started is stopped on every exit (up to 30 s more). Exit status:
# 0 every check passed, or skipped (not root; the packages, debootstrap or systemd-nspawn
# cannot work here); 1 a check failed or the time ran out.
# The checks are sh scripts in single quotes: they expand their variables in the container.
# shellcheck disable=SC2016
set -euo pipefail

me=check-systemd-boot
root=${FIBERD_BOOT_ROOT:-/var/tmp/fiberd-root}
limit=${FIBERD_BOOT_TIMEOUT:-1200}
# Host tools: debootstrap; systemd-nspawn; nsenter and flock; pgrep.
host_debs="debootstrap systemd-container util-linux procps"
# In the container: systemd as init, the libraries `ldd` names for build/fiberd,
# build/fiberctl and build/plugins/*.so (libcrypto.so.3 is in libssl3), and curl, the
# scraper of the metrics checks.
ct_debs="systemd,systemd-sysv,dbus,libmsgpackc2,libnuma1,libsystemd0,libssl3,libjansson4,libinih1,libsqlite3-0,libhiredis0.14,libsmartcols1,liburing2,libmicrohttpd12,curl"
# Added to a root already built, with apt-get inside it (so a root other runs share is
# not rebuilt): redis-server, the fleet's job store for the redis mode's checks. Its own
# unit stays disabled: the checks start one on a port of their own.
ct_extra_debs="redis-server"
ct_path=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

start=$SECONDS
nspawn_pid=
mounted=
work=
failed=0

skip() {
	echo "$me: SKIP: $*"
	exit 0
}
die() {
	echo "$me: FAIL: $*"
	exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root (apt-get, debootstrap, systemd-nspawn)"
case $root in
/?*) ;;
*) die "FIBERD_BOOT_ROOT must be an absolute path other than / (got '$root')" ;;
esac

# left [N]: seconds left before the time limit, at most N. Used as $(left), so once none
# are left it signals the script itself (the TERM trap ends it, stopping the container).
left() {
	local n=$((limit - (SECONDS - start)))
	if [ "$n" -le 0 ]; then
		kill -TERM $$
		n=1
	fi
	if [ $# -gt 0 ] && [ "$1" -lt "$n" ]; then
		n=$1
	fi
	echo "$n"
}

cleanup() {
	local rc=$?
	if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
		# one SIGTERM: nspawn asks the container's systemd to power off
		kill "$nspawn_pid" 2>/dev/null || true
		if ! timeout 30 tail --pid="$nspawn_pid" -f /dev/null; then
			kill -9 "$nspawn_pid" 2>/dev/null || true
		fi
	fi
	if [ -n "$mounted" ]; then
		umount /run/systemd/nspawn 2>/dev/null || true
	fi
	if [ -n "$work" ]; then
		rm -rf "$work"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
on_term() {
	if [ $((SECONDS - start)) -ge "$limit" ]; then
		echo "$me: FAIL: over the time limit of ${limit} s (FIBERD_BOOT_TIMEOUT)"
	else
		echo "$me: FAIL: terminated"
	fi
	exit 1
}
trap on_term TERM

cd "$(dirname "$0")/../.."
work=$(mktemp -d /tmp/fiberd-boot.XXXXXX)

# ---- host packages --------------------------------------------------------------------
missing=
for p in $host_debs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "$me: installing$missing"
	# shellcheck disable=SC2086 # one word per package
	if ! { DEBIAN_FRONTEND=noninteractive timeout "$(left 600)" apt-get update -qq &&
		DEBIAN_FRONTEND=noninteractive timeout "$(left 600)" \
			apt-get install -y -qq --no-install-recommends $missing; } >"$work/apt.log" 2>&1; then
		tail -n 20 "$work/apt.log" | sed 's/^/    /'
		skip "cannot install$missing with apt-get here"
	fi
fi

# One run at a time per root file system: nspawn would refuse a second boot of it.
exec 9>"$root.lock"
flock -w "$(left 300)" 9 || die "another run holds $root.lock"

# ---- the container's root file system, built once -------------------------------------
# .fiberd-ready holds the package list it was built with; a different list rebuilds it.
if [ "$(cat "$root/.fiberd-ready" 2>/dev/null)" != "$ct_debs" ]; then
	echo "$me: building the container root in $root (once; a few minutes)"
	rm -rf "$root.new"
	if ! timeout "$(left)" debootstrap --variant=minbase --include="$ct_debs" \
		bookworm "$root.new" >"$work/debootstrap.log" 2>&1; then
		tail -n 20 "$work/debootstrap.log" | sed 's/^/    /'
		rm -rf "$root.new"
		! grep -q "Couldn't find these debs" "$work/debootstrap.log" ||
			die "a package in ct_debs is not in bookworm"
		skip "debootstrap cannot build a bookworm root here (log above)"
	fi
	echo "$ct_debs" >"$root.new/.fiberd-ready"
	rm -rf "$root"
	mv "$root.new" "$root"
fi
extra_missing=
for p in $ct_extra_debs; do
	chroot "$root" dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		extra_missing="$extra_missing $p"
done
if [ -n "$extra_missing" ]; then
	echo "$me: adding$extra_missing to the container root"
	cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
	# shellcheck disable=SC2086 # one word per package
	if ! { timeout "$(left 600)" chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		timeout "$(left 600)" chroot "$root" env DEBIAN_FRONTEND=noninteractive \
			apt-get install -y -qq --no-install-recommends $extra_missing; } >"$work/apt-ct.log" 2>&1; then
		tail -n 20 "$work/apt-ct.log" | sed 's/^/    /'
		die "cannot install$extra_missing in the container root"
	fi
fi
# never started at boot: the container shares the host's network, and its port
systemctl --root="$root" disable redis-server.service >/dev/null 2>&1 || true
echo "$me: PASS: container root $root ready ($((SECONDS - start)) s)"

# ---- the tree, installed the way a user installs it -----------------------------------
# Drop what earlier runs installed (a plugin removed from the tree would stay loaded) and
# any enablement they left behind, so every boot starts from the same state.
rm -rf "$root/usr/local/lib/fiberd" "$root/usr/local/lib/systemd/system/fiberd."* \
	"$root/usr/local/lib/systemd/system/fiberd-metrics."* \
	"$root/usr/local/lib/systemd/user/fiberd."*
rm -f "$root"/etc/systemd/system/*.wants/fiberd.* "$root"/etc/systemd/system/*.wants/fiberd-metrics.* \
	"$root/var/lib/systemd/linger/fiberd-boot-user" "$root/etc/fiberd/fiberd.conf"
rm -rf "$root/etc/systemd/system/fiberd.service.d" "$root/var/lib/private/fiberd"
if ! timeout "$(left)" make --no-print-directory -s install DESTDIR="$root" PREFIX=/usr/local \
	>"$work/install.log" 2>&1; then
	sed 's/^/    /' "$work/install.log"
	die "make install DESTDIR=$root PREFIX=/usr/local"
fi
if out=$(chroot "$root" sh -c 'ldd /usr/local/bin/fiberd /usr/local/bin/fiberctl \
	/usr/local/lib/fiberd/plugins/*.so' 2>&1) && ! grep -q 'not found' <<<"$out"; then
	echo "$me: PASS: make install DESTDIR=: every library fiberd, fiberctl and the plugins need is in the container"
else
	printf '%s\n' "$out" | sed 's/^/    /'
	die "libraries missing in the container (add their packages to ct_debs)"
fi

# ---- boot -----------------------------------------------------------------------------
mkdir -p /run/systemd/nspawn
if ! mountpoint -q /run/systemd/nspawn; then # nspawn wants a tmpfs there on these machines
	mount -t tmpfs tmpfs /run/systemd/nspawn || skip "cannot mount a tmpfs on /run/systemd/nspawn"
	mounted=1
fi
# --register=no and --keep-unit: there is no system bus on the host.
systemd-nspawn -D "$root" --register=no --keep-unit --boot -q \
	</dev/null >"$work/console.log" 2>&1 9>&- &
nspawn_pid=$!

# The container's PID 1: nspawn's child named systemd, or (recipe) that child's child.
init=
deadline=$((SECONDS + $(left 60)))
while [ -z "$init" ] && [ "$SECONDS" -lt "$deadline" ]; do
	if ! kill -0 "$nspawn_pid" 2>/dev/null; then
		tail -n 20 "$work/console.log" | sed 's/^/    /'
		nspawn_pid=
		skip "systemd-nspawn cannot boot a container here (its output above)"
	fi
	for child in $(pgrep -P "$nspawn_pid" || true); do
		if [ "$(cat "/proc/$child/comm" 2>/dev/null)" = systemd ]; then
			init=$child
		else
			init=$(pgrep -P "$child" -x systemd | head -n 1 || true)
		fi
		[ -z "$init" ] || break
	done
	[ -n "$init" ] || sleep 0.1
done
[ -n "$init" ] || die "no systemd came up inside the container within 60 s"

# in_ct CMD...: run CMD inside the container, with a clean environment, for at most 60 s.
in_ct() {
	timeout -k 5 "$(left 60)" nsenter --target "$init" --all \
		env -i PATH="$ct_path" LANG=C.UTF-8 SYSTEMD_PAGER= SYSTEMD_COLORS=0 "$@"
}

state=
deadline=$((SECONDS + $(left 120)))
# 'offline' also answers while PID 1 is still starting (its bus is not up yet, seen as the
# first answer on this machine kind): only an 'offline' that lasts 15 s ends the wait
offline_final=$((SECONDS + 15))
while [ "$SECONDS" -lt "$deadline" ]; do # until its manager answers, then until boot ends
	state=$(in_ct systemctl is-system-running --wait 2>/dev/null || true)
	case $state in
	running | degraded | maintenance | stopping) break ;;
	offline) [ "$SECONDS" -lt "$offline_final" ] || break ;;
	esac
	sleep 0.2
done
case $state in
running) echo "$me: PASS: the container booted (systemd: running)" ;;
degraded)
	echo "$me: PASS: the container booted (systemd: degraded; fiberd is not part of boot)"
	in_ct systemctl --failed --no-legend | sed 's/^/    failed: /' || true
	;;
*)
	tail -n 20 "$work/console.log" | sed 's/^/    /'
	die "the container did not finish booting (systemd: '${state:-no answer}')"
	;;
esac

# ---- the checks ------------------------------------------------------------------------
# Each check is a `sh -e` script run inside the container; $1... are its arguments. The
# prelude's helpers: prop UNIT PROPERTY; journal PID PATTERN waits up to 5 s for a line of
# that process in this boot's journal (the journal may lag behind its exit).
prelude='
prop() { systemctl show -p "$2" --value "$1"; }
active() { # active UNIT: waits up to 5 s for ActiveState=active
	i=0
	until [ "$(prop "$1" ActiveState)" = active ]; do
		[ $i -lt 50 ] || { systemctl status --no-pager "$1"; return 1; }
		sleep 0.1; i=$((i + 1))
	done
}
journal() {
	i=0
	while [ $i -lt 50 ]; do
		journalctl -b "_PID=$1" -o cat --no-pager | grep -- "$2" && return 0
		sleep 0.1; i=$((i + 1))
	done
	echo "no journal line matching \"$2\" from pid $1; its last lines:"
	journalctl -b "_PID=$1" -o cat --no-pager | tail -n 20
	return 1
}
'
# check NAME SCRIPT [ARGS...]: PASS or FAIL with the script's output.
check() {
	local name=$1 script=$2 out
	shift 2
	if out=$(in_ct sh -ec "$prelude$script" sh "$@" 2>&1); then
		echo "$me: PASS: $name"
		[ -z "${FIBERD_BOOT_VERBOSE:-}" ] || printf '%s\n' "$out" | sed 's/^/    /'
	else
		[ $? -ne 124 ] || out="$out${out:+$'\n'}(timed out)"
		echo "$me: FAIL: $name"
		printf '%s\n' "$out" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
}
main_pid() { in_ct systemctl show -p MainPID --value fiberd.service; }

check "systemctl daemon-reload: fiberd.service, fiberd.socket and fiberd-metrics.socket load from /usr/local/lib/systemd/system" '
	systemctl daemon-reload
	for u in fiberd.service fiberd.socket fiberd-metrics.socket; do
		test "$(prop $u LoadState)" = loaded
		test "$(prop $u FragmentPath)" = /usr/local/lib/systemd/system/$u
	done
	test "$(prop fiberd.service ActiveState)" = inactive
	test "$(prop fiberd-metrics.socket UnitFileState)" = disabled'

check "systemctl start fiberd: returns 0, fiberd is active (running)" '
	systemctl start fiberd
	test "$(systemctl is-active fiberd)" = active
	test "$(prop fiberd.service SubState)" = running
	test "$(prop fiberd.service NRestarts)" = 0'
pid=$(main_pid) || die "systemctl show -p MainPID fiberd.service"

# Type=notify: the unit leaves "activating" only on READY=1, and STATUS= lines come the
# same way; the ready log line comes right before fiberd sends READY=1.
check "READY=1 came through sd_notify (Type=notify; STATUS= is fiberd's)" '
	test "$(prop fiberd.service Type)" = notify
	test "$(prop fiberd.service ActiveState)" = active
	prop fiberd.service StatusText | grep "job workers in"'
check "systemctl status fiberd: active (running), with fiberd's Status line" '
	out=$(systemctl status --no-pager --lines=0 fiberd)
	echo "$out"
	echo "$out" | grep -q "Active: active (running)"
	echo "$out" | grep -q "Status: \".*job workers in"
	echo "$out" | grep -q "TriggeredBy: .*fiberd.socket"'
check "journalctl: fiberd (pid $pid) logged its ready line, on systemd's socket" '
	journal "$1" "^fiberd .* ready on systemd.s socket /run/fiberd.sock: .*plugins from /usr/local/lib/fiberd/plugins"' "$pid"

check "fiberctl submit sha256, wait, result: the digest and size match sha256sum and stat" '
	f=/usr/local/bin/fiberd
	id=$(fiberctl submit sha256 path=$f)
	echo "job $id"
	fiberctl wait --timeout 30s "$id"
	r=$(fiberctl --json result "$id")
	echo "$r"
	echo "$r" | grep -Eq "\"sha256\": ?\"$(sha256sum $f | cut -c1-64)\""
	echo "$r" | grep -Eq "\"bytes\": ?$(stat -c %s $f)([^0-9]|$)"'
check "systemd-analyze security fiberd.service: the hardened unit's exposure is 2.0 or less" '
	out=$(systemd-analyze security --no-pager fiberd.service)
	echo "$out" | grep -E "^✗" || true
	score=$(echo "$out" | sed -n "s/.*Overall exposure level for fiberd.service: \([0-9.]*\).*/\1/p")
	echo "exposure: $score"
	test -n "$score"
	awk -v s="$score" "BEGIN { exit !(s <= 2.0) }"'
check "the hardened unit runs as a dynamic user with only CAP_SETUID and CAP_SETGID" '
	pid=$(prop fiberd.service MainPID)
	test "$(stat -c %u /proc/$pid)" != 0
	grep -E "^CapBnd:" /proc/$pid/status
	test "$(sed -n "s/^CapBnd:[[:space:]]*//p" /proc/$pid/status)" = 00000000000000c0'
check "every bundled plugin works under the hardened unit" '
	for job in "echo x=1" "sleep ms=5" "spin ms=5" "skynet size=1000" "sha256 path=/usr/local/bin/fiberd"; do
		r=$(fiberctl --json submit $job --wait)
		echo "$r" | grep -Eq "\"state\": ?\"done\"" || { echo "$job: $r"; exit 1; }
	done'
check "echo runs inline on the server worker under the hardened unit ([jobs] run_inline), and its jobs end done" '
	p=$(fiberctl --json plugins)
	echo "$p" | sed "s/},{\"name\"/}\n{\"name\"/g" | grep -E "\"name\": ?\"echo\"" | grep -Eq "\"inline\": ?true" || { echo "$p"; exit 1; }
	r=$(fiberctl --json submit echo n=7 --wait)
	echo "$r" | grep -Eq "\"state\": ?\"done\"" || { echo "$r"; exit 1; }'
check "jobs act as their submitter: /etc/shadow refused, the user's own 0600 file and a passed /tmp file hashed" '
	d=/srv/fiberd-boot-check
	rm -rf $d /tmp/fiberd-boot-check
	mkdir -p $d
	echo "nobody only" > $d/own
	echo "in the client'"'"'s /tmp" > /tmp/fiberd-boot-check
	chown -R 65534:65534 $d /tmp/fiberd-boot-check
	chmod 700 $d; chmod 600 $d/own /tmp/fiberd-boot-check
	as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
	r=$(as_nobody fiberctl --json submit sha256 path=/etc/shadow --wait || true)
	echo "$r"
	echo "$r" | grep -q "\"PERMISSION_DENIED\""
	r=$(as_nobody fiberctl --json submit sha256 path=$d/own --wait)
	echo "$r" | grep -Eq "\"sha256\": ?\"$(sha256sum $d/own | cut -c1-64)\""
	r=$(as_nobody fiberctl --json submit sha256 path=@/tmp/fiberd-boot-check --wait)
	echo "$r" | grep -Eq "\"sha256\": ?\"$(sha256sum /tmp/fiberd-boot-check | cut -c1-64)\""
	rm -rf $d /tmp/fiberd-boot-check'
check "a non-root user reaches fiberd through /run/fiberd.sock and owns its job" '
	r=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
		fiberctl -s /run/fiberd.sock --json submit sleep ms=20 --wait)
	echo "$r"
	echo "$r" | grep -Eq "\"owner\": ?65534([^0-9]|$)"
	echo "$r" | grep -Eq "\"slept_ms\": ?20([^0-9]|$)"'

check "journalctl FIBERD_JOB=ID: a job's lines, with FIBERD_PLUGIN and FIBERD_OWNER (sd_journal_send)" '
	id=$(setpriv --reuid=65534 --regid=65534 --clear-groups fiberctl submit sha256 path=/nonexistent)
	fiberctl wait --timeout 30s "$id" || true
	i=0
	until journalctl -b FIBERD_JOB="$id" -o export --no-pager | grep -qx FIBERD_OWNER=65534; do
		[ $i -lt 50 ] || { journalctl -b FIBERD_JOB="$id" -o verbose --no-pager; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	journalctl -b FIBERD_JOB="$id" -o export --no-pager | grep -qx FIBERD_PLUGIN=sha256
	journalctl -b FIBERD_JOB="$id" -o export --no-pager | grep -qx FIBERD_CLASS=default
	journalctl -b FIBERD_JOB="$id" -o export --no-pager | grep -qx PRIORITY=5
	journalctl -b FIBERD_JOB="$id" -o export --no-pager | grep -qx _SYSTEMD_UNIT=fiberd.service
	journalctl -b FIBERD_JOB="$id" -o cat --no-pager | grep "^job $id plugin sha256: failed"'
check "systemctl reload fiberd: ExecReload= asks fiberd (fiberctl reload), the same process stays active" '
	systemctl reload fiberd
	test "$(prop fiberd.service MainPID)" = "$1"
	test "$(systemctl is-active fiberd)" = active
	journal "$1" "reload asked by uid 0: reloading configuration"
	journal "$1" "configuration reloaded: "
	kill -HUP "$1" # the signal still reloads, without an answer
	journal "$1" "SIGHUP: reloading configuration"' "$pid"

# Each live key of docs/configuration.md ("Signals"), changed by `systemctl reload` in
# /etc/fiberd/fiberd.conf, and its effect seen: a cap that holds a job queued (a bounded
# `fiberctl wait --timeout 1s` that must time out, exit 75), a refusal, the shares
# read back from stats, a job's journal lines there or not. The class must be there
# from the start (adding one needs a restart).
reload_prelude='
conf=/etc/fiberd/fiberd.conf
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
# conf LINES...: the file, then systemctl reload, which must succeed
conf() { printf "%s\n" "$@" >$conf; systemctl reload fiberd; }
state() { # state ID STATE: waits up to 5 s
	i=0
	until fiberctl --json status "$1" | grep -Eq "\"state\": ?\"$2\""; do
		[ $i -lt 50 ] || { fiberctl status "$1"; return 1; }
		sleep 0.1; i=$((i + 1))
	done
}
held() { # held ID: still queued after 1 s of waiting for it
	rc=0; fiberctl wait --timeout 1s "$1" >/dev/null || rc=$?
	[ $rc = 75 ] || { echo "job $1: wait exited $rc, not 75 (timed out)"; fiberctl status "$1"; return 1; }
	state "$1" queued
}
'
check "a [class.batch] in /etc/fiberd/fiberd.conf, systemctl restart: the class the reload checks change" "$reload_prelude"'
	printf "[class.batch]\nshares = 50\n" >$conf
	systemctl restart fiberd
	fiberctl stats | grep -E "^batch +50 "'
pid=$(main_pid)
check "systemctl reload applies [jobs] max_running: a second job waits while the first runs" "$reload_prelude"'
	conf "[class.batch]" "shares = 50" "[jobs]" "max_running = 1"
	a=$(fiberctl submit sleep ms=600000); b=$(fiberctl submit echo x=1)
	state $a running; held $b
	fiberctl cancel $a >/dev/null; fiberctl wait --timeout 10s $b'
check "systemctl reload applies the shares (read back from stats) and max_running of a class" "$reload_prelude"'
	conf "[class.batch]" "shares = 70" "max_running = 1"
	fiberctl stats | grep -E "^batch +70 "
	a=$(fiberctl submit sleep ms=600000 --class batch); b=$(fiberctl submit sleep ms=1 --class batch)
	c=$(fiberctl submit echo x=1)
	state $a running; fiberctl wait --timeout 10s $c; held $b
	fiberctl cancel $a >/dev/null; fiberctl wait --timeout 10s $b'
check "systemctl reload applies [plugin.sleep] max_running" "$reload_prelude"'
	conf "[class.batch]" "shares = 50" "[plugin.sleep]" "max_running = 1"
	a=$(fiberctl submit sleep ms=600000); b=$(fiberctl submit sleep ms=1)
	c=$(fiberctl submit echo x=1)
	state $a running; fiberctl wait --timeout 10s $c; held $b
	fiberctl cancel $a >/dev/null; fiberctl wait --timeout 10s $b'
check "systemctl reload applies admin_only of a class: uid 65534 refused, root served" "$reload_prelude"'
	conf "[class.batch]" "shares = 50" "admin_only = true"
	r=$(as_nobody fiberctl --json submit echo x=1 --class batch 2>&1 || true)
	echo "$r" | grep -q PERMISSION_DENIED
	fiberctl submit echo x=1 --class batch --wait >/dev/null'
check "systemctl reload applies max_running_per_user and max_queued_per_user (uid 65534)" "$reload_prelude"'
	conf "[class.batch]" "shares = 50" "[jobs]" "max_running_per_user = 1" "max_queued_per_user = 1"
	a=$(as_nobody fiberctl submit sleep ms=600000); b=$(as_nobody fiberctl submit sleep ms=1)
	state $a running; held $b
	r=$(as_nobody fiberctl --json submit echo x=1 2>&1 || true)
	echo "$r" | grep -q OVERLOADED
	fiberctl cancel $a >/dev/null; fiberctl wait --timeout 10s $b'
check "systemctl reload applies [ipc] max_message" "$reload_prelude"'
	conf "[class.batch]" "shares = 50" "[ipc]" "max_message = 4096"
	rc=0; out=$(fiberctl submit echo m=$(head -c 8000 /dev/zero | tr "\0" a) 2>&1) || rc=$?
	echo "$out"; test $rc = 76
	echo "$out" | grep -q "limit of 4096 bytes"
	fiberctl submit echo x=1 --wait >/dev/null'
check "systemctl reload applies log_jobs and log_level: the lines of a job go, then come back" "$reload_prelude"'
	pid=$(prop fiberd.service MainPID)
	conf "[fiberd]" "log_jobs = false" "[class.batch]" "shares = 50"
	a=$(fiberctl submit echo x=1 --wait | sed -n "s/^job \([0-9]*\).*/\1/p")
	conf "[fiberd]" "log_level = warning" "[class.batch]" "shares = 50"
	b=$(fiberctl submit echo x=2 --wait | sed -n "s/^job \([0-9]*\).*/\1/p")
	conf "[class.batch]" "shares = 50"
	c=$(fiberctl submit echo x=3 --wait | sed -n "s/^job \([0-9]*\).*/\1/p")
	echo "jobs $a (log_jobs = false) $b (log_level = warning) $c (defaults)"
	journal "$pid" "^job $c plugin echo: "
	if journalctl -b "_PID=$pid" -o cat --no-pager | grep -E "^job ($a|$b) plugin echo: "; then
		echo "a job logged with log_jobs = false or log_level = warning"; exit 1
	fi'

# A file fiberd refuses: systemctl reload fails, fiberd runs on as it was, the Status
# line names the error, and exactly one line in the unit's journal says it.
check "a broken file: systemctl reload exits non-zero, STATUS= names it, one journal line says it, fiberd keeps running" "$reload_prelude"'
	pid=$(prop fiberd.service MainPID)
	printf "[jobs]\nmax_running = 5\nbogus_key = 1\n" >$conf
	if systemctl reload fiberd; then echo "systemctl reload exited 0 for a broken file"; exit 1; fi
	test "$(prop fiberd.service MainPID)" = "$pid"
	test "$(systemctl is-active fiberd)" = active
	prop fiberd.service StatusText | grep "^reload failed.*: $conf:3: unknown key .bogus_key."
	i=0 # the ticker keeps it in the Status line
	until prop fiberd.service StatusText | grep "^reload failed (running on the previous configuration): $conf:3: .*job workers in"; do
		[ $i -lt 30 ] || exit 1
		sleep 0.1; i=$((i + 1))
	done
	systemctl status --no-pager --lines=0 fiberd | grep "Status: \"reload failed"
	journal "$pid" "^reload failed: $conf:3: unknown key .bogus_key. in section \[jobs\]; keeping the running configuration$"
	n=$(journalctl -b -u fiberd.service -o cat --no-pager | grep -c "bogus_key")
	test "$n" = 1 || { journalctl -b -u fiberd.service -o cat --no-pager | grep "bogus_key"; exit 1; }
	fiberctl submit echo x=1 --wait >/dev/null # it still serves
	conf "[class.batch]" "shares = 50"
	i=0
	until prop fiberd.service StatusText | grep -v "reload failed"; do
		[ $i -lt 30 ] || exit 1
		sleep 0.1; i=$((i + 1))
	done
	rm -f $conf'

# The job store (sqlite under StateDirectory=): a restart loses nothing. A finished job
# stays queryable, a running retry-safe one (sleep) runs again with attempt 1, a running
# one that is not (spin) ends cancelled, and ids go on from where they were.
check "systemctl restart fiberd: finished, running and retry-safe jobs all keep a state" '
	done_id=$(fiberctl submit echo x=1)
	fiberctl wait --timeout 30s "$done_id"
	sleep_id=$(fiberctl submit sleep ms=600000)
	spin_id=$(fiberctl submit spin ms=600000)
	i=0
	until fiberctl --json status "$sleep_id" | grep -Eq "\"state\": ?\"running\"" &&
		fiberctl --json status "$spin_id" | grep -Eq "\"state\": ?\"running\""; do
		[ $i -lt 50 ] || { echo "jobs $sleep_id $spin_id are not running after 5 s"; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	systemctl restart fiberd
	test "$(prop fiberd.service MainPID)" != "$1"
	test "$(systemctl is-active fiberd)" = active
	fiberctl --json status "$done_id" | grep -Eq "\"state\": ?\"done\""
	fiberctl --json status "$sleep_id" | grep -Eq "\"attempt\": ?1"
	fiberctl --json status "$sleep_id" | grep -Eq "\"state\": ?\"(queued|running)\""
	fiberctl --json status "$spin_id" | grep -Eq "\"state\": ?\"cancelled\""
	new_id=$(fiberctl submit echo x=2)
	test "$new_id" -gt "$spin_id"
	fiberctl cancel "$sleep_id"' "$pid"
pid=$(main_pid)

check "systemctl stop fiberd with a job running: cancelled, exit 0, Result=success" '
	id=$(fiberctl submit sleep ms=600000)
	i=0
	until fiberctl --json status "$id" | grep -Eq "\"state\": ?\"running\""; do
		[ $i -lt 50 ] || { echo "job $id is not running after 5 s"; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	systemctl stop fiberd
	test "$(prop fiberd.service ActiveState)" = inactive
	test "$(prop fiberd.service Result)" = success
	test "$(prop fiberd.service ExecMainCode)" = 1 # CLD_EXITED
	test "$(prop fiberd.service ExecMainStatus)" = 0
	journal "$1" "job $id plugin sleep: cancelled"
	journal "$1" "^fiberd stopped: "' "$pid"

# The job stores of docs/configuration.md, each from the installed units: memory (a
# restart forgets), sqlite (the default; a restart keeps), and redis, the fleet's, which
# needs the network drop-in: without it fiberd stops at start naming the drop-in and
# `fiberd --check-config` in the unit's sandbox warns; with it a job runs and its record
# is in Redis. Each ends with fiberd stopped and the file removed.
check "[store] backend = memory: a job runs, a restart forgets it" '
	systemctl reset-failed fiberd # the start limit: the checks above restarted it often
	printf "[store]\nbackend = memory\n" >/etc/fiberd/fiberd.conf
	systemctl start fiberd
	journal "$(prop fiberd.service MainPID)" "^job store: memory$"
	id=$(fiberctl submit echo x=1); fiberctl wait --timeout 10s "$id"
	fiberctl list | grep -E "^ *$id +echo .*done"
	systemctl restart fiberd
	rc=0; fiberctl status "$id" || rc=$?
	test $rc = 66 # NOT_FOUND
	systemctl stop fiberd; rm /etc/fiberd/fiberd.conf'
check "[store] backend = sqlite: a job runs, a restart keeps it" '
	systemctl reset-failed fiberd
	printf "[store]\nbackend = sqlite\n" >/etc/fiberd/fiberd.conf
	systemctl start fiberd
	journal "$(prop fiberd.service MainPID)" "^job store: sqlite at /var/lib/fiberd/jobs.db$"
	id=$(fiberctl submit echo x=1); fiberctl wait --timeout 10s "$id"
	systemctl restart fiberd
	fiberctl --json status "$id" | grep -Eq "\"state\": ?\"done\""
	fiberctl list | grep -E "^ *$id +echo .*done"
	systemctl stop fiberd; rm /etc/fiberd/fiberd.conf'
redis_port=$((20000 + RANDOM % 20000))
check "[store] backend = redis (127.0.0.1:$redis_port) without the network drop-in: start fails naming it; --check-config in the sandbox warns" '
	systemd-run -q --unit=fiberd-boot-redis -p DynamicUser=yes /usr/bin/redis-server \
		--port "$1" --bind 127.0.0.1 --save "" --appendonly no
	i=0
	until redis-cli -p "$1" ping 2>/dev/null | grep -q PONG; do
		[ $i -lt 50 ] || { systemctl status --no-pager fiberd-boot-redis; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	printf "[store]\nbackend = redis\nredis = 127.0.0.1:%s\n" "$1" >/etc/fiberd/fiberd.conf
	systemctl reset-failed fiberd
	if systemctl start fiberd; then echo "fiberd started without the network"; exit 1; fi
	i=0
	until journalctl -b -u fiberd.service -o cat --no-pager |
		grep "cannot connect to redis at 127.0.0.1:$1: .*fiberd.service.d/network.conf"; do
		[ $i -lt 50 ] || { journalctl -b -u fiberd.service -o cat --no-pager | tail; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	systemctl stop fiberd; systemctl reset-failed fiberd
	out=$(systemd-run -q --wait --pipe -p PrivateNetwork=yes -p RestrictAddressFamilies=AF_UNIX \
		/usr/local/bin/fiberd --check-config 2>&1 >/dev/null)
	echo "$out"
	echo "$out" | grep "warning: \[store\] redis: cannot connect to redis at 127.0.0.1:$1: .*RestrictAddressFamilies=AF_UNIX.*/usr/local/share/doc/fiberd/fiberd.service.d/network.conf"
	out=$(fiberd --check-config 2>&1 >/dev/null) # outside the sandbox: reachable
	if echo "$out" | grep "warning: \[store\]"; then exit 1; fi' "$redis_port"
check "[store] backend = redis with the network drop-in: fiberd starts, a job runs through the fleet's store, a job.run on this host off the stream, exposure still 2.0 or less" '
	install -D -m 644 /usr/local/share/doc/fiberd/fiberd.service.d/network.conf \
		/etc/systemd/system/fiberd.service.d/network.conf
	systemctl daemon-reload
	systemctl reset-failed fiberd
	systemctl start fiberd
	journal "$(prop fiberd.service MainPID)" "^job store: redis at 127.0.0.1:$1$"
	id=$(fiberctl submit sha256 path=/usr/local/bin/fiberd); fiberctl wait --timeout 30s "$id"
	fiberctl --json result "$id" | grep -Eq "\"sha256\": ?\"$(sha256sum /usr/local/bin/fiberd | cut -c1-64)\""
	fiberctl list | grep -E "^ *$id +sha256 .*done"
	redis-cli -p "$1" HGET "fiberd:job:$id" state | grep -x done
	# a job.run (submit --wait, no terminal) runs on this host, off the stream, written once
	entries=$(redis-cli -p "$1" XLEN fiberd:jobs)
	out=$(fiberctl submit --wait echo n=7 2>&1)
	echo "$out"
	run=$(echo "$out" | sed -n "s/^job \([0-9]*\) (echo): done$/\1/p")
	test -n "$run"
	redis-cli -p "$1" HGET "fiberd:job:$run" state | grep -x done
	test "$(redis-cli -p "$1" XLEN fiberd:jobs)" = "$entries"
	score=$(systemd-analyze security --no-pager fiberd.service |
		sed -n "s/.*Overall exposure level for fiberd.service: \([0-9.]*\).*/\1/p")
	echo "exposure with the drop-in: $score"
	awk -v s="$score" "BEGIN { exit !(s <= 2.0) }"
	systemctl stop fiberd' "$redis_port"
check "[store] backend = redis, started while Redis is down: fiberd waits for it (activating, STATUS= says so), then starts and runs a job" '
	systemctl stop fiberd-boot-redis
	systemctl reset-failed fiberd
	systemctl start --no-block fiberd
	i=0
	until prop fiberd.service StatusText | grep "^waiting for redis at 127.0.0.1:$1$"; do
		[ $i -lt 100 ] || { systemctl status --no-pager fiberd; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	test "$(prop fiberd.service ActiveState)" = activating
	pid=$(prop fiberd.service MainPID)
	journal "$pid" "cannot connect to redis at 127.0.0.1:$1: .*waiting for it before starting"
	systemd-run -q --unit=fiberd-boot-redis -p DynamicUser=yes /usr/bin/redis-server \
		--port "$1" --bind 127.0.0.1 --save "" --appendonly no
	i=0 # its tries back off to one every 5 s
	until [ "$(prop fiberd.service ActiveState)" = active ]; do
		[ $i -lt 150 ] || { systemctl status --no-pager fiberd; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	test "$(prop fiberd.service MainPID)" = "$pid" # the same process: it waited
	journal "$pid" "^redis at 127.0.0.1:$1 answers after "
	id=$(fiberctl submit echo x=1); fiberctl wait --timeout 30s "$id"
	systemctl stop fiberd' "$redis_port"
in_ct systemctl stop fiberd-boot-redis >/dev/null 2>&1 || true
in_ct sh -c 'rm -rf /etc/systemd/system/fiberd.service.d /etc/fiberd/fiberd.conf; systemctl daemon-reload'

# Socket activation, the way README.md says to set it up.
check "systemctl enable --now fiberd.socket: listening, fiberd.service not started" '
	systemctl stop fiberd.socket
	systemctl enable --now fiberd.socket
	test "$(systemctl is-active fiberd.socket)" = active
	test -S /run/fiberd.sock
	test "$(prop fiberd.service ActiveState)" = inactive'
check "the first fiberctl call starts fiberd.service through the socket" '
	fiberctl ping
	active fiberd.service # fiberd may answer a moment before systemd reads its READY=1
	test "$(prop fiberd.service MainPID)" != "$1"' "$pid"
pid=$(main_pid) || die "systemctl show -p MainPID fiberd.service"
check "journalctl: the socket-activated fiberd (pid $pid) logged its ready line" '
	journal "$1" "ready on systemd.s socket /run/fiberd.sock"' "$pid"

# The watchdog (WatchdogSec=, fiberd's WATCHDOG=1 from its server group): a frozen
# process stops the pings and systemd restarts it. A runtime drop-in shortens the
# interval and the abort timeout, so the wait stays a few seconds (bounded at 30 s).
check "WatchdogSec=10s: fiberd (pid $pid) pings from its server group" '
	test "$(prop fiberd.service WatchdogUSec)" = 10s
	journal "$1" "systemd watchdog: WATCHDOG=1 every 5000 ms from the server group"' "$pid"
check "SIGSTOP fiberd: the watchdog times out and systemd restarts it (MainPID changes, NRestarts grows)" '
	d=/run/systemd/system/fiberd.service.d
	mkdir -p $d
	printf "[Service]\nWatchdogSec=2s\nTimeoutAbortSec=2s\n" >$d/50-watchdog-test.conf
	systemctl daemon-reload
	systemctl restart fiberd
	active fiberd.service
	old=$(prop fiberd.service MainPID)
	n=$(prop fiberd.service NRestarts)
	fiberctl ping >/dev/null
	kill -STOP "$old"
	i=0
	until [ "$(prop fiberd.service MainPID)" != "$old" ] && [ "$(prop fiberd.service MainPID)" != 0 ] &&
		[ "$(prop fiberd.service NRestarts)" -gt "$n" ] && [ "$(prop fiberd.service ActiveState)" = active ]; do
		[ $i -lt 300 ] || { echo "not restarted 30 s after SIGSTOP"; systemctl status --no-pager fiberd; exit 1; }
		sleep 0.1; i=$((i + 1))
	done
	echo "pid $old -> $(prop fiberd.service MainPID), NRestarts $n -> $(prop fiberd.service NRestarts) after $((i / 10)) s"
	journalctl -b -u fiberd.service -o cat --no-pager | grep -i "watchdog timeout"
	fiberctl ping >/dev/null
	rm -f $d/50-watchdog-test.conf
	systemctl daemon-reload'
pid=$(main_pid) || die "systemctl show -p MainPID fiberd.service"

# The Prometheus scrape endpoint, the way docs/operations.md says to set it up: fiberd
# stopped (systemd starts no socket unit for a service that already runs), the socket
# unit enabled, fiberd started to take it; then, fiberd stopped, a scrape starts it.
check "systemctl stop fiberd; enable --now fiberd-metrics.socket; start fiberd: curl 127.0.0.1:9464/metrics serves fiberd_build_info" '
	systemctl stop fiberd
	systemctl enable --now fiberd-metrics.socket
	test "$(systemctl is-active fiberd-metrics.socket)" = active
	systemctl start fiberd
	pid=$(prop fiberd.service MainPID)
	journal "$pid" "^metrics: serving http://127.0.0.1:9464/metrics on systemd.s socket"
	fiberctl submit echo x=1 --wait >/dev/null
	out=$(curl -sS --fail --max-time 20 -D /tmp/fiberd-metrics.head http://127.0.0.1:9464/metrics)
	grep -i "^content-type: text/plain; version=0.0.4" /tmp/fiberd-metrics.head
	echo "$out" | grep "^fiberd_build_info{version=\"[0-9.]*\"} 1$"
	echo "$out" | grep -E "^fiberd_jobs_submitted_total\{plugin=\"echo\"\} [1-9]"
	echo "$out" | grep "^process_open_fds "
	out=$(curl -sS --fail --max-time 20 -H "Accept: application/openmetrics-text" \
		-D /tmp/fiberd-metrics.head http://127.0.0.1:9464/metrics)
	grep -i "^content-type: application/openmetrics-text; version=1.0.0" /tmp/fiberd-metrics.head
	echo "$out" | tail -n 1 | grep -x "# EOF"
	code=$(curl -s -o /dev/null -w "%{http_code}" --max-time 20 -X POST http://127.0.0.1:9464/metrics)
	test "$code" = 405
	rm -f /tmp/fiberd-metrics.head'
check "fiberd stopped: a scrape of fiberd-metrics.socket starts fiberd.service" '
	old=$(prop fiberd.service MainPID)
	systemctl stop fiberd
	test "$(prop fiberd.service ActiveState)" = inactive
	curl -sS --fail --max-time 20 http://127.0.0.1:9464/metrics | grep "^fiberd_build_info{"
	active fiberd.service
	test "$(prop fiberd.service MainPID)" != "$old"'
pid=$(main_pid) || die "systemctl show -p MainPID fiberd.service"

check "systemctl disable --now fiberd.socket fiberd-metrics.socket; stop fiberd: clean, socket file removed" '
	systemctl disable --now fiberd.socket fiberd-metrics.socket
	systemctl stop fiberd
	test "$(prop fiberd.service Result)" = success
	test "$(prop fiberd.service ExecMainStatus)" = 0
	test ! -e /run/fiberd.sock
	journal "$1" "^fiberd stopped: "' "$pid"

# The per-user units: a user with lingering gets a user manager (user@UID.service) at
# once; `systemctl --user enable --now fiberd.socket` as that user, then fiberctl --user.
# The minimal root has no pam_systemd (libpam-systemd), which gives a user manager its
# XDG_RUNTIME_DIR: without it user@.service exits at once ("$XDG_RUNTIME_DIR is not
# set"), so a runtime drop-in sets it.
ct_user=fiberd-boot-user
ct_uid=4242
if in_ct sh -ec '
	id -u '$ct_user' >/dev/null 2>&1 || useradd -m -u '$ct_uid' '$ct_user'
	rm -rf /home/'$ct_user'/.local/state/fiberd
	d=/run/systemd/system/user@.service.d
	mkdir -p $d
	printf "[Service]\nEnvironment=XDG_RUNTIME_DIR=/run/user/%%i\n" >$d/50-runtime-dir.conf
	systemctl daemon-reload
	loginctl enable-linger '$ct_user'
	i=0
	until [ -S /run/user/'$ct_uid'/systemd/private ]; do
		[ $i -lt 100 ] || { systemctl status --no-pager user@'$ct_uid'.service; exit 1; }
		sleep 0.1; i=$((i + 1))
	done' >"$work/linger.log" 2>&1; then
	user_prelude='
		as_user() {
			setpriv --reuid='$ct_uid' --regid='$ct_uid' --init-groups \
				env XDG_RUNTIME_DIR=/run/user/'$ct_uid' HOME=/home/'$ct_user' "$@"
		}
		conf=/etc/fiberd/fiberd.conf
		# uconf LINES...: the file, then systemctl --user reload (fiberctl --user reload)
		uconf() { printf "%s\n" "$@" >$conf; as_user systemctl --user reload fiberd; }
		echo_job() { # echo_job X: a job through the user fiberd, waited for; its id
			as_user fiberctl --user submit echo x=$1 --wait | sed -n "s/^job \([0-9]*\).*/\1/p"
		}'
	check "systemctl --user enable --now fiberd.socket: fiberd --user on \$XDG_RUNTIME_DIR/fiberd.sock (user units, $ct_user)" "$user_prelude"'
		as_user systemctl --user daemon-reload
		test "$(as_user systemctl --user show -p FragmentPath --value fiberd.service)" = \
			/usr/local/lib/systemd/user/fiberd.service
		as_user systemctl --user enable --now fiberd.socket
		test -S /run/user/'$ct_uid'/fiberd.sock
		test "$(stat -c %a /run/user/'$ct_uid'/fiberd.sock)" = 600
		r=$(as_user fiberctl --user --json submit echo x=1 --wait)
		echo "$r"
		echo "$r" | grep -Eq "\"state\": ?\"done\""
		echo "$r" | grep -Eq "\"owner\": ?'$ct_uid'([^0-9]|$)"
		test "$(as_user systemctl --user is-active fiberd.service)" = active
		test -f /home/'$ct_user'/.local/state/fiberd/jobs.db
		# another user cannot reach it (mode 0600)
		if setpriv --reuid=65534 --regid=65534 --clear-groups \
			fiberctl -s /run/user/'$ct_uid'/fiberd.sock ping; then
			echo "uid 65534 reached the fiberd of uid '$ct_uid'"; exit 1
		fi'
	check "systemctl --user reload fiberd runs fiberctl --user reload as $ct_user: log_level applied, a refused file fails the reload" "$user_prelude"'
		grep -qx "ExecReload=/usr/local/bin/fiberctl --user reload --quiet" \
			/usr/local/lib/systemd/user/fiberd.service
		pid=$(as_user systemctl --user show -p MainPID --value fiberd.service)
		# the file as it was afterwards (the system checks leave none)
		if [ -e $conf ]; then
			cp $conf /tmp/fiberd-user-conf.saved
			trap "cp /tmp/fiberd-user-conf.saved $conf" EXIT
		else
			trap "rm -f $conf" EXIT
		fi
		uconf "[fiberd]" "log_level = warning"
		journal "$pid" "^reload asked by uid '$ct_uid': reloading configuration"
		a=$(echo_job 1)
		uconf "# every key at its default"
		b=$(echo_job 2)
		echo "jobs $a (log_level = warning) $b (the default, info)"
		journal "$pid" "^job $b plugin echo: "
		if journalctl -b "_PID=$pid" -o cat --no-pager | grep -E "^job $a plugin echo: "; then
			echo "job $a logged with log_level = warning: the reload did not apply"; exit 1
		fi
		if uconf "[jobs]" "bogus = 1"; then
			echo "systemctl --user reload succeeded with a file fiberd refuses"; exit 1
		fi
		journal "$pid" "^reload failed: .*bogus"
		test "$(as_user systemctl --user is-active fiberd.service)" = active
		test "$(as_user systemctl --user show -p MainPID --value fiberd.service)" = "$pid"'
	check "systemctl --user disable --now fiberd.socket: the per-user fiberd stops, its socket goes" "$user_prelude"'
		as_user systemctl --user disable --now fiberd.socket
		as_user systemctl --user stop fiberd.service
		test ! -e /run/user/'$ct_uid'/fiberd.sock'
	in_ct loginctl disable-linger "$ct_user" >/dev/null 2>&1 || true
else
	sed 's/^/    /' "$work/linger.log"
	echo "$me: SKIP: the user units: no user manager came up for $ct_user (loginctl enable-linger) in this container; make check-systemd verifies them with systemd-analyze --user verify"
fi

if [ "$failed" -ne 0 ]; then
	echo "$me: this boot's journal for fiberd, last lines:"
	in_ct journalctl -b -u fiberd.service -u fiberd.socket -u fiberd-metrics.socket --no-pager |
		tail -n 40 |
		sed 's/^/    /' || true
	echo "$me: FAIL: $failed check(s) failed ($((SECONDS - start)) s)"
	exit 1
fi
echo "$me: PASS: every check passed ($((SECONDS - start)) s)"
