// CPU kernels of a decoder-only transformer (models/gpt/): LayerNorm, GELU and causal multi-head
// self-attention, forward and backward, and the cross-entropy over a vocabulary, on contiguous
// row-major f32 buffers. Same conventions as ops.h: raw
// pointers, no allocation except where a contract says so, callers own all memory, distinct
// arguments do not overlap unless a contract says so.
#pragma once

#include <cstddef>
#include <cstdint>

namespace troupe::kernels::cpu {

// ---- LayerNorm (layernorm.cc) ----

// y[r] = (x[r] - mean) * rstd * gamma + beta over rows of `dim`, rstd = 1 / sqrt(var + eps) with
// the biased variance. mean and rstd ([rows] each) keep the statistics for the backward.
void layernorm_forward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim, float eps,
                       float* y, float* mean, float* rstd);
// The backward of layernorm_forward for the same x, mean and rstd: ADDS the input gradient into
// dx (a residual stream's gradient accumulates there) and the parameter gradients into dgamma and
// dbeta.
void layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                        int64_t rows, int64_t dim, float* dx, float* dgamma, float* dbeta);

// ---- GELU, the tanh approximation of GPT-2 (gelu.cc) ----

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); y may alias x.
void gelu_forward(const float* x, float* y, size_t n);
// dx = dy * gelu'(x); dx may alias dy.
void gelu_backward(const float* x, const float* dy, float* dx, size_t n);

// ---- causal multi-head self-attention (attention.cc) ----

// The shapes of one attention call: `batch` sequences of `seq` positions, `heads` heads of
// dim / heads values each.
struct AttentionShape {
  int64_t batch = 0, seq = 0, heads = 0, dim = 0;
  int64_t head_dim() const { return dim / heads; }
};

// qkv [batch*seq x 3*dim] holds each position's query, key and value (head h at columns
// h*head_dim of each third). For every sequence and head: P = softmax(Q K^T / sqrt(head_dim)) with
// position i seeing positions <= i only (the max of each row subtracted before exp), and
// out [batch*seq x dim] = P V. probs [batch x heads x seq x seq] receives P (zeros above the
// diagonal) for the backward.
void attention_forward(const float* qkv, const AttentionShape& s, float* probs, float* out);
// The backward for the same qkv and probs: dout [batch*seq x dim] -> dqkv (overwritten).
// `scratch` holds seq*seq floats.
void attention_backward(const float* qkv, const float* probs, const float* dout, const AttentionShape& s,
                        float* dqkv, float* scratch);

// ---- cross-entropy over a vocabulary (vocab_xent.cc) ----

// The mean over rows of -log softmax(logits[r])[targets[r]], each row max-subtracted; dlogits
// [rows x vocab] receives the gradient of that mean times grad_scale (a loss scale):
// (softmax - onehot) * grad_scale / rows. dlogits may be logits (in place). A target outside
// [0, vocab) makes the loss NaN (the runtime's finiteness check then stops training).
float vocab_xent(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float grad_scale,
                 float* dlogits);

// ---- helpers of the model's backward (bias_grad_add.cc) ----

// db[c] += sum over rows of dy[r, c].
void bias_grad_add(const float* dy, int64_t rows, int64_t cols, float* db);

}  // namespace troupe::kernels::cpu
