#include "backends/code_range.h"

#include <dlfcn.h>
#include <link.h>

namespace dlprof {

void CodeRange::FindObjectOf(const void* symbol) {
  Dl_info info;
  if (symbol == nullptr || dladdr(symbol, &info) == 0 || info.dli_fbase == nullptr) return;
  struct Find {
    uintptr_t base, start = 0, end = 0;
  } find{reinterpret_cast<uintptr_t>(info.dli_fbase)};
  dl_iterate_phdr(
      [](dl_phdr_info* object, size_t, void* data) {
        auto* f = static_cast<Find*>(data);
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = object->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          const uintptr_t start = object->dlpi_addr + ph.p_vaddr;
          // dli_fbase is the object's lowest mapped address, its load bias
          // for a shared object linked at 0.
          if (object->dlpi_addr != f->base && start != f->base) continue;
          f->start = start;
          f->end = start + ph.p_memsz;
        }
        return f->start != 0 ? 1 : 0;
      },
      &find);
  end_.store(find.end, std::memory_order_relaxed);
  start_.store(find.start, std::memory_order_release);
}

}  // namespace dlprof
