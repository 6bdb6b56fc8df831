// Matrix multiply on the CPU through OpenBLAS's sgemm (row-major interface).
#include <cblas.h>

#include "kernels/cpu/ops.h"

namespace troupe::kernels::cpu {

void matmul(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, const float* b,
            float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // op(A) op(B) is all zeros: C = beta * C (BLAS implementations differ here)
    size_t total = static_cast<size_t>(m) * n;
    if (beta == 0.0f) {
      for (size_t i = 0; i < total; ++i) c[i] = 0.0f;
    } else {
      scale(c, total, beta);
    }
    return;
  }
  const int lda = trans_a ? m : k;
  const int ldb = trans_b ? k : n;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
              alpha, a, lda, b, ldb, beta, c, n);
}

void set_blas_threads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }

}  // namespace troupe::kernels::cpu
