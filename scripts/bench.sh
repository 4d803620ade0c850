#!/usr/bin/env bash
# Builds what the benchmarks need and runs all of them: the micro benchmarks
# (annotations, unwinders, the Python frame walk, writer and reporter
# throughput), the whole-process comparison with gperftools and perf
# (bench/whole_process.sh) and the Python training run (bench/python_overhead.sh).
# Writes the raw results and table.md to OUT_DIR and prints the table; that
# table is what BENCHMARKS.md quotes.
#
#   scripts/bench.sh [OUT_DIR]     (default: build-bench/bench-results/<time>)
#
# Build folder: ${DLPROF_BENCH_BUILD_DIR:-build-bench}. Repetitions:
# BENCH_MICRO_REPS (3) and the BENCH_* knobs of bench/whole_process.sh.
# Takes about 10 minutes on a 2-core machine. Timing is never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=${DLPROF_BENCH_BUILD_DIR:-build-bench}
out=${1:-$build/bench-results/$(date +%Y%m%d-%H%M%S)}
micro_reps=${BENCH_MICRO_REPS:-3}

scripts/setup.sh
command -v python3 >/dev/null || { echo "bench: python3 is needed for the table" >&2; exit 1; }
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
jobs=$(nproc)
cmake --build "$build" -j "$jobs" --target dlprof dlprof_cmd bench_workload bench_count_samples \
  annotation_bench annotation_bench_so pipeline_bench unwinder_bench bench_startup python_walk_bench
# The example pipeline is the data-loading row; without it that row says TODO.
cmake --build "$build" -j "$jobs" --target dlprof_example_pipeline ||
  echo "bench: the example pipeline does not build; its row will say TODO" >&2

mkdir -p "$out/micro"
out=$(cd "$out" && pwd)
scratch=$(mktemp -d /tmp/dlprof-bench-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
log() { echo "bench: $*" >&2; }

# gbench NAME BINARY [ENV...]: one run of a Google Benchmark program, JSON
# kept; extra program arguments in the array gbench_args.
gbench_args=()
gbench() {
  local name=$1 binary=$2
  shift 2
  env -u DLPROF_SAMPLE "$@" "$build/bench/$binary" --benchmark_min_time=0.1 "${gbench_args[@]}" \
    --benchmark_out="$out/micro/$name.json" --benchmark_out_format=json >"$out/micro/$name.txt" 2>&1 ||
    log "$binary failed (see $out/micro/$name.txt)"
}

start=$SECONDS
for ((rep = 1; rep <= micro_reps; rep++)); do
  on=(DLPROF_SAMPLE=1 DLPROF_OUT="$scratch/dl")
  gbench "annotation_static_off_$rep" annotation_bench
  gbench "annotation_static_light_$rep" annotation_bench "${on[@]}" DLPROF_MODE=light DLPROF_HZ=100
  gbench "annotation_static_detailed_$rep" annotation_bench "${on[@]}" DLPROF_MODE=detailed DLPROF_HZ=1000
  gbench "annotation_so_off_$rep" annotation_bench_so
  gbench "annotation_so_light_$rep" annotation_bench_so "${on[@]}" DLPROF_MODE=light DLPROF_HZ=100
  # Every unwinder_bench iteration is a real signal, and its manual time only
  # the unwind: a short minimum time keeps fp's millions of iterations to a
  # few seconds. gperftools' unwinder takes ~1 ms a call here: once is enough.
  gbench_args=(--benchmark_min_time=0.02)
  ((rep == 1)) || gbench_args+=(--benchmark_filter='BM_Unwind/(fp|libunwind)/')
  gbench "unwinder_$rep" unwinder_bench
  gbench_args=()
  gbench "python_walk_$rep" python_walk_bench
  rm -rf "$scratch/dl"
  log "micro repetition $rep/$micro_reps done ($((SECONDS - start)) s)"
done
gbench pipeline_1 pipeline_bench
log "pipeline_bench done ($((SECONDS - start)) s)"

bench/whole_process.sh "$build" "$out"
bench/startup.sh "$build" | tee "$out/startup.txt"
log "start-up costs done ($((SECONDS - start)) s)"
# The Python training run (needs Debian's python3 with torch, PIL, numpy).
bench/python_overhead.sh "$build" "$out/python" | tee "$out/python.txt" ||
  log "bench/python_overhead.sh failed"
log "Python training runs done ($((SECONDS - start)) s)"
# The Python API's cost per call (ns), unprofiled and profiled.
for profiled in 0 1; do
  if ((profiled)); then
    PYTHONPATH="$build/python" DLPROF_SAMPLE=1 DLPROF_OUT="$scratch/dl" LD_PRELOAD="$build/core/libdlprof.so" \
      /usr/bin/python3 bench/python_api_bench.py
  else
    PYTHONPATH="$build/python" /usr/bin/python3 bench/python_api_bench.py
  fi
done | tee "$out/python_api.txt" || log "bench/python_api_bench.py failed"
rm -rf "$scratch/dl"
{
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null) ($(git -C "$root" status --porcelain 2>/dev/null | wc -l) paths uncommitted)"
  echo "duration_s: $((SECONDS - start))"
} >>"$out/machine.txt"
python3 bench/summarize.py "$out"
log "results in $out"
