#include "backends/cfi_region.h"

#include <atomic>

namespace dlprof {
namespace {
std::atomic<CfiRegion*> g_region{nullptr};
}  // namespace

CfiRegion* CfiInitRegion(void* at, size_t bytes) {
  if (at == nullptr || bytes < kCfiRegionHeapOffset + 4096) return nullptr;
  auto* region = static_cast<CfiRegion*>(at);  // zeroed: every atomic starts at 0
  region->bytes = bytes;
  region->used.store(kCfiRegionHeapOffset, std::memory_order_relaxed);
  region->magic = kCfiRegionMagic;
  return region;
}

bool CfiUseRegion(CfiRegion* region) {
  if (region == nullptr || region->magic != kCfiRegionMagic) return false;
  g_region.store(region, std::memory_order_release);
  cfi_shared::g_state.store(&region->state, std::memory_order_release);
  return true;
}

CfiRegion* CfiActiveRegion() { return g_region.load(std::memory_order_acquire); }

}  // namespace dlprof
