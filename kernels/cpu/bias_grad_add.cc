// The bias gradient of a layer whose gradient accumulates (kernels/cpu/transformer.h).
#include "kernels/cpu/transformer.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {

TROUPE_VECTORIZE
void bias_grad_add(const float* dy, int64_t rows, int64_t cols, float* db) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = dy + r * cols;
    for (int64_t c = 0; c < cols; ++c) db[c] += row[c];
  }
}

}  // namespace troupe::kernels::cpu
