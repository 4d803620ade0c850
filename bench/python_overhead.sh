#!/usr/bin/env bash
# Whole-process cost of dlprof on a Python training run (issue 12: <= 2% CPU at
# 100 Hz): bench/python_train.py (a tiny conv net, a DataLoader with 2 worker
# processes doing PIL and pure-Python work) run with Debian's python3,
# unprofiled and with DLPROF_SAMPLE=1 LD_PRELOAD=libdlprof.so at each rate,
# runs alternated (the order rotates each repetition), BENCH_PY_REPS (5)
# repetitions. Each run's CPU time is /usr/bin/time's user+sys: the whole
# process tree (python, its threads, dlprof's collector, and the DataLoader
# workers, which python reaps), run under bench_reap_all, a child subreaper
# that reaps every orphan too: dlprof's collector processes
# (DLPROF_COLLECTOR=process) leave python's tree at their start. Prints, per rate, the medians and the ratio
# profiled/unprofiled of CPU and wall time: the median of the per-repetition
# ratios (each profiled run against the unprofiled run of its repetition) and
# their min-max, and the ratio of the medians. For the profiled runs also the
# samples, the share of them with Python frames (from the report of the
# repetition's run), the signal handler's mean time per sample, and its total
# as a share of the unprofiled run's CPU time (handler_ns summed over every
# process: the part of the overhead that run-to-run noise cannot hide).
#
#   bench/python_overhead.sh BUILD_DIR [OUT_DIR]
#
# BUILD_DIR must hold core/libdlprof.so, tools/dlprof and
# bench/bench_count_samples. OUT_DIR (default: a temporary folder, removed)
# receives runs.tsv (one row per run) and machine.txt. Knobs: BENCH_PY_REPS
# (5), BENCH_PY_HZ ("100 1000"), BENCH_PY_EXTRA (more MODE:HZ configs; default
# "dlprof-noauto:100": DLPROF_AUTO_ANNOTATE=0, so that dlprof@100 against it is
# the cost of the automatic torch.utils.data annotations; "dlprof-fp:100":
# DLPROF_BACKEND=fp, the frame-pointer unwinder; "dlprof-libunwind:100";
# "dlprof-posix:100": DLPROF_TIMER=posix, POSIX CPU-time timers instead of
# perf events; "dlprof-thread:100": DLPROF_COLLECTOR=thread, the collector
# as a thread of the program: every other configuration runs the default,
# the helper process), BENCH_PY_EPOCHS (8: ~6 s a run on 2 cores),
# BENCH_PY_PYTHON (/usr/bin/python3).
set -euo pipefail

if (($# < 1 || $# > 2)); then
  echo "usage: bench/python_overhead.sh BUILD_DIR [OUT_DIR]" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd)
reps=${BENCH_PY_REPS:-5}
hz_list=${BENCH_PY_HZ:-"100 1000"}
extra_configs=${BENCH_PY_EXTRA-dlprof-noauto:100}
epochs=${BENCH_PY_EPOCHS:-8}
python=${BENCH_PY_PYTHON:-/usr/bin/python3}
train=$here/python_train.py
lib=$build/core/libdlprof.so
dlprof=$build/tools/dlprof
count=$build/bench/bench_count_samples
reap=$build/bench/bench_reap_all
for f in "$lib" "$dlprof" "$count" "$reap" "$python" /usr/bin/time; do
  [ -e "$f" ] || { echo "python_overhead: missing $f" >&2; exit 1; }
done
"$python" -c 'import torch, PIL, numpy' 2>/dev/null ||
  { echo "python_overhead: $python has no torch, PIL or numpy (scripts/setup.sh)" >&2; exit 1; }

scratch=$(mktemp -d /tmp/dlprof-python-overhead-XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if (($# == 2)); then
  mkdir -p "$2"
  out=$(cd "$2" && pwd)
else
  out=$scratch/out
  mkdir -p "$out"
fi
log() { echo "python_overhead: $*" >&2; }
field() {  # field NAME LINE: the value of NAME=... in a "key=value ..." line
  sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git -C "$here" rev-parse --short HEAD 2>/dev/null) ($(git -C "$here" status --porcelain 2>/dev/null | wc -l) paths uncommitted)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "kernel: $(uname -r)"
  echo "python: $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)')"
  echo "loadavg_before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

# run_one REP MODE HZ: one training run, one row of runs.tsv.
run_one() {
  local rep=$1 mode=$2 hz=$3
  local tf=$scratch/time log_out=$scratch/train.out dl=$scratch/dl-$rep-$hz
  local samples=NA weighted=NA handler=NA py_share=NA
  if [ "$mode" = none ]; then
    /usr/bin/time -f "%U %S %e" -o "$tf" "$reap" env -u LD_PRELOAD -u DLPROF_SAMPLE \
      "$python" "$train" "$epochs" >"$log_out" 2>&1
  else
    rm -rf "$dl"
    local backend=auto auto_annotate=1 timer=auto collector=process
    [ "$mode" = dlprof-fp ] && backend=fp
    [ "$mode" = dlprof-thread ] && collector=thread
    [ "$mode" = dlprof-libunwind ] && backend=libunwind
    [ "$mode" = dlprof-noauto ] && auto_annotate=0
    [ "$mode" = dlprof-posix ] && timer=posix
    /usr/bin/time -f "%U %S %e" -o "$tf" "$reap" env DLPROF_SAMPLE=1 DLPROF_HZ="$hz" \
      DLPROF_BACKEND=$backend DLPROF_TIMER=$timer DLPROF_COLLECTOR=$collector \
      DLPROF_AUTO_ANNOTATE=$auto_annotate DLPROF_OUT="$dl" LD_PRELOAD="$lib" "$python" "$train" "$epochs" \
      >"$log_out" 2>&1
  fi
  local line
  line=$(grep '^train:' "$log_out") || { log "run failed:"; cat "$log_out" >&2; exit 1; }
  read -r user sys elapsed <"$tf"
  if [ "$mode" != none ]; then
    local c
    c=$("$count" dlprof "$dl/latest" 2>/dev/null)
    samples=$(field samples "$c"); weighted=$(field weighted "$c")
    handler=$(awk -v h="$(field handler_ns "$c")" -v s="$samples" 'BEGIN { if (s > 0) printf "%.0f", h / s; else print "NA" }')
    # Weighted samples whose stack holds a frame of python_train.py.
    if "$dlprof" report "$dl/latest" -o "$scratch/report" >/dev/null 2>&1; then
      py_share=$(awk '{ n = $NF; t += n; if ($0 ~ /\(python_train\.py:/) p += n }
                      END { if (t > 0) printf "%.3f", p / t; else print "NA" }' "$scratch/report/stacks.folded")
    fi
    rm -rf "$dl" "$scratch/report"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%.3f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$mode" "$hz" "$user" "$sys" \
    "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" "$elapsed" "$(field wall_s "$line")" \
    "$(field loss "$line")" "$samples" "$weighted" "$py_share" "$handler" >>"$out/runs.tsv"
}

printf 'rep\tmode\thz\tuser_s\tsys_s\tcpu_s\twall_s\ttrain_wall_s\tloss\tsamples\tweighted\tpy_share\thandler_ns_per_sample\n' \
  >"$out/runs.tsv"
configs=("none:0")
for hz in $hz_list; do configs+=("dlprof:$hz"); done
for cfg in $extra_configs; do configs+=("$cfg"); done
n=${#configs[@]}
start=$SECONDS
"$python" "$train" 1 >/dev/null 2>&1 || true  # warm the page cache (torch's import)
for ((rep = 1; rep <= reps; rep++)); do
  for ((i = 0; i < n; i++)); do
    cfg=${configs[$(((i + rep) % n))]}
    run_one "$rep" "${cfg%%:*}" "${cfg##*:}"
  done
  log "repetition $rep/$reps done ($((SECONDS - start)) s, load $(cut -d' ' -f1 /proc/loadavg))"
done
echo "loadavg_after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
echo "duration_s: $((SECONDS - start))" >>"$out/machine.txt"

cat "$out/machine.txt"
"$python" - "$out/runs.tsv" <<'EOF'
import csv, random, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
base = {r["rep"]: r for r in rows if r["mode"] == "none"}
def med(v):
    return statistics.median(v) if v else float("nan")
def bootstrap_median(v, rounds=2000):
    # A 90% interval for the median of the per-repetition ratios: medians of
    # resamples (with replacement, fixed seed), their 5th and 95th centiles.
    if len(v) < 2:
        return float("nan"), float("nan")
    rng = random.Random(1)
    ms = sorted(statistics.median(rng.choices(v, k=len(v))) for _ in range(rounds))
    return ms[int(0.05 * rounds)], ms[int(0.95 * rounds) - 1]
print("%-14s %4s %7s %7s  %-42s %-42s %7s %8s %8s %8s" % (
    "mode", "runs", "cpu_s", "wall_s", "cpu ratio med [min-max]", "wall ratio med [min-max]",
    "samples", "py_share", "handler", "handler%"))
for m, hz in sorted({(r["mode"], r["hz"]) for r in rows}, key=lambda k: (k[0] != "none", int(k[1]), k[0])):
    rs = [r for r in rows if r["mode"] == m and r["hz"] == hz]
    mode = "none" if m == "none" else "%s@%s" % (m, hz)
    cpu = [float(r["cpu_s"]) for r in rs]
    wall = [float(r["wall_s"]) for r in rs]
    line = "%-14s %4d %7.3f %7.3f" % (mode, len(rs), med(cpu), med(wall))
    if m != "none":
        cells = []
        for key in ("cpu_s", "wall_s"):
            ratios = [float(r[key]) / float(base[r["rep"]][key]) for r in rs if r["rep"] in base]
            of_medians = med([float(r[key]) for r in rs]) / med([float(b[key]) for b in base.values()])
            lo, hi = bootstrap_median(ratios)
            cells.append("%.3f [%.3f-%.3f] (%.3f) ci90 %.3f-%.3f" % (
                med(ratios), min(ratios), max(ratios), of_medians, lo, hi))
        nums = lambda k: [float(r[k]) for r in rs if r[k] != "NA"]
        shares = [float(r["samples"]) * float(r["handler_ns_per_sample"]) * 1e-9 /
                  float(base[r["rep"]]["cpu_s"]) for r in rs
                  if r["rep"] in base and "NA" not in (r["samples"], r["handler_ns_per_sample"])]
        line += "  %-42s %-42s %7.0f %8.3f %6.0fus %7.2f%%" % (
            cells[0], cells[1], med(nums("samples")), med(nums("py_share")),
            med(nums("handler_ns_per_sample")) / 1e3, 100 * med(shares))
    print(line)
print("ratios: median of the per-repetition ratios [min-max], (ratio of the medians),"
      " ci90: a bootstrap 90% interval of that median;"
      " py_share: weighted samples with a python_train.py frame; handler: mean per sample;"
      " handler%: all handler time / the unprofiled run's CPU time (median)")
EOF
