// Element-wise vector ops for collectives: reductions into f32, scaling, f16/bf16 conversions
// (sharing core/dtype.h's rounding code with the CPU) and a finiteness check.
#include <cmath>

#include "core/dtype.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

// ------------------------------------------------------------------------------------------------
// CUDA kernels

namespace {

// One grid-stride kernel per element-wise op; Op is a functor of the element index.
template <class Op>
__global__ void elementwise_kernel(size_t n, Op op) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) op(i);
}

struct SumInto {
  float* dst;
  const float* src;
  __device__ void operator()(size_t i) const { dst[i] += src[i]; }
};
struct MaxInto {  // as cpu::max_into: keeps dst unless src > dst (so a NaN in src is ignored)
  float* dst;
  const float* src;
  __device__ void operator()(size_t i) const { dst[i] = src[i] > dst[i] ? src[i] : dst[i]; }
};
struct Scale {
  float* x;
  float alpha;
  __device__ void operator()(size_t i) const { x[i] *= alpha; }
};
struct SumIntoF16 {
  float* dst;
  const uint16_t* src;
  __device__ void operator()(size_t i) const { dst[i] += ::troupe::f16_to_f32(src[i]); }
};
struct SumIntoBf16 {
  float* dst;
  const uint16_t* src;
  __device__ void operator()(size_t i) const { dst[i] += ::troupe::bf16_to_f32(src[i]); }
};
struct ToF16 {
  const float* src;
  uint16_t* dst;
  __device__ void operator()(size_t i) const { dst[i] = ::troupe::f32_to_f16(src[i]); }
};
struct FromF16 {
  const uint16_t* src;
  float* dst;
  __device__ void operator()(size_t i) const { dst[i] = ::troupe::f16_to_f32(src[i]); }
};
struct ToBf16 {
  const float* src;
  uint16_t* dst;
  __device__ void operator()(size_t i) const { dst[i] = ::troupe::f32_to_bf16(src[i]); }
};
struct FromBf16 {
  const uint16_t* src;
  float* dst;
  __device__ void operator()(size_t i) const { dst[i] = ::troupe::bf16_to_f32(src[i]); }
};
struct ClearIfNotFinite {  // every writer stores the same 0, so races are benign
  const float* x;
  int32_t* result;
  __device__ void operator()(size_t i) const {
    if (!isfinite(x[i])) *result = 0;
  }
};

__global__ void set_flag_kernel(int32_t* flag, int32_t value) { *flag = value; }
__global__ void pack_step_slots_kernel(const float* loss, const unsigned long long* correct, float* out) {
  out[0] = *loss;
  out[1] = static_cast<float>(*correct);
}

template <class Op>
Status launch(const char* name, size_t n, Op op, cudaStream_t stream) {
  if (n == 0) return {};
  elementwise_kernel<<<detail::blocks_for(n), detail::kThreads, 0, stream>>>(n, op);
  TROUPE_LAUNCH_CHECK(name);
  return {};
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// launchers

Status sum_into(float* dst, const float* src, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("sum_into", n, {dst, src}));
  return launch("sum_into", n, SumInto{dst, src}, stream);
}
Status max_into(float* dst, const float* src, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("max_into", n, {dst, src}));
  return launch("max_into", n, MaxInto{dst, src}, stream);
}
Status scale(float* x, size_t n, float alpha, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("scale", n, {x}));
  return launch("scale", n, Scale{x, alpha}, stream);
}
Status sum_into_f16(float* dst, const uint16_t* src, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("sum_into_f16", n, {dst, src}));
  return launch("sum_into_f16", n, SumIntoF16{dst, src}, stream);
}
Status sum_into_bf16(float* dst, const uint16_t* src, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("sum_into_bf16", n, {dst, src}));
  return launch("sum_into_bf16", n, SumIntoBf16{dst, src}, stream);
}
Status f32_to_f16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("f32_to_f16", n, {src, dst}));
  return launch("f32_to_f16", n, ToF16{src, dst}, stream);
}
Status f16_to_f32(const uint16_t* src, float* dst, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("f16_to_f32", n, {src, dst}));
  return launch("f16_to_f32", n, FromF16{src, dst}, stream);
}
Status f32_to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("f32_to_bf16", n, {src, dst}));
  return launch("f32_to_bf16", n, ToBf16{src, dst}, stream);
}
Status bf16_to_f32(const uint16_t* src, float* dst, size_t n, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("bf16_to_f32", n, {src, dst}));
  return launch("bf16_to_f32", n, FromBf16{src, dst}, stream);
}

Status pack_step_slots(const float* loss, const unsigned long long* correct, float* out, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("pack_step_slots", 1, {loss, correct, out}));
  pack_step_slots_kernel<<<1, 1, 0, stream>>>(loss, correct, out);
  TROUPE_LAUNCH_CHECK("pack_step_slots_kernel");
  return {};
}

Status all_finite(const float* x, size_t n, int32_t* result, cudaStream_t stream) {
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("all_finite", 1, {result}));
  TROUPE_RETURN_IF_ERROR(detail::check_pointers("all_finite", n, {x}));
  set_flag_kernel<<<1, 1, 0, stream>>>(result, 1);
  TROUPE_LAUNCH_CHECK("set_flag_kernel");
  return launch("all_finite", n, ClearIfNotFinite{x, result}, stream);
}

}  // namespace troupe::kernels::cuda
