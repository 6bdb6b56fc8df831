// What the GPU training loop (cuda_job.h) needs of a model: device buffers reserved once, then a
// training step's forward + backward and an evaluation pass enqueued on the model's stream over
// the flat parameter and gradient buffers. Implementations (MlpCuda, CnnCuda) never allocate or
// synchronise after reserve(), so a whole step can be captured in a CUDA graph.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace troupe {

class CudaModel {
 public:
  virtual ~CudaModel() = default;

  // Allocates what batches of up to `rows` rows need. Enqueue calls with more rows are
  // invalid_argument.
  virtual Status reserve(int rows) = 0;

  // Enqueues forward and backward of `batch` rows of x [batch x features] with labels; grads (the
  // parameters' layout) are overwritten with dLoss/dparams. The batch's mean loss is added to
  // *loss_acc and its correctly classified rows to *correct_acc (device scalars; either may be null).
  virtual Status forward_backward(const float* params, const float* x, const int32_t* labels, int batch,
                                  float* grads, float* loss_acc, unsigned long long* correct_acc) = 0;
  // Enqueues the forward pass only, adding the correct rows to *correct_acc (and mean loss to *loss_acc).
  virtual Status evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                          unsigned long long* correct_acc) = 0;

  // f16's dynamic loss scaling (kernels/cuda/loss_scale_ops.h): later training steps multiply the
  // loss gradient by *scale, a device float read when each step runs. Models that cannot take a
  // scale say so (the default).
  virtual Status set_loss_scale(const float* scale) {
    (void)scale;
    return invalid_argument("this GPU model does not take a loss scale (f16 training)");
  }
};

}  // namespace troupe
