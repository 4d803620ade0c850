// CPU contention, part of the analysis (reports/analysis.cc calls these):
// whether the program's runnable threads exceeded its cores, and what the
// verdict says about it. A thread waiting for a core is neither on-CPU nor
// I/O-bound: it is compute starved of cores, and more workers make it worse.
#ifndef DLPROF_REPORTS_ANALYSIS_CONTENTION_H_
#define DLPROF_REPORTS_ANALYSIS_CONTENTION_H_

#include <string>

#include "readers/profile.h"
#include "reports/analysis.h"

namespace dlprof {

// From the wall records (running = cpu_ns, waiting for a core = wait_ns),
// over the analysed steps' span (else the whole profile), with the roles and
// steps `a` already holds. Spreads each record's runnable time evenly over
// the span it covers, in bins, and compares each bin's runnable threads
// with the cores the program could use (the processes' `cpus`).
CpuContention MeasureContention(const Profile& profile, const Analysis& a);

// The cores the profiled program could use: the most any of its processes
// recorded ("cpus"), else this machine's (*recorded false).
long ProfiledCores(const Profile& profile, bool* recorded);

// Evidence (and, with nothing else to advise, advice) about saturation or
// waits for a core, for any verdict: the cores, the runnable threads, and
// how much the training step waited for a core.
void ExplainContention(const Analysis& a, Verdict* v);

// The advice for a compute-bound stage in the workers: never more workers
// than the cores the training process leaves free. `workers` at a time
// feeding the analysed loop; `delivered`/`wanted` its batches per second (0
// when steps do not say); `loops` training processes (DDP ranks, each with
// its own workers) share the free cores.
std::string WorkerCpuAdvice(const CpuContention& c, const std::string& stage, int workers,
                            double delivered, double wanted, int loops = 1);

}  // namespace dlprof

#endif  // DLPROF_REPORTS_ANALYSIS_CONTENTION_H_
