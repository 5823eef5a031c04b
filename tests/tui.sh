#!/usr/bin/env bash
# tests/tui.sh — `make check-tui`: what a person sees of fiberctl on a terminal, in a
# detached tmux session against a real fiberd (send keys, capture the pane):
#
#   1. tables: a 32-character plugin name keeps the columns in line (piped and on a
#      terminal), a narrow terminal cuts the table to its width, states are coloured on
#      the terminal and not with NO_COLOR nor when piped;
#   2. `fiberctl top`: the headings, a job count that matches the jobs submitted, the
#      default class row, the running job, the throughput measured from the second
#      frame, the per-plugin rows (counts, and `-` for a run time not measured yet, never
#      0.0), the per-user row, the failed pane with the error; piped with --iterations 2,
#      two frames and a measured throughput; `q` ends it, the shell's terminal is back in
#      canonical mode with echo and the alternate screen is gone; Ctrl-C too;
#   3. progress: `wait` and `batch --wait` show "done/total jobs done", `submit --wait` on
#      one job the plugin's own "N/30", each erased at the end; piped, no progress at all.
#
# Waits poll the pane for what should appear (bounded), never a fixed sleep.
# Usage: tests/tui.sh FIBERCTL FIBERD PLUGIN_DIR LONG_NAME_PLUGIN
set -uo pipefail
me=check-tui
fiberctl=$(realpath "${1:?usage: tests/tui.sh FIBERCTL FIBERD PLUGIN_DIR LONG_NAME_PLUGIN}")
fiberd=$(realpath "${2:?}")
plugin_dir=$(realpath "${3:?}")
long_plugin=$(realpath "${4:?}")
long=long-name-plugin-of-32-chars-abc
fail() {
	echo "$me: FAIL: $*" >&2
	[ -n "${pane:-}" ] && { echo "--- the pane:" >&2; printf '%s\n' "$pane" >&2; }
	exit 1
}
command -v tmux >/dev/null || fail "tmux is not installed (Debian's tmux, in the Makefile's DEBS)"

tmp=$(mktemp -d)
tmx() { tmux -L "fiberd-tui-$$" -f /dev/null "$@"; }
cleanup() {
	tmx kill-server 2>/dev/null
	kill "$pid" 2>/dev/null
	wait "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

mkdir "$tmp/plugins"
cp "$plugin_dir"/*.so "$long_plugin" "$tmp/plugins/"
STATE_DIRECTORY="$tmp" "$fiberd" --config /dev/null --socket "$tmp/s" --plugin-dir "$tmp/plugins" --workers 2 \
	--log-level warning 2>"$tmp/log" &
pid=$!
ctl() { "$fiberctl" -s "$tmp/s" "$@"; }
for ((i = 0; i < 500; i++)); do
	ctl ping >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || fail "fiberd exited: $(cat "$tmp/log")"
	sleep 0.02
done
ctl plugins 2>/dev/null | grep -q "^$long " || fail "fiberd did not load $long"

# One shell in a 100x40 terminal; F is fiberctl on the test's socket.
tmx new-session -d -x 100 -y 40 "env -u NO_COLOR PS1='$ ' bash --norc --noprofile" ||
	fail "tmux new-session failed"
tmx send-keys "F='$fiberctl -s $tmp/s'" Enter
capture() { pane=$(tmx capture-pane -p "$@"); }
# wait_for REGEX [SECONDS]: until the pane shows a line matching REGEX
wait_for() {
	local deadline=$((SECONDS + ${2:-10}))
	while ((SECONDS < deadline)); do
		capture
		grep -qE -- "$1" <<<"$pane" && return 0
		sleep 0.1
	done
	return 1
}
# run COMMAND: clear the screen, type COMMAND, wait for its own "EXIT-k=n" line (numbered:
# the previous command's line stays on the pane until the shell runs `clear`)
runs=0
run() {
	runs=$((runs + 1))
	tmx send-keys "clear; $1; echo EXIT-$runs=\$?" Enter
	wait_for "^EXIT-$runs=[0-9]+" "${2:-10}" || fail "'$1' did not finish"
}

# 1. tables -----------------------------------------------------------------------
# the column of VERSION starts at the same place on every row, the long name's too
piped=$(ctl plugins)
col=$(head -1 <<<"$piped" | grep -bo VERSION | cut -d: -f1)
while read -r line; do
	name=${line%% *}
	at=$(grep -bo ' 1\.0 ' <<<"$line" | head -1 | cut -d: -f1)
	[ "$((at + 1))" = "$col" ] || fail "plugins: the VERSION of '$name' is at column $((at + 1)), the heading's at $col:
$piped"
done < <(sed -n '2,/^$/p' <<<"$piped" | sed '/^$/d')
grep -q $'\033' <<<"$piped" && fail "piped plugins output has escape sequences"
echo "$me: plugins table aligned with a 32-character name (piped)"

long_id=$(ctl submit "$long" steps=1 step_ms=1) || fail "submit $long failed"
ctl wait "$long_id" >/dev/null || fail "wait $long_id failed"
piped=$(ctl list)
col=$(head -1 <<<"$piped" | grep -bo STATE | cut -d: -f1)
at=$(grep "$long" <<<"$piped" | grep -bo ' done ' | cut -d: -f1)
[ "$((at + 1))" = "$col" ] || fail "list: STATE misaligned after the long name:
$piped"
echo "$me: list table aligned with a 32-character name (piped)"

# a 60-column terminal: no line wider than 60, the states coloured
tmx resize-window -x 60 -y 40
run '$F plugins'
while IFS= read -r line; do
	[ "${#line}" -le 60 ] || fail "plugins wider than the 60-column terminal: '$line'"
done <<<"$pane"
grep -q "^$long" <<<"$pane" || fail "a narrow terminal lost the plugin name"
run '$F list'
capture -e
grep -q $'\033\\[32mdone' <<<"$pane" || fail "list on a terminal: 'done' is not green"
run 'NO_COLOR=1 $F list'
capture -e
grep -q $'\033\\[32m' <<<"$pane" && fail "list with NO_COLOR=1 is coloured"
tmx resize-window -x 100 -y 40
echo "$me: a terminal's tables fit its width; colour on a terminal, none with NO_COLOR"

# 2. top ---------------------------------------------------------------------------
for i in 1 2 3 4; do ctl submit echo "i=$i" >/dev/null || fail "submit echo failed"; done
failed=$(ctl submit sha256 path=/nonexistent) || fail "submit sha256 failed"
ctl wait "$failed" >/dev/null && fail "sha256 of /nonexistent did not fail"
sleeper=$(ctl submit sleep ms=60000) || fail "submit sleep failed"
submitted=7 # the long-name job, four echo jobs, the failed one, the sleeper
me_uid=$(id -u)
piped=$(ctl top --iterations 2 --delay 200ms)
[ "$(grep -c '^fiberctl top - ' <<<"$piped")" = 2 ] || fail "top --iterations 2, piped: not two frames:
$piped"
grep -qE '^Throughput: - jobs/s' <<<"$piped" || fail "top, piped: the first frame measures no throughput"
grep -qE '^Throughput: [0-9]+\.[0-9] jobs/s finished \([0-9.]+ done, [0-9.]+ failed' <<<"$piped" ||
	fail "top, piped: no measured throughput in the second frame:
$piped"
echo "$me: top piped with --iterations 2: two frames, the second with a measured throughput"
tmx send-keys "clear; \$F top; echo TOP-EXIT=\$?; stty -a | tr ' ;' '\\n\\n' | grep -xE -- '-?(icanon|echo)' | tr '\\n' ' '; echo" Enter
wait_for '^Running longest' || fail "top: no 'Running longest' heading"
wait_for "^Jobs: $submitted submitted, 0 queued, 1 running, 5 done, 1 failed" ||
	fail "top: the job counts do not match the $submitted jobs submitted"
wait_for "^Held: 0 scheduled, 0 waiting, 0 retrying, 0 dead; 0 queued behind a pause or a cap" ||
	fail "top: no line of held jobs"
for heading in '^fiberctl top - ' '^CLASS +SHARES +QUEUED +RUNNING' '^GROUP +WORKERS +RUNQ' \
	'^default +100 +[0-9]+ +1 ' '^server ' '^jobs-0 ' "^ *$sleeper +sleep +default " 'q: quit' \
	'^PLUGIN +QUEUED +RUNNING +DONE +FAILED +CANCELLED +RUN-P50\(ms\) +RUN-P99\(ms\)' \
	'^echo +0 +0 +4 +0 +0 +[0-9]+\.[0-9] +[0-9]+\.[0-9]$' '^sha256 +0 +0 +0 +1 +0 ' \
	'^sleep +0 +1 +0 +0 +0 +- +-$' '^USER +RUNNING +QUEUED$' "^ *$me_uid +1 +0$" \
	'^Failed, newest first \(1 shown\):' '^ID +PLUGIN +USER +ERROR' \
	"^ *$failed +sha256 +$me_uid +NOT_FOUND: cannot open /nonexistent"; do
	grep -qE -- "$heading" <<<"$pane" || fail "top: nothing matches '$heading'"
done
wait_for '^Throughput: [0-9]+\.[0-9] jobs/s finished' 5 || fail "top: no throughput from the second frame"
echo "$me: top shows the headings, $submitted jobs, the throughput, the plugin, user and class rows, the failed pane and the running job"
tmx send-keys q
wait_for '^TOP-EXIT=0' 5 || fail "top did not end on q"
wait_for '^icanon echo *$' 5 || fail "top left the terminal without icanon/echo"
grep -q '^Jobs:' <<<"$pane" && fail "top's screen is still there after q (the alternate screen)"
echo "$me: q ends top and gives the terminal back"
tmx send-keys "clear; \$F top; echo TOP-EXIT=\$?" Enter
wait_for '^Running longest' || fail "top did not start again"
tmx send-keys C-c
wait_for '^TOP-EXIT=0' 5 || fail "top did not end on Ctrl-C"
echo "$me: Ctrl-C ends top"
ctl cancel "$sleeper" >/dev/null

# 3. progress ------------------------------------------------------------------------
a=$(ctl submit sleep ms=300) && b=$(ctl submit sleep ms=1500) && c=$(ctl submit sleep ms=2500) ||
	fail "submit sleep failed"
tmx send-keys "clear; \$F wait $a $b $c; echo EXIT-wait=\$?" Enter
wait_for '^[12]/3 jobs done' || fail "wait: no 'done/total' progress line"
wait_for '^EXIT-wait=0' || fail "wait did not finish"
grep -q 'jobs done' <<<"$pane" && fail "wait: the progress line was not erased"
[ "$(grep -c ' sleep done ' <<<"$pane")" = 3 ] || fail "wait: not the three job lines"
echo "$me: wait shows done/total and erases it"

printf '{"plugin": "sleep", "args": {"ms": %d}}\n' 200 1500 2500 >"$tmp/jobs.jsonl"
tmx send-keys "clear; \$F batch --wait < $tmp/jobs.jsonl; echo EXIT-batch=\$?" Enter
wait_for '^[12]/3 jobs done' || fail "batch: no 'done/total' progress line"
wait_for '^EXIT-batch=0' || fail "batch did not finish"
grep -q 'jobs done' <<<"$pane" && fail "batch: the progress line was not erased"
echo "$me: batch --wait shows done/total and erases it"

tmx send-keys "clear; \$F submit $long steps=30 step_ms=100 --wait; echo EXIT-submit=\$?" Enter
wait_for '^[0-9]+/30 \([0-9]+%\)' || fail "submit --wait: no plugin progress 'N/30'"
wait_for '^EXIT-submit=0' || fail "submit --wait did not finish"
grep -qE '^[0-9]+/30 \(' <<<"$pane" && fail "submit --wait: the progress line was not erased"
grep -q "^job [0-9]* ($long): done" <<<"$pane" || fail "submit --wait: no final record"
echo "$me: submit --wait shows the plugin's progress and erases it"

# piped: no progress, no carriage return, no escape
d=$(ctl submit sleep ms=600)
out=$(ctl wait "$d" 2>&1 | cat)
grep -q $'[\r\033]' <<<"$out" && fail "wait piped wrote progress: $(od -c <<<"$out" | head -3)"
out=$(ctl submit "$long" steps=5 step_ms=100 --wait 2>&1 | cat)
grep -q $'[\r\033]' <<<"$out" && fail "submit --wait piped wrote progress"
echo "$me: piped, no progress"
pane=
echo "$me: ok"
