#include "kernels/cuda/check.h"

#include <string>

namespace troupe::kernels::cuda {
namespace {

std::string where(const char* file, int line) {
  // Keep the path from the source root on: ".../troupe/kernels/cuda/x.cu" -> "kernels/cuda/x.cu".
  std::string f(file);
  for (const char* root : {"/kernels/", "/trainers/", "/tests/", "/bench/"}) {
    size_t at = f.rfind(root);
    if (at != std::string::npos) return f.substr(at + 1) + ":" + std::to_string(line);
  }
  return f + ":" + std::to_string(line);
}

bool is_environment_error(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorMemoryAllocation:
    case cudaErrorDevicesUnavailable:
    case cudaErrorInvalidDevice:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorNoKernelImageForDevice:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return {};
  cudaGetLastError();  // clear a non-sticky error so the next check starts clean
  std::string msg = where(file, line) + ": " + what + " failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")";
  if (err == cudaErrorNoKernelImageForDevice) {
    msg += "; rebuild with -DCMAKE_CUDA_ARCHITECTURES set to this GPU's compute capability";
  } else if (err == cudaErrorMemoryAllocation) {
    msg += "; use a smaller batch or free GPU memory held by other processes";
  }
  return {is_environment_error(err) ? Code::unavailable : Code::internal, msg};
}

const char* cublas_error_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_<unknown>";
  }
}

Status cublas_status(cublasStatus_t st, const char* what, const char* file, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return {};
  bool env = st == CUBLAS_STATUS_NOT_INITIALIZED || st == CUBLAS_STATUS_ALLOC_FAILED ||
             st == CUBLAS_STATUS_ARCH_MISMATCH;
  return {env ? Code::unavailable : Code::internal,
          where(file, line) + ": " + what + " failed: " + cublas_error_name(st)};
}

Status launch_status(const char* kernel, const char* file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return {};
  std::string what = std::string("launching ") + kernel;
  return cuda_status(err, what.c_str(), file, line);
}

}  // namespace troupe::kernels::cuda
