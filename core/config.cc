#include "core/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "reports/utf8.h"

namespace dlprof {
namespace {

// Parses a whole decimal integer in [lo, hi]; false on anything else.
bool ParseInt(const char* s, long lo, long hi, int* out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = static_cast<int>(v);
  return true;
}

// The value as it may be echoed on a terminal: TerminalSafe (reports/utf8.h,
// header-only, the one escaper of dlprof's terminal lines: C0 and C1
// controls, DEL, bidi overrides and isolates become \xNN), at most 64 bytes
// shown. Only ParseConfig's warnings use it, once at start-up and never in a
// signal handler, so it may allocate.
std::string Printable(const char* value) { return TerminalSafe(value, 64); }

}  // namespace

const char* ModeName(Mode m) { return m == Mode::kDetailed ? "detailed" : "light"; }

Config ParseConfig(const std::function<const char*(const char*)>& getenv_fn,
                   const std::function<void(const std::string&)>& warn) {
  Config c;
  auto bad = [&](const char* var, const char* value, const std::string& expected,
                 const std::string& fallback) {
    warn(std::string("dlprof: ") + var + "='" + Printable(value) + "' is invalid (expected " + expected +
         "); using " + fallback);
  };

  if (const char* v = getenv_fn("DLPROF_SAMPLE")) {
    std::string s = v;
    if (s == "1" || s == "true" || s == "yes" || s == "on") {
      c.enabled = true;
    } else if (!(s.empty() || s == "0" || s == "false" || s == "no" || s == "off")) {
      bad("DLPROF_SAMPLE", v, "1 or 0", "0 (profiling off)");
    }
  }
  if (const char* v = getenv_fn("DLPROF_OUT")) {
    if (*v != '\0') c.out_dir = v;
    else bad("DLPROF_OUT", v, "a folder", c.out_dir);
  }
  if (const char* v = getenv_fn("DLPROF_MODE")) {
    std::string s = v;
    if (s == "detailed") c.mode = Mode::kDetailed;
    else if (s != "light") bad("DLPROF_MODE", v, "light or detailed", "light");
  }
  c.hz = c.mode == Mode::kDetailed ? 1000 : 100;
  if (const char* v = getenv_fn("DLPROF_HZ")) {
    int hz;
    if (ParseInt(v, 1, 10000, &hz)) c.hz = hz;
    else bad("DLPROF_HZ", v, "an integer from 1 to 10000", std::to_string(c.hz));
  }
  if (const char* v = getenv_fn("DLPROF_BACKEND")) {
    std::string s = v;
    if (s == "auto" || s == "cfi" || s == "libunwind" || s == "gperftools" || s == "fp") c.unwinder = s;
    else bad("DLPROF_BACKEND", v, "auto, cfi, libunwind, gperftools or fp", "auto");
  }
  if (const char* v = getenv_fn("DLPROF_TIMER")) {
    std::string s = v;
    if (s == "auto" || s == "perf" || s == "posix" || s == "itimer") c.timer = s;
    else bad("DLPROF_TIMER", v, "auto, perf, posix or itimer", "auto");
  }
  if (const char* v = getenv_fn("DLPROF_COLLECTOR")) {
    std::string s = v;
    if (s == "thread") c.collector_process = false;
    else if (s != "process") bad("DLPROF_COLLECTOR", v, "process or thread", "process");
  }
  if (const char* v = getenv_fn("DLPROF_WARMUP_STEPS")) {
    if (!ParseInt(v, 0, 1000000, &c.warmup_steps)) {
      bad("DLPROF_WARMUP_STEPS", v, "an integer >= 0", "2");
      c.warmup_steps = 2;
    }
  }
  if (const char* v = getenv_fn("DLPROF_BASELINE_STEPS")) {
    if (!ParseInt(v, 0, 1000000, &c.baseline_steps)) {
      bad("DLPROF_BASELINE_STEPS", v, "an integer >= 0", "0");
      c.baseline_steps = 0;
    }
  }
  if (const char* v = getenv_fn("DLPROF_SNAPSHOT_MS")) {
    if (!ParseInt(v, 1, 1000, &c.snapshot_ms)) {
      bad("DLPROF_SNAPSHOT_MS", v, "an integer from 1 to 1000", "10");
      c.snapshot_ms = 10;
    }
  }
  if (const char* v = getenv_fn("DLPROF_MAX_FRAMES")) {
    if (!ParseInt(v, 1, 512, &c.max_frames)) {
      bad("DLPROF_MAX_FRAMES", v, "an integer from 1 to 512", "128");
      c.max_frames = 128;
    }
  }
  if (const char* v = getenv_fn("DLPROF_AUTO_ANNOTATE")) {
    std::string s = v;
    if (s == "0" || s == "false" || s == "no" || s == "off") {
      c.auto_annotate = false;
    } else if (!(s == "1" || s == "true" || s == "yes" || s == "on")) {
      bad("DLPROF_AUTO_ANNOTATE", v, "1 or 0", "1");
    }
  }
  if (const char* v = getenv_fn("DLPROF_CHECK_REUSED_WALKS")) {
    std::string s = v;
    if (s == "1") {
      c.check_reused_walks = true;
    } else if (s != "0") {
      bad("DLPROF_CHECK_REUSED_WALKS", v, "1 or 0", "0");
    }
  }
  const std::pair<const char*, bool*> switches[] = {{"DLPROF_PY_WAKE", &c.py_code_wake},
                                                     {"DLPROF_PY_EXEC_HOOK", &c.py_exec_hook}};
  for (const auto& [name, field] : switches) {
    if (const char* v = getenv_fn(name)) {
      const std::string s = v;
      if (s == "0" || s == "1") *field = s == "1";
      else bad(name, v, "1 or 0", "1");
    }
  }
  return c;
}

}  // namespace dlprof
