// The "model": a small multi-layer perceptron on pooled image features,
// trained with SGD. Real floating-point work whose cost is set by width and
// layers (about 6 * batch * width^2 * layers flops a step); its phases are
// the stages "forward", "backward" and "optimizer".
#ifndef DLPROF_EXAMPLES_PIPELINE_MODEL_H_
#define DLPROF_EXAMPLES_PIPELINE_MODEL_H_

#include <cstdint>
#include <vector>

#include "examples/pipeline/stages.h"

namespace dlprof_example {

struct ModelConfig {
  int width = 256;  // hidden units per layer
  int layers = 3;   // hidden layers
  int classes = 10;
  int pool = 8;  // images are average-pooled to pool x pool per channel
  float learning_rate = 0.01f;
  float momentum = 0.9f;
  uint64_t seed = 1;
};

class Model {
 public:
  explicit Model(const ModelConfig& config);
  // forward, backward, optimizer; adds their cost to *times. Returns the
  // batch's mean cross-entropy loss (before the update).
  float TrainStep(const Batch& batch, StageTimes* times);

 private:
  struct Layer {
    int in = 0, out = 0;
    std::vector<float> w, b, w_t;       // w: in x out; w_t: its transpose
    std::vector<float> dw, db, vw, vb;  // gradients, momentum
  };
  void Forward(const Batch& batch);
  float Loss(const Batch& batch);
  void Backward();
  void Optimize();

  ModelConfig config_;
  std::vector<Layer> layers_;
  int rows_ = 0;
  std::vector<std::vector<float>> acts_;  // acts_[0]: input; acts_[i+1]: output of layer i
  std::vector<float> grad_, grad_prev_;
};

}  // namespace dlprof_example

#endif  // DLPROF_EXAMPLES_PIPELINE_MODEL_H_
