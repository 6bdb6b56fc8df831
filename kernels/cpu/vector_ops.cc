// Element-wise vector ops the collectives need: reductions into a buffer, scaling, and the
// f32 <-> f16 / bf16 conversions used for compressed wire formats.
#include <algorithm>
#include <cmath>

#include "core/dtype.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
void sum_into(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += src[i];
}

TROUPE_VECTORIZE
void max_into(float* dst, const float* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = src[i] > dst[i] ? src[i] : dst[i];
}

TROUPE_VECTORIZE
void scale(float* x, size_t n, float alpha) {
  for (size_t i = 0; i < n; ++i) x[i] *= alpha;
}

void sum_into_f16(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += troupe::f16_to_f32(src[i]);
}

TROUPE_VECTORIZE
void sum_into_bf16(float* dst, const uint16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] += troupe::bf16_to_f32(src[i]);
}

void f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = troupe::f32_to_f16(src[i]);
}

void f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = troupe::f16_to_f32(src[i]);
}

void f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = troupe::f32_to_bf16(src[i]);
}

TROUPE_VECTORIZE
void bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = troupe::bf16_to_f32(src[i]);
}

bool all_finite(const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  return true;
}

void round_to(DType type, const float* src, float* dst, size_t n) {
  if (type == DType::bf16) {
    for (size_t i = 0; i < n; ++i) dst[i] = troupe::bf16_to_f32(troupe::f32_to_bf16(src[i]));
  } else if (type == DType::f16) {
    for (size_t i = 0; i < n; ++i) dst[i] = troupe::f16_to_f32(troupe::f32_to_f16(src[i]));
  } else if (dst != src) {
    std::copy(src, src + n, dst);
  }
}

}  // namespace troupe::kernels::cpu
