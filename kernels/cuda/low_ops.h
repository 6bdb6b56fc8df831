// CUDA kernels of mixed-precision training (`--precision bf16|f16` on a GPU): the device twins of the
// CPU path's rounding (kernels::cpu::round_to, models/mlp/mlp.cc), which defines the numerics. A value
// "rounded to T" is T's nearest value (round to nearest even, core/dtype.h's code), kept as an f32;
// where `low` is given it also receives T's bits, the operand cuBLAS's 16-bit matrix products read
// (kernels/cuda/blas.h matmul_low). T must be bf16 or f16 (f32: invalid_argument), except for
// round_to, where f32 copies. Same rules as ops.h: enqueue on `stream`, no allocation, no
// synchronisation, sizes of zero do nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace troupe::kernels::cuda {

// dst[i] = src[i] rounded to `type` (dst may be src); low[i] = its bits when low is not null.
Status round_to(DType type, const float* src, float* dst, size_t n, uint16_t* low, cudaStream_t stream = nullptr);
// x[i] = (x[i] * scale) rounded to `type`, in place; low as round_to.
Status scale_round(DType type, float* x, size_t n, float scale, uint16_t* low, cudaStream_t stream = nullptr);
// scale_round with the scale read from device memory when the kernel runs (f16's loss scale, which
// the device updates between the steps of a CUDA graph: loss_scale_ops.h).
Status scale_round_by(DType type, float* x, size_t n, const float* scale, uint16_t* low,
                      cudaStream_t stream = nullptr);
// bias_act (ops.h) then round_to: x = round(act(x + bias)) in place, low[i] = its bits (required).
Status bias_act_round(DType type, float* x, const float* bias, int rows, int cols, bool relu, uint16_t* low,
                      cudaStream_t stream = nullptr);
// relu_backward, round, then bias_grad (ops.h) of the rounded values: dy = round(mask(dy)) in place,
// low = its bits (required), db = column sums of the new dy (not rounded: the caller rounds the
// gradients). Deterministic.
Status relu_backward_round_bias_grad(DType type, float* dy, const float* y, int rows, int cols, uint16_t* low,
                                     float* db, cudaStream_t stream = nullptr);

}  // namespace troupe::kernels::cuda
