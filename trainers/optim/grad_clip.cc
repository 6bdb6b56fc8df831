#include "trainers/optim/grad_clip.h"

#include <cmath>

#include "kernels/cpu/ops.h"

namespace troupe {

double squared_norm(const float* grads, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  return sum;
}

float clip_factor(double norm, float max_norm) {
  return max_norm > 0 && norm > max_norm ? static_cast<float>(max_norm / norm) : 1.0f;
}

double clip_grad_norm(float* grads, size_t n, float max_norm) {
  const double norm = std::sqrt(squared_norm(grads, n));
  const float factor = clip_factor(norm, max_norm);
  if (factor != 1.0f) kernels::cpu::scale(grads, n, factor);
  return norm;
}

double squared_norm(const float* grads, size_t n, const FlatRanges& skip) {
  double sum = 0;
  size_t at = 0;
  for (const auto& [b, e] : skip) {
    sum += squared_norm(grads + at, b - at);
    at = e;
  }
  return sum + squared_norm(grads + at, n - at);
}

void scale_except(float* grads, size_t n, float factor, const FlatRanges& skip) {
  size_t at = 0;
  for (const auto& [b, e] : skip) {
    kernels::cpu::scale(grads + at, b - at, factor);
    at = e;
  }
  kernels::cpu::scale(grads + at, n - at, factor);
}

double clip_grad_norm(float* grads, size_t n, float max_norm, const FlatRanges& skip) {
  if (skip.empty()) return clip_grad_norm(grads, n, max_norm);
  const double norm = std::sqrt(squared_norm(grads, n, skip));
  const float factor = clip_factor(norm, max_norm);
  if (factor != 1.0f) scale_except(grads, n, factor, skip);
  return norm;
}

}  // namespace troupe
