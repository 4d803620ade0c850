#include "reports/run_diff.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "readers/input_loader.h"
#include "readers/symbolizer.h"

namespace dlprof {

bool Change::Relative(double* r) const {
  if (!both() || before == 0) return false;
  *r = (after - before) / std::abs(before);
  return true;
}

Change Changed(double before, double after) {
  Change c;
  c.has_before = c.has_after = true;
  c.before = before;
  c.after = after;
  return c;
}

namespace {

void SetBefore(Change* c, double v) {
  c->has_before = true;
  c->before = v;
}
void SetAfter(Change* c, double v) {
  c->has_after = true;
  c->after = v;
}
void Set(Change* c, bool after, double v) { after ? SetAfter(c, v) : SetBefore(c, v); }

DiffSide Side(const Analysis& a) {
  DiffSide s;
  s.verdict = a.verdict;
  s.duration_s = (a.end_ns - a.start_ns) / 1e9;
  return s;
}

void AddStages(const Analysis& a, bool after, std::vector<StageDiff>* out) {
  for (const StageStats& st : a.stages) {
    auto it = std::find_if(out->begin(), out->end(),
                           [&](const StageDiff& d) { return d.name == st.name; });
    if (it == out->end()) {
      out->push_back(StageDiff());
      it = out->end() - 1;
      it->name = st.name;
    }
    StageDiff& d = *it;
    (after ? d.in_after : d.in_before) = true;
    (after ? d.role_after : d.role_before) = st.main_role;
    d.data_stage = d.data_stage && st.data_stage;
    Set(&d.self_wall_s, after, st.self_wall_s);
    Set(&d.self_cpu_s, after, st.self_cpu_s);
    Set(&d.total_wall_s, after, st.total_wall_s);
    if (st.self_wall_s > 0) {  // as the page shows it: what is neither blocked nor waiting ran
      Set(&d.on_cpu_fraction, after, std::max(0.0, 1 - st.offcpu_fraction - st.cpu_wait_fraction));
      Set(&d.offcpu_fraction, after, st.offcpu_fraction);
      Set(&d.cpu_wait_fraction, after, st.cpu_wait_fraction);
    }
  }
}

// One name's buffers in one run, pooled.
struct BufferPool {
  int processes = 0;
  uint64_t capacity = 0, snapshots = 0;
  double occupancy = 0, empty = 0, full = 0;  // snapshot-weighted sums
  std::map<std::string, int> roles;
};

std::map<std::string, BufferPool> PoolBuffers(const Analysis& a) {
  std::map<std::string, BufferPool> pools;
  for (const BufferStats& b : a.buffers) {
    BufferPool& p = pools[b.name];
    ++p.processes;
    ++p.roles[b.role];
    p.capacity = std::max(p.capacity, b.capacity);
    p.snapshots += b.snapshots;
    p.occupancy += b.mean_occupancy * b.snapshots;
    p.empty += b.empty_fraction * b.snapshots;
    p.full += b.full_fraction * b.snapshots;
  }
  return pools;
}

void AddBuffers(const Analysis& a, bool after, std::vector<BufferDiff>* out) {
  for (const auto& [name, p] : PoolBuffers(a)) {
    auto it = std::find_if(out->begin(), out->end(),
                           [&, &name = name](const BufferDiff& d) { return d.name == name; });
    if (it == out->end()) {
      out->push_back(BufferDiff());
      it = out->end() - 1;
      it->name = name;
    }
    BufferDiff& d = *it;
    (after ? d.in_after : d.in_before) = true;
    // The role most of its processes have ("worker" for per-worker queues).
    std::string role;
    int most = 0;
    for (const auto& [r, n] : p.roles) {
      if (n > most) most = n, role = r;
    }
    (after ? d.role_after : d.role_before) = role;
    Set(&d.processes, after, p.processes);
    Set(&d.capacity, after, static_cast<double>(p.capacity));
    if (p.snapshots > 0) {  // never snapshotted: nothing measured, not "never empty"
      const double n = static_cast<double>(p.snapshots);
      Set(&d.mean_occupancy, after, p.occupancy / n);
      Set(&d.empty_fraction, after, p.empty / n);
      Set(&d.full_fraction, after, p.full / n);
    }
  }
}

void AddWorkers(const Analysis& a, bool after, RunDiff* d) {
  Set(&d->workers_concurrent, after, a.workers.concurrent);
  Set(&d->worker_processes, after, a.workers.processes);
  double cpu = 0, wall = 0;
  for (const ProcessStats& p : a.processes) {
    if (p.role != "worker") continue;
    cpu += p.cpu_s;
    wall += p.wall_s;
  }
  if (wall > 0) Set(&d->worker_busy_fraction, after, cpu / wall);
}

void AddSteps(const Analysis& a, bool after, RunDiff* d) {
  if (a.verdict.basis != "none") Set(&d->data_wait_fraction, after, a.verdict.data_wait_fraction);
  Set(&d->steps, after, a.steps.count);
  Set(&d->duration_s, after, (a.end_ns - a.start_ns) / 1e9);
  if (a.steps.count == 0) return;
  Set(&d->step_median_s, after, a.steps.median_s);
  Set(&d->step_mean_s, after, a.steps.mean_s);
  Set(&d->data_wait_median_s, after, a.steps.data_wait_median_s);
}

// The larger of a stage's self times in the two runs (wall, else CPU for
// profiles without wall time), for the order of the rows.
double Size(const StageDiff& s) {
  auto larger = [](const Change& c) {
    return std::max(c.has_before ? c.before : 0.0, c.has_after ? c.after : 0.0);
  };
  const double wall = larger(s.self_wall_s);
  return wall > 0 ? wall : larger(s.self_cpu_s);
}

}  // namespace

RunDiff DiffRuns(const Analysis& before, const Analysis& after) {
  RunDiff d;
  d.before = Side(before);
  d.after = Side(after);
  for (bool side : {false, true}) {
    const Analysis& a = side ? after : before;
    AddSteps(a, side, &d);
    AddStages(a, side, &d.stages);
    AddBuffers(a, side, &d.buffers);
    AddWorkers(a, side, &d);
    for (const std::string& w : a.warnings) d.warnings.push_back((side ? "after: " : "before: ") + w);
  }
  std::stable_sort(d.stages.begin(), d.stages.end(), [](const StageDiff& x, const StageDiff& y) {
    const double kx = Size(x), ky = Size(y);
    return kx != ky ? kx > ky : x.name < y.name;
  });
  std::sort(d.buffers.begin(), d.buffers.end(),
            [](const BufferDiff& x, const BufferDiff& y) { return x.name < y.name; });
  return d;
}

Analysis AnalyzeInput(const std::string& input, const FileLimits& limits,
                      std::vector<std::string>* run_ids) {
  Profile profile;
  LoadInputs({input}, &profile, limits);
  Symbolizer symbolizer;
  symbolizer.SymbolizeProfile(&profile);
  if (run_ids != nullptr) *run_ids = RunIds(profile);
  return Analyze(profile);
}

RunDiff DiffInputs(const std::string& before, const std::string& after, const FileLimits& limits) {
  std::vector<std::string> ids[2];
  Analysis a[2];
  const std::string* inputs[2] = {&before, &after};
  for (int i = 0; i < 2; ++i) {
    try {
      a[i] = AnalyzeInput(*inputs[i], limits, &ids[i]);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string(i == 0 ? "before: " : "after: ") + e.what());
    }
  }
  RunDiff d = DiffRuns(a[0], a[1]);
  d.before.input = before;
  d.after.input = after;
  d.before.run_ids = ids[0];
  d.after.run_ids = ids[1];
  if (!ids[0].empty() && ids[0] == ids[1]) {
    d.warnings.insert(d.warnings.begin(), "before and after are the same run (" + ids[0][0] + ")");
  }
  return d;
}

}  // namespace dlprof
