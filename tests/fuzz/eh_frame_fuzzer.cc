// libFuzzer target: unwind tables as the cfi unwinder decodes them
// (backends/eh_frame.cc), with and without .eh_frame_hdr. See
// tests/fuzz/README.md; the work is in fuzz_inputs.h.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlprof::fuzz::EhFrame(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
