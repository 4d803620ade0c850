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
flags=() cflags=()
if [[ -n $sanitize ]]; then
  flags=("-DCMAKE_CXX_FLAGS=-fsanitize=$sanitize" "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=$sanitize")
  cflags=("-fsanitize=$sanitize")
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
# pkg-config: a C program built with nothing but the installed dlprof.pc
# (relocatable: its prefix comes from the .pc file's own folder).
pc_dir=$(dirname "$(find "$tmp/prefix" -name dlprof.pc | head -n 1)")
export PKG_CONFIG_PATH=$pc_dir
version=$("$tmp/prefix/bin/dlprof" --version)
[ "$version" = "dlprof $(pkg-config --modversion dlprof)" ] ||
  { echo "dlprof --version says '$version', dlprof.pc '$(pkg-config --modversion dlprof)'"; exit 1; }
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
cc "${cflags[@]}" -o "$tmp/consumer_pc" "$src/tests/install/consumer/consumer_pc.c" \
  $(pkg-config --cflags --libs dlprof) -Wl,-rpath,"$(pkg-config --variable=libdir dlprof)"
out=$(DLPROF_SAMPLE=1 DLPROF_OUT="$tmp/out_pc" "$tmp/consumer_pc")
[ "$out" = "version=${version#dlprof } enabled=1" ] || { echo "pkg-config consumer printed '$out'"; exit 1; }
"$tmp/prefix/bin/dlprof" report "$tmp/out_pc" -o "$tmp/report_pc" >/dev/null
grep -q '"consume_c"' "$tmp/report_pc/summary.json" || { echo "pkg-config consumer: stage missing"; exit 1; }
# The Python package: installed where that prefix's python3 looks, and found
# by the installed library (its bootstrap runs in a profiled python3).
site=$(sed -n 's/^DLPROF_PYTHON_INSTALL_DIR:STRING=//p' "$build/CMakeCache.txt")
[ -f "$tmp/prefix/$site/dlprof/__init__.py" ] || { echo "no Python package in $tmp/prefix/$site"; exit 1; }
ls "$tmp/prefix/$site"/dlprof/_native*.so >/dev/null || { echo "no dlprof._native in $site"; exit 1; }
lib=$(find "$tmp/prefix" -name libdlprof.so | head -n 1)
# (A sanitized library cannot be preloaded into the uninstrumented python3.)
if [[ -z $sanitize ]]; then
  got=$(DLPROF_SAMPLE=1 DLPROF_OUT="$tmp/pyout" LD_PRELOAD="$lib" /usr/bin/python3 -c \
    "import sys, os; print('_dlprof' in sys.modules, sys.modules['_dlprof'].__file__.startswith('$tmp/prefix/'), 'PYTHONPATH' in os.environ)")
  [ "$got" = "True True False" ] || { echo "installed bootstrap: python printed '$got'"; exit 1; }
fi
got=$(PYTHONPATH="$tmp/prefix/$site" /usr/bin/python3 -c "import dlprof; print(dlprof.enabled())")
[ "$got" = "False" ] || { echo "installed package unprofiled: '$got'"; exit 1; }
echo "install ok"
