// adamw's decay on matrices only (--weight-decay-params matrices: the blocks of rank >= 2) and
// gradient clipping by the global norm (--clip-grad-norm, trainers/optim/grad_clip.h).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/ops.h"
#include "tests/support/numeric_test_util.h"
#include "trainers/api/trainer.h"
#include "trainers/optim/grad_clip.h"
#include "trainers/optim/optimizer.h"

using namespace troupe;
using troupe::testing::random_floats;

TEST_CASE("matrix_ranges are the blocks of rank 2 or more, adjacent ones merged", "[optimizer][weight_decay]") {
  ParameterSpace space;
  space.declare("wte", {5, 4}, Init::zeros());   // [0, 20)
  space.declare("wpe", {3, 4}, Init::zeros());   // [20, 32): merged with wte
  space.declare("ln.g", {4}, Init::zeros());     // [32, 36)
  space.declare("w", {4, 2}, Init::zeros());     // [36, 44)
  space.declare("b", {2}, Init::zeros());        // [44, 46)
  const std::vector<std::pair<size_t, size_t>> want{{0, 32}, {36, 44}};
  CHECK(matrix_ranges(space) == want);
}

TEST_CASE("adamw with matrices-only decay decays the ranges and leaves the rest to plain adam", "[optimizer][weight_decay]") {
  const size_t n = 46;
  OptimizerOptions o;
  o.name = "adamw";
  o.lr = 0.01f;
  o.weight_decay = 0.5f;
  o.decay_matrices_only = true;
  SECTION("refused where the runtime cannot say which blocks are matrices") {
    auto opt = make_optimizer(o, n);
    REQUIRE_FALSE(opt.ok());
    CHECK(opt.status().message().find("--weight-decay-params matrices") != std::string::npos);
  }
  o.decay_ranges = {{0, 32}, {36, 44}};
  o.decay_ranges_set = true;
  auto opt = make_optimizer(o, n);
  REQUIRE(opt.ok());
  CHECK((*opt)->describe().find("on matrices") != std::string::npos);
  std::vector<float> p = random_floats(n, 1), g = random_floats(n, 2);
  std::vector<float> want = p, m(n, 0.0f), v(n, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    (*opt)->step(p.data(), g.data());
    for (size_t i = 0; i < n; ++i) {  // the reference: one element at a time, decay by membership
      kernels::cpu::AdamParams hp;
      hp.lr = o.lr;
      hp.decoupled = true;
      hp.weight_decay = (i < 32 || (i >= 36 && i < 44)) ? o.weight_decay : 0.0f;
      kernels::cpu::adam_step(&want[i], &g[i], &m[i], &v[i], 1, step, hp);
    }
  }
  CHECK(p == want);
  // And it differs from decaying everything (the biases at 32..36 and 44..46 would shrink).
  OptimizerOptions all = o;
  all.decay_matrices_only = false;
  auto everything = make_optimizer(all, n);
  std::vector<float> q = random_floats(n, 1);
  for (int step = 1; step <= 3; ++step) (*everything)->step(q.data(), g.data());
  CHECK(q[33] != p[33]);
  CHECK(q[10] == p[10]);
}

TEST_CASE("clip_grad_norm scales a long gradient to the norm and leaves a short one alone", "[grad_clip]") {
  std::vector<float> g{3.0f, 4.0f, 0.0f, 12.0f};  // norm 13
  CHECK(clip_grad_norm(g.data(), g.size(), 26.0f) == Approx(13.0));
  CHECK(g == std::vector<float>{3.0f, 4.0f, 0.0f, 12.0f});
  CHECK(clip_grad_norm(g.data(), g.size(), 1.0f) == Approx(13.0));
  CHECK(g[0] == Approx(3.0 / 13));
  CHECK(g[3] == Approx(12.0 / 13));
  double norm = 0;
  for (float x : g) norm += double(x) * x;
  CHECK(std::sqrt(norm) == Approx(1.0).epsilon(1e-6));
  CHECK(clip_grad_norm(g.data(), g.size(), 0.0f) == Approx(1.0).epsilon(1e-6));  // 0: off, the norm reported
}

TEST_CASE("state blocks: state_ranges finds them, and clipping leaves their changes out of the norm and unscaled",
          "[grad_clip][state]") {
  ParameterSpace space;
  space.declare("w", {2}, Init::zeros());                        // [0, 2)
  space.declare_state("bn.running_mean", {1}, {0.0f});           // [2, 3)
  space.declare_state("bn.num_batches_tracked", {}, {0.0f});     // [3, 4): a scalar, shaped []
  space.declare("b", {1}, Init::zeros());                        // [4, 5)
  REQUIRE(space.status().ok());
  CHECK(space.has_state());
  CHECK(space.blocks()[2].shape.empty());
  CHECK(space.blocks()[2].param.numel == 1u);
  const FlatRanges state = state_ranges(space);
  CHECK(state == FlatRanges{{2, 4}});
  std::vector<float> g = {3.0f, 0.0f, 100.0f, 1.0f, 4.0f};
  const double norm = clip_grad_norm(g.data(), g.size(), 1.0f, state);
  CHECK(norm == Approx(5.0));
  CHECK(g[0] == Approx(0.6f));
  CHECK(g[4] == Approx(0.8f));
  CHECK(g[2] == 100.0f);  // the state's changes as they were
  CHECK(g[3] == 1.0f);
}
