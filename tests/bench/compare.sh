#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/bench/compare.sh — `make bench-compare BASE=<rev>`: the A/B a scheduler change
# needs. It builds revision BASE beside the tree (a `git archive` of it under
# $BUILD/compare/<sha>, built with its own Makefile) and runs the same fiberd-bench
# figures of both builds interleaved, A B B A A B ..., in the same minutes, so a burst of
# noise on a shared machine hits both alike. It prints one markdown row per figure and
# column: the median of each side and the ratio new/base of the medians; the median of
# each round's own new/base (paired: the two sides ran seconds apart), which a host that
# runs a whole process at one of two speeds does not mislead as the ratio of medians can
# (7 rounds of yield read 1.45 that way on a VM whose base and new each ran at 17 or 29
# ns, the pairs agreeing); and a cache line's round trip between two CPUs at the start
# of each round (`fiberd-bench c2c`), which says whether the host moved a VM's vCPUs
# apart meanwhile. Beside the paired median it prints the quartiles of the rounds' own
# ratios (25–75 %), the noise band: on the 2-vCPU AMD VM of docs/benchmarks.md twelve
# rounds of two builds of the same code read a paired 1.034 with a band of 0.892–1.071
# at 8 connections, so a paired ratio means something only where its band stays off 1.
#
#   BASE=<rev>            the revision to compare against (required)
#   COMPARE_RUNS=N        rounds per figure (default 7)
#   COMPARE_ROWS='...'    figures, `;`-separated fiberd-bench command lines (default: the
#                         runtime rows: the bare switch, yield without and with job
#                         classes, create+latch, create+join, ping-pong, sleep_for(1 ms)
#                         lateness). A figure the base's fiberd-bench does not have (it
#                         exits non-zero) is shown for the new side only.
#   COMPARE_NEW_CONF='...' config text the new side's product rows give their fiberd
#                         (FIBERD_BENCH_CONF, `\n` for a newline), e.g.
#                         '[server]\nworkers = 2': a key the base does not know yet
#
# Usage: tests/bench/compare.sh BUILD_DIR NEW_BENCH_BIN   (run from the top of the tree)
set -euo pipefail

build=${1:?build dir}
new_bin=${2:?new fiberd-bench}
base=${BASE:?BASE=<rev> is required, e.g. make bench-compare BASE=HEAD~1}
runs=${COMPARE_RUNS:-7}
rows=${COMPARE_ROWS:-"floor;yield 2000000;yield 2000000 classes;create 1000000 latch;create 200000 join;pingpong 200000;lateness"}
new_conf=$(printf '%b' "${COMPARE_NEW_CONF:-}")

sha=$(git rev-parse --verify --quiet "$base^{commit}") ||
        { echo "bench-compare: '$base' is not a revision of this repository" >&2; exit 2; }
short=$(git rev-parse --short "$sha")
dir=$build/compare/$sha
base_bin=$dir/build/bench/fiberd-bench

if [ ! -x "$base_bin" ]; then
        echo "bench-compare: building $short in $dir (once; kept for the next run)" >&2
        rm -rf "$dir"
        mkdir -p "$dir"
        git archive "$sha" | tar -x -C "$dir"
        # The base's product rows start its own fiberd: build everything it has.
        make -C "$dir" --no-print-directory -j"$(nproc)" all >"$dir.log" 2>&1 ||
                { echo "bench-compare: building $short failed; see $dir.log" >&2; exit 1; }
fi
[ -x "$base_bin" ] || { echo "bench-compare: $short has no build/bench/fiberd-bench" >&2; exit 1; }

# quantiles FMT P...: the numbers on stdin at each fraction P (linear interpolation
# between ranks: 0.5 is the median), printed with the printf format FMT; nothing when
# there are none
quantiles() { sort -g | awk -v fmt="$1" -v ps="${*:2}" '{ v[NR] = $1 }
        function q(p,   h, i) { h = (NR - 1) * p + 1; i = int(h);
                                return i >= NR ? v[NR] : v[i] + (h - i) * (v[i + 1] - v[i]) }
        END { if (!NR) exit; n = split(ps, p, " ");
              for (k = 1; k <= n; k++) a[k] = q(p[k]);
              printf fmt "\n", a[1], a[2], a[3] }'; }
median() { quantiles '%s' 0.5; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "bench-compare: $runs rounds, base $short vs $(git rev-parse --short HEAD)$(
        git diff --quiet HEAD -- . 2>/dev/null || echo ' (+ uncommitted changes)')${new_conf:+ with
${new_conf}
}; CPU: $(
        lscpu | sed -n 's/^Model name: *//p' | head -1)" >&2
IFS=';' read -r -a figs <<<"$rows"
for r in $(seq "$runs"); do
        # The host's placement of the two CPUs in this round (a VM's can change for
        # minutes at a time, and every cross-core figure with it: docs/benchmarks.md,
        # "Two regimes"); both sides of a round share it.
        "$new_bin" c2c 200000 2>/dev/null >>"$tmp/c2c" || true
        for i in "${!figs[@]}"; do
                read -r -a argv <<<"${figs[$i]}"
                # Which side goes first alternates by round, so that neither always
                # runs right after the other (an A/A of one revision, always base
                # first, once put the second side 5-8 % behind on the product rows).
                order="base new"
                [ $((r % 2)) -eq 0 ] && order="new base"
                for side in $order; do
                        bin=$base_bin envp=()
                        [ "$side" = new ] && bin=$new_bin
                        [ "$side" = new ] && [ -n "$new_conf" ] &&
                                envp=(env "FIBERD_BENCH_CONF=$new_conf")
                        # The last line holds the figures; sched's notices go to stderr.
                        if ! out=$("${envp[@]}" "$bin" "${argv[@]}" 2>/dev/null | tail -n 1); then
                                if [ "$side" = base ]; then
                                        [ -e "$tmp/$i.nobase" ] || echo "bench-compare: base" \
                                                "$short has no figure '${figs[$i]}': new side only" >&2
                                        touch "$tmp/$i.nobase"
                                        continue
                                fi
                                echo "bench-compare: '$side ${figs[$i]}' failed" >&2
                                exit 1
                        fi
                        echo "$out" >>"$tmp/$i.$side"
                done
        done
        echo "bench-compare: round $r of $runs done" >&2
done

echo
[ -s "$tmp/c2c" ] && echo "A cache line's round trip between two CPUs at the start of each round" \
        "(fiberd-bench c2c, ns): $(paste -sd' ' "$tmp/c2c")"
echo "| figure (median of $runs, interleaved) | column | base $short | new | new/base | paired | paired 25–75 % |"
echo "|---|---|---|---|---|---|---|"
for i in "${!figs[@]}"; do
        cols=$(awk '{ print NF }' "$tmp/$i.new" | head -1)
        for c in $(seq "$cols"); do
                n=$(awk -v c="$c" '{ print $c }' "$tmp/$i.new" | median)
                if [ -e "$tmp/$i.nobase" ]; then
                        echo "| ${figs[$i]} | $c | — | $n | — | — | — |"
                        continue
                fi
                b=$(awk -v c="$c" '{ print $c }' "$tmp/$i.base" | median)
                ratio=$(awk -v b="$b" -v n="$n" 'BEGIN { if (b == 0) print "-";
                                                         else printf "%.3f", n / b }')
                # round r's new over round r's base (line r of each file)
                paste -d' ' <(awk -v c="$c" '{ print $c }' "$tmp/$i.base") \
                        <(awk -v c="$c" '{ print $c }' "$tmp/$i.new") |
                        awk '$1 != 0 { print $2 / $1 }' >"$tmp/ratios"
                paired=$(quantiles '%.3f | %.3f–%.3f' 0.5 0.25 0.75 <"$tmp/ratios")
                echo "| ${figs[$i]} | $c | $b | $n | $ratio | ${paired:-- | -} |"
        done
done
