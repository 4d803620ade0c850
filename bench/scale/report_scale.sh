#!/usr/bin/env bash
# Report speed and memory at scale (issue: 8 processes x 250,000 samples in at
# most 5 s and 1 GiB), linearity in samples, and go tool pprof -proto merging
# the same eight profiles for comparison.
# Usage: bench/scale/report_scale.sh [BUILD_DIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
dlprof=$build/tools/dlprof
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
measure() {  # prints "wall_s max_rss_mib" of a command
  /usr/bin/time -f "%e %M" "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.2f %.0f\n", $1, $2 / 1024}'
}
printf "%-28s %10s %12s\n" "input" "wall s" "max RSS MiB"
for samples in 62500 125000 250000; do
  python3 "$here/make_synthetic_run.py" "$tmp/run-$samples" --processes 8 --samples "$samples" \
    --binary "$build/tests/rt_workload"
  read -r wall rss < <(measure "$dlprof" report "$tmp/run-$samples" -o "$tmp/rep-$samples")
  printf "%-28s %10s %12s\n" "dlprof report 8 x $samples" "$wall" "$rss"
done
# The same eight processes as eight pprof files, merged by pprof itself.
i=0
for f in "$tmp"/run-250000/*.dlprof; do
  "$dlprof" convert "$f" -o "$tmp/p$i.pb.gz" >/dev/null
  i=$((i + 1))
done
if command -v go >/dev/null; then
  read -r wall rss < <(measure go tool pprof -proto "$tmp"/p*.pb.gz)
  printf "%-28s %10s %12s\n" "go tool pprof -proto 8 files" "$wall" "$rss"
fi
