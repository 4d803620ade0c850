#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz, clang with ASan+UBSan) into
# ${DLPROF_FUZZ_BUILD_DIR:-build-fuzz} and runs each for SECONDS (default 60),
# one per core at a time (DLPROF_FUZZ_JOBS), starting from its seed corpus in
# tests/fuzz/corpus/.
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]     targets: dlprof gperftools pprof pprof_gzip elf
#
# New inputs go to the build folder's corpus/<target>/ (kept between runs, so
# longer runs build on shorter ones; the seeds in tests/ stay as they are).
# A crash, sanitizer report, leak, timeout (10 s per input) or out-of-memory
# (512 MiB of RSS, or one allocation past it: the bounds of issue 15) stops
# that target and fails the script; the input is kept as
# <build>/artifacts/<target>-crash-<sha1>: copy it to
# tests/fuzz/regressions/<target>-<what-it-broke> (tests/fuzz_regression_test.cc
# replays it), fix the bug, and run again. Prints one line per target: runs,
# exec/s, coverage, corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(dlprof gperftools pprof pprof_gzip elf eh_frame)
build_dir=${DLPROF_FUZZ_BUILD_DIR:-build-fuzz}

cc=$(command -v clang-14 || command -v clang || true)
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z $cc || -z $cxx ]]; then
  echo "fuzz: clang is missing (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi
CC=$cc CXX=$cxx cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDLPROF_FUZZ=ON -DDLPROF_BUILD_TESTS=OFF -DDLPROF_BUILD_BENCH=OFF \
  -DDLPROF_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target "${targets[@]/%/_fuzzer}" >/dev/null

mkdir -p "$build_dir/artifacts" "$build_dir/logs"
# Inputs that read /proc or the disk (gperftools memory maps, ELF modules)
# look at files; keep them out of the user's TMPDIR clutter.
export TMPDIR=${TMPDIR:-/tmp}
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# Targets run side by side, one per core (each is one process): one after
# the other, the CI's fuzz pass took 6 x SECONDS.
jobs=${DLPROF_FUZZ_JOBS:-$(nproc)}
run_target() {  # run_target T: its log, and its status in logs/T.status
  local t=$1 corpus="$build_dir/corpus/$1" log="$build_dir/logs/$1.log" status=ok
  mkdir -p "$corpus"
  # Seeds first: libFuzzer merges the second folder into the first.
  if ! "$build_dir/tests/fuzz/${t}_fuzzer" "$corpus" "tests/fuzz/corpus/$t" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=512 -malloc_limit_mb=512 \
      -max_len=65536 -print_final_stats=1 \
      -artifact_prefix="$build_dir/artifacts/$t-" >"$log" 2>&1; then
    status="FAILED: $(grep -m1 -oE 'runtime error: [^0-9]*|ERROR: [A-Za-z]+: [^ ]+( [^ ]+)?|deadly signal|timeout|out-of-memory' "$log" || echo see "$log")"
  fi
  echo "$status" >"$build_dir/logs/$t.status"
}
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_target "$t" &
done
wait
failed=()
printf '%-11s %8s %10s %7s %6s %7s  %s\n' target seconds runs exec/s cov corpus result
for t in "${targets[@]}"; do
  log="$build_dir/logs/$t.log"
  status=$(cat "$build_dir/logs/$t.status" 2>/dev/null || echo "FAILED: no status")
  [[ $status == ok ]] || failed+=("$t")
  stat() { awk -v k="$1" '$1 == "stat::"k":" {print $2}' "$log" | tail -1; }
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | awk '{print $2}')
  printf '%-11s %8s %10s %7s %6s %7s  %s\n' "$t" "$seconds" "$(stat number_of_executed_units)" \
    "$(stat average_exec_per_sec)" "${cov:-?}" "$(find "$build_dir/corpus/$t" -type f | wc -l)" "$status"
done
if ((${#failed[@]})); then
  for t in "${failed[@]}"; do
    echo "--- $t: $build_dir/logs/$t.log" >&2
    grep -A30 -m1 -E 'runtime error|^==[0-9]+==ERROR|deadly signal|ALARM|out-of-memory' "$build_dir/logs/$t.log" >&2 ||
      tail -30 "$build_dir/logs/$t.log" >&2
    ls "$build_dir/artifacts/$t-"* 2>/dev/null | sed 's/^/crash input: /' >&2
  done
  exit 1
fi
