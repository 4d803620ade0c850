#!/usr/bin/env bash
# Report speed and memory at scale (issue: 8 processes x 250,000 samples in at
# most 5 s and 1 GiB), linearity in samples, and go tool pprof -proto merging
# the same eight profiles for comparison.
# Usage: bench/scale/report_scale.sh [BUILD_DIR]
#   REPS=5        runs per row (medians are printed; the machine is shared)
#   DLPROF=path   the dlprof command to measure (default BUILD_DIR/tools/dlprof),
#                 e.g. an older build for a before/after comparison
# Columns: median wall seconds, median CPU seconds (user + sys, which load
# inflates less than wall time), the largest max RSS, and the 1-minute load
# average before the row's first run and after its last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
dlprof=${DLPROF:-$build/tools/dlprof}
reps=${REPS:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
median() {
  sort -n | awk '{v[NR] = $1} END {printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
row() {  # row LABEL CMD...: runs CMD $reps times, prints one line
  local label=$1 before times=() cpus=() rss=0 line
  shift
  before=$(load)
  for ((i = 0; i < reps; i++)); do
    line=$(/usr/bin/time -f "%e %U %S %M" "$@" 2>&1 >/dev/null | tail -1)
    read -r wall user sys kib <<<"$line"
    times+=("$wall")
    cpus+=("$(awk -v u="$user" -v s="$sys" 'BEGIN {printf "%.2f", u + s}')")
    ((kib > rss)) && rss=$kib
  done
  printf "%-30s %8s %8s %8d   %5s -> %-5s\n" "$label" "$(printf '%s\n' "${times[@]}" | median)" \
    "$(printf '%s\n' "${cpus[@]}" | median)" $((rss / 1024)) "$before" "$(load)"
}
printf "%-30s %8s %8s %8s   %s\n" "input ($reps runs each)" "wall s" "CPU s" "RSS MiB" "load"
for samples in 62500 125000 250000; do
  python3 "$here/make_synthetic_run.py" "$tmp/run-$samples" --processes 8 --samples "$samples" \
    --binary "$build/tests/rt_workload"
  row "dlprof report 8 x $samples" "$dlprof" report "$tmp/run-$samples" -o "$tmp/rep-$samples"
done
# The same eight processes as eight pprof files, merged by pprof itself.
i=0
for f in "$tmp"/run-250000/*.dlprof; do
  "$dlprof" convert "$f" -o "$tmp/p$i.pb.gz" >/dev/null
  i=$((i + 1))
done
if command -v go >/dev/null; then
  row "go tool pprof -proto 8 files" go tool pprof -proto "$tmp"/p*.pb.gz
fi
