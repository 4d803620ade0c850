#!/usr/bin/env bash
# The collector helpers' CPU on a Python training run, counted: each run of
# bench/python_train.py at 100 Hz goes under bench_reap_all, which reaps the
# helpers as orphans and writes their CPU and the program's by name
# (BENCH_REAP_CPU). Prints per run the program's CPU (python and the
# DataLoader workers it waited for), the helpers' and their share. Runs
# alternate between the builds given, so that load drifts hit each alike.
#
#   bench/helper_cost.sh LABEL=BUILD_DIR...   e.g. before=../old/build after=build
#   BENCH_REPS (3), BENCH_EPOCHS (4: the workers are forked again each epoch),
#   BENCH_HZ (100), DLPROF_COLLECTOR passes through (thread: no helpers).
set -euo pipefail
cd "$(dirname "$0")/.."
(($# > 0)) || { echo "usage: bench/helper_cost.sh LABEL=BUILD_DIR..." >&2; exit 2; }
reps=${BENCH_REPS:-3} epochs=${BENCH_EPOCHS:-4} hz=${BENCH_HZ:-100}
reap=build/bench/bench_reap_all
[ -x "$reap" ] || { echo "helper_cost: build $reap first (scripts/build.sh)" >&2; exit 1; }
scratch=$(mktemp -d /tmp/dlprof-helper-cost-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
for ((rep = 1; rep <= reps; rep++)); do
  for config in "$@"; do
    label=${config%%=*} dir=$(cd "${config#*=}" && pwd)
    rm -rf "$scratch/out"
    BENCH_REAP_CPU=$scratch/cpu "$reap" env DLPROF_SAMPLE=1 DLPROF_HZ="$hz" DLPROF_OUT="$scratch/out" \
      LD_PRELOAD="$dir/core/libdlprof.so" /usr/bin/python3 bench/python_train.py "$epochs" >/dev/null
    # (comm is cut to 15 characters: dlprof-collecto)
    awk -v rep="$rep" -v label="$label" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
      $1 == "command" { c = $2 } $1 ~ /^dlprof-collect/ { h += $2 }
      END { printf "%d %s program_cpu_s=%.3f helpers_cpu_s=%.3f share=%.3f load=%s\n", rep, label, c, h, (c > 0 ? h / c : 0), load }' \
      "$scratch/cpu"
  done
done
