#include "reports/analysis_json.h"

#include <dlprof/version.h>

#include <cmath>

namespace dlprof {

using nlohmann::json;

double RoundMicro(double v) { return std::round(v * 1e6) / 1e6; }

json AnalysisJson(const Analysis& a) {
  const auto Round = [](double v) { return RoundMicro(v); };
  json j;
  const Verdict& v = a.verdict;
  j["verdict"] = {{"input_bound", v.input_bound},
                  {"data_wait_fraction", Round(v.data_wait_fraction)},
                  {"severity", v.severity},
                  {"bottleneck_stage", v.bottleneck_stage},
                  {"bottleneck_kind", v.bottleneck_kind},
                  {"bottleneck_role", v.bottleneck_role},
                  {"basis", v.basis},
                  {"cpu_saturated", v.cpu_saturated},
                  {"loop_receive_fraction", Round(v.loop_receive_fraction)},
                  {"advice", v.advice},
                  {"evidence", v.evidence}};
  if (v.slowest_worker >= 0) {
    j["verdict"]["worker_imbalance"] = Round(v.worker_imbalance);
    j["verdict"]["slowest_worker"] = v.slowest_worker;
  }
  j["verdict"]["bottleneck_functions"] = json::array();
  for (const CulpritFunction& f : v.bottleneck_functions) {
    j["verdict"]["bottleneck_functions"].push_back(
        {{"name", f.name}, {"file", f.file}, {"line", f.line}, {"share", Round(f.share)}});
  }
  // What cpu_saturated rests on (reports/analysis_contention.cc).
  const CpuContention& c = a.contention;
  j["verdict"]["contention"] = {{"measured", c.measured},
                                {"cores", c.cores},
                                {"cores_recorded", c.cores_recorded},
                                {"span_s", Round(c.span_s)},
                                {"saturated_fraction", Round(c.saturated_fraction)},
                                {"runnable_threads", Round(c.runnable_threads)},
                                {"busy_threads", c.busy_threads},
                                {"cpu_wait_fraction", Round(c.wait_fraction)},
                                {"step_cpu_wait_fraction", Round(c.step_cpu_wait_fraction)},
                                {"main_cores", Round(c.main_cores)},
                                {"free_cores", c.free_cores}};
  j["stages"] = json::array();
  for (const StageStats& s : a.stages) {
    j["stages"].push_back({{"name", s.name},
                           {"self_samples", s.self_samples},
                           {"self_cpu_s", Round(s.self_cpu_s)},
                           {"self_wall_s", Round(s.self_wall_s)},
                           {"offcpu_fraction", Round(s.offcpu_fraction)},
                           {"cpu_wait_fraction", Round(s.cpu_wait_fraction)},
                           {"total_wall_s", Round(s.total_wall_s)},
                           {"total_cpu_s", Round(s.total_cpu_s)},
                           {"top_blocking_call", s.top_blocking_call},
                           {"top_blocking_fraction", Round(s.top_blocking_fraction)},
                           {"data_stage", s.data_stage},
                           {"role", s.main_role},
                           {"pids", s.pids}});
  }
  j["buffers"] = json::array();
  for (const BufferStats& b : a.buffers) {
    j["buffers"].push_back({{"name", b.name},
                            {"pid", b.pid},
                            {"role", b.role},
                            {"capacity", b.capacity},
                            {"snapshots", b.snapshots},
                            {"mean_occupancy", Round(b.mean_occupancy)},
                            {"empty_fraction", Round(b.empty_fraction)},
                            {"full_fraction", Round(b.full_fraction)}});
  }
  j["processes"] = json::array();
  for (const ProcessStats& p : a.processes) {
    json pj = {{"pid", p.pid},           {"ppid", p.ppid},
               {"role", p.role},         {"worker", p.worker},
               {"recorded_role", p.recorded_role}, {"role_basis", p.role_basis},
               {"samples", p.samples},   {"dropped", p.dropped},
               {"cpu_s", Round(p.cpu_s)}, {"wall_s", Round(p.wall_s)},
               {"complete", p.complete}, {"end", p.end_reason},
               {"command", p.command},   {"hz", p.hz},
               {"unwinder", p.unwinder}, {"timer", p.timer},
               {"handler_s", Round(p.handler_s)}, {"collector_s", Round(p.collector_s)},
               {"collector", p.collector}};
    if (!p.host.empty()) pj["host"] = p.host;
    if (!p.python_frames.empty()) pj["python_frames"] = p.python_frames;
    j["processes"].push_back(pj);
  }
  // Workers at a time (what the advice counts) and worker processes over the
  // run (more when workers are started anew every epoch); with several
  // training processes (DDP ranks), those feeding the analysed one.
  j["workers"] = {{"concurrent", a.workers.concurrent},
                  {"processes", a.workers.processes},
                  {"feeding_analysed_loop", a.workers.feeding_loop},
                  {"training_processes", a.workers.training_processes}};
  const StepStats& s = a.steps;
  j["steps"] = {{"count", s.count},
                {"pid", s.pid},
                {"median_s", Round(s.median_s)},
                {"p90_s", Round(s.p90_s)},
                {"p99_s", Round(s.p99_s)},
                {"mean_s", Round(s.mean_s)},
                {"data_wait_median_s", Round(s.data_wait_median_s)},
                {"data_wait_p90_s", Round(s.data_wait_p90_s)},
                {"data_wait_fraction", Round(s.data_wait_fraction)},
                {"warmup_dropped", s.warmup_dropped},
                {"baseline_count", s.baseline_count},
                {"baseline_median_s", Round(s.baseline_median_s)}};
  j["profiler"] = {{"samples", a.cost.samples},
                   {"dropped", a.cost.dropped},
                   {"handler_s", Round(a.cost.handler_s)},
                   {"handler_fraction", Round(a.cost.handler_fraction)},
                   {"collector_s", Round(a.cost.collector_s)},
                   {"collector_fraction", Round(a.cost.collector_fraction)},
                   {"collector_measured", a.cost.collector_measured},
                   {"collector_processes", a.cost.collector_processes},
                   {"distortion", Round(a.cost.distortion)},
                   {"distortion_measured", a.cost.distortion_measured}};
  j["duration_s"] = Round((a.end_ns - a.start_ns) / 1e9);
  j["warnings"] = a.warnings;
  j["schema_version"] = kSummarySchemaVersion;
  j["dlprof_version"] = DLPROF_VERSION_STRING;
  return j;
}

}  // namespace dlprof
