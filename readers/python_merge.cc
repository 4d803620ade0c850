#include "readers/python_merge.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace dlprof {
namespace {

// The C functions of the eval loop, most specific first. A stack's eval
// frames are those of the first name it holds: since 3.6 the loop is
// _PyEval_EvalFrameDefault, and PyEval_EvalFrameEx (the loop itself up to
// 3.5) and _PyEval_EvalFrame (a static inline, a real frame only when not
// inlined) are wrappers that call it; counting them too would give one C
// call two eval frames.
constexpr const char* kEvalFunctions[] = {"_PyEval_EvalFrameDefault", "PyEval_EvalFrameEx",
                                          "_PyEval_EvalFrame"};
constexpr int kEvalRanks = sizeof(kEvalFunctions) / sizeof(kEvalFunctions[0]);

// The interpreter's call machinery: native frames between a caller's eval
// frame and the C function or eval frame it calls, which the Python frames
// say better. A trailing '*' matches any rest. py-spy drops every libpython
// frame but the eval loop (and a few kept prefixes: time, sys, gc, os,
// thread, lock, PyThread, PyGilState); this table is narrower, so that the
// interpreter's real work stays (list_sort, take_gil, dict and unicode
// operations) where the interpreter has symbols. Names as CPython 3.8-3.13
// has them (`nm` of Debian's libpython3.11-pic.a shows the static ones).
constexpr const char* kCallMachinery[] = {
    // The eval loop's own entry points and helpers (_PyEval_Vector,
    // PyEval_EvalCode, _PyEval_EvalCodeWithName before 3.11...); the GIL
    // entry points below are kept.
    "_PyEval_*", "PyEval_*",
    // Calling a callable: functions, bound methods, C functions, slots.
    "_PyFunction_Vectorcall", "_PyFunction_FastCall*", "function_code_fastcall",
    "_PyObject_Vectorcall*", "PyObject_Vectorcall*", "_PyObject_Call*", "PyObject_Call*",
    "_PyObject_MakeTpCall", "_PyObject_FastCall*", "object_vacall", "_PyVectorcall_Call",
    "PyVectorcall_Call", "method_vectorcall*", "cfunction_call*", "cfunction_vectorcall*",
    "vectorcall_*", "slot_tp_*", "wrapper_call", "wrapperdescr_call", "partial_call",
    "do_call_core",  // 3.8-3.10's CALL_FUNCTION_EX
    "builtin_exec*",  // exec()
};

// The same for what starts the first eval loop of a thread: running the
// script (the main thread's root), starting a thread (threading.Thread).
// Dropped too; a stack whose native frames end at one of these was unwound
// to (near) its root, unlike one that ends at the call machinery above.
constexpr const char* kStartMachinery[] = {
    "Py_RunMain", "Py_BytesMain", "Py_Main", "pymain_*", "_PyRun_*", "PyRun_*", "run_mod",
    "run_eval_code_obj", "t_bootstrap", "thread_run", "pythread_wrapper",
};

// Matched by a prefix above, and real work: memory, and waiting for the GIL
// (a thread blocked in PyEval_RestoreThread is waiting for it; without the
// interpreter's debug symbols this is the only name that says so).
constexpr const char* kKept[] = {
    "PyObject_Calloc", "_PyObject_Calloc", "PyEval_RestoreThread", "PyEval_AcquireThread",
    "PyEval_AcquireLock", "PyEval_SaveThread", "PyEval_ReleaseThread", "PyEval_ReleaseLock",
};

// The name without GCC's clone suffixes: "_PyEval_EvalFrameDefault.cold".
std::string_view BaseName(const std::string& function) {
  std::string_view name = function;
  const size_t dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(0, dot);
}

bool Matches(std::string_view name, std::string_view pattern) {
  if (!pattern.empty() && pattern.back() == '*') {
    pattern.remove_suffix(1);
    return name.substr(0, pattern.size()) == pattern;
  }
  return name == pattern;
}

int EvalRank(const std::string& function) {
  const std::string_view name = BaseName(function);
  for (int i = 0; i < kEvalRanks; ++i) {
    if (name == kEvalFunctions[i]) return i;
  }
  return -1;
}

// What the merge does with a location: 0 .. kEvalRanks - 1 an eval frame
// (by EvalRank), or one of these.
constexpr int8_t kNotYet = -4;  // MergePythonStacks' cache: not classified yet
constexpr int8_t kPython = -3;
constexpr int8_t kNative = -2;   // kept where it is
constexpr int8_t kUnnamed = -1;  // kept, unless it is in the interpreter (see Merge)
constexpr int8_t kCallHelper = kEvalRanks;  // dropped
constexpr int8_t kStartHelper = kEvalRanks + 1;  // dropped

bool InTable(std::string_view name, const char* const* begin, const char* const* end) {
  for (const char* const* p = begin; p != end; ++p) {
    if (Matches(name, *p)) return true;
  }
  return false;
}

// 0: not machinery; else kCallHelper or kStartHelper.
int8_t MachineryKind(const std::string& function) {
  const std::string_view name = BaseName(function);
  for (const char* kept : kKept) {
    if (name == kept) return 0;
  }
  if (InTable(name, std::begin(kCallMachinery), std::end(kCallMachinery))) return kCallHelper;
  if (InTable(name, std::begin(kStartMachinery), std::end(kStartMachinery))) return kStartHelper;
  return 0;
}

int8_t Classify(const Location& loc) {
  if (loc.python) return kPython;
  if (loc.pseudo) return kNative;
  // What the symbolizer calls code it knows nothing about, or no name yet.
  if (loc.frames.empty() ||
      (loc.frames.size() == 1 && loc.frames[0].function == UnsymbolizedName(loc))) {
    return kUnnamed;
  }
  // The real function is the outermost frame; the ones before it are
  // inlined into it (a static inline helper inside the eval loop).
  const int rank = EvalRank(loc.frames.back().function);
  if (rank >= 0) return static_cast<int8_t>(rank);
  // Machinery only when every frame is: a helper inlined into real work
  // (list_sort calling a key function) keeps the location.
  int8_t kind = kStartHelper;
  for (const Frame& f : loc.frames) {
    const int8_t k = MachineryKind(f.function);
    if (k == 0) return kNative;
    if (k == kCallHelper) kind = kCallHelper;
  }
  return kind;
}

constexpr uint32_t kNoMarker = UINT32_MAX;

// `kind(location id)` gives Classify of that location; `cut_marker()` the
// location that marks a Python stack cut short, or kNoMarker.
template <typename KindOf, typename MarkerOf>
std::vector<uint32_t> Merge(const Profile& p, const std::vector<uint32_t>& stack, KindOf kind,
                            MarkerOf cut_marker) {
  // Native frames first, then Python ones: anything else is left alone.
  size_t natives = 0;
  while (natives < stack.size() && kind(stack[natives]) != kPython) ++natives;
  if (natives == stack.size()) return stack;
  for (size_t i = natives; i < stack.size(); ++i) {
    if (kind(stack[i]) != kPython) return stack;
  }
  auto loc = [&](size_t i) -> const Location& { return p.locations[stack[i]]; };

  // Groups of Python frames, innermost first: [begin, end) into `stack`.
  std::vector<std::pair<size_t, size_t>> groups;
  size_t begin = natives;
  for (size_t i = natives; i < stack.size(); ++i) {
    if (loc(i).python_entry) {
      groups.push_back({begin, i + 1});
      begin = i + 1;
    }
  }
  // Frames past the last entry flag: one more group. The thread's first
  // Python frame is always an entry frame, so the walk stopped before it
  // (its depth limit, a broken chain): the Python stack was cut short.
  const bool python_cut = begin < stack.size();
  if (python_cut) groups.push_back({begin, stack.size()});

  // The eval frames: those of the most specific eval function present.
  int rank = kEvalRanks;
  for (size_t i = 0; i < natives; ++i) {
    const int k = kind(stack[i]);
    if (k >= 0 && k < rank) rank = k;
  }
  size_t evals = 0;
  std::vector<const std::string*> interpreter;  // the modules holding them
  for (size_t i = 0; i < natives && rank < kEvalRanks; ++i) {
    if (kind(stack[i]) != rank) continue;
    ++evals;
    bool known = false;
    for (const std::string* m : interpreter) known |= *m == loc(i).module;
    if (!known) interpreter.push_back(&loc(i).module);
  }
  // Frames of the interpreter the symbolizer could not name ("python3.11+
  // 0x13ad87": its static functions, without debug symbols) are nearly all
  // call machinery, and say nothing to a reader: they go too, as py-spy
  // drops every interpreter frame but the eval loop.
  auto keep = [&](size_t i, int k) {
    if (k == kNative) return true;
    if (k != kUnnamed) return false;  // machinery, or a wrapper of the eval loop
    for (const std::string* m : interpreter) {
      if (!m->empty() && *m == loc(i).module) return false;
    }
    return true;
  };
  // A thread starts in libc (or in the script's runner): a stack whose
  // native frames end at the eval loop or its call machinery was cut short
  // by the unwinder, and what it has are the innermost frames.
  bool native_cut = false;
  if (natives > 0) {
    const int k = kind(stack[natives - 1]);
    native_cut = (k >= 0 && k < kEvalRanks) || k == kCallHelper ||
                 (k == kUnnamed && !keep(natives - 1, k));
  }

  // Pairing. A whole stack pairs from the outermost end: the innermost is
  // where a call may be half-built when the signal lands (an eval frame
  // entered and its Python frame not yet linked, or the reverse on return),
  // and the outer pairs are certainly right; groups left over at the inner
  // end go where the innermost eval frame is, eval frames left over there
  // go. A stack cut short (either side) has only its innermost frames of
  // that side, so it pairs from the innermost end, and groups left over go
  // on the root side of every native frame (all of them, when the native
  // stack has no eval frame at all).
  const bool from_inner = python_cut || native_cut || evals == 0;
  const long shift = from_inner ? 0 : static_cast<long>(groups.size()) - static_cast<long>(evals);
  std::vector<uint32_t> out;
  out.reserve(stack.size());
  auto emit = [&](long first, long last) {  // groups [first, last], those that exist
    for (long g = std::max(first, 0L); g <= last && g < static_cast<long>(groups.size()); ++g) {
      out.insert(out.end(), stack.begin() + groups[g].first, stack.begin() + groups[g].second);
      // Past the cut group's outermost frame, the frames the walk did not
      // reach: said, so that a 900-deep recursion cut at 128 frames is not
      // read as a 128-deep one.
      if (python_cut && g + 1 == static_cast<long>(groups.size())) {
        const uint32_t marker = cut_marker();
        if (marker != kNoMarker) out.push_back(marker);
      }
    }
  };
  long j = 0;  // eval frames so far, innermost first
  for (size_t i = 0; i < natives; ++i) {
    const int k = kind(stack[i]);
    if (evals > 0 && k == rank) {
      // Eval frame j takes group j + shift; the innermost also takes every
      // group inside that one (shift > 0 only when pairing from the outside).
      const long g = j + shift;
      emit(j == 0 ? 0 : g, g);
      ++j;
    } else if (keep(i, k)) {
      out.push_back(stack[i]);
    }
  }
  if (from_inner) emit(static_cast<long>(evals), static_cast<long>(groups.size()) - 1);
  return out;
}

}  // namespace

bool IsPythonEvalFunction(const std::string& function) { return EvalRank(function) >= 0; }

bool IsPythonCallMachinery(const std::string& function) { return MachineryKind(function) != 0; }

std::vector<uint32_t> MergePythonStack(const Profile& profile, const std::vector<uint32_t>& stack) {
  return Merge(
      profile, stack,
      [&](uint32_t id) -> int {
        return id < profile.locations.size() ? Classify(profile.locations[id]) : kNative;
      },
      [] { return kNoMarker; });
}

void MergePythonStacks(Profile* profile) {
  Profile& p = *profile;
  bool any = false;
  for (const Location& loc : p.locations) any |= loc.python;
  if (!any) return;
  std::vector<int8_t> kinds(p.locations.size(), kNotYet);
  auto kind = [&](uint32_t id) -> int {
    if (id >= kinds.size()) return kNative;
    if (kinds[id] == kNotYet) kinds[id] = Classify(p.locations[id]);
    return kinds[id];
  };
  uint32_t marker = kNoMarker;  // interned when a stack needs it
  auto cut_marker = [&] {
    if (marker == kNoMarker) {
      Location loc;
      loc.pseudo = true;
      loc.frames.push_back({std::string(kPythonCutFrame), "", 0});
      marker = p.InternLocation(loc);
    }
    return marker;
  };
  const size_t n = p.stacks.size();
  std::vector<uint32_t> remap(n);
  bool changed = false;
  for (size_t id = 0; id < n; ++id) {
    remap[id] = static_cast<uint32_t>(id);
    bool python = false;
    for (uint32_t loc : p.stacks[id]) python |= kind(loc) == kPython;
    if (!python) continue;
    std::vector<uint32_t> merged = Merge(p, p.stacks[id], kind, cut_marker);
    if (merged == p.stacks[id]) continue;
    remap[id] = p.InternStack(merged);  // may grow p.stacks: `merged` is a copy
    changed = true;
  }
  if (!changed) return;
  for (Sample& s : p.samples) {
    if (s.stack < n) s.stack = remap[s.stack];
  }
}

}  // namespace dlprof
