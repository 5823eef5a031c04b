#!/usr/bin/env bash
# tests/install.sh — `make check-install`: the packaging round trip.
#
#   1. `make install DESTDIR=<scratch>` puts every file where docs/operations.md says;
#   2. `make uninstall DESTDIR=<scratch>` leaves no file behind (only empty directories
#      that other packages own on a real system: bin/, lib/systemd/system/, ...);
#   3. an operator's edited config file survives uninstall (it is theirs now);
#   4. installed for PREFIX=/usr, the config file and the units name /usr's paths (the
#      committed files name /usr/local): plugin_dir = /usr/lib/fiberd/plugins, the same
#      ExecStart as the system units, the user units in /usr/lib/systemd/user;
#   5. `make dist` gives fiberd-<version>.tar.gz holding the tree under fiberd-<version>/.
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
	$prefix/lib/systemd/user/fiberd.service
	$prefix/lib/systemd/user/fiberd.socket
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

# The Python package: where Debian's python3 looks for PREFIX=/usr/local, importable from
# the staged tree alone (the source tree off sys.path), at fiberd's version.
site=$(cd "$root" && find . -path '*/dist-packages/fiberd/__init__.py' | sed 's|^\.||; s|/fiberd/__init__.py$||')
[ -n "$site" ] || fail "make install did not install the Python package fiberd"
case $site in $prefix/lib/python3.*/dist-packages) ;; *) fail "the Python package is in $site, not $prefix/lib/python3.X/dist-packages" ;; esac
version=$(sed -n 's/^#define FIBERD_VERSION "\(.*\)"/\1/p' ipc/protocol.h)
got=$(cd / && PYTHONPATH=$root$site PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -c '
import importlib.metadata, sys, fiberd, fiberd.aio
assert fiberd.__file__.startswith(sys.argv[1]), fiberd.__file__
print(fiberd.__version__, importlib.metadata.version("fiberd"))' "$root") ||
	fail "python3 -c 'import fiberd, fiberd.aio' from the staged $site failed"
[ "$got" = "$version $version" ] || fail "the staged fiberd package says '$got', not $version (module, metadata)"
echo "$me: install: python3 imports fiberd $version (and fiberd.aio) from $site"

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

# Another PREFIX: the files that name paths are rewritten for it. install-config and
# install-units build nothing, so the tree's fiberd keeps its own PREFIX.
usr=$scratch/usr-root
rm -rf "$usr"
make --no-print-directory -s install-config install-units DESTDIR="$usr" PREFIX=/usr \
	>"$scratch/make.log" 2>&1 || { sed 's/^/    /' "$scratch/make.log" >&2; fail "make install-config install-units PREFIX=/usr failed"; }
conf=$usr/etc/fiberd/fiberd.conf
grep -qx '#plugin_dir = /usr/lib/fiberd/plugins' "$conf" ||
	fail "PREFIX=/usr: $conf does not name plugin_dir = /usr/lib/fiberd/plugins: $(grep plugin_dir "$conf")"
! grep -n /usr/local "$conf" || fail "PREFIX=/usr: $conf still names /usr/local (above)"
for u in system/fiberd.service user/fiberd.service; do
	grep -qx 'ExecStart=/usr/bin/fiberd .*--plugin-dir /usr/lib/fiberd/plugins' "$usr/usr/lib/systemd/$u" ||
		fail "PREFIX=/usr: /usr/lib/systemd/$u: $(grep ExecStart "$usr/usr/lib/systemd/$u")"
done
grep -qx 'ListenStream=%t/fiberd.sock' "$usr/usr/lib/systemd/user/fiberd.socket" ||
	fail "PREFIX=/usr: the user socket is not %t/fiberd.sock (fiberd --user's default)"
make --no-print-directory -s uninstall-config uninstall-daemon DESTDIR="$usr" PREFIX=/usr \
	>"$scratch/make.log" 2>&1 || fail "make uninstall PREFIX=/usr failed"
left=$(cd "$usr" && find . -type f)
[ -z "$left" ] || fail "PREFIX=/usr: uninstall left files behind (the config no longer matches what install wrote?):
$left"
echo "$me: PREFIX=/usr: fiberd.conf and the units name /usr's paths; uninstall takes them back"

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
