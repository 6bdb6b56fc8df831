// Row gathers: building a batch (or a whole shuffled epoch) from a dataset kept on the device.
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

// ------------------------------------------------------------------------------------------------
// CUDA kernels

namespace {

// One block per destination row (grid-stride over rows); threads copy the row's floats, four at a
// time when rows are 16-byte aligned (VecT = float4), else one at a time (VecT = float).
template <class VecT>
__global__ void gather_rows_kernel(VecT* dst, const VecT* __restrict__ src, int64_t src_rows, int64_t vec_cols,
                                   const int32_t* __restrict__ index, int64_t count, int32_t* dst_labels,
                                   const int32_t* __restrict__ src_labels) {
  for (int64_t r = blockIdx.x; r < count; r += gridDim.x) {
    const int32_t s = index[r];
    if (s < 0 || s >= src_rows) continue;
    const VecT* from = src + s * vec_cols;
    VecT* to = dst + r * vec_cols;
    for (int64_t c = threadIdx.x; c < vec_cols; c += blockDim.x) to[c] = from[c];
    if (dst_labels && threadIdx.x == 0) dst_labels[r] = src_labels[s];
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// launchers

Status gather_rows(float* dst, const float* src, int64_t src_rows, int64_t cols, const int32_t* index,
                   int64_t count, int32_t* dst_labels, const int32_t* src_labels, cudaStream_t stream) {
  if (src_rows < 0 || cols < 0 || count < 0) {
    return invalid_argument("cuda::gather_rows: negative size src_rows=" + std::to_string(src_rows) +
                            " cols=" + std::to_string(cols) + " count=" + std::to_string(count));
  }
  if ((dst_labels == nullptr) != (src_labels == nullptr)) {
    return invalid_argument("cuda::gather_rows: give both label pointers or neither");
  }
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("gather_rows", size_t(count), {index}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("gather_rows", size_t(count) * size_t(cols), {dst, src}));
  if (count == 0) return {};
  const unsigned blocks = static_cast<unsigned>(count < int64_t(detail::kMaxBlocks) * 4 ? count : detail::kMaxBlocks * 4);
  const bool vec4 = cols % 4 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(src) % 16 == 0;
  if (vec4) {
    const int threads = cols / 4 >= 128 ? 256 : 64;
    gather_rows_kernel<float4><<<blocks, threads, 0, stream>>>(reinterpret_cast<float4*>(dst),
                                                               reinterpret_cast<const float4*>(src), src_rows, cols / 4,
                                                               index, count, dst_labels, src_labels);
  } else {
    const int threads = cols >= 512 ? 256 : 64;
    gather_rows_kernel<float><<<blocks, threads, 0, stream>>>(dst, src, src_rows, cols, index, count, dst_labels,
                                                              src_labels);
  }
  TROUPE_LAUNCH_CHECK("gather_rows_kernel");
  return {};
}

}  // namespace troupe::kernels::cuda
