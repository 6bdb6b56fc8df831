// CPU kernels: the math a trainer and the collectives need, on contiguous row-major f32 buffers
// (plus f16/bf16 storage for the conversions). These are the references every CUDA kernel is tested
// against. Raw pointers and sizes, no allocation, no locks: callers own all memory. Sizes of zero are
// valid and do nothing. Pointers of distinct arguments must not overlap unless a contract says so.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace troupe::kernels::cpu {

// ---- matrix multiply (OpenBLAS sgemm) ----

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is m x k: A is m x k when
// !trans_a, k x m when trans_a. op(B) is k x n: B is k x n when !trans_b, n x k when trans_b.
void matmul(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c);
// Threads OpenBLAS may use in this process (1 = one core per worker).
void set_blas_threads(int threads);

// ---- dense-layer helpers ----

// x[r, c] += bias[c] for every row; then, when relu, x = max(x, 0). In place.
void bias_act(float* x, const float* bias, int rows, int cols, bool relu);
// Backward of ReLU in place: dy[i] = 0 where y[i] <= 0 (y is the ReLU's output).
void relu_backward(float* dy, const float* y, size_t n);
// db[c] = sum over rows of dy[r, c] (overwrites db).
void bias_grad(const float* dy, int rows, int cols, float* db);

// ---- loss ----

// Numerically stable softmax cross-entropy over rows of `logits` [rows x classes] with integer
// labels in [0, classes). Returns the mean loss over rows. When dlogits is not null it receives the
// gradient of the mean loss: (softmax - onehot) / rows (dlogits may alias logits). When correct is
// not null it receives the number of rows whose arg-max equals the label. A label outside
// [0, classes) makes the result NaN, so the caller's finiteness check stops training.
float softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                   int64_t* correct);

// ---- optimizers: one pass over a flat parameter buffer ----

struct SgdParams {
  float lr = 0.01f;
  float momentum = 0.0f;      // 0 disables the velocity buffer (it may then be null)
  float weight_decay = 0.0f;  // L2: g += weight_decay * p
  bool nesterov = false;
};
// v = momentum * v + g';  p -= lr * (nesterov ? g' + momentum * v : v), with g' = g + wd * p.
void sgd_step(float* params, const float* grads, float* velocity, size_t n, const SgdParams& hp);

struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  bool decoupled = false;  // false: Adam with L2 added to g; true: AdamW (p -= lr * wd * p)
};
// One Adam/AdamW step; `step` counts from 1 and drives the bias corrections.
void adam_step(float* params, const float* grads, float* m, float* v, size_t n, int64_t step,
               const AdamParams& hp);

// ---- vector ops for collectives ----

void sum_into(float* dst, const float* src, size_t n);  // dst += src
void max_into(float* dst, const float* src, size_t n);  // dst = max(dst, src)
void scale(float* x, size_t n, float alpha);            // x *= alpha
// dst += src where src is f16 / bf16 storage (accumulation in f32).
void sum_into_f16(float* dst, const uint16_t* src, size_t n);
void sum_into_bf16(float* dst, const uint16_t* src, size_t n);
// Conversions, rounding to nearest even (see core/dtype.h).
void f32_to_f16(const float* src, uint16_t* dst, size_t n);
void f16_to_f32(const uint16_t* src, float* dst, size_t n);
void f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void bf16_to_f32(const uint16_t* src, float* dst, size_t n);

// True when every element is finite.
bool all_finite(const float* x, size_t n);

// Mixed precision's reference rounding: `src` rounded to `type` (bf16, f16: nearest even; an f16
// past 65504 becomes infinite) and widened back to f32 into `dst` (may be `src`). f32: a copy.
void round_to(DType type, const float* src, float* dst, size_t n);

}  // namespace troupe::kernels::cpu
