// Dense-layer helpers: bias_act (with and without ReLU), relu_backward and bias_grad against
// straightforward loops written here.
#include <catch2/catch.hpp>

#include <limits>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

TEST_CASE("bias_act adds the bias to every row, then applies ReLU when asked", "[layers]") {
  // 37 columns: not a multiple of any vector width, so the scalar tails of the clones run too.
  for (int rows : {1, 5}) {
    for (int cols : {1, 7, 37}) {
      for (bool relu : {false, true}) {
        auto x = random_floats(static_cast<size_t>(rows) * cols, rows * 100 + cols);
        auto bias = random_floats(cols, 7 + cols);
        std::vector<float> want(x.size());
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < cols; ++c) {
            float v = x[r * cols + c] + bias[c];
            want[r * cols + c] = relu && v < 0 ? 0.0f : v;
          }
        }
        cpu::bias_act(x.data(), bias.data(), rows, cols, relu);
        INFO("rows=" << rows << " cols=" << cols << " relu=" << relu);
        // One f32 addition, same order: the result is exact.
        REQUIRE(first_difference(x, want, 0, 0) == "");
      }
    }
  }
}

TEST_CASE("bias_act with ReLU clamps negative values to exactly zero", "[layers]") {
  std::vector<float> x = {-3.0f, -0.5f, 0.5f, 2.0f};
  std::vector<float> bias = {1.0f, 0.5f, -0.5f, 1.0f};
  cpu::bias_act(x.data(), bias.data(), 1, 4, true);
  REQUIRE(x == std::vector<float>{0.0f, 0.0f, 0.0f, 3.0f});
}

TEST_CASE("relu_backward zeroes the gradient where the ReLU output is not positive", "[layers]") {
  const size_t n = 53;
  auto y = random_floats(n, 11);
  for (size_t i = 0; i < n; i += 3) y[i] = 0.0f;  // exact zeros are the clamped outputs
  auto dy = random_floats(n, 12);
  std::vector<float> want(n);
  for (size_t i = 0; i < n; ++i) want[i] = y[i] > 0 ? dy[i] : 0.0f;
  cpu::relu_backward(dy.data(), y.data(), n);
  REQUIRE(first_difference(dy, want, 0, 0) == "");
}

TEST_CASE("bias_grad sums the gradient over rows and overwrites db", "[layers]") {
  for (int rows : {1, 3, 129}) {
    for (int cols : {1, 10, 33}) {
      auto dy = random_floats(static_cast<size_t>(rows) * cols, rows + 17 * cols);
      std::vector<double> want(cols, 0.0);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) want[c] += dy[r * cols + c];
      }
      std::vector<float> db(cols, std::numeric_limits<float>::quiet_NaN());  // must be overwritten
      cpu::bias_grad(dy.data(), rows, cols, db.data());
      INFO("rows=" << rows << " cols=" << cols);
      // rows f32 additions of values in [-1, 1]: error <= rows * FLT_EPSILON * rows (loose bound).
      REQUIRE(first_difference(db.data(), want.data(), cols, 0, rows * rows * 1.2e-7) == "");
    }
  }
}

TEST_CASE("bias_grad over zero rows gives zeros", "[layers]") {
  std::vector<float> db(4, 5.0f);
  cpu::bias_grad(nullptr, 0, 4, db.data());
  REQUIRE(db == std::vector<float>(4, 0.0f));
}

TEST_CASE("dense-layer helpers with size 0 do nothing", "[layers]") {
  std::vector<float> x(4, 3.0f);
  cpu::bias_act(x.data(), x.data(), 0, 4, true);
  cpu::bias_act(x.data(), x.data(), 4, 0, true);
  cpu::relu_backward(x.data(), x.data(), 0);
  cpu::bias_grad(x.data(), 4, 0, x.data());
  cpu::bias_act(nullptr, nullptr, 0, 0, false);
  cpu::relu_backward(nullptr, nullptr, 0);
  cpu::bias_grad(nullptr, 0, 0, nullptr);
  REQUIRE(x == std::vector<float>(4, 3.0f));
}
