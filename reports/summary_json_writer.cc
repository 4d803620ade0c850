// summary.json: the machine-readable verdict and numbers (keys in DESIGN.md).
#include "reports/analysis_json.h"
#include "reports/report_writer.h"

namespace dlprof {
namespace {

class SummaryJsonWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "summary.json"; }
  std::string Render(const Profile&, const Analysis& a) const override {
    // Names come from the profiled program: replace bytes that are not UTF-8
    // rather than fail the whole report.
    return AnalysisJson(a).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeSummaryJsonWriter() {
  return std::make_unique<SummaryJsonWriter>();
}

}  // namespace dlprof
