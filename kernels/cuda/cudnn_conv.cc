#include "kernels/cuda/cudnn_conv.h"

#include <string>
#include <vector>

namespace troupe::kernels::cuda {

Status cudnn_status(cudnnStatus_t st, const char* what, const char* file, int line) {
  if (st == CUDNN_STATUS_SUCCESS) return {};
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                    cudnnGetErrorString(st) + " (" + std::to_string(static_cast<int>(st)) + ")";
  switch (st) {
    // The library itself: not loadable, sub-libraries missing or of another version, or not for
    // this driver, runtime or GPU.
    case CUDNN_STATUS_NOT_INITIALIZED:
    case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH:
    case CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED:
    case CUDNN_STATUS_LICENSE_ERROR:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER:
    case CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART:
    case CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH:
    case CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING:
    case CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE:
      return unavailable(msg + "; check that cuDNN 9 (libcudnn.so.9 and its libcudnn_*.so.9) is on the library "
                               "path and matches the CUDA driver, or train the cnn with --device cpu");
    case CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED:
    case CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED:
      return unavailable(msg + "; out of memory: use a smaller --batch-size or free the GPU");
    default:
      break;
  }
  // Other 3xxx: cuDNN does not support this shape or setting; the rest are troupe bugs.
  const int code = static_cast<int>(st);
  if (code >= 3000 && code < 4000) return unavailable(msg + "; cuDNN does not support this convolution here");
  return internal_error(msg);
}

namespace {

// Whether an algorithm sums each output's products directly (GEMM-like), as the CPU does: FFT and
// Winograd transform the operands and round differently (errors scale with the whole tensor, not
// each output's terms), so strict f32 leaves them out.
bool sums_directly(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT;
}
bool sums_directly(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
}
bool sums_directly(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1 ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
}

// The candidates cuDNN's heuristics returned, in its order, deterministic ones first: those that
// succeeded, and in strict f32 only those without tensor cores that sum directly. Never the math
// type that lets cuDNN convert f32 data down (ALLOW_CONVERSION).
template <class Perf>
std::vector<Perf> candidates(const std::vector<Perf>& perf, int returned, bool tf32) {
  std::vector<Perf> det, rest;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) continue;
    if (!tf32 && (p.mathType == CUDNN_TENSOR_OP_MATH || !sums_directly(p.algo))) continue;
    (p.determinism == CUDNN_DETERMINISTIC ? det : rest).push_back(p);
  }
  det.insert(det.end(), rest.begin(), rest.end());
  return det;
}

// The math type to set on a direction's descriptor: the chosen algorithm's with tf32, else FMA only.
cudnnMathType_t math_for(cudnnMathType_t chosen, bool tf32) { return tf32 ? chosen : CUDNN_FMA_MATH; }

// The first candidate whose workspace, asked with its math type set on `desc`, fits `limit`: sets
// *algo and *bytes and leaves that math type on `desc`. False when none fits.
template <class Perf, class Algo, class SizeFn>
Expected<bool> choose(const std::vector<Perf>& cands, cudnnConvolutionDescriptor_t desc, bool tf32, size_t limit,
                      SizeFn size_of, Algo* algo, size_t* bytes) {
  for (const Perf& p : cands) {
    TROUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(desc, math_for(p.mathType, tf32)));
    size_t need = 0;
    if (size_of(p.algo, &need) != CUDNN_STATUS_SUCCESS || need > limit) continue;
    *algo = p.algo;
    *bytes = need;
    return true;
  }
  return false;
}

Status no_algorithm(const char* direction, const cpu::Conv2dShape& s, size_t limit) {
  return unavailable(std::string("cuDNN has no ") + direction + " algorithm for a convolution of " +
                     std::to_string(s.batch) + " x " + std::to_string(s.in_channels) + " x " +
                     std::to_string(s.height) + " x " + std::to_string(s.width) + " by " +
                     std::to_string(s.out_channels) + " filters of " + std::to_string(s.kernel) + " x " +
                     std::to_string(s.kernel) + " within " + std::to_string(limit) +
                     " bytes of workspace; train the cnn with --device cpu");
}

}  // namespace

CudnnHandle::~CudnnHandle() {
  if (handle_) cudnnDestroy(handle_);
}

Status CudnnHandle::create(cudaStream_t stream) {
  if (handle_) cudnnDestroy(handle_);
  handle_ = nullptr;
  TROUPE_CUDNN_CHECK(cudnnCreate(&handle_));
  TROUPE_CUDNN_CHECK(cudnnSetStream(handle_, stream));
  return {};
}

ConvPlan::~ConvPlan() {
  if (x_) cudnnDestroyTensorDescriptor(x_);
  if (y_) cudnnDestroyTensorDescriptor(y_);
  if (w_) cudnnDestroyFilterDescriptor(w_);
  for (cudnnConvolutionDescriptor_t d : {fwd_, bwd_data_, bwd_filter_}) {
    if (d) cudnnDestroyConvolutionDescriptor(d);
  }
}

Status ConvPlan::create(const CudnnHandle& h, const cpu::Conv2dShape& s, bool tf32, size_t limit) {
  if (!s.valid() || s.batch < 1) {
    return invalid_argument("ConvPlan: invalid convolution shape (" + std::to_string(s.batch) + " images of " +
                            std::to_string(s.in_channels) + " x " + std::to_string(s.height) + " x " +
                            std::to_string(s.width) + ", kernel " + std::to_string(s.kernel) + ")");
  }
  if (x_) return internal_error("ConvPlan::create called twice");
  shape_ = s;
  tf32_ = tf32;
  TROUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_));
  TROUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_));
  TROUPE_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_));
  TROUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.batch, s.in_channels,
                                                s.height, s.width));
  TROUPE_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.out_channels,
                                                s.in_channels, s.kernel, s.kernel));
  for (cudnnConvolutionDescriptor_t* d : {&fwd_, &bwd_data_, &bwd_filter_}) {
    TROUPE_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(d));
    TROUPE_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*d, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    TROUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(*d, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
  }
  int n = 0, c = 0, oh = 0, ow = 0;
  TROUPE_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(fwd_, x_, w_, &n, &c, &oh, &ow));
  if (n != s.batch || c != s.out_channels || oh != s.out_height() || ow != s.out_width()) {
    return invalid_argument("ConvPlan: cuDNN computes a " + std::to_string(oh) + " x " + std::to_string(ow) +
                            " output where the CPU kernels compute " + std::to_string(s.out_height()) + " x " +
                            std::to_string(s.out_width()));
  }
  TROUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, oh, ow));

  int max = 0, got = 0;
  {
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h.get(), &max));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h.get(), x_, w_, fwd_, y_, max, &got, perf.data()));
    auto ok = choose(candidates(perf, got, tf32), fwd_, tf32, limit,
                     [&](cudnnConvolutionFwdAlgo_t a, size_t* n) {
                       return cudnnGetConvolutionForwardWorkspaceSize(h.get(), x_, w_, fwd_, y_, a, n);
                     }, &fwd_algo_, &fwd_bytes_);
    if (!ok.ok()) return ok.status();
    if (!*ok) return no_algorithm("forward", s, limit);
  }
  {
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h.get(), &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
    TROUPE_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h.get(), w_, y_, bwd_data_, x_, max, &got, perf.data()));
    auto ok = choose(candidates(perf, got, tf32), bwd_data_, tf32, limit,
                     [&](cudnnConvolutionBwdDataAlgo_t a, size_t* n) {
                       return cudnnGetConvolutionBackwardDataWorkspaceSize(h.get(), w_, y_, bwd_data_, x_, a, n);
                     }, &bwd_data_algo_, &bwd_data_bytes_);
    if (!ok.ok()) return ok.status();
    if (!*ok) return no_algorithm("backward-data", s, limit);
  }
  {
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h.get(), &max));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
    TROUPE_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(h.get(), x_, y_, bwd_filter_, w_, max, &got, perf.data()));
    auto ok = choose(candidates(perf, got, tf32), bwd_filter_, tf32, limit,
                     [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* n) {
                       return cudnnGetConvolutionBackwardFilterWorkspaceSize(h.get(), x_, y_, bwd_filter_, w_, a, n);
                     }, &bwd_filter_algo_, &bwd_filter_bytes_);
    if (!ok.ok()) return ok.status();
    if (!*ok) return no_algorithm("backward-filter", s, limit);
  }
  return {};
}

size_t ConvPlan::workspace_bytes() const {
  size_t most = fwd_bytes_;
  if (bwd_data_bytes_ > most) most = bwd_data_bytes_;
  if (bwd_filter_bytes_ > most) most = bwd_filter_bytes_;
  return most;
}

std::string ConvPlan::describe() const {
  return "forward " + std::to_string(static_cast<int>(fwd_algo_)) + ", backward-data " +
         std::to_string(static_cast<int>(bwd_data_algo_)) + ", backward-filter " +
         std::to_string(static_cast<int>(bwd_filter_algo_)) + (tf32_ ? " (tf32 allowed)" : " (strict f32)");
}

Status ConvPlan::check_workspace(const char* op, size_t need, size_t have) const {
  if (!x_) return internal_error(std::string("ConvPlan::") + op + ": create() was not called");
  if (have < need) {
    return invalid_argument(std::string("ConvPlan::") + op + ": " + std::to_string(have) +
                            " bytes of workspace, the algorithm needs " + std::to_string(need));
  }
  return {};
}

Status ConvPlan::forward(const CudnnHandle& h, const float* x, const float* w, float* y, void* workspace,
                         size_t size) const {
  TROUPE_RETURN_IF_ERROR(check_workspace("forward", fwd_bytes_, size));
  const float one = 1.0f, zero = 0.0f;
  TROUPE_CUDNN_CHECK(cudnnConvolutionForward(h.get(), &one, x_, x, w_, w, fwd_, fwd_algo_, workspace, size, &zero,
                                             y_, y));
  return {};
}

Status ConvPlan::backward_data(const CudnnHandle& h, const float* w, const float* dy, float* dx, void* workspace,
                               size_t size) const {
  TROUPE_RETURN_IF_ERROR(check_workspace("backward_data", bwd_data_bytes_, size));
  const float one = 1.0f, zero = 0.0f;
  TROUPE_CUDNN_CHECK(cudnnConvolutionBackwardData(h.get(), &one, w_, w, y_, dy, bwd_data_, bwd_data_algo_, workspace,
                                                  size, &zero, x_, dx));
  return {};
}

Status ConvPlan::backward_filter(const CudnnHandle& h, const float* x, const float* dy, float* dw, void* workspace,
                                 size_t size) const {
  TROUPE_RETURN_IF_ERROR(check_workspace("backward_filter", bwd_filter_bytes_, size));
  const float one = 1.0f, zero = 0.0f;
  TROUPE_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h.get(), &one, x_, x, y_, dy, bwd_filter_, bwd_filter_algo_,
                                                    workspace, size, &zero, w_, dw));
  return {};
}

}  // namespace troupe::kernels::cuda
