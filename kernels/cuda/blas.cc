#include "kernels/cuda/blas.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/ops.h"

namespace troupe::kernels::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// What every product checks and does before cuBLAS: negative sizes refused, an empty C nothing to
// do, k = 0 gives C = beta * C (C = 0 when beta is 0, even where C held NaN, as BLAS does). Sets
// *done when nothing is left for cuBLAS.
Status edge_cases(const char* op, const CublasHandle& handle, int m, int n, int k, float beta, float* c, bool* done) {
  *done = true;
  if (m < 0 || n < 0 || k < 0) {
    return invalid_argument(std::string("cuda::") + op + ": negative size m=" + std::to_string(m) +
                            " n=" + std::to_string(n) + " k=" + std::to_string(k));
  }
  if (!handle.get()) return internal_error(std::string("cuda::") + op + ": the cuBLAS handle was not created");
  if (m == 0 || n == 0) return {};
  if (k == 0) {
    if (beta == 0.0f) {
      TROUPE_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(float) * size_t(m) * n, handle.stream()));
      return {};
    }
    return scale(c, size_t(m) * n, beta, handle.stream());
  }
  *done = false;
  return {};
}

}  // namespace

CublasHandle::~CublasHandle() {
  if (handle_) cublasDestroy(handle_);
  if (workspace_) cudaFree(workspace_);
}

Status CublasHandle::create(cudaStream_t stream) {
  if (handle_) return internal_error("CublasHandle::create called twice");
  TROUPE_CUBLAS_CHECK(cublasCreate(&handle_));
  TROUPE_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
  TROUPE_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes));
  TROUPE_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_, kWorkspaceBytes));
  return set_stream(stream);
}

Status CublasHandle::set_stream(cudaStream_t stream) {
  if (!handle_) return internal_error("CublasHandle::set_stream before create()");
  TROUPE_CUBLAS_CHECK(cublasSetStream(handle_, stream));
  stream_ = stream;
  return {};
}

Status matmul(const CublasHandle& handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float* a, const float* b, float beta, float* c) {
  bool done = false;
  TROUPE_RETURN_IF_ERROR(edge_cases("matmul", handle, m, n, k, beta, c, &done));
  if (done) return {};
  // cuBLAS is column-major. A row-major R x C matrix is the column-major C x R matrix (its
  // transpose) with leading dimension C. So row-major C = op(A) op(B) is column-major
  // C^T = op(B)^T op(A)^T: swap the operands, keep each one's transpose flag.
  const int lda = trans_a ? m : k;  // row length of A as stored
  const int ldb = trans_b ? k : n;  // row length of B as stored
  TROUPE_CUBLAS_CHECK(cublasSgemm(handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                  trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, ldb, a, lda, &beta, c,
                                  n));
  return {};
}

Status matmul_low(const CublasHandle& handle, DType type, bool trans_a, bool trans_b, int m, int n, int k,
                  float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c) {
  if (type != DType::bf16 && type != DType::f16)
    return invalid_argument(std::string("cuda::matmul_low: operands are bf16 or f16, not ") + dtype_name(type));
  bool done = false;
  TROUPE_RETURN_IF_ERROR(edge_cases("matmul_low", handle, m, n, k, beta, c, &done));
  if (done) return {};
  // Row-major to column-major as in matmul above: operands swapped, transpose flags kept.
  const cudaDataType_t t = type == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  TROUPE_CUBLAS_CHECK(cublasGemmEx(handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, t, ldb, a, t, lda, &beta,
                                   c, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return {};
}

Status matmul_strided(const CublasHandle& handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                      float beta, float* c, int64_t ldc, int64_t stride_c, int count) {
  if (count < 0 || m < 0 || n < 0 || k < 0)
    return invalid_argument("cuda::matmul_strided: negative size (m " + std::to_string(m) + ", n " + std::to_string(n) +
                            ", k " + std::to_string(k) + ", count " + std::to_string(count) + ")");
  if (count == 0 || m == 0 || n == 0) return {};
  if (!handle.get()) return invalid_argument("cuda::matmul_strided: the cuBLAS handle was not created");
  if (!a || !b || !c) return invalid_argument("cuda::matmul_strided: a null matrix");
  // Row-major to column-major as matmul: operands swapped, each keeps its transpose flag; the row
  // strides are the column-major leading dimensions.
  TROUPE_CUBLAS_CHECK(cublasSgemmStridedBatched(
      handle.get(), trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
      static_cast<int>(ldb), static_cast<long long>(stride_b), a, static_cast<int>(lda), static_cast<long long>(stride_a),
      &beta, c, static_cast<int>(ldc), static_cast<long long>(stride_c), count));
  return {};
}

}  // namespace troupe::kernels::cuda
