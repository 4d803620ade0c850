#!/usr/bin/env bash
# Sets up, builds, profiles an example under `dlprof run` and writes the
# bottleneck report. This is the README's main command.
# Usage: scripts/demo.sh [SCENARIO]   the C++ example pipeline (io-bound, decode-bound,
#                                     model-bound, imbalanced, in-process)
#        scripts/demo.sh torch [SCENARIO [FLAG...]]   the PyTorch example,
#                                     examples/torch/train.py (augment-bound, io-bound,
#                                     model-bound, datapipe, spawn, forkserver, persistent,
#                                     in-process; flags such as --launcher go to train.py)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${DLPROF_BUILD_DIR:-build}
if [[ ${1:-} == torch ]]; then
  scenario=${2:-augment-bound}
  scripts/setup.sh
  scripts/build.sh dlprof dlprof_cmd dlprof_python_native
  "$build_dir/tools/dlprof" run -o dlprof-out -r report -- \
    /usr/bin/python3 examples/torch/train.py --scenario "$scenario" "${@:3}"
  echo "Open report/report.html, or: go tool pprof -top -tagfocus=stage=fetch report/profile.pb.gz"
  exit 0
fi
scenario=${1:-decode-bound}
scripts/setup.sh
scripts/build.sh dlprof dlprof_cmd dlprof_example_pipeline
"$build_dir/tools/dlprof" run -o dlprof-out -r report -- \
  "$build_dir/examples/pipeline/dlprof_example_pipeline" --scenario "$scenario"
echo "Open report/report.html, or: go tool pprof -top -tagfocus=stage=decode report/profile.pb.gz"
