// CUDA kernels: the device twins of kernels/cpu/ops.h (the references they are tested against),
// plus the fused and gather kernels a GPU training step needs. Every launcher enqueues on `stream`
// and returns at once; results are visible after the stream is synchronised. Every launcher checks
// its arguments (negative or too-large sizes, null pointers with non-zero sizes) and the launch
// error, returning invalid_argument or the CUDA error as a Status. Sizes of zero enqueue nothing.
// All launchers may be captured in CUDA graphs: none allocates, copies to the host or synchronises.
// Pointers are device pointers unless a comment says otherwise.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/status.h"
#include "kernels/cpu/ops.h"  // SgdParams, AdamParams

namespace troupe::kernels::cuda {

using cpu::AdamParams;
using cpu::SgdParams;

// ---- dense-layer helpers (dense.cu) ----

// x[r, c] += bias[c]; then, when relu, x = max(x, 0). In place. As cpu::bias_act.
Status bias_act(float* x, const float* bias, int rows, int cols, bool relu, cudaStream_t stream = nullptr);
// dy[i] = 0 where y[i] <= 0. As cpu::relu_backward.
Status relu_backward(float* dy, const float* y, size_t n, cudaStream_t stream = nullptr);
// db[c] = sum over rows of dy[r, c], overwriting db (rows == 0 gives zeros). As cpu::bias_grad.
// Deterministic: the same inputs give the same bits (no atomics).
Status bias_grad(const float* dy, int rows, int cols, float* db, cudaStream_t stream = nullptr);
// Fused relu_backward then bias_grad: dy[r, c] = 0 where y[r, c] <= 0 (in place), then db = column
// sums of the masked dy. One pass instead of two.
Status relu_backward_bias_grad(float* dy, const float* y, int rows, int cols, float* db,
                               cudaStream_t stream = nullptr);

// ---- loss (loss.cu) ----

// Numerically stable softmax cross-entropy over the rows of logits [rows x classes], as
// cpu::softmax_xent, accumulating instead of returning so a training loop never waits for it:
//   *loss_acc += mean loss over the rows (NaN when a label is outside [0, classes)),
//   *correct_acc += rows whose arg-max (first maximum) equals the label.
// Either accumulator may be null. When dlogits is not null it receives (softmax - onehot) / rows
// (it may alias logits). classes must be in [1, 1024]. rows == 0 adds nothing.
Status softmax_xent(const float* logits, const int32_t* labels, int rows, int classes, float* dlogits,
                    float* loss_acc, unsigned long long* correct_acc, cudaStream_t stream = nullptr);

// ---- optimizers (optim.cu): one kernel over a flat parameter buffer ----

// Where an optimizer step finds its step number and learning rate, read on the device so that a
// CUDA graph captured once runs correctly at any step:
//   step = (steps_done ? *steps_done : 0) + offset   (1-based),
//   lr   = lr_table ? lr_table[step - 1] : hp.lr      (lr_table: one rate per step of the job).
// Keep steps_done in device memory and advance it with add_to_counter() after each captured chunk;
// pass each captured step's position in the chunk (1, 2, ...) as offset. The default is step 1 at
// hp.lr, which is all SGD without a schedule needs.
//
// With `gate` (f16's loss scaling, loss_scale_ops.h) the step is applied only when the gate's last
// check said so, with the gradients divided by the scale they carry (g * (1 / S), rounded as the
// CPU's separate pass rounds), and Adam's bias correction counts the gate's applied steps instead.
struct DeviceLossScale;
struct DeviceStep {
  const int64_t* steps_done = nullptr;
  int64_t offset = 1;
  const float* lr_table = nullptr;
  const DeviceLossScale* gate = nullptr;
};

// As cpu::sgd_step (with the rate from `at`). velocity may be null only when hp.momentum == 0.
Status sgd_step(float* params, const float* grads, float* velocity, size_t n, const SgdParams& hp,
                const DeviceStep& at = {}, cudaStream_t stream = nullptr);
// As cpu::adam_step with the step and rate from `at`. A step below 1 is invalid_argument when it
// is known on the host (steps_done null) and treated as 1 otherwise, as the CPU does.
Status adam_step(float* params, const float* grads, float* m, float* v, size_t n, const DeviceStep& at,
                 const AdamParams& hp, cudaStream_t stream = nullptr);
// *counter += delta (one thread; for step counters kept on the device).
Status add_to_counter(int64_t* counter, int64_t delta, cudaStream_t stream = nullptr);

// ---- vector ops for collectives (vector_ops.cu) ----

Status sum_into(float* dst, const float* src, size_t n, cudaStream_t stream = nullptr);  // dst += src
Status max_into(float* dst, const float* src, size_t n, cudaStream_t stream = nullptr);  // dst = max(dst, src)
Status scale(float* x, size_t n, float alpha, cudaStream_t stream = nullptr);            // x *= alpha
// dst += src where src holds f16 / bf16 bits; accumulation in f32.
Status sum_into_f16(float* dst, const uint16_t* src, size_t n, cudaStream_t stream = nullptr);
Status sum_into_bf16(float* dst, const uint16_t* src, size_t n, cudaStream_t stream = nullptr);
// Conversions rounding to nearest even, bit-identical to core/dtype.h (they share its code).
Status f32_to_f16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream = nullptr);
Status f16_to_f32(const uint16_t* src, float* dst, size_t n, cudaStream_t stream = nullptr);
Status f32_to_bf16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream = nullptr);
Status bf16_to_f32(const uint16_t* src, float* dst, size_t n, cudaStream_t stream = nullptr);
// *result = 1 when every x[i] is finite, else 0 (n == 0 gives 1). result is a device int.
Status all_finite(const float* x, size_t n, int32_t* result, cudaStream_t stream = nullptr);
// out[0] = *loss, out[1] = *correct as a float (rounded to nearest, as a host cast): a step's loss
// and count packed beside its gradients, so one all-reduce carries them (sync GPU replicas).
Status pack_step_slots(const float* loss, const unsigned long long* correct, float* out,
                       cudaStream_t stream = nullptr);

// ---- gathers (gather.cu) ----

// dst row i = src row index[i] for i in [0, count), rows of `cols` floats; also labels when both
// label pointers are given. index values must lie in [0, src_rows); others are skipped and leave
// the destination row unchanged (the launcher cannot read device memory to reject them).
Status gather_rows(float* dst, const float* src, int64_t src_rows, int64_t cols, const int32_t* index,
                   int64_t count, int32_t* dst_labels, const int32_t* src_labels, cudaStream_t stream = nullptr);

}  // namespace troupe::kernels::cuda
