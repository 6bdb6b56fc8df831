// Rounding functors shared by the .cu files of kernels/cuda: a value to bf16 or f16 and back, and
// its bits (core/dtype.h's code, so the CPU and the GPU round alike). NoRound leaves values as they
// are. Internal to kernels/cuda.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace troupe::kernels::cuda::detail {

struct NoRound {
  static constexpr bool kActive = false;
  __device__ static uint16_t bits(float) { return 0; }
  __device__ static float value(uint16_t) { return 0.0f; }
};
struct RoundBf16 {
  static constexpr bool kActive = true;
  __device__ static uint16_t bits(float v) { return ::troupe::f32_to_bf16(v); }
  __device__ static float value(uint16_t b) { return ::troupe::bf16_to_f32(b); }
};
struct RoundF16 {
  static constexpr bool kActive = true;
  __device__ static uint16_t bits(float v) { return ::troupe::f32_to_f16(v); }
  __device__ static float value(uint16_t b) { return ::troupe::f16_to_f32(b); }
};

}  // namespace troupe::kernels::cuda::detail
