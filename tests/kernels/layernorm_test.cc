// LayerNorm (kernels/cpu/layernorm.cc) against a direct f64 reference, and its backward against
// central differences of the forward (tolerances as in gradcheck_test.cc: f32 forward, eps 1e-2).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/transformer.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::central_difference;
using troupe::testing::first_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

namespace {
constexpr int64_t kRows = 5, kDim = 19;

struct Ln {
  std::vector<float> x = random_floats(kRows * kDim, 1, -2.0f, 3.0f);
  std::vector<float> gamma = random_floats(kDim, 2, 0.5f, 1.5f);
  std::vector<float> beta = random_floats(kDim, 3);
  std::vector<float> y = std::vector<float>(kRows * kDim), mean = std::vector<float>(kRows), rstd = mean;
  void forward() { cpu::layernorm_forward(x.data(), gamma.data(), beta.data(), kRows, kDim, 1e-5f, y.data(), mean.data(), rstd.data()); }
};
}  // namespace

TEST_CASE("layernorm forward matches a direct f64 reference", "[kernels][transformer]") {
  Ln ln;
  ln.forward();
  std::vector<double> want(ln.x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double m = 0, v = 0;
    for (int64_t c = 0; c < kDim; ++c) m += ln.x[r * kDim + c];
    m /= kDim;
    for (int64_t c = 0; c < kDim; ++c) v += (ln.x[r * kDim + c] - m) * (ln.x[r * kDim + c] - m);
    const double s = 1.0 / std::sqrt(v / kDim + 1e-5);
    for (int64_t c = 0; c < kDim; ++c) want[r * kDim + c] = (ln.x[r * kDim + c] - m) * s * ln.gamma[c] + ln.beta[c];
  }
  CHECK(first_difference(ln.y, want, 1e-5, 1e-5) == "");
}

TEST_CASE("layernorm backward matches finite differences and adds into its outputs", "[kernels][transformer][gradcheck]") {
  Ln ln;
  const std::vector<float> probe = random_floats(kRows * kDim, 4);
  auto loss = [&] {
    ln.forward();
    double l = 0;
    for (size_t i = 0; i < ln.y.size(); ++i) l += probe[i] * static_cast<double>(ln.y[i]) + 0.5 * double(ln.y[i]) * ln.y[i];
    return l;
  };
  ln.forward();
  std::vector<float> dy(ln.y.size());
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = probe[i] + ln.y[i];
  // Start the outputs at 1: the kernel adds, so the analytic gradient is what it added.
  std::vector<float> dx(ln.x.size(), 1.0f), dgamma(kDim, 1.0f), dbeta(kDim, 1.0f);
  cpu::layernorm_backward(dy.data(), ln.x.data(), ln.gamma.data(), ln.mean.data(), ln.rstd.data(), kRows, kDim,
                          dx.data(), dgamma.data(), dbeta.data());
  auto check = [&](const char* what, std::vector<float>& p, const std::vector<float>& g) {
    for (size_t i = 0; i < p.size(); ++i) {
      const double numeric = central_difference(&p[i], 1e-2f, loss);
      INFO(what << "[" << i << "]: analytic " << g[i] - 1.0 << ", numeric " << numeric);
      REQUIRE(gradients_agree(numeric, g[i] - 1.0, 1e-2, 1e-3));
    }
  };
  check("x", ln.x, dx);
  check("gamma", ln.gamma, dgamma);
  check("beta", ln.beta, dbeta);
}
