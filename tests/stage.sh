# tests/stage.sh — sourced by the tests that build against an installed fiberd
# (clientlib.sh, plugin-pc.sh): `stage_install SCRATCH` runs `make install DESTDIR=` into
# SCRATCH/root (emptied first) with PREFIX=$prefix, and sets $scratch (made absolute) and
# $root. The caller defines $prefix and fail().
stage_install() {
	scratch=$1
	mkdir -p "$scratch"
	scratch=$(cd "$scratch" && pwd)
	root=$scratch/root
	rm -rf "$root"
	make --no-print-directory -s install DESTDIR="$root" PREFIX="$prefix" >"$scratch/make.log" 2>&1 ||
		{ sed 's/^/    /' "$scratch/make.log" >&2; fail "make install failed"; }
}
