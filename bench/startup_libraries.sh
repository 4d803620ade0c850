#!/usr/bin/env bash
# Per-process start and exit of an empty C program (no libstdc++ of its own),
# unprofiled and with DLPROF_SAMPLE=1 LD_PRELOAD= each library given, by
# `perf stat -e task-clock -r 100`, BENCH_STARTUP_REPS (5) alternated rounds;
# prints each one's sorted round times (ms) and the median added. Compares
# two builds of libdlprof side by side (issue 11: start + <= 1 ms); the run
# folder is on tmpfs, so the file system's inode allocation does not weigh.
#
#   bench/startup_libraries.sh LIB [LIB...]
set -euo pipefail
(($# > 0)) || { echo "usage: bench/startup_libraries.sh LIB [LIB...]" >&2; exit 2; }
reps=${BENCH_STARTUP_REPS:-5}
out=$(mktemp -d "${TMPDIR_FOR_RUNS:-/dev/shm}/dlprof-startup.XXXXXX")
trap 'rm -rf "$out"' EXIT
printf 'int main(void) { return 0; }\n' >"$out/empty.c"
cc -O2 -o "$out/empty" "$out/empty.c"
for ((r = 0; r < reps; ++r)); do
  env -u LD_PRELOAD perf stat -x, -e task-clock -r 100 "$out/empty" 2>>"$out/times.0" >/dev/null
  i=1
  for lib in "$@"; do
    DLPROF_SAMPLE=1 DLPROF_OUT="$out/runs" LD_PRELOAD="$lib" \
      perf stat -x, -e task-clock -r 100 "$out/empty" 2>>"$out/times.$i" >/dev/null
    i=$((i + 1))
  done
done
median() { cut -d, -f1 "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median "$out/times.0")
echo "unprofiled: $(cut -d, -f1 "$out/times.0" | sort -n | tr '\n' ' ')(median $base ms)"
i=1
for lib in "$@"; do
  m=$(median "$out/times.$i")
  echo "$lib: $(cut -d, -f1 "$out/times.$i" | sort -n | tr '\n' ' ')(median $m ms, added $(awk -v a="$m" -v b="$base" 'BEGIN{printf "%.2f", a-b}') ms)"
  i=$((i + 1))
done
