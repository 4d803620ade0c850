#!/usr/bin/env bash
# dlprof's own cost on a PyTorch training run, as the profile counts it: the
# collector threads' CPU time (collector_cpu_ns) and the signal handler's,
# for the main process and for its DataLoader workers, over the profiled CPU
# time. Each run is profiled at BENCH_HZ and reported; one line per run.
#
#   bench/collector_cost.sh [BUILD_DIR]   (default build)
#   BENCH_RUNS (3), BENCH_HZ (100), BENCH_EPOCHS (8)
#   BENCH_LIB: another libdlprof.so to profile with (an older build's, side
#   by side); the report is always BUILD_DIR's. Each run also prints the
#   main process's unwinder_state (the cfi tables' decode).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${BENCH_RUNS:-3} hz=${BENCH_HZ:-100} epochs=${BENCH_EPOCHS:-8}
lib=${BENCH_LIB:-$build/core/libdlprof.so}
scratch=$(mktemp -d /tmp/dlprof-collector-cost-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
for ((i = 1; i <= runs; i++)); do
  DLPROF_SAMPLE=1 DLPROF_HZ=$hz DLPROF_OUT="$scratch/out$i" LD_PRELOAD="$lib" \
    /usr/bin/python3 bench/python_train.py "$epochs" >/dev/null
  "$build/tools/dlprof" report "$scratch/out$i/latest" -o "$scratch/rep$i" >/dev/null 2>&1
  /usr/bin/python3 - "$scratch/rep$i/summary.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ps = d["processes"]
main = [p for p in ps if p["role"] == "main"]
rest = [p for p in ps if p["role"] != "main"]
def line(group):
    cpu = sum(p["cpu_s"] for p in group)
    col = sum(p["collector_s"] for p in group)
    return "%d proc, cpu %.2f s, collector %.3f s (%.1f%%)" % (len(group), cpu, col, 100 * col / cpu if cpu else 0)
prof = d["profiler"]
print("main: %s | workers: %s | all: collector %.3f s = %.2f%%, handler %.3f s = %.2f%% of profiled CPU"
      % (line(main), line(rest), prof["collector_s"], 100 * prof["collector_fraction"],
         prof["handler_s"], 100 * prof["handler_fraction"]))
PY
  strings -n 6 "$scratch/out$i"/latest/main-*.dlprof | grep -o '[0-9]* of [0-9]* objects decoded.*' | head -1 || true
done
