// Dense-layer helpers: bias + activation forward, their backward passes.
#include <cstring>

#include "kernels/cpu/ops.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
void bias_act(float* x, const float* bias, int rows, int cols, bool relu) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + static_cast<size_t>(r) * cols;
    if (relu) {
      for (int c = 0; c < cols; ++c) {
        float v = row[c] + bias[c];
        row[c] = v > 0.0f ? v : 0.0f;
      }
    } else {
      for (int c = 0; c < cols; ++c) row[c] += bias[c];
    }
  }
}

TROUPE_VECTORIZE
void relu_backward(float* dy, const float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

TROUPE_VECTORIZE
void bias_grad(const float* dy, int rows, int cols, float* db) {
  if (cols <= 0) return;
  std::memset(db, 0, sizeof(float) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float* row = dy + static_cast<size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) db[c] += row[c];
  }
}

}  // namespace troupe::kernels::cpu
