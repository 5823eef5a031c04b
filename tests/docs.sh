#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# docs.sh — `make check-docs`: the docs stay true (STYLE.md rule 17). Fails when
#
#   - README.md is longer than its budget (DOCS_README_BUDGET, 220 lines): it is an entry
#     point, the rest lives in docs/;
#   - a map names a file or folder that git does not track, or names one twice. The maps
#     are the README's folder map, between `<!-- tree map -->` and
#     `<!-- tree map (end) -->` (paths from the top of the tree), and docs/design.md's file
#     maps, one per folder, between `<!-- file map: FOLDER -->` and
#     `<!-- file map: FOLDER (end) -->` (paths relative to FOLDER). A map is a table; the
#     names are the `backticked` words of each row's first cell, a folder ending in "/";
#   - a top folder (scheduler/ ipc/ plugins/ daemon/ client/ systemd/ tests/) is missing
#     from the README's map;
#   - a tracked source file is missing from the maps: every *.c, *.h, *.S, *.sym and
#     build.mk of scheduler/ ipc/ plugins/ daemon/ client/, every file of systemd/, every
#     build.mk, every script (*.sh) and *.mk of tests/; any other file of tests/ must lie
#     in a folder the maps name;
#   - a tracked text file (sources, docs, man pages, tests; not the fuzz corpora) names a
#     tracker issue: the regex \b[Ii]ssues? [0-9]+\b. Say what the thing is instead.
#
# Usage: tests/docs.sh [DIR]       check the tree at DIR (default: this script's tree)
#        tests/docs.sh --self-test  build throw-away trees that break each rule and check
#                                   that each fails and a clean one passes
#                                   (DOCS_VERBOSE=1: one line per case)
# Needs bash, git and python3 (Debian's). Exit status: 0 clean, 1 problems, 2 usage.
set -euo pipefail

BUDGET=${DOCS_README_BUDGET:-220}

# check DIR: print one "check-docs: ..." line per problem, return 1 if there are any.
check() {
	python3 - "$1" "$BUDGET" <<'PY'
import os, re, subprocess, sys

root, budget = sys.argv[1], int(sys.argv[2])
problems = []
def bad(msg):
    problems.append(msg)

def git(*args):
    return subprocess.run(["git", "-C", root, *args], check=False,
                          capture_output=True, text=True)

tracked = set(git("ls-files", "-z").stdout.split("\0")) - {""}
folders = set()
for f in tracked:
    parts = f.split("/")[:-1]
    for i in range(1, len(parts) + 1):
        folders.add("/".join(parts[:i]) + "/")

def read(path):
    try:
        with open(os.path.join(root, path), encoding="utf-8") as fh:
            return fh.read().split("\n")
    except OSError:
        return None

# --- the README's budget
readme = read("README.md")
if readme is None:
    bad("README.md: missing")
    readme = []
else:
    n = len(readme) - (1 if readme and readme[-1] == "" else 0)
    if n > budget:
        bad(f"README.md: {n} lines, over its budget of {budget}: keep it an entry point, move the rest to docs/")

# --- the maps: (document, line number, name as a tree path)
names = []
TOKEN = re.compile(r"`([^`]+)`")

def read_map(doc, lines, start, base):
    """Rows from lines[start] up to the end marker; return the index after it or None."""
    i = start
    while i < len(lines):
        line = lines[i]
        if re.match(r"\s*<!-- (tree map|file map: [^ ]+) \(end\) -->", line):
            return i + 1
        if line.startswith("|") and not re.match(r"\|\s*-", line):
            cells = line.split("|")
            first = cells[1] if len(cells) > 1 else ""
            for tok in TOKEN.findall(first):
                names.append((doc, i + 1, base + tok.strip()))
        i += 1
    return None

start = next((i for i, l in enumerate(readme) if l.strip() == "<!-- tree map -->"), None)
if start is None:
    bad("README.md: no folder map (<!-- tree map --> ... <!-- tree map (end) -->)")
elif read_map("README.md", readme, start + 1, "") is None:
    bad("README.md: the folder map has no <!-- tree map (end) --> marker")
readme_names = [n for d, _, n in names if d == "README.md"]

design = read("docs/design.md") or []
mapped = {}
for i, line in enumerate(design):
    m = re.match(r"\s*<!-- file map: ([^ ]+) -->\s*$", line)
    if not m:
        continue
    folder = m.group(1).strip("/")
    if folder in mapped:
        bad(f"docs/design.md:{i + 1}: names folder {folder}/ twice (a second file map; the first is at line {mapped[folder]})")
    mapped[folder] = i + 1
    if read_map("docs/design.md", design, i + 1, folder + "/") is None:
        bad(f"docs/design.md:{i + 1}: the file map of {folder}/ has no end marker")

seen = {}
for doc, num, name in names:
    where = f"{doc}:{num}"
    if name.endswith("/"):
        if name not in folders:
            bad(f"{where}: names {name}, a folder that holds no tracked file")
    elif name not in tracked:
        bad(f"{where}: names {name}, a file that does not exist (or git does not track)")
    if name in seen:
        kind = "folder" if name.endswith("/") else "file"
        bad(f"{where}: names {kind} {name} twice (also {seen[name]})")
    else:
        seen[name] = where

for top in ("scheduler/", "ipc/", "plugins/", "daemon/", "client/", "systemd/", "tests/"):
    if top in folders and top not in readme_names:
        bad(f"README.md: the folder map does not name {top}")

# --- every tracked source file in a map
CODE = ("scheduler/", "ipc/", "plugins/", "daemon/", "client/")
def must_be_named(f):
    base = f.rsplit("/", 1)[-1]
    if base == "build.mk":
        return True
    if f.startswith(CODE):
        return f.endswith((".c", ".h", ".S", ".sym"))
    if f.startswith("systemd/"):
        return True
    if f.startswith("tests/"):
        return f.endswith((".sh", ".mk"))
    return False

named = set(seen)
for f in sorted(tracked):
    if must_be_named(f):
        if f not in named:
            bad(f"{f}: missing from the maps (docs/design.md's file maps, or the README's)")
    elif f.startswith("tests/"):
        parts = f.split("/")
        covered = any("/".join(parts[:k]) + "/" in named for k in range(2, len(parts)))
        if not covered:
            bad(f"{f}: in no folder the maps name (name its folder in docs/design.md's map of tests/)")

# --- no tracker numbers
hits = git("grep", "-nIE", r"\b[Ii]ssues? [0-9]+\b", "--", ".", ":!tests/fuzz/corpus/")
for line in hits.stdout.splitlines():
    bad(f"{line[:160]}: names a tracker issue; say what the thing is instead")

for p in problems:
    print("check-docs: " + p)
sys.exit(1 if problems else 0)
PY
}

# A throw-away tree that passes: a README with its folder map, docs/design.md with file
# maps, one file of each kind the check requires.
make_tree() {
	local t=$1
	mkdir -p "$t"/{scheduler/base,ipc,plugins,daemon,client,systemd,tests/unit,docs/man}
	for f in scheduler/fiber.c scheduler/runq.h scheduler/context-x86_64.S scheduler/hook.sym \
		scheduler/base/list.h scheduler/build.mk ipc/decoder.c plugins/loader.c daemon/main.c \
		client/fiberctl.c systemd/fiberd.service tests/unit/test_fiber.c tests/layering.sh \
		tests/build.mk docs/build.mk docs/man/fiberd.8.scd Makefile; do
		printf '/* %s: a tissue 5 of lies is no tracker word; nor is issue-12 */\n' "$f" >"$t/$f"
	done
	cat >"$t/README.md" <<-'EOF'
		# fiberd

		<!-- tree map -->
		| path | what |
		|---|---|
		| `Makefile` | the build |
		| [`scheduler/base/`](scheduler/base/) | the bottom layer |
		| `scheduler/` | the runtime |
		| `ipc/` | the wire |
		| `plugins/` | plugins |
		| `daemon/` | fiberd |
		| `client/` | fiberctl |
		| `systemd/` | units |
		| `tests/` | tests |
		| `docs/` | docs |
		<!-- tree map (end) -->
	EOF
	cat >"$t/docs/design.md" <<-'EOF'
		# Design

		<!-- file map: scheduler -->
		| file | what |
		|---|---|
		| [`fiber.c`](../scheduler/fiber.c), `runq.h` | fibers; the run queue |
		| `context-x86_64.S`, `hook.sym` | the switch; `not/a/file.c` in the text is not a name |
		| `base/list.h` | the list |
		| `build.mk` | the build |
		<!-- file map: scheduler (end) -->
		<!-- file map: ipc -->
		| `decoder.c` | the decoder |
		<!-- file map: ipc (end) -->
		<!-- file map: plugins -->
		| `loader.c` | the loader |
		<!-- file map: plugins (end) -->
		<!-- file map: daemon -->
		| `main.c` | main |
		<!-- file map: daemon (end) -->
		<!-- file map: client -->
		| `fiberctl.c` | fiberctl |
		<!-- file map: client (end) -->
		<!-- file map: systemd -->
		| `fiberd.service` | the unit |
		<!-- file map: systemd (end) -->
		<!-- file map: tests -->
		| `unit/` | unit tests |
		| `layering.sh`, `build.mk` | the check; the build |
		<!-- file map: tests (end) -->
		<!-- file map: docs -->
		| `build.mk`, `man/` | the man pages |
		<!-- file map: docs (end) -->
	EOF
	git -C "$t" init -q
	git -C "$t" add -A
}

# expect NAME STATUS SETUP [PATTERN]: a fresh clean tree, SETUP run in it (then every
# change staged, so git tracks what SETUP made and forgets what it removed), check gives
# STATUS, and when it fails its output matches PATTERN.
expect() {
	local name=$1 want=$2 setup=$3 pattern=${4:-} t out got=0
	t=$(mktemp -d "${TMPDIR:-/tmp}/docs-self-test.XXXXXX")
	make_tree "$t"
	(cd "$t" && eval "$setup" && git add -A)
	out=$(check "$t") || got=$?
	rm -rf "$t"
	if [ "$got" -ne "$want" ]; then
		echo "docs self-test: FAIL: $name: exit $got, expected $want${out:+; output:}"
		[ -z "$out" ] || printf '  %s\n' "$out"
		return 1
	fi
	if [ -n "$pattern" ] && ! grep -q -- "$pattern" <<<"$out"; then
		echo "docs self-test: FAIL: $name: no line matching '$pattern' in: $out"
		return 1
	fi
	[ -z "${DOCS_VERBOSE:-}" ] || echo "docs self-test: ok: $name${out:+ -> ${out%%$'\n'*}}"
	cases=$((cases + 1))
}

self_test() {
	local fails=0 cases=0 iss=issue
	expect "clean tree passes" 0 ':' || fails=1
	expect "README over its budget" 1 \
		'for i in $(seq 230); do echo "line $i" >>README.md; done' 'over its budget' || fails=1
	expect "README without its folder map" 1 \
		'sed -i "/tree map/d" README.md' 'no folder map' || fails=1
	expect "README map names a file that does not exist" 1 \
		'sed -i "s/| \`Makefile\` |/| \`Makefile\`, \`GNUmakefile\` |/" README.md' \
		'names GNUmakefile, a file that does not exist' || fails=1
	expect "design map names a file that was removed" 1 \
		'git rm -qf ipc/decoder.c' 'names ipc/decoder.c, a file that does not exist' || fails=1
	expect "README map names a folder that does not exist" 1 \
		'sed -i "s/| \`docs\/\` |/| \`docs\/\`, \`doc\/\` |/" README.md' \
		'names doc/, a folder that holds no tracked file' || fails=1
	expect "README map names a folder twice" 1 \
		'sed -i "s/^| \`ipc\/\` | the wire |$/&\n| \`ipc\/\` | the wire again |/" README.md' \
		'names folder ipc/ twice' || fails=1
	expect "design.md has two file maps of one folder" 1 \
		'printf "<!-- file map: daemon -->\n<!-- file map: daemon (end) -->\n" >>docs/design.md' \
		'names folder daemon/ twice' || fails=1
	expect "design.md names a file twice" 1 \
		'sed -i "s/| \`main.c\` | main |/| \`main.c\`, \`main.c\` | main |/" docs/design.md' \
		'names file daemon/main.c twice' || fails=1
	expect "a top folder missing from the README map" 1 \
		'sed -i "/| \`systemd\/\` |/d" README.md' 'does not name systemd/' || fails=1
	expect "an unmapped .c file" 1 'echo x >daemon/new.c' 'daemon/new.c: missing from the maps' || fails=1
	expect "an unmapped .h file" 1 'echo x >client/new.h' 'client/new.h: missing' || fails=1
	expect "an unmapped .S file" 1 'echo x >scheduler/other.S' 'scheduler/other.S: missing' || fails=1
	expect "an unmapped .sym file" 1 'echo x >plugins/x.sym' 'plugins/x.sym: missing' || fails=1
	expect "an unmapped build.mk" 1 'echo x >ipc/build.mk' 'ipc/build.mk: missing' || fails=1
	expect "an unmapped unit in systemd/" 1 'echo x >systemd/fiberd.socket' 'systemd/fiberd.socket: missing' || fails=1
	expect "an unmapped script in tests/" 1 'echo x >tests/new.sh' 'tests/new.sh: missing' || fails=1
	expect "a tests/ file in no mapped folder" 1 \
		'mkdir tests/stray && echo x >tests/stray/a.c' 'tests/stray/a.c: in no folder' || fails=1
	expect "a tests/ file in a mapped folder passes" 0 'echo x >tests/unit/test_more.c' || fails=1
	expect "an untracked file is not read" 0 \
		'echo x >daemon/stray.c && printf "daemon/stray.c\n" >.git/info/exclude' || fails=1
	expect "a tracker issue in a C comment" 1 \
		"echo '/* the store ($iss 11) */' >>daemon/main.c" "daemon/main.c:2:.*names a tracker issue" || fails=1
	expect "a tracker issue in a doc" 1 \
		"echo 'Fixed in ${iss}s 8' >>docs/design.md" 'docs/design.md:.*names a tracker issue' || fails=1
	expect "a tracker issue in a man page" 1 \
		"echo 'See ${iss^} 12.' >>docs/man/fiberd.8.scd" 'fiberd.8.scd:2:.*names a tracker issue' || fails=1
	expect "a tracker issue in a test script" 1 \
		"echo '# $iss 9' >>tests/layering.sh" 'tests/layering.sh:2:.*names a tracker issue' || fails=1
	if [ $fails -ne 0 ]; then
		echo "docs self-test: FAILED"
		return 1
	fi
	echo "docs self-test: ok: $cases cases, each broken rule caught, the clean trees passed"
}

case ${1:-} in
--self-test) self_test ;;
-h | --help) sed -n '3,27p' "$0" | sed 's/^# \{0,1\}//' ;;
-*)
	echo "usage: $0 [--self-test | DIR]" >&2
	exit 2
	;;
*)
	root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
	if check "$root"; then
		echo "check-docs: ok"
	else
		echo "check-docs: FAILED (the rules are at the top of tests/docs.sh)"
		exit 1
	fi
	;;
esac
