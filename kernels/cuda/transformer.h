// CUDA kernels of the decoder-only transformer (models/gpt/): the device twins of
// kernels/cpu/transformer.h (the references they are tested against, tests/gpu/transformer_test.cc)
// plus the token and position embeddings. Conventions as kernels/cuda/ops.h: every launcher
// enqueues on `stream` (the attention calls on the cuBLAS handle's stream), checks its arguments
// and the launch, never allocates, copies to the host or synchronises, so a step can be captured in
// a CUDA graph. Pointers are device pointers.
//
// Written while no GPU was lent (2026-11-28): compiled here, first run on the next GPU machine.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/cpu/transformer.h"  // AttentionShape
#include "kernels/cuda/blas.h"

namespace troupe::kernels::cuda {

using cpu::AttentionShape;

// ---- LayerNorm: one block per row, the row's sums reduced in the block ----

// As cpu::layernorm_forward: y = (x - mean) * rstd * gamma + beta, mean and rstd kept per row.
Status layernorm_forward(const float* x, const float* gamma, const float* beta, int64_t rows, int64_t dim, float eps,
                         float* y, float* mean, float* rstd, cudaStream_t stream = nullptr);
// As cpu::layernorm_backward: ADDS into dx, dgamma and dbeta (the parameter gradients summed over
// the rows in row order by one thread per column: deterministic).
Status layernorm_backward(const float* dy, const float* x, const float* gamma, const float* mean, const float* rstd,
                          int64_t rows, int64_t dim, float* dx, float* dgamma, float* dbeta,
                          cudaStream_t stream = nullptr);

// ---- GELU (the tanh approximation, tanh written as the CPU's tanh_f32) ----

Status gelu_forward(const float* x, float* y, size_t n, cudaStream_t stream = nullptr);        // y may alias x
Status gelu_backward(const float* x, const float* dy, float* dx, size_t n, cudaStream_t stream = nullptr);

// ---- causal multi-head self-attention: cuBLAS strided-batched products over the heads ----

// As cpu::attention_forward: qkv [batch*seq x 3*dim], probs [batch x heads x seq x seq] (zeros above
// the diagonal), out [batch*seq x dim]. The full seq x seq products are taken (the CPU skips the
// masked triangle; its zeros add nothing).
Status attention_forward(const CublasHandle& handle, const float* qkv, const AttentionShape& s, float* probs,
                         float* out);
// As cpu::attention_backward: dqkv overwritten; `scratch` holds heads * seq * seq floats.
Status attention_backward(const CublasHandle& handle, const float* qkv, const float* probs, const float* dout,
                          const AttentionShape& s, float* dqkv, float* scratch);

// ---- the language-model head's loss ----

// As cpu::vocab_xent, one block per row of any vocabulary size: row_loss[r] = -log softmax(logits[r])
// [targets[r]] (NaN for a target outside [0, vocab)); dlogits (may be logits) = (softmax - onehot) *
// grad_scale / rows when not null. The mean is the caller's sum of row_loss / rows.
Status vocab_xent(const float* logits, const int32_t* targets, int64_t rows, int64_t vocab, float grad_scale,
                  float* dlogits, float* row_loss, cudaStream_t stream = nullptr);
// *out = scale x the sum of `n` floats in index order (one thread: deterministic; for a step's few
// thousand row losses), added to *out when `accumulate`.
Status sum_in_order(const float* x, int64_t n, float scale, bool accumulate, float* out, cudaStream_t stream = nullptr);

// ---- helpers ----

// As cpu::bias_grad_add: db[c] += the sum over rows of dy[r, c], in row order.
Status bias_grad_add(const float* dy, int64_t rows, int64_t cols, float* db, cudaStream_t stream = nullptr);
// x[i, :] = tok[ids[i], :] + pos[i % seq, :] for the rows = batch * seq positions (as the CPU
// model's embed).
Status embed_forward(const int32_t* ids, const float* tok, const float* pos, int64_t rows, int64_t seq, int64_t dim,
                     float* x, cudaStream_t stream = nullptr);
// Its backward: dtok[ids[i], :] += dx[i, :] and dpos[i % seq, :] += dx[i, :], by one thread per
// column taking the positions in order (the CPU model's order: the same sums, bit for bit).
Status embed_backward(const int32_t* ids, const float* dx, int64_t rows, int64_t seq, int64_t dim, float* dtok,
                      float* dpos, cudaStream_t stream = nullptr);
// ids[i] = (int32) x[i]: the token ids a batch carries as f32 inputs (exact below 2^24).
Status ids_from_floats(const float* x, int64_t n, int32_t* ids, cudaStream_t stream = nullptr);

}  // namespace troupe::kernels::cuda
