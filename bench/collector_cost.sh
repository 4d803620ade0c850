#!/usr/bin/env bash
# dlprof's own cost on a PyTorch training run, as the profile counts it: the
# collector threads' CPU time (collector_cpu_ns) and the signal handler's,
# for the main process and for its DataLoader workers, over the profiled CPU
# time. Each run is profiled at BENCH_HZ and reported; one line per run.
#
#   bench/collector_cost.sh [BUILD_DIR]   (default build)
#   BENCH_RUNS (3), BENCH_HZ (100), BENCH_EPOCHS (8)
#   BENCH_TRAIN_ITEMS: items per epoch (bench/python_train.py's 640 if unset)
#   BENCH_LIB: another libdlprof.so to profile with (an older build's, side
#   by side); the report is always BUILD_DIR's. Each run also prints the
#   main process's unwinder_state (the cfi tables' decode).
#
#   BENCH_MARGINAL=1: the cost of a longer run over a shorter one, which is
#   what an hour of training pays: each round runs one epoch of
#   BENCH_TRAIN_ITEMS (2560) and one of 5x that (the same two workers, five
#   times their work), and the marginal share is (collector_long -
#   collector_short) / (cpu_long - cpu_short), per round and over all rounds.
#   Start-up costs (the main process's unwind tables, the workers' first
#   decodes and their files) fall out of it; what is left is the per-tick
#   cost of a steady run.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${BENCH_RUNS:-3} hz=${BENCH_HZ:-100} epochs=${BENCH_EPOCHS:-8}
lib=${BENCH_LIB:-$build/core/libdlprof.so}
scratch=$(mktemp -d /tmp/dlprof-collector-cost-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# Profiles one run ($1: epochs, $2: items per epoch or empty) into
# $scratch/out$3, reports it, prints its line and appends its totals
# (cpu, collector, handler; all, main, workers) to $scratch/totals.
profile_run() {
  local run_epochs=$1 items=$2 tag=$3
  BENCH_TRAIN_ITEMS=$items DLPROF_SAMPLE=1 DLPROF_HZ=$hz DLPROF_OUT="$scratch/out$tag" \
    LD_PRELOAD="$lib" /usr/bin/python3 bench/python_train.py "$run_epochs" >/dev/null
  "$build/tools/dlprof" report "$scratch/out$tag/latest" -o "$scratch/rep$tag" >/dev/null 2>&1
  /usr/bin/python3 - "$scratch/rep$tag/summary.json" "$tag" "$scratch/totals" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ps = d["processes"]
main = [p for p in ps if p["role"] == "main"]
rest = [p for p in ps if p["role"] != "main"]
def sums(group):
    return [sum(p[k] for p in group) for k in ("cpu_s", "collector_s", "handler_s")]
def line(group):
    cpu, col, _ = sums(group)
    return "%d proc, cpu %.2f s, collector %.3f s (%.1f%%)" % (len(group), cpu, col, 100 * col / cpu if cpu else 0)
prof = d["profiler"]
print("%s main: %s | workers: %s | all: collector %.3f s = %.2f%%, handler %.3f s = %.2f%% of profiled CPU"
      % (sys.argv[2], line(main), line(rest), prof["collector_s"], 100 * prof["collector_fraction"],
         prof["handler_s"], 100 * prof["handler_fraction"]))
with open(sys.argv[3], "a") as out:
    out.write(json.dumps({"tag": sys.argv[2], "all": sums(ps), "main": sums(main), "workers": sums(rest)}) + "\n")
PY
}

if [[ ${BENCH_MARGINAL:-0} == 1 ]]; then
  short=${BENCH_TRAIN_ITEMS:-2560}
  long=$((short * 5))
  for ((i = 1; i <= runs; i++)); do
    profile_run 1 "$short" "short$i"
    profile_run 1 "$long" "long$i"
  done
  /usr/bin/python3 - "$scratch/totals" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
short = [r for r in rows if r["tag"].startswith("short")]
long_ = [r for r in rows if r["tag"].startswith("long")]
def marginal(pairs, group):
    d = [[l[group][k] - s[group][k] for k in range(3)] for s, l in pairs]
    cpu = sum(x[0] for x in d)
    return 100 * sum(x[1] for x in d) / cpu, 100 * sum(x[2] for x in d) / cpu
pairs = list(zip(short, long_))
for i, p in enumerate(pairs, 1):
    c, h = marginal([p], "all")
    print("round %d marginal: collector %.2f%%, handler %.2f%%, together %.2f%%" % (i, c, h, c + h))
for group in ("all", "main", "workers"):
    c, h = marginal(pairs, group)
    print("marginal %-7s (%d rounds): collector %.2f%%, handler %.2f%%, together %.2f%% of the added CPU"
          % (group, len(pairs), c, h, c + h))
PY
  exit 0
fi

for ((i = 1; i <= runs; i++)); do
  profile_run "$epochs" "${BENCH_TRAIN_ITEMS:-}" "$i"
  strings -n 6 "$scratch/out$i"/latest/main-*.dlprof | grep -o '[0-9]* of [0-9]* objects decoded.*' | head -1 || true
done
