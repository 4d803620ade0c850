#!/usr/bin/env bash
# What the audit hook (core/python_exec_hook.cc) costs a program: runs of
# one build, profiled, with the hook (DLPROF_PY_EXEC_HOOK=1) and without (0),
# alternated, BENCH_RUNS each:
#   - `import torch`: the process's CPU (user + system, all its threads),
#     and the share of its samples left "[unknown python code]";
#   - bench/audit_events.py: ns per call of a loop of sys._getframe()
#     (1,000,000 calls) and of open()+read() of a small file (100,000), each
#     raising an audit event; also unprofiled (no hook at all).
# One line per run; medians and ranges at the end.
#
#   bench/exec_hook_cost.sh [BUILD_DIR]   (default build)
#   BENCH_RUNS (7), BENCH_HZ (100)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${BENCH_RUNS:-7} hz=${BENCH_HZ:-100}
lib=$build/core/libdlprof.so
scratch=$(mktemp -d /tmp/dlprof-exec-hook-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
results=$scratch/results

profiled() {  # $1: hook 0/1, $2: output folder, then the command
  local hook=$1 out=$2
  shift 2
  DLPROF_SAMPLE=1 DLPROF_HZ=$hz DLPROF_PY_EXEC_HOOK=$hook DLPROF_OUT="$out" \
    LD_PRELOAD="$lib" "$@"
}

for ((i = 1; i <= runs; i++)); do
  for hook in 1 0; do
    out=$scratch/torch-$i-$hook
    cpu=$(profiled $hook "$out" /usr/bin/python3 -c \
      "import torch, resource; r = resource.getrusage(resource.RUSAGE_SELF); print(r.ru_utime + r.ru_stime)")
    "$build/tools/dlprof" report "$out" -o "$out/rep" >/dev/null 2>&1
    unknown=$(awk '{n=$NF; t+=n; if ($0 ~ /unknown python code/) u+=n} END {printf "%.1f", 100*u/t}' \
      "$out/rep/stacks.folded")
    echo "torch hook=$hook cpu_s=$cpu unknown_pct=$unknown" | tee -a "$results"
    for event in getframe open; do
      calls=1000000
      [[ $event == open ]] && calls=100000
      ns=$(profiled $hook "$scratch/ev-$i-$hook" /usr/bin/python3 bench/audit_events.py $event $calls)
      echo "event hook=$hook $ns" | tee -a "$results"
    done
  done
  for event in getframe open; do
    calls=1000000
    [[ $event == open ]] && calls=100000
    echo "event unprofiled $(/usr/bin/python3 bench/audit_events.py $event $calls)" | tee -a "$results"
  done
done

/usr/bin/python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f[0] == "torch":
        rows.setdefault(("torch cpu_s", f[1]), []).append(float(f[2].split("=")[1]))
        rows.setdefault(("torch unknown %", f[1]), []).append(float(f[3].split("=")[1]))
    else:
        rows.setdefault((f[2] + " ns/call", f[1]), []).append(float(f[3]))
for (what, how), v in sorted(rows.items()):
    print(f"{what:18} {how:11} median {statistics.median(v):9.3f}  [{min(v):.3f}-{max(v):.3f}]  n={len(v)}")
PY
