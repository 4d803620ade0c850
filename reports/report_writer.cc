#include "reports/report_writer.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "reports/output_file.h"
#include "reports/pprof_writer.h"

namespace dlprof {

void WriteFileOrThrow(const std::string& path, const std::string& content) {
  OutputFile out(path);
  out.Write(content);
  out.Commit();
}

void ReportWriter::Write(const Profile& profile, const Analysis& analysis,
                         const std::string& dir) const {
  WriteFileOrThrow(dir + "/" + file_name(), Render(profile, analysis));
}

namespace {

// The `role` labels are the analysis's roles, as summary.json has them.
std::vector<std::string> Roles(const Profile& profile, const Analysis& analysis) {
  std::vector<std::string> roles;
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    roles.push_back(ProcessRole(profile, analysis, i));
  }
  return roles;
}

class PprofReportWriter : public ReportWriter {
 public:
  explicit PprofReportWriter(PprofView view) : view_(view) {}
  std::string file_name() const override {
    return view_ == PprofView::kWall ? "profile.wall.pb.gz" : "profile.pb.gz";
  }
  std::string Render(const Profile& profile, const Analysis& analysis) const override {
    // Uncompressed: for tests and piping.
    return EncodePprof(profile, view_, Roles(profile, analysis));
  }
  void Write(const Profile& profile, const Analysis& analysis, const std::string& dir) const override {
    WritePprof(profile, dir + "/" + file_name(), view_, Roles(profile, analysis));
  }

 private:
  PprofView view_;
};

}  // namespace

std::unique_ptr<ReportWriter> MakePprofReportWriter() {
  return std::make_unique<PprofReportWriter>(PprofView::kCpu);
}

std::unique_ptr<ReportWriter> MakePprofWallReportWriter() {
  return std::make_unique<PprofReportWriter>(PprofView::kWall);
}

std::vector<std::unique_ptr<ReportWriter>> AllReportWriters() {
  std::vector<std::unique_ptr<ReportWriter>> w;
  w.push_back(MakeSummaryJsonWriter());
  w.push_back(MakeSummaryTextWriter());
  w.push_back(MakeFoldedWriter());
  w.push_back(MakeOffCpuFoldedWriter());
  w.push_back(MakePprofReportWriter());
  w.push_back(MakePprofWallReportWriter());
  w.push_back(MakeTraceWriter());
  w.push_back(MakeHtmlWriter());
  return w;
}

}  // namespace dlprof
