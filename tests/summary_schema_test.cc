// summary.json is a contract: every key the writer emits is documented in
// docs/SUMMARY_JSON.md, and the file says which layout it is.
#include <gtest/gtest.h>

#include <dlprof/version.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "reports/analysis_json.h"
#include "tests/support/files.h"

namespace dlprof {
namespace {

// Every key path: "verdict.contention.cores", "stages[].name".
void KeyPaths(const nlohmann::json& j, const std::string& prefix, std::set<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      out->insert(path);
      KeyPaths(value, path, out);
    }
  } else if (j.is_array()) {
    for (const auto& item : j) KeyPaths(item, prefix + "[]", out);
  }
}

// An analysis with every optional part filled: worker imbalance, a host, a
// culprit function, a stage, a buffer.
Analysis FullAnalysis() {
  Analysis a;
  a.verdict.input_bound = true;
  a.verdict.severity = "high";
  a.verdict.bottleneck_stage = "decode";
  a.verdict.slowest_worker = 1;
  a.verdict.worker_imbalance = 1.5;
  a.verdict.bottleneck_functions.push_back({"DecodeJpeg", "/src/jpeg.cc", 55, 0.8});
  a.verdict.advice = {"Add workers."};
  a.stages.push_back(StageStats{});
  a.stages.back().name = "decode";
  a.stages.back().pids = {200};
  a.buffers.push_back(BufferStats{});
  ProcessStats p;
  p.host = "node-a";
  a.processes.push_back(p);
  a.warnings = {"merged"};
  return a;
}

TEST(SummarySchema, EveryKeyIsDocumented) {
  const std::string doc = testing::ReadFile(std::string(DLPROF_SOURCE_DIR) + "/docs/SUMMARY_JSON.md");
  ASSERT_FALSE(doc.empty());
  std::set<std::string> paths;
  KeyPaths(AnalysisJson(FullAnalysis()), "", &paths);
  ASSERT_GT(paths.size(), 60u);
  for (const std::string& path : paths) {
    EXPECT_NE(doc.find("`" + path + "`"), std::string::npos)
        << path << " is written to summary.json but not documented in docs/SUMMARY_JSON.md";
  }
}

TEST(SummarySchema, SaysItsLayoutAndWriter) {
  const nlohmann::json j = AnalysisJson(Analysis());
  EXPECT_EQ(j.at("schema_version"), kSummarySchemaVersion);
  EXPECT_EQ(j.at("dlprof_version"), DLPROF_VERSION_STRING);
}

}  // namespace
}  // namespace dlprof
