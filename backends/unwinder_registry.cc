// The unwinder registry: names to backends.
//
// The default ("auto" or "") is cfi on x86_64, chosen by measurement
// (bench/unwinder_bench.cc, median ns per sample on a real signal frame, this
// 2-CPU Debian 12 VM, depth = extra frames of recursion; session 7):
//
//                depth 8          depth 32         depth 128
//   fp           42 ns (13 pcs)   88 ns (37)       301 ns (133)
//   cfi          329 ns (23 pcs)  586 ns (47)      1.8 us (143)
//   libunwind    336 ns (23 pcs)  540 ns (47)      1.6 us (143)
//
// cfi and libunwind find the same frames (tests/cfi_test.cc compares them on
// live signal frames, and cfi's rows with libdw's at every row of libc,
// libstdc++, libpython and the test) at the same cost here, but cfi does it
// with no lock, no loader call and no system call in the handler, and in a
// Python process (deep eval-loop stacks, where libunwind leaves its cached
// fast path) its handler time was 2.3 ms against libunwind's 6.4 ms for the
// same 60-step run (tests/python/package_api.py, 1000 Hz). fp is cheaper
// still but stops, or skips a caller, at every function built without frame
// pointers: Debian builds its libraries (libc, libstdc++, zlib, the image
// codecs, CPython) that way, so fp would charge their time to the wrong
// stage. gperftools' method on Debian is a libunwind unw_step() loop, which
// takes a lock with signals blocked on every frame (see
// libunwind_unwinder.cc); it is there for parity with gperftools' own
// profiles, never a better choice. libunwind stays for other architectures
// and as a reference.
#include <string>
#include <vector>

#include "backends/backend_factories.h"

namespace dlprof {
namespace {

struct UnwinderEntry {
  const char* name;
  bool (*probe)(std::string* note);
  std::unique_ptr<Unwinder> (*make)(std::string* error);
};

// Best first.
constexpr UnwinderEntry kUnwinders[] = {
    {"cfi", ProbeCfiUnwinder, NewCfiUnwinder},
    {"libunwind", ProbeLibunwindUnwinder, NewLibunwindUnwinder},
    {"gperftools", ProbeGperftoolsUnwinder, NewGperftoolsUnwinder},
    {"fp", ProbeFpUnwinder, NewFpUnwinder},
};
#if defined(__x86_64__)
constexpr char kDefaultUnwinder[] = "cfi";
#else
constexpr char kDefaultUnwinder[] = "libunwind";  // the cfi rows are x86_64's
#endif

}  // namespace

std::vector<BackendInfo> ListUnwinders() {
  std::vector<BackendInfo> out;
  for (const UnwinderEntry& e : kUnwinders) {
    BackendInfo info;
    info.kind = "unwinder";
    info.name = e.name;
    info.available = e.probe(&info.note);
    if (info.available && info.name == kDefaultUnwinder) info.note += " [default]";
    out.push_back(std::move(info));
  }
  return out;
}

std::unique_ptr<Unwinder> MakeUnwinder(const std::string& name, std::string* error) {
  std::string scratch;
  if (error == nullptr) error = &scratch;
  const std::string wanted = (name.empty() || name == "auto") ? kDefaultUnwinder : name;
  for (const UnwinderEntry& e : kUnwinders) {
    if (wanted != e.name) continue;
    std::unique_ptr<Unwinder> u = e.make(error);
    if (u == nullptr && error->empty()) *error = "unwinder '" + wanted + "' is unavailable";
    return u;
  }
  std::string known;
  for (const UnwinderEntry& e : kUnwinders)
    known += std::string(known.empty() ? "" : ", ") + e.name;
  *error = "unknown unwinder '" + name + "' (known: auto, " + known + ")";
  return nullptr;
}

}  // namespace dlprof
