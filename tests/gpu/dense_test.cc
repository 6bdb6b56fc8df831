// Dense-layer kernels (bias_act, relu_backward, bias_grad and the fused relu_backward_bias_grad)
// against their kernels::cpu references.
#include <cmath>
#include <utility>

#include "gpu_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"

namespace troupe {
namespace {

using test::DeviceArray;
namespace kc = kernels::cuda;

const std::pair<int, int> kShapes[] = {{0, 5}, {5, 0}, {1, 1}, {7, 13}, {128, 256}, {128, 10}, {257, 31},
                                       {1021, 3}, {3, 1021}, {4099, 129}};

TEST_CASE("cuda bias_act matches cpu bias_act exactly", "[gpu][dense]") {
  // One f32 add and a comparison per element: no rounding freedom, so results are bit-identical.
  for (auto [rows, cols] : kShapes) {
    for (bool relu : {false, true}) {
      CAPTURE(rows, cols, relu);
      auto x = test::random_floats(size_t(rows) * cols, rows * 31 + cols);
      auto bias = test::random_floats(size_t(cols), cols);
      std::vector<float> ref = x;
      kernels::cpu::bias_act(ref.data(), bias.data(), rows, cols, relu);
      DeviceArray<float> dx(x), db(bias);
      REQUIRE(kc::bias_act(dx.get(), db.get(), rows, cols, relu).ok());
      CHECK_SAME(dx.host(), ref);
    }
  }
  CHECK(kc::bias_act(nullptr, nullptr, -1, 3, true).code() == Code::invalid_argument);
  CHECK(kc::bias_act(nullptr, nullptr, 2, 3, true).code() == Code::invalid_argument);
}

TEST_CASE("cuda relu_backward matches cpu relu_backward exactly", "[gpu][dense]") {
  for (size_t n : test::test_sizes()) {
    CAPTURE(n);
    auto dy = test::random_floats(n, n + 1);
    auto y = test::random_floats(n, n + 2);
    if (n > 3) y[3] = 0.0f;  // y == 0 masks too
    std::vector<float> ref = dy;
    kernels::cpu::relu_backward(ref.data(), y.data(), n);
    DeviceArray<float> ddy(dy), dyv(y);
    REQUIRE(kc::relu_backward(ddy.get(), dyv.get(), n).ok());
    CHECK_SAME(ddy.host(), ref);
  }
}

// Column sums in a different order than the CPU's sequential loop: both are within
// rows * u * sum_r |dy[r, c]| of the exact sum, so they differ by at most rows * eps * sum |dy|.
void check_column_sums(const std::vector<float>& got, const std::vector<float>& ref, const std::vector<float>& dy,
                       int rows, int cols) {
  for (int c = 0; c < cols; ++c) {
    double mag = 0;
    for (int r = 0; r < rows; ++r) mag += std::fabs(dy[size_t(r) * cols + c]);
    const double tol = (rows + 1) * test::kF32Eps * mag;
    INFO("column " << c);
    CHECK(std::fabs(got[c] - ref[c]) <= tol);
  }
}

TEST_CASE("cuda bias_grad matches cpu bias_grad", "[gpu][dense]") {
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto dy = test::random_floats(size_t(rows) * cols, rows + 7 * cols);
    std::vector<float> ref(cols, 0.0f);
    kernels::cpu::bias_grad(dy.data(), rows, cols, ref.data());
    DeviceArray<float> ddy(dy), db(std::vector<float>(cols, 42.0f));  // overwritten, not added to
    REQUIRE(kc::bias_grad(ddy.get(), rows, cols, db.get()).ok());
    check_column_sums(db.host(), ref, dy, rows, cols);
  }
}

TEST_CASE("cuda relu_backward_bias_grad equals cpu relu_backward then bias_grad", "[gpu][dense]") {
  for (auto [rows, cols] : kShapes) {
    CAPTURE(rows, cols);
    auto dy = test::random_floats(size_t(rows) * cols, rows * 3 + cols);
    auto y = test::random_floats(size_t(rows) * cols, rows * 5 + cols);
    std::vector<float> masked = dy, ref(cols, 0.0f);
    kernels::cpu::relu_backward(masked.data(), y.data(), masked.size());
    kernels::cpu::bias_grad(masked.data(), rows, cols, ref.data());
    DeviceArray<float> ddy(dy), dyv(y), db(std::vector<float>(cols, 42.0f));
    REQUIRE(kc::relu_backward_bias_grad(ddy.get(), dyv.get(), rows, cols, db.get()).ok());
    CHECK_SAME(ddy.host(), masked);  // the mask is exact
    check_column_sums(db.host(), ref, masked, rows, cols);
  }
}

}  // namespace
}  // namespace troupe
