// RemoteMaps (core/remote_maps.h) against the in-process reader, readelf, and
// real child processes, one of them running a binary deleted after its start.
#include "core/remote_maps.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <climits>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/proc_maps.h"
#include "core/remote_cfi.h"
#include "tests/support/files.h"

extern char** environ;

namespace dlprof {
namespace {

using Row = std::tuple<uint64_t, uint64_t, uint64_t, std::string, std::string>;

std::set<Row> Rows(const std::vector<MapEntry>& maps) {
  std::set<Row> rows;
  for (const MapEntry& m : maps) rows.emplace(m.start, m.end, m.offset, m.path, m.build_id);
  return rows;
}

std::string Hex(const std::string& bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : bytes) hex += {kDigits[c >> 4], kDigits[c & 15]};
  return hex;
}

// The build-id binutils reads from the file, in hex ("" if none).
std::string ReadelfBuildId(const std::string& path) {
  std::istringstream out(testing::RunCommand("readelf -n '" + path + "'"));
  for (std::string line; std::getline(out, line);) {
    const size_t at = line.find("Build ID: ");
    if (at != std::string::npos) return line.substr(at + 10);
  }
  return "";
}

const MapEntry* FindPath(const std::vector<MapEntry>& maps, const std::string& path) {
  for (const MapEntry& m : maps) {
    if (m.path == path) return &m;
  }
  return nullptr;
}

std::string RealPath(const std::string& path) {
  char buf[PATH_MAX];
  return realpath(path.c_str(), buf) != nullptr ? buf : "";
}

// A running `program 60`, killed and reaped at the end.
class Child {
 public:
  explicit Child(const std::string& program) {
    const char* argv[] = {program.c_str(), "60", nullptr};
    if (posix_spawn(&pid_, program.c_str(), nullptr, nullptr, const_cast<char**>(argv),
                    environ) != 0) {
      pid_ = -1;
    }
  }
  ~Child() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  // Until the child's loader has mapped libc, so that its executable (named
  // `path` in its maps) is mapped whole, at most 10 s. (/proc/<pid>/exe
  // names the new program before the kernel has mapped it.)
  bool WaitForExe(const std::string& path) const {
    const std::string maps_path = "/proc/" + std::to_string(pid_) + "/maps";
    for (int i = 0; i < 1000; ++i) {
      const std::string maps = testing::ReadFile(maps_path);
      if (maps.find(path) != std::string::npos && maps.find("/libc.so") != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  pid_t pid_ = -1;
};

// The size of the executable mappings the cfi host asks before it reads
// the maps again (RemoteCfiHost::RefreshIfDue): VmExe + VmLib of a status
// text, and a live one that grows by an executable mapping's size.
TEST(RemoteMaps, ExecutableSizeOfAStatusText) {
  uint64_t kb = 0;
  EXPECT_TRUE(ParseExecKb("Name:\tx\nVmExe:\t    2808 kB\nVmLib:\t   61032 kB\nVmPTE:\t 1 kB\n", &kb));
  EXPECT_EQ(kb, 2808u + 61032u);
  EXPECT_FALSE(ParseExecKb("Name:\tx\nVmExe:\t    2808 kB\n", &kb));  // a kernel thread's has none
  EXPECT_FALSE(ParseExecKb("Name:\tx\nVmExe:\t kB\nVmLib:\t 1 kB\n", &kb));
  EXPECT_FALSE(ParseExecKb("", &kb));

  auto own = [] {
    std::ifstream in("/proc/self/status");
    std::stringstream text;
    text << "\n" << in.rdbuf();
    uint64_t v = 0;
    EXPECT_TRUE(ParseExecKb(text.str().c_str(), &v));
    return v;
  };
  const uint64_t before = own();
  const size_t bytes = 4 << 20;
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  EXPECT_EQ(own(), before + (bytes >> 10));
  munmap(p, bytes);
  EXPECT_EQ(own(), before);
}

TEST(RemoteMaps, OwnProcessMatchesTheInProcessReader) {
  // A library loaded between the two reads would differ: read again then.
  std::set<Row> remote, local, remote_by_path;
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::vector<MapEntry> r, l, p;
    std::string error;
    ASSERT_TRUE(ReadProcessMappings(getpid(), &r, &error)) << error;
    ASSERT_TRUE(ReadExecutableMappings(&l));
    // Without map_files: through /proc/<pid>/root/<path>, as an unprivileged
    // collector reads.
    RemoteMaps without_map_files(/*use_map_files=*/false);
    ASSERT_TRUE(without_map_files.Read(getpid(), &p, &error)) << error;
    remote = Rows(r), local = Rows(l), remote_by_path = Rows(p);
    if (remote == local && remote_by_path == local) break;
  }
  EXPECT_EQ(remote, local);
  EXPECT_EQ(remote_by_path, local);
  // By their names indeed: only the vdso came from memory.
  RemoteMaps without_map_files(/*use_map_files=*/false);
  std::vector<MapEntry> by_path;
  std::string path_error;
  ASSERT_TRUE(without_map_files.Read(getpid(), &by_path, &path_error)) << path_error;
  EXPECT_GT(without_map_files.files_opened(), 1u);
  EXPECT_EQ(without_map_files.memory_reads(), 1u);

  std::vector<MapEntry> maps;
  std::string error;
  ASSERT_TRUE(ReadProcessMappings(getpid(), &maps, &error)) << error;
  bool libc = false, vdso = false;
  for (const MapEntry& m : maps) {
    if (m.path.find("/libc.so") != std::string::npos) {
      libc = true;
      EXPECT_FALSE(m.build_id.empty()) << m.path;
      EXPECT_EQ(Hex(m.build_id), ReadelfBuildId(m.path)) << m.path;
    }
    if (m.path == "[vdso]") {
      vdso = true;
      EXPECT_FALSE(m.build_id.empty()) << "the vdso's, read from memory";
    }
  }
  EXPECT_TRUE(libc);
  EXPECT_TRUE(vdso);
}

TEST(RemoteMaps, ChildsExecutableHasTheBuildIdReadelfReads) {
  const std::string sleep = RealPath("/bin/sleep");
  ASSERT_FALSE(sleep.empty());
  const std::string expected = ReadelfBuildId(sleep);
  ASSERT_FALSE(expected.empty()) << "readelf -n " << sleep;
  Child child(sleep);
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.WaitForExe(sleep));

  std::vector<MapEntry> maps;
  std::string error;
  ASSERT_TRUE(ReadProcessMappings(child.pid(), &maps, &error)) << error;
  const MapEntry* exe = FindPath(maps, sleep);
  ASSERT_NE(exe, nullptr) << sleep << " not among " << maps.size() << " mappings";
  EXPECT_EQ(Hex(exe->build_id), expected);
  for (const MapEntry& m : maps) EXPECT_LT(m.start, m.end) << m.path;
}

// A binary deleted after its start: an unprivileged collector reads it from
// the process's memory (its name is gone, map_files is refused); with
// CAP_CHECKPOINT_RESTORE (root) through map_files.
TEST(RemoteMaps, DeletedExecutableKeepsItsBuildId) {
  const std::string expected = ReadelfBuildId(RealPath("/bin/sleep"));
  ASSERT_FALSE(expected.empty());
  testing::TempDir dir;
  const std::string copy = dir.File("sleep-copy");
  testing::WriteFile(copy, testing::ReadFile("/bin/sleep"));
  ASSERT_EQ(chmod(copy.c_str(), 0755), 0);
  Child child(copy);
  ASSERT_GT(child.pid(), 0);
  ASSERT_TRUE(child.WaitForExe(copy));
  ASSERT_EQ(unlink(copy.c_str()), 0);

  RemoteMaps by_memory(/*use_map_files=*/false);
  std::vector<MapEntry> maps;
  std::string error;
  ASSERT_TRUE(by_memory.Read(child.pid(), &maps, &error)) << error;
  const MapEntry* exe = FindPath(maps, copy + " (deleted)");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(Hex(exe->build_id), expected);

  if (geteuid() != 0) GTEST_SKIP() << "map_files needs CAP_CHECKPOINT_RESTORE";
  RemoteMaps by_map_files;
  ASSERT_TRUE(by_map_files.Read(child.pid(), &maps, &error)) << error;
  exe = FindPath(maps, copy + " (deleted)");
  ASSERT_NE(exe, nullptr);
  EXPECT_EQ(Hex(exe->build_id), expected);
  // The executable was a file this time; the vdso is read from memory either way.
  EXPECT_EQ(by_map_files.memory_reads() + 1, by_memory.memory_reads());
  EXPECT_EQ(by_map_files.files_opened(), by_memory.files_opened() + 1);
}

TEST(RemoteMaps, MissingProcessIsAnErrorNamingThePid) {
  // A child's pid once it is reaped: free, unless reused within this test.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(0);
  ASSERT_EQ(waitpid(pid, nullptr, 0), pid);

  std::vector<MapEntry> maps = {MapEntry{1, 2, 0, "sentinel", ""}};
  std::string error;
  EXPECT_FALSE(ReadProcessMappings(pid, &maps, &error));
  EXPECT_NE(error.find("/proc/" + std::to_string(pid) + "/"), std::string::npos) << error;
  ASSERT_EQ(maps.size(), 1u) << "untouched on failure";
  EXPECT_EQ(maps[0].path, "sentinel");
}

TEST(RemoteMaps, SecondReadOpensNothingAndANewMappingOneFile) {
  RemoteMaps reader;
  std::vector<MapEntry> first, second, third;
  std::string error;
  ASSERT_TRUE(reader.Read(getpid(), &first, &error)) << error;
  const uint64_t opened = reader.files_opened(), from_memory = reader.memory_reads();
  EXPECT_GT(opened, 1u);  // the test binary and libc at least
  EXPECT_EQ(from_memory, 1u);  // the vdso
  ASSERT_TRUE(reader.Read(getpid(), &second, &error)) << error;
  EXPECT_EQ(reader.files_opened(), opened);
  EXPECT_EQ(reader.memory_reads(), from_memory);
  EXPECT_EQ(Rows(second), Rows(first));
  EXPECT_EQ(MappingsFingerprint(second), MappingsFingerprint(first));

  // A file mapped executable by hand (not by the loader): one more object.
  testing::TempDir dir;
  const std::string copy = dir.File("true-copy");
  testing::WriteFile(copy, testing::ReadFile(RealPath("/bin/true")));
  const int fd = open(copy.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* mapped = mmap(nullptr, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
  close(fd);
  ASSERT_NE(mapped, MAP_FAILED);
  ASSERT_TRUE(reader.Read(getpid(), &third, &error)) << error;
  munmap(mapped, 4096);
  EXPECT_EQ(reader.files_opened(), opened + 1);
  EXPECT_NE(MappingsFingerprint(third), MappingsFingerprint(first));
  const MapEntry* hand = FindPath(third, copy);
  ASSERT_NE(hand, nullptr);
  EXPECT_EQ(Hex(hand->build_id), ReadelfBuildId(RealPath("/bin/true")));
}

}  // namespace
}  // namespace dlprof
