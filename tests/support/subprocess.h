// Runs real processes for end-to-end tests.
#ifndef DLPROF_TESTS_SUPPORT_SUBPROCESS_H_
#define DLPROF_TESTS_SUPPORT_SUBPROCESS_H_

#include <map>
#include <string>
#include <vector>

namespace dlprof::testing {

struct ProcessResult {
  int exit_code = -1;    // -1 when killed by a signal
  int term_signal = 0;
  std::string out;
  std::string err;
};

// Runs argv[0] (a path) with the current environment plus `env` (a value of
// nullptr-equivalent "\x01unset" removes the variable), waiting at most
// timeout_s seconds before killing it.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         int timeout_s = 60);

// A fresh empty folder under the test temp dir.
std::string MakeTempDir(const std::string& prefix);

std::string ProgramPath(const std::string& name);  // tests/programs/<name> in the build tree

inline constexpr const char* kUnset = "\x01unset";

// Debian's interpreter by its full path, with python3-torch and python3-pil
// (scripts/setup.sh): PATH may lead to another Python (pyenv, a venv).
inline const std::string kDebianPython = "/usr/bin/python3";

}  // namespace dlprof::testing

#endif  // DLPROF_TESTS_SUPPORT_SUBPROCESS_H_
