// File and shell helpers the tests share: a temporary folder, whole-file reads
// and writes, a shell command's output.
#ifndef DLPROF_TESTS_SUPPORT_FILES_H_
#define DLPROF_TESTS_SUPPORT_FILES_H_

#include <string>
#include <utility>

namespace dlprof::testing {

// A fresh folder under /tmp, removed with everything in it at destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Removes a run folder at the end of the test unless the test failed, so
// that a failure's evidence stays for inspection.
class KeepOnFailure {
 public:
  explicit KeepOnFailure(std::string dir) : dir_(std::move(dir)) {}
  ~KeepOnFailure();
  KeepOnFailure(const KeepOnFailure&) = delete;
  KeepOnFailure& operator=(const KeepOnFailure&) = delete;

 private:
  std::string dir_;
};

// The whole file ("" if it cannot be read).
std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& data);

// Runs `cmd` with /bin/sh; returns its stdout and stderr together. *status
// gets pclose's status when given.
std::string RunCommand(const std::string& cmd, int* status = nullptr);

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_FILES_H_
