// f16's loss scaling on the device (loss_scale_ops.h): the finiteness check over the gradients and
// one step of core/loss_scale.h's rule in a one-thread kernel.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss_scale_ops.h"

namespace troupe::kernels::cuda {

namespace {

__global__ void start_kernel(DeviceLossScale* d, LossScaleOptions o, int64_t applied) {
  DeviceLossScale s;
  s.state = loss_scale_start(o);
  s.applied = applied;
  *d = s;
}

__global__ void clear_if_not_finite_kernel(const float* __restrict__ g, size_t n, int32_t* finite) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if (!isfinite(g[i])) *finite = 0;  // benign race: every writer writes 0
  }
}

__global__ void decide_kernel(DeviceLossScale* d, LossScaleOptions o, DeviceStep at) {
  const bool finite = d->finite != 0;
  d->finite = 1;  // ready for the next check
  d->used_inverse = 1.0f / d->state.scale;  // as the CPU's 1.0f / used_scale
  if (d->failed_step != 0) {  // the rule gave up earlier: nothing more is applied
    d->outcome = static_cast<int32_t>(LossScaleStep::give_up);
    return;
  }
  const LossScaleStep step = loss_scale_step(o, finite, &d->state);
  d->outcome = static_cast<int32_t>(step);
  if (step == LossScaleStep::apply) {
    ++d->applied;
  } else if (step == LossScaleStep::give_up) {
    d->failed_step = (at.steps_done ? *at.steps_done : 0) + at.offset;
    d->failed_in_a_row = d->state.bad_in_a_row;
    d->failed_scale = d->state.scale;
  }
}

}  // namespace

Status loss_scale_start(DeviceLossScale* d, const LossScaleOptions& o, int64_t applied, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("loss_scale_start", 1, {d}));
  if (applied < 0) return invalid_argument("cuda::loss_scale_start: " + std::to_string(applied) + " applied steps");
  start_kernel<<<1, 1, 0, stream>>>(d, o, applied);
  TROUPE_LAUNCH_CHECK("loss_scale start_kernel");
  return {};
}

Status loss_scale_check(const float* grads, size_t n, DeviceLossScale* d, const LossScaleOptions& o,
                        const DeviceStep& at, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("loss_scale_check", 1, {d}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("loss_scale_check", n, {grads}));
  if (n > 0) {
    clear_if_not_finite_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(grads, n, &d->finite);
    TROUPE_LAUNCH_CHECK("loss_scale clear_if_not_finite_kernel");
  }
  decide_kernel<<<1, 1, 0, stream>>>(d, o, at);
  TROUPE_LAUNCH_CHECK("loss_scale decide_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
