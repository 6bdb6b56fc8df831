#include "models/gpt/gpt_decoder.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/ops.h"

namespace troupe::models {
namespace {
namespace cpu = kernels::cpu;
constexpr float kLnEps = 1e-5f;  // as gpt_model.cc
}  // namespace

GptDecoder::GptDecoder(const GptModel& model) : model_(model), p_(model.params()) {
  const GptConfig& c = model.config();
  keys_.assign(static_cast<size_t>(c.layers), std::vector<float>(static_cast<size_t>(c.context * c.dim)));
  values_ = keys_;
  h_.resize(static_cast<size_t>(c.dim));
  ln_.resize(h_.size());
  att_.resize(h_.size());
  qkv_.resize(3 * h_.size());
  fc_.resize(4 * h_.size());
  logits_.resize(static_cast<size_t>(c.vocab));
  scores_.resize(static_cast<size_t>(c.context));
  mean_.resize(1);
  rstd_.resize(1);
}

Expected<const float*> GptDecoder::step(int32_t token, const Parameters& params) {
  const GptConfig& c = model_.config();
  const GptModel::Params& p = p_;
  const int64_t D = c.dim, hd = c.head_dim();
  if (token < 0 || token >= c.vocab)
    return invalid_argument("token id " + std::to_string(token) + " is outside the model's vocabulary of " +
                            std::to_string(c.vocab));
  if (pos_ >= c.context)
    return invalid_argument("the context is full: the model has " + std::to_string(c.context) +
                            " positions (--trainer-arg context); generate fewer tokens or shorten the prompt");
  auto linear = [&](const float* x, const Param& w, const Param& b, int64_t in, int64_t out, float* y, bool add) {
    cpu::matmul(false, false, 1, static_cast<int>(out), static_cast<int>(in), 1.0f, x, params[w], add ? 1.0f : 0.0f, y);
    cpu::bias_act(y, params[b], 1, static_cast<int>(out), false);
  };
  for (int64_t i = 0; i < D; ++i) h_[i] = params[p.wte][token * D + i] + params[p.wpe][pos_ * D + i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t l = 0; l < c.layers; ++l) {
    const GptModel::BlockParams& b = p.blocks[l];
    cpu::layernorm_forward(h_.data(), params[b.ln1_g], params[b.ln1_b], 1, D, kLnEps, ln_.data(), mean_.data(), rstd_.data());
    linear(ln_.data(), b.attn_w, b.attn_b, D, 3 * D, qkv_.data(), false);
    std::copy_n(qkv_.data() + D, D, keys_[l].data() + pos_ * D);
    std::copy_n(qkv_.data() + 2 * D, D, values_[l].data() + pos_ * D);
    for (int64_t h = 0; h < c.heads; ++h) {  // this position against every cached one, as attention.cc
      const float* q = qkv_.data() + h * hd;
      float top = -INFINITY;
      for (int64_t j = 0; j <= pos_; ++j) {
        const float* k = keys_[l].data() + j * D + h * hd;
        float dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[d];
        scores_[j] = dot * scale;
        top = std::max(top, scores_[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j <= pos_; ++j) sum += scores_[j] = cpu::exp_f32(scores_[j] - top);
      float* o = att_.data() + h * hd;
      std::fill(o, o + hd, 0.0f);
      for (int64_t j = 0; j <= pos_; ++j) {
        const float w = scores_[j] / sum;
        const float* v = values_[l].data() + j * D + h * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] += w * v[d];
      }
    }
    linear(att_.data(), b.proj_w, b.proj_b, D, D, h_.data(), true);
    cpu::layernorm_forward(h_.data(), params[b.ln2_g], params[b.ln2_b], 1, D, kLnEps, ln_.data(), mean_.data(), rstd_.data());
    linear(ln_.data(), b.fc_w, b.fc_b, D, 4 * D, fc_.data(), false);
    cpu::gelu_forward(fc_.data(), fc_.data(), fc_.size());
    linear(fc_.data(), b.fc2_w, b.fc2_b, 4 * D, D, h_.data(), true);
  }
  cpu::layernorm_forward(h_.data(), params[p.lnf_g], params[p.lnf_b], 1, D, kLnEps, ln_.data(), mean_.data(), rstd_.data());
  cpu::matmul(false, true, 1, static_cast<int>(c.vocab), static_cast<int>(D), 1.0f, ln_.data(), params[p.head], 0.0f,
              logits_.data());
  ++pos_;
  return static_cast<const float*>(logits_.data());
}

}  // namespace troupe::models
