// A profiled program whose names are hostile: stage and buffer names with HTML
// and JavaScript, quotes, newlines, control bytes, bytes that are not UTF-8,
// 10 kB names, 100,000 distinct stages, and functions whose symbol names are
// as bad (they are written in assembly, so no debug info renames them). The
// hostile-content tests (tests/hostile_test.cc) read every output of
// `dlprof report` for it.
// Usage: fault_hostile run [ANY-ARGUMENT]   (the argument lands in the profile's command line)
#include <dlprof/dlprof.hpp>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// Leaf functions in assembly, each spinning for %rdi iterations. The names
// live only in the ELF symbol table; .cfi directives let unwinders pass them.
#define DLPROF_SPIN_FN(SYM)                  \
  ".globl \"" SYM "\"\n"                     \
  ".hidden \"" SYM "\"\n"                    \
  ".type \"" SYM "\", @function\n"           \
  "\"" SYM "\":\n"                           \
  ".cfi_startproc\n"                         \
  "1: pause\n"                               \
  "dec %rdi\n"                               \
  "jnz 1b\n"                                 \
  "ret\n"                                    \
  ".cfi_endproc\n"                           \
  ".size \"" SYM "\", .-\"" SYM "\"\n"

#define HOSTILE_SYM_HTML "spin<img src=x onerror=alert(11)>;'q' </script><script>alert(12)</script> end"
#define HOSTILE_SYM_BYTES "spin_bytes\xff\xfe\xc3( \x1b[2J\xc2\x9b" "31m;x"
#define L10 "LLLLLLLLLL"
#define L100 L10 L10 L10 L10 L10 L10 L10 L10 L10 L10
#define L1000 L100 L100 L100 L100 L100 L100 L100 L100 L100 L100
#define HOSTILE_SYM_LONG \
  "spin_long_" L1000 L1000 L1000 L1000 L1000 L1000 L1000 L1000 L1000 L1000 "<b>TAIL</b>"

__asm__(".text\n" DLPROF_SPIN_FN(HOSTILE_SYM_HTML) DLPROF_SPIN_FN(HOSTILE_SYM_BYTES)
            DLPROF_SPIN_FN(HOSTILE_SYM_LONG));

// Hidden: called directly (the assembler rejects a quoted name with @PLT).
#define HOSTILE_DECL __attribute__((visibility("hidden")))
extern "C" HOSTILE_DECL void SpinHtml(long n) __asm__("\"" HOSTILE_SYM_HTML "\"");
extern "C" HOSTILE_DECL void SpinBytes(long n) __asm__("\"" HOSTILE_SYM_BYTES "\"");
extern "C" HOSTILE_DECL void SpinLong(long n) __asm__("\"" HOSTILE_SYM_LONG "\"");

namespace {

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((noinline)) void Burn(int64_t ns) {
  volatile uint64_t x = 88172645463325252ULL;
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    for (int i = 0; i < 2000; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  }
}

// Runs hostile function `which` in slices until it has used `ns` of CPU.
__attribute__((noinline)) void SpinFor(int which, int64_t ns) {
  int64_t end = ThreadCpuNs() + ns;
  while (ThreadCpuNs() < end) {
    if (which == 0) SpinHtml(200000);
    else if (which == 1) SpinBytes(200000);
    else SpinLong(200000);
  }
}

long RssKb() {
  long kb = -1;
  if (FILE* f = fopen("/proc/self/status", "r")) {
    char line[256];
    while (fgets(line, sizeof(line), f)) {
      if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    }
    fclose(f);
  }
  return kb;
}

std::vector<std::string> HostileNames() {
  std::string big = "HEAD<";
  while (big.size() < 10000) big += "0123456789<>&\"'";
  big += ">TAIL";
  return {
      "<script>alert(1)</script>",
      "</script><!--<script>alert(2)//",
      "<img src=x onerror=alert(3)>",
      "\"double\" 'single' `back` \\slash",
      "new\nline\r\ttab",
      "semi;colon space [stage x];0x1 42",
      std::string("bad\xff\xfe utf8 \xc3( \xed\xa0\x80 end"),
      "\x1b[2J\x1b]0;title\x07 esc \xc2\x9b" "31m c1",
      "\xe2\x80\xae" "RTL override \xe2\x80\xa8 line sep \xe2\x80\xa9",
      "{{template}} ${js} %s%n %x",
      "\"},{\"name\":\"injected\",\"ph\":\"X",
      "\xe6\x95\xb0\xe6\x8d\xae \xf0\x9f\x93\xa6 ok",  // valid UTF-8: kept as is
      big,
  };
}

int Run() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const std::vector<std::string> names = HostileNames();
  // One buffer per hostile name (sizes change over time), a stage per name.
  std::vector<dlprof_buffer*> buffers;
  for (const std::string& n : names) buffers.push_back(dlprof_buffer_create(n.c_str(), 8));
  for (int step = 0; step < 6; ++step) {
    dlprof::StepScope s;
    for (size_t i = 0; i < names.size(); ++i) {
      dlprof_buffer_set_size(buffers[i], static_cast<uint64_t>((step + i) % 9));
      dlprof::StageScope stage(dlprof_stage_intern(names[i].c_str()));
      Burn(8000000);
    }
  }
  // Functions with hostile symbol names, inside one plain stage.
  {
    DLPROF_STAGE("symbols");
    SpinFor(0, 150000000);
    SpinFor(1, 150000000);
    SpinFor(2, 150000000);
  }
  // 100,000 distinct stages: the runtime keeps a bounded table.
  const uint32_t outer = dlprof_stage_intern("outer_of_refused");
  const long rss_before = RssKb();
  char name[64];
  uint32_t refused = 0, last_id = 0;
  for (int i = 0; i < 100000; ++i) {
    snprintf(name, sizeof(name), "many%06d", i);
    uint32_t id = dlprof_stage_intern(name);
    if (id == 0) ++refused;
    dlprof::StageScope stage(id);
    if (i % 1000 == 0) Burn(1000000);
    last_id = id != 0 ? id : last_id;
  }
  {
    // Time in a refused stage still counts, under the enclosing one.
    dlprof::StageScope outer_stage(outer);
    snprintf(name, sizeof(name), "refused-late");
    dlprof::StageScope stage(dlprof_stage_intern(name));
    Burn(100000000);
  }
  const long rss_after = RssKb();
  printf("names=%zu refused=%u last_id=%u rss_growth_kb=%ld\n", names.size(), refused, last_id,
         rss_after - rss_before);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || strcmp(argv[1], "run") != 0) {
    fprintf(stderr, "usage: %s run [ARG]\n", argv[0]);
    return 2;
  }
  return Run();
}
