// `dlprof diff BEFORE AFTER`: two runs, each loaded and analysed on its own
// exactly as `dlprof report` does, then compared number by number: the
// verdict, the data-wait share and step time, each stage, each buffer and
// the workers. The writers (reports/diff_writers.cc) show the same RunDiff as
// text, JSON and an HTML page.
#ifndef DLPROF_REPORTS_RUN_DIFF_H_
#define DLPROF_REPORTS_RUN_DIFF_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "readers/file_bytes.h"
#include "reports/analysis.h"

namespace dlprof {

// diff.json's layout (docs/SUMMARY_JSON.md, "diff.json").
constexpr int kDiffSchemaVersion = 1;

// One number in both runs. A side that does not have it (a stage only one
// run has, step times of a run without steps, the shares of a buffer never
// snapshotted) has has_* false and shows as "-".
struct Change {
  bool has_before = false, has_after = false;
  double before = 0, after = 0;

  bool both() const { return has_before && has_after; }
  double delta() const { return both() ? after - before : 0; }
  // (after - before) / before; false unless both sides are there and
  // before is not 0.
  bool Relative(double* r) const;
};

Change Changed(double before, double after);  // both sides there

// A stage, matched by name (the analysis has one StageStats per name, its
// role the processes where most of its wall time is: a stage that moves
// from the training process into workers, num_workers 0 -> 2, keeps its row
// and shows both roles).
struct StageDiff {
  std::string name;
  std::string role_before, role_after;  // "" where the stage is absent
  bool in_before = false, in_after = false;
  bool data_stage = true;               // the model's own work when false (either run)
  Change self_wall_s, self_cpu_s, total_wall_s;
  // Shares of self wall time: running, blocked, runnable waiting for a core.
  // Absent without wall time (CPU samples only).
  Change on_cpu_fraction, offcpu_fraction, cpu_wait_fraction;
};

// A buffer, matched by name. BufferStats are per process (each worker has
// its own queue of one name): their snapshots are pooled per name.
struct BufferDiff {
  std::string name;
  std::string role_before, role_after;  // of the processes holding it ("main", "worker")
  bool in_before = false, in_after = false;
  Change processes;                     // processes holding a buffer of this name
  Change capacity;                      // the largest
  Change mean_occupancy, empty_fraction, full_fraction;  // over all snapshots
};

// What one side of a diff is.
struct DiffSide {
  std::string input;                 // the path the user gave
  std::vector<std::string> run_ids;  // RunIds() of its profile
  Verdict verdict;
  double duration_s = 0;
};

struct RunDiff {
  DiffSide before, after;
  Change data_wait_fraction;  // the verdict's (from steps, else buffers)
  Change step_median_s, step_mean_s, data_wait_median_s, steps;
  Change duration_s;
  Change workers_concurrent, worker_processes;
  Change worker_busy_fraction;  // CPU time / wall time, all worker processes together
  std::vector<StageDiff> stages;    // largest self time (either run) first
  std::vector<BufferDiff> buffers;  // by name
  std::vector<std::string> warnings;  // each side's, prefixed "before: " / "after: "
};

// Compares two analyses. Inputs and run ids are the caller's to fill in.
RunDiff DiffRuns(const Analysis& before, const Analysis& after);

// The writers (reports/diff_writers.cc). Names from the profiles are
// cleaned for a terminal in the text, kept (invalid UTF-8 replaced) in the
// JSON, and set with textContent by the page's script.
std::string DiffText(const RunDiff& d);         // the table `dlprof diff` prints, diff.txt
nlohmann::json DiffJson(const RunDiff& d);      // diff.json
std::string DiffHtml(const RunDiff& d);         // diff.html: self-contained, no network
// Writes diff.txt, diff.json and diff.html into `dir` (which must exist);
// throws std::runtime_error naming a file it cannot write.
void WriteDiff(const RunDiff& d, const std::string& dir);

// `dlprof diff`: AnalyzeInput on each, DiffRuns, the sides' inputs and run
// ids filled in, and a warning when both are the same run. An input that
// cannot be read throws std::runtime_error, "before: <why>" (one line).
RunDiff DiffInputs(const std::string& before, const std::string& after, const FileLimits& limits);

// Loads `input` (a run folder, DLPROF_OUT meaning its newest run, or a
// profile file), symbolizes and analyses it as `dlprof report` does. Throws
// std::runtime_error (one line) when nothing can be read.
Analysis AnalyzeInput(const std::string& input, const FileLimits& limits,
                      std::vector<std::string>* run_ids);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_RUN_DIFF_H_
