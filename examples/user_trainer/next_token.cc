// A user's next-token model over token windows (`troupe train --seq-len T`), registered as
// "bigram": the logits of the next token are a row of a learned vocab x vocab table picked by the
// current token. It shows the data side of the trainer API: the fields it reads by name
// (required_fields: the runtime refuses data without them before anything starts), a target of T
// labels per example (Batch::target_width), and predict(). On a token stream drawn from a Markov
// chain its loss goes down to the chain's entropy rate, the floor no model can beat.
//
//   python3 examples/own_data/make_tokens.py DIR    # a Markov chain's train.bin / val.bin, u16
//   troupe train --lib build-user/libuser_trainer.so --trainer bigram --data DIR --seq-len 32
#include <algorithm>
#include <cmath>
#include <vector>

#include "trainers/api/trainer.h"

namespace {

class Bigram final : public troupe::Trainer {
 public:
  std::vector<troupe::FieldNeed> required_fields(const troupe::JobConfig&) const override {
    return {{"tokens", {troupe::ValueType::f32}, 1}, {"targets", {troupe::ValueType::i32}, 1}};
  }

  troupe::Status setup(const troupe::TrainerContext& ctx, troupe::ParameterSpace& space) override {
    vocab_ = ctx.data.classes;
    if (vocab_ < 2) return troupe::invalid_argument("the bigram model needs a vocabulary of at least 2 tokens");
    table_ = space.declare("table", {vocab_, vocab_}, troupe::Init::zeros());
    return {};
  }

  troupe::Expected<troupe::BatchStats> forward_backward(const troupe::Batch& batch, const troupe::Parameters& params,
                                                        troupe::Gradients& grads) override {
    return run(batch, params, &grads);
  }

  troupe::Expected<troupe::BatchStats> evaluate(const troupe::Batch& batch, const troupe::Parameters& params) override {
    return run(batch, params, nullptr);
  }

  std::string describe() const override { return "bigram over " + std::to_string(vocab_) + " tokens"; }

  // The next token's logits after the example's last token.
  int64_t prediction_width() const override { return vocab_; }
  troupe::Status predict(const troupe::Batch& batch, const troupe::Parameters& params, float* out) override {
    const troupe::FieldView* tokens = batch.field("tokens");
    if (!tokens) return troupe::invalid_argument("the bigram model predicts from the field 'tokens'");
    const int64_t t = tokens->shape[1];
    for (int64_t r = 0; r < batch.size; ++r) {
      const auto last = static_cast<int64_t>(tokens->f32()[r * tokens->row_stride + t - 1]);
      std::copy_n(params[table_] + last * vocab_, vocab_, out + r * vocab_);
    }
    return {};
  }

 private:
  // The mean cross-entropy of every position's next token; its gradient (softmax - onehot) / N into
  // the table's row of the position's token.
  troupe::Expected<troupe::BatchStats> run(const troupe::Batch& batch, const troupe::Parameters& params,
                                           troupe::Gradients* grads) {
    const troupe::FieldView* tokens = batch.field("tokens");
    const troupe::FieldView* targets = batch.field("targets");
    if (!tokens || !targets || !tokens->f32() || !targets->i32())
      return troupe::invalid_argument("the bigram model reads the fields 'tokens' (f32) and 'targets' (i32)");
    const int64_t t = tokens->shape[1];
    const int64_t positions = batch.size * t;
    const float* table = params[table_];
    std::vector<double> p(static_cast<size_t>(vocab_));
    double loss = 0;
    for (int64_t r = 0; r < batch.size; ++r) {
      for (int64_t i = 0; i < t; ++i) {
        const auto cur = static_cast<int64_t>(tokens->f32()[r * tokens->row_stride + i]);
        const int32_t next = targets->i32()[r * targets->row_stride + i];
        const float* logits = table + cur * vocab_;
        const float top = *std::max_element(logits, logits + vocab_);
        double sum = 0;
        for (int v = 0; v < vocab_; ++v) sum += p[v] = std::exp(static_cast<double>(logits[v] - top));
        loss += std::log(sum) - (logits[next] - top);
        if (!grads) continue;
        float* d = (*grads)[table_] + cur * vocab_;
        const double k = batch.loss_scale / static_cast<double>(positions);
        for (int v = 0; v < vocab_; ++v) d[v] += static_cast<float>(k * (p[v] / sum - (v == next)));
      }
    }
    troupe::BatchStats s;
    s.loss = static_cast<float>(loss / static_cast<double>(positions));
    s.correct = -1;  // it scores positions, not examples
    return s;
  }

  int vocab_ = 0;
  troupe::Param table_;
};

}  // namespace

TROUPE_REGISTER_TRAINER("bigram", Bigram);
