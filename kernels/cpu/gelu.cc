// GELU, GPT-2's tanh approximation, forward and backward (kernels/cpu/transformer.h).
//   y = 0.5 x (1 + t), t = tanh(u), u = k (x + 0.044715 x^3), k = sqrt(2 / pi)
//   y' = 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 * 0.044715 x^2)
#include <cmath>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/transformer.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCubic = 0.044715f;
}  // namespace

TROUPE_VECTORIZE
void gelu_forward(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh_f32(kSqrt2OverPi * (v + kCubic * v * v * v));
    y[i] = 0.5f * v * (1.0f + t);
  }
}

TROUPE_VECTORIZE
void gelu_backward(const float* x, const float* dy, float* dx, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float t = tanh_f32(kSqrt2OverPi * (v + kCubic * v * v * v));
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * v * v);
    dx[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
  }
}

}  // namespace troupe::kernels::cpu
