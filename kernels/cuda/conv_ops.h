// CUDA kernels of the convolutional blocks (models/cnn/cnn.h: conv -> bias -> ReLU -> max pooling),
// around the cuDNN convolutions of kernels/cuda/cudnn_conv.h. They fuse what the CPU does in
// separate passes (kernels/cpu/conv.h: bias + ReLU inside conv2d_forward, then max_pool_forward;
// max_pool_backward then relu_backward) and give the same results: the same maxima, the same
// arg-max (the first one on ties, in row-major window order), the same gradients. Same rules as
// ops.h: launchers check their arguments, enqueue on `stream`, never allocate or synchronise (so
// they can be captured in CUDA graphs); sizes of zero enqueue nothing.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"
#include "kernels/cpu/conv.h"  // PoolShape

namespace troupe::kernels::cuda {

using cpu::PoolShape;

// pooled = max_pool(max(conv + bias[channel], 0)) over each of s.planes planes (image, channel) of
// s.height x s.width floats, where plane p has channel p % channels; argmax[o] is the index within
// its plane (h * width + w) of output o's maximum. conv is the convolution without its bias. As
// cpu::conv2d_forward(..., bias, relu = true, ...) followed by cpu::max_pool_forward.
Status bias_relu_max_pool(const float* conv, const float* bias, int channels, const PoolShape& s, float* pooled,
                          int32_t* argmax, cudaStream_t stream = nullptr);

// The gradient of bias_relu_max_pool with respect to its pre-ReLU input: dconv[i] = dpooled[o]
// where i is output o's arg-max and pooled[o] > 0 (the ReLU passed it), else 0 — also for rows and
// columns no window covers. dconv has s.planes x s.height x s.width floats (overwritten). As
// cpu::max_pool_backward followed by cpu::relu_backward against the ReLU output.
Status max_pool_relu_backward(const float* dpooled, const float* pooled, const int32_t* argmax, const PoolShape& s,
                              float* dconv, cudaStream_t stream = nullptr);

// db[c] = sum over images n and pixels p of dy[(n * channels + c) * pixels + p], overwriting db: the
// bias gradient of a convolution (cpu::conv2d_backward's db). Deterministic (a fixed summation
// order, no atomics).
Status channel_sums(const float* dy, int batch, int channels, int pixels, float* db, cudaStream_t stream = nullptr);

}  // namespace troupe::kernels::cuda
