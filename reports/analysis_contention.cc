#include "reports/analysis_contention.h"
#include "reports/analysis_text.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

namespace dlprof {
namespace {

std::string Cores(int n) { return std::to_string(n) + (n == 1 ? " core" : " cores"); }

// Bins of the time judged: fine enough to see a saturated stretch, few
// enough that a long run stays cheap (a record of a second spans 10).
constexpr int64_t kBinNs = 100 * 1000 * 1000;
constexpr int64_t kMaxBins = 4000;

}  // namespace

long ProfiledCores(const Profile& profile, bool* recorded) {
  long cores = 0;
  for (const Process& p : profile.processes) {
    if (auto it = p.fields.find("cpus"); it != p.fields.end()) {
      cores = std::max(cores, std::atol(it->second.c_str()));
    }
  }
  *recorded = cores > 0;
  return cores > 0 ? cores : sysconf(_SC_NPROCESSORS_ONLN);
}

CpuContention MeasureContention(const Profile& profile, const Analysis& a) {
  CpuContention c;
  c.cores = static_cast<int>(std::max(1L, ProfiledCores(profile, &c.cores_recorded)));
  for (const Process& p : profile.processes) {
    auto it = p.fields.find("run_delay");
    c.measured |= it != p.fields.end() && it->second == "schedstat";
  }
  // The time judged: the analysed steps, else the whole profile. One host:
  // the training process's (merged runs' clocks and cores do not compare).
  const bool steps = a.steps.count > 0 && a.steps.end_ns > a.steps.begin_ns;
  const int64_t begin = steps ? a.steps.begin_ns : a.start_ns;
  const int64_t end = steps ? a.steps.end_ns : a.end_ns;
  c.free_cores = c.cores;
  if (end <= begin || profile.processes.empty()) return c;
  const std::string& host =
      profile.processes[a.steps.process < profile.processes.size() ? a.steps.process : 0].host;
  const int64_t bins = std::clamp<int64_t>((end - begin + kBinNs - 1) / kBinNs, 1, kMaxBins);
  const double bin_ns = static_cast<double>(end - begin) / bins;
  std::vector<double> runnable(bins);                  // ns of runnable threads per bin
  std::map<std::pair<uint32_t, uint32_t>, double> per_thread;  // (process, tid) -> runnable ns
  double run_ns = 0, wait_ns = 0, main_ns = 0, loop_wait_ns = 0;
  for (const Sample& s : profile.samples) {
    if (s.kind != SampleKind::kWall || s.wall_ns <= 0 || s.process >= profile.processes.size() ||
        profile.processes[s.process].host != host) {
      continue;
    }
    // A record covers [time - wall, time]: its runnable time is spread evenly.
    const int64_t from = std::max(begin, s.time_ns - s.wall_ns), to = std::min(end, s.time_ns);
    if (to <= from) continue;
    const double share = static_cast<double>(to - from) / s.wall_ns;
    const double busy = static_cast<double>(std::min(s.wall_ns, s.cpu_ns + s.wait_ns));
    const double rate = busy / s.wall_ns;  // runnable threads while it lasts
    run_ns += busy * share;
    wait_ns += s.wait_ns * share;
    per_thread[{s.process, s.tid}] += busy * share;
    if (s.process < a.processes.size() && a.processes[s.process].role == "main") main_ns += busy * share;
    if (steps && s.process == a.steps.process && s.tid == a.steps.tid) loop_wait_ns += s.wait_ns * share;
    for (int64_t b = static_cast<int64_t>((from - begin) / bin_ns); b < bins; ++b) {
      const double lo = begin + b * bin_ns, hi = lo + bin_ns;
      if (lo >= to) break;
      runnable[b] += rate * (std::min<double>(hi, to) - std::max<double>(lo, from));
    }
  }
  const double span = static_cast<double>(end - begin);
  c.span_s = span / 1e9;
  const double limit = c.cores + std::max(kSaturationMargin, 0.1 * c.cores);
  int saturated = 0;
  double in_saturated = 0, all = 0;
  for (double ns : runnable) {
    const double threads = ns / bin_ns;
    all += threads;
    if (threads > limit) {
      ++saturated;
      in_saturated += threads;
    }
  }
  c.saturated_fraction = static_cast<double>(saturated) / bins;
  c.runnable_threads = saturated > 0 ? in_saturated / saturated : all / bins;
  c.mean_runnable_threads = all / bins;
  for (const auto& [thread, ns] : per_thread) c.busy_threads += ns >= 0.5 * span;
  c.wait_fraction = run_ns > 0 ? wait_ns / run_ns : 0;
  double step_s = 0;
  for (double s : a.steps.step_s) step_s += s;
  c.step_cpu_wait_fraction = step_s > 0 ? std::min(1.0, loop_wait_ns / 1e9 / step_s) : 0;
  c.main_cores = main_ns / span;
  // The cores the training process leaves to the workers: what it uses now,
  // scaled to a loop that no longer waits for data (it would then compute
  // all of its step), at least one.
  const double wait = a.steps.count > 0 ? a.steps.data_wait_fraction : 0;
  const double main_full = std::min<double>(c.cores, wait < 0.95 ? c.main_cores / (1 - wait) : c.main_cores);
  c.free_cores = std::max(1, static_cast<int>(std::floor(c.cores - main_full + 0.5)));
  c.saturated = c.saturated_fraction >= kSaturatedShare;
  return c;
}

void ExplainContention(const Analysis& a, Verdict* v) {
  const CpuContention& c = a.contention;
  const std::string cores = Cores(c.cores) + (c.cores_recorded ? "" : " (this machine's)");
  const std::string step =
      a.steps.count > 0 && c.step_cpu_wait_fraction > 0
          ? " The training loop waited for a core " + Pct(c.step_cpu_wait_fraction) +
                " of its step time: its steps took " +
                Fmt("%.2fx as long as with a core of its own.", 1 / (1 - std::min(0.99, c.step_cpu_wait_fraction)))
          : std::string();
  if (c.saturated) {
    v->evidence.push_back(
        "The program's runnable threads exceeded its " + cores + " " + Pct(c.saturated_fraction) +
        " of the time: " + Fmt("%.1f threads", c.runnable_threads) +
        " wanted a core on average then (" + std::to_string(c.busy_threads) +
        " threads were busy, running or waiting for a core, at least half the time), and they "
        "waited for a core " + Pct(c.wait_fraction) + " of their runnable time." + step);
    if (!v->input_bound) {
      v->advice.push_back("The cores are saturated: the " + Cores(c.cores) + " run " +
                          Fmt("%.1f runnable threads", c.runnable_threads) +
                          ". Fewer or cheaper data workers (or stages) would give the training "
                          "step its core back, as would more cores; more workers would make it "
                          "worse.");
    }
  } else if (c.measured && c.wait_fraction >= 0.10) {
    // The whole run's mean, and how long they outnumbered the cores: the
    // saturated stretches' own mean ("3.5 runnable on average") read as a
    // contradiction of "did not outnumber".
    const std::string outnumbered =
        c.saturated_fraction > 0
            ? "outnumbered its " + cores + " only " + Pct(c.saturated_fraction) + " of the time"
            : "did not outnumber its " + cores;
    v->evidence.push_back("The program's threads waited for a core " + Pct(c.wait_fraction) +
                          " of their runnable time, though they " + outnumbered +
                          Fmt(" (%.1f runnable on average): other programs on the machine take "
                              "the cores.",
                              c.mean_runnable_threads) +
                          step);
  }
}

std::string WorkerCpuAdvice(const CpuContention& c, const std::string& stage, int workers,
                            double delivered, double wanted, int loops) {
  const std::string where = c.cores_recorded ? " on the profiled machine" : " here";
  // Several training processes share the free cores for their workers: each
  // loop's own workers get their share (at least one).
  loops = std::max(1, loops);
  const int share = std::max(1, c.free_cores / loops);
  const std::string per = loops > 1 ? " per training process" : "";
  const std::string free_cores =
      std::to_string(c.free_cores) + " free " + (c.free_cores == 1 ? "core" : "cores");
  const std::string free =
      free_cores +
      (loops > 1 ? " shared by the " + std::to_string(loops) +
                       " training processes' workers (the training processes need the rest)"
                 : std::string(" (the training process needs the rest)"));
  auto n_workers = [](int n) { return std::to_string(n) + (n == 1 ? " worker" : " workers"); };
  std::string out = "'" + stage + "' is compute-bound in the workers (" + n_workers(workers) + per +
                    (loops > 1 ? ", " + std::to_string(loops) + " training processes," : "") + " on " +
                    Cores(c.cores) + where + "). ";
  if (loops > c.free_cores) {
    return out + "The " + std::to_string(loops) + " training processes leave their workers " +
           free_cores + ", less than one each: more workers would only wait for " +
           (c.free_cores == 1 ? "it" : "them") + ". Make '" + stage +
           "' cheaper (or drop work from the stages), or run on more cores.";
  }
  if (c.saturated) {
    return out + "The cores are saturated, so more workers would make it worse: use at most " +
           n_workers(share) + per + " for the " + free + ", make '" + stage +
           "' cheaper (or drop work from the stages), or run on more cores.";
  }
  if (delivered <= 0 || wanted <= 0) {
    if (workers >= share) {
      return out + "They fill the " + free + ": make '" + stage + "' cheaper, or run on more cores.";
    }
    return out + "Add workers up to the " + free + ", or make '" + stage + "' cheaper.";
  }
  // Workers scale the rate while free cores last.
  // (Less a hair: 2 x 1/(1 - 0.8) is 10.000000000000002 in doubles.)
  const int needed = static_cast<int>(std::ceil(workers * wanted / delivered - 1e-9));
  out += n_workers(workers) + (workers == 1 ? " delivers" : " deliver") +
         Fmt(" %.1f batches/s, the loop could take %.1f/s: ", delivered, wanted);
  if (needed <= share) {
    return out + "about " + n_workers(needed) + per +
           Fmt(", or a %.1fx faster '", wanted / delivered) + stage + "', would remove the wait.";
  }
  if (workers < share) {
    return out + "about " + n_workers(needed) + per + " would remove the wait, more than the " +
           free + ": use " + n_workers(share) + per + " and make '" + stage + "' " +
           Fmt("%.1fx faster, or run on more cores.", wanted / delivered * workers / share);
  }
  return out + "more workers would only wait for the " + free + ": make '" + stage + "' " +
         Fmt("%.1fx faster, or run on more cores.", wanted / delivered);
}

}  // namespace dlprof
