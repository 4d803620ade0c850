// The pipeline's stages, as a torchdata user would chain them:
//
//   source (shuffled sample order) -> read -> decode -> augment -> batch
//
// Each stage marks itself with DLPROF_STAGE in whatever process and thread
// runs it, and also times itself with the example's own clocks (StageTimes):
// that self-measurement is the ground truth the profiler is compared with.
#ifndef DLPROF_EXAMPLES_PIPELINE_STAGES_H_
#define DLPROF_EXAMPLES_PIPELINE_STAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "examples/pipeline/dataset.h"
#include "examples/pipeline/jpeg_codec.h"

namespace dlprof_example {

enum Stage : int { kRead, kDecode, kAugment, kBatch, kForward, kBackward, kOptimizer, kStageCount };
const char* StageName(int stage);

// Wall and on-CPU seconds spent in each stage, and how often it ran.
struct StageTimes {
  double wall_s[kStageCount] = {};
  double cpu_s[kStageCount] = {};
  int64_t calls[kStageCount] = {};
  void Add(const StageTimes& other);
};

// Adds the wall and thread-CPU time of its scope to times->*[stage].
class StageClock {
 public:
  StageClock(StageTimes* times, Stage stage);
  ~StageClock();
  StageClock(const StageClock&) = delete;
  StageClock& operator=(const StageClock&) = delete;

 private:
  StageTimes* times_;
  Stage stage_;
  double wall0_, cpu0_;
};

// A batch of augmented images, NCHW float, and what producing it cost.
struct Batch {
  int64_t index = -1;   // position in the stream of batches
  int32_t worker = -1;  // producing worker, -1 for the main process
  int32_t n = 0, channels = 3, height = 0, width = 0;
  std::vector<float> pixels;
  std::vector<int32_t> labels;
  StageTimes times;
};

struct PipelineConfig {
  int batch_size = 32;
  int out_px = 64;       // augment output: out_px x out_px
  int decode_scale = 1;  // decode at 1/decode_scale size (1, 2, 4, 8): libjpeg DCT scaling
  double read_mbps = 0;  // emulated storage bandwidth in MB/s; 0 = as fast as the disk
  uint64_t seed = 1;
};

// Source: the order in which samples are visited, a fresh deterministic
// shuffle every epoch. Position p of the stream is sample IndexAt(p).
class SampleOrder {
 public:
  SampleOrder(int dataset_size, uint64_t seed);
  int IndexAt(int64_t position);

 private:
  int size_;
  uint64_t seed_;
  int64_t epoch_ = -1;
  std::vector<int> perm_;
};

// read: the file's bytes, with real open/pread/close. When read_mbps > 0 the
// stage sleeps so that it delivers at most that bandwidth (slow storage: the
// stage is off-CPU, as on a network file system).
std::vector<uint8_t> ReadFile(const std::string& path, double read_mbps);
// decode: DecodeJpeg (jpeg_codec.h).
// augment: random resized crop to out_px x out_px (bilinear), random
// horizontal flip, per-channel normalisation, into CHW floats at `out`.
// Deterministic in `sample_seed`.
void Augment(const Image& image, int out_px, uint64_t sample_seed, float* out);

// The chain for one process: turns batch number k into a Batch. Not
// thread-safe (one Pipeline per producing thread).
class Pipeline {
 public:
  Pipeline(const Dataset& dataset, const PipelineConfig& config);
  Batch MakeBatch(int64_t k);
  const PipelineConfig& config() const { return config_; }

 private:
  const Dataset& dataset_;
  PipelineConfig config_;
  SampleOrder order_;
  std::vector<std::vector<float>> scratch_;
};

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_STAGES_H_
