// The filter gradient of a convolution in strict f32 as one cuBLAS product: cuDNN's strict
// (FMA-only, directly summing, deterministic) backward-filter algorithm is slow for the cnn's shapes
// (measured on an H200 at batch 128: 284 us for 1->32 channels at 28x28, 225 us for 32->64 at 14x14,
// 0.4-8% of the f32 peak), while the product below is the CPU's own formulation
// (kernels/cpu/conv.h: dW = dY x im2col(X)^T), deterministic, and capturable in a CUDA graph.
//
//   col[patch x batch*pixels]  = im2col of every image side by side (as cpu::im2col with ld = batch*pixels)
//   dyt[out_channels x batch*pixels] = dy [batch][out_channels][pixels] with its first two axes swapped
//   dw[out_channels x patch]   = dyt x col^T                     (kernels::cuda::matmul, strict f32)
#pragma once

#include <cstddef>

#include "core/status.h"
#include "kernels/cpu/conv.h"
#include "kernels/cuda/blas.h"

namespace troupe::kernels::cuda {

// Bytes of device workspace conv_filter_grad needs for shape `s` (both staging matrices).
size_t conv_filter_grad_workspace_bytes(const cpu::Conv2dShape& s);

// dw = dLoss/dw for input x [batch x in_channels x height x width] and output gradient dy
// [batch x out_channels x out_height x out_width], overwriting dw [out_channels x patch] (OIHW).
// Enqueued on the handle's stream; never allocates or synchronises. invalid_argument for a shape
// that is not valid(), null pointers, or a workspace smaller than conv_filter_grad_workspace_bytes(s).
Status conv_filter_grad(const CublasHandle& blas, const cpu::Conv2dShape& s, const float* x, const float* dy,
                        float* dw, void* workspace, size_t workspace_size);

}  // namespace troupe::kernels::cuda
