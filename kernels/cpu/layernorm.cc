// LayerNorm over the last dimension, forward and backward (kernels/cpu/transformer.h).
//
// Backward, with xhat = (x - mean) * rstd and g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  dgamma += dy * xhat,  dbeta += dy.
// Row statistics are summed in double: a row of 384..1024 values loses digits in f32 sums.
#include <cmath>

#include "kernels/cpu/transformer.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
void layernorm_forward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim, float eps,
                       float* y, float* mean, float* rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum = 0;
    for (int64_t c = 0; c < dim; ++c) sum += xr[c];
    const float m = static_cast<float>(sum / dim);
    double var = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const float d = xr[c] - m;
      var += static_cast<double>(d) * d;
    }
    const float s = static_cast<float>(1.0 / std::sqrt(var / dim + eps));
    for (int64_t c = 0; c < dim; ++c) yr[c] = (xr[c] - m) * s * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

TROUPE_VECTORIZE
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int64_t rows, int64_t dim, float* dx, float* dgamma, float* dbeta) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    const float* dyr = dy + r * dim;
    float* dxr = dx + r * dim;
    const float m = mean[r], s = rstd[r];
    float sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const float xhat = (xr[c] - m) * s;
      const float g = dyr[c] * gamma[c];
      sum_g += g;
      sum_gx += g * xhat;
      dgamma[c] += dyr[c] * xhat;
      dbeta[c] += dyr[c];
    }
    const float mg = sum_g / static_cast<float>(dim), mgx = sum_gx / static_cast<float>(dim);
    for (int64_t c = 0; c < dim; ++c) {
      const float xhat = (xr[c] - m) * s;
      dxr[c] += s * (dyr[c] * gamma[c] - mg - xhat * mgx);
    }
  }
}

}  // namespace troupe::kernels::cpu
