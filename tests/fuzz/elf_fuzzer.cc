// libFuzzer target: ELF files as modules to symbolize (readers/symbolizer: build-id, libdwfl).
// See tests/fuzz/README.md; the work is in fuzz_inputs.h.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dlprof::fuzz::Elf(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
