#!/usr/bin/env bash
# Start-up costs side by side (bench/startup.cc): thread create+join and
# process start, unprofiled and with DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so,
# runs alternated, BENCH_STARTUP_REPS (5) repetitions; prints the medians of
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
for ((r = 0; r < reps; ++r)); do
  for mode in "${modes[@]}"; do
    set -- $mode
    env -u LD_PRELOAD DLPROF_SAMPLE=0 "$prog" "$1" "$2" >>"$out/plain.$1"
    DLPROF_SAMPLE=1 DLPROF_OUT="$out/runs" LD_PRELOAD="$lib" "$prog" "$1" "$2" >>"$out/dlprof.$1"
  done
done
# median FILE COLUMN
median() { awk -v c="$2" '{print $c}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-8s %-5s %12s %12s %8s %12s\n' what clock "plain ns" "dlprof ns" ratio "added ns"
for mode in "${modes[@]}"; do
  m=${mode% *}
  for col in 2 3; do
    p=$(median "$out/plain.$m" $col)
    d=$(median "$out/dlprof.$m" $col)
    awk -v m="$m" -v c="$([ $col = 2 ] && echo wall || echo cpu)" -v p="$p" -v d="$d" \
      'BEGIN { printf "%-8s %-5s %12.0f %12.0f %8.2f %12.0f\n", m, c, p, d, d / p, d - p }'
  done
done
