// What every torch trainer does with its module once it is set up: a training step (forward, the
// loss, autograd's backward into the gradient views), an evaluation and a prediction, over the
// batch's input shaped [B, ...input_shape]. The torchscript model (torchscript_trainer.cc) and a
// user's C++ module (module_trainer.h) derive from it and say how the module runs.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/torch/batch_randomness.h"
#include "models/torch/module_loss.h"
#include "models/torch/param_binding.h"
#include "trainers/api/trainer.h"

namespace troupe::torch_model {

class ModuleSteps : public Trainer {
 public:
  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override;
  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override;
  int64_t prediction_width() const override { return loss_.classes > 0 ? loss_.classes : loss_.width; }
  Status predict(const Batch& batch, const Parameters& params, float* out) override;

 protected:
  virtual at::Tensor run(const at::Tensor& x) = 0;  // the module's forward
  virtual void set_training(bool on) = 0;           // train() or eval()
  virtual std::string what() const = 0;             // names the module in errors

  // For setup(): libtorch's threads (`--trainer-arg threads=N`, default the worker's cpus, else 1; one
  // inter-op thread).
  Status set_threads(const TrainerContext& ctx);
  // For setup(): one example's input shape (`--trainer-arg input_shape=C,H,W`, default the data's)
  // and the loss (`own`: the module's loss(output, target), or null for cross-entropy / mse).
  Status set_shapes(const TrainerContext& ctx, LossSpec::Own own);

  ParamBinding params_;
  LossSpec loss_;
  BatchRandomness rng_;  // set_seed(ctx.seed) in setup(): a training forward's draws follow the batch
  std::vector<int64_t> input_shape_;

 private:
  at::Tensor forward(const Batch& batch);
  int64_t example_size() const;  // the values of one example's input
  Status score(const Batch& batch, const at::Tensor& out, at::Tensor* loss, BatchStats* s);
};

}  // namespace troupe::torch_model
