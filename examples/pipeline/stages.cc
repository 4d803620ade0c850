#include "examples/pipeline/stages.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <dlprof/dlprof.hpp>
#include <numeric>
#include <stdexcept>
#include <thread>

#include "examples/pipeline/io_util.h"
#include "examples/pipeline/jpeg_codec.h"
#include "examples/pipeline/random.h"

namespace dlprof_example {

const char* StageName(int stage) {
  static const char* const kNames[kStageCount] = {"read",    "decode",   "augment",  "batch",
                                                  "forward", "backward", "optimizer"};
  return stage >= 0 && stage < kStageCount ? kNames[stage] : "?";
}

void StageTimes::Add(const StageTimes& other) {
  for (int s = 0; s < kStageCount; ++s) {
    wall_s[s] += other.wall_s[s];
    cpu_s[s] += other.cpu_s[s];
    calls[s] += other.calls[s];
  }
}

// The thread-CPU clock is a real system call, and reading it can end the
// thread's time slice (the scheduler updates its accounting then): read it
// inside the wall-clock interval, so that a preemption there counts in the
// stage's wall time instead of vanishing between stages.
StageClock::StageClock(StageTimes* times, Stage stage)
    : times_(times), stage_(stage), wall0_(WallSeconds()), cpu0_(ThreadCpuSeconds()) {}

StageClock::~StageClock() {
  const double cpu = ThreadCpuSeconds();
  times_->wall_s[stage_] += WallSeconds() - wall0_;
  times_->cpu_s[stage_] += cpu - cpu0_;
  times_->calls[stage_] += 1;
}

SampleOrder::SampleOrder(int dataset_size, uint64_t seed) : size_(dataset_size), seed_(seed) {}

int SampleOrder::IndexAt(int64_t position) {
  const int64_t epoch = position / size_;
  if (epoch != epoch_) {
    perm_.resize(static_cast<size_t>(size_));
    std::iota(perm_.begin(), perm_.end(), 0);
    Rng rng(Mix(seed_ ^ Mix(static_cast<uint64_t>(epoch) + 0x5eed)));
    for (int i = size_ - 1; i > 0; --i) {  // Fisher-Yates
      std::swap(perm_[i], perm_[static_cast<int>(rng.Uniform() * (i + 1))]);
    }
    epoch_ = epoch;
  }
  return perm_[static_cast<size_t>(position % size_)];
}

std::vector<uint8_t> ReadFile(const std::string& path, double read_mbps) {
  const double t0 = WallSeconds();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    throw std::runtime_error("cannot stat " + path + ": " + std::strerror(errno));
  }
  std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
  constexpr size_t kChunk = 16 * 1024;
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = pread(fd, data.data() + done, std::min(kChunk, data.size() - done),
                      static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      close(fd);
      throw std::runtime_error("cannot read " + path + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
    if (read_mbps > 0) {
      // Slow storage: this chunk is due bytes/bandwidth after the start.
      const double due = t0 + done / (read_mbps * 1e6);
      const double wait = due - WallSeconds();
      if (wait > 0) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
    }
  }
  close(fd);
  return data;
}

void Augment(const Image& image, int out_px, uint64_t sample_seed, float* out) {
  Rng rng(sample_seed);
  // RandomResizedCrop(scale=(0.35, 1), ratio=(3/4, 4/3)), as in torchvision.
  const double area = static_cast<double>(image.width) * image.height * rng.Uniform(0.35, 1.0);
  const double ratio = std::exp(rng.Uniform(std::log(3.0 / 4), std::log(4.0 / 3)));
  const int cw = std::clamp(static_cast<int>(std::lround(std::sqrt(area * ratio))), 1, image.width);
  const int ch =
      std::clamp(static_cast<int>(std::lround(std::sqrt(area / ratio))), 1, image.height);
  const int x0 = static_cast<int>(rng.Uniform() * (image.width - cw + 1));
  const int y0 = static_cast<int>(rng.Uniform() * (image.height - ch + 1));
  const bool flip = rng.Uniform() < 0.5;
  static const float kMean[3] = {0.485f, 0.456f, 0.406f};
  static const float kStd[3] = {0.229f, 0.224f, 0.225f};
  const size_t plane = static_cast<size_t>(out_px) * out_px;
  const float sx = static_cast<float>(cw) / out_px, sy = static_cast<float>(ch) / out_px;
  const int stride = image.width * 3;
  for (int oy = 0; oy < out_px; ++oy) {
    const float fy = std::clamp(y0 + (oy + 0.5f) * sy - 0.5f, 0.0f, image.height - 1.0f);
    const int iy = std::min(static_cast<int>(fy), image.height - 2 < 0 ? 0 : image.height - 2);
    const int iy1 = std::min(iy + 1, image.height - 1);
    const float wy = fy - iy;
    for (int ox = 0; ox < out_px; ++ox) {
      const float fx = std::clamp(x0 + (ox + 0.5f) * sx - 0.5f, 0.0f, image.width - 1.0f);
      const int ix = std::min(static_cast<int>(fx), image.width - 2 < 0 ? 0 : image.width - 2);
      const int ix1 = std::min(ix + 1, image.width - 1);
      const float wx = fx - ix;
      const uint8_t* p00 = image.rgb.data() + static_cast<size_t>(iy) * stride + ix * 3;
      const uint8_t* p01 = image.rgb.data() + static_cast<size_t>(iy) * stride + ix1 * 3;
      const uint8_t* p10 = image.rgb.data() + static_cast<size_t>(iy1) * stride + ix * 3;
      const uint8_t* p11 = image.rgb.data() + static_cast<size_t>(iy1) * stride + ix1 * 3;
      const int dx = flip ? out_px - 1 - ox : ox;
      for (int c = 0; c < 3; ++c) {
        const float top = p00[c] + wx * (p01[c] - p00[c]);
        const float bottom = p10[c] + wx * (p11[c] - p10[c]);
        const float v = (top + wy * (bottom - top)) * (1.0f / 255);
        out[c * plane + static_cast<size_t>(oy) * out_px + dx] = (v - kMean[c]) / kStd[c];
      }
    }
  }
}

Pipeline::Pipeline(const Dataset& dataset, const PipelineConfig& config)
    : dataset_(dataset),
      config_(config),
      order_(static_cast<int>(dataset.files.size()), config.seed) {}

Batch Pipeline::MakeBatch(int64_t k) {
  const int n = config_.batch_size, px = config_.out_px;
  const size_t sample_floats = static_cast<size_t>(3) * px * px;
  Batch batch;
  batch.index = k;
  // Per-sample tensors are reused from batch to batch.
  std::vector<std::vector<float>>& samples = scratch_;
  samples.resize(static_cast<size_t>(n));
  std::vector<int32_t> labels(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    const int64_t position = k * n + j;
    const int index = order_.IndexAt(position);
    std::vector<uint8_t> bytes;
    {
      DLPROF_STAGE("read");
      StageClock clock(&batch.times, kRead);
      bytes = ReadFile(dataset_.files[static_cast<size_t>(index)], config_.read_mbps);
    }
    Image image;
    {
      DLPROF_STAGE("decode");
      StageClock clock(&batch.times, kDecode);
      try {
        image = DecodeJpeg(bytes, config_.decode_scale);
      } catch (const std::exception& e) {
        throw std::runtime_error(dataset_.files[static_cast<size_t>(index)] + ": " + e.what());
      }
    }
    {
      DLPROF_STAGE("augment");
      StageClock clock(&batch.times, kAugment);
      samples[static_cast<size_t>(j)].resize(sample_floats);
      Augment(image, px, Mix(config_.seed * 31 + static_cast<uint64_t>(position)),
              samples[static_cast<size_t>(j)].data());
    }
    labels[static_cast<size_t>(j)] = dataset_.labels[static_cast<size_t>(index)];
  }
  {
    // batch: collate the samples into one NCHW tensor.
    DLPROF_STAGE("batch");
    StageClock clock(&batch.times, kBatch);
    batch.n = n;
    batch.height = batch.width = px;
    batch.pixels.resize(sample_floats * static_cast<size_t>(n));
    for (int j = 0; j < n; ++j) {
      std::memcpy(batch.pixels.data() + sample_floats * static_cast<size_t>(j),
                  samples[static_cast<size_t>(j)].data(), sample_floats * sizeof(float));
    }
    batch.labels = std::move(labels);
  }
  return batch;
}

}  // namespace dlprof_example
