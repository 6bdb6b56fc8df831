// softmax_xent: loss and gradient against a double-precision reference, the correct count,
// stability with huge logits, bad labels, aliasing and the empty case.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {

struct Reference {
  double loss = 0;
  std::vector<double> grad;
  int64_t correct = 0;
};

// Mean cross-entropy, its gradient and the arg-max count, in double with the max subtracted.
Reference reference_xent(const std::vector<float>& z, const std::vector<int32_t>& y, int rows, int classes) {
  Reference ref;
  ref.grad.resize(z.size());
  for (int r = 0; r < rows; ++r) {
    const float* row = &z[static_cast<size_t>(r) * classes];
    int argmax = 0;
    for (int j = 1; j < classes; ++j) argmax = row[j] > row[argmax] ? j : argmax;
    double sum = 0;
    for (int j = 0; j < classes; ++j) sum += std::exp(static_cast<double>(row[j]) - row[argmax]);
    ref.loss += std::log(sum) - (static_cast<double>(row[y[r]]) - row[argmax]);
    for (int j = 0; j < classes; ++j) {
      double p = std::exp(static_cast<double>(row[j]) - row[argmax]) / sum;
      ref.grad[static_cast<size_t>(r) * classes + j] = (p - (j == y[r] ? 1.0 : 0.0)) / rows;
    }
    ref.correct += argmax == y[r];
  }
  ref.loss /= rows;
  return ref;
}

std::vector<int32_t> labels_for(int rows, int classes) {
  std::vector<int32_t> y(rows);
  for (int r = 0; r < rows; ++r) y[r] = (r * 7 + 3) % classes;
  return y;
}

}  // namespace

TEST_CASE("softmax_xent matches a double-precision reference", "[softmax_xent]") {
  for (int rows : {1, 3, 128}) {
    for (int classes : {1, 2, 10, 17}) {
      auto z = random_floats(static_cast<size_t>(rows) * classes, rows * 31 + classes, -4.0f, 4.0f);
      auto y = labels_for(rows, classes);
      Reference ref = reference_xent(z, y, rows, classes);
      std::vector<float> d(z.size());
      int64_t correct = -1;
      float loss = cpu::softmax_xent(z.data(), y.data(), rows, classes, d.data(), &correct);
      INFO("rows=" << rows << " classes=" << classes);
      // f32 exp/log over at most 17 terms: a few ulps relative; 1e-5 leaves room, and a wrong
      // formula (missing max shift, wrong mean) is off by far more.
      REQUIRE(loss == Approx(ref.loss).epsilon(1e-5).margin(1e-6));
      REQUIRE(first_difference(d.data(), ref.grad.data(), d.size(), 1e-5, 1e-7) == "");
      REQUIRE(correct == ref.correct);
    }
  }
}

TEST_CASE("softmax_xent counts rows whose arg-max is the label", "[softmax_xent]") {
  // Row 0 predicts 2 (label 2: right), row 1 predicts 0 (label 1: wrong), row 2 predicts 1 (right).
  std::vector<float> z = {0, 1, 5, 9, 2, 3, -1, 4, 0};
  std::vector<int32_t> y = {2, 1, 1};
  int64_t correct = -1;
  cpu::softmax_xent(z.data(), y.data(), 3, 3, nullptr, &correct);
  REQUIRE(correct == 2);
}

TEST_CASE("softmax_xent of uniform logits is log(classes)", "[softmax_xent]") {
  std::vector<float> z(4 * 10, 0.25f);
  std::vector<int32_t> y = {0, 3, 9, 5};
  REQUIRE(cpu::softmax_xent(z.data(), y.data(), 4, 10, nullptr, nullptr) == Approx(std::log(10.0)).epsilon(1e-6));
}

TEST_CASE("softmax_xent stays finite and exact for huge logits", "[softmax_xent]") {
  // exp(1e4) overflows f32 (and double); the max-shifted form must not. Row 0: the label holds the
  // huge logit (loss ~ 0); row 1: another class does (loss ~ 2e4); row 2: all equal and huge.
  std::vector<float> z = {1e4f, 0.0f, -1e4f, 1e4f, -1e4f, 0.0f, 1e4f, 1e4f, 1e4f};
  std::vector<int32_t> y = {0, 1, 2};
  std::vector<float> d(z.size());
  float loss = cpu::softmax_xent(z.data(), y.data(), 3, 3, d.data(), nullptr);
  REQUIRE(std::isfinite(loss));
  REQUIRE(loss == Approx((0.0 + 2e4 + std::log(3.0)) / 3).epsilon(1e-6));
  REQUIRE(cpu::all_finite(d.data(), d.size()));
  Reference ref = reference_xent(z, y, 3, 3);
  REQUIRE(first_difference(d.data(), ref.grad.data(), d.size(), 1e-6, 1e-7) == "");
}

TEST_CASE("softmax_xent gradient rows sum to zero", "[softmax_xent]") {
  // sum_j (p_j - onehot_j) = 0: a property independent of the reference above.
  auto z = random_floats(8 * 10, 5, -3.0f, 3.0f);
  auto y = labels_for(8, 10);
  std::vector<float> d(z.size());
  cpu::softmax_xent(z.data(), y.data(), 8, 10, d.data(), nullptr);
  for (int r = 0; r < 8; ++r) {
    double s = 0;
    for (int j = 0; j < 10; ++j) s += d[r * 10 + j];
    REQUIRE(std::fabs(s) < 1e-7);
  }
}

TEST_CASE("softmax_xent with a label out of range returns NaN", "[softmax_xent]") {
  auto z = random_floats(3 * 4, 9);
  for (int32_t bad : {-1, 4, 1000}) {
    std::vector<int32_t> y = {0, bad, 2};
    std::vector<float> d(z.size());
    int64_t correct = -1;
    REQUIRE(std::isnan(cpu::softmax_xent(z.data(), y.data(), 3, 4, d.data(), &correct)));
    // The bad row never counts as correct; the count stays within the good rows.
    REQUIRE(correct >= 0);
    REQUIRE(correct <= 2);
  }
}

TEST_CASE("softmax_xent may write the gradient over the logits", "[softmax_xent]") {
  auto z = random_floats(5 * 7, 21, -2.0f, 2.0f);
  auto y = labels_for(5, 7);
  std::vector<float> separate(z.size());
  int64_t c1 = 0, c2 = 0;
  float l1 = cpu::softmax_xent(z.data(), y.data(), 5, 7, separate.data(), &c1);
  std::vector<float> inplace = z;
  float l2 = cpu::softmax_xent(inplace.data(), y.data(), 5, 7, inplace.data(), &c2);
  REQUIRE(l1 == l2);
  REQUIRE(c1 == c2);
  REQUIRE(first_difference(inplace, separate, 0, 0) == "");
}

TEST_CASE("softmax_xent with zero rows returns 0 and writes nothing", "[softmax_xent]") {
  int64_t correct = 7;
  REQUIRE(cpu::softmax_xent(nullptr, nullptr, 0, 10, nullptr, &correct) == 0.0f);
  REQUIRE(correct == 0);
  std::vector<float> d(3, 1.0f);
  std::vector<int32_t> y = {0};
  REQUIRE(cpu::softmax_xent(d.data(), y.data(), 1, 0, d.data(), nullptr) == 0.0f);
  REQUIRE(d == std::vector<float>(3, 1.0f));
}
