// The offline symbolizer against real binaries: this test program itself (PIE),
// libc (debug info from libc6-dbg by build-id), programs compiled here as PIE
// and non-PIE, and stripped copies whose debug info is found by debuglink or
// build-id.
#include "readers/symbolizer.h"
#include "tests/support/files.h"
#include "tests/support/sanitizer.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace dlprof_test {

int g_known_line = 0;
int g_inline_line = 0;
int g_caller_line = 0;
const int kKnownDeclLine = __LINE__ + 10;

__attribute__((noinline)) void* CaptureReturnAddress() {
  void* ra = __builtin_return_address(0);
  asm volatile("" ::: "memory");
  return ra;
}

// The instruction after the call belongs to the next line, so only a lookup
// at return address - 1 lands on the call's line.
__attribute__((noinline)) void* KnownFunction(int x) {
  void* ra = CaptureReturnAddress();
  g_known_line = __LINE__ - 1 + x;
  asm volatile("" ::: "memory");
  return ra;
}

inline __attribute__((always_inline)) void* InlinedHelper() {
  void* ra = CaptureReturnAddress();
  g_inline_line = __LINE__ - 1;
  asm volatile("" ::: "memory");
  return ra;
}

__attribute__((noinline)) void* CallerOfInlined() {
  void* ra = InlinedHelper();
  g_caller_line = __LINE__ - 1;
  asm volatile("" ::: "memory");
  return ra;
}

}  // namespace dlprof_test

namespace dlprof {
namespace {

using testing::TempDir;

std::string RunCommand(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  EXPECT_EQ(status, 0) << cmd << "\n" << out;
  return out;
}

// The location of `addr` in this process, as a profile records it.
Location LocationOf(const void* addr) {
  auto a = reinterpret_cast<uint64_t>(addr);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uint64_t start, end, offset;
    char perms[8];
    char path[4096] = "";
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s %4095s", &start,
                    &end, perms, &offset, path) < 4) {
      continue;
    }
    if (a >= start && a < end) {
      Location loc;
      loc.module = path;
      loc.build_id = ReadElfBuildId(path);
      loc.module_offset = a - start + offset;
      loc.address = a;
      return loc;
    }
  }
  ADD_FAILURE() << "address not mapped";
  return Location();
}

std::vector<Frame> SymbolizeOne(Symbolizer& s, const Location& loc, bool is_return) {
  std::vector<Location> locs{loc};
  s.Symbolize(&locs, {is_return});
  return locs[0].frames;
}

std::string SelfPath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

std::string Basename(const std::string& p) { return p.substr(p.rfind('/') + 1); }

TEST(SymbolizerTest, ReturnAddressInMainBinaryGivesFunctionFileAndLine) {
  void* ra = dlprof_test::KnownFunction(0);
  Location loc = LocationOf(ra);
  ASSERT_EQ(loc.module, SelfPath());
  ASSERT_EQ(loc.build_id.size(), 40u) << "test binary has no GNU build-id";
  Symbolizer s;
  std::vector<Frame> frames = SymbolizeOne(s, loc, /*is_return=*/true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "dlprof_test::KnownFunction(int)");
  EXPECT_EQ(Basename(frames[0].file), "symbolizer_test.cc");
  EXPECT_EQ(frames[0].line, dlprof_test::g_known_line);
  EXPECT_TRUE(s.warnings().empty());

  // The same address taken as a pc is the next statement.
  Symbolizer as_pc;
  frames = SymbolizeOne(as_pc, loc, /*is_return=*/false);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].line, dlprof_test::g_known_line + 1);
}

TEST(SymbolizerTest, FunctionEntryIsItsDeclarationLine) {
  Location loc = LocationOf(reinterpret_cast<void*>(&dlprof_test::KnownFunction));
  Symbolizer s;
  std::vector<Frame> frames = SymbolizeOne(s, loc, /*is_return=*/false);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "dlprof_test::KnownFunction(int)");
  EXPECT_EQ(frames[0].line, dlprof_test::kKnownDeclLine);
}

TEST(SymbolizerTest, InlinedFramesComeInnermostFirst) {
  void* ra = dlprof_test::CallerOfInlined();
  Symbolizer s;
  std::vector<Frame> frames = SymbolizeOne(s, LocationOf(ra), /*is_return=*/true);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].function, "dlprof_test::InlinedHelper()");
  EXPECT_EQ(frames[0].line, dlprof_test::g_inline_line);
  EXPECT_EQ(frames[1].function, "dlprof_test::CallerOfInlined()");
  EXPECT_EQ(frames[1].line, dlprof_test::g_caller_line);
  EXPECT_EQ(Basename(frames[1].file), "symbolizer_test.cc");
}

TEST(SymbolizerTest, SharedLibraryFunctionIsNamed) {
  // qsort's address inside libc itself: &::qsort would be the sanitizers'
  // interceptor in an ASan or TSan build.
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(libc, nullptr);
  Location loc = LocationOf(dlsym(libc, "qsort"));
  ASSERT_NE(loc.module.find("libc.so"), std::string::npos) << loc.module;
  Symbolizer s;
  std::vector<Frame> frames = SymbolizeOne(s, loc, /*is_return=*/false);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().function, "qsort");
  std::string debug = "/usr/lib/debug/.build-id/" + loc.build_id.substr(0, 2) + "/" +
                      loc.build_id.substr(2) + ".debug";
  if (access(debug.c_str(), R_OK) == 0) {
    // libc6-dbg: the line comes from DWARF found by build-id.
    EXPECT_EQ(Basename(frames.back().file), "msort.c");
    EXPECT_GT(frames.back().line, 0);
  }
}

TEST(SymbolizerTest, UnknownAddressesAreModulePlusOffset) {
  Location outside = LocationOf(reinterpret_cast<void*>(&dlprof_test::KnownFunction));
  outside.module_offset = 0x7fffff00;
  Location missing;
  missing.module = "/nonexistent/dir/libgone.so";
  missing.module_offset = 0x1234;
  Location vdso;
  vdso.module = "[vdso]";
  vdso.module_offset = 0x9a0;
  Location unmapped;
  unmapped.address = 0xdeadbeef;
  std::vector<Location> locs{outside, missing, vdso, unmapped};
  Symbolizer s;
  s.Symbolize(&locs, {});
  EXPECT_EQ(locs[0].frames.at(0).function, Basename(SelfPath()) + "+0x7fffff00");
  EXPECT_EQ(locs[1].frames.at(0).function, "libgone.so+0x1234");
  EXPECT_EQ(locs[2].frames.at(0).function, "[vdso]+0x9a0");
  EXPECT_EQ(locs[3].frames.at(0).function, "0xdeadbeef");
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("libgone.so"), std::string::npos);
}

TEST(SymbolizerTest, BuildIdMismatchIsWarnedAndNotTrusted) {
  Location loc = LocationOf(dlprof_test::KnownFunction(0));
  loc.build_id = "00112233445566778899aabbccddeeff00112233";
  Symbolizer s("/nonexistent-debug-dir");
  std::vector<Frame> frames = SymbolizeOne(s, loc, true);
  ASSERT_EQ(frames.size(), 1u);
  char expected[128];
  std::snprintf(expected, sizeof(expected), "+0x%" PRIx64, loc.module_offset);
  EXPECT_EQ(frames[0].function, Basename(SelfPath()) + expected);
  ASSERT_EQ(s.warnings().size(), 1u);
  EXPECT_NE(s.warnings()[0].find("differs from recorded 00112233"), std::string::npos)
      << s.warnings()[0];
}

TEST(SymbolizerTest, StrippedCopyUsesDebuglink) {
  TempDir dir;
  std::string bin = dir.path() + "/stripped_bin";
  RunCommand("cp " + SelfPath() + " " + bin + " && cd " + dir.path() +
             " && objcopy --only-keep-debug stripped_bin stripped_bin.debug"
             " && strip --strip-all stripped_bin"
             " && objcopy --add-gnu-debuglink=stripped_bin.debug stripped_bin");
  Location loc = LocationOf(dlprof_test::KnownFunction(0));
  loc.module = bin;
  EXPECT_EQ(ReadElfBuildId(bin), loc.build_id);

  // Control: without the debug file the stripped copy knows no name.
  Symbolizer without("/nonexistent-debug-dir");
  std::vector<Frame> bare = SymbolizeOne(without, loc, true);
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_EQ(bare[0].function.rfind("stripped_bin+0x", 0), 0u) << bare[0].function;

  Symbolizer with(":.debug");
  std::vector<Frame> frames = SymbolizeOne(with, loc, true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "dlprof_test::KnownFunction(int)");
  EXPECT_EQ(frames[0].line, dlprof_test::g_known_line);
}

TEST(SymbolizerTest, StrippedCopyUsesBuildIdDirectory) {
  TempDir dir;
  std::string bin = dir.path() + "/stripped_bin";
  Location loc = LocationOf(dlprof_test::KnownFunction(0));
  std::string id_dir = dir.path() + "/debug/.build-id/" + loc.build_id.substr(0, 2);
  RunCommand("mkdir -p " + id_dir + " && cp " + SelfPath() + " " + bin +
             " && objcopy --only-keep-debug " + bin + " " + id_dir + "/" + loc.build_id.substr(2) +
             ".debug && strip --strip-all " + bin);
  Symbolizer s(dir.path() + "/debug");

  loc.module = bin;
  std::vector<Frame> frames = SymbolizeOne(s, loc, true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "dlprof_test::KnownFunction(int)");
  EXPECT_EQ(frames[0].line, dlprof_test::g_known_line);

  // The binary is gone (a container's path), but its build-id still finds it.
  loc.module = dir.path() + "/no_longer_here";
  frames = SymbolizeOne(s, loc, true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].function, "dlprof_test::KnownFunction(int)");
  EXPECT_EQ(frames[0].line, dlprof_test::g_known_line);
  for (const std::string& w : s.warnings()) ADD_FAILURE() << w;
}

// Compiles a C program that prints "file_offset address" of target_function as
// its own /proc/self/maps says; returns the program's location record.
Location CompileAndLocate(const TempDir& dir, const std::string& flags) {
  std::string src = dir.path() + "/prog.c";
  std::ofstream(src) << R"(#include <stdio.h>
__attribute__((noinline)) int target_function(int x) { return x * 3 + 1; }
int main(void) {
  unsigned long a = (unsigned long)&target_function, s, e, off;
  char line[4096], perms[8];
  FILE* f = fopen("/proc/self/maps", "r");
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lx-%lx %7s %lx", &s, &e, perms, &off) == 4 && a >= s && a < e)
      printf("%lx %lx\n", a - s + off, a);
  return target_function(0) == 1 ? 0 : 1;
}
)";
  std::string bin = dir.path() + "/prog";
  RunCommand("cc -g -O1 " + flags + " -o " + bin + " " + src);
  std::istringstream out(RunCommand(bin));
  Location loc;
  out >> std::hex >> loc.module_offset >> loc.address;
  loc.module = bin;
  loc.build_id = ReadElfBuildId(bin);
  return loc;
}

TEST(SymbolizerTest, NonPieAndPieProgramsBothResolve) {
  for (const char* flags : {"-no-pie -fno-pie", "-pie -fpie"}) {
    SCOPED_TRACE(flags);
    TempDir dir;
    Location loc = CompileAndLocate(dir, flags);
    ASSERT_NE(loc.address, 0u);
    Symbolizer s;
    std::vector<Frame> frames = SymbolizeOne(s, loc, false);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].function, "target_function");
    EXPECT_EQ(Basename(frames[0].file), "prog.c");
    EXPECT_EQ(frames[0].line, 2);
  }
}

TEST(SymbolizerTest, ManyAddressesCostOneDwarfLoad) {
  // Every 4th byte of 256 KiB of this binary's code from KnownFunction on,
  // each address twice: a reload of the module's DWARF per location would
  // take minutes. (From the 64 KiB boundary below it, the -O1 ASan build's
  // window began with 28 KiB of .rela.plt and .plt: 89% named.)
  Location base = LocationOf(reinterpret_cast<void*>(&dlprof_test::KnownFunction));
  std::vector<Location> locs;
  for (uint64_t off = 0; off < (256u << 10); off += 4) {
    for (int copy = 0; copy < 2; ++copy) {
      Location l = base;
      l.module_offset = base.module_offset + off;
      locs.push_back(l);
    }
  }
  std::clock_t start = std::clock();
  Symbolizer s;
  s.Symbolize(&locs, {});
  double cpu_seconds = double(std::clock() - start) / CLOCKS_PER_SEC;
  if (!testing::kUnderSanitizer) {  // TSan: 5-15x slower
    EXPECT_LT(cpu_seconds, 5.0);
  }
  size_t named = 0;
  for (size_t i = 0; i < locs.size(); i += 2) {
    ASSERT_EQ(locs[i].frames.size(), locs[i + 1].frames.size());
    EXPECT_EQ(locs[i].frames[0].function, locs[i + 1].frames[0].function);
    named += locs[i].frames[0].function.find("+0x") == std::string::npos;
  }
  EXPECT_GT(named, locs.size() / 2 * 9 / 10);
}

TEST(SymbolizerTest, ProfileLocationsAreReturnAddressesUnlessOnlyLeaves) {
  Profile p;
  void* ra = dlprof_test::KnownFunction(0);
  Location caller = LocationOf(ra);
  // The same pc as a leaf: pc - 1 would be wrong for it, and it still lands
  // in KnownFunction because the call is not the first instruction.
  Location leaf = LocationOf(reinterpret_cast<void*>(&dlprof_test::KnownFunction));
  uint32_t leaf_id = p.InternLocation(leaf);
  uint32_t caller_id = p.InternLocation(caller);
  p.InternStack({leaf_id, caller_id});
  Location pseudo;
  pseudo.pseudo = true;
  pseudo.frames.push_back(Frame{"[off-cpu: read]", "", 0});
  p.InternLocation(pseudo);
  Symbolizer s;
  s.SymbolizeProfile(&p);
  EXPECT_EQ(p.locations[caller_id].frames.at(0).line, dlprof_test::g_known_line);
  EXPECT_EQ(p.locations[leaf_id].frames.at(0).line, dlprof_test::kKnownDeclLine);
  EXPECT_EQ(p.locations[2].frames.at(0).function, "[off-cpu: read]");
  EXPECT_TRUE(p.warnings.empty());
}

}  // namespace
}  // namespace dlprof
