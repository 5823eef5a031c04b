# shellcheck shell=bash
# tests/prometheus-pkg.sh — sourced by tests/promtool.sh and tests/prometheus.sh: the
# binaries of Debian's prometheus package (prometheus, promtool) without installing it.
#
# Installing the package would also enable and start a system Prometheus (its postinst
# starts prometheus.service, listening on every address at :9090) on any machine with
# systemd; a test run must not leave a server behind. So a binary on PATH is used as
# is, else the package is fetched with `apt-get download` (no root needed) into
# BUILD_DIR/prometheus-pkg/ and unpacked there with `dpkg-deb -x`, once per build tree.
# Both binaries are Go programs that need nothing else of the package to run.
#
# prometheus_pkg_bin NAME BUILD_DIR: print the path of NAME (prometheus or promtool).
# Status 1, with the reason on stderr, when it is not on PATH and the package cannot be
# downloaded (no package source: the caller skips); 2 when the package is broken (the
# caller fails).
prometheus_pkg_bin() {
	local name=$1 build=$2 dir bin deb
	bin=$(command -v "$name" || true)
	if [ -n "$bin" ]; then
		echo "$bin"
		return 0
	fi
	dir="$build/prometheus-pkg"
	bin="$dir/usr/bin/$name"
	if [ ! -x "$bin" ]; then
		mkdir -p "$dir"
		if ! (cd "$dir" && apt-get download -qq prometheus >/dev/null 2>&1); then
			echo "$name is not installed and the prometheus package cannot be downloaded (apt-get download prometheus)" >&2
			return 1
		fi
		deb=$(find "$dir" -maxdepth 1 -name 'prometheus_*.deb' | head -n 1)
		if [ -z "$deb" ] || ! dpkg-deb -x "$deb" "$dir"; then
			echo "cannot unpack the prometheus package in $dir" >&2
			return 2
		fi
	fi
	[ -x "$bin" ] || {
		echo "the prometheus package holds no $name" >&2
		return 2
	}
	echo "$bin"
}
