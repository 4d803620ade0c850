// The Analysis as JSON: the body of summary.json, and the start of the data
// document report.html renders (which adds per-step, per-snapshot and flame
// graph detail to it).
#ifndef DLPROF_REPORTS_ANALYSIS_JSON_H_
#define DLPROF_REPORTS_ANALYSIS_JSON_H_

#include <nlohmann/json.hpp>

#include "reports/analysis.h"

namespace dlprof {

// Keys: verdict, stages, buffers, processes, steps, profiler, duration_s,
// warnings (DESIGN.md's summary.json contract, extended). Numbers rounded to
// 1e-6.
nlohmann::json AnalysisJson(const Analysis& a);

double RoundMicro(double v);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_JSON_H_
