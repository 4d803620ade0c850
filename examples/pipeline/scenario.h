// Scenarios: named sets of defaults that each put the bottleneck in one known
// place. Explicit command-line flags override them.
#ifndef DLPROF_EXAMPLES_PIPELINE_SCENARIO_H_
#define DLPROF_EXAMPLES_PIPELINE_SCENARIO_H_

#include <cstdint>
#include <string>
#include <vector>

namespace dlprof_example {

struct Options {
  std::string scenario;
  int workers = 2;
  int prefetch = 4;
  int worker_prefetch = 2;
  int batch_size = 32;
  int64_t steps = 60;
  int image_size = 64;      // augment output, pixels per side
  int decode_scale = 4;     // libjpeg DCT scaling denominator: 1, 2, 4 or 8
  double storage_mbps = 0;  // emulated storage bandwidth per reader, 0 = unthrottled
  int slow_worker = -1;
  double slow_worker_mbps = 0;
  int model_width = 256;
  int model_layers = 3;
  int warmup_steps = 3;  // left out of steady_wait_fraction
  // CPU the training loop spends receiving each batch inside its wait, as a
  // loop that unpickles batches or copies them out of shared memory does.
  double receive_ms = 0;
  // Not scenario-dependent.
  std::string data_dir;
  int images = 2048;
  int image_px = 224;
  uint64_t seed = 1;
  int crash_worker = -1;
  double worker_timeout_s = 60;
  bool generate_only = false;
  bool step_log = false;
};

struct Scenario {
  const char* name;
  const char* summary;   // one line: what it shows
  const char* expected;  // what the profile's verdict should say
  void (*apply)(Options*);
};

const std::vector<Scenario>& Scenarios();
// nullptr if unknown.
const Scenario* FindScenario(const std::string& name);

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_SCENARIO_H_
