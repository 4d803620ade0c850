#include "core/python_fork.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

namespace dlprof {
namespace {

// CPython's C API, by dlsym. Used on the main thread while it holds the GIL:
// in fork() (checked first), or in a pending call.
struct PythonApi {
  int (*initialized)() = nullptr;                              // Py_IsInitialized
  void* (*thread_state)() = nullptr;                           // the current one, or null, unchecked
  int (*gil_check)() = nullptr;                                // PyGILState_Check
  int (*add_pending_call)(int (*)(void*), void*) = nullptr;    // Py_AddPendingCall
  void* (*current_frame)() = nullptr;                          // PyEval_GetFrame (borrowed)
  void* (*frame_back)(void*) = nullptr;                        // PyFrame_GetBack (new reference)
  int (*frame_lasti)(void*) = nullptr;                         // PyFrame_GetLasti
  void (*decref)(void*) = nullptr;                             // Py_DecRef
};
PythonApi g_api;

// The latest os.fork()'s calling frame, by address only: no reference is
// taken (one kept the caller's objects alive past its return: a file it
// did not close was not flushed, a __del__ ran late). It is read only when
// found on the running stack, where it is alive. Main thread, GIL held.
void* g_fork_frame = nullptr;
int g_fork_lasti = -1;
bool g_call_queued = false;
int g_asks = 0;  // pending calls since the fork that did not resume yet
void (*g_resume)() = nullptr;
// Resumes owed, one a fork: taken whole by the pending call, or by
// TakeOwedResumes on a thread that leaves the image.
std::atomic<int> g_resumes_owed{0};

// A hook that keeps the interpreter inside os.fork this long (10,000 asks,
// up to 32 a check of the eval breaker) gets the collector back anyway:
// its Python then pays no more for the asks.
constexpr int kMaxAsks = 10000;
constexpr int kMaxFramesWalked = 64;

// Still inside os.fork: Python code runs above the frame that called it (an
// at-fork hook; CPython 3.13 counts the threads after them), and that frame
// is still at its call. When the frame that called os.fork runs itself, the
// call has returned, whatever its instruction says (the eval breaker is
// checked at the end of the call, before the instruction moves on).
bool StillInsideFork() {
  if (g_fork_frame == nullptr) return false;
  void* current = g_api.current_frame();
  if (current == nullptr || current == g_fork_frame) return false;
  bool inside = false;
  void* frame = g_api.frame_back(current);  // a reference of ours from here
  for (int i = 0; frame != nullptr && i < kMaxFramesWalked; ++i) {
    if (frame == g_fork_frame) {
      inside = g_api.frame_lasti(frame) == g_fork_lasti;
      break;
    }
    void* back = g_api.frame_back(frame);
    g_api.decref(frame);
    frame = back;
  }
  if (frame != nullptr) g_api.decref(frame);
  return inside;
}

void ResumeOwed() {
  for (int n = g_resumes_owed.exchange(0); n > 0; --n) g_resume();
}

int PendingResume(void*) {
  g_call_queued = false;
  if (StillInsideFork() && ++g_asks < kMaxAsks && g_api.add_pending_call(PendingResume, nullptr) == 0) {
    g_call_queued = true;
    return 0;
  }
  g_fork_frame = nullptr;
  g_asks = 0;
  ResumeOwed();
  return 0;
}

template <typename Fn>
Fn Find(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void FindPythonForkCalls() {
  // Py_Version exists from 3.11 on: an older interpreter never warns.
  const auto* hex = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (hex == nullptr || *hex < 0x030C0000UL) return;
  PythonApi api;
  api.initialized = Find<int (*)()>("Py_IsInitialized");
  api.thread_state = Find<void* (*)()>("PyThreadState_GetUnchecked");  // 3.13
  if (api.thread_state == nullptr) api.thread_state = Find<void* (*)()>("_PyThreadState_UncheckedGet");
  api.gil_check = Find<int (*)()>("PyGILState_Check");
  api.add_pending_call = Find<int (*)(int (*)(void*), void*)>("Py_AddPendingCall");
  api.current_frame = Find<void* (*)()>("PyEval_GetFrame");
  api.frame_back = Find<void* (*)(void*)>("PyFrame_GetBack");
  api.frame_lasti = Find<int (*)(void*)>("PyFrame_GetLasti");
  api.decref = Find<void (*)(void*)>("Py_DecRef");
  if (api.initialized && api.thread_state && api.gil_check && api.add_pending_call &&
      api.current_frame && api.frame_back && api.frame_lasti && api.decref) {
    g_api = api;
  }
}

bool ForkCountsPythonThreads() {
  // Only the main thread: Py_AddPendingCall's call runs there. (A fork from
  // another thread finds the program multi-threaded anyway.) The GIL check
  // alone says yes where no interpreter runs: before Py_Initialize, after
  // finalization, and for good once a subinterpreter was made; so the
  // interpreter must be up and this thread must have a thread state (a
  // thread that released the GIL, as ctypes calls do, has none).
  if (g_api.gil_check == nullptr || syscall(SYS_gettid) != getpid()) return false;
  return g_api.initialized() != 0 && g_api.thread_state() != nullptr && g_api.gil_check() == 1;
}

bool ResumeAfterPythonFork(void (*resume)()) {
  if (g_api.gil_check == nullptr) return false;
  if (!g_call_queued) {
    if (g_api.add_pending_call(PendingResume, nullptr) != 0) return false;
    g_call_queued = true;
  }
  g_resume = resume;
  g_fork_frame = g_api.current_frame();
  g_fork_lasti = g_fork_frame != nullptr ? g_api.frame_lasti(g_fork_frame) : -1;
  g_asks = 0;
  g_resumes_owed.fetch_add(1);
  return true;
}

void TakeOwedResumes() {
  if (g_resume != nullptr) ResumeOwed();
}

void ForgetPythonForkInChild() {
  g_fork_frame = nullptr;
  g_fork_lasti = -1;
  g_resumes_owed.store(0);
  g_call_queued = false;
  g_asks = 0;
}

}  // namespace dlprof
