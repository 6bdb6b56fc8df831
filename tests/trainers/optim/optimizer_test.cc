// make_optimizer: the names it knows, the values it refuses, and what its optimizers' steps do.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "trainers/optim/optimizer.h"

using namespace troupe;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

OptimizerOptions options(const char* name, float lr) {
  OptimizerOptions o;
  o.name = name;
  o.lr = lr;
  return o;
}

}  // namespace

TEST_CASE("make_optimizer builds sgd, adam and adamw and describes them", "[optimizer]") {
  for (const char* name : {"sgd", "adam", "adamw"}) {
    auto opt = make_optimizer(options(name, 0.25f), 4);
    REQUIRE(opt.ok());
    const std::string d = (*opt)->describe();
    INFO(d);
    CHECK(d.rfind(std::string(name) + "(", 0) == 0);
    CHECK(d.find("lr=0.25") != std::string::npos);
    CHECK((*opt)->steps() == 0);
  }
}

TEST_CASE("make_optimizer refuses unknown names and out-of-range values", "[optimizer]") {
  struct Case {
    const char* what;
    OptimizerOptions o;
  };
  std::vector<Case> cases;
  for (const char* bad : {"", "SGD", "lion", "adam "}) cases.push_back({bad, options(bad, 0.1f)});
  for (const char* name : {"sgd", "adam", "adamw"}) {
    for (float lr : {0.0f, -0.1f, kNaN, kInf}) cases.push_back({"lr", options(name, lr)});
    for (float wd : {-0.5f, kNaN, kInf}) {
      cases.push_back({"weight decay", options(name, 0.1f)});
      cases.back().o.weight_decay = wd;
    }
  }
  for (float mu : {-0.1f, 1.0f, 2.0f, kNaN}) {
    cases.push_back({"momentum", options("sgd", 0.1f)});
    cases.back().o.momentum = mu;
  }
  for (const char* name : {"adam", "adamw"}) {
    for (float beta : {-0.1f, 1.0f, kNaN}) {
      cases.push_back({"beta1", options(name, 0.1f)});
      cases.back().o.beta1 = beta;
      cases.push_back({"beta2", options(name, 0.1f)});
      cases.back().o.beta2 = beta;
    }
    // eps = 0 divides 0 by 0 for every parameter whose gradient is still zero.
    for (float eps : {0.0f, -1e-8f, kNaN, kInf}) {
      cases.push_back({"eps", options(name, 0.1f)});
      cases.back().o.eps = eps;
    }
  }
  for (const Case& c : cases) {
    auto opt = make_optimizer(c.o, 4);
    INFO(c.what << " (optimizer '" << c.o.name << "')");
    REQUIRE_FALSE(opt.ok());
    CHECK(opt.status().code() == Code::invalid_argument);
    CHECK_FALSE(opt.status().message().empty());
  }
  // Momentum only concerns sgd: an adam job with the (unused) sgd momentum of 1 is fine.
  auto adam = options("adam", 0.1f);
  adam.momentum = 1.0f;
  CHECK(make_optimizer(adam, 4).ok());
}

TEST_CASE("plain sgd moves by lr * gradient and set_lr applies from the next step", "[optimizer]") {
  auto o = options("sgd", 0.5f);
  o.momentum = 0.0f;
  auto opt = make_optimizer(o, 3);
  REQUIRE(opt.ok());
  std::vector<float> p = {1.0f, 2.0f, 3.0f};
  const std::vector<float> g = {1.0f, -2.0f, 0.5f};
  (*opt)->step(p.data(), g.data());
  CHECK(p == std::vector<float>{0.5f, 3.0f, 2.75f});
  (*opt)->set_lr(0.25f);
  (*opt)->step(p.data(), g.data());
  CHECK(p == std::vector<float>{0.25f, 3.5f, 2.625f});
  CHECK((*opt)->steps() == 2);
}

TEST_CASE("sgd with momentum keeps a velocity across steps", "[optimizer]") {
  // v1 = g, v2 = mu g + g: with a constant gradient of 1 and lr 1 the parameter moves by 1, then
  // by 1 + mu. Exact in binary for mu = 0.5.
  auto o = options("sgd", 1.0f);
  o.momentum = 0.5f;
  auto opt = make_optimizer(o, 1);
  REQUIRE(opt.ok());
  float p = 0.0f;
  const float g = 1.0f;
  (*opt)->step(&p, &g);
  CHECK(p == -1.0f);
  (*opt)->step(&p, &g);
  CHECK(p == -2.5f);
  (*opt)->step(&p, &g);
  CHECK(p == -4.25f);  // v3 = 0.5 * 1.5 + 1 = 1.75
}

TEST_CASE("adam counts its own steps for the bias correction", "[optimizer]") {
  // With a constant gradient the bias-corrected Adam update is lr * g / |g| at every step (eps
  // aside): the moments' corrections cancel exactly only when the step count matches.
  auto opt = make_optimizer(options("adam", 0.1f), 2);
  REQUIRE(opt.ok());
  std::vector<float> p = {0.0f, 0.0f};
  const std::vector<float> g = {3.0f, -0.01f};
  for (int s = 1; s <= 5; ++s) {
    (*opt)->step(p.data(), g.data());
    CHECK((*opt)->steps() == s);
    CHECK(p[0] == Approx(-0.1 * s).epsilon(1e-5));
    CHECK(p[1] == Approx(0.1 * s).epsilon(1e-4));  // eps = 1e-8 against |g| = 0.01: 1e-6 relative
  }
}

TEST_CASE("adamw decays decoupled from the gradient, adam adds the decay to it", "[optimizer]") {
  // Zero gradient: AdamW shrinks p by (1 - lr * wd) per step; Adam's L2 term becomes the whole
  // gradient, whose normalised step is lr (so p moves by lr towards 0).
  auto o = options("adamw", 0.1f);
  o.weight_decay = 0.5f;
  auto adamw = make_optimizer(o, 1);
  o.name = "adam";
  auto adam = make_optimizer(o, 1);
  REQUIRE(adamw.ok());
  REQUIRE(adam.ok());
  float pw = 2.0f, pa = 2.0f;
  const float g = 0.0f;
  (*adamw)->step(&pw, &g);
  (*adam)->step(&pa, &g);
  CHECK(pw == Approx(2.0 * 0.95).epsilon(1e-6));
  CHECK(pa == Approx(2.0 - 0.1).epsilon(1e-6));
}

TEST_CASE("state ranges take their change and nothing of the rule: no rate, momentum or decay (ABI 9)",
          "[optimizer][state]") {
  // Floats 1-2 are state (a running mean and a count); 0 and 3 parameters. Each optimizer with
  // momentum or moments and weight decay, two steps: the state moves by exactly its changes.
  for (const char* name : {"sgd", "adam", "adamw"}) {
    auto o = options(name, 0.5f);
    o.momentum = 0.9f;
    o.weight_decay = 0.1f;
    o.state_ranges = {{1, 3}};
    auto opt = make_optimizer(o, 4);
    REQUIRE(opt.ok());
    std::vector<float> p = {1.0f, 0.25f, 7.0f, 1.0f};
    const std::vector<float> g = {0.5f, 0.125f, 1.0f, 0.5f};
    (*opt)->step(p.data(), g.data());
    (*opt)->step(p.data(), g.data());
    INFO(name);
    CHECK(p[1] == 0.5f);
    CHECK(p[2] == 9.0f);
    CHECK(p[0] != 1.0f);
    CHECK(p[0] == p[3]);  // the rule ran on the parameters alike
  }
  auto o = options("sgd", 0.5f);
  o.state_ranges = {{2, 5}};
  auto bad = make_optimizer(o, 4);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.status().message(), Catch::Contains("state range [2, 5) is outside the 4 parameters"));
  CHECK(ranges_within({{1, 3}, {6, 9}}, 2, 8) == std::vector<std::pair<size_t, size_t>>{{0, 1}, {4, 6}});
}
