#include "examples/pipeline/scenario.h"

namespace dlprof_example {

// Sized for a 2-core machine: each runs for 2-4 s, and the training loop's
// own measurement of its data wait puts the bottleneck beyond doubt.
const std::vector<Scenario>& Scenarios() {
  static const std::vector<Scenario> kScenarios = {
      {"io-bound",
       "slow storage: every reader is throttled to a few MB/s, so the read stage sleeps",
       "input-bound (high); bottleneck stage read, kind io (off-CPU), role worker",
       [](Options* o) {
         o->workers = 2;
         o->storage_mbps = 6.0;
         o->decode_scale = 4;
         o->model_width = 256;
         o->model_layers = 2;
         o->steps = 55;
       }},
      {"decode-bound",
       "full-resolution JPEG decoding in the workers is slower than the model consumes",
       "input-bound (high); bottleneck stage decode, kind cpu, role worker",
       [](Options* o) {
         o->workers = 2;
         o->batch_size = 64;
         o->decode_scale = 1;
         o->model_width = 96;
         o->model_layers = 2;
         o->steps = 180;
       }},
      {"model-bound", "a heavy training step; cheap reduced-size decoding keeps the buffers full",
       "not input-bound (severity none); time is in forward/backward/optimizer on the main process",
       [](Options* o) {
         o->workers = 2;
         o->prefetch = 6;
         o->worker_prefetch = 3;
         o->decode_scale = 8;
         o->model_width = 512;
         o->model_layers = 4;
         o->steps = 50;
       }},
      {"imbalanced",
       "worker 0 reads from much slower storage than the others; batches are consumed in order",
       "input-bound (high); bottleneck stage read, kind io, role worker, concentrated in worker 0; "
       "the other workers' buffers sit full",
       [](Options* o) {
         o->workers = 3;
         o->decode_scale = 4;
         o->slow_worker = 0;
         o->slow_worker_mbps = 4.0;
         o->model_width = 256;
         o->model_layers = 2;
         o->steps = 54;
       }},
      {"receive-bound",
       "the training loop unpacks each batch for 10 ms inside its wait while cheap workers idle",
       "input-bound (high); the training loop's own receive work, kind cpu, role main, no stage",
       [](Options* o) {
         o->workers = 2;
         o->batch_size = 8;
         o->decode_scale = 8;
         o->image_size = 32;
         o->model_width = 64;
         o->model_layers = 1;
         o->receive_ms = 10;
         o->steps = 200;
       }},
      {"in-process",
       "no workers: the pipeline runs inline in the training loop (like num_workers=0)",
       "input-bound (high); bottleneck stage decode, kind cpu, role main",
       [](Options* o) {
         o->workers = 0;
         o->prefetch = 0;
         o->batch_size = 64;
         o->decode_scale = 1;
         o->model_width = 256;
         o->model_layers = 2;
         o->steps = 70;
       }},
  };
  return kScenarios;
}

const Scenario* FindScenario(const std::string& name) {
  for (const Scenario& s : Scenarios()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

}  // namespace dlprof_example
