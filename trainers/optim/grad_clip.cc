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

}  // namespace troupe
