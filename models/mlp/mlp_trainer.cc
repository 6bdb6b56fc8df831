// The built-in MLP as a Trainer over the public API (trainers/api/trainer.h), registered as "mlp":
// the same interface a user's library implements. Setting: hidden (layer sizes, "256,128").
// Classification (softmax cross-entropy over DataSpec::classes) or, when the data's target holds
// values (`--loss mse`), regression: target_width outputs scored by the mean squared error over
// every output, computed in f32 through the layers. predict() gives the logits or the values.
//
// Parameters are declared W_0, b_0, W_1, b_1, ... with uniform(+-1/sqrt(in)) initialisation, which
// lays them out exactly as MlpLayout and fills them exactly as mlp_init does from the same seed (the
// runtime draws every block in declaration order from one generator), so the GPU trainer and
// checkpoints keep reading the same flat buffer.
//
// It is also a LayerModel (one layer per dense layer), so `--strategy pipeline` can split it.
#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.h"
#include "trainers/api/trainer.h"
#include "models/mlp/dense_layer.h"
#include "models/mlp/mlp.h"

namespace troupe {
namespace {

namespace cpu = kernels::cpu;

class MlpTrainer final : public Trainer, public LayerModel {
 public:
  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    auto hidden = ctx.config.get_int_list("hidden", {256, 128});
    if (!hidden.ok()) return hidden.status();
    std::vector<int> dims{static_cast<int>(ctx.data.features)};
    for (int64_t h : *hidden) {
      if (h <= 0 || h > (1 << 16)) {
        return invalid_argument("--hidden: layer size " + std::to_string(h) + " must be in [1, 65536]");
      }
      dims.push_back(static_cast<int>(h));
    }
    if (ctx.data.classes > 0 && ctx.data.target_width != 1)
      return invalid_argument("the mlp predicts one class per example; this data's target holds " +
                              std::to_string(ctx.data.target_width) + " labels per example (a sequence: token "
                              "windows need a sequence model)");
    regression_ = ctx.data.classes <= 0;
    if (regression_ && ctx.precision != DType::f32)
      return invalid_argument(std::string("--precision ") + dtype_name(ctx.precision) +
                              ": the mlp's regression (--loss mse) computes in f32");
    dims.push_back(regression_ ? static_cast<int>(ctx.data.target_width) : ctx.data.classes);
    auto layout = MlpLayout::make(dims);
    if (!layout.ok()) return layout.status();
    for (int l = 0; l < layout->layers(); ++l) {
      const Init init = Init::uniform(1.0f / std::sqrt(static_cast<float>(layout->in(l))));
      weights_.push_back(space.declare("w" + std::to_string(l), {layout->in(l), layout->out(l)}, init));
      biases_.push_back(space.declare("b" + std::to_string(l), {layout->out(l)}, init));
    }
    model_ = std::make_unique<MlpCpu>(*layout);
    model_->set_precision(ctx.precision);
    precision_ = ctx.precision;
    return {};
  }

  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override {
    if (regression_) return regress(batch, params, &grads);
    BatchStats s;
    s.correct = 0;
    // Each block is announced as soon as backward finished it (b_l, then W_l, last layer first), so
    // the runtime can all-reduce it while the earlier blocks' gradients are computed.
    s.loss = model_->forward_backward(params.data(), batch.inputs, batch.labels, static_cast<int>(batch.size),
                                      grads.data(), &s.correct, [&](int l, bool weights) {
                                        grads.ready(weights ? weights_[l] : biases_[l]);
                                      }, batch.loss_scale);
    return s;
  }

  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override {
    if (regression_) return regress(batch, params, nullptr);
    BatchStats s;
    s.correct = 0;
    s.loss = model_->evaluate(params.data(), batch.inputs, batch.labels, static_cast<int>(batch.size), &s.correct);
    return s;
  }

  std::string describe() const override { return model_ ? model_->layout().to_string() : std::string(); }

  bool supports_precision(DType) const override { return true; }  // mlp.h's rounding, all three (classes)

  int64_t prediction_width() const override { return model_ ? model_->layout().dims.back() : 0; }

  Status predict(const Batch& batch, const Parameters& params, float* out) override {
    const int64_t width = prediction_width();
    if (regression_) {
      forward_layers(batch.inputs, batch.size, params);
      std::copy_n(acts_.back().data(), static_cast<size_t>(batch.size * width), out);
    } else {
      const float* logits = model_->logits(params.data(), batch.inputs, static_cast<int>(batch.size));
      std::copy_n(logits, static_cast<size_t>(batch.size * width), out);
    }
    return {};
  }

  // The layers compute in the trainer's precision as forward_backward does (mlp.h: the parameters
  // and the input rounded, every output, dout and gradient rounded): `--shard parameters` takes
  // bf16 and f16. Pipelines refuse --precision.
  LayerModel* layers() override { return this; }
  bool computes_in(DType p) const override { return !regression_ || p == DType::f32; }

  // ---- LayerModel: layer l is H_l = act(H_{l-1} W_l + b_l) ----

  std::vector<LayerInfo> layer_infos() const override {
    std::vector<LayerInfo> out;
    const MlpLayout& m = model_->layout();
    for (int l = 0; l < m.layers(); ++l) {
      const double mac = static_cast<double>(m.in(l)) * m.out(l);
      // forward, weight gradient, and the input gradient for every layer but the first
      out.push_back({"dense" + std::to_string(l), {weights_[l], biases_[l]}, m.out(l), (l > 0 ? 6 : 4) * mac});
    }
    return out;
  }

  Status forward_layer(int l, const float* in, int64_t rows, const Parameters& params, float* out) override {
    const float* w = params[weights_[l]];
    const float* b = params[biases_[l]];
    if (precision_ != DType::f32) {
      w = rounded(low_w_, w, weight_count(l));
      b = rounded(low_b_, b, static_cast<size_t>(dense(l).out));
      if (l == 0) in = rounded(low_in_, in, static_cast<size_t>(rows * dense(0).in));
    }
    dense(l).forward(in, rows, w, b, out);
    round(out, static_cast<size_t>(rows * dense(l).out));
    return {};
  }

  Status backward_layer(int l, const float* in, const float* out, float* dout, int64_t rows, const Parameters& params,
                        Gradients& grads, float* din) override {
    const float* w = params[weights_[l]];
    if (precision_ != DType::f32) {
      round(dout, static_cast<size_t>(rows * dense(l).out));  // the loss's gradient, scaled (mlp.h)
      w = rounded(low_w_, w, weight_count(l));
      if (l == 0) in = rounded(low_in_, in, static_cast<size_t>(rows * dense(0).in));
    }
    dense(l).backward(in, out, dout, rows, w, grads[weights_[l]], grads[biases_[l]], din, bias_sum_);
    round(grads[biases_[l]], static_cast<size_t>(dense(l).out));
    round(grads[weights_[l]], weight_count(l));
    if (din) round(din, static_cast<size_t>(rows * dense(l).in));
    return {};
  }

  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override {
    BatchStats s;
    s.correct = 0;
    s.loss = cpu::softmax_xent(out, labels, static_cast<int>(rows), model_->layout().dims.back(), dout, &s.correct);
    return s;
  }

  // --loss mse: the mean squared error over every output, as regress() computes it.
  bool scores_values() const override { return regression_; }
  Expected<BatchStats> output_loss_values(const float* out, const float* targets, int64_t rows, float* dout) override {
    if (!regression_) return invalid_argument("the mlp was set up for classes, not target values");
    return squared_error(out, targets, rows * model_->layout().dims.back(), 1.0f, dout);
  }

 private:
  // Every layer's output for `rows` examples into acts_ (f32).
  void forward_layers(const float* x, int64_t rows, const Parameters& params) {
    const MlpLayout& m = model_->layout();
    acts_.resize(static_cast<size_t>(m.layers()));
    for (int l = 0; l < m.layers(); ++l) {
      acts_[l].resize(static_cast<size_t>(rows * m.out(l)));
      dense(l).forward(l == 0 ? x : acts_[l - 1].data(), rows, params[weights_[l]], params[biases_[l]], acts_[l].data());
    }
  }

  // Regression: the mean squared error over every output of the batch and, when `grads` is given,
  // its gradient (times the loss scale), each block announced as backward finishes it.
  Expected<BatchStats> regress(const Batch& batch, const Parameters& params, Gradients* grads) {
    if (!batch.targets) return invalid_argument("the mlp's regression needs target values (Batch::targets)");
    const MlpLayout& m = model_->layout();
    const int64_t rows = batch.size, width = m.dims.back(), n = rows * width;
    forward_layers(batch.inputs, rows, params);
    const float* y = acts_.back().data();
    if (grads) dout_.resize(static_cast<size_t>(n));
    const BatchStats s = squared_error(y, batch.targets, n, batch.loss_scale, grads ? dout_.data() : nullptr);
    if (!grads) return s;
    float* dy = dout_.data();
    for (int l = m.layers() - 1; l >= 0; --l) {
      float* dx = nullptr;
      if (l > 0) {
        din_.resize(static_cast<size_t>(rows * m.in(l)));
        dx = din_.data();
      }
      dense(l).backward(l == 0 ? batch.inputs : acts_[l - 1].data(), acts_[l].data(), dy, rows, params[weights_[l]],
                        (*grads)[weights_[l]], (*grads)[biases_[l]], dx, bias_sum_);
      grads->ready(biases_[l]);
      grads->ready(weights_[l]);
      if (dx) {
        dout_.swap(din_);
        dy = dout_.data();
      }
    }
    return s;
  }

  // The mean of (y - t)^2 over n values and, when `dy` is given, its gradient times `scale`.
  static BatchStats squared_error(const float* y, const float* t, int64_t n, float scale, float* dy) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = static_cast<double>(y[i]) - t[i];
      sum += d * d;
    }
    BatchStats s;
    s.correct = -1;
    s.loss = n > 0 ? static_cast<float>(sum / static_cast<double>(n)) : 0.0f;
    if (dy) {
      const float k = 2.0f * scale / static_cast<float>(std::max<int64_t>(n, 1));
      for (int64_t i = 0; i < n; ++i) dy[i] = k * (y[i] - t[i]);
    }
    return s;
  }

  // --precision bf16|f16 in the LayerModel: values rounded in place, or a rounded copy in `into`.
  void round(float* x, size_t n) const {
    if (precision_ != DType::f32) cpu::round_to(precision_, x, x, n);
  }
  const float* rounded(std::vector<float>& into, const float* x, size_t n) const {
    into.resize(n);
    cpu::round_to(precision_, x, into.data(), n);
    return into.data();
  }
  size_t weight_count(int l) const { return static_cast<size_t>(dense(l).in) * static_cast<size_t>(dense(l).out); }

  DenseLayer dense(int l) const {
    const MlpLayout& m = model_->layout();
    return DenseLayer{m.in(l), m.out(l), l + 1 < m.layers()};
  }

  std::unique_ptr<MlpCpu> model_;
  std::vector<Param> weights_, biases_;  // per layer
  std::vector<float> bias_sum_;          // one micro-batch's bias gradient before it is added
  bool regression_ = false;              // the target holds values: mean squared error
  DType precision_ = DType::f32;         // TrainerContext::precision
  std::vector<float> low_w_, low_b_, low_in_;  // the LayerModel's rounded copies
  std::vector<std::vector<float>> acts_;  // regression and predict: every layer's output
  std::vector<float> dout_, din_;         // regression: the gradient flowing back
};

}  // namespace

TROUPE_REGISTER_TRAINER("mlp", MlpTrainer);

}  // namespace troupe
