#include "models/mlp/dense_layer.h"

#include "kernels/cpu/ops.h"

namespace troupe {

namespace cpu = kernels::cpu;

void DenseLayer::forward(const float* x, int64_t rows, const float* w, const float* b, float* y) const {
  const int n = static_cast<int>(rows);
  cpu::matmul(false, false, n, out, in, 1.0f, x, w, 0.0f, y);
  cpu::bias_act(y, b, n, out, relu);
}

void DenseLayer::backward(const float* x, const float* y, float* dy, int64_t rows, const float* w, float* dw,
                          float* db, float* dx, std::vector<float>& scratch) const {
  const int n = static_cast<int>(rows);
  if (relu) cpu::relu_backward(dy, y, static_cast<size_t>(rows) * out);
  scratch.resize(static_cast<size_t>(out));
  cpu::bias_grad(dy, n, out, scratch.data());
  cpu::sum_into(db, scratch.data(), scratch.size());
  cpu::matmul(true, false, in, out, n, 1.0f, x, dy, 1.0f, dw);  // adds
  if (dx) cpu::matmul(false, true, n, in, out, 1.0f, dy, w, 0.0f, dx);
}

}  // namespace troupe
