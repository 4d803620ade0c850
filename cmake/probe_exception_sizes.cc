// Configure-time probe (core/CMakeLists.txt): the sizes libstdc++ puts in
// front of a thrown object and of a dependent exception, read from the very
// runtime that libdlprof links in, by watching the malloc calls its
// __cxa_allocate_exception and __cxa_allocate_dependent_exception make.
// Prints "HEADER;DEPENDENT"; fails if the layout is not the expected one.
#include <cstddef>
#include <cstdio>
extern "C" void* __libc_malloc(size_t);
extern "C" void* __cxa_allocate_exception(size_t) noexcept;
extern "C" void __cxa_free_exception(void*) noexcept;
extern "C" void* __cxa_allocate_dependent_exception() noexcept;
extern "C" void __cxa_free_dependent_exception(void*) noexcept;
static void* g_last;
static size_t g_last_size;
extern "C" void* malloc(size_t n) {
  void* p = __libc_malloc(n);
  g_last = p;
  g_last_size = n;
  return p;
}
int main() {
  void* p = __cxa_allocate_exception(24);
  const size_t header = static_cast<char*>(p) - static_cast<char*>(g_last);
  if (g_last_size != header + 24 || header % 16 != 0) return 1;
  __cxa_free_exception(p);
  void* d = __cxa_allocate_dependent_exception();
  if (d != g_last) return 2;
  const size_t dependent = g_last_size;
  __cxa_free_dependent_exception(d);
  std::printf("%zu;%zu", header, dependent);
  return 0;
}
