// The analysis: from a merged Profile to the numbers every writer shows.
// Answers "is the training loop waiting for data, and if so, which stage, in
// which processes, and is it compute or I/O?".
#ifndef DLPROF_REPORTS_ANALYSIS_H_
#define DLPROF_REPORTS_ANALYSIS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "readers/profile.h"
#include "reports/analysis_functions.h"

namespace dlprof {

struct StepStats {
  int count = 0;            // steps analysed (after warm-up and baseline)
  int warmup_dropped = 0;   // the run's first steps, baseline or not
  int baseline_count = 0;   // unprofiled baseline steps after the warm-up
  double median_s = 0, p90_s = 0, p99_s = 0, mean_s = 0;
  double data_wait_median_s = 0, data_wait_p90_s = 0;
  double data_wait_fraction = 0;  // waiting / step time, summed over the steps
  double baseline_median_s = 0;   // unprofiled
  // Median of the first baseline_count profiled steps / baseline median - 1
  // (0 if no baseline).
  double distortion = 0;
  uint32_t process = 0;           // the training loop's process
  int pid = 0;                    // its pid (0: no steps)
  int ranks = 1;                  // it and its sibling loops it was chosen from (DDP ranks)
  std::vector<double> step_s, wait_s;  // per analysed step, in order
  int64_t begin_ns = 0, end_ns = 0;    // the analysed steps' span (0, 0 without steps)
  uint32_t tid = 0;                    // the training loop's thread
};

struct StageStats {
  std::string name;
  int64_t self_samples = 0;   // CPU samples whose innermost stage is this one
  double self_cpu_s = 0;      // CPU time with this stage innermost
  double self_wall_s = 0;     // wall time with this stage innermost (all threads)
  double total_wall_s = 0;    // wall time with this stage anywhere on the stage stack
  double total_cpu_s = 0;
  double offcpu_fraction = 0; // share of self wall time blocked in a syscall
  double cpu_wait_fraction = 0;  // share of self wall time runnable, waiting for a core
  std::string top_blocking_call;  // the syscall it most often blocked in ("read")
  double top_blocking_fraction = 0;  // share of its off-CPU time in that call
  bool data_stage = true;     // false for the training loop's own work (the model)
  std::vector<int> pids;      // processes it ran in
  std::vector<double> self_wall_by_pid;  // parallel to pids
  std::string main_role;      // "main" or "worker": where most of its wall time is (the
                              // processes' roles as the analysis decides them)
  int processes = 0;
};

struct BufferStats {
  std::string name;
  int pid = 0;
  std::string role;
  uint64_t capacity = 0;
  uint64_t snapshots = 0;
  double mean_occupancy = 0;  // mean size / capacity
  double empty_fraction = 0;
  double full_fraction = 0;
};

// Roles, as the report decides them from what each process did (the runtime
// only knows which process came first): "main" runs the training loop (it
// records steps, or waits when no process records steps); "worker" is a data
// worker (it runs data stages, or is a worker the training process forked);
// "other" is neither: a launcher, a shell, multiprocessing's resource tracker
// or forkserver, an image replaced by exec before it did anything.
struct ProcessStats {
  int pid = 0, ppid = 0;
  std::string role;           // main / worker / other, decided (see above)
  std::string recorded_role;  // what the runtime wrote (Process::role)
  std::string role_basis;     // why: "records the training loop's steps", ...
  int worker = -1;
  std::string host, command, file;
  int64_t samples = 0;
  uint64_t dropped = 0;
  double cpu_s = 0;       // from wall ticks where recorded, else samples
  double wall_s = 0;      // process lifetime covered by the profile
  double busy_fraction = 0;  // cpu_s / wall_s
  bool complete = false;
  std::string end_reason;
  double handler_s = 0;   // time spent in dlprof's signal handler
  double collector_s = 0;  // CPU time of dlprof's collector (its thread, or its process)
  int hz = 0;
  std::string unwinder, timer;
  // Where the collector ran: "thread", "process", or "thread: <why the
  // process was refused>" (the PROCESS field `collector`); and the Python
  // frames' state ("on", "off: ...", "on, names unreadable ..."; "" for a
  // process that is not CPython).
  std::string collector, python_frames;
};

// The data workers feeding the training loop. A DataLoader without
// persistent_workers forks num_workers new processes every epoch: those are
// num_workers workers, not one per process.
// Under several training processes (DDP ranks, each with its own
// DataLoader) every one has its own workers, numbered from 0.
struct WorkerCount {
  int concurrent = 0;  // workers at a time: distinct worker ids, or the most alive at once
  int processes = 0;   // worker processes over the whole run
  int feeding_loop = 0;  // of those at a time, the ones feeding the analysed training loop
  int training_processes = 0;
  std::vector<int> trainer_of;  // by process: the training process it works for, -1 if none
};

// CPU contention (reports/analysis_contention.cc): whether the program's
// runnable threads (running or waiting for a core, from the wall records'
// cpu_ns + wait_ns) exceeded the cores it may run on, per host.
struct CpuContention {
  bool measured = false;          // some process recorded its run delay (run_delay: schedstat)
  int cores = 0;                  // the most cores a process of the program could use
  bool cores_recorded = false;    // from the profile (cpus), not this machine
  double span_s = 0;              // the time judged: the analysed steps, else the profile
  double saturated_fraction = 0;  // share of span_s with runnable threads > cores (+ margin)
  double runnable_threads = 0;    // mean runnable threads over the saturated time (else all)
  double mean_runnable_threads = 0;  // mean runnable threads over the whole span
  int busy_threads = 0;           // threads runnable at least half of span_s
  double wait_fraction = 0;       // the program's waits for a core / its runnable time
  double step_cpu_wait_fraction = 0;  // the loop thread's waits for a core / step time
  double main_cores = 0;          // cores the training process used (running + waiting), mean
  int free_cores = 0;             // cores the training process leaves to workers (at least 1)
  bool saturated = false;         // saturated_fraction >= kSaturatedShare
};

struct Verdict {
  bool input_bound = false;
  // The program's runnable threads exceeded its cores for a significant
  // share of the run (CpuContention): compute starved of cores, where more
  // workers make it worse.
  bool cpu_saturated = false;
  double data_wait_fraction = 0;
  std::string severity = "none";  // high / moderate / none
  std::string bottleneck_stage;   // "" when not input-bound or unknown
  std::string bottleneck_kind;    // cpu / io
  std::string bottleneck_role;    // main / worker
  std::string basis;              // what the verdict rests on (steps, buffers)
  std::vector<std::string> advice;
  std::vector<std::string> evidence;  // the sentences that justify it
  // Workers: the slowest worker's self time in the bottleneck stage divided by
  // the other workers' mean (1 = even); 0 when not measured.
  double worker_imbalance = 0;
  int slowest_worker = -1;
  // Inside the bottleneck stage, the functions with the most inclusive time
  // (reports/analysis_functions.h); empty when there is no bottleneck stage.
  std::vector<CulpritFunction> bottleneck_functions;
  // The training loop's own runnable time (CPU, and the waits for a core
  // that go with it) inside its waits, outside data stages, over the waits'
  // time; at kLoopReceiveShare or more the loop's receive work is the
  // bottleneck (no stage is named).
  double loop_receive_fraction = 0;
};

struct ProfilerCost {
  uint64_t samples = 0, dropped = 0;
  double handler_s = 0;
  double handler_fraction = 0;  // handler time / profiled CPU time
  // The collectors' CPU time (draining, wall ticks, blocked walks,
  // writing), and over the profiled CPU time, which does not include it.
  double collector_s = 0;
  double collector_fraction = 0;
  bool collector_measured = false;  // some process recorded it
  // Processes whose collector was a process of its own (DLPROF_COLLECTOR=
  // process), not a thread in them.
  int collector_processes = 0;
  double distortion = 0;        // from the baseline steps, when measured
  bool distortion_measured = false;
};

struct Analysis {
  Verdict verdict;
  StepStats steps;
  std::vector<StageStats> stages;  // by self wall time, largest first
  std::vector<BufferStats> buffers;
  std::vector<ProcessStats> processes;  // indexed like Profile::processes
  WorkerCount workers;
  CpuContention contention;
  ProfilerCost cost;
  int64_t start_ns = 0, end_ns = 0;  // the span the profile covers
  std::vector<std::string> warnings;
};

// Severity cut-offs on the share of step time the loop waits for data
// (TensorFlow Profiler's input-pipeline analyzer uses the same).
constexpr double kHighWaitFraction = 0.20;
constexpr double kModerateWaitFraction = 0.05;

// The share of its waits the training loop must spend on its own CPU for its
// receive work, not the workers, to be the bottleneck.
constexpr double kLoopReceiveShare = 0.5;

// CPU saturation: a moment is saturated when the program's runnable threads
// exceed its cores by more than kSaturationMargin threads (or 10% of the
// cores, whichever is more), and the run when that holds for at least
// kSaturatedShare of the time judged.
constexpr double kSaturationMargin = 0.5;
constexpr double kSaturatedShare = 0.25;

Analysis Analyze(const Profile& profile);

// The role the report gives profile.processes[i]: the analysis's decision
// (Analysis::processes[i].role), or the recorded one for an index it lacks.
// Every writer labels processes with this, so that pprof's `role` label, the
// trace and the page agree with summary.json.
// Whose loop the steps are, when several processes record steps: "pid N
// (of R ranks stepping together, ...)"; "" with one training process.
std::string AnalysedLoop(const Analysis& a);

const std::string& ProcessRole(const Profile& profile, const Analysis& analysis, size_t i);

// The run ids (DLPROF_RUN_ID, the `run_id` field of each .dlprof file) of
// the profile's processes, each once, in the order of the processes. The
// processes of one run share it, on every host and rank that inherited the
// same DLPROF_RUN_ID; profiles of other formats have none.
std::vector<std::string> RunIds(const Profile& profile);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_H_
