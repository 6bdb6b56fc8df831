// Rounding kernels of mixed-precision training (low_ops.h): round_to, scale_round(_by), bias_act_round.
// (relu_backward_round_bias_grad lives with the column sums in dense.cu.)
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/low_ops.h"
#include "kernels/cuda/rounding.cuh"

namespace troupe::kernels::cuda {

namespace {

template <class R>
__global__ void round_kernel(const float* src, float* dst, size_t n, float scale, const float* scale_at,
                             uint16_t* low) {
  if (scale_at) scale = *scale_at;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint16_t b = R::bits(src[i] * scale);
    dst[i] = R::value(b);
    if (low) low[i] = b;
  }
}

template <class R>
__global__ void bias_act_round_kernel(float* x, const float* __restrict__ bias, size_t n, int cols, bool relu,
                                      uint16_t* __restrict__ low) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = x[i] + bias[i % cols];
    if (relu) v = v > 0.0f ? v : 0.0f;
    const uint16_t b = R::bits(v);
    x[i] = R::value(b);
    low[i] = b;
  }
}

Status check_type(const char* op, DType type) {
  if (type == DType::bf16 || type == DType::f16) return {};
  return invalid_argument(std::string("cuda::") + op + ": rounds to bf16 or f16, not " + dtype_name(type));
}

// Launches round_kernel for `type` (scale 1 and no scale_at: a plain rounding).
Status launch_round(const char* op, DType type, const float* src, float* dst, size_t n, float scale,
                    const float* scale_at, uint16_t* low, cudaStream_t stream) {
  const unsigned blocks = detail::blocks_for(n);
  if (type == DType::bf16) {
    round_kernel<detail::RoundBf16><<<blocks, detail::kThreads, 0, stream>>>(src, dst, n, scale, scale_at, low);
  } else {
    round_kernel<detail::RoundF16><<<blocks, detail::kThreads, 0, stream>>>(src, dst, n, scale, scale_at, low);
  }
  TROUPE_LAUNCH_CHECK(op);
  return {};
}

}  // namespace

Status round_to(DType type, const float* src, float* dst, size_t n, uint16_t* low, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("round_to", n, {src, dst}));
  if (n == 0) return {};
  if (type == DType::f32) {
    if (low) return invalid_argument("cuda::round_to: f32 has no 16-bit copy to write");
    if (dst != src) TROUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return {};
  }
  TROUPE_RETURN_IF_ERROR(check_type("round_to", type));
  return launch_round("round_kernel", type, src, dst, n, 1.0f, nullptr, low, stream);
}

Status scale_round(DType type, float* x, size_t n, float scale, uint16_t* low, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_type("scale_round", type));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("scale_round", n, {x}));
  if (n == 0) return {};
  return launch_round("round_kernel(scaled)", type, x, x, n, scale, nullptr, low, stream);
}

Status scale_round_by(DType type, float* x, size_t n, const float* scale, uint16_t* low, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_type("scale_round_by", type));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("scale_round_by", n, {x, scale}));
  if (n == 0) return {};
  return launch_round("round_kernel(scaled on the device)", type, x, x, n, 1.0f, scale, low, stream);
}

Status bias_act_round(DType type, float* x, const float* bias, int rows, int cols, bool relu, uint16_t* low,
                      cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_type("bias_act_round", type));
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("bias_act_round", rows, cols));
  const size_t n = size_t(rows) * cols;
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_act_round", n, {x, bias, low}));
  if (n == 0) return {};
  if (type == DType::bf16) {
    bias_act_round_kernel<detail::RoundBf16>
        <<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, bias, n, cols, relu, low);
  } else {
    bias_act_round_kernel<detail::RoundF16>
        <<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, bias, n, cols, relu, low);
  }
  TROUPE_LAUNCH_CHECK("bias_act_round_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
