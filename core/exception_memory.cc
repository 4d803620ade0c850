// Memory for the exceptions libdlprof's own code throws (std::bad_alloc from
// the collector's containers, caught in backends/cfi_tables.cc), for the
// private copy of libstdc++ linked into libdlprof.so (core/CMakeLists.txt).
// libstdc++'s own version of these four functions (eh_alloc.cc) comes with an
// emergency pool of 73 KB malloc'd at load time: a second one on the heap of
// every C++ and torch process. Defined here, they keep that object out of
// the link. Hidden: the program's own C++ runtime keeps its own.
//
// The layout is libstdc++'s: a zeroed header of DLPROF_CXA_EXCEPTION_HEADER
// bytes before the thrown object, a zeroed block of
// DLPROF_CXA_DEPENDENT_EXCEPTION bytes for a dependent exception, both
// measured at configure time from the libstdc++ that is linked in
// (cmake/probe_exception_sizes.cc).
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>

#if !defined(DLPROF_CXA_EXCEPTION_HEADER) || !defined(DLPROF_CXA_DEPENDENT_EXCEPTION)
#error "configure-time sizes missing (cmake/probe_exception_sizes.cc)"
#endif

namespace {

// For when malloc fails, as it does for the bad_alloc being thrown: a few
// blocks in .bss (not the program's heap; untouched until used), as
// libstdc++'s emergency pool is for its own runtime.
constexpr size_t kReserveBlock = 512;
constexpr int kReserveBlocks = 8;
alignas(16) unsigned char g_reserve[kReserveBlocks][kReserveBlock];
std::atomic<bool> g_reserve_taken[kReserveBlocks];
static_assert(DLPROF_CXA_EXCEPTION_HEADER + 64 <= kReserveBlock, "a bad_alloc fits a block");
static_assert(DLPROF_CXA_DEPENDENT_EXCEPTION <= kReserveBlock, "a dependent exception fits a block");

void* Allocate(size_t size) {
  if (void* p = malloc(size)) return p;
  if (size <= kReserveBlock) {
    for (int i = 0; i < kReserveBlocks; ++i) {
      if (!g_reserve_taken[i].exchange(true, std::memory_order_acquire)) return g_reserve[i];
    }
  }
  std::terminate();  // as libstdc++ does when its pool is exhausted too
}

void Release(void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  const auto base = reinterpret_cast<uintptr_t>(g_reserve);
  if (a >= base && a < base + sizeof g_reserve) {
    g_reserve_taken[(a - base) / kReserveBlock].store(false, std::memory_order_release);
    return;
  }
  free(p);
}

}  // namespace

#define DLPROF_CXA_HIDDEN __attribute__((visibility("hidden")))

extern "C" {

DLPROF_CXA_HIDDEN void* __cxa_allocate_exception(size_t thrown_size) noexcept {
  constexpr size_t header = DLPROF_CXA_EXCEPTION_HEADER;
  if (thrown_size > SIZE_MAX - header) std::terminate();
  auto* p = static_cast<unsigned char*>(Allocate(header + thrown_size));
  memset(p, 0, header);
  return p + header;
}

DLPROF_CXA_HIDDEN void __cxa_free_exception(void* thrown) noexcept {
  Release(static_cast<unsigned char*>(thrown) - DLPROF_CXA_EXCEPTION_HEADER);
}

DLPROF_CXA_HIDDEN void* __cxa_allocate_dependent_exception() noexcept {
  void* p = Allocate(DLPROF_CXA_DEPENDENT_EXCEPTION);
  memset(p, 0, DLPROF_CXA_DEPENDENT_EXCEPTION);
  return p;
}

DLPROF_CXA_HIDDEN void __cxa_free_dependent_exception(void* p) noexcept { Release(p); }

}  // extern "C"
