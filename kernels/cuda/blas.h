// cuBLAS behind row-major semantics: CublasHandle owns a cublasHandle_t bound to one stream with its
// own workspace (so work enqueued through it can be captured in a CUDA graph), and matmul() is
// kernels::cpu::matmul for device pointers.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "core/status.h"

namespace troupe::kernels::cuda {

class CublasHandle {
 public:
  CublasHandle() = default;
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  // Creates the handle on the current device, bound to `stream`, with a 32 MiB workspace (cuBLAS
  // then never allocates while a graph is being captured). Math is strict f32 (no TF32), so
  // results match the CPU reference to f32 rounding
  // (unless the environment sets NVIDIA_TF32_OVERRIDE=1). Fails `unavailable` without a usable GPU.
  Status create(cudaStream_t stream);
  Status set_stream(cudaStream_t stream);
  cublasHandle_t get() const { return handle_; }
  cudaStream_t stream() const { return stream_; }

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* workspace_ = nullptr;
};

// C[m x n] = alpha * op(A) * op(B) + beta * C, all row-major device buffers, exactly as
// kernels::cpu::matmul: op(A) is m x k (A is k x m when trans_a), op(B) is k x n (B is n x k when
// trans_b). Enqueued on the handle's stream. m or n of 0 does nothing; k of 0 sets C = beta * C
// (C = 0 when beta is 0, even where C held NaN, as BLAS does). Negative sizes are invalid_argument.
Status matmul(const CublasHandle& handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
              const float* a, const float* b, float beta, float* c);

// matmul with A and B held as `type` (bf16 or f16) bits, products and sums in f32 (cublasGemmEx,
// CUBLAS_COMPUTE_32F: tensor cores), C in f32: the CPU path's mixed precision (operands rounded to
// the type, f32 accumulation) up to summation order.
Status matmul_low(const CublasHandle& handle, DType type, bool trans_a, bool trans_b, int m, int n, int k,
                  float alpha, const uint16_t* a, const uint16_t* b, float beta, float* c);

// `count` products C_i = alpha * op(A_i) * op(B_i) + beta * C_i of row-major views given by their
// row strides (lda, ldb, ldc: floats from one row to the next as stored) and batch strides
// (stride_a, ...: floats from A_i to A_{i+1}); shapes as matmul's. cublasSgemmStridedBatched: an
// attention call's heads are such a batch (a head's columns start head_dim floats after the last).
Status matmul_strided(const CublasHandle& handle, bool trans_a, bool trans_b, int m, int n, int k, float alpha,
                      const float* a, int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b,
                      float beta, float* c, int64_t ldc, int64_t stride_c, int count);

}  // namespace troupe::kernels::cuda
