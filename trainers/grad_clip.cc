#include "trainers/grad_clip.h"

#include <cmath>

#include "kernels/cpu/ops.h"

namespace troupe {

double clip_grad_norm(float* grads, size_t n, float max_norm) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(grads[i]) * grads[i];
  const double norm = std::sqrt(sum);
  if (max_norm > 0 && norm > max_norm) kernels::cpu::scale(grads, n, static_cast<float>(max_norm / norm));
  return norm;
}

}  // namespace troupe
