// Optimizers over one flat parameter buffer, owning their state (velocity, Adam moments) in buffers
// of the same layout. The runtime, not the model, owns and steps them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace troupe {

struct OptimizerOptions {
  std::string name = "sgd";   // sgd, adam, adamw
  float lr = 0.05f;
  float momentum = 0.9f;      // sgd
  float weight_decay = 0.0f;  // sgd and adam: L2 on the gradient; adamw: decoupled
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;  // adam, adamw
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update to params[0, n) from grads[0, n).
  virtual void step(float* params, const float* grads) = 0;
  virtual std::string describe() const = 0;  // "sgd(lr=0.05, momentum=0.9)"
  // Changes the learning rate from the next step on (schedules call this every step).
  virtual void set_lr(float lr) = 0;
  int64_t steps() const { return steps_; }

 protected:
  int64_t steps_ = 0;
};

// Builds an optimizer for `n` parameters. Unknown names or out-of-range values are invalid_argument.
Expected<std::unique_ptr<Optimizer>> make_optimizer(const OptimizerOptions& options, size_t n);

}  // namespace troupe
