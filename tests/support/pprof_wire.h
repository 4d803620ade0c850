// A pprof decoder of the tests' own, independent of readers/: profile.proto's
// fields read straight off the wire (what `go tool pprof` reads), so that the
// tests check what dlprof wrote, not what dlprof's reader makes of it. And
// gunzip, which the tests of every gzipped output share.
#ifndef DLPROF_TESTS_SUPPORT_PPROF_WIRE_H_
#define DLPROF_TESTS_SUPPORT_PPROF_WIRE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dlprof::testing {

// `in` gunzipped (or zlib-inflated). *error (when given) is "" when the
// stream was whole and nothing followed it, else what was wrong; what could
// be inflated is returned either way.
std::string Gunzip(const std::string& in, std::string* error = nullptr);

struct PFunction {
  std::string name, system_name, file;
  int64_t start_line = 0;
};

// One frame of a sample's stack: a Line of a Location, innermost first.
struct PFrame {
  const PFunction* function = nullptr;  // null when the Line names none
  int64_t line = 0;
  std::string module;  // the Location's mapping's file, "" if none
  uint64_t address = 0;
};

struct PSample {
  std::vector<PFrame> frames;  // leaf first
  std::vector<int64_t> values;
  std::map<std::string, std::string> str_labels;
  std::map<std::string, int64_t> num_labels;
  int64_t Num(const std::string& key, int64_t missing = -1) const {
    auto it = num_labels.find(key);
    return it == num_labels.end() ? missing : it->second;
  }
  std::string Str(const std::string& key) const {
    auto it = str_labels.find(key);
    return it == str_labels.end() ? "" : it->second;
  }
};

struct PProfile {
  std::vector<std::string> sample_types;
  std::vector<PSample> samples;
  std::map<uint64_t, PFunction> functions;
  std::string error;  // "" when decoded whole
  int ValueIndex(const std::string& type) const {
    for (size_t i = 0; i < sample_types.size(); ++i) {
      if (sample_types[i] == type) return static_cast<int>(i);
    }
    return -1;
  }
};

// The profile in the gzipped pprof file at `path`; error says what could
// not be decoded (what was decoded before it is kept).
PProfile DecodePprof(const std::string& path);

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_PPROF_WIRE_H_
