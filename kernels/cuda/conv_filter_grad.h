// The filter gradient of a convolution in strict f32 as one cuBLAS product: cuDNN's strict
// (FMA-only, directly summing, deterministic) backward-filter algorithm is slow for the cnn's shapes
// (measured on an H200 at batch 128: 284 us for 1->32 channels at 28x28, 225 us for 32->64 at 14x14,
// 0.4-8% of the f32 peak), while the product below is the CPU's own formulation
// (kernels/cpu/conv.h: dW = dY x im2col(X)^T), deterministic, and capturable in a CUDA graph.
//
//   col[patch x batch*pixels]  = im2col of every image side by side (as cpu::im2col with ld = batch*pixels)
//   dyt[out_channels x batch*pixels] = dy [batch][out_channels][pixels] with its first two axes swapped
//   dw[out_channels x patch]   = dyt x col^T                     (strict f32)
//
// The product is long and thin (batch*pixels terms for each of out_channels x patch outputs: 100,352
// terms for 288 outputs in the cnn's first block at batch 128), so one cuBLAS call leaves most of the
// GPU idle (1.9% of the f32 peak measured). It is split along the batch into `parts` groups of whole
// images, one strided-batched cuBLAS call computes each group's partial dw, and a last kernel adds the
// partials in a fixed order: deterministic (the same bits every call), within f32 rounding of the
// exact sums like the single product. Split into single images (the default for images of >= 64
// output pixels), dy is used as it lies and only the input is staged. Measured on an H200
// (bench_gpu_kernels, docs/benchmarks.md), batch 128: 57 -> 27 us for 1->32 channels at 28x28,
// 111 -> 96 us for 32->64 at 14x14 (cuDNN's strict algorithm: 282 and 223 us); batch 1024, 32->64:
// 739 -> 707 us (cuDNN's: 668).
#pragma once

#include <cstddef>

#include "core/status.h"
#include "kernels/cpu/conv.h"
#include "kernels/cuda/blas.h"

namespace troupe::kernels::cuda {

// How many groups of images conv_filter_grad splits shape `s`'s batch into when asked for 0: one per
// image for images of >= 64 output pixels (unless the partials would outgrow the staged input), else
// enough products to fill the GPU (about 256 output tiles of 64x64 in all), each at least 512 terms
// long, always a divisor of the batch (every group the same number of images). 1 = one product.
int conv_filter_grad_parts(const cpu::Conv2dShape& s);

// Bytes of device workspace conv_filter_grad needs for shape `s` split into `parts` groups (0 = the
// default above): both staging matrices and, when parts > 1, the partial gradients.
size_t conv_filter_grad_workspace_bytes(const cpu::Conv2dShape& s, int parts = 0);

// dw = dLoss/dw for input x [batch x in_channels x height x width] and output gradient dy
// [batch x out_channels x out_height x out_width], overwriting dw [out_channels x patch] (OIHW).
// Enqueued on the handle's stream; never allocates or synchronises. invalid_argument for a shape
// that is not valid(), null pointers, `parts` that is negative or does not divide the batch, or a
// workspace smaller than conv_filter_grad_workspace_bytes(s, parts).
Status conv_filter_grad(const CublasHandle& blas, const cpu::Conv2dShape& s, const float* x, const float* dy,
                        float* dw, void* workspace, size_t workspace_size, int parts = 0);

}  // namespace troupe::kernels::cuda
