// Throws and catches through core/exception_memory.cc, linked as libdlprof.so
// links it (libstdc++ and libgcc linked in, exception memory of our own):
// the exceptions dlprof's code can raise, a dependent exception
// (std::rethrow_exception), and bad_alloc thrown while malloc itself fails
// (the reserve blocks), nested. Prints one line per check and "ok" at the
// end; exits non-zero at the first one that goes wrong. Run by
// Runtime.ExceptionMemoryOfOurOwnThrowsAndCatchesLikeLibstdcxx.
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <vector>

namespace {

long VmSizeKb() {
  FILE* f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f != nullptr && fgets(line, sizeof line, f) != nullptr) {
    if (strncmp(line, "VmSize:", 7) == 0) kb = atol(line + 7);
  }
  if (f != nullptr) fclose(f);
  return kb;
}

int Fail(const char* what) {
  printf("FAILED: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  // libstdc++'s emergency pool (73 KB) would be in use before main.
  struct mallinfo2 m = mallinfo2();
  printf("heap in use at main: %zu bytes\n", m.uordblks + m.hblkhd);
  if (m.uordblks + m.hblkhd >= 16 * 1024) return Fail("a pool on the heap at main");

  try {
    std::vector<char> v;
    v.reserve(v.max_size() + 1);
    return Fail("no length_error");
  } catch (const std::length_error&) {
    printf("length_error caught\n");
  }
  try {
    throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
    printf("bad_alloc caught\n");
  }
  std::exception_ptr saved;
  try {
    throw std::runtime_error("kept");
  } catch (...) {
    saved = std::current_exception();
  }
  for (int i = 0; i < 2; ++i) {  // each rethrow is a dependent exception
    try {
      std::rethrow_exception(saved);
    } catch (const std::runtime_error& e) {
      if (strcmp(e.what(), "kept") != 0) return Fail("rethrown exception changed");
    }
  }
  saved = nullptr;
  printf("rethrown twice\n");

  // Exhaust the address space malloc can have, then throw: malloc fails for
  // the exception too, and it comes from the reserve (three alive at once).
  const rlim_t limit = static_cast<rlim_t>(VmSizeKb()) * 1024 + (16u << 20);
  struct rlimit rl = {limit, limit};
  if (setrlimit(RLIMIT_AS, &rl) != 0) return Fail("setrlimit");
  std::vector<void*> held;
  held.reserve(1 << 20);
  for (size_t size = 1 << 20; size >= 16; size /= 2) {
    while (held.size() < held.capacity()) {
      void* p = malloc(size);
      if (p == nullptr) break;
      held.push_back(p);
    }
  }
  if (malloc(200) != nullptr) return Fail("malloc still succeeds");
  int caught = 0;
  try {
    throw std::bad_alloc();
  } catch (const std::bad_alloc&) {
    try {
      throw std::bad_alloc();
    } catch (const std::bad_alloc&) {
      try {
        throw std::bad_array_new_length();
      } catch (const std::bad_alloc&) {
        ++caught;
      }
      ++caught;
    }
    ++caught;
  }
  for (int i = 0; i < 100; ++i) {  // the reserve is given back each time
    try {
      throw std::bad_alloc();
    } catch (const std::bad_alloc&) {
      ++caught;
    }
  }
  for (void* p : held) free(p);
  if (caught != 103) return Fail("nested throws under an exhausted malloc");
  printf("nested throws with malloc exhausted: %d caught\n", caught);
  printf("ok\n");
  return 0;
}
