#include "models/mlp/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>

#include "kernels/cpu/ops.h"

namespace troupe {

namespace cpu = kernels::cpu;

Expected<MlpLayout> MlpLayout::make(std::vector<int> dims) {
  if (dims.size() < 2) return invalid_argument("an MLP needs at least an input and an output size");
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] <= 0) {
      return invalid_argument("MLP layer size " + std::to_string(dims[i]) + " at position " + std::to_string(i) +
                              " must be positive");
    }
  }
  MlpLayout l;
  l.dims = std::move(dims);
  size_t off = 0;
  for (int i = 0; i + 1 < static_cast<int>(l.dims.size()); ++i) {
    l.weight_offset.push_back(off);
    off += static_cast<size_t>(l.dims[i]) * l.dims[i + 1];
    l.bias_offset.push_back(off);
    off += l.dims[i + 1];
  }
  l.param_count = off;
  return l;
}

std::string MlpLayout::to_string() const {
  std::ostringstream os;
  for (size_t i = 0; i < dims.size(); ++i) os << (i ? "-" : "") << dims[i];
  os << " (" << param_count << " parameters)";
  return os.str();
}

double MlpLayout::flops_per_sample() const {
  double f = 0;
  for (int l = 0; l < layers(); ++l) {
    double mac = static_cast<double>(in(l)) * out(l);
    f += 2 * mac;             // forward
    f += 2 * mac;             // weight gradient
    if (l > 0) f += 2 * mac;  // input gradient (not needed for the first layer)
  }
  return f;
}

void mlp_init(const MlpLayout& layout, uint64_t seed, float* params) {
  std::mt19937_64 rng(seed);
  for (int l = 0; l < layout.layers(); ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(layout.in(l)));
    std::uniform_real_distribution<float> dist(-bound, bound);
    const size_t nw = static_cast<size_t>(layout.in(l)) * layout.out(l);
    float* w = params + layout.weight_offset[l];
    for (size_t i = 0; i < nw; ++i) w[i] = dist(rng);
    float* b = params + layout.bias_offset[l];
    for (int i = 0; i < layout.out(l); ++i) b[i] = dist(rng);
  }
}

void MlpCpu::round(float* x, size_t n) const {
  if (precision_ != DType::f32) cpu::round_to(precision_, x, x, n);
}

const float* MlpCpu::forward(const float* params, const float* x, int batch) {
  if (batch > capacity_) {
    acts_.assign(layout_.layers(), {});
    dacts_.assign(layout_.layers(), {});
    for (int l = 0; l < layout_.layers(); ++l) {
      acts_[l].resize(static_cast<size_t>(batch) * layout_.out(l));
      dacts_[l].resize(static_cast<size_t>(batch) * layout_.out(l));
    }
    capacity_ = batch;
  }
  const float* input = x;
  if (precision_ != DType::f32) {
    low_params_.resize(layout_.param_count);
    cpu::round_to(precision_, params, low_params_.data(), layout_.param_count);
    params = low_params_.data();
    const size_t n = static_cast<size_t>(batch) * layout_.in(0);
    low_input_.resize(std::max(low_input_.size(), n));
    cpu::round_to(precision_, x, low_input_.data(), n);
    input = low_input_.data();
  }
  for (int l = 0; l < layout_.layers(); ++l) {
    float* y = acts_[l].data();
    cpu::matmul(false, false, batch, layout_.out(l), layout_.in(l), 1.0f, input, params + layout_.weight_offset[l],
                0.0f, y);
    const bool relu = l + 1 < layout_.layers();
    cpu::bias_act(y, params + layout_.bias_offset[l], batch, layout_.out(l), relu);
    round(y, static_cast<size_t>(batch) * layout_.out(l));
    input = y;
  }
  return params;
}

const float* MlpCpu::logits(const float* params, const float* x, int batch) {
  forward(params, x, batch);
  return acts_.back().data();
}

float MlpCpu::evaluate(const float* params, const float* x, const int32_t* labels, int batch, int64_t* correct) {
  forward(params, x, batch);
  return cpu::softmax_xent(acts_.back().data(), labels, batch, layout_.dims.back(), nullptr, correct);
}

float MlpCpu::forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                               int64_t* correct, const std::function<void(int layer, bool weights)>& done,
                               float loss_scale) {
  const float* used = forward(params, x, batch);  // what the matmuls read (rounded copies in bf16/f16)
  const float* input0 = precision_ == DType::f32 ? x : low_input_.data();
  const int last = layout_.layers() - 1;
  // dacts_[l] holds dLoss/d(output of layer l), starting from the logits' gradient.
  float* d = dacts_[last].data();
  const float loss = cpu::softmax_xent(acts_[last].data(), labels, batch, layout_.dims.back(), d, correct);
  const size_t logits = static_cast<size_t>(batch) * layout_.dims.back();
  if (loss_scale != 1.0f) cpu::scale(d, logits, loss_scale);
  round(d, logits);
  for (int l = last; l >= 0; --l) {
    const float* input = l == 0 ? input0 : acts_[l - 1].data();
    // The bias first: it is final before the weight gradient's matmul, which a caller may overlap
    // with synchronising it (the blocks after it in the layout are final too).
    cpu::bias_grad(d, batch, layout_.out(l), grads + layout_.bias_offset[l]);
    round(grads + layout_.bias_offset[l], static_cast<size_t>(layout_.out(l)));
    if (done) done(l, false);
    cpu::matmul(true, false, layout_.in(l), layout_.out(l), batch, 1.0f, input, d, 0.0f,
                grads + layout_.weight_offset[l]);
    round(grads + layout_.weight_offset[l], static_cast<size_t>(layout_.in(l)) * layout_.out(l));
    if (done) done(l, true);  // the input gradient below only reads d and W_l
    if (l > 0) {  // the input gradient of the first layer is never needed
      float* dprev = dacts_[l - 1].data();
      cpu::matmul(false, true, batch, layout_.in(l), layout_.out(l), 1.0f, d, used + layout_.weight_offset[l],
                  0.0f, dprev);
      cpu::relu_backward(dprev, acts_[l - 1].data(), static_cast<size_t>(batch) * layout_.in(l));
      round(dprev, static_cast<size_t>(batch) * layout_.in(l));
      d = dprev;
    }
  }
  return loss;
}

}  // namespace troupe
