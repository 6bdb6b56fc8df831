// exp(x) in f32 as plain arithmetic (Cephes' polynomial on a range reduction by ln 2), so that
// the loops calling it vectorise — glibc's expf and tanhf are scalar calls, which made GELU and the
// attention's softmax most of a small transformer's step. Relative error under 2e-7 on
// [-87, 88]; arguments outside are clamped (exp(-87) ~ 1.6e-38, exp(88) ~ 1.6e38).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace troupe::kernels::cpu {

inline float exp_f32(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  // n = round(x / ln 2) by the 1.5 * 2^23 trick (pure arithmetic: floorf is a call without SSE4.1).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;  // ln 2 in two parts: the first product is exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return y * scale;
}

// tanh(x) = 1 - 2 / (exp(2x) + 1): absolute error under 3e-7.
inline float tanh_f32(float x) { return 1.0f - 2.0f / (exp_f32(2.0f * x) + 1.0f); }

}  // namespace troupe::kernels::cpu
