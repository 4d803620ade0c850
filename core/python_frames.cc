#include "core/python_frames.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstring>

#include "core/fault_handler.h"
#include "core/memory_view.h"
#include "core/safe_load.h"
#include "core/thread_registry.h"

namespace dlprof {
namespace {

// How the walks below read the interpreter's memory: in place by SafeLoads
// (the signal handler, the collector thread; async-signal-safe), or another
// process's through a MemoryView (the collector process). One walk, two
// instantiations.
struct SafeReads {
  bool Ptr(uintptr_t a, uintptr_t* out) const { return SafeLoadPtr(a, out); }
  bool U64(uintptr_t a, uint64_t* out) const { return SafeLoadU64(a, out); }
  bool U32(uintptr_t a, uint32_t* out) const { return SafeLoadU32(a, out); }
  bool U8(uintptr_t a, uint8_t* out) const { return SafeLoadU8(a, out); }
};
struct ViewReads {
  const MemoryView& memory;
  bool Ptr(uintptr_t a, uintptr_t* out) const { return memory.Ptr(a, out); }
  bool U64(uintptr_t a, uint64_t* out) const { return memory.U64(a, out); }
  bool U32(uintptr_t a, uint32_t* out) const { return memory.U32(a, out); }
  bool U8(uintptr_t a, uint8_t* out) const { return memory.Copy(a, out, 1); }
};

// PyCodeIdentity through `r`.
template <typename Reads>
uint64_t CodeIdentity(const Reads& r, uintptr_t code, const PythonLayout& L) {
  const uint32_t name = L.code_qualname != kNoOffset ? L.code_qualname : L.code_name;
  uintptr_t qualname, filename;
  uint32_t first_line;
  if (!r.Ptr(code + name, &qualname) || !r.Ptr(code + L.code_filename, &filename) ||
      !r.U32(code + L.code_firstlineno, &first_line)) {
    return 0;
  }
  return MixPyCodeIdentity(qualname, filename, first_line);
}

PythonRuntime g_python;  // written once, before g_active is set
std::atomic<bool> g_active{false};

// Py_Version (3.11+) is PY_VERSION_HEX; older interpreters only have
// Py_GetVersion(), "3.10.12 (main, ...)". Either is readable before
// Py_Initialize (the constructor of a preloaded library runs before main).
bool FindVersion(int* major, int* minor, int* micro) {
  if (const auto* hex = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"))) {
    *major = static_cast<int>((*hex >> 24) & 0xff);
    *minor = static_cast<int>((*hex >> 16) & 0xff);
    *micro = static_cast<int>((*hex >> 8) & 0xff);
    return true;
  }
  using GetVersionFn = const char* (*)();
  auto get = reinterpret_cast<GetVersionFn>(dlsym(RTLD_DEFAULT, "Py_GetVersion"));
  if (get == nullptr) return false;
  const char* text = get();
  return text != nullptr && std::sscanf(text, "%d.%d.%d", major, minor, micro) >= 2;
}

// The interrupted thread's PyThreadState: cached in its slot, else the one
// CPython keeps for it in its thread-specific key (autoTSSkey, set for every
// thread that runs Python). pthread_getspecific reads the calling thread's
// key array: no lock, no allocation, in glibc and musl. Checked by its
// thread id, so a slot's stale cache or a recycled state is never used.
uintptr_t CurrentThreadState(ThreadSlot* s, const PythonLayout& L) {
  const uint64_t self = static_cast<uint64_t>(pthread_self());
  uint64_t id;
  const uintptr_t cached = s->py_tstate.load(std::memory_order_relaxed);
  if (cached != 0 && SafeLoadU64(cached + L.tstate_thread_id, &id) && id == self) return cached;
  s->py_tstate.store(0, std::memory_order_relaxed);
  uint32_t initialized, key;
  const uintptr_t tss = g_python.runtime + L.runtime_tss_key;
  if (!SafeLoadU32(tss, &initialized) || initialized == 0 || !SafeLoadU32(tss + 4, &key)) return 0;
  const uintptr_t tstate =
      reinterpret_cast<uintptr_t>(pthread_getspecific(static_cast<pthread_key_t>(key)));
  if (tstate == 0 || !SafeLoadU64(tstate + L.tstate_thread_id, &id) || id != self) return 0;
  s->py_tstate.store(tstate, std::memory_order_relaxed);
  return tstate;
}

// The instruction a frame is at, in code units from the start of its code.
template <typename Reads>
int64_t InstructionIndex(const Reads& r, uintptr_t frame, uintptr_t code, const PythonLayout& L) {
  constexpr int64_t kMaxIndex = 1 << 24;
  int64_t index = -1;
  if (L.frame_model == PyFrameModel::kFrameObjects) {
    uint32_t lasti;
    if (r.U32(frame + L.frame_instr, &lasti)) index = static_cast<int32_t>(lasti);
  } else {
    uintptr_t instr;
    if (r.Ptr(frame + L.frame_instr, &instr)) {
      index = (static_cast<int64_t>(instr) - static_cast<int64_t>(code + L.code_code)) / 2;
    }
  }
  return index < -1 || index > kMaxIndex ? -1 : index;
}

}  // namespace

bool StartPythonFrames(std::string* version, std::string* state) {
  void* runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
  if (runtime == nullptr) return false;
  int major = 0, minor = 0, micro = 0;
  if (!FindVersion(&major, &minor, &micro)) {
    *version = "unknown";
    *state = "off: the interpreter's version could not be read";
    return true;
  }
  *version = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(micro);
  if (g_active.load(std::memory_order_acquire)) {  // a fork child: already on
    *state = "on";
    return true;
  }
  // 3.13+ begins _PyRuntime with debug offsets ("xdebugpy", version,
  // free_threaded): a free-threaded build lays its objects out otherwise.
  // _PyRuntime is the interpreter's own static object: plain reads.
  if (major == 3 && minor >= 13) {
    const char* head = static_cast<const char*>(runtime);
    uint64_t free_threaded = 0;
    std::memcpy(&free_threaded, head + 16, sizeof(free_threaded));
    if (std::memcmp(head, "xdebugpy", 8) == 0 && free_threaded != 0) {
      *state = "off: free-threaded CPython builds are not supported";
      return true;
    }
  }
  const PythonLayout* layout = FindPythonLayout(major, minor);
  if (layout == nullptr) {
    *state = "off: dlprof has no structure table for CPython " + std::to_string(major) + "." +
             std::to_string(minor);
    return true;
  }
  if (!InstallFaultHandler()) {
    *state = "off: dlprof's SIGSEGV/SIGBUS handler could not be installed";
    return true;
  }
  g_python.layout = layout;
  g_python.runtime = reinterpret_cast<uintptr_t>(runtime);
  g_python.code_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyCode_Type"));
  g_python.unicode_type = reinterpret_cast<uintptr_t>(dlsym(RTLD_DEFAULT, "PyUnicode_Type"));
  g_active.store(true, std::memory_order_release);
  *state = "on";
  return true;
}

const PythonRuntime* ActivePython() {
  return g_active.load(std::memory_order_acquire) ? &g_python : nullptr;
}

void StopPythonFrames() { g_active.store(false, std::memory_order_release); }

namespace {

// The frames of the thread whose state is `tstate` (WalkPythonFrames).
// Every read is through `r`: with SafeReads this function is safe to call
// from asynchronous signals.
template <typename Reads>
int WalkFramesOf(const Reads& r, uintptr_t tstate, const PythonLayout& L, uint64_t* out,
                 int max_frames) {
  uintptr_t frame = 0;
  if (!r.Ptr(tstate + L.tstate_frame, &frame)) return 0;
  if (L.frame_model == PyFrameModel::kCFrameInterpreter &&
      (frame == 0 || !r.Ptr(frame + L.cframe_current_frame, &frame))) {
    return 0;
  }
  int n = 0;
  // Shim frames are skipped, not counted: the guard bounds the walk anyway
  // (a cycle in a half-written chain).
  for (int steps = 0; frame != 0 && n < max_frames && steps < 2 * max_frames; ++steps) {
    if ((frame & 7) != 0) break;  // frames are pointer-aligned
    uintptr_t code, previous;
    if (!r.Ptr(frame + L.frame_code, &code) ||
        !r.Ptr(frame + L.frame_previous, &previous)) {
      break;
    }
    if (L.entry_model == PyEntryModel::kShimFrame) {
      uint8_t owner;
      if (!r.U8(frame + L.frame_owner, &owner)) break;
      if (owner == L.shim_owner) {
        // The C stack's entry frame: the frame above it was the first of
        // its eval loop call.
        if (n > 0) out[kPyFrameWords * (n - 1)] |= kPyEntryBit;
        frame = previous;
        continue;
      }
    }
    bool entry = L.entry_model == PyEntryModel::kEveryFrame;
    if (L.entry_model == PyEntryModel::kIsEntryFlag) {
      uint8_t flag;
      if (!r.U8(frame + L.frame_is_entry, &flag)) break;
      entry = flag != 0;
    }
    // A code object is pointer-aligned and in user space; the collector
    // checks its type before it reads a name.
    if (code != 0 && (code & 7) == 0 && (code >> 47) == 0) {
      uint64_t* f = out + kPyFrameWords * n;
      f[0] = static_cast<uint64_t>(code) | (entry ? kPyEntryBit : 0);
      f[1] = static_cast<uint64_t>(InstructionIndex(r, frame, code, L));
      f[2] = CodeIdentity(r, code, L);
      ++n;
    }
    frame = previous;
  }
  if (n == max_frames && frame != 0) out[kPyFrameWords * (n - 1)] &= ~kPyEntryBit;  // cut
  return n;
}

// Whether `tstate` is one of the interpreters' thread states. Bounded: a cycle or a
// list changed under the walk ends it.
template <typename Reads>
bool ListedThreadState(const Reads& r, uintptr_t runtime, uintptr_t tstate, const PythonLayout& L) {
  constexpr int kMaxInterpreters = 64, kMaxThreadStates = 4096;
  uintptr_t interp = 0;
  if (!r.Ptr(runtime + L.runtime_interpreters_head, &interp)) return false;
  for (int i = 0; interp != 0 && i < kMaxInterpreters; ++i) {
    uintptr_t ts = 0;
    if (!r.Ptr(interp + L.interp_threads_head, &ts)) return false;
    for (int j = 0; ts != 0 && j < kMaxThreadStates; ++j) {
      if (ts == tstate) return true;
      if (!r.Ptr(ts + L.tstate_next, &ts)) return false;
    }
    if (!r.Ptr(interp + L.interp_next, &interp)) return false;
  }
  return false;
}

// The state of thread `tid` found in the interpreters' lists by its
// native_thread_id (3.11+), 0 if none.
template <typename Reads>
uintptr_t FindThreadStateByTid(const Reads& r, uintptr_t runtime, pid_t tid, const PythonLayout& L) {
  if (L.tstate_native_thread_id == kNoOffset) return 0;
  constexpr int kMaxInterpreters = 64, kMaxThreadStates = 4096;
  uintptr_t interp = 0;
  if (!r.Ptr(runtime + L.runtime_interpreters_head, &interp)) return 0;
  for (int i = 0; interp != 0 && i < kMaxInterpreters; ++i) {
    uintptr_t ts = 0;
    if (!r.Ptr(interp + L.interp_threads_head, &ts)) return 0;
    for (int j = 0; ts != 0 && j < kMaxThreadStates; ++j) {
      uint64_t native = 0;
      if (r.U64(ts + L.tstate_native_thread_id, &native) &&
          native == static_cast<uint64_t>(tid)) {
        return ts;
      }
      if (!r.Ptr(ts + L.tstate_next, &ts)) return 0;
    }
    if (!r.Ptr(interp + L.interp_next, &interp)) return 0;
  }
  return 0;
}

template <typename Reads>
int WalkBlockedFramesOf(const Reads& r, const PythonRuntime& py, uintptr_t tstate, pid_t tid,
                        uint64_t* out, int max_frames) {
  const PythonLayout& L = *py.layout;
  if (L.tstate_native_thread_id != kNoOffset) {
    uint64_t native = 0;
    if (tstate == 0 || !r.U64(tstate + L.tstate_native_thread_id, &native) ||
        native != static_cast<uint64_t>(tid)) {
      tstate = FindThreadStateByTid(r, py.runtime, tid, L);
    }
  } else if (tstate != 0 && !ListedThreadState(r, py.runtime, tstate, L)) {
    tstate = 0;  // 3.10: the handler's hint, while the interpreter still lists it
  }
  if (tstate == 0) return 0;
  return WalkFramesOf(r, tstate, L, out, max_frames);
}

}  // namespace

int WalkPythonFrames(ThreadSlot* s, uint64_t* out, int max_frames) {
  if (!g_active.load(std::memory_order_acquire) || !SafeLoadsAllowed()) return 0;
  const PythonLayout& L = *g_python.layout;
  OpenFaultsForSafeLoads();
  const uintptr_t tstate = CurrentThreadState(s, L);
  const int frames = tstate == 0 ? 0 : WalkFramesOf(SafeReads{}, tstate, L, out, max_frames);
  CloseFaultsForSafeLoads(FaultsReturnTo::kThisThread);
  return frames;
}

int WalkBlockedPythonFrames(ThreadSlot* s, pid_t tid, uint64_t* out, int max_frames) {
  if (!g_active.load(std::memory_order_acquire) || !SafeLoadsAllowed()) return 0;
  // The collector blocks every signal: a fault of a SafeLoad blocked would
  // be forced through with the default action, and kill the process.
  OpenFaultsForSafeLoads();
  const int frames = WalkBlockedFramesOf(SafeReads{}, g_python,
                                         s->py_tstate.load(std::memory_order_relaxed), tid, out,
                                         max_frames);
  CloseFaultsForSafeLoads(FaultsReturnTo::kProcess);
  return frames;
}

int WalkBlockedPythonFramesOf(const MemoryView& memory, const PythonRuntime& py, uintptr_t hint,
                              pid_t tid, uint64_t* out, int max_frames) {
  if (py.layout == nullptr || py.runtime == 0) return 0;
  return WalkBlockedFramesOf(ViewReads{memory}, py, hint, tid, out, max_frames);
}

uint64_t PyCodeIdentity(uintptr_t code, const PythonLayout& L) {
  return CodeIdentity(SafeReads{}, code, L);
}

uint64_t PyCodeIdentityIn(const MemoryView& memory, uintptr_t code, const PythonLayout& L) {
  return CodeIdentity(ViewReads{memory}, code, L);
}

uint64_t MixPyCodeIdentity(uintptr_t qualname, uintptr_t filename, uint32_t first_line) {
  // The file's object mixed in: names are shared ("<module>" by every
  // module's code, an interned "work" by every function of that name), so a
  // module's code freed and another's made at its address had the same
  // name object and first line, and was named after the first one's file.
  const uint64_t mixed = (static_cast<uint64_t>(qualname) ^
                          static_cast<uint64_t>(filename) * 0x9e3779b97f4a7c15ull) &
                         ((1ull << 48) - 1);
  const uint64_t identity = mixed | static_cast<uint64_t>(first_line & 0xffff) << 48;
  return identity != 0 ? identity : 1;
}

}  // namespace dlprof
