// f16's dynamic loss scaling on the device (`--precision f16` on a GPU), so a captured CUDA graph
// decides every step without the host: core/loss_scale.h's rule (the CPU trainer's) runs in a
// one-thread kernel over the gradients' finiteness. Per step:
//
//   model backward with the loss gradient times state.scale   (MlpCuda::set_loss_scale)
//   loss_scale_check(grads)   -> outcome, used_inverse = 1 / the scale used, state updated
//   sgd_step / adam_step with DeviceStep::gate = the DeviceLossScale   (skips or unscales)
//
// The host reads the struct back with each chunk's results: failed_step names the step where the
// rule gave up (the CPU stops there with loss_scale_gave_up's error), state.skipped and
// state.scale go into the result. Same launcher rules as ops.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/loss_scale.h"
#include "core/status.h"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

// Lives in device memory (one per job); the host only reads it back.
struct DeviceLossScale {
  LossScaleState state;        // state.scale: what the next backward multiplies the loss gradient by
  float used_inverse = 1.0f;   // 1 / the scale the last checked gradients carry
  int32_t finite = 1;          // scratch of loss_scale_check (1 between checks)
  int32_t outcome = 0;         // the last check's LossScaleStep
  int64_t applied = 0;         // steps applied: the optimizer's step count (Adam's bias correction)
  int64_t failed_step = 0;     // the first job step where the rule gave up (0: none); later steps skip
  int64_t failed_in_a_row = 0; //   and how many overflowed in a row by then
  float failed_scale = 0.0f;   //   at which scale
};

// *d = the rule's start for `o`, with `applied` steps already applied (a resumed optimizer's count).
Status loss_scale_start(DeviceLossScale* d, const LossScaleOptions& o, int64_t applied, cudaStream_t stream = nullptr);
// Checks the n gradients (all finite?) and takes one step of the rule; `at` is the step's place as
// the optimizer's (its job step names a failure). Once the rule gave up every later step skips.
Status loss_scale_check(const float* grads, size_t n, DeviceLossScale* d, const LossScaleOptions& o,
                        const DeviceStep& at, cudaStream_t stream = nullptr);
// The address of d->state.scale (what MlpCuda::set_loss_scale takes).
inline const float* loss_scale_of(const DeviceLossScale* d) { return &d->state.scale; }

}  // namespace troupe::kernels::cuda
