// cuda::matmul against cpu::matmul (OpenBLAS) for every transpose combination and odd shapes.
#include <cmath>
#include <tuple>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/blas.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/runtime.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;

// Both libraries sum k products in f32, in different orders and with or without FMA. Each result
// is within k * u * sum_j |a_ij b_jn| of the exact value (u = eps / 2, the standard bound), so the
// two differ by at most k * eps * sum_j |a_ij b_jn|. A wrong transpose or leading dimension gives
// errors of the size of the values themselves, far outside it.
void check_matmul(const kc::CublasHandle& blas, bool ta, bool tb, int m, int n, int k, float alpha, float beta) {
  CAPTURE(ta, tb, m, n, k, alpha, beta);
  auto a = test::random_floats(size_t(m) * k, 1 + m);
  auto b = test::random_floats(size_t(k) * n, 2 + n);
  auto c = test::random_floats(size_t(m) * n, 3 + k);
  std::vector<float> ref = c;
  kernels::cpu::matmul(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, ref.data());
  DeviceArray<float> da(a), db(b), dc(c);
  REQUIRE(kc::matmul(blas, ta, tb, m, n, k, alpha, da.get(), db.get(), beta, dc.get()).ok());
  auto got = dc.host();
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double mag = std::fabs(beta * c[size_t(i) * n + j]);
      for (int p = 0; p < k; ++p) {
        float av = ta ? a[size_t(p) * m + i] : a[size_t(i) * k + p];
        float bv = tb ? b[size_t(j) * k + p] : b[size_t(p) * n + j];
        mag += std::fabs(alpha * av * bv);
      }
      const double tol = (k + 2) * test::kF32Eps * mag + 1e-30;
      const size_t at = size_t(i) * n + j;
      if (std::fabs(got[at] - ref[at]) > tol) {
        FAIL("C[" << i << "," << j << "] = " << got[at] << " on the GPU, " << ref[at] << " on the CPU (tol " << tol
                  << ")");
      }
    }
  }
}

TEST_CASE("cuda matmul matches cpu matmul for all transposes and shapes", "[gpu][blas]") {
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  for (auto [m, n, k] : {std::tuple{1, 1, 1}, {7, 13, 5}, {128, 256, 784}, {128, 10, 128}, {31, 1, 257},
                         {1, 29, 3}, {0, 5, 3}, {5, 0, 3}}) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) check_matmul(blas, ta, tb, m, n, k, 1.0f, 0.0f);
    }
  }
  check_matmul(blas, false, true, 33, 17, 65, 0.5f, 1.0f);   // accumulate into C
  check_matmul(blas, true, false, 19, 23, 11, -2.0f, 0.25f);
}

TEST_CASE("cuda matmul with k = 0 scales C by beta and zeroes it for beta = 0", "[gpu][blas]") {
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  std::vector<float> c{1.0f, NAN, -3.0f, 4.0f};
  DeviceArray<float> dc(c);
  REQUIRE(kc::matmul(blas, false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.5f, dc.get()).ok());
  auto got = dc.host();
  CHECK(got[0] == 0.5f);
  CHECK(std::isnan(got[1]));
  CHECK(got[3] == 2.0f);
  REQUIRE(kc::matmul(blas, false, false, 2, 2, 0, 1.0f, nullptr, nullptr, 0.0f, dc.get()).ok());
  for (float v : dc.host()) CHECK(v == 0.0f);  // beta = 0 never reads C, as BLAS
}

TEST_CASE("cuda matmul rejects negative sizes and an uncreated handle", "[gpu][blas]") {
  kc::CublasHandle none;
  Status st = kc::matmul(none, false, false, 1, 1, 1, 1.0f, nullptr, nullptr, 0.0f, nullptr);
  CHECK(st.code() == Code::internal);
  kc::Stream stream;
  REQUIRE(stream.create().ok());
  kc::CublasHandle blas;
  REQUIRE(blas.create(stream.get()).ok());
  st = kc::matmul(blas, false, false, -1, 1, 1, 1.0f, nullptr, nullptr, 0.0f, nullptr);
  CHECK(st.code() == Code::invalid_argument);
  CHECK_THAT(st.message(), Catch::Contains("m=-1"));
}

Status failing_call() {
  TROUPE_CUDA_CHECK(cudaSetDevice(-1));
  return {};
}

TEST_CASE("TROUPE_CUDA_CHECK records the expression, file and line", "[gpu][check]") {
  Status st = failing_call();
  REQUIRE_FALSE(st.ok());
  CHECK(st.code() == Code::unavailable);  // invalid device: an environment problem, not a bug
  CHECK_THAT(st.message(), Catch::Contains("tests/gpu/blas_test.cc:"));
  CHECK_THAT(st.message(), Catch::Contains("cudaSetDevice(-1)"));
  CHECK(cudaGetLastError() == cudaSuccess);  // the check cleared the error
}

}  // namespace
}  // namespace troupe
