// Calls code in an anonymous executable mapping (no object, no unwind
// information, as JIT compilers make), for ~1 s:
//   nofp  a leaf loop that leaves %rbp as the caller left it
//   fp    the same with a frame-pointer prologue and epilogue
//   bad   a prologue that saves %rbp then loads it with garbage (0x1234)
#include <sys/mman.h>
#include <time.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

double Now() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "nofp";
  // mov ecx, 2000000; 1: dec ecx; jnz 1b
  const unsigned char loop[] = {0xb9, 0x80, 0x84, 0x1e, 0x00, 0xff, 0xc9, 0x75, 0xfc};
  std::string code;
  if (kind == "fp") code = "\x55\x48\x89\xe5";                         // push rbp; mov rbp, rsp
  if (kind == "bad") code = std::string("\x55\x48\xc7\xc5\x34\x12\x00\x00", 8);  // push rbp; mov rbp, 0x1234
  code.append(reinterpret_cast<const char*>(loop), sizeof loop);
  if (kind == "fp" || kind == "bad") code += "\x5d";                    // pop rbp
  code += "\xc3";                                                      // ret
  void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 2;
  std::memcpy(page, code.data(), code.size());
  if (mprotect(page, 4096, PROT_READ | PROT_EXEC) != 0) return 3;
  auto fn = reinterpret_cast<void (*)()>(page);
  long calls = 0;
  const double end = Now() + 1.0;
  while (Now() < end) {
    fn();
    ++calls;
  }
  std::printf("ok %s %d\n", kind.c_str(), calls > 0 ? 1 : 0);
  return 0;
}
