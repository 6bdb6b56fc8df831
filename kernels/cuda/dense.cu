// Dense-layer helpers: bias + activation, ReLU backward, bias gradient (and the last two fused).
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/low_ops.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/rounding.cuh"

namespace troupe::kernels::cuda {

// ------------------------------------------------------------------------------------------------
// CUDA kernels

namespace {

__global__ void bias_act_kernel(float* x, const float* __restrict__ bias, size_t n, int cols, bool relu) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float v = x[i] + bias[i % cols];
    x[i] = relu ? (v > 0.0f ? v : 0.0f) : v;
  }
}

__global__ void relu_backward_kernel(float* dy, const float* __restrict__ y, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if (!(y[i] > 0.0f)) dy[i] = 0.0f;
  }
}

// Column sums. Block: 32 columns x kRowLanes row lanes; each thread sums every kRowLanes-th row of
// its column (coalesced: a warp reads 32 consecutive floats of one row), then the lanes are summed
// in shared memory in a fixed order, so results are deterministic. With `mask`, dy is first zeroed
// where y <= 0 (and written back), which is relu_backward fused in. With an active rounder R, each
// value is then rounded (written back, its bits to `low` when given) and the rounded value summed.
constexpr int kRowLanes = 32;

template <bool kMask, class R = detail::NoRound>
__global__ void column_sum_kernel(float* dy, const float* __restrict__ y, int rows, int cols, float* db,
                                  uint16_t* low = nullptr) {
  __shared__ float partial[kRowLanes][33];
  const int c = blockIdx.x * 32 + threadIdx.x;
  float sum = 0.0f;
  if (c < cols) {
    for (int r = threadIdx.y; r < rows; r += kRowLanes) {
      size_t i = size_t(r) * cols + c;
      float g = dy[i];
      if (kMask && !(y[i] > 0.0f)) {
        g = 0.0f;
        if (!R::kActive) dy[i] = 0.0f;
      }
      if (R::kActive) {
        const uint16_t b = R::bits(g);
        g = R::value(b);
        dy[i] = g;
        if (low) low[i] = b;
      }
      sum += g;
    }
  }
  partial[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    float total = 0.0f;
    for (int l = 0; l < kRowLanes; ++l) total += partial[l][threadIdx.x];
    db[c] = total;
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// launchers

Status bias_act(float* x, const float* bias, int rows, int cols, bool relu, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("bias_act", rows, cols));
  size_t n = size_t(rows) * cols;
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_act", n, {x, bias}));
  if (n == 0) return {};
  bias_act_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(x, bias, n, cols, relu);
  TROUPE_LAUNCH_CHECK("bias_act_kernel");
  return {};
}

Status relu_backward(float* dy, const float* y, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("relu_backward", n, {dy, y}));
  if (n == 0) return {};
  relu_backward_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(dy, y, n);
  TROUPE_LAUNCH_CHECK("relu_backward_kernel");
  return {};
}

Status bias_grad(const float* dy, int rows, int cols, float* db, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("bias_grad", rows, cols));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_grad", size_t(cols), {db}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_grad", size_t(rows) * cols, {dy}));
  if (cols == 0) return {};
  dim3 block(32, kRowLanes);
  column_sum_kernel<false><<<(cols + 31) / 32, block, 0, stream>>>(const_cast<float*>(dy), nullptr, rows, cols, db);
  TROUPE_LAUNCH_CHECK("column_sum_kernel<false>");
  return {};
}

Status relu_backward_bias_grad(float* dy, const float* y, int rows, int cols, float* db, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("relu_backward_bias_grad", rows, cols));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("relu_backward_bias_grad", size_t(cols), {db}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("relu_backward_bias_grad", size_t(rows) * cols, {dy, y}));
  if (cols == 0) return {};
  dim3 block(32, kRowLanes);
  column_sum_kernel<true><<<(cols + 31) / 32, block, 0, stream>>>(dy, y, rows, cols, db);
  TROUPE_LAUNCH_CHECK("column_sum_kernel<true>");
  return {};
}

Status relu_backward_round_bias_grad(DType type, float* dy, const float* y, int rows, int cols, uint16_t* low,
                                     float* db, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_matrix("relu_backward_round_bias_grad", rows, cols));
  if (type != DType::bf16 && type != DType::f16)
    return invalid_argument("cuda::relu_backward_round_bias_grad: rounds to bf16 or f16, not f32");
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("relu_backward_round_bias_grad", size_t(cols), {db}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("relu_backward_round_bias_grad", size_t(rows) * cols, {dy, y, low}));
  if (cols == 0) return {};
  dim3 block(32, kRowLanes);
  if (type == DType::bf16) {
    column_sum_kernel<true, detail::RoundBf16><<<(cols + 31) / 32, block, 0, stream>>>(dy, y, rows, cols, db, low);
  } else {
    column_sum_kernel<true, detail::RoundF16><<<(cols + 31) / 32, block, 0, stream>>>(dy, y, rows, cols, db, low);
  }
  TROUPE_LAUNCH_CHECK("column_sum_kernel<rounded>");
  return {};
}

}  // namespace troupe::kernels::cuda
