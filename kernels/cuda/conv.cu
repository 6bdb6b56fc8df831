// Kernels of the convolutional blocks (conv_ops.h): fused bias + ReLU + max pooling, its backward,
// and per-channel sums for the convolution's bias gradient.
#include "kernels/cuda/conv_ops.h"
#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {

namespace {

// One thread per pooled output. Windows are visited in row-major order and only a strictly larger
// value replaces the best, so the first maximum wins, as on the CPU.
__global__ void bias_relu_max_pool_kernel(const float* __restrict__ conv, const float* __restrict__ bias,
                                          int channels, int height, int width, int window, size_t outputs,
                                          float* __restrict__ pooled, int32_t* __restrict__ argmax) {
  const int oh_count = height / window, ow_count = width / window;
  const size_t per_plane = size_t(oh_count) * ow_count;
  for (size_t o = blockIdx.x * size_t(blockDim.x) + threadIdx.x; o < outputs; o += size_t(gridDim.x) * blockDim.x) {
    const size_t plane = o / per_plane;
    const int r = static_cast<int>(o % per_plane);
    const int oh = r / ow_count, ow = r % ow_count;
    const float b = bias[plane % channels];
    const float* in = conv + plane * size_t(height) * width;
    float best = 0.0f;
    int32_t best_at = -1;
    for (int i = 0; i < window; ++i) {
      for (int j = 0; j < window; ++j) {
        const int at = (oh * window + i) * width + (ow * window + j);
        float v = in[at] + b;
        v = v < 0.0f ? 0.0f : v;  // as cpu::conv2d_forward: a NaN stays NaN (and shows in the loss)
        if (best_at < 0 || v > best) {
          best = v;
          best_at = at;
        }
      }
    }
    pooled[o] = best;
    argmax[o] = best_at;
  }
}

// One thread per input element: each lies in at most one window (they do not overlap).
__global__ void max_pool_relu_backward_kernel(const float* __restrict__ dpooled, const float* __restrict__ pooled,
                                              const int32_t* __restrict__ argmax, int height, int width, int window,
                                              size_t inputs, float* __restrict__ dconv) {
  const int oh_count = height / window, ow_count = width / window;
  const size_t plane_size = size_t(height) * width;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < inputs; i += size_t(gridDim.x) * blockDim.x) {
    const size_t plane = i / plane_size;
    const int at = static_cast<int>(i % plane_size);
    const int oh = (at / width) / window, ow = (at % width) / window;
    float g = 0.0f;
    if (oh < oh_count && ow < ow_count) {
      const size_t o = plane * oh_count * ow_count + size_t(oh) * ow_count + ow;
      if (argmax[o] == at && pooled[o] > 0.0f) g = dpooled[o];
    }
    dconv[i] = g;
  }
}

// One block per channel; thread t sums elements t, t + blockDim, ... of the channel's batch x pixels
// values, then the block sums the threads' partials in a fixed tree order: deterministic.
constexpr int kSumThreads = 256;

__global__ void channel_sums_kernel(const float* __restrict__ dy, int batch, int channels, int pixels,
                                    float* __restrict__ db) {
  __shared__ float partial[kSumThreads];
  const int c = blockIdx.x;
  const size_t count = size_t(batch) * pixels;
  float sum = 0.0f;
  for (size_t j = threadIdx.x; j < count; j += kSumThreads) {
    const size_t n = j / pixels, p = j % pixels;
    sum += dy[(n * channels + c) * pixels + p];
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = kSumThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) db[c] = partial[0];
}

Status check_pool(const char* op, const PoolShape& s) {
  if (s.planes < 0 || s.height < 0 || s.width < 0 || s.window < 1) {
    return invalid_argument(std::string("cuda::") + op + ": bad pooling shape (" + std::to_string(s.planes) +
                            " planes of " + std::to_string(s.height) + "x" + std::to_string(s.width) + ", window " +
                            std::to_string(s.window) + ")");
  }
  return {};
}

}  // namespace

Status bias_relu_max_pool(const float* conv, const float* bias, int channels, const PoolShape& s, float* pooled,
                          int32_t* argmax, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_pool("bias_relu_max_pool", s));
  const size_t outputs = size_t(s.planes) * s.out_height() * s.out_width();
  if (outputs == 0) return {};
  if (channels < 1 || s.planes % channels != 0) {
    return invalid_argument("cuda::bias_relu_max_pool: " + std::to_string(s.planes) + " planes are not images of " +
                            std::to_string(channels) + " channels");
  }
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bias_relu_max_pool", outputs, {conv, bias, pooled, argmax}));
  bias_relu_max_pool_kernel<<<detail::blocks_for(outputs), detail::kThreads, 0, stream>>>(
      conv, bias, channels, s.height, s.width, s.window, outputs, pooled, argmax);
  TROUPE_LAUNCH_CHECK("bias_relu_max_pool_kernel");
  return {};
}

Status max_pool_relu_backward(const float* dpooled, const float* pooled, const int32_t* argmax, const PoolShape& s,
                              float* dconv, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(check_pool("max_pool_relu_backward", s));
  const size_t inputs = size_t(s.planes) * s.height * s.width;
  if (inputs == 0) return {};
  const size_t outputs = size_t(s.planes) * s.out_height() * s.out_width();
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("max_pool_relu_backward", inputs, {dconv}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("max_pool_relu_backward", outputs, {dpooled, pooled, argmax}));
  max_pool_relu_backward_kernel<<<detail::blocks_for(inputs), detail::kThreads, 0, stream>>>(
      dpooled, pooled, argmax, s.height, s.width, s.window, inputs, dconv);
  TROUPE_LAUNCH_CHECK("max_pool_relu_backward_kernel");
  return {};
}

Status channel_sums(const float* dy, int batch, int channels, int pixels, float* db, cudaStream_t stream) {
  if (batch < 0 || channels < 0 || pixels < 0) {
    return invalid_argument("cuda::channel_sums: negative shape (" + std::to_string(batch) + " images, " +
                            std::to_string(channels) + " channels, " + std::to_string(pixels) + " pixels)");
  }
  if (channels == 0) return {};
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("channel_sums", size_t(channels), {db}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("channel_sums", size_t(batch) * channels * pixels, {dy}));
  channel_sums_kernel<<<channels, kSumThreads, 0, stream>>>(dy, batch, channels, pixels, db);
  TROUPE_LAUNCH_CHECK("channel_sums_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
