// The unwinder registry: names to backends.
//
// The default ("auto" or "") is libunwind, chosen by measurement
// (bench/unwinder_bench.cc, median ns per sample on a real signal frame, this
// 2-CPU Debian 12 VM, depth = extra frames of recursion):
//
//                depth 8          depth 32         depth 128
//   fp           27 ns (11 pcs)   72 ns (35)       217 ns (131)
//   libunwind    366 ns (21 pcs)  939 ns (45)      1.9 us (141)
//   gperftools   101 us (21 pcs)  176 us (45)      699 us (141)
//
// libunwind costs under 0.05% of a CPU at 100 Hz and about 0.1% at 1000 Hz for
// a typical 30-frame stack. fp is ten times cheaper but stops, or skips a
// caller, at every function built without frame pointers: above, it loses the
// 10 frames below the recursion (the Debian-built benchmark library, main(),
// libc's start-up). Debian builds its libraries (libc, libstdc++, zlib, the image
// codecs: where a data-loading stage spends its time) that way, so fp would
// charge their time to the wrong stage. gperftools' method on Debian is a
// libunwind unw_step() loop, which takes a lock with signals blocked on every
// frame (see libunwind_unwinder.cc), hence its cost; it is there for parity
// with gperftools' own profiles, never a better choice.
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
    {"libunwind", ProbeLibunwindUnwinder, NewLibunwindUnwinder},
    {"gperftools", ProbeGperftoolsUnwinder, NewGperftoolsUnwinder},
    {"fp", ProbeFpUnwinder, NewFpUnwinder},
};
constexpr char kDefaultUnwinder[] = "libunwind";

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
