// `dlprof report` given what is not a profile file: a FIFO (as an input, or
// in a run folder), a link to /dev/zero, a 20 GiB sparse file, a folder with
// a profile's name, a file over --max-file-size. Each is skipped with one
// warning naming it, without hanging or exhausting memory, and the run's
// good files are reported.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/files.h"
#include "tests/support/sanitizer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::ReadFile;
using testing::RunCommand;
using testing::RunProcess;
using testing::TempDir;

const std::string kDlprof = std::string(DLPROF_BUILD_DIR) + "/tools/dlprof";

int Lines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size()) ++n;
  return n;
}

// One profiled run (a main process and two workers), copied into each test's
// own folder.
class ReportInputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    source_ = new TempDir;
    ProcessResult r = RunProcess({kDlprof, "run", "--no-report", "-o", source_->File("out"), "--",
                                  ProgramPath("rt_workload"), "fork", "2"});
    run_ok_ = r.exit_code == 0;
    run_log_ = new std::string(r.err);
  }
  static void TearDownTestSuite() {
    delete source_;
    delete run_log_;
  }
  void SetUp() override {
    ASSERT_TRUE(run_ok_) << *run_log_;
    run_ = dir_.File("run");
    int status = 0;
    RunCommand("cp -r '" + source_->File("out") + "/latest/.' '" + run_ + "'", &status);
    ASSERT_EQ(status, 0);
  }

  // dlprof report RUN... -o REPORT [extra], its address space bounded (not
  // under the sanitizers, whose shadow memory needs terabytes of it), killed
  // if it runs 60 s.
  ProcessResult Report(const std::vector<std::string>& inputs, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> argv;
    if (!testing::kUnderSanitizer) argv = {"/usr/bin/prlimit", "--as=3221225472", "--"};
    argv.push_back(kDlprof);
    argv.push_back("report");
    argv.insert(argv.end(), inputs.begin(), inputs.end());
    argv.insert(argv.end(), {"-o", dir_.File("report")});
    argv.insert(argv.end(), extra.begin(), extra.end());
    return RunProcess(argv, {}, 60);
  }
  int ReportedProcesses() const {
    const std::string text = ReadFile(dir_.File("report/summary.json"));
    return text.empty() ? -1 : static_cast<int>(json::parse(text)["processes"].size());
  }

  static TempDir* source_;
  static bool run_ok_;
  static std::string* run_log_;
  TempDir dir_;
  std::string run_;
};
TempDir* ReportInputs::source_;
bool ReportInputs::run_ok_;
std::string* ReportInputs::run_log_;

TEST_F(ReportInputs, HostileFilesInARunFolderAreSkippedWithOneWarningEach) {
  const std::string fifo = run_ + "/worker-77.dlprof";
  const std::string zero = run_ + "/worker-78.dlprof";
  const std::string sparse = run_ + "/worker-79.dlprof";
  const std::string folder = run_ + "/worker-80.dlprof";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_EQ(symlink("/dev/zero", zero.c_str()), 0);
  const int fd = open(sparse.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{20} << 30), 0);  // 20 GiB, no block written
  close(fd);
  ASSERT_EQ(mkdir(folder.c_str(), 0700), 0);

  ProcessResult r = Report({run_});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReportedProcesses(), 3) << r.err;
  EXPECT_EQ(Lines(r.err, fifo + ": not a regular file (a FIFO)"), 1) << r.err;
  EXPECT_EQ(Lines(r.err, zero + ": a symbolic link"), 1) << r.err;
  EXPECT_EQ(Lines(r.err, sparse + ": 20.0 GiB, over the limit of 4.0 GiB"), 1) << r.err;
  EXPECT_EQ(Lines(r.err, folder + ": not a regular file (a folder)"), 1) << r.err;
  // The warnings are in the report too.
  const std::string summary = ReadFile(dir_.File("report/summary.json"));
  for (const std::string& f : {fifo, zero, sparse, folder}) {
    EXPECT_NE(summary.find(f), std::string::npos) << f;
  }
}

TEST_F(ReportInputs, AFifoOrDeviceGivenAsInputIsOneLineNotAHang) {
  const std::string fifo = dir_.File("pipe");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ProcessResult alone = Report({fifo});
  EXPECT_EQ(alone.exit_code, 1) << alone.err;
  EXPECT_EQ(alone.err, "dlprof: " + fifo + ": not a regular file (a FIFO); not read\n");
  ProcessResult device = Report({"/dev/zero"});
  EXPECT_EQ(device.exit_code, 1) << device.err;
  EXPECT_EQ(device.err, "dlprof: /dev/zero: not a regular file (a character device); not read\n");
  // Beside a good run it costs nothing but its warning.
  ProcessResult mixed = Report({fifo, run_});
  EXPECT_EQ(mixed.exit_code, 0) << mixed.err;
  EXPECT_EQ(Lines(mixed.err, fifo + ": not a regular file (a FIFO)"), 1) << mixed.err;
  EXPECT_EQ(ReportedProcesses(), 3) << mixed.err;
}

TEST_F(ReportInputs, MaxFileSizeSkipsLargerFiles) {
  const std::string big = run_ + "/worker-81.dlprof";
  testing::WriteFile(big, std::string(3 << 20, 'x'));  // 3 MiB of junk
  ProcessResult r = Report({run_}, {"--max-file-size", "2M"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Lines(r.err, big + ": 3.0 MiB, over the limit of 2.0 MiB for one input file "
                           "(--max-file-size); not read"), 1) << r.err;
  EXPECT_EQ(ReportedProcesses(), 3) << r.err;
  // Under the limit the same file is read, and is not a profile.
  ProcessResult read = Report({run_}, {"--max-file-size", "4MiB"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_EQ(Lines(read.err, big + ": offset 0: "), 1) << read.err;
  for (const char* bad : {"0", "-1", "12Q", "G", "99999999999T"}) {
    ProcessResult usage = Report({run_}, {"--max-file-size", bad});
    EXPECT_EQ(usage.exit_code, 2) << bad << ": " << usage.err;
  }
}

}  // namespace
}  // namespace dlprof
