// GELU (kernels/cpu/gelu.cc, the tanh approximation) against a direct f64 reference, and its
// derivative against central differences in f64 of that reference.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/transformer.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {
double gelu64(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }
}  // namespace

TEST_CASE("gelu forward and backward match f64 references", "[kernels][transformer][gradcheck]") {
  // Odd length: the vectorised body and its tail both run. Values well into both saturated ends.
  std::vector<float> x = random_floats(1003, 5, -8.0f, 8.0f);
  std::vector<float> y(x.size()), dy = random_floats(x.size(), 6), dx(x.size());
  cpu::gelu_forward(x.data(), y.data(), x.size());
  cpu::gelu_backward(x.data(), dy.data(), dx.data(), x.size());
  std::vector<double> want_y(x.size()), want_dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    want_y[i] = gelu64(x[i]);
    const double h = 1e-6;
    want_dx[i] = dy[i] * (gelu64(x[i] + h) - gelu64(x[i] - h)) / (2 * h);
  }
  CHECK(first_difference(y, want_y, 1e-5, 1e-6) == "");
  CHECK(first_difference(dx, want_dx, 1e-4, 1e-5) == "");
  SECTION("in place") {
    std::vector<float> z = x;
    cpu::gelu_forward(z.data(), z.data(), z.size());
    CHECK(z == y);
  }
}
