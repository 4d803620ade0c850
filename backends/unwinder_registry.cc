// The unwinder registry: names to backends.
//
// The default ("auto" or "") is libunwind. Measured on this project's target
// (Debian 12, x86_64; bench/unwinder_bench.cc, numbers in the report of the
// commit that added this): fp costs tens of nanoseconds per sample and
// libunwind a few microseconds once its caches are warm, i.e. well under 0.1%
// of one CPU at 100 Hz and under 1% at 1000 Hz. But fp loses the caller of every
// function built without frame pointers, and Debian builds its libraries (libc,
// libstdc++, zlib, image codecs: where a data-loading stage spends its time)
// without them, so fp would charge their time to the wrong stage. Correct
// stacks matter more here than a microsecond per sample. gperftools' method
// is libunwind too, plus a walk through our own handler, so it is never better.
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
  for (const UnwinderEntry& e : kUnwinders) known += std::string(known.empty() ? "" : ", ") + e.name;
  *error = "unknown unwinder '" + name + "' (known: auto, " + known + ")";
  return nullptr;
}

}  // namespace dlprof
