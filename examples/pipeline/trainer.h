// The training loop: each step waits for the next batch (dlprof::WaitScope)
// and trains on it, all inside a dlprof::StepScope, and times both itself:
// the per-step wait and step durations are the program's ground truth for
// "is training input-bound?".
#ifndef DLPROF_EXAMPLES_PIPELINE_TRAINER_H_
#define DLPROF_EXAMPLES_PIPELINE_TRAINER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "examples/pipeline/model.h"
#include "examples/pipeline/reading_service.h"

namespace dlprof_example {

struct TrainResult {
  std::vector<double> step_s;  // whole step, wait included
  std::vector<double> wait_s;  // blocked on the reading service
  float first_loss = 0, last_loss = 0;
  double wall_s = 0;
  StageTimes times;  // forward, backward, optimizer in this thread
  bool ok = true;
  std::string error;
  uint64_t receive_checksum = 0;  // of the emulated receive work
};

// `receive_ms`: CPU spent receiving each batch inside the wait (Options).
TrainResult Train(ReadingService& service, Model& model, int64_t steps, double receive_ms = 0);

// Share of step time spent waiting for data, over steps [first, end).
double WaitFraction(const TrainResult& r, size_t first = 0);
double Median(std::vector<double> v);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_TRAINER_H_
