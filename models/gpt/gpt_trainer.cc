// The GPT-style decoder as a built-in trainer, registered as "gpt" (`troupe train --model gpt
// --seq-len T --data TOKENS`): it reads the token windows' fields "tokens" and "targets"
// (data/token_windows.h) and scores the next token at every position. Settings: gpt_config.h.
// predict() gives the next token's logits after each window's last position.
#include <algorithm>
#include <cmath>
#include <memory>

#include "models/gpt/gpt_layers.h"
#include "models/gpt/gpt_model.h"

namespace troupe::models {
namespace {

class GptTrainer final : public Trainer {
 public:
  std::vector<FieldNeed> required_fields(const JobConfig&) const override {
    return {{"tokens", {ValueType::f32}, 1}, {"targets", {ValueType::i32}, 1}};
  }

  Status setup(const TrainerContext& ctx, ParameterSpace& space) override {
    const FieldSpec* tokens = ctx.data.field("tokens");
    const int64_t seq = tokens && tokens->shape.size() == 1 ? tokens->shape[0] : 0;
    auto config = GptConfig::from(ctx.config, seq, ctx.data.classes);
    if (!config.ok()) return config.status();
    model_ = std::make_unique<GptModel>(*config);
    model_->set_precision(ctx.precision);
    model_->declare(space);
    layers_ = std::make_unique<GptLayers>(*model_, seq);  // tied: the head layer shares layer 0's wte
    return {};
  }

  Expected<BatchStats> forward_backward(const Batch& batch, const Parameters& params, Gradients& grads) override {
    auto loss = run(batch, params, true, 0, batch.size);
    if (!loss.ok()) return loss.status();
    model_->backward(params, grads, batch.loss_scale);
    return BatchStats{*loss, -1};
  }

  // In slices of about kEvalTokens tokens: the runtime evaluates 1000 windows at a time, whose
  // activations (attention probabilities: windows x heads x T^2 per layer) would not fit.
  Expected<BatchStats> evaluate(const Batch& batch, const Parameters& params) override {
    if (batch.size <= 0) return BatchStats{0.0f, -1};
    const int64_t step = slice_windows(batch);
    double sum = 0;
    for (int64_t first = 0; first < batch.size; first += step) {
      const int64_t count = std::min(step, batch.size - first);
      auto loss = run(batch, params, true, first, count);
      if (!loss.ok()) return loss.status();
      sum += static_cast<double>(*loss) * static_cast<double>(count);
    }
    return BatchStats{static_cast<float>(sum / static_cast<double>(batch.size)), -1};  // positions, not examples
  }

  // bf16 / f16: the products' operands rounded, f32 elsewhere (gpt_model.h); the runtime keeps the
  // master weights and scales the loss for f16 (Batch::loss_scale reaches backward).
  bool supports_precision(DType) const override { return true; }

  std::string describe() const override { return model_ ? model_->config().describe() : std::string(); }

  // The embeddings, each block and the head as layers (gpt_layers.h).
  LayerModel* layers() override { return layers_.get(); }

  int64_t prediction_width() const override { return model_ ? model_->config().vocab : 0; }

  Status predict(const Batch& batch, const Parameters& params, float* out) override {
    const int64_t step = slice_windows(batch), V = model_->config().vocab;
    for (int64_t first = 0; first < batch.size; first += step) {
      const int64_t count = std::min(step, batch.size - first);
      auto ran = run(batch, params, false, first, count);
      if (!ran.ok()) return ran.status();
      const int64_t T = static_cast<int64_t>(tokens_.size()) / count;
      for (int64_t b = 0; b < count; ++b)
        std::copy_n(model_->logits() + ((b + 1) * T - 1) * V, V, out + (first + b) * V);
    }
    return {};
  }

 private:
  static constexpr int64_t kEvalTokens = 8192;
  static int64_t slice_windows(const Batch& batch) {
    const FieldView* tokens = batch.field("tokens");
    const int64_t T = tokens && tokens->rank == 2 ? std::max<int64_t>(1, tokens->shape[1]) : 1;
    return std::max<int64_t>(1, kEvalTokens / T);
  }

  // Windows [first, first + count) of the batch into tokens_ (ids, checked to be integers) and
  // the forward.
  Expected<float> run(const Batch& batch, const Parameters& params, bool with_targets, int64_t first, int64_t count) {
    const FieldView* tokens = batch.field("tokens");
    const FieldView* targets = batch.field("targets");
    if (!tokens || !tokens->f32() || tokens->rank != 2 || (with_targets && (!targets || !targets->i32())))
      return invalid_argument("the gpt reads the fields 'tokens' (f32 ids) and 'targets' (i32): train with --seq-len");
    const int64_t T = tokens->shape[1];
    tokens_.resize(static_cast<size_t>(count * T));
    targets_.resize(with_targets ? tokens_.size() : 0);
    for (int64_t b = 0; b < count; ++b)
      for (int64_t t = 0; t < T; ++t) {
        const float id = tokens->f32()[(first + b) * tokens->row_stride + t];
        tokens_[b * T + t] = id == std::floor(id) && std::fabs(id) < (1 << 24) ? static_cast<int32_t>(id) : -1;
        if (with_targets) targets_[b * T + t] = targets->i32()[(first + b) * targets->row_stride + t];
      }
    return model_->forward(tokens_, with_targets ? targets_.data() : nullptr, count, T, params);
  }

  std::unique_ptr<GptModel> model_;
  std::unique_ptr<GptLayers> layers_;
  std::vector<int32_t> tokens_, targets_;
};

}  // namespace
}  // namespace troupe::models

TROUPE_REGISTER_TRAINER("gpt", troupe::models::GptTrainer);
