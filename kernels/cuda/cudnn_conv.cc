#include "kernels/cuda/cudnn_conv.h"

#include <string>
#include <vector>

namespace troupe::kernels::cuda {

Status cudnn_status(cudnnStatus_t st, const char* what, const char* file, int line) {
  if (st == CUDNN_STATUS_SUCCESS) return {};
  std::string msg = std::string(file) + ":" + std::to_string(line) + ": " + what + " failed: " +
                    cudnnGetErrorString(st) + " (" + std::to_string(static_cast<int>(st)) + ")";
  const int code = static_cast<int>(st);
  // 1xxx: library set-up (sub-libraries missing or mismatched); 3xxx: not supported here (driver,
  // architecture, missing prerequisites); 4004: out of device memory.
  if ((code >= 1000 && code < 2000) || (code >= 3000 && code < 4000) ||
      st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) {
    return unavailable(msg + "; check that cuDNN 9 (libcudnn.so.9 and its libcudnn_*.so.9) is on the library path "
                             "and matches the CUDA driver, or train the cnn with --device cpu");
  }
  return internal_error(msg);
}

namespace {

// The first result that succeeded and fits `limit`, deterministic ones first; in strict f32 only
// algorithms that do not use tensor cores. -1 when none does.
template <class Perf>
int pick(const std::vector<Perf>& perf, int returned, size_t limit, bool tf32) {
  int fallback = -1;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > limit) continue;
    if (!tf32 && (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;
    if (p.determinism == CUDNN_DETERMINISTIC) return i;
    if (fallback < 0) fallback = i;
  }
  return fallback;
}

// The math type to set on a direction's descriptor: the chosen algorithm's with tf32, else FMA only.
cudnnMathType_t math_for(cudnnMathType_t chosen, bool tf32) { return tf32 ? chosen : CUDNN_FMA_MATH; }

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
    const int i = pick(perf, got, limit, tf32);
    if (i < 0) return no_algorithm("forward", s, limit);
    fwd_algo_ = perf[i].algo;
    TROUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(fwd_, math_for(perf[i].mathType, tf32)));
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h.get(), x_, w_, fwd_, y_, fwd_algo_, &fwd_bytes_));
  }
  {
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h.get(), &max));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
    TROUPE_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h.get(), w_, y_, bwd_data_, x_, max, &got, perf.data()));
    const int i = pick(perf, got, limit, tf32);
    if (i < 0) return no_algorithm("backward-data", s, limit);
    bwd_data_algo_ = perf[i].algo;
    TROUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_data_, math_for(perf[i].mathType, tf32)));
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h.get(), w_, y_, bwd_data_, x_, bwd_data_algo_,
                                                                    &bwd_data_bytes_));
  }
  {
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h.get(), &max));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(static_cast<size_t>(max > 0 ? max : 1));
    TROUPE_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(h.get(), x_, y_, bwd_filter_, w_, max, &got, perf.data()));
    const int i = pick(perf, got, limit, tf32);
    if (i < 0) return no_algorithm("backward-filter", s, limit);
    bwd_filter_algo_ = perf[i].algo;
    TROUPE_CUDNN_CHECK(cudnnSetConvolutionMathType(bwd_filter_, math_for(perf[i].mathType, tf32)));
    TROUPE_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h.get(), x_, y_, bwd_filter_, w_,
                                                                      bwd_filter_algo_, &bwd_filter_bytes_));
  }
  // The sizes asked after setting each descriptor's math type are what the calls need; they were
  // within the limit in the heuristics' answers, but check rather than trust.
  if (workspace_bytes() > limit) {
    return unavailable("ConvPlan: the chosen cuDNN algorithms need " + std::to_string(workspace_bytes()) +
                       " bytes of workspace, more than the " + std::to_string(limit) + " allowed");
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
