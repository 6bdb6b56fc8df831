#include "models/gpt/gpt_cuda.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/transformer.h"

namespace troupe::models {
namespace {

namespace kc = kernels::cuda;
constexpr float kLnEps = 1e-5f;  // as gpt_model.cc

int I(int64_t v) { return static_cast<int>(v); }

Status allocate(kc::DeviceBuffer<float>& b, int64_t n, const char* what) {
  return b.allocate(static_cast<size_t>(n), what);
}

}  // namespace

GptCuda::GptCuda(GptConfig c, GptModel::Params p, int64_t seq, const kernels::cuda::CublasHandle& blas)
    : c_(c), p_(std::move(p)), seq_(seq), blas_(blas) {
  for (const Param& q : {p_.wte, p_.wpe, p_.lnf_g, p_.lnf_b, p_.head}) params_ = std::max(params_, q.offset + q.numel);
  for (const auto& b : p_.blocks) params_ = std::max(params_, b.fc2_b.offset + b.fc2_b.numel);
}

Status GptCuda::reserve(int rows) {
  if (rows <= capacity_) return {};
  if (seq_ < 1 || seq_ > c_.context)
    return invalid_argument("gpt on the GPU: windows of " + std::to_string(seq_) + " ids; the context is " +
                            std::to_string(c_.context));
  const int64_t N = rows * seq_, D = c_.dim, H = c_.heads, T = seq_, V = c_.vocab;
  TROUPE_RETURN_IF_ERROR(ids_.allocate(static_cast<size_t>(N), "the gpt's token ids"));
  xs_.resize(static_cast<size_t>(c_.layers));
  acts_.resize(static_cast<size_t>(c_.layers));
  for (int64_t l = 0; l < c_.layers; ++l) {
    Acts& a = acts_[static_cast<size_t>(l)];
    TROUPE_RETURN_IF_ERROR(allocate(xs_[static_cast<size_t>(l)], N * D, "a gpt block's input"));
    for (auto* b : {&a.ln1, &a.att, &a.mid, &a.ln2}) TROUPE_RETURN_IF_ERROR(allocate(*b, N * D, "a gpt activation"));
    for (auto* b : {&a.ln1_mean, &a.ln1_rstd, &a.ln2_mean, &a.ln2_rstd})
      TROUPE_RETURN_IF_ERROR(allocate(*b, N, "a gpt LayerNorm's statistics"));
    TROUPE_RETURN_IF_ERROR(allocate(a.qkv, N * 3 * D, "a gpt block's q, k and v"));
    TROUPE_RETURN_IF_ERROR(allocate(a.probs, rows * H * T * T, "a gpt block's attention probabilities"));
    TROUPE_RETURN_IF_ERROR(allocate(a.fc, N * 4 * D, "a gpt block's MLP input"));
    TROUPE_RETURN_IF_ERROR(allocate(a.act, N * 4 * D, "a gpt block's MLP activation"));
  }
  for (auto* b : {&final_, &lnf_, &dx_, &dln_, &datt_}) TROUPE_RETURN_IF_ERROR(allocate(*b, N * D, "a gpt activation"));
  for (auto* b : {&lnf_mean_, &lnf_rstd_, &row_loss_}) TROUPE_RETURN_IF_ERROR(allocate(*b, N, "a gpt per-position value"));
  TROUPE_RETURN_IF_ERROR(allocate(logits_, N * V, "the gpt's logits"));
  TROUPE_RETURN_IF_ERROR(allocate(dwide_, N * 4 * D, "a gpt gradient"));
  TROUPE_RETURN_IF_ERROR(allocate(dqkv_, N * 3 * D, "a gpt gradient"));
  TROUPE_RETURN_IF_ERROR(allocate(scratch_, H * T * T, "the gpt attention's scratch"));
  capacity_ = rows;
  return {};
}

Status GptCuda::block_forward(int64_t l, const float* params, const float* x, int64_t batch, float* out) {
  const int64_t N = batch * seq_, D = c_.dim;
  const GptModel::BlockParams& p = p_.blocks[static_cast<size_t>(l)];
  Acts& a = acts_[static_cast<size_t>(l)];
  const kc::AttentionShape shape{batch, seq_, c_.heads, D};
  TROUPE_RETURN_IF_ERROR(kc::layernorm_forward(x, at(params, p.ln1_g), at(params, p.ln1_b), N, D, kLnEps, a.ln1.get(),
                                               a.ln1_mean.get(), a.ln1_rstd.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, I(N), I(3 * D), I(D), 1.0f, a.ln1.get(), at(params, p.attn_w),
                                    0.0f, a.qkv.get()));
  TROUPE_RETURN_IF_ERROR(kc::bias_act(a.qkv.get(), at(params, p.attn_b), I(N), I(3 * D), false, stream()));
  TROUPE_RETURN_IF_ERROR(kc::attention_forward(blas_, a.qkv.get(), shape, a.probs.get(), a.att.get()));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(a.mid.get(), x, static_cast<size_t>(N * D) * sizeof(float), cudaMemcpyDeviceToDevice,
                                    stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, I(N), I(D), I(D), 1.0f, a.att.get(), at(params, p.proj_w),
                                    1.0f, a.mid.get()));
  TROUPE_RETURN_IF_ERROR(kc::bias_act(a.mid.get(), at(params, p.proj_b), I(N), I(D), false, stream()));
  TROUPE_RETURN_IF_ERROR(kc::layernorm_forward(a.mid.get(), at(params, p.ln2_g), at(params, p.ln2_b), N, D, kLnEps,
                                               a.ln2.get(), a.ln2_mean.get(), a.ln2_rstd.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, I(N), I(4 * D), I(D), 1.0f, a.ln2.get(), at(params, p.fc_w),
                                    0.0f, a.fc.get()));
  TROUPE_RETURN_IF_ERROR(kc::bias_act(a.fc.get(), at(params, p.fc_b), I(N), I(4 * D), false, stream()));
  TROUPE_RETURN_IF_ERROR(kc::gelu_forward(a.fc.get(), a.act.get(), static_cast<size_t>(N * 4 * D), stream()));
  TROUPE_CUDA_CHECK(cudaMemcpyAsync(out, a.mid.get(), static_cast<size_t>(N * D) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, I(N), I(D), I(4 * D), 1.0f, a.act.get(), at(params, p.fc2_w),
                                    1.0f, out));
  return kc::bias_act(out, at(params, p.fc2_b), I(N), I(D), false, stream());
}

Status GptCuda::forward(const float* params, const float* x, const int32_t* labels, int batch, bool grad) {
  if (batch > capacity_)
    return invalid_argument("gpt on the GPU: a batch of " + std::to_string(batch) + " windows; reserved " +
                            std::to_string(capacity_));
  const int64_t N = batch * seq_, D = c_.dim, V = c_.vocab;
  TROUPE_RETURN_IF_ERROR(kc::ids_from_floats(x, N, ids_.get(), stream()));
  float* first = c_.layers > 0 ? xs_[0].get() : final_.get();
  TROUPE_RETURN_IF_ERROR(kc::embed_forward(ids_.get(), at(params, p_.wte), at(params, p_.wpe), N, seq_, D, first, stream()));
  for (int64_t l = 0; l < c_.layers; ++l) {
    float* out = l + 1 < c_.layers ? xs_[static_cast<size_t>(l + 1)].get() : final_.get();
    TROUPE_RETURN_IF_ERROR(block_forward(l, params, xs_[static_cast<size_t>(l)].get(), batch, out));
  }
  TROUPE_RETURN_IF_ERROR(kc::layernorm_forward(final_.get(), at(params, p_.lnf_g), at(params, p_.lnf_b), N, D, kLnEps,
                                               lnf_.get(), lnf_mean_.get(), lnf_rstd_.get(), stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, true, I(N), I(V), I(D), 1.0f, lnf_.get(), at(params, p_.head), 0.0f,
                                    logits_.get()));
  // The loss's gradient replaces the logits when training (the backward's first input).
  return kc::vocab_xent(logits_.get(), labels, N, V, 1.0f, grad ? logits_.get() : nullptr, row_loss_.get(), stream());
}

Status GptCuda::dense_backward(const float* x, const float* w, float* dw, float* db, const float* dy, int64_t rows,
                               int64_t in, int64_t out, float* dx) {
  TROUPE_RETURN_IF_ERROR(kc::bias_grad_add(dy, rows, out, db, stream()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, true, false, I(in), I(out), I(rows), 1.0f, x, dy, 1.0f, dw));
  if (!dx) return {};
  return kc::matmul(blas_, false, true, I(rows), I(in), I(out), 1.0f, dy, w, 0.0f, dx);
}

Status GptCuda::block_backward(int64_t l, const float* params, const float* x, int64_t batch, float* grads, float* dx) {
  const int64_t N = batch * seq_, D = c_.dim;
  const GptModel::BlockParams& p = p_.blocks[static_cast<size_t>(l)];
  Acts& a = acts_[static_cast<size_t>(l)];
  const kc::AttentionShape shape{batch, seq_, c_.heads, D};
  // x_out = mid + fc2(gelu(fc(ln2(mid)))): dx holds d x_out.
  TROUPE_RETURN_IF_ERROR(dense_backward(a.act.get(), at(params, p.fc2_w), at(grads, p.fc2_w), at(grads, p.fc2_b), dx, N,
                                        4 * D, D, dwide_.get()));
  TROUPE_RETURN_IF_ERROR(kc::gelu_backward(a.fc.get(), dwide_.get(), dwide_.get(), static_cast<size_t>(N * 4 * D), stream()));
  TROUPE_RETURN_IF_ERROR(dense_backward(a.ln2.get(), at(params, p.fc_w), at(grads, p.fc_w), at(grads, p.fc_b),
                                        dwide_.get(), N, D, 4 * D, dln_.get()));
  TROUPE_RETURN_IF_ERROR(kc::layernorm_backward(dln_.get(), a.mid.get(), at(params, p.ln2_g), a.ln2_mean.get(),
                                                a.ln2_rstd.get(), N, D, dx, at(grads, p.ln2_g), at(grads, p.ln2_b),
                                                stream()));  // dx: d mid
  // mid = x + proj(attention(qkv(ln1(x)))).
  TROUPE_RETURN_IF_ERROR(dense_backward(a.att.get(), at(params, p.proj_w), at(grads, p.proj_w), at(grads, p.proj_b), dx,
                                        N, D, D, datt_.get()));
  TROUPE_RETURN_IF_ERROR(kc::attention_backward(blas_, a.qkv.get(), a.probs.get(), datt_.get(), shape, dqkv_.get(),
                                                scratch_.get()));
  TROUPE_RETURN_IF_ERROR(dense_backward(a.ln1.get(), at(params, p.attn_w), at(grads, p.attn_w), at(grads, p.attn_b),
                                        dqkv_.get(), N, D, 3 * D, dln_.get()));
  return kc::layernorm_backward(dln_.get(), x, at(params, p.ln1_g), a.ln1_mean.get(), a.ln1_rstd.get(), N, D, dx,
                                at(grads, p.ln1_g), at(grads, p.ln1_b), stream());  // dx: d x
}

Status GptCuda::forward_backward(const float* params, const float* x, const int32_t* labels, int batch, float* grads,
                                 float* loss_acc, unsigned long long* correct_acc) {
  (void)correct_acc;
  TROUPE_RETURN_IF_ERROR(forward(params, x, labels, batch, true));
  const int64_t N = batch * seq_, D = c_.dim, V = c_.vocab;
  if (loss_acc)
    TROUPE_RETURN_IF_ERROR(kc::sum_in_order(row_loss_.get(), N, 1.0f / static_cast<float>(N), true, loss_acc, stream()));
  // Every gradient is added into, as on the CPU (its buffer is zero on entry there).
  TROUPE_CUDA_CHECK(cudaMemsetAsync(grads, 0, params_ * sizeof(float), stream()));
  TROUPE_CUDA_CHECK(cudaMemsetAsync(dx_.get(), 0, static_cast<size_t>(N * D) * sizeof(float), stream()));
  const float* dlogits = logits_.get();
  // logits = lnf head^T: d lnf = dlogits head, d head += dlogits^T lnf.
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, false, false, I(N), I(D), I(V), 1.0f, dlogits, at(params, p_.head), 0.0f,
                                    dln_.get()));
  TROUPE_RETURN_IF_ERROR(kc::matmul(blas_, true, false, I(V), I(D), I(N), 1.0f, dlogits, lnf_.get(), 1.0f,
                                    at(grads, p_.head)));
  TROUPE_RETURN_IF_ERROR(kc::layernorm_backward(dln_.get(), final_.get(), at(params, p_.lnf_g), lnf_mean_.get(),
                                                lnf_rstd_.get(), N, D, dx_.get(), at(grads, p_.lnf_g),
                                                at(grads, p_.lnf_b), stream()));
  for (int64_t l = c_.layers - 1; l >= 0; --l)
    TROUPE_RETURN_IF_ERROR(block_backward(l, params, xs_[static_cast<size_t>(l)].get(), batch, grads, dx_.get()));
  return kc::embed_backward(ids_.get(), dx_.get(), N, seq_, D, at(grads, p_.wte), at(grads, p_.wpe), stream());
}

Status GptCuda::evaluate(const float* params, const float* x, const int32_t* labels, int batch, float* loss_acc,
                         unsigned long long* correct_acc) {
  (void)correct_acc;
  TROUPE_RETURN_IF_ERROR(forward(params, x, labels, batch, false));
  const int64_t N = batch * seq_;
  if (!loss_acc) return {};
  return kc::sum_in_order(row_loss_.get(), N, 1.0f / static_cast<float>(N), true, loss_acc, stream());
}

}  // namespace troupe::models
