#include "core/python_fork.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dlprof {
namespace {

// CPython's C API, by dlsym. Every use is on the main thread holding the
// GIL: in fork() (checked), or in a pending call.
struct PythonApi {
  int (*gil_check)() = nullptr;                                   // PyGILState_Check
  int (*add_pending_call)(int (*)(void*), void*) = nullptr;       // Py_AddPendingCall
  void* (*current_frame)() = nullptr;                             // PyEval_GetFrame (borrowed)
  int (*frame_lasti)(void*) = nullptr;                            // PyFrame_GetLasti
  void (*incref)(void*) = nullptr;                                // Py_IncRef
  void (*decref)(void*) = nullptr;                                // Py_DecRef
};
PythonApi g_api;

// The latest os.fork()'s calling frame (a reference of ours) and the
// instruction it was at; the resumes owed (one a fork) and whether a
// pending call is queued. Main thread, GIL held.
void* g_fork_frame = nullptr;
int g_fork_lasti = -1;
int g_resumes_owed = 0;
bool g_call_queued = false;
int g_asks = 0;  // pending calls since the fork that did not resume yet
void (*g_resume)() = nullptr;

// A hook that keeps the interpreter inside os.fork this long (10,000 asks,
// 32 a check of the eval breaker) gets the collector back anyway: its
// Python then pays no more for the asks.
constexpr int kMaxAsks = 10000;

bool StillInsideFork() {
  return g_fork_frame != nullptr && g_api.frame_lasti(g_fork_frame) == g_fork_lasti;
}

int PendingResume(void*) {
  g_call_queued = false;
  if (StillInsideFork() && ++g_asks < kMaxAsks && g_api.add_pending_call(PendingResume, nullptr) == 0) {
    g_call_queued = true;
    return 0;
  }
  if (g_fork_frame != nullptr) g_api.decref(g_fork_frame);
  g_fork_frame = nullptr;
  g_asks = 0;
  for (; g_resumes_owed > 0; --g_resumes_owed) g_resume();
  return 0;
}

}  // namespace

void FindPythonForkCalls() {
  // Py_Version exists from 3.11 on: an older interpreter never warns.
  const auto* hex = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
  if (hex == nullptr || *hex < 0x030C0000UL) return;
  PythonApi api;
  api.gil_check = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "PyGILState_Check"));
  api.add_pending_call =
      reinterpret_cast<int (*)(int (*)(void*), void*)>(dlsym(RTLD_DEFAULT, "Py_AddPendingCall"));
  api.current_frame = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "PyEval_GetFrame"));
  api.frame_lasti = reinterpret_cast<int (*)(void*)>(dlsym(RTLD_DEFAULT, "PyFrame_GetLasti"));
  api.incref = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "Py_IncRef"));
  api.decref = reinterpret_cast<void (*)(void*)>(dlsym(RTLD_DEFAULT, "Py_DecRef"));
  if (api.gil_check && api.add_pending_call && api.current_frame && api.frame_lasti && api.incref &&
      api.decref) {
    g_api = api;
  }
}

bool ForkCountsPythonThreads() {
  // Only the main thread: Py_AddPendingCall's call runs there. (A fork from
  // another thread finds the program multi-threaded anyway.)
  if (g_api.gil_check == nullptr || syscall(SYS_gettid) != getpid()) return false;
  return g_api.gil_check() == 1;
}

bool ResumeAfterPythonFork(void (*resume)()) {
  if (g_api.gil_check == nullptr) return false;
  if (!g_call_queued) {
    if (g_api.add_pending_call(PendingResume, nullptr) != 0) return false;
    g_call_queued = true;
  }
  g_resume = resume;
  void* frame = g_api.current_frame();
  if (frame != g_fork_frame) {
    if (frame != nullptr) g_api.incref(frame);
    if (g_fork_frame != nullptr) g_api.decref(g_fork_frame);
    g_fork_frame = frame;
  }
  g_fork_lasti = frame != nullptr ? g_api.frame_lasti(frame) : -1;
  g_asks = 0;
  ++g_resumes_owed;
  return true;
}

void ForgetPythonForkInChild() {
  g_fork_frame = nullptr;  // our reference stays: the object lives on, unused
  g_fork_lasti = -1;
  g_resumes_owed = 0;
  g_call_queued = false;
  g_asks = 0;
}

}  // namespace dlprof
