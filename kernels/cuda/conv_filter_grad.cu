// conv_filter_grad (conv_filter_grad.h): two staging kernels and one strict-f32 product.
#include "kernels/cuda/conv_filter_grad.h"

#include <cstdint>
#include <string>

#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {

namespace {

struct Geometry {
  int channels, height, width, kernel, pad, stride, out_width;
  size_t pixels, columns;  // per image; batch * pixels
};

// col[r][q], r = (c, i, j) a filter tap, q = (image, output pixel): the input under that tap, 0 in
// the padding. Consecutive threads write consecutive q (coalesced).
__global__ void im2col_batch_kernel(const float* __restrict__ x, Geometry g, size_t total, float* __restrict__ col) {
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < total; idx += size_t(gridDim.x) * blockDim.x) {
    const size_t r = idx / g.columns, q = idx % g.columns;
    const size_t n = q / g.pixels, p = q % g.pixels;
    const int taps = g.kernel * g.kernel;
    const int c = int(r / taps), i = int(r % taps) / g.kernel, j = int(r % taps) % g.kernel;
    const int oh = int(p / g.out_width), ow = int(p % g.out_width);
    const int ih = oh * g.stride - g.pad + i, iw = ow * g.stride - g.pad + j;
    float v = 0.0f;
    if (ih >= 0 && ih < g.height && iw >= 0 && iw < g.width)
      v = x[((n * g.channels + c) * g.height + ih) * g.width + iw];
    col[idx] = v;
  }
}

// dyt[o][n * pixels + p] = dy[(n * out_channels + o) * pixels + p].
__global__ void swap_batch_channels_kernel(const float* __restrict__ dy, int out_channels, size_t pixels,
                                           size_t columns, size_t total, float* __restrict__ dyt) {
  for (size_t idx = blockIdx.x * size_t(blockDim.x) + threadIdx.x; idx < total; idx += size_t(gridDim.x) * blockDim.x) {
    const size_t o = idx / columns, q = idx % columns;
    const size_t n = q / pixels, p = q % pixels;
    dyt[idx] = dy[(n * out_channels + o) * pixels + p];
  }
}

size_t col_floats(const cpu::Conv2dShape& s) { return size_t(s.patch()) * s.batch * s.pixels(); }
size_t dyt_floats(const cpu::Conv2dShape& s) { return size_t(s.out_channels) * s.batch * s.pixels(); }

}  // namespace

size_t conv_filter_grad_workspace_bytes(const cpu::Conv2dShape& s) {
  if (!s.valid()) return 0;
  return (col_floats(s) + dyt_floats(s)) * sizeof(float);
}

Status conv_filter_grad(const CublasHandle& blas, const cpu::Conv2dShape& s, const float* x, const float* dy,
                        float* dw, void* workspace, size_t workspace_size) {
  if (!s.valid()) return invalid_argument("cuda::conv_filter_grad: the convolution's shape is not valid");
  const size_t need = conv_filter_grad_workspace_bytes(s);
  if (workspace_size < need) {
    return invalid_argument("cuda::conv_filter_grad: " + std::to_string(workspace_size) +
                            " bytes of workspace, the shape needs " + std::to_string(need));
  }
  const size_t columns = size_t(s.batch) * s.pixels();
  if (columns > size_t(INT32_MAX)) {
    return invalid_argument("cuda::conv_filter_grad: " + std::to_string(columns) +
                            " output pixels in the batch exceed cuBLAS's int sizes; use a smaller batch");
  }
  const size_t weights = size_t(s.out_channels) * s.patch();
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("conv_filter_grad", weights, {dw}));
  if (columns == 0) return matmul(blas, false, true, s.out_channels, s.patch(), 0, 1.0f, nullptr, nullptr, 0.0f, dw);
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("conv_filter_grad", columns, {x, dy, workspace}));
  float* col = static_cast<float*>(workspace);
  float* dyt = col + col_floats(s);
  cudaStream_t stream = blas.stream();
  const Geometry g{s.in_channels, s.height, s.width, s.kernel, s.pad, s.stride, s.out_width(), size_t(s.pixels()),
                   columns};
  im2col_batch_kernel<<<detail::blocks_for(col_floats(s)), detail::kThreads, 0, stream>>>(x, g, col_floats(s), col);
  TROUPE_LAUNCH_CHECK("im2col_batch_kernel");
  swap_batch_channels_kernel<<<detail::blocks_for(dyt_floats(s)), detail::kThreads, 0, stream>>>(
      dy, s.out_channels, size_t(s.pixels()), columns, dyt_floats(s), dyt);
  TROUPE_LAUNCH_CHECK("swap_batch_channels_kernel");
  return matmul(blas, false, true, s.out_channels, s.patch(), static_cast<int>(columns), 1.0f, dyt, col, 0.0f, dw);
}

}  // namespace troupe::kernels::cuda
