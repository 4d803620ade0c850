#!/usr/bin/env bash
# Start-up costs side by side (bench/startup.cc): thread create+join and
# process start, unprofiled and with DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so,
# runs alternated, BENCH_STARTUP_REPS (5) repetitions; prints the medians and
# their ratios (targets, issue 11: thread create+join <= 2x, process start
# + <= 1 ms).
#
#   bench/startup.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: bench/startup.sh BUILD_DIR}
reps=${BENCH_STARTUP_REPS:-5}
prog=$build/bench/bench_startup
lib=$build/core/libdlprof.so
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((r = 0; r < reps; ++r)); do
  for mode in "threads 2000" "spawn 200"; do
    set -- $mode
    env -u LD_PRELOAD DLPROF_SAMPLE=0 "$prog" "$1" "$2" >>"$out/plain.$1"
    DLPROF_SAMPLE=1 DLPROF_OUT="$out/runs" LD_PRELOAD="$lib" "$prog" "$1" "$2" >>"$out/dlprof.$1"
  done
done
median() { awk '{print $2}' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-22s %12s %12s %8s\n' what "plain ns" "dlprof ns" ratio
for m in threads spawn; do
  p=$(median "$out/plain.$m")
  d=$(median "$out/dlprof.$m")
  awk -v m="$m" -v p="$p" -v d="$d" 'BEGIN { printf "%-22s %12s %12s %8.2f\n", m, p, d, d / p }'
done
