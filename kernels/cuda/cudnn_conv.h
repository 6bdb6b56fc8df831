// cuDNN convolutions for the cnn trainer on a GPU (built only where cuDNN was found:
// TROUPE_WITH_CUDNN). A ConvPlan is one convolution shape (kernels::cpu::Conv2dShape: NCHW f32,
// OIHW filters, cross-correlation as cpu::im2col) prepared once: cuDNN's descriptors and, for each
// of forward, backward-data and backward-filter, the algorithm cuDNN's heuristics rank first among
// those that fit the workspace limit (deterministic ones preferred). Running a plan enqueues on the
// handle's stream, never allocates or synchronises, so it can be captured in a CUDA graph.
//
// Math: strict f32 by default (CUDNN_FMA_MATH: no TF32 tensor cores, and only algorithms that sum
// each output's products directly — no FFT or Winograd), matching the CPU reference to f32
// rounding; `tf32` lets cuDNN use TF32 tensor cores (about 10 mantissa bits per product) and any
// algorithm.
#pragma once

#include <cudnn.h>

#include <cstddef>
#include <string>

#include "core/status.h"
#include "kernels/cpu/conv.h"

namespace troupe::kernels::cuda {

// An ok Status for CUDNN_STATUS_SUCCESS; otherwise `unavailable` (cuDNN or its sub-libraries not
// loadable, not initialised, out of memory) or `internal`, naming `what`, file and line.
Status cudnn_status(cudnnStatus_t st, const char* what, const char* file, int line);

#define TROUPE_CUDNN_CHECK(expr) \
  TROUPE_RETURN_IF_ERROR(::troupe::kernels::cuda::cudnn_status((expr), #expr, __FILE__, __LINE__))

// A cuDNN handle on the current device, bound to one stream.
class CudnnHandle {
 public:
  CudnnHandle() = default;
  ~CudnnHandle();
  CudnnHandle(const CudnnHandle&) = delete;
  CudnnHandle& operator=(const CudnnHandle&) = delete;
  // Fails `unavailable` naming cuDNN when its libraries cannot be loaded (they are found through the
  // library path: libcudnn.so.9 and the libcudnn_*.so.9 it opens itself).
  Status create(cudaStream_t stream);
  cudnnHandle_t get() const { return handle_; }

 private:
  cudnnHandle_t handle_ = nullptr;
};

class ConvPlan {
 public:
  ConvPlan() = default;
  ~ConvPlan();
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;

  // Describes shape `s` (valid(), stride and padding as given) and picks the three algorithms, each
  // needing at most `workspace_limit` bytes. invalid_argument for a shape that is not valid() or
  // whose output cuDNN computes differently; unavailable when no algorithm fits.
  Status create(const CudnnHandle& handle, const cpu::Conv2dShape& s, bool tf32, size_t workspace_limit);

  const cpu::Conv2dShape& shape() const { return shape_; }
  // The most workspace any of the three algorithms needs.
  size_t workspace_bytes() const;
  // "forward 1, backward-data 1, backward-filter 1 (strict f32)": cuDNN's algorithm numbers.
  std::string describe() const;

  // y = conv(x, w), overwriting y (no bias: see conv_ops.h). `workspace` holds `workspace_size` >=
  // workspace_bytes() bytes of device memory.
  Status forward(const CudnnHandle& h, const float* x, const float* w, float* y, void* workspace,
                 size_t workspace_size) const;
  // dx = dLoss/dx for the output gradient dy, overwriting dx.
  Status backward_data(const CudnnHandle& h, const float* w, const float* dy, float* dx, void* workspace,
                       size_t workspace_size) const;
  // dw = dLoss/dw, overwriting dw (cpu::conv2d_backward adds; the GPU step overwrites every gradient).
  Status backward_filter(const CudnnHandle& h, const float* x, const float* dy, float* dw, void* workspace,
                         size_t workspace_size) const;

 private:
  Status check_workspace(const char* op, size_t need, size_t have) const;
  cpu::Conv2dShape shape_;
  bool tf32_ = false;
  cudnnTensorDescriptor_t x_ = nullptr, y_ = nullptr;
  cudnnFilterDescriptor_t w_ = nullptr;
  // One convolution descriptor per direction: each carries the math type of its chosen algorithm.
  cudnnConvolutionDescriptor_t fwd_ = nullptr, bwd_data_ = nullptr, bwd_filter_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_bytes_ = 0, bwd_data_bytes_ = 0, bwd_filter_bytes_ = 0;
};

}  // namespace troupe::kernels::cuda
