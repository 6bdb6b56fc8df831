// conv_filter_grad (conv_filter_grad.h): the staging kernels, one strict-f32 (batched) product and,
// when split, the partials' sum.
#include "kernels/cuda/conv_filter_grad.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/launch.cuh"

namespace troupe::kernels::cuda {

namespace {

// Index arithmetic in 32 bits (64-bit division is emulated and made the staging slower than the
// product); offsets into the staged matrices in size_t. Grids: x = (image, block of pixels), y = a
// row of the staged matrix; consecutive threads handle consecutive pixels of one image (coalesced).
struct Geometry {
  int channels, height, width, kernel, pad, stride, out_width;
  int pixels;        // output pixels per image
  int pixel_blocks;  // blocks of kThreads pixels per image
  size_t ld;         // row length of the staged matrices: batch * pixels
};

// col[r][n * pixels + p], r = (c, i, j) a filter tap: image n's input under that tap at output
// pixel p, 0 in the padding.
__global__ void im2col_batch_kernel(const float* __restrict__ x, Geometry g, float* __restrict__ col) {
  const int n = blockIdx.x / g.pixel_blocks;
  const int p = (blockIdx.x % g.pixel_blocks) * blockDim.x + threadIdx.x;
  if (p >= g.pixels) return;
  const int r = blockIdx.y, taps = g.kernel * g.kernel;
  const int c = r / taps, i = (r % taps) / g.kernel, j = r % g.kernel;
  const int ih = (p / g.out_width) * g.stride - g.pad + i, iw = (p % g.out_width) * g.stride - g.pad + j;
  float v = 0.0f;
  if (ih >= 0 && ih < g.height && iw >= 0 && iw < g.width)
    v = x[((size_t(n) * g.channels + c) * g.height + ih) * g.width + iw];
  col[size_t(r) * g.ld + size_t(n) * g.pixels + p] = v;
}

// dyt[o][n * pixels + p] = dy[n][o][p] (o = blockIdx.y, gridDim.y out-channels).
__global__ void swap_batch_channels_kernel(const float* __restrict__ dy, Geometry g, float* __restrict__ dyt) {
  const int n = blockIdx.x / g.pixel_blocks;
  const int p = (blockIdx.x % g.pixel_blocks) * blockDim.x + threadIdx.x;
  if (p >= g.pixels) return;
  const int o = blockIdx.y;
  dyt[size_t(o) * g.ld + size_t(n) * g.pixels + p] = dy[(size_t(n) * gridDim.y + o) * g.pixels + p];
}

// dw[i] = the sum of partial[k][i] over k = 0 .. parts-1, in an order fixed by the shape (the same
// bits every call). Few outputs (the first block's 288): a warp per output, each lane summing every
// 32nd part, then a fixed shuffle tree; many outputs: a thread per output, parts in order.
__global__ void sum_parts_warp_kernel(const float* __restrict__ partial, int parts, unsigned n, float* __restrict__ dw) {
  const unsigned lane = threadIdx.x % 32;
  for (unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) / 32; i < n; i += gridDim.x * blockDim.x / 32) {
    float sum = 0.0f;
    for (int k = int(lane); k < parts; k += 32) sum += partial[size_t(k) * n + i];
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (lane == 0) dw[i] = sum;
  }
}

__global__ void sum_parts_kernel(const float* __restrict__ partial, int parts, unsigned n, float* __restrict__ dw) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    float sum = 0.0f;
    for (int k = 0; k < parts; ++k) sum += partial[size_t(k) * n + i];
    dw[i] = sum;
  }
}

constexpr unsigned kWarpSumBelow = 16384;  // outputs; below it a warp per output fills the GPU better

size_t col_floats(const cpu::Conv2dShape& s) { return size_t(s.patch()) * s.batch * s.pixels(); }
size_t dyt_floats(const cpu::Conv2dShape& s) { return size_t(s.out_channels) * s.batch * s.pixels(); }
size_t weight_floats(const cpu::Conv2dShape& s) { return size_t(s.out_channels) * s.patch(); }
// Split into single images, the output gradient is used as it lies; otherwise it is staged.
bool stages_dy(const cpu::Conv2dShape& s, int parts) { return parts != s.batch; }

constexpr size_t kTileSide = 64;       // roughly the output tile of one cuBLAS thread block
constexpr size_t kTilesWanted = 256;   // about two waves on a 132-SM GPU
constexpr size_t kMinTermsPerPart = 512;
// One product per image when each is at least this long and the partials take no more room than
// the staged input (measured on an H200, conv_filter_grad.h's comment).
constexpr int kMinPixelsPerImage = 64;

}  // namespace

int conv_filter_grad_parts(const cpu::Conv2dShape& s) {
  if (!s.valid() || s.batch < 2) return 1;
  if (s.pixels() >= kMinPixelsPerImage && size_t(s.batch) * weight_floats(s) <= col_floats(s)) return s.batch;
  const size_t tiles = ((size_t(s.out_channels) + kTileSide - 1) / kTileSide) *
                       ((size_t(s.patch()) + kTileSide - 1) / kTileSide);
  const size_t want = std::max<size_t>(1, (kTilesWanted + tiles - 1) / tiles);
  const size_t longest = std::max<size_t>(1, size_t(s.batch) * s.pixels() / kMinTermsPerPart);
  const size_t cap = std::min(want, longest);
  int parts = 1;
  for (int d = 1; d <= s.batch && size_t(d) <= cap; ++d) {
    if (s.batch % d == 0) parts = d;
  }
  return parts;
}

size_t conv_filter_grad_workspace_bytes(const cpu::Conv2dShape& s, int parts) {
  if (!s.valid()) return 0;
  if (parts <= 0) parts = conv_filter_grad_parts(s);
  const size_t partials = parts > 1 ? size_t(parts) * weight_floats(s) : 0;
  return (col_floats(s) + (stages_dy(s, parts) ? dyt_floats(s) : 0) + partials) * sizeof(float);
}

Status conv_filter_grad(const CublasHandle& blas, const cpu::Conv2dShape& s, const float* x, const float* dy,
                        float* dw, void* workspace, size_t workspace_size, int parts) {
  if (!s.valid()) return invalid_argument("cuda::conv_filter_grad: the convolution's shape is not valid");
  if (parts < 0 || (parts > 0 && s.batch % parts != 0)) {
    return invalid_argument("cuda::conv_filter_grad: " + std::to_string(parts) + " parts do not divide a batch of " +
                            std::to_string(s.batch) + " images");
  }
  if (parts == 0) parts = conv_filter_grad_parts(s);
  const size_t need = conv_filter_grad_workspace_bytes(s, parts);
  if (workspace_size < need) {
    return invalid_argument("cuda::conv_filter_grad: " + std::to_string(workspace_size) +
                            " bytes of workspace, the shape needs " + std::to_string(need));
  }
  const size_t columns = size_t(s.batch) * s.pixels();
  const size_t pixel_blocks = (size_t(s.pixels()) + detail::kThreads - 1) / detail::kThreads;
  if (columns > size_t(INT32_MAX) || pixel_blocks * s.batch > size_t(INT32_MAX) || s.patch() > 65535 ||
      s.out_channels > 65535) {
    return invalid_argument("cuda::conv_filter_grad: " + std::to_string(columns) + " output pixels in the batch, " +
                            std::to_string(s.patch()) + " filter taps and " + std::to_string(s.out_channels) +
                            " output channels exceed cuBLAS's int sizes or a grid's; use a smaller batch");
  }
  const size_t weights = weight_floats(s);
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("conv_filter_grad", weights, {dw}));
  if (columns == 0) return matmul(blas, false, true, s.out_channels, s.patch(), 0, 1.0f, nullptr, nullptr, 0.0f, dw);
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("conv_filter_grad", columns, {x, dy, workspace}));
  float* col = static_cast<float*>(workspace);
  float* next = col + col_floats(s);
  cudaStream_t stream = blas.stream();
  const Geometry g{s.in_channels, s.height,   s.width, s.kernel, s.pad, s.stride, s.out_width(), s.pixels(),
                   int(pixel_blocks), columns};
  const dim3 threads(detail::kThreads);
  im2col_batch_kernel<<<dim3(unsigned(pixel_blocks * s.batch), unsigned(s.patch())), threads, 0, stream>>>(x, g, col);
  TROUPE_LAUNCH_CHECK("im2col_batch_kernel");
  // The output gradient as a matrix [out_channels x batch*pixels] (row length `columns`): staged,
  // unless it is used one image at a time (then each image's [out_channels x pixels] is in place).
  const float* dyt = dy;
  if (stages_dy(s, parts)) {
    float* staged = next;
    next += dyt_floats(s);
    swap_batch_channels_kernel<<<dim3(unsigned(pixel_blocks * s.batch), unsigned(s.out_channels)), threads, 0,
                                 stream>>>(dy, g, staged);
    TROUPE_LAUNCH_CHECK("swap_batch_channels_kernel");
    dyt = staged;
  }
  if (parts == 1) {
    return matmul(blas, false, true, s.out_channels, s.patch(), static_cast<int>(columns), 1.0f, dyt, col, 0.0f, dw);
  }
  // Group k's partial[k] [out_channels x patch] = dyt[:, k*len .. (k+1)*len) x col[:, same]^T, all
  // groups in one call. Row-major to cuBLAS's column-major as kernels::cuda::matmul does: the
  // operands swapped (col^T first). col's rows are `columns` long; dy's, used in place, `pixels`
  // long with images out_channels*pixels apart.
  float* partial = next;
  const long long len = static_cast<long long>(columns / parts);
  const bool in_place = !stages_dy(s, parts);
  const int ld_dy = in_place ? s.pixels() : static_cast<int>(columns);
  const long long stride_dy = in_place ? static_cast<long long>(s.out_channels) * s.pixels() : len;
  const float one = 1.0f, zero = 0.0f;
  TROUPE_CUBLAS_CHECK(cublasSgemmStridedBatched(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, s.patch(), s.out_channels,
                                                static_cast<int>(len), &one, col, static_cast<int>(columns), len, dyt,
                                                ld_dy, stride_dy, &zero, partial, s.patch(),
                                                static_cast<long long>(weights), parts));
  if (weights < kWarpSumBelow) {
    sum_parts_warp_kernel<<<detail::blocks_for(weights * 32), detail::kThreads, 0, stream>>>(partial, parts,
                                                                                           unsigned(weights), dw);
  } else {
    sum_parts_kernel<<<detail::blocks_for(weights), detail::kThreads, 0, stream>>>(partial, parts, unsigned(weights),
                                                                                 dw);
  }
  TROUPE_LAUNCH_CHECK("sum_parts_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
