// summary.txt: the report for a terminal: verdict first, then the tables.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "reports/report_writer.h"
#include "reports/terminal_text.h"

namespace dlprof {
namespace {

class SummaryTextWriter : public ReportWriter {
 public:
  std::string file_name() const override { return "summary.txt"; }
  std::string Render(const Profile&, const Analysis& a) const override {
    const Verdict& v = a.verdict;
    std::string out = "dlprof summary\n==============\n\n";
    if (v.input_bound) {
      out += Line("VERDICT: input-bound (%s): the training loop waits for data %.1f%% of step time.",
                  v.severity.c_str(), 100 * v.data_wait_fraction);
      if (!v.bottleneck_stage.empty()) {
        out += Line("Bottleneck: stage '%s', %s-bound, in the %s process%s.",
                    Clean(v.bottleneck_stage).c_str(), v.bottleneck_kind == "io" ? "I/O" : "CPU",
                    Clean(v.bottleneck_role, 12).c_str(), v.bottleneck_role == "worker" ? "es" : "");
      } else if (v.loop_receive_fraction >= kLoopReceiveShare) {
        out += Line("Bottleneck: the training loop's own receive work, CPU-bound, in the main "
                    "process (%.0f%% of its waits on its own CPU).",
                    100 * v.loop_receive_fraction);
      } else if (v.bottleneck_role == "worker") {
        out += Line("Bottleneck: the workers' own work (no stage marked), CPU-bound, in the worker "
                    "processes%s.",
                    v.bottleneck_functions.empty()
                        ? ""
                        : (": " + Clean(v.bottleneck_functions[0].name, 80) + " first").c_str());
      }
    } else if (v.basis == "none") {
      out += "VERDICT: unknown (no step markers and no buffers).\n";
    } else {
      out += Line("VERDICT: not input-bound: the training loop waits for data %.1f%% of step time.",
                  100 * v.data_wait_fraction);
    }
    if (v.cpu_saturated) {
      out += Line("CPU saturated: %.1f runnable threads for %d cores %.0f%% of the time "
                  "(compute starved of cores: more workers make it worse).",
                  a.contention.runnable_threads, a.contention.cores,
                  100 * a.contention.saturated_fraction);
    }
    out += "\nEvidence:\n";
    for (const std::string& e : v.evidence) out += "  - " + Clean(e, 400) + "\n";
    out += "Advice:\n";
    for (const std::string& e : v.advice) out += "  - " + Clean(e, 400) + "\n";

    const StepStats& s = a.steps;
    out += "\nSteps\n-----\n";
    if (s.count == 0) {
      out += "  (no steps marked)\n";
    } else {
      out += Line("  %d steps (%d warm-up dropped): median %.2f ms, p90 %.2f ms, p99 %.2f ms",
                  s.count, s.warmup_dropped, s.median_s * 1e3, s.p90_s * 1e3, s.p99_s * 1e3);
      const std::string whose = AnalysedLoop(a);
      if (!whose.empty()) out += Line("  of %s", whose.c_str());
      out += Line("  waiting for data: %.1f%% of step time, median %.2f ms per step",
                  100 * s.data_wait_fraction, s.data_wait_median_s * 1e3);
    }

    out += "\nStages (self = innermost stage; wall time summed over threads and processes)\n";
    out += "------\n";
    out += Line("  %-24s %9s %10s %10s %8s %8s %10s  %-7s %s", "stage", "samples", "self cpu",
                "self wall", "off-cpu", "cpu-wait", "total wall", "role", "blocked in");
    for (const StageStats& st : a.stages) {
      out += Line("  %s %9lld %9.3fs %9.3fs %7.0f%% %7.0f%% %9.3fs  %s %s%s", Cell(st.name, 24).c_str(),
                  static_cast<long long>(st.self_samples), st.self_cpu_s, st.self_wall_s,
                  100 * st.offcpu_fraction, 100 * st.cpu_wait_fraction, st.total_wall_s,
                  Cell(st.main_role, 7).c_str(),
                  Clean(st.top_blocking_call, 20).c_str(), st.data_stage ? "" : " (model)");
    }

    out += "\nBuffers\n-------\n";
    if (a.buffers.empty()) out += "  (none)\n";
    for (const BufferStats& b : a.buffers) {
      if (b.snapshots == 0) {  // not "never empty": nothing was measured
        out += Line("  %s pid %-7d cap %-5llu no snapshots", Cell(b.name, 24).c_str(), b.pid,
                    static_cast<unsigned long long>(b.capacity));
        continue;
      }
      out += Line("  %s pid %-7d cap %-5llu mean %5.1f%%  empty %5.1f%%  full %5.1f%%",
                  Cell(b.name, 24).c_str(), b.pid, static_cast<unsigned long long>(b.capacity),
                  100 * b.mean_occupancy, 100 * b.empty_fraction, 100 * b.full_fraction);
    }

    out += "\nProcesses\n---------\n";
    int mains = 0, others = 0;
    for (const ProcessStats& p : a.processes) {
      mains += p.role == "main";
      others += p.role != "main" && p.role != "worker";
    }
    // Workers at a time (what the advice counts), then every process with
    // its role and what decided it.
    const WorkerCount& w = a.workers;
    const std::string feeding =
        mains > 1 ? std::to_string(w.feeding_loop) + " feeding the analysed loop; " : std::string();
    out += Line("  %d training process%s, %d worker%s at a time (%s%d worker process%s over the "
                "run), %d other",
                mains, mains == 1 ? "" : "es", w.concurrent, w.concurrent == 1 ? "" : "s",
                feeding.c_str(), w.processes, w.processes == 1 ? "" : "es", others);
    for (const ProcessStats& p : a.processes) {
      out += Line("  pid %-7d %s worker %-3d samples %-7lld dropped %-5llu cpu %7.3fs wall %7.3fs"
                  "  %s  %s",
                  p.pid, Cell(p.role, 6).c_str(), p.worker, static_cast<long long>(p.samples),
                  static_cast<unsigned long long>(p.dropped), p.cpu_s, p.wall_s,
                  Cell(p.end_reason, 20).c_str(), Clean(p.role_basis, 80).c_str());
    }

    out += "\nProfiler\n--------\n";
    out += Line("  %llu samples, %llu dropped; signal handler %.3f s (%.2f%% of profiled CPU time)",
                static_cast<unsigned long long>(a.cost.samples),
                static_cast<unsigned long long>(a.cost.dropped), a.cost.handler_s,
                100 * a.cost.handler_fraction);
    if (a.cost.collector_measured) {
      // Threads in the processes, or processes of their own beside them
      // (DLPROF_COLLECTOR=process), whose CPU is not the program's.
      const int processes = a.cost.collector_processes;
      const int threads = static_cast<int>(a.processes.size()) - processes;
      std::string where = processes == 0 ? "thread" : threads <= 0 ? "process" : "";
      if (where.empty()) {
        where = std::to_string(processes) + " process" + (processes == 1 ? "" : "es") + ", " +
                std::to_string(threads) + " thread" + (threads == 1 ? "" : "s");
      }
      out += Line("  collector (%s) %.3f s (%.2f%% of profiled CPU time)", where.c_str(),
                  a.cost.collector_s, 100 * a.cost.collector_fraction);
    }
    if (a.cost.distortion_measured) {
      out += Line("  step time profiled / unprofiled baseline - 1 = %+.1f%%", 100 * a.cost.distortion);
    }
    if (!a.warnings.empty()) {
      out += "\nWarnings\n--------\n";
      for (const std::string& w : a.warnings) out += "  " + Clean(w, 400) + "\n";
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeSummaryTextWriter() {
  return std::make_unique<SummaryTextWriter>();
}

}  // namespace dlprof
