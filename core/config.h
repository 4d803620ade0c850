// Runtime configuration, read once from the environment at start-up.
#ifndef DLPROF_CORE_CONFIG_H_
#define DLPROF_CORE_CONFIG_H_

#include <functional>
#include <string>

namespace dlprof {

enum class Mode { kLight, kDetailed };

struct Config {
  bool enabled = false;                 // DLPROF_SAMPLE
  std::string out_dir = "./dlprof-out";  // DLPROF_OUT
  int hz = 100;                         // DLPROF_HZ (default 100, or 1000 in detailed mode)
  Mode mode = Mode::kLight;             // DLPROF_MODE=light|detailed
  std::string unwinder = "auto";        // DLPROF_BACKEND
  std::string timer = "auto";           // DLPROF_TIMER
  int warmup_steps = 2;                 // DLPROF_WARMUP_STEPS (used by the reporter)
  int baseline_steps = 0;               // DLPROF_BASELINE_STEPS
  int snapshot_ms = 10;                 // DLPROF_SNAPSHOT_MS: buffer snapshots and wall ticks
  int max_frames = 128;                 // DLPROF_MAX_FRAMES
  bool auto_annotate = true;            // DLPROF_AUTO_ANNOTATE: torch.utils.data in Python
  // DLPROF_CHECK_REUSED_WALKS=1, a diagnostic: a blocked thread's walk taken
  // again (core/collector.h, NativeWalk) is walked anew too, and a
  // difference counted (blocked_walks_reuse_mismatched). Costs what the
  // reuse saves; for tests.
  bool check_reused_walks = false;
  // Diagnostics, for tests and measurements: DLPROF_PY_WAKE=0 turns off the
  // collector's wake for Python code it has not met (core/python_codes_seen.h),
  // DLPROF_PY_EXEC_HOOK=0 the audit hook's notes of exec()'d code
  // (core/python_exec_notes.h). Both name code freed soon after it ran.
  bool py_code_wake = true;
  bool py_exec_hook = true;
  // DLPROF_COLLECTOR=process|thread: where the collector runs. "process"
  // (the default since session 26) is the helper process of issue 11's
  // design (docs/ARCHITECTURE.md, "The collector process"): where it cannot
  // serve a process it falls back to the thread, and the profile says why.
  bool collector_process = true;
};

// Reads the configuration through `getenv_fn` (getenv in production). Every
// invalid value is reported by one call of `warn` with a one-line message
// naming the variable, and replaced by its default. Never throws.
Config ParseConfig(const std::function<const char*(const char*)>& getenv_fn,
                   const std::function<void(const std::string&)>& warn);

const char* ModeName(Mode m);

}  // namespace dlprof

#endif  // DLPROF_CORE_CONFIG_H_
