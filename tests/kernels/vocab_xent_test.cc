// Cross-entropy over a vocabulary (kernels/cpu/vocab_xent.cc) against a direct f64 reference
// (loss and gradient, with a loss scale, in place), its gradient against central differences, and
// a target outside the vocabulary giving NaN.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/transformer.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::central_difference;
using troupe::testing::first_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

TEST_CASE("vocab cross-entropy matches a direct f64 reference and finite differences", "[kernels][transformer][gradcheck]") {
  const int64_t rows = 7, vocab = 1003;  // odd: vector bodies and tails
  std::vector<float> z = random_floats(rows * vocab, 11, -6.0f, 6.0f);
  z[5] = 90.0f;  // a logit whose exp overflows f32 unless the max is subtracted
  const std::vector<int32_t> y{5, 0, 1002, 17, 400, 999, 3};
  std::vector<float> d(z.size());
  const float loss = cpu::vocab_xent(z.data(), y.data(), rows, vocab, 4.0f, d.data());
  double want_loss = 0;
  std::vector<double> want_d(z.size());
  for (int64_t r = 0; r < rows; ++r) {
    double top = -1e300, sum = 0;
    for (int64_t j = 0; j < vocab; ++j) top = std::max(top, double(z[r * vocab + j]));
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(z[r * vocab + j] - top);
    want_loss += std::log(sum) - (z[r * vocab + y[r]] - top);
    for (int64_t j = 0; j < vocab; ++j)
      want_d[r * vocab + j] = 4.0 * (std::exp(z[r * vocab + j] - top) / sum - (j == y[r])) / rows;
  }
  CHECK(loss == Approx(want_loss / rows).epsilon(1e-6));
  CHECK(first_difference(d, want_d, 1e-5, 1e-8) == "");
  SECTION("in place") {
    std::vector<float> in_place = z;
    CHECK(cpu::vocab_xent(in_place.data(), y.data(), rows, vocab, 4.0f, in_place.data()) == loss);
    CHECK(in_place == d);
  }
  SECTION("finite differences") {
    const int64_t small = 13;
    std::vector<float> zs = random_floats(3 * small, 12, -2.0f, 2.0f), ds(zs.size()), scratch(zs.size());
    const std::vector<int32_t> ys{4, 0, 12};
    cpu::vocab_xent(zs.data(), ys.data(), 3, small, 1.0f, ds.data());
    auto f = [&] { return double(cpu::vocab_xent(zs.data(), ys.data(), 3, small, 1.0f, scratch.data())); };
    for (size_t i = 0; i < zs.size(); ++i) {
      const double numeric = central_difference(&zs[i], 1e-2f, f);
      INFO("dlogits[" << i << "]: analytic " << ds[i] << ", numeric " << numeric);
      REQUIRE(gradients_agree(numeric, ds[i], 1e-2, 1e-4));
    }
  }
  SECTION("a target outside the vocabulary makes the loss NaN") {
    const std::vector<int32_t> bad{5, 0, 1003, 17, 400, 999, 3};
    CHECK(std::isnan(cpu::vocab_xent(z.data(), bad.data(), rows, vocab, 1.0f, d.data())));
  }
}
