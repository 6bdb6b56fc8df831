// Optimizer steps over a flat parameter buffer, one kernel each: SGD (momentum, weight decay,
// Nesterov) and Adam/AdamW with the step count read from device memory (CUDA-graph friendly).
#include <cmath>

#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss_scale_ops.h"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

// ------------------------------------------------------------------------------------------------
// CUDA kernels

namespace {

// The learning rate and 1-based step of this launch (see DeviceStep).
__device__ __forceinline__ int64_t step_of(const DeviceStep& at) {
  const int64_t step = (at.steps_done ? *at.steps_done : 0) + at.offset;
  return step < 1 ? 1 : step;
}
__device__ __forceinline__ float lr_of(const DeviceStep& at, int64_t step, float base) {
  return at.lr_table ? at.lr_table[step - 1] : base;
}
// With a loss-scale gate: false when the step is skipped; else *unscale = 1 / the scale the
// gradients carry and *count = the steps applied (this one included).
__device__ __forceinline__ bool gate_open(const DeviceStep& at, float* unscale, int64_t* count) {
  if (!at.gate) return true;
  if (at.gate->outcome != static_cast<int32_t>(LossScaleStep::apply)) return false;
  *unscale = at.gate->used_inverse;
  *count = at.gate->applied;
  return true;
}
// A gradient with the loss scale divided out; not fused into what follows, as the CPU divides it
// out in a pass of its own (kernels::cpu::scale) before the optimizer reads it.
__device__ __forceinline__ float unscaled(const DeviceStep& at, float g, float unscale) {
  return at.gate ? __fmul_rn(g, unscale) : g;
}

__global__ void sgd_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ vel, size_t n,
                           DeviceStep at, float base_lr, float momentum, float wd, bool nesterov) {
  const int64_t step = step_of(at);
  float unscale = 1.0f;
  int64_t applied = step;
  if (!gate_open(at, &unscale, &applied)) return;
  const float lr = lr_of(at, step, base_lr);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float grad = unscaled(at, g[i], unscale) + wd * p[i];
    float update = grad;
    if (vel) {
      float v = momentum * vel[i] + grad;
      vel[i] = v;
      update = nesterov ? grad + momentum * v : v;
    }
    p[i] -= lr * update;
  }
}

__global__ void adam_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, size_t n, DeviceStep at, float base_lr, float beta1, float beta2,
                            float eps, float wd, bool decoupled) {
  const int64_t step = step_of(at);
  float unscale = 1.0f;
  int64_t applied = step;  // the optimizer's own step count: the job's, less the steps a gate skipped
  if (!gate_open(at, &unscale, &applied)) return;
  const float lr = lr_of(at, step, base_lr);
  // The same arithmetic as cpu::adam_step: bias corrections (in double) folded into the step size
  // and epsilon, p = p * decay - step_size * m / (sqrt(v) + eps'), decay = 1 - lr * wd for AdamW.
  const double t = static_cast<double>(applied < 1 ? 1 : applied);
  const float bc1 = static_cast<float>(1.0 - pow(static_cast<double>(beta1), t));
  const float bc2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(beta2), t)));
  const float step_size = lr * bc2_sqrt / bc1;
  const float eps_hat = eps * bc2_sqrt;
  const float l2 = decoupled ? 0.0f : wd;
  const float decay = decoupled ? 1.0f - lr * wd : 1.0f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const float param = p[i];
    const float grad = unscaled(at, g[i], unscale) + l2 * param;
    const float mi = beta1 * m[i] + (1.0f - beta1) * grad;
    const float vi = beta2 * v[i] + (1.0f - beta2) * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] = param * decay - step_size * mi / (sqrtf(vi) + eps_hat);
  }
}

__global__ void add_to_counter_kernel(int64_t* counter, int64_t delta) { *counter += delta; }

}  // namespace

// ------------------------------------------------------------------------------------------------
// launchers

Status sgd_step(float* params, const float* grads, float* velocity, size_t n, const SgdParams& hp,
                const DeviceStep& at, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("sgd_step", n, {params, grads}));
  if (hp.momentum != 0.0f && velocity == nullptr && n > 0) {
    return invalid_argument("cuda::sgd_step: momentum " + std::to_string(hp.momentum) +
                            " needs a velocity buffer, got null");
  }
  if (n == 0) return {};
  // As on the CPU, momentum 0 leaves any velocity buffer untouched.
  if (hp.momentum == 0.0f) velocity = nullptr;
  sgd_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(params, grads, velocity, n, at, hp.lr, hp.momentum,
                                                                      hp.weight_decay, hp.nesterov);
  TROUPE_LAUNCH_CHECK("sgd_kernel");
  return {};
}

Status adam_step(float* params, const float* grads, float* m, float* v, size_t n, const DeviceStep& at,
                 const AdamParams& hp, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("adam_step", n, {params, grads, m, v}));
  if (at.steps_done == nullptr && at.offset < 1) {
    return invalid_argument("cuda::adam_step: step " + std::to_string(at.offset) + " must be >= 1");
  }
  if (n == 0) return {};
  adam_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(params, grads, m, v, n, at,
                                                                      hp.lr, hp.beta1, hp.beta2, hp.eps,
                                                                      hp.weight_decay, hp.decoupled);
  TROUPE_LAUNCH_CHECK("adam_kernel");
  return {};
}

Status add_to_counter(int64_t* counter, int64_t delta, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("add_to_counter", 1, {counter}));
  add_to_counter_kernel<<<1, 1, 0, stream>>>(counter, delta);
  TROUPE_LAUNCH_CHECK("add_to_counter_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
