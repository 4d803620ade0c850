#!/usr/bin/env bash
# Sets up, builds and runs every test. This is the README's test command and
# what CI runs (.ci/run).
#
# After the normal build and its tests, the whole suite runs again under
# ASan+UBSan (build-asan) and under TSan (build-tsan), and each libFuzzer
# target gets a short smoke run (build-fuzz); see RELIABILITY.md.
# DLPROF_SANITIZERS=0 skips the sanitizer builds, DLPROF_FUZZ_SECONDS=0 the
# fuzz smoke run (default 20 s per target).
#
# If the normal build fails the script stops; any other failure (tests, a
# sanitizer build, the fuzz run) lets the other passes run and fails the
# script at the end, naming what failed. Each part says how long it took
# ("test: <part>: N s").
set -euo pipefail
cd "$(dirname "$0")/.."
failed=()
# What each failed test printed, shown again at the very end: CI keeps only
# the tail of the output, and the failures are far above it.
failure_notes=$(mktemp)
trap 'rm -f "$failure_notes"' EXIT
# Appends the output of the tests that failed in ctest's last run in build
# folder $1 (pass $2) to $failure_notes: the test's name, then, without
# gtest's boilerplate, the lines from its first failures on (gtest's
# "Failure", a sanitizer's report, a timeout), 24 at most, else its last 24.
# CI shows only the end of the output, and a few failures of 40 lines each
# pushed all but the last out of it. Call it only after a failed ctest:
# ctest leaves an older LastTestsFailed.log in place when all pass.
note_failures() {
  local dir=$1/Testing/Temporary pass=$2 name output marks
  [[ -s $dir/LastTestsFailed.log ]] || return 0
  marks='Failure|ERROR: |WARNING: |Timeout|terminate called|SUMMARY: '
  while IFS= read -r name; do
    name=${name#*:}
    output=$(awk -v t="Test: $name" 'index($0, t) && $0 ~ /^[0-9]+\/[0-9]+ Test: / && substr($0, index($0, t)) == t {p = 1; next}
        p && /^<end of output>/ {exit}
        p' "$dir/LastTest.log" | grep -v -E '^(\[ +(RUN|OK) +\]|\[(=+|-+)\]|Running main|Note: Google Test filter|Directory: |Output:$|-+$|$|\[  (PASSED|FAILED)  \]|Google Test trace:| *[0-9]+ FAILED TESTS?$)' || true)
    {
      echo "=== $pass: $name"
      if grep -q -E "$marks" <<<"$output"; then
        grep -E -A 10 -m 3 "$marks" <<<"$output" | grep -v '^--$' | head -n 24
      else
        tail -n 24 <<<"$output"
      fi
    } >>"$failure_notes"
    failed_names+=("$pass: $name")
  done <"$dir/LastTestsFailed.log"
}
failed_names=()
start=$SECONDS
scripts/setup.sh
echo "test: setup: $((SECONDS - start)) s" >&2
start=$SECONDS
scripts/build.sh
echo "test: build: $((SECONDS - start)) s" >&2
build_dir=${DLPROF_BUILD_DIR:-build}
start=$SECONDS
if ! ctest --test-dir "$build_dir" -j "$(nproc)" --output-on-failure --timeout 300; then
  failed+=(tests)
  note_failures "$build_dir" tests
fi
echo "test: suite: $((SECONDS - start)) s" >&2

# Runs the suite in build folder $2 built with sanitizers $1. Every process
# the tests start (the profiled programs, dlprof itself, forked workers)
# writes its ASan and TSan reports to $2/sanitizer-logs/ as well as failing
# (halt_on_error); any report there fails the run, even from a process whose
# exit status no test looks at. (UBSan, combined with ASan in GCC, ignores
# log_path: its reports go to stderr and fail the process with exit code 1.)
# $3 is a ctest regex of tests not run there (see the callers for why); $4,
# optional, VAR=value settings for the tests' environment.
run_sanitized() {
  local sanitize=$1 dir=$2 excluded=${3:-} settings=${4:-} start=$SECONDS
  # (set -e does not apply here: the caller tests the status.)
  if ! DLPROF_SANITIZE=$sanitize DLPROF_BUILD_DIR=$dir scripts/build.sh; then
    echo "test: $sanitize build failed" >&2
    return 1
  fi
  echo "test: $sanitize build: $((SECONDS - start)) s" >&2
  start=$SECONDS
  local logs=$PWD/$dir/sanitizer-logs
  rm -rf "$logs" && mkdir -p "$logs"
  local common="halt_on_error=1:log_path=$logs/report:log_exe_name=1"
  # verify_asan_link_order=0: `dlprof run` preloads libdlprof.so, which then
  # precedes libasan.so in the library list; that is harmless here (libdlprof
  # interposes no allocator), and libasan still comes before libc.
  # detect_leaks=0: the runtime keeps its collector for the life of the
  # process on purpose, and LSan cannot stop the threads of forked workers
  # ("Running thread ... was not suspended"), so it reports both as leaks.
  # die_after_fork=0: forked workers start dlprof's collector thread, which
  # TSan supports (it only warns by default).
  export ASAN_OPTIONS="$common:verify_asan_link_order=0:detect_leaks=0"
  export UBSAN_OPTIONS="$common:print_stacktrace=1"
  export TSAN_OPTIONS="$common:die_after_fork=0:second_deadlock_stack=1"
  local status=0
  echo "test: $sanitize: not run here: $excluded${settings:+; with $settings}" >&2
  # shellcheck disable=SC2086 # $settings is a list of words on purpose
  if ! env $settings ctest --test-dir "$dir" -j "$(nproc)" --output-on-failure --timeout 600 \
    -E "($excluded)|($sanitized_serial)"; then
    status=1
    note_failures "$dir" "$sanitize"
  fi
  # (Only if some are left: the TSan pass excludes the scenarios.)
  if ctest --test-dir "$dir" -N -R "$sanitized_serial" -E "$excluded" | grep -q 'Total Tests: [1-9]'; then
    # shellcheck disable=SC2086
    if ! env $settings ctest --test-dir "$dir" -j 1 --output-on-failure --timeout 600 \
      -R "$sanitized_serial" -E "$excluded"; then
      status=1
      note_failures "$dir" "$sanitize (one at a time)"
    fi
  fi
  unset ASAN_OPTIONS UBSAN_OPTIONS TSAN_OPTIONS
  if compgen -G "$logs/report*" >/dev/null; then
    echo "test: $sanitize reports from processes of the test run:" >&2
    for f in "$logs"/report*; do
      echo "=== $f" >&2
      head -n 60 "$f" >&2
    done
    status=1
  fi
  echo "test: $sanitize suite: $((SECONDS - start)) s, status $status" >&2
  return $status
}

# The verdict scenarios run after the others, one at a time: each profiles a
# two-worker pipeline on the machine's cores and checks which stage is the
# bottleneck; beside another test, under a sanitizer's slowdown, the
# bottleneck moved (io-bound came out cpu-bound, at a load of 5 on 2 cores).
sanitized_serial='^Scenarios/'
# Under ASan+UBSan every test runs but these:
# Scenarios/ (the verdict runs of the example): under ASan the example's own
# clock put the decode-bound scenario's wait for data at 15-19.5% of its
# step time, against the 20% line that makes it "high", in four of six runs
# on the quiet machine (dlprof's handler took 0.3% of it): ASan slows the
# instrumented model, not the uninstrumented libjpeg and I/O, and the known
# bottleneck moves, as under TSan (below). They run in the normal pass.
# Faults.StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes: a fork
# child hangs in about 1 run of 10 under GCC 12's ASan, and gdb shows where:
# in the child, dlprof's pthread_create of its collector (the fork handler)
# waits forever in ASan's own ThreadRegistry lock, which another parent
# thread (the test's thread churn) held at the fork; this ASan runtime does
# not hold that lock across fork(). Any fork child that starts a thread
# meets it there, with or without dlprof; the normal pass runs the test.
# PythonFrames.RobustnessMinuteAt1000HzNamesOnlyRealFunctions: the same
# hang, met by its forks (a third of its cycles fork while a background
# thread creates and joins threads): in a fresh-clone CI run a fork child
# wrote only its profile's header (the collector thread never started) and
# the parent waited for it until the test's kill at 100 s. It passed in 75 s
# in the same build here. The normal pass runs it.
# NativeWalkReuse.: the blocked thread's read() goes through libasan's
# interceptor, whose frame finds its caller by %rbp, which a walk from
# /proc/<tid>/syscall (sp and pc only) does not have: the walk ends there
# (2 frames: read, the interceptor), and the test needs the chain under it.
# The normal and TSan passes run it.
# TorchPipelineUnmarked., TorchPipelinePreload. and TorchPipelineDdp.: verdict runs as the
# Scenarios are, with the same trouble here: the augment-bound script's own
# clock put its wait at 0.05 under ASan (0.65-0.73 in the normal pass). They
# run in the normal pass.
# NoHarm.PythonHandlersOfSentSegvAndBusRunAsWithoutDlprof: under ASan the
# profiled python3 (libasan preloaded) hangs in about 1 run of 7, spinning
# at pc 0 with ASan's frame magic (0x41b58ab3) on the stack it jumped from:
# a sent SIGSEGV re-run through a handler address of 0 (session 27, 3 of 20
# runs by hand; twice in fresh-clone CI). Not found yet; RELIABILITY.md. The
# normal pass runs it (never failed there).
asan_excluded='^(NoHarm\.PythonHandlersOfSentSegvAndBusRunAsWithoutDlprof|NativeWalkReuse\..*|Scenarios/.*|TorchPipelineUnmarked\..*|TorchPipelinePreload\..*|TorchPipelineDdp\..*|Faults\.StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes|PythonFrames\.RobustnessMinuteAt1000HzNamesOnlyRealFunctions)$'
# Under TSan every test runs but those that cannot hold there (RELIABILITY.md):
# - AllUnwinders/: TSan delivers asynchronous signals at its next safe point,
#   with a copy of the interrupted context, so a sample's stack is not where
#   the thread was;
# - FpRulesTest.FindsTheCallerOfAFunctionInterruptedAtItsEntryOrExit: for the
#   same reason the fp unwinder's leaf rule, which reads the code at the pc,
#   is compiled out under TSan (that code may be unmapped by then);
# - Faults.ProgramsSigprofHandler*: TSan takes signals from the kernel into a
#   queue of its own and hands them later to the handler its table then
#   names, so a tick of dlprof's queued there when the program installs its
#   SIGPROF handler reaches that handler; dlprof cannot take it back;
# - Faults.SamplingNeverWaitsForTheLoaderLock: it checks a libunwind counter,
#   and libunwind cannot run under TSan (below); its cfi sibling,
#   Faults.CfiSamplingNeverAsksTheLoader, asks for the cfi unwinder, which
#   this pass replaces by frame pointers like every other (not yet run
#   under TSan);
# - Scenarios/: the verdict weighs the example's own code (the model) against
#   uninstrumented libjpeg and I/O, and TSan slows only the first, by far:
#   the known bottleneck moves (io-bound came out "none").
# - DiffCommand.: runs io-bound with 1 and 4 workers and expects the wait to
#   fall; under TSan the slowed model makes both runs model-bound (a change
#   of -0.000007 in the CI run of session 8), as for the Scenarios.
# - NoHarm.: the hostile programs behave differently under TSan without
#   dlprof: TSan's runtime has a thread of its own (pthread_exit from main
#   never ends the process, unshare(CLONE_NEWUSER) fails), opens files
#   (a seccomp filter on openat kills it) and reads the TSC; and several of
#   those tests ask for libunwind (see below). They run in the other passes.
# - CfiUnwinder.: it compares the cfi walk with libunwind's on live signal
#   frames: TSan hands signals over late with a copied context (as for
#   AllUnwinders/), and libunwind cannot run under TSan (below).
# - CfiHostile.: hostile programs run with and without dlprof, as NoHarm.
#   does (the same reasons), and with the cfi unwinder, which the TSan pass
#   replaces by frame pointers (below).
# - Faults.StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes: a fork
#   child of the stress program hung in 2 of about 8 runs under TSan, as it
#   does under ASan (above) where gdb found the sanitizer's thread registry
#   lock inherited held; under TSan not confirmed, see RELIABILITY.md. It
#   runs in the normal pass.
# - Unwinders/SignalStack.: they measure the handler's use of the program's
#   stack, and TSan runs handlers from its own queue, in a wrapper of its own,
#   and needs more than the 256 KiB stacks the tests paint;
# - TimerFallback.: the CPU shares are checked against the program's clocks,
#   which TSan's slowdown of the stage code skews.
# - PythonFrames.: they preload libdlprof.so into Debian's /usr/bin/python3,
#   which is not built with TSan: libtsan then loads after libc, dlprof's
#   collector thread starts through libc's pthread_create rather than TSan's,
#   and its first instrumented call crashes (SEGV at 0 in __tsan_func_entry)
#   before any sample, on any Python program. They run in the normal and
#   ASan passes (ASan works there, as verify_asan_link_order=0 lets it).
#   The same holds for every test that runs Debian's python3 profiled:
#   PythonPackage., PythonBootstrap., TorchAnnotations., TorchPipeline.
# - Runtime.CollectorCpuCounterMatchesTheKernelsCountOfItsThread: the
#   program counts every thread it did not start as dlprof's, and TSan starts
#   a background thread of its own.
# - Runtime.ForkChildrenInheritTheRowsAnEarlierChildAskedFor: it checks the
#   cfi tables' own counters, and this pass samples with frame pointers.
#   Runtime.AForkChildThatQuickExitsKeepsTheLibraryItLoadedAndRanIn: the
#   same, it asks for the cfi unwinder, whose tables make the helper read
#   the maps again.
# - Runtime.SleepingStageComesOutOffCpu: a stage's CPU time follows where its
#   CPU samples were (readers/tick_cpu_split.cc), and TSan delivers a sample
#   at its next safe point, often in the next stage: in a fresh-clone run
#   stage c's wall time went to the sleep after it (59 ms of its 100+).
#   Its collector-process twin, Runtime.CollectorProcessFindsTheSleepingStageOffCpu,
#   likewise: the sleep came out in 5 records, not at most 4 (session 27,
#   the first TSan pass under the collector process).
# The profiled programs sample with frame pointers (DLPROF_BACKEND=fp):
# libunwind's per-thread cache is freed by a thread-exit destructor that takes
# a lock after TSan has torn the thread down, which crashes every thread that
# took a sample when it exits (github.com/google/sanitizers/issues/943).
tsan_excluded='^(AllUnwinders/|DiffCommand\.|FpRulesTest\.FindsTheCallerOfAFunctionInterruptedAtItsEntryOrExit$|Faults\.ProgramsSigprofHandler|Faults\.SamplingNeverWaitsForTheLoaderLock$|Faults\.CfiSamplingNeverAsksTheLoader$|Scenarios/|NoHarm\.|CfiHostile\.|CfiUnwinder\.|TimerFallback\.|PythonFrames\.|PythonPackage\.|PythonBootstrap\.|TorchAnnotations\.|TorchPipeline|Unwinders/SignalStack\.|Faults\.StressForkExecDlopenMallocAt1000HzNeitherHangsNorCrashes$|Runtime\.CollectorCpuCounterMatchesTheKernelsCountOfItsThread$|Runtime\.ForkChildrenInheritTheRowsAnEarlierChildAskedFor$|Runtime\.AForkChildThatQuickExitsKeepsTheLibraryItLoadedAndRanIn$|Runtime\.SleepingStageComesOutOffCpu$|Runtime\.CollectorProcessFindsTheSleepingStageOffCpu$)'

# The tests that drive headless Chromium leave both sanitizer passes: their
# time goes to the browser, which no sanitizer instruments, and the report
# writers they start are run under the sanitizers by the report, golden and
# trace tests. About 130 s of test time per pass.
browser_tests='^(HtmlReport\.|HtmlTimeline\.|DiffCommand\.PageLoadsInChromiumWithoutErrors$|HostileTest\.HtmlRunsNoInjectedCodeInABrowser$)'
asan_excluded="$asan_excluded|$browser_tests"
tsan_excluded="$tsan_excluded|$browser_tests"

if [[ ${DLPROF_SANITIZERS:-1} != 0 ]]; then
  run_sanitized address,undefined build-asan "$asan_excluded" || failed+=(asan+ubsan)
  # (With the collector process, the default: its spawn calls glibc's clone
  # under TSan, whose own clone interceptor took it for a fork and reset
  # TSan's state, RELIABILITY.md.)
  run_sanitized thread build-tsan "$tsan_excluded" "DLPROF_BACKEND=fp" || failed+=(tsan)
fi
fuzz_seconds=${DLPROF_FUZZ_SECONDS:-20}
if [[ $fuzz_seconds != 0 ]]; then
  start=$SECONDS
  scripts/fuzz.sh "$fuzz_seconds" || failed+=(fuzz)
  echo "test: fuzz (build and ${fuzz_seconds} s per target): $((SECONDS - start)) s" >&2
fi
if ((${#failed[@]})); then
  if [[ -s $failure_notes ]]; then
    echo "test: what the failed tests printed (their failures, 24 lines each):" >&2
    cat "$failure_notes" >&2
    echo "test: the failed tests, by pass:" >&2
    printf '  %s\n' "${failed_names[@]}" >&2
  fi
  echo "test: FAILED: ${failed[*]}" >&2
  exit 1
fi
