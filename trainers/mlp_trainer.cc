// The built-in MLP as a Trainer over the public API (trainers/api/trainer.h), registered as "mlp":
// the same interface a user's library implements. Setting: hidden (layer sizes, "256,128").
//
// Parameters are declared W_0, b_0, W_1, b_1, ... with uniform(+-1/sqrt(in)) initialisation, which
// lays them out exactly as MlpLayout and fills them exactly as mlp_init does from the same seed (the
// runtime draws every block in declaration order from one generator), so the GPU trainer and
// checkpoints keep reading the same flat buffer.
#include <cmath>

#include "trainers/api/trainer.h"
#include "trainers/mlp.h"

namespace troupe {
namespace {

class MlpTrainer final : public Trainer {
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
                                      });
    return s;
  }

  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override {
    BatchStats s;
    s.correct = 0;
    s.loss = model_->evaluate(params.data(), batch.inputs, batch.labels, static_cast<int>(batch.size), &s.correct);
    return s;
  }

  std::string describe() const override { return model_ ? model_->layout().to_string() : std::string(); }

 private:
  std::unique_ptr<MlpCpu> model_;
  std::vector<Param> weights_, biases_;  // per layer
};

}  // namespace

TROUPE_REGISTER_TRAINER("mlp", MlpTrainer);

void link_builtin_mlp_trainer() {}  // see trainers/trainer_registry.cc

}  // namespace troupe
