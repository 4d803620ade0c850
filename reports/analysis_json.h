// The Analysis as JSON: the body of summary.json, and the start of the data
// document report.html renders (which adds per-step, per-snapshot and flame
// graph detail to it).
#ifndef DLPROF_REPORTS_ANALYSIS_JSON_H_
#define DLPROF_REPORTS_ANALYSIS_JSON_H_

#include <nlohmann/json.hpp>

#include "reports/analysis.h"

namespace dlprof {

// summary.json's layout; docs/SUMMARY_JSON.md says when it changes.
constexpr int kSummarySchemaVersion = 1;

// Keys: every one in docs/SUMMARY_JSON.md (DESIGN.md's summary.json contract,
// extended; tests/summary_schema_test.cc holds them to it). Numbers rounded
// to 1e-6.
nlohmann::json AnalysisJson(const Analysis& a);

double RoundMicro(double v);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_JSON_H_
