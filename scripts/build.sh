#!/usr/bin/env bash
# Configures and builds dlprof into ${DLPROF_BUILD_DIR:-build} (Ninja, RelWithDebInfo).
# Extra arguments are CMake targets to build (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DLPROF_BUILD_DIR:-build}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDLPROF_WERROR=ON >/dev/null
jobs=$(nproc)
if (($# > 0)); then
  cmake --build "$build_dir" -j "$jobs" --target "$@"
else
  cmake --build "$build_dir" -j "$jobs"
fi
