// trace.json against the Chrome trace event format: required fields, begin
// and end matched, time stamps monotonic per track, spans that nest, one
// process_name per process; and the content: stage, step and wait spans,
// worker processes, buffer counters, from real profiled runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "readers/input_loader.h"
#include "readers/symbolizer.h"
#include "reports/analysis.h"
#include "reports/report_writer.h"
#include "tests/support/subprocess.h"

namespace dlprof {
namespace {

using nlohmann::json;
using testing::MakeTempDir;
using testing::ProcessResult;
using testing::ProgramPath;
using testing::RunProcess;

// Every way `trace` breaks the trace event format (JSON object form), or
// nothing when it is valid.
std::vector<std::string> Validate(const json& trace) {
  std::vector<std::string> errors;
  auto error = [&](size_t i, const std::string& what) {
    errors.push_back("event " + std::to_string(i) + ": " + what);
  };
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return {"not an object with a traceEvents array"};
  }
  using Track = std::pair<int64_t, int64_t>;
  std::map<Track, double> last_ts;
  std::map<Track, std::vector<std::string>> open_b;  // B names awaiting their E
  std::map<Track, std::vector<double>> open_x;       // ends of enclosing X spans
  std::map<int64_t, int> process_names;
  std::set<int64_t> pids_with_events;
  const json& events = trace["traceEvents"];
  for (size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (!e.is_object()) {
      error(i, "not an object");
      continue;
    }
    if (!e.contains("name") || !e["name"].is_string()) error(i, "no string name");
    if (!e.contains("ph") || !e["ph"].is_string() || e["ph"].get<std::string>().size() != 1) {
      error(i, "no one-letter ph");
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number()) error(i, "no numeric ts");
    if (!e.contains("pid") || !e["pid"].is_number_integer()) error(i, "no integer pid");
    if (!e.contains("tid") || !e["tid"].is_number_integer()) error(i, "no integer tid");
    if (!errors.empty() && errors.back().rfind("event " + std::to_string(i) + ":", 0) == 0) {
      continue;
    }
    const std::string ph = e["ph"];
    const double ts = e["ts"];
    const Track track{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    if (ph == "M") {
      if (e["name"] == "process_name") {
        ++process_names[track.first];
        if (!e.contains("args") || !e["args"].contains("name") || !e["args"]["name"].is_string()) {
          error(i, "process_name without args.name");
        }
      }
      continue;
    }
    pids_with_events.insert(track.first);
    if (ts < 0) error(i, "negative ts");
    auto last = last_ts.find(track);
    if (last != last_ts.end() && ts < last->second) error(i, "ts goes back on its track");
    last_ts[track] = ts;
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0) {
        error(i, "X without a non-negative dur");
        continue;
      }
      // Sorted by start: each span ends before the one that encloses it.
      const double end = ts + e["dur"].get<double>();
      auto& stack = open_x[track];
      while (!stack.empty() && stack.back() <= ts + 1e-3) stack.pop_back();  // µs: ns exact
      if (!stack.empty() && end > stack.back() + 1e-3) error(i, "X overlaps its enclosing span");
      stack.push_back(end);
    } else if (ph == "B") {
      open_b[track].push_back(e["name"]);
    } else if (ph == "E") {
      if (open_b[track].empty())
        error(i, "E without B");
      else
        open_b[track].pop_back();
    } else if (ph == "C") {
      if (!e.contains("args") || !e["args"].is_object() || e["args"].empty()) {
        error(i, "counter without values");
      } else {
        for (const auto& [k, v] : e["args"].items()) {
          if (!v.is_number()) error(i, "counter value " + k + " is not a number");
        }
      }
    } else if (ph != "i" && ph != "I") {
      error(i, "unexpected ph " + ph);
    }
  }
  for (const auto& [track, names] : open_b) {
    if (!names.empty()) errors.push_back("B without E on pid " + std::to_string(track.first));
  }
  for (const auto& [pid, n] : process_names) {
    if (n != 1)
      errors.push_back("pid " + std::to_string(pid) + " has " + std::to_string(n) +
                       " process_name events");
  }
  for (int64_t pid : pids_with_events) {
    if (!process_names.count(pid)) errors.push_back("pid " + std::to_string(pid) + " unnamed");
  }
  return errors;
}

std::string Joined(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 20; ++i) out += v[i] + "\n";
  return out;
}

// Profiles rt_workload `args` and returns the trace of the run, parsed.
json ProfileTrace(const std::vector<std::string>& args, const std::string& mode,
                  Profile* profile_out = nullptr) {
  std::string dir = MakeTempDir("dlprof-trace");
  std::vector<std::string> argv = {ProgramPath("rt_workload")};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessResult r = RunProcess(argv, {{"DLPROF_SAMPLE", "1"},
                                      {"DLPROF_OUT", dir + "/out"},
                                      {"DLPROF_MODE", mode},
                                      {"DLPROF_HZ", "1000"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  Profile profile;
  LoadInputs({dir + "/out"}, &profile);
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&profile);
  std::string text = MakeTraceWriter()->Render(profile, Analyze(profile));
  if (profile_out) *profile_out = std::move(profile);
  return json::parse(text);  // throws, failing the test, on invalid JSON
}

std::vector<json> Events(const json& trace, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (const json& e : trace["traceEvents"]) {
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  }
  return out;
}

TEST(TraceValidator, RejectsBrokenTraces) {
  EXPECT_FALSE(Validate(json::array()).empty());
  auto one = [](json e) { return json{{"traceEvents", json::array({e})}}; };
  json named = {{"name", "process_name"},    {"ph", "M"}, {"ts", 0}, {"pid", 1}, {"tid", 0},
                {"args", {{"name", "main"}}}};
  json x = {{"name", "s"}, {"ph", "X"}, {"ts", 5}, {"dur", 2}, {"pid", 1}, {"tid", 1}};
  EXPECT_TRUE(Validate({{"traceEvents", {named, x}}}).empty());
  json no_dur = x;
  no_dur.erase("dur");
  EXPECT_FALSE(Validate({{"traceEvents", {named, no_dur}}}).empty());
  EXPECT_FALSE(Validate(one(x)).empty());  // no process_name
  json earlier = x;
  earlier["ts"] = 1;
  EXPECT_FALSE(Validate({{"traceEvents", {named, x, earlier}}}).empty());
  json straddles = x;
  straddles["ts"] = 6;
  straddles["dur"] = 5;
  EXPECT_FALSE(Validate({{"traceEvents", {named, x, straddles}}}).empty());
  json b = {{"name", "s"}, {"ph", "B"}, {"ts", 1}, {"pid", 1}, {"tid", 1}};
  EXPECT_FALSE(Validate({{"traceEvents", {named, b}}}).empty());
  json e = b;
  e["ph"] = "E";
  e["ts"] = 2;
  EXPECT_TRUE(Validate({{"traceEvents", {named, b, e}}}).empty());
  EXPECT_FALSE(Validate({{"traceEvents", {named, named, x}}}).empty());
  json no_tid = x;
  no_tid.erase("tid");
  EXPECT_FALSE(Validate({{"traceEvents", {named, no_tid}}}).empty());
}

TEST(Trace, DetailedRunHasStageStepAndWaitSpans) {
  json trace = ProfileTrace({"steps", "6"}, "detailed");
  EXPECT_EQ(Validate(trace), std::vector<std::string>{}) << Joined(Validate(trace));
  std::vector<json> steps = Events(trace, "X", "step"), waits = Events(trace, "X", "wait");
  std::vector<json> stages = Events(trace, "X", "stage");
  EXPECT_EQ(steps.size(), 6u);
  EXPECT_EQ(waits.size(), 6u);
  ASSERT_GE(stages.size(), 6u);
  for (const json& s : stages) {
    EXPECT_EQ(s["name"], "compute");
    EXPECT_EQ(s["args"]["source"], "events");  // exact enter/exit, not samples
    EXPECT_GT(s["dur"].get<double>(), 20000);  // 30 ms of CPU each, in µs
  }
  // Each step: a 20 ms wait inside it, then its compute stage.
  for (size_t i = 0; i < steps.size() && i < waits.size(); ++i) {
    const double b = steps[i]["ts"], e = b + steps[i]["dur"].get<double>();
    const double wb = waits[i]["ts"], we = wb + waits[i]["dur"].get<double>();
    EXPECT_GE(wb, b);
    EXPECT_LE(we, e + 1e-3);
    EXPECT_GE(waits[i]["dur"].get<double>(), 19000);
    EXPECT_EQ(steps[i]["name"], "step " + std::to_string(i + 1));
  }
  // Time starts at the profile's start.
  double first = 1e300;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] != "M") first = std::min(first, ev["ts"].get<double>());
  }
  EXPECT_GE(first, 0);
  EXPECT_LT(first, 1e6);
}

TEST(Trace, EveryWorkerIsItsOwnProcessTrack) {
  Profile profile;
  json trace = ProfileTrace({"fork", "2"}, "detailed", &profile);
  EXPECT_EQ(Validate(trace), std::vector<std::string>{}) << Joined(Validate(trace));
  std::map<int64_t, json> names;
  for (const json& e : Events(trace, "M")) {
    if (e["name"] == "process_name") names[e["pid"].get<int64_t>()] = e["args"];
  }
  ASSERT_EQ(names.size(), 3u);
  ASSERT_EQ(profile.processes.size(), 3u);
  int workers = 0;
  for (const Process& p : profile.processes) {
    ASSERT_TRUE(names.count(p.pid)) << p.pid;
    EXPECT_EQ(names[p.pid]["role"], p.role);
    EXPECT_EQ(names[p.pid]["worker"], p.worker);
    EXPECT_NE(names[p.pid]["name"].get<std::string>().find("pid " + std::to_string(p.pid)),
              std::string::npos);
    workers += p.role == "worker";
  }
  EXPECT_EQ(workers, 2);
  // The workers' stage spans are on their own tracks, the main's on its own.
  std::map<int64_t, std::set<std::string>> stages_by_pid;
  for (const json& e : Events(trace, "X", "stage")) {
    stages_by_pid[e["pid"].get<int64_t>()].insert(e["name"].get<std::string>());
  }
  for (const Process& p : profile.processes) {
    EXPECT_EQ(stages_by_pid[p.pid], std::set<std::string>{p.role == "main" ? "main_work" : "work"})
        << p.pid;
  }
  // Every thread track is named.
  std::set<std::pair<int64_t, int64_t>> named_threads;
  for (const json& e : Events(trace, "M")) {
    if (e["name"] == "thread_name")
      named_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
  }
  for (const json& e : Events(trace, "X")) {
    EXPECT_TRUE(named_threads.count({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}))
        << e.dump();
  }
}

TEST(Trace, LightRunDerivesStageSpansFromSamples) {
  json trace = ProfileTrace({"mix", "300"}, "light");
  EXPECT_EQ(Validate(trace), std::vector<std::string>{}) << Joined(Validate(trace));
  std::map<std::string, double> dur;
  for (const json& e : Events(trace, "X", "stage")) {
    EXPECT_EQ(e["args"]["source"], "samples");
    EXPECT_GE(e["args"]["samples"].get<int64_t>(), 1);
    dur[e["name"]] += e["dur"].get<double>();
  }
  for (const char* s : {"a", "b", "c", "late", "nap"}) EXPECT_GT(dur[s], 0) << s;
  // c burns twice b's CPU, in the same loop: its spans add up to more.
  EXPECT_GT(dur["c"], dur["b"]);
  // The nap sleeps 300 ms: off-CPU, seen by wall ticks.
  EXPECT_GT(dur["nap"], 200000);
  EXPECT_LT(dur["nap"], 400000);
}

TEST(Trace, BufferOccupancyIsACounter) {
  json trace = ProfileTrace({"buffers"}, "light");
  EXPECT_EQ(Validate(trace), std::vector<std::string>{}) << Joined(Validate(trace));
  std::vector<json> counters = Events(trace, "C", "buffer");
  ASSERT_FALSE(counters.empty());
  std::set<int64_t> sizes;
  for (const json& c : counters) {
    EXPECT_NE(c["name"].get<std::string>().find("queue"), std::string::npos);
    EXPECT_NE(c["name"].get<std::string>().find("capacity 10"), std::string::npos);
    sizes.insert(c["args"]["size"].get<int64_t>());
  }
  EXPECT_TRUE(sizes.count(0));
  EXPECT_TRUE(sizes.count(10));
}

// Spans that overlap without nesting (a stage left after the step ended) stay
// valid: they spill to a second lane of the same thread.
TEST(Trace, OverlappingSpansSpillToAnotherLane) {
  Profile p;
  Process proc;
  proc.pid = 10;
  proc.start_ns = 1000;
  p.processes.push_back(proc);
  uint32_t a = p.InternStage("a"), b = p.InternStage("b");
  p.intervals.push_back({0, 10, IntervalKind::kStage, a, 2000, 6000});
  p.intervals.push_back({0, 10, IntervalKind::kStage, b, 4000, 9000});
  p.intervals.push_back({0, 10, IntervalKind::kStage, b, 4500, 5000});
  json trace = json::parse(MakeTraceWriter()->Render(p, Analyze(p)));
  EXPECT_EQ(Validate(trace), std::vector<std::string>{}) << Joined(Validate(trace));
  std::vector<json> spans = Events(trace, "X", "stage");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0]["ts"], 1.0);  // µs after the process started
  EXPECT_EQ(spans[0]["dur"], 4.0);
  EXPECT_EQ(spans[0]["tid"], 10);
  EXPECT_NE(spans[1]["tid"], 10);  // b straddles a's end
  EXPECT_EQ(spans[2]["tid"], 10);  // nested in a: the first lane
}

}  // namespace
}  // namespace dlprof
