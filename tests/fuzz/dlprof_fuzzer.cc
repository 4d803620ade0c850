// libFuzzer target: .dlprof files (readers/dlprof_reader), then the analysis and every writer.
// See tests/fuzz/README.md; the work is in fuzz_inputs.h.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlprof::fuzz::Dlprof(std::string(reinterpret_cast<const char*>(data), size),
                       dlprof::fuzz::Writers::kOnePerInput);
  return 0;
}
