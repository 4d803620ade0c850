// The collector's cost of a blocked thread's wall tick when it walks the
// thread's stack (core/collector.cc, WalkBlocked: /proc/<tid>/syscall read
// twice, one process_vm_readv copy of the stack, the cfi walk, the Python
// walk, the CPU clock read again), against the tick that only reads the
// files (what a blocked tick cost before stacks) and the tick of a long
// block whose stack is known already.
//
// A thread blocks in read() on a pipe under Dive() x 20 (this file is built
// without frame pointers: bench/CMakeLists.txt); with CPython embedded, a
// Python thread blocks in read() under dive() x 20 Python frames. Each
// iteration is one Collector::SnapshotTick over that one thread, its walk
// forced (ThreadSlot::blocked_rewalk) or not, its last walk forgotten or
// taken again (Collector::NativeWalk). The first walk's stack is
// checked (native depth, and the exact count of Python frames) and the run fails
// otherwise, so that a broken walk cannot look fast.
//
//   BM_BlockedTick/<native|python>/walk   a tick that walks the stack
//   BM_BlockedTick/<native|python>/reused a tick of a thread blocked again
//                                         where it was: the last walk's
//                                         words checked, its frames taken
//   BM_BlockedTick/<native|python>/known  a later tick of the same block
//   BM_ProcReads                          schedstat + syscall read: the
//                                         tick's reads before this change
//
//   build/bench/blocked_walk_bench
#include <benchmark/benchmark.h>

#if __has_include(<Python.h>)
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define DLPROF_HAVE_PYTHON 1
#endif

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <dlprof/format.h>

#include "backends/cfi_tables.h"
#include "core/collector.h"
#include "core/python_frames.h"
#include "core/thread_registry.h"

namespace dlprof {
namespace {

constexpr int kDepth = 20;

struct Blocked {
  ThreadSlot* slot = nullptr;
  pid_t tid = 0;
  int pipe[2] = {-1, -1};
};
Blocked g_native, g_python;

// Claims and publishes a slot for the calling thread, as session.cc does
// for a registered thread (its stack bounds are the calling thread's).
ThreadSlot* Register() {
  ThreadSlot* s = ClaimSlot(CurrentTid());
  if (s != nullptr) PublishSlot(s);
  return s;
}

__attribute__((noipa)) int Dive(int n, int fd) {
  if (n > 1) {
    const int r = Dive(n - 1, fd);
    asm volatile("" ::: "memory");
    return r + 1;
  }
  char c;
  return static_cast<int>(read(fd, &c, 1));
}

// Whether /proc says thread `tid` is blocked in read() (syscall 0).
bool BlockedInRead(pid_t tid) {
  char path[64], buf[64] = {};
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  return n > 2 && buf[0] == '0' && buf[1] == ' ';
}

bool WaitBlocked(const std::atomic<pid_t>& tid) {
  for (int i = 0; i < 2000; ++i) {
    if (tid.load() != 0 && BlockedInRead(tid.load())) return true;
    usleep(1000);
  }
  return false;
}

enum class Tick { kWalk, kReused, kKnown };

void BM_BlockedTick(benchmark::State& state, Blocked* b, Tick tick, int min_native, int py_frames) {
  if (b->slot == nullptr) {
    state.SkipWithError("no blocked thread (Python not embedded?)");
    return;
  }
  Collector c;
  int64_t now = 1000000000;
  c.SnapshotTick(now);  // the baseline
  b->slot->blocked_rewalk = true;
  c.SnapshotTick(now += 10000000);  // the first walk, checked
  std::vector<uint64_t> words;
  if (b->slot->blocked_state != 1 || !c.StackWords(b->slot->blocked_stack, &words)) {
    state.SkipWithError("the blocked thread's stack was not walked");
    return;
  }
  int native = 0, python = 0;
  for (uint64_t w : words) ((w & DLPROF_PY_FRAME_BIT) ? python : native) += 1;
  if (native < min_native || python != py_frames) {
    state.SkipWithError(("walked " + std::to_string(native) + " native and " +
                         std::to_string(python) + " Python frames, expected at least " +
                         std::to_string(min_native) + " and " + std::to_string(py_frames))
                            .c_str());
    return;
  }
  for (auto _ : state) {
    b->slot->blocked_rewalk = tick != Tick::kKnown;
    if (tick == Tick::kWalk) c.ForgetWalks();
    benchmark::DoNotOptimize(c.SnapshotTick(now += 10000000));
  }
  state.counters["walks"] = static_cast<double>(c.blocked_walks());
  state.counters["reused"] = static_cast<double>(c.blocked_walks_reused());
  if (tick == Tick::kReused && c.blocked_walks_reused() * 2 < c.blocked_walks()) {
    state.SkipWithError("walks were not taken again");
  }
  state.counters["native_frames"] = native;
  state.counters["python_frames"] = python;
  state.counters["dropped"] = static_cast<double>(c.blocked_walks_dropped());
}

void BM_ProcReads(benchmark::State& state) {
  char path[2][64], buf[256];
  snprintf(path[0], sizeof(path[0]), "/proc/self/task/%d/schedstat", g_native.tid);
  snprintf(path[1], sizeof(path[1]), "/proc/self/task/%d/syscall", g_native.tid);
  for (auto _ : state) {
    for (const char* p : path) {
      const int fd = open(p, O_RDONLY | O_CLOEXEC);
      benchmark::DoNotOptimize(read(fd, buf, sizeof(buf) - 1));
      close(fd);
    }
  }
}

#ifdef DLPROF_HAVE_PYTHON
std::atomic<pid_t> g_python_tid{0};

// The Python thread's innermost call: registers the thread, then blocks in
// read() with the GIL released, as os.read does.
PyObject* Block(PyObject*, PyObject*) {
  g_python.slot = Register();
  g_python.tid = CurrentTid();
  g_python_tid.store(g_python.tid);
  char c;
  ssize_t n;
  PyThreadState* saved = PyEval_SaveThread();
  n = read(g_python.pipe[0], &c, 1);
  PyEval_RestoreThread(saved);
  return PyLong_FromSsize_t(n);
}
PyMethodDef g_block_def = {"block", Block, METH_NOARGS, "blocks in read()"};

const char kDivePy[] = R"(import threading
def dive(n):
    if n > 1:
        return dive(n - 1)
    return block()
thread = threading.Thread(target=dive, args=(20,))
thread.start()
)";

PyThreadState* g_saved = nullptr;

bool StartPython() {
  Py_InitializeEx(0);
  std::string version, state;
  if (!StartPythonFrames(&version, &state) || state != "on") {
    fprintf(stderr, "Python frames: %s\n", state.c_str());
    return false;
  }
  if (pipe(g_python.pipe) != 0) return false;
  PyObject* main = PyImport_AddModule("__main__");
  PyObject* globals = PyModule_GetDict(main);
  PyObject* block = PyCFunction_New(&g_block_def, nullptr);
  PyDict_SetItemString(globals, "block", block);
  Py_DECREF(block);
  PyObject* r = PyRun_String(kDivePy, Py_file_input, globals, globals);
  if (r == nullptr) {
    PyErr_Print();
    return false;
  }
  Py_DECREF(r);
  g_saved = PyEval_SaveThread();  // the Python thread runs to its read()
  return WaitBlocked(g_python_tid);
}

void StopPython() {
  if (g_python.pipe[1] >= 0) (void)!write(g_python.pipe[1], "x", 1);
  if (g_saved != nullptr) {
    PyEval_RestoreThread(g_saved);
    PyRun_SimpleString("thread.join()\n");
  }
}
#endif

}  // namespace
}  // namespace dlprof

int main(int argc, char** argv) {
  using namespace dlprof;
  CfiDecodeAllLoaded();
  if (pipe(g_native.pipe) != 0) return 1;
  std::atomic<pid_t> native_tid{0};
  std::thread native([&] {
    g_native.slot = Register();
    g_native.tid = CurrentTid();
    native_tid.store(g_native.tid);
    Dive(kDepth, g_native.pipe[0]);
  });
  if (!WaitBlocked(native_tid)) return 1;
#ifdef DLPROF_HAVE_PYTHON
  const bool python = StartPython();
#else
  const bool python = false;
#endif
  CfiMaintain();  // every loaded object's rows, before the first walk
  const std::pair<const char*, Tick> ticks[] = {
      {"walk", Tick::kWalk}, {"reused", Tick::kReused}, {"known", Tick::kKnown}};
  for (const auto& [name, tick] : ticks) {
    benchmark::RegisterBenchmark(("BM_BlockedTick/native/" + std::string(name)).c_str(),
                                 BM_BlockedTick, &g_native, tick, kDepth + 2, 0);
  }
  if (python) {
    // dive() x 20 under threading's run, _bootstrap_inner and _bootstrap.
    for (const auto& [name, tick] : ticks) {
      benchmark::RegisterBenchmark(("BM_BlockedTick/python/" + std::string(name)).c_str(),
                                   BM_BlockedTick, &g_python, tick, 5, kDepth + 3);
    }
  }
  benchmark::RegisterBenchmark("BM_ProcReads", BM_ProcReads);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  (void)!write(g_native.pipe[1], "x", 1);
  native.join();
#ifdef DLPROF_HAVE_PYTHON
  StopPython();
#endif
  return 0;
}
