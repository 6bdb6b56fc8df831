// The GPT-style decoder's parameters and its forward and backward on the CPU.
//
//   x = wte[token] + wpe[position]
//   per block:  x = x + proj(attention(qkv(ln1(x))))       causal, multi-head
//               x = x + fc2(gelu(fc(ln2(x))))              4 x dim hidden units
//   logits = lnf(x) head^T                                 head = wte when tied
//   loss = mean cross-entropy of the next token over every position of every window
//
// Blocks are declared (and so laid out and initialised) in this order: wte [vocab x dim], wpe
// [context x dim], then per block l "h<l>.ln1.g", ".ln1.b", ".attn.w" [dim x 3dim], ".attn.b",
// ".proj.w" [dim x dim], ".proj.b", ".ln2.g", ".ln2.b", ".fc.w" [dim x 4dim], ".fc.b",
// ".fc2.w" [4dim x dim], ".fc2.b", then "lnf.g", "lnf.b" and, untied, "head" [vocab x dim].
// Matrices start normal(0.02) (the residual projections 0.02 / sqrt(2 layers), GPT-2's scaling),
// LayerNorm gains 1, biases 0. The runtime's AdamW decays the blocks of rank 2 (trainers/
// optimizer.h): the matrices and the two embeddings, as GPT-2 and nanoGPT do.
//
// Precision (`--precision bf16|f16`, set_precision): as mixed-precision training does on GPUs, the
// products run on rounded operands and accumulate in f32: both operands of every matrix product
// (the four per block and the head's, forward and backward: activations, weights and the incoming
// gradient) are rounded to the compute type, and so are q, k and v before the attention. The rest
// stays f32: the parameters (master weights) and their gradients, the embeddings, LayerNorms,
// softmax and GELU, the residual stream, the attention's scores and probabilities and the loss.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/transformer.h"
#include "models/gpt/gpt_config.h"
#include "trainers/api/trainer.h"

namespace troupe::models {

class GptModel {
 public:
  explicit GptModel(const GptConfig& c) : c_(c) {}
  const GptConfig& config() const { return c_; }
  // f32 (the default), bf16 or f16: what the products round their operands to (above).
  void set_precision(DType p) { precision_ = p; }
  DType precision() const { return precision_; }

  void declare(ParameterSpace& space);

  // Forward over `batch` windows of `seq` ids (tokens[b * seq + t]); keeps what the backward
  // needs. Returns the mean loss over every position when `targets` is given (else 0: logits()
  // holds the outputs). invalid_argument for a window longer than the context or an id outside
  // the vocabulary, naming it.
  Expected<float> forward(const std::vector<int32_t>& tokens, const int32_t* targets, int64_t batch, int64_t seq,
                          const Parameters& params);
  // The backward of the last forward (with targets): writes every block's gradient (the loss's,
  // times loss_scale) into grads, announcing each block when it is final.
  void backward(const Parameters& params, Gradients& grads, float loss_scale);
  // [batch * seq x vocab] of the last forward (the loss's gradient after backward).
  const float* logits() const { return logits_.data(); }

  // Model FLOPs of one training token: 6 x the matrices' parameters (forward 2, backward 4) plus
  // the attention's 12 x layers x dim x context (scores and weighted values, forward and backward,
  // counted for the full context as PaLM's appendix does).
  double flops_per_token() const;

  // The declared blocks (after declare()), for the decoder (gpt_decoder.h).
  struct BlockParams {
    Param ln1_g, ln1_b, attn_w, attn_b, proj_w, proj_b, ln2_g, ln2_b, fc_w, fc_b, fc2_w, fc2_b;
  };
  struct Params {
    Param wte, wpe, lnf_g, lnf_b, head;  // head is wte when tied
    std::vector<BlockParams> blocks;
  };
  Params params() const { return {wte_, wpe_, lnf_g_, lnf_b_, head_, blocks_}; }

  // The pieces forward and backward are made of, for a model cut into layers (gpt_layers.h: the
  // embeddings, each block, the final LayerNorm and head). N = batch x seq positions; every
  // activation is [N x dim] unless said otherwise.
  struct BlockActs {  // what a block's backward reads of its forward
    std::vector<float> ln1, ln1_mean, ln1_rstd, qkv, probs, att, mid, ln2, ln2_mean, ln2_rstd, fc, act;
    void resize(int64_t batch, int64_t seq, const GptConfig& c);
  };
  // x = wte[tokens] + wpe[position]; invalid_argument for a window longer than the context or an
  // id outside the vocabulary (tokens and, when given, targets), naming it.
  Status check_ids(const int32_t* tokens, const int32_t* targets, int64_t batch, int64_t seq) const;
  void embed(const int32_t* tokens, int64_t batch, int64_t seq, const Parameters& params, float* x) const;
  void embed_backward(const int32_t* tokens, const float* dx, int64_t batch, int64_t seq, Gradients& grads) const;
  // Block l: out = x + attention and MLP; `a` receives what block_backward needs.
  void block_forward(int64_t l, const float* x, int64_t batch, int64_t seq, const Parameters& params, BlockActs& a,
                     float* out) const;
  // dx holds d out on entry and d x on return; block l's gradients added into grads (announced).
  void block_backward(int64_t l, const float* x, const BlockActs& a, int64_t batch, int64_t seq,
                      const Parameters& params, Gradients& grads, float* dx);
  // The final LayerNorm (lnf, mean, rstd: what head_backward reads) and the head's logits
  // [N x vocab]; its backward adds d x into dx and the blocks' gradients into grads.
  void head_forward(const float* x, int64_t N, const Parameters& params, float* lnf, float* mean, float* rstd,
                    float* logits) const;
  void head_backward(const float* x, const float* lnf, const float* mean, const float* rstd, const float* dlogits,
                     int64_t N, const Parameters& params, Gradients& grads, float* dx);

 private:
  void resize(int64_t batch, int64_t seq);
  // `x` (n floats) as a product reads it: itself in f32, else rounded into `buf`.
  const float* operand(const float* x, size_t n, std::vector<float>& buf) const;
  // y [rows x out] = x [rows x in] W [in x out] (+ y when accumulate).
  void linear(const float* x, const float* w, int64_t rows, int64_t in, int64_t out, float* y,
              bool accumulate = false) const;
  // Backward of y = x W + b over `rows` rows: db and dW accumulated, then marked ready (the gradient
  // buckets may send them during backward); dx = dy W^T when dx is not null.
  void dense_backward(const float* x, const Parameters& params, Gradients& grads, const Param& w, const Param& b,
                      const float* dy, int64_t rows, int64_t in, int64_t out, float* dx) const;

  GptConfig c_;
  DType precision_ = DType::f32;
  mutable std::vector<float> low_x_, low_w_, low_dy_;  // rounded operands (bf16 / f16)
  Param wte_, wpe_, lnf_g_, lnf_b_, head_;
  std::vector<BlockParams> blocks_;
  // The last forward's shapes and activations.
  int64_t batch_ = 0, seq_ = 0;
  std::vector<int32_t> tokens_, targets_;
  std::vector<BlockActs> acts_;
  std::vector<std::vector<float>> xs_;  // each block's input
  std::vector<float> final_, lnf_, lnf_mean_, lnf_rstd_, logits_;
  // Backward scratch.
  std::vector<float> dx_, dln_, dwide_, dqkv_, datt_, scratch_;
};

}  // namespace troupe::models
