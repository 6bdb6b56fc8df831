#include "trainers/cuda/mlp_cuda.h"

#include <string>

#include "kernels/cuda/ops.h"

namespace troupe {

namespace kc = kernels::cuda;

Status MlpCuda::reserve(int rows) {
  if (rows <= capacity_) return {};
  acts_.clear();
  dacts_.clear();
  acts_.resize(layout_.layers());
  dacts_.resize(layout_.layers());
  for (int l = 0; l < layout_.layers(); ++l) {
    const size_t n = static_cast<size_t>(rows) * layout_.out(l);
    TROUPE_RETURN_IF_ERROR(acts_[l].allocate(n, "MLP activations"));
    TROUPE_RETURN_IF_ERROR(dacts_[l].allocate(n, "MLP activation gradients"));
  }
  capacity_ = rows;
  return {};
}

Status MlpCuda::forward(const float* params, const float* x, int batch) {
  if (batch < 0 || batch > capacity_) {
    return invalid_argument("MlpCuda: batch of " + std::to_string(batch) + " rows exceeds the " +
                            std::to_string(capacity_) + " reserved; call reserve() first");
  }
  const float* input = x;
  for (int l = 0; l < layout_.layers(); ++l) {
    float* y = acts_[l].get();
    TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, batch, layout_.out(l), layout_.in(l), 1.0f, input,
                                      params + layout_.weight_offset[l], 0.0f, y));
    const bool relu = l + 1 < layout_.layers();
    TROUPE_RETURN_IF_ERROR(
        kc::bias_act(y, params + layout_.bias_offset[l], batch, layout_.out(l), relu, blas_.stream()));
    input = y;
  }
  return {};
}

Status MlpCuda::evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                         unsigned long long* correct_acc) {
  TROUPE_RETURN_IF_ERROR(forward(params, x, batch));
  return kc::softmax_xent(acts_.back().get(), labels, batch, layout_.dims.back(), nullptr, loss_acc, correct_acc,
                          blas_.stream());
}

Status MlpCuda::forward_backward(const float* params, const float* x, const int32_t* labels, int batch,
                                 float* grads, float* loss_acc, unsigned long long* correct_acc) {
  TROUPE_RETURN_IF_ERROR(forward(params, x, batch));
  cudaStream_t stream = blas_.stream();
  const int last = layout_.layers() - 1;
  float* d = dacts_[last].get();
  TROUPE_RETURN_IF_ERROR(kc::softmax_xent(acts_[last].get(), labels, batch, layout_.dims.back(), d, loss_acc,
                                          correct_acc, stream));
  // The bias gradient of the last layer comes straight from dlogits; those of hidden layers are
  // fused with their ReLU backward below (one pass over each activation gradient).
  TROUPE_RETURN_IF_ERROR(kc::bias_grad(d, batch, layout_.out(last), grads + layout_.bias_offset[last], stream));
  for (int l = last; l >= 0; --l) {
    const float* input = l == 0 ? x : acts_[l - 1].get();
    TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, true, false, layout_.in(l), layout_.out(l), batch, 1.0f, input, d, 0.0f,
                                      grads + layout_.weight_offset[l]));
    if (l > 0) {  // the input gradient of the first layer is never needed
      float* dprev = dacts_[l - 1].get();
      TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, true, batch, layout_.in(l), layout_.out(l), 1.0f, d,
                                        params + layout_.weight_offset[l], 0.0f, dprev));
      TROUPE_RETURN_IF_ERROR(kc::relu_backward_bias_grad(dprev, acts_[l - 1].get(), batch, layout_.in(l),
                                                         grads + layout_.bias_offset[l - 1], stream));
      d = dprev;
    }
  }
  return {};
}

}  // namespace troupe
