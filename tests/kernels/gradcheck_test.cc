// Finite-difference gradient checks, one per layer: the dense layer (matmul + bias) for its weight,
// bias and input gradients, the ReLU, and softmax cross-entropy with respect to the logits. Each
// compares the backward pass built from the kernels (as MlpCpu wires it) with central differences
// of the forward pass. The whole MLP is checked the same way in tests/models/mlp_test.cc.
//
// Tolerances: the forward runs in f32, so a central difference with step eps carries a rounding
// error of about ulp(loss) / eps (~1e-5 here with eps = 1e-2 and losses of order 1..10) plus an
// O(eps^2) truncation error (zero for the linear parts). We accept |numeric - analytic| <=
// 1e-3 + 1e-2 * |gradient|: far above that noise, and far below what a wrong transpose, a missing
// term or a wrong scale (errors of order the gradient itself) produce.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::central_difference;
using troupe::testing::gradients_agree;
using troupe::testing::random_floats;

namespace {

constexpr float kEps = 1e-2f;
constexpr double kRtol = 1e-2, kAtol = 1e-3;

// A smooth, nonlinear probe loss on a layer's output: L = sum(r * y) + 0.5 * sum(y^2), so that
// dL/dy = r + y. Computed in double from the f32 outputs.
double probe_loss(const std::vector<float>& y, const std::vector<float>& r) {
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) l += r[i] * static_cast<double>(y[i]) + 0.5 * y[i] * static_cast<double>(y[i]);
  return l;
}

std::vector<float> probe_grad(const std::vector<float>& y, const std::vector<float>& r) {
  std::vector<float> d(y.size());
  for (size_t i = 0; i < y.size(); ++i) d[i] = r[i] + y[i];
  return d;
}

// Checks every element of `param` (gradient `grad`) against central differences of `loss`;
// returns "" or the first disagreement.
std::string check_all(const char* what, std::vector<float>& param, const std::vector<float>& grad,
                      const std::function<double()>& loss) {
  for (size_t i = 0; i < param.size(); ++i) {
    const double numeric = central_difference(&param[i], kEps, loss);
    if (!gradients_agree(numeric, grad[i], kRtol, kAtol)) {
      return std::string(what) + "[" + std::to_string(i) + "]: analytic " + std::to_string(grad[i]) + ", numeric " +
             std::to_string(numeric);
    }
  }
  return {};
}

}  // namespace

TEST_CASE("dense layer gradients match finite differences", "[gradcheck]") {
  // y = x W + b with x [B x in], W [in x out]; backward as in MlpCpu: dW = x^T dy, db = sum_rows dy,
  // dx = dy W^T. Odd sizes so a swapped dimension cannot go unnoticed.
  const int B = 4, in = 6, out = 5;
  auto x = random_floats(static_cast<size_t>(B) * in, 1);
  auto w = random_floats(static_cast<size_t>(in) * out, 2);
  auto b = random_floats(out, 3);
  auto r = random_floats(static_cast<size_t>(B) * out, 4);
  std::vector<float> y(static_cast<size_t>(B) * out);
  auto forward = [&] {
    cpu::matmul(false, false, B, out, in, 1.0f, x.data(), w.data(), 0.0f, y.data());
    cpu::bias_act(y.data(), b.data(), B, out, false);
    return probe_loss(y, r);
  };
  forward();
  auto dy = probe_grad(y, r);
  std::vector<float> dw(w.size()), db(b.size()), dx(x.size());
  cpu::matmul(true, false, in, out, B, 1.0f, x.data(), dy.data(), 0.0f, dw.data());
  cpu::bias_grad(dy.data(), B, out, db.data());
  cpu::matmul(false, true, B, in, out, 1.0f, dy.data(), w.data(), 0.0f, dx.data());

  REQUIRE(check_all("dW", w, dw, forward) == "");
  REQUIRE(check_all("db", b, db, forward) == "");
  REQUIRE(check_all("dx", x, dx, forward) == "");
}

TEST_CASE("ReLU layer gradients match finite differences", "[gradcheck]") {
  // y = relu(x + b). ReLU has a kink at 0 where the derivative jumps, so a central difference
  // across it is meaningless: pre-activations are pushed at least 5 * eps away from 0, then no
  // +-eps step (on x or on b) can cross the kink and both sides share one linear piece.
  const int B = 5, cols = 7;
  auto x = random_floats(static_cast<size_t>(B) * cols, 5);
  auto b = random_floats(cols, 6, -0.2f, 0.2f);
  for (int r = 0; r < B; ++r) {
    for (int c = 0; c < cols; ++c) {
      float& v = x[r * cols + c];
      const float pre = v + b[c];
      if (std::fabs(pre) < 5 * kEps) v += pre >= 0 ? 5 * kEps : -5 * kEps;
    }
  }
  auto probe = random_floats(x.size(), 7);
  std::vector<float> y(x.size());
  auto forward = [&] {
    y = x;
    cpu::bias_act(y.data(), b.data(), B, cols, true);
    return probe_loss(y, probe);
  };
  forward();
  int active = 0;
  for (float v : y) active += v > 0;
  REQUIRE(active > 0);                          // both pieces of the ReLU are exercised
  REQUIRE(active < static_cast<int>(y.size()));
  auto dpre = probe_grad(y, probe);
  cpu::relu_backward(dpre.data(), y.data(), dpre.size());  // dL/d(x + b)
  std::vector<float> db(cols);
  cpu::bias_grad(dpre.data(), B, cols, db.data());

  REQUIRE(check_all("dx", x, dpre, forward) == "");
  REQUIRE(check_all("db", b, db, forward) == "");
}

TEST_CASE("softmax cross-entropy gradient matches finite differences", "[gradcheck]") {
  // Mean loss over rows; the loss is smooth everywhere, so no point needs avoiding. The arg-max
  // count is not differentiable and is not involved.
  const int rows = 4, classes = 6;
  auto z = random_floats(static_cast<size_t>(rows) * classes, 8, -3.0f, 3.0f);
  std::vector<int32_t> labels = {0, 5, 2, 2};
  auto loss = [&] { return static_cast<double>(cpu::softmax_xent(z.data(), labels.data(), rows, classes, nullptr, nullptr)); };
  std::vector<float> dz(z.size());
  cpu::softmax_xent(z.data(), labels.data(), rows, classes, dz.data(), nullptr);
  // The loss is a mean of rows terms, so gradients are ~1/rows; the absolute floor is lowered to
  // match (rounding noise is ~1.2e-7 * loss / eps ~ 3e-5).
  for (size_t i = 0; i < z.size(); ++i) {
    const double numeric = central_difference(&z[i], kEps, loss);
    INFO("dlogits[" << i << "]: analytic " << dz[i] << ", numeric " << numeric);
    REQUIRE(gradients_agree(numeric, dz[i], kRtol, 2e-4));
  }
}
