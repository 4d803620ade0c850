// Per-sample cost of the Python frame walk (core/python_frames.h), and the
// collector's per-frame cost of turning a walked frame into a stack word
// (core/python_codes.h), on a real CPython stack.
//
// The program embeds CPython (libpython3.11, linked by this benchmark only;
// libdlprof never links it), finds it the way the runtime does
// (StartPythonFrames: dlsym of _PyRuntime, Py_Version, PyCode_Type; it must
// say "on") and claims a thread slot for the main thread as session.cc does
// for a registered thread. Each BM_PythonWalk run calls a Python function
// that recurses to `depth` frames and then calls a C function (a PyCFunction)
// that runs the benchmark loop: WalkPythonFrames on the calling thread, which
// is what the signal handler does on the thread it interrupted. The first
// iteration checks what the walk returned (exactly `depth` frames, each the
// recursion's code object, the eval loop's entry mark on the outermost only,
// each at the line of its call) and the run fails (SkipWithError) otherwise,
// so that a broken walk cannot look fast. Time per iteration is one walk;
// `per_frame` is the CPU time divided by the frames returned (seconds in the
// JSON output).
//
//   BM_PythonWalk/N           the thread state cached in the slot (every
//                             sample after a thread's first)
//   BM_PythonWalkUncached/30  the cache cleared before each walk: the
//                             thread state looked up again (autoTSSkey)
//   BM_FrameWord/<mode>       PythonCodeTable::FrameWord over the 30 frames of
//                             a chain of 30 distinct functions; `same_drain`:
//                             their code objects already in the table (found
//                             by address and identity, every sample after a
//                             code object's first); `cold`: a new table per
//                             sample (every code object read: for information)
//   BM_CodesSeenCheck         the handler's check after a walk of those 30
//                             frames, all met (core/python_codes_seen.h): the
//                             steady state's cost per sample
//
//   build/bench/python_walk_bench
#include <benchmark/benchmark.h>

#if __has_include(<Python.h>)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define DLPROF_HAVE_PYTHON 1
#endif

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#ifdef DLPROF_HAVE_PYTHON
#include <dlprof/format.h>

#include "core/python_code.h"
#include "core/python_codes.h"
#include "core/python_codes_seen.h"
#include "core/python_frames.h"
#include "core/thread_registry.h"

namespace dlprof {
namespace {

// walk.py: the recursion. Frame k (innermost first) of dive(depth) is at
// line 4 (the innermost, calling loop()) or 3 (the others).
const char kWalkPy[] = R"(def dive(n):
    if n > 1:
        return dive(n - 1)
    return loop()
)";
constexpr int kDiveRecurseLine = 3, kDiveLoopLine = 4;

// chain.py: f0 calls f1 ... calls f{n-1}, which calls loop(); f_i starts at
// line 4i+1 and calls at line 4i+4.
const char kChainPy[] = R"(def make_chain(n):
    src = []
    for i in range(n):
        callee = 'f%d' % (i + 1) if i + 1 < n else 'loop'
        src.append('def f%d():\n    x = %d\n    y = x + 1\n    return %s()\n' % (i, i, callee))
    ns = {'loop': loop}
    exec(compile(''.join(src), 'chain.py', 'exec'), ns)
    return ns['f0']
)";
constexpr int kChainDepth = 30;

ThreadSlot* g_slot = nullptr;
PyObject* g_dive = nullptr;        // walk.py's dive
uintptr_t g_dive_code = 0;         // dive.__code__
PyObject* g_chain = nullptr;       // chain.py's f0 (keeps every f_i alive)
std::function<void()> g_body;      // what loop() runs
std::vector<uint64_t> g_chain_words;  // the walk of the chain, as the handler wrote it

PyObject* Loop(PyObject*, PyObject*) {
  if (g_body) g_body();
  Py_RETURN_NONE;
}
PyMethodDef g_loop_def = {"loop", Loop, METH_NOARGS, "runs the benchmark loop"};

// Calls fn(args...) from C; false (Python's error printed) if it raised.
bool CallPython(PyObject* fn, PyObject* args) {
  PyObject* r = PyObject_CallObject(fn, args);
  Py_XDECREF(args);
  if (r == nullptr) {
    PyErr_Print();
    return false;
  }
  Py_DECREF(r);
  return true;
}

// What a walk of dive(depth) must return; "" when it does.
std::string CheckDive(const uint64_t* out, int n, int depth) {
  if (n != depth) {
    return "walked " + std::to_string(n) + " frames, expected " + std::to_string(depth);
  }
  const PythonRuntime* py = ActivePython();
  PythonCodeReader reader(*py->layout, py->code_type);
  PyCodeInfo info;
  if (!reader.Read(g_dive_code, &info)) return "dive's code object is not readable";
  for (int k = 0; k < n; ++k) {
    const uint64_t code = out[kPyFrameWords * k] & ~kPyEntryBit;
    const bool entry = (out[kPyFrameWords * k] & kPyEntryBit) != 0;
    if (code != g_dive_code) return "frame " + std::to_string(k) + " is not dive's code";
    if (entry != (k == n - 1)) return "frame " + std::to_string(k) + ": wrong entry mark";
    const int line = PythonCodeReader::LineAt(info, static_cast<int64_t>(out[kPyFrameWords * k + 1]));
    const int want = k == 0 ? kDiveLoopLine : kDiveRecurseLine;
    if (line != want) {
      return "frame " + std::to_string(k) + " at line " + std::to_string(line) + ", expected " +
             std::to_string(want);
    }
  }
  return "";
}

void WalkLoop(benchmark::State& state, int depth, bool uncached) {
  uint64_t out[kPyFrameWords * kMaxPythonFrames];
  int n = 0;
  bool checked = false;
  for (auto _ : state) {
    if (uncached) g_slot->py_tstate.store(0, std::memory_order_relaxed);
    n = WalkPythonFrames(g_slot, out, kMaxPythonFrames);
    benchmark::DoNotOptimize(n);
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
    if (!checked) {
      state.PauseTiming();
      checked = true;
      const std::string error = CheckDive(out, n, depth);
      if (!error.empty()) {
        state.SkipWithError(error.c_str());
        break;
      }
      state.ResumeTiming();
    }
  }
  state.counters["frames"] = n;
  // CPU time per frame, in seconds (printed with its SI prefix: "12.1ns").
  if (n > 0) {
    state.counters["per_frame"] = benchmark::Counter(
        n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  }
}

void RunInDive(benchmark::State& state, int depth, std::function<void()> body) {
  g_body = std::move(body);
  const bool ok = CallPython(g_dive, Py_BuildValue("(i)", depth));
  g_body = nullptr;
  if (!ok) state.SkipWithError("dive() raised");
}

void BM_PythonWalk(benchmark::State& state) {
  const int depth = static_cast<int>(state.range(0));
  RunInDive(state, depth, [&] { WalkLoop(state, depth, false); });
}

void BM_PythonWalkUncached(benchmark::State& state) {
  const int depth = static_cast<int>(state.range(0));
  RunInDive(state, depth, [&] { WalkLoop(state, depth, true); });
}

enum class Drain { kSame, kCold };

void BM_FrameWord(benchmark::State& state, Drain mode) {
  const PythonRuntime* py = ActivePython();
  const int n = static_cast<int>(g_chain_words.size() / kPyFrameWords);
  if (py == nullptr || n != kChainDepth) {
    state.SkipWithError(("the chain's walk has " + std::to_string(n) + " frames, expected " +
                         std::to_string(kChainDepth)).c_str());
    return;
  }
  const uint64_t* words = g_chain_words.data();
  PythonCodeTable table;
  // Every frame's stack word, checked: known code, the line of its call.
  for (int k = 0; k < n; ++k) {
    const uint64_t w = table.FrameWord(*py, words[kPyFrameWords * k], words[kPyFrameWords * k + 1], words[kPyFrameWords * k + 2], 0);
    const int i = kChainDepth - 1 - k;  // frame k is f_i
    const int line = static_cast<int>((w >> DLPROF_PY_LINE_SHIFT) & DLPROF_PY_LINE_MASK);
    if ((w & DLPROF_PY_FRAME_BIT) == 0 || line != 4 * i + 4 ||
        ((w & DLPROF_PY_ENTRY_BIT) != 0) != (k == n - 1)) {
      state.SkipWithError(("frame " + std::to_string(k) + ": stack word " + std::to_string(w) +
                           " (line " + std::to_string(line) + ", expected " +
                           std::to_string(4 * i + 4) + ")").c_str());
      return;
    }
  }
  uint64_t sum = 0;
  for (auto _ : state) {
    if (mode == Drain::kCold) {
      PythonCodeTable fresh;
      for (int k = 0; k < n; ++k) sum += fresh.FrameWord(*py, words[kPyFrameWords * k], words[kPyFrameWords * k + 1], words[kPyFrameWords * k + 2], 0);
    } else {
      for (int k = 0; k < n; ++k) sum += table.FrameWord(*py, words[kPyFrameWords * k], words[kPyFrameWords * k + 1], words[kPyFrameWords * k + 2], 0);
    }
    benchmark::DoNotOptimize(sum);
  }
  if (table.unreadable() != 0) state.SkipWithError("a cached code object became unreadable");
  state.counters["frames"] = n;
  state.counters["per_frame"] = benchmark::Counter(
      n, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_CodesSeenCheck(benchmark::State& state) {
  const int n = static_cast<int>(g_chain_words.size() / kPyFrameWords);
  const uint64_t* words = g_chain_words.data();
  for (int k = 0; k < n; ++k) {
    MarkPyCodeSeen(static_cast<uintptr_t>(words[kPyFrameWords * k] & ~kPyEntryBit),
                   words[kPyFrameWords * k + 2]);
  }
  int unmet = 0;
  for (auto _ : state) {
    unmet += HasUnseenPyCode(words, n) ? 1 : 0;  // the handler's call
    benchmark::DoNotOptimize(unmet);
  }
  if (unmet != 0) state.SkipWithError("a frame marked met was not");
  state.counters["frames"] = n;
}

bool SetUp(std::string* error) {
  Py_InitializeEx(0);
  std::string version, state;
  if (!StartPythonFrames(&version, &state)) {
    *error = "StartPythonFrames did not find CPython in the process";
    return false;
  }
  benchmark::AddCustomContext("python", version);
  benchmark::AddCustomContext("python_frames", state);
  if (state != "on") {
    *error = "Python frames are " + state;
    return false;
  }
  // The main thread's slot, as session.cc registers a thread.
  const pid_t tid = CurrentTid();
  g_slot = ClaimSlot(tid);
  if (g_slot == nullptr) {
    *error = "no thread slot";
    return false;
  }
  t_tid = tid;
  PublishSlot(g_slot);
  t_slot = g_slot;

  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* loop = PyCFunction_New(&g_loop_def, nullptr);
  PyDict_SetItemString(globals, "loop", loop);
  for (const auto& [source, file] : {std::pair{kWalkPy, "walk.py"}, std::pair{kChainPy, "chain.py"}}) {
    PyObject* code = Py_CompileString(source, file, Py_file_input);
    PyObject* r = code != nullptr ? PyEval_EvalCode(code, globals, globals) : nullptr;
    Py_XDECREF(code);
    if (r == nullptr) {
      PyErr_Print();
      *error = std::string("could not run ") + file;
      return false;
    }
    Py_DECREF(r);
  }
  g_dive = PyDict_GetItemString(globals, "dive");
  PyObject* dive_code = PyObject_GetAttrString(g_dive, "__code__");
  g_dive_code = reinterpret_cast<uintptr_t>(dive_code);
  Py_XDECREF(dive_code);  // dive keeps it alive
  PyObject* make_chain = PyDict_GetItemString(globals, "make_chain");
  g_chain = PyObject_CallFunction(make_chain, "i", kChainDepth);
  if (g_chain == nullptr) {
    PyErr_Print();
    *error = "make_chain() raised";
    return false;
  }
  // The chain's frames as the handler would write them.
  g_body = [] {
    uint64_t out[kPyFrameWords * kMaxPythonFrames];
    const int n = WalkPythonFrames(g_slot, out, kMaxPythonFrames);
    g_chain_words.assign(out, out + kPyFrameWords * n);
  };
  const bool ok = CallPython(g_chain, nullptr);
  g_body = nullptr;
  if (!ok) {
    *error = "the chain raised";
    return false;
  }
  return true;  // globals stays referenced: dive, loop and the chain live to the end
}

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  std::string error;
  if (!dlprof::SetUp(&error)) {
    std::fprintf(stderr, "python_walk_bench: %s\n", error.c_str());
    return 1;
  }
  benchmark::RegisterBenchmark("BM_PythonWalk", dlprof::BM_PythonWalk)->Arg(1)->Arg(10)->Arg(30)->Arg(100);
  benchmark::RegisterBenchmark("BM_PythonWalkUncached", dlprof::BM_PythonWalkUncached)->Arg(30);
  benchmark::RegisterBenchmark("BM_FrameWord/same_drain", dlprof::BM_FrameWord, dlprof::Drain::kSame);
  benchmark::RegisterBenchmark("BM_FrameWord/cold", dlprof::BM_FrameWord, dlprof::Drain::kCold);
  benchmark::RegisterBenchmark("BM_CodesSeenCheck", dlprof::BM_CodesSeenCheck);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#else  // no Python.h: nothing to measure, and say so

static void BM_PythonWalk(benchmark::State& state) {
  state.SkipWithError("built without Python.h (python3-dev): nothing measured");
}
BENCHMARK(BM_PythonWalk);
BENCHMARK_MAIN();

#endif
