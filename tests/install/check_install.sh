#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a consumer project with
# find_package(dlprof), runs it profiled, and checks that it wrote a profile.
# Usage: check_install.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# A sanitized libdlprof.so only works in a program built with the same
# sanitizer (its runtime must come before libc), so the consumer gets the
# build's DLPROF_SANITIZE too.
sanitize=$(sed -n 's/^DLPROF_SANITIZE:STRING=//p' "$build/CMakeCache.txt")
flags=()
if [[ -n $sanitize ]]; then
  flags=("-DCMAKE_CXX_FLAGS=-fsanitize=$sanitize" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=$sanitize")
fi
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  "${flags[@]}" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
out=$(DLPROF_SAMPLE=1 DLPROF_OUT="$tmp/out" "$tmp/consumer/consumer")
[ "$out" = "enabled=1" ] || { echo "consumer printed '$out', expected enabled=1"; exit 1; }
ls "$tmp"/out/*/main-*.dlprof >/dev/null || { echo "no profile written"; exit 1; }
# The installed command reports it.
"$tmp/prefix/bin/dlprof" report "$tmp/out" -o "$tmp/report" >/dev/null
grep -q '"consume"' "$tmp/report/summary.json" || { echo "stage missing from the report"; exit 1; }
echo "install ok"
