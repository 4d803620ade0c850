// Replays every input the fuzz targets ever crashed on (tests/fuzz/regressions/)
// and every seed of their corpora (tests/fuzz/corpus/) through the same code
// the targets run (tests/fuzz/fuzz_inputs.h). Built into every build, so the
// sanitizer builds of scripts/test.sh replay them under ASan+UBSan and TSan.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/fuzz/fuzz_inputs.h"
#include "tests/support/files.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using testing::ReadFile;

const std::string kFuzzDir = std::string(DLPROF_SOURCE_DIR) + "/tests/fuzz";

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.' && std::string(e->d_name) != "README.md") names.push_back(e->d_name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Runs `input` as fuzz target `target` would; false for an unknown target.
bool Replay(const std::string& target, const std::string& input) {
  if (target == "dlprof") {
    fuzz::Dlprof(input);
  } else if (target == "gperftools") {
    fuzz::Gperftools(input);
  } else if (target == "pprof") {
    fuzz::Pprof(input);
  } else if (target == "pprof_gzip") {
    fuzz::PprofGzip(input);
  } else if (target == "elf") {
    fuzz::Elf(input);
  } else if (target == "eh_frame") {
    fuzz::EhFrame(input);
  } else {
    return false;
  }
  return true;
}

// tests/fuzz/regressions/<target>-<what>: e.g. "dlprof-stack-depth-overflow".
TEST(FuzzRegression, EveryInputThatOnceCrashedIsReadCleanly) {
  const std::string dir = kFuzzDir + "/regressions";
  for (const std::string& name : FilesIn(dir)) {
    SCOPED_TRACE(name);
    std::string target = name.substr(0, name.find('-'));
    EXPECT_TRUE(Replay(target, ReadFile(dir + "/" + name)))
        << name << ": name it <target>-<what>, target one of dlprof gperftools pprof pprof_gzip elf";
  }
}

TEST(FuzzRegression, EverySeedOfTheCorporaIsReadCleanly) {
  int seeds = 0;
  for (const std::string& target : FilesIn(kFuzzDir + "/corpus")) {
    const std::string dir = kFuzzDir + "/corpus/" + target;
    for (const std::string& name : FilesIn(dir)) {
      SCOPED_TRACE(target + "/" + name);
      EXPECT_TRUE(Replay(target, ReadFile(dir + "/" + name))) << "no fuzz target " << target;
      ++seeds;
    }
  }
  EXPECT_GT(seeds, 20);
}

// The seeds are real files: each reader must get samples out of its own.
TEST(FuzzRegression, SeedsAreRealProfiles) {
  for (const char* name : {"mix-main.dlprof", "forked-worker.dlprof"}) {
    Profile p;
    std::string error;
    ASSERT_TRUE(ReadDlprofBuffer(ReadFile(kFuzzDir + "/corpus/dlprof/" + name), name, &p, &error))
        << error;
    EXPECT_FALSE(p.samples.empty()) << name;
  }
  for (const char* name : {"mix-le64.prof", "mix-le32.prof", "mix-be64.prof"}) {
    Profile p;
    ReadGperftoolsBuffer(ReadFile(kFuzzDir + "/corpus/gperftools/" + name), name, &p);
    EXPECT_FALSE(p.samples.empty()) << name;
    EXPECT_TRUE(p.warnings.empty()) << name << ": " << p.warnings.front();
  }
  {
    // Python frames, named, merged into one stack per sample by the merge the
    // fuzz targets run.
    Profile p;
    std::string error;
    ASSERT_TRUE(ReadDlprofBuffer(ReadFile(kFuzzDir + "/corpus/dlprof/python-main.dlprof"),
                                 "python-main", &p, &error))
        << error;
    int spin_frames = 0;
    for (const Location& loc : p.locations) {
      if (loc.python && !loc.frames.empty() && loc.frames[0].function == "spin") ++spin_frames;
    }
    EXPECT_GT(spin_frames, 0);
    EXPECT_FALSE(p.samples.empty());
  }
  Profile raw, gz;
  ReadPprofBuffer(ReadFile(kFuzzDir + "/corpus/pprof/dlprof-mix.pb"), "raw", &raw);
  ReadPprofBuffer(ReadFile(kFuzzDir + "/corpus/pprof_gzip/dlprof-mix.pb.gz"), "gz", &gz);
  EXPECT_FALSE(raw.samples.empty());
  EXPECT_FALSE(gz.samples.empty());
  EXPECT_TRUE(raw.warnings.empty() && gz.warnings.empty());
  EXPECT_FALSE(ReadElfBuildId(kFuzzDir + "/corpus/elf/exe-dwarf5").empty());
}

// A module path in a (hostile) profile naming a FIFO or a device must not
// block the reporter: only regular files are opened as ELF.
TEST(FuzzRegression, ModulePathOfAFifoDoesNotBlock) {
  std::string dir = testing::MakeTempDir("dlprof-fifo");
  std::string fifo = dir + "/module.so";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(ReadElfBuildId(fifo), "");  // returns at once: nobody writes to it
  EXPECT_EQ(ReadElfBuildId("/dev/zero"), "");
  unlink(fifo.c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace dlprof
