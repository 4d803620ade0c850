// ParseConfig's warnings echo the bad value through TerminalSafe: one escaper
// for every terminal line dlprof writes (reports/utf8.h).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/config.h"

namespace dlprof {
namespace {

std::vector<std::string> WarningsFor(const char* var, const char* value) {
  std::vector<std::string> warnings;
  ParseConfig([&](const char* name) { return std::string(name) == var ? value : nullptr; },
              [&](const std::string& w) { warnings.push_back(w); });
  return warnings;
}

TEST(Config, AnInvalidValueIsEchoedWithoutTerminalControls) {
  // ESC, a C1 CSI (U+009B), a right-to-left override (U+202E), an isolate (U+2066).
  const auto w = WarningsFor("DLPROF_HZ", "9\x1b[2J\xc2\x9b" "1m\xe2\x80\xae" "abc\xe2\x81\xa6z");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "dlprof: DLPROF_HZ='9\\x1b[2J\\xc2\\x9b1m\\xe2\\x80\\xaeabc\\xe2\\x81\\xa6z' is invalid "
                  "(expected an integer from 1 to 10000); using 100");
}

TEST(Config, ALongValueIsCutAt64Bytes) {
  const std::string value(100, 'x');
  const auto w = WarningsFor("DLPROF_MODE", value.c_str());
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("'" + std::string(64, 'x') + "...'"), std::string::npos) << w[0];
}

// The two diagnostics that name freed Python code: on unless 0.
TEST(Config, PythonCodeNamingDiagnostics) {
  auto parse = [](const char* var, const char* value) {
    return ParseConfig([&](const char* name) { return std::string(name) == var ? value : nullptr; },
                       [](const std::string&) {});
  };
  EXPECT_TRUE(parse("", "").py_code_wake);
  EXPECT_TRUE(parse("", "").py_exec_hook);
  EXPECT_FALSE(parse("DLPROF_PY_WAKE", "0").py_code_wake);
  EXPECT_TRUE(parse("DLPROF_PY_WAKE", "0").py_exec_hook);
  EXPECT_FALSE(parse("DLPROF_PY_EXEC_HOOK", "0").py_exec_hook);
  EXPECT_TRUE(parse("DLPROF_PY_EXEC_HOOK", "1").py_exec_hook);
  const auto w = WarningsFor("DLPROF_PY_EXEC_HOOK", "off");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "dlprof: DLPROF_PY_EXEC_HOOK='off' is invalid (expected 1 or 0); using 1");
}

// Where the collector runs: a helper process unless DLPROF_COLLECTOR=thread.
TEST(Config, CollectorPlace) {
  auto parse = [](const char* value) {
    return ParseConfig(
        [&](const char* name) { return std::string(name) == "DLPROF_COLLECTOR" ? value : nullptr; },
        [](const std::string&) {});
  };
  EXPECT_TRUE(parse(nullptr).collector_process);
  EXPECT_FALSE(parse("thread").collector_process);
  EXPECT_TRUE(parse("process").collector_process);
  const auto w = WarningsFor("DLPROF_COLLECTOR", "helper");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0], "dlprof: DLPROF_COLLECTOR='helper' is invalid (expected process or thread); using process");
}

}  // namespace
}  // namespace dlprof
