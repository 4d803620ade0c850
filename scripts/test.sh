#!/usr/bin/env bash
# Sets up, builds and runs every test. This is the README's test command and
# what CI runs (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build_dir=${DLPROF_BUILD_DIR:-build}
ctest --test-dir "$build_dir" -j "$(nproc)" --output-on-failure --timeout 300
