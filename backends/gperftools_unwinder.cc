// "gperftools": GetStackTraceWithContext() from gperftools' libprofiler.so.0,
// loaded with dlopen() when the unwinder is made, so neither libdlprof nor its
// users link gperftools (or get tcmalloc) unless they ask for this backend.
//
// Debian's build picks its "libunwind" method, which ignores the context: it
// unwinds from its own call site, through our handler and the kernel's signal
// trampoline, and then through the interrupted code. Its "generic_fp" method
// (TCMALLOC_STACKTRACE_METHOD=generic_fp) starts from the context's frame
// pointer and leaves out the interrupted pc instead. We ask for every frame and
// cut the result at the interrupted pc when it appears, else put the pc in
// front, so pcs[0] is the interrupted pc either way, as with the other
// unwinders. StackBounds are not used: gperftools takes none.
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "backends/backend_factories.h"

namespace dlprof {
namespace {

constexpr char kLibrary[] = "libprofiler.so.0";
// int GetStackTraceWithContext(void** result, int max_depth, int skip_count,
//                              const void* uc), a C++ symbol.
constexpr char kSymbol[] = "_Z24GetStackTraceWithContextPPviiPKv";
using GetStackTraceWithContextFn = int (*)(void**, int, int, const void*);

// Frames between gperftools' own call site and the interrupted code: our
// Unwind, the caller's sample function, the stack switch, the signal handler,
// the kernel's trampoline, with room.
constexpr int kHandlerFrames = 32;
// Largest trace we ask for, kept on the stack the handler unwinds on: 2.5 KiB.
constexpr int kBufferFrames = 320;

struct Loaded {
  GetStackTraceWithContextFn fn = nullptr;
  std::string error;
};

void* HandlerOf(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) ? reinterpret_cast<void*>(sa.sa_sigaction)
                                    : reinterpret_cast<void*>(sa.sa_handler);
}

// Loads the library once per process. Loading libprofiler runs its static
// constructor, which starts gperftools' own SIGPROF profiler if CPUPROFILE
// (or CPUPROFILESIGNAL) is set; then we refuse, unless it is already loaded
// (the user profiles with gperftools on purpose and we only borrow its
// unwinder). Without them it starts no timer but still installs its SIGPROF
// handler: that one is put back as it was, so the program (and dlprof's
// "was there a handler first?" check) sees SIGPROF untouched.
const Loaded& Load() {
  static Loaded loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == nullptr) {
      if (getenv("CPUPROFILE") != nullptr || getenv("CPUPROFILESIGNAL") != nullptr) {
        loaded.error = std::string("not loading ") + kLibrary +
                       ": CPUPROFILE/CPUPROFILESIGNAL is set and loading it would start "
                       "gperftools' own profiler";
        return;
      }
      struct sigaction before {}, after{};
      const bool saved = sigaction(SIGPROF, nullptr, &before) == 0;
      handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
      if (saved && sigaction(SIGPROF, nullptr, &after) == 0 && HandlerOf(after) != HandlerOf(before)) {
        sigaction(SIGPROF, &before, nullptr);
      }
    }
    if (handle == nullptr) {
      const char* why = dlerror();
      loaded.error = std::string("cannot load ") + kLibrary + ": " + (why ? why : "unknown");
      return;
    }
    // The handle is kept for the life of the process: unwinders may be in use
    // by signal handlers until exit.
    void* sym = dlsym(handle, kSymbol);
    if (sym == nullptr) {
      loaded.error = std::string(kLibrary) + " has no GetStackTraceWithContext";
      return;
    }
    loaded.fn = reinterpret_cast<GetStackTraceWithContextFn>(sym);
  });
  return loaded;
}

class GperftoolsUnwinder : public Unwinder {
 public:
  explicit GperftoolsUnwinder(GetStackTraceWithContextFn fn) : fn_(fn) {}
  const char* name() const override { return "gperftools"; }

  // This function is safe to call from asynchronous signals (but is not
  // re-entrant on one thread), as far as gperftools' chosen method is: Debian's
  // uses libunwind (see libunwind_unwinder.cc for its limits).
  int Unwind(const ucontext_t* uc, const StackBounds& bounds, uintptr_t* pcs, int max) override {
    (void)bounds;
    if (uc == nullptr || pcs == nullptr || max <= 0) return 0;
    const uintptr_t pc = ContextPc(uc);
    void* frames[kBufferFrames];
    const int want = std::min(max + kHandlerFrames, kBufferFrames);
    int got = fn_(frames, want, 0, uc);
    if (got < 0) got = 0;

    int start = 0;
    int n = 0;
    for (int i = 0; i < got; ++i) {
      if (reinterpret_cast<uintptr_t>(frames[i]) == pc) {
        start = i;
        break;
      }
    }
    if (got == 0 || reinterpret_cast<uintptr_t>(frames[start]) != pc) {
      if (pc == 0) return 0;
      pcs[n++] = pc;  // The method walked from the context and left the pc out.
    }
    for (int i = start; i < got && n < max; ++i) {
      pcs[n++] = reinterpret_cast<uintptr_t>(frames[i]);
    }
    return n;
  }

  // Touches gperftools' thread-local recursion guard and libunwind's caches
  // outside any handler.
  void PrepareThread() override {
    void* frames[8];
    ucontext_t uc;
    if (getcontext(&uc) == 0) fn_(frames, 8, 0, &uc);
  }

 private:
  GetStackTraceWithContextFn fn_;
};

}  // namespace

// Where the dynamic loader would find the library, without loading it
// (the probe runs in `dlprof backends` and dlprof_backends_describe(), in
// processes that may never use this unwinder).
std::string FindLibrary() {
  std::string dirs;
  if (const char* env = getenv("LD_LIBRARY_PATH")) dirs = std::string(env) + ":";
  dirs += "/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:/lib/aarch64-linux-gnu:"
          "/usr/lib/aarch64-linux-gnu:/lib64:/usr/lib64:/lib:/usr/lib:/usr/local/lib";
  size_t start = 0;
  while (start <= dirs.size()) {
    const size_t end = std::min(dirs.find(':', start), dirs.size());
    const std::string path = dirs.substr(start, end - start) + "/" + kLibrary;
    if (end > start && access(path.c_str(), R_OK) == 0) return path;
    start = end + 1;
  }
  return std::string();
}

bool ProbeGperftoolsUnwinder(std::string* note) {
  if (void* handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD)) {
    dlclose(handle);  // (NOLOAD took a reference of its own)
  } else {
    const std::string path = FindLibrary();
    if (path.empty()) {
      *note = std::string(kLibrary) + " not found";
      return false;
    }
    *note = std::string("GetStackTraceWithContext from ") + path +
            " (loaded only when chosen; 200-400x slower than libunwind here)";
    return true;
  }
  const Loaded& loaded = Load();
  if (loaded.fn == nullptr) {
    *note = loaded.error;
    return false;
  }
  *note = std::string("GetStackTraceWithContext from ") + kLibrary +
          " (dlopen'ed; method per TCMALLOC_STACKTRACE_METHOD; 200-400x slower than libunwind "
          "here)";
  return true;
}

std::unique_ptr<Unwinder> NewGperftoolsUnwinder(std::string* error) {
  const Loaded& loaded = Load();
  if (loaded.fn == nullptr) {
    if (error != nullptr) *error = loaded.error;
    return nullptr;
  }
  return std::make_unique<GperftoolsUnwinder>(loaded.fn);
}

}  // namespace dlprof
