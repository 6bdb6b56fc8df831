// Optimizer steps over one flat parameter buffer: SGD (momentum, Nesterov, L2) and Adam / AdamW.
// Built with -ffp-contract=off (kernels/CMakeLists.txt): each element's update is the same bits
// whichever vectorised or scalar path the loop takes, on every instruction set, so the replicas of
// a sync job stay identical.
#include <cmath>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
void sgd_step(float* params, const float* grads, float* velocity, size_t n, const SgdParams& hp) {
  const float lr = hp.lr, mu = hp.momentum, wd = hp.weight_decay;
  if (mu == 0.0f) {
    for (size_t i = 0; i < n; ++i) params[i] -= lr * (grads[i] + wd * params[i]);
    return;
  }
  if (hp.nesterov) {
    for (size_t i = 0; i < n; ++i) {
      float g = grads[i] + wd * params[i];
      float v = mu * velocity[i] + g;
      velocity[i] = v;
      params[i] -= lr * (g + mu * v);
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      float g = grads[i] + wd * params[i];
      float v = mu * velocity[i] + g;
      velocity[i] = v;
      params[i] -= lr * v;
    }
  }
}

TROUPE_VECTORIZE
void adam_step(float* params, const float* grads, float* m, float* v, size_t n, int64_t step,
               const AdamParams& hp) {
  const float b1 = hp.beta1, b2 = hp.beta2;
  const double t = static_cast<double>(step < 1 ? 1 : step);
  // Bias corrections folded into the step size and epsilon, as one multiply per element:
  // p -= lr * (m / bc1) / (sqrt(v / bc2) + eps) = step_size * m / (sqrt(v) + eps * sqrt(bc2)).
  const float bc1 = static_cast<float>(1.0 - std::pow(static_cast<double>(b1), t));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(b2), t)));
  const float step_size = hp.lr * bc2_sqrt / bc1;
  const float eps = hp.eps * bc2_sqrt;
  const float l2 = hp.decoupled ? 0.0f : hp.weight_decay;
  const float decay = hp.decoupled ? 1.0f - hp.lr * hp.weight_decay : 1.0f;
  for (size_t i = 0; i < n; ++i) {
    float g = grads[i] + l2 * params[i];
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    params[i] = params[i] * decay - step_size * mi / (std::sqrt(vi) + eps);
  }
}

}  // namespace troupe::kernels::cpu
