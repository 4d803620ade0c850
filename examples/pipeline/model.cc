#include "examples/pipeline/model.h"

#include <algorithm>
#include <cmath>
#include <dlprof/dlprof.hpp>
#include <stdexcept>

namespace dlprof_example {
namespace {

// c[m x n] += a[m x k] * b[k x n], row-major; the inner loop is contiguous.
void MatMulAdd(const float* __restrict a, const float* __restrict b, float* __restrict c, int m,
               int k, int n) {
  for (int i = 0; i < m; ++i) {
    float* ci = c + static_cast<size_t>(i) * n;
    for (int p = 0; p < k; ++p) {
      const float av = a[static_cast<size_t>(i) * k + p];
      const float* bp = b + static_cast<size_t>(p) * n;
      for (int j = 0; j < n; ++j) ci[j] += av * bp[j];
    }
  }
}

// c[k x n] += a[m x k]^T * b[m x n].
void MatMulTransAAdd(const float* __restrict a, const float* __restrict b, float* __restrict c,
                     int m, int k, int n) {
  for (int i = 0; i < m; ++i) {
    const float* bi = b + static_cast<size_t>(i) * n;
    for (int p = 0; p < k; ++p) {
      const float av = a[static_cast<size_t>(i) * k + p];
      float* cp = c + static_cast<size_t>(p) * n;
      for (int j = 0; j < n; ++j) cp[j] += av * bi[j];
    }
  }
}

}  // namespace

Model::Model(const ModelConfig& config) : config_(config) {
  if (config.width < 1 || config.layers < 1 || config.pool < 1) {
    throw std::runtime_error("invalid model size");
  }
  uint64_t state = config.seed * 0x9e3779b97f4a7c15ull + 1;
  auto uniform = [&state] {  // xorshift64*, in [-1, 1)
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return static_cast<float>((state * 0x2545f4914f6cdd1dull) >> 40) / (1 << 23) - 1.0f;
  };
  int in = 3 * config.pool * config.pool;
  for (int l = 0; l <= config.layers; ++l) {
    Layer layer;
    layer.in = in;
    layer.out = l == config.layers ? config.classes : config.width;
    const float scale = std::sqrt(6.0f / static_cast<float>(layer.in + layer.out));
    layer.w.resize(static_cast<size_t>(layer.in) * layer.out);
    for (float& w : layer.w) w = scale * uniform();
    layer.b.assign(static_cast<size_t>(layer.out), 0.0f);
    layer.w_t.resize(layer.w.size());
    layer.dw.resize(layer.w.size());
    layer.vw.assign(layer.w.size(), 0.0f);
    layer.db.resize(layer.b.size());
    layer.vb.assign(layer.b.size(), 0.0f);
    in = layer.out;
    layers_.push_back(std::move(layer));
  }
  acts_.resize(layers_.size() + 1);
}

void Model::Forward(const Batch& batch) {
  rows_ = batch.n;
  // Adaptive average pooling of each channel to pool x pool.
  const int pool = config_.pool, h = batch.height, w = batch.width;
  std::vector<float>& x = acts_[0];
  x.assign(static_cast<size_t>(rows_) * 3 * pool * pool, 0.0f);
  std::vector<int> column_bin(static_cast<size_t>(w));
  for (int xx = 0; xx < w; ++xx) column_bin[static_cast<size_t>(xx)] = xx * pool / w;
  for (int i = 0; i < rows_; ++i) {
    for (int c = 0; c < 3; ++c) {
      const float* plane = batch.pixels.data() + (static_cast<size_t>(i) * 3 + c) * h * w;
      float* out = x.data() + (static_cast<size_t>(i) * 3 + c) * pool * pool;
      for (int y = 0; y < h; ++y) {
        float* row_out = out + (y * pool / h) * pool;
        const float* row = plane + static_cast<size_t>(y) * w;
        for (int xx = 0; xx < w; ++xx) row_out[column_bin[static_cast<size_t>(xx)]] += row[xx];
      }
      const float norm = static_cast<float>(pool * pool) / (static_cast<float>(h) * w);
      for (int p = 0; p < pool * pool; ++p) out[p] *= norm;
    }
  }
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    std::vector<float>& y = acts_[l + 1];
    y.resize(static_cast<size_t>(rows_) * layer.out);
    for (int i = 0; i < rows_; ++i) {
      std::copy(layer.b.begin(), layer.b.end(), y.begin() + static_cast<size_t>(i) * layer.out);
    }
    MatMulAdd(acts_[l].data(), layer.w.data(), y.data(), rows_, layer.in, layer.out);
    if (l + 1 < layers_.size()) {
      for (float& v : y) v = std::max(v, 0.0f);  // ReLU
    }
  }
}

float Model::Loss(const Batch& batch) {
  // Softmax cross-entropy; leaves d(loss)/d(logits) in grad_.
  const int classes = config_.classes;
  const std::vector<float>& logits = acts_.back();
  grad_.resize(logits.size());
  double loss = 0;
  for (int i = 0; i < rows_; ++i) {
    const float* z = logits.data() + static_cast<size_t>(i) * classes;
    float* g = grad_.data() + static_cast<size_t>(i) * classes;
    const float zmax = *std::max_element(z, z + classes);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - zmax);
    const int label = std::clamp(batch.labels[static_cast<size_t>(i)], 0, classes - 1);
    loss += std::log(sum) - (z[label] - zmax);
    for (int c = 0; c < classes; ++c) {
      g[c] = static_cast<float>(std::exp(z[c] - zmax) / sum) / rows_;
    }
    g[label] -= 1.0f / rows_;
  }
  return static_cast<float>(loss / rows_);
}

void Model::Backward() {
  for (size_t l = layers_.size(); l-- > 0;) {
    Layer& layer = layers_[l];
    std::fill(layer.dw.begin(), layer.dw.end(), 0.0f);
    std::fill(layer.db.begin(), layer.db.end(), 0.0f);
    MatMulTransAAdd(acts_[l].data(), grad_.data(), layer.dw.data(), rows_, layer.in, layer.out);
    for (int i = 0; i < rows_; ++i) {
      for (int j = 0; j < layer.out; ++j)
        layer.db[j] += grad_[static_cast<size_t>(i) * layer.out + j];
    }
    if (l == 0) break;
    // grad_prev = grad * w^T, through the ReLU of the layer below.
    for (int p = 0; p < layer.in; ++p) {
      for (int j = 0; j < layer.out; ++j) {
        layer.w_t[static_cast<size_t>(j) * layer.in + p] =
            layer.w[static_cast<size_t>(p) * layer.out + j];
      }
    }
    grad_prev_.assign(static_cast<size_t>(rows_) * layer.in, 0.0f);
    MatMulAdd(grad_.data(), layer.w_t.data(), grad_prev_.data(), rows_, layer.out, layer.in);
    const std::vector<float>& below = acts_[l];
    for (size_t i = 0; i < grad_prev_.size(); ++i) {
      if (below[i] <= 0.0f) grad_prev_[i] = 0.0f;
    }
    grad_.swap(grad_prev_);
  }
}

void Model::Optimize() {
  const float lr = config_.learning_rate, mu = config_.momentum;
  for (Layer& layer : layers_) {
    for (size_t i = 0; i < layer.w.size(); ++i) {
      layer.vw[i] = mu * layer.vw[i] + layer.dw[i];
      layer.w[i] -= lr * layer.vw[i];
    }
    for (size_t i = 0; i < layer.b.size(); ++i) {
      layer.vb[i] = mu * layer.vb[i] + layer.db[i];
      layer.b[i] -= lr * layer.vb[i];
    }
  }
}

float Model::TrainStep(const Batch& batch, StageTimes* times) {
  float loss;
  {
    DLPROF_STAGE("forward");
    StageClock clock(times, kForward);
    Forward(batch);
    loss = Loss(batch);
  }
  {
    DLPROF_STAGE("backward");
    StageClock clock(times, kBackward);
    Backward();
  }
  {
    DLPROF_STAGE("optimizer");
    StageClock clock(times, kOptimizer);
    Optimize();
  }
  return loss;
}

}  // namespace dlprof_example
