// matmul (OpenBLAS sgemm, row-major) against a naive triple loop in double precision, for all four
// transpose combinations, alpha/beta, prime sizes and the empty cases.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::random_floats;

namespace {

// Reference C = alpha * op(A) op(B) + beta * C0 in double; `bound` receives, per element, the sum of
// magnitudes |alpha| sum |a b| + |beta c0| that a floating-point error bound scales with.
void reference_matmul(bool ta, bool tb, int m, int n, int k, float alpha, const std::vector<float>& a,
                      const std::vector<float>& b, float beta, const std::vector<float>& c0,
                      std::vector<double>* c, std::vector<double>* bound) {
  c->assign(static_cast<size_t>(m) * n, 0.0);
  bound->assign(c->size(), 0.0);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double acc = 0, mag = 0;
      for (int p = 0; p < k; ++p) {
        const double av = ta ? a[static_cast<size_t>(p) * m + i] : a[static_cast<size_t>(i) * k + p];
        const double bv = tb ? b[static_cast<size_t>(j) * k + p] : b[static_cast<size_t>(p) * n + j];
        acc += av * bv;
        mag += std::fabs(av * bv);
      }
      const double cv = c0[static_cast<size_t>(i) * n + j];
      (*c)[static_cast<size_t>(i) * n + j] = alpha * acc + beta * cv;
      (*bound)[static_cast<size_t>(i) * n + j] = std::fabs(alpha) * mag + std::fabs(beta * cv);
    }
  }
}

// Runs one case and returns "" or a description of the first wrong element. The tolerance is the
// classic worst-case bound for a k-term f32 dot product, (k + 2) * FLT_EPSILON times the magnitude
// sum, which any correct summation order (blocked, FMA, vectorised) stays inside.
std::string check_case(bool ta, bool tb, int m, int n, int k, float alpha, float beta, uint64_t seed) {
  auto a = random_floats(static_cast<size_t>(m) * k, seed);
  auto b = random_floats(static_cast<size_t>(k) * n, seed + 1);
  auto c = random_floats(static_cast<size_t>(m) * n, seed + 2);
  std::vector<double> want, bound;
  reference_matmul(ta, tb, m, n, k, alpha, a, b, beta, c, &want, &bound);
  cpu::matmul(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, c.data());
  for (size_t i = 0; i < c.size(); ++i) {
    const double tol = (k + 2) * static_cast<double>(FLT_EPSILON) * bound[i] + 1e-30;
    if (!(std::fabs(c[i] - want[i]) <= tol)) {
      std::ostringstream os;
      os << "trans_a=" << ta << " trans_b=" << tb << " m=" << m << " n=" << n << " k=" << k << " alpha=" << alpha
         << " beta=" << beta << ": C[" << i << "] = " << c[i] << ", want " << want[i] << " (tolerance " << tol << ")";
      return os.str();
    }
  }
  return {};
}

}  // namespace

TEST_CASE("matmul matches a naive triple loop for every transpose combination and prime size", "[matmul]") {
  const int sizes[] = {1, 3, 17, 131};
  uint64_t seed = 1;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (int m : sizes) {
        for (int n : sizes) {
          for (int k : sizes) {
            INFO("trans_a=" << ta << " trans_b=" << tb << " m=" << m << " n=" << n << " k=" << k);
            REQUIRE(check_case(ta, tb, m, n, k, 1.0f, 0.0f, seed++) == "");
          }
        }
      }
    }
  }
}

TEST_CASE("matmul applies alpha and beta", "[matmul]") {
  const float pairs[][2] = {{2.5f, 0.0f}, {1.0f, 1.0f}, {-0.5f, 0.75f}, {0.0f, 2.0f}};
  uint64_t seed = 100;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (const auto& ab : pairs) {
        REQUIRE(check_case(ta, tb, 17, 13, 31, ab[0], ab[1], seed++) == "");
      }
    }
  }
}

TEST_CASE("matmul with beta = 0 overwrites C without reading it", "[matmul]") {
  // Callers (MlpCpu) pass uninitialised workspaces with beta = 0: BLAS semantics say C is not read,
  // so a NaN already in C must not leak into the result (NaN * 0 would be NaN).
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int k : {0, 5}) {
    auto a = random_floats(static_cast<size_t>(4) * k, 7);
    auto b = random_floats(static_cast<size_t>(k) * 3, 8);
    std::vector<float> c(12, nan);
    cpu::matmul(false, false, 4, 3, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    for (float v : c) REQUIRE(std::isfinite(v));
  }
}

TEST_CASE("matmul with k = 0 scales C by beta", "[matmul]") {
  // op(A) op(B) is an empty sum (all zeros), so C = beta * C; a and b are never read.
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<float> c = {1, -2, 3, 4, 5, -6};
      cpu::matmul(ta, tb, 2, 3, 0, 1.0f, nullptr, nullptr, 0.5f, c.data());
      REQUIRE(c == std::vector<float>{0.5f, -1.0f, 1.5f, 2.0f, 2.5f, -3.0f});
      cpu::matmul(ta, tb, 2, 3, 0, 1.0f, nullptr, nullptr, 0.0f, c.data());
      REQUIRE(c == std::vector<float>(6, 0.0f));
    }
  }
}

TEST_CASE("matmul with m = 0 or n = 0 does nothing", "[matmul]") {
  std::vector<float> a(8, 1.0f), b(8, 1.0f), c(8, 42.0f);
  cpu::matmul(false, false, 0, 4, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  cpu::matmul(true, true, 4, 0, 2, 1.0f, a.data(), b.data(), 0.0f, c.data());
  cpu::matmul(false, true, 0, 0, 0, 1.0f, nullptr, nullptr, 0.0f, nullptr);
  REQUIRE(c == std::vector<float>(8, 42.0f));
}

TEST_CASE("matmul is correct with one or more BLAS threads", "[matmul]") {
  // Workers call set_blas_threads(1); results must be correct with any count, and a count below 1
  // is clamped to 1 rather than handed to OpenBLAS (where 0 means "all cores").
  for (int threads : {2, 1}) {
    cpu::set_blas_threads(threads);
    REQUIRE(check_case(false, false, 131, 131, 131, 1.0f, 0.0f, 900 + threads) == "");
  }
  cpu::set_blas_threads(0);  // clamped to 1
  REQUIRE(check_case(true, false, 64, 17, 33, 1.0f, 0.0f, 950) == "");
}
