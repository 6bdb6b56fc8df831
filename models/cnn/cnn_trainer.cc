// The built-in convolutional network (models/cnn/cnn.h) as a Trainer over the public API, registered
// as "cnn". Settings (--trainer-arg key=value): channels (filters per conv block, "32,64"), kernel
// (odd, 3), hidden (dense hidden widths, also --hidden, whose default 256,128 applies when neither
// is given), order (hwc or chw, when the channel count does not tell), flip=1 and crop=P (training
// images mirrored half the time, and cut from the image zero-padded by P pixels: augmentation run by
// the runtime in the input pipeline's threads, seeded per (job seed, epoch, example)). The data: images of
// [H, W], [H, W, C] or [C, H, W] per example (u8 in the files are fed scaled to [0, 1]), or rows
// of a square number of values (Fashion-MNIST's 784 = 28 x 28). HWC images are transposed to CHW
// as a conv block's first step (forward and backward alike).
//
// Parameters, per layer in order: conv blocks conv<b>.w [out x in x k x k] (OIHW) and conv<b>.b,
// then dense<d>.w [in x out] and dense<d>.b. Weights start uniform in +-sqrt(6 / fan_in) (He's
// variance, for the ReLUs that follow), biases at 0.
//
// Mixed precision (`--precision bf16|f16`, as the MLP: models/mlp/mlp.h): forward_backward and
// evaluate read the parameters and the input rounded to that type, round every layer's output (a
// conv block's ReLU output and its pooled output), the loss gradient (times Batch::loss_scale) and
// every gradient backward writes; the convolutions and matmuls accumulate in f32. The LayerModel
// calls below compute in f32 (pipelines refuse --precision).
//
// It is also a LayerModel (one layer per conv block and per dense layer), so `--strategy pipeline`
// can split it. Its backward_layer gets only a conv block's input and pooled output, so it computes
// the block's convolution again to recover the ReLU output and the pooling's arg-max: a pipelined
// conv block costs one more forward convolution than in forward_backward, which keeps them.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/ops.h"
#include "trainers/api/trainer.h"
#include "models/cnn/cnn.h"

namespace troupe {
namespace {

namespace cpu = kernels::cpu;

// `buffer` grown to at least n elements; its data.
template <class T>
T* sized(std::vector<T>& buffer, size_t n) {
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// Test rows are evaluated this many at a time, so activations stay a few MiB.
constexpr int64_t kEvalRows = 256;

class CnnTrainer final : public Trainer, public LayerModel {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    auto layout = CnnLayout::from_config(ctx.config, ctx.data);
    if (!layout.ok()) return layout.status();
    layout_ = *layout;
    for (int l = 0; l < layout_.layers(); ++l) {
      const bool conv = l < layout_.conv_blocks();
      const std::string name = conv ? "conv" + std::to_string(l) : "dense" + std::to_string(l - layout_.conv_blocks());
      const int64_t fan_in = conv ? layout_.conv(l, 1).patch() : layout_.in_features(l);
      std::vector<int64_t> shape{layout_.in_features(l), layout_.out_features(l)};
      if (conv) {
        const cpu::Conv2dShape c = layout_.conv(l, 1);
        shape = {c.out_channels, c.in_channels, c.kernel, c.kernel};
      }
      weights_.push_back(space.declare(name + ".w", shape, Init::uniform(std::sqrt(6.0f / fan_in))));
      biases_.push_back(space.declare(name + ".b", {layout_.bias_count(l)}, Init::zeros()));
    }
    outputs_.resize(layout_.layers());
    relu_outputs_.resize(layout_.conv_blocks());
    argmax_.resize(layout_.conv_blocks());
    stage_relu_.resize(layout_.conv_blocks());
    stage_argmax_.resize(layout_.conv_blocks());
    precision_ = ctx.precision;
    return {};
  }

  bool supports_precision(DType) const override { return true; }

  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override {
    TROUPE_RETURN_IF_ERROR(check_batch(batch));
    const int64_t rows = batch.size;
    const int last = layout_.layers() - 1;
    const Parameters used = rounded(params);  // the parameters the layers read (rounded copies below f32)
    const float* x = rounded_input(batch.inputs, rows * batch.features);
    forward_all(x, rows, used);
    // Ping-pong gradient buffers: d holds dLoss/d(output of layer l), the other receives layer l's dinput.
    size_t widest = 0;
    for (int l = 0; l <= last; ++l) widest = std::max<size_t>(widest, layout_.out_features(l));
    float* d = sized(grad_a_, rows * widest);
    float* next = sized(grad_b_, rows * widest);
    BatchStats s;
    s.correct = 0;
    s.loss = cpu::softmax_xent(outputs_[last].data(), batch.labels, static_cast<int>(rows), layout_.classes, d,
                               &s.correct);
    const size_t logits = static_cast<size_t>(rows) * layout_.classes;
    if (batch.loss_scale != 1.0f) cpu::scale(d, logits, batch.loss_scale);
    round(d, logits);
    for (int l = last; l >= 0; --l) {
      const float* in = l == 0 ? x : outputs_[l - 1].data();
      backward(l, in, outputs_[l].data(), d, rows, used, grads, l > 0 ? next : nullptr, relu_outputs_, argmax_);
      round(grads[weights_[l]], static_cast<size_t>(layout_.weight_count(l)));
      round(grads[biases_[l]], static_cast<size_t>(layout_.bias_count(l)));
      if (l > 0) round(next, static_cast<size_t>(rows * layout_.in_features(l)));
      // Final for this step: the runtime may synchronise them while the earlier layers run.
      grads.ready(biases_[l]);
      grads.ready(weights_[l]);
      std::swap(d, next);
    }
    return s;
  }

  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override {
    TROUPE_RETURN_IF_ERROR(check_batch(batch));
    BatchStats s;
    s.correct = 0;
    double loss_sum = 0;
    const Parameters used = rounded(params);
    for (int64_t first = 0; first < batch.size; first += kEvalRows) {
      const int64_t rows = std::min(kEvalRows, batch.size - first);
      forward_all(rounded_input(batch.inputs + first * batch.features, rows * batch.features), rows, used);
      int64_t correct = 0;
      loss_sum += rows * static_cast<double>(cpu::softmax_xent(outputs_.back().data(), batch.labels + first,
                                                               static_cast<int>(rows), layout_.classes, nullptr,
                                                               &correct));
      s.correct += correct;
    }
    s.loss = batch.size > 0 ? static_cast<float>(loss_sum / batch.size) : 0.0f;
    return s;
  }

  std::string describe() const override { return layout_.to_string(); }

  bool transforms_inputs() const override { return layout_.flip || layout_.crop > 0; }

  // flip / crop (CnnLayout): out(c, y, x) = in(c, y + dy, x' + dx), x' mirrored when flipped, zero
  // outside the image; in the rows' own order (HWC or CHW).
  void transform_example(uint64_t seed, float* x) const override {
    const int h = layout_.height, w = layout_.width, c = layout_.in_channels, p = layout_.crop;
    const bool flip = layout_.flip && (seed & 1);
    const int dy = p > 0 ? static_cast<int>((seed >> 8) % static_cast<uint64_t>(2 * p + 1)) - p : 0;
    const int dx = p > 0 ? static_cast<int>((seed >> 32) % static_cast<uint64_t>(2 * p + 1)) - p : 0;
    if (!flip && dy == 0 && dx == 0) return;
    const bool hwc = layout_.order == ImageOrder::hwc;
    auto at = [&](int ch, int y, int xx) { return hwc ? (static_cast<size_t>(y) * w + xx) * c + ch
                                                       : (static_cast<size_t>(ch) * h + y) * w + xx; };
    std::vector<float> in(x, x + static_cast<size_t>(h) * w * c);
    for (int ch = 0; ch < c; ++ch)
      for (int y = 0; y < h; ++y)
        for (int xx = 0; xx < w; ++xx) {
          const int sy = y + dy, sx = (flip ? w - 1 - xx : xx) + dx;
          x[at(ch, y, xx)] = sy >= 0 && sy < h && sx >= 0 && sx < w ? in[at(ch, sy, sx)] : 0.0f;
        }
  }

  LayerModel* layers() override { return this; }

  // ---- LayerModel ----

  std::vector<LayerInfo> layer_infos() const override {
    std::vector<LayerInfo> out;
    for (int l = 0; l < layout_.layers(); ++l) {
      const bool conv = l < layout_.conv_blocks();
      out.push_back({conv ? "conv" + std::to_string(l) : "dense" + std::to_string(l - layout_.conv_blocks()),
                     {weights_[l], biases_[l]}, layout_.out_features(l), layout_.flops_per_example(l)});
    }
    return out;
  }

  Status forward_layer(int l, const float* in, int64_t rows, const Parameters& params, float* out) override {
    forward(l, in, rows, params, out, stage_relu_, stage_argmax_);
    return {};
  }


  Status backward_layer(int l, const float* in, const float* out, float* dout, int64_t rows, const Parameters& params,
                        Gradients& grads, float* din) override {
    // A conv block recomputes its ReLU output and arg-max (see the top of this file).
    if (l < layout_.conv_blocks()) {
      forward(l, in, rows, params, sized(stage_pooled_, rows * layout_.out_features(l)), stage_relu_, stage_argmax_);
    }
    backward(l, in, out, dout, rows, params, grads, din, stage_relu_, stage_argmax_);
    return {};
  }

  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override {
    BatchStats s;
    s.correct = 0;
    s.loss = cpu::softmax_xent(out, labels, static_cast<int>(rows), layout_.classes, dout, &s.correct);
    return s;
  }

 private:
  using Floats = std::vector<std::vector<float>>;
  using Indices = std::vector<std::vector<int32_t>>;

  Status check_batch(const Batch& b) const {
    if (b.features != layout_.in_features(0))
      return invalid_argument("a batch of " + std::to_string(b.features) + " features per example; the model "
                              "was set up for " + layout_.to_string() + " (" + std::to_string(layout_.in_features(0)) +
                              ")");
    return {};
  }

  // Every layer's output into outputs_, keeping the conv blocks' ReLU outputs and arg-max; each
  // rounded to the precision.
  void forward_all(const float* x, int64_t rows, const Parameters& params) {
    for (int l = 0; l < layout_.layers(); ++l) {
      float* out = sized(outputs_[l], rows * layout_.out_features(l));
      forward(l, l == 0 ? x : outputs_[l - 1].data(), rows, params, out, relu_outputs_, argmax_);
      if (l < layout_.conv_blocks()) {
        const cpu::Conv2dShape c = layout_.conv(l, rows);
        round(relu_outputs_[l].data(), static_cast<size_t>(rows) * c.out_channels * c.pixels());
      }
      round(out, static_cast<size_t>(rows * layout_.out_features(l)));
    }
  }

  // To precision_, in place (f32: nothing).
  void round(float* x, size_t n) const {
    if (precision_ != DType::f32) cpu::round_to(precision_, x, x, n);
  }
  // The parameters rounded to precision_ (a copy), or `params` itself in f32.
  Parameters rounded(const Parameters& params) {
    if (precision_ == DType::f32) return params;
    cpu::round_to(precision_, params.data(), sized(low_params_, params.size()), params.size());
    return Parameters(low_params_.data(), params.size(), params.first());
  }
  const float* rounded_input(const float* x, int64_t n) {
    if (precision_ == DType::f32) return x;
    cpu::round_to(precision_, x, sized(low_input_, static_cast<size_t>(n)), static_cast<size_t>(n));
    return low_input_.data();
  }

  // Layer l of `rows` examples; a conv block leaves its ReLU output and arg-max in relu[l], argmax[l].
  void forward(int l, const float* in, int64_t rows, const Parameters& params, float* out, Floats& relu,
               Indices& argmax) {
    if (l >= layout_.conv_blocks()) {
      layout_.dense(l - layout_.conv_blocks()).forward(in, rows, params[weights_[l]], params[biases_[l]], out);
      return;
    }
    const cpu::Conv2dShape c = layout_.conv(l, rows);
    const size_t conv_out = static_cast<size_t>(rows) * c.out_channels * c.pixels();
    if (l == 0) in = chw(in, rows);
    float* act = sized(relu[l], conv_out);
    cpu::conv2d_forward(c, in, params[weights_[l]], params[biases_[l]], true, act, workspace(c));
    cpu::max_pool_forward(layout_.pool(l, rows), act, out, sized(argmax[l], rows * layout_.out_features(l)));
  }

  // The backward of forward (LayerModel::backward_layer's contract), for a conv block from the ReLU
  // output and arg-max that forward left in relu[l] and argmax[l].
  void backward(int l, const float* in, const float* out, float* dout, int64_t rows, const Parameters& params,
                Gradients& grads, float* din, Floats& relu, Indices& argmax) {
    if (l >= layout_.conv_blocks()) {
      layout_.dense(l - layout_.conv_blocks())
          .backward(in, out, dout, rows, params[weights_[l]], grads[weights_[l]], grads[biases_[l]], din, bias_sum_);
      return;
    }
    const cpu::Conv2dShape c = layout_.conv(l, rows);
    const size_t conv_out = static_cast<size_t>(rows) * c.out_channels * c.pixels();
    if (l == 0) in = chw(in, rows);  // (din is never asked of the first layer)
    float* dconv = sized(dconv_, conv_out);
    cpu::max_pool_backward(layout_.pool(l, rows), dout, argmax[l].data(), dconv);
    cpu::relu_backward(dconv, relu[l].data(), conv_out);
    cpu::conv2d_backward(c, in, params[weights_[l]], dconv, grads[weights_[l]], grads[biases_[l]], din, workspace(c));
  }

  // `rows` input images in CHW: themselves, or HWC ones transposed into chw_.
  const float* chw(const float* in, int64_t rows) {
    if (layout_.order != ImageOrder::hwc || layout_.in_channels == 1) return in;
    const int64_t h = layout_.height, w = layout_.width, c = layout_.in_channels, plane = h * w;
    float* out = sized(chw_, static_cast<size_t>(rows * plane * c));
    for (int64_t r = 0; r < rows; ++r) {
      const float* x = in + r * plane * c;
      float* y = out + r * plane * c;
      for (int64_t p = 0; p < plane; ++p)
        for (int64_t k = 0; k < c; ++k) y[k * plane + p] = x[p * c + k];
    }
    return out;
  }

  float* workspace(const cpu::Conv2dShape& c) { return sized(workspace_, cpu::conv2d_workspace_floats(c)); }

  CnnLayout layout_;
  std::vector<Param> weights_, biases_;  // per layer
  Floats outputs_;                       // per layer: [rows x out_features]
  Floats relu_outputs_;                  // per conv block: ReLU output before pooling
  Indices argmax_;                       // per conv block: the pooling's arg-max
  std::vector<float> grad_a_, grad_b_, dconv_, workspace_, bias_sum_, chw_;
  DType precision_ = DType::f32;
  std::vector<float> low_params_, low_input_;  // rounded copies (bf16 / f16)
  // LayerModel calls (pipeline stages) keep their own, so they never clobber forward_backward's.
  Floats stage_relu_;
  Indices stage_argmax_;
  std::vector<float> stage_pooled_;
};

}  // namespace

TROUPE_REGISTER_TRAINER("cnn", CnnTrainer);

}  // namespace troupe
