#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking dlprof
# need. Idempotent: installs only what is missing.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  libunwind-dev libgoogle-perftools-dev google-perftools
  libboost-program-options-dev libbenchmark-dev libgtest-dev libgmock-dev
  libdw-dev libelf-dev zlib1g-dev nlohmann-json3-dev libjpeg-dev
  golang-go binutils
  # The standalone pprof's sources: tests/pprof_fidelity_test.cc builds it to
  # symbolize a stripped C program from PPROF_BINARY_PATH, as users do.
  golang-github-google-pprof-dev
  # clang and its runtimes (libFuzzer, the sanitizers) for the fuzz targets.
  clang-14 libclang-rt-14-dev
  # Headless Chromium for the HTML report's end-to-end test, with one font so
  # that its screenshots show text.
  chromium fonts-dejavu-core
  # The benchmarks: perf for the side-by-side columns, python3 for the table
  # (scripts/bench.sh).
  linux-perf python3
  # The Python frames' end-to-end tests (tests/python_frames_test.cc) profile
  # Debian's python3 running a torch DataLoader over PIL images; python3-dev's
  # headers check the interpreter structure offsets.
  python3-torch python3-pil python3-numpy python3-dev
  # The Python package's tests install it with pip into a virtualenv, offline.
  python3-pip python3-venv python3-setuptools python3-wheel
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
