// The built-in MLP as a Trainer over the public API (trainers/api/trainer.h), registered as "mlp":
// the same interface a user's library implements. Setting: hidden (layer sizes, "256,128").
//
// Parameters are declared W_0, b_0, W_1, b_1, ... with uniform(+-1/sqrt(in)) initialisation, which
// lays them out exactly as MlpLayout and fills them exactly as mlp_init does from the same seed (the
// runtime draws every block in declaration order from one generator), so the GPU trainer and
// checkpoints keep reading the same flat buffer.
//
// It is also a LayerModel (one layer per dense layer), so `--strategy pipeline` can split it.
#include <cmath>

#include "kernels/cpu/ops.h"
#include "trainers/api/trainer.h"
#include "trainers/dense_layer.h"
#include "trainers/mlp.h"

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
    dims.push_back(ctx.data.classes);
    auto layout = MlpLayout::make(dims);
    if (!layout.ok()) return layout.status();
    for (int l = 0; l < layout->layers(); ++l) {
      const Init init = Init::uniform(1.0f / std::sqrt(static_cast<float>(layout->in(l))));
      weights_.push_back(space.declare("w" + std::to_string(l), {layout->in(l), layout->out(l)}, init));
      biases_.push_back(space.declare("b" + std::to_string(l), {layout->out(l)}, init));
    }
    model_ = std::make_unique<MlpCpu>(*layout);
    model_->set_precision(ctx.precision);
    return {};
  }

  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override {
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
    BatchStats s;
    s.correct = 0;
    s.loss = model_->evaluate(params.data(), batch.inputs, batch.labels, static_cast<int>(batch.size), &s.correct);
    return s;
  }

  std::string describe() const override { return model_ ? model_->layout().to_string() : std::string(); }

  bool supports_precision(DType) const override { return true; }  // mlp.h's rounding, all three

  // A pipeline's layers compute in f32 (the runtime refuses --precision with --strategy pipeline).
  LayerModel* layers() override { return this; }

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
    dense(l).forward(in, rows, params[weights_[l]], params[biases_[l]], out);
    return {};
  }

  Status backward_layer(int l, const float* in, const float* out, float* dout, int64_t rows, const Parameters& params,
                        Gradients& grads, float* din) override {
    dense(l).backward(in, out, dout, rows, params[weights_[l]], grads[weights_[l]], grads[biases_[l]], din,
                      bias_sum_);
    return {};
  }

  Expected<BatchStats> output_loss(const float* out, const int32_t* labels, int64_t rows, float* dout) override {
    BatchStats s;
    s.correct = 0;
    s.loss = cpu::softmax_xent(out, labels, static_cast<int>(rows), model_->layout().dims.back(), dout, &s.correct);
    return s;
  }

 private:
  DenseLayer dense(int l) const {
    const MlpLayout& m = model_->layout();
    return DenseLayer{m.in(l), m.out(l), l + 1 < m.layers()};
  }

  std::unique_ptr<MlpCpu> model_;
  std::vector<Param> weights_, biases_;  // per layer
  std::vector<float> bias_sum_;          // one micro-batch's bias gradient before it is added
};

}  // namespace

TROUPE_REGISTER_TRAINER("mlp", MlpTrainer);

void link_builtin_mlp_trainer() {}  // see trainers/trainer_registry.cc

}  // namespace troupe
