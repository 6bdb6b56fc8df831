// Fused, numerically stable softmax cross-entropy with its gradient.
//
// For a row z with label y: loss = log(sum_j exp(z_j - max z)) - (z_y - max z), which never
// overflows; the gradient of the mean over rows is (softmax(z) - onehot(y)) / rows.
#include <cmath>
#include <limits>

#include "kernels/cpu/ops.h"

namespace troupe::kernels::cpu {

float softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                   int64_t* correct) {
  if (correct) *correct = 0;
  if (rows <= 0 || classes <= 0) return 0.0f;
  const float inv_rows = 1.0f / static_cast<float>(rows);
  double total = 0.0;
  for (int r = 0; r < rows; ++r) {
    const float* z = logits + static_cast<size_t>(r) * classes;
    const int32_t y = labels[r];
    int argmax = 0;
    float zmax = z[0];
    for (int j = 1; j < classes; ++j) {
      if (z[j] > zmax) {
        zmax = z[j];
        argmax = j;
      }
    }
    float sum = 0.0f;
    for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - zmax);
    const bool label_ok = y >= 0 && y < classes;
    if (!label_ok) {
      total = std::numeric_limits<double>::quiet_NaN();
    } else {
      total += std::log(sum) - (z[y] - zmax);
      if (correct && argmax == y) ++*correct;
    }
    if (dlogits) {
      float* d = dlogits + static_cast<size_t>(r) * classes;
      const float inv_sum = 1.0f / sum;
      for (int j = 0; j < classes; ++j) {
        float p = std::exp(z[j] - zmax) * inv_sum;  // recomputed: d may alias z
        d[j] = (p - (j == y ? 1.0f : 0.0f)) * inv_rows;
      }
    }
  }
  return static_cast<float>(total / rows);
}

}  // namespace troupe::kernels::cpu
