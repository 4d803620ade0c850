#!/usr/bin/env bash
# Whole-process comparison of dlprof, gperftools' libprofiler and perf record
# on one fixed CPU workload (bench/workload.cc: a ~30-frame call chain, 1, 2
# and 8 threads), at 100 and 1000 Hz, runs alternated, several repetitions;
# then the long run (bytes per sample) and the example pipeline's step time.
#
#   bench/whole_process.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR must hold bench/bench_workload, bench/bench_count_samples,
# core/libdlprof.so and tools/dlprof (scripts/bench.sh builds them), and
# optionally examples/pipeline/dlprof_example_pipeline. OUT_DIR receives raw
# tab-separated results, one row per run (bench/summarize.py makes the table):
#   runs.tsv      the matrix: rep threads tool hz work cpu_s thread_cpu_s wall_s
#                 time_cpu_s time_wall_s samples weighted bytes dropped handler_ns report_s
#   long.tsv      the same columns, dlprof at 1000 Hz on one thread for >= 30 s
#   steady.tsv    the same columns: one thread, ~15 s of CPU, unprofiled and
#                 dlprof at 100 and 1000 Hz, alternated (steady-state overhead)
#   pipeline.tsv  rep mode median_step_s wall_s status
#   pipeline_baseline_summary.json  dlprof's own distortion measurement
#   floor.tsv     rep timer hz cpu_s signals: bench/timer_floor.cc, the cost of
#                 a bare timer signal here (no profiler), per timer kind
#   machine.txt   what it ran on
#
# cpu_s is the workload's own getrusage (every thread of the profiled process,
# profiler threads and signal handlers included); time_cpu_s is /usr/bin/time's
# user+sys of the whole command, which for perf adds the perf process itself.
#
# Knobs (environment): BENCH_REPS (4), BENCH_WORK (100 units of ~10 ms per
# thread with 1 and 2 threads), BENCH_WORK_MANY (25 per thread with 8),
# BENCH_THREADS ("1 2 8"), BENCH_HZ ("100 1000"), BENCH_TOOLS ("dlprof
# gperftools perf"; also dlprof-fp: fp unwinder, dlprof-posix: POSIX timer;
# each added tool costs ~20% more time), BENCH_LONG_WORK (3000 units, ~30 s),
# BENCH_STEADY_WORK (1500 units, ~15 s; 0 skips), BENCH_STEADY_REPS (3),
# BENCH_PIPELINE_REPS (3), BENCH_FLOOR_REPS (4), BENCH_GPERFTOOLS_LIB.
set -euo pipefail

if (($# != 2)); then
  echo "usage: bench/whole_process.sh BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)

reps=${BENCH_REPS:-4}
work=${BENCH_WORK:-100}
work_many=${BENCH_WORK_MANY:-25}
threads_list=${BENCH_THREADS:-"1 2 8"}
hz_list=${BENCH_HZ:-"100 1000"}
tools=${BENCH_TOOLS:-"dlprof gperftools perf"}
long_work=${BENCH_LONG_WORK:-3000}
steady_work=${BENCH_STEADY_WORK:-1500}
steady_reps=${BENCH_STEADY_REPS:-3}
pipeline_reps=${BENCH_PIPELINE_REPS:-3}
floor_reps=${BENCH_FLOOR_REPS:-4}
gperftools_lib=${BENCH_GPERFTOOLS_LIB:-/usr/lib/x86_64-linux-gnu/libprofiler.so.0}

workload=$build/bench/bench_workload
count=$build/bench/bench_count_samples
floor=$build/bench/bench_timer_floor
lib=$build/core/libdlprof.so
dlprof=$build/tools/dlprof
pipeline=$build/examples/pipeline/dlprof_example_pipeline
for f in "$workload" "$count" "$floor" "$lib" "$dlprof" /usr/bin/time; do
  [ -x "$f" ] || [ -f "$f" ] || { echo "whole_process: missing $f (run scripts/bench.sh)" >&2; exit 1; }
done

scratch=$(mktemp -d /tmp/dlprof-whole-process-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

log() { echo "whole_process: $*" >&2; }

# What the machine allows.
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "cpu_mhz: $(grep -m1 'cpu MHz' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "kernel: $(uname -r)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
  echo "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
  echo "loadavg_before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "dlprof_backends: $("$dlprof" backends 2>&1 | tr '\n' ';')"
} >"$out/machine.txt"

perf_ok=0
if command -v perf >/dev/null &&
   perf record -q -F 100 -g -o "$scratch/probe.data" -- true >/dev/null 2>"$scratch/probe.err"; then
  perf_ok=1
else
  log "perf record does not work here: $(head -c 300 "$scratch/probe.err" 2>/dev/null)"
fi
echo "perf_record: $([ $perf_ok = 1 ] && echo works || echo refused)" >>"$out/machine.txt"
gperftools_ok=0
[ -f "$gperftools_lib" ] && gperftools_ok=1
echo "gperftools: $([ $gperftools_ok = 1 ] && echo "$gperftools_lib" || echo missing)" >>"$out/machine.txt"

field() {  # field NAME LINE: the value of NAME=... in a "key=value ..." line
  sed -n "s/.*\b$1=\([^ ]*\).*/\1/p" <<<"$2" | head -1
}

header="rep	threads	tool	hz	work	cpu_s	thread_cpu_s	wall_s	time_cpu_s	time_wall_s	samples	weighted	bytes	dropped	handler_ns	report_s"

# run_one TABLE REP THREADS TOOL HZ WORK: runs the workload once and appends a row.
run_one() {
  local table=$1 rep=$2 threads=$3 tool=$4 hz=$5 units=$6
  local args=(--threads "$threads" --work "$units")
  local tf=$scratch/time wl_out=$scratch/workload.out
  local samples=NA weighted=NA bytes=NA dropped=NA handler=NA report=NA
  rm -rf "$scratch/dl" "$scratch/report" "$scratch/gp.prof" "$scratch/perf.data"
  case $tool in
    none)
      /usr/bin/time -f "%U %S %e" -o "$tf" "$workload" "${args[@]}" >"$wl_out" ;;
    dlprof|dlprof-fp|dlprof-posix)
      local backend=auto timer=auto
      [ "$tool" = dlprof-fp ] && backend=fp
      [ "$tool" = dlprof-posix ] && timer=posix
      /usr/bin/time -f "%U %S %e" -o "$tf" env DLPROF_SAMPLE=1 DLPROF_HZ="$hz" DLPROF_BACKEND=$backend \
        DLPROF_TIMER=$timer DLPROF_OUT="$scratch/dl" LD_PRELOAD="$lib" "$workload" "${args[@]}" >"$wl_out" ;;
    gperftools)
      /usr/bin/time -f "%U %S %e" -o "$tf" env CPUPROFILE="$scratch/gp.prof" CPUPROFILE_FREQUENCY="$hz" \
        LD_PRELOAD="$gperftools_lib" "$workload" "${args[@]}" >"$wl_out" 2>/dev/null ;;
    perf)
      /usr/bin/time -f "%U %S %e" -o "$tf" perf record -q -F "$hz" -g -o "$scratch/perf.data" -- \
        "$workload" "${args[@]}" >"$wl_out" 2>/dev/null ;;
  esac
  case $tool in
    dlprof*)
      local c
      c=$("$count" dlprof "$scratch/dl/latest" 2>/dev/null)
      samples=$(field samples "$c"); weighted=$(field weighted "$c"); bytes=$(field files_bytes "$c")
      dropped=$(field dropped "$c"); handler=$(field handler_ns "$c")
      /usr/bin/time -f "%e" -o "$scratch/report_time" "$dlprof" report "$scratch/dl/latest" \
        -o "$scratch/report" >/dev/null 2>&1 && report=$(tail -1 "$scratch/report_time") ;;
    gperftools)
      local c
      c=$("$count" gperftools "$scratch/gp.prof" 2>/dev/null)
      samples=$(field samples "$c"); weighted=$samples; bytes=$(field files_bytes "$c") ;;
    perf)
      samples=$(perf report -D -i "$scratch/perf.data" 2>/dev/null | grep -c PERF_RECORD_SAMPLE || true)
      weighted=$samples
      bytes=$(stat -c %s "$scratch/perf.data") ;;
  esac
  local line
  line=$(grep '^workload:' "$wl_out")
  read -r user sys elapsed <"$tf"
  local time_cpu
  time_cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' \
    "$rep" "$threads" "$tool" "$hz" "$units" "$(field cpu_s "$line")" "$(field thread_cpu_s "$line")" \
    "$(field wall_s "$line")" "$time_cpu" "$elapsed" "$samples" "$weighted" "$bytes" "$dropped" "$handler" \
    "$report" >>"$table"
}

# The matrix. Per thread count, one block of runs in rotating order: the
# unprofiled workload twice, each tool at each rate once.
configs=()
for hz in $hz_list; do
  configs+=("none:0")
  for tool in $tools; do
    case $tool in
      perf) [ $perf_ok = 1 ] || continue ;;
      gperftools) [ $gperftools_ok = 1 ] || continue ;;
    esac
    configs+=("$tool:$hz")
  done
done
echo "$header" >"$out/runs.tsv"
start=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
  block=0
  for threads in $threads_list; do
    units=$work
    ((threads > 2)) && units=$work_many
    n=${#configs[@]}
    for ((i = 0; i < n; i++)); do
      cfg=${configs[$(((i + rep + block) % n))]}
      run_one "$out/runs.tsv" "$rep" "$threads" "${cfg%%:*}" "${cfg##*:}" "$units"
    done
    block=$((block + 1))
  done
  log "repetition $rep/$reps done ($((SECONDS - start)) s)"
done

# The long run: bytes per sample once stacks are deduplicated, and report time.
echo "$header" >"$out/long.tsv"
if ((long_work > 0)); then
  run_one "$out/long.tsv" 1 1 dlprof 1000 "$long_work"
  log "long run done ($((SECONDS - start)) s)"
fi

# Steady state: long runs (15 s of CPU on one thread), unprofiled and dlprof at
# 100 and 1000 Hz, alternated, so that the per-process start and exit costs
# that dominate the 1 s runs above are small: what a long training job pays.
echo "$header" >"$out/steady.tsv"
if ((steady_work > 0)); then
  steady_configs=("none:0" "dlprof:100" "dlprof:1000")
  for ((rep = 1; rep <= steady_reps; rep++)); do
    for ((i = 0; i < 3; i++)); do
      cfg=${steady_configs[$(((i + rep) % 3))]}
      run_one "$out/steady.tsv" "$rep" 1 "${cfg%%:*}" "${cfg##*:}" "$steady_work"
    done
  done
  log "steady-state runs done ($((SECONDS - start)) s)"
fi

# The floor: a bare timer signal per sample, no profiler (bench/timer_floor.cc).
printf 'rep\ttimer\thz\tcpu_s\tsignals\n' >"$out/floor.tsv"
floor_configs=()
for hz in $hz_list; do floor_configs+=("none:$hz" "perf:$hz" "posix:$hz" "itimer:$hz"); done
for ((rep = 1; rep <= floor_reps; rep++)); do
  n=${#floor_configs[@]}
  for ((i = 0; i < n; i++)); do
    cfg=${floor_configs[$(((i + rep) % n))]}
    if line=$("$floor" --timer "${cfg%%:*}" --hz "${cfg##*:}" --work $((work / 2)) 2>/dev/null); then
      printf '%s\t%s\t%s\t%s\t%s\n' "$rep" "${cfg%%:*}" "${cfg##*:}" "$(field cpu_s "$line")" \
        "$(field signals "$line")" >>"$out/floor.tsv"
    fi
  done
done
log "timer floor done ($((SECONDS - start)) s)"

# The data-loading case: the example pipeline's median step time, profiled
# (100 Hz light, 1000 Hz) and not, alternated.
printf 'rep\tmode\tmedian_step_s\twall_s\tstatus\n' >"$out/pipeline.tsv"
if [ -x "$pipeline" ]; then
  modes=(none dlprof-100 dlprof-1000)
  for ((rep = 1; rep <= pipeline_reps; rep++)); do
    for ((i = 0; i < ${#modes[@]}; i++)); do
      mode=${modes[$(((i + rep) % ${#modes[@]}))]}
      rm -rf "$scratch/pdl"
      case $mode in
        none) env -u DLPROF_SAMPLE "$pipeline" --scenario decode-bound >"$scratch/pipe.out" 2>&1 || true ;;
        dlprof-*) env DLPROF_SAMPLE=1 DLPROF_HZ="${mode#dlprof-}" DLPROF_OUT="$scratch/pdl" \
                    "$pipeline" --scenario decode-bound >"$scratch/pipe.out" 2>&1 || true ;;
      esac
      s=$(grep '^summary:' "$scratch/pipe.out" | tail -1)
      printf '%s\t%s\t%s\t%s\t%s\n' "$rep" "$mode" "$(field median_step_s "$s")" "$(field wall_s "$s")" \
        "$(field status "$s")" >>"$out/pipeline.tsv"
    done
  done
  # dlprof's own measurement: the first 60 of 180 steps unsampled, then sampled.
  rm -rf "$scratch/pdl" "$scratch/preport"
  if env DLPROF_SAMPLE=1 DLPROF_BASELINE_STEPS=60 DLPROF_OUT="$scratch/pdl" \
       "$pipeline" --scenario decode-bound >"$scratch/pipe.out" 2>&1 &&
     "$dlprof" report "$scratch/pdl/latest" -o "$scratch/preport" >/dev/null 2>&1; then
    cp "$scratch/preport/summary.json" "$out/pipeline_baseline_summary.json"
  fi
  log "pipeline done ($((SECONDS - start)) s)"
else
  log "no example pipeline at $pipeline: its row stays TODO"
fi
echo "loadavg_after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
