#!/usr/bin/env bash
# Start-up costs side by side (bench/startup.cc): thread create+join and
# process start, unprofiled, with DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so
# (the collector thread) and with DLPROF_COLLECTOR=process too (the
# collector process, whose CPU no rusage of the program's counts: the
# "machine" clock is every CPU's busy time from /proc/stat), runs alternated, BENCH_STARTUP_REPS (5) repetitions; prints the medians of
# wall and CPU time per item, their ratios and what dlprof adds (targets,
# issue 11: thread create+join <= 2x, process start + <= 1 ms), and, as root,
# a seteuid call.
#
#   bench/startup.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: bench/startup.sh BUILD_DIR}
reps=${BENCH_STARTUP_REPS:-5}
prog=$build/bench/bench_startup
lib=$build/core/libdlprof.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
modes=("threads 2000" "spawn 200")
# Credential calls (root only): dlprof compares the caller's and the
# collector's credentials at each (process_calls.cc).
[ "$(id -u)" -eq 0 ] && modes+=("seteuid 2000")
# Every CPU's busy time so far, in ns (/proc/stat's first line: all but idle
# and iowait, in USER_HZ ticks).
busy_ns() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / { print ($2 + $3 + $4 + $7 + $8 + $9) * 1e9 / hz; exit }' /proc/stat
}
# Appends to the program's line the machine's busy time since $1 per item
# ($2 items), as a 4th column, after a moment for collector processes to
# finish. Meaningful on a quiet machine only.
with_busy() {
  local line
  read -r line
  sleep 0.2
  awk -v b0="$1" -v b1="$(busy_ns)" -v line="$line" -v n="$2" \
    'BEGIN { printf "%s %.0f\n", line, (b1 - b0) / n }'
}
for ((r = 0; r < reps; ++r)); do
  for mode in "${modes[@]}"; do
    set -- $mode
    busy0=$(busy_ns)
    env -u LD_PRELOAD DLPROF_SAMPLE=0 "$prog" "$1" "$2" | with_busy "$busy0" "$2" >>"$out/plain.$1"
    busy0=$(busy_ns)
    DLPROF_SAMPLE=1 DLPROF_OUT="$out/runs" LD_PRELOAD="$lib" "$prog" "$1" "$2" |
      with_busy "$busy0" "$2" >>"$out/dlprof.$1"
    busy0=$(busy_ns)
    DLPROF_SAMPLE=1 DLPROF_COLLECTOR=process DLPROF_OUT="$out/runs" LD_PRELOAD="$lib" \
      "$prog" "$1" "$2" | with_busy "$busy0" "$2" >>"$out/process.$1"
  done
done
# median FILE COLUMN
median() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %-7s %12s %12s %8s %12s %12s %8s\n' what clock "plain ns" "thread ns" ratio \
  "process ns" ratio "added ns"
for mode in "${modes[@]}"; do
  m=${mode% *}
  for col in 2 3 4; do
    p=$(median "$out/plain.$m" $col)
    d=$(median "$out/dlprof.$m" $col)
    q=$(median "$out/process.$m" $col)
    c=$(case $col in 2) echo wall ;; 3) echo cpu ;; 4) echo machine ;; esac)
    awk -v m="$m" -v c="$c" -v p="$p" -v d="$d" -v q="$q" \
      'BEGIN { printf "%-8s %-7s %12.0f %12.0f %8.2f %12.0f %8.2f %12.0f\n", m, c, p, d, d / p, q, q / p, q - p }'
  done
done
