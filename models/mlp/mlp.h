// A multi-layer perceptron whose parameters live in one contiguous f32 buffer and whose gradients
// live in another of the same layout, so optimizers run one pass over everything and collectives
// can all-reduce gradients in buckets without copies.
//
// Layout of the flat buffer, layer by layer (l = 0 .. layers-1):
//   W_l [in_l x out_l] row-major, then b_l [out_l].
// Forward for a batch X [B x in_0]: H_l = act(H_{l-1} W_l + b_l), act = ReLU except after the last
// layer, whose output are logits for softmax cross-entropy.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace troupe {

struct MlpLayout {
  std::vector<int> dims;  // {784, 256, 128, 10}: input, hidden..., classes
  std::vector<size_t> weight_offset, bias_offset;  // per layer, in floats
  size_t param_count = 0;

  // dims must have >= 2 entries, all > 0; otherwise invalid_argument.
  static Expected<MlpLayout> make(std::vector<int> dims);
  int layers() const { return static_cast<int>(dims.size()) - 1; }
  int in(int l) const { return dims[l]; }
  int out(int l) const { return dims[l + 1]; }
  std::string to_string() const;  // "784-256-128-10 (235146 parameters)"
  // Floating-point operations of one training step per sample: forward, weight gradients and the
  // input gradients of every layer but the first.
  double flops_per_sample() const;
};

// Fills `params` (layout.param_count floats) deterministically from `seed`: weights and biases of a
// layer uniform in +-1/sqrt(in) (the usual default of dense layers). CPU and GPU trainers share it.
void mlp_init(const MlpLayout& layout, uint64_t seed, float* params);

// The CPU model: forward/backward of one batch using kernels/cpu, with activations kept in
// workspace buffers sized for the largest batch seen (no allocation in the steady state).
class MlpCpu {
 public:
  explicit MlpCpu(MlpLayout layout) : layout_(std::move(layout)) {}
  const MlpLayout& layout() const { return layout_; }

  // Mixed precision (`--precision`, the reference the CUDA kernels match): with bf16 or f16 every
  // matmul reads its operands rounded to that type — the weights and biases, the input, each
  // layer's output, each gradient flowing back — and accumulates in f32, as tensor cores do; the
  // weight and bias gradients are rounded to it as well (an f16 gradient past 65504 is infinite:
  // the overflow loss scaling watches for). The parameters stay f32: the master weights.
  void set_precision(DType p) { precision_ = p; }
  DType precision() const { return precision_; }

  // Forward and backward of `batch` rows of `x` [batch x in] with labels; writes dL/dparams into
  // `grads` (overwritten, same layout as params), times `loss_scale` (f16's dynamic loss scaling:
  // the loss's gradient is scaled before backward, so small gradients survive the rounding; the
  // caller divides it out). Returns the mean loss (unscaled); `correct` (if not null) gets the
  // number of rows classified right. `done` (if set) is called as soon as a block's gradient is
  // final, in reverse layout order: (l, false) for b_l, then (l, true) for W_l, last layer first,
  // while the rest of backward is still to do.
  float forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                         int64_t* correct, const std::function<void(int layer, bool weights)>& done = {},
                         float loss_scale = 1.0f);
  // Forward only; returns the mean loss and the number of rows classified right in `correct`.
  float evaluate(const float* params, const float* x, const int32_t* labels, int batch, int64_t* correct);
  // Forward only: the logits [batch x classes], valid until the next call.
  const float* logits(const float* params, const float* x, int batch);

 private:
  // The forward pass into acts_; returns the parameters the matmuls read (themselves in f32, else
  // rounded copies).
  const float* forward(const float* params, const float* x, int batch);
  void round(float* x, size_t n) const;  // to precision_, in place (f32: nothing)
  MlpLayout layout_;
  DType precision_ = DType::f32;
  std::vector<float> low_params_, low_input_;  // the rounded copies (bf16 / f16 only)
  int capacity_ = 0;
  std::vector<std::vector<float>> acts_;   // acts_[l]: output of layer l, [batch x out_l]
  std::vector<std::vector<float>> dacts_;  // dacts_[l]: gradient of the loss w.r.t. acts_[l]
};

}  // namespace troupe
