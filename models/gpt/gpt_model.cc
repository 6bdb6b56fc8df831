#include "models/gpt/gpt_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/ops.h"

namespace troupe::models {
namespace {

namespace cpu = kernels::cpu;
constexpr float kLnEps = 1e-5f;

}  // namespace

const float* GptModel::operand(const float* x, size_t n, std::vector<float>& buf) const {
  if (precision_ == DType::f32) return x;
  if (buf.size() < n) buf.resize(n);
  cpu::round_to(precision_, x, buf.data(), n);
  return buf.data();
}

void GptModel::linear(const float* x, const float* w, int64_t rows, int64_t in, int64_t out, float* y,
                      bool accumulate) const {
  cpu::matmul(false, false, static_cast<int>(rows), static_cast<int>(out), static_cast<int>(in), 1.0f,
              operand(x, static_cast<size_t>(rows * in), low_x_), operand(w, static_cast<size_t>(in * out), low_w_),
              accumulate ? 1.0f : 0.0f, y);
}

void GptModel::dense_backward(const float* x, const Parameters& params, Gradients& grads, const Param& w,
                              const Param& b, const float* dy, int64_t rows, int64_t in, int64_t out, float* dx) const {
  cpu::bias_grad_add(dy, rows, out, grads[b]);
  const float* g = operand(dy, static_cast<size_t>(rows * out), low_dy_);
  // dW [in x out] += x^T dy; dx [rows x in] = dy W^T.
  cpu::matmul(true, false, static_cast<int>(in), static_cast<int>(out), static_cast<int>(rows), 1.0f,
              operand(x, static_cast<size_t>(rows * in), low_x_), g, 1.0f, grads[w]);
  if (dx)
    cpu::matmul(false, true, static_cast<int>(rows), static_cast<int>(in), static_cast<int>(out), 1.0f, g,
                operand(params[w], static_cast<size_t>(in * out), low_w_), 0.0f, dx);
  grads.ready(b);
  grads.ready(w);
}

void GptModel::declare(ParameterSpace& space) {
  const int64_t D = c_.dim;
  const Init w = Init::normal(0.02f);
  const Init residual = Init::normal(0.02f / std::sqrt(2.0f * static_cast<float>(c_.layers)));
  wte_ = space.declare("wte", {c_.vocab, D}, w);
  wpe_ = space.declare("wpe", {c_.context, D}, w);
  blocks_.clear();
  for (int64_t l = 0; l < c_.layers; ++l) {
    const std::string p = "h" + std::to_string(l) + ".";
    BlockParams b;
    b.ln1_g = space.declare(p + "ln1.g", {D}, Init::constant(1.0f));
    b.ln1_b = space.declare(p + "ln1.b", {D}, Init::zeros());
    b.attn_w = space.declare(p + "attn.w", {D, 3 * D}, w);
    b.attn_b = space.declare(p + "attn.b", {3 * D}, Init::zeros());
    b.proj_w = space.declare(p + "proj.w", {D, D}, residual);
    b.proj_b = space.declare(p + "proj.b", {D}, Init::zeros());
    b.ln2_g = space.declare(p + "ln2.g", {D}, Init::constant(1.0f));
    b.ln2_b = space.declare(p + "ln2.b", {D}, Init::zeros());
    b.fc_w = space.declare(p + "fc.w", {D, 4 * D}, w);
    b.fc_b = space.declare(p + "fc.b", {4 * D}, Init::zeros());
    b.fc2_w = space.declare(p + "fc2.w", {4 * D, D}, residual);
    b.fc2_b = space.declare(p + "fc2.b", {D}, Init::zeros());
    blocks_.push_back(b);
  }
  lnf_g_ = space.declare("lnf.g", {D}, Init::constant(1.0f));
  lnf_b_ = space.declare("lnf.b", {D}, Init::zeros());
  head_ = c_.tie ? wte_ : space.declare("head", {c_.vocab, D}, w);
}

double GptModel::flops_per_token() const {
  const double D = static_cast<double>(c_.dim);
  const double matrices = c_.layers * 12.0 * D * D + static_cast<double>(c_.vocab) * D;  // the head's product
  return 6.0 * matrices + 12.0 * c_.layers * D * static_cast<double>(c_.context);
}

void GptModel::BlockActs::resize(int64_t batch, int64_t seq, const GptConfig& c) {
  const size_t N = static_cast<size_t>(batch * seq), D = static_cast<size_t>(c.dim);
  for (auto* v : {&ln1, &att, &mid, &ln2}) v->resize(N * D);
  for (auto* v : {&ln1_mean, &ln1_rstd, &ln2_mean, &ln2_rstd}) v->resize(N);
  qkv.resize(N * 3 * D);
  fc.resize(N * 4 * D);
  act.resize(N * 4 * D);
  probs.resize(static_cast<size_t>(batch * c.heads * seq * seq));
}

void GptModel::resize(int64_t batch, int64_t seq) {
  const size_t N = static_cast<size_t>(batch * seq), D = static_cast<size_t>(c_.dim);
  batch_ = batch;
  seq_ = seq;
  acts_.resize(static_cast<size_t>(c_.layers));
  xs_.resize(static_cast<size_t>(c_.layers));
  for (BlockActs& a : acts_) a.resize(batch, seq, c_);
  for (auto& x : xs_) x.resize(N * D);
  final_.resize(N * D);
  lnf_.resize(N * D);
  lnf_mean_.resize(N);
  lnf_rstd_.resize(N);
  logits_.resize(N * static_cast<size_t>(c_.vocab));
}

Status GptModel::check_ids(const int32_t* tokens, const int32_t* targets, int64_t batch, int64_t seq) const {
  if (seq > c_.context)
    return invalid_argument("a window of " + std::to_string(seq) + " tokens is longer than the model's context of " +
                            std::to_string(c_.context) + " positions (--seq-len must not exceed --trainer-arg context)");
  const int64_t N = batch * seq, V = c_.vocab;
  for (int64_t i = 0; i < N; ++i)
    if (tokens[i] < 0 || tokens[i] >= V || (targets && (targets[i] < 0 || targets[i] >= V)))
      return invalid_argument("token id " + std::to_string(tokens[i] < 0 || tokens[i] >= V ? tokens[i] : targets[i]) +
                              " of window " + std::to_string(i / seq) + " is outside the model's vocabulary of " +
                              std::to_string(V) + " (--trainer-arg vocab)");
  return {};
}

void GptModel::embed(const int32_t* tokens, int64_t batch, int64_t seq, const Parameters& params, float* x) const {
  const int64_t N = batch * seq, D = c_.dim;
  for (int64_t i = 0; i < N; ++i) {
    const float* te = params[wte_] + tokens[i] * D;
    const float* pe = params[wpe_] + (i % seq) * D;
    for (int64_t c = 0; c < D; ++c) x[i * D + c] = te[c] + pe[c];
  }
}

void GptModel::embed_backward(const int32_t* tokens, const float* dx, int64_t batch, int64_t seq,
                              Gradients& grads) const {
  // Every position's gradient into its token's and its position's rows.
  const int64_t N = batch * seq, D = c_.dim;
  float* dwte = grads[wte_];
  float* dwpe = grads[wpe_];
  for (int64_t i = 0; i < N; ++i) {
    const float* d = dx + i * D;
    float* te = dwte + tokens[i] * D;
    float* pe = dwpe + (i % seq) * D;
    for (int64_t c = 0; c < D; ++c) {
      te[c] += d[c];
      pe[c] += d[c];
    }
  }
  grads.ready(wpe_);
  grads.ready(wte_);
}

void GptModel::block_forward(int64_t l, const float* x, int64_t batch, int64_t seq, const Parameters& params,
                             BlockActs& a, float* out) const {
  const int64_t N = batch * seq, D = c_.dim;
  const cpu::AttentionShape shape{batch, seq, c_.heads, D};
  const BlockParams& p = blocks_[l];
  cpu::layernorm_forward(x, params[p.ln1_g], params[p.ln1_b], N, D, kLnEps, a.ln1.data(), a.ln1_mean.data(),
                         a.ln1_rstd.data());
  linear(a.ln1.data(), params[p.attn_w], N, D, 3 * D, a.qkv.data());
  cpu::bias_act(a.qkv.data(), params[p.attn_b], static_cast<int>(N), static_cast<int>(3 * D), false);
  if (precision_ != DType::f32) cpu::round_to(precision_, a.qkv.data(), a.qkv.data(), a.qkv.size());
  cpu::attention_forward(a.qkv.data(), shape, a.probs.data(), a.att.data());
  std::copy(x, x + N * D, a.mid.begin());
  linear(a.att.data(), params[p.proj_w], N, D, D, a.mid.data(), true);
  cpu::bias_act(a.mid.data(), params[p.proj_b], static_cast<int>(N), static_cast<int>(D), false);
  cpu::layernorm_forward(a.mid.data(), params[p.ln2_g], params[p.ln2_b], N, D, kLnEps, a.ln2.data(), a.ln2_mean.data(),
                         a.ln2_rstd.data());
  linear(a.ln2.data(), params[p.fc_w], N, D, 4 * D, a.fc.data());
  cpu::bias_act(a.fc.data(), params[p.fc_b], static_cast<int>(N), static_cast<int>(4 * D), false);
  cpu::gelu_forward(a.fc.data(), a.act.data(), a.fc.size());
  std::copy(a.mid.begin(), a.mid.end(), out);
  linear(a.act.data(), params[p.fc2_w], N, 4 * D, D, out, true);
  cpu::bias_act(out, params[p.fc2_b], static_cast<int>(N), static_cast<int>(D), false);
}

void GptModel::block_backward(int64_t l, const float* x, const BlockActs& a, int64_t batch, int64_t seq,
                              const Parameters& params, Gradients& grads, float* dx) {
  const int64_t N = batch * seq, D = c_.dim;
  const cpu::AttentionShape shape{batch, seq, c_.heads, D};
  const BlockParams& p = blocks_[l];
  dln_.resize(static_cast<size_t>(N * D));
  dwide_.resize(static_cast<size_t>(N * 4 * D));
  dqkv_.resize(static_cast<size_t>(N * 3 * D));
  datt_.resize(static_cast<size_t>(N * D));
  scratch_.resize(static_cast<size_t>(seq * seq));
  // x_out = mid + fc2(gelu(fc(ln2(mid)))): dx holds d x_out.
  dense_backward(a.act.data(), params, grads, p.fc2_w, p.fc2_b, dx, N, 4 * D, D, dwide_.data());
  cpu::gelu_backward(a.fc.data(), dwide_.data(), dwide_.data(), dwide_.size());
  dense_backward(a.ln2.data(), params, grads, p.fc_w, p.fc_b, dwide_.data(), N, D, 4 * D, dln_.data());
  cpu::layernorm_backward(dln_.data(), a.mid.data(), params[p.ln2_g], a.ln2_mean.data(), a.ln2_rstd.data(), N, D, dx,
                          grads[p.ln2_g], grads[p.ln2_b]);  // dx: d mid
  grads.ready(p.ln2_b);
  grads.ready(p.ln2_g);
  // mid = x + proj(attention(qkv(ln1(x)))).
  dense_backward(a.att.data(), params, grads, p.proj_w, p.proj_b, dx, N, D, D, datt_.data());
  cpu::attention_backward(a.qkv.data(), a.probs.data(), datt_.data(), shape, dqkv_.data(), scratch_.data());
  dense_backward(a.ln1.data(), params, grads, p.attn_w, p.attn_b, dqkv_.data(), N, D, 3 * D, dln_.data());
  cpu::layernorm_backward(dln_.data(), x, params[p.ln1_g], a.ln1_mean.data(), a.ln1_rstd.data(), N, D, dx,
                          grads[p.ln1_g], grads[p.ln1_b]);  // dx: d x
  grads.ready(p.ln1_b);
  grads.ready(p.ln1_g);
}

Expected<float> GptModel::forward(const std::vector<int32_t>& tokens, const int32_t* targets, int64_t batch,
                                  int64_t seq, const Parameters& params) {
  TROUPE_RETURN_IF_ERROR(check_ids(tokens.data(), targets, batch, seq));
  const int64_t N = batch * seq, V = c_.vocab;
  resize(batch, seq);
  tokens_ = tokens;
  if (targets) targets_.assign(targets, targets + N);
  embed(tokens.data(), batch, seq, params, c_.layers > 0 ? xs_[0].data() : final_.data());
  for (int64_t l = 0; l < c_.layers; ++l)
    block_forward(l, xs_[l].data(), batch, seq, params, acts_[l], l + 1 < c_.layers ? xs_[l + 1].data() : final_.data());
  head_forward(final_.data(), N, params, lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), logits_.data());
  if (!targets) return 0.0f;
  // The loss's gradient replaces the logits (the backward's first input; scaled there).
  return cpu::vocab_xent(logits_.data(), targets_.data(), N, V, 1.0f, logits_.data());
}

void GptModel::head_forward(const float* x, int64_t N, const Parameters& params, float* lnf, float* mean, float* rstd,
                            float* logits) const {
  const int64_t D = c_.dim, V = c_.vocab;
  cpu::layernorm_forward(x, params[lnf_g_], params[lnf_b_], N, D, kLnEps, lnf, mean, rstd);
  cpu::matmul(false, true, static_cast<int>(N), static_cast<int>(V), static_cast<int>(D), 1.0f,
              operand(lnf, static_cast<size_t>(N * D), low_x_), operand(params[head_], static_cast<size_t>(V * D), low_w_),
              0.0f, logits);
}

void GptModel::head_backward(const float* x, const float* lnf, const float* mean, const float* rstd,
                             const float* dlogits, int64_t N, const Parameters& params, Gradients& grads, float* dx) {
  const int64_t D = c_.dim, V = c_.vocab;
  dln_.resize(static_cast<size_t>(N * D));
  // logits = lnf head^T.
  const float* g = operand(dlogits, static_cast<size_t>(N * V), low_dy_);
  cpu::matmul(false, false, static_cast<int>(N), static_cast<int>(D), static_cast<int>(V), 1.0f, g,
              operand(params[head_], static_cast<size_t>(V * D), low_w_), 0.0f, dln_.data());
  cpu::matmul(true, false, static_cast<int>(V), static_cast<int>(D), static_cast<int>(N), 1.0f, g,
              operand(lnf, static_cast<size_t>(N * D), low_x_), 1.0f, grads[head_]);
  if (!c_.tie) grads.ready(head_);
  cpu::layernorm_backward(dln_.data(), x, params[lnf_g_], mean, rstd, N, D, dx, grads[lnf_g_], grads[lnf_b_]);
  grads.ready(lnf_b_);
  grads.ready(lnf_g_);
}

void GptModel::backward(const Parameters& params, Gradients& grads, float loss_scale) {
  const int64_t N = batch_ * seq_, D = c_.dim;
  float* dlogits = logits_.data();
  if (loss_scale != 1.0f) cpu::scale(dlogits, logits_.size(), loss_scale);
  dx_.assign(static_cast<size_t>(N * D), 0.0f);
  head_backward(final_.data(), lnf_.data(), lnf_mean_.data(), lnf_rstd_.data(), dlogits, N, params, grads, dx_.data());
  for (int64_t l = c_.layers - 1; l >= 0; --l)
    block_backward(l, xs_[l].data(), acts_[l], batch_, seq_, params, grads, dx_.data());
  embed_backward(tokens_.data(), dx_.data(), batch_, seq_, grads);
}

}  // namespace troupe::models
