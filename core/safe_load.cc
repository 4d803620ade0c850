#include "core/safe_load.h"

#include <cstring>

// SafeLoad is a leaf function in assembly so that the one instruction that may
// fault is known by address, and so that a fault leaves nothing half-done: the
// handler sets the result registers and resumes at the return.
extern "C" dlprof::SafeWord dlprof_safe_load(const void* p);
extern "C" char dlprof_safe_load_insn[];
extern "C" char dlprof_safe_load_resume[];

#if defined(__x86_64__)
asm(R"(
  .text
  .p2align 4
  .globl dlprof_safe_load
  .hidden dlprof_safe_load
  .type dlprof_safe_load, @function
dlprof_safe_load:
  xorl %edx, %edx
  .globl dlprof_safe_load_insn
  .hidden dlprof_safe_load_insn
dlprof_safe_load_insn:
  movq (%rdi), %rax
  .globl dlprof_safe_load_resume
  .hidden dlprof_safe_load_resume
dlprof_safe_load_resume:
  ret
  .size dlprof_safe_load, . - dlprof_safe_load
)");
#elif defined(__aarch64__)
asm(R"(
  .text
  .p2align 4
  .globl dlprof_safe_load
  .hidden dlprof_safe_load
  .type dlprof_safe_load, %function
dlprof_safe_load:
  mov x1, #0
  .globl dlprof_safe_load_insn
  .hidden dlprof_safe_load_insn
dlprof_safe_load_insn:
  ldr x0, [x0]
  .globl dlprof_safe_load_resume
  .hidden dlprof_safe_load_resume
dlprof_safe_load_resume:
  ret
  .size dlprof_safe_load, . - dlprof_safe_load
)");
#else
#error "SafeLoad needs an implementation for this architecture"
#endif

namespace dlprof {

SafeWord SafeLoad(const void* p) { return dlprof_safe_load(p); }

bool SafeLoadU32(uintptr_t address, uint32_t* out) {
  uint64_t v;
  // One aligned word holds the value unless it straddles two words.
  const uintptr_t word = address & ~uintptr_t{7};
  const unsigned shift = static_cast<unsigned>(address - word) * 8;
  if (shift <= 32) {
    if (!SafeLoadU64(word, &v)) return false;
    *out = static_cast<uint32_t>(v >> shift);
    return true;
  }
  if (!SafeLoadU64(address, &v)) return false;
  *out = static_cast<uint32_t>(v);
  return true;
}

bool SafeLoadU8(uintptr_t address, uint8_t* out) {
  uint64_t v;
  const uintptr_t word = address & ~uintptr_t{7};
  if (!SafeLoadU64(word, &v)) return false;
  *out = static_cast<uint8_t>(v >> ((address - word) * 8));
  return true;
}

bool SafeCopy(uintptr_t address, void* out, size_t n) {
  unsigned char* dst = static_cast<unsigned char*>(out);
  // Aligned words only: an aligned word never spans two pages, so a read
  // never faults on a page that holds none of the wanted bytes.
  uintptr_t word = address & ~uintptr_t{7};
  size_t skip = address - word;
  while (n > 0) {
    uint64_t v;
    if (!SafeLoadU64(word, &v)) return false;
    unsigned char bytes[8];
    std::memcpy(bytes, &v, 8);
    const size_t take = n < 8 - skip ? n : 8 - skip;
    for (size_t i = 0; i < take; ++i) dst[i] = bytes[skip + i];
    dst += take;
    n -= take;
    word += 8;
    skip = 0;
  }
  return true;
}

bool RecoverSafeLoad(ucontext_t* uc) {
#if defined(__x86_64__)
  greg_t* regs = uc->uc_mcontext.gregs;
  if (regs[REG_RIP] != reinterpret_cast<greg_t>(dlprof_safe_load_insn)) return false;
  regs[REG_RAX] = 0;
  regs[REG_RDX] = 1;
  regs[REG_RIP] = reinterpret_cast<greg_t>(dlprof_safe_load_resume);
  return true;
#elif defined(__aarch64__)
  auto& mc = uc->uc_mcontext;
  if (mc.pc != reinterpret_cast<uint64_t>(dlprof_safe_load_insn)) return false;
  mc.regs[0] = 0;
  mc.regs[1] = 1;
  mc.pc = reinterpret_cast<uint64_t>(dlprof_safe_load_resume);
  return true;
#endif
}

}  // namespace dlprof
