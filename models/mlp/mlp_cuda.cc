#include "models/mlp/mlp_cuda.h"

#include <string>

#include "kernels/cuda/low_ops.h"
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
  if (low()) {
    if (precision_ != DType::bf16 && precision_ != DType::f16)
      return invalid_argument("MlpCuda: precision must be f32, bf16 or f16");
    acts_low_.clear();
    dacts_low_.clear();
    acts_low_.resize(layout_.layers());
    dacts_low_.resize(layout_.layers());
    for (int l = 0; l < layout_.layers(); ++l) {
      const size_t n = static_cast<size_t>(rows) * layout_.out(l);
      TROUPE_RETURN_IF_ERROR(acts_low_[l].allocate(n, "MLP 16-bit activations"));
      TROUPE_RETURN_IF_ERROR(dacts_low_[l].allocate(n, "MLP 16-bit activation gradients"));
    }
    TROUPE_RETURN_IF_ERROR(params_r_.allocate(layout_.param_count, "rounded parameters"));
    TROUPE_RETURN_IF_ERROR(params_low_.allocate(layout_.param_count, "16-bit parameters"));
    TROUPE_RETURN_IF_ERROR(x_low_.allocate(static_cast<size_t>(rows) * layout_.in(0), "16-bit inputs"));
  }
  capacity_ = rows;
  return {};
}

Status MlpCuda::set_loss_scale(const float* scale) {
  if (precision_ != DType::f16) {
    return invalid_argument(std::string("MlpCuda: a loss scale is for f16 training; this model computes in ") +
                            dtype_name(precision_));
  }
  loss_scale_ = scale;
  return {};
}

Status MlpCuda::forward(const float* params, const float* x, int batch) {
  if (batch < 0 || batch > capacity_) {
    return invalid_argument("MlpCuda: batch of " + std::to_string(batch) + " rows exceeds the " +
                            std::to_string(capacity_) + " reserved; call reserve() first");
  }
  if (low()) return forward_low(params, x, batch);
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
  if (low()) return backward_low(batch, grads, loss_acc, correct_acc, labels);
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

// ---- bf16 / f16 (see mlp_cuda.h): the CPU's MlpCpu::forward / forward_backward with rounding ----

Status MlpCuda::forward_low(const float* params, const float* x, int batch) {
  cudaStream_t stream = blas_.stream();
  const size_t n = layout_.param_count;
  TROUPE_RETURN_IF_ERROR(kc::round_to(precision_, params, params_r_.get(), n, params_low_.get(), stream));
  // The input's bits only: layer 0 reads them, and nothing reads the rounded input as f32.
  const size_t xn = static_cast<size_t>(batch) * layout_.in(0);
  if (precision_ == DType::bf16) {
    TROUPE_RETURN_IF_ERROR(kc::f32_to_bf16(x, x_low_.get(), xn, stream));
  } else {
    TROUPE_RETURN_IF_ERROR(kc::f32_to_f16(x, x_low_.get(), xn, stream));
  }
  const uint16_t* input = x_low_.get();
  for (int l = 0; l < layout_.layers(); ++l) {
    float* y = acts_[l].get();
    TROUPE_RETURN_IF_ERROR(kc::matmul_low(blas_, precision_, false, false, batch, layout_.out(l), layout_.in(l), 1.0f,
                                          input, params_low_.get() + layout_.weight_offset[l], 0.0f, y));
    const bool relu = l + 1 < layout_.layers();
    TROUPE_RETURN_IF_ERROR(kc::bias_act_round(precision_, y, params_r_.get() + layout_.bias_offset[l], batch,
                                              layout_.out(l), relu, acts_low_[l].get(), stream));
    input = acts_low_[l].get();
  }
  return {};
}

Status MlpCuda::backward_low(int batch, float* grads, float* loss_acc, unsigned long long* correct_acc,
                             const int32_t* labels) {
  cudaStream_t stream = blas_.stream();
  const int last = layout_.layers() - 1;
  float* d = dacts_[last].get();
  TROUPE_RETURN_IF_ERROR(kc::softmax_xent(acts_[last].get(), labels, batch, layout_.dims.back(), d, loss_acc,
                                          correct_acc, stream));
  const size_t logits = static_cast<size_t>(batch) * layout_.dims.back();
  if (loss_scale_) {
    TROUPE_RETURN_IF_ERROR(kc::scale_round_by(precision_, d, logits, loss_scale_, dacts_low_[last].get(), stream));
  } else {
    TROUPE_RETURN_IF_ERROR(kc::scale_round(precision_, d, logits, 1.0f, dacts_low_[last].get(), stream));
  }
  TROUPE_RETURN_IF_ERROR(kc::bias_grad(d, batch, layout_.out(last), grads + layout_.bias_offset[last], stream));
  for (int l = last; l >= 0; --l) {
    const uint16_t* input = l == 0 ? x_low_.get() : acts_low_[l - 1].get();
    TROUPE_RETURN_IF_ERROR(kc::matmul_low(blas_, precision_, true, false, layout_.in(l), layout_.out(l), batch, 1.0f,
                                          input, dacts_low_[l].get(), 0.0f, grads + layout_.weight_offset[l]));
    if (l > 0) {
      float* dprev = dacts_[l - 1].get();
      TROUPE_RETURN_IF_ERROR(kc::matmul_low(blas_, precision_, false, true, batch, layout_.in(l), layout_.out(l), 1.0f,
                                            dacts_low_[l].get(), params_low_.get() + layout_.weight_offset[l], 0.0f,
                                            dprev));
      TROUPE_RETURN_IF_ERROR(kc::relu_backward_round_bias_grad(precision_, dprev, acts_[l - 1].get(), batch,
                                                               layout_.in(l), dacts_low_[l - 1].get(),
                                                               grads + layout_.bias_offset[l - 1], stream));
    }
  }
  // Every gradient rounded, as the CPU rounds each when it is written (none is read in between).
  return kc::round_to(precision_, grads, grads, layout_.param_count, nullptr, stream);
}

}  // namespace troupe
