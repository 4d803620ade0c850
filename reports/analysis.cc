#include "reports/analysis.h"

#include "reports/analysis_contention.h"
#include "reports/analysis_text.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace dlprof {
namespace {

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * (v.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - lo);
}

// Wait intervals of the training loop's thread, sorted, for "was the loop
// waiting for data at time t?". Half-open, [begin, end): at `end` the loop
// has its data, and a wait that ends where the next begins is counted once.
struct WaitIndex {
  std::vector<std::pair<int64_t, int64_t>> spans;
  bool Contains(int64_t t) const {
    auto it = std::upper_bound(spans.begin(), spans.end(), std::make_pair(t, INT64_MAX));
    if (it == spans.begin()) return false;
    --it;
    return t >= it->first && t < it->second;
  }
};

int64_t Field(const Process& p, const char* key, int64_t dflt) {
  auto it = p.fields.find(key);
  return it == p.fields.end() || it->second.empty() ? dflt : std::atoll(it->second.c_str());
}

// multiprocessing's helper processes, by the command line Python runs them
// with (`python3 -c 'from multiprocessing.forkserver import main; main(...)'`).
// A forkserver's children inherit its command line: they are workers when
// they run data stages, so the command alone never makes a worker "other".
const char* MultiprocessingHelper(const std::string& command) {
  static const std::pair<const char*, const char*> kHelpers[] = {
      {"from multiprocessing.resource_tracker import main", "multiprocessing's resource tracker"},
      {"from multiprocessing.semaphore_tracker import main", "multiprocessing's semaphore tracker"},
      {"from multiprocessing.forkserver import main", "multiprocessing's forkserver"},
  };
  for (const auto& [needle, name] : kHelpers) {
    if (command.find(needle) != std::string::npos) return name;
  }
  return nullptr;
}

struct RoleDecision {
  std::string role, basis;
};

// Which process is the training loop, which are its data workers, and which
// are neither. The runtime cannot know: it writes "main" for the run's first
// process and "worker" for every later one (forked, spawned or exec'd), and a
// fork sequence number as the worker id unless the program sets one. Under a
// launcher (torchrun, a script running the trainer with subprocess) the
// first process is the launcher, and Python adds helpers (the resource
// tracker, the forkserver) that are nobody's workers. So the roles come from
// what each process did:
// - "main": it records the training loop's steps (or its waits, when no
//   process records steps); with neither anywhere, the run's first process;
// - "worker": it runs data stages, or it carries a worker id, was forked by a
//   training process (or by one outside the profile) and was not replaced by
//   an exec; a multiprocessing helper or an image that exec'd is not one;
// - "other": the rest (launchers, shells, helpers).
std::vector<RoleDecision> DecideRoles(const Profile& profile) {
  const size_t n = profile.processes.size();
  std::vector<int64_t> steps(n), waits(n);
  std::vector<bool> stages(n);
  for (const Interval& iv : profile.intervals) {
    if (iv.process >= n) continue;
    if (iv.kind == IntervalKind::kStep) ++steps[iv.process];
    else if (iv.kind == IntervalKind::kWait) ++waits[iv.process];
    else stages[iv.process] = true;
  }
  for (const Sample& s : profile.samples) {
    if (s.process < n && s.stage_path != 0 && s.stage_path < profile.stage_paths.size() &&
        !profile.stage_paths[s.stage_path].empty()) {
      stages[s.process] = true;
    }
  }
  const bool any_steps = std::any_of(steps.begin(), steps.end(), [](int64_t k) { return k > 0; });
  const bool any_waits = std::any_of(waits.begin(), waits.end(), [](int64_t k) { return k > 0; });
  std::vector<RoleDecision> d(n);
  std::set<std::pair<std::string, int>> known, trainers;  // (host, pid)
  for (size_t i = 0; i < n; ++i) {
    const Process& p = profile.processes[i];
    known.insert({p.host, p.pid});
    if (any_steps ? steps[i] > 0 : waits[i] > 0) {
      d[i] = {"main", any_steps ? "records the training loop's steps"
                                : "records the training loop's waits for data (no process records steps)"};
    } else if (!any_steps && !any_waits && p.role == "main" && !MultiprocessingHelper(p.command)) {
      d[i] = {"main", "the run's first process (no process records steps or waits)"};
    }
    if (d[i].role == "main") trainers.insert({p.host, p.pid});
  }
  for (size_t i = 0; i < n; ++i) {
    if (!d[i].role.empty()) continue;
    const Process& p = profile.processes[i];
    const char* helper = MultiprocessingHelper(p.command);
    const bool parent_trains = trainers.count({p.host, p.ppid}) > 0;
    const bool parent_unknown = p.ppid <= 0 || known.count({p.host, p.ppid}) == 0;
    if (stages[i]) {
      d[i] = {"worker", "runs data stages"};
    } else if (helper != nullptr) {
      d[i] = {"other", helper};
    } else if (p.end_reason == "exec") {
      d[i] = {"other", "replaced by an exec before it ran a stage"};
    } else if (p.role == "worker" && p.worker >= 0 && (parent_trains || parent_unknown)) {
      d[i] = {"worker", "worker " + std::to_string(p.worker) +
                            (parent_trains ? " of the training process"
                                           : " (its parent is not in the profile)")};
    } else {
      bool launcher = false;
      for (size_t j = 0; j < n; ++j) {
        const Process& q = profile.processes[j];
        launcher |= d[j].role == "main" && q.host == p.host && q.ppid == p.pid && q.pid != p.pid;
      }
      d[i] = {"other", launcher ? "started the training process (a launcher)"
                                : "runs no data stage and is no worker of the training process"};
    }
  }
  return d;
}

void AnalyzeSteps(const Profile& profile, Analysis* a, uint32_t* train_process, uint32_t* train_tid,
                  WaitIndex* waits) {
  // The loop to analyse: the training process with the most steps. Among
  // its siblings with about as many (data-parallel ranks, which a launcher
  // starts side by side and which step together), the one that waited most
  // for data after the warm-up: the others wait for it in their gradient
  // all-reduce, so its wait is what the whole run loses. (A parent and its
  // child are no ranks: an evaluation loop the trainer forks is not chosen.)
  std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> step_spans, wait_spans;
  for (const Interval& iv : profile.intervals) {
    if (iv.process >= profile.processes.size()) continue;
    if (iv.kind == IntervalKind::kStep) step_spans[iv.process].push_back({iv.begin_ns, iv.end_ns});
    else if (iv.kind == IntervalKind::kWait) wait_spans[iv.process].push_back({iv.begin_ns, iv.end_ns});
  }
  if (step_spans.empty()) return;
  uint32_t proc = step_spans.begin()->first;
  for (const auto& [process, spans] : step_spans) {
    if (spans.size() > step_spans[proc].size()) proc = process;
  }
  const size_t most = step_spans[proc].size();
  // Wait over step time from the first step after the warm-up.
  auto steady_wait = [&](uint32_t process) {
    std::vector<std::pair<int64_t, int64_t>>& spans = step_spans[process];
    std::sort(spans.begin(), spans.end());
    const size_t warmup = static_cast<size_t>(std::max<int64_t>(0, Field(profile.processes[process], "warmup_steps", 2)));
    const size_t first = warmup < spans.size() ? warmup : 0;
    double step_ns = 0, wait_ns = 0;
    for (size_t k = first; k < spans.size(); ++k) step_ns += static_cast<double>(spans[k].second - spans[k].first);
    for (const auto& [b, e] : wait_spans[process]) {
      if (b >= spans[first].first) wait_ns += static_cast<double>(e - b);
    }
    return step_ns > 0 ? wait_ns / step_ns : 0.0;
  };
  const Process& most_steps = profile.processes[proc];
  double most_wait = steady_wait(proc);
  int ranks = 1;
  for (const auto& [process, spans] : step_spans) {
    const Process& q = profile.processes[process];
    if (process == proc || q.host != most_steps.host || q.ppid != most_steps.ppid || q.ppid <= 0) continue;
    if (static_cast<double>(spans.size()) < 0.9 * static_cast<double>(most)) continue;
    ++ranks;
    const double wait = steady_wait(process);
    if (wait > most_wait) proc = process, most_wait = wait;
  }
  a->steps.ranks = ranks;
  const Process& p = profile.processes[proc];
  std::vector<Interval> steps;
  std::map<uint32_t, int> steps_per_tid;
  for (const Interval& iv : profile.intervals) {
    if (iv.process != proc) continue;
    if (iv.kind == IntervalKind::kStep) {
      steps.push_back(iv);
      steps_per_tid[iv.tid]++;
    } else if (iv.kind == IntervalKind::kWait) {
      waits->spans.push_back({iv.begin_ns, iv.end_ns});
    }
  }
  std::sort(steps.begin(), steps.end(),
            [](const Interval& x, const Interval& y) { return x.begin_ns < y.begin_ns; });
  std::sort(waits->spans.begin(), waits->spans.end());
  *train_process = proc;
  *train_tid = std::max_element(steps_per_tid.begin(), steps_per_tid.end(),
                                [](auto& x, auto& y) { return x.second < y.second; })->first;

  StepStats& s = a->steps;
  s.process = proc;
  s.pid = p.pid;
  const int64_t sampling_start = p.sampling_start_ns;
  const bool has_baseline = Field(p, "baseline_steps", 0) > 0;
  // The warm-up is the run's first steps, unsampled or not: caches, page
  // faults and lazy set-up make them slow whoever measures them. (Dropping
  // it from the sampled steps only, which come after an unsampled baseline,
  // compared warm profiled steps with a cold baseline.)
  int warmup = static_cast<int>(Field(p, "warmup_steps", 2));
  if (warmup < 0) warmup = 0;
  size_t unsampled = 0;  // the baseline: steps that end before sampling starts
  while (has_baseline && unsampled < steps.size() && steps[unsampled].end_ns <= sampling_start) {
    ++unsampled;
  }
  if (static_cast<size_t>(warmup) >= steps.size()) {
    // Not enough steps for a warm-up: keep them all rather than report none.
    if (warmup > 0 && steps.size() > unsampled) {
      a->warnings.push_back("only " + std::to_string(steps.size() - unsampled) +
                            " steps: warm-up steps kept (DLPROF_WARMUP_STEPS=" +
                            std::to_string(warmup) + ")");
    }
    warmup = 0;
  }
  std::vector<double> baseline;
  std::vector<const Interval*> sampled;
  for (size_t i = static_cast<size_t>(warmup); i < steps.size(); ++i) {
    if (i < unsampled) baseline.push_back((steps[i].end_ns - steps[i].begin_ns) / 1e9);
    else sampled.push_back(&steps[i]);
  }
  if (has_baseline && unsampled > 0 && baseline.empty()) {
    a->warnings.push_back("DLPROF_BASELINE_STEPS=" + std::to_string(Field(p, "baseline_steps", 0)) +
                          " is not more than DLPROF_WARMUP_STEPS=" + std::to_string(warmup) +
                          ": no unprofiled step is left after the warm-up to measure the profiler's "
                          "distortion with");
  }
  if (!sampled.empty()) {
    s.begin_ns = sampled.front()->begin_ns;
    s.end_ns = sampled.back()->end_ns;
  }
  s.tid = *train_tid;
  s.warmup_dropped = warmup;
  s.baseline_count = static_cast<int>(baseline.size());
  double total_step = 0, total_wait = 0;
  for (const Interval* step : sampled) {
    const Interval& st = *step;
    double wait = 0;
    for (auto it = std::lower_bound(waits->spans.begin(), waits->spans.end(),
                                    std::make_pair(st.begin_ns, INT64_MIN));
         it != waits->spans.end() && it->first < st.end_ns; ++it) {
      wait += (std::min(it->second, st.end_ns) - std::max(it->first, st.begin_ns)) / 1e9;
    }
    double len = (st.end_ns - st.begin_ns) / 1e9;
    s.step_s.push_back(len);
    s.wait_s.push_back(wait);
    total_step += len;
    total_wait += wait;
  }
  s.count = static_cast<int>(s.step_s.size());
  s.median_s = Quantile(s.step_s, 0.5);
  s.p90_s = Quantile(s.step_s, 0.9);
  s.p99_s = Quantile(s.step_s, 0.99);
  s.mean_s = s.count ? total_step / s.count : 0;
  s.data_wait_median_s = Quantile(s.wait_s, 0.5);
  s.data_wait_p90_s = Quantile(s.wait_s, 0.9);
  s.data_wait_fraction = total_step > 0 ? total_wait / total_step : 0;
  if (!baseline.empty() && s.count > 0) {
    // Against the profiled steps right after the baseline, as many as it
    // has: a run's step time drifts (data cached, the page cache warming),
    // and neighbouring windows see the least of that.
    s.baseline_median_s = Quantile(baseline, 0.5);
    std::vector<double> next(s.step_s.begin(),
                             s.step_s.begin() + std::min(s.step_s.size(), baseline.size()));
    if (s.baseline_median_s > 0) s.distortion = Quantile(next, 0.5) / s.baseline_median_s - 1;
  }
}

void AnalyzeStages(const Profile& profile, const std::vector<RoleDecision>& roles,
                   uint32_t train_process, uint32_t train_tid, bool has_steps, const WaitIndex& waits,
                   Analysis* a) {
  struct Acc {
    int64_t self_samples = 0;
    double cpu_from_samples = 0, total_cpu_from_samples = 0;
    double self_wall = 0, self_cpu_wall = 0, total_wall = 0, total_cpu_wall = 0;
    double wait_wall = 0;     // runnable, waiting for a core
    double model_wall = 0, data_wall = 0, model_samples = 0, data_samples = 0;
    std::map<std::string, double> blocked;  // syscall -> off-CPU ns
    std::set<int> pids;
    std::map<std::string, double> wall_by_role;
    std::map<int, double> wall_by_pid;
    bool has_wall = false;
  };
  std::vector<Acc> acc(profile.stages.size());
  // A stage's row (self CPU, self wall, blocked and waiting for a core) has
  // one source where there are wall records: the threads' own clocks, read
  // at each wall tick, so its parts add up to its wall time. The CPU samples
  // are a second, independent measure of the same CPU time (their count,
  // `self_samples`, is the flame graph's and pprof's): a row that took CPU
  // from them and wall from the ticks said "self CPU 160 ms, self wall
  // 73 ms" for a stage shorter than a tick. They differ where they see
  // differently: the perf timer counts user time only, the clocks kernel
  // time too (docs/ARCHITECTURE.md, "One source for each figure").
  // Each stage once per path (a stage may nest in itself): "total" counts it once.
  std::vector<std::vector<uint32_t>> unique_stages(profile.stage_paths.size());
  for (size_t i = 0; i < profile.stage_paths.size(); ++i) {
    for (uint32_t st : profile.stage_paths[i]) {
      auto& u = unique_stages[i];
      if (std::find(u.begin(), u.end(), st) == u.end()) u.push_back(st);
    }
  }
  for (const Sample& s : profile.samples) {
    const auto& path = profile.stage_paths[s.stage_path];
    if (path.empty()) continue;
    const Process& proc = profile.processes[s.process];
    const bool model = has_steps && s.process == train_process && s.tid == train_tid &&
                       !waits.Contains(s.time_ns);
    Acc& self = acc[path.back()];
    // Every stage on the path ran in this process, the outer ones too.
    for (uint32_t st : unique_stages[s.stage_path]) acc[st].pids.insert(proc.pid);
    if (s.kind == SampleKind::kCpu) {
      self.self_samples += s.count;
      self.cpu_from_samples += s.cpu_ns / 1e9;
      (model ? self.model_samples : self.data_samples) += s.count;
      for (uint32_t st : unique_stages[s.stage_path]) acc[st].total_cpu_from_samples += s.cpu_ns / 1e9;
    } else {
      self.has_wall = true;
      self.self_wall += s.wall_ns / 1e9;
      self.self_cpu_wall += s.cpu_ns / 1e9;
      self.wall_by_role[roles[s.process].role] += s.wall_ns / 1e9;
      self.wall_by_pid[proc.pid] += s.wall_ns / 1e9;
      (model ? self.model_wall : self.data_wall) += s.wall_ns / 1e9;
      // Three states: running, waiting for a core (wait_ns), blocked (a
      // record whose ticks found the thread in a call, less its waits).
      self.wait_wall += s.wait_ns / 1e9;
      if (!s.on_cpu && s.stack < profile.stacks.size() && !profile.stacks[s.stack].empty()) {
        const Location& loc = profile.locations[profile.stacks[s.stack][0]];
        if (!loc.frames.empty()) {
          std::string what = loc.frames[0].function;
          const std::string prefix = "[off-cpu: ";
          if (what.compare(0, prefix.size(), prefix) == 0) {
            what = what.substr(prefix.size(), what.size() - prefix.size() - 1);
          }
          self.blocked[what] += static_cast<double>(s.wall_ns);
        }
      }
      for (uint32_t st : unique_stages[s.stage_path]) {
        acc[st].total_wall += s.wall_ns / 1e9;
        acc[st].total_cpu_wall += s.cpu_ns / 1e9;
      }
    }
  }
  for (size_t i = 1; i < acc.size(); ++i) {
    const Acc& x = acc[i];
    if (x.self_samples == 0 && x.self_wall == 0 && x.total_wall == 0 && x.total_cpu_from_samples == 0) {
      continue;
    }
    StageStats st;
    st.name = profile.stages[i];
    st.self_samples = x.self_samples;
    if (x.has_wall || x.total_wall > 0) {
      st.self_wall_s = x.self_wall;
      st.self_cpu_s = std::min(x.self_cpu_wall, x.self_wall);
      st.total_wall_s = x.total_wall;
      st.total_cpu_s = std::min(x.total_cpu_wall, x.total_wall);
      // Three states that fill the wall time: on CPU (the clocks), runnable
      // but waiting for a core (run_delay: CPU-bound but starved, not
      // off-CPU), and blocked (I/O, sleep, lock), the rest. The rest also
      // holds short blocks between the ticks of a thread they saw running.
      if (x.self_wall > 0) {
        const double wait = std::clamp(x.wait_wall, 0.0, x.self_wall - st.self_cpu_s);
        st.cpu_wait_fraction = wait / x.self_wall;
        st.offcpu_fraction = std::max(0.0, x.self_wall - st.self_cpu_s - wait) / x.self_wall;
      }
      st.data_stage = x.data_wall >= x.model_wall;
    } else {  // CPU samples only (gperftools or pprof input): no wall clock
      st.self_cpu_s = x.cpu_from_samples;
      st.total_cpu_s = x.total_cpu_from_samples;
      st.data_stage = x.data_samples >= x.model_samples;
    }
    double blocked_total = 0;
    for (const auto& [call, ns] : x.blocked) blocked_total += ns;
    for (const auto& [call, ns] : x.blocked) {
      if (blocked_total > 0 && ns / blocked_total > st.top_blocking_fraction) {
        st.top_blocking_fraction = ns / blocked_total;
        st.top_blocking_call = call;
      }
    }
    st.pids.assign(x.pids.begin(), x.pids.end());
    for (int pid : st.pids) {
      auto it = x.wall_by_pid.find(pid);
      st.self_wall_by_pid.push_back(it != x.wall_by_pid.end() ? it->second : 0);
    }
    st.processes = static_cast<int>(x.pids.size());
    double best = -1;
    for (const auto& [role, wall] : x.wall_by_role) {
      if (wall > best) best = wall, st.main_role = role;
    }
    if (st.main_role.empty() && !x.pids.empty()) {
      for (size_t j = 0; j < profile.processes.size(); ++j) {
        if (profile.processes[j].pid == *x.pids.begin()) st.main_role = roles[j].role;
      }
    }
    a->stages.push_back(std::move(st));
  }
  std::sort(a->stages.begin(), a->stages.end(), [](const StageStats& x, const StageStats& y) {
    double kx = x.self_wall_s > 0 ? x.self_wall_s : x.self_cpu_s;
    double ky = y.self_wall_s > 0 ? y.self_wall_s : y.self_cpu_s;
    return kx != ky ? kx > ky : x.name < y.name;
  });
}

void AnalyzeBuffers(const Profile& profile, const std::vector<RoleDecision>& roles, Analysis* a) {
  for (const BufferSeries& b : profile.buffers) {
    BufferStats s;
    s.name = b.name;
    s.pid = profile.processes[b.process].pid;
    s.role = roles[b.process].role;
    s.capacity = b.capacity;
    s.snapshots = b.snapshots.size();
    if (b.snapshots.empty()) {
      a->buffers.push_back(s);
      continue;
    }
    double occ = 0;
    uint64_t empty = 0, full = 0;
    for (const BufferSnapshot& snap : b.snapshots) {
      if (b.capacity > 0) occ += std::min<double>(1.0, static_cast<double>(snap.size) / b.capacity);
      if (snap.size == 0) ++empty;
      if (b.capacity > 0 && snap.size >= b.capacity) ++full;
    }
    s.mean_occupancy = occ / b.snapshots.size();
    s.empty_fraction = static_cast<double>(empty) / b.snapshots.size();
    s.full_fraction = static_cast<double>(full) / b.snapshots.size();
    a->buffers.push_back(s);
  }
}

// Python frames whose code object was freed before the runtime could name
// it: one line for the whole run (every Python process has a few, from the
// module code of its imports; a line each drowned the other warnings).
void UnknownPythonCodeNote(const Profile& profile, Analysis* a) {
  uint64_t frames = 0;
  std::vector<std::string> pids;
  for (const Process& p : profile.processes) {
    auto it = p.counters.find("py_frames_unreadable");
    if (it == p.counters.end() || it->second == 0) continue;
    frames += it->second;
    pids.push_back(std::to_string(p.pid));
  }
  if (frames == 0) return;
  std::string who;
  for (size_t i = 0; i < pids.size() && i < 8; ++i) who += (i ? ", " : "") + pids[i];
  if (pids.size() > 8) who += ", ...";
  a->warnings.push_back(std::to_string(frames) + " Python frames in " + std::to_string(pids.size()) +
                        (pids.size() == 1 ? " process" : " processes") + " (pid " + who +
                        ") are \"[unknown python code]\": their code object was freed before "
                        "the runtime read its name (a module's code, freed once its import ran, "
                        "is the usual one)");
}

// What the runtime could not keep, or stopped doing, said in the report
// (the runtime itself only counts it): bounded tables, sampling switched off.
void RuntimeNotes(const Process& p, Analysis* a) {
  const std::string who = "pid " + std::to_string(p.pid) + ": ";
  auto counter = [&](const char* k) -> uint64_t {
    auto it = p.counters.find(k);
    return it != p.counters.end() ? it->second : 0;
  };
  if (uint64_t n = counter("stage_names_refused")) {
    a->warnings.push_back(who + std::to_string(n) +
                          " stage names were refused: the runtime keeps at most 4096 distinct "
                          "stage names per process; time in those stages counts under the "
                          "enclosing stage");
  }
  if (uint64_t n = counter("names_cut")) {
    a->warnings.push_back(who + std::to_string(n) +
                          " stage or buffer names longer than 1024 bytes were cut (they end in "
                          "\"...\")");
  }
  if (uint64_t n = counter("buffers_refused")) {
    a->warnings.push_back(who + std::to_string(n) +
                          " buffers were refused: the runtime keeps at most 256 per process");
  }
  if (auto lock = p.fields.find("loader_lock"); lock != p.fields.end()) {
    a->warnings.push_back(who + "forked while another thread held the dynamic loader's lock "
                                "(it stays held in the child): " + lock->second);
  }
  // A Python process whose frames the runtime could not walk: its stacks
  // show the interpreter's C frames only ("off: dlprof has no structure
  // table for CPython 3.14").
  if (auto py = p.fields.find("python_frames");
      py != p.fields.end() && py->second.rfind("off", 0) == 0) {
    auto version = p.fields.find("python");
    a->warnings.push_back(who + "Python" +
                          (version != p.fields.end() ? " " + version->second : std::string()) +
                          " frames " + py->second +
                          "; its stacks show the interpreter's native frames only");
  }
  // Walked, but the code objects could no longer be read (the collector
  // process, once the program turned undumpable: "on, names unreadable
  // from the collector process: ..."): its later frames are unknown.
  if (auto py = p.fields.find("python_frames");
      py != p.fields.end() && py->second.rfind("on, ", 0) == 0) {
    a->warnings.push_back(who + "Python frames " + py->second +
                          "; the frames of code not named before are \"[unknown python code]\"");
  }
  auto it = p.fields.find("cpu_sampling");
  if (it != p.fields.end() && it->second.rfind("off", 0) == 0) {
    std::string when;
    auto at = p.fields.find("cpu_sampling_off_ns");
    const double after_s =
        at != p.fields.end() && p.start_ns > 0 ? (std::atoll(at->second.c_str()) - p.start_ns) / 1e9 : 0;
    if (after_s >= 0.001) when = Fmt(" (from %.2f s after its start)", after_s);
    a->warnings.push_back(who + "CPU sampling " + it->second + when +
                          "; stages, steps, buffers and wall time are still recorded");
  }
}

void AnalyzeProcesses(const Profile& profile, const std::vector<RoleDecision>& roles, Analysis* a) {
  std::vector<double> cpu_wall(profile.processes.size()), cpu_samples(profile.processes.size());
  std::vector<bool> has_wall(profile.processes.size());
  for (const Sample& s : profile.samples) {
    if (s.kind == SampleKind::kWall) {
      cpu_wall[s.process] += s.cpu_ns / 1e9;
      has_wall[s.process] = true;
    } else {
      cpu_samples[s.process] += s.cpu_ns / 1e9;
    }
  }
  a->start_ns = INT64_MAX;
  a->end_ns = INT64_MIN;
  for (size_t i = 0; i < profile.processes.size(); ++i) {
    const Process& p = profile.processes[i];
    ProcessStats ps;
    ps.pid = p.pid;
    ps.ppid = p.ppid;
    ps.role = roles[i].role;
    ps.recorded_role = p.role;
    ps.role_basis = roles[i].basis;
    ps.worker = p.worker;
    ps.host = p.host;
    ps.command = p.command;
    ps.file = p.file;
    ps.samples = static_cast<int64_t>(p.samples);
    ps.dropped = p.dropped;
    ps.cpu_s = has_wall[i] ? cpu_wall[i] : cpu_samples[i];
    ps.wall_s = p.end_ns > p.start_ns ? (p.end_ns - p.start_ns) / 1e9 : 0;
    ps.busy_fraction = ps.wall_s > 0 ? ps.cpu_s / ps.wall_s : 0;
    ps.complete = p.complete;
    ps.end_reason = p.complete ? p.end_reason : "died (no end record)";
    auto h = p.counters.find("handler_ns");
    ps.handler_s = h != p.counters.end() ? h->second / 1e9 : 0;
    if (auto c = p.counters.find("collector_cpu_ns"); c != p.counters.end()) {
      ps.collector_s = c->second / 1e9;
      a->cost.collector_measured = true;
    }
    ps.hz = p.hz;
    ps.unwinder = p.unwinder;
    ps.timer = p.timer;
    auto field = [&](const char* key) {
      auto it = p.fields.find(key);
      return it == p.fields.end() ? std::string() : it->second;
    };
    ps.collector = field("collector");
    if (ps.collector.empty()) ps.collector = "thread";  // (files before the field)
    ps.python_frames = field("python_frames");
    if (ps.collector.rfind("process", 0) == 0) ++a->cost.collector_processes;
    if (p.start_ns > 0) a->start_ns = std::min(a->start_ns, p.start_ns);
    if (p.end_ns > 0) a->end_ns = std::max(a->end_ns, p.end_ns);
    a->cost.samples += p.samples;
    a->cost.dropped += p.dropped;
    a->cost.handler_s += ps.handler_s;
    a->cost.collector_s += ps.collector_s;
    a->processes.push_back(ps);
    for (const std::string& w : p.warnings) a->warnings.push_back(w);
    RuntimeNotes(p, a);
  }
  UnknownPythonCodeNote(profile, a);
  if (a->start_ns == INT64_MAX) a->start_ns = a->end_ns = 0;
  double cpu = 0;
  for (const ProcessStats& ps : a->processes) cpu += ps.cpu_s;
  a->cost.handler_fraction = cpu > 0 ? a->cost.handler_s / cpu : 0;
  a->cost.collector_fraction = cpu > 0 ? a->cost.collector_s / cpu : 0;
}

// `dlprof report` over processes of several runs makes one report of them,
// with the steps (and so the verdict) of one training process: said first,
// so that two runs merged to be compared are not read as one.
void MergedRunsNote(const Profile& profile, const StepStats& steps, Analysis* a) {
  const std::vector<std::string> ids = RunIds(profile);
  if (ids.size() < 2) return;
  std::string list;
  for (size_t i = 0; i < ids.size() && i < 3; ++i) list += (i > 0 ? ", " : "") + ids[i];
  if (ids.size() > 3) list += " and " + std::to_string(ids.size() - 3) + " more";
  std::string steps_from = "no process recorded steps";
  if (std::any_of(profile.intervals.begin(), profile.intervals.end(),
                  [](const Interval& iv) { return iv.kind == IntervalKind::kStep; })) {
    const Process& p = profile.processes[steps.process];
    auto id = p.fields.find("run_id");
    steps_from = "steps come from the training process of " +
                 (id != p.fields.end() ? id->second : std::string("a profile without a run id")) +
                 " (pid " + std::to_string(p.pid) + ")";
  }
  a->warnings.insert(a->warnings.begin(),
                     "merged " + std::to_string(ids.size()) + " runs (" + list +
                         ") into one report; " + steps_from +
                         ". To compare runs, use `dlprof diff BEFORE AFTER`");
}

// The training process a worker feeds: the nearest "main" up its parents
// (a forkserver's workers are its grandchildren), or -1.
int TrainerOf(const Profile& profile, const Analysis& a,
              const std::map<std::pair<std::string, int>, size_t>& by_pid, size_t i) {
  for (size_t hops = 0; hops < profile.processes.size(); ++hops) {
    const Process& p = profile.processes[i];
    auto parent = by_pid.find({p.host, p.ppid});
    if (p.ppid <= 0 || parent == by_pid.end() || parent->second == i) return -1;
    i = parent->second;
    if (a.processes[i].role == "main") return static_cast<int>(i);
  }
  return -1;
}

// The data workers at a time. Processes are not workers: a DataLoader without
// persistent_workers forks num_workers new ones every epoch (a 2-worker
// loader over 3 epochs is 6 processes, and the advice once asked for "about
// 55 workers"). Two measures, the smaller wins: the distinct worker ids (the
// program's own, dlprof_set_worker or torch's worker info; but a fork
// sequence number when it sets none, which grows every epoch) and the most
// worker processes alive at once (each epoch's workers may still be exiting
// while the next ones start). Ids are per training process (each DDP rank's
// DataLoader numbers its workers from 0) and per host (merged runs' clocks
// do not compare). `only_trainer` >= 0 counts that training process's only.
// `trainer_of`: each process's TrainerOf.
WorkerCount CountWorkersOf(const Profile& profile, const Analysis& a, const std::vector<int>& trainer_of,
                           int only_trainer) {
  WorkerCount c;
  std::map<std::string, std::vector<std::pair<int64_t, int>>> lives;  // host -> (time, +1/-1)
  std::set<std::tuple<std::string, int, int>> ids;                   // (host, trainer, worker id)
  bool all_ids = true, all_times = true;
  for (size_t i = 0; i < a.processes.size(); ++i) {
    const ProcessStats& ps = a.processes[i];
    if (ps.role != "worker") continue;
    const int trainer = trainer_of[i];
    if (only_trainer >= 0 && trainer != only_trainer) continue;
    ++c.processes;
    const Process& p = profile.processes[i];
    if (ps.worker >= 0) ids.insert({ps.host, trainer, ps.worker});
    else all_ids = false;
    if (p.start_ns > 0 && p.end_ns > p.start_ns) {
      lives[p.host].push_back({p.start_ns, +1});
      lives[p.host].push_back({p.end_ns, -1});
    } else {
      all_times = false;
    }
  }
  int alive_at_once = c.processes;
  if (all_times) {
    alive_at_once = 0;
    for (auto& [host, events] : lives) {
      std::sort(events.begin(), events.end());  // an end before a start at the same time
      int alive = 0, most = 0;
      for (const auto& e : events) most = std::max(most, alive += e.second);
      alive_at_once += most;
    }
  }
  c.concurrent = all_ids ? std::min(static_cast<int>(ids.size()), alive_at_once) : alive_at_once;
  c.feeding_loop = c.concurrent;
  return c;
}

// Every worker, and those of the training process whose steps are analysed
// (all of them when there is one training process, or no steps).
WorkerCount CountWorkers(const Profile& profile, const Analysis& a) {
  std::map<std::pair<std::string, int>, size_t> by_pid;
  for (size_t i = 0; i < a.processes.size(); ++i) by_pid[{profile.processes[i].host, profile.processes[i].pid}] = i;
  std::vector<int> trainer_of(a.processes.size(), -1);
  for (size_t i = 0; i < a.processes.size(); ++i) {
    if (a.processes[i].role == "worker") trainer_of[i] = TrainerOf(profile, a, by_pid, i);
  }
  WorkerCount c = CountWorkersOf(profile, a, trainer_of, -1);
  for (const ProcessStats& ps : a.processes) c.training_processes += ps.role == "main";
  if (c.training_processes > 1 && a.steps.process < a.processes.size() &&
      a.processes[a.steps.process].role == "main") {
    c.feeding_loop = CountWorkersOf(profile, a, trainer_of, static_cast<int>(a.steps.process)).concurrent;
  }
  c.trainer_of = std::move(trainer_of);
  return c;
}

// Whether worker process `i` counts for the analysed loop: every worker
// under one training process; under several, the analysed one's only (each
// DDP rank numbers its workers from 0).
bool FeedsAnalysedLoop(const Analysis& a, size_t i) {
  return a.workers.training_processes <= 1 ||
         a.workers.trainer_of[i] == static_cast<int>(a.steps.process);
}

// The training loop's own work inside its waits, outside any data stage: CPU
// samples of the loop's thread during its waits in the analysed steps (with
// the waits for a core that go with them), over the time those waits took. A
// loop that waits for workers is blocked then; one that unpickles a batch,
// copies it out of shared memory or collates in the main process runs.
double LoopReceiveFraction(const Profile& profile, const Analysis& a, const WaitIndex& waits) {
  const StepStats& steps = a.steps;
  double wait_s = 0;
  for (double w : steps.wait_s) wait_s += w;
  if (steps.count == 0 || wait_s <= 0) return 0;
  std::vector<char> data_stage(profile.stages.size(), 0);
  for (const StageStats& st : a.stages) {
    for (size_t i = 1; i < profile.stages.size(); ++i) {
      if (profile.stages[i] == st.name) data_stage[i] = st.data_stage;
    }
  }
  double cpu_s = 0;
  // On a crowded machine the loop also waits for a core while it receives:
  // runnable, not waiting for the workers either. Its waits for a core are
  // taken in proportion to its CPU time over the steps (the wall records'
  // runs do not end at the waits' edges, so they cannot be split there).
  double thread_cpu = 0, thread_core_wait = 0;
  for (const Sample& s : profile.samples) {
    if (s.process != steps.process || s.tid != steps.tid) continue;
    if (s.time_ns < steps.begin_ns || s.time_ns >= steps.end_ns) continue;
    if (s.kind == SampleKind::kWall) {
      thread_cpu += s.cpu_ns;
      thread_core_wait += s.wait_ns;
      continue;
    }
    if (!waits.Contains(s.time_ns)) continue;
    const auto& path = profile.stage_paths[s.stage_path];
    bool in_data_stage = false;
    for (uint32_t st : path) in_data_stage |= st < data_stage.size() && data_stage[st];
    if (!in_data_stage) cpu_s += s.cpu_ns / 1e9;
  }
  // Only when other programs hold the cores: when the program's own threads
  // outnumber them (contention.saturated), the loop waits for a core its
  // workers hold, and the workers' stage is what to make cheaper. A datapipe
  // run on 2 cores (loop and two augmenting workers, 3 runnable) came out
  // "receive-bound" at 0.62 from 0.28 of its waits on CPU, scaled by 2.2.
  const double runnable_per_cpu =
      thread_cpu > 0 && !a.contention.saturated
          ? std::min(10.0, (thread_cpu + thread_core_wait) / thread_cpu)
          : 1.0;
  return std::min(1.0, cpu_s * runnable_per_cpu / wait_s);
}

// Input-bound with no data stage marked (a script that marks only its loop,
// or a DataLoader under DLPROF_AUTO_ANNOTATE=0): the workers' own time says
// whether the wait is their work (issue 14, item 4). Busy (on a CPU or
// waiting for one) half the training steps or more: their compute, named by
// their hottest functions (NameBottleneckFunctions). Otherwise the evidence says
// how little they worked, and the stages still need marking. False when
// there are no workers, or no wall records to judge them by.
bool UnmarkedWorkersVerdict(const Profile& profile, Analysis* a) {
  Verdict& v = a->verdict;
  if (!v.input_bound || a->workers.processes == 0) return false;
  // Over the training steps only: a worker's start (imports) and its end
  // (idle until the loader shuts it down) are not the pipeline's pace.
  int64_t from = INT64_MIN, to = INT64_MAX;
  for (const Interval& iv : profile.intervals) {
    if (iv.kind != IntervalKind::kStep || iv.process != a->steps.process) continue;
    from = from == INT64_MIN ? iv.begin_ns : std::min(from, iv.begin_ns);
    to = to == INT64_MAX ? iv.end_ns : std::max(to, iv.end_ns);
  }
  struct Time {
    double wall = 0, busy = 0;
  };
  // Each worker by its busiest thread: its other threads (a queue's feeder)
  // sleep by design.
  std::map<std::pair<uint32_t, uint32_t>, Time> by_thread;  // (process, tid)
  for (const Sample& s : profile.samples) {
    if (s.kind != SampleKind::kWall || s.process >= a->processes.size() || s.wall_ns <= 0) continue;
    if (a->processes[s.process].role != "worker") continue;
    if (!FeedsAnalysedLoop(*a, s.process)) continue;
    // A record ends at its time and spans its wall time: the part inside.
    const int64_t begin = s.time_ns - s.wall_ns;
    const double inside = static_cast<double>(std::max<int64_t>(
                              0, std::min(s.time_ns, to) - std::max(begin, from))) /
                          static_cast<double>(s.wall_ns);
    if (inside <= 0) continue;
    Time& t = by_thread[{s.process, s.tid}];
    t.wall += inside * static_cast<double>(s.wall_ns);
    t.busy += inside * static_cast<double>(std::min(s.wall_ns, s.cpu_ns + s.wait_ns));
  }
  std::map<uint32_t, Time> busiest;  // by process
  for (const auto& [key, t] : by_thread) {
    Time& b = busiest[key.first];
    if (t.busy > b.busy || b.wall == 0) b = t;  // a worker idle throughout counts too
  }
  std::map<int, Time> by_worker;  // by worker id; re-forked workers share theirs
  Time all;
  for (const auto& [process, t] : busiest) {
    Time& w = by_worker[a->processes[process].worker];
    w.wall += t.wall;
    w.busy += t.busy;
    all.wall += t.wall;
    all.busy += t.busy;
  }
  if (all.wall <= 0) return false;
  const double busy = all.busy / all.wall;
  std::string each;
  int listed = 0;
  for (const auto& [id, t] : by_worker) {
    if (t.wall <= 0) continue;
    if (++listed > 4) {
      each += ", ...";
      break;
    }
    const std::string who = id >= 0 ? "worker " + std::to_string(id) : std::string("worker");
    each += (listed > 1 ? ", " : "") + who + " " + Pct(t.busy / t.wall);
  }
  const bool workers_busy = busy >= 0.5;
  v.evidence.push_back("No data stage is marked. Over the training steps the worker processes "
                       "were busy (on a CPU or waiting for one) " + Pct(busy) + " of their time (" +
                       each + ")" +
                       (workers_busy ? ": the loop waits for their work."
                                     : ": most of it they were blocked or idle."));
  if (!workers_busy) return false;
  v.bottleneck_role = "worker";
  v.bottleneck_kind = "cpu";
  v.advice.push_back(std::string("The workers' compute is the bottleneck: make their hottest "
                                 "functions cheaper") +
                     (a->contention.saturated
                          ? " or run on more cores (the cores are saturated: more workers would "
                            "make it worse)"
                          : ", or add workers while there are free cores") +
                     "; mark the pipeline's stages (dlprof.stage, or DLPROF_AUTO_ANNOTATE=1 for a "
                     "DataLoader) to see which stage they are in.");
  return true;
}

void DecideVerdict(const Profile& profile, bool has_steps, const WaitIndex& waits, Analysis* a) {
  Verdict& v = a->verdict;
  const StepStats& steps = a->steps;
  // The consumer's buffers: those in the training loop's process.
  const BufferStats* consumer = nullptr;
  for (const BufferStats& b : a->buffers) {
    if (b.snapshots == 0) continue;
    bool in_train = has_steps ? b.pid == profile.processes[steps.process].pid : b.role == "main";
    if (in_train && (consumer == nullptr || b.snapshots > consumer->snapshots)) consumer = &b;
  }
  if (has_steps && steps.count > 0) {
    v.data_wait_fraction = steps.data_wait_fraction;
    v.basis = "steps";
    // Under several training processes (DDP ranks) the verdict is about one
    // loop's steps: say whose.
    const std::string whose = AnalysedLoop(*a);
    v.evidence.push_back("The training loop" + (whose.empty() ? "" : " of " + whose + ",") +
                         " waited for data " + Pct(steps.data_wait_fraction) +
                         " of its step time over " + std::to_string(steps.count) + " steps (median step " +
                         Fmt("%.1f ms, median wait %.1f ms).", steps.median_s * 1e3,
                             steps.data_wait_median_s * 1e3));
  } else if (consumer != nullptr) {
    // No step markers: the consumer's buffer standing empty is the loop waiting.
    v.data_wait_fraction = consumer->empty_fraction;
    v.basis = "buffers";
    v.evidence.push_back("No step markers: judged from buffer '" + consumer->name + "', empty " +
                         Pct(consumer->empty_fraction) + " of the time.");
  } else {
    v.basis = "none";
    v.evidence.push_back("No step markers and no buffers: cannot tell whether training waits "
                         "for data. Mark steps with dlprof_step_begin/end and waits with "
                         "dlprof_wait_begin/end.");
  }
  v.severity = v.data_wait_fraction >= kHighWaitFraction       ? "high"
               : v.data_wait_fraction >= kModerateWaitFraction ? "moderate"
                                                               : "none";
  v.input_bound = v.severity != "none";
  if (consumer != nullptr) {
    v.evidence.push_back("Buffer '" + consumer->name + "' (capacity " +
                         std::to_string(consumer->capacity) + ") was empty " +
                         Pct(consumer->empty_fraction) + " and full " +
                         Pct(consumer->full_fraction) + " of the time, mean occupancy " +
                         Pct(consumer->mean_occupancy) + ".");
  }
  if (v.basis == "none") return;  // nothing to judge; the evidence says what to add
  if (!v.input_bound) {
    v.advice.push_back("The input pipeline keeps up: the training step itself is the place to "
                       "optimise" + std::string(consumer && consumer->full_fraction > 0.5
                                                    ? " (the prefetch buffer is mostly full)."
                                                    : "."));
    return;
  }
  // The loop's own work inside its waits: when it runs most of the time it
  // "waits", it is not waiting for the workers, and no data stage is to
  // blame (issue 14: a loop unpacking 7 ms per batch beside idle workers was
  // blamed on the workers' largest stage).
  v.loop_receive_fraction = has_steps ? LoopReceiveFraction(profile, *a, waits) : 0;
  if (v.loop_receive_fraction >= kLoopReceiveShare) {
    v.bottleneck_kind = "cpu";
    v.bottleneck_role = "main";
    v.evidence.push_back("The training loop ran on its own CPU " + Pct(v.loop_receive_fraction) +
                         " of the time it waited for data, outside every data stage: receiving "
                         "batches (unpickling them, copying them out of shared memory, collating "
                         "in the training process), not waiting for the workers.");
    v.advice.push_back("The training loop's own receive work is the bottleneck, not the workers: "
                       "send fewer, larger objects per batch (tensors in shared memory rather than "
                       "many small Python objects), collate in the workers, or mark that work with "
                       "a stage to see it in the flame graph.");
    return;
  }
  // The bottleneck: the data stage with the largest self time.
  const StageStats* best = nullptr;
  for (const StageStats& st : a->stages) {
    if (!st.data_stage) continue;
    double k = st.self_wall_s > 0 ? st.self_wall_s : st.self_cpu_s;
    double kb = best ? (best->self_wall_s > 0 ? best->self_wall_s : best->self_cpu_s) : -1;
    if (k > kb) best = &st;
  }
  if (best == nullptr) {
    if (!UnmarkedWorkersVerdict(profile, a)) {
      v.advice.push_back("Mark the pipeline's stages (dlprof_stage_enter/exit or DLPROF_STAGE) to "
                         "find which one is slow.");
    }
    return;
  }
  v.bottleneck_stage = best->name;
  // I/O when blocked at least half of the time it was not waiting for a
  // core: a wait for a core is neither I/O nor the stage's own compute (on a
  // crowded machine an I/O stage's readers wait for cores between reads).
  v.bottleneck_kind =
      best->offcpu_fraction >= 0.5 * std::max(0.0, 1 - best->cpu_wait_fraction) && best->offcpu_fraction > 0
          ? "io"
          : "cpu";
  v.bottleneck_role = best->main_role.empty() ? "main" : best->main_role;
  // The pipeline's workers, each counted once however often it was re-forked;
  // the advice is about the analysed loop's own (one DDP rank's, say).
  const WorkerCount& wc = a->workers;
  const int all_workers = std::max(1, wc.concurrent);
  const int workers = std::max(1, wc.feeding_loop);
  std::string where = "in the training process";
  if (v.bottleneck_role == "worker") {
    where = "in " + std::to_string(all_workers) + " worker process" + (all_workers == 1 ? "" : "es");
    if (wc.processes > all_workers) {
      where += " at a time (" + std::to_string(wc.processes) + " over the run: workers "
               "started anew, as a DataLoader without persistent_workers does every epoch)";
    }
    if (wc.training_processes > 1) {
      where += " across " + std::to_string(wc.training_processes) + " training processes (" +
               std::to_string(wc.feeding_loop) + " feeding the one whose steps are analysed)";
    }
  }
  if (v.bottleneck_kind == "io") {
    v.evidence.push_back("Stage '" + best->name + "' has the largest self time of the data "
                         "stages (" + Fmt("%.2f s", best->self_wall_s) + " " + where + ") and is "
                         "off-CPU " + Pct(best->offcpu_fraction) + " of it" +
                         (best->top_blocking_call.empty()
                              ? "."
                              : ", mostly blocked in " + best->top_blocking_call + "() (" +
                                    Pct(best->top_blocking_fraction) + ")."));
    v.advice.push_back("'" + best->name + "' waits on I/O: overlap more requests (" +
                       (a->contention.saturated
                            ? std::string("threads or asynchronous reads for this stage: the cores "
                                          "are saturated, more workers would wait for them")
                            : std::string("more workers or threads for this stage")) +
                       "), raise the prefetch depth, or move the data to faster storage; more CPU "
                       "will not help.");
  } else {
    v.evidence.push_back("Stage '" + best->name + "' has the largest self time of the data "
                         "stages (" + Fmt("%.2f s", best->self_wall_s > 0 ? best->self_wall_s : best->self_cpu_s) +
                         " " + where + ") and is on-CPU " +
                         Pct(std::max(0.0, 1 - best->offcpu_fraction - best->cpu_wait_fraction)) +
                         " of it" +
                         (best->cpu_wait_fraction >= 0.005
                              ? ", waiting for a core " + Pct(best->cpu_wait_fraction) + "."
                              : std::string(".")));
    if (v.bottleneck_role == "worker") {
      double delivered = 0, wanted = 0;
      if (steps.count > 0 && steps.mean_s > 0 && steps.data_wait_fraction < 0.95) {
        // The pipeline delivers one batch per step; without the wait the loop
        // would take one per (1 - wait) of a step. Workers scale that rate
        // while free cores last (WorkerCpuAdvice).
        delivered = 1 / steps.mean_s;
        wanted = delivered / (1 - steps.data_wait_fraction);
      }
      v.advice.push_back(WorkerCpuAdvice(a->contention, best->name, workers, delivered, wanted,
                                         a->steps.ranks));
    } else {
      v.advice.push_back("'" + best->name + "' runs in the training process and blocks it: move "
                         "it to worker processes, or make it cheaper.");
    }
  }
  // Worker imbalance: one worker spending much longer in the bottleneck stage
  // than the others holds the in-order consumer back.
  if (v.bottleneck_role == "worker") {
    // Every worker counts, also one whose time in the stage was too short for
    // any wall tick to see: fast workers beside a slow one are exactly that.
    // Workers re-forked every epoch are one worker each: summed by worker id.
    // The analysed loop's workers only (FeedsAnalysedLoop).
    std::map<int, double> by_id;  // worker id -> self wall in the stage
    for (size_t k = 0; k < a->processes.size(); ++k) {
      const ProcessStats& p = a->processes[k];
      if (p.role != "worker" || p.worker < 0) continue;
      if (!FeedsAnalysedLoop(*a, k)) continue;
      double& self_wall = by_id[p.worker];
      for (size_t i = 0; i < best->pids.size(); ++i) {
        if (best->pids[i] == p.pid) self_wall += best->self_wall_by_pid[i];
      }
    }
    std::vector<std::pair<double, int>> per_worker;  // (self wall, worker id)
    for (const auto& [id, self_wall] : by_id) per_worker.push_back({self_wall, id});
    if (per_worker.size() >= 2) {
      double sum = 0;
      for (const auto& w : per_worker) sum += w.first;
      auto slowest = *std::max_element(per_worker.begin(), per_worker.end());
      double others = (sum - slowest.first) / (per_worker.size() - 1);
      // A worker never seen in the stage spent less than about one wall tick
      // there: the ratio is at least the one against that resolution.
      constexpr double kWallTickS = 0.01;
      v.worker_imbalance = slowest.first > 0 ? slowest.first / std::max(others, kWallTickS) : 0;
      v.slowest_worker = slowest.second;
      if (v.worker_imbalance >= 1.5) {
        v.evidence.push_back(
            Fmt("Worker %.0f spends %.2f s in '", slowest.second, slowest.first) + best->name +
            (others >= kWallTickS
                 ? Fmt("', %.1fx the %.2f s of the other workers on average.", v.worker_imbalance,
                       others)
                 : std::string("'; the other workers, too little for a 10 ms wall tick to see.")));
        v.advice.push_back("The workers are imbalanced: worker " + std::to_string(slowest.second) +
                           " is the slow one (slower storage or a heavier shard). Rebalance its "
                           "share of the data, or let batches arrive out of order so the others "
                           "are not held back.");
      }
    }
  }
  if (steps.count > 0 && steps.data_wait_fraction < 1) {
    double speedup = 1 / (1 - steps.data_wait_fraction);
    v.advice.push_back(Fmt("Removing the wait entirely would make steps up to %.2fx faster "
                           "(mean %.1f ms -> %.1f ms).",
                           speedup, steps.mean_s * 1e3,
                           steps.mean_s * (1 - steps.data_wait_fraction) * 1e3));
  }
}

// verdict.bottleneck_functions, and one sentence of evidence naming them.
// Input-bound with no data stage marked: the workers' hottest functions, when
// the pipeline has workers.
void NameBottleneckFunctions(const Profile& profile, Analysis* a) {
  Verdict& v = a->verdict;
  std::vector<std::string> roles;
  for (const ProcessStats& p : a->processes) roles.push_back(p.role);
  std::string text;
  if (v.loop_receive_fraction >= kLoopReceiveShare) return;  // the loop's own work: no stage
  if (!v.bottleneck_stage.empty()) {
    v.bottleneck_functions =
        BottleneckFunctions(profile, roles, v.bottleneck_stage, v.bottleneck_role, v.bottleneck_kind, 5);
    text = "Inside '" + v.bottleneck_stage + "', the functions with the most " +
           (v.bottleneck_kind == "io" ? "blocked" : "CPU") + " time: ";
  } else if (v.input_bound && a->workers.processes > 0) {
    v.bottleneck_functions = BottleneckFunctions(profile, roles, "", "worker", "cpu", 5);
    text = "In the worker processes, the functions with the most CPU time: ";
  }
  if (v.bottleneck_functions.empty()) return;
  for (size_t i = 0; i < v.bottleneck_functions.size() && i < 3; ++i) {
    const CulpritFunction& f = v.bottleneck_functions[i];
    const std::string file = f.file.substr(f.file.rfind('/') + 1);
    text += std::string(i ? ", " : "") + f.name +
            (file.empty() ? "" : " (" + file + (f.line > 0 ? ":" + std::to_string(f.line) : "") + ")") +
            " " + Pct(f.share);
  }
  v.evidence.push_back(text + ".");
}

}  // namespace

Analysis Analyze(const Profile& profile) {
  Analysis a;
  uint32_t train_process = 0, train_tid = 0;
  WaitIndex waits;
  AnalyzeSteps(profile, &a, &train_process, &train_tid, &waits);
  const bool has_steps = a.steps.count > 0 || a.steps.baseline_count > 0;
  const std::vector<RoleDecision> roles = DecideRoles(profile);
  AnalyzeStages(profile, roles, train_process, train_tid, has_steps, waits, &a);
  AnalyzeBuffers(profile, roles, &a);
  AnalyzeProcesses(profile, roles, &a);
  a.workers = CountWorkers(profile, a);
  a.contention = MeasureContention(profile, a);
  a.verdict.cpu_saturated = a.contention.saturated;
  DecideVerdict(profile, has_steps, waits, &a);
  NameBottleneckFunctions(profile, &a);
  ExplainContention(a, &a.verdict);
  a.cost.distortion = a.steps.distortion;
  a.cost.distortion_measured = a.steps.baseline_count > 0;
  for (const std::string& w : profile.warnings) a.warnings.push_back(w);
  MergedRunsNote(profile, a.steps, &a);
  return a;
}

std::string AnalysedLoop(const Analysis& a) {
  if (a.workers.training_processes <= 1 || a.steps.pid == 0) return "";
  const std::string who = "pid " + std::to_string(a.steps.pid);
  if (a.steps.ranks > 1) {
    return who + " (of " + std::to_string(a.steps.ranks) +
           " ranks stepping together, the one that waited most for data)";
  }
  return who + " (of " + std::to_string(a.workers.training_processes) +
         " training processes, the one with the most steps)";
}

const std::string& ProcessRole(const Profile& profile, const Analysis& analysis, size_t i) {
  return i < analysis.processes.size() ? analysis.processes[i].role : profile.processes[i].role;
}

std::vector<std::string> RunIds(const Profile& profile) {
  std::vector<std::string> ids;
  for (const Process& p : profile.processes) {
    auto it = p.fields.find("run_id");
    if (it == p.fields.end() || it->second.empty()) continue;
    if (std::find(ids.begin(), ids.end(), it->second) == ids.end()) ids.push_back(it->second);
  }
  return ids;
}

}  // namespace dlprof
