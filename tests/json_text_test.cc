// reports/json_text: the streaming writers' JSON scalars must be the very
// bytes nlohmann::json's dump() writes, or trace.json would change.
#include "reports/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

namespace dlprof {
namespace {

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

TEST(JsonText, DoublesAsNlohmannWritesThem) {
  const double values[] = {0.0,      -0.0,    1.0,       -1.0,     0.5,     1000.0,   249999000.0,
                           1234.567, 0.1,     1e-4,      1e-5,     1.5e-7,  1e15,     1e16,
                           123456789012345.0, 1234567890123456.0, 3.141592653589793, 1.0 / 3,
                           -2.5e-300, 1.7976931348623157e308, 4.9e-324,
                           std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()};
  for (double v : values) {
    std::string out;
    AppendJsonDouble(&out, v);
    EXPECT_EQ(out, Dump(v)) << v;
  }
  uint64_t ns = 1;
  for (int i = 0; i < 100000; ++i) {  // trace times (ns / 1000) up to days
    ns = (ns * 6364136223846793005ULL + 1442695040888963407ULL);
    const double us = static_cast<double>(ns >> (17 + i % 30)) / 1000.0;
    std::string out;
    AppendJsonDouble(&out, us);
    ASSERT_EQ(out, Dump(us)) << ns;
  }
}

TEST(JsonText, IntegersAsNlohmannWritesThem) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{42}, std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()}) {
    std::string out;
    AppendJsonInt(&out, v);
    EXPECT_EQ(out, Dump(v));
  }
  for (uint64_t v : {uint64_t{0}, uint64_t{7}, std::numeric_limits<uint64_t>::max()}) {
    std::string out;
    AppendJsonUint(&out, v);
    EXPECT_EQ(out, Dump(v));
  }
}

TEST(JsonText, StringsAsNlohmannWritesThem) {
  const std::string values[] = {"",
                                "decode",
                                "a \"quoted\" \\ name",
                                "tab\there\nnew line\x01\x1f\x7f",
                                "</script><script>",
                                "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
                                "bad \xff utf-8 \xc3",
                                "\xe2\x82 cut short",
                                std::string("nul\0byte", 8)};
  for (const std::string& s : values) {
    std::string out;
    AppendJsonString(&out, s);
    EXPECT_EQ(out, Dump(s)) << s;
  }
}

}  // namespace
}  // namespace dlprof
