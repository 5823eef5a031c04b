#!/bin/bash
# SPDX-License-Identifier: MIT
#
# tests/bench/stages.sh — `make bench-stages`: where a trivial job's CPU goes, stage by
# stage. It runs one product row of fiberd-bench (default `product-fiberd tput 200000 8
# 64`: 200,000 echo jobs over 8 connections, 64 outstanding each) and samples every
# thread of the fiberd(s) and redis-server it starts, by name (/proc/PID/task/TID/comm;
# fiberd names its threads: the scheduler's `<group>-wN`, `-tmr`, `-mon`, and
# fiberd-store, fiberd-rd-read, ...), reading each one's run time in ns
# (/proc/PID/task/TID/schedstat) every 20 ms. It prints the CPU of each stage per 1,000
# jobs, from the moment the bench starts its clock (its "trivial job" line) to the last
# sample before the servers stop, beside the bench's own figures (jobs/s, and server CPU
# per 1,000 jobs from /proc/PID/stat: the sum of the stages should come within a few %).
# docs/scaling.md reads its numbers off this script.
#
#   tests/bench/stages.sh BENCH_BIN [ROW [MODE N C W]]
#     ROW   product-fiberd (memory store), product-fiberd-sqlite, product-fiberd-redis
#           (fleet mode, one host), product-fiberd-redis2 (two hosts, one redis-server)
#   FIBERD_BENCH_CONF='[server]\nworkers = 2' is passed on to the fiberd(s) (`\n` = newline)
#   STAGES_PERF=1   also split the server workers' CPU by what runs there: perf samples
#                   (perf record -F 999 on the first fiberd while the clock runs), each
#                   symbol put with the folder of the object file that defines it
#                   (build/daemon/server: the RPC methods; build/daemon/job: the job
#                   table, dispatcher, supervisors; build/scheduler: the fiber runtime;
#                   ipc: the codec), [k] = the kernel (syscalls, wake-ups)
#   STAGES_PERF_TOP=N  with STAGES_PERF=1, also the server workers' N hottest symbols
#
# The stages (comm of the threads):
#   reactor       fiberd-sr-tmr: the server group's reactor (epoll, timers): it sees a
#                 socket readable and wakes a server worker
#   server        fiberd-sr-wN: the server workers: decode, the method, the job table,
#                 the dispatcher fiber and the supervisors, the answer's write
#   job workers   fiberd-jo-wN: the job fibers (the plugin's run)
#   job reactor   fiberd-jo-tmr
#   store         fiberd-store: the store thread's group commit (sqlite, redis writes)
#   redis reader  fiberd-rd-read, fiberd-rd-move: fleet mode's shared-queue reader, mover
#   monitors      *-mon: the groups' stall/rescue monitors
#   other         the main thread, openers, the plugin loader, io_uring's
#   redis-server  every thread of the redis-server the redis rows start
set -euo pipefail

bin=${1:?fiberd-bench binary}
row=${2:-product-fiberd}
shift 2 || shift $#
load=("$@")
[ ${#load[@]} -gt 0 ] || load=(tput 200000 8 64)
jobs=${load[1]}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"; [ -n "${bench:-}" ] && kill "$bench" 2>/dev/null || true' EXIT
if [ -n "${FIBERD_BENCH_CONF:-}" ]; then
        FIBERD_BENCH_CONF=$(printf '%b' "$FIBERD_BENCH_CONF")
        export FIBERD_BENCH_CONF
fi

"$bin" "$row" "${load[@]}" >"$tmp/out" 2>"$tmp/err" &
bench=$!

stage_of() {
        case $1 in
        fiberd-sr-tmr) echo reactor ;;
        fiberd-sr-w*) echo server ;;
        fiberd-jo-w*) echo job-workers ;;
        fiberd-jo-tmr) echo job-reactor ;;
        fiberd-store) echo store ;;
        fiberd-rd-*) echo redis-reader ;;
        *-mon) echo monitors ;;
        *) echo other ;;
        esac
}

declare -A last base comm_of
started=0 polls=0 rsock="" rbase="" rlast=""
# redis-server's counters: "reads commands ns" (INFO stats: total_reads_processed, one
# per read of a client's socket, so about one per round trip; total_commands_processed)
redis_sample() {
        local out reads cmds
        out=$(redis-cli -s "$rsock" info stats 2>/dev/null) || return 0
        reads=$(sed -n 's/^total_reads_processed:\([0-9]*\).*/\1/p' <<<"$out")
        cmds=$(sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p' <<<"$out")
        [ -n "$reads" ] && [ -n "$cmds" ] && echo "$reads $cmds $(date +%s%N)"
}
# The servers are the bench's descendants (fork + exec): fiberd, and redis-server.
while kill -0 "$bench" 2>/dev/null; do
        if [ "$started" = 0 ] && grep -q "trivial job" "$tmp/err" 2>/dev/null; then
                started=1
                for k in "${!last[@]}"; do base[$k]=${last[$k]}; done
                [ -n "$rsock" ] && rbase=$(redis_sample)
        fi
        if [ "$started" = 1 ] && [ "${STAGES_PERF:-0}" = 1 ] && [ -z "${perf_pid:-}" ] &&
                [ -n "${fiberd1:-}" ]; then
                perf record -q -F "${STAGES_PERF_HZ:-999}" -p "$fiberd1" -o "$tmp/perf.data" >/dev/null 2>&1 &
                perf_pid=$!
        fi
        # every 0.5 s, redis's counters (a redis-cli each time: not every 20 ms)
        polls=$((polls + 1))
        if [ "$started" = 1 ] && [ -n "$rbase" ] && [ $((polls % 25)) = 0 ]; then
                r=$(redis_sample)
                [ -n "$r" ] && rlast=$r
        fi
        # every descendant (fiberd-bench may run the row in a child of its own)
        kids=() todo=("$bench")
        while [ ${#todo[@]} -gt 0 ]; do
                p=${todo[0]}
                todo=("${todo[@]:1}")
                for t in /proc/"$p"/task/*/children; do
                        more=()
                        read -r -a more 2>/dev/null <"$t" || true # no newline at its end
                        kids+=("${more[@]}")
                        todo+=("${more[@]}")
                done
        done
        for pid in "${kids[@]}"; do
                child=/proc/$pid
                read -r pcomm 2>/dev/null <"$child/comm" || continue
                case $pcomm in fiberd | redis-server) ;; *) continue ;; esac
                [ "$pcomm" = fiberd ] && [ -z "${fiberd1:-}" ] && fiberd1=$pid
                if [ "$pcomm" = redis-server ] && [ -z "$rsock" ]; then
                        rsock=$(tr '\0' '\n' <"$child/cmdline" | sed -n '/^--unixsocket$/{n;p}')
                fi
                for task in "$child"/task/*; do
                        tid=${task##*/}
                        read -r ns _ 2>/dev/null <"$task/schedstat" || continue
                        if [ "$pcomm" = redis-server ]; then
                                name=redis-server
                        else
                                read -r name 2>/dev/null <"$task/comm" || continue
                        fi
                        last[$pid.$tid]=$ns
                        comm_of[$pid.$tid]=$name
                        # a thread born after the clock started counts from 0
                        [ "$started" = 1 ] && [ -z "${base[$pid.$tid]:-}" ] && base[$pid.$tid]=0
                done
        done
        sleep 0.02
done
wait "$bench" || { echo "stages: $row failed:" >&2; cat "$tmp/err" >&2; exit 1; }
[ "$started" = 1 ] || { echo "stages: never saw the bench start its clock" >&2; exit 1; }

# tput prints "jobs/s, server CPU ms per 1,000 jobs"; rate "p50 µs, p99 µs, server CPU
# ms per s" at the rate it was asked for (its third word)
if [ "${load[0]}" = rate ]; then
        read -r p50 p99 cpu_per_s <"$tmp/out"
        rate=${load[2]}
        figures="$rate jobs/s asked, p50 $p50 µs, p99 $p99 µs, server CPU $cpu_per_s ms per s"
else
        read -r rate cpu_per_k <"$tmp/out"
        figures="$rate jobs/s, server CPU $cpu_per_k ms per 1,000 jobs"
fi
declare -A sum threads
hosts=0
for k in "${!last[@]}"; do
        [ -n "${base[$k]:-}" ] || continue
        if [ "${comm_of[$k]}" = redis-server ]; then s=redis-server; else s=$(stage_of "${comm_of[$k]}"); fi
        sum[$s]=$(( ${sum[$s]:-0} + ${last[$k]} - ${base[$k]} ))
        threads[$s]=$(( ${threads[$s]:-0} + 1 ))
        [ "${comm_of[$k]}" = fiberd-sr-tmr ] && hosts=$((hosts + 1))
done

echo "stages: fiberd-bench $row ${load[*]}$(
        [ -n "${FIBERD_BENCH_CONF:-}" ] && printf ' with %s' "$(echo "$FIBERD_BENCH_CONF" | tr '\n' ' ')")"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; fiberd hosts: $hosts"
echo "bench: $figures (/proc/PID/stat)"
echo
printf '| %-13s | %7s | %14s | %10s |\n' stage threads "ms / 1k jobs" "µs / job"
echo "|---|---|---|---|"
total=0
for s in reactor server job-workers job-reactor store redis-reader monitors other redis-server; do
        [ -n "${sum[$s]:-}" ] || continue
        total=$((total + sum[$s]))
        awk -v s="$s" -v t="${threads[$s]}" -v ns="${sum[$s]}" -v n="$jobs" 'BEGIN {
                printf "| %-13s | %7d | %14.2f | %10.2f |\n", s, t, ns / 1e6 * 1000 / n, ns / 1e3 / n }'
done
awk -v ns="$total" -v n="$jobs" 'BEGIN {
        printf "| %-13s | %7s | %14.2f | %10.2f |\n", "all", "", ns / 1e6 * 1000 / n, ns / 1e3 / n }'
if [ -n "$rbase" ] && [ -n "$rlast" ]; then
        # per job at the bench's rate: the counters' rate over the window between the two
        # samples, divided by jobs/s (the load is steady in between)
        read -r r0 c0 t0 <<<"$rbase"
        read -r r1 c1 t1 <<<"$rlast"
        awk -v r="$((r1 - r0))" -v c="$((c1 - c0))" -v dt="$((t1 - t0))" -v rate="$rate" 'BEGIN {
                s = dt / 1e9
                printf "\nredis-server: %.2f reads (round trips) and %.2f commands per job ", r / s / rate, c / s / rate
                printf "(INFO stats over %.1f s at %d jobs/s)\n", s, rate }'
fi

if [ -n "${perf_pid:-}" ]; then
        kill -INT "$perf_pid" 2>/dev/null || true
        wait "$perf_pid" 2>/dev/null || true
        top=$(cd "$(dirname "$0")/../.." && pwd)
        # symbol -> folder of the object that defines it (static functions included)
        for o in $(cd "$top" && find build/daemon build/scheduler build/ipc build/plugins \
                -name '*.o' 2>/dev/null); do
                d=${o#build/}
                d=${d%/*}
                nm --defined-only "$top/$o" 2>/dev/null | awk -v d="$d" '$2 ~ /[tTwW]/ { print $3, d }'
        done | sort -u -k1,1 >"$tmp/symdir"
        perf report -i "$tmp/perf.data" --no-children --comm "$(
                for k in "${!comm_of[@]}"; do echo "${comm_of[$k]}"; done | grep '^fiberd-sr-w' |
                        sort -u | paste -sd,)" --sort sym -F overhead,sym --stdio 2>/dev/null |
                awk 'NR == FNR { dir[$1] = $2; next }
                     /^ *[0-9.]+%/ { pct = $1 + 0; kind = $2; sym = $3
                        if (kind == "[k]") where = "kernel (syscalls, wake-ups, scheduling)"
                        else if (sym in dir) where = dir[sym]
                        else if (sym ~ /^msgpack_/) where = "libmsgpackc"
                        else where = "libc (malloc, memcpy, printf, locks) and other"
                        share[where] += pct }
                     END { for (w in share) all += share[w]
                           for (w in share) printf "%6.1f%%  %s\n", 100 * share[w] / all, w }' \
                        "$tmp/symdir" - | sort -rn >"$tmp/split"
        echo
        echo "server workers' CPU by where the code lives (perf samples; share of theirs):"
        cat "$tmp/split"
        if [ -n "${STAGES_PERF_TOP:-}" ]; then
                echo
                echo "the server workers' top ${STAGES_PERF_TOP} symbols:"
                perf report -i "$tmp/perf.data" --no-children --comm "$(
                        for k in "${!comm_of[@]}"; do echo "${comm_of[$k]}"; done |
                                grep '^fiberd-sr-w' | sort -u | paste -sd,)" --sort sym \
                        -F overhead,sym --stdio 2>/dev/null | grep -E '^ *[0-9.]+%' |
                        sort -rn | awk -v n="$STAGES_PERF_TOP" 'NR <= n'
        fi
fi
