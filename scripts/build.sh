#!/usr/bin/env bash
# Configures and builds dlprof into ${DLPROF_BUILD_DIR:-build} (Ninja, RelWithDebInfo).
# Extra arguments are CMake targets to build (default: everything).
# DLPROF_SANITIZE=address,undefined or thread builds every target (library,
# tests, the programs they profile, the example) with those sanitizers and
# without the benchmarks; use its own DLPROF_BUILD_DIR (scripts/test.sh uses
# build-asan and build-tsan).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DLPROF_BUILD_DIR:-build}
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLPROF_WERROR=ON)
if [[ -n ${DLPROF_SANITIZE:-} ]]; then
  cmake_args+=("-DDLPROF_SANITIZE=$DLPROF_SANITIZE" -DDLPROF_BUILD_BENCH=OFF)
fi
cmake -S . -B "$build_dir" -G Ninja "${cmake_args[@]}" >/dev/null
jobs=$(nproc)
if (($# > 0)); then
  cmake --build "$build_dir" -j "$jobs" --target "$@"
else
  cmake --build "$build_dir" -j "$jobs"
fi
