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
  std::string file_name() const override { return "profile.pb.gz"; }
  std::string Render(const Profile& profile, const Analysis& analysis) const override {
    return EncodePprof(profile, Roles(profile, analysis));  // uncompressed: for tests and piping
  }
  void Write(const Profile& profile, const Analysis& analysis, const std::string& dir) const override {
    WritePprof(profile, dir + "/" + file_name(), Roles(profile, analysis));
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakePprofReportWriter() {
  return std::make_unique<PprofReportWriter>();
}

std::vector<std::unique_ptr<ReportWriter>> AllReportWriters() {
  std::vector<std::unique_ptr<ReportWriter>> w;
  w.push_back(MakeSummaryJsonWriter());
  w.push_back(MakeSummaryTextWriter());
  w.push_back(MakeFoldedWriter());
  w.push_back(MakeOffCpuFoldedWriter());
  w.push_back(MakePprofReportWriter());
  w.push_back(MakeTraceWriter());
  w.push_back(MakeHtmlWriter());
  return w;
}

}  // namespace dlprof
