// sgd_step and adam_step over several steps against textbook references in double precision
// (the PyTorch formulations: SGD with dampening 0; Adam with L2 on the gradient; AdamW decoupled).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

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

namespace {

// `steps` updates of n parameters from the same start and gradients as `step_all` applies them to
// buffers `stride` floats apart (stride < 16: closer than a 64-byte vector, as malloc places small
// vectors). Returns params then each state vector.
template <typename Step>
std::vector<float> run_steps(size_t n, size_t stride, int states, int steps, Step step_all) {
  std::vector<float> storage((2 + states) * stride + n);
  float* p = storage.data();
  float* g = p + stride;
  float* s1 = p + 2 * stride;
  float* s2 = states > 1 ? p + 3 * stride : nullptr;
  const auto start = random_floats(n, 5);
  std::memcpy(p, start.data(), n * sizeof(float));
  std::fill(s1, s1 + n, 0.0f);
  if (s2) std::fill(s2, s2 + n, 0.0f);
  for (int s = 1; s <= steps; ++s) {
    const auto grads = random_floats(n, 2000 + s, -0.05f, 0.05f);
    std::memcpy(g, grads.data(), n * sizeof(float));
    step_all(p, g, s1, s2, n, s);
  }
  std::vector<float> out(p, p + n);
  out.insert(out.end(), s1, s1 + n);
  if (s2) out.insert(out.end(), s2, s2 + n);
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

// Every replica of a sync job applies the same all-reduced gradients with its own buffers, so the
// update must not depend on where they lie: the vectorised loops pick a path by the buffers'
// distance (overlap checks) and by what is left of n, and every path must round alike (no FMA
// in one and a separate multiply and add in another).
TEST_CASE("sgd_step and adam_step give the same bits wherever their buffers lie", "[optim]") {
  cpu::AdamParams adam;
  adam.lr = 0.002f;
  cpu::SgdParams sgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 0.01f;
  auto adam_all = [&](float* p, const float* g, float* m, float* v, size_t n, int s) {
    cpu::adam_step(p, g, m, v, n, s, adam);
  };
  auto adam_one_by_one = [&](float* p, const float* g, float* m, float* v, size_t n, int s) {
    for (size_t i = 0; i < n; ++i) cpu::adam_step(p + i, g + i, m + i, v + i, 1, s, adam);
  };
  auto sgd_all = [&](float* p, const float* g, float* v, float*, size_t n, int) { cpu::sgd_step(p, g, v, n, sgd); };
  auto sgd_one_by_one = [&](float* p, const float* g, float* v, float*, size_t n, int) {
    for (size_t i = 0; i < n; ++i) cpu::sgd_step(p + i, g + i, v + i, 1, sgd);
  };
  constexpr int kMany = 40;  // enough steps for a rounding difference to show
  for (size_t n : {size_t{10}, size_t{13}, size_t{40}}) {
    CAPTURE(n);
    // The reference: one element at a time (the scalar path), buffers far apart.
    const auto adam_ref = run_steps(n, 1024, 2, kMany, adam_one_by_one);
    const auto sgd_ref = run_steps(n, 1024, 1, kMany, sgd_one_by_one);
    for (size_t stride : {size_t{1024}, n + 2, n + 3}) {
      CAPTURE(stride);
      CHECK(same_bits(run_steps(n, stride, 2, kMany, adam_all), adam_ref));
      CHECK(same_bits(run_steps(n, stride, 1, kMany, sgd_all), sgd_ref));
    }
  }
}

TEST_CASE("optimizer steps with n = 0 do nothing", "[optim]") {
  cpu::SgdParams sgd;
  sgd.momentum = 0.9f;
  cpu::sgd_step(nullptr, nullptr, nullptr, 0, sgd);
  cpu::adam_step(nullptr, nullptr, nullptr, nullptr, 0, 1, cpu::AdamParams{});
  SUCCEED("no access through null pointers");
}
