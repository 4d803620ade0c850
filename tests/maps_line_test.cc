// core/maps_line.h: the maps parser every reader of /proc/<pid>/maps uses.
// Checked against sscanf, the parse it replaced, on every line of a real
// process's maps, and on lines the kernel writes rarely or never.
#include "core/maps_line.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlprof {
namespace {

// The fields as the readers parsed them before, with sscanf.
struct Scanned {
  unsigned long lo = 0, hi = 0, offset = 0, inode = 0;
  unsigned major = 0, minor = 0;
  char perms[8] = {};
  std::string path;
};

bool ScanLine(const std::string& line, Scanned* s) {
  int path_at = 0;
  if (sscanf(line.c_str(), "%lx-%lx %7s %lx %x:%x %lu %n", &s->lo, &s->hi, s->perms, &s->offset, &s->major,
             &s->minor, &s->inode, &path_at) < 7) {
    return false;
  }
  s->path = line.substr(static_cast<size_t>(path_at));
  while (!s->path.empty() && (s->path.back() == '\n' || s->path.back() == ' ')) s->path.pop_back();
  return true;
}

TEST(MapsLine, EveryLineOfARealProcessParsesAsSscanfParsedIt) {
  // Some variety first: a library loaded, anonymous and file mappings.
  void* z = dlopen("libz.so.1", RTLD_NOW);
  std::string text, error;
  ASSERT_TRUE(ReadMapsText(getpid(), &text, &error)) << error;
  std::string self_text;
  ASSERT_TRUE(ReadMapsText(0, &self_text, &error)) << error;
  EXPECT_FALSE(self_text.empty());
  size_t lines = 0, with_path = 0, executable = 0;
  size_t at = 0;
  while (at < text.size()) {
    const size_t nl = text.find('\n', at);
    const std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
    at = nl == std::string::npos ? text.size() : nl + 1;
    Scanned s;
    ASSERT_TRUE(ScanLine(line, &s)) << line;
    MapsLine m;
    ASSERT_TRUE(ParseMapsLine(line, &m)) << line;
    ++lines;
    EXPECT_EQ(m.lo, s.lo) << line;
    EXPECT_EQ(m.hi, s.hi) << line;
    EXPECT_EQ(m.offset, s.offset) << line;
    EXPECT_EQ(m.dev_major, s.major) << line;
    EXPECT_EQ(m.dev_minor, s.minor) << line;
    EXPECT_EQ(m.inode, s.inode) << line;
    EXPECT_EQ(std::string(m.perms, 4), std::string(s.perms)) << line;
    EXPECT_EQ(std::string(m.path), s.path) << line;
    with_path += !m.path.empty();
    executable += m.executable();
  }
  size_t each = 0;
  ForEachMapsLine(text, [&](const MapsLine&) { ++each; });
  EXPECT_EQ(each, lines);
  EXPECT_GT(lines, 20u);
  EXPECT_GT(with_path, 5u);
  EXPECT_GT(executable, 3u);
  if (z != nullptr) dlclose(z);
}

TEST(MapsLine, RareShapesOfLines) {
  MapsLine m;
  ASSERT_TRUE(ParseMapsLine("7f00-7f10 r-xp 00001000 fd:01 123456     /opt/a b/lib x.so (deleted)\n", &m));
  EXPECT_EQ(m.lo, 0x7f00u);
  EXPECT_EQ(m.hi, 0x7f10u);
  EXPECT_EQ(m.offset, 0x1000u);
  EXPECT_EQ(m.dev(), (uint64_t{0xfd} << 32) | 1);
  EXPECT_EQ(m.inode, 123456u);
  EXPECT_TRUE(m.readable());
  EXPECT_TRUE(m.executable());
  EXPECT_EQ(m.path, "/opt/a b/lib x.so (deleted)");

  ASSERT_TRUE(ParseMapsLine("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]",
                            &m));
  EXPECT_EQ(m.lo, 0xffffffffff600000u);
  EXPECT_FALSE(m.readable());
  EXPECT_EQ(m.path, "[vsyscall]");

  // Anonymous memory: no path, with or without the padding.
  ASSERT_TRUE(ParseMapsLine("1000-2000 rw-p 00000000 00:00 0 \n", &m));
  EXPECT_TRUE(m.path.empty());
  ASSERT_TRUE(ParseMapsLine("1000-2000 rw-p 00000000 00:00 0", &m));
  EXPECT_TRUE(m.path.empty());
  // Device numbers above 255 (the kernel prints more than two digits).
  ASSERT_TRUE(ParseMapsLine("1000-2000 r--s 00000000 103:1a2 77 /dev/shm/x\n", &m));
  EXPECT_EQ(m.dev_major, 0x103u);
  EXPECT_EQ(m.dev_minor, 0x1a2u);
}

TEST(MapsLine, WhatIsNotAMapsLineIsRefused) {
  MapsLine m;
  for (const char* bad : {"", "\n", "1000", "1000-", "1000-2000", "1000-2000 r-xp", "1000-2000 r-xp 0 00:00",
                          "1000-2000 r-xp 0 0000 5 /x", "x000-2000 r-xp 0 00:00 0 /x",
                          "1000-2000 r-xp 0 00:00 z /x", "1000 2000 r-xp 0 00:00 0 /x",
                          // 17 hex digits: more than an address holds.
                          "10000000000000000-2000 r-xp 0 00:00 0 /x",
                          // an inode past 2^64 - 1
                          "1000-2000 r-xp 0 00:00 18446744073709551616 /x",
                          // the inode runs into the path
                          "1000-2000 r-xp 0 00:00 12/x"}) {
    EXPECT_FALSE(ParseMapsLine(bad, &m)) << '"' << bad << '"';
  }
  size_t n = 0;
  ForEachMapsLine("garbage\n1000-2000 r-xp 0 00:00 0 /a\n\nmore garbage\n3000-4000 r--p 0 00:00 0 /b",
                  [&](const MapsLine& line) {
                    ++n;
                    EXPECT_TRUE(line.path == "/a" || line.path == "/b") << line.path;
                  });
  EXPECT_EQ(n, 2u);
}

TEST(MapsLine, AProcessThatIsGoneNamesItsFile) {
  std::string text, error;
  EXPECT_FALSE(ReadMapsText(0x7ffffff0, &text, &error));
  EXPECT_NE(error.find("/proc/2147483632/maps"), std::string::npos) << error;
}

}  // namespace
}  // namespace dlprof
