#!/usr/bin/env bash
# tests/install.sh — `make check-install`: the packaging round trip.
#
#   1. `make install DESTDIR=<scratch>` puts every file where docs/operations.md says;
#   2. `make uninstall DESTDIR=<scratch>` leaves no file behind (only empty directories
#      that other packages own on a real system: bin/, lib/systemd/system/, ...);
#   3. an operator's edited config file survives uninstall (it is theirs now);
#   4. `make dist` gives fiberd-<version>.tar.gz holding the tree under fiberd-<version>/.
# Each step names what it expected when it fails. Usage: tests/install.sh SCRATCH_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
me=check-install
scratch=${1:?usage: tests/install.sh SCRATCH_DIR}
root=$(mkdir -p "$scratch" && cd "$scratch" && pwd)/root
prefix=/usr/local
fail() { echo "$me: FAIL: $*" >&2; exit 1; }
mk() { make --no-print-directory -s "$@" DESTDIR="$root" PREFIX=$prefix >"$scratch/make.log" 2>&1 ||
	{ sed 's/^/    /' "$scratch/make.log" >&2; fail "make $* failed"; }; }

rm -rf "$root"
mk install
expected=(
	$prefix/bin/fiberd
	$prefix/bin/fiberctl
	$prefix/lib/fiberd/plugins/echo.so
	$prefix/lib/fiberd/plugins/sha256.so
	$prefix/include/fiberd/plugin.h
	$prefix/lib/pkgconfig/fiberd-plugin.pc
	$prefix/lib/systemd/system/fiberd.service
	$prefix/lib/systemd/system/fiberd.socket
	$prefix/lib/systemd/system/fiberd-metrics.socket
	$prefix/lib/sysctl.d/90-fiberd.conf
)
# more rows join as the tree installs more (tests/install.d/*.list: one path a line)
for f in tests/install.d/*.list; do
	[ -e "$f" ] || continue
	while read -r p; do
		case $p in '' | '#'*) continue ;; esac
		expected+=("${p//@PREFIX@/$prefix}")
	done <"$f"
done
for p in "${expected[@]}"; do
	[ -f "$root$p" ] || fail "make install did not install $p"
done
echo "$me: install: ${#expected[@]} expected files present, $(find "$root" -type f | wc -l) in all"

mk uninstall
left=$(cd "$root" && find . -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left files behind:
$left"
for d in $prefix/lib/fiberd $prefix/include/fiberd; do
	[ ! -e "$root$d" ] || fail "make uninstall left the directory $d"
done
echo "$me: uninstall: no file left"

# An uninstall must not take what the operator changed: an edited fiberd.conf stays.
mk install
conf=$(cd "$root" && find . -path '*/fiberd/fiberd.conf' | head -1)
if [ -n "$conf" ]; then
	echo "[fiberd]" >>"$root/$conf"
	mk uninstall
	[ -f "$root/$conf" ] || fail "make uninstall removed the operator's edited ${conf#.}"
	rm -f "$root/$conf"
	echo "$me: uninstall: an edited ${conf#.} is kept"
else
	mk uninstall
fi

mk dist
version=$(sed -n 's/^#define FIBERD_VERSION "\(.*\)"/\1/p' ipc/protocol.h)
tarball=$(sed -n 's/^dist: //p' "$scratch/make.log" | tail -1)
[ "$(basename "$tarball")" = "fiberd-$version.tar.gz" ] || fail "make dist made '$tarball'"
list=$(tar tzf "$tarball")
for p in LICENSE Makefile README.md ipc/protocol.h daemon/main.c; do
	grep -qx "fiberd-$version/$p" <<<"$list" || fail "$tarball lacks fiberd-$version/$p"
done
echo "$me: dist: $tarball ($(wc -l <<<"$list") entries)"
echo "$me: ok"
