// The outputs of `dlprof diff`: the text table (stdout and diff.txt), in
// summary.txt's style; diff.json; diff.html, the page made of
// reports/html/diff.{html,js} and report.css with diff.json inside it.
#include <dlprof/version.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

#include "reports/analysis_json.h"
#include "reports/html_page.h"
#include "reports/report_writer.h"
#include "reports/run_diff.h"
#include "reports/terminal_text.h"

namespace dlprof {
namespace html_templates {
// Generated from reports/html/ by embed.cmake.
extern const char kReportCss[];
extern const unsigned long kReportCssSize;
extern const char kDiffHtml[];
extern const unsigned long kDiffHtmlSize;
extern const char kDiffJs[];
extern const unsigned long kDiffJsSize;
}  // namespace html_templates

namespace {

using nlohmann::json;

std::string Str(const char* fmt, double v) {
  char buf[64];
  snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// How a number shows, and how its change does: seconds and milliseconds as
// differences, shares in percentage points, counts as integers.
enum class Unit { kSeconds, kMillis, kShare, kCount };

std::string Value(double v, Unit u) {
  switch (u) {
    case Unit::kSeconds: return Str("%.3fs", v);
    case Unit::kMillis: return Str("%.2f ms", v * 1e3);
    case Unit::kShare: return Str("%.1f%%", 100 * v);
    case Unit::kCount: return Str("%.0f", v);
  }
  return "";
}

std::string Before(const Change& c, Unit u) { return c.has_before ? Value(c.before, u) : "-"; }
std::string After(const Change& c, Unit u) { return c.has_after ? Value(c.after, u) : "-"; }

std::string Delta(const Change& c, Unit u) {
  if (!c.both()) return "-";
  const double d = c.delta();
  switch (u) {
    case Unit::kSeconds: return Str("%+.3fs", d);
    case Unit::kMillis: return Str("%+.2f ms", d * 1e3);
    case Unit::kShare: return Str("%+.1f pp", 100 * d);
    case Unit::kCount: return Str("%+.0f", d);
  }
  return "";
}

std::string Relative(const Change& c) {
  double r;
  if (c.Relative(&r)) return Str("%+.0f%%", 100 * r);
  return "-";
}

// "label   before   after   change   relative"
std::string MetricRow(const std::string& label, const Change& c, Unit u) {
  return Line("  %s %12s %12s %12s %9s", Cell(label, 28).c_str(), Before(c, u).c_str(),
              After(c, u).c_str(), Delta(c, u).c_str(), Relative(c).c_str());
}

// "45.0% ->  5.0% -40.0 pp": a share in both runs and its change, 25 columns.
std::string ShareCell(const Change& c) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%6s -> %6s %9s", Before(c, Unit::kShare).c_str(),
           After(c, Unit::kShare).c_str(), c.both() ? Delta(c, Unit::kShare).c_str() : "");
  return buf;
}

std::string Role(const std::string& before, const std::string& after) {
  if (before.empty()) return after;
  if (after.empty() || after == before) return before;
  return before + " -> " + after;
}

std::string VerdictText(const Verdict& v) {
  std::string s;
  if (v.input_bound) {
    s = "input-bound (" + Clean(v.severity, 12) + ")";
    if (!v.bottleneck_stage.empty()) {
      s += "; bottleneck '" + Clean(v.bottleneck_stage) + "' (" + Clean(v.bottleneck_kind, 8) +
           ", " + Clean(v.bottleneck_role, 12) + ")";
    }
  } else if (v.basis == "none") {
    s = "unknown (no step markers and no buffers)";
  } else {
    s = "not input-bound";
  }
  if (v.cpu_saturated) s += "; CPU saturated";
  return s;
}

std::string SideText(const DiffSide& s) {
  std::string out = Clean(s.input, 200);
  if (s.run_ids.size() == 1) out += " (run " + Clean(s.run_ids[0], 80) + ")";
  if (s.run_ids.size() > 1) out += " (" + std::to_string(s.run_ids.size()) + " runs merged)";
  return out;
}

bool VerdictChanged(const Verdict& a, const Verdict& b) {
  return a.input_bound != b.input_bound || a.severity != b.severity ||
         a.bottleneck_stage != b.bottleneck_stage || a.bottleneck_kind != b.bottleneck_kind ||
         a.bottleneck_role != b.bottleneck_role || a.cpu_saturated != b.cpu_saturated;
}

// {"before", "after", "change", "relative"}, null where a side lacks the
// number. Counts (`integer`) stay integers.
json ChangeJson(const Change& c, bool integer = false) {
  auto number = [&](double v) {
    return integer ? json(static_cast<int64_t>(std::llround(v))) : json(RoundMicro(v));
  };
  json j = {{"before", nullptr}, {"after", nullptr}, {"change", nullptr}, {"relative", nullptr}};
  if (c.has_before) j["before"] = number(c.before);
  if (c.has_after) j["after"] = number(c.after);
  if (c.both()) j["change"] = number(c.delta());
  double r;
  if (c.Relative(&r)) j["relative"] = RoundMicro(r);
  return j;
}

const char* Status(bool in_before, bool in_after) {
  return in_before && in_after ? "both" : in_after ? "added" : "removed";
}

json VerdictJson(const Verdict& v) {
  return {{"input_bound", v.input_bound},
          {"severity", v.severity},
          {"bottleneck_stage", v.bottleneck_stage},
          {"bottleneck_kind", v.bottleneck_kind},
          {"bottleneck_role", v.bottleneck_role},
          {"cpu_saturated", v.cpu_saturated},
          {"basis", v.basis},
          {"data_wait_fraction", RoundMicro(v.data_wait_fraction)}};
}

json SideJson(const DiffSide& s) {
  return {{"input", s.input},
          {"run_ids", s.run_ids},
          {"duration_s", RoundMicro(s.duration_s)},
          {"verdict", VerdictJson(s.verdict)}};
}

// Columns left empty (a stage without wall time) pad lines with spaces.
std::string WithoutTrailingSpaces(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n') {
      while (!out.empty() && out.back() == ' ') out.pop_back();
    }
    out += c;
  }
  return out;
}

}  // namespace

std::string DiffText(const RunDiff& d) {
  std::string out = "dlprof diff\n===========\n\n";
  out += "before: " + SideText(d.before) + "\n";
  out += "after:  " + SideText(d.after) + "\n";

  out += "\nVerdict\n-------\n";
  out += "  before: " + VerdictText(d.before.verdict) + "\n";
  out += "  after:  " + VerdictText(d.after.verdict) + "\n";
  out += VerdictChanged(d.before.verdict, d.after.verdict) ? "  (changed)\n" : "  (unchanged)\n";

  out += "\nSteps\n-----\n";
  out += Line("  %-28s %12s %12s %12s %9s", "", "before", "after", "change", "relative");
  out += MetricRow("data-wait share", d.data_wait_fraction, Unit::kShare);
  out += MetricRow("step time, median", d.step_median_s, Unit::kMillis);
  out += MetricRow("step time, mean", d.step_mean_s, Unit::kMillis);
  out += MetricRow("data wait per step, median", d.data_wait_median_s, Unit::kMillis);
  out += MetricRow("steps analysed", d.steps, Unit::kCount);
  out += MetricRow("profile duration", d.duration_s, Unit::kSeconds);

  // Wall time; CPU time when neither profile has wall time (pprof or
  // gperftools inputs).
  out += "\nStages: self time (innermost stage; wall time summed over threads and processes)\n";
  out += "------\n";
  out += Line("  %-24s %-16s %10s %10s %10s %9s", "stage", "role", "before", "after", "change",
              "relative");
  for (const StageDiff& s : d.stages) {
    const bool both = s.in_before && s.in_after;
    const Change& t = s.self_wall_s.before > 0 || s.self_wall_s.after > 0 ? s.self_wall_s : s.self_cpu_s;
    out += Line("  %s %s %10s %10s %10s %9s%s", Cell(s.name, 24).c_str(),
                Cell(Role(s.role_before, s.role_after), 16).c_str(), Before(t, Unit::kSeconds).c_str(),
                After(t, Unit::kSeconds).c_str(), Delta(t, Unit::kSeconds).c_str(),
                both ? Relative(t).c_str() : Status(s.in_before, s.in_after),
                s.data_stage ? "" : " (model)");
  }
  if (d.stages.empty()) out += "  (no stages in either run)\n";

  out += "\nStages: shares of self wall time, before -> after\n------\n";
  out += Line("  %-24s %-25s %-25s %-25s", "stage", "on-cpu", "off-cpu (blocked)",
              "cpu-wait (runnable)");
  for (const StageDiff& s : d.stages) {
    if (!s.on_cpu_fraction.has_before && !s.on_cpu_fraction.has_after) continue;
    out += Line("  %s %s %s %s", Cell(s.name, 24).c_str(), ShareCell(s.on_cpu_fraction).c_str(),
                ShareCell(s.offcpu_fraction).c_str(), ShareCell(s.cpu_wait_fraction).c_str());
  }

  out += "\nBuffers (matched by name; one name in several processes pooled over its snapshots)\n";
  out += "-------\n";
  if (d.buffers.empty()) out += "  (none in either run)\n";
  else
    out += Line("  %-24s %-14s %-25s %-25s %-25s", "buffer", "capacity", "mean occupancy", "empty",
                "full");
  for (const BufferDiff& b : d.buffers) {
    std::string cap = Before(b.capacity, Unit::kCount);
    if (b.capacity.has_after && (!b.capacity.has_before || b.capacity.after != b.capacity.before)) {
      cap += " -> " + After(b.capacity, Unit::kCount);
    }
    std::string row = "  " + Cell(b.name, 24) + " " + Cell(cap, 14) + " ";
    if (!b.in_before || !b.in_after) {
      row += Status(b.in_before, b.in_after);
      row += b.in_after ? " (" + Clean(b.role_after, 12) + ")" : " (" + Clean(b.role_before, 12) + ")";
    } else {
      row += ShareCell(b.mean_occupancy) + " " + ShareCell(b.empty_fraction) + " " +
             ShareCell(b.full_fraction);
    }
    out += row + "\n";
  }

  out += "\nWorkers\n-------\n";
  out += Line("  %-28s %12s %12s %12s %9s", "", "before", "after", "change", "relative");
  out += MetricRow("workers at a time", d.workers_concurrent, Unit::kCount);
  out += MetricRow("worker processes", d.worker_processes, Unit::kCount);
  out += MetricRow("worker busy (cpu / wall)", d.worker_busy_fraction, Unit::kShare);

  if (!d.warnings.empty()) {
    out += "\nWarnings\n--------\n";
    for (const std::string& w : d.warnings) out += "  " + Clean(w, 400) + "\n";
  }
  return WithoutTrailingSpaces(out);
}

json DiffJson(const RunDiff& d) {
  json j;
  j["before"] = SideJson(d.before);
  j["after"] = SideJson(d.after);
  j["verdict_changed"] = VerdictChanged(d.before.verdict, d.after.verdict);
  j["steps"] = {{"data_wait_fraction", ChangeJson(d.data_wait_fraction)},
                {"median_s", ChangeJson(d.step_median_s)},
                {"mean_s", ChangeJson(d.step_mean_s)},
                {"data_wait_median_s", ChangeJson(d.data_wait_median_s)},
                {"count", ChangeJson(d.steps, true)},
                {"duration_s", ChangeJson(d.duration_s)}};
  j["stages"] = json::array();
  for (const StageDiff& s : d.stages) {
    j["stages"].push_back({{"name", s.name},
                           {"status", Status(s.in_before, s.in_after)},
                           {"role_before", s.role_before},
                           {"role_after", s.role_after},
                           {"data_stage", s.data_stage},
                           {"self_wall_s", ChangeJson(s.self_wall_s)},
                           {"self_cpu_s", ChangeJson(s.self_cpu_s)},
                           {"total_wall_s", ChangeJson(s.total_wall_s)},
                           {"on_cpu_fraction", ChangeJson(s.on_cpu_fraction)},
                           {"offcpu_fraction", ChangeJson(s.offcpu_fraction)},
                           {"cpu_wait_fraction", ChangeJson(s.cpu_wait_fraction)}});
  }
  j["buffers"] = json::array();
  for (const BufferDiff& b : d.buffers) {
    j["buffers"].push_back({{"name", b.name},
                            {"status", Status(b.in_before, b.in_after)},
                            {"role_before", b.role_before},
                            {"role_after", b.role_after},
                            {"processes", ChangeJson(b.processes, true)},
                            {"capacity", ChangeJson(b.capacity, true)},
                            {"mean_occupancy", ChangeJson(b.mean_occupancy)},
                            {"empty_fraction", ChangeJson(b.empty_fraction)},
                            {"full_fraction", ChangeJson(b.full_fraction)}});
  }
  j["workers"] = {{"concurrent", ChangeJson(d.workers_concurrent, true)},
                  {"processes", ChangeJson(d.worker_processes, true)},
                  {"busy_fraction", ChangeJson(d.worker_busy_fraction)}};
  j["warnings"] = d.warnings;
  // diff.json's layout, and what wrote it (docs/SUMMARY_JSON.md, "diff.json").
  j["schema_version"] = kDiffSchemaVersion;
  j["dlprof_version"] = DLPROF_VERSION_STRING;
  return j;
}

std::string DiffHtml(const RunDiff& d) {
  using namespace html_templates;
  std::string page(kDiffHtml, kDiffHtmlSize);
  const std::string css(kReportCss, kReportCssSize), js(kDiffJs, kDiffJsSize);
  // Our own code, but a stray "</" would end its element early.
  if (js.find("</") != std::string::npos || css.find("</") != std::string::npos) {
    throw std::runtime_error("diff.js or report.css contains \"</\"");
  }
  const std::string data =
      ScriptSafe(DiffJson(d).dump(-1, ' ', false, json::error_handler_t::replace));
  ReplaceOnce(&page, "/*DLPROF_CSS*/", css, "diff.html");
  ReplaceOnce(&page, "/*DLPROF_JS*/", js, "diff.html");
  ReplaceOnce(&page, "/*DLPROF_DATA*/", data, "diff.html");  // last: it may hold anything
  return page;
}

void WriteDiff(const RunDiff& d, const std::string& dir) {
  WriteFileOrThrow(dir + "/diff.txt", DiffText(d));
  // Names come from the profiled programs: replace bytes that are not UTF-8.
  WriteFileOrThrow(dir + "/diff.json",
                   DiffJson(d).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
  WriteFileOrThrow(dir + "/diff.html", DiffHtml(d));
}

}  // namespace dlprof
