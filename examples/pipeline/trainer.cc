#include "examples/pipeline/trainer.h"

#include <algorithm>
#include <dlprof/dlprof.hpp>

#include "examples/pipeline/io_util.h"

namespace dlprof_example {

namespace {

// Receiving a batch: `ms` of this thread's CPU over the batch's bytes, as
// unpacking it would take (the sum keeps the work from being optimised out).
uint64_t Receive(const Batch& batch, double ms) {
  uint64_t sum = 0;
  const double until = ThreadCpuSeconds() + ms / 1000;
  size_t at = 0;
  while (ThreadCpuSeconds() < until) {
    for (int i = 0; i < 4096 && !batch.pixels.empty(); ++i, at = (at + 1) % batch.pixels.size()) {
      sum = sum * 31 + static_cast<uint64_t>(batch.pixels[at] * 255);
    }
    if (batch.pixels.empty()) sum += 1;
  }
  return sum;
}

}  // namespace

TrainResult Train(ReadingService& service, Model& model, int64_t steps, double receive_ms) {
  TrainResult r;
  const double start = WallSeconds();
  for (int64_t s = 0; s < steps; ++s) {
    const double t0 = WallSeconds();
    double waited;
    bool got;
    Batch batch;
    {
      dlprof::StepScope step;
      {
        dlprof::WaitScope wait;
        got = service.Next(&batch);
        if (got && receive_ms > 0) r.receive_checksum += Receive(batch, receive_ms);
        waited = WallSeconds() - t0;
      }
      if (got) {
        const float loss = model.TrainStep(batch, &r.times);
        if (s == 0) r.first_loss = loss;
        r.last_loss = loss;
      }
    }
    if (!got) {
      r.ok = false;
      r.error = service.error();
      if (r.error.empty())
        r.error = "the reading service ended after " + std::to_string(s) + " batches";
      break;
    }
    r.step_s.push_back(WallSeconds() - t0);
    r.wait_s.push_back(waited);
  }
  r.wall_s = WallSeconds() - start;
  return r;
}

double WaitFraction(const TrainResult& r, size_t first) {
  double wait = 0, step = 0;
  for (size_t i = first; i < r.step_s.size(); ++i) {
    wait += r.wait_s[i];
    step += r.step_s[i];
  }
  return step > 0 ? wait / step : 0;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(mid), v.end());
  double m = v[mid];
  if (v.size() % 2 == 0)
    m = (m + *std::max_element(v.begin(), v.begin() + static_cast<long>(mid))) / 2;
  return m;
}

}  // namespace dlprof_example
