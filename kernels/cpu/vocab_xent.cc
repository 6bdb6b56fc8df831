// Cross-entropy over a vocabulary (kernels/cpu/transformer.h): one row of logits per position,
// max-subtracted, with exp_f32 so each row's passes vectorise (ops.h's softmax_xent, for a
// classifier's few classes, calls the scalar expf and also counts arg-max hits).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/transformer.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
float vocab_xent(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float grad_scale,
                 float* dlogits) {
  if (rows <= 0 || vocab <= 0) return 0.0f;
  double total = 0;
  const float k = grad_scale / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * vocab;
    float* d = dlogits + r * vocab;
    float top = z[0];
    for (int64_t j = 1; j < vocab; ++j) top = std::max(top, z[j]);
    const int32_t y = targets[r];
    const bool ok = y >= 0 && y < vocab;
    const float zy = ok ? z[y] : 0.0f;  // read before d (which may be z) is overwritten
    float sum = 0;
    for (int64_t j = 0; j < vocab; ++j) {
      const float e = exp_f32(z[j] - top);
      d[j] = e;
      sum += e;
    }
    total += ok ? std::log(static_cast<double>(sum)) - (zy - top) : std::numeric_limits<double>::quiet_NaN();
    const float scale = k / sum;
    for (int64_t j = 0; j < vocab; ++j) d[j] *= scale;
    if (ok) d[y] -= k;
  }
  return static_cast<float>(total / static_cast<double>(rows));
}

}  // namespace troupe::kernels::cpu
