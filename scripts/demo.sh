#!/usr/bin/env bash
# Sets up, builds, profiles the example pipeline under `dlprof run` and writes
# the bottleneck report. This is the README's main command.
# Usage: scripts/demo.sh [SCENARIO]   (io-bound, decode-bound, model-bound, imbalanced, in-process)
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=${1:-decode-bound}
scripts/setup.sh
scripts/build.sh dlprof dlprof_cmd dlprof_example_pipeline
build_dir=${DLPROF_BUILD_DIR:-build}
"$build_dir/tools/dlprof" run -o dlprof-out -r report -- \
  "$build_dir/examples/pipeline/dlprof_example_pipeline" --scenario "$scenario"
echo "Open report/report.html, or: go tool pprof -top -tagfocus=stage=decode report/profile.pb.gz"
