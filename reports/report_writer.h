// One interface for every output of `dlprof report`; one file per format.
#ifndef DLPROF_REPORTS_REPORT_WRITER_H_
#define DLPROF_REPORTS_REPORT_WRITER_H_

#include <memory>
#include <string>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  // The file it writes inside the output folder ("summary.json").
  virtual std::string file_name() const = 0;
  // The file's whole content. Throws std::runtime_error on failure.
  virtual std::string Render(const Profile& profile, const Analysis& analysis) const = 0;
  // Writes Render() to dir/file_name(); gzipped writers override.
  virtual void Write(const Profile& profile, const Analysis& analysis, const std::string& dir) const;
  // What the last Render() left out or changed, one line each, for the
  // terminal ("stacks.folded: 5000 of 6000 lines left out...").
  virtual std::vector<std::string> warnings() const { return {}; }
};

// Every writer `dlprof report` runs, in the order it runs them.
std::vector<std::unique_ptr<ReportWriter>> AllReportWriters();

std::unique_ptr<ReportWriter> MakeFoldedWriter();       // stacks.folded
std::unique_ptr<ReportWriter> MakeOffCpuFoldedWriter(); // stacks.offcpu.folded
std::unique_ptr<ReportWriter> MakeSummaryTextWriter();  // summary.txt
std::unique_ptr<ReportWriter> MakeSummaryJsonWriter();  // summary.json
std::unique_ptr<ReportWriter> MakePprofReportWriter();  // profile.pb.gz (CPU samples)
std::unique_ptr<ReportWriter> MakePprofWallReportWriter();  // profile.wall.pb.gz (wall ticks)
std::unique_ptr<ReportWriter> MakeHtmlWriter();         // report.html
std::unique_ptr<ReportWriter> MakeTraceWriter();        // trace.json

// Writes `content` to `path` (whole, or throws std::runtime_error naming it),
// through reports/output_file.h: a link or file already at `path` is
// replaced, never written through.
void WriteFileOrThrow(const std::string& path, const std::string& content);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_REPORT_WRITER_H_
