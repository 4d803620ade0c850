// How the analysis words its numbers, shared by its files (analysis.cc,
// analysis_contention.cc): one printf format with up to three numbers, and
// a fraction as a whole percent.
#ifndef DLPROF_REPORTS_ANALYSIS_TEXT_H_
#define DLPROF_REPORTS_ANALYSIS_TEXT_H_

#include <cstdio>
#include <string>

namespace dlprof {

// `fmt` takes up to three doubles; the text is cut at 255 bytes.
inline std::string Fmt(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[256];
  snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

// 0.253 -> "25%".
inline std::string Pct(double f) { return Fmt("%.0f%%", 100 * f); }

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_TEXT_H_
