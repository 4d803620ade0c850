#include "tests/support/report_agreement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "readers/pprof_reader.h"
#include "readers/profile.h"
#include "tests/support/files.h"

namespace dlprof::testing {
namespace {

using nlohmann::json;

// summary.json rounds to 6 places; the trace gives microseconds to 3.
constexpr double kRounding = 2e-6;

uint64_t TotalSamples(const json& summary) { return summary["profiler"]["samples"].get<uint64_t>(); }

double Quantile(std::vector<double> v, double q) {  // as reports/analysis.cc takes it
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

ReportFolder ReadReportFolder(const std::string& dir) {
  ReportFolder r;
  r.dir = dir;
  r.summary = json::parse(ReadFile(r.File("summary.json")), nullptr, false);
  if (r.summary.is_discarded()) r.summary = json();
  const std::string html = ReadFile(r.File("report.html"));
  const std::string open = "<script type=\"application/json\" id=\"dlprof-data\">";
  const size_t at = html.find(open);
  const size_t end = at == std::string::npos ? at : html.find("</script>", at);
  if (end != std::string::npos) {
    r.page = json::parse(html.substr(at + open.size(), end - at - open.size()), nullptr, false);
    if (r.page.is_discarded()) r.page = json();
  }
  return r;
}

void ExpectOneSampleCount(const ReportFolder& r) {
  const uint64_t total = TotalSamples(r.summary);
  EXPECT_GT(total, 30u);
  uint64_t by_process = 0;
  for (const json& p : r.summary["processes"]) by_process += p["samples"].get<uint64_t>();
  EXPECT_EQ(by_process, total) << "processes[].samples against profiler.samples";

  EXPECT_EQ(r.page["cost"], r.summary["profiler"]) << "report.html's cost section";
  ASSERT_FALSE(r.page["flame"].empty());
  EXPECT_EQ(r.page["flame"][0]["id"], "cpu");
  EXPECT_EQ(r.page["flame"][0]["total"].get<uint64_t>(), total) << "the CPU flame graph's root";

  std::ifstream folded(r.File("stacks.folded"));
  uint64_t folded_total = 0;
  for (std::string line; std::getline(folded, line);) {
    const size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    folded_total += std::stoull(line.substr(space + 1));
  }
  EXPECT_EQ(folded_total, total) << "stacks.folded's counts";

  Profile pprof;
  ReadPprof(r.File("profile.pb.gz"), &pprof);
  uint64_t pprof_total = 0;
  for (const Sample& s : pprof.samples) {
    if (s.kind == SampleKind::kCpu) pprof_total += static_cast<uint64_t>(s.count);
  }
  EXPECT_EQ(pprof_total, total) << "profile.pb.gz's samples/count";

  const std::string text = ReadFile(r.File("summary.txt"));
  EXPECT_NE(text.find("  " + std::to_string(total) + " samples, "), std::string::npos) << text;
}

void ExpectStageSamplesArePprofs(const ReportFolder& r) {
  Profile pprof;
  ReadPprof(r.File("profile.pb.gz"), &pprof);
  std::map<std::string, int64_t> innermost;
  for (const Sample& s : pprof.samples) {
    if (s.kind != SampleKind::kCpu || s.stage_path >= pprof.stage_paths.size()) continue;
    const auto& path = pprof.stage_paths[s.stage_path];
    if (!path.empty()) innermost[pprof.stages[path.back()]] += s.count;
  }
  // The wall ticks, from the other profile: wall and CPU nanoseconds per
  // innermost stage.
  Profile wall;
  ReadPprof(r.File("profile.wall.pb.gz"), &wall);
  EXPECT_TRUE(wall.warnings.empty()) << wall.warnings.at(0);
  std::map<std::string, std::pair<int64_t, int64_t>> ticks;
  for (const Sample& s : wall.samples) {
    EXPECT_EQ(s.kind, SampleKind::kWall);
    if (s.stage_path >= wall.stage_paths.size()) continue;
    const auto& path = wall.stage_paths[s.stage_path];
    if (path.empty()) continue;
    auto& [wall_ns, cpu_ns] = ticks[wall.stages[path.back()]];
    wall_ns += s.wall_ns;
    cpu_ns += s.cpu_ns;
  }
  ASSERT_FALSE(r.summary["stages"].empty());
  int64_t sum = 0;
  int with_ticks = 0;
  for (const json& st : r.summary["stages"]) {
    const std::string name = st["name"];
    EXPECT_EQ(st["self_samples"].get<int64_t>(), innermost[name]) << name;
    sum += st["self_samples"].get<int64_t>();
    const auto [wall_ns, cpu_ns] = ticks[name];
    if (wall_ns == 0) continue;
    ++with_ticks;
    // summary.json has 6 decimal places.
    EXPECT_NEAR(st["self_wall_s"].get<double>(), wall_ns / 1e9, 1e-6) << name;
    EXPECT_NEAR(st["self_cpu_s"].get<double>(), std::min(cpu_ns, wall_ns) / 1e9, 1e-6) << name;
  }
  EXPECT_GT(with_ticks, 0) << "no stage has wall ticks in profile.wall.pb.gz";
  EXPECT_LE(static_cast<uint64_t>(sum), TotalSamples(r.summary));
}

namespace {

// `text` ("0.010s", as summary.txt prints seconds) is `value` rounded to 3
// places, allowing for `value` itself being rounded to 6 (summary.json).
bool SameToThreePlaces(const std::string& text, double value) {
  if (text.empty() || text.back() != 's') return false;
  char* end = nullptr;
  const double printed = std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size() - 1 && std::fabs(printed - value) <= 0.0005 + 1e-6;
}

}  // namespace

void ExpectStageRowsAddUp(const ReportFolder& r, bool expect_bottleneck_stage) {
  int checked = 0;
  for (const json& st : r.summary["stages"]) {
    const std::string name = st["name"];
    const double wall = st["self_wall_s"], cpu = st["self_cpu_s"];
    const double off = st["offcpu_fraction"], wait = st["cpu_wait_fraction"];
    if (wall < 0.02) continue;  // rounding to 6 places of a few ms
    ++checked;
    EXPECT_LE(cpu, wall * 1.0001) << name;
    EXPECT_NEAR(cpu / wall + off + wait, 1.0, 0.002) << name << ": cpu " << cpu << " wall " << wall
                                                      << " off " << off << " wait " << wait;
    EXPECT_GE(st["total_wall_s"].get<double>(), wall * 0.9999) << name;
    EXPECT_GE(st["total_cpu_s"].get<double>(), cpu * 0.9999) << name;
  }
  EXPECT_GE(checked, 1) << r.summary["stages"].dump(1);
  EXPECT_EQ(r.page["stages"], r.summary["stages"]) << "report.html's stage table";

  // summary.txt's rows: samples, self cpu and self wall as in summary.json.
  const std::string text = ReadFile(r.File("summary.txt"));
  for (const json& st : r.summary["stages"]) {
    const std::string name = st["name"];
    const size_t at = text.find("\n  " + name + " ");
    ASSERT_NE(at, std::string::npos) << name << "\n" << text;
    std::istringstream line(text.substr(at + 3 + name.size(), text.find('\n', at + 1) - at));
    std::string samples, cpu, wall;
    line >> samples >> cpu >> wall;
    // summary.txt rounds the seconds to 3 places, summary.json to 6: the two
    // agree when the text is the JSON's value to within half its last place
    // (a value of x.xxx5 in the JSON may print either way).
    EXPECT_EQ(samples, std::to_string(st["self_samples"].get<int64_t>())) << name;
    EXPECT_TRUE(SameToThreePlaces(cpu, st["self_cpu_s"].get<double>())) << name << ": " << cpu << " vs "
                                                                          << st["self_cpu_s"];
    EXPECT_TRUE(SameToThreePlaces(wall, st["self_wall_s"].get<double>())) << name << ": " << wall << " vs "
                                                                            << st["self_wall_s"];
  }

  // The evidence's figures for the bottleneck stage: its self wall time, and
  // its on-CPU share (a cpu bottleneck) or off-CPU share (an io one).
  const std::string stage = r.summary["verdict"]["bottleneck_stage"];
  if (!expect_bottleneck_stage && stage.empty()) return;
  ASSERT_FALSE(stage.empty()) << r.summary["verdict"].dump(1);
  const bool io = r.summary["verdict"]["bottleneck_kind"] == "io";
  std::string evidence;
  for (const json& e : r.summary["verdict"]["evidence"]) evidence += e.get<std::string>() + "\n";
  int found = 0;
  for (const json& st : r.summary["stages"]) {
    if (st["name"] != stage) continue;
    ++found;
    char wall[32];
    std::snprintf(wall, sizeof(wall), "(%.2f s", st["self_wall_s"].get<double>());
    const double share = io ? st["offcpu_fraction"].get<double>()
                            : st["self_cpu_s"].get<double>() / st["self_wall_s"].get<double>();
    const char* what = io ? "off-CPU" : "on-CPU";
    EXPECT_NE(evidence.find("Stage '" + stage + "' has the largest self time"), std::string::npos)
        << evidence;
    EXPECT_NE(evidence.find(wall), std::string::npos) << wall << " in\n" << evidence;
    // Percentages round; the figure is either neighbour of the exact value.
    bool has = false;
    for (double pct : {std::floor(100 * share), std::ceil(100 * share)}) {
      char want[32];
      std::snprintf(want, sizeof(want), "%s %.0f%%", what, pct);
      has = has || evidence.find(want) != std::string::npos;
    }
    EXPECT_TRUE(has) << what << " " << 100 * share << "% in\n" << evidence;
  }
  EXPECT_EQ(found, 1) << stage;
}

void ExpectProcessesAgree(const ReportFolder& r) {
  EXPECT_EQ(r.page["processes"].size(), r.summary["processes"].size());
  const std::string text = ReadFile(r.File("summary.txt"));
  for (size_t i = 0; i < r.summary["processes"].size() && i < r.page["processes"].size(); ++i) {
    const json& p = r.summary["processes"][i];
    const json& q = r.page["processes"][i];
    for (const char* key : {"pid", "samples", "dropped", "cpu_s", "wall_s", "role"}) {
      EXPECT_EQ(p[key], q[key]) << key << " of pid " << p["pid"];
    }
    // summary.txt's row for the pid: the same counts, and times to its
    // 3 places (summary.json keeps 6, so a value on a rounding edge, such
    // as 1.9315, may print as either neighbour: 1.931 or 1.932).
    const std::string pid = "pid " + std::to_string(p["pid"].get<int64_t>()) + " ";
    size_t at = text.find("\n  " + pid, text.find("\nProcesses\n"));
    ASSERT_NE(at, std::string::npos) << pid << "in\n" << text;
    const std::string row = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    long long samples = -1;
    unsigned long long dropped = 0;
    double cpu = -1, wall = -1;
    const size_t from = row.find("samples ");
    ASSERT_NE(from, std::string::npos) << row;
    ASSERT_EQ(std::sscanf(row.c_str() + from, "samples %lld dropped %llu cpu %lfs wall %lfs",
                          &samples, &dropped, &cpu, &wall),
              4)
        << row;
    EXPECT_EQ(samples, p["samples"].get<int64_t>()) << row;
    EXPECT_EQ(dropped, p["dropped"].get<uint64_t>()) << row;
    EXPECT_NEAR(cpu, p["cpu_s"].get<double>(), 0.0005 + 1e-6) << row;
    EXPECT_NEAR(wall, p["wall_s"].get<double>(), 0.0005 + 1e-6) << row;
    // A sample stands for a period of the thread's CPU time; the clocks
    // also count the kernel time a user-mode timer leaves unsampled, so the
    // samples may fall short of them but never run far past them.
    const double period = 1.0 / p["hz"].get<double>();
    const double sampled = p["samples"].get<double>() * period;
    EXPECT_LE(sampled, p["cpu_s"].get<double>() * 1.15 + 2 * period)
        << "pid " << p["pid"] << ": " << p["samples"] << " samples of " << period << " s against "
        << p["cpu_s"] << " s of CPU";
  }
}

void ExpectTimelineGivesTheSteps(const ReportFolder& r) {
  const json trace = json::parse(ReadFile(r.File("trace.json")), nullptr, false);
  ASSERT_FALSE(trace.is_discarded()) << r.File("trace.json");
  const json& steps = r.summary["steps"];
  const int count = steps["count"];
  ASSERT_GT(count, 0) << steps.dump();
  // The training process whose steps are analysed (one of several "main"
  // ones under data-parallel training).
  const int64_t main_pid = steps.value("pid", int64_t{-1});
  ASSERT_GT(main_pid, 0) << steps.dump();
  bool is_main = false;
  for (const json& p : r.summary["processes"]) is_main |= p["pid"] == main_pid && p["role"] == "main";
  EXPECT_TRUE(is_main) << "steps.pid " << main_pid << " is not a training process";
  // Its steps (by track: the loop's thread has the most) and data waits.
  std::map<int64_t, std::vector<std::pair<double, double>>> steps_by_track;  // [begin, end) in s
  std::vector<std::pair<double, double>> waits;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "X" || e.value("pid", int64_t{0}) != main_pid) continue;
    const double begin = e["ts"].get<double>() / 1e6, end = begin + e["dur"].get<double>() / 1e6;
    if (e.value("cat", "") == "step") steps_by_track[e["tid"].get<int64_t>()].emplace_back(begin, end);
    if (e.value("cat", "") == "wait") waits.emplace_back(begin, end);
  }
  ASSERT_FALSE(steps_by_track.empty()) << "no step in trace.json for pid " << main_pid;
  auto loop = std::max_element(steps_by_track.begin(), steps_by_track.end(),
                               [](const auto& x, const auto& y) { return x.second.size() < y.second.size(); });
  std::vector<std::pair<double, double>> all = loop->second;
  std::sort(all.begin(), all.end());
  std::sort(waits.begin(), waits.end());
  // The warm-up first, then the unsampled baseline, are not in the statistics.
  const size_t skip = steps["warmup_dropped"].get<size_t>() + steps["baseline_count"].get<size_t>();
  ASSERT_EQ(all.size(), skip + static_cast<size_t>(count))
      << "steps in trace.json against summary.json's count, warm-up and baseline";
  std::vector<double> step_s, wait_s;
  double total_step = 0, total_wait = 0;
  for (size_t i = skip; i < all.size(); ++i) {
    const auto [begin, end] = all[i];
    double wait = 0;
    for (const auto& [wb, we] : waits) {
      if (wb >= end) break;
      if (we > begin) wait += std::min(we, end) - std::max(wb, begin);
    }
    step_s.push_back(end - begin);
    wait_s.push_back(wait);
    total_step += end - begin;
    total_wait += wait;
  }
  EXPECT_NEAR(Quantile(step_s, 0.5), steps["median_s"].get<double>(), kRounding) << "median step";
  EXPECT_NEAR(Quantile(step_s, 0.9), steps["p90_s"].get<double>(), kRounding) << "p90 step";
  EXPECT_NEAR(total_step / count, steps["mean_s"].get<double>(), kRounding) << "mean step";
  EXPECT_NEAR(Quantile(wait_s, 0.5), steps["data_wait_median_s"].get<double>(), kRounding)
      << "median data wait";
  EXPECT_NEAR(total_wait / total_step, steps["data_wait_fraction"].get<double>(), kRounding)
      << "data-wait share of the step time";
  EXPECT_NEAR(trace["otherData"]["data_wait_fraction"].get<double>(),
              r.summary["verdict"]["data_wait_fraction"].get<double>(), kRounding);

  // report.html's bars: one per step (or the mean of a bucket of them).
  const json& page = r.page["steps"];
  EXPECT_EQ(page["count"], steps["count"]);
  const size_t per = page["steps_per_bar"];
  ASSERT_GE(per, 1u);
  ASSERT_EQ(page["step_s"].size(), (step_s.size() + per - 1) / per);
  for (size_t bar = 0; bar < page["step_s"].size(); ++bar) {
    double st = 0, w = 0;
    size_t k = 0;
    for (; k < per && bar * per + k < step_s.size(); ++k) st += step_s[bar * per + k], w += wait_s[bar * per + k];
    EXPECT_NEAR(page["step_s"][bar].get<double>(), st / k, kRounding) << "report.html's bar " << bar;
    EXPECT_NEAR(page["wait_s"][bar].get<double>(), w / k, kRounding) << "report.html's bar " << bar;
  }
}

void ExpectBuffersAreTheirSnapshots(const ReportFolder& r) {
  const json trace = json::parse(ReadFile(r.File("trace.json")), nullptr, false);
  ASSERT_FALSE(trace.is_discarded()) << r.File("trace.json");
  // Counter series by (pid, name): "buffer prefetch (capacity 4)".
  std::map<std::pair<int64_t, std::string>, std::vector<uint64_t>> series;
  for (const json& e : trace["traceEvents"]) {
    if (e.value("ph", "") != "C" || e.value("cat", "") != "buffer") continue;
    series[{e["pid"].get<int64_t>(), e["name"].get<std::string>()}].push_back(e["args"]["size"].get<uint64_t>());
  }
  const std::string text = ReadFile(r.File("summary.txt"));
  for (const json& b : r.summary["buffers"]) {
    const std::string name = b["name"];
    const uint64_t capacity = b["capacity"];
    const auto key = std::make_pair(b["pid"].get<int64_t>(),
                                    "buffer " + name + " (capacity " + std::to_string(capacity) + ")");
    auto it = series.find(key);
    if (b["snapshots"].get<uint64_t>() == 0) continue;
    ASSERT_NE(it, series.end()) << key.second << " of pid " << key.first << " not in trace.json";
    const std::vector<uint64_t>& sizes = it->second;
    ASSERT_EQ(sizes.size(), b["snapshots"].get<size_t>()) << key.second;
    double occupancy = 0, empty = 0, full = 0;
    for (uint64_t size : sizes) {
      if (capacity > 0) occupancy += std::min(1.0, static_cast<double>(size) / static_cast<double>(capacity));
      empty += size == 0;
      full += capacity > 0 && size >= capacity;
    }
    const double n = static_cast<double>(sizes.size());
    EXPECT_NEAR(occupancy / n, b["mean_occupancy"].get<double>(), kRounding) << key.second;
    EXPECT_NEAR(empty / n, b["empty_fraction"].get<double>(), kRounding) << key.second;
    EXPECT_NEAR(full / n, b["full_fraction"].get<double>(), kRounding) << key.second;
    // summary.txt's line for it.
    char line[160];
    std::snprintf(line, sizeof(line), "pid %-7lld cap %-5llu mean %5.1f%%  empty %5.1f%%  full %5.1f%%",
                  static_cast<long long>(key.first), static_cast<unsigned long long>(capacity),
                  100 * b["mean_occupancy"].get<double>(), 100 * b["empty_fraction"].get<double>(),
                  100 * b["full_fraction"].get<double>());
    EXPECT_NE(text.find(line), std::string::npos) << line << " in\n" << text;
  }
  // report.html's buffers are summary.json's.
  ASSERT_EQ(r.page["buffers"].size(), r.summary["buffers"].size());
  for (size_t i = 0; i < r.page["buffers"].size(); ++i) {
    for (const char* k : {"name", "capacity", "snapshots", "mean_occupancy", "empty_fraction", "full_fraction"}) {
      EXPECT_EQ(r.page["buffers"][i][k], r.summary["buffers"][i][k]) << k << " of buffer " << i;
    }
  }
}

void ExpectReportAgrees(const ReportFolder& r, bool expect_bottleneck_stage) {
  ASSERT_FALSE(r.summary.is_null()) << "no summary.json in " << r.dir;
  ASSERT_FALSE(r.page.is_null()) << "no data in " << r.dir << "/report.html";
  ExpectOneSampleCount(r);
  ExpectStageSamplesArePprofs(r);
  ExpectStageRowsAddUp(r, expect_bottleneck_stage);
  ExpectProcessesAgree(r);
  ExpectTimelineGivesTheSteps(r);
  ExpectBuffersAreTheirSnapshots(r);
}

}  // namespace dlprof::testing
