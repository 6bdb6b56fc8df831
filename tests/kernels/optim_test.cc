// sgd_step and adam_step over several steps against textbook references in double precision
// (the PyTorch formulations: SGD with dampening 0; Adam with L2 on the gradient; AdamW decoupled).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"

namespace cpu = troupe::kernels::cpu;
using troupe::testing::first_difference;
using troupe::testing::random_floats;

namespace {

constexpr size_t kN = 67;  // odd: vector bodies and scalar tails both run
constexpr int kSteps = 6;

// Gradient of step s: different every step so momentum and moments matter.
std::vector<float> grads_at(int s) { return random_floats(kN, 1000 + s); }

void reference_sgd(std::vector<double>& p, std::vector<double>& v, const std::vector<float>& g,
                   const cpu::SgdParams& hp) {
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] + static_cast<double>(hp.weight_decay) * p[i];
    if (hp.momentum == 0.0f) {
      p[i] -= hp.lr * gi;
      continue;
    }
    v[i] = hp.momentum * v[i] + gi;
    p[i] -= hp.lr * (hp.nesterov ? gi + hp.momentum * v[i] : v[i]);
  }
}

void reference_adam(std::vector<double>& p, std::vector<double>& m, std::vector<double>& v,
                    const std::vector<float>& g, int64_t t, const cpu::AdamParams& hp) {
  const double b1 = hp.beta1, b2 = hp.beta2, lr = hp.lr, wd = hp.weight_decay;
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] + (hp.decoupled ? 0.0 : wd * p[i]);
    if (hp.decoupled) p[i] -= lr * wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    const double mhat = m[i] / (1 - std::pow(b1, t));
    const double vhat = v[i] / (1 - std::pow(b2, t));
    p[i] -= lr * mhat / (std::sqrt(vhat) + hp.eps);
  }
}

std::vector<double> to_double(const std::vector<float>& x) { return {x.begin(), x.end()}; }

}  // namespace

TEST_CASE("sgd_step matches the reference over several steps", "[optim]") {
  struct Case {
    const char* name;
    float momentum, weight_decay;
    bool nesterov;
  };
  const Case cases[] = {{"plain", 0.0f, 0.0f, false},       {"plain + weight decay", 0.0f, 0.01f, false},
                        {"momentum", 0.9f, 0.0f, false},     {"momentum + weight decay", 0.9f, 0.05f, false},
                        {"nesterov", 0.9f, 0.0f, true},      {"nesterov + weight decay", 0.8f, 0.05f, true}};
  for (const Case& c : cases) {
    cpu::SgdParams hp;
    hp.lr = 0.1f;
    hp.momentum = c.momentum;
    hp.weight_decay = c.weight_decay;
    hp.nesterov = c.nesterov;
    auto params = random_floats(kN, 1);
    std::vector<float> velocity(kN, 0.0f);
    auto ref_p = to_double(params);
    std::vector<double> ref_v(kN, 0.0);
    for (int s = 0; s < kSteps; ++s) {
      auto g = grads_at(s);
      // Plain SGD must not touch the velocity buffer: the contract allows null.
      cpu::sgd_step(params.data(), g.data(), c.momentum == 0.0f ? nullptr : velocity.data(), kN, hp);
      reference_sgd(ref_p, ref_v, g, hp);
    }
    INFO(c.name);
    // Each step is a handful of f32 operations on values of order 1: ~1e-7 absolute error per step,
    // amplified by at most 1 / (1 - momentum) = 10; 1e-5 leaves a margin and still catches a
    // wrong formula (off by lr * g ~ 1e-2).
    REQUIRE(first_difference(params.data(), ref_p.data(), kN, 1e-5, 1e-5) == "");
    if (c.momentum != 0.0f) REQUIRE(first_difference(velocity.data(), ref_v.data(), kN, 1e-5, 1e-5) == "");
  }
}

TEST_CASE("adam_step and AdamW match the textbook reference over several steps", "[optim]") {
  struct Case {
    const char* name;
    float weight_decay;
    bool decoupled;
  };
  const Case cases[] = {{"adam", 0.0f, false}, {"adam + L2", 0.1f, false}, {"adamw", 0.1f, true}};
  for (const Case& c : cases) {
    cpu::AdamParams hp;
    hp.lr = 0.01f;
    hp.weight_decay = c.weight_decay;
    hp.decoupled = c.decoupled;
    auto params = random_floats(kN, 2);
    std::vector<float> m(kN, 0.0f), v(kN, 0.0f);
    auto ref_p = to_double(params);
    std::vector<double> ref_m(kN, 0.0), ref_v(kN, 0.0);
    for (int s = 1; s <= kSteps; ++s) {
      auto g = grads_at(s);
      cpu::adam_step(params.data(), g.data(), m.data(), v.data(), kN, s, hp);
      reference_adam(ref_p, ref_m, ref_v, g, s, hp);
    }
    INFO(c.name);
    // The update is lr * (ratio of order 1); f32 rounding of m, v and the folded bias correction
    // is ~1e-6 relative per step, so 1e-5 absolute on params of order 1 (and relative on the
    // moments) is a bound, while a missing bias correction or misplaced decay is off by > 1e-3.
    REQUIRE(first_difference(params.data(), ref_p.data(), kN, 1e-5, 1e-5) == "");
    REQUIRE(first_difference(m.data(), ref_m.data(), kN, 1e-5, 1e-7) == "");
    REQUIRE(first_difference(v.data(), ref_v.data(), kN, 1e-5, 1e-9) == "");
  }
}

TEST_CASE("the first Adam step moves every parameter by lr against its gradient's sign", "[optim]") {
  // With bias correction, step 1 has mhat = g and vhat = g^2, so the update is lr * g / |g|
  // (eps aside): a check that does not depend on the reference above.
  cpu::AdamParams hp;
  hp.lr = 0.5f;
  std::vector<float> p(kN, 0.0f), m(kN, 0.0f), v(kN, 0.0f);
  auto g = grads_at(0);
  cpu::adam_step(p.data(), g.data(), m.data(), v.data(), kN, 1, hp);
  for (size_t i = 0; i < kN; ++i) REQUIRE(p[i] == Approx(g[i] > 0 ? -0.5 : 0.5).epsilon(1e-5));
}

TEST_CASE("AdamW decays parameters even where the gradient is zero", "[optim]") {
  // g = 0 keeps m = v = 0, so only the decoupled decay acts: p *= 1 - lr * wd each step. Adam with
  // L2 instead turns the decay into a gradient and normalises it (a step of about lr).
  cpu::AdamParams hp;
  hp.lr = 0.1f;
  hp.weight_decay = 0.5f;
  hp.decoupled = true;
  std::vector<float> p = {2.0f, -4.0f}, m(2, 0.0f), v(2, 0.0f), g(2, 0.0f);
  for (int s = 1; s <= 3; ++s) cpu::adam_step(p.data(), g.data(), m.data(), v.data(), 2, s, hp);
  REQUIRE(p[0] == Approx(2.0 * std::pow(0.95, 3)).epsilon(1e-6));
  REQUIRE(p[1] == Approx(-4.0 * std::pow(0.95, 3)).epsilon(1e-6));
}

TEST_CASE("optimizer steps with n = 0 do nothing", "[optim]") {
  cpu::SgdParams sgd;
  sgd.momentum = 0.9f;
  cpu::sgd_step(nullptr, nullptr, nullptr, 0, sgd);
  cpu::adam_step(nullptr, nullptr, nullptr, nullptr, 0, 1, cpu::AdamParams{});
  SUCCEED("no access through null pointers");
}
