// The "cfi" unwinder's tables and walk, checked against references that are
// not ours: libdw's CFI interpreter for every row of real objects (libc,
// libstdc++, CPython's libpython, this test), and libunwind's walk of the
// same live signal frames.
#include <dlfcn.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cfi_tables.h"
#include "backends/eh_frame.h"
#include "backends/unwinder.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

using testing::RunCommand;

constexpr char kLibpython[] = "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0";

struct Object {
  std::string path;  // of the file
  uintptr_t bias = 0;
  LoadedEhFrame frame;
};

// The loaded object whose path contains `needle` ("" for the main program).
bool FindObject(const std::string& needle, Object* out) {
  struct Find {
    const std::string* needle;
    Object* out;
    bool found = false;
  } f{&needle, out};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* f = static_cast<Find*>(data);
        const std::string name = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const bool match = f->needle->empty() ? name.empty() : name.find(*f->needle) != std::string::npos;
        if (!match || !FindLoadedEhFrame(info, &f->out->frame)) return 0;
        f->out->path = name.empty() ? "/proc/self/exe" : name;
        f->out->bias = info->dlpi_addr;
        f->found = true;
        return 1;
      },
      &f);
  return f.found;
}

// libdw's answer for one address, in the rows' terms.
struct Reference {
  bool simple = false;  // CFA = %rsp/%rbp + offset and the return address at CFA - 8
  bool outermost = false;
  uint8_t kind = 0;
  int64_t cfa_offset = 0;
  bool fp_same = false;
  bool fp_at_offset = false;
  int64_t fp_offset = 0;
};

// A register rule as libdw spells it: call_frame_cfa [+ offset].
bool CfaPlus(const Dwarf_Op* ops, size_t nops, int64_t* offset) {
  if (nops == 0 || ops[0].atom != DW_OP_call_frame_cfa) return false;
  if (nops == 1) {
    *offset = 0;
    return true;
  }
  if (nops == 2 && ops[1].atom == DW_OP_plus_uconst) {
    *offset = static_cast<int64_t>(ops[1].number);
    return true;
  }
  if (nops == 3 && ops[1].atom == DW_OP_consts && ops[2].atom == DW_OP_plus) {
    *offset = static_cast<int64_t>(ops[1].number);
    return true;
  }
  return false;
}

// A CFA expression evaluated at `pc`, as %rsp + *offset: a small stack
// machine for the operations a .plt's expression uses (breg7 first, breg16
// for %rip, literals, and, ge, shl, plus). False for any other expression.
bool EvaluateSpExpression(const Dwarf_Op* ops, size_t nops, uint64_t pc, int64_t* offset) {
  if (nops == 0 || ops[0].atom != DW_OP_breg7) return false;
  int64_t stack[8];
  int depth = 0;
  for (size_t i = 0; i < nops; ++i) {
    const Dwarf_Op& op = ops[i];
    int64_t a = 0, b = 0;
    if (op.atom == DW_OP_breg7 || op.atom == DW_OP_breg16 || (op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31)) {
      if (depth == 8 || (op.atom == DW_OP_breg7 && i != 0)) return false;
      const int64_t base = op.atom == DW_OP_breg16 ? static_cast<int64_t>(pc) : 0;  // %rsp counts as 0
      stack[depth++] = op.atom >= DW_OP_lit0 && op.atom <= DW_OP_lit31
                           ? op.atom - DW_OP_lit0
                           : base + static_cast<int64_t>(op.number);
      continue;
    }
    if (depth < 2) return false;
    b = stack[--depth];
    a = stack[--depth];
    switch (op.atom) {
      case DW_OP_and: stack[depth++] = a & b; break;
      case DW_OP_ge: stack[depth++] = a >= b ? 1 : 0; break;
      case DW_OP_shl: stack[depth++] = a << b; break;
      case DW_OP_plus: stack[depth++] = a + b; break;
      default: return false;
    }
  }
  if (depth != 1) return false;
  *offset = stack[0];
  return true;
}

bool Ask(Dwarf_CFI* cfi, uint64_t file_pc, Reference* ref) {
  Dwarf_Frame* frame = nullptr;
  if (dwarf_cfi_addrframe(cfi, file_pc, &frame) != 0) return false;
  Dwarf_Op* ops = nullptr;
  size_t nops = 0;
  Dwarf_Op mem[3];
  bool ok = true;
  Dwarf_Op* ra_ops = nullptr;
  size_t ra_nops = 0;
  if (dwarf_frame_register(frame, 16, mem, &ra_ops, &ra_nops) != 0) ok = false;
  if (ok && ra_nops == 0 && ra_ops == mem) ref->outermost = true;
  int64_t ra_offset = 0;
  const bool ra_standard = ok && CfaPlus(ra_ops, ra_nops, &ra_offset) && ra_offset == -8;
  // libdw spells "register + offset" DW_OP_bregx (or DW_OP_bregN).
  uint64_t cfa_reg = ~uint64_t{0};
  int64_t cfa_offset = 0;
  if (ok && dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1) {
    if (ops[0].atom == DW_OP_bregx) {
      cfa_reg = ops[0].number;
      cfa_offset = static_cast<int64_t>(ops[0].number2);
    } else if (ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31) {
      cfa_reg = ops[0].atom - DW_OP_breg0;
      cfa_offset = static_cast<int64_t>(ops[0].number);
    }
  } else if (ok && nops > 1 && EvaluateSpExpression(ops, nops, file_pc, &cfa_offset)) {
    cfa_reg = 7;  // a .plt's: %rsp plus what the entry pushed by this pc (the bias keeps pc & 15)
  }
  if ((cfa_reg == 7 || cfa_reg == 6) && ra_standard) {
    ref->simple = true;
    ref->kind = cfa_reg == 7 ? kCfiSp : kCfiFp;
    ref->cfa_offset = cfa_offset;
    Dwarf_Op* fp_ops = nullptr;
    size_t fp_nops = 0;
    Dwarf_Op fp_mem[3];
    if (dwarf_frame_register(frame, 6, fp_mem, &fp_ops, &fp_nops) == 0) {
      if (fp_nops == 0 && fp_ops == nullptr) ref->fp_same = true;
      ref->fp_at_offset = CfaPlus(fp_ops, fp_nops, &ref->fp_offset);
    }
  }
  free(frame);
  return ok;
}

struct Agreement {
  long rows = 0, checked = 0, agreed = 0, unknown_ours = 0, unknown_both = 0;
  std::string first_disagreement;
};

// Every row of the object, at its first address and its last, against libdw.
Agreement Compare(const Object& o) {
  Agreement a;
  CfiRowVector rows;
  std::string error;
  long skipped = 0;
  EXPECT_TRUE(DecodeEhFrame(o.frame.source, &rows, &error, &skipped)) << o.path << ": " << error;
  EXPECT_EQ(skipped, 0) << o.path;
  a.rows = static_cast<long>(rows.size());
  elf_version(EV_CURRENT);
  const int fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << o.path;
  if (fd < 0) return a;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  Dwarf_CFI* cfi = elf != nullptr ? dwarf_getcfi_elf(elf) : nullptr;
  EXPECT_NE(cfi, nullptr) << o.path;
  for (size_t i = 0; cfi != nullptr && i + 1 < rows.size(); ++i) {
    const CfiRow& row = rows[i];
    if (row.kind == kCfiNone) continue;
    const uint64_t first = o.frame.source.base + row.pc_offset - o.bias;
    const uint64_t last = o.frame.source.base + rows[i + 1].pc_offset - 1 - o.bias;
    for (uint64_t file_pc : {first, last}) {
      Reference ref;
      if (!Ask(cfi, file_pc, &ref)) continue;  // libdw has no FDE here either
      ++a.checked;
      bool same;
      if (row.kind == kCfiOutermost) {
        same = ref.outermost;
      } else if (row.kind == kCfiUnknown || row.kind == kCfiSignal) {
        same = !ref.simple;
        ++a.unknown_ours;
        if (same) ++a.unknown_both;
      } else {
        same = ref.simple && ref.kind == row.kind && ref.cfa_offset == row.cfa_offset;
        if (row.fp_offset == 0) same = same && ref.fp_same;
        else if (row.fp_offset != INT16_MIN) same = same && ref.fp_at_offset && ref.fp_offset == row.fp_offset;
      }
      if (same) {
        ++a.agreed;
      } else if (a.first_disagreement.empty()) {
        char buf[256];
        snprintf(buf, sizeof(buf),
                 "%s+%#lx: ours kind %d cfa %d fp %d; libdw simple %d kind %d cfa %ld fp_same %d "
                 "fp_at %d (%ld) outermost %d",
                 o.path.c_str(), static_cast<unsigned long>(file_pc), row.kind, row.cfa_offset,
                 row.fp_offset, ref.simple, ref.kind, static_cast<long>(ref.cfa_offset),
                 ref.fp_same, ref.fp_at_offset, static_cast<long>(ref.fp_offset), ref.outermost);
        a.first_disagreement = buf;
      }
    }
  }
  if (elf != nullptr) elf_end(elf);  // also frees the CFI
  close(fd);
  return a;
}

void ExpectAgreement(const char* needle) {
  Object o;
  ASSERT_TRUE(FindObject(needle, &o)) << needle << " is not loaded";
  const Agreement a = Compare(o);
  std::printf("[ cfi ] %s: %ld rows, %ld addresses checked, %ld agree; %ld unknown to us (%ld to libdw too)\n",
              o.path.c_str(), a.rows, a.checked, a.agreed, a.unknown_ours, a.unknown_both);
  EXPECT_GT(a.rows, 100) << o.path;
  EXPECT_GT(a.checked, a.rows) << o.path << ": libdw found too few of our rows";
  EXPECT_EQ(a.agreed, a.checked) << a.first_disagreement;
}

TEST(CfiRows, AgreeWithLibdwForLibc) { ExpectAgreement("libc.so"); }
TEST(CfiRows, AgreeWithLibdwForLibstdcxx) { ExpectAgreement("libstdc++"); }
TEST(CfiRows, AgreeWithLibdwForThisProgram) { ExpectAgreement(""); }
TEST(CfiRows, AgreeWithLibdwForCPython) {
  void* python = dlopen(kLibpython, RTLD_LAZY | RTLD_LOCAL);
  ASSERT_NE(python, nullptr) << kLibpython << " (python3-dev, scripts/setup.sh): " << dlerror();
  ExpectAgreement("libpython3.11");
}

// Bytes of a real .eh_frame, damaged at random, in memory with an
// inaccessible page on each side: any read outside the given range kills the
// test. The decoder must end every time, with or without rows.
TEST(CfiRows, DamagedTablesAreReadWithinTheirBoundsAndEnd) {
  Object libc;
  ASSERT_TRUE(FindObject("libc.so", &libc));
  const EhFrameSource& real = libc.frame.source;
  const size_t size = real.readable_hi - real.readable_lo;
  const size_t page = 4096;
  const size_t span = (size + page - 1) / page * page;
  auto* area = static_cast<unsigned char*>(mmap(nullptr, span + 2 * page, PROT_READ | PROT_WRITE,
                                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(area, MAP_FAILED);
  ASSERT_EQ(mprotect(area, page, PROT_NONE), 0);
  ASSERT_EQ(mprotect(area + page + span, page, PROT_NONE), 0);
  // The copy ends where the upper guard starts, so a read past its end faults.
  unsigned char* copy = area + page + (span - size);
  std::mt19937_64 rng(12345);
  const uintptr_t delta = reinterpret_cast<uintptr_t>(copy) - real.readable_lo;
  EhFrameSource fake{real.eh_frame_hdr + delta, reinterpret_cast<uintptr_t>(copy),
                     reinterpret_cast<uintptr_t>(copy) + size, real.base + delta};
  const size_t hdr_at = real.eh_frame_hdr - real.readable_lo;
  // The range starts at libc's first byte and so takes in its text, whose
  // TSan shadow is read-only: a plain memcpy of it dies under TSan. The
  // kernel's copy is not instrumented.
  std::vector<unsigned char> pristine(size);
  iovec local{pristine.data(), size};
  iovec remote{reinterpret_cast<void*>(real.readable_lo), size};
  ASSERT_EQ(process_vm_readv(getpid(), &local, 1, &remote, 1, 0), static_cast<ssize_t>(size));
  long total_rows = 0, total_skipped = 0;
  for (int round = 0; round < 60; ++round) {
    std::memcpy(copy, pristine.data(), size);
    // Damage the header's table and the FDEs and CIEs it points at.
    const int flips = 1 + static_cast<int>(rng() % 400);
    for (int i = 0; i < flips; ++i) {
      const size_t at = round % 2 == 0 ? hdr_at + rng() % 4096 : rng() % size;
      copy[at] = static_cast<unsigned char>(rng());
    }
    CfiRowVector rows;
    std::string error;
    long skipped = 0;
    DecodeEhFrame(fake, &rows, &error, &skipped);
    for (size_t i = 1; i < rows.size(); ++i) {
      ASSERT_GT(rows[i].pc_offset, rows[i - 1].pc_offset) << "rows must stay sorted";
    }
    total_rows += static_cast<long>(rows.size());
    total_skipped += skipped;
  }
  std::printf("[ cfi ] damaged copies: %ld rows kept, %ld FDEs skipped over 60 rounds\n", total_rows,
              total_skipped);
  EXPECT_GT(total_skipped, 0) << "the damage should have cost some FDEs";
  munmap(area, span + 2 * page);
}

// Without .eh_frame_hdr the decoder walks .eh_frame entry by entry (an
// object linked with --no-eh-frame-hdr): on real objects that must give the
// very rows the header's search table gives.
void ExpectSectionWalkMatchesHeader(const std::string& needle) {
  Object o;
  ASSERT_TRUE(FindObject(needle, &o)) << needle;
  ASSERT_NE(o.frame.source.eh_frame_hdr, 0u);
  CfiRowVector by_header, by_walk;
  std::string error;
  long skipped_header = 0, skipped_walk = 0;
  ASSERT_TRUE(DecodeEhFrame(o.frame.source, &by_header, &error, &skipped_header)) << error;
  // The section's place, as the collector finds it for an object without a
  // header: the file's section headers.
  char self[4096] = {};
  const std::string file = o.path == "/proc/self/exe" && readlink(o.path.c_str(), self, sizeof(self) - 1) > 0
                               ? std::string(self) : o.path;  // readelf's own /proc/self/exe is readelf
  const std::string sections = RunCommand("readelf -SW " + file);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(sections, m,
                                std::regex(R"( \.eh_frame +PROGBITS +([0-9a-f]+) [0-9a-f]+ ([0-9a-f]+) )")))
      << sections;
  EhFrameSource walk = o.frame.source;
  walk.eh_frame_hdr = 0;
  walk.eh_frame = o.bias + std::stoull(m[1], nullptr, 16);
  walk.eh_frame_size = std::stoull(m[2], nullptr, 16);
  ASSERT_TRUE(DecodeEhFrame(walk, &by_walk, &error, &skipped_walk)) << error;
  EXPECT_EQ(skipped_walk, skipped_header);
  ASSERT_GT(by_header.size(), 100u);
  ASSERT_EQ(by_walk.size(), by_header.size());
  for (size_t i = 0; i < by_header.size(); ++i) {
    ASSERT_EQ(std::memcmp(&by_walk[i], &by_header[i], sizeof(CfiRow)), 0) << "row " << i;
  }
}

TEST(CfiRows, SectionWalkGivesTheHeadersRowsForLibc) { ExpectSectionWalkMatchesHeader("libc.so"); }
TEST(CfiRows, SectionWalkGivesTheHeadersRowsForThisProgram) { ExpectSectionWalkMatchesHeader(""); }

// The walk itself: the same live signal frames, unwound by cfi and by
// libunwind, in a thread that is deep in libc (qsort calling back into a
// recursion, so libc's frames without frame pointers are in the middle).
std::atomic<bool> g_stop{false};
std::atomic<int> g_compared{0}, g_equal{0};
Unwinder* g_cfi = nullptr;
Unwinder* g_reference = nullptr;
StackBounds g_bounds;
std::atomic<bool> g_difference_taken{false};
uintptr_t g_diff_ours[128], g_diff_theirs[128];
int g_diff_n = 0, g_diff_m = 0;

__attribute__((noinline)) int Spin(int depth);

int Compare(const void* a, const void* b) {
  Spin(3);
  return *static_cast<const int*>(a) - *static_cast<const int*>(b);
}

__attribute__((noinline)) int Spin(int depth) {
  volatile int sink = 0;
  if (depth > 0) return Spin(depth - 1) + 1;
  for (int i = 0; i < 2000; ++i) sink = sink + i;
  return sink;
}

void OnSignal(int, siginfo_t*, void* uc) {
  uintptr_t ours[128], theirs[128];
  const int n = g_cfi->Unwind(static_cast<const ucontext_t*>(uc), g_bounds, ours, 128);
  const int m = g_reference->Unwind(static_cast<const ucontext_t*>(uc), g_bounds, theirs, 128);
  g_compared.fetch_add(1);
  bool same = n == m;
  for (int i = 0; same && i < n; ++i) same = ours[i] == theirs[i];
  if (same) {
    g_equal.fetch_add(1);
  } else if (!g_difference_taken.exchange(true)) {
    std::memcpy(g_diff_ours, ours, sizeof(ours));
    std::memcpy(g_diff_theirs, theirs, sizeof(theirs));
    g_diff_n = n;
    g_diff_m = m;
  }
}

// Each pc with its object, offset and symbol; the first also with the row
// the tables hold for it (a difference once came from a libc leaf under
// ASan, 1 in 300, and a bare address could not be placed afterwards).
std::string Hex(const uintptr_t* pcs, int n) {
  std::string s;
  char buf[96];
  for (int i = 0; i < n; ++i) {
    snprintf(buf, sizeof(buf), "\n   %#lx", static_cast<unsigned long>(pcs[i]));
    s += buf;
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(pcs[i] - (i > 0 ? 1 : 0)), &info) != 0 &&
        info.dli_fname != nullptr) {
      snprintf(buf, sizeof(buf), " %s+%#lx", info.dli_fname,
               static_cast<unsigned long>(pcs[i] - reinterpret_cast<uintptr_t>(info.dli_fbase)));
      s += buf;
      if (info.dli_sname != nullptr) s += std::string(" (") + info.dli_sname + ")";
    }
    if (i == 0) {
      const CfiReadSection section;
      CfiRow row{};
      const CfiFound found = CfiLookup(section.snapshot(), pcs[0], &row);
      snprintf(buf, sizeof(buf), " row: found %d kind %d cfa+%d fp@%d",
               static_cast<int>(found), row.kind, row.cfa_offset, row.fp_offset);
      s += buf;
    }
  }
  return s;
}

void* SortForever(void*) {
  g_bounds = CurrentStackBounds();
  std::vector<int> v(64);
  while (!g_stop.load()) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>((i * 7919) % 64);
    qsort(v.data(), v.size(), sizeof(int), Compare);
  }
  return nullptr;
}

TEST(CfiUnwinder, WalksLiveFramesAsLibunwindDoes) {
  std::string error;
  std::unique_ptr<Unwinder> cfi = MakeUnwinder("cfi", &error);
  ASSERT_NE(cfi, nullptr) << error;
  std::unique_ptr<Unwinder> reference = MakeUnwinder("libunwind", &error);
  ASSERT_NE(reference, nullptr) << error;
  CfiDecodeAllLoaded();
  cfi->Maintain();  // this test is the collector: decode the tables now
  reference->PrepareThread();
  g_cfi = cfi.get();
  g_reference = reference.get();
  struct sigaction sa {};
  sa.sa_sigaction = OnSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);
  pthread_t thread;
  ASSERT_EQ(pthread_create(&thread, nullptr, SortForever, nullptr), 0);
  usleep(20000);
  // Each signal is sent once the one before was handled: signals sent while
  // one is pending merge with it, and on a loaded machine only 81 of 300 sent
  // every 500 us arrived (a CI-like run). Waiting makes the count the number
  // sent, whatever the load; the deadline only stops a thread that never
  // handles them (then the count says so).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 300 && std::chrono::steady_clock::now() < deadline; ++i) {
    const int before = g_compared.load();
    pthread_kill(thread, SIGUSR2);
    while (g_compared.load() == before && std::chrono::steady_clock::now() < deadline) usleep(200);
    usleep(300);
  }
  g_stop.store(true);
  pthread_join(thread, nullptr);
  signal(SIGUSR2, SIG_DFL);
  std::printf("[ cfi ] %d of %d live samples identical to libunwind's; %s\n", g_equal.load(),
              g_compared.load(), cfi->Describe().c_str());
  ASSERT_EQ(g_compared.load(), 300);
  // Every one: both follow the same CFI, so any difference is a bug in ours.
  EXPECT_EQ(g_equal.load(), g_compared.load())
      << "first difference:\n cfi:      " << Hex(g_diff_ours, g_diff_n)
      << "\n libunwind:" << Hex(g_diff_theirs, g_diff_m);
}

// The address of section `name` of a loaded object, 0 if it has none.
uintptr_t SectionAddress(const Object& o, const char* name, size_t* size) {
  elf_version(EV_CURRENT);
  const int fd = open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  uintptr_t at = 0;
  Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
  size_t strings = 0;
  if (elf != nullptr && elf_getshdrstrndx(elf, &strings) == 0) {
    for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
      GElf_Shdr sh;
      if (gelf_getshdr(scn, &sh) == nullptr) continue;
      const char* n = elf_strptr(elf, strings, sh.sh_name);
      if (n != nullptr && strcmp(n, name) == 0) {
        at = o.bias + sh.sh_addr;
        *size = sh.sh_size;
      }
    }
  }
  if (elf != nullptr) elf_end(elf);
  close(fd);
  return at;
}

// A sample that lands in a PLT stub, as glibc's own calls of memcpy through
// its IFUNC slots do: libc's .plt entries say where the return address is
// by an expression of %rip (one push at the entry's 11th byte). Before and
// after that push, the walk finds the caller, as libunwind does. (It
// stopped there: an ASan CI run's live comparison differed so, 1 in 300.)
TEST(CfiUnwinder, WalksOutOfAPltStub) {
  std::string error;
  std::unique_ptr<Unwinder> cfi = MakeUnwinder("cfi", &error);
  ASSERT_NE(cfi, nullptr) << error;
  std::unique_ptr<Unwinder> reference = MakeUnwinder("libunwind", &error);
  ASSERT_NE(reference, nullptr) << error;
  CfiDecodeAllLoaded();
  cfi->Maintain();
  Object libc;
  ASSERT_TRUE(FindObject("libc.so", &libc));
  size_t plt_size = 0;
  const uintptr_t plt = SectionAddress(libc, ".plt", &plt_size);
  ASSERT_NE(plt, 0u) << libc.path << " has no .plt";
  ASSERT_GE(plt_size, 64u);
  // A caller's return address: inside this test's code, which has rows.
  const uintptr_t caller = reinterpret_cast<uintptr_t>(&Spin) + 4;
  alignas(16) uintptr_t stack[64] = {};
  const StackBounds bounds{reinterpret_cast<uintptr_t>(stack),
                           reinterpret_cast<uintptr_t>(stack + 64), 0, 0};
  int checked = 0;
  for (uintptr_t entry = plt + 16; entry + 16 <= plt + plt_size && checked < 40; entry += 16) {
    for (uintptr_t at : {entry, entry + 6, entry + 11, entry + 15}) {
      // What the entry pushed by `at` (its relocation index), then the call's
      // return address.
      const bool pushed = at - entry >= 11;
      std::fill(std::begin(stack), std::end(stack), 0);
      stack[0] = pushed ? 7 : caller;
      stack[1] = pushed ? caller : 0;
      ucontext_t uc{};
      uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(at);
      uc.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(reinterpret_cast<uintptr_t>(stack));
      uintptr_t ours[8] = {}, theirs[8] = {};
      const int n = cfi->Unwind(&uc, bounds, ours, 8);
      const int m = reference->Unwind(&uc, bounds, theirs, 8);
      SCOPED_TRACE("libc .plt+" + std::to_string(at - plt));
      ASSERT_GE(n, 2);
      EXPECT_EQ(ours[0], at);
      EXPECT_EQ(ours[1], caller);
      ASSERT_GE(m, 2);
      EXPECT_EQ(theirs[1], caller) << "libunwind does not agree with the test";
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

}  // namespace
}  // namespace dlprof
