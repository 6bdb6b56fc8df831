// Causal multi-head self-attention on the CPU (kernels/cpu/transformer.h): per sequence and head,
// S = Q K^T / sqrt(hd), P = causal softmax(S), O = P V, and the backward
//   dP = dO V^T, dV = P^T dO, dS = P * (dP - rowsum(P * dP)) / sqrt(hd), dQ = dS K, dK = dS^T Q.
// The products are OpenBLAS sgemm calls on strided views of qkv (no copies), done by blocks of
// kBlock query rows that stop at the block's last key: the causal mask's upper triangle, which is
// all zeros, is never multiplied (about half the work of the full T x T products).
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/transformer.h"
#include "kernels/cpu/vectorize.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kBlock = 64;

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

// Row i of `p` (length seq): softmax over [0, i] with the max subtracted, zeros after.
TROUPE_VECTORIZE
void causal_softmax_row(float* p, int64_t i, int64_t seq) {
  float top = p[0];
  for (int64_t j = 1; j <= i; ++j) top = std::max(top, p[j]);
  float sum = 0;
  for (int64_t j = 0; j <= i; ++j) {
    p[j] = exp_f32(p[j] - top);
    sum += p[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
  for (int64_t j = i + 1; j < seq; ++j) p[j] = 0.0f;
}

// dS_ij = scale * P_ij (dP_ij - sum_k P_ik dP_ik) for j <= i, in place of dP's row; zeros for
// i < j < end (the rest of the block's columns, which dQ and dK read).
TROUPE_VECTORIZE
void softmax_backward_row(const float* p, float* dp, int64_t i, int64_t end, float scale) {
  float dot = 0;
  for (int64_t j = 0; j <= i; ++j) dot += p[j] * dp[j];
  for (int64_t j = 0; j <= i; ++j) dp[j] = scale * p[j] * (dp[j] - dot);
  for (int64_t j = i + 1; j < end; ++j) dp[j] = 0.0f;
}

}  // namespace

void attention_forward(const float* qkv, const AttentionShape& s, float* probs, float* out) {
  const int64_t T = s.seq, D = s.dim, hd = s.head_dim(), ld = 3 * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* q = qkv + b * T * ld + h * hd;
      const float* k = q + D;
      const float* v = q + 2 * D;
      float* p = probs + (b * s.heads + h) * T * T;
      float* o = out + b * T * D + h * hd;
      for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
        const int64_t i1 = std::min(T, i0 + kBlock);
        gemm(false, true, i1 - i0, i1, hd, scale, q + i0 * ld, ld, k, ld, 0.0f, p + i0 * T, T);
        for (int64_t i = i0; i < i1; ++i) causal_softmax_row(p + i * T, i, T);
        gemm(false, false, i1 - i0, hd, i1, 1.0f, p + i0 * T, T, v, ld, 0.0f, o + i0 * D, D);
      }
    }
  }
}

void attention_backward(const float* qkv, const float* probs, const float* dout, const AttentionShape& s,
                        float* dqkv, float* scratch) {
  const int64_t T = s.seq, D = s.dim, hd = s.head_dim(), ld = 3 * D;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const float* q = qkv + b * T * ld + h * hd;
      const float* k = q + D;
      const float* v = q + 2 * D;
      const float* p = probs + (b * s.heads + h) * T * T;
      const float* dout_bh = dout + b * T * D + h * hd;
      float* dq = dqkv + b * T * ld + h * hd;
      float* dk = dq + D;
      float* dv = dq + 2 * D;
      for (int64_t i = 0; i < T; ++i) {  // dK and dV accumulate over the row blocks
        std::memset(dk + i * ld, 0, sizeof(float) * hd);
        std::memset(dv + i * ld, 0, sizeof(float) * hd);
      }
      float* ds = scratch;
      for (int64_t i0 = 0; i0 < T; i0 += kBlock) {
        const int64_t i1 = std::min(T, i0 + kBlock), rows = i1 - i0;
        gemm(false, true, rows, i1, hd, 1.0f, dout_bh + i0 * D, D, v, ld, 0.0f, ds + i0 * T, T);      // dP
        gemm(true, false, i1, hd, rows, 1.0f, p + i0 * T, T, dout_bh + i0 * D, D, 1.0f, dv, ld);     // dV
        for (int64_t i = i0; i < i1; ++i) softmax_backward_row(p + i * T, ds + i * T, i, i1, scale);     // dS
        gemm(false, false, rows, hd, i1, 1.0f, ds + i0 * T, T, k, ld, 0.0f, dq + i0 * ld, ld);        // dQ
        gemm(true, false, i1, hd, rows, 1.0f, ds + i0 * T, T, q + i0 * ld, ld, 1.0f, dk, ld);         // dK
      }
    }
  }
}

}  // namespace troupe::kernels::cpu
