// Turning CUDA runtime and cuBLAS return codes into troupe::Status values that say what failed and
// where: "kernels/cuda/blas.cc:42: cublasSgemm(...) failed: CUBLAS_STATUS_INVALID_VALUE". Use the
// macros inside functions returning Status (or Expected<T>); they return on the first failure.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/status.h"

namespace troupe::kernels::cuda {

// An ok Status for cudaSuccess; otherwise `unavailable` (no device, driver problems, out of memory)
// or `internal` (bad launch configurations and other troupe bugs), naming `what`, file and line.
// Clears the CUDA runtime's last-error slot so a later check does not report the same failure.
Status cuda_status(cudaError_t err, const char* what, const char* file, int line);
Status cublas_status(cublasStatus_t st, const char* what, const char* file, int line);
const char* cublas_error_name(cublasStatus_t st);

// Checks the error of the last kernel launch (bad grid, too many resources, missing device code).
Status launch_status(const char* kernel, const char* file, int line);

}  // namespace troupe::kernels::cuda

#define TROUPE_CUDA_CHECK(expr)                                                                  \
  TROUPE_RETURN_IF_ERROR(::troupe::kernels::cuda::cuda_status((expr), #expr, __FILE__, __LINE__))
#define TROUPE_CUBLAS_CHECK(expr)                                                                \
  TROUPE_RETURN_IF_ERROR(::troupe::kernels::cuda::cublas_status((expr), #expr, __FILE__, __LINE__))
// Place right after a <<<...>>> launch.
#define TROUPE_LAUNCH_CHECK(kernel_name) \
  TROUPE_RETURN_IF_ERROR(::troupe::kernels::cuda::launch_status(kernel_name, __FILE__, __LINE__))
