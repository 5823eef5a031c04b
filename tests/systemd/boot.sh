#!/bin/bash
# tests/systemd/boot.sh — `systemctl start fiberd` for real: boot systemd as PID 1 in a
# container (systemd-nspawn), install fiberd into it with `make install DESTDIR=`, and
# check what a user meets: socket activation, Type=notify readiness, a job submitted
# with fiberctl, the journal, a clean stop. Recipe: shared/recipes/systemd-in-container.md.
#
# Needs root. The container's root file system is built once with debootstrap and cached
# in $FIBERD_BOOT_ROOT (default /var/tmp/fiberd-root); each run boots it in a few seconds.
# Every step is bounded in time, and the container is stopped on any exit. Exit status:
# 0 every check passed, 1 a check failed, 77 skipped (not root).
set -euo pipefail

root=${FIBERD_BOOT_ROOT:-/var/tmp/fiberd-root}
nspawn_pid=
mounted=

if [ "$(id -u)" -ne 0 ]; then
	echo "check-systemd-boot: SKIP: needs root (debootstrap, systemd-nspawn)" >&2
	exit 77
fi
for tool in debootstrap systemd-nspawn nsenter; do
	command -v "$tool" >/dev/null ||
		{ echo "check-systemd-boot: $tool missing (make deps-systemd-boot)" >&2; exit 69; }
done

cleanup() {
	if [ -n "$nspawn_pid" ] && kill -0 "$nspawn_pid" 2>/dev/null; then
		kill "$nspawn_pid" 2>/dev/null || true
		timeout 30 tail --pid="$nspawn_pid" -f /dev/null || kill -9 "$nspawn_pid" 2>/dev/null || true
	fi
	if [ -n "$mounted" ]; then
		umount /run/systemd/nspawn 2>/dev/null || true
	fi
}
trap cleanup EXIT

failed=0
step() { # step NAME COMMAND...: run a check, print PASS or FAIL with its output
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		echo "check-systemd-boot: PASS: $name"
		[ -z "${FIBERD_BOOT_VERBOSE:-}" ] || printf '%s\n' "$out" | sed 's/^/    /'
	else
		echo "check-systemd-boot: FAIL: $name"
		printf '%s\n' "$out" | sed 's/^/    /'
		failed=1
	fi
}

if [ ! -e "$root/.fiberd-ready" ]; then
	echo "check-systemd-boot: building the container root in $root (once; a few minutes)"
	rm -rf "$root"
	timeout 1200 debootstrap --variant=minbase \
		--include=systemd,systemd-sysv,dbus,libmsgpackc2,libnuma1,libsystemd0,libjansson4,libinih1,libssl3 \
		bookworm "$root" >/dev/null
	touch "$root/.fiberd-ready"
fi

# The tree's build, installed as a user would: binaries, plugins, units, sysctl drop-in.
make --no-print-directory -s install DESTDIR="$root" PREFIX=/usr/local >/dev/null

mkdir -p /run/systemd/nspawn
if ! mountpoint -q /run/systemd/nspawn; then
	mount -t tmpfs tmpfs /run/systemd/nspawn
	mounted=1
fi
# --register=no and --keep-unit: there is no system bus on the host.
systemd-nspawn -D "$root" --register=no --keep-unit --boot -q >/dev/null 2>&1 &
nspawn_pid=$!

init=
for _ in $(seq 300); do # the container's PID 1: nspawn's child, or its grandchild
	init=$(pgrep -P "$nspawn_pid" -x systemd | head -n1 || true)
	if [ -z "$init" ]; then
		child=$(pgrep -P "$nspawn_pid" | head -n1 || true)
		[ -n "$child" ] && init=$(pgrep -P "$child" -x systemd | head -n1 || true)
	fi
	[ -n "$init" ] && break
	sleep 0.1
done
[ -n "$init" ] || { echo "check-systemd-boot: FAIL: the container's systemd did not start" >&2; exit 1; }

in_ct() { timeout 60 nsenter --target "$init" --all "$@"; }

state=
for _ in $(seq 120); do # until its manager answers on the bus, then until boot is done
	state=$(in_ct systemctl is-system-running --wait 2>/dev/null || true)
	[ -n "$state" ] && break
	sleep 0.5
done
case $state in
running | degraded) echo "check-systemd-boot: PASS: container booted ($state)" ;;
*) echo "check-systemd-boot: FAIL: container state '$state'" >&2; exit 1 ;;
esac

in_ct systemctl daemon-reload
step "fiberd.socket starts and listens on /run/fiberd.sock" \
	in_ct sh -c 'systemctl start fiberd.socket && systemctl is-active fiberd.socket && test -S /run/fiberd.sock'
step "fiberd.service is not running before the first client" \
	in_ct sh -c '! systemctl is-active --quiet fiberd.service'
step "a fiberctl call through the socket activates fiberd and a job runs" \
	in_ct sh -c 'out=$(/usr/local/bin/fiberctl submit sha256 path=/etc/hostname --wait) &&
		echo "$out" && echo "$out" | grep -q "$(sha256sum /etc/hostname | cut -c1-64)"'
step "fiberd.service is active, readiness came through sd_notify (Type=notify)" \
	in_ct sh -c 'systemctl is-active fiberd.service &&
		test "$(systemctl show -p Type --value fiberd.service)" = notify &&
		systemctl show -p StatusText --value fiberd.service | grep .'
step "this boot's journal has fiberd's ready line (socket from systemd)" \
	in_ct sh -c 'journalctl -b -u fiberd.service --no-pager | grep "ready on systemd.s socket /run/fiberd.sock"'
step "systemctl stop fiberd: a clean exit" \
	in_ct sh -c 'systemctl stop fiberd.service fiberd.socket &&
		test "$(systemctl show -p Result --value fiberd.service)" = success &&
		test "$(systemctl show -p ExecMainStatus --value fiberd.service)" = 0'
step "systemctl start fiberd (the service directly) reaches active" \
	in_ct sh -c 'systemctl start fiberd.service && systemctl is-active fiberd.service &&
		/usr/local/bin/fiberctl stats >/dev/null && systemctl stop fiberd.service fiberd.socket &&
		test "$(systemctl show -p Result --value fiberd.service)" = success'

if [ "$failed" -ne 0 ]; then
	in_ct journalctl -b -u fiberd.service --no-pager | tail -n 40 | sed 's/^/    journal: /' || true
	echo "check-systemd-boot: FAILED"
	exit 1
fi
echo "check-systemd-boot: PASS"
