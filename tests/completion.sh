#!/usr/bin/env bash
# tests/completion.sh — `make check-completion`: fiberctl's bash completion
# (client/completion/fiberctl.bash) against the fiberctl just built.
#
#   1. the script passes `bash -n`;
#   2. completing the first word offers exactly the verbs `fiberctl --help` lists;
#   3. every verb has a `fiberctl VERB --help`, and completing `fiberctl VERB --` offers
#      every long option that help names (and the global ones);
#   4. with a real fiberd, `submit <TAB>` offers its plugins and `status <TAB>` a job id;
#   5. the zsh completion (client/completion/_fiberctl) passes `zsh -n`, names the same
#      verbs, each verb's --help options, and gets plugin names and job ids from fiberd.
# Each check names what differed. Usage: tests/completion.sh FIBERCTL FIBERD PLUGIN_DIR
set -uo pipefail
me=check-completion
script=client/completion/fiberctl.bash
fiberctl=${1:?usage: tests/completion.sh FIBERCTL FIBERD PLUGIN_DIR}
fiberd=${2:?}
plugin_dir=${3:?}
fail() {
	echo "$me: FAIL: $*" >&2
	exit 1
}

bash -n "$script" || fail "$script: bash -n found a syntax error"

# shellcheck source=/dev/null
source "$script"
# complete WORD... : the candidates for the last word of "fiberctl WORD...", sorted
complete_line() {
	COMP_WORDS=("$fiberctl" "$@")
	COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
	COMPREPLY=()
	_fiberctl
	printf '%s\n' "${COMPREPLY[@]}" | sort -u | sed '/^$/d'
}

help_verbs=$("$fiberctl" --help | awk '/^Verbs:/ { on = 1; next } on && /^$/ { exit }
	on && /^  [a-z]/ { print $1 }' | sort -u)
[ -n "$help_verbs" ] || fail "no verbs found in fiberctl --help"
completed_verbs=$(complete_line "" | grep -v '^-')
[ "$help_verbs" = "$completed_verbs" ] || fail "verbs differ:
  fiberctl --help: $(echo $help_verbs)
  completion:      $(echo $completed_verbs)"
echo "$me: verbs match fiberctl --help: $(echo $help_verbs)"

for verb in $help_verbs; do
	out=$("$fiberctl" "$verb" --help) || fail "fiberctl $verb --help exited $?"
	grep -q "^Usage: fiberctl \[OPTIONS\] $verb" <<<"$out" ||
		fail "fiberctl $verb --help has no usage line: $out"
	want=$( (grep -o -- '--[a-z][a-z-]*' <<<"$(grep '^  -' <<<"$out")"; printf "%s\n" --json --socket --user) | sort -u)
	got=$(complete_line "$verb" "--" | sort -u)
	missing=$(comm -23 <(echo "$want") <(echo "$got"))
	[ -z "$missing" ] || fail "completing 'fiberctl $verb --' lacks: $(echo $missing)"
done
echo "$me: every verb has --help, and its options complete"

# With a daemon: plugin names and job ids come from it.
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
STATE_DIRECTORY="$tmp" "$fiberd" --config /dev/null --socket "$tmp/fiberd.sock" \
	--plugin-dir "$plugin_dir" \
	--workers 1 --log-level warning 2>"$tmp/log" &
pid=$!
for ((i = 0; i < 500; i++)); do
	"$fiberctl" -s "$tmp/fiberd.sock" ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "fiberd exited: $(cat "$tmp/log")"
	sleep 0.02
done
id=$("$fiberctl" -s "$tmp/fiberd.sock" submit echo x=1) || fail "submit failed"
plugins=$(complete_line -s "$tmp/fiberd.sock" submit "")
grep -qx echo <<<"$plugins" || fail "submit <TAB> did not offer echo: $(echo $plugins)"
grep -qx sha256 <<<"$plugins" || fail "submit <TAB> did not offer sha256: $(echo $plugins)"
ids=$(COMP_WORDS=("$fiberctl" -s "$tmp/fiberd.sock" status ""); COMP_CWORD=4; COMPREPLY=(); _fiberctl; printf '%s\n' "${COMPREPLY[@]}")
grep -qx "$id" <<<"$ids" || fail "status <TAB> did not offer job $id: $(echo $ids)"
echo "$me: plugin names and job ids come from the daemon"

# zsh: sourced outside completion, the file only registers itself (compdef, stubbed here)
zscript=client/completion/_fiberctl
command -v zsh >/dev/null || fail "zsh is not installed (Debian's zsh, in the Makefile's DEBS)"
zsh -n "$zscript" || fail "$zscript: zsh -n found a syntax error"
zsh_run() { zsh -f -c 'compdef() { :; }; source "$1"; code=$2; shift 2; eval "$code"' zsh "$zscript" "$@"; }
zsh_verbs=$(zsh_run 'print -l ${_fiberctl_verbs%%:*}' | sort -u)
[ "$help_verbs" = "$zsh_verbs" ] || fail "zsh verbs differ:
  fiberctl --help: $(echo $help_verbs)
  _fiberctl:       $(echo $zsh_verbs)"
for verb in $help_verbs; do
	want=$(grep '^  -' <<<"$("$fiberctl" "$verb" --help)" | grep -o -- '--[a-z][a-z-]*' | sort -u)
	specs=$(zsh_run "print -l \"\${(@P)\${:-_fiberctl_opts_$verb}}\"")
	for o in $want; do
		# a spec is "(EXCLUDED...)--name[=+][description]...", with a leading "*" when
		# the option may repeat: match the name itself
		grep -qE -- "^(\([^)]*\))?\*?$o[=+[]" <<<"$specs" ||
			fail "zsh: 'fiberctl $verb' lacks option $o"
	done
done
zplugins=$(zsh_run '_fiberctl_words=("$1" -s "$2" submit ""); _fiberctl_plugin_names' \
	"$fiberctl" "$tmp/fiberd.sock")
grep -qx sha256 <<<"$zplugins" || fail "zsh: no plugin names from the daemon: $(echo $zplugins)"
zids=$(zsh_run '_fiberctl_words=("$1" --socket "$2" status ""); _fiberctl_job_id_list' \
	"$fiberctl" "$tmp/fiberd.sock")
grep -qx "$id" <<<"$zids" || fail "zsh: job $id not offered: $(echo $zids)"
echo "$me: zsh: verbs, options, plugin names and job ids"
echo "$me: ok"
